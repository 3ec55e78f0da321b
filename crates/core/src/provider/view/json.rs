//! JSON writing that copies stored text: a string is kept as its JSON token ([`Str::Json`]) and
//! copied as it is when its escapes are the ones serde_json writes, re-encoded otherwise (`\u00e9`,
//! `\/`, upper-case hex), so the body's bytes are the ones a serializer would produce.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::message::ContextMessage;

/// A string of a message: its JSON token as stored (quotes included, escapes as written), or
/// plain text.
#[derive(Clone, Debug)]
pub(in crate::provider) enum Str<'a> {
    Json(&'a str),
    Plain(Cow<'a, str>),
}

impl<'a> Str<'a> {
    pub(in crate::provider) fn plain(s: &'a str) -> Self {
        Str::Plain(Cow::Borrowed(s))
    }

    /// The text, unescaped (borrowed when it has no escapes).
    pub(in crate::provider) fn text(&self) -> Cow<'_, str> {
        match self {
            Str::Plain(s) => Cow::Borrowed(s.as_ref()),
            Str::Json(token) => {
                let inner = json_inner(token);
                if !inner.contains('\\') {
                    Cow::Borrowed(inner)
                } else {
                    // The token was validated when it was read.
                    Cow::Owned(serde_json::from_str::<String>(token).unwrap_or_default())
                }
            }
        }
    }

    pub(in crate::provider) fn is_empty(&self) -> bool {
        match self {
            Str::Plain(s) => s.is_empty(),
            Str::Json(token) => token.len() <= 2,
        }
    }

    /// Whether the text is only whitespace (`str::trim` would leave nothing), read from the
    /// token where it can be: most texts answer at their first byte.
    pub(in crate::provider) fn is_blank(&self) -> bool {
        let Str::Json(token) = self else { return self.text().trim().is_empty() };
        let bytes = json_inner(token).as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b' ' => i += 1,
                b'\\' => match bytes.get(i + 1) {
                    Some(b'n' | b't' | b'r' | b'f') => i += 2,
                    // `\u…` escapes, and anything rarer: decide on the text.
                    Some(b'u') => return self.text().trim().is_empty(),
                    _ => return false,
                },
                b if b < 0x80 => return false,
                _ => return self.text().trim().is_empty(),
            }
        }
        true
    }

    pub(in crate::provider) fn eq_str(&self, other: &str) -> bool {
        self.text() == other
    }

    /// A string field of a raw value: `Some` only for a JSON string (as `extra_str` reads it).
    pub(in crate::provider) fn from_raw(raw: &'a RawValue) -> Option<Self> {
        raw.get().starts_with('"').then(|| Str::Json(raw.get()))
    }
}

/// The inside of a JSON string token, between its quotes.
fn json_inner(token: &str) -> &str {
    token.get(1..token.len().saturating_sub(1)).unwrap_or_default()
}

/// Whether the escapes of a token's inside are the ones serde_json writes: `\"`, `\\`, `\b`,
/// `\f`, `\n`, `\r`, `\t`, and `\u00xx` (lower-case) for the other control characters. (Raw
/// control characters cannot be in a valid token, and serde_json escapes nothing else.)
fn is_canonical(inner: &[u8]) -> bool {
    let mut from = 0;
    while let Some(p) = memchr::memchr(b'\\', &inner[from..]) {
        let at = from + p;
        match inner.get(at + 1) {
            Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => from = at + 2,
            Some(b'u') => {
                let Some(hex) = inner.get(at + 2..at + 6) else { return false };
                let lower_hex = hex.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
                let code = std::str::from_utf8(hex).ok().and_then(|h| u32::from_str_radix(h, 16).ok());
                let escaped_by_serde = matches!(code, Some(c) if c < 0x20 && ![0x08, 0x09, 0x0a, 0x0c, 0x0d].contains(&c));
                if !(lower_hex && escaped_by_serde) {
                    return false;
                }
                from = at + 6;
            }
            _ => return false,
        }
    }
    true
}

/// Writes JSON into a buffer. Strings of views are copied as their tokens where those are
/// what serde_json would write.
pub(in crate::provider) struct JsonOut {
    pub(in crate::provider) buf: Vec<u8>,
}

impl JsonOut {
    pub(in crate::provider) fn with_capacity(n: usize) -> Self {
        Self { buf: Vec::with_capacity(n) }
    }

