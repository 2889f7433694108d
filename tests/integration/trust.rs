//! A number is right or visibly marked: multiplexed counts against the simulator's
//! ground truth, other programs' writes during a measurement, the
//! command outliving a closed output, the simulator's traffic model, snapshots that
//! cannot be compared, and metric chains of any length.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use bfperf::collector::Collector;
use bfperf::measure::{self, Count, For, Interval, Pacer, StatRequest, Until};
use bfperf::metrics::{self, MetricSet};
use bfperf::sim::{Clock, Kernel, ManualClock, Sim, SimOptions, Workload};
use bfperf::{BlockKind, Generation, Sysfs};
use predicates::prelude::*;

fn request(specs: &[String]) -> StatRequest {
    StatRequest::for_specs(specs.to_vec())
}

/// Writes other programs make, each at its time from the start, in the middle of
/// the measurement's sleeps.
struct Meddle {
    sim: Arc<Sim>,
    clock: Arc<ManualClock>,
    writes: Vec<(Duration, String, String)>,
    elapsed: Duration,
    secs: u64,
}

impl Until for Meddle {
    fn done(&mut self, elapsed: Duration) -> bool {
        self.elapsed = elapsed;
        elapsed >= Duration::from_secs(self.secs)
    }

    fn deadline(&self) -> Option<Duration> {
        Some(Duration::from_secs(self.secs))
    }

    fn wait(&mut self, _: &dyn Pacer, timeout: Duration, _: Option<std::os::fd::BorrowedFd<'_>>) {
        let end = self.elapsed + timeout;
        let mut now = self.elapsed;
        while let Some((at, file, data)) = self.writes.first().cloned() {
            if at >= end {
                break;
            }
            self.clock.advance_ns((at - now).as_nanos() as u64);
            now = at;
            self.sim.write(&file, data.as_bytes()).unwrap();
            self.writes.remove(0);
        }
        self.clock.advance_ns((end - now).as_nanos() as u64);
    }
}

impl Rig {
    fn measure(&self, req: &StatRequest, secs: u64) -> measure::StatOutcome {
        self.measure_with(req, secs, Vec::new(), &mut |_| {})
    }

    /// Measures for `secs` while `writes` (time from the start, file, data) happen.
    fn measure_with(
        &self,
        req: &StatRequest,
        secs: u64,
        writes: Vec<(Duration, String, String)>,
        on_interval: &mut dyn FnMut(&Interval),
    ) -> measure::StatOutcome {
        let pacer = Manual(self.clock.clone());
        let (sim, clock) = (self.sim.clone(), self.clock.clone());
        let mut until = move |_| -> bfperf::Result<Box<dyn Until>> {
            Ok(Box::new(Meddle {
                sim: sim.clone(),
                clock: clock.clone(),
                writes: writes.clone(),
                elapsed: Duration::ZERO,
                secs,
            }))
        };
        measure::measure(
            &self.device,
            req,
            &pacer,
            &AtomicBool::new(false),
            &mut until,
            &mut |i| {
                on_interval(i);
                Ok(())
            },
        )
        .unwrap()
    }
}

/// A small deterministic generator for the random event sets.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn thirty_random_multiplexed_sets_are_right_or_not_counted() {
    let mut rng = Xorshift(0x5eed_1234_abcd);
    let cases = [
        (Generation::Bf2, "tile1", BlockKind::Tile),
        (Generation::Bf2, "l3cachehalf1", BlockKind::L3cache),
        (Generation::Bf3, "llt3", BlockKind::Llt),
    ];
    let mut estimates = 0;
    for round in 0..30 {
        let (gen, block, kind) = cases[round % 3];
        let r = rig(gen);
        let counters = r.device.block(block).unwrap().counters.len();
        let table: Vec<_> = bfperf::catalog::builtin(kind, gen)
            .iter()
            .filter(|d| d.name != "DISABLE")
            .collect();
        let k = counters + 1 + rng.below(2 * counters);
        let mut chosen: Vec<&bfperf::catalog::EventDef> = Vec::new();
        while chosen.len() < k {
            let d = table[rng.below(table.len())];
            if !chosen.iter().any(|c| c.number == d.number) {
                chosen.push(d);
            }
        }
        let names: Vec<String> = chosen.iter().map(|d| format!("0x{:x}", d.number)).collect();
        let out = r.measure(&request(&[format!("{block}/{}/", names.join(","))]), 3);
        let run = &out.runs[0];
        assert_eq!(run.counts.len(), k);
        for c in &run.counts {
            let number = c.event_number.unwrap();
            let truth = r.sim.event_rate(block, number).unwrap() as f64 * run.elapsed_s;
            match c.value {
                None => assert!(!c.counted && c.coverage == 0.0, "{c:?}"),
                Some(v) => {
                    assert!(c.counted && c.valid, "{c:?}");
                    let err = (v as f64 - truth).abs() / truth.max(1.0);
                    assert!(err < 0.10, "round {round}: {c:?} vs truth {truth}");
                    estimates += usize::from(c.coverage < 1.0);
                }
            }
        }
    }
    assert!(estimates > 100, "the sets were multiplexed: {estimates}");
}

