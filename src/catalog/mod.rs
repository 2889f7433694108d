//! The event catalog: the driver's event tables built in, merged with what the device's
//! own `event_list` says, and name resolution (exact, any case, vendor aliases, then
//! "did you mean").

pub(crate) mod tables;

use crate::block::{BlockKind, Generation};
use serde::Serialize;
use std::borrow::Cow;

/// A built-in event definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventDef {
    /// The event's number (written to `event<N>`).
    pub number: u32,
    /// The name exactly as the driver has it (a few carry trailing spaces).
    pub name: &'static str,
    /// The vendor's description.
    pub description: Option<&'static str>,
}

impl EventDef {
    /// An entry of an event table.
    pub const fn new(number: u32, name: &'static str, description: Option<&'static str>) -> Self {
        EventDef {
            number,
            name,
            description,
        }
    }
}

const RESERVED: &str = "Reserved for internal use";
/// What people are shown for an event the vendor does not describe.
pub(crate) const NO_DESCRIPTION: &str = "no vendor description";
/// The event that stops a counter on kernels that have it.
pub(crate) const DISABLE: &str = "DISABLE";
/// The length of the driver's per-line buffer: a list this close to a page was cut.
const EVENT_INFO_LEN: usize = 100;

/// The built-in table of a block kind on a generation.
pub fn builtin(kind: BlockKind, gen: Generation) -> &'static [EventDef] {
    (kind.def().events)(gen)
}

/// An event name some kernels list at a number the hardware counts as another event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KnownDuplicate {
    /// The kind whose table lists it.
    pub kind: BlockKind,
    /// The name.
    pub name: &'static str,
    /// The number the hardware counts this event at.
    pub hardware: u32,
    /// Which kernels list it wrongly, and since when it is right.
    pub kernels: &'static str,
}

/// The driver's duplicated entries, from its history.
pub(crate) static KNOWN_DUPLICATES: &[KnownDuplicate] = &[
    KnownDuplicate {
        kind: BlockKind::Llt,
        name: "GDC_BANK0_G_RSE_PIPE_CACHE_DATA1",
        hardware: 0x68,
        kernels: "kernels v6.4 to v6.15 list it as 0x67 (fixed in v6.16)",
    },
    KnownDuplicate {
        kind: BlockKind::Tilenet,
        name: "NDN_DIAG_S_OUT_OF_CRED",
        hardware: 0x36,
        kernels: "kernels before the December 2022 fix also name 0x35 (really NDN_DIAG_N_OUT_OF_CRED, north) so",
    },
];

/// Where a catalog entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The device's `event_list` (or its register files).
    Device,
    /// The built-in table only (the device's list was truncated).
    Builtin,
}

/// One event of a block's catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Event {
    /// The event number (for registers, the register's offset; 4294967295 where unknown).
    #[serde(rename = "event")]
    pub number: u32,
    /// The name with trailing spaces trimmed.
    // The built-in table's own text where it has the name (no copy), else a copy of
    // the device's.
    #[serde(rename = "event_name")]
    pub name: Cow<'static, str>,
    /// The vendor's description, when known.
    pub description: Option<&'static str>,
    /// The vendor documents this event as reserved for internal use.
    pub reserved: bool,
    /// Where bfperf learned it (the device's list or the built-in table).
    pub source: Source,
}

/// The events of one block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Catalog {
    /// Every event, in number order.
    pub events: Vec<Event>,
    /// The device's list was cut at the page size and the table filled in the rest.
    pub truncated: bool,
}

/// Parses one `0x45: NAME` line (upstream) or `45: NAME` line (out-of-tree driver, hex
/// without prefix). Trailing spaces of the name are trimmed.
pub(crate) fn parse_event_line(line: &str) -> Option<(u32, String)> {
    let (number, name) = split_event_line(line)?;
    Some((number, name.to_string()))
}

