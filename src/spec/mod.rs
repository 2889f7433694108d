//! Event specs, perf-style: `BLOCKS/EVENT[,EVENT...]/`. BLOCKS is a block, a kind, a
//! glob or a comma list of them; EVENT is a name (any case, vendor spellings), a number
//! (as the kernel reads it), `cycles` on blocks with `count_clock`, a register name, or
//! a glob over names (`pcie/*_BYTE_CNT/`). Every part is checked before anything is
//! written; an error names the spec and the part that is wrong.

mod expand;
pub(crate) mod perf_terms;

pub(crate) use expand::expand;

use crate::block::{Block, Mechanism};
use crate::catalog::{Catalog, Glob, DISABLE};
use crate::device::resolve::resolve_event;
use crate::device::Device;
use crate::error::{Error, Result};

/// What one counter or register of a block measures.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Item {
    /// An event programmed on a counter.
    Event {
        /// Its number.
        number: u32,
        /// Its name as the table gives it.
        name: String,
    },
    /// Clock cycles (`count_clock`).
    Cycles,
    /// A statistics register, read as it is.
    Register {
        /// The register's name.
        name: String,
    },
}

impl Item {
    /// The name shown for it.
    pub fn label(&self) -> &str {
        match self {
            Item::Event { name, .. } | Item::Register { name } => name,
            Item::Cycles => "cycles",
        }
    }

    /// The event number, for an event.
    pub fn number(&self) -> Option<u32> {
        match self {
            Item::Event { number, .. } => Some(*number),
            _ => None,
        }
    }
}

/// The items asked of one block, in the order given, each once.
#[derive(Debug, Clone)]
pub struct BlockRequest<'d> {
    /// The block.
    pub block: &'d Block,
    /// What to count on it.
    pub items: Vec<Item>,
    /// Items that one spec named together (indices into `items`): multiplexing
    /// keeps each set in one turn where it fits, so that a metric is computed from
    /// events counted over the same time.
    pub sets: Vec<Vec<usize>>,
    /// Items a `{...}` group named together (indices into `items`): always counted in
    /// one turn, refused if they cannot fit the block's counters.
    pub groups: Vec<Vec<usize>>,
    /// The group number of each entry of `groups`.
    group_of: Vec<usize>,
}

impl<'d> BlockRequest<'d> {
    /// These items of `block`, as one set and in no `{}` group.
    pub(crate) fn of_items(block: &'d Block, items: Vec<Item>) -> Self {
        BlockRequest {
            block,
            sets: vec![(0..items.len()).collect()],
            groups: Vec::new(),
            group_of: Vec::new(),
            items,
        }
    }
}

/// One spec of an event list, and the `{...}` group it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The spec, `BLOCKS/EVENTS/` or a bare event name.
    pub spec: String,
    /// The group, numbered in order of appearance within its event list.
    pub group: Option<usize>,
}

/// Specs resolved against a device, with what the user must be told.
#[derive(Debug, Clone)]
pub struct Resolved<'d> {
    /// Each block and what to count on it.
    pub blocks: Vec<BlockRequest<'d>>,
    /// What the user must know (an event name listed twice...).
    pub warnings: Vec<String>,
}

fn bad(spec: &str, problem: impl std::fmt::Display) -> Error {
    Error::BadSpec {
        spec: spec.to_string(),
        problem: problem.to_string(),
    }
}

