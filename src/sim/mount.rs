//! `bfperf sim mount`: the simulator served as a FUSE filesystem laid out like a sysfs
//! root, so that scripts and bfperf itself can drive it with plain file I/O.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation as FuseGen,
    INodeNo, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

use crate::error::{errno, Error, Result};
use crate::sim::root::{SysfsRootLayout, VNode};
use crate::sim::Sim;
use crate::sysfs::{EntryKind, Sysfs};

const TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
enum Content {
    Dir(Vec<(String, u64)>),
    Static(String),
    Link(String),
    /// A file of the simulated device, by its path relative to the device.
    Device(String),
}

#[derive(Debug, Clone)]
/// An open file: where its text comes from, and the text of the last read at 0.
struct OpenFile {
    source: Option<String>,
    content: std::result::Result<Vec<u8>, i32>,
}

struct Inode {
    parent: u64,
    content: Content,
    writable: bool,
}

/// The FUSE filesystem: a fixed tree of inodes; device files are served by the model.
pub struct SimFs {
    sim: Arc<Sim>,
    inodes: Vec<Inode>,
    open: Mutex<HashMap<u64, OpenFile>>,
    next_fh: AtomicU64,
    started: SystemTime,
}

impl SimFs {
    /// Builds the inode table of the sysfs root around `sim`.
    pub fn new(sim: Arc<Sim>, layout: SysfsRootLayout) -> std::io::Result<SimFs> {
        let mut fs = SimFs {
            sim: sim.clone(),
            // Inode 0 is unused; the root is inode 1 (FUSE_ROOT_ID).
            inodes: vec![Inode {
                parent: 0,
                content: Content::Dir(Vec::new()),
                writable: false,
            }],
            open: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            started: SystemTime::now(),
        };
        let tree = layout.tree(sim.generation());
        fs.add_vnode(1, &tree)?;
        Ok(fs)
    }

    fn push(&mut self, parent: u64, content: Content, writable: bool) -> u64 {
        self.inodes.push(Inode {
            parent,
            content,
            writable,
        });
        (self.inodes.len() - 1) as u64
    }

    fn add_child(&mut self, dir: u64, name: &str, child: u64) {
        if let Content::Dir(children) = &mut self.inodes[dir as usize].content {
            children.push((name.to_string(), child));
        }
    }

    fn add_vnode(&mut self, parent: u64, node: &VNode) -> std::io::Result<u64> {
        let ino = match node {
            VNode::Dir(children) => {
                // The first directory pushed is inode 1, the root.
                let ino = self.push(parent, Content::Dir(Vec::new()), false);
                for (name, child) in children {
                    let c = self.add_vnode(ino, child)?;
                    self.add_child(ino, name, c);
                }
                ino
            }
            VNode::File(text) => self.push(parent, Content::Static(text.clone()), false),
            VNode::Link(target) => self.push(parent, Content::Link(target.clone()), false),
            VNode::Device => {
                let ino = self.push(parent, Content::Dir(Vec::new()), false);
                self.add_device_dir(ino, "")?;
                ino
            }
        };
        Ok(ino)
    }

    fn add_device_dir(&mut self, ino: u64, rel: &str) -> std::io::Result<()> {
        for entry in self.sim.list(rel)? {
            let child_rel = if rel.is_empty() {
                entry.name.clone()
            } else {
                format!("{rel}/{}", entry.name)
            };
            let child = match entry.kind {
                // The simulator names its files in UTF-8.
                EntryKind::NotUtf8 => continue,
                EntryKind::Dir => {
                    let c = self.push(ino, Content::Dir(Vec::new()), false);
                    self.add_device_dir(c, &child_rel)?;
                    c
                }
                EntryKind::Symlink => {
                    let target = self.sim.read_link(&child_rel)?;
                    self.push(ino, Content::Link(target), false)
                }
                EntryKind::File => {
                    let writable = !matches!(
                        entry.name.as_str(),
                        "name" | "uevent" | "event_list" | "modalias" | "runtime_status"
                    );
                    self.push(ino, Content::Device(child_rel), writable)
                }
            };
            self.add_child(ino, &entry.name, child);
        }
        Ok(())
    }

