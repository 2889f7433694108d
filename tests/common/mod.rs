//! Helpers shared by the integration tests: fixture copies in temp dirs, the binary.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use walkdir::WalkDir;

/// The checked-in fixture root of a generation (`bf1`, `bf2`, `bf3`).
pub fn fixture(gen: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(gen)
}

/// The device directory inside a fixture root.
pub fn device_dir(root: &Path) -> PathBuf {
    root.join("class/hwmon/hwmon3")
}

/// Copies a tree, keeping symlinks as symlinks.
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in WalkDir::new(from).follow_links(false) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        let ft = entry.file_type();
        if ft.is_symlink() {
            symlink(fs::read_link(entry.path()).unwrap(), &dest).unwrap();
        } else if ft.is_dir() {
            fs::create_dir_all(&dest).unwrap();
        } else {
            fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// A writable copy of a fixture in a temp dir.
pub struct Copy {
    pub dir: tempfile::TempDir,
}

impl Copy {
    pub fn of(gen: &str) -> Copy {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&fixture(gen), dir.path());
        Copy { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn device(&self) -> PathBuf {
        device_dir(self.root())
    }

    /// A file of the device, e.g. `tile2/event3`.
    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.device().join(rel)).unwrap()
    }

    /// Every file's content, to prove a rejected command wrote nothing.
    pub fn contents(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        tree_contents(self.root())
    }

    pub fn cmd(&self) -> Command {
        let mut c = bfperf();
        c.arg("--sysfs-root").arg(self.root());
        c
    }
}

pub fn tree_contents(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(root).unwrap().to_path_buf(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// The bfperf binary, with no environment that could point it elsewhere.
pub fn bfperf() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin!("bfperf"));
    c.env_remove("BFPERF_SYSFS_ROOT");
    c
}

/// bfperf on a checked-in fixture (read-only commands).
pub fn on_fixture(gen: &str) -> Command {
    let mut c = bfperf();
    c.arg("--sysfs-root").arg(fixture(gen));
    c
}

/// Runs and returns stdout; panics with stderr on failure.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Rows of a table output, each split on runs of spaces.
pub fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}
