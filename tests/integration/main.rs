//! bfperf's integration tests, one binary: each module drives the real binary (or
//! the library's public API) against fixture copies, the in-process simulator and
//! the FUSE simulator, and the real components (bash, zsh, fish, tmux, promtool,
//! Prometheus, curl) where a test names them.

mod support;

/// Every bfperf the tests start (directly, or through a shell, tmux or a completion
/// script) keeps its locks, journals and sockets in a directory of this run's own,
/// never in the machine's `/run/bfperf`: set in the environment before `main`, while
/// the process has one thread, so that every child inherits it.
#[used]
#[link_section = ".init_array"]
static ISOLATE_STATE: extern "C" fn() = isolate_state;

extern "C" fn isolate_state() {
    use std::os::unix::fs::DirBuilderExt;
    if std::env::var_os("BFPERF_STATE_DIR").is_some() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bfperf-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .is_ok()
    {
        std::env::set_var("BFPERF_STATE_DIR", dir);
    }
}

mod completion;
mod control;
mod discovery;
mod docs;
mod events;
mod exporter;
mod fixtures;
mod fuse;
mod golden;
mod grammar;
mod habits;
mod kernels;
mod metrics;
mod otlp;
mod output;
mod owner;
mod perf;
mod perf_x;
mod plot;
mod program;
mod readme;
mod remote_write;
mod security;
mod sim;
mod snapshot;
mod stat;
mod top;
mod trust;
mod window;
