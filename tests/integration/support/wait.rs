//! Waiting for a condition: polled, with a deadline, saying what it waited for.

use std::time::{Duration, Instant};

pub(crate) fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < end, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}
