//! The bfperf command: everything is in the library; this only sets the exit code.
//!
//! Its own C entry point instead of Rust's runtime setup, which would quietly point a
//! closed standard output at /dev/null before `main`: `bfperf read >&-` would then
//! exit 0 having written nothing. [`bfperf::cli::entry`] does the rest of that setup
//! (the streams, SIGPIPE) and reports a closed output. Arguments still reach
//! `std::env::args`: glibc hands them to the standard library at load time.
// Under `cargo test` the test harness brings its own main.
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
use std::ffi::{c_char, c_int};

mod math_symbols;

/// The process's entry point.
#[cfg(not(test))]
#[no_mangle]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // A panic may not unwind out of a C function: it ends here, with the status
    // Rust's own runtime gives it (after the panic hook has said what happened).
    let code = std::panic::catch_unwind(bfperf::cli::entry).unwrap_or(101);
    std::process::exit(code)
}