/// `0x45: NAME` as its number and name, without allocating (sampling reads it).
pub(crate) fn split_event_line(line: &str) -> Option<(u32, &str)> {
    // The colon found byte by byte: a `char` pattern goes through a searcher, for
    // every line of every list parsed.
    let colon = line.bytes().position(|b| b == b':')?;
    let (num, name) = (&line[..colon], &line[colon + 1..]);
    let num = num.trim();
    let digits = num
        .strip_prefix("0x")
        .or_else(|| num.strip_prefix("0X"))
        .unwrap_or(num);
    let number = u32::from_str_radix(digits, 16).ok()?;
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    Some((number, name))
}

/// Parses a whole `event_list`, its names borrowed from the text; lines that do not
/// parse are skipped.
pub(crate) fn parse_event_list(text: &str) -> Vec<(u32, &str)> {
    text.lines().filter_map(split_event_line).collect()
}

fn describe(def: Option<&EventDef>) -> (Option<&'static str>, bool) {
    match def.and_then(|d| d.description) {
        Some(d) => (Some(d), d == RESERVED),
        None => (None, false),
    }
}

impl Catalog {
    /// The built-in table alone.
    pub fn builtin(kind: BlockKind, gen: Generation) -> Catalog {
        let events = builtin(kind, gen)
            .iter()
            .map(|d| {
                let (description, reserved) = describe(Some(d));
                Event {
                    number: d.number,
                    name: Cow::Borrowed(d.name.trim_end()),
                    description,
                    reserved,
                    source: Source::Builtin,
                }
            })
            .collect();
        Catalog {
            events,
            truncated: false,
        }
    }

    /// Merges the device's `event_list` text with the built-in table. The device decides
    /// what exists; when its list was cut at `page_size` (the serving kernel's page:
    /// the most one `show` prints), the table supplies the events after the last one
    /// listed.
    pub fn merge(kind: BlockKind, gen: Generation, device_list: &str, page_size: usize) -> Catalog {
        let table = builtin(kind, gen);
        let listed = parse_event_list(device_list);
        if listed.is_empty() {
            return Catalog::builtin(kind, gen);
        }
        // A device lists its events in its table's order: the entry after the last
        // one found is tried first, where a search of the whole table for each
        // listed event was quadratic in the list's length. No table holds a number
        // and name twice (a unit test), so the entry found is the same.
        let mut next = 0;
        let mut find = |n: u32, name: &str| {
            let same = |d: &&EventDef| d.number == n && d.name.trim_end() == name;
            let hit = match table.get(next).filter(same) {
                Some(d) => Some((next, d)),
                None => table.iter().enumerate().find(|(_, d)| same(d)),
            };
            match hit {
                Some((i, d)) => {
                    next = i + 1;
                    Some(d)
                }
                None => table.iter().find(|d| d.number == n),
            }
        };
        let mut events: Vec<Event> = listed
            .iter()
            .map(|(n, name)| {
                let def = find(*n, name);
                let (description, reserved) = describe(def);
                Event {
                    number: *n,
                    name: match def.map(|d| d.name.trim_end()) {
                        Some(same) if same == *name => Cow::Borrowed(same),
                        _ => Cow::Owned(name.to_string()),
                    },
                    description,
                    reserved,
                    source: Source::Device,
                }
            })
            .collect();
        let mut truncated = false;
        if device_list.len() + EVENT_INFO_LEN > page_size {
            // Near a page: the driver may have cut the list. Continue the table after
            // the last listed entry.
            let last = listed.last().expect("non-empty");
            let pos = table
                .iter()
                .position(|d| d.number == last.0 && d.name.trim_end() == last.1)
                .or_else(|| table.iter().position(|d| d.name.trim_end() == last.1));
            if let Some(pos) = pos {
                truncated = pos + 1 < table.len();
                for d in &table[pos + 1..] {
                    let (description, reserved) = describe(Some(d));
                    events.push(Event {
                        number: d.number,
                        name: Cow::Borrowed(d.name.trim_end()),
                        description,
                        reserved,
                        source: Source::Builtin,
                    });
                }
            }
        }
        Catalog { events, truncated }
    }