#[test]
fn an_event_that_never_had_a_turn_is_not_counted_and_no_metric_uses_it() {
    let r = rig(Generation::Bf2);
    let set = MetricSet::load(&[Generation::Bf2], &[]);
    let chosen = set.select(&["l3".to_string()]).unwrap();
    // 6 events on 5 counters; 100 ms is one turn: the evictions never count.
    let pacer = Manual(r.clock.clone());
    let mut until =
        |_| -> bfperf::Result<Box<dyn Until>> { Ok(Box::new(For(Duration::from_millis(100)))) };
    let out = measure::measure(
        &r.device,
        &request(&metrics::specs_for(&chosen)),
        &pacer,
        &AtomicBool::new(false),
        &mut until,
        &mut |_| Ok(()),
    )
    .unwrap();
    let run = &out.runs[0];
    let ev = find(&run.counts, "l3cachehalf0", "EVICTIONS_BANK1");
    assert_eq!((ev.value, ev.counted, ev.coverage), (None, false, 0.0));
    // The hit rate's events share a turn: exact, not estimated.
    let hits = find(&run.counts, "l3cachehalf0", "HITS_BANK0");
    assert_eq!(hits.coverage, 1.0);
    let values = metrics::evaluate(
        &set,
        &chosen,
        &measure::metric_inputs(&run.counts, run.elapsed_s),
        true,
    );
    let of = |m: &str, b: &str| {
        values
            .iter()
            .find(|v| v.metric == m && v.block == b)
            .unwrap()
    };
    let ev = of("l3_evictions_per_second", "l3cachehalf0");
    assert_eq!(ev.value, None);
    assert!(
        ev.reason.as_deref().unwrap().contains("not counted"),
        "{ev:?}"
    );
    // The default traffic hits 75 %.
    assert_eq!(of("l3_hit_ratio", "l3cache").value, Some(75.0));

    // The command line says so.
    sim_stat("bf2")
        .args(["-M", "l3", "--duration", "50ms"])
        .assert()
        .success()
        .stdout(predicate::str::contains("<not counted>"))
        .stdout(predicate::str::contains(
            "no value: EVICTIONS_BANK0 of l3cachehalf",
        ));
    let out =
        stdout_of(sim_stat("bf2").args(["-M", "l3", "--duration", "50ms", "--format", "json"]));
    let lines = ndjson(&out);
    let ev = lines
        .iter()
        .find(|l| l["record"] == "total" && l["event"] == "EVICTIONS_BANK1")
        .unwrap();
    assert_eq!(ev["value"], serde_json::Value::Null);
    assert_eq!(ev["counted"], false);
}

/// One scenario of another program's writes, and what must be said.
struct Scenario {
    gen: Generation,
    spec: &'static str,
    /// Written one after another, `GAP` apart.
    writes: &'static [(&'static str, &'static str)],
    block: &'static str,
    event: &'static str,
    says: &'static str,
}

/// The time between a scenario's writes (a change and back, as a tool would).
const GAP: Duration = Duration::from_millis(250);

