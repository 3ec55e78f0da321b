//! Reading a session file's bytes into a header and entries. Damaged lines (torn, not JSON, not
//! UTF-8) are skipped with a warning rather than failing the load; only a file without a valid
//! header is an error. Lines are not parsed into messages here: an entry keeps its line's text.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::session::entry::{EntryHead, SessionEntry, SessionHeader};
use super::index::MAX_ENTRIES;
use crate::parallel::map_in_parallel;
use crate::session::SessionError;

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
/// damaged) and below 4 GiB (entries address it in 32 bits), else read line by line.
enum FileText {
    Shared(Arc<String>),
    PerLine(Vec<u8>),
}

/// A line read, not yet an entry: `own_text` when the file's text cannot be shared.
struct ReadLine {
    head: EntryHead,
    own_text: Option<Arc<String>>,
}

impl FileText {
    fn new(bytes: Vec<u8>) -> Self {
        if bytes.len() > u32::MAX as usize {
            return Self::PerLine(bytes);
        }
        match String::from_utf8(bytes) {
            Ok(text) => Self::Shared(Arc::new(text)),
            Err(e) => Self::PerLine(e.into_bytes()),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Self::Shared(text) => text.as_bytes(),
            Self::PerLine(bytes) => bytes,
        }
    }

    fn read_line(&self, range: Range<usize>) -> Result<ReadLine, LineError> {
        match self {
            Self::Shared(text) => {
                // Ranges end at newlines, so on character boundaries.
                let head = EntryHead::read(&text[range]).map_err(LineError::Json)?;
                Ok(ReadLine { head, own_text: None })
            }
            Self::PerLine(bytes) => {
                let line = std::str::from_utf8(&bytes[range]).map_err(LineError::Utf8)?;
                let head = EntryHead::read(line).map_err(LineError::Json)?;
                Ok(ReadLine { head, own_text: Some(Arc::new(line.to_string())) })
            }
        }
    }

    /// The entry of a line read at `range` (`None`: a line of its own longer than 4 GiB).
    fn entry(&self, line: ReadLine, range: Range<usize>) -> Option<SessionEntry> {
        match (line.own_text, self) {
            (Some(own), _) => {
                let len = own.len();
                SessionEntry::with_head(line.head, own, 0..len)
            }
            (None, Self::Shared(text)) => SessionEntry::with_head(line.head, text.clone(), range),
            // Not reached: lines of a file not shared are read with a text of their own.
            (None, Self::PerLine(_)) => None,
        }
    }
}

/// Below this many bytes a file is parsed on one thread. Reading lines is bound by memory more
/// than by the CPU: a second thread only paid off from ~5 MB on (measured, see
/// doc/benchmarks.md).
const PARALLEL_PARSE_MIN_BYTES: usize = 8 << 20;

/// Lines parsed per round on all cores. Their heads wait in a buffer until they become
/// entries in file order: a round at a time keeps that buffer small next to the file (all of
/// a 100k-entry file's heads at once were 15 MB at the peak of loading it).
const PARALLEL_BATCH_LINES: usize = 16 * 1024;

/// The header, preamble, entries and warnings, as the lines come in file order.
struct Reader<'a> {
    path: &'a Path,
    header: Option<SessionHeader>,
    preamble: Vec<Value>,
    entries: Vec<SessionEntry>,
    warnings: Vec<String>,
    ends_with_newline: bool,
}

