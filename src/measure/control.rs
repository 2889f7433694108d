//! perf's `--delay` and `--control`, as a [`Gate`]: counting starts after a delay
//! (or disabled, `-D -1`), and the words `enable`, `disable` and `ping` read from a
//! FIFO or an inherited descriptor switch it, each answered `ack` on the ack
//! descriptor when there is one — perf's protocol, so a workload instrumented for
//! `perf stat --control` works unchanged.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::measure::gate::{Gate, Switch};

/// The most read from the control descriptor at one look, so that a workload that
/// writes without end never keeps the measurement from its signals and ticks.
const MAX_READ: usize = 64 * 1024;

/// The most read at the run's end, when what the command wrote before it exited is
/// taken in (a pipe holds 64 KiB; more comes only from a writer still running).
const MAX_LAST: usize = 4 << 20;

/// The longest word kept; longer input is dropped up to its newline.
const MAX_WORD: usize = 64;

/// Where control words come from and acks go, as `--control` names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlSpec {
    /// `fifo:CTL[,ACK]`: named FIFOs.
    Fifo(PathBuf, Option<PathBuf>),
    /// `fd:CTL[,ACK]`: descriptors inherited from the caller.
    Fd(i32, Option<i32>),
}

fn bad(problem: String) -> Error {
    Error::BadOption { problem }
}

impl ControlSpec {
    /// Parses perf's forms: `fifo:CTL[,ACK]` or `fd:CTL[,ACK]`.
    pub fn parse(text: &str) -> Result<ControlSpec> {
        let form =
            "--control takes fifo:CTL-FIFO[,ACK-FIFO] or fd:CTL-FD[,ACK-FD], as perf stat does";
        if let Some(rest) = text.strip_prefix("fifo:") {
            let mut parts = rest.splitn(2, ',');
            let ctl = parts.next().filter(|p| !p.is_empty());
            let ack = parts.next();
            return match (ctl, ack) {
                (Some(c), None) => Ok(ControlSpec::Fifo(c.into(), None)),
                (Some(c), Some(a)) if !a.is_empty() => {
                    Ok(ControlSpec::Fifo(c.into(), Some(a.into())))
                }
                _ => Err(bad(format!("{form}, not '{text}'"))),
            };
        }
        if let Some(rest) = text.strip_prefix("fd:") {
            let fd = |s: &str| s.parse::<i32>().ok().filter(|&n| n >= 0);
            let mut parts = rest.splitn(2, ',');
            let ctl = parts.next().and_then(fd);
            return match (ctl, parts.next()) {
                (Some(c), None) => Ok(ControlSpec::Fd(c, None)),
                (Some(c), Some(a)) => match fd(a) {
                    Some(a) => Ok(ControlSpec::Fd(c, Some(a))),
                    None => Err(bad(format!("{form}: '{a}' is not a descriptor number"))),
                },
                _ => Err(bad(format!("{form}, not '{text}'"))),
            };
        }
        Err(bad(format!("{form}, not '{text}'")))
    }
}

/// `-D`: how counting starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    /// At once.
    None,
    /// After this long.
    For(Duration),
    /// Disabled, until a control word enables it (`-D -1`).
    UntilEnabled,
}

impl Delay {
    /// perf's `-D MSECS`: -1, 0 or more.
    pub fn from_msecs(ms: i64) -> Result<Delay> {
        match ms {
            -1 => Ok(Delay::UntilEnabled),
            0 => Ok(Delay::None),
            n if n > 0 => Ok(Delay::For(Duration::from_millis(n as u64))),
            n => Err(bad(format!(
                "-D/--delay takes milliseconds, or -1 to start disabled, not {n}"
            ))),
        }
    }
}

/// The gate of `-D` and `--control`.
pub struct Control {
    delay: Delay,
    delay_done: bool,
    ctl: Option<File>,
    ack: Option<File>,
    word: Vec<u8>,
    overlong: bool,
    /// Words read but not yet handed out.
    pending: Vec<Switch>,
    /// Words it does not know: how many (their text is never shown: a FIFO may
    /// carry what is not meant for bfperf's output).
    unknown: usize,
    /// Acks not written because nobody read the ack descriptor while it was full.
    dropped: usize,
}

