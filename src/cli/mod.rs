//! The command line: parses arguments, runs the operations, renders the results.

mod args;
pub mod complete;
mod render;

pub use args::{Cli, Command, Global, Shell, SimCommand};
pub use render::{group, group_f};

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use clap::Parser;
use serde_json::json;

use crate::block::{Generation, Mechanism};
use crate::catalog::Source;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::ops::{control, diff, program, read, snapshot};
use crate::sim;

/// Opens the device the global options name.
pub fn open_device(global: &Global) -> Result<Device> {
    match &global.device {
        Some(dir) => Device::open_dir(dir),
        None => Device::discover(&global.sysfs_root),
    }
}

fn print_json<T: serde::Serialize>(value: &T) {
    let text = serde_json::to_string_pretty(value).expect("serializable");
    println!("{text}");
}

/// Parses the process's arguments and runs the command. Returns the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprintln!("bfperf: error: {e}");
            1
        }
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let g = &cli.global;
    match cli.command {
        Command::Info(o) => info(&open_device(g)?, o.json),
        Command::Blocks(o) => blocks(&open_device(g)?, o.json),
        Command::Events {
            block,
            pattern,
            json,
        } => events(&open_device(g)?, &block, pattern.as_deref(), json.json),
        Command::Program {
            block,
            assignments,
            force,
            start,
            count_clock,
            write,
        } => {
            let device = open_device(g)?;
            let parsed = program::parse_assignments(&assignments, count_clock)?;
            let opts = program::ProgramOptions {
                force,
                start,
                count_clock,
            };
            let outcome = if write.dry_run {
                program::plan_program(&device, &block, &parsed, &opts)?
            } else {
                program::program(&device, &block, &parsed, &opts)?
            };
            show_program(&device, &outcome, write.dry_run, write.json);
            Ok(())
        }
        Command::Start { block, write } => {
            let device = open_device(g)?;
            let plan = control::plan_start(&device, &block)?;
            finish_control(&device, plan, write)
        }
        Command::Stop {
            block,
            counter,
            write,
        } => {
            let device = open_device(g)?;
            let plan = control::plan_stop(&device, &block, counter.as_deref())?;
            finish_control(&device, plan, write)
        }
        Command::Clear {
            block,
            target,
            write,
        } => {
            let device = open_device(g)?;
            let plan = control::plan_clear(&device, &block, target.as_deref())?;
            finish_control(&device, plan, write)
        }
        Command::Read {
            selectors,
            json,
            csv,
        } => read_cmd(&open_device(g)?, &selectors, json, csv),
        Command::Snapshot { selectors, output } => {
            let device = open_device(g)?;
            let snap = snapshot::take(&device, &selectors)?;
            match output {
                Some(path) => {
                    snapshot::write_atomic(&snap, &path)?;
                    let values: usize = snap
                        .blocks
                        .iter()
                        .map(|b| b.counters.len() + b.registers.len())
                        .sum();
                    eprintln!(
                        "wrote {} values of {} blocks to {}",
                        values,
                        snap.blocks.len(),
                        path.display()
                    );
                }
                None => print_json(&snap),
            }
            Ok(())
        }
        Command::Diff { old, new, json } => {
            let a = snapshot::load(&old)?;
            let b = snapshot::load(&new)?;
            let d = diff::diff(&a, &b);
            if json.json {
                print_json(&d);
            } else {
                show_diff(&d);
            }
            Ok(())
        }
        Command::Completions { shell } => {
            print!("{}", complete::script(shell));
            Ok(())
        }
        Command::Sim(cmd) => sim_cmd(cmd),
        Command::Complete { index, words } => {
            for c in complete::candidates(&words, index) {
                println!("{c}");
            }
            Ok(())
        }
    }
}

fn parse_sim_opts(o: &args::SimOpts) -> (Generation, sim::Flavor) {
    let gen = match o.generation.as_str() {
        "1" => Generation::Bf1,
        "3" => Generation::Bf3,
        _ => Generation::Bf2,
    };
    (
        gen,
        sim::Flavor::parse(&o.flavor).unwrap_or(sim::Flavor::New),
    )
}

