//! The sharing protocol: while a long-running bfperf (the exporter) owns the
//! device, `stat` and `top` ask it over the owner's Unix socket to count their
//! events, instead of failing on the lock. It is line-delimited JSON, versioned
//! (docs/sharing.md); this module holds both ends of it: its messages, the owner's
//! side of a connection (framing, version, the request state machine, behind the
//! [`Owner`] the exporter implements) and the client's side, which reads the
//! owner's counts as a measurement's source. The socket is [`super::socket`].

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::measure::plan::{BlockPlan, Slot};
use crate::measure::sampler::Acc;

/// The protocol's version: a message without it, or with another, is refused.
/// Version 2 names the device on both sides of the first exchange.
pub(crate) const VERSION: u32 = 2;
/// The longest line either side reads; a longer one ends the connection.
pub(crate) const MAX_LINE: usize = 64 * 1024;
/// The most clients an owner serves at once, and the most items one may ask for.
pub(crate) const MAX_CLIENTS: usize = 8;
pub(crate) const MAX_ITEMS: usize = 256;
/// How long a client waits for an answer before giving up on the owner.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// A client's reads closer than this to its previous one are answered with that
/// one's values and time: a flood of reads never reads the device more often.
pub(crate) const READ_EVERY_NS: u64 = 10_000_000;

/// A client's message.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Ask {
    /// The protocol's version.
    pub bfperf: u32,
    /// What to do.
    #[serde(flatten)]
    pub what: AskWhat,
}

/// What a client asks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AskWhat {
    /// Count these `stat -e` specs from now until the connection ends; `command`
    /// names the client for the owner's log; `device` is the device the client
    /// means (refused when the owner serves another).
    Count {
        specs: Vec<String>,
        command: String,
        #[serde(default)]
        device: Option<Serves>,
    },
    /// Every item's accumulator now, in the grant's order.
    Read,
    /// The measurement is over: put the counters back, then say so.
    End,
}

/// The owner's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Answer {
    /// The protocol's version.
    pub bfperf: u32,
    /// What it says.
    #[serde(flatten)]
    pub what: AnswerWhat,
}

/// What the owner says.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AnswerWhat {
    /// The request is counted: per block (in the order the specs resolve to), the
    /// counter of each item, or null where it takes turns; on the device named.
    Granted {
        blocks: Vec<GrantedBlock>,
        device: Serves,
    },
    /// The request cannot be counted; nothing was programmed.
    Refused { reason: String },
    /// Every item's accumulator since the grant, per block, and when (monotonic ns).
    Totals { at_ns: u64, blocks: Vec<Vec<Acc>> },
    /// The counters are as they were before the grant.
    Ended,
}

/// A device as both sides of the protocol name it: what it is (the key its lock,
/// socket and journal are named by), its generation and a digest of its blocks,
/// and where it is now (for people).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Serves {
    /// [`Device::identity`].
    pub identity: String,
    /// Its generation's label.
    pub generation: String,
    /// [`Device::inventory`].
    pub inventory: String,
    /// Where it is now.
    pub location: String,
}

impl Serves {
    /// How `device` is named on the wire.
    pub(crate) fn of(device: &Device) -> Serves {
        Serves {
            identity: device.identity(),
            generation: device.generation().label().to_string(),
            inventory: device.inventory().to_string(),
            location: device.location(),
        }
    }

    /// The same device (wherever each side sees it).
    fn same(&self, other: &Serves) -> bool {
        (&self.identity, &self.generation, &self.inventory)
            == (&other.identity, &other.generation, &other.inventory)
    }

    /// For people: where, and what.
    fn describe(&self) -> String {
        format!(
            "{} at {} ({}, blocks {})",
            self.generation, self.location, self.identity, self.inventory
        )
    }
}

/// Why a client's device is not the owner's, naming both.
fn not_served(asked: &Serves, serves: &Serves) -> String {
    format!(
        "this owner serves the {}, not the {} asked about: it counts nothing for another device",
        serves.describe(),
        asked.describe()
    )
}

/// Where a block's items are counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GrantedBlock {
    /// The block.
    pub block: String,
    /// Each item's counter; null when it takes turns (multiplexed).
    pub counters: Vec<Option<u32>>,
}

/// Writes one message as a line.
pub(crate) fn send<T: Serialize>(w: &mut impl Write, message: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)
}