const SCENARIOS: &[Scenario] = &[
    // The same event written again resets the counter.
    Scenario {
        gen: Generation::Bf2,
        spec: "tile1,tile2/MEMORY_READS/",
        writes: &[("tile2/event0", "0x4c")],
        block: "tile2",
        event: "MEMORY_READS",
        says: "counter 0 was reset or re-programmed",
    },
    // Another event, then ours again.
    Scenario {
        gen: Generation::Bf2,
        spec: "tile1,tile2/MEMORY_READS/",
        writes: &[("tile2/event0", "0x45"), ("tile2/event0", "0x4c")],
        block: "tile2",
        event: "MEMORY_READS",
        says: "counter 0 was reset or re-programmed",
    },
    // A counter written with 0.
    Scenario {
        gen: Generation::Bf2,
        spec: "tile1,tile2/MEMORY_READS/",
        writes: &[("tile2/counter0", "0")],
        block: "tile2",
        event: "MEMORY_READS",
        says: "counter 0 was reset or re-programmed",
    },
    // A multiplexed block: its counters restart every turn.
    Scenario {
        gen: Generation::Bf2,
        spec: "tile2/HNF_REQUESTS,MEMORY_READS,MEMORY_WRITES,A72_READ,A72_WRITE,IO_READ/",
        writes: &[("tile2/event0", "0x46")],
        block: "tile2",
        event: "",
        says: "another program programmed event 0x46 on counter 0",
    },
    // An L3 half switched off.
    Scenario {
        gen: Generation::Bf2,
        spec: "l3cache/HITS_BANK0/",
        writes: &[("l3cachehalf0/enable", "0")],
        block: "l3cachehalf0",
        event: "HITS_BANK0",
        says: "switched the block's enable off",
    },
    // An L3 half switched off and on again.
    Scenario {
        gen: Generation::Bf2,
        spec: "l3cache/HITS_BANK0/",
        writes: &[("l3cachehalf0/enable", "0"), ("l3cachehalf0/enable", "1")],
        block: "l3cachehalf0",
        event: "HITS_BANK0",
        says: "switched the block's enable off",
    },
    // An L3 half's event changed and back (programming an L3 counter stops the half).
    Scenario {
        gen: Generation::Bf2,
        spec: "l3cache/HITS_BANK0/",
        writes: &[
            ("l3cachehalf0/event0", "0x1a"),
            ("l3cachehalf0/event0", "0x17"),
        ],
        block: "l3cachehalf0",
        event: "HITS_BANK0",
        says: "switched the block's enable off",
    },
    // A BF3 cycle counter turned back into an event counter.
    Scenario {
        gen: Generation::Bf3,
        spec: "llt0,llt1/cycles,GDC_BANK0_RD_REQ/",
        writes: &[("llt0/count_clock", "0x0")],
        block: "llt0",
        event: "cycles",
        says: "set count_clock to 0x0",
    },
    // A BF3 event counter made to count cycles, and back.
    Scenario {
        gen: Generation::Bf3,
        spec: "llt0,llt1/GDC_BANK0_RD_REQ/",
        writes: &[("llt0/count_clock", "0xffff"), ("llt0/count_clock", "0x0")],
        block: "llt0",
        event: "GDC_BANK0_RD_REQ",
        says: "set count_clock to 0xff",
    },
    // A BF3 crspace counter given another event (it keeps counting from its value).
    Scenario {
        gen: Generation::Bf3,
        spec: "llt0,llt1/cycles,GDC_BANK0_RD_REQ/",
        writes: &[("llt0/event1", "0x3")],
        block: "llt0",
        event: "GDC_BANK0_RD_REQ",
        says: "another program programmed event 0x3 on counter 1",
    },
    // A BF3 crspace counter written with 0 mid-window.
    Scenario {
        gen: Generation::Bf3,
        spec: "llt0,llt1/cycles,GDC_BANK0_RD_REQ/",
        writes: &[("llt0/counter1", "0x0")],
        block: "llt0",
        event: "GDC_BANK0_RD_REQ",
        says: "counter 1 went backwards: another program wrote it",
    },
];

impl Scenario {
    /// Its writes, the first at `start`.
    fn writes(&self, start: Duration) -> Vec<(Duration, String, String)> {
        self.writes
            .iter()
            .enumerate()
            .map(|(k, (f, d))| (start + GAP * k as u32, f.to_string(), d.to_string()))
            .collect()
    }
}