/// Opens a FIFO named on the command line, refusing anything else, and checks what
/// was opened, not what a name pointed to when looked at: every directory on the
/// path no link, owned by the caller or root and, if others may write it, sticky
/// (as /tmp), so no other user can swap what a name leads to ([`walk`]); the path
/// opened with `O_PATH | O_NOFOLLOW` and its name read back, no link followed
/// anywhere; the last name itself,
/// never a link's target, a FIFO by `fstat` on that descriptor, owned by the caller
/// or root (so that root never reads or answers another user's FIFO); only then
/// opened for reading and writing through the descriptor (so that it never reads as
/// ended while no writer holds it, and an open never blocks), close-on-exec.
fn open_fifo(path: &Path, what: &str) -> Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let fail = |e: std::io::Error| {
        bad(format!(
            "--control: cannot open the {what} FIFO {}: {e}",
            path.display()
        ))
    };
    let refuse = |why: String| {
        bad(format!(
            "--control: the {what} FIFO {} {why}; nothing was opened",
            path.display()
        ))
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let name = walk(path, me).map_err(|w| match w {
        Walk::Io(e) => fail(e),
        Walk::Refused(why) => refuse(why),
    })?;
    let md = name.metadata().map_err(fail)?;
    let kind = md.file_type();
    if kind.is_symlink() {
        return Err(refuse(
            "is a symbolic link: name the FIFO itself (bfperf follows no link here)".into(),
        ));
    }
    if !kind.is_fifo() {
        return Err(refuse("is not a FIFO (make one with mkfifo)".into()));
    }
    if md.uid() != me && md.uid() != 0 {
        return Err(refuse(format!(
            "belongs to user {}, not to you (uid {me}) or root: make the FIFOs yourself",
            md.uid()
        )));
    }
    let again = Path::new("/proc/self/fd").join(name.as_raw_fd().to_string());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(&again)
        .map_err(fail)?;
    let same = file
        .metadata()
        .is_ok_and(|m| (m.dev(), m.ino()) == (md.dev(), md.ino()) && m.file_type().is_fifo());
    if !same {
        return Err(refuse("changed while bfperf opened it".into()));
    }
    Ok(file)
}

/// Why a walk to a FIFO stopped.
enum Walk {
    Io(std::io::Error),
    Refused(String),
}

/// Opens the last component of `path` with `O_PATH | O_NOFOLLOW`, after every
/// directory on the way (from `/`, the working directory for a relative path) was
/// found, by `lstat`, to be no link, the caller's (`me`) or root's, and, if others
/// may write it, sticky: no other user can then swap what a name leads to. The
/// name opened is then read back (`/proc/self/fd`): a path the kernel resolved
/// through a link anywhere is refused. Returns the descriptor.
fn walk(path: &Path, me: u32) -> std::result::Result<File, Walk> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let lexical =
        lexical_path(path).ok_or_else(|| Walk::Refused("does not end in a file name".into()))?;
    let mut walked = PathBuf::from("/");
    let dirs: Vec<Component> = lexical
        .parent()
        .map(|p| p.components().collect())
        .unwrap_or_default();
    for part in dirs {
        if let Component::Normal(name) = part {
            walked.push(name);
        }
        let md = std::fs::symlink_metadata(&walked).map_err(Walk::Io)?;
        let where_ = walked.display();
        if md.file_type().is_symlink() {
            return Err(Walk::Refused(format!(
                "is reached through the symbolic link {where_}: name the FIFO by a path without links (bfperf follows none here)"
            )));
        }
        if !md.is_dir() {
            return Err(Walk::Refused(format!(
                "is under {where_}, which is no directory"
            )));
        }
        if md.uid() != me && md.uid() != 0 {
            return Err(Walk::Refused(format!(
                "is in the directory {where_} of user {}, not yours (uid {me}) or root's: another user could change what its names lead to",
                md.uid()
            )));
        }
        if md.mode() & 0o022 != 0 && md.mode() & 0o1000 == 0 {
            return Err(Walk::Refused(format!(
                "is in the directory {where_}, which others may write and is not sticky: keep the FIFOs in a directory only you can change"
            )));
        }
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&lexical)
        .map_err(Walk::Io)?;
    // The kernel's name for what was opened is the path as written, or a link was
    // followed on the way (a directory changed since it was looked at).
    let opened =
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(Walk::Io)?;
    if opened != lexical {
        return Err(Walk::Refused(format!(
            "resolves to {}: it is reached through a symbolic link (bfperf follows none here)",
            opened.display()
        )));
    }
    Ok(file)
}

