//! The cost of one `stat` sweep (every counter and register of the bf2 fixture, on
//! tmpfs) against the floor: a minimal Rust loop over the same files opened once —
//! one `pread` and a hex parse per value, and the two `enable` writes per
//! all-at-once block that windowed reading needs.
//!
//! Run: `cargo bench --bench stat`. The README records the figures; the bench script
//! `benches/stat-syscalls.sh` counts system calls and measures a 60 s run's CPU.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bfperf::block::Mechanism;
use bfperf::measure::{place, Sampler};
use bfperf::spec;
use bfperf::Device;
use criterion::{criterion_group, criterion_main, Criterion};

/// A copy of the bf2 fixture on tmpfs (or the temp dir where /dev/shm is missing).
fn tmpfs_copy() -> (tempfile::TempDir, PathBuf) {
    let base = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/bf2");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(base.path())
        .status()
        .unwrap();
    assert!(status.success());
    let dev = base.path().join("class/hwmon/hwmon3");
    (base, dev)
}

/// Specs for every counter (its first events) and every register of the device.
pub fn every_value(device: &Device) -> Vec<String> {
    let mut specs = Vec::new();
    for b in device.blocks() {
        let catalog = device.catalog(b).unwrap();
        let events: Vec<String> = if b.mechanism == Mechanism::Registers {
            b.registers.clone()
        } else {
            catalog
                .events
                .iter()
                .filter(|e| e.name != "DISABLE")
                .take(b.counters.len())
                .map(|e| e.name.to_string())
                .collect()
        };
        specs.push(format!("{}/{}/", b.name, events.join(",")));
    }
    specs
}

struct Floor {
    values: Vec<File>,
    windows: Vec<(File, Vec<File>)>,
}

impl Floor {
    fn open(dir: &Path, device: &Device) -> Floor {
        let mut values = Vec::new();
        let mut windows = Vec::new();
        for b in device.blocks() {
            let d = dir.join(&b.name);
            let counters: Vec<File> = b
                .counters
                .iter()
                .map(|c| File::open(d.join(format!("counter{c}"))).unwrap())
                .collect();
            if b.mechanism == Mechanism::AllAtOnce {
                let enable = OpenOptions::new()
                    .write(true)
                    .open(d.join("enable"))
                    .unwrap();
                windows.push((enable, counters));
            } else {
                values.extend(counters);
            }
            values.extend(b.registers.iter().map(|r| File::open(d.join(r)).unwrap()));
        }
        Floor { values, windows }
    }

    fn sweep(&self, buf: &mut [u8]) -> u64 {
        let parse = |b: &[u8]| {
            let t = std::str::from_utf8(b).unwrap().trim();
            u64::from_str_radix(t.trim_start_matches("0x"), 16).unwrap_or(0)
        };
        let mut sum = 0u64;
        for f in &self.values {
            let n = f.read_at(buf, 0).unwrap();
            sum = sum.wrapping_add(parse(&buf[..n]));
        }
        for (enable, counters) in &self.windows {
            enable.write_at(b"0", 0).unwrap();
            for f in counters {
                let n = f.read_at(buf, 0).unwrap();
                sum = sum.wrapping_add(parse(&buf[..n]));
            }
            enable.write_at(b"1", 0).unwrap();
        }
        sum
    }
}