    /// The catalog of a registers block: its register files, described by the table.
    pub fn registers(kind: BlockKind, gen: Generation, files: &[String]) -> Catalog {
        let table = builtin(kind, gen);
        let events = files
            .iter()
            .map(|f| {
                let def = table.iter().find(|d| d.name.trim_end() == f);
                let (description, reserved) = describe(def);
                Event {
                    number: def.map(|d| d.number).unwrap_or(u32::MAX),
                    name: match def {
                        Some(d) => Cow::Borrowed(d.name.trim_end()),
                        None => Cow::Owned(f.clone()),
                    },
                    description,
                    reserved,
                    source: Source::Device,
                }
            })
            .collect();
        Catalog {
            events,
            truncated: false,
        }
    }

    /// The first event with this number (the driver's tables may repeat a number).
    pub fn by_number(&self, number: u32) -> Option<&Event> {
        self.events.iter().find(|e| e.number == number)
    }

    /// The event of this name (any case, trailing spaces ignored).
    pub fn by_name(&self, name: &str) -> Option<&Event> {
        self.events.iter().find(|e| e.name == name)
    }

    /// The number of the table's `DISABLE` event, the way to stop a counter on
    /// kernels that validate numbers.
    pub fn disable_number(&self) -> Option<u32> {
        self.by_name(DISABLE).map(|e| e.number)
    }

    /// Resolves a name typed by a user: exact, then any case, then the vendor
    /// documentation's spellings. Err carries "did you mean" suggestions.
    pub fn resolve(&self, input: &str) -> Result<&Event, Vec<String>> {
        let input = input.trim();
        if let Some(e) = self.by_name(input) {
            return Ok(e);
        }
        if let Some(e) = self
            .events
            .iter()
            .find(|e| e.name.eq_ignore_ascii_case(input))
        {
            return Ok(e);
        }
        for alias in aliases(input) {
            if let Some(e) = self
                .events
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(&alias))
            {
                return Ok(e);
            }
        }
        Err(suggest(input, self.events.iter().map(|e| &*e.name)))
    }

    /// When the table lists this event's name at several numbers, or its number under
    /// several names, says so: which numbers, which one the hardware counts, and how
    /// to program it.
    pub fn ambiguity(&self, kind: BlockKind, event: &Event) -> Option<String> {
        let numbers: Vec<u32> = self
            .events
            .iter()
            .filter(|e| e.name == event.name)
            .map(|e| e.number)
            .collect();
        let others: Vec<&str> = self
            .events
            .iter()
            .filter(|e| e.number == event.number && e.name != event.name)
            .map(|e| &*e.name)
            .collect();
        if numbers.len() < 2 && others.is_empty() {
            return None;
        }
        let listed = numbers
            .iter()
            .map(|n| format!("0x{n:x}"))
            .collect::<Vec<_>>()
            .join(" and ");
        let mut msg = if others.is_empty() {
            format!("this kernel's table lists {} at {listed}", event.name)
        } else {
            format!(
                "this kernel's table lists {} at 0x{:x}, the number of {} too",
                event.name,
                event.number,
                others.join(", ")
            )
        };
        let known = KNOWN_DUPLICATES
            .iter()
            .find(|d| d.kind == kind && (d.name == event.name || others.contains(&d.name)));
        match known {
            Some(d) if d.name == event.name && d.hardware != event.number => msg.push_str(&format!(
                "; the hardware counts {} at 0x{:x} ({}): program 0x{:x} to count it (with --force on kernels that refuse numbers outside their table)",
                d.name, d.hardware, d.kernels, d.hardware
            )),
            Some(d) => msg.push_str(&format!(
                "; 0x{:x} is what the hardware counts as {} ({})",
                d.hardware, d.name, d.kernels
            )),
            None => msg.push_str(
                "; the hardware counts one event per number: check which one your kernel's driver means",
            ),
        }
        Some(msg)
    }

    /// Events whose name or description contains `pattern` (any case).
    pub fn filter(&self, pattern: &str) -> Vec<&Event> {
        let p = pattern.to_ascii_lowercase();
        self.events
            .iter()
            .filter(|e| {
                e.name.to_ascii_lowercase().contains(&p)
                    || e.description
                        .is_some_and(|d| d.to_ascii_lowercase().contains(&p))
            })
            .collect()
    }
}

