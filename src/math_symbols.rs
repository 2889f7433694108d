//! The functions of the C math library the programs call, defined in the program
//! from the `libm` crate (the Rust port of musl's, correct to within an ulp as
//! glibc's are): `pow` (a metric formula's `^`, plot axes), `log` (plot axes),
//! `log10` (numbers shown to three significant digits, `top`'s scale) and `fmod`
//! (a float's `%`, which aarch64 has no instruction for; exact, as C's is).
//!
//! The standard library calls them by their C names. Found here, they leave
//! nothing for libm.so.6 to give, and the linker (`--as-needed`) drops it: the
//! loader no longer maps and relocates it at every start, 65 µs of a 1 ms command
//! (docs/performance.md). A test holds the programs to needing libc alone.

/// `x` to the power `y`, as C's `pow`.
#[no_mangle]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// The natural logarithm, as C's `log`.
#[no_mangle]
pub extern "C" fn log(x: f64) -> f64 {
    libm::log(x)
}

/// The base-10 logarithm, as C's `log10`.
#[no_mangle]
pub extern "C" fn log10(x: f64) -> f64 {
    libm::log10(x)
}

/// The remainder of `x / y` truncated, as C's `fmod`.
#[no_mangle]
pub extern "C" fn fmod(x: f64, y: f64) -> f64 {
    libm::fmod(x, y)
}
