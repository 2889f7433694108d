//! Typed errors of the library. Every message says what failed, which file, and what
//! to do about it.

use std::io;
use std::path::PathBuf;

/// The result type of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// errno values the driver (and the simulator) answer with.
pub mod errno {
    pub use libc::{EACCES, EINVAL, EIO, EISDIR, ENODEV, ENOENT, ERANGE};
}

/// Everything that can go wrong. Each variant's message (its `Display`) says what
/// failed, which file, and what to do; its fields hold the parts of that message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sysfs root has no `class/hwmon`.
    #[error("{root}/class/hwmon does not exist: {root} is not a sysfs root (pass --sysfs-root DIR or --device DIR; without a DPU, try a simulated one: --sim bf3)", root = root.display())]
    NoHwmon {
        /// The sysfs root searched.
        root: PathBuf,
    },

    /// No hwmon device is named `bfperf`.
    #[error("no bfperf device under {dir} (hwmon devices found: {found}); {why}", dir = dir.display())]
    NoDevice {
        /// The hwmon directory searched.
        dir: PathBuf,
        /// The names of the hwmon devices found there.
        found: String,
        /// Why, as far as the system tells, and what to do.
        why: String,
    },

    /// Several hwmon devices are named `bfperf`.
    #[error("more than one bfperf device: {}; choose one with --device DIR", list.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    ManyDevices {
        /// Their directories.
        list: Vec<PathBuf>,
    },

    /// `--device` names a directory that is not the driver's device.
    #[error("{path} is not a bfperf device: {reason}", path = path.display())]
    NotADevice {
        /// The directory given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// No block of that name.
    #[error("unknown block '{name}'{hint}")]
    UnknownBlock {
        /// The name given.
        name: String,
        /// Suggestions (`; did you mean ...`), or empty.
        hint: String,
    },

    /// The block's event table has no event of that name.
    #[error("unknown event '{name}' for block {block}{hint}")]
    UnknownEvent {
        /// The name given.
        name: String,
        /// The block.
        block: String,
        /// Suggestions, or empty.
        hint: String,
    },

    /// The words after `program BLOCK` are not COUNTER EVENT or COUNTER=EVENT pairs.
    #[error("{problem}")]
    BadAssignment {
        /// What is wrong and how to write it.
        problem: String,
    },

    /// A command-line option's value that bfperf cannot take (`--listen`, `-x`,
    /// `--pcie-link`, `--sim`, the command to run), or options that do not go
    /// together.
    #[error("{problem}")]
    BadOption {
        /// What is wrong and how to write it.
        problem: String,
    },

    /// A command of a feature this binary was built without.
    #[error("this bfperf was built without the `{feature}` feature; build it with `cargo build --features {feature}`")]
    NotBuilt {
        /// The feature.
        feature: &'static str,
    },

    /// No TrueType font for a chart's text.
    #[error(
        "no TrueType font for the chart's text: install fonts-dejavu-core (looked for {looked})"
    )]
    NoFont {
        /// The files looked for.
        looked: String,
    },

    /// A counter number that the block does not have, or that is not a number.
    #[error("{problem} (it has counters {range})")]
    BadCounter {
        /// The block.
        block: String,
        /// What is wrong.
        problem: String,
        /// The counters it has (`0-3`).
        range: String,
    },

    /// An event (or register) the block cannot count as given.
    #[error("{problem}")]
    BadEvent {
        /// The block.
        block: String,
        /// What is wrong.
        problem: String,
    },

    /// The block's mechanism cannot do what was asked (start a per-counter block,
    /// program a registers block, clear L3 counters one by one...).
    #[error("{problem}")]
    NotSupported {
        /// The block.
        block: String,
        /// What it cannot do, and what to do instead.
        problem: String,
    },

    /// An event spec (`-e BLOCKS/EVENTS/`) that cannot be counted; nothing was written.
    #[error("-e '{spec}': {problem}")]
    BadSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong.
        problem: String,
    },

    /// A metric that cannot be used: where it is defined and why.
    #[error("metric '{metric}'{}: {problem}", if source_file.is_empty() { String::new() } else { format!(" ({source_file})") })]
    BadMetric {
        /// The metric's name.
        metric: String,
        /// The file defining it (empty for a name that matched nothing).
        source_file: String,
        /// What is wrong.
        problem: String,
    },

    /// A block with neither counter nor register files: nothing can be written.
    #[error("{block} is an empty block (no counter or register files): there is nothing to {action}; check `ls` of its directory and the driver's messages in dmesg")]
    EmptyBlock {
        /// The block.
        block: String,
        /// What was asked (`program`, `clear`...).
        action: &'static str,
    },

    /// A kind selector that matches no block on this device.
    #[error("this device ({generation}) has no {kind} blocks; its kinds are {kinds}")]
    NoBlocksOfKind {
        /// The kind asked for.
        kind: String,
        /// The device's generation.
        generation: String,
        /// The kinds it has.
        kinds: String,
    },

    /// A device file holds something bfperf cannot parse.
    #[error("unexpected content in {file}: {content:?} (expected {expected})")]
    BadContent {
        /// The file, relative to the device.
        file: String,
        /// What it held.
        content: String,
        /// What was expected instead.
        expected: &'static str,
    },

    /// A configuration file that cannot be used.
    #[error("{path}: {problem}", path = path.display())]
    BadConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },

    /// A snapshot file that cannot be used.
    #[error("{path}: {problem}", path = path.display())]
    BadSnapshot {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },

    /// Two snapshots that cannot be compared as given.
    #[error("{problem}")]
    SnapshotMismatch {
        /// Why they cannot be compared.
        problem: String,
    },

    /// The device could not be put back as it was after a measurement.
    #[error(
        "could not restore the counters as they were: {problems}; check them with `bfperf read`"
    )]
    RestoreFailed {
        /// Each write that failed.
        problems: String,
    },

    /// Another writer holds the device.
    #[error("another program is writing the counters ({holder}); two writers reset each other's counters and both read garbage: wait for it to finish, or pass --wait to queue (lock {path})", path = path.display())]
    Busy {
        /// Who holds it (PID, command, since when), as its record says.
        holder: String,
        /// The lock file.
        path: PathBuf,
    },

    /// The program that owns the device (the exporter) would not count a client's
    /// events beside its own.
    #[error("the exporter that owns the device cannot count these events beside its own: {reason} (asked through {socket})", socket = socket.display())]
    Refused {
        /// Why, as the owner says.
        reason: String,
        /// The owner's socket.
        socket: PathBuf,
    },

    /// A failure, then another while cleaning up after it (a restore): the first is
    /// kept whole as the cause.
    #[error("{first}; then: {then}")]
    Then {
        /// What failed first.
        #[source]
        first: Box<Error>,
        /// What failed after it.
        then: String,
    },

    /// A writer died without restoring the device, and its journal is still there.
    #[error("pid {pid} ({command}) was stopped without restoring {blocks}; its journal {path} holds the programming they had before, which `bfperf restore` puts back. Run `bfperf restore` first, or pass --discard-journal to keep the device as it is now and forget the journal", path = path.display())]
    PendingJournal {
        /// The journal.
        path: PathBuf,
        /// The writer that left it.
        pid: u32,
        /// Its command line.
        command: String,
        /// The blocks it would put back.
        blocks: String,
    },

    /// An output file bfperf refuses to replace.
    #[error("refusing to write {path}: {problem}", path = path.display())]
    OutputTarget {
        /// The file.
        path: PathBuf,
        /// Why it is refused.
        problem: String,
    },

    /// A file access failed. `message` already names the file and the remedy.
    #[error("{message}")]
    Io {
        /// What failed, on which file, and what to do.
        message: String,
        /// The system's error.
        #[source]
        source: io::Error,
    },

    /// A file (snapshot, output) outside the device.
    #[error("{what} {path}: {source}", path = path.display())]
    File {
        /// What could not be done (`cannot read`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// The io error behind this error, if any.
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            Error::Io { source, .. } | Error::File { source, .. } => Some(source),
            _ => None,
        }
    }

    /// True when the driver refused a write with EINVAL.
    pub fn is_einval(&self) -> bool {
        self.io_error().and_then(|e| e.raw_os_error()) == Some(errno::EINVAL)
    }
}

