//! `SessionManager`: one session file, loaded into a tree of entries and appended to line by line.
//!
//! Writes are append-only: an existing line is never rewritten, so a user's file is never
//! changed behind their back (older format versions are migrated in memory only). Each entry is
//! written with one `write` of a complete line; a torn last line (a process killed mid-write) is
//! skipped on load with a warning.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use compact_str::CompactString;
use serde_json::{Map, Value};

use super::context::{self, SessionContext};
use super::entry::{kind, EntryHead, SessionEntry, SessionHeader, CURRENT_VERSION};
use super::paths;
use super::SessionError;
use crate::core::message::{now_iso, Content, Message, Role};

/// Entry id → position in `entries`. foldhash rather than SipHash: the keys come from the
/// user's own files, and hashing them was a tenth of loading a large session.
type EntryIndex = HashMap<CompactString, usize, foldhash::fast::RandomState>;

/// What `list_sessions` reports of one session file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SessionInfo {
    pub id: String,
    pub path: PathBuf,
    pub cwd: String,
    pub timestamp: String,
    pub parent_session: Option<String>,
    /// Text of the first user message (first line, trimmed), or empty.
    pub first_message: String,
    pub message_count: usize,
    /// Nothing was said in it yet (no message, no injected context such as a handoff).
    pub empty: bool,
}

/// One session: header, entries, the current leaf, and the open file they are appended to.
#[derive(Debug)]
pub struct SessionManager {
    session_dir: PathBuf,
    cwd: PathBuf,
    path: PathBuf,
    header: SessionHeader,
    /// Lines before the header that are not entries (oh-my-pi writes a `title` line first).
    preamble: Vec<Value>,
    entries: Vec<SessionEntry>,
    index: EntryIndex,
    leaf_id: Option<CompactString>,
    file: Option<File>,
    /// The file does not end in `\n` (torn last line): the next append starts a new line.
    needs_newline: bool,
    warnings: Vec<String>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io { path: path.to_path_buf(), source }
}

