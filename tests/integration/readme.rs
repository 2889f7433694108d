//! Every `bfperf` command in the `sh` blocks of README.md and of every page under
//! docs/ runs, as written, on the simulated generation it names, so that no example
//! can rot.
//!
//! Which generation: the one a command names itself (`--sim`, `--sysfs-root`); else a
//! `BF1`, `BF2` or `BF3` in its comment; else the `<!-- generation: bfN -->` marker
//! above its block; else BlueField-3. It is given as `BFPERF_SIM`, so the command line
//! is the README's. The commands run in order through `sh`, in one scratch directory
//! (so `snapshot -o before.json` feeds the `diff` below it), with `./workload` and
//! `make` standing for the reader's program and `examples/` at hand. Only what would
//! make the suite slow or touch the machine is changed, and always the same way:
//! durations become 300 ms and `sleep N` 0.2 s; redirections to paths outside the
//! scratch directory land inside it, as `/tmp/bf` and `/var/lib/` paths do, and port
//! 9839 becomes any free port. Long-running
//! commands (`exporter`, `top` in a pseudo-terminal, `sim mount … &`) must still be
//! running after a second and a half; every other command must exit 0, or with the
//! status its comment gives (`# exits 1`: an example of a refusal).

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

/// One command of README.md: its line, the generation it runs on, and the line
/// it runs as (the changes above made).
#[derive(Debug)]
struct Example {
    line: String,
    generation: Option<String>,
    run_as: String,
    /// The exit status it must end with: 0, or what its comment says (`# exits 1`,
    /// an example of a refusal).
    status: i32,
}

/// The `bfperf` lines of README's `sh` blocks, in order.
fn examples(readme: &str, scratch: &Path) -> Vec<Example> {
    let mut out = Vec::new();
    let mut marked: Option<String> = None;
    let mut in_sh = false;
    for line in readme.lines() {
        let t = line.trim();
        if let Some(g) = t
            .strip_prefix("<!-- generation: ")
            .and_then(|r| r.strip_suffix(" -->"))
        {
            marked = Some(g.to_string());
            continue;
        }
        if let Some(info) = t.strip_prefix("```") {
            in_sh = !in_sh && info.starts_with("sh");
            if !in_sh {
                marked = None;
            }
            continue;
        }
        if in_sh && t.starts_with("bfperf ") {
            let (command, comment) = split_comment(t);
            let generation = generation_of(command, comment, marked.as_deref());
            let status = comment
                .split_once("exits ")
                .and_then(|(_, n)| n.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
            out.push(Example {
                line: t.to_string(),
                generation,
                run_as: run_as(command, scratch),
                status,
            });
        }
    }
    out
}

/// The command and its comment (`# ...` outside quotes).
fn split_comment(line: &str) -> (&str, &str) {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if previous.is_whitespace() => {
                return (line[..i].trim_end(), &line[i + 1..]);
            }
            _ => {}
        }
        previous = c;
    }
    (line, "")
}

/// None when the command names its device itself.
fn generation_of(command: &str, comment: &str, marked: Option<&str>) -> Option<String> {
    if command.contains("--sim") || command.contains("--sysfs-root") || command.contains(" sim ") {
        return None;
    }
    let named = ["BF1", "BF2", "BF3"]
        .into_iter()
        .find(|g| comment.contains(g))
        .map(str::to_ascii_lowercase);
    Some(
        named
            .or(marked.map(str::to_string))
            .unwrap_or_else(|| "bf3".into()),
    )
}

/// The command with its durations shortened and its paths kept in `scratch`.
fn run_as(command: &str, scratch: &Path) -> String {
    let words: Vec<&str> = command.split(' ').collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let next = words.get(i + 1).copied();
        match (w, next) {
            ("--duration", Some(_)) => {
                out.push("--duration 300ms".into());
                i += 1;
            }
            ("sleep", Some(_)) => {
                out.push("sleep 0.2".into());
                i += 1;
            }
            (">", Some(path)) if path.starts_with('/') || path.contains(['~', '$']) => {
                out.push("> redirected.out".into());
                i += 1;
            }
            _ => out.push(w.to_string()),
        }
        i += 1;
    }
    out.join(" ")
        .replace("/tmp/bf", &scratch.join("bf").display().to_string())
        .replace("/var/lib/", &format!("{}/", scratch.display()))
        .replace(":9839", ":0")
}