/// What the owner of the device does for its clients: the exporter.
pub(crate) trait Owner {
    /// The device it owns.
    fn serves(&self) -> Serves;
    /// Counts `specs` for a client of `uid` from `now`: its id and where each item
    /// is counted; Err (nothing programmed) when it cannot.
    fn grant(
        &mut self,
        specs: &[String],
        uid: Option<u32>,
        now: u64,
    ) -> Result<(u64, Vec<GrantedBlock>)>;
    /// Client `id`'s accumulators now, and when they were read.
    fn totals(&mut self, id: u64, now: u64) -> Result<(u64, Vec<Vec<Acc>>)>;
    /// Puts client `id`'s counters back.
    fn release(&mut self, id: u64) -> Result<()>;
    /// The clients' counters take a turn (those multiplexed), at `now`.
    fn turn(&mut self, now: u64) {
        let _ = now;
    }
}

/// What the owner's log should say after a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Said {
    /// A measurement was granted for the command the client says it runs.
    Granted { command: String },
    /// The client ended its measurement; its counters are back.
    Ended,
}

/// The owner's side of one connection: the bytes not yet framed, and the
/// measurement granted to it.
#[derive(Debug, Default)]
pub(crate) struct Session {
    buf: Vec<u8>,
    /// The measurement granted (None before the grant and after the end).
    pub id: Option<u64>,
    /// The client's uid, from the kernel.
    pub uid: Option<u32>,
}

impl Session {
    /// A connection of the client of `uid` (as the kernel says).
    pub(crate) fn new(uid: Option<u32>) -> Session {
        Session {
            uid,
            ..Session::default()
        }
    }

    /// Takes bytes read from the connection; Err (the connection ends) when a line
    /// grows past [`MAX_LINE`].
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        self.buf.extend_from_slice(bytes);
        match self.buf.len() > MAX_LINE {
            true => Err(format!("a line over {MAX_LINE} bytes")),
            false => Ok(()),
        }
    }

    /// The next whole line received, if any.
    pub(crate) fn next_line(&mut self) -> Option<Vec<u8>> {
        let end = self.buf.iter().position(|&b| b == b'\n')?;
        Some(self.buf.drain(..=end).collect())
    }

    /// The answer to one request line, and what the log should say of it.
    pub(crate) fn answer(
        &mut self,
        line: &[u8],
        owner: &mut dyn Owner,
        now: u64,
    ) -> (AnswerWhat, Option<Said>) {
        let refuse = |reason: String| (AnswerWhat::Refused { reason }, None);
        let ask: Ask = match serde_json::from_slice(line) {
            Ok(a) => a,
            Err(err) => return refuse(format!("not a request of this protocol: {err}")),
        };
        if ask.bfperf != VERSION {
            return refuse(format!(
                "version {} of the protocol asked; this exporter speaks {VERSION}",
                ask.bfperf
            ));
        }
        match (ask.what, self.id) {
            (
                AskWhat::Count {
                    device: Some(d), ..
                },
                None,
            ) if !d.same(&owner.serves()) => refuse(not_served(&d, &owner.serves())),
            (AskWhat::Count { specs, command, .. }, None) => {
                match owner.grant(&specs, self.uid, now) {
                    Ok((id, blocks)) => {
                        self.id = Some(id);
                        let command = crate::lock::one_line(&command);
                        let device = owner.serves();
                        (
                            AnswerWhat::Granted { blocks, device },
                            Some(Said::Granted { command }),
                        )
                    }
                    Err(err) => refuse(err.to_string()),
                }
            }
            (AskWhat::Read, Some(id)) => match owner.totals(id, now) {
                Ok((at_ns, blocks)) => (AnswerWhat::Totals { at_ns, blocks }, None),
                Err(err) => refuse(err.to_string()),
            },
            (AskWhat::End, Some(id)) => {
                self.id = None;
                match owner.release(id) {
                    Ok(()) => (AnswerWhat::Ended, Some(Said::Ended)),
                    Err(err) => refuse(format!("putting the counters back failed: {err}")),
                }
            }
            (AskWhat::End, None) => (AnswerWhat::Ended, None),
            (AskWhat::Count { .. }, Some(_)) => refuse("one measurement per connection".into()),
            (AskWhat::Read, None) => refuse("nothing is being counted for this connection".into()),
        }
    }
}

/// A measurement's counts, from the owner of the device.
pub(crate) struct Shared<'d> {
    reader: BufReader<UnixStream>,
    path: PathBuf,
    pub(crate) plans: Vec<BlockPlan<'d>>,
    base: Vec<Vec<Acc>>,
    last: Vec<Vec<Acc>>,
    pub(crate) at_ns: u64,
}