/// Splits `BLOCKS/EVENTS/` (the trailing `/` may be left out).
pub(crate) fn split(spec: &str) -> Result<(&str, Vec<&str>)> {
    let s = spec.trim();
    let body = s.strip_suffix('/').unwrap_or(s);
    let Some((blocks, events)) = body.split_once('/') else {
        return Err(bad(
            spec,
            "an event spec is BLOCKS/EVENT[,EVENT...]/, e.g. tile/MEMORY_READS/ or l3cache/HITS_BANK0,MISSES_BANK0/",
        ));
    };
    if let Some((events, modifiers)) = events.rsplit_once('/') {
        // perf's `PMU/EVENT/u`: modifiers choose what a CPU counts in; a BlueField
        // block counts its own traffic, whoever caused it.
        let perf_modifiers = !modifiers.is_empty()
            && modifiers.chars().all(|c| "ukhHGIpPSDW".contains(c))
            && !events.contains('/');
        if perf_modifiers {
            return Err(bad(
                spec,
                format!(
                    "'{modifiers}' is a perf modifier, for perf events only (cycles:u, armv8_pmuv3_0/inst_retired/u): a BlueField block counts all of its traffic; write {blocks}/{events}/"
                ),
            ));
        }
        return Err(bad(
            spec,
            "one spec has two '/'-separated parts: BLOCKS/EVENTS/",
        ));
    }
    if blocks.trim().is_empty() {
        return Err(bad(
            spec,
            "no blocks before the '/': give a block, a kind (tile), a pattern (llt*) or a list",
        ));
    }
    let events: Vec<&str> = events.split(',').map(str::trim).collect();
    if events.iter().any(|e| e.is_empty()) {
        return Err(bad(
            spec,
            "an empty event: name events between the '/', separated by commas",
        ));
    }
    Ok((blocks.trim(), events))
}

/// The error for an event a block lacks, pointing to the kind that has it.
fn wrong_kind(device: &Device, spec: &str, block: &Block, typed: &str, e: Error) -> Error {
    // `cycles`, numbers and patterns have errors of their own.
    if typed.eq_ignore_ascii_case("cycles")
        || is_glob(typed)
        || typed.starts_with(|c: char| c.is_ascii_digit())
    {
        return e;
    }
    let kinds: Vec<String> = kinds_with(device, typed)
        .into_iter()
        .filter(|k| k != block.kind.as_str())
        .collect();
    let Some(k) = kinds.first() else {
        return e;
    };
    let hint = format!(
        "{typed} is an event of {k}, not of {}; did you mean {k}/{typed}/?",
        block.kind.as_str()
    );
    match e {
        Error::BadSpec { problem, .. } => bad(spec, format!("{problem}; {hint}")),
        _ => bad(spec, hint),
    }
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Refuses, before anything is matched, a spec with a part (a block, kind, event,
/// number or pattern between `/`, `,`, `{` and `}`) longer than [`MAX_PART`](crate::catalog::MAX_PART): the
/// cost of resolving a spec is then linear in its length with a small bound.
fn check_parts(spec: &str) -> Result<()> {
    let mut run = 0;
    for (i, c) in spec.char_indices() {
        if matches!(c, '/' | ',' | '{' | '}') || c.is_whitespace() {
            run = 0;
            continue;
        }
        run += 1;
        if run > crate::catalog::MAX_PART {
            let start = spec[..i].rfind(['/', ',', '{', '}']).map_or(0, |s| s + 1);
            let shown: String = spec[start..].chars().take(24).collect();
            return Err(bad(
                &spec.chars().take(64).collect::<String>(),
                format!(
                    "'{shown}...' is longer than {} characters; no block or event name is, with its wildcards",
                    crate::catalog::MAX_PART
                ),
            ));
        }
    }
    Ok(())
}

/// One event of a spec as typed, its glob compiled once for every block it is
/// matched on.
struct Typed<'s> {
    text: &'s str,
    glob: Option<Glob>,
}

/// A spec's events, each glob compiled (any case: names are matched upper-cased).
fn typed_events<'s>(spec: &str, events: &[&'s str]) -> Result<Vec<Typed<'s>>> {
    events
        .iter()
        .map(|&text| {
            let glob = is_glob(text)
                .then(|| {
                    Glob::new(&text.to_ascii_uppercase())
                        .map_err(|e| bad(spec, format!("'{text}' is {e}")))
                })
                .transpose()?;
            Ok(Typed { text, glob })
        })
        .collect()
}