/// The vendor documentation's spellings that differ from the driver's names.
fn aliases(input: &str) -> Vec<String> {
    let upper = input.to_ascii_uppercase();
    let mut out = Vec::new();
    if let Some(rest) = upper.strip_prefix("PCIE_TLR_") {
        out.push(rest.to_string());
    }
    // The vendor page's plural spellings in the HNF table.
    const PAIRS: &[(&str, &str)] = &[("IO_READS", "IO_READ"), ("A72_READS", "A72_READ")];
    for (from, to) in PAIRS {
        if upper == *from {
            out.push(to.to_string());
        }
    }
    out
}

/// The longest name, number or pattern one part of an event spec or block selector
/// may be: longer than every block and event name the driver gives (the longest has
/// 51 characters) with room for wildcards, so that nothing a user or a client sends
/// makes matching costly.
pub const MAX_PART: usize = 128;

/// A glob over names (`*`, `?`, `[...]`, `[!...]`), as the shell matches them. It
/// is kept as its pieces and matched by the classic two-cursor walk (a `*` that
/// fails is retried one character further), which never takes more steps than the
/// name's characters times the glob's pieces: at most [`MAX_PART`] per character.
/// (Compiling each glob to a regular expression cost 0.3 M instructions, more than
/// the rest of a `stat` start-up's work on the device.)
#[derive(Debug, Clone)]
pub(crate) struct Glob(Vec<Piece>);

/// One piece of a glob.
#[derive(Debug, Clone)]
enum Piece {
    /// `*`: any run of characters, none included.
    Star,
    /// `?`: any one character.
    Any,
    /// `[...]` (`[!...]` negated): one character in (or out of) these ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// A character that stands for itself.
    Char(char),
}

impl Piece {
    /// Whether this piece, not a `*`, takes `c`.
    fn takes(&self, c: char) -> bool {
        match self {
            Piece::Star | Piece::Any => true,
            Piece::Class { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) != *negated
            }
            Piece::Char(p) => *p == c,
        }
    }
}

impl Glob {
    /// The glob `text`; refused when longer than [`MAX_PART`] characters (which
    /// bounds a match's steps) or malformed. The error says why.
    pub(crate) fn new(text: &str) -> std::result::Result<Glob, String> {
        if text.chars().count() > MAX_PART {
            return Err(format!(
                "longer than {MAX_PART} characters; no block or event name is, with its wildcards"
            ));
        }
        let mut pieces = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            pieces.push(match c {
                '*' => {
                    while chars.peek() == Some(&'*') {
                        chars.next();
                    }
                    Piece::Star
                }
                '?' => Piece::Any,
                '[' => class(&mut chars)?,
                c => Piece::Char(c),
            });
        }
        Ok(Glob(pieces))
    }

    /// Whether `name` matches, whole.
    pub(crate) fn matches(&self, name: &str) -> bool {
        let pieces = &self.0;
        // The glob's and the name's cursors (a piece, a byte offset), and where
        // the last `*` resumes when what follows it fails: the piece after it, and
        // the offset up to which it has taken the name.
        let (mut p, mut i) = (0, 0);
        let mut resume: Option<(usize, usize)> = None;
        loop {
            let next = name[i..].chars().next();
            match (pieces.get(p), next) {
                (Some(Piece::Star), _) => {
                    resume = Some((p + 1, i));
                    p += 1;
                    continue;
                }
                (Some(piece), Some(c)) if piece.takes(c) => {
                    p += 1;
                    i += c.len_utf8();
                    continue;
                }
                (None, None) => return true,
                _ => {}
            }
            // A mismatch: the last `*` takes one more character, if there is one.
            let Some((after, taken)) = resume else {
                return false;
            };
            let Some(c) = name[taken..].chars().next() else {
                return false;
            };
            resume = Some((after, taken + c.len_utf8()));
            (p, i) = (after, taken + c.len_utf8());
        }
    }
}

