//! Reading a session file's bytes into a header and entries. Damaged lines (torn, not JSON, not
//! UTF-8) are skipped with a warning rather than failing the load; only a file without a valid
//! header is an error. Lines are not parsed into messages here: an entry keeps its line's text.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::core::session::entry::{EntryHead, SessionEntry, SessionHeader};
use crate::core::session::{map_in_parallel, SessionError};

/// The result of parsing a session file's bytes.
pub(super) struct Parsed {
    pub(super) header: SessionHeader,
    pub(super) preamble: Vec<Value>,
    pub(super) entries: Vec<SessionEntry>,
    pub(super) warnings: Vec<String>,
    pub(super) ends_with_newline: bool,
}

/// Why a line is not an entry.
enum LineError {
    Utf8(std::str::Utf8Error),
    Json(serde_json::Error),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Utf8(e) => e.fmt(f),
            Self::Json(e) => e.fmt(f),
        }
    }
}

/// A session file's text: shared by all its entries when the file is valid UTF-8 (always, unless
/// damaged), else read line by line.
enum FileText {
    Shared(Arc<String>),
    Damaged(Vec<u8>),
}

/// A line read, not yet an entry: `own_text` when the file's text cannot be shared.
struct ReadLine {
    head: EntryHead,
    own_text: Option<Arc<String>>,
    range: Range<usize>,
}

impl FileText {
    fn new(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(text) => Self::Shared(Arc::new(text)),
            Err(e) => Self::Damaged(e.into_bytes()),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Self::Shared(text) => text.as_bytes(),
            Self::Damaged(bytes) => bytes,
        }
    }

    fn read_line(&self, range: Range<usize>) -> Result<ReadLine, LineError> {
        match self {
            Self::Shared(text) => {
                // Ranges end at newlines, so on character boundaries.
                let head = EntryHead::read(&text[range.clone()]).map_err(LineError::Json)?;
                Ok(ReadLine { head, own_text: None, range })
            }
            Self::Damaged(bytes) => {
                let line = std::str::from_utf8(&bytes[range]).map_err(LineError::Utf8)?;
                let head = EntryHead::read(line).map_err(LineError::Json)?;
                Ok(ReadLine { head, own_text: Some(Arc::new(line.to_string())), range: 0..line.len() })
            }
        }
    }

    fn entry(&self, line: ReadLine) -> SessionEntry {
        let text = match (line.own_text, self) {
            (Some(own), _) => own,
            (None, Self::Shared(text)) => text.clone(),
            // Not reached: lines of a damaged file are read with a text of their own.
            (None, Self::Damaged(_)) => Arc::default(),
        };
        SessionEntry::with_head(line.head, text, line.range)
    }
}

/// Below this many bytes a file is parsed on one thread. Reading lines is bound by memory more
/// than by the CPU: a second thread only paid off from ~5 MB on (measured, see
/// doc/benchmarks.md).
const PARALLEL_PARSE_MIN_BYTES: usize = 8 << 20;

pub(super) fn parse_file(path: &Path, bytes: Vec<u8>) -> Result<Parsed, SessionError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(SessionError::Empty { path: path.to_path_buf() });
    }
    let ends_with_newline = bytes.ends_with(b"\n");
    // (line number, byte range) of the lines that are not blank.
    let mut lines: Vec<(usize, Range<usize>)> = Vec::new();
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', &bytes).chain((!ends_with_newline).then_some(bytes.len()));
    for (i, end) in ends.enumerate() {
        if !bytes[start..end].iter().all(u8::is_ascii_whitespace) {
            lines.push((i + 1, start..end));
        }
        start = end + 1;
    }
    let last_line = lines.last().map(|(n, _)| *n);
    let text = FileText::new(bytes);
    // Loading a session is mostly JSON scanning: a large file's lines are parsed on all cores.
    let parsed: Box<dyn Iterator<Item = Result<ReadLine, LineError>> + '_> =
        if text.bytes().len() >= PARALLEL_PARSE_MIN_BYTES {
            Box::new(map_in_parallel(lines.clone(), true, |(_, range)| text.read_line(range)).into_iter())
        } else {
            // One at a time, straight into the entries: no array of parsed lines to fill first.
            Box::new(lines.iter().map(|(_, range)| text.read_line(range.clone())))
        };
    let mut header: Option<SessionHeader> = None;
    let mut preamble = Vec::new();
    let mut entries: Vec<SessionEntry> = Vec::with_capacity(lines.len());
    let mut warnings = Vec::new();
    for ((line_no, range), result) in lines.iter().zip(parsed) {
        let (line_no, raw) = (*line_no, &text.bytes()[range.clone()]);
        let torn = Some(line_no) == last_line && !ends_with_newline;
        let skipped = |e: &dyn std::fmt::Display| {
            if torn {
                format!(
                    "{}: the last line ({} bytes) is incomplete (the writer was interrupted); it was skipped",
                    path.display(),
                    raw.len()
                )
            } else {
                format!("{}: line {line_no} is not a valid entry ({e}); it was skipped", path.display())
            }
        };
        let entry = match result {
            Ok(line) => text.entry(line),
            Err(e @ LineError::Utf8(_)) => {
                warnings.push(skipped(&e));
                continue;
            }
            Err(e @ LineError::Json(_)) => {
                match serde_json::from_slice::<Value>(raw) {
                    Ok(value) if header.is_none() => preamble.push(value),
                    Ok(_) => warnings
                        .push(format!("{}: line {line_no} has no entry type; it was skipped", path.display())),
                    Err(_) => warnings.push(skipped(&e)),
                }
                continue;
            }
        };
        let is_session = entry.kind == "session";
        if header.is_none() {
            if is_session {
                match serde_json::from_str::<SessionHeader>(entry.raw_json()) {
                    Ok(h) => header = Some(h),
                    Err(e) => {
                        return Err(SessionError::BadHeader {
                            path: path.to_path_buf(),
                            message: e.to_string(),
                        })
                    }
                }
            } else if let Ok(value) = serde_json::from_str::<Value>(entry.raw_json()) {
                preamble.push(value);
            }
            continue;
        }
        if is_session {
            // pi 0.73.1, resuming a file without an assistant reply (a handoff session), appends
            // the whole session again, header included: a repeat of our header is no news.
            if header.as_ref().is_some_and(|h| entry.id != h.id) {
                warnings.push(format!(
                    "{}: line {line_no} is the header of another session; it was skipped",
                    path.display()
                ));
            }
            continue;
        }
        entries.push(entry);
    }
    let Some(header) = header else {
        return Err(SessionError::NoHeader { path: path.to_path_buf() });
    };
    Ok(Parsed { header, preamble, entries, warnings, ends_with_newline })
}
