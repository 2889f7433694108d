//! OTLP/HTTP on the wire: the `ExportMetricsServiceRequest` protobuf (the messages
//! of opentelemetry-proto's `metrics/v1`, `common/v1` and `resource/v1`, derived
//! with prost, field numbers as the .proto files give them), gzip-compressed.
//!
//! The queue's series become OpenTelemetry metrics as its conventions want them:
//! a Prometheus counter is a cumulative, monotonic Sum whose start time is when its
//! running total began, moved only when the total starts again (a device found
//! again: the value falls); a gauge is a Gauge; labels are attributes; the unit is
//! the base unit the name ends with (`By/s`, `1`, `s`).

use std::collections::HashMap;

use super::wire::{Label, MetricMetadata, TimeSeries};

/// `opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ExportMetricsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

/// `opentelemetry.proto.metrics.v1.ResourceMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

/// `opentelemetry.proto.resource.v1.Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `opentelemetry.proto.metrics.v1.ScopeMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ScopeMetrics {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

/// `opentelemetry.proto.common.v1.InstrumentationScope`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `opentelemetry.proto.metrics.v1.Metric`: a Gauge (5) or a Sum (7).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(message, optional, tag = "5")]
    pub gauge: Option<Gauge>,
    #[prost(message, optional, tag = "7")]
    pub sum: Option<Sum>,
}

/// `opentelemetry.proto.metrics.v1.Gauge`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

/// `opentelemetry.proto.metrics.v1.Sum`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    /// `AggregationTemporality`: 2 is cumulative.
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

/// `AGGREGATION_TEMPORALITY_CUMULATIVE`.
pub(super) const CUMULATIVE: i32 = 2;

/// `opentelemetry.proto.metrics.v1.NumberDataPoint`, its value a double.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NumberDataPoint {
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    /// The `value` oneof: set even when 0, which a plain field would leave out.
    #[prost(oneof = "PointValue", tags = "4")]
    pub value: Option<PointValue>,
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
}

/// `NumberDataPoint.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(super) enum PointValue {
    #[prost(double, tag = "4")]
    AsDouble(f64),
}

/// `opentelemetry.proto.common.v1.KeyValue`, its value a string.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `opentelemetry.proto.common.v1.AnyValue` holding a string.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct AnyValue {
    /// The `value` oneof: an empty string is still a string.
    #[prost(oneof = "AnyOf", tags = "1")]
    pub value: Option<AnyOf>,
}

/// `AnyValue.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(super) enum AnyOf {
    #[prost(string, tag = "1")]
    StringValue(String),
}

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(AnyOf::StringValue(value.to_string())),
        }),
    }
}

/// The unit a Prometheus name's suffix says, in UCUM as OpenTelemetry writes it.
fn unit_of(name: &str) -> &'static str {
    const UNITS: &[(&str, &str)] = &[
        ("_bytes_per_second", "By/s"),
        ("_bytes", "By"),
        ("_seconds", "s"),
        ("_hertz", "Hz"),
        ("_ratio", "1"),
    ];
    UNITS
        .iter()
        .find(|(suffix, _)| name.ends_with(suffix))
        .map_or("1", |(_, unit)| unit)
}

/// An empty metric named `name`: a cumulative monotonic Sum for a counter, else
/// a Gauge; its description the family's HELP.
fn metric(name: &str, meta: Option<&MetricMetadata>, counter: bool) -> Metric {
    Metric {
        name: name.to_string(),
        description: meta.map(|m| m.help.clone()).unwrap_or_default(),
        unit: unit_of(name).to_string(),
        gauge: (!counter).then(Gauge::default),
        sum: counter.then(|| Sum {
            data_points: Vec::new(),
            aggregation_temporality: CUMULATIVE,
            is_monotonic: true,
        }),
    }
}

/// How long a counter series may go unseen (by its points' times) before its start
/// is forgotten: a config reloaded with other events again and again must not
/// grow what the sender keeps.
const FORGET_AFTER_NS: u64 = 3600 * 1_000_000_000;

/// Each counter series' start: when its running total began (ns since the epoch),
/// and its last value and time, to see it start again. A series seen after its
/// start was forgotten starts again just after the newest point forgotten: never
/// a point whose start is older than a value it may have fallen from.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Starts {
    series: HashMap<Vec<Label>, (u64, f64, u64)>,
    /// Just after the newest last point of a series forgotten (ns); 0 while none is.
    forgotten: u64,
}

