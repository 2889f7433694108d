//! A full snapshot of the bf2 fixture against the shell loops people write today:
//! `for f in */counter* */event* pcie*/*; do cat "$f"; done`, and the same loop with
//! the shell's `read` builtin (no process per file).
//!
//! Run: `cargo bench --bench snapshot`. The README records the measured ratio.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use criterion::{criterion_group, criterion_main, Criterion};

fn device_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/bf2/class/hwmon/hwmon3")
}

fn bench(c: &mut Criterion) {
    let dir = device_dir();
    let mut group = c.benchmark_group("bf2 full snapshot");
    group.sample_size(20);

    group.bench_function("library: open device + snapshot all", |b| {
        b.iter(|| {
            let device = bfperf::Device::open_dir(&dir).unwrap();
            bfperf::ops::snapshot::take(&device, &["all".to_string()]).unwrap()
        })
    });

    group.bench_function("process: bfperf snapshot all", |b| {
        b.iter(|| {
            let status = Command::new(env!("CARGO_BIN_EXE_bfperf"))
                .arg("--device")
                .arg(&dir)
                .args(["snapshot", "all"])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
        })
    });

    group.bench_function("shell loop: cat every counter, event and pcie file", |b| {
        b.iter(|| {
            let status = Command::new("sh")
                .arg("-c")
                .arg(r#"for f in */counter* */event* pcie*/*; do cat "$f"; done"#)
                .current_dir(&dir)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
        })
    });
    // The fairer peer: the shell's own `read` builtin spawns no process per file.
    group.bench_function(
        "shell loop: read builtin on every counter, event and pcie file",
        |b| {
            b.iter(|| {
                let status = Command::new("bash")
                    .arg("-c")
                    .arg(r#"for f in */counter* */event* pcie*/*; do read -r v < "$f"; done"#)
                    .current_dir(&dir)
                    .stdout(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
            })
        },
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