/// A fresh 8-hex-char entry id, unique in `taken`.
fn new_entry_id(taken: &EntryIndex) -> String {
    loop {
        let id = format!("{:08x}", rand::random::<u32>());
        if !taken.contains_key(id.as_str()) {
            return id;
        }
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// Creates `dir` and any missing parents, the created ones with mode 0700.
fn create_private_dir(dir: &Path) -> Result<(), SessionError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_private_dir(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => set_mode(dir, 0o700).map_err(io_err(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(SessionError::Io { path: dir.to_path_buf(), source: e }),
    }
}

fn open_append(path: &Path, create_new: bool) -> Result<File, SessionError> {
    let mut options = OpenOptions::new();
    options.append(true);
    if create_new {
        options.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).map_err(io_err(path))
}

fn fsync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// The result of parsing a session file's bytes.
struct Parsed {
    header: SessionHeader,
    preamble: Vec<Value>,
    entries: Vec<SessionEntry>,
    warnings: Vec<String>,
    ends_with_newline: bool,
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

fn parse_file(path: &Path, bytes: Vec<u8>) -> Result<Parsed, SessionError> {
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
            Box::new(super::map_in_parallel(lines.clone(), true, |(_, range)| text.read_line(range)).into_iter())
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

/// Indexes entries by id. The same entry written twice (pi's re-append of a session it
/// resumed) is kept once; of two different entries with one id, the later one wins.
fn index_entries(path: &Path, entries: &mut Vec<SessionEntry>, warnings: &mut Vec<String>) -> EntryIndex {
    loop {
        let mut index = EntryIndex::with_capacity_and_hasher(entries.len(), Default::default());
        let mut repeats = Vec::new();
        let mut reused = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            match index.insert(entry.id.clone(), i) {
                Some(first) if entries[first] == *entry => {
                    index.insert(entry.id.clone(), first);
                    repeats.push(i);
                }
                Some(_) => reused.push(format!(
                    "{}: entry id {} appears more than once; the later one wins",
                    path.display(),
                    entry.id
                )),
                None => {}
            }
        }
        if repeats.is_empty() {
            warnings.extend(reused);
            return index;
        }
        // Rare: drop the repeats and index again, so that positions are right.
        let mut position = 0;
        entries.retain(|_| {
            position += 1;
            repeats.binary_search(&(position - 1)).is_err()
        });
    }
}

/// Brings entries of format versions 1 and 2 to version 3, in memory only.
fn migrate(header: &mut SessionHeader, entries: &mut [SessionEntry]) {
    if header.version < 2 {
        // Version 1 was a linear list without ids: chain the entries in file order. The ids are
        // derived from the position, not random: the file keeps its version-1 lines, so entries
        // appended since name these ids as parents and must find them again on the next load.
        let mut taken: HashSet<CompactString> =
            entries.iter().filter(|e| !e.id.is_empty()).map(|e| e.id.clone()).collect();
        let mut prev: Option<CompactString> = None;
        for (i, entry) in entries.iter_mut().enumerate() {
            if entry.id.is_empty() {
                let mut n = i as u32 + 1;
                while taken.contains(format!("{n:08x}").as_str()) {
                    n = n.wrapping_add(0x0100_0000);
                }
                entry.id = format!("{n:08x}").into();
                taken.insert(entry.id.clone());
            }
            if entry.parent_id.is_none() {
                entry.parent_id = prev.clone();
            }
            prev = Some(entry.id.clone());
        }
        // Compactions named their first kept entry by its index among the file's lines, the
        // header being line 0.
        let ids: Vec<CompactString> = entries.iter().map(|e| e.id.clone()).collect();
        for entry in entries.iter_mut() {
            let mut fields = entry.fields();
            if entry.kind == kind::COMPACTION {
                if let Some(index) = fields.shift_remove("firstKeptEntryIndex") {
                    let target =
                        index.as_u64().and_then(|i| (i as usize).checked_sub(1)).and_then(|i| ids.get(i));
                    if let Some(id) = target {
                        fields.insert("firstKeptEntryId".into(), Value::String(id.to_string()));
                    }
                }
            }
            let _ = entry.rebuild(fields);
        }
    }
    if header.version < 3 {
        // Version 3 renamed the `hookMessage` role to `custom`.
        for entry in entries.iter_mut().filter(|e| e.is_message() && e.raw_json().contains("hookMessage")) {
            let mut fields = entry.fields();
            if let Some(Value::Object(msg)) = fields.get_mut("message") {
                if msg.get("role").and_then(Value::as_str) == Some("hookMessage") {
                    msg.insert("role".into(), Value::String("custom".into()));
                    let _ = entry.rebuild(fields);
                }
            }
        }
    }
}

impl SessionManager {
    /// Starts a brand-new session in `session_dir` for `cwd`; its header is on disk at once.
    pub fn create(
        session_dir: &Path,
        cwd: &Path,
        parent_session: Option<String>,
    ) -> Result<Self, SessionError> {
        let mut manager = Self {
            session_dir: session_dir.to_path_buf(),
            cwd: cwd.to_path_buf(),
            path: PathBuf::new(),
            header: SessionHeader {
                kind: "session".into(),
                version: CURRENT_VERSION,
                id: String::new(),
                timestamp: String::new(),
                cwd: String::new(),
                parent_session: None,
                extra: Map::new(),
            },
            preamble: Vec::new(),
            entries: Vec::new(),
            index: EntryIndex::default(),
            leaf_id: None,
            file: None,
            needs_newline: false,
            warnings: Vec::new(),
        };
        manager.new_session(parent_session)?;
        Ok(manager)
    }

    /// Opens an existing session file. Damaged lines are skipped and listed in `warnings()`;
    /// a file without a header, an empty file or a folder is an error.
    pub fn open(path: &Path, session_dir: &Path) -> Result<Self, SessionError> {
        let path = std::path::absolute(path).map_err(io_err(path))?;
        // Only regular files: a folder is an error, and a pipe or device would block or never end.
        if !fs::metadata(&path).map_err(io_err(&path))?.is_file() {
            return Err(SessionError::NotAFile { path });
        }
        let mut bytes = Vec::new();
        File::open(&path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(io_err(&path))?;
        let Parsed { mut header, preamble, mut entries, mut warnings, ends_with_newline } =
            parse_file(&path, bytes)?;
        migrate(&mut header, &mut entries);
        let index = index_entries(&path, &mut entries, &mut warnings);
        if let Some(orphan) = entries
            .iter()
            .find(|e| e.parent_id.as_deref().is_some_and(|p| !index.contains_key(p)))
        {
            warnings.push(format!(
                "{}: entry {} names a parent ({}) that is not in the file; what came before it is not part of the conversation",
                path.display(),
                orphan.id,
                orphan.parent_id.as_deref().unwrap_or_default()
            ));
        }
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let leaf_id = entries.last().map(|e| e.id.clone());
        let cwd = PathBuf::from(&header.cwd);
        Ok(Self {
            session_dir: session_dir.to_path_buf(),
            cwd,
            path,
            header,
            preamble,
            entries,
            index,
            leaf_id,
            file: None,
            needs_newline: !ends_with_newline,
            warnings,
        })
    }

    /// Replaces this session with a brand-new one (new header, no entries, no leaf), written to
    /// disk at once. The previous file is flushed first.
    pub fn new_session(&mut self, parent_session: Option<String>) -> Result<(), SessionError> {
        if self.file.is_some() {
            self.flush()?;
        }
        let id = uuid::Uuid::now_v7().to_string();
        let timestamp = now_iso();
        let path = paths::session_file_path(&self.session_dir, &self.cwd, &timestamp, &id);
        let header = SessionHeader {
            kind: "session".into(),
            version: CURRENT_VERSION,
            id,
            timestamp,
            cwd: self.cwd.to_string_lossy().into_owned(),
            parent_session,
            extra: Map::new(),
        };
        let dir = path.parent().unwrap_or(&self.session_dir).to_path_buf();
        create_private_dir(&dir)?;
        let line = serde_json::to_string(&header).map_err(|e| SessionError::Encode(e.to_string()))?;
        // The header is written under a temporary name and renamed into place: a session file
        // never exists without its header, whenever the process dies.
        let staging = dir.join(format!(".{}.tmp", header.id));
        let mut file = open_append(&staging, true)?;
        let written = file
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| file.sync_data())
            .and_then(|()| fs::rename(&staging, &path));
        if let Err(e) = written {
            // Nothing half-written is left behind (a full disk).
            drop(file);
            let _ = fs::remove_file(&staging);
            return Err(SessionError::Io { path, source: e });
        }
        fsync_dir(&dir);
        self.path = path;
        self.header = header;
        self.preamble.clear();
        self.entries.clear();
        self.index.clear();
        self.leaf_id = None;
        self.file = Some(file);
        self.needs_newline = false;
        self.warnings.clear();
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    pub fn session_id(&self) -> &str {
        &self.header.id
    }

    pub fn session_dir(&self) -> &Path {
        &self.session_dir
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Problems met while loading (skipped lines, duplicate ids).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Lines before the header that were kept as they are (e.g. oh-my-pi's `title`).
    pub fn preamble(&self) -> &[Value] {
        &self.preamble
    }

    pub fn get_entries(&self) -> &[SessionEntry] {
        &self.entries
    }

    pub fn get_entry(&self, id: &str) -> Option<&SessionEntry> {
        self.index.get(id).map(|&i| &self.entries[i])
    }

    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf_id.as_deref()
    }

    /// The path from the root to `from` (default: the leaf), root first. A parent id that points
    /// nowhere ends the walk there; a cycle is cut.
    pub fn get_branch(&self, from: Option<&str>) -> Vec<&SessionEntry> {
        let mut path = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor = from.or(self.leaf_id.as_deref()).and_then(|id| self.index.get(id).copied());
        while let Some(i) = cursor {
            let entry = &self.entries[i];
            if !seen.insert(entry.id.as_str()) {
                break;
            }
            path.push(entry);
            cursor = entry.parent_id.as_deref().and_then(|p| self.index.get(p).copied());
        }
        path.reverse();
        path
    }

    /// Moves the leaf to `id`: the next append starts a new branch there.
    pub fn branch(&mut self, id: &str) -> Result<(), SessionError> {
        if !self.index.contains_key(id) {
            return Err(SessionError::UnknownEntry(id.to_string()));
        }
        self.leaf_id = Some(id.into());
        Ok(())
    }

    /// Appends an entry of `kind` with `fields` as a child of the leaf, and makes it the leaf.
    /// Returns the new entry's id.
    pub fn append(&mut self, kind: &str, fields: Map<String, Value>) -> Result<String, SessionError> {
        let entry = SessionEntry::new(kind, new_entry_id(&self.index), self.leaf_id.as_deref().map(str::to_string), now_iso(), fields)
            .map_err(|e| SessionError::Encode(e.to_string()))?;
        let mut line = String::with_capacity(entry.raw_json().len() + 2);
        line.push_str(entry.raw_json());
        line.push('\n');
        if self.needs_newline {
            line.insert(0, '\n');
        }
        if self.file.is_none() {
            self.file = Some(open_append(&self.path, false)?);
        }
        if let Some(file) = self.file.as_mut() {
            if let Err(e) = file.write_all(line.as_bytes()) {
                // Part of the line may be on disk (a full disk writes what fits): end it before
                // the next entry, or that entry would be glued to the fragment and lost.
                self.needs_newline = true;
                return Err(SessionError::Io { path: self.path.clone(), source: e });
            }
        }
        self.needs_newline = false;
        let id = entry.id.clone();
        self.index.insert(id.clone(), self.entries.len());
        self.entries.push(entry);
        self.leaf_id = Some(id.clone());
        Ok(id.into())
    }

    pub fn append_message(&mut self, message: &Message) -> Result<String, SessionError> {
        let value = serde_json::to_value(message).map_err(|e| SessionError::Encode(e.to_string()))?;
        self.append(kind::MESSAGE, Map::from_iter([("message".to_string(), value)]))
    }

    pub fn append_custom_message_entry(
        &mut self,
        custom_type: &str,
        content: &str,
        display: bool,
    ) -> Result<String, SessionError> {
        let content =
            serde_json::to_value(Content::Text(content.into())).map_err(|e| SessionError::Encode(e.to_string()))?;
        self.append(
            kind::CUSTOM_MESSAGE,
            Map::from_iter([
                ("customType".to_string(), Value::String(custom_type.into())),
                ("content".to_string(), content),
                ("display".to_string(), Value::Bool(display)),
            ]),
        )
    }

    pub fn append_model_change(&mut self, provider: &str, model_id: &str) -> Result<String, SessionError> {
        self.append(
            kind::MODEL_CHANGE,
            Map::from_iter([
                ("provider".to_string(), Value::String(provider.into())),
                ("modelId".to_string(), Value::String(model_id.into())),
            ]),
        )
    }

    pub fn append_thinking_level_change(&mut self, level: &str) -> Result<String, SessionError> {
        self.append(
            kind::THINKING_LEVEL_CHANGE,
            Map::from_iter([("thinkingLevel".to_string(), Value::String(level.into()))]),
        )
    }

    pub fn append_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: &str,
        tokens_before: u64,
    ) -> Result<String, SessionError> {
        self.append(
            kind::COMPACTION,
            Map::from_iter([
                ("summary".to_string(), Value::String(summary.into())),
                ("firstKeptEntryId".to_string(), Value::String(first_kept_entry_id.into())),
                ("tokensBefore".to_string(), Value::from(tokens_before)),
            ]),
        )
    }

    pub fn append_branch_summary(&mut self, from_id: &str, summary: &str) -> Result<String, SessionError> {
        self.append(
            kind::BRANCH_SUMMARY,
            Map::from_iter([
                ("fromId".to_string(), Value::String(from_id.into())),
                ("summary".to_string(), Value::String(summary.into())),
            ]),
        )
    }

    /// Forces everything appended so far onto the disk.
    pub fn flush(&mut self) -> Result<(), SessionError> {
        if let Some(file) = self.file.as_mut() {
            file.flush().map_err(io_err(&self.path))?;
            file.sync_data().map_err(io_err(&self.path))?;
        }
        Ok(())
    }

    /// Messages on the current branch (the rule both handoff guards use).
    pub fn count_branch_messages(&self) -> usize {
        self.get_branch(None).iter().filter(|e| e.is_message()).count()
    }

    /// The LLM context for the leaf.
    pub fn build_session_context(&self) -> SessionContext {
        context::build(&self.get_branch(None))
    }

    /// `(model, thinking level)` in force at the leaf, without reading the messages.
    pub fn context_settings(&self) -> (Option<(String, String)>, Option<String>) {
        context::settings(&self.get_branch(None))
    }

    /// The messages of the LLM context for the leaf, written as a JSON array (stored messages
    /// exactly as they are in the file).
    pub fn write_context_json(&self, out: &mut impl Write) -> std::io::Result<()> {
        context::write_json(&self.get_branch(None), out)
    }

    /// Sessions stored for `cwd`, newest first.
    pub fn list_sessions(session_dir: &Path, cwd: &Path) -> Result<Vec<SessionInfo>, SessionError> {
        let dir = session_dir.join(paths::cwd_folder_name(cwd));
        let read = match fs::read_dir(&dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(SessionError::Io { path: dir, source: e }),
        };
        let mut sessions: Vec<SessionInfo> = read
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
            .filter_map(|p| summarize(&p).ok())
            .collect();
        sessions.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then_with(|| b.path.cmp(&a.path)));
        Ok(sessions)
    }
}

/// Reads just enough of a session file for `list_sessions`.
fn summarize(path: &Path) -> Result<SessionInfo, SessionError> {
    let bytes = fs::read(path).map_err(io_err(path))?;
    let parsed = parse_file(path, bytes)?;
    let empty = !parsed.entries.iter().any(|e| e.is_message() || e.kind == kind::CUSTOM_MESSAGE);
    // Roles are read without parsing the messages; only the first user message is.
    let messages: Vec<(&SessionEntry, Role)> =
        parsed.entries.iter().filter_map(|e| Some((e, e.message_role()?))).collect();
    let message_count = messages.len();
    let first_message = messages
        .iter()
        .filter(|(_, role)| *role == Role::User)
        .find_map(|(e, _)| e.message())
        .map(|m| m.text().lines().next().unwrap_or_default().trim().to_string())
        .unwrap_or_default();
    Ok(SessionInfo {
        id: parsed.header.id,
        path: path.to_path_buf(),
        cwd: parsed.header.cwd,
        timestamp: parsed.header.timestamp,
        parent_session: parsed.header.parent_session,
        first_message,
        message_count,
        empty,
    })
}
