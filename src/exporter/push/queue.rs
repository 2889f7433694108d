//! The queue of sweeps waiting for the receiver, kept compact: every series' labels
//! once (numbered), and each sweep as its time and a number and value per series,
//! 16 bytes a sample, so that the default 100,000 samples a receiver's outage may
//! queue take under 2 MiB (they took 1.7 KB each as whole series). The request is
//! built from it when sent: each series once, with its samples in time order.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::wire::{Label, Sample, TimeSeries};

/// One sweep: when (ms since the epoch), and each series' value.
struct Batch {
    at_ms: i64,
    points: Vec<(u32, f64)>,
}

/// Sweeps in the order they were made, bounded in samples besides those being
/// sent: the front `inflight` batches, never dropped while in flight (a request
/// that fails gives them back, and the oldest over the bound go then).
#[derive(Default)]
pub(super) struct Queue {
    batches: VecDeque<Batch>,
    /// Samples queued.
    pub(super) samples: usize,
    /// The most samples kept.
    pub(super) bound: usize,
    /// How many batches the request being sent holds, and their samples.
    pub(super) inflight: usize,
    inflight_samples: usize,
    /// Every queued series' labels, by number; forgotten when the queue empties.
    labels: Vec<Arc<[Label]>>,
    numbers: HashMap<Arc<[Label]>, u32>,
}

impl Queue {
    /// An empty queue of at most `bound` samples.
    pub(super) fn new(bound: usize) -> Queue {
        Queue {
            bound,
            ..Queue::default()
        }
    }

    /// Whether nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Appends a sweep made at `at_ms`: each series' labels (sorted) and value.
    /// Drops the oldest not in flight while those not in flight are over the bound
    /// (a request being sent, which takes half of it at most, does not make room
    /// by dropping what it does not hold); returns how many samples were dropped.
    pub(super) fn push(&mut self, at_ms: i64, series: Vec<(Vec<Label>, f64)>) -> usize {
        let points: Vec<(u32, f64)> = series
            .into_iter()
            .map(|(labels, v)| (self.number(labels), v))
            .collect();
        self.samples += points.len();
        self.batches.push_back(Batch { at_ms, points });
        self.trim()
    }

    /// Drops the oldest batches not in flight while those not in flight are over
    /// the bound; how many samples it dropped.
    fn trim(&mut self) -> usize {
        let mut dropped = 0;
        while self.samples - self.inflight_samples > self.bound
            && self.batches.len() > self.inflight
        {
            if let Some(b) = self.batches.remove(self.inflight) {
                self.samples -= b.points.len();
                dropped += b.points.len();
            }
        }
        dropped
    }

    /// The number of a series, given it when new.
    fn number(&mut self, labels: Vec<Label>) -> u32 {
        if let Some(&n) = self.numbers.get(labels.as_slice()) {
            return n;
        }
        let n = self.labels.len() as u32;
        let labels: Arc<[Label]> = labels.into();
        self.labels.push(labels.clone());
        self.numbers.insert(labels, n);
        n
    }

    /// The oldest batches, up to `max` samples (one batch at least), now in flight:
    /// each series once, its samples oldest first.
    pub(super) fn take(&mut self, max: usize) -> Vec<TimeSeries> {
        let mut out: Vec<TimeSeries> = Vec::new();
        let mut at: HashMap<u32, usize> = HashMap::new();
        let mut taken = 0;
        self.inflight = 0;
        for b in &self.batches {
            if taken > 0 && taken + b.points.len() > max {
                break;
            }
            for &(n, value) in &b.points {
                let i = match at.get(&n) {
                    Some(&i) => i,
                    None => {
                        out.push(TimeSeries {
                            labels: self.labels[n as usize].to_vec(),
                            samples: Vec::new(),
                        });
                        at.insert(n, out.len() - 1);
                        out.len() - 1
                    }
                };
                out[i].samples.push(Sample {
                    value,
                    timestamp: b.at_ms,
                });
            }
            taken += b.points.len();
            self.inflight += 1;
        }
        self.inflight_samples = taken;
        out
    }

    /// The batches in flight are delivered (or refused): gone. Their samples.
    pub(super) fn done(&mut self) -> usize {
        let n: usize = self
            .batches
            .drain(..self.inflight)
            .map(|b| b.points.len())
            .sum();
        self.samples -= n;
        self.inflight = 0;
        self.inflight_samples = 0;
        if self.batches.is_empty() {
            self.labels.clear();
            self.numbers.clear();
        }
        n
    }

    /// The request in flight failed: it is sent again, with what came since, but
    /// for the oldest over the bound now that they count again; how many samples
    /// were dropped.
    pub(super) fn failed(&mut self) -> usize {
        self.inflight = 0;
        self.inflight_samples = 0;
        self.trim()
    }

