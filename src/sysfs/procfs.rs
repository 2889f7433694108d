//! What the kernel says of this process and machine outside sysfs: the page size
//! and `/proc/self` (the exporter's `process_*` figures).

use super::*;

/// The running kernel's page size (`sysconf(_SC_PAGESIZE)`): 4 KiB on x86_64; 4, 16
/// or 64 KiB on arm64, as the kernel was built.
pub(crate) fn kernel_page_size() -> usize {
    // SAFETY: sysconf reads a constant of the process; it has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n)
        .ok()
        .filter(|n| n.is_power_of_two())
        .unwrap_or(MIN_PAGE_SIZE)
}

/// A page size as people write it: `4k`, `16K`, `64KiB`, or bytes (`65536`); a power of
/// two from 4 KiB to 256 KiB.
pub(crate) fn parse_page_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let (digits, scale) = match lower
        .strip_suffix("kib")
        .or_else(|| lower.strip_suffix('k'))
    {
        Some(d) => (d, 1024),
        None => (lower.as_str(), 1),
    };
    digits
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|n| n.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(n))
        .ok_or_else(|| {
            format!("'{text}' is not a page size: give 4k, 16k or 64k (a power of two from 4 KiB to 256 KiB)")
        })
}

/// This process's own figures, as Prometheus' client libraries export them
/// (`process_*`): from `/proc/self` and `/proc/stat`, each None where it cannot be
/// read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessFigures {
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident memory, bytes.
    pub resident_bytes: Option<f64>,
    /// Virtual memory, bytes.
    pub virtual_bytes: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<f64>,
    /// The soft limit of open file descriptors.
    pub max_fds: Option<f64>,
    /// When it started, seconds since the epoch.
    pub start_time_seconds: Option<f64>,
}

/// How many descriptors the process has open: the size Linux (6.2 on) gives
/// `/proc/self/fd`, which costs one `statx`; on older kernels its entries counted,
/// less the one listing them (listing the exporter's few hundred files creates a
/// dentry for each, every scrape).
fn open_fds() -> Option<f64> {
    match fs::metadata("/proc/self/fd").ok()?.len() {
        0 => fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count().saturating_sub(1) as f64),
        n => Some(n as f64),
    }
}

/// Reads [`ProcessFigures`] now.
pub fn process_figures() -> ProcessFigures {
    // SAFETY: sysconf and getrlimit only ask the kernel; rl is ours.
    let (tick, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let (tick, page) = (tick.max(1) as f64, page.max(1) as f64);
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as above.
    let max_fds = (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0)
        .then_some(rl.rlim_cur as f64);
    let read = |p: &str| fs::read_to_string(p).ok();
    // /proc/self/stat: fields after the command's closing parenthesis, the state
    // first; utime, stime are fields 14 and 15 of the whole line, starttime 22.
    let stat = read("/proc/self/stat");
    let after: Vec<&str> = stat
        .as_deref()
        .and_then(|s| s.rsplit_once(')'))
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |n: usize| after.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let statm = read("/proc/self/statm").unwrap_or_default();
    let pages: Vec<f64> = statm
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // The boot time, read once: /proc/stat grows with the CPUs, and it never changes.
    static BTIME: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();
    let btime = *BTIME.get_or_init(|| {
        read("/proc/stat").and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<f64>().ok())
        })
    });
    ProcessFigures {
        cpu_seconds: field(14).zip(field(15)).map(|(u, s)| (u + s) / tick),
        resident_bytes: pages.get(1).map(|p| p * page),
        virtual_bytes: pages.first().map(|p| p * page),
        open_fds: open_fds(),
        max_fds,
        start_time_seconds: btime.zip(field(22)).map(|(b, t)| b + t / tick),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn open_fds_counts_what_is_open() {
        // Other tests' threads open and close files meanwhile, even between two
        // listings that agree (each listing holds one more open): the count must
        // match both listings around it at least once; a count that is wrong
        // never does.
        let listed = || std::fs::read_dir("/proc/self/fd").unwrap().count() as f64 - 1.0;
        let _held: Vec<std::fs::File> = (0..3)
            .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
            .collect();
        let mut seen = Vec::new();
        for _ in 0..1000 {
            let (before, n, after) = (listed(), super::open_fds().unwrap(), listed());
            if before == after && n == before {
                assert!(n >= 3.0, "{n}");
                return;
            }
            seen.push((before, n, after));
        }
        panic!("the count never matched the listings around it: {seen:?}");
    }
}
