//! The bfperf command: everything is in the library; this only sets the exit code.
//!
//! Its own C entry point instead of Rust's runtime setup, which would quietly point a
//! closed standard output at /dev/null before `main`: `bfperf read >&-` would then
//! exit 0 having written nothing. [`bfperf::cli::entry`] does the rest of that setup
//! (the streams, SIGPIPE) and reports a closed output. Arguments still reach
//! `std::env::args`: glibc hands them to the standard library at load time.
#![no_main]

use std::ffi::{c_char, c_int};

/// The process's entry point.
#[no_mangle]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    std::process::exit(bfperf::cli::entry())
}
