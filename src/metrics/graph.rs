//! The metric set as a graph: each metric's depth in the order of evaluation, and
//! the paths and cycles between metrics as errors name them.

/// `a → b → c → …`, at most eight names of `len`.
pub(super) fn path_text<'a>(names: impl Iterator<Item = &'a String>, len: usize) -> String {
    let mut shown: Vec<&str> = names.take(8).map(String::as_str).collect();
    if len > 8 {
        shown.push("…");
    }
    shown.join(" → ")
}

/// `a → b → c → a`, at most eight names.
pub(super) fn chain_text<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&String> = names.collect();
    let mut shown: Vec<&str> = names.iter().take(8).map(|s| s.as_str()).collect();
    if names.len() > 8 {
        shown.push("…");
    }
    shown.push(names[0]);
    format!("{} ({} metrics)", shown.join(" → "), names.len())
}

/// The metric graph, resolved in order (Kahn's algorithm): which metrics have every
/// reference resolvable (none in or behind a circle), how deep each one's references
/// go, and through which reference the deepest chain runs.
pub(super) struct Depths {
    pub(super) resolved: Vec<bool>,
    pub(super) depth: Vec<usize>,
    pub(super) via: Vec<Option<usize>>,
}

/// `deps[i]`: the metrics metric `i` refers to. Linear in metrics and references.
pub(super) fn depths(deps: &[Vec<usize>]) -> Depths {
    let n = deps.len();
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &j in d {
            users[j].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut out = Depths {
        resolved: vec![false; n],
        depth: vec![1usize; n],
        via: vec![None; n],
    };
    while let Some(i) = ready.pop() {
        out.resolved[i] = true;
        if let Some(&d) = deps[i].iter().max_by_key(|&&d| out.depth[d]) {
            out.depth[i] = out.depth[d] + 1;
            out.via[i] = Some(d);
        }
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(u);
            }
        }
    }
    out
}
