//! Records what built bfperf, for the exporter's `bfperf_build_info` and
//! `--version`: the source's revision (`git rev-parse`, or `BFPERF_REVISION` where
//! there is no checkout, as in a source package), the build's date and the
//! compiler's version.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=BFPERF_REVISION");
    // Only files that exist: a missing one would run this script at every build.
    for f in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if Path::new(f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    let output = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let revision = std::env::var("BFPERF_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| output("git", &["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = output(&rustc, &["--version"])
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    // The build's date as reproducible builds give it (SOURCE_DATE_EPOCH, which
    // Debian's tools set), else the revision's commit date.
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let date = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|e| {
            output(
                "date",
                &["-u", "-d", &format!("@{}", e.trim()), "+%Y%m%d-%H:%M:%S"],
            )
        })
        .or_else(|| {
            output(
                "git",
                &[
                    "log",
                    "-1",
                    "--format=%cd",
                    "--date=format-local:%Y%m%d-%H:%M:%S",
                ],
            )
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BFPERF_BUILD_DATE={date}");
    let target = |v: &str| std::env::var(v).unwrap_or_else(|_| "unknown".into());
    println!(
        "cargo:rustc-env=BFPERF_PLATFORM={}/{}",
        target("CARGO_CFG_TARGET_OS"),
        target("CARGO_CFG_TARGET_ARCH")
    );
    println!("cargo:rustc-env=BFPERF_REVISION={revision}");
    println!("cargo:rustc-env=BFPERF_RUSTC_VERSION={version}");
    // The unwinder (panics, backtraces) linked in from GCC's libgcc_eh.a, as
    // `gcc -static-libgcc` links it, before the standard library asks for
    // libgcc_s.so.1: the loader then no longer maps, relocates and initializes that
    // library at every start (0.1 ms of a 1 ms command, docs/performance.md).
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
    }
}
