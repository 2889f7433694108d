//! The kernel's number parsing, as the driver's store functions see it.

use crate::error::errno;

/// `kstrtouint`: an optional `+`, then digits in `base` (0: `0x` hex, leading `0`
/// octal, else decimal; 16 also accepts a `0x` prefix), then at most one newline.
/// Errors are errno values (EINVAL, ERANGE).
pub fn kstrtouint(buf: &str, base: u32) -> Result<u32, i32> {
    let s = buf.strip_suffix('\n').unwrap_or(buf);
    let s = s.strip_prefix('+').unwrap_or(s);
    let lower = s.to_ascii_lowercase();
    let (digits, radix) = match base {
        0 if lower.starts_with("0x") => (&s[2..], 16),
        0 if s.starts_with('0') && s.len() > 1 => (&s[1..], 8),
        0 => (s, 10),
        16 if lower.starts_with("0x") => (&s[2..], 16),
        r => (s, r),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(errno::EINVAL);
    }
    u32::from_str_radix(digits, radix).map_err(|_| errno::ERANGE)
}

/// `kstrtoint`: a `-` then what [`kstrtouint`] takes, or what it takes; the value must
/// fit an `int`.
pub(super) fn kstrtoint(buf: &str, base: u32) -> Result<i32, i32> {
    match buf.strip_prefix('-') {
        Some(rest) if !rest.starts_with('+') => {
            let n = kstrtouint(rest, base)?;
            0i32.checked_sub_unsigned(n).ok_or(errno::ERANGE)
        }
        _ => i32::try_from(kstrtouint(buf, base)?).map_err(|_| errno::ERANGE),
    }
}

/// `kstrtobool`: the first character decides (`1yYtT` true, `0nNfF` false; `on`/`off`);
/// anything else is EINVAL. So "0x1" is false and "2" is refused.
pub fn kstrtobool(buf: &str) -> Result<bool, i32> {
    let b = buf.as_bytes();
    match b.first() {
        Some(b'1' | b'y' | b'Y' | b't' | b'T') => Ok(true),
        Some(b'0' | b'n' | b'N' | b'f' | b'F') => Ok(false),
        Some(b'o' | b'O') => match b.get(1) {
            Some(b'n' | b'N') => Ok(true),
            Some(b'f' | b'F') => Ok(false),
            _ => Err(errno::EINVAL),
        },
        _ => Err(errno::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_the_kernel() {
        assert_eq!(kstrtouint("0x45", 0), Ok(0x45));
        assert_eq!(kstrtouint("69\n", 0), Ok(69));
        assert_eq!(kstrtouint("0105", 0), Ok(0x45));
        assert_eq!(kstrtouint("45", 16), Ok(0x45));
        assert_eq!(kstrtouint("0x45", 16), Ok(0x45));
        assert_eq!(kstrtouint("45\n\n", 0), Err(errno::EINVAL));
        assert_eq!(kstrtouint("-1", 0), Err(errno::EINVAL));
        assert_eq!(kstrtouint("99999999999", 0), Err(errno::ERANGE));
        assert_eq!(kstrtouint("", 0), Err(errno::EINVAL));
        assert_eq!(kstrtoint("-1\n", 0), Ok(-1));
        assert_eq!(kstrtoint("-0x10", 0), Ok(-16));
        assert_eq!(kstrtoint("-+1", 0), Err(errno::EINVAL));
        assert_eq!(kstrtoint("0x80000000", 0), Err(errno::ERANGE));
        assert_eq!(kstrtoint("-0x80000000", 0), Ok(i32::MIN));
        assert_eq!(kstrtobool("1\n"), Ok(true));
        assert_eq!(kstrtobool("0x1"), Ok(false));
        assert_eq!(kstrtobool("on"), Ok(true));
        assert_eq!(kstrtobool("2"), Err(errno::EINVAL));
    }
}
