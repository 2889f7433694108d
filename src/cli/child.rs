//! The measured command and the process around it, for `stat`: starting and
//! reaping the child, waiting on its pidfd and on signals (a pipe their handlers
//! write to) instead of polling, the `Until` of a command, a running process (-p)
//! or a duration, and how a child's end becomes an exit status.

use std::cell::RefCell;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Child;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::measure::{For, Pacer, Until};

/// The measured command, shared between the runs and the end.
pub(crate) type Slot = Rc<RefCell<Option<Child>>>;

/// What ends a wait early: the signals bfperf handles (their handlers write to a
/// pipe) and the measured command's exit (a pidfd), so that the window closes
/// within a poll's wake-up of either, with no polling interval.
pub(crate) struct Wakeup {
    pub(crate) signals: UnixStream,
}

impl Wakeup {
    fn new(signals: &[i32]) -> std::io::Result<Wakeup> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        for &sig in signals {
            signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
        }
        Ok(Wakeup { signals: read })
    }

    /// Sleeps `timeout` at most, or until a signal comes or the process `pidfd`
    /// names ends; without a pidfd (an old kernel), `poll` at most, so that the
    /// caller looks at the process that often.
    fn wait_for_process(
        &self,
        timeout: Duration,
        pidfd: Option<&OwnedFd>,
        poll: Duration,
        also: Option<BorrowedFd<'_>>,
    ) {
        let timeout = match pidfd {
            Some(_) => timeout,
            None => timeout.min(poll),
        };
        self.wait(timeout, pidfd.map(|p| p.as_fd()), also);
    }

    /// Sleeps `timeout` at most, or until a signal comes or `pidfd` or `also` (a
    /// control descriptor) is readable.
    fn wait(&self, timeout: Duration, pidfd: Option<BorrowedFd<'_>>, also: Option<BorrowedFd<'_>>) {
        // On the stack: the signals' descriptor, then those given (a tick
        // allocates nothing to sleep).
        let poll = |fd: i32| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = [poll(self.signals.as_raw_fd()), poll(-1), poll(-1)];
        let mut n = 1;
        for fd in [pidfd, also].into_iter().flatten() {
            fds[n] = poll(fd.as_raw_fd());
            n += 1;
        }
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: fds and ts live across the call; no signal mask is changed.
        unsafe { libc::ppoll(fds.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
        if fds[0].revents & libc::POLLIN != 0 {
            let mut sink = [0u8; 64];
            while matches!((&self.signals).read(&mut sink), Ok(n) if n > 0) {}
        }
    }
}

/// A file descriptor that becomes readable when the process exits (Linux 5.3+).
pub(crate) fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a descriptor we now own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

pub(crate) struct ChildUntil {
    pub(crate) slot: Slot,
    pub(crate) status: Rc<RefCell<Option<i32>>>,
    pub(crate) pidfd: Option<OwnedFd>,
    pub(crate) wakeup: Rc<Wakeup>,
    pub(crate) perf: Option<crate::perf::Counters>,
    /// --timeout: the run ends then, the command still running (it is ended after).
    pub(crate) limit: Option<Duration>,
    /// Set when the limit came before the command's end.
    pub(crate) timed_out: Rc<std::cell::Cell<bool>>,
}

impl Until for ChildUntil {
    fn done(&mut self, elapsed: Duration) -> bool {
        let mut slot = self.slot.borrow_mut();
        let Some(child) = slot.as_mut() else {
            return true;
        };
        match child.try_wait() {
            Ok(Some(st)) => {
                *self.status.borrow_mut() = Some(code_of(st));
                *slot = None;
                true
            }
            Ok(None) if self.limit.is_some_and(|l| elapsed >= l) => {
                self.timed_out.set(true);
                true
            }
            Ok(None) => false,
            Err(_) => true,
        }
    }

    fn deadline(&self) -> Option<Duration> {
        self.limit
    }

    fn wait(&mut self, _: &dyn Pacer, timeout: Duration, also: Option<BorrowedFd<'_>>) {
        // Without a pidfd (an old kernel), look at the command every millisecond.
        let pidfd = self.pidfd.as_ref();
        self.wakeup
            .wait_for_process(timeout, pidfd, Duration::from_millis(1), also);
    }

    fn take_perf(&mut self) -> Option<crate::perf::Counters> {
        self.perf.take()
    }
}

/// Whether process `pid` runs here (perf's -p needs one); it may belong to another
/// user (its perf events are then what the kernel allows).
pub(crate) fn running(pid: i32) -> Result<()> {
    // SAFETY: signal 0 only checks that the process exists.
    let gone = unsafe { libc::kill(pid, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    match gone {
        true => Err(Error::BadOption {
            problem: format!("-p {pid}: no such process"),
        }),
        false => Ok(()),
    }
}

/// A running process (-p): until it ends, the duration passes, or a signal comes.
pub(crate) struct PidUntil {
    pub(crate) pid: i32,
    pub(crate) pidfd: Option<OwnedFd>,
    pub(crate) inner: Option<For>,
    pub(crate) wakeup: Rc<Wakeup>,
    pub(crate) perf: Option<crate::perf::Counters>,
}

impl Until for PidUntil {
    fn done(&mut self, elapsed: Duration) -> bool {
        if self.inner.as_mut().is_some_and(|d| d.done(elapsed)) {
            return true;
        }
        // SAFETY: signal 0 only checks that the process exists (a zombie still does:
        // its parent has not waited for it yet, but it runs no more).
        let exists = unsafe { libc::kill(self.pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        !exists || zombie(self.pid)
    }

    fn deadline(&self) -> Option<Duration> {
        self.inner.as_ref().and_then(For::deadline)
    }

    fn wait(&mut self, _: &dyn Pacer, timeout: Duration, also: Option<BorrowedFd<'_>>) {
        // Without a pidfd, look at the process every 10 ms.
        let pidfd = self.pidfd.as_ref();
        self.wakeup
            .wait_for_process(timeout, pidfd, Duration::from_millis(10), also);
    }

    /// The counters, started now: the run's window has just opened (a command's
    /// start at its exec instead).
    fn take_perf(&mut self) -> Option<crate::perf::Counters> {
        let mut perf = self.perf.take()?;
        perf.start();
        Some(perf)
    }
}

/// Whether process `pid` has ended and waits to be reaped by its parent.
pub(crate) fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false)
}

/// A duration, or until interrupted, woken by signals.
pub(crate) struct Timed {
    pub(crate) inner: Box<dyn Until>,
    pub(crate) wakeup: Rc<Wakeup>,
}

impl Until for Timed {
    fn done(&mut self, elapsed: Duration) -> bool {
        self.inner.done(elapsed)
    }

    fn deadline(&self) -> Option<Duration> {
        self.inner.deadline()
    }

    fn wait(&mut self, pacer: &dyn Pacer, timeout: Duration, also: Option<BorrowedFd<'_>>) {
        match pacer.is_virtual() {
            true => pacer.sleep(timeout),
            false => self.wakeup.wait(timeout, None, also),
        }
    }
}

pub(crate) fn code_of(st: std::process::ExitStatus) -> i32 {
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// Whether `path` is a file this process may execute.
pub(crate) fn executable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access reads a NUL-terminated path we own.
    path.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// Why `program` cannot be run, if it cannot: a path to an executable file, or a
/// name of one found in PATH.
pub(crate) fn not_runnable(program: &str) -> Option<String> {
    if program.contains('/') {
        let p = Path::new(program);
        return match (p.is_file(), executable(p)) {
            (false, _) => Some(format!("cannot run '{program}': no such file")),
            (true, false) => Some(format!(
                "cannot run '{program}': it is not executable (permission denied)"
            )),
            _ => None,
        };
    }
    let found: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    if found.iter().any(|p| executable(p)) {
        return None;
    }
    Some(match found.first() {
        Some(p) => format!(
            "cannot run '{program}': {} is not executable (permission denied)",
            p.display()
        ),
        None => format!("cannot run '{program}': no such file, nor a program of that name in PATH"),
    })
}

pub(crate) fn signal_name(sig: usize) -> String {
    match sig as i32 {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        s => format!("signal {s}"),
    }
}

/// Waits for a command still running to end by itself.
pub(crate) fn wait_child(slot: &Slot, status: &Rc<RefCell<Option<i32>>>) {
    let Some(mut child) = slot.borrow_mut().take() else {
        return;
    };
    if let Ok(st) = child.wait() {
        *status.borrow_mut() = Some(code_of(st));
    }
}

/// Stops a command still running after the measurement was interrupted.
pub(crate) fn end_child(slot: &Slot, status: &Rc<RefCell<Option<i32>>>, sig: i32) {
    let Some(mut child) = slot.borrow_mut().take() else {
        return;
    };
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    for _ in 0..250 {
        if let Ok(Some(st)) = child.try_wait() {
            *status.borrow_mut() = Some(code_of(st));
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    if let Ok(st) = child.wait() {
        *status.borrow_mut() = Some(code_of(st));
    }
}

/// SIGINT, SIGTERM and SIGHUP end the measurement: which came, and a wakeup for the
/// waits.
pub(crate) struct Signals {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) which: Arc<AtomicUsize>,
    pub(crate) wakeup: Rc<Wakeup>,
}

pub(crate) fn signals() -> Result<Signals> {
    let stop = Arc::new(AtomicBool::new(false));
    let which = Arc::new(AtomicUsize::new(0));
    let handled = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    for sig in handled {
        let _ = signal_hook::flag::register_usize(sig, which.clone(), sig as usize);
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    let wakeup = Rc::new(Wakeup::new(&handled).map_err(|e| Error::File {
        what: "cannot set up signal handling",
        path: "(a socket pair)".into(),
        source: e,
    })?);
    Ok(Signals {
        stop,
        which,
        wakeup,
    })
}
