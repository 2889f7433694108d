//! One device, one owner. The files that make one writer per device are named
//! here, by one key, and taken and held together:
//! - the key is what the device is ([`Device::identity`]: on the kernel's sysfs the
//!   platform device its `device` link names and its generation), so every path to
//!   the device, and the device back under another `hwmonN` after the driver was
//!   loaded again, has one key, and no other device has it (docs/security.md);
//! - the writer lock (`KEY.lock`, or `--lock-file`; the mechanics in `crate::lock`),
//!   the owner's socket beside it (`KEY.sock`, [`socket`]) and the journal of what
//!   the device held before the owner wrote it (`KEY.journal`, [`journal`]);
//! - both sides of the sharing protocol ([`protocol`]): a client names the device
//!   it means, and the owner counts only for its own.
//!
//! The exporter takes lock and socket once for its life ([`Held`]) and carries its
//! journal across the device's return; `stat` and `top` ask the owner ([`ask`])
//! before they take the lock themselves. How the exporter lends its counters is its
//! own (`collector::clients`), behind [`protocol::Owner`].

pub(crate) mod journal;
pub(crate) mod protocol;
pub(crate) mod socket;

use std::path::{Path, PathBuf};

use crate::device::Device;
use crate::error::Result;
use crate::lock::{state_dir, WriterLock, ROOT_STATE_DIR};

/// The stem of a device's files: FNV-1a of its identity.
pub(crate) fn key(device: &Device) -> String {
    format!("{:016x}", crate::device::fnv1a(device.identity().bytes()))
}

/// The device's writer lock in this user's state directory.
pub(crate) fn default_lock(device: &Device) -> Result<PathBuf> {
    Ok(state_dir()?.join(format!("{}.lock", key(device))))
}

/// Where root's lock of the device is (whoever asks; nothing is created): where a
/// client without root looks for the exporter's socket.
fn root_lock(device: &Device) -> PathBuf {
    Path::new(ROOT_STATE_DIR).join(format!("{}.lock", key(device)))
}

/// The owner's socket, beside its lock `lock`.
pub(crate) fn socket_of(lock: &Path) -> PathBuf {
    lock.with_extension("sock")
}

/// The device's journal in this user's state directory.
pub(crate) fn journal_of(device: &Device) -> Result<PathBuf> {
    Ok(state_dir()?.join(format!("{}.journal", key(device))))
}

/// The owner's lock and socket, taken together (the lock first: only its holder
/// binds the socket) and held together for the owner's life, wherever the device
/// goes and comes back: its key does not change.
pub(crate) struct Held {
    _lock: WriterLock,
    /// The socket and its clients' connections.
    pub(crate) clients: socket::Clients,
}

impl Held {
    /// Takes the lock at `lock` (waiting with `wait`) and binds the socket beside
    /// it, for the caller's user and the members of `group`.
    pub(crate) fn take(lock: &Path, wait: bool, group: Option<u32>) -> Result<Held> {
        let held = WriterLock::acquire(lock, wait)?;
        Ok(Held {
            clients: socket::Clients::open(lock, group)?,
            _lock: held,
        })
    }
}

/// The owner of `device`, asked to count `specs` for this command: its answer as a
/// measurement's source, and its socket; None when no owner listens (the caller
/// takes the lock and programs the device itself). `lock` is `--lock-file` when
/// given (it names the lock, and so the socket); otherwise this user's lock and,
/// without root, root's too (an exporter may grant a group).
pub(crate) fn ask<'d>(
    device: &'d Device,
    lock: Option<&Path>,
    specs: &[String],
) -> Result<Option<(protocol::Shared<'d>, PathBuf)>> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let root_too = euid != 0 && lock.is_none();
    let mut sockets = Vec::new();
    match lock.map_or_else(|| default_lock(device), |l| Ok(l.to_path_buf())) {
        Ok(lock) => sockets.push(socket_of(&lock)),
        // A user's own state directory another user squatted does not keep it
        // from root's exporter; without one, taking the lock says what is wrong.
        Err(_) if root_too => {}
        Err(e) => return Err(e),
    }
    if root_too {
        sockets.push(socket_of(&root_lock(device)));
    }
    for socket in sockets {
        let command = crate::lock::this_command();
        if let Some(s) = protocol::Shared::connect(device, &socket, specs, command)? {
            return Ok(Some((s, socket)));
        }
    }
    Ok(None)
}