/// Each scenario within the first second and later, with `-I 1s` and without:
/// flagged with its reason, in the interval of the write only, and the other block
/// untouched.
#[test]
fn every_foreign_write_is_flagged_in_stat() {
    let cases = [(700, 1.0), (2450, 3.0)].into_iter().flat_map(|(at, bad)| {
        [Some(Duration::from_secs(1)), None].map(|i| (Duration::from_millis(at), bad, i))
    });
    let cases: Vec<_> = cases.collect();
    for (n, s) in SCENARIOS.iter().enumerate() {
        for &(at, bad_interval, interval) in &cases {
            let r = rig(s.gen);
            let before = r.sim.list("").unwrap().len();
            let mut req = request(&[s.spec.to_string()]);
            req.timing.interval = interval;
            let mut intervals: Vec<Interval> = Vec::new();
            let out = r.measure_with(&req, 5, s.writes(at), &mut |i| intervals.push(i.clone()));
            let what = format!("scenario {n} at {at:?}, -I {interval:?}");
            let counts = &out.runs[0].counts;
            let hit: Vec<&Count> = counts
                .iter()
                .filter(|c| &*c.block == s.block && (s.event.is_empty() || &*c.event == s.event))
                .filter(|c| !c.valid)
                .collect();
            // Flagged, with the reason of the last thing done to it.
            assert!(!hit.is_empty(), "{what}: nothing flagged in {counts:?}");
            assert!(hit.iter().all(|c| c.invalid.is_some()), "{what}: {hit:?}");
            assert!(out.foreign, "{what}");
            assert!(
                out.warnings.iter().any(|w| w.contains(s.says)),
                "{what}: {:?}",
                out.warnings
            );
            if interval.is_some() {
                // Only the interval of the write is invalid: the block is programmed
                // again.
                let bad: Vec<f64> = intervals
                    .iter()
                    .filter(|i| i.counts.iter().any(|c| !c.valid))
                    .map(|i| i.time_s)
                    .collect();
                assert_eq!(bad, [bad_interval], "{what}");
            }
            // Another block of the spec is untouched.
            assert!(
                counts
                    .iter()
                    .filter(|c| &*c.block != s.block)
                    .all(|c| c.valid),
                "{what}"
            );
            assert_eq!(r.sim.list("").unwrap().len(), before);
        }
    }
}