    pub(in crate::provider) fn raw(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Any serializable value, as serde_json writes it.
    pub(in crate::provider) fn value(&mut self, value: &impl Serialize) {
        // Writing into a Vec fails only for a map with non-string keys: none here.
        if let Err(e) = serde_json::to_writer(&mut self.buf, value) {
            tracing::error!(error = %e, "cannot serialize a request field");
            self.buf.extend_from_slice(b"null");
        }
    }

    /// `"key":` (keys are plain names).
    pub(in crate::provider) fn key(&mut self, key: &str) {
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    /// A string of a view, with its quotes.
    pub(in crate::provider) fn str(&mut self, s: &Str<'_>) {
        self.buf.push(b'"');
        self.str_contents(s);
        self.buf.push(b'"');
    }

    /// Plain text, with its quotes.
    pub(in crate::provider) fn text(&mut self, s: &str) {
        self.str(&Str::plain(s));
    }

    /// The escaped inside of a string, without quotes: pieces written one after another make
    /// one string (escaping is per character).
    pub(in crate::provider) fn str_contents(&mut self, s: &Str<'_>) {
        match s {
            Str::Json(token) => {
                let inner = json_inner(token);
                if is_canonical(inner.as_bytes()) {
                    self.buf.extend_from_slice(inner.as_bytes());
                } else {
                    self.plain_contents(&s.text());
                }
            }
            Str::Plain(text) => self.plain_contents(text),
        }
    }

    fn plain_contents(&mut self, text: &str) {
        let start = self.buf.len();
        self.value(&text);
        // Drop the quotes serde_json put around it.
        self.buf.pop();
        self.buf.remove(start);
    }

    /// The pieces joined with `sep` as one string, with its quotes.
    pub(in crate::provider) fn joined(&mut self, pieces: &[&Str<'_>], sep: &str) {
        self.buf.push(b'"');
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                self.plain_contents(sep);
            }
            self.str_contents(piece);
        }
        self.buf.push(b'"');
    }

    pub(in crate::provider) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// A JSON array being written: commas between its items.
pub(in crate::provider) struct List<'o> {
    out: &'o mut JsonOut,
    empty: bool,
}

impl<'o> List<'o> {
    pub(in crate::provider) fn new(out: &'o mut JsonOut) -> Self {
        out.raw("[");
        Self { out, empty: true }
    }

    /// Where the next item goes.
    pub(in crate::provider) fn item(&mut self) -> &mut JsonOut {
        if !self.empty {
            self.out.raw(",");
        }
        self.empty = false;
        self.out
    }

    pub(in crate::provider) fn end(self) {
        self.out.raw("]");
    }
}

/// Room for a body: the stored messages' text and a little more, so that it is not copied as
/// it grows.
pub(in crate::provider) fn body_capacity(messages: &[ContextMessage], system: Option<&str>) -> usize {
    let stored: usize = messages
        .iter()
        .map(|m| match m {
            ContextMessage::Stored(s) => s.json().len(),
            ContextMessage::Made(_) => 256,
        })
        .sum();
    stored + system.map_or(0, str::len) + 16 * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(token: &str) -> String {
        let mut out = JsonOut::with_capacity(16);
        out.str(&Str::Json(token));
        String::from_utf8(out.into_bytes()).unwrap()
    }

    #[test]
    fn tokens_are_copied_when_serde_would_write_them_so_and_rewritten_otherwise() {
        for token in [r#""plain""#, r#""a\"b\\c\n\t\r\b\f""#, r#""\u0001\u001f""#, r#""é😀 ""#, r#""""#] {
            assert_eq!(written(token), token, "canonical: copied");
        }
        for (token, canonical) in [
            (r#""caf\u00e9""#, "\"café\""),
            (r#""a\/b""#, "\"a/b\""),
            (r#""\u001F""#, r#""\u001f""#),
            (r#""\u000a""#, r#""\n""#),
            (r#""\u0041""#, "\"A\""),
        ] {
            assert_eq!(written(token), canonical, "{token}");
            let serde: String = serde_json::from_str(token).unwrap();
            assert_eq!(canonical, serde_json::to_string(&serde).unwrap(), "what serde_json writes");
        }
    }

    #[test]
    fn blank_is_read_from_the_token() {
        for (token, blank) in [
            (r#""""#, true),
            (r#""  \n\t\r ""#, true),
            (r#""\u00a0 \u2028""#, true),
            (r#"" x""#, false),
            (r#""\"""#, false),
            (r#""\u0041""#, false),
            ("\"\u{3000}\"", true),
            ("\"\u{3000}y\"", false),
        ] {
            assert_eq!(Str::Json(token).is_blank(), blank, "{token}");
            let text: String = serde_json::from_str(token).unwrap();
            assert_eq!(text.trim().is_empty(), blank, "{token}: as str::trim has it");
        }
    }

    #[test]
    fn joined_pieces_make_one_string() {
        let mut out = JsonOut::with_capacity(16);
        let (a, b) = (Str::Json(r#""one\u00e9""#), Str::plain("two \"q\""));
        out.joined(&[&a, &b], "\n");
        assert_eq!(String::from_utf8(out.into_bytes()).unwrap(), r#""oneé\ntwo \"q\"""#);
    }

}