/// Who is at the other end of a connected Unix socket, as the kernel says
/// (SO_PEERCRED): (pid, uid). None where the kernel does not say.
pub(crate) fn peer(stream: &UnixStream) -> Option<(i32, u32)> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the ucred we own.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some((cred.pid, cred.uid))
}

impl<'d> Shared<'d> {
    /// Asks the owner listening on `socket` to count `specs`; None when nobody
    /// listens there (no owner: the caller programs the device itself).
    pub(crate) fn connect(
        device: &'d Device,
        socket: &Path,
        specs: &[String],
        command: String,
    ) -> Result<Option<Shared<'d>>> {
        let connect = |p: &Path| UnixStream::connect(p);
        let stream = match crate::outfile::with_socket_path(socket, connect) {
            Ok(s) => s,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ECONNREFUSED)) => {
                return Ok(None)
            }
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                let e = std::io::Error::other(
                    "permission denied: it lets in its user, and its socket_group if it has one; run as root, or ask to be in that group",
                );
                return Err(file_error("cannot reach the device's owner at", socket, e));
            }
            Err(e) => return Err(file_error("cannot reach the device's owner at", socket, e)),
        };
        // Asked only of root or the caller: anyone else could answer with made-up
        // numbers. The kernel says who listens on the socket connected to, whatever
        // its path showed a moment before.
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        match peer(&stream) {
            Some((_, uid)) if uid == 0 || uid == euid => {}
            found => {
                let who = found.map_or("an owner the kernel does not name".into(), |(_, u)| {
                    format!("uid {u}")
                });
                let e = std::io::Error::other(format!(
                    "it is served by {who}, neither root nor you; nothing was asked"
                ));
                return Err(file_error("not asking the device's owner at", socket, e));
            }
        }
        let io = |e| file_error("cannot talk to the device's owner at", socket, e);
        stream.set_read_timeout(Some(ANSWER_WITHIN)).map_err(io)?;
        stream.set_write_timeout(Some(ANSWER_WITHIN)).map_err(io)?;
        let resolved = crate::spec::resolve(device, specs)?;
        let mut shared = Shared {
            reader: BufReader::new(stream),
            path: socket.to_path_buf(),
            plans: Vec::new(),
            base: Vec::new(),
            last: Vec::new(),
            at_ns: 0,
        };
        let mine = Serves::of(device);
        let asked = AskWhat::Count {
            specs: specs.to_vec(),
            command,
            device: Some(mine.clone()),
        };
        let answer = shared.ask(asked)?;
        let blocks = shared.granted(answer, &mine)?;
        shared.plans = plans_of(resolved.blocks, &blocks).ok_or_else(|| {
            shared.confused(&AnswerWhat::Granted {
                blocks: blocks.clone(),
                device: mine.clone(),
            })
        })?;
        Ok(Some(shared))
    }

    /// The blocks a `count` was granted on the client's device `mine`; a refusal,
    /// or a grant on another device (ended at once: its numbers would be that
    /// device's), as an error naming why.
    fn granted(&mut self, answer: AnswerWhat, mine: &Serves) -> Result<Vec<GrantedBlock>> {
        let socket = self.path.clone();
        let refused = |reason| Error::Refused { reason, socket };
        match answer {
            AnswerWhat::Granted { device, .. } if !device.same(mine) => {
                let _ = self.ask(AskWhat::End);
                Err(refused(not_served(mine, &device)))
            }
            AnswerWhat::Granted { blocks, .. } => Ok(blocks),
            AnswerWhat::Refused { reason } => Err(refused(reason)),
            other => Err(self.confused(&other)),
        }
    }

    fn ask(&mut self, what: AskWhat) -> Result<AnswerWhat> {
        let io = |path: &Path, e| file_error("cannot talk to the device's owner at", path, e);
        // An owner that refuses a request as soon as it has read enough of it may
        // close before the rest is written: its answer, already sent, is still
        // read and said, rather than the broken connection.
        let sent = send(
            self.reader.get_mut(),
            &Ask {
                bfperf: VERSION,
                what,
            },
        );
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line);
        let n = match (sent, n) {
            (_, Ok(n)) if n > 0 => n,
            (Err(e), _) | (Ok(()), Err(e)) => return Err(io(&self.path, e)),
            (Ok(()), Ok(n)) => n,
        };
        if n == 0 {
            return Err(io(
                &self.path,
                std::io::Error::other("it closed the connection (it stopped, or reloaded)"),
            ));
        }
        let answer: Answer = serde_json::from_slice(&line).map_err(|e| {
            io(
                &self.path,
                std::io::Error::other(format!("it answered what bfperf cannot read: {e}")),
            )
        })?;
        if answer.bfperf != VERSION {
            return Err(io(
                &self.path,
                std::io::Error::other(format!(
                    "it speaks version {} of the protocol, this bfperf {VERSION}: run the same bfperf for both",
                    answer.bfperf
                )),
            ));
        }
        Ok(answer.what)
    }

    fn confused(&self, what: &AnswerWhat) -> Error {
        file_error(
            "the device's owner answered out of turn at",
            &self.path,
            std::io::Error::other(format!("{what:?}")),
        )
    }

    /// Reads the owner's accumulators now.
    pub(crate) fn tick(&mut self) -> Result<()> {
        match self.ask(AskWhat::Read)? {
            AnswerWhat::Totals { at_ns, blocks } if self.fits(&blocks) => {
                self.last = blocks;
                self.at_ns = at_ns;
                Ok(())
            }
            other => Err(self.confused(&other)),
        }
    }

    fn fits(&self, blocks: &[Vec<Acc>]) -> bool {
        blocks.len() == self.plans.len()
            && blocks
                .iter()
                .zip(&self.plans)
                .all(|(b, p)| b.len() == p.items.len())
    }

    /// Reads the owner's accumulators at or after the time `pacer` gives now, not an
    /// earlier reading: waits out the rest of [`READ_EVERY_NS`] since the previous
    /// one first. For a boundary that must lie after what it marks (a control word
    /// came, a run starts).
    pub(crate) fn tick_fresh(&mut self, pacer: &dyn crate::measure::Pacer) -> Result<()> {
        let ready = self.at_ns.saturating_add(READ_EVERY_NS);
        let now = pacer.now_ns();
        if self.at_ns != 0 && now < ready {
            pacer.sleep(Duration::from_nanos(ready - now));
        }
        self.tick()
    }

    /// Counts from 0 from now (a fresh reading, [`Shared::tick_fresh`]).
    pub(crate) fn rebase(&mut self, pacer: &dyn crate::measure::Pacer) -> Result<()> {
        self.tick_fresh(pacer)?;
        self.base = self.last.clone();
        Ok(())
    }

    /// Reads the owner's accumulators now: each item's counts since the previous
    /// read (scaled by its coverage, marked where another program touched it), and
    /// the seconds between the two reads. For a live view (`bfperf top`).
    pub(crate) fn interval(&mut self) -> Result<(Vec<crate::measure::Count>, f64)> {
        let (before, then) = (self.last.clone(), self.at_ns);
        self.tick()?;
        let accs = Acc::all_since(&self.last, &before);
        let span_ns = self.at_ns.saturating_sub(then);
        let counts = crate::measure::counts(&self.plans, &accs, span_ns);
        Ok((counts, span_ns as f64 / 1e9))
    }

    /// What each item counted since the last rebase.
    pub(crate) fn totals(&self) -> Vec<Vec<Acc>> {
        Acc::all_since(&self.last, &self.base)
    }
}