fn sim_cmd(cmd: SimCommand) -> Result<()> {
    match cmd {
        SimCommand::Mount { dir, sim: o } => {
            let (gen, flavor) = parse_sim_opts(&o);
            let device = Arc::new(sim::Sim::new(
                gen,
                flavor,
                Arc::new(sim::SystemClock::new()),
            ));
            sim::mount::serve(device, &dir)
        }
        SimCommand::Export {
            dir,
            sim: o,
            fixture,
        } => {
            let (gen, flavor) = parse_sim_opts(&o);
            if dir.exists()
                && std::fs::read_dir(&dir)
                    .map(|mut d| d.next().is_some())
                    .unwrap_or(true)
            {
                return Err(Error::Invalid(format!(
                    "{} exists and is not empty; export writes a new tree",
                    dir.display()
                )));
            }
            let device = if fixture {
                sim::export::fixture_sim(gen)
            } else {
                sim::Sim::new(gen, flavor, Arc::new(sim::ManualClock::new(0)))
            };
            sim::export_tree(&device, sim::SysfsRootLayout::default(), &dir).map_err(|e| {
                Error::File {
                    what: "cannot export the simulated tree to",
                    path: dir.clone(),
                    source: e,
                }
            })
        }
    }
}

fn info(device: &Device, json: bool) -> Result<()> {
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for b in device.blocks() {
        *kinds.entry(b.kind.as_str()).or_default() += 1;
    }
    if json {
        print_json(&json!({
            "device": device.location(),
            "generation": device.generation().label(),
            "blocks": device.blocks().len(),
            "kinds": kinds,
        }));
        return Ok(());
    }
    let by_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!("device      {}", device.location());
    println!("generation  {}", device.generation().label());
    println!(
        "blocks      {} ({})",
        device.blocks().len(),
        by_kind.join(", ")
    );
    Ok(())
}

fn blocks(device: &Device, json: bool) -> Result<()> {
    let mut rows = Vec::new();
    let mut out = Vec::new();
    for b in device.blocks() {
        let enabled = if b.has_enable {
            Some(read::read_number(device.fs(), &crate::sysfs::layout::enable(&b.name))? != 0)
        } else {
            None
        };
        let events = device.catalog(b)?.events.len();
        rows.push(vec![
            b.name.clone(),
            b.kind.as_str().to_string(),
            b.mechanism.as_str().to_string(),
            if b.mechanism == Mechanism::Registers {
                format!("{} registers", b.registers.len())
            } else {
                b.counters.len().to_string()
            },
            match enabled {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "-".into(),
            },
            events.to_string(),
        ]);
        out.push(json!({
            "name": b.name,
            "kind": b.kind,
            "mechanism": b.mechanism,
            "counters": b.counters.len(),
            "registers": b.registers,
            "enabled": enabled,
            "events": events,
        }));
    }
    if json {
        print_json(&json!({
            "device": device.location(),
            "generation": device.generation().label(),
            "blocks": out,
        }));
    } else {
        println!(
            "{}",
            render::table(
                &[
                    "BLOCK",
                    "KIND",
                    "MECHANISM",
                    "COUNTERS",
                    "ENABLED",
                    "EVENTS"
                ],
                &[3, 5],
                rows
            )
        );
    }
    Ok(())
}

