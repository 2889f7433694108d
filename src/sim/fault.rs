//! Injected faults: the Nth read (or write) of a file matching a pattern fails once
//! with an errno, as a flaky device or bus, or a driver refusing a store, would make
//! it fail. Written `[write:]FILE@N=ERRNO[,...]`, FILE relative to the device
//! directory and ending with `*` for any file that begins so: `tile2/counter*@3=EIO`
//! fails the third read of any of tile2's counters, `write:tile2/event0@1=EINVAL` the
//! first write of tile2's event0.

use std::io;
use std::sync::Mutex;

/// One fault: which reads or writes, which one of them, and the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// A write fault (`write:`) rather than a read fault.
    pub write: bool,
    /// A file, or a prefix ending with `*`.
    pub pattern: String,
    /// The read or write (1 is the first) of a matching file that fails.
    pub nth: u64,
    /// The errno it fails with.
    pub errno: i32,
}

/// Errno names a fault may give.
const ERRNOS: &[(&str, i32)] = &[
    ("EIO", libc::EIO),
    ("EINVAL", libc::EINVAL),
    ("EBUSY", libc::EBUSY),
    ("EAGAIN", libc::EAGAIN),
    ("ENODEV", libc::ENODEV),
    ("ETIMEDOUT", libc::ETIMEDOUT),
];

/// Parses a list of faults (see the module's documentation).
pub fn parse_faults(text: &str) -> Result<Vec<Fault>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|one| {
            let bad = || {
                format!(
                    "'{one}' is not a fault: write [write:]FILE@N=ERRNO, as tile2/counter*@3=EIO"
                )
            };
            let (write, fault) = match one.strip_prefix("write:") {
                Some(rest) => (true, rest),
                None => (false, one),
            };
            let (at, errno) = fault.split_once('=').ok_or_else(bad)?;
            let (pattern, nth) = at.rsplit_once('@').ok_or_else(bad)?;
            let nth: u64 = nth.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?;
            let errno = ERRNOS
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(errno))
                .map(|(_, e)| *e)
                .or_else(|| errno.parse().ok().filter(|e| *e > 0))
                .ok_or_else(|| {
                    let names: Vec<&str> = ERRNOS.iter().map(|(n, _)| *n).collect();
                    format!(
                        "'{errno}' is not an errno: one of {} or a number",
                        names.join(", ")
                    )
                })?;
            if pattern.is_empty() {
                return Err(bad());
            }
            Ok(Fault {
                write,
                pattern: pattern.to_string(),
                nth,
                errno,
            })
        })
        .collect()
}

/// Faults and how many matching reads or writes each has seen.
#[derive(Debug, Default)]
pub(super) struct Faults {
    armed: Mutex<Vec<(Fault, u64)>>,
}

impl Faults {
    pub(super) fn new(faults: &[Fault]) -> Faults {
        Faults {
            armed: Mutex::new(faults.iter().map(|f| (f.clone(), 0)).collect()),
        }
    }

    /// Counts a read of `rel`; the error when this is a fault's turn.
    pub(super) fn on_read(&self, rel: &str) -> io::Result<()> {
        self.on_access(rel, false)
    }

    /// Counts a write of `rel`; the error when this is a fault's turn.
    pub(super) fn on_write(&self, rel: &str) -> io::Result<()> {
        self.on_access(rel, true)
    }

    fn on_access(&self, rel: &str, write: bool) -> io::Result<()> {
        let mut armed = self.armed.lock().unwrap_or_else(|p| p.into_inner());
        for (f, seen) in armed.iter_mut().filter(|(f, _)| f.write == write) {
            let matches = match f.pattern.strip_suffix('*') {
                Some(prefix) => rel.starts_with(prefix),
                None => rel == f.pattern,
            };
            if matches {
                *seen += 1;
                if *seen == f.nth {
                    return Err(io::Error::from_raw_os_error(f.errno));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_fire_once() {
        let f = parse_faults("tile2/counter*@2=EIO, llt0/enable@1=5").unwrap();
        assert_eq!(f[0].pattern, "tile2/counter*");
        assert_eq!((f[0].nth, f[0].errno), (2, libc::EIO));
        assert_eq!(f[1].errno, 5);
        let faults = Faults::new(&f);
        assert!(faults.on_read("tile2/counter0").is_ok());
        assert!(faults.on_read("tile1/counter0").is_ok());
        assert_eq!(
            faults.on_read("tile2/counter3").unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        assert!(faults.on_read("tile2/counter3").is_ok());
        let w = parse_faults("write:tile2/event0@2=EINVAL").unwrap();
        assert!(w[0].write);
        let faults = Faults::new(&w);
        assert!(faults.on_read("tile2/event0").is_ok());
        assert!(faults.on_read("tile2/event0").is_ok());
        assert!(faults.on_write("tile2/event0").is_ok());
        assert!(faults.on_write("tile2/event0").is_err());
        for bad in ["tile2", "tile2@0=EIO", "@1=EIO", "x@1=ENOPE"] {
            assert!(parse_faults(bad).is_err(), "{bad}");
        }
    }
}
