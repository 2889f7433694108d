//! The window `stat -- CMD` measures is the command's life, not padded by polling
//! (a tick is 100 ms: polling would show as tens of milliseconds).

use crate::support::*;
use predicates::prelude::*;

/// The window `stat -- ARGS` measured: the least of five runs, as a machine busy
/// with other tests can delay a start (the property is that no polling pads it).
fn total_window(args: &[&str]) -> f64 {
    (0..5).map(|_| one_window(args)).fold(f64::MAX, f64::min)
}

fn one_window(args: &[&str]) -> f64 {
    let out = stdout_of(
        sim_stat("bf2")
            .args(["-e", "tile/MEMORY_READS/", "--format", "json", "--"])
            .args(args),
    );
    let end: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    end["elapsed_s"].as_f64().unwrap()
}

#[test]
fn the_window_is_the_command_s_life() {
    // Natively 2 ms pads the window on an idle machine (20 ms allowed for one busy
    // with every other test; a tick's polling would add up to 100 ms); under
    // user-mode emulation starting the command (an emulated fork and exec) takes
    // about 10 ms more, and that is in it.
    let slack = if emulated() { 0.05 } else { 0.02 };
    let t = total_window(&["true"]);
    assert!(t < slack, "stat -- true measured {t} s");
    let t = total_window(&["sleep", "0.2"]);
    assert!(
        (0.2..0.2 + slack).contains(&t),
        "stat -- sleep 0.2 measured {t} s"
    );
    // A command that cannot run is refused before any write.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let c = Copy::of("bf2");
    let before = c.contents();
    c.cmd()
        .args(["stat", "-o", "-", "-e", "tile/MEMORY_READS/", "--"])
        .arg(&script)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not executable"));
    assert_eq!(before, c.contents());
}
