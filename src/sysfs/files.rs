//! Files a user or an administrator controls (configs, credentials): read bounded,
//! regular files only, never through a link where it matters, secrets kept private.

use super::*;

/// Reads a configuration file a user named as UTF-8 text: see [`read_regular`].
pub(crate) fn read_config(path: &Path) -> crate::Result<String> {
    let bytes = read_regular(path, "cannot read the configuration file", MAX_CONFIG)?;
    String::from_utf8(bytes).map_err(|_| crate::Error::File {
        what: "cannot read the configuration file",
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"),
    })
}

/// Checks that a file a user named can be read as configuration (see
/// [`read_regular`]) without reading it.
pub(crate) fn check_config(path: &Path, what: &'static str) -> crate::Result<()> {
    open_regular(path, what).map(drop)
}

/// Reads a file a user named (configuration, a certificate, a key): opened without
/// blocking (a FIFO cannot hang bfperf), a regular file only (a link the user gave is
/// followed; a device such as /dev/zero, a FIFO, a socket or a directory is refused),
/// at most `max` bytes. The error names the file, what it was for and what it is.
pub(crate) fn read_regular(path: &Path, what: &'static str, max: u64) -> crate::Result<Vec<u8>> {
    read_bounded(open_regular(path, what)?, path, what, max)
}

/// All of an opened `file` (`path`, read for `what`), refused when it holds more
/// than `max` bytes.
fn read_bounded(
    file: fs::File,
    path: &Path,
    what: &'static str,
    max: u64,
) -> crate::Result<Vec<u8>> {
    let fail = |source: io::Error| crate::Error::File {
        what,
        path: path.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    file.take(max + 1).read_to_end(&mut out).map_err(fail)?;
    if out.len() as u64 > max {
        let size = match max >= 1 << 20 {
            true => format!("{} MiB", max >> 20),
            false => format!("{} KiB", max >> 10),
        };
        return Err(fail(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it holds more than {size}, more than such a file ever needs"),
        )));
    }
    Ok(out)
}

/// Reads a secret a user named (a TLS key, a token, a password): as
/// [`read_regular`], and more strictly, since what it holds leaves the machine or
/// proves who bfperf is: the name itself is opened, never a link's target
/// (`O_NOFOLLOW`), and the file must belong to root or to bfperf's own user and be
/// writable by no one else, so that nobody else can put another file's content
/// (`/etc/shadow`) in its place. Checked on the opened descriptor.
pub(crate) fn read_secret(path: &Path, what: &'static str, max: u64) -> crate::Result<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let fail = |source: io::Error| crate::Error::File {
        what,
        path: path.to_path_buf(),
        source,
    };
    let refuse = |why: String| fail(io::Error::new(io::ErrorKind::PermissionDenied, why));
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refuse(
                "it is a symbolic link; name the file itself (bfperf follows no link to a secret)"
                    .into(),
            ),
            _ => fail(e),
        })?;
    let md = file.metadata().map_err(fail)?;
    if !md.file_type().is_file() {
        return Err(refuse(format!(
            "it is {}, not a regular file",
            kind_name(&md.file_type())
        )));
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if md.uid() != 0 && md.uid() != me {
        return Err(refuse(format!(
            "it belongs to user {}, not to root or to bfperf's user (uid {me})",
            md.uid()
        )));
    }
    if md.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "others can write it (mode {:o}): chmod go-w it",
            md.mode() & 0o7777
        )));
    }
    read_bounded(file, path, what, max)
}

fn open_regular(path: &Path, what: &'static str) -> crate::Result<fs::File> {
    let fail = |source: io::Error| crate::Error::File {
        what,
        path: path.to_path_buf(),
        source,
    };
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(fail)?;
    let kind = file.metadata().map_err(fail)?.file_type();
    if !kind.is_file() {
        return Err(fail(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it is {}, not a regular file (bfperf reads such files only when they are regular files, so that none can hang it or flood its memory)",
                kind_name(&kind)
            ),
        )));
    }
    Ok(file)
}