/// The names of a block's catalog a glob matches (DISABLE never).
fn glob_names<'c>(catalog: &'c Catalog, glob: &Glob) -> Vec<&'c str> {
    catalog
        .events
        .iter()
        .filter(|e| e.name != DISABLE && glob.matches(&e.name.to_ascii_uppercase()))
        .map(|e| &*e.name)
        .collect()
}

fn register_items(
    spec: &str,
    block: &Block,
    catalog: &Catalog,
    typed: &Typed,
) -> Result<Vec<Item>> {
    let (typed, glob) = (typed.text, typed.glob.as_ref());
    if let Some(glob) = glob {
        let names = glob_names(catalog, glob);
        if names.is_empty() {
            return Err(bad(
                spec,
                format!("'{typed}' matches no register of {}", block.name),
            ));
        }
        return Ok(names
            .into_iter()
            .map(|n| Item::Register {
                name: n.to_string(),
            })
            .collect());
    }
    match catalog.resolve(typed) {
        Ok(e) if block.registers.iter().any(|r| *r == e.name) => Ok(vec![Item::Register {
            name: e.name.to_string(),
        }]),
        _ => Err(bad(
            spec,
            crate::catalog::no_register(&block.name, &block.registers, typed),
        )),
    }
}

fn counter_items(
    spec: &str,
    block: &Block,
    catalog: &Catalog,
    typed: &Typed,
    warnings: &mut Vec<String>,
) -> Result<Vec<Item>> {
    let (typed, glob) = (typed.text, typed.glob.as_ref());
    // `cycles` is count_clock mode where the block has it; elsewhere it may be an
    // event's name (L3's CYCLES).
    if typed.eq_ignore_ascii_case("cycles")
        && (block.has_count_clock || catalog.resolve(typed).is_err())
    {
        if !block.has_count_clock {
            return Err(bad(
                spec,
                format!(
                    "cycles needs a count_clock file (BlueField-3 crspace blocks, kernel 6.14 or later); {} has none",
                    block.name
                ),
            ));
        }
        return Ok(vec![Item::Cycles]);
    }
    if let Some(glob) = glob {
        let names = glob_names(catalog, glob);
        if names.is_empty() {
            return Err(bad(
                spec,
                format!("'{typed}' matches no event of {}", block.name),
            ));
        }
        return Ok(names
            .into_iter()
            .filter_map(|n| catalog.by_name(n))
            .map(|e| Item::Event {
                number: e.number,
                name: e.name.to_string(),
            })
            .collect());
    }
    let r = resolve_event(block, catalog, typed, false).map_err(|e| bad(spec, e))?;
    warnings.extend(r.warning);
    Ok(vec![Item::Event {
        number: r.number,
        name: r.name.unwrap_or_else(|| format!("0x{:x}", r.number)),
    }])
}

/// A '}' with no '{' before it.
const UNOPENED: &str = "a '}' closes no group: a group is {KIND/A,B/} or {KIND/A/,KIND/B/}";

/// The kinds on the device whose table has an event of this name.
fn kinds_with(device: &Device, name: &str) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for b in device.blocks() {
        let k = b.kind.as_str().to_string();
        if kinds.contains(&k) {
            continue;
        }
        if device
            .catalog(b)
            .is_ok_and(|c| c.resolve(name).is_ok() && !name.starts_with("0x"))
        {
            kinds.push(k);
        }
    }
    kinds
}

