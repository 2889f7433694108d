//! The checked-in fixtures are what the generator makes.

use crate::support::*;

#[test]
fn fixtures_match_the_generator() {
    for (gen, flag) in [("bf1", "1"), ("bf2", "2"), ("bf3", "3")] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(gen);
        bfperf()
            .args(["sim", "export", "--fixture", "--gen", flag])
            .arg(&out)
            .assert()
            .success();
        let made = tree_contents(&out);
        let checked_in = tree_contents(&fixture(gen));
        assert_eq!(
            made.keys().collect::<Vec<_>>(),
            checked_in.keys().collect::<Vec<_>>(),
            "fixtures/{gen} has other files than the generator makes: regenerate with `bfperf sim export --fixture --gen {flag} fixtures/{gen}`"
        );
        for (path, bytes) in &made {
            assert_eq!(
                Some(bytes),
                checked_in.get(path),
                "fixtures/{gen}/{} differs from the generator's output: regenerate it",
                path.display()
            );
        }
        for link in ["class/hwmon/hwmon3/device", "class/hwmon/hwmon3/subsystem"] {
            assert_eq!(
                std::fs::read_link(out.join(link)).unwrap(),
                std::fs::read_link(fixture(gen).join(link)).unwrap()
            );
        }
    }
}

#[test]
fn fixture_files_are_in_the_driver_format() {
    let d = device_dir(&fixture("bf2"));
    let read = |rel: &str| std::fs::read_to_string(d.join(rel)).unwrap();
    assert_eq!(read("tile2/event3"), "0x45: HNF_REQUESTS\n");
    // (8 + 4) GB/s / 64 B over 4 tiles for 2 s: 93,750,000.
    assert_eq!(read("tile2/counter3"), "0x59682f0\n");
    assert_eq!(read("l3cachehalf0/enable"), "1\n");
    assert!(read("tile2/event_list").starts_with("0x0: DISABLE\n0x45: HNF_REQUESTS\n"));
    assert_eq!(read("../../../class/hwmon/hwmon3/name"), "bfperf\n");
    assert!(d.join("power").is_dir());
    let d3 = device_dir(&fixture("bf3"));
    assert_eq!(
        std::fs::read_to_string(d3.join("llt1/count_clock")).unwrap(),
        "1\n"
    );
}