/// The exported counter of a scenario's event: its value now.
fn exported(text: &str, s: &Scenario) -> f64 {
    let (family, event) = match s.event {
        "cycles" => ("bfperf_cycles_total{", String::new()),
        "" => ("bfperf_events_total{", "event=\"HNF_REQUESTS\"".to_string()),
        e => ("bfperf_events_total{", format!("event=\"{e}\"")),
    };
    let block = format!("block=\"{}\"", s.block);
    let line = text
        .lines()
        .find(|l| l.starts_with(family) && l.contains(&block) && l.contains(&event))
        .unwrap_or_else(|| panic!("no {family} {block} {event} in {text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// What the scenario's event counts per second on the simulator.
fn truth(r: &Rig, s: &Scenario) -> f64 {
    let number = match s.event {
        "cycles" => return r.sim.clock_hz(s.block).unwrap() as f64,
        "" => 0x45,
        e => {
            let kind = BlockKind::from_block_name(s.block);
            bfperf::catalog::builtin(kind, s.gen)
                .iter()
                .find(|d| d.name.trim_end() == e)
                .unwrap()
                .number
        }
    };
    r.sim.event_rate(s.block, number).unwrap() as f64
}

/// Each scenario in the exporter over a minute, swept every second and checked
/// every 100 ms as it runs: counted as re-programmed, logged, programmed again, and
/// the window it spoiled left out, its span estimated from the item's next window,
/// so that the counter's rate over the minute is the truth's (to 1e-5; 0.975–0.998
/// of it while that span was lost, and a jump of up to 1.4 G when the window was
/// added).
#[test]
fn every_foreign_write_is_flagged_and_reasserted_by_the_exporter() {
    for (n, s) in SCENARIOS.iter().enumerate() {
        let r = rig(s.gen);
        let config = counting(s.spec);
        let set = MetricSet::load(&[s.gen], &[]);
        let step = 100_000_000;
        let mut e = Collector::start(&r.device, &config, set, || r.clock.now_ns()).unwrap();
        let mut writes = s.writes(Duration::from_millis(30_450));
        let wrote: Vec<(String, String)> = s
            .writes
            .iter()
            .map(|(f, _)| (f.to_string(), r.sim.read(f).unwrap()))
            .collect();
        let mut first = None;
        for k in 1..=600u64 {
            r.clock.advance_ns(step / 2);
            while writes
                .first()
                .is_some_and(|(at, _, _)| r.clock.now_ns() >= at.as_nanos() as u64)
            {
                let (_, f, d) = writes.remove(0);
                r.sim.write(&f, d.as_bytes()).unwrap();
            }
            r.clock.advance_ns(step / 2);
            match k % 10 {
                0 => e.scrape(r.clock.now_ns()).unwrap(),
                _ => e.probe(r.clock.now_ns()),
            }
            if k == 10 {
                first = Some(exported(&e.openmetrics(true, 0.0), s));
            }
        }
        let text = e.openmetrics(true, 0.0);
        let line = text
            .lines()
            .find(|l| l.starts_with("bfperf_reprogrammed_total"))
            .unwrap();
        let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(count >= 1.0, "scenario {n}: {line}");
        assert!(
            e.events.iter().any(|l| l.contains(s.says)),
            "scenario {n}: {:?}",
            e.events
        );
        let rate = (exported(&text, s) - first.unwrap()) / 59.0;
        let want = truth(&r, s);
        assert!(
            (rate - want).abs() <= 1e-5 * want,
            "scenario {n}: {rate}/s against {want}/s"
        );
        // Programmed again: the files read as before the write (a multiplexed
        // block has moved on to its next turn: one of its own events).
        for (f, was) in wrote {
            let now = r.sim.read(&f).unwrap();
            if s.event.is_empty() {
                assert!(!now.starts_with("0x46:"), "scenario {n}: {f} {now}");
            } else if !f.ends_with("/counter0") && !f.ends_with("/counter1") {
                assert_eq!(now, was, "scenario {n}: {f}");
            }
        }
        e.stop().unwrap();
    }
}

#[test]
fn the_exporter_scales_multiplexed_events_as_stat_does() {
    let spec = "tile2/HNF_REQUESTS,MEMORY_READS,MEMORY_WRITES,A72_READ,A72_WRITE,IO_READ/";
    let r = rig(Generation::Bf2);
    let out = r.measure(&request(&[spec.to_string()]), 20);
    let r2 = rig(Generation::Bf2);
    let config = counting(spec);
    let mut e = Collector::start(
        &r2.device,
        &config,
        MetricSet::load(&[Generation::Bf2], &[]),
        || 0,
    )
    .unwrap();
    // What rate() sees: the increase of a series over a window, per second.
    let mut texts = Vec::new();
    for s in 1..=20 {
        r2.clock.advance_secs(1);
        e.sweep(r2.clock.now_ns()).unwrap();
        if s == 10 || s == 20 {
            texts.push(e.openmetrics(true, 0.0));
        }
    }
    let sample = |text: &str, event: &str| -> f64 {
        let wanted = format!("event=\"{event}\"");
        let line = text
            .lines()
            .find(|l| l.starts_with("bfperf_events_total{") && l.contains(&wanted))
            .unwrap_or_else(|| panic!("{event} not exported:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    for c in &out.runs[0].counts {
        let truth = r.sim.event_rate("tile2", c.event_number.unwrap()).unwrap() as f64;
        let stat = c.value.unwrap() as f64 / 20.0;
        let exported = (sample(&texts[1], &c.event) - sample(&texts[0], &c.event)) / 10.0;
        assert_rate(stat, truth, "stat");
        assert_rate(
            exported,
            stat,
            &format!("{}: exported against stat", c.event),
        );
    }
    e.stop().unwrap();
}

#[test]
fn a_closed_output_never_kills_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_bfperf"))
        .args([
            "--sim",
            "bf2",
            "stat",
            "-o",
            "-",
            "-e",
            "tile/MEMORY_READS/",
            "-I",
            "100",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("sleep 1; touch {}; exit 3", done.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut head, mut first) = (String::new(), String::new());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut head).unwrap();
    assert!(head.contains("EVENT OR METRIC"), "{head}");
    out.read_line(&mut first).unwrap();
    assert!(first.contains("MEMORY_READS"), "{first}");
    drop(out);
    // The reader is gone (as `| head -1` leaves).
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    assert!(done.exists(), "the command ran to its end");
}

/// A read of a counter that fails mid-run (EIO, injected into the simulator) marks
/// that interval and the totals with the reason; the other intervals stay right and
/// valid, the command runs to its end, and bfperf exits with its status.
#[test]
fn a_device_fault_never_costs_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");
    let out = bfperf()
        .args([
            "--sim",
            "bf2",
            "--sim-faults",
            "tile2/counter*@4=EIO",
            "stat",
            "-o",
            "-",
            "-e",
            "tile2/HNF_REQUESTS/",
            "-I",
            "200",
            "-j",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("sleep 1.1; touch {}; exit 7", done.display()))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(done.exists(), "the command ran to its end");
    let records: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rate = {
        let (sim, _) = Sim::with_manual_clock(Generation::Bf2, Kernel::V6_16);
        sim.event_rate("tile2", 0x45).unwrap() as f64
    };
    let intervals: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["record"] == "interval")
        .collect();
    let marked: Vec<&&serde_json::Value> =
        intervals.iter().filter(|r| r["valid"] == false).collect();
    assert_eq!(marked.len(), 1, "{intervals:?}");
    assert!(
        marked[0]["invalid"]
            .as_str()
            .unwrap()
            .contains("Input/output error"),
        "{}",
        marked[0]
    );
    // The values are read again after the failure, a moment after the tick: the
    // next interval was not counted whole, and says so.
    let after = intervals
        .iter()
        .position(|r| r["valid"] == false)
        .and_then(|i| intervals.get(i + 1))
        .expect("an interval after the fault");
    assert!(after["coverage"].as_f64().unwrap() < 1.0, "{after}");
    let mut start = 0.0;
    for r in &intervals {
        let t = r["time_s"].as_f64().unwrap();
        if r["valid"] == true {
            let want = rate * (t - start);
            let got = r["value"].as_f64().unwrap();
            assert_rate(got, want, &r.to_string());
        }
        start = t;
    }
    let total = records.iter().find(|r| r["record"] == "total").unwrap();
    assert_eq!(total["valid"], false, "{total}");
    let end = records.last().unwrap();
    assert_eq!(end["exit_status"], 7);
    assert_eq!(end["restored"], true);
}

#[test]
fn the_simulator_counts_traffic_not_counters() {
    let r = rig(Generation::Bf2);
    for i in 0..4 {
        r.sim.write(&format!("tile2/event{i}"), b"0x4c").unwrap();
    }
    r.clock.advance_secs(3);
    let values: Vec<u64> = (0..4)
        .map(|i| {
            let t = r.sim.read(&format!("tile2/counter{i}")).unwrap();
            u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).unwrap()
        })
        .collect();
    let first = values[0] as f64;
    assert!(first > 0.0);
    assert!(
        values
            .iter()
            .all(|&v| (v as f64 - first).abs() / first < 0.001),
        "{values:?}"
    );

    // BF2: a home node's requests are the L3's hits and misses; what goes to memory
    // is the misses.
    let rate = |b: &str, n: u32| r.sim.event_rate(b, n).unwrap() as f64;
    let sum = |blocks: &[&str], n: u32| blocks.iter().map(|b| rate(b, n)).sum::<f64>();
    let tiles = ["tile0", "tile1", "tile2", "tile3"];
    let halves = ["l3cachehalf0", "l3cachehalf1"];
    let (hits, misses) = (
        sum(&halves, 0x17) + sum(&halves, 0x18),
        sum(&halves, 0x19) + sum(&halves, 0x1a),
    );
    let close = |a: f64, b: f64| assert!((a - b).abs() / b < 1e-6, "{a} vs {b}");
    close(sum(&tiles, 0x45), hits + misses);
    close(sum(&tiles, 0x4c) + sum(&tiles, 0x4d), misses);
    // The default traffic: 12 GB/s of 64-byte lines, 75 % hits.
    close(hits + misses, 12e9 / 64.0);
    close(hits / (hits + misses), 0.75);

    // BF3: DDR reads are the LLC's read misses, 64 bytes each, measured by stat.
    let r3 = rig(Generation::Bf3);
    let out = r3.measure(
        &request(&[
            "mss/SKYLIB_DDN_TX_FLITS/".into(),
            "llt_miss/GDC_MISS_MACHINE_RD_REQ/".into(),
            "llt/GDC_BANK0_RD_REQ,GDC_BANK1_RD_REQ/".into(),
        ]),
        2,
    );
    let agg = measure::aggregate(&out.runs[0].counts);
    let v = |kind: &str, e: &str| {
        agg.iter()
            .find(|c| &*c.block == kind && &*c.event == e)
            .unwrap()
            .value
            .unwrap() as f64
    };
    let ddr_read_bytes = v("mss", "SKYLIB_DDN_TX_FLITS") * 64.0;
    let llc_read_miss_bytes = v("llt_miss", "GDC_MISS_MACHINE_RD_REQ") * 64.0;
    assert!((ddr_read_bytes - llc_read_miss_bytes).abs() / llc_read_miss_bytes < 1e-6);
    let reads = v("llt", "GDC_BANK0_RD_REQ") + v("llt", "GDC_BANK1_RD_REQ");
    close(llc_read_miss_bytes / (reads * 64.0), 0.25);
    // PCIe: 6 GB/s in, 70 % posted, 256-byte packets, over both pcie blocks.
    let reg = |b: &str, name: &str| r.sim.register_rate(b, name).unwrap() as f64;
    close(
        reg("pcie0", "IN_P_BYTE_CNT") / reg("pcie0", "IN_P_PKT_CNT"),
        256.0,
    );
    close(
        reg("pcie0", "IN_P_BYTE_CNT") + reg("pcie1", "IN_P_BYTE_CNT"),
        6e9 * 0.7,
    );
}

#[test]
fn workload_phases_drive_the_counts_over_time() {
    let workload: Workload = toml::from_str(
        "repeat = false\n\
         [[phase]]\nseconds = 1\nread_bytes_per_s = 6.4e9\nhit_ratio = 0.5\n\
         [[phase]]\nseconds = 1\nread_bytes_per_s = 1.28e9\nhit_ratio = 0.5\n",
    )
    .unwrap();
    let r = rig_with(
        Generation::Bf2,
        &SimOptions {
            workload,
            ..Default::default()
        },
    );
    let mut req = request(&["tile0/MEMORY_READS/".into()]);
    req.timing.interval = Some(Duration::from_millis(500));
    let mut seen = Vec::new();
    r.measure_with(&req, 3, Vec::new(), &mut |i| {
        seen.push(i.counts[0].value.unwrap())
    });
    // 6.4 GB/s: 100 M lines/s, half missed, over 4 tiles, for half a second; then a
    // fifth of that.
    assert_eq!(
        seen,
        [6_250_000, 6_250_000, 1_250_000, 1_250_000, 1_250_000, 1_250_000]
    );
    assert_eq!(
        r.sim.expected_count("tile0", 0x4c, 0, 2_000_000_000),
        Some(15_000_000)
    );
    // A workload file, checked.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[phase]]\nseconds = 1\nhit_ratio = 2\n").unwrap();
    bfperf()
        .args(["--sim", "bf2", "--workload"])
        .arg(&bad)
        .arg("info")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("hit_ratio = 2 is not from 0 to 1"));
}

#[test]
fn diff_refuses_snapshots_it_cannot_compare() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    on_fixture("bf2")
        .args(["snapshot", "tile2", "-o"])
        .arg(&a)
        .assert()
        .success();
    let text = std::fs::read_to_string(&a).unwrap();
    let refused = |edit: &dyn Fn(&mut serde_json::Value), says: &str| {
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        edit(&mut v);
        std::fs::write(&b, v.to_string()).unwrap();
        bfperf()
            .arg("diff")
            .arg(&a)
            .arg(&b)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(says))
            .stderr(predicate::str::contains("b.json"));
    };
    refused(
        &|v| {
            v["blocks"][0]["counters"][3]["width_bits"] = 32.into();
            v["blocks"][0]["counters"][3]["value"] = 5.into();
            let later = |x: &serde_json::Value| x.as_u64().unwrap() + 1_000_000_000;
            v["timestamp_unix_ns"] = later(&v["timestamp_unix_ns"]).into();
            v["monotonic_ns"] = later(&v["monotonic_ns"]).into();
        },
        "tile2 counter3 is 64 bits wide in the first and 32 in the second",
    );
    refused(
        &|v| {
            let block = v["blocks"][0].clone();
            v["blocks"].as_array_mut().unwrap().push(block);
        },
        "block tile2 is recorded twice",
    );
    refused(
        &|v| {
            let counter = v["blocks"][0]["counters"][0].clone();
            v["blocks"][0]["counters"]
                .as_array_mut()
                .unwrap()
                .push(counter);
        },
        "tile2 counter0 is recorded twice",
    );
}

