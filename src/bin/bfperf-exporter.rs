//! The bfperf-exporter program: everything is in the library
//! ([`bfperf::exporter::entry`]); this only sets the exit code.
//!
//! Its own C entry point instead of Rust's runtime setup, as `bfperf`'s: the standard
//! streams are made safe by the library before anything is opened.
// Under `cargo test` the test harness brings its own main.
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
use std::ffi::{c_char, c_int};

#[path = "../math_symbols.rs"]
mod math_symbols;

/// The process's entry point.
#[cfg(not(test))]
#[no_mangle]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // A panic may not unwind out of a C function: it ends here, with the status
    // Rust's own runtime gives it (after the panic hook has said what happened).
    let code = std::panic::catch_unwind(bfperf::exporter::entry).unwrap_or(101);
    std::process::exit(code)
}
