//! Every command's `--json` output validates against its checked-in JSON Schema
//! (docs/schema/, kept current with the Rust types by a unit test: regenerate with
//! `BFPERF_BLESS=1 cargo test --lib generated_`).

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::*;

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
}

fn schema(name: &str) -> serde_json::Value {
    let path = docs().join("schema").join(format!("{name}.schema.json"));
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn validate(name: &str, output: &str) {
    let instance: serde_json::Value = serde_json::from_str(output)
        .unwrap_or_else(|e| panic!("{name} --json is not JSON ({e}): {output}"));
    let schema = schema(name);
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name} --json: {errors:?}\n{output}");
}

#[test]
fn every_json_output_validates_against_its_schema() {
    for gen in ["bf1", "bf2", "bf3"] {
        validate("info", &stdout_of(on_fixture(gen).args(["info", "--json"])));
        validate(
            "blocks",
            &stdout_of(on_fixture(gen).args(["blocks", "--json"])),
        );
        validate("read", &stdout_of(on_fixture(gen).args(["read", "--json"])));
        validate(
            "list",
            &stdout_of(on_fixture(gen).args(["list", "--json", "--details"])),
        );
        validate(
            "snapshot",
            &stdout_of(on_fixture(gen).args(["snapshot", "all"])),
        );
    }
    validate(
        "events",
        &stdout_of(on_fixture("bf3").args(["events", "llt0", "--json"])),
    );
    validate(
        "events",
        &stdout_of(on_fixture("bf2").args(["events", "pcie0", "--format", "json"])),
    );
    let c = Copy::of("bf2");
    validate(
        "program",
        &c.run(&["program", "tile2", "3", "HNF_REQUESTS", "--json"]),
    );
    validate(
        "program",
        &c.run(&["program", "tile2", "3", "0105", "--json", "--dry-run"]),
    );
    validate("control", &c.run(&["stop", "tile2", "--json"]));
    validate("control", &c.run(&["start", "l3cachehalf0", "--json"]));
    validate(
        "control",
        &c.run(&["clear", "pcie0", "--json", "--dry-run"]),
    );
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    on_fixture("bf2")
        .args(["snapshot", "all", "-o"])
        .arg(&a)
        .assert()
        .success();
    on_fixture("bf2")
        .args(["snapshot", "all", "-o"])
        .arg(&b)
        .assert()
        .success();
    let out = stdout_of(bfperf().arg("diff").arg(&a).arg(&b).arg("--json"));
    validate("diff", &out);
}

#[test]
fn the_same_key_names_a_block_everywhere() {
    let blocks: serde_json::Value =
        serde_json::from_str(&stdout_of(on_fixture("bf2").args(["blocks", "--json"]))).unwrap();
    let read: serde_json::Value = serde_json::from_str(&stdout_of(
        on_fixture("bf2").args(["read", "tile2", "--json"]),
    ))
    .unwrap();
    assert_eq!(blocks["blocks"][0]["block"], "ecc");
    assert_eq!(read["blocks"][0]["block"], "tile2");
    assert_eq!(read["blocks"][0]["counters"][3]["counter"], 3);
}
