//! Reading a session file line by line, without loading it: its header, or its entries one at a
//! time in file order (`session_query` searches an ancestor so: a 63 MB file is never held
//! parsed, only the line being read). Lines are taken as the loader takes them (`store::parse`):
//! lines before the header are not entries, a repeated header (pi's resume) is skipped, a
//! damaged line (torn, not JSON, not UTF-8) is skipped. Nothing is migrated: the entries of a
//! version 1 file (no ids) come with empty ids.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::entry::{SessionEntry, SessionHeader};
use super::SessionError;

/// Lines read before the header at most: a file whose first lines hold none is not a session.
const MAX_PREAMBLE_LINES: usize = 64;

/// The header of the session file at `path`, reading only as far as it.
pub fn read_header(path: &Path) -> Result<SessionHeader, SessionError> {
    // A header is a line of a few hundred bytes: a listing of many files reads little of each.
    let mut lines = Lines::open(path, 8 * 1024)?;
    lines.header()
}

/// Calls `each` with every entry of the session file at `path`, in file order; returns its
/// header.
pub fn scan_entries(path: &Path, mut each: impl FnMut(&SessionEntry)) -> Result<SessionHeader, SessionError> {
    let mut lines = Lines::open(path, 256 * 1024)?;
    let header = lines.header()?;
    while let Some(entry) = lines.next_entry()? {
        if entry.kind == "session" {
            continue;
        }
        each(&entry);
    }
    Ok(header)
}

/// The lines of an open session file, as entries.
struct Lines<'a> {
    path: &'a Path,
    reader: BufReader<File>,
    buf: Vec<u8>,
}

impl<'a> Lines<'a> {
    /// `buffer`: bytes read at a time.
    fn open(path: &'a Path, buffer: usize) -> Result<Self, SessionError> {
        let io = |source| SessionError::Io { path: path.to_path_buf(), source };
        let file = File::open(path).map_err(io)?;
        // Only regular files: a pipe or device would block or never end.
        if !file.metadata().map_err(io)?.is_file() {
            return Err(SessionError::NotAFile { path: path.to_path_buf() });
        }
        Ok(Self { path, reader: BufReader::with_capacity(buffer, file), buf: Vec::new() })
    }

    /// The next line that is an entry (any type, headers too); `None` at the end.
    fn next_entry(&mut self) -> Result<Option<SessionEntry>, SessionError> {
        loop {
            self.buf.clear();
            let read = self.reader.read_until(b'\n', &mut self.buf);
            if read.map_err(|source| SessionError::Io { path: self.path.to_path_buf(), source })? == 0 {
                return Ok(None);
            }
            let Ok(line) = std::str::from_utf8(&self.buf) else { continue };
            let line = line.trim_end_matches(['\n', '\r']);
            if line.trim().is_empty() {
                continue;
            }
            if let Ok(entry) = SessionEntry::parse(line) {
                return Ok(Some(entry));
            }
        }
    }

    /// Reads up to and including the header.
    fn header(&mut self) -> Result<SessionHeader, SessionError> {
        let path = self.path.to_path_buf();
        for _ in 0..MAX_PREAMBLE_LINES {
            let Some(entry) = self.next_entry()? else { break };
            if entry.kind == "session" {
                return serde_json::from_str(entry.raw_json())
                    .map_err(|e| SessionError::BadHeader { path, message: e.to_string() });
            }
        }
        Err(SessionError::NoHeader { path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_in_file_order_past_damage_and_a_repeated_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let header = r#"{"type":"session","version":3,"id":"s1","timestamp":"t","cwd":"/w","parentSession":"/p.jsonl"}"#;
        let entry = |id: &str| format!(r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"t","message":{{"role":"user","content":"hi"}}}}"#);
        let text = format!("{{\"type\":\"title\",\"title\":\"x\"}}\n{header}\n{}\nnot json\n\n{header}\n{}\n{{\"type\":\"mes", entry("a"), entry("b"));
        std::fs::write(&path, text).unwrap();
        assert_eq!(read_header(&path).unwrap().parent_session.as_deref(), Some("/p.jsonl"));
        let mut ids = Vec::new();
        let header = scan_entries(&path, |e| ids.push(e.id.to_string())).unwrap();
        assert_eq!(header.id, "s1");
        assert_eq!(ids, ["a", "b"]);
        std::fs::write(&path, "{\"a\":1}\n").unwrap();
        assert!(matches!(read_header(&path), Err(SessionError::NoHeader { .. })));
        assert!(matches!(read_header(dir.path()), Err(SessionError::NotAFile { .. } | SessionError::Io { .. })));
    }
}