fn bench(c: &mut Criterion) {
    let (_keep, dir) = tmpfs_copy();
    let device = Device::open_dir(&dir).unwrap();
    let specs = every_value(&device);
    let resolved = spec::resolve(&device, &specs).unwrap();
    let plans = place(resolved.blocks, true).unwrap();
    let values: usize = plans.iter().map(|p| p.items.len()).sum();
    // Reads and writes are timed as in a measurement: on the monotonic clock.
    let origin = std::time::Instant::now();
    let stamp: bfperf::measure::Stamp =
        std::sync::Arc::new(move || origin.elapsed().as_nanos() as u64);
    let mut sampler = Sampler::open(&device, plans, &HashMap::new(), stamp).unwrap();
    sampler.start(0).unwrap();
    let floor = Floor::open(&dir, &device);

    let mut group = c.benchmark_group(format!("bf2 stat sweep ({values} values, tmpfs)"));
    group.sample_size(50);
    let mut now = 0u64;
    group.bench_function("bfperf: Sampler::tick", |b| {
        b.iter(|| {
            now += 1_000_000;
            sampler.tick(now).unwrap()
        })
    });
    // The check between ticks, every 100 ms: its cost per 100 ms is its share of a core.
    group.bench_function("bfperf: Sampler::probe", |b| {
        b.iter(|| {
            now += 1_000_000;
            sampler.probe(now)
        })
    });
    let mut buf = vec![0u8; 64];
    group.bench_function("floor: minimal pread loop", |b| {
        b.iter(|| floor.sweep(&mut buf))
    });
    group.finish();
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The exporter's server-side cost of a scrape of the whole bf2 fixture (registers
/// and every counter programmed), and its memory over 100,000 scrapes.
fn exporter(c: &mut Criterion) {
    use bfperf::collector::{Collector, Counting, TextFormat};
    let (_keep, dir) = tmpfs_copy();
    let device = Device::open_dir(&dir).unwrap();
    let config = Counting {
        events: every_value(&device)
            .into_iter()
            .filter(|s| !s.starts_with("pcie") && !s.starts_with("ecc"))
            .collect(),
        ..Default::default()
    };
    let set = bfperf::metrics::MetricSet::load(&[device.generation()], &[]);
    let mut e = Collector::start(&device, &config, set, || 0).unwrap();
    let mut now = 0u64;
    let mut scrape = |e: &mut Collector| {
        now += 1_000_000_000;
        e.scrape(now).unwrap();
        e.exposition(true, 0.0, TextFormat::Text004)
    };
    for _ in 0..1000 {
        scrape(&mut e);
    }
    let before = rss_kib();
    for _ in 0..100_000 {
        scrape(&mut e);
    }
    let after = rss_kib();
    eprintln!("exporter RSS after 1,000 scrapes: {before} KiB; after 100,000 more: {after} KiB");
    let mut group = c.benchmark_group("bf2 exporter (tmpfs)");
    group.sample_size(30);
    group.bench_function("scrape: sweep + metrics + text 0.0.4", |b| {
        b.iter(|| scrape(&mut e))
    });
    group.finish();
    e.stop().unwrap();
}

/// Reading perf events at a tick: bfperf's [`Counters::read`] (one `read` per group,
/// PERF_FORMAT_GROUP, one group per PMU per CPU) against two floors: a bare `read()`
/// of the same groups' descriptors, and one `read()` per event per CPU (no groups).
fn perf_reads(c: &mut Criterion) {
    use bfperf::perf::{self, Counters};
    use perf_event::events::Software;
    use perf_event::{Builder, ReadFormat};
    use std::os::fd::AsRawFd;
    let names = ["cpu-clock", "task-clock", "context-switches", "page-faults"];
    let specs: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let (events, _) = perf::split(&perf::Pmus::default(), &specs).unwrap();
    let cpus = perf::online_cpus(std::path::Path::new("/sys"));
    let mut counters = Counters::open(&events, &cpus);
    if !counters.refusals().is_empty() {
        eprintln!("perf events refused here: {:?}", counters.refusals());
        return;
    }
    counters.start();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let kinds = [
        Software::CPU_CLOCK,
        Software::TASK_CLOCK,
        Software::CONTEXT_SWITCHES,
        Software::PAGE_FAULTS,
    ];
    let build = |k: Software, cpu: usize| {
        let mut b = Builder::new(k);
        b.any_pid().one_cpu(cpu).exclude_kernel(false);
        b
    };
    let mut groups = Vec::new();
    let mut singles = Vec::new();
    for cpu in 0..cpus {
        let mut leader = build(kinds[0], cpu);
        leader.read_format(
            ReadFormat::GROUP
                | ReadFormat::ID
                | ReadFormat::TOTAL_TIME_ENABLED
                | ReadFormat::TOTAL_TIME_RUNNING,
        );
        let mut g = leader.build_group().unwrap();
        let members: Vec<_> = kinds[1..]
            .iter()
            .map(|k| {
                build(*k, cpu)
                    .enabled(true)
                    .build_with_group(&mut g)
                    .unwrap()
            })
            .collect();
        g.enable().unwrap();
        groups.push((g, members));
        for k in kinds {
            let mut one = build(k, cpu).build().unwrap();
            one.enable().unwrap();
            singles.push(one);
        }
    }
    let mut group = c.benchmark_group(format!(
        "perf reads ({} software events × {cpus} CPUs)",
        names.len()
    ));
    group.sample_size(50);
    group.bench_function("bfperf: Counters::read (one read per group)", |b| {
        b.iter(|| counters.read())
    });
    let mut buf = [0u8; 256];
    group.bench_function("floor: bare read() per group", |b| {
        b.iter(|| {
            for (g, _) in &groups {
                // SAFETY: reads into a buffer we own from a descriptor we hold.
                unsafe {
                    libc::read(
                        g.as_counter().as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    )
                };
            }
        })
    });
    group.bench_function("no groups: read() per event per CPU", |b| {
        b.iter(|| {
            for one in &mut singles {
                one.read().unwrap();
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench, exporter, perf_reads);
criterion_main!(benches);
