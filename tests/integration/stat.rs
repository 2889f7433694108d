//! `bfperf stat`: exact counts on the in-process simulator with a manual clock, the
//! hardware's rules (windows on all-at-once blocks, wraps, multiplexing), restore,
//! and the command line on fixture copies and the FUSE simulator.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::*;
use bfperf::measure::{self, For, StatRequest, Until};
use bfperf::sim::{Kernel, ManualClock, Sim};
use bfperf::{Device, Generation, Sysfs};
use predicates::prelude::*;

struct Rig {
    sim: Arc<Sim>,
    clock: Arc<ManualClock>,
    device: Device,
}

fn rig(gen: Generation) -> Rig {
    let (sim, clock) = Sim::with_manual_clock(gen, Kernel::V6_16);
    let sim = Arc::new(sim);
    let device = Device::open(Box::new(sim.clone())).unwrap();
    Rig { sim, clock, device }
}

fn request(specs: &[&str]) -> StatRequest {
    StatRequest::for_specs(specs.iter().map(|s| s.to_string()).collect())
}

/// Every event, enable and count_clock file of the device, to compare.
fn config(sim: &Sim) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for b in sim.list("").unwrap() {
        let Ok(files) = sim.list(&b.name) else {
            continue;
        };
        for f in files {
            let n = &f.name;
            if (n.starts_with("event") && n != "event_list") || n == "enable" || n == "count_clock"
            {
                let rel = format!("{}/{n}", b.name);
                out.push((
                    rel.clone(),
                    sim.read(&rel).unwrap_or_else(|e| e.to_string()),
                ));
            }
        }
    }
    out
}

impl Rig {
    fn measure(&self, req: &StatRequest, secs: u64) -> measure::StatOutcome {
        let pacer = Manual(self.clock.clone());
        let stop = AtomicBool::new(false);
        let mut until =
            |_| -> bfperf::Result<Box<dyn Until>> { Ok(Box::new(For(Duration::from_secs(secs)))) };
        measure::measure(
            &self.device,
            req,
            &pacer,
            &stop,
            &mut until,
            &mut |_| Ok(()),
        )
        .unwrap()
    }
}

#[test]
fn tile_counts_are_exact_per_block_and_summed() {
    let r = rig(Generation::Bf2);
    let before = config(&r.sim);
    let out = r.measure(&request(&["tile/MEMORY_READS,MEMORY_WRITES/"]), 5);
    let counts = &out.runs[0].counts;
    let mut sum = 0;
    for t in ["tile0", "tile1", "tile2", "tile3"] {
        let reads = r.sim.event_rate(t, 0x4c).unwrap() * 5;
        let writes = r.sim.event_rate(t, 0x4d).unwrap() * 5;
        assert_eq!(find(counts, t, "MEMORY_READS").value.unwrap(), reads, "{t}");
        assert_eq!(
            find(counts, t, "MEMORY_WRITES").value.unwrap(),
            writes,
            "{t}"
        );
        assert_eq!(find(counts, t, "MEMORY_READS").coverage, 1.0);
        sum += reads;
    }
    let agg = measure::aggregate(counts);
    let reads = agg.iter().find(|c| &*c.event == "MEMORY_READS").unwrap();
    assert_eq!(
        (&*reads.block, reads.blocks, reads.value.unwrap()),
        ("tile", 4, sum)
    );
    assert_eq!(out.runs[0].elapsed_s, 5.0);
    assert_eq!(config(&r.sim), before, "the device is as it was");
}

#[test]
fn both_l3_halves_in_one_command_with_windows() {
    let r = rig(Generation::Bf2);
    let before = config(&r.sim);
    let out = r.measure(
        &request(&["l3cache/HITS_BANK0,HITS_BANK1,MISSES_BANK0,MISSES_BANK1/"]),
        5,
    );
    let counts = &out.runs[0].counts;
    for half in ["l3cachehalf0", "l3cachehalf1"] {
        for (ev, n) in [
            ("HITS_BANK0", 0x17),
            ("HITS_BANK1", 0x18),
            ("MISSES_BANK0", 0x19),
            ("MISSES_BANK1", 0x1a),
        ] {
            let expected = r.sim.event_rate(half, n).unwrap() * 5;
            assert_eq!(
                find(counts, half, ev).value.unwrap(),
                expected,
                "{half} {ev}"
            );
        }
    }
    assert_eq!(config(&r.sim), before);
}