impl Starts {
    pub(super) fn new() -> Starts {
        Starts::default()
    }

    /// Keeps what a request the receiver took (or refused) says of its series'
    /// starts, then forgets those not seen within [`FORGET_AFTER_NS`] of the newest
    /// point.
    pub(super) fn keep(&mut self, after: Starts) {
        self.series.extend(after.series);
        let newest = self.series.values().map(|s| s.2).max().unwrap_or(0);
        let horizon = newest.saturating_sub(FORGET_AFTER_NS);
        let forgotten = &mut self.forgotten;
        self.series.retain(|_, s| {
            let keep = s.2 >= horizon;
            if !keep {
                *forgotten = (*forgotten).max(s.2.saturating_add(1));
            }
            keep
        });
    }
}

/// The request for `series` (taken from the queue, `__name__` among their labels),
/// the families' types and HELP in `metadata`, under `resource`. A counter series
/// seen for the first time started at `began` (ns since the epoch, the exporter's
/// start); one whose value falls started again just after its last point. Returns
/// with it the counter series' starts as they stand after it, for the caller to keep
/// once the receiver has taken (or refused) it: a request sent again after a
/// failure gives the same start times.
pub(super) fn request(
    series: &[TimeSeries],
    metadata: &[MetricMetadata],
    resource: &[(String, String)],
    starts: &Starts,
    began: u64,
) -> (ExportMetricsServiceRequest, Starts) {
    let mut after = Starts::new();
    let mut metrics: Vec<Metric> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for s in series {
        let Some(full) = s.labels.iter().find(|l| l.name == "__name__") else {
            continue;
        };
        let meta = metadata.iter().find(|m| {
            full.value == m.metric_family_name
                || full.value.strip_suffix("_total") == Some(m.metric_family_name.as_str())
        });
        let counter = meta.is_some_and(|m| m.r#type == 1);
        let name = match counter {
            true => full.value.strip_suffix("_total").unwrap_or(&full.value),
            false => full.value.as_str(),
        };
        let i = *index.entry(name.to_string()).or_insert_with(|| {
            metrics.push(metric(name, meta, counter));
            metrics.len() - 1
        });
        let attributes: Vec<KeyValue> = s
            .labels
            .iter()
            .filter(|l| l.name != "__name__")
            .map(|l| kv(&l.name, &l.value))
            .collect();
        let mut state = starts.series.get(&s.labels).copied();
        // A series never seen (or forgotten) began with the exporter, or after
        // the newest point forgotten.
        let first = began.max(starts.forgotten);
        for p in &s.samples {
            let time = (p.timestamp.max(0) as u64).saturating_mul(1_000_000);
            let start = match counter {
                false => 0,
                true => start_of(&mut state, first, p.value, time),
            };
            let point = NumberDataPoint {
                start_time_unix_nano: start,
                time_unix_nano: time,
                value: Some(PointValue::AsDouble(p.value)),
                attributes: attributes.clone(),
            };
            let m = &mut metrics[i];
            match (&mut m.sum, &mut m.gauge) {
                (Some(sum), _) => sum.data_points.push(point),
                (_, Some(gauge)) => gauge.data_points.push(point),
                _ => {}
            }
        }
        if let (true, Some(state)) = (counter, state) {
            after.series.insert(s.labels.clone(), state);
        }
    }
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource.iter().map(|(k, v)| kv(k, v)).collect(),
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "bfperf".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                metrics,
            }],
        }],
    };
    (request, after)
}

/// A counter point's start, its series' `state` (start, last value and time) moved
/// on to it: the series' start, or just after its last point where the value fell
/// (it started again); `first` for a series without one. Always before the point's
/// time, which is in milliseconds and can fall at or before `first`: a start equal
/// to its time reads as a reset to a receiver, and one that writes a zero at a
/// counter's start (Prometheus' created timestamps) would meet the point itself.
fn start_of(state: &mut Option<(u64, f64, u64)>, first: u64, value: f64, time: u64) -> u64 {
    let before = time.saturating_sub(1);
    let (mut start, last, last_time) = state.unwrap_or((first.min(before), value, time));
    if value < last {
        start = last_time.saturating_add(1).min(before);
    }
    *state = Some((start, value, time));
    start
}

/// `opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ExportMetricsServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportMetricsPartialSuccess>,
}