/// A bare event name (`-e HNF_REQUESTS`) becomes a spec on every kind that has it.
fn bare(device: &Device, spec: &str) -> Result<String> {
    if device.select(&[spec.to_string()]).is_ok() {
        return Err(bad(
            spec,
            format!("{spec} names blocks, not an event: an event spec is BLOCKS/EVENT[,EVENT...]/, e.g. {spec}/EVENT/ (`bfperf list` shows the events)"),
        ));
    }
    let kinds = kinds_with(device, spec);
    if kinds.is_empty() {
        let names = device
            .blocks()
            .iter()
            .filter_map(|b| device.catalog(b).ok())
            .flat_map(|c| {
                c.events
                    .iter()
                    .map(|e| e.name.to_string())
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        return Err(bad(
            spec,
            format!(
                "no block of this device has an event named {spec}{}; `bfperf list` shows them",
                crate::catalog::did_you_mean(&crate::catalog::suggest(
                    spec,
                    names.iter().map(String::as_str)
                ))
            ),
        ));
    }
    Ok(format!("{}/{spec}/", kinds.join(",")))
}

/// Resolves every spec against the device. Several specs may name one block: its
/// items are merged, each once. Each `-e` may hold several specs in perf's grammar
/// (terms, `{}` groups, globs); a selector of several blocks counts an event on those that have it,
/// and fails only when none does.
pub fn resolve<'d>(device: &'d Device, specs: &[String]) -> Result<Resolved<'d>> {
    if specs.is_empty() {
        return Err(Error::BadSpec {
            spec: String::new(),
            problem: "nothing to count: give -e BLOCKS/EVENT/ (e.g. -e 'tile/MEMORY_READS,MEMORY_WRITES/')".into(),
        });
    }
    for spec in specs {
        check_parts(spec)?;
    }
    let mut out: Vec<BlockRequest<'d>> = Vec::new();
    let mut warnings = Vec::new();
    for (spec, group) in expand_all(device, specs)? {
        resolve_one(device, &spec, group, &mut out, &mut warnings)?;
    }
    warnings.sort();
    warnings.dedup();
    Ok(Resolved {
        blocks: out,
        warnings,
    })
}

/// Every `-e` expanded into `BLOCKS/EVENTS/` specs (a bare name placed on the kinds
/// that have it), with its group. Groups are numbered across every `-e`, so `{...}`
/// in two options are two groups.
fn expand_all(device: &Device, specs: &[String]) -> Result<Vec<(String, Option<usize>)>> {
    let mut expanded = Vec::new();
    let mut groups = 0;
    for text in specs {
        let terms = expand(text)?;
        let here = terms
            .iter()
            .filter_map(|t| t.group)
            .max()
            .map_or(0, |g| g + 1);
        for t in terms {
            let spec = match t.spec.contains('/') {
                true => t.spec,
                false => bare(device, &t.spec)?,
            };
            expanded.push((spec, t.group.map(|g| g + groups)));
        }
        groups += here;
    }
    Ok(expanded)
}

/// One spec on every block it selects: the items of each block that has them merged
/// into `out`; a block of another kind that lacks them is passed over when the
/// selector chose several, and the spec fails only when no block counts it.
fn resolve_one<'d>(
    device: &'d Device,
    spec: &str,
    group: Option<usize>,
    out: &mut Vec<BlockRequest<'d>>,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let (blocks, events) = split(spec)?;
    let events = typed_events(spec, &events)?;
    let chosen = device
        .select(&[blocks.to_string()])
        .map_err(|e| bad(spec, e))?;
    let several = chosen.len() > 1;
    let mut counted = 0;
    let mut first_error = None;
    for block in chosen {
        match block_items(device, spec, block, &events, warnings)? {
            Ok(items) => {
                counted += 1;
                merge(out, block, items, group);
            }
            // A glob or kind over blocks of several kinds counts where it can.
            Err(failed) if several => {
                first_error.get_or_insert(failed);
            }
            Err((typed, e)) => return Err(wrong_kind(device, spec, block, &typed, e)),
        }
    }
    match (counted, first_error) {
        (0, Some((typed, e))) => {
            let block = device.select(&[blocks.to_string()])?[0];
            Err(wrong_kind(device, spec, block, &typed, e))
        }
        _ => Ok(()),
    }
}

