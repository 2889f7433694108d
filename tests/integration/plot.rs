//! `bfperf plot` and `diff --plot`: charts of real runs on the simulator, checked by
//! parsing them (SVG as XML, PNG decoded), and a malformed run named by its line.

use std::path::Path;

use crate::support::*;
use predicates::prelude::*;

/// Lines drawn with their legend entries (bfperf draws series 2 px wide).
fn series_lines(svg: &str) -> usize {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses as XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
        .count()
}

fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

/// `bfperf --sim GEN stat -o - ARGS` into `dir/name`.
fn run_to(dir: &Path, name: &str, gen: &str, args: &[&str]) -> std::path::PathBuf {
    let out = sim_stat(gen).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = dir.join(name);
    std::fs::write(&p, out.stdout).unwrap();
    p
}

#[test]
fn a_run_becomes_one_chart_per_metric_and_kind_with_a_line_per_block() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_to(
        dir.path(),
        "a.ndjson",
        "bf2",
        &[
            "-M",
            "memory",
            "-A",
            "-I",
            "200",
            "--json",
            "--duration",
            "1s",
        ],
    );
    let svg = dir.path().join("a.svg");
    bfperf()
        .arg("plot")
        .arg(&run)
        .arg("--per-block")
        .arg("-o")
        .arg(&svg)
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    // 3 metrics × 4 tiles, and the tiles' 2 events × 4 tiles: 20 lines, each with a
    // legend entry.
    assert_eq!(series_lines(&text), 40);
    let t = texts(&text);
    for want in [
        "memory_read_bandwidth",
        "memory_write_bandwidth",
        "memory_bandwidth",
        "tile: events per second",
        "seconds",
        "GB/s",
        "tile3 MEMORY_READS",
    ] {
        assert!(t.iter().any(|x| x == want), "no text {want}: {t:?}");
    }
    // Two runs on the same charts: twice the lines, labelled by file; PNG decodes.
    let png = dir.path().join("ab.png");
    bfperf()
        .arg("plot")
        .arg(&run)
        .arg(&run)
        .arg("--per-block")
        .arg("-o")
        .arg(&png)
        .assert()
        .success();
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1100, 4 * 340 + 40));
    // Without --per-block, the kind's totals: `stat -A` gives them for the metrics.
    let totals = dir.path().join("t.svg");
    bfperf()
        .arg("plot")
        .arg(&run)
        .arg("-o")
        .arg(&totals)
        .assert()
        .success();
    assert_eq!(series_lines(&std::fs::read_to_string(&totals).unwrap()), 6);
    // A run made without -A has no per-block line, and plot says how to make one.
    let kinds = run_to(
        dir.path(),
        "k.ndjson",
        "bf2",
        &["-M", "memory", "-I", "200", "--json", "--duration", "500ms"],
    );
    bfperf()
        .arg("plot")
        .arg(&kinds)
        .arg("--per-block")
        .arg("-o")
        .arg(dir.path().join("none.svg"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("made with -A"));
}

#[test]
fn a_malformed_line_is_named_and_an_unknown_extension_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_to(
        dir.path(),
        "a.ndjson",
        "bf3",
        &["-M", "ddr", "-I", "200", "--json", "--duration", "600ms"],
    );
    let mut text = std::fs::read_to_string(&run).unwrap();
    let good_lines = text.lines().count();
    text.push_str("{\"record\": \"interval\", \"time_s\": oops}\n");
    std::fs::write(&run, &text).unwrap();
    bfperf()
        .arg("plot")
        .arg(&run)
        .args(["-o"])
        .arg(dir.path().join("x.svg"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!("line {}", good_lines + 1)));
    bfperf()
        .arg("plot")
        .arg(&run)
        .args(["-o"])
        .arg(dir.path().join("x.jpg"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(".svg or .png"));
}

#[test]
fn diff_plots_a_bar_per_value() {
    let c = Copy::of("bf2");
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    c.run(&["snapshot", "pcie0", "-o", a.to_str().unwrap()]);
    // The fixture is files: make pcie0's inbound posted bytes grow by 1000.
    let reg = c.device().join("pcie0/IN_P_BYTE_CNT");
    let before = std::fs::read_to_string(&reg).unwrap();
    let v = u64::from_str_radix(before.trim().trim_start_matches("0x"), 16).unwrap();
    std::fs::write(&reg, format!("{:#x}\n", v + 1000)).unwrap();
    c.run(&["snapshot", "pcie0", "-o", b.to_str().unwrap()]);
    let svg = dir.path().join("d.svg");
    bfperf()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .arg("--plot")
        .arg(&svg)
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let bars = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") != Some("#FFFFFF"))
        .count();
    assert_eq!(bars, 1, "{text}");
    assert!(texts(&text).iter().any(|t| t == "pcie0 IN_P_BYTE_CNT"));
}

/// Interval metrics are drawn, the run's total metrics are not: each metric line has
/// one point per interval, in files that say `of` and in files made before it.
#[test]
fn only_intervals_are_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["-M", "ddr", "-I", "250", "--duration", "1s", "-j"];
    let run = run_to(dir.path(), "run.json", "bf3", &args);
    let text = std::fs::read_to_string(&run).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |of: &str| {
        records
            .iter()
            .filter(|r| r["record"] == "metric" && r["metric"] == "ddr_bandwidth" && r["of"] == of)
            .count()
    };
    let intervals = of("interval");
    assert_eq!(of("total"), 1);
    assert!(intervals >= 4, "{text}");
    // A point for each interval with a value: one a busy machine left without one
    // (its reason said) is no point.
    let valued = records
        .iter()
        .filter(|r| {
            r["record"] == "metric" && r["metric"] == "ddr_bandwidth" && r["of"] == "interval"
        })
        .filter(|r| r["value"].is_f64())
        .count();
    assert!(valued >= 1, "{text}");
    // The same run as an older bfperf wrote it: no `of`.
    let old = dir.path().join("old.json");
    let stripped: String = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("of");
            format!("{v}\n")
        })
        .collect();
    std::fs::write(&old, stripped).unwrap();
    for file in [&run, &old] {
        let (_, charts) = bfperf::measure::series::charts(&[file.as_path()], false).unwrap();
        let chart = charts.iter().find(|c| c.title == "ddr_bandwidth").unwrap();
        assert_eq!(chart.lines.len(), 1);
        assert_eq!(chart.lines[0].points.len(), valued, "{}", file.display());
    }
}

