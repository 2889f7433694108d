//! The owner's Unix socket for `stat` and other clients ([`super::protocol`]): beside
//! the writer lock, the caller's only (0600) or its group's too (0660, when a
//! `socket_group` is granted), polled between sweeps without blocking.
//! A client's request is checked and granted or refused at once; its counters are
//! put back when its connection ends, however it ends (exit, crash, SIGKILL). What
//! happens is said as lines for the owner's log ([`Clients::take_said`]).

use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::protocol::{self, Answer, AnswerWhat, Owner, Said, Session, MAX_CLIENTS};
use crate::device::values::monotonic_ns;
use crate::error::{Error, Result};
use crate::measure::MULTIPLEX_TICK;

/// Connections beyond the clients being served that may wait for their request.
const MAX_WAITING: usize = 4;
/// Connections one user other than root may have waiting for their request.
const WAITING_PER_USER: usize = 2;
/// More connections root may have beyond the rest: never locked out by others'.
const ROOT_RESERVE: usize = 2;
/// How long a connection may take to send its request; then it is closed.
const ASK_WITHIN: Duration = Duration::from_secs(5);

struct Conn {
    stream: UnixStream,
    /// The protocol's state of this connection: its uid (from the kernel), the
    /// bytes not yet framed, the measurement granted.
    session: Session,
    /// When it was accepted.
    since: Instant,
    /// Its uid and pid, from the kernel (SO_PEERCRED).
    who: String,
    /// How the log names it: who it is, and the command it says it runs.
    command: String,
}

/// The listening socket and its connections.
pub(crate) struct Clients {
    listener: UnixListener,
    path: PathBuf,
    conns: Vec<Conn>,
    /// When the clients' own counters last took a turn.
    last_turn: Instant,
    /// Lines for the owner's log, not yet taken.
    said: Vec<String>,
}

/// How a client's end is logged when it went away: the same words whether the
/// exporter saw it by reading the end of the connection or by a write that found
/// nobody reading (a killed client, seen either way).
const CLOSED: &str = "it closed the connection";

/// Why a connection ended, from the error that ended it.
fn ended_by(err: &std::io::Error) -> String {
    match err.kind() {
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof => {
            CLOSED.into()
        }
        _ => err.to_string(),
    }
}

/// Binds the socket at `path`, its mode and group set where nobody else can reach
/// it: in a directory of its own (0700, beside `path`), then renamed into place. A
/// mode changed through the final path could be changed on whatever another user
/// swapped in there (a link to a file of root's) between the bind and the change.
fn bind_private(path: &Path, group: Option<u32>) -> std::io::Result<UnixListener> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let private = tempfile::Builder::new()
        .prefix(".bfperf-sock-")
        .tempdir_in(dir.unwrap_or(Path::new(".")))?;
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700))?;
    let inside = private.path().join("s");
    let listener = crate::outfile::with_socket_path(&inside, |p| UnixListener::bind(p))?;
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o600))?;
    if let Some(gid) = group {
        // Only then open to the group: never a moment open to anyone else. The one
        // system call for it, fchownat relative to the private directory, is the
        // one the shipped unit's filter allows of @chown.
        group_of(private.path(), "s", gid)?;
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o660))?;
    }
    std::fs::rename(&inside, path)?;
    Ok(listener)
}

