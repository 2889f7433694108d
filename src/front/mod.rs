//! What both programs (`bfperf` and `bfperf-exporter`) share at their front: the
//! global options, the log and the exit, opening the device the options name, and
//! the setup of a process that has no Rust runtime setup of its own.

pub(crate) mod args;
pub(crate) mod escape;
pub(crate) mod exit;
pub(crate) mod setup;

/// Run first by each program's entry point: standard streams that were closed are
/// pointed at /dev/null, so that no file opened later (a lock, a journal, a device
/// file) takes their number and receives a report or a log line, and SIGPIPE is
/// ignored (a closed pipe is an error to handle, as in any Rust program). Returns
/// the numbers that were closed.
pub(crate) fn start() -> Vec<i32> {
    let closed = guard_standard_streams();
    // SAFETY: ignoring a signal before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    closed
}

/// Points standard input, output and error at /dev/null where they are closed.
/// Returns the numbers that were closed.
fn guard_standard_streams() -> Vec<i32> {
    let mut closed = Vec::new();
    for fd in [libc::STDIN_FILENO, libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            continue;
        }
        closed.push(fd);
        // SAFETY: opens /dev/null (a NUL-terminated literal); the lowest free
        // number is `fd` (those below it are open by now), so the open takes it.
        // Not close-on-exec: it stands for the stream a command run by `stat`
        // inherits.
        let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if null >= 0 && null != fd {
            // SAFETY: moves our own descriptor onto the closed number.
            unsafe {
                libc::dup2(null, fd);
                libc::close(null);
            }
        }
    }
    closed
}
