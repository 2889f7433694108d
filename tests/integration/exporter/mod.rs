//! The exporter (`bfperf exporter`, `bfperf-exporter`) driven as a process against the
//! FUSE simulator and a real Prometheus, one file per behaviour. Its helpers are in
//! [`crate::support`].

mod access;
mod faults;
mod reloads;
mod serving;
mod sharing;