    /// The bytes the queue holds in memory, beyond its fixed size: the measure of
    /// its compactness (benches/remote-write-queue.sh checks it against the process).
    pub(super) fn heap_bytes(&self) -> usize {
        let labels: usize = self
            .labels
            .iter()
            .map(|l| {
                16 + l.len() * std::mem::size_of::<Label>()
                    + l.iter()
                        .map(|l| l.name.len() + l.value.len())
                        .sum::<usize>()
            })
            .sum();
        let points: usize = self
            .batches
            .iter()
            .map(|b| b.points.capacity() * std::mem::size_of::<(u32, f64)>())
            .sum();
        let map = self.numbers.capacity() * (std::mem::size_of::<(Arc<[Label]>, u32)>() + 1);
        labels
            + points
            + map
            + self.labels.capacity() * std::mem::size_of::<Arc<[Label]>>()
            + self.batches.capacity() * std::mem::size_of::<Batch>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of `n` series, the i-th labelled `block="bN"`, each valued `v`.
    fn sweep(n: usize, v: f64) -> Vec<(Vec<Label>, f64)> {
        (0..n)
            .map(|i| {
                let labels = vec![
                    Label {
                        name: "__name__".into(),
                        value: "bfperf_events_total".into(),
                    },
                    Label {
                        name: "block".into(),
                        value: format!("b{i}"),
                    },
                ];
                (labels, v)
            })
            .collect()
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_never_what_is_being_sent() {
        let mut q = Queue::new(10);
        assert_eq!(q.push(1, sweep(4, 1.0)), 0);
        assert_eq!(q.push(2, sweep(4, 2.0)), 0);
        assert_eq!(q.push(3, sweep(4, 3.0)), 4, "the oldest goes");
        assert_eq!((q.batches.len(), q.samples), (2, 8));
        assert_eq!(q.take(5).len(), 4, "one batch in flight");
        // What is being sent is not counted against the bound, and never dropped.
        assert_eq!(q.push(4, sweep(4, 4.0)), 0);
        assert_eq!(q.push(5, sweep(4, 5.0)), 4, "the oldest not in flight goes");
        let kept: Vec<i64> = q.batches.iter().map(|b| b.at_ms).collect();
        assert_eq!(kept, [2, 4, 5]);
        assert_eq!(q.done(), 4);
        assert_eq!((q.batches.len(), q.samples, q.inflight), (2, 8, 0));
        // A failed send leaves its batches for the next try, oldest first.
        let again = q.take(100);
        assert_eq!(again.len(), 4);
        assert_eq!(
            again[0].samples,
            [
                Sample {
                    value: 4.0,
                    timestamp: 4
                },
                Sample {
                    value: 5.0,
                    timestamp: 5
                }
            ]
        );
        assert_eq!(q.failed(), 0);
        assert_eq!(q.take(100).len(), 4);
    }

    #[test]
    fn sweeps_queued_while_a_request_hangs_are_kept_and_a_failure_drops_the_oldest() {
        // A queue of 10 samples, full with five sweeps of 2; a request takes half.
        let mut q = Queue::new(10);
        for t in 0..5 {
            assert_eq!(q.push(t, sweep(2, t as f64)), 0);
        }
        let most = super::super::request_samples(q.bound);
        assert_eq!(q.take(most).len(), 2);
        assert_eq!(q.inflight, 2, "two sweeps in flight");
        // The receiver is slow: the next sweep waits beside them, nothing dropped
        // (dropping one would leave a hole the request then fills around).
        assert_eq!(q.push(5, sweep(2, 5.0)), 0);
        assert_eq!(q.samples, 12);
        // It fails: the oldest over the bound go.
        assert_eq!(q.failed(), 2);
        let kept: Vec<i64> = q.batches.iter().map(|b| b.at_ms).collect();
        assert_eq!(kept, [1, 2, 3, 4, 5]);
        // However small the bound, a request takes a sweep.
        assert_eq!(super::super::request_samples(1), 1);
        assert_eq!(
            super::super::request_samples(1_000_000),
            super::super::MAX_PER_SEND
        );
    }

    #[test]
    fn each_series_is_sent_once_with_its_samples_in_order_and_kept_once() {
        let mut q = Queue::new(1000);
        for t in 0..10 {
            q.push(t, sweep(50, t as f64));
        }
        assert_eq!(q.labels.len(), 50, "labels kept once a series");
        let sent = q.take(1000);
        assert_eq!(sent.len(), 50);
        for s in &sent {
            let times: Vec<i64> = s.samples.iter().map(|s| s.timestamp).collect();
            assert_eq!(times, (0..10).collect::<Vec<_>>());
        }
        assert!(q.heap_bytes() < 500 * 40 + 50 * 300, "{}", q.heap_bytes());
        assert_eq!(q.done(), 500);
        assert!(q.is_empty() && q.labels.is_empty());
    }
}
