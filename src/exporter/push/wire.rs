//! Prometheus remote write 1.0 on the wire: the `WriteRequest` protobuf (the
//! messages of Prometheus' `prompb`, derived with prost) in snappy's block format.

use crate::exposition::Family;

/// `prometheus.WriteRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
    #[prost(message, repeated, tag = "3")]
    pub metadata: Vec<MetricMetadata>,
}

/// `prometheus.TimeSeries`: labels sorted by name, `__name__` among them.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, prost::Message)]
pub(super) struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`: a value at a time in milliseconds since the epoch.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// `prometheus.MetricMetadata`: a family's type and HELP.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct MetricMetadata {
    /// 1 counter, 2 gauge (`MetricMetadata.MetricType`).
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub metric_family_name: String,
    #[prost(string, tag = "4")]
    pub help: String,
}

/// The series of `fams`, each with `extra` labels (job, instance) added, named as a
/// scrape names them (`bfperf_` prefix, counters' `_total`): its labels, sorted by
/// name, and its value.
pub(super) fn series(fams: &[Family], extra: &[(String, String)]) -> Vec<(Vec<Label>, f64)> {
    let mut out = Vec::new();
    for f in fams {
        let name = format!("{}{}", f.name, if f.counter { "_total" } else { "" });
        for (labels, value) in &f.samples {
            let mut l: Vec<Label> = labels
                .iter()
                .map(|(k, v)| Label {
                    name: (*k).to_string(),
                    value: v.clone(),
                })
                .chain(extra.iter().map(|(k, v)| Label {
                    name: k.clone(),
                    value: v.clone(),
                }))
                .collect();
            l.push(Label {
                name: "__name__".into(),
                value: name.clone(),
            });
            l.sort_by(|a, b| a.name.cmp(&b.name));
            l.dedup_by(|b, a| a.name == b.name);
            out.push((l, *value));
        }
    }
    out
}

/// Each family's type and HELP, as the receiver's metadata.
pub(super) fn metadata(fams: &[Family]) -> Vec<MetricMetadata> {
    fams.iter()
        .filter(|f| !f.samples.is_empty())
        .map(|f| MetricMetadata {
            r#type: if f.counter { 1 } else { 2 },
            metric_family_name: f.name.clone(),
            help: f.help.clone(),
        })
        .collect()
}

/// The request's body: the protobuf, snappy-compressed (block format).
pub(super) fn body(request: &WriteRequest) -> Vec<u8> {
    use prost::Message;
    let raw = request.encode_to_vec();
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_series_is_named_and_labelled_as_a_scrape_shows_it_and_survives_the_wire() {
        let fams = vec![Family {
            name: "bfperf_events".into(),
            help: "Events".into(),
            counter: true,
            samples: vec![(
                vec![("block", "tile2".into()), ("event", "MEMORY_READS".into())].into(),
                42.0,
            )],
        }];
        let extra = [("job".to_string(), "bfperf".to_string())];
        let req = WriteRequest {
            timeseries: series(&fams, &extra)
                .into_iter()
                .map(|(labels, value)| TimeSeries {
                    labels,
                    samples: vec![Sample {
                        value,
                        timestamp: 1_700_000_000_000,
                    }],
                })
                .collect(),
            metadata: metadata(&fams),
        };
        let bytes = body(&req);
        let raw = snap::raw::Decoder::new().decompress_vec(&bytes).unwrap();
        let back = WriteRequest::decode(raw.as_slice()).unwrap();
        assert_eq!(back, req);
        let names: Vec<(&str, &str)> = back.timeseries[0]
            .labels
            .iter()
            .map(|l| (l.name.as_str(), l.value.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("__name__", "bfperf_events_total"),
                ("block", "tile2"),
                ("event", "MEMORY_READS"),
                ("job", "bfperf")
            ]
        );
        assert_eq!(back.timeseries[0].samples[0].value, 42.0);
        assert_eq!(back.metadata[0].metric_family_name, "bfperf_events");
    }
}
