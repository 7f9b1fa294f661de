//! Reading JSON the way Jackson writes it, where that differs from strict JSON.
//!
//! Java strings are UTF-16 and may hold an unpaired surrogate (an emoji cut in
//! half by a substring); Jackson writes one as the escape `\ud83d`. serde_json
//! refuses such text, and has no lossy mode: serde-rs/json#827 asked for one
//! and was closed in favour of deserialising into bytes (#828), which turns one
//! lone surrogate into three bytes that later decode as three U+FFFD, and would
//! need a byte-string type in every field. `serde_json_lenient` (Google's fork)
//! can replace them, but it is a second JSON parser tracking nightly rustc for
//! one escape. So [`replace_lone_surrogates`] rewrites just those escapes, in
//! place, to `\ufffd` before serde_json reads the text: the same bytes count,
//! everything else untouched, and it runs only after a strict parse failed.

use std::borrow::Cow;

/// The escape every unpaired surrogate becomes: U+FFFD REPLACEMENT CHARACTER,
/// as many decoders (and `String::from_utf16_lossy`) render one.
const REPLACEMENT_ESCAPE: &[u8; 6] = b"\\ufffd";

/// `text` with every `\uXXXX` escape of an unpaired UTF-16 surrogate replaced
/// by `\ufffd`; borrowed when there is none.
///
/// Escapes are read in order, so an escaped backslash (`\\ud83d`, the six
/// characters `\ud83d` as text) is never taken for a surrogate. A high
/// surrogate followed by a low one is a valid pair and kept as written.
/// Nothing else is checked: serde_json still judges the result.
pub fn replace_lone_surrogates(text: &[u8]) -> Cow<'_, [u8]> {
    let mut replaced: Option<Vec<u8>> = None;
    let mut position = 0;
    while position < text.len() {
        if text[position] != b'\\' {
            position += 1;
            continue;
        }
        let Some(unit) = unicode_escape_at(text, position) else {
            // `\"`, `\\`, `\n` and the like: skip the escaped character whole.
            position += 2;
            continue;
        };
        match unit {
            0xD800..=0xDBFF if matches!(unicode_escape_at(text, position + 6), Some(0xDC00..=0xDFFF)) => {
                position += 12;
            }
            0xD800..=0xDFFF => {
                let copy = replaced.get_or_insert_with(|| text.to_vec());
                copy[position..position + 6].copy_from_slice(REPLACEMENT_ESCAPE);
                position += 6;
            }
            _ => position += 6,
        }
    }
    match replaced {
        Some(copy) => Cow::Owned(copy),
        None => Cow::Borrowed(text),
    }
}

/// The UTF-16 code unit of the `\uXXXX` escape starting at `position`, if one does.
fn unicode_escape_at(text: &[u8], position: usize) -> Option<u16> {
    let escape = text.get(position..position + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    if !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes UTF-16 text as a JSON string the way Jackson does: `"` and `\`
    /// escaped, control characters as `\u00XX`, unpaired surrogates as
    /// `\uXXXX`, everything else as UTF-8.
    pub(crate) fn jackson_string(units: &[u16]) -> String {
        let mut out = String::from("\"");
        for decoded in char::decode_utf16(units.iter().copied()) {
            match decoded {
                Ok('"') => out.push_str("\\\""),
                Ok('\\') => out.push_str("\\\\"),
                Ok(control) if (control as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", control as u32)),
                Ok(character) => out.push(character),
                Err(lone) => out.push_str(&format!("\\u{:04X}", lone.unpaired_surrogate())),
            }
        }
        out.push('"');
        out
    }

    fn replaced(text: &str) -> String {
        String::from_utf8(replace_lone_surrogates(text.as_bytes()).into_owned()).expect("utf-8 in, utf-8 out")
    }

    #[test]
    fn replaces_lone_high_and_low_surrogates_in_any_case() {
        assert_eq!(replaced(r#"{"content":"cut \ud83d"}"#), r#"{"content":"cut \ufffd"}"#);
        assert_eq!(replaced(r#"["\uDE00x","\uD83Dy"]"#), r#"["\ufffdx","\ufffdy"]"#);
        assert_eq!(replaced(r#""\ud83d\ud83d\ude00""#), r#""\ufffd\ud83d\ude00""#);
        assert_eq!(replaced(r#""\ud83d\n""#), r#""\ufffd\n""#);
    }

    #[test]
    fn leaves_pairs_escaped_backslashes_and_ordinary_escapes_alone() {
        for untouched in [
            r#""\ud83d\ude00""#,
            r#""\\ud83d""#,
            r#""\\\\ud83d""#,
            r#""\u00e9\"\\\/\b\f\n\r\t""#,
            r#""\ud8""#,
            r#""\uzzzz\ud8"#,
            "no escapes at all 좋아요",
        ] {
            assert!(matches!(replace_lone_surrogates(untouched.as_bytes()), Cow::Borrowed(_)), "{untouched}");
        }
        assert_eq!(replaced(r#""\\\ud83d""#), r#""\\\ufffd""#);
    }

    proptest::proptest! {
        #[test]
        fn jackson_text_reads_as_utf16_lossy_decoding(units in proptest::collection::vec(proptest::num::u16::ANY, 0..48)) {
            let json = jackson_string(&units);
            let repaired = replace_lone_surrogates(json.as_bytes());
            let decoded: String = serde_json::from_slice(&repaired).expect("repaired Jackson text parses");
            proptest::prop_assert_eq!(decoded, String::from_utf16_lossy(&units));
        }

        #[test]
        fn never_panics_and_keeps_the_length(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..128)) {
            proptest::prop_assert_eq!(replace_lone_surrogates(&bytes).len(), bytes.len());
        }
    }
}
