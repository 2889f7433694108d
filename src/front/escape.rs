//! Text from devices, members and peers made safe for a terminal or a log line:
//! what a reader would act on rather than show is escaped.

use std::borrow::Cow;

/// True for characters a terminal or a log reader would act on rather than show:
/// C0 and C1 controls, DEL, the bidirectional overrides and isolates that reorder
/// a line, and the line and paragraph separators that break one.
pub(crate) fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// `s` as a JSON string (also logfmt's quoted value): every character
/// [`unsafe_char`] names escaped as `\uXXXX`, which JSON alone leaves raw above
/// U+001F.
pub(crate) fn json_quoted(s: &str) -> String {
    let quoted = serde_json::Value::from(s).to_string();
    if !quoted.chars().any(unsafe_char) {
        return quoted;
    }
    let mut out = String::with_capacity(quoted.len() + 12);
    for c in quoted.chars() {
        match unsafe_char(c) {
            true => out.push_str(&format!("\\u{:04x}", c as u32)),
            false => out.push(c),
        }
    }
    out
}

/// Shows control characters as `\x1b` (or `\u{202e}`), so that a device string can
/// never drive the terminal.
pub(crate) fn escape(s: &str) -> Cow<'_, str> {
    // Printable ASCII (every name the driver's tables have) needs no look at its
    // characters one by one.
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) || !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !unsafe_char(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_strings_escape_what_text_escapes() {
        let hostile = "a\u{202e}b\u{2066}c\u{2028}d\u{2029}e\u{85}f\nx";
        let q = json_quoted(hostile);
        assert_eq!(q, r#""a\u202eb\u2066c\u2028d\u2029e\u0085f\nx""#);
        let back: String = serde_json::from_str(&q).unwrap();
        assert_eq!(back, hostile);
        assert!(escape("\u{2028}").contains("\\u{2028}"));
    }

    #[test]
    fn escapes_controls() {
        assert_eq!(escape("HNF_REQUESTS"), "HNF_REQUESTS");
        assert_eq!(escape("A\x1b[31mB"), "A\\x1b[31mB");
        assert_eq!(escape("x\u{202e}y\u{9b}"), "x\\u{202e}y\\x9b");
        assert_eq!(escape("a\nb"), "a\\x0ab");
    }
}