/// A glob's `[...]` after its `[`: `!` first negates, a `]` first is literal, `a-z`
/// is a range (a `-` first or last is literal), anything else is itself.
fn class(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> std::result::Result<Piece, String> {
    let negated = chars.next_if_eq(&'!').is_some();
    let mut ranges: Vec<(char, char)> = Vec::new();
    let mut first = true;
    loop {
        match chars.next() {
            None => return Err("not a usable pattern (a '[' is never closed)".into()),
            Some(']') if !first => break,
            Some('-') if !first && chars.peek() != Some(&']') => {
                let hi = chars
                    .next()
                    .ok_or("not a usable pattern (a '[' is never closed)")?;
                match ranges.last_mut() {
                    Some(r) if r.0 == r.1 && r.0 <= hi => r.1 = hi,
                    Some(r) if r.0 == r.1 => {
                        return Err(format!(
                            "not a usable pattern (the range {}-{hi} runs backwards)",
                            r.0
                        ))
                    }
                    _ => ranges.extend([('-', '-'), (hi, hi)]),
                }
            }
            Some(c) => ranges.push((c, c)),
        }
        first = false;
    }
    Ok(Piece::Class { negated, ranges })
}

/// Edit distance counting an exchange of two neighbours as one edit (optimal string
/// alignment), for suggestions.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j - 1] + cost)
                .min(d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// Every `_`-separated word of `input` (a plural `s` dropped) begins a word of `candidate`.
fn words_match(input: &str, candidate: &str) -> bool {
    let words: Vec<&str> = candidate.split('_').collect();
    input.split('_').filter(|w| !w.is_empty()).all(|w| {
        let w = if w.len() > 2 {
            w.strip_suffix('s').unwrap_or(w)
        } else {
            w
        };
        words.iter().any(|c| c.starts_with(w))
    })
}

/// Up to five candidates close to `input`: small edit distance, or containing it.
pub(crate) fn suggest<'a>(input: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<String> {
    let lower = input.to_ascii_lowercase();
    let limit = (lower.len() / 3).max(2);
    let mut scored: Vec<(usize, String)> = candidates
        .filter_map(|c| {
            let lc = c.to_ascii_lowercase();
            let d = edit_distance(&lower, &lc);
            if d <= limit {
                Some((d, c.to_string()))
            } else if lower.len() >= 3 && (lc.contains(&lower) || words_match(&lower, &lc)) {
                Some((limit + 1 + lc.len().abs_diff(lower.len()), c.to_string()))
            } else {
                None
            }
        })
        .collect();
    scored.sort();
    // Keep the close ones: a near miss hides the far ones.
    if let Some(best) = scored.first().map(|s| s.0) {
        if best <= limit {
            scored.retain(|s| s.0 <= best + 1);
        }
    }
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(5).map(|(_, c)| c).collect()
}

/// "BLOCK has no register 'X'; did you mean Y?" (or the list of its registers).
pub(crate) fn no_register(block: &str, registers: &[String], typed: &str) -> String {
    let sugg = suggest(typed, registers.iter().map(String::as_str));
    let hint = if sugg.is_empty() {
        format!("; it has {}", registers.join(", "))
    } else {
        did_you_mean(&sugg)
    };
    format!("{block} has no register '{typed}'{hint}")
}

/// Formats suggestions as "; did you mean X, Y?" (empty when there are none).
pub(crate) fn did_you_mean(suggestions: &[String]) -> String {
    match suggestions {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        many => format!("; did you mean one of {}?", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_the_shell_does_and_long_ones_are_refused() {
        let g = |p: &str| Glob::new(p).unwrap();
        assert!(g("HNF*MISS").matches("HNF0_DIR_MISS"));
        assert!(g("l?t[0-9]").matches("llt7"));
        assert!(!g("l?t[!0-9]").matches("llt7"));
        assert!(g("[]a]*").matches("]x"));
        assert!(g("a.b+c(d)").matches("a.b+c(d)"));
        assert!(!g("a.b").matches("axb"));
        assert!(g("***x").matches("abcx"));
        assert!(g("[a-]").matches("-"));
        assert!(Glob::new("[abc").is_err());
        assert!(Glob::new(&"*".repeat(MAX_PART + 1)).is_err());
        assert!(g("*").matches("") && g("a*").matches("a") && !g("?").matches(""));
        assert!(g("*_BYTE_CNT").matches("IN_P_BYTE_CNT") && !g("*_CNT").matches("IN_CNTX"));
        assert!(g("*a*b").matches("xaxxab") && !g("*a*b").matches("xaxxa"));
        assert!(g("é?[é]").matches("éxé") && !g("?").matches("éé"));
        assert!(g("[a-c-]").matches("-") && g("[a-c]").matches("b") && !g("[!a-c]").matches("b"));
        assert!(Glob::new("[z-a]").is_err());
        // The costliest pattern let through matches in time linear in the name.
        let worst = "*Q".repeat(MAX_PART / 2 - 1) + "*";
        assert!(!g(&worst).matches(&"Q".repeat(50)));
        assert!(!g(&("*Q".repeat(MAX_PART / 2 - 1) + "X")).matches(&"Q".repeat(10_000)));
    }

    /// `Catalog::merge` looks an event up by number and name from the entry after
    /// the last one it found: right only while no table holds both twice.
    #[test]
    fn no_table_holds_a_number_and_name_twice() {
        let gens = [
            Generation::Bf1,
            Generation::Bf2,
            Generation::Bf3,
            Generation::Unknown,
        ];
        for kind in BlockKind::all() {
            for gen in gens {
                let table = builtin(kind, gen);
                for (i, d) in table.iter().enumerate() {
                    let again = table[i + 1..]
                        .iter()
                        .any(|e| e.number == d.number && e.name.trim_end() == d.name.trim_end());
                    assert!(
                        !again,
                        "{kind:?} on {gen:?}: {:#x} {} twice",
                        d.number, d.name
                    );
                }
            }
        }
    }

    /// A list in the table's order and one out of it name the same descriptions.
    #[test]
    fn merging_finds_each_listed_event_in_any_order() {
        let table = builtin(BlockKind::Llt, Generation::Bf3);
        let line = |d: &EventDef| format!("0x{:x}: {}\n", d.number, d.name.trim_end());
        let ordered: String = table.iter().map(line).collect();
        let reversed: String = table.iter().rev().map(line).collect();
        let described = |list: &str| {
            let mut v: Vec<_> = Catalog::merge(BlockKind::Llt, Generation::Bf3, list, 1 << 16)
                .events
                .into_iter()
                .map(|e| (e.number, e.name.into_owned(), e.description))
                .collect();
            v.sort();
            v
        };
        let want: Vec<_> = {
            let mut v: Vec<_> = table
                .iter()
                .map(|d| (d.number, d.name.trim_end().to_string(), d.description))
                .collect();
            v.sort();
            v
        };
        assert_eq!(described(&ordered), want);
        assert_eq!(described(&reversed), want);
    }

    #[test]
    fn parses_both_list_formats() {
        assert_eq!(
            parse_event_line("0x45: HNF_REQUESTS"),
            Some((0x45, "HNF_REQUESTS".to_string()))
        );
        assert_eq!(
            parse_event_line("45: HNF_REQUESTS  "),
            Some((0x45, "HNF_REQUESTS".to_string()))
        );
        assert_eq!(parse_event_line("No event being monitored"), None);
    }

    #[test]
    fn resolves_vendor_spellings() {
        let c = Catalog::builtin(BlockKind::Tile, Generation::Bf2);
        assert_eq!(c.resolve("HNF_REQUESTS").unwrap().number, 0x45);
        assert_eq!(c.resolve("hnf_requests").unwrap().number, 0x45);
        assert_eq!(c.resolve("A72_Read").unwrap().number, 0x72);
        assert_eq!(c.resolve("IO_Reads").unwrap().number, 0x74);
        assert_eq!(c.resolve("TSO_Reject").unwrap().number, 0x75);
        assert_eq!(c.resolve("MEMORY_RAEDS").unwrap_err(), vec!["MEMORY_READS"]);
        let p = Catalog::builtin(BlockKind::Pcie, Generation::Bf2);
        assert_eq!(
            p.resolve("PCIE_TLR_IN_P_PKT_CNT").unwrap().name,
            "IN_P_PKT_CNT"
        );
    }

    /// BF3's llt list as the driver prints it into a page of `page` bytes.
    fn llt_list(page: usize) -> String {
        padded_llt_list(page, 0)
    }

    /// The llt list as a driver cuts it at `page`, each line padded with spaces to
    /// `width` bytes (the driver's tables have names with trailing spaces).
    fn padded_llt_list(page: usize, width: usize) -> String {
        let mut list = String::new();
        for d in builtin(BlockKind::Llt, Generation::Bf3) {
            let line = format!("{:<width$}\n", format!("0x{:x}: {}", d.number, d.name));
            if list.len() + line.len() >= page {
                break;
            }
            list.push_str(&line);
        }
        list
    }

    #[test]
    fn truncated_list_is_completed_from_the_table() {
        let cut = llt_list(4096);
        let c = Catalog::merge(BlockKind::Llt, Generation::Bf3, &cut, 4096);
        assert!(c.truncated);
        assert_eq!(c.events.len(), 172);
        assert_eq!(c.events.last().unwrap().name, "HISTOGRAM_HISTOGRAM_BIN9");
        assert_eq!(c.events.last().unwrap().source, Source::Builtin);
    }

    #[test]
    fn a_larger_page_holds_the_whole_list() {
        for page in [16384, 65536] {
            let whole = Catalog::merge(BlockKind::Llt, Generation::Bf3, &llt_list(page), page);
            assert!(!whole.truncated, "{page}-byte page");
            assert_eq!(whole.events.len(), 172);
            assert!(whole.events.iter().all(|e| e.source == Source::Device));
            // What a 4 KiB page would have cut is, on this page, all the device has.
            let cut = llt_list(4096);
            let short = Catalog::merge(BlockKind::Llt, Generation::Bf3, &cut, page);
            assert!(!short.truncated, "{page}-byte page");
            assert_eq!(short.events.len(), cut.lines().count());
        }
    }

    #[test]
    fn a_list_cut_at_a_larger_page_is_still_detected() {
        // Names padded towards the driver's line length fill a 16 KiB page.
        let page = 16384;
        let cut = padded_llt_list(page, EVENT_INFO_LEN - 5);
        assert!(
            cut.len() > 4096 && cut.lines().count() < 172,
            "{}",
            cut.len()
        );
        assert!(cut.lines().all(|l| l.len() < EVENT_INFO_LEN));
        let c = Catalog::merge(BlockKind::Llt, Generation::Bf3, &cut, page);
        assert!(c.truncated);
        assert_eq!(c.events.len(), 172);
        assert_eq!(c.events.last().unwrap().source, Source::Builtin);
    }
}
