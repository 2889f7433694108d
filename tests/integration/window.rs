//! The window `stat -- CMD` measures is the command's life, not padded by polling
//! (a tick is 100 ms: polling would show as tens of milliseconds).

use crate::support::*;
use predicates::prelude::*;

/// For each of five rounds in turn, the window `stat -- ARGS` measured and the life
/// of the same command started and waited for by this test (spawn to reaped, on its
/// own clock): the least window, and the longest life. A machine busy with other
/// tests delays both alike; polling (a tick is 100 ms) would pad every window.
fn windows_and_lives(args: &[&str]) -> (f64, f64) {
    (0..5)
        .map(|_| {
            let window = one_window(args);
            let t = std::time::Instant::now();
            let ok = std::process::Command::new(args[0])
                .args(&args[1..])
                .status()
                .unwrap()
                .success();
            assert!(ok, "{args:?}");
            (window, t.elapsed().as_secs_f64())
        })
        .fold((f64::MAX, 0.0), |(w, l), (a, b)| (w.min(a), l.max(b)))
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
    // The window holds the command's life and no more: never longer than the test
    // itself takes to start, wait for and reap the same command.
    let (window, life) = windows_and_lives(&["true"]);
    assert!(
        window <= life,
        "stat -- true measured {window} s, true lived {life} s"
    );
    let (window, life) = windows_and_lives(&["sleep", "0.2"]);
    assert!(
        window >= 0.2 && window <= life,
        "stat -- sleep 0.2 measured {window} s, sleep 0.2 lived {life} s"
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
