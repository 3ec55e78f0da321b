//! Output limits shared by the tools, with pi's numbers (2000 lines / 50 KiB, grep lines cut at
//! 500 characters) and pi's `truncation` details shape, so pi renders our results the same way.

use serde::Serialize;

pub const DEFAULT_MAX_LINES: usize = 2000;
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
pub const GREP_MAX_LINE_LENGTH: usize = 500;

/// Which limit cut the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TruncatedBy {
    Lines,
    Bytes,
}

/// pi's `TruncationResult` without its `content` (the text is already the result's content;
/// pi's renderers read only the counts and flags).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Truncation {
    pub truncated: bool,
    pub truncated_by: Option<TruncatedBy>,
    pub total_lines: usize,
    pub total_bytes: usize,
    pub output_lines: usize,
    pub output_bytes: usize,
    pub last_line_partial: bool,
    pub first_line_exceeds_limit: bool,
    pub max_lines: usize,
    pub max_bytes: usize,
}

impl Truncation {
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// pi's `formatSize`: `512B`, `50.0KB`, `1.5MB`.
pub fn format_size(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1}KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1}MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// `content`'s lines, and a [`Truncation`] that counts them as shown whole; `truncated` is set
/// when they are over either limit (the caller then cuts them and says how).
fn split_lines(content: &str, max_lines: usize, max_bytes: usize) -> (Vec<&str>, Truncation) {
    let lines: Vec<&str> = content.split('\n').collect();
    let (total_lines, total_bytes) = (lines.len(), content.len());
    let t = Truncation {
        truncated: total_lines > max_lines || total_bytes > max_bytes,
        truncated_by: None,
        total_lines,
        total_bytes,
        output_lines: total_lines,
        output_bytes: total_bytes,
        last_line_partial: false,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    };
    (lines, t)
}

/// Keeps the first lines of `content` that fit both limits; never a partial line. When the first
/// line alone is over the byte limit the content is empty and `first_line_exceeds_limit` is set.
pub fn truncate_head(content: &str, max_lines: usize, max_bytes: usize) -> (String, Truncation) {
    let (lines, mut t) = split_lines(content, max_lines, max_bytes);
    if !t.truncated {
        return (content.to_owned(), t);
    }
    if lines.first().map_or(0, |l| l.len()) > max_bytes {
        t.truncated_by = Some(TruncatedBy::Bytes);
        t.output_lines = 0;
        t.output_bytes = 0;
        t.first_line_exceeds_limit = true;
        return (String::new(), t);
    }
    let mut bytes = 0;
    let mut kept = 0;
    let mut by = TruncatedBy::Lines;
    for (i, line) in lines.iter().enumerate().take(max_lines) {
        let add = line.len() + usize::from(i > 0);
        if bytes + add > max_bytes {
            by = TruncatedBy::Bytes;
            break;
        }
        bytes += add;
        kept += 1;
    }
    if kept >= max_lines {
        by = TruncatedBy::Lines;
    }
    let out = lines[..kept].join("\n");
    t.truncated_by = Some(by);
    t.output_lines = kept;
    t.output_bytes = out.len();
    (out, t)
}

/// Keeps the last lines of `content` that fit both limits. When even the last line is over the
/// byte limit, its end is kept (`last_line_partial`).
pub fn truncate_tail(content: &str, max_lines: usize, max_bytes: usize) -> (String, Truncation) {
    let (lines, mut t) = split_lines(content, max_lines, max_bytes);
    if !t.truncated {
        return (content.to_owned(), t);
    }
    let mut bytes = 0;
    let mut start = lines.len();
    let mut by = TruncatedBy::Lines;
    let mut partial: Option<&str> = None;
    while start > 0 && lines.len() - start < max_lines {
        let line = lines[start - 1];
        let add = line.len() + usize::from(start < lines.len());
        if bytes + add > max_bytes {
            by = TruncatedBy::Bytes;
            if start == lines.len() {
                partial = Some(tail_of_str(line, max_bytes));
            }
            break;
        }
        bytes += add;
        start -= 1;
    }
    let out = match partial {
        Some(p) => {
            t.last_line_partial = true;
            t.output_lines = 1;
            p.to_owned()
        }
        None => {
            t.output_lines = lines.len() - start;
            lines[start..].join("\n")
        }
    };
    if t.output_lines >= max_lines && out.len() <= max_bytes {
        by = TruncatedBy::Lines;
    }
    t.truncated_by = Some(by);
    t.output_bytes = out.len();
    (out, t)
}

/// The last at most `max_bytes` bytes of `s`, starting on a character boundary.
pub(crate) fn tail_of_str(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut start = s.len() - max_bytes;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Cuts one line to `max_chars` characters with pi's `... [truncated]` suffix.
pub fn truncate_line(line: &str, max_chars: usize) -> (String, bool) {
    match line.char_indices().nth(max_chars) {
        None => (line.to_owned(), false),
        Some((cut, _)) => (format!("{}... [truncated]", &line[..cut]), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_formatted_as_pi() {
        assert_eq!(format_size(512), "512B");
        assert_eq!(format_size(50 * 1024), "50.0KB");
        assert_eq!(format_size(3 * 1024 * 1024 / 2), "1.5MB");
    }

    #[test]
    fn head_keeps_whole_lines_within_both_limits() {
        let text = (1..=10).map(|i| format!("line{i}")).collect::<Vec<_>>().join("\n");
        let (out, t) = truncate_head(&text, 3, 1000);
        assert_eq!(out, "line1\nline2\nline3");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!((t.output_lines, t.total_lines), (3, 10));
        let (out, t) = truncate_head(&text, 100, 12);
        assert_eq!(out, "line1\nline2");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        let (out, t) = truncate_head("a\nb", 10, 10);
        assert_eq!(out, "a\nb");
        assert!(!t.truncated);
    }

    #[test]
    fn head_with_an_oversized_first_line_returns_nothing() {
        let (out, t) = truncate_head(&"x".repeat(100), 10, 50);
        assert!(out.is_empty());
        assert!(t.first_line_exceeds_limit);
    }

    #[test]
    fn tail_keeps_the_end_and_a_partial_last_line() {
        let text = (1..=10).map(|i| format!("line{i}")).collect::<Vec<_>>().join("\n");
        let (out, t) = truncate_tail(&text, 2, 1000);
        assert_eq!(out, "line9\nline10");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
        let (out, t) = truncate_tail(&format!("a\n{}", "é".repeat(40)), 10, 11);
        assert!(t.last_line_partial);
        assert_eq!(out, "é".repeat(5));
    }

    #[test]
    fn long_lines_are_cut_by_characters() {
        let (s, cut) = truncate_line(&"é".repeat(600), 500);
        assert!(cut);
        assert_eq!(s.chars().count(), 500 + "... [truncated]".len());
        assert_eq!(truncate_line("short", 500), ("short".to_owned(), false));
    }
}