fn events(device: &Device, block: &str, pattern: Option<&str>, json: bool) -> Result<()> {
    let b = device.block(block)?;
    let catalog = device.catalog(b)?;
    let shown: Vec<_> = match pattern {
        Some(p) => catalog.filter(p),
        None => catalog.events.iter().collect(),
    };
    if json {
        print_json(&json!({
            "block": b.name,
            "kind": b.kind,
            "truncated_event_list": catalog.truncated,
            "events": shown,
        }));
        return Ok(());
    }
    let rows = shown
        .iter()
        .map(|e| {
            vec![
                if e.number == u32::MAX {
                    "-".to_string()
                } else {
                    format!("0x{:x}", e.number)
                },
                if e.source == Source::Builtin {
                    format!("{}*", e.name)
                } else {
                    e.name.clone()
                },
                e.description.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let header = if b.mechanism == Mechanism::Registers {
        ["OFFSET", "REGISTER", "DESCRIPTION"]
    } else {
        ["NUMBER", "NAME", "DESCRIPTION"]
    };
    println!("{}", render::table(&header, &[], rows));
    if shown.iter().any(|e| e.source == Source::Builtin) {
        println!(
            "* not in {}'s event_list (the driver cuts it at 4096 bytes): from bfperf's built-in table",
            b.name
        );
    }
    if shown.is_empty() {
        eprintln!("no event of {} matches '{}'", b.name, pattern.unwrap_or(""));
    }
    Ok(())
}

fn show_plan(device: &Device, plan: &crate::ops::Plan) {
    println!("dry run: nothing written; these writes would be made:");
    for line in plan.describe(&device.location()) {
        println!("  {line}");
    }
}

fn show_program(device: &Device, o: &program::ProgramOutcome, dry_run: bool, json: bool) {
    if json {
        print_json(&json!({
            "block": o.block,
            "dry_run": dry_run,
            "counters": o.counters,
            "started": o.started && !dry_run,
            "writes": o.plan.writes,
            "notes": o.notes,
        }));
        return;
    }
    if dry_run {
        show_plan(device, &o.plan);
        for n in o.notes.iter().filter(|n| !n.starts_with("started")) {
            println!("note: {n}");
        }
        return;
    }
    for c in &o.counters {
        let what = match (c.event, &c.event_name) {
            (Some(n), Some(name)) => format!("{name} (0x{n:x})"),
            (Some(n), None) => format!("event 0x{n:x} (not in the table)"),
            (None, _) => "clock cycles".to_string(),
        };
        let what = if c.counts_clock && c.event.is_some() {
            format!("clock cycles (event {what} kept)")
        } else {
            what
        };
        match &c.readback {
            Some(rb) => println!(
                "{} counter {}: {what}; event{} reads {rb}",
                o.block, c.counter, c.counter
            ),
            None => println!("{} counter {}: {what}", o.block, c.counter),
        }
    }
    for n in &o.notes {
        println!("note: {n}");
    }
}

fn finish_control(
    device: &Device,
    plan: control::ControlOutcome,
    w: args::WriteOpts,
) -> Result<()> {
    if w.dry_run {
        if w.json {
            print_json(
                &json!({"block": plan.block, "action": plan.action, "dry_run": true, "writes": plan.plan.writes}),
            );
        } else {
            show_plan(device, &plan.plan);
        }
        return Ok(());
    }
    let done = control::apply(device, plan)?;
    if w.json {
        print_json(&json!({
            "block": done.block,
            "action": done.action,
            "dry_run": false,
            "writes": done.plan.writes.iter().zip(&done.written).map(|(w, d)| json!({"path": w.path, "data": d})).collect::<Vec<_>>(),
            "final_values": done.final_values,
            "notes": done.notes,
        }));
        return Ok(());
    }
    if let Some(r) = &done.final_values {
        for c in &r.counters {
            println!(
                "{} counter {} before the stop: {} ({})",
                r.block,
                c.index,
                group(c.value),
                c.event_name.as_deref().unwrap_or("not programmed")
            );
        }
    }
    for (w, d) in done.plan.writes.iter().zip(&done.written) {
        let extra = if w.fallback.is_some() && *d != w.data {
            format!(" (the kernel refused {}, so 0xff was written)", w.data)
        } else {
            String::new()
        };
        println!("{}: wrote {d}{extra}", w.path);
    }
    for n in &done.notes {
        println!("note: {n}");
    }
    Ok(())
}

fn event_label(c: &read::CounterReading) -> String {
    match (c.event, &c.event_name) {
        _ if c.counts_clock => "(clock cycles)".to_string(),
        (Some(n), Some(name)) => format!("0x{n:x} {name}"),
        _ => "(not programmed)".to_string(),
    }
}

fn read_cmd(device: &Device, selectors: &[String], json: bool, csv: bool) -> Result<()> {
    let blocks = device.select(selectors)?;
    let r = read::read_blocks(device, &blocks)?;
    if json {
        print_json(&json!({
            "device": device.location(),
            "timestamp": snapshot::rfc3339(r.wall),
            "blocks": r.blocks,
        }));
        return Ok(());
    }
    if csv {
        println!("block,item,event,event_name,value");
        for b in &r.blocks {
            for c in &b.counters {
                println!(
                    "{},counter{},{},{},{}",
                    b.block,
                    c.index,
                    c.event.map(|n| format!("0x{n:x}")).unwrap_or_default(),
                    if c.counts_clock {
                        "CLOCK_CYCLES"
                    } else {
                        c.event_name.as_deref().unwrap_or("")
                    },
                    c.value
                );
            }
            for g in &b.registers {
                println!("{},{},,,{}", b.block, g.name, g.value);
            }
        }
        return Ok(());
    }
    let mut rows = Vec::new();
    for b in &r.blocks {
        let state = match b.enabled {
            Some(true) => "running",
            Some(false) => "stopped",
            None => "",
        };
        for c in &b.counters {
            rows.push(vec![
                b.block.clone(),
                format!("counter{}", c.index),
                event_label(c),
                group(c.value),
                state.to_string(),
            ]);
        }
        for g in &b.registers {
            rows.push(vec![
                b.block.clone(),
                g.name.clone(),
                String::new(),
                group(g.value),
                String::new(),
            ]);
        }
    }
    println!(
        "{}",
        render::table(&["BLOCK", "ITEM", "EVENT", "VALUE", "STATE"], &[3], rows)
    );
    Ok(())
}

fn show_diff(d: &diff::Diff) {
    println!(
        "interval: {:.3} s ({})",
        d.interval_s,
        d.interval_source.replace('_', " ")
    );
    let rows = d
        .values
        .iter()
        .map(|v| {
            vec![
                v.block.clone(),
                v.item.clone(),
                v.event_name.clone().unwrap_or_default(),
                group(v.old),
                group(v.new),
                v.delta.map(group).unwrap_or_else(|| "-".into()),
                v.rate_per_s.map(group_f).unwrap_or_else(|| "-".into()),
                match v.flag {
                    Some(diff::Flag::Wrapped) => "wrapped".into(),
                    Some(diff::Flag::Reset) => "reset".into(),
                    Some(diff::Flag::EventChanged) => "event changed".into(),
                    None => String::new(),
                },
            ]
        })
        .collect();
    println!(
        "{}",
        render::table(
            &[
                "BLOCK",
                "ITEM",
                "EVENT",
                "OLD",
                "NEW",
                "DELTA",
                "PER SECOND",
                "NOTE"
            ],
            &[3, 4, 5, 6],
            rows
        )
    );
    for b in &d.only_in_old {
        println!("only in the old snapshot: {b}");
    }
    for b in &d.only_in_new {
        println!("only in the new snapshot: {b}");
    }
    for p in &d.pcie {
        println!();
        println!("PCIe {}:", p.block);
        println!(
            "  inbound   {} B/s ({:.3} Gb/s), {} packets/s",
            group_f(p.in_bytes_per_s),
            p.in_gbit_per_s,
            group_f(p.in_packets_per_s)
        );
        println!(
            "  outbound  {} B/s ({:.3} Gb/s), {} packets/s",
            group_f(p.out_bytes_per_s),
            p.out_gbit_per_s,
            group_f(p.out_packets_per_s)
        );
        for (label, b) in [
            ("inbound  bytes/s  ", &p.in_bytes_per_s_by_type),
            ("outbound bytes/s  ", &p.out_bytes_per_s_by_type),
            ("inbound  packets/s", &p.in_packets_per_s_by_type),
            ("outbound packets/s", &p.out_packets_per_s_by_type),
        ] {
            println!(
                "  {label}  posted {}  non-posted {}  completion {}",
                group_f(b.posted),
                group_f(b.non_posted),
                group_f(b.completion)
            );
        }
    }
}
