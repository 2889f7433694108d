//! bfperf's integration tests, one binary: each module drives the real binary (or
//! the library's public API) against fixture copies, the in-process simulator and
//! the FUSE simulator, and the real components (bash, zsh, fish, tmux, promtool,
//! Prometheus, curl) where a test names them.

mod common;

mod completion;
mod discovery;
mod docs;
mod events;
mod exporter;
mod fixtures;
mod fuse;
mod grammar;
mod kernels;
mod metrics;
mod output;
mod perf;
mod plot;
mod program;
mod security;
mod sim;
mod snapshot;
mod stat;
mod top;
mod trust;
mod window;