fn chain(dir: &std::path::Path, name: &str, n: usize, cycle: bool) -> std::path::PathBuf {
    let mut defs = vec![serde_json::json!({
        "MetricName": "c0",
        "MetricExpr": if cycle { format!("c{} + 1", n - 1) } else { "MEMORY_READS".into() },
        "Unit": "tile",
    })];
    for i in 1..n {
        defs.push(serde_json::json!({
            "MetricName": format!("c{i}"),
            "MetricExpr": format!("c{} + 1", i - 1),
            "Unit": "tile",
        }));
    }
    let path = dir.join(name);
    std::fs::write(&path, serde_json::Value::Array(defs).to_string()).unwrap();
    path
}

#[test]
fn metric_chains_of_any_length_are_evaluated_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let long = chain(dir.path(), "long.json", 100_000, false);
    let set = MetricSet::load(&[Generation::Bf2], std::slice::from_ref(&long));
    let err = set.select(&["c99999".to_string()]).unwrap_err().to_string();
    assert!(
        err.contains("refers to metrics 100000 deep (c99999 → c99998"),
        "{err}"
    );
    // Within the limit: evaluated, each link exactly.
    let chosen = set.select(&["c200".to_string()]).unwrap();
    assert_eq!(chosen.len(), 201);
    let mut inputs = metrics::Inputs {
        duration_s: 1.0,
        ..Default::default()
    };
    inputs.add("tile0", BlockKind::Tile, "MEMORY_READS", 1000.0, 1.0);
    let values = metrics::evaluate(&set, &chosen, &inputs, true);
    let c200 = values
        .iter()
        .find(|v| v.metric == "c200" && v.block == "tile0")
        .unwrap();
    assert_eq!(c200.value, Some(1200.0));

    let cycle = chain(dir.path(), "cycle.json", 100_000, true);
    let set = MetricSet::load(&[Generation::Bf2], std::slice::from_ref(&cycle));
    let err = set.select(&["c500".to_string()]).unwrap_err().to_string();
    assert!(
        err.contains("refers to itself through c0 → c99999"),
        "{err}"
    );
    assert!(err.contains("(100000 metrics)"), "{err}");
}