    fn inode(&self, ino: INodeNo) -> Option<&Inode> {
        self.inodes.get(ino.0 as usize).filter(|_| ino.0 != 0)
    }

    fn attr(&self, ino: u64) -> FileAttr {
        let node = &self.inodes[ino as usize];
        let (kind, perm, size, nlink) = match &node.content {
            Content::Dir(_) => (FileType::Directory, 0o755, 0, 2),
            Content::Static(t) => (FileType::RegularFile, 0o444, t.len() as u64, 1),
            Content::Link(t) => (FileType::Symlink, 0o777, t.len() as u64, 1),
            Content::Device(_) => (
                FileType::RegularFile,
                if node.writable { 0o644 } else { 0o444 },
                4096,
                1,
            ),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: 0,
            atime: self.started,
            mtime: self.started,
            ctime: self.started,
            crtime: self.started,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn kind_of(&self, ino: u64) -> FileType {
        self.attr(ino).kind
    }
}

fn errno_of(e: &std::io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(errno::EIO))
}

impl Filesystem for SimFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(Inode {
            content: Content::Dir(children),
            ..
        }) = self.inode(parent)
        else {
            return reply.error(Errno::ENOTDIR);
        };
        match children.iter().find(|(n, _)| OsStr::new(n) == name) {
            Some((_, ino)) => reply.entry(&TTL, &self.attr(*ino), FuseGen(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.inode(ino) {
            Some(_) => reply.attr(&TTL, &self.attr(ino.0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Truncation on open (`echo x > file`) is accepted and ignored, as sysfs does.
        match self.inode(ino) {
            Some(_) => reply.attr(&TTL, &self.attr(ino.0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.inode(ino).map(|n| &n.content) {
            Some(Content::Link(t)) => reply.data(t.as_bytes()),
            _ => reply.error(Errno::EINVAL),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let Some(node) = self.inode(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let mode = flags.acc_mode();
        let wants_write = matches!(mode, OpenAccMode::O_WRONLY | OpenAccMode::O_RDWR);
        if wants_write && !node.writable {
            return reply.error(Errno::EACCES);
        }
        let content = match &node.content {
            Content::Static(t) => Ok(t.clone().into_bytes()),
            // Like sysfs, the text is made by a read at offset 0, not by the open:
            // a read (and an injected fault, `--sim-faults`) is one `read`.
            Content::Device(_) => Ok(Vec::new()),
            Content::Dir(_) => return reply.error(Errno::EISDIR),
            Content::Link(_) => return reply.error(Errno::ELOOP),
        };
        let source = match &node.content {
            Content::Device(rel) => Some(rel.clone()),
            _ => None,
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fh, OpenFile { source, content });
        reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let Some(file) = open.get_mut(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        // Like sysfs, a read at offset 0 makes the text afresh (`pread(fd, buf, 0)`
        // samples a counter on a file opened once).
        if let (0, Some(rel)) = (offset, &file.source) {
            file.content = self
                .sim
                .read(rel)
                .map(String::into_bytes)
                .map_err(|e| e.raw_os_error().unwrap_or(errno::EIO));
        }
        match &file.content {
            Ok(bytes) => {
                let start = (offset as usize).min(bytes.len());
                let end = (start + size as usize).min(bytes.len());
                reply.data(&bytes[start..end]);
            }
            Err(e) => reply.error(Errno::from_i32(*e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.inode(ino).map(|n| &n.content) {
            Some(Content::Device(rel)) => match self.sim.write(rel, data) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(errno_of(&e)),
            },
            _ => reply.error(Errno::EACCES),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fh.0);
        reply.ok();
    }

    // Sysfs has no create, mkdir or unlink: the VFS refuses creating with EACCES and
    // removing or renaming with EPERM, and so does the simulator.
    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(Errno::EACCES);
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EACCES);
    }

    fn mkdir(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EACCES);
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EPERM);
    }

    fn rmdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EPERM);
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EPERM);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(node) = self.inode(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let Content::Dir(children) = &node.content else {
            return reply.error(Errno::ENOTDIR);
        };
        let parent = if ino.0 == 1 { 1 } else { node.parent };
        let mut entries: Vec<(u64, FileType, &str)> = vec![
            (ino.0, FileType::Directory, "."),
            (parent, FileType::Directory, ".."),
        ];
        entries.extend(
            children
                .iter()
                .map(|(n, c)| (*c, self.kind_of(*c), n.as_str())),
        );
        for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

/// Mounts the simulator at `dir`, laid out as `layout` says, and serves it until
/// SIGINT or SIGTERM (or until it is unmounted from outside), then unmounts.
pub fn serve(sim: Arc<Sim>, dir: &Path, layout: SysfsRootLayout) -> Result<()> {
    let file_err = |what: &'static str, source| Error::File {
        what,
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| file_err("cannot create the mount point", e))?;
    let label = sim.location();
    let fs = SimFs::new(sim, layout).map_err(|e| file_err("cannot build the tree for", e))?;

    // Block the signals before the FUSE thread starts, so that only sigtimedwait sees them.
    // SAFETY: plain libc signal-set calls on a set we own.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let mut config = Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("bfperf-sim".to_string()),
        fuser::MountOption::Subtype("bfperf".to_string()),
        fuser::MountOption::DefaultPermissions,
    ];
    // Mounted by root, every user may read it, as everyone reads sysfs (the modes,
    // root's files 0644, still keep writes root's); FUSE lets only root say so.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        config.acl = fuser::SessionACL::All;
    }
    let session = fuser::spawn_mount(fs, dir, &config).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied
            || e.kind() == std::io::ErrorKind::NotFound
        {
            " (FUSE needs /dev/fuse and either root or the fusermount3 helper: install the fuse3 package)"
        } else {
            ""
        };
        Error::File {
            what: if hint.is_empty() {
                "cannot mount the simulator at"
            } else {
                "cannot mount the simulator (FUSE unavailable) at"
            },
            path: dir.to_path_buf(),
            source: std::io::Error::new(e.kind(), format!("{e}{hint}")),
        }
    })?;
    say(&format!(
        "bfperf: serving a {label} at {} (device: {}/class/hwmon/hwmon{}); Ctrl-C to stop",
        dir.display(),
        dir.display(),
        layout.hwmon_index
    ));
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    loop {
        // SAFETY: waits on the blocked set; info may be null.
        let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout) };
        if sig > 0 || session.guard.is_finished() {
            break;
        }
    }
    detach(dir).map_err(|e| file_err("cannot unmount the simulator from", e))?;
    // Requests in flight (a reader blocked in the kernel) need not end first: the
    // session gets a second, then the process ends, closing /dev/fuse, which fails
    // whatever is still waiting on it.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while !session.guard.is_finished() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    say(&format!("bfperf: unmounted {}", dir.display()));
    Ok(())
}

/// Takes the mount at `dir` out of the tree at once, even while files in it are
/// open or requests are in flight (a lazy unmount, as `umount -l`): no process can
/// enter it again, and no dead mount is left behind when the server ends. Already
/// gone (unmounted from outside) is fine.
fn detach(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: umount2 on a NUL-terminated path we own.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        // Not a mount point any more: someone unmounted it.
        Some(libc::EINVAL) => Ok(()),
        // Not root: the fuse3 package's helper unmounts a user's mount.
        Some(libc::EPERM) => {
            let status = std::process::Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(dir)
                .status()?;
            match status.success() {
                true => Ok(()),
                false => Err(std::io::Error::other(format!(
                    "fusermount3 -u -z: {status}"
                ))),
            }
        }
        _ => Err(e),
    }
}

/// One line on stderr; a closed stderr is ignored (never a panic).
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