/// Gives `name` in `dir` to group `gid` (fchownat, not following a link).
fn group_of(dir: &Path, name: &str, gid: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    let name = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
    // SAFETY: a directory descriptor we own and a NUL-terminated name; uid -1 keeps
    // the owner.
    let rc = unsafe {
        libc::fchownat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::uid_t::MAX,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

impl Clients {
    /// Listens beside the lock `lock` (the exporter holds it, so a socket left there
    /// is a dead exporter's: replaced if it is a socket of the caller's); members of
    /// `group` may connect too.
    pub(crate) fn open(lock: &Path, group: Option<u32>) -> Result<Clients> {
        let path = super::socket_of(lock);
        let cannot = |source| Error::File {
            what: "cannot listen for clients on",
            path: path.clone(),
            source,
        };
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            // SAFETY: geteuid has no preconditions.
            let mine = m.uid() == unsafe { libc::geteuid() };
            if !(m.file_type().is_socket() && mine) {
                return Err(cannot(std::io::Error::other(
                    "something other than a socket of bfperf's is there; remove it",
                )));
            }
            std::fs::remove_file(&path).map_err(cannot)?;
        }
        let listener = bind_private(&path, group).map_err(cannot)?;
        listener.set_nonblocking(true).map_err(cannot)?;
        Ok(Clients {
            listener,
            path,
            conns: Vec::new(),
            last_turn: Instant::now(),
            said: Vec::new(),
        })
    }

    /// What happened since the last call, as lines for the owner's log.
    pub(crate) fn take_said(&mut self) -> Vec<String> {
        std::mem::take(&mut self.said)
    }

    /// Whether a client is being served (the loop then wakes more often).
    pub(crate) fn busy(&self) -> bool {
        !self.conns.is_empty()
    }

    /// Accepts, reads and answers what has come, without waiting.
    pub(crate) fn poll(&mut self, e: &mut dyn Owner) {
        self.accept();
        let mut i = 0;
        while i < self.conns.len() {
            let c = &self.conns[i];
            if c.session.id.is_none() && c.since.elapsed() > ASK_WITHIN {
                self.close(i, e, "it asked nothing in time");
                continue;
            }
            match self.serve(i, e) {
                Ok(()) => i += 1,
                Err(why) => self.close(i, e, &why),
            }
        }
        // Their events take turns at stat's pace, however often the loop wakes.
        if self.conns.iter().any(|c| c.session.id.is_some())
            && self.last_turn.elapsed() >= MULTIPLEX_TICK
        {
            e.turn(monotonic_ns());
            self.last_turn = Instant::now();
        }
    }

    /// Accepts what waits, within the limits: a user other than root has at most
    /// WAITING_PER_USER connections waiting for their request, and root has room
    /// beyond everyone else's, so no member's connections lock root out.
    fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            // Who the client is, as the kernel says: its words are only its claim.
            let peer = protocol::peer(&stream);
            let uid = peer.map(|(_, uid)| uid);
            let root = uid == Some(0);
            let waiting = self
                .conns
                .iter()
                .filter(|c| c.session.id.is_none() && c.session.uid == uid)
                .count();
            let room = MAX_CLIENTS + MAX_WAITING + if root { ROOT_RESERVE } else { 0 };
            if self.conns.len() >= room
                || (!root && waiting >= WAITING_PER_USER)
                || stream.set_nonblocking(true).is_err()
            {
                continue; // dropped: the client reads the end of the connection
            }
            let who = match peer {
                Some((pid, uid)) => format!("uid {uid}, pid {pid}"),
                None => "a client the kernel does not name".into(),
            };
            self.conns.push(Conn {
                stream,
                session: Session::new(uid),
                since: Instant::now(),
                command: who.clone(),
                who,
            });
        }
    }

    /// Reads what connection `i` sent and answers each line; Err ends it.
    fn serve(&mut self, i: usize, e: &mut dyn Owner) -> std::result::Result<(), String> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.conns[i].stream.read(&mut chunk) {
                Ok(0) => return Err(CLOSED.into()),
                Ok(n) => self.conns[i].session.feed(&chunk[..n])?,
                Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) => return Err(ended_by(&err)),
            }
        }
        while let Some(line) = self.conns[i].session.next_line() {
            let conn = &mut self.conns[i];
            let (answer, said) = conn.session.answer(&line, e, monotonic_ns());
            match said {
                Some(Said::Granted { command }) => {
                    conn.command = format!("{} (says `{command}`)", conn.who);
                    self.said.push(format!(
                        "counting for {} beside the exporter's events",
                        conn.command
                    ));
                }
                Some(Said::Ended) => self.said.push(format!(
                    "{} ended; its counters are as they were",
                    conn.command
                )),
                None => {}
            }
            let refused = matches!(answer, AnswerWhat::Refused { .. });
            let ended = matches!(answer, AnswerWhat::Ended);
            let read = matches!(answer, AnswerWhat::Totals { .. });
            let message = Answer {
                bfperf: protocol::VERSION,
                what: answer,
            };
            protocol::send(&mut conn.stream, &message).map_err(|e| ended_by(&e))?;
            if refused && conn.session.id.is_none() {
                return Err("refused".into());
            }
            if ended {
                return Err("it ended".into());
            }
            if read {
                // One reading per connection per turn of the loop: a burst of reads
                // waits in its buffer, and scrapes are answered between them.
                break;
            }
        }
        Ok(())
    }

    fn close(&mut self, i: usize, e: &mut dyn Owner, why: &str) {
        let conn = self.conns.remove(i);
        if let Some(id) = conn.session.id {
            match e.release(id) {
                Ok(()) => self.said.push(format!(
                    "{} ended ({why}); its counters are as they were",
                    conn.command
                )),
                Err(err) => self.said.push(format!(
                    "{} ended ({why}); putting its counters back failed: {err}",
                    conn.command
                )),
            }
        }
    }

    /// Ends every connection without a write to the device, which went away: what
    /// their counters held is put back when the exporter stops (it is in the
    /// journal meanwhile).
    pub(crate) fn drop_all(&mut self) {
        for conn in self.conns.drain(..) {
            if conn.session.id.is_some() {
                self.said.push(format!(
                    "{} ended (the device went away); its counters are put back when the exporter stops",
                    conn.command
                ));
            }
        }
    }

    /// Ends every connection (the exporter reloads), each client's counters put
    /// back: a reload that is refused keeps this exporter, which must not keep
    /// counting for clients that are gone.
    pub(crate) fn close_all(&mut self, e: &mut dyn Owner) {
        while !self.conns.is_empty() {
            self.close(0, e, "the exporter reloads its configuration");
        }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The group `name` names (or a number, as it is): the group whose members may ask
/// the exporter to count (`socket_group`).
pub(crate) fn group_id(name: &str) -> Result<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let unknown = || {
        Error::BadOption {
        problem: format!(
            "socket_group: no group {name:?} on this machine (groupadd --system {name}, or give its number)"
        ),
    }
    };
    let c_name = std::ffi::CString::new(name).map_err(|_| unknown())?;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: a C struct of pointers and integers, for which all zeroes is valid.
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and `buf` is as long as said;
    // only the gid is read from `group`, while `buf` lives.
    let rc = unsafe {
        libc::getgrnam_r(
            c_name.as_ptr(),
            &mut group,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(unknown());
    }
    Ok(group.gr_gid)
}