/// Values no axis can hold (1e308 per 0.5 s is infinite per second), the largest
/// finite ones, negative ones and far times: drawn or left out and said, and the
/// plot finishes (a hang is killed after 10 s and fails the test).
#[test]
fn extreme_values_are_drawn_or_said_never_hang() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    let line = |t: &str, v: &str| {
        format!(
            r#"{{"record":"interval","run":1,"time_s":{t},"block":"tile0","kind":"tile","blocks":1,"counter":0,"event":"MEMORY_READS","event_number":76,"value":{v},"raw":1,"unit":"events","coverage":1.0,"valid":true}}"#
        )
    };
    let text = [
        line("0.5", "1e308"),
        line("1.0", "8e307"),
        line("1.5", "-5"),
        line("1e308", "3"),
        r#"{"record":"metric","of":"interval","run":1,"time_s":1.0,"metric":"m","block":"tile0","kind":"tile","value":1.7976931348623157e308,"unit":"GB/s"}"#.to_string(),
    ]
    .join("\n");
    std::fs::write(&run, text).unwrap();
    let svg = dir.path().join("out.svg");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("bfperf"))
        .args(["plot", "--per-block"])
        .arg(&run)
        .arg("-o")
        .arg(&svg)
        .spawn()
        .unwrap();
    let mut status = None;
    for _ in 0..1000 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let Some(status) = status else {
        child.kill().unwrap();
        panic!("plot did not finish within 10 s");
    };
    assert!(status.success());
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        texts(&drawn)
            .iter()
            .any(|t| t.contains("1 values not finite, not drawn")),
        "{:?}",
        texts(&drawn)
    );
    // Two charts (the counts, the metric), a line and its legend entry each.
    assert_eq!(series_lines(&drawn), 4);
}

/// Texts at their x, and polylines as their points.
type Placed = (Vec<(f64, String)>, Vec<Vec<(f64, f64)>>);

/// The x of every text and the points of every 2-px polyline of an SVG.
fn placed(svg: &str) -> Placed {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| {
            let x: f64 = n.attribute("x")?.parse().ok()?;
            Some((x, n.text()?.trim().to_string()))
        })
        .collect();
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
        .map(|n| {
            n.attribute("points")
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| {
                    let (x, y) = p.split_once(',')?;
                    Some((x.parse().ok()?, y.parse().ok()?))
                })
                .collect()
        })
        .collect();
    (texts, lines)
}

#[test]
fn many_series_get_a_legend_beside_the_chart_and_the_busiest_are_drawn() {
    let dir = tempfile::tempdir().unwrap();
    // 4 events on each of the 8 llt blocks, two runs: 64 series on one chart.
    let run = run_to(
        dir.path(),
        "llt.ndjson",
        "bf3",
        &[
            "-e",
            "llt/GDC_BANK0_RD_REQ,GDC_BANK1_RD_REQ,GDC_BANK0_WR_REQ,GDC_BANK1_WR_REQ/",
            "-A",
            "-I",
            "200",
            "--json",
            "--duration",
            "650ms",
        ],
    );
    let again = dir.path().join("again.ndjson");
    std::fs::copy(&run, &again).unwrap();
    let svg = dir.path().join("llt.svg");
    bfperf()
        .arg("plot")
        .arg(&run)
        .arg(&again)
        .arg("--per-block")
        .arg("-o")
        .arg(&svg)
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    let (texts, lines) = placed(&text);
    assert!(
        texts
            .iter()
            .any(|(_, t)| t == "llt: events per second (the 32 busiest of 64 by mean)"),
        "{texts:?}"
    );
    // 32 lines and 32 swatches; the swatches in a column right of the plot.
    assert_eq!(lines.len(), 64);
    let plot_right = 1100.0 - 260.0;
    let swatches: Vec<&Vec<(f64, f64)>> = lines
        .iter()
        .filter(|l| l.len() == 2 && l.iter().all(|p| p.0 >= plot_right))
        .collect();
    assert_eq!(swatches.len(), 32, "{lines:?}");
    // Each swatch's label beside it, none on top of another.
    let mut ys: Vec<f64> = swatches.iter().map(|l| l[0].1).collect();
    ys.dedup();
    assert_eq!(ys.len(), 32);
    assert!(texts
        .iter()
        .any(|(x, t)| *x >= plot_right && t == "busiest first"));
    // The reads (twice the writes) are the busiest; the writes are left out.
    let legend: Vec<&String> = texts
        .iter()
        .filter(|(x, t)| *x >= plot_right && t.contains("_REQ"))
        .map(|(_, t)| t)
        .collect();
    assert_eq!(legend.len(), 32, "{legend:?}");
    assert!(legend.iter().all(|t| t.contains("_RD_REQ")), "{legend:?}");
    // Every label of the plot's axes inside it, the last x label too.
    for (x, t) in texts.iter().filter(|(_, t)| t.parse::<f64>().is_ok()) {
        assert!(*x < plot_right - 12.0, "x label {t} at {x}");
    }
}
