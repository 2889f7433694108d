//! The exporter's whole contract, pinned as node_exporter's `e2e-output.txt` pins
//! its own: the exposition of each simulated generation (its default set, on a
//! manual clock one second after the start) in both text formats, compared byte for
//! byte with `tests/golden/`. A change to a name, label, HELP, order or value shows
//! as a diff; `BFPERF_BLESS=1 cargo test golden` writes the files anew.

use std::path::Path;

use crate::support::{counting, rig, Rig};
use bfperf::collector::{self, Collector};
use bfperf::metrics::MetricSet;
use bfperf::Generation;

fn exposition(gen: Generation, format: collector::TextFormat) -> String {
    let Rig { clock, device, .. } = rig(gen);
    let config = counting("default");
    let set = MetricSet::load(&[gen], &[]);
    let mut e = Collector::start(&device, &config, set, || 0).unwrap();
    clock.advance_secs(1);
    e.scrape(1_000_000_000).unwrap();
    let text = e.exposition(true, 0.0, format);
    e.stop().unwrap();
    text
}

#[test]
fn the_exposition_of_each_generation_is_the_golden_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("BFPERF_BLESS").is_some();
    let mut stale = Vec::new();
    for (gen, name) in [
        (Generation::Bf1, "bf1"),
        (Generation::Bf2, "bf2"),
        (Generation::Bf3, "bf3"),
    ] {
        for (format, ext) in [
            (collector::TextFormat::Text004, "prom"),
            (collector::TextFormat::OpenMetrics, "om.txt"),
        ] {
            let got = exposition(gen, format);
            let path = dir.join(format!("exposition-{name}.{ext}"));
            if bless {
                std::fs::write(&path, &got).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            if got != want {
                let line = got
                    .lines()
                    .zip(want.lines())
                    .position(|(a, b)| a != b)
                    .map_or(want.lines().count().min(got.lines().count()), |i| i);
                stale.push(format!(
                    "{}: first difference at line {}:\n  got:  {}\n  want: {}",
                    path.display(),
                    line + 1,
                    got.lines().nth(line).unwrap_or("(end)"),
                    want.lines().nth(line).unwrap_or("(end)")
                ));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "the exposition changed (BFPERF_BLESS=1 cargo test golden writes it anew if meant):\n{}",
        stale.join("\n")
    );
}
