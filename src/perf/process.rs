//! Starting a command with its perf counters attached first (`--per-process`): the
//! child stops just before `exec` until the counters are open on its pid (inherited
//! by everything it starts, enabled by the `exec` itself), as perf stat does, so
//! that nothing of the command runs uncounted.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use crate::perf::counter::{Counters, Target};
use crate::perf::PerfEvent;

/// A pipe whose both ends close on `exec`.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both were just opened and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts `cmd` with `events` counted for it and its descendants: from its `exec`,
/// or (`from_exec` false: a run that starts with counting off, perf's `-D`) from
/// when the counters are enabled. Events the kernel refuses are in the counters'
/// refusals; the command runs anyway.
pub fn spawn_counted(
    cmd: &mut Command,
    events: &[PerfEvent],
    from_exec: bool,
) -> std::io::Result<(Child, Counters)> {
    let (pid_read, pid_write) = pipe()?;
    let (go_read, go_write) = pipe()?;
    let (pid_w, go_r) = (pid_write.as_raw_fd(), go_read.as_raw_fd());
    let (pid_r, go_w) = (pid_read.as_raw_fd(), go_write.as_raw_fd());
    // SAFETY: between fork and exec the child only makes async-signal-safe system
    // calls on descriptors it inherited: close, getpid, write, read.
    unsafe {
        cmd.pre_exec(move || {
            libc::close(pid_r);
            libc::close(go_w);
            let pid = libc::getpid().to_ne_bytes();
            libc::write(pid_w, pid.as_ptr().cast(), pid.len());
            libc::close(pid_w);
            let mut go = 0u8;
            // No allocation here: the error is a plain errno.
            match libc::read(go_r, (&mut go as *mut u8).cast(), 1) {
                1 => Ok(()),
                _ => Err(std::io::Error::from_raw_os_error(libc::ECANCELED)),
            }
        })
    };
    // The parent waits in spawn() until the child has called exec, so the counters
    // are opened meanwhile by a thread of their own.
    let events = events.to_vec();
    let opener = std::thread::spawn(move || -> Option<Counters> {
        let mut pid_read = std::fs::File::from(pid_read);
        let mut pid = [0u8; 4];
        pid_read.read_exact(&mut pid).ok()?;
        let pid = i32::from_ne_bytes(pid);
        // Before its exec the child is one thread: opened on it, inherited by all
        // it starts, the counters stay off until enabled.
        let target = match from_exec {
            true => Target::Process(pid),
            false => Target::Running(pid),
        };
        let counters = Counters::open_for(&events, target);
        let _ = std::fs::File::from(go_write).write_all(&[1]);
        Some(counters)
    });
    let spawned = cmd.spawn();
    // The child has written its pid, or never will: the opener ends either way.
    drop(pid_write);
    drop(go_read);
    let counters = opener.join().ok().flatten();
    let child = spawned.map_err(|e| match e.raw_os_error() {
        Some(libc::ECANCELED) => {
            std::io::Error::other("its perf counters could not be attached before it started")
        }
        _ => e,
    })?;
    let counters = counters.ok_or_else(|| std::io::Error::other("no counters were opened"))?;
    Ok((child, counters))
}
