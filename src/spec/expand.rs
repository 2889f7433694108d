//! The `-e` text split into its specs, as perf's grammar splits it: comma lists
//! outside a spec's slashes, `{...}` groups numbered in order.

use super::*;

/// Splits perf's event list into specs: `-e 'tile/A/,tile/B/'` is two specs,
/// `{tile/A,B/}` or `{tile/A/,tile/B/}` a group (counted together, in one turn),
/// `HNF_REQUESTS,MEMORY_READS` two bare names, and `KIND/event=0x4c/` the event
/// numbered 0x4c. A comma inside `BLOCKS/.../` belongs to the spec. A malformed spec
/// is reported whole; unbalanced or nested braces are refused.
pub(crate) fn expand(text: &str) -> Result<Vec<Term>> {
    let text = text.trim();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut slashes = 0;
    let mut group: Option<usize> = None;
    let mut groups = 0;
    let chars: Vec<char> = text.chars().collect();
    let mut skip = 0;
    for (i, &c) in chars.iter().enumerate() {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        match c {
            '{' if slashes == 0 && cur.trim().trim_start_matches(',').trim().is_empty() => {
                if group.is_some() {
                    return Err(bad(
                        text,
                        "groups do not nest: close the first '}' before opening another '{'",
                    ));
                }
                group = Some(groups);
                groups += 1;
            }
            '}' if slashes == 0 => {
                if group.is_none() {
                    return Err(bad(text, UNOPENED));
                }
                push_spec(&mut out, &mut cur, group);
                if !matches!(chars.get(i + 1), None | Some(',')) {
                    return Err(bad(text, "a group's '}' is followed by a comma or nothing (modifiers such as :u do not apply to DPU counters)"));
                }
                group = None;
            }
            '/' => {
                slashes += 1;
                cur.push(c);
                if slashes == 2 {
                    // perf's modifiers of a PMU's event (`PMU/EVENT/u`, `/:k`) stay
                    // with it.
                    let rest: String = chars[i + 1..].iter().take_while(|c| **c != ',').collect();
                    if perf_terms::Levels::parse(rest.trim_start_matches(':')).is_some() {
                        cur.push_str(&rest);
                        skip = rest.chars().count();
                    }
                    // A closed spec is followed by a comma, a group's end or nothing;
                    // anything else is one malformed spec, reported whole.
                    match chars.get(i + 1 + skip) {
                        None | Some(',') => {}
                        Some('}') if group.is_some() => {}
                        Some('}') => return Err(bad(text, UNOPENED)),
                        _ => {
                            return Ok(vec![Term {
                                spec: text.to_string(),
                                group: None,
                            }])
                        }
                    }
                    push_spec(&mut out, &mut cur, group);
                    slashes = 0;
                }
            }
            // Between specs, or between bare event names (upper case, as the driver
            // names them); before a '/', a comma separates blocks (`tile0,tile1/A/`).
            ',' if slashes == 0 && !names_blocks(&cur) => push_spec(&mut out, &mut cur, group),
            _ => cur.push(c),
        }
    }
    if group.is_some() {
        return Err(bad(text, "a '{' is never closed: a group is {KIND/A,B/}"));
    }
    push_spec(&mut out, &mut cur, None);
    Ok(out)
}

/// Whether the text before a comma is a block selector (the driver's block names and
/// kinds are lower case) rather than a bare event name or a perf event.
pub(super) fn names_blocks(cur: &str) -> bool {
    let last = cur.rsplit(',').next().unwrap_or("").trim();
    // perf's generic and raw events (`cycles:u,r11`) are lower case too.
    !perf_terms::is_plain_event(last) && last.chars().any(|c| c.is_ascii_lowercase())
}

pub(super) fn push_spec(out: &mut Vec<Term>, cur: &mut String, group: Option<usize>) {
    let t = cur.trim().trim_start_matches(',').trim();
    if !t.is_empty() {
        // `event=0x4c` is perf's term for an event by number.
        out.push(Term {
            spec: t.replace("event=", ""),
            group,
        });
    }
    cur.clear();
}
