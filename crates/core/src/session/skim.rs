//! Reading an entry's head off its line without parsing the rest: the four fields every entry
//! has (`type`, `id`, `parentId`, `timestamp`) and where its `message` is. The rest of the line
//! is only skimmed: its strings are skipped to their closing quote (`memchr`, many bytes at a
//! time), its objects and arrays to their closing bracket. That is enough to find a line torn
//! by an interrupted write (a string or a bracket left open) and the message's extent; what a
//! value says is read once, where it is used (the request's message views, a typed view).
//!
//! Only the common shape is skimmed: an object whose head fields are plain strings (no escapes)
//! or `null`, each at most once. Anything else (escapes in a head field, a head field that is
//! no string, a repeated key, something that is no object) is `None`: the caller parses the
//! line with serde, which decides.

use std::ops::Range;

/// What the skim read: the head fields' text and the message value's byte range (`None`: no
/// `message` key, or `null`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Skimmed<'a> {
    pub kind: &'a str,
    pub id: Option<&'a str>,
    pub parent_id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub message: Option<Range<usize>>,
}

/// Skims `line` (see the module); `None` when it is not of the common shape or not balanced.
pub(super) fn skim(line: &str) -> Option<Skimmed<'_>> {
    let b = line.as_bytes();
    let mut at = ws(b, 0);
    if b.get(at) != Some(&b'{') {
        return None;
    }
    at = ws(b, at + 1);
    let mut kind: Option<&str> = None;
    let mut out = Skimmed::default();
    let mut seen = [false; 5];
    if b.get(at) == Some(&b'}') {
        return None; // no `type`
    }
    loop {
        // A key.
        if b.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, at + 1)?;
        let key = &line[at + 1..key_end];
        at = ws(b, key_end + 1);
        if b.get(at) != Some(&b':') {
            return None;
        }
        at = ws(b, at + 1);
        let slot = ["type", "id", "parentId", "timestamp", "message"].iter().position(|k| *k == key);
        if let Some(slot) = slot {
            if std::mem::replace(&mut seen[slot], true) {
                return None;
            }
        }
        let value_start = at;
        at = value_end(b, at)?;
        let value = &line[value_start..at];
        match slot {
            Some(0) => kind = Some(plain_string(value)?),
            Some(1) => out.id = nullable_string(value)?,
            Some(2) => out.parent_id = nullable_string(value)?,
            Some(3) => out.timestamp = nullable_string(value)?,
            Some(_) => out.message = (value != "null").then_some(value_start..at),
            None => {}
        }
        at = ws(b, at);
        match b.get(at) {
            Some(b',') => at = ws(b, at + 1),
            Some(b'}') => {
                let kind = kind?;
                // Only whitespace may follow the object.
                return (ws(b, at + 1) == b.len()).then_some(Skimmed { kind, ..out });
            }
            _ => return None,
        }
    }
}

/// The first byte at or after `at` that is not JSON whitespace.
fn ws(b: &[u8], mut at: usize) -> usize {
    while matches!(b.get(at), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        at += 1;
    }
    at
}

/// The index of the quote that closes the string whose contents start at `at`.
fn string_end(b: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let found = at + memchr::memchr2(b'"', b'\\', b.get(at..)?)?;
        if b[found] == b'"' {
            return Some(found);
        }
        // An escape: the next byte is escaped (a `\uXXXX`'s digits need no care).
        at = found + 2;
    }
}

/// The end (exclusive) of the value that starts at `at`.
fn value_end(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at)? {
        b'"' => Some(string_end(b, at + 1)? + 1),
        b'{' | b'[' => container_end(b, at),
        // A number or a literal: up to the next delimiter.
        _ => {
            let len = b[at..].iter().position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n')).unwrap_or(b.len() - at);
            (len > 0).then_some(at + len)
        }
    }
}

/// The end (exclusive) of the object or array that opens at `at`: its closing bracket, strings
/// skipped whole.
fn container_end(b: &[u8], mut at: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        match b.get(at)? {
            b'"' => at = string_end(b, at + 1)? + 1,
            b'{' | b'[' => {
                depth += 1;
                at += 1;
            }
            b'}' | b']' => {
                depth -= 1;
                at += 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            _ => {
                // Up to the next string or bracket.
                at += b[at..].iter().position(|c| matches!(c, b'"' | b'{' | b'[' | b'}' | b']'))?;
            }
        }
    }
}

/// A string value without escapes, its contents.
fn plain_string(value: &str) -> Option<&str> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// `null`, or a string value without escapes.
fn nullable_string(value: &str) -> Option<Option<&str>> {
    if value == "null" {
        return Some(None);
    }
    plain_string(value).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_as_pi_writes_it_is_skimmed_to_its_head_and_message() {
        let line = r#"{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"a } ] \" { [ \\"}]}}"#;
        let s = skim(line).unwrap();
        assert_eq!((s.kind, s.id, s.parent_id, s.timestamp), ("message", Some("a1"), None, Some("t")));
        assert_eq!(&line[s.message.unwrap()], &line[line.find("{\"role").unwrap()..line.len() - 1]);
        // Other keys, in any order, with whitespace; a message that is not last.
        let line = r#" { "x" : [1, {"y": "}"}], "message": null, "type": "custom", "id": "b", "n": -1.5e3, "ok": true } "#;
        let s = skim(line).unwrap();
        assert_eq!((s.kind, s.id, s.message), ("custom", Some("b"), None));
        let line = r#"{"type":"message","message":{"role":"user"},"id":"c","more":1}"#;
        assert_eq!(&line[skim(line).unwrap().message.unwrap()], r#"{"role":"user"}"#);
    }

    #[test]
    fn strings_end_where_serde_says_whatever_their_length_and_escapes() {
        for len in 0..140usize {
            for escape_at in [None, Some(0), Some(len / 2), Some(len.saturating_sub(1))] {
                let mut text: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
                if let Some(at) = escape_at.filter(|&at| at < len) {
                    text.replace_range(at..=at, "\\\"");
                }
                let line = format!(r#"{{"type":"t","id":"x","message":{{"text":"{text}","é":"ü"}}}}"#);
                let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
                let s = skim(&line).unwrap();
                let message: serde_json::Value = serde_json::from_str(&line[s.message.unwrap()]).unwrap();
                assert_eq!(message, parsed["message"], "{line}");
            }
        }
    }

    #[test]
    fn torn_or_unusual_lines_are_left_to_serde() {
        let whole = r#"{"type":"message","id":"a1","parentId":"p","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}"#;
        assert!(skim(whole).is_some());
        // Every cut of the line is refused (a torn write leaves a string or a bracket open).
        for cut in 1..whole.len() {
            assert!(skim(&whole[..cut]).is_none(), "{}", &whole[..cut]);
        }
        for line in [
            r#"{"type":"m\u0061ssage","id":"a"}"#,
            r#"{"type":"message","id":1}"#,
            r#"{"type":"message","id":"a","id":"b"}"#,
            r#"{"id":"a"}"#,
            r#"["type"]"#,
            r#"{"type":"x"} trailing"#,
            "not json",
            "",
        ] {
            assert!(skim(line).is_none(), "{line}");
        }
    }
}