/// `path` made absolute (from the working directory) and normalized as written:
/// `.` dropped, `..` taking back the name before it. None when it does not end in
/// a file name.
fn lexical_path(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let full = match path.is_absolute() {
        true => path.to_path_buf(),
        false => std::env::current_dir().ok()?.join(path),
    };
    let mut out = PathBuf::from("/");
    for part in full.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir => {}
            Component::Prefix(_) => return None,
        }
    }
    matches!(path.components().next_back(), Some(Component::Normal(_))).then_some(out)
}

/// Takes an inherited descriptor, checked to be open (and readable or writable,
/// as its role needs); it stays open across exec, as the command uses it too.
fn take_fd(fd: i32, write: bool) -> Result<File> {
    // SAFETY: F_GETFL only asks the kernel about the descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(bad(format!("--control: descriptor {fd} is not open")));
    }
    let mode = flags & libc::O_ACCMODE;
    let ok = match write {
        true => mode == libc::O_WRONLY || mode == libc::O_RDWR,
        false => mode == libc::O_RDONLY || mode == libc::O_RDWR,
    };
    if !ok {
        let role = if write {
            "written (ack)"
        } else {
            "read (control)"
        };
        return Err(bad(format!("--control: descriptor {fd} cannot be {role}")));
    }
    // A copy of our own, closed on exec: the caller's stays open for the command.
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor or -1.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if copy < 0 {
        let e = std::io::Error::last_os_error();
        return Err(bad(format!("--control: cannot use descriptor {fd}: {e}")));
    }
    // SAFETY: `copy` is a descriptor we now own.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(copy) }))
}

impl Control {
    /// Opens what `spec` names (checked before anything is written) with `delay`.
    pub fn open(delay: Delay, spec: Option<&ControlSpec>) -> Result<Control> {
        let (ctl, ack) = match spec {
            None => (None, None),
            Some(ControlSpec::Fifo(c, a)) => (
                Some(open_fifo(c, "control")?),
                a.as_deref().map(|a| open_fifo(a, "ack")).transpose()?,
            ),
            Some(ControlSpec::Fd(c, a)) => (
                Some(take_fd(*c, false)?),
                a.map(|a| take_fd(a, true)).transpose()?,
            ),
        };
        Ok(Control {
            delay,
            delay_done: false,
            ctl,
            ack,
            word: Vec::new(),
            overlong: false,
            pending: Vec::new(),
            unknown: 0,
            dropped: 0,
        })
    }