#[test]
fn a_crspace_cycle_counter_wrapping_many_times_totals_right() {
    let r = rig(Generation::Bf3);
    let before = config(&r.sim);
    // 2 GHz for 10 s: 20e9 cycles, the 32-bit counter would wrap four times.
    let out = r.measure(&request(&["llt0/cycles,GDC_BANK0_RD_REQ/"]), 10);
    let counts = &out.runs[0].counts;
    let hz = r.sim.clock_hz("llt0").unwrap();
    assert_eq!(find(counts, "llt0", "cycles").value.unwrap(), hz * 10);
    assert_eq!(find(counts, "llt0", "cycles").unit, "cycles");
    assert_eq!(
        find(counts, "llt0", "GDC_BANK0_RD_REQ").value.unwrap(),
        r.sim.event_rate("llt0", 0x54).unwrap() * 10
    );
    assert_eq!(config(&r.sim), before);
}

#[test]
fn registers_are_differenced_not_reset() {
    let r = rig(Generation::Bf2);
    let read = |rel: &str| {
        let t = r.sim.read(rel).unwrap();
        u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).unwrap()
    };
    let a = read("pcie0/IN_P_BYTE_CNT");
    r.clock.advance_secs(1);
    let rate = read("pcie0/IN_P_BYTE_CNT") - a;
    let out = r.measure(&request(&["pcie0/*_BYTE_CNT/"]), 4);
    let c = find(&out.runs[0].counts, "pcie0", "IN_P_BYTE_CNT");
    assert_eq!((c.value.unwrap(), c.unit), (rate * 4, "bytes"));
    assert_eq!(out.runs[0].counts.len(), 6);
    assert!(read("pcie0/IN_P_BYTE_CNT") > rate * 4, "never reset");
}

#[test]
fn eight_events_on_four_counters_take_turns_and_scale() {
    let r = rig(Generation::Bf2);
    let events =
        "HNF_REQUESTS,HNF_REJECTS,MEMORY_READS,MEMORY_WRITES,A72_READ,A72_WRITE,IO_READ,IO_WRITE";
    let out = r.measure(&request(&[&format!("tile2/{events}/")]), 10);
    let counts = &out.runs[0].counts;
    assert_eq!(counts.len(), 8);
    let table = bfperf::catalog::builtin(bfperf::BlockKind::Tile, Generation::Bf2);
    let number = |name: &str| table.iter().find(|d| d.name == name).unwrap().number;
    let numbers: Vec<u32> = events.split(',').map(number).collect();
    for (i, c) in counts.iter().enumerate() {
        assert!((c.coverage - 0.5).abs() < 0.01, "{c:?}");
        // Counted on counter i % 4 half the time; the estimate is the whole.
        let truth = r.sim.event_rate("tile2", numbers[i]).unwrap() * 10;
        assert_rate(c.value.unwrap() as f64, truth as f64, &format!("{c:?}"));
    }
    let mut no = request(&[&format!("tile2/{events}/")]);
    no.multiplex = false;
    assert!(measure::prepare(&r.device, &no)
        .unwrap_err()
        .to_string()
        .contains("8 events on tile2 need 8 counters and it has 4"));
}