impl Drop for Shared<'_> {
    /// Ends the measurement and waits for the owner to put the counters back, so
    /// that the device is as it was when the command returns (a client that dies
    /// instead is ended by the owner when its connection closes).
    fn drop(&mut self) {
        let _ = self.ask(AskWhat::End);
    }
}

/// The client's plans: its own resolution of the specs, with the owner's counters.
/// None when the owner's answer does not match it.
fn plans_of<'d>(
    requests: Vec<crate::spec::BlockRequest<'d>>,
    granted: &[GrantedBlock],
) -> Option<Vec<BlockPlan<'d>>> {
    if requests.len() != granted.len() {
        return None;
    }
    requests
        .into_iter()
        .zip(granted)
        .map(|(r, g)| {
            if r.block.name != g.block || r.items.len() != g.counters.len() {
                return None;
            }
            let fixed: Vec<Slot> = g
                .counters
                .iter()
                .enumerate()
                .filter_map(|(item, c)| {
                    Some(Slot {
                        counter: (*c)?,
                        item,
                    })
                })
                .collect();
            // A plan's counters are labels here: an item that takes turns makes the
            // block's counts unlabelled, as a multiplexed block's are.
            let groups = match g.counters.iter().any(Option::is_none) {
                true => vec![fixed, Vec::new()],
                false => vec![fixed],
            };
            Some(BlockPlan::new(r.block, r.items, groups))
        })
        .collect()
}

fn file_error(what: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::File {
        what,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests;