    /// Reads what has come, without waiting, into `pending`: a read only when poll
    /// says one will not block, so that an inherited descriptor's flags, which the
    /// command shares, are left as they are.
    fn read_words(&mut self, most: usize) {
        let mut buf = [0u8; 4096];
        let mut read = 0;
        while read < most {
            let Some(ctl) = self.ctl.as_mut() else {
                return;
            };
            if !crate::measure::poll_readable(ctl.as_fd(), Duration::ZERO) {
                return;
            }
            match ctl.read(&mut buf) {
                Ok(0) => {
                    // Every writer of an fd: pipe has gone: nothing more will come.
                    self.ctl = None;
                    break;
                }
                Ok(n) => {
                    read += n;
                    for &b in &buf[..n] {
                        self.byte(b);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }

    fn byte(&mut self, b: u8) {
        if b == b'\n' || b == 0 {
            let word = String::from_utf8_lossy(&self.word).trim().to_string();
            if !self.overlong && !word.is_empty() {
                match word.as_str() {
                    "enable" => self.pending.push(Switch::Enable),
                    "disable" => self.pending.push(Switch::Disable),
                    "ping" => self.pending.push(Switch::Ping),
                    _ => self.unknown += 1,
                }
            }
            self.word.clear();
            self.overlong = false;
        } else if self.word.len() < MAX_WORD {
            self.word.push(b);
        } else {
            self.overlong = true;
        }
    }
}

impl Gate for Control {
    fn starts_enabled(&self) -> bool {
        self.delay == Delay::None
    }

    fn due(&mut self, elapsed: Duration) -> Vec<Switch> {
        let mut out = Vec::new();
        if let (Delay::For(d), false) = (self.delay, self.delay_done) {
            if elapsed >= d {
                self.delay_done = true;
                out.push(Switch::Enable);
            }
        }
        self.read_words(MAX_READ);
        out.append(&mut self.pending);
        out
    }

    fn last(&mut self, elapsed: Duration) -> Vec<Switch> {
        let mut out = self.due(elapsed);
        self.read_words(MAX_LAST);
        out.append(&mut self.pending);
        out
    }

    fn next_at(&self) -> Option<Duration> {
        match (self.delay, self.delay_done) {
            (Delay::For(d), false) => Some(d),
            _ => None,
        }
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.ctl.as_ref().map(|c| c.as_fd())
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.unknown > 0 {
            let what = match self.unknown {
                1 => "1 line was no word bfperf knows".to_string(),
                n => format!("{n} lines were no word bfperf knows"),
            };
            notes.push(format!(
                "--control: {what} (enable, disable, ping); ignored, and not shown"
            ));
        }
        if self.dropped > 0 {
            notes.push(format!(
                "--control: {} ack(s) were dropped: nobody read the ack descriptor while it was full (perf's protocol allows it)",
                self.dropped
            ));
        }
        notes
    }

    fn done(&mut self, _switch: Switch) {
        let Some(ack) = self.ack.as_mut() else {
            return;
        };
        // perf's answer, written only when it cannot block: an ack pipe nobody reads
        // never holds the measurement (nor its signals) up. A reader that went away
        // costs nothing.
        match crate::measure::poll_writable(ack.as_fd()) {
            Some(true) => {
                let _ = ack.write(b"ack\n");
            }
            Some(false) => self.dropped += 1,
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfs_forms_parse_and_others_are_refused() {
        assert_eq!(
            ControlSpec::parse("fifo:ctl,ack").unwrap(),
            ControlSpec::Fifo("ctl".into(), Some("ack".into()))
        );
        assert_eq!(
            ControlSpec::parse("fd:3").unwrap(),
            ControlSpec::Fd(3, None)
        );
        assert_eq!(
            ControlSpec::parse("fd:3,4").unwrap(),
            ControlSpec::Fd(3, Some(4))
        );
        for bad in ["ctl", "fifo:", "fd:x", "fd:3,", "fifo:a,", "fd:-1"] {
            assert!(ControlSpec::parse(bad).is_err(), "{bad}");
        }
        assert!(Delay::from_msecs(-2).is_err());
        assert_eq!(Delay::from_msecs(-1).unwrap(), Delay::UntilEnabled);
    }

    #[test]
    fn words_split_on_newlines_and_nul_and_a_delay_enables_once() {
        let mut c = Control::open(Delay::For(Duration::from_millis(500)), None).unwrap();
        assert!(!c.starts_enabled());
        for b in b"enable\n\0disable\0ping\nbogus\n" {
            c.byte(*b);
        }
        assert_eq!(
            c.due(Duration::from_millis(100)),
            [Switch::Enable, Switch::Disable, Switch::Ping]
        );
        assert_eq!(c.due(Duration::from_millis(600)), [Switch::Enable]);
        assert!(c.due(Duration::from_millis(700)).is_empty());
    }
}