#[test]
fn a_foreign_write_is_detected_and_marked() {
    let r = rig(Generation::Bf2);
    let pacer = Manual(r.clock.clone());
    let stop = AtomicBool::new(false);
    struct Meddle(Arc<Sim>, bool);
    impl Until for Meddle {
        fn done(&mut self, elapsed: Duration) -> bool {
            if !self.1 && elapsed >= Duration::from_secs(2) {
                self.0.write("tile1/event0", b"0x46").unwrap();
                self.1 = true;
            }
            elapsed >= Duration::from_secs(4)
        }
    }
    let sim = r.sim.clone();
    let mut until =
        move |_| -> bfperf::Result<Box<dyn Until>> { Ok(Box::new(Meddle(sim.clone(), false))) };
    let out = measure::measure(
        &r.device,
        &request(&["tile1,tile2/HNF_REQUESTS/"]),
        &pacer,
        &stop,
        &mut until,
        &mut |_| Ok(()),
    )
    .unwrap();
    assert!(out.foreign);
    let counts = &out.runs[0].counts;
    assert!(!find(counts, "tile1", "HNF_REQUESTS").valid);
    assert!(find(counts, "tile2", "HNF_REQUESTS").valid);
    // The event written over ours is named.
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("another program programmed event 0x46 on counter 0")),
        "{:?}",
        out.warnings
    );
}

