//! The bfperf command: everything is in the library; this only sets the exit code.

fn main() {
    std::process::exit(bfperf::cli::main());
}