/// A scratch directory with the reader's stand-ins: `./workload`, `make` on the
/// PATH (beside `bfperf`), and `examples/`.
fn scratch() -> (tempfile::TempDir, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("node_exporter/textfile")).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = |path: PathBuf| {
        std::fs::write(&path, "#!/bin/sh\nsleep 0.1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(dir.path().join("workload"));
    script(bin.join("make"));
    std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin!("bfperf"), bin.join("bfperf"))
        .unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::os::unix::fs::symlink(repo.join("examples"), dir.path().join("examples")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (dir, path)
}

/// How a long-running command is judged: still running after a while.
fn long_running(e: &Example) -> bool {
    e.run_as.contains(" exporter") || e.run_as.contains(" top") || e.run_as.ends_with('&')
}

/// Runs one example; None when it did what it should, else what went wrong.
fn run(
    e: &Example,
    dir: &Path,
    path: &str,
    mounts: &mut Vec<std::process::Child>,
) -> Option<String> {
    let command = e.run_as.trim_end_matches('&').trim_end();
    // top draws in a terminal: `script` gives it one.
    let shell = match e.run_as.contains(" top") {
        true => format!(
            "exec script -qec '{}' /dev/null",
            command.replace('\'', "'\\''")
        ),
        false => format!("exec {command}"),
    };
    let mut p = Process::new("sh");
    p.args(["-c", &shell])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("BFPERF_SYSFS_ROOT")
        .env("BFPERF_PAGE_SIZE", "4096")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match &e.generation {
        Some(g) => p.env("BFPERF_SIM", g),
        None => p.env_remove("BFPERF_SIM"),
    };
    let mut child = p.spawn().unwrap();
    if long_running(e) {
        let deadline = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                let out = child.wait_with_output().unwrap();
                return Some(format!(
                    "ended early ({status}): {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // A mount serves the commands below it; the others end here.
        if e.run_as.ends_with('&') {
            mounts.push(child);
            return None;
        }
        // SAFETY: signals the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let _ = child.wait();
        return None;
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code() != Some(e.status)).then(|| {
        format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        )
    })
}

/// README.md, then the pages under docs/ in name order: the text whose `sh` blocks
/// are run.
fn pages() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    names.sort();
    std::iter::once(root.join("README.md"))
        .chain(names)
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.strip_prefix(root).unwrap().display().to_string(), text)
        })
        .collect()
}

#[test]
fn every_readme_and_docs_command_runs_on_the_generation_it_names() {
    let (dir, path) = scratch();
    let mut all = Vec::new();
    for (name, text) in pages() {
        let found = examples(&text, dir.path());
        if name == "README.md" {
            assert!(
                found.len() >= 15,
                "README: only {} commands found",
                found.len()
            );
        }
        all.extend(found);
    }
    assert!(all.len() > 50, "only {} commands found", all.len());
    let mut failed = Vec::new();
    let mut mounts = Vec::new();
    for e in &all {
        if let Some(why) = run(e, dir.path(), &path, &mut mounts) {
            failed.push(format!(
                "{}\n  on {} as: {}\n  {why}",
                e.line,
                e.generation.as_deref().unwrap_or("its own device"),
                e.run_as
            ));
        }
    }
    // The mounts end when their directories are unmounted: every one under the
    // scratch directory.
    let mounts_text = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let under: Vec<&str> = mounts_text
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .filter(|m| Path::new(m).starts_with(dir.path()))
        .collect();
    for at in under {
        let unmounted = |p: &mut Process| p.status().is_ok_and(|s| s.success());
        if !unmounted(Process::new("fusermount3").arg("-u").arg(at)) {
            let _ = unmounted(Process::new("umount").arg("-l").arg(at));
        }
    }
    for mut m in mounts {
        let _ = m.kill();
        let _ = m.wait();
    }
    assert!(
        failed.is_empty(),
        "{} of {} README and docs commands failed:\n{}",
        failed.len(),
        all.len(),
        failed.join("\n")
    );
}

/// README's "Try it" block: the two lines `.ci/run` runs verbatim, read the same way
/// (the first `sh` block under the heading).
fn try_it() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Try it"))
        .expect("README has a Try it section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("Try it has an sh block");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// README's first command is `cargo run` of the command line, which is the
/// package's default binary (the exporter is the other), and prints the DDR and LLC
/// bandwidths the simulator drives; the second is the suite. `.ci/run` runs both.
#[test]
fn readmes_two_commands_run_as_written() {
    let lines = try_it();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let args = lines[0]
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("the first is not `cargo run --release -- …`: {}", lines[0]));
    assert_eq!(lines[1], "cargo test");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    assert_eq!(
        manifest["package"]["default-run"].as_str(),
        Some("bfperf"),
        "`cargo run` must know which binary to run"
    );
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        ci.contains("/^## Try it/") && ci.contains("bash -c \"${readme_commands[0]}\""),
        ".ci/run no longer runs README's block"
    );
    // What `cargo run` runs: the binary, with the line's arguments as sh splits them.
    let out = Process::new("sh")
        .args(["-c", &format!("exec \"$0\" {args}")])
        .arg(assert_cmd::cargo::cargo_bin!("bfperf"))
        .output()
        .unwrap();
    // perf's place for its report: standard error.
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    // The simulator's rates: DDR reads are mss's flits, LLC reads both banks' read
    // requests, 64 bytes each.
    let llts: Vec<String> = (0..8).map(|n| format!("llt{n}")).collect();
    let llts: Vec<&str> = llts.iter().map(String::as_str).collect();
    let ddr = crate::support::bf3_gb_per_s(&["mss0", "mss1"], "SKYLIB_DDN_TX_FLITS");
    let llc = crate::support::bf3_gb_per_s(&llts, "GDC_BANK0_RD_REQ")
        + crate::support::bf3_gb_per_s(&llts, "GDC_BANK1_RD_REQ");
    for (metric, want) in [("ddr_read_bandwidth", ddr), ("llc_read_bandwidth", llc)] {
        let line = text
            .lines()
            .find(|l| l.starts_with(metric))
            .unwrap_or_else(|| panic!("no {metric}:\n{text}"));
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f[3], "GB/s", "{line}");
        crate::support::assert_rate(f[2].parse().unwrap(), want, &format!("{metric}\n{text}"));
    }
}