impl Reader<'_> {
    /// Takes the line at `range` of `text`, read as `result`. Only a bad header is an error.
    fn take(&mut self, text: &FileText, range: Range<usize>, result: Result<ReadLine, LineError>) -> Result<(), SessionError> {
        let path = self.path;
        let bytes = text.bytes();
        let raw = &bytes[range.clone()];
        let skipped = |e: &dyn std::fmt::Display| {
            if range.end == bytes.len() && !self.ends_with_newline {
                format!(
                    "{}: the last line ({} bytes) is incomplete (the writer was interrupted); it was skipped",
                    path.display(),
                    raw.len()
                )
            } else {
                format!("{}: line {} is not a valid entry ({e}); it was skipped", path.display(), line_number(bytes, &range))
            }
        };
        let entry = match result {
            Ok(line) => match text.entry(line, range.clone()) {
                Some(entry) => entry,
                None => {
                    self.warnings.push(skipped(&"it is longer than 4 GiB"));
                    return Ok(());
                }
            },
            Err(e @ LineError::Utf8(_)) => {
                self.warnings.push(skipped(&e));
                return Ok(());
            }
            Err(e @ LineError::Json(_)) => {
                match serde_json::from_slice::<Value>(raw) {
                    Ok(value) if self.header.is_none() => self.preamble.push(value),
                    Ok(_) => self.warnings.push(format!(
                        "{}: line {} has no entry type; it was skipped",
                        path.display(),
                        line_number(bytes, &range)
                    )),
                    Err(_) => self.warnings.push(skipped(&e)),
                }
                return Ok(());
            }
        };
        let is_session = entry.kind == "session";
        let Some(header) = &self.header else {
            if is_session {
                match serde_json::from_str::<SessionHeader>(entry.raw_json()) {
                    Ok(h) => self.header = Some(h),
                    Err(e) => {
                        return Err(SessionError::BadHeader { path: path.to_path_buf(), message: e.to_string() })
                    }
                }
            } else if let Ok(value) = serde_json::from_str::<Value>(entry.raw_json()) {
                self.preamble.push(value);
            }
            return Ok(());
        };
        if is_session {
            // pi 0.73.1, resuming a file without an assistant reply (a handoff session), appends
            // the whole session again, header included: a repeat of our header is no news.
            if entry.id != header.id {
                self.warnings.push(format!(
                    "{}: line {} is the header of another session; it was skipped",
                    path.display(),
                    line_number(bytes, &range)
                ));
            }
            return Ok(());
        }
        self.entries.push(entry);
        Ok(())
    }
}

/// The 1-based number of the line at `range` (counted only for a warning).
fn line_number(bytes: &[u8], range: &Range<usize>) -> usize {
    memchr::memchr_iter(b'\n', &bytes[..range.start]).count() + 1
}

pub(super) fn parse_file(path: &Path, bytes: Vec<u8>) -> Result<Parsed, SessionError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(SessionError::Empty { path: path.to_path_buf() });
    }
    let ends_with_newline = bytes.ends_with(b"\n");
    // Byte ranges of the lines that are not blank.
    let mut lines: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', &bytes).chain((!ends_with_newline).then_some(bytes.len()));
    for end in ends {
        if !bytes[start..end].iter().all(u8::is_ascii_whitespace) {
            lines.push(start..end);
        }
        start = end + 1;
    }
    if lines.len() > MAX_ENTRIES {
        return Err(SessionError::TooManyEntries { path: path.to_path_buf() });
    }
    let text = FileText::new(bytes);
    let mut reader = Reader {
        path,
        header: None,
        preamble: Vec::new(),
        entries: Vec::with_capacity(lines.len()),
        warnings: Vec::new(),
        ends_with_newline,
    };
    if text.bytes().len() >= PARALLEL_PARSE_MIN_BYTES {
        // Loading a session is mostly JSON scanning: a large file's lines are read on all cores.
        for batch in lines.chunks(PARALLEL_BATCH_LINES) {
            let read = map_in_parallel(batch, true, |range| text.read_line(range.clone()));
            for (range, result) in batch.iter().zip(read) {
                reader.take(&text, range.clone(), result)?;
            }
        }
    } else {
        // One at a time, straight into the entries.
        for range in &lines {
            reader.take(&text, range.clone(), text.read_line(range.clone()))?;
        }
    }
    let Reader { header, preamble, entries, warnings, .. } = reader;
    let Some(header) = header else {
        return Err(SessionError::NoHeader { path: path.to_path_buf() });
    };
    Ok(Parsed { header, preamble, entries, warnings, ends_with_newline })
}
