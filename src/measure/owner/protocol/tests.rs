//! The protocol's wire tests: both ends over a socket pair.

use super::*;

/// An owner that grants one block with one counter and counts nothing.
#[derive(Default)]
struct Fake {
    granted: u64,
    released: Vec<u64>,
}

fn fake_device() -> Serves {
    Serves {
        identity: "sysfs platform MLNXBFD2:00 BlueField-3".into(),
        generation: "BlueField-3".into(),
        inventory: "2:0".into(),
        location: "/sys/class/hwmon/hwmon4".into(),
    }
}

impl Owner for Fake {
    fn serves(&self) -> Serves {
        fake_device()
    }
    fn grant(
        &mut self,
        specs: &[String],
        _: Option<u32>,
        _: u64,
    ) -> Result<(u64, Vec<GrantedBlock>)> {
        if specs.iter().any(|s| s == "bad") {
            return Err(Error::BadOption {
                problem: "no such event".into(),
            });
        }
        self.granted += 1;
        let blocks = vec![GrantedBlock {
            block: "tile2".into(),
            counters: vec![Some(3)],
        }];
        Ok((self.granted, blocks))
    }
    fn totals(&mut self, _: u64, now: u64) -> Result<(u64, Vec<Vec<Acc>>)> {
        Ok((now, vec![vec![Acc::default()]]))
    }
    fn release(&mut self, id: u64) -> Result<()> {
        self.released.push(id);
        Ok(())
    }
}

fn ask(what: &str) -> Vec<u8> {
    format!("{{\"bfperf\":{VERSION},{what}}}\n").into_bytes()
}

fn refused(a: &AnswerWhat) -> &str {
    match a {
        AnswerWhat::Refused { reason } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

const COUNT: &str = "\"count\":{\"specs\":[\"tile2/HNF_REQUESTS/\"],\"command\":\"stat\\nx\"}";

#[test]
fn a_grant_reads_and_ends_in_order_and_is_logged_on_one_line() {
    let (mut s, mut o) = (Session::new(Some(1000)), Fake::default());
    let (a, said) = s.answer(&ask(COUNT), &mut o, 1);
    assert!(matches!(a, AnswerWhat::Granted { .. }));
    assert_eq!(
        said,
        Some(Said::Granted {
            command: "stat x".into()
        })
    );
    let (a, _) = s.answer(&ask("\"read\":null"), &mut o, 7);
    assert!(matches!(a, AnswerWhat::Totals { at_ns: 7, .. }), "{a:?}");
    let (a, said) = s.answer(&ask("\"end\":null"), &mut o, 9);
    assert!(matches!(a, AnswerWhat::Ended) && said == Some(Said::Ended));
    assert_eq!(o.released, [1]);
}

#[test]
fn the_wire_refuses_what_the_protocol_does_not_allow() {
    let (mut s, mut o) = (Session::new(None), Fake::default());
    // Another version.
    let line = format!("{{\"bfperf\":{},\"read\":null}}\n", VERSION + 1);
    assert!(refused(&s.answer(line.as_bytes(), &mut o, 0).0).contains("version"));
    // Not JSON of the protocol.
    assert!(refused(&s.answer(b"hello\n", &mut o, 0).0).contains("not a request"));
    // A read before a count.
    assert!(
        refused(&s.answer(&ask("\"read\":null"), &mut o, 0).0).contains("nothing is being counted")
    );
    // An end without a grant: nothing to put back, said as ended.
    assert!(matches!(
        s.answer(&ask("\"end\":null"), &mut o, 0).0,
        AnswerWhat::Ended
    ));
    assert!(o.released.is_empty());
    // A refused count grants nothing.
    let bad = "\"count\":{\"specs\":[\"bad\"],\"command\":\"x\"}";
    assert!(refused(&s.answer(&ask(bad), &mut o, 0).0).contains("no such event"));
    assert_eq!(s.id, None);
    // A second count on one connection.
    assert!(matches!(
        s.answer(&ask(COUNT), &mut o, 0).0,
        AnswerWhat::Granted { .. }
    ));
    assert!(refused(&s.answer(&ask(COUNT), &mut o, 0).0).contains("one measurement"));
}

/// A count request naming `device`.
fn count_on(device: Serves) -> Vec<u8> {
    let ask = Ask {
        bfperf: VERSION,
        what: AskWhat::Count {
            specs: vec!["tile2/HNF_REQUESTS/".into()],
            command: "stat".into(),
            device: Some(device),
        },
    };
    serde_json::to_vec(&ask).unwrap()
}

#[test]
fn a_client_that_means_another_device_is_refused_naming_both() {
    let (mut s, mut o) = (Session::new(None), Fake::default());
    let mut other = fake_device();
    other.identity = "sysfs platform MLNXBFD1:00 BlueField-2".into();
    other.location = "/sys/class/hwmon/hwmon7".into();
    let (a, said) = s.answer(&count_on(other), &mut o, 0);
    let why = refused(&a);
    assert!(why.contains("hwmon4") && why.contains("hwmon7"), "{why}");
    assert!(
        why.contains("MLNXBFD1:00") && why.contains("MLNXBFD2:00"),
        "{why}"
    );
    assert_eq!((said, s.id, o.granted), (None, None, 0));
    // The same device, wherever the client sees it, is granted and named.
    let mut same = fake_device();
    same.location = "/mnt/bound".into();
    match s.answer(&count_on(same), &mut o, 0).0 {
        AnswerWhat::Granted { device, .. } => assert_eq!(device, fake_device()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn lines_are_framed_and_an_over_long_one_ends_the_connection() {
    let mut s = Session::new(None);
    s.feed(b"{\"a\":1}\n{\"b\"").unwrap();
    assert_eq!(s.next_line().unwrap(), b"{\"a\":1}\n");
    assert_eq!(s.next_line(), None);
    s.feed(b":2}\n").unwrap();
    assert_eq!(s.next_line().unwrap(), b"{\"b\":2}\n");
    let long = vec![b'x'; MAX_LINE + 1];
    assert!(s.feed(&long).unwrap_err().contains("over"));
}