/// `opentelemetry.proto.collector.metrics.v1.ExportMetricsPartialSuccess`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ExportMetricsPartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_data_points: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// What a receiver that accepted a request says it rejected of it (OTLP/HTTP's
/// partial success, which is not to be tried again): how many points, and its
/// message as one line. None when the answer says nothing of it or is not a
/// response this decodes.
pub(super) fn partial_success(answer: &[u8]) -> Option<(u64, String)> {
    use prost::Message;
    let p = ExportMetricsServiceResponse::decode(answer)
        .ok()?
        .partial_success?;
    let message = super::post::bounded(&p.error_message);
    Some((p.rejected_data_points.max(0) as u64, message))
}

/// The request's body: the protobuf, gzip-compressed.
pub(super) fn body(request: &ExportMetricsServiceRequest) -> Vec<u8> {
    use prost::Message;
    use std::io::Write;
    let raw = request.encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    match gz.write_all(&raw) {
        Ok(()) => gz.finish().unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::Sample;
    use super::*;

    #[test]
    fn a_partial_success_says_what_was_rejected_and_nothing_else_does() {
        use prost::Message;
        let answer = |rejected: i64, message: &str| {
            ExportMetricsServiceResponse {
                partial_success: Some(ExportMetricsPartialSuccess {
                    rejected_data_points: rejected,
                    error_message: message.into(),
                }),
            }
            .encode_to_vec()
        };
        assert_eq!(
            partial_success(&answer(3, "bad\nunit")),
            Some((3, "bad unit".into()))
        );
        assert_eq!(
            partial_success(&answer(0, "slow down")),
            Some((0, "slow down".into()))
        );
        assert_eq!(partial_success(&answer(-5, "")), Some((0, String::new())));
        // An empty response, a proxy's page, a cut answer: nothing rejected is said.
        assert_eq!(partial_success(b""), None);
        assert_eq!(partial_success(b"<html>ok</html>"), None);
        let cut = answer(7, &"x".repeat(100));
        assert_eq!(partial_success(&cut[..cut.len() - 10]), None);
        let long = partial_success(&answer(1, &"y".repeat(5000))).unwrap();
        assert_eq!(long.1.len(), 512);
    }

    fn label(name: &str, value: &str) -> Label {
        Label {
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn a_counter_is_a_cumulative_sum_whose_start_moves_only_when_it_starts_again() {
        let labels = vec![
            label("__name__", "bfperf_events_total"),
            label("block", "llt0"),
        ];
        let meta = vec![MetricMetadata {
            r#type: 1,
            metric_family_name: "bfperf_events".into(),
            help: "Events".into(),
        }];
        let at = |ms: i64, value: f64| TimeSeries {
            labels: labels.clone(),
            samples: vec![Sample {
                value,
                timestamp: ms,
            }],
        };
        let mut starts = Starts::new();
        // Each request's starts kept, as the sender does once the receiver took it.
        let mut sent = |series: TimeSeries| {
            let (r, after) = request(&[series], &meta, &[], &starts, 7);
            starts.keep(after);
            r
        };
        let sum = |r: &ExportMetricsServiceRequest| {
            let m = &r.resource_metrics[0].scope_metrics[0].metrics[0];
            assert_eq!((m.name.as_str(), m.unit.as_str()), ("bfperf_events", "1"));
            let s = m.sum.clone().unwrap();
            assert!(s.is_monotonic && s.aggregation_temporality == CUMULATIVE);
            s.data_points[0].clone()
        };
        let first = sum(&sent(at(1_000, 5.0)));
        assert_eq!(
            (first.start_time_unix_nano, first.time_unix_nano),
            (7, 1_000_000_000)
        );
        let on = sum(&sent(at(2_000, 9.0)));
        assert_eq!(on.start_time_unix_nano, 7);
        // Started again (the value fell): a new start after the last point.
        let again = sum(&sent(at(3_000, 1.0)));
        assert_eq!(again.start_time_unix_nano, 2_000_000_001);
        assert_eq!(again.attributes, vec![kv("block", "llt0")]);
        // A request the receiver did not take is built again the same (its starts
        // were not kept): its first point is no restart against its own last.
        let batch = TimeSeries {
            labels: labels.clone(),
            samples: vec![
                Sample {
                    value: 4.0,
                    timestamp: 4_000,
                },
                Sample {
                    value: 6.0,
                    timestamp: 5_000,
                },
            ],
        };
        let (tried, _) = request(std::slice::from_ref(&batch), &meta, &[], &starts, 7);
        let (again, _) = request(&[batch], &meta, &[], &starts, 7);
        assert_eq!(tried, again);
        let points = &again.resource_metrics[0].scope_metrics[0].metrics[0];
        for p in &points.sum.as_ref().unwrap().data_points {
            assert_eq!(p.start_time_unix_nano, 2_000_000_001);
        }
    }

    /// A first point in the millisecond the pusher began, or stamped before it
    /// (its time is whole milliseconds), still starts before its own time.
    #[test]
    fn a_counters_start_is_always_before_its_point() {
        let meta = [MetricMetadata {
            r#type: 1,
            metric_family_name: "bfperf_events".into(),
            help: String::new(),
        }];
        let series = |ms: i64, value: f64| TimeSeries {
            labels: vec![
                label("__name__", "bfperf_events_total"),
                label("block", "llt0"),
            ],
            samples: vec![Sample {
                value,
                timestamp: ms,
            }],
        };
        let point = |r: &ExportMetricsServiceRequest| {
            let p = &r.resource_metrics[0].scope_metrics[0].metrics[0]
                .sum
                .as_ref()
                .unwrap()
                .data_points[0];
            (p.start_time_unix_nano, p.time_unix_nano)
        };
        for began in [1_000_000_000, 1_000_400_000, 2_000_000_000] {
            let (r, _) = request(&[series(1_000, 0.0)], &meta, &[], &Starts::new(), began);
            assert_eq!(point(&r), (999_999_999, 1_000_000_000), "began {began}");
        }
        let (r, _) = request(
            &[series(1_000, 0.0)],
            &meta,
            &[],
            &Starts::new(),
            999_000_000,
        );
        assert_eq!(point(&r), (999_000_000, 1_000_000_000));
        // Started again within the millisecond of its last point: before it still.
        let mut starts = Starts::new();
        let (_, after) = request(&[series(1_000, 5.0)], &meta, &[], &starts, 7);
        starts.keep(after);
        let (r, _) = request(&[series(1_000, 1.0)], &meta, &[], &starts, 7);
        assert_eq!(point(&r), (999_999_999, 1_000_000_000));
    }

    #[test]
    fn a_series_unseen_for_an_hour_is_forgotten_and_starts_again_after_it() {
        let meta = [MetricMetadata {
            r#type: 1,
            metric_family_name: "bfperf_events".into(),
            help: String::new(),
        }];
        let series = |block: &str, secs: i64, value: f64| TimeSeries {
            labels: vec![
                label("__name__", "bfperf_events_total"),
                label("block", block),
            ],
            samples: vec![Sample {
                value,
                timestamp: secs * 1000,
            }],
        };
        let start = |r: &ExportMetricsServiceRequest| {
            r.resource_metrics[0].scope_metrics[0].metrics[0]
                .sum
                .as_ref()
                .unwrap()
                .data_points[0]
                .start_time_unix_nano
        };
        let mut starts = Starts::new();
        let mut sent = |s: TimeSeries| {
            let (r, after) = request(&[s], &meta, &[], &starts, 7);
            starts.keep(after);
            (start(&r), starts.series.len())
        };
        assert_eq!(sent(series("llt0", 10, 50.0)), (7, 1));
        assert_eq!(sent(series("mss0", 10, 5.0)), (7, 2));
        // llt0 goes (a reload): after an hour of mss0 alone it is forgotten.
        assert_eq!(sent(series("mss0", 3610, 6.0)), (7, 2));
        assert_eq!(sent(series("mss0", 3611, 7.0)), (7, 1));
        // Back, with a count lower than its last: it starts after its last point,
        // as does a series never seen before.
        let after = 10_000_000_001;
        assert_eq!(sent(series("llt0", 3612, 3.0)), (after, 2));
        assert_eq!(sent(series("llt1", 3612, 3.0)), (after, 3));
        assert_eq!(sent(series("mss0", 3612, 8.0)), (7, 3));
    }

    #[test]
    fn a_gauge_keeps_its_name_and_its_base_unit() {
        let s = TimeSeries {
            labels: vec![label(
                "__name__",
                "bfperf_ddr_read_bandwidth_bytes_per_second",
            )],
            samples: vec![Sample {
                value: 2e9,
                timestamp: 1,
            }],
        };
        let (r, _) = request(&[s], &[], &[], &Starts::new(), 0);
        let m = &r.resource_metrics[0].scope_metrics[0].metrics[0];
        assert_eq!(m.unit, "By/s");
        assert_eq!(
            m.gauge.as_ref().unwrap().data_points[0].value,
            Some(PointValue::AsDouble(2e9))
        );
    }
}