/// A sweep stalled past the time a 32-bit counter takes to wrap (llt's at 2 GHz:
/// 2.1 s) never exports what the wrapped counters show as a count: the window is
/// left out, said in the log, and the next window is scaled over its span (as a
/// multiplexed turn is), so that a rate over both is right, not low by the stall.
#[test]
fn a_window_stalled_past_a_wrap_is_never_exported_as_a_count() {
    let r = rig(Generation::Bf3);
    let s = Scenario {
        gen: Generation::Bf3,
        spec: "llt0/GDC_BANK0_RD_REQ/",
        writes: &[],
        block: "llt0",
        event: "GDC_BANK0_RD_REQ",
        says: "",
    };
    let config = counting(s.spec);
    let set = MetricSet::load(&[Generation::Bf3], &[]);
    let mut e = Collector::start(&r.device, &config, set, || r.clock.now_ns()).unwrap();
    let want = truth(&r, &s);
    let at = |e: &mut Collector, secs: u64| {
        r.clock.advance_secs(secs);
        e.sweep(r.clock.now_ns()).unwrap();
        exported(&e.openmetrics(true, 0.0), &s)
    };
    let first = at(&mut e, 1);
    assert_rate(first, want, "the first second");
    // Five seconds unread: the counters wrapped twice meanwhile.
    let stalled = at(&mut e, 5);
    assert_eq!(stalled, first, "a stalled window was exported");
    assert!(
        e.events
            .iter()
            .any(|l| l.contains("longer than its counters take to wrap")),
        "{:?}",
        e.events
    );
    let after = at(&mut e, 1);
    assert_rate(
        (after - first) / 6.0,
        want,
        "the stall and the second after",
    );
}
