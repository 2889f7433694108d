//! The formula compiler: a metric's expression read into its variables (block
//! events, perf events, parameters, other metrics), checked against the event
//! tables, and a metric file read.

use super::*;

/// The names in a formula that are other metrics, found by a scan of its
/// identifiers (`kind@EVENT@` references are events, not metrics).
pub(super) fn metric_refs(expr: &str, kinds: &HashMap<String, BlockKind>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if bytes.get(i) == Some(&b'@') {
                // kind@EVENT@: skip to the closing '@'.
                i += 1;
                while i < bytes.len() && bytes[i] != b'@' {
                    i += 1;
                }
                i += 1;
                continue;
            }
            let name = &expr[start..i];
            if kinds.contains_key(name) && !out.iter().any(|o| o == name) {
                out.push(name.to_string());
            }
        } else if c.is_ascii_digit() || c == b'.' {
            // A number, with its exponent (1e-9): not a name.
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The length of the number `text` starts with: digits and dots, and an exponent.
pub(super) fn number_len(text: &str) -> usize {
    let b = text.as_bytes();
    let mut i = b
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'.')
        .count();
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let digits = b[j.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            i = j + digits;
        }
    }
    i
}

pub(super) fn table_has(kind: BlockKind, gens: &[Generation], name: &str) -> bool {
    gens.iter()
        .any(|g| builtin(kind, *g).iter().any(|d| d.name.trim_end() == name))
}

/// Classifies a formula's names; `metrics` are the names of every metric loaded.
pub(super) fn classify(
    def: &MetricDef,
    kind: BlockKind,
    gens: &[Generation],
    names: &[String],
    metrics: &HashMap<String, BlockKind>,
) -> std::result::Result<Vec<Var>, String> {
    names
        .iter()
        .map(|n| classify_one(def, kind, gens, n, metrics))
        .collect()
}

/// A perf event in a formula: `perf@NAME@` for perf's generic names (hyphens and all),
/// `PMU@EVENT@` for a PMU's event (checked against the machine's PMUs when counted).
pub(super) fn perf_var(pmu: &str, event: &str, n: &str) -> std::result::Result<Var, String> {
    if pmu != "perf" {
        return Ok(Var::Other(BlockKind::Perf, format!("{pmu}/{event}/")));
    }
    let name = crate::perf::generic_name(event).ok_or_else(|| {
        let names = crate::perf::GENERIC
            .iter()
            .flat_map(|(n, ..)| n.iter().copied());
        format!(
            "'{event}' is no generic perf event (in {n}){}; a PMU's event is PMU@EVENT@",
            did_you_mean(&suggest(event, names))
        )
    })?;
    Ok(Var::Other(BlockKind::Perf, name.to_string()))
}

pub(super) fn classify_one(
    def: &MetricDef,
    kind: BlockKind,
    gens: &[Generation],
    n: &str,
    metrics: &HashMap<String, BlockKind>,
) -> std::result::Result<Var, String> {
    let generic = crate::perf::generic_name(n);
    Ok(if let Some((k, rest)) = n.split_once('@') {
        let event = rest.trim_end_matches('@');
        // A name that is no block kind is a perf PMU (`armv8_pmuv3_0@l2d_cache_refill@`).
        let Some(other) = BlockKind::parse(k) else {
            return perf_var(k, event, n);
        };
        if !table_has(other, gens, event) {
            return Err(format!(
                "{other:?} has no event '{event}' (in {n})",
                other = other.as_str()
            ));
        }
        Var::Other(other, event.to_string())
    } else if n == "duration_time" {
        Var::Duration
    } else if n == def.name {
        return Err("the metric refers to itself".into());
    } else if let (BlockKind::Perf, Some(g)) = (kind, generic) {
        // Unit `perf`: plain names are perf's generic events, cycles included.
        Var::Other(BlockKind::Perf, g.to_string())
    } else if n == "cycles" {
        if !kind.def().count_clock {
            return Err(format!(
                "cycles is a {kind} block's count_clock counter, which {kind} blocks have not; the Arm cores' cycles are perf@cycles@",
                kind = kind.as_str()
            ));
        }
        Var::Cycles
    } else if n == "blocks" {
        Var::Blocks
    } else if PARAMS.contains(&n) {
        Var::Param(n.to_string())
    } else if let Some(k) = metrics.get(n) {
        Var::Metric(n.to_string(), *k)
    } else if table_has(kind, gens, n) {
        Var::Event(n.to_string())
    } else if let Some(g) = generic {
        Var::Other(BlockKind::Perf, g.to_string())
    } else {
        let candidates: Vec<&str> = gens
            .iter()
            .flat_map(|g| builtin(kind, *g).iter().map(|d| d.name.trim_end()))
            .collect();
        return Err(format!(
            "'{n}' is no event of {} nor a metric nor a perf event{}",
            kind.as_str(),
            did_you_mean(&suggest(n, candidates.into_iter()))
        ));
    })
}

/// A name formulas and Prometheus both accept: `[A-Za-z_][A-Za-z0-9_]*`.
pub(super) fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A metric of a known kind, its formula not yet parsed.
pub(super) fn load_one(
    def: MetricDef,
    source: &str,
    context: &std::sync::Arc<Context>,
) -> std::result::Result<Metric, String> {
    let kind = def
        .block_kind()
        .ok_or_else(|| format!("unknown kind '{}' in Unit", def.kind))?;
    if !valid_name(&def.name) {
        return Err(format!(
            "MetricName '{}' is not a usable name: letters, digits and _ only, not starting with a digit (it names a formula variable and a Prometheus series)",
            def.name.escape_debug()
        ));
    }
    if let Some(p) = def.pair_blocks.as_deref().filter(|p| *p != "index") {
        return Err(format!(
            "PairBlocks '{}' is not known: `index` pairs block N with the other kind's block N",
            p.escape_debug()
        ));
    }
    let mut refs = metric_refs(&def.expr, &context.kinds);
    refs.retain(|r| *r != def.name);
    let (scale, unit) = def.scale_and_unit();
    Ok(Metric {
        def,
        kind,
        scale,
        unit,
        source: source.to_string(),
        refs,
        context: context.clone(),
        compiled: std::sync::OnceLock::new(),
        leads: std::sync::OnceLock::new(),
    })
}

/// Reads a metric file: a JSON array of definitions.
pub(super) fn read_file(text: &str) -> std::result::Result<Vec<MetricDef>, String> {
    serde_json::from_str(text).map_err(|e| format!("not a JSON array of metrics: {e}"))
}
