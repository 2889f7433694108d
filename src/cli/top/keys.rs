//! The keys top understands, decoded from the bytes a terminal in raw mode sends.
//!
//! top reads its terminal itself rather than through crossterm's event reader: that
//! reader retries a hung-up terminal's `read` forever (end of file and EIO alike), deaf
//! to signals and to its own timeout, so a top whose terminal vanished would never end
//! and never put the device back.

/// One key press.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Char(char),
    Enter,
    Esc,
    Backspace,
    Tab,
    BackTab,
    Left,
    Right,
    /// Ctrl-C (raw mode turns it into a byte, not a signal).
    Interrupt,
    /// A key top has no use for (other control keys, function keys, Alt+key).
    Other,
}

/// Decodes `bytes` (after what `carry` kept of the last read) into keys. An incomplete
/// UTF-8 character at the end is kept in `carry` for the next read; an escape at the end
/// is the Esc key, as terminals send sequences in one write.
pub(super) fn decode(bytes: &[u8], carry: &mut Vec<u8>) -> Vec<Key> {
    let mut input = std::mem::take(carry);
    input.extend_from_slice(bytes);
    let mut keys = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let (key, used) = match input[i] {
            0x1b => escape(&input[i + 1..]),
            b => match control(b) {
                Some(key) => (key, 1),
                None => match character(&input[i..]) {
                    Some(found) => found,
                    None => {
                        carry.extend_from_slice(&input[i..]);
                        break;
                    }
                },
            },
        };
        keys.push(key);
        i += used;
    }
    keys
}

/// The key of a control byte, or None for a byte that starts a character.
fn control(b: u8) -> Option<Key> {
    Some(match b {
        0x03 => Key::Interrupt,
        b'\t' => Key::Tab,
        b'\r' | b'\n' => Key::Enter,
        0x7f | 0x08 => Key::Backspace,
        0x00..=0x1f => Key::Other,
        _ => return None,
    })
}

/// The key that starts with an escape byte, and how many bytes it took (the escape
/// included), from what follows the escape.
fn escape(rest: &[u8]) -> (Key, usize) {
    match rest {
        [] => (Key::Esc, 1),
        // CSI: parameters and intermediates, then one final byte.
        [b'[', seq @ ..] => match seq.iter().position(|b| (0x40..=0x7e).contains(b)) {
            Some(end) => {
                let key = match (&seq[..end], seq[end]) {
                    (b"", b'C') | (b"1", b'C') => Key::Right,
                    (b"", b'D') | (b"1", b'D') => Key::Left,
                    (b"", b'Z') => Key::BackTab,
                    _ => Key::Other,
                };
                (key, end + 3)
            }
            None => (Key::Other, rest.len() + 1),
        },
        // SS3 (cursor keys in application mode).
        [b'O', b'C', ..] => (Key::Right, 3),
        [b'O', b'D', ..] => (Key::Left, 3),
        [b'O', _, ..] => (Key::Other, 3),
        [0x1b, ..] => (Key::Esc, 1),
        // Alt+key: the escape and the key's first byte.
        [_, ..] => (Key::Other, 2),
    }
}

/// The character at the start of `bytes` and its length; None when it is cut off at
/// the end; a byte that cannot start one is Other.
fn character(bytes: &[u8]) -> Option<(Key, usize)> {
    let len = match bytes[0] {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return Some((Key::Other, 1)),
    };
    if bytes.len() < len {
        return None;
    }
    Some(match std::str::from_utf8(&bytes[..len]) {
        Ok(s) => (s.chars().next().map_or(Key::Other, Key::Char), len),
        Err(_) => (Key::Other, 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(bytes: &[u8]) -> Vec<Key> {
        decode(bytes, &mut Vec::new())
    }

    #[test]
    fn keys_from_what_terminals_send() {
        assert_eq!(keys(b"q"), [Key::Char('q')]);
        assert_eq!(keys(b"/tile\r"), {
            let mut k: Vec<Key> = "/tile".chars().map(Key::Char).collect();
            k.push(Key::Enter);
            k
        });
        assert_eq!(keys(b"\x1b"), [Key::Esc]);
        assert_eq!(keys(b"\x1b[C\x1b[D\x1bOC\x1b[Z\t"), {
            [Key::Right, Key::Left, Key::Right, Key::BackTab, Key::Tab]
        });
        assert_eq!(
            keys(b"\x1b[1;5C\x1b[15~x"),
            [Key::Other, Key::Other, Key::Char('x')]
        );
        assert_eq!(
            keys(b"\x03\x7f\x1bq"),
            [Key::Interrupt, Key::Backspace, Key::Other]
        );
        assert_eq!(keys(b"\x1b\x1b[D"), [Key::Esc, Key::Left]);
        assert_eq!(keys(b"\xff-"), [Key::Other, Key::Char('-')]);
    }

    #[test]
    fn a_character_cut_between_reads_is_kept_for_the_next() {
        let mut carry = Vec::new();
        let euro = "€".as_bytes();
        assert_eq!(
            decode(&[b'a', euro[0], euro[1]], &mut carry),
            [Key::Char('a')]
        );
        assert_eq!(decode(&euro[2..], &mut carry), [Key::Char('€')]);
        assert!(carry.is_empty());
    }
}