/// Turns an io error on a device file into a message for people.
/// `op` is "reading", "writing" or "listing"; `rel` is the path relative to the device.
pub(crate) fn io_error(op: &str, rel: &str, data: Option<&[u8]>, source: io::Error) -> Error {
    let shown = if rel.is_empty() {
        "the device directory"
    } else {
        rel
    };
    let message = match (source.kind(), source.raw_os_error()) {
        (io::ErrorKind::PermissionDenied, _) if op == "writing" => format!(
            "permission denied writing {shown}: run as root (the driver's files are writable by root only)"
        ),
        (io::ErrorKind::PermissionDenied, _) => {
            format!("permission denied {op} {shown}: run as root")
        }
        (io::ErrorKind::NotFound, _) => format!(
            "{shown} does not exist ({op}): the block or file is not present on this device"
        ),
        (_, Some(errno::EINVAL)) if op == "writing" => format!(
            "the driver rejected writing '{}' to {shown} (Invalid argument)",
            data.map(|d| String::from_utf8_lossy(d).trim_end().to_string())
                .unwrap_or_default()
        ),
        (_, Some(errno::EINVAL)) => {
            format!("the driver refused {op} {shown} (Invalid argument)")
        }
        _ => format!("{op} {shown}: {source}"),
    };
    Error::Io { message, source }
}

/// Adds an explanation to an Io error's message (keeps the source).
pub(crate) fn with_hint(err: Error, hint: &str) -> Error {
    match err {
        Error::Io { message, source } => Error::Io {
            message: format!("{message}: {hint}"),
            source,
        },
        other => other,
    }
}

/// Adds a second failure to an error's message (a restore that failed after it).
pub(crate) fn with_context(err: Error, more: &str) -> Error {
    match err {
        Error::Io { message, source } => Error::Io {
            message: format!("{message}; then: {more}"),
            source,
        },
        other => Error::Then {
            first: Box::new(other),
            then: more.to_string(),
        },
    }
}

/// A TOML parse error as people read one: where it is (line and column of `text`),
/// then what.
pub(crate) fn toml_problem(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {}", e.message())
        }
        None => e.message().to_string(),
    }
}