/// A write after the last sample, as the measurement ends, is found too (read back
/// through the files the measurement holds open) and marks the total of the
/// counter it went to, and that counter's only.
#[test]
fn a_foreign_write_after_the_last_sample_is_marked() {
    let r = rig(Generation::Bf2);
    let pacer = Manual(r.clock.clone());
    let stop = AtomicBool::new(false);
    let mut req = request(&["tile1,tile2/HNF_REQUESTS/"]);
    req.timing.interval = Some(Duration::from_millis(500));
    let mut until =
        |_| -> bfperf::Result<Box<dyn Until>> { Ok(Box::new(For(Duration::from_secs(2)))) };
    let sim = r.sim.clone();
    let mut last = Vec::new();
    let out = measure::measure(&r.device, &req, &pacer, &stop, &mut until, &mut |i| {
        // The last interval's line is out: its sample was the last.
        if i.time_s >= 2.0 {
            last = i.counts.iter().map(|c| c.valid).collect();
            sim.write("tile1/event0", b"0x46").unwrap();
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(last, [true, true], "the write came after the last sample");
    assert!(out.foreign);
    let counts = &out.runs[0].counts;
    let tile1 = find(counts, "tile1", "HNF_REQUESTS");
    assert!(!tile1.valid, "{tile1:?}");
    assert_eq!(
        tile1.invalid.as_deref(),
        Some("another program programmed its counter")
    );
    assert!(find(counts, "tile2", "HNF_REQUESTS").valid);
}

#[test]
fn intervals_add_up_to_the_total() {
    let r = rig(Generation::Bf2);
    let pacer = Manual(r.clock.clone());
    let stop = AtomicBool::new(false);
    let mut req = request(&["tile0/MEMORY_READS/"]);
    req.timing.interval = Some(Duration::from_millis(500));
    let mut seen = Vec::new();
    let mut until =
        |_| -> bfperf::Result<Box<dyn Until>> { Ok(Box::new(For(Duration::from_secs(3)))) };
    let out = measure::measure(&r.device, &req, &pacer, &stop, &mut until, &mut |i| {
        seen.push((i.time_s, i.counts[0].value.unwrap()));
        Ok(())
    })
    .unwrap();
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    );
    let rate = r.sim.event_rate("tile0", 0x4c).unwrap();
    assert_eq!(seen.iter().map(|s| s.1).sum::<u64>(), rate * 3);
    assert_eq!(out.runs[0].counts[0].value.unwrap(), rate * 3);
}

// ---- the command line ----

/// A word of the command line that is not UTF-8 (a file name in another encoding)
/// is taken as the bytes it is: stat writes its output there and records the
/// command line, in its lock and journal, with the byte replaced; the exporter's
/// usage error says what is wrong. Neither panics.
#[test]
fn a_word_that_is_not_utf8_is_taken_as_it_is() {
    use std::os::unix::ffi::OsStrExt;
    let c = Copy::of("bf2");
    let dir = tempfile::tempdir().unwrap();
    let out = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"counts-\xff.txt"));
    c.cmd()
        .args(["stat", "-e", "tile0/MEMORY_READS/", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success()
        .stderr(predicate::str::contains("panicked").not());
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("MEMORY_READS"), "{written}");
    assert_cmd::Command::new(assert_cmd::cargo::cargo_bin!("bfperf-exporter"))
        .arg("--no-such-flag")
        .arg(std::ffi::OsStr::from_bytes(b"\xff"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unexpected argument '--no-such-flag'",
        ))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn bad_specs_are_refused_naming_the_part_with_nothing_written() {
    let c = Copy::of("bf2");
    let before = c.contents();
    for (spec, says) in [
        ("tile", "BLOCKS/EVENT"),
        ("/MEMORY_READS/", "no blocks"),
        ("tile//", "empty event"),
        ("tile/MEMORY_READS/x/", "two"),
        ("tiel/MEMORY_READS/", "did you mean tile"),
        ("tile/MEMORY_READ/", "did you mean MEMORY_READS"),
        ("tile[/X/", "pattern"),
        ("llt*/HITS/", "matches no block"),
        ("tile/cycles/", "count_clock"),
        ("pcie0/HNF_REQUESTS/", "no register"),
        ("tile2/0x999/", "out of range"),
        ("tile2/ZZ*/", "matches no event"),
    ] {
        c.cmd()
            .args(["stat", "-o", "-", "-e", spec, "--duration", "1s"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!("-e '{spec}'")))
            .stderr(predicate::str::contains(says));
        assert_eq!(before, c.contents(), "{spec}");
    }
    c.cmd()
        .args([
            "stat",
            "-o",
            "-",
            "-e",
            "tile2/HNF_REQUESTS,HNF_REJECTS,MEMORY_READS,MEMORY_WRITES,IO_READ/",
            "--no-multiplex",
            "--duration",
            "1s",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "5 events on tile2 need 5 counters and it has 4",
        ));
    c.cmd()
        .args([
            "stat",
            "-o",
            "-",
            "-e",
            "tile2/HNF_REQUESTS/",
            "--",
            "no-such-program-here",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "cannot run 'no-such-program-here'",
        ));
    assert_eq!(before, c.contents());
}

/// Each file a measurement saves, programs, reads back and puts back is opened
/// once, read and written in place: the llt's events, its `enable` and its
/// `count_clock`. On a copy in plain files a shorter write must still leave only
/// what it wrote: `0x57` goes over `0x0: HNF0_CYCLES`, and `0x0` back over it.
#[test]
fn stat_opens_each_file_it_changes_once_and_puts_back_its_bytes() {
    let c = Copy::of("bf3");
    let mut before = c.contents();
    let spec = "llt0/GDC_BANK0_HIT,HNF0_REQS_RECEIVED,cycles/";
    let args = ["stat", "-o", "/dev/null", "--duration", "300ms", "-e", spec];
    let Some(opens) = opens_of(&c, &args, "the test of files opened once") else {
        return;
    };
    let mut after = c.contents();
    for (file, put_back) in [
        ("event0", "0x0"),
        ("event1", "0x57"),
        ("event2", "0x58"),
        ("enable", "1"),
        ("count_clock", "0x0"),
    ] {
        // Opened below the device's directory (`"llt0/event0"`) or by its path.
        let at = format!("llt0/{file}\"");
        let of_it: Vec<&String> = opens.iter().filter(|l| l.contains(&at)).collect();
        assert_eq!(of_it.len(), 1, "{file}: {of_it:#?}");
        assert!(of_it[0].contains("O_RDWR"), "{of_it:?}");
        let rel = PathBuf::from(format!("class/hwmon/hwmon3/llt0/{file}"));
        before.remove(&rel).unwrap();
        let text = String::from_utf8(after.remove(&rel).unwrap()).unwrap();
        assert_eq!(text, put_back, "{file}");
    }
    assert!(before == after, "stat changed files it does not program");
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn both_l3_halves_on_the_mounted_simulator_and_the_device_as_before() {
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let before = (m.config("l3cachehalf0"), m.config("l3cachehalf1"));
    let out = m.run(&[
        "stat",
        "-o",
        "-",
        "-e",
        "l3cache/HITS_BANK0,HITS_BANK1,MISSES_BANK0,MISSES_BANK1/",
        "-A",
        "--duration",
        "1s",
        "--format",
        "json",
    ]);
    let lines = json_lines(&out);
    let totals: Vec<&serde_json::Value> = lines.iter().filter(|l| l["record"] == "total").collect();
    assert_eq!(totals.len(), 8, "{out}");
    for half in ["l3cachehalf0", "l3cachehalf1"] {
        assert_eq!(totals.iter().filter(|t| t["block"] == half).count(), 4);
    }
    assert!(totals.iter().all(|t| t["value"].as_u64().unwrap() > 0));
    assert_eq!(lines.last().unwrap()["record"], "end");
    assert_eq!((m.config("l3cachehalf0"), m.config("l3cachehalf1")), before);
}

/// The vendor's way to stop a counter, `echo 0xff > event<N>`, leaves a number the
/// driver cannot name: on Debian 12's 6.1 an L3 or tile event then reads EINVAL, and its
/// number is unknown. stat uses such counters and puts them back as they read before
/// (0xff again), not as DISABLE; the real-driver run on 6.1 found it.
#[test]
fn counters_stopped_with_0xff_read_as_before_after_stat() {
    let Some(m) = Mount::start("2", "6.1.192") else {
        return;
    };
    for (block, counter) in [("l3cachehalf0", 3), ("l3cachehalf0", 4), ("tile0", 1)] {
        std::fs::write(
            m.device().join(block).join(format!("event{counter}")),
            "0xff",
        )
        .unwrap();
    }
    let before = (m.config("l3cachehalf0"), m.config("tile0"));
    let unreadable =
        |c: &[(String, String)], n: &str| c.iter().any(|(f, v)| f == n && v.starts_with("error:"));
    assert!(
        unreadable(&before.0, "event3") && unreadable(&before.1, "event1"),
        "{before:?}"
    );
    m.run(&[
        "stat",
        "-o",
        "-",
        "-e",
        "l3cachehalf0/HITS_BANK0,HITS_BANK1,MISSES_BANK0,MISSES_BANK1,CYCLES/",
        "-e",
        "tile0/MEMORY_READS,MEMORY_WRITES,HNF_REQUESTS,VICTIM_WRITE/",
        "--duration",
        "300ms",
    ]);
    assert_eq!((m.config("l3cachehalf0"), m.config("tile0")), before);
}

#[test]
fn ndjson_per_interval_during_a_command_and_its_exit_status() {
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let out = m.run(&[
        "stat",
        "-o",
        "-",
        "-e",
        "tile/MEMORY_READS,MEMORY_WRITES/",
        "-I",
        "200",
        "--format",
        "json",
        "--",
        "sleep",
        "1",
    ]);
    let lines = json_lines(&out);
    let intervals = lines.iter().filter(|l| l["record"] == "interval").count();
    assert!(intervals >= 8, "{out}");
    assert_eq!(lines.last().unwrap()["exit_status"], 0);
    m.cmd()
        .args([
            "stat",
            "-o",
            "-",
            "-e",
            "tile0/MEMORY_READS/",
            "-x",
            ";",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .assert()
        .code(3)
        // perf's -x columns: value;unit;event;run_time;percentage;; (a plain count
        // has no unit, as perf's)
        .stdout(predicate::str::contains(";;tile0/MEMORY_READS/;"));
}

fn wait_for(path: &std::path::Path, what: &str) {
    for _ in 0..200 {
        if std::fs::read_to_string(path)
            .map(|t| t.contains(what))
            .unwrap_or(false)
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{} never held {what}", path.display());
}

#[test]
fn signals_restore_the_device_and_a_second_writer_is_refused() {
    let Some(m) = Mount::start("3", "6.16") else {
        return;
    };
    let blocks = ["llt0", "llt1", "mss0", "tile0"];
    let before: Vec<_> = blocks
        .iter()
        .filter(|b| m.device().join(b).exists())
        .map(|b| m.config(b))
        .collect();
    let lock = tempfile::tempdir().unwrap();
    let lock_file = lock.path().join("bfperf.lock");
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("bfperf"))
            .arg("--sysfs-root")
            .arg(m.root())
            .arg("--lock-file")
            .arg(&lock_file)
            .args([
                "stat",
                "-o",
                "-",
                "-e",
                "llt0,llt1/cycles,GDC_BANK0_RD_REQ/",
                "-e",
                "mss0/SKYLIB_DDN_TX_FLITS/",
                "--duration",
                "30s",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for(&lock_file, "stat");
        // A second writer is refused, naming the holder.
        bfperf()
            .arg("--sysfs-root")
            .arg(m.root())
            .arg("--lock-file")
            .arg(&lock_file)
            .args(["program", "llt2", "0", "GDC_BANK0_RD_REQ"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!("pid {}", child.id())))
            .stderr(predicate::str::contains("bfperf"));
        // The measurement has begun once the blocks it counts are programmed.
        let deadline = Instant::now() + Duration::from_secs(30);
        while ["llt0", "llt1", "mss0"]
            .iter()
            .zip(&before)
            .any(|(b, was)| &m.config(b) == was)
        {
            assert!(
                Instant::now() < deadline,
                "stat never programmed the blocks"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("interrupted by"), "{text}");
        let after: Vec<_> = blocks
            .iter()
            .filter(|b| m.device().join(b).exists())
            .map(|b| m.config(b))
            .collect();
        assert_eq!(after, before, "after {sig}");
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_measurement_quietly_and_restores() {
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let before = m.config("tile0");
    let lock = tempfile::tempdir().unwrap();
    let script = r#""$0" --sysfs-root "$1" --lock-file "$2" stat -o - -e tile/MEMORY_READS/ -I 100 --duration 30s | head -1 > /dev/null; exit ${PIPESTATUS[0]}"#;
    let start = std::time::Instant::now();
    let status = std::process::Command::new("bash")
        .args(["-c", script])
        .arg(assert_cmd::cargo::cargo_bin!("bfperf"))
        .arg(m.root())
        .arg(lock.path().join("lock"))
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "it went on counting"
    );
    assert_eq!(m.config("tile0"), before);
}

#[test]
fn stat_without_events_counts_the_generations_default_set() {
    // BF2's flows: reads 8 GB/s, writes 4 GB/s, 75 % hits; 6 and 3 GB/s of PCIe.
    let out = sim_stat("bf2")
        .args(["--json", "--", "sleep", "0.5"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("default set"));
    let text = String::from_utf8(out.stdout).unwrap();
    let metric = |name: &str| -> f64 {
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|r| r["record"] == "metric" && r["metric"] == name)
            .and_then(|r| r["value"].as_f64())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    for (name, want) in [
        ("memory_read_bandwidth", 2.0),
        ("memory_write_bandwidth", 1.0),
        ("pcie_in_bandwidth", 6.0),
        ("pcie_out_bandwidth", 3.0),
        ("l3_hit_ratio", 75.0),
    ] {
        let got = metric(name);
        assert_rate(got, want, name);
    }
}

/// perf events alone touch nothing of the device: such a stat takes no writer lock
/// and keeps no journal, so a stat of the device's counters can run inside it (the
/// real-driver stage measures bfperf's own processor time that way).
#[test]
fn perf_events_alone_take_no_lock_and_keep_no_journal() {
    let Some(m) = Mount::start("2", "6.16") else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let bin = assert_cmd::cargo::cargo_bin!("bfperf");
    let out = std::process::Command::new(bin)
        .env("BFPERF_STATE_DIR", state.path())
        .arg("--sysfs-root")
        .arg(m.root())
        .args([
            "stat",
            "--per-process",
            "-x,",
            "-e",
            "task-clock",
            "-o",
            "-",
            "--",
        ])
        .arg(bin)
        .arg("--sysfs-root")
        .arg(m.root())
        .args([
            "stat",
            "-e",
            "tile0/MEMORY_READS/",
            "-o",
            "/dev/null",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("another program is writing"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("task-clock"));
    let left: Vec<_> = std::fs::read_dir(state.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".journal"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