/// The items a spec's events are on one block; the inner error names the event the
/// block lacks (the caller decides whether that fails the spec).
#[allow(clippy::type_complexity)]
fn block_items(
    device: &Device,
    spec: &str,
    block: &Block,
    events: &[Typed],
    warnings: &mut Vec<String>,
) -> Result<std::result::Result<Vec<Item>, (String, Error)>> {
    if block.is_empty() {
        return Err(bad(
            spec,
            format!(
                "{} is an empty block (no counter or register files)",
                block.name
            ),
        ));
    }
    let catalog = device.catalog(block)?;
    let mut items = Vec::new();
    for typed in events {
        let new = if block.mechanism == Mechanism::Registers {
            register_items(spec, block, &catalog, typed)
        } else {
            counter_items(spec, block, &catalog, typed, warnings)
        };
        match new {
            Ok(mut new) => items.append(&mut new),
            Err(e) => return Ok(Err((typed.text.to_string(), e))),
        }
    }
    Ok(Ok(items))
}

/// Adds a spec's items on `block` to its request (each item once), as one set, and
/// to the spec's group there.
fn merge<'d>(
    out: &mut Vec<BlockRequest<'d>>,
    block: &'d Block,
    items: Vec<Item>,
    group: Option<usize>,
) {
    let at = match out.iter().position(|r| r.block.name == block.name) {
        Some(i) => i,
        None => {
            out.push(BlockRequest {
                block,
                items: Vec::new(),
                sets: Vec::new(),
                groups: Vec::new(),
                group_of: Vec::new(),
            });
            out.len() - 1
        }
    };
    let entry = &mut out[at];
    let mut set = Vec::new();
    for item in items {
        let index = match entry.items.iter().position(|i| *i == item) {
            Some(i) => i,
            None => {
                entry.items.push(item);
                entry.items.len() - 1
            }
        };
        if !set.contains(&index) {
            set.push(index);
        }
    }
    if let Some(g) = group {
        // The group's specs on this block are one group.
        match entry.group_of.iter().position(|&o| o == g) {
            Some(k) => {
                let members = &mut entry.groups[k];
                for &i in &set {
                    if !members.contains(&i) {
                        members.push(i);
                    }
                }
            }
            None => {
                entry.group_of.push(g);
                entry.groups.push(set.clone());
            }
        }
    }
    entry.sets.push(set);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<(String, Option<usize>)> {
        expand(text)
            .unwrap()
            .into_iter()
            .map(|t| (t.spec, t.group))
            .collect()
    }

    #[test]
    fn perf_lists_groups_and_numbers_expand_as_perf_writes_them() {
        let s = |t: &str, g: Option<usize>| (t.to_string(), g);
        assert_eq!(
            terms("tile/A/,tile0,tile1/B,C/"),
            vec![s("tile/A/", None), s("tile0,tile1/B,C/", None)]
        );
        assert_eq!(
            terms("{llt/A,B/},{mss/C/,mss/D/}"),
            vec![
                s("llt/A,B/", Some(0)),
                s("mss/C/", Some(1)),
                s("mss/D/", Some(1))
            ]
        );
        assert_eq!(
            terms("HNF_REQUESTS,MEMORY_READS"),
            vec![s("HNF_REQUESTS", None), s("MEMORY_READS", None)]
        );
        assert_eq!(terms("tile/event=0x4c/"), vec![s("tile/0x4c/", None)]);
        assert_eq!(
            terms("cycles:u,r11"),
            vec![s("cycles:u", None), s("r11", None)]
        );
        assert_eq!(
            terms("armv8_pmuv3_0/l2d_cache/u"),
            vec![s("armv8_pmuv3_0/l2d_cache/u", None)]
        );
        // A malformed spec is one term, reported whole by the resolver.
        assert_eq!(terms("tile/A/x"), vec![s("tile/A/x", None)]);
        for bad in ["{tile/A/", "tile/A/}", "{{tile/A/}}", "{tile/A/}:u"] {
            assert!(expand(bad).is_err(), "{bad}");
        }
    }
}
