//! `SessionManager`: one session file, loaded into a tree of entries and appended to line by line.
//!
//! Writes are append-only: an existing line is never rewritten, so a user's file is never
//! changed behind their back (older format versions are migrated in memory only). Each entry is
//! written with one `write` of a complete line; a torn last line (a process killed mid-write) is
//! skipped on load with a warning.
//!
//! Parts: `parse` (bytes → header and entries), `migrate` (format versions 1 and 2), `tree`
//! (the id index, branches, the context of the leaf), `file` (private folders and files, atomic
//! creation, fsync), `list` (the sessions of a working directory).

pub mod file;
mod index;
mod list;
mod migrate;
mod parse;
mod tree;

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use compact_str::CompactString;
use serde_json::{Map, Value};

use super::entry::{kind, SessionEntry, SessionHeader, CURRENT_VERSION};
use super::paths;
use super::SessionError;
use crate::message::{now_iso, Content, Message};
use file::{create_private_dir, io_err, open_append};
pub use list::SessionInfo;
use parse::{parse_file, Parsed};
use index::EntryIndex;
use tree::{index_entries, new_entry_id};

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
    /// A new session not on disk yet: its header and the settings entries recorded so far.
    /// Like pi, a session that was never used leaves no file; the first entry that is not a
    /// setting writes them all at once (see `append`).
    unwritten: Option<String>,
    warnings: Vec<String>,
}

impl SessionManager {
    /// Starts a brand-new session in `session_dir` for `cwd`. Its file is written with the first
    /// entry that is not a setting (a message, a handoff), header first, all at once.
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
            unwritten: None,
            warnings: Vec::new(),
        };
        manager.new_session(parent_session)?;
        Ok(manager)
    }

    /// Opens an existing session file. Damaged lines are skipped and listed in `warnings()`;
    /// a file without a header, an empty file or a folder is an error.
    pub fn open(path: &Path, session_dir: &Path) -> Result<Self, SessionError> {
        let session = Self::load(path, session_dir)?;
        for w in &session.warnings {
            tracing::warn!("{w}");
        }
        Ok(session)
    }

    /// `open` without logging the warnings (the session list reads every file each time).
    pub(super) fn load(path: &Path, session_dir: &Path) -> Result<Self, SessionError> {
        let path = std::path::absolute(path).map_err(io_err(path))?;
        // Only regular files: a folder is an error, and a pipe or device would block or never end.
        if !fs::metadata(&path).map_err(io_err(&path))?.is_file() {
            return Err(SessionError::NotAFile { path });
        }
        let mut bytes = Vec::new();
        File::open(&path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(io_err(&path))?;
        // Said at debug level: how often a command reads a file is checked by the tests.
        tracing::debug!(path = %path.display(), bytes = bytes.len(), "read the session file");
        let Parsed { mut header, preamble, mut entries, mut warnings, ends_with_newline } =
            parse_file(&path, bytes)?;
        warnings.extend(migrate::migrate(&mut header, &mut entries));
        let index = index_entries(&path, &mut entries, &mut warnings);
        if let Some(orphan) = entries
            .iter()
            .find(|e| e.parent_id.as_deref().is_some_and(|p| !index.contains(&entries, p)))
        {
            warnings.push(format!(
                "{}: entry {} names a parent ({}) that is not in the file; what came before it is not part of the conversation",
                path.display(),
                orphan.id,
                orphan.parent_id.as_deref().unwrap_or_default()
            ));
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
            unwritten: None,
            warnings,
        })
    }

    /// Replaces this session with a brand-new one (new header, no entries, no leaf), written to
    /// disk with its first entry that is not a setting. The previous file is flushed first.
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
        let line = serde_json::to_string(&header).map_err(|e| SessionError::Encode(e.to_string()))?;
        self.path = path;
        self.header = header;
        self.preamble.clear();
        self.entries.clear();
        self.index.clear();
        self.leaf_id = None;
        self.file = None;
        self.unwritten = Some(format!("{line}\n"));
        self.needs_newline = false;
        self.warnings.clear();
        Ok(())
    }
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the session's file exists (a new session has none until it is used).
    pub fn is_written(&self) -> bool {
        self.unwritten.is_none()
    }

    /// Writes a new session's file: the header and the entries so far, complete on disk before
    /// it appears under its name (a session file never exists without its header).
    fn write_new_file(&mut self, first_line: &str) -> Result<(), SessionError> {
        let Some(mut contents) = self.unwritten.take() else { return Ok(()) };
        contents.push_str(first_line);
        let dir = self.path.parent().unwrap_or(&self.session_dir).to_path_buf();
        let written = create_private_dir(&dir).and_then(|()| {
            let staging = dir.join(format!(".{}.tmp", self.header.id));
            file::create_complete(&staging, &self.path, contents.as_bytes())
        });
        match written {
            Ok(file) => {
                self.file = Some(file);
                Ok(())
            }
            Err(e) => {
                // Nothing is on disk: keep everything for the next try.
                contents.truncate(contents.len() - first_line.len());
                self.unwritten = Some(contents);
                Err(e)
            }
        }
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

    /// Appends an entry of `kind` with `fields` as a child of the leaf, and makes it the leaf.
    /// Returns the new entry's id.
    pub fn append(&mut self, kind: &str, fields: Map<String, Value>) -> Result<String, SessionError> {
        if self.entries.len() >= index::MAX_ENTRIES {
            return Err(SessionError::TooManyEntries { path: self.path.clone() });
        }
        let id = new_entry_id(&self.index, &self.entries);
        let entry = SessionEntry::new(kind, id, self.leaf_id.as_deref().map(str::to_string), now_iso(), fields)
            .map_err(|e| SessionError::Encode(e.to_string()))?;
        let mut line = String::with_capacity(entry.raw_json().len() + 2);
        line.push_str(entry.raw_json());
        line.push('\n');
        if self.needs_newline {
            line.insert(0, '\n');
        }
        if self.unwritten.is_some() {
            if kind == kind::MODEL_CHANGE || kind == kind::THINKING_LEVEL_CHANGE {
                // Settings alone do not make a session worth a file: they wait for the first use.
                if let Some(pending) = self.unwritten.as_mut() {
                    pending.push_str(&line);
                }
            } else {
                self.write_new_file(&line)?;
            }
        } else if self.file.is_none() {
            self.file = Some(open_append(&self.path, false)?);
            self.write_line(&line)?;
        } else {
            self.write_line(&line)?;
        }
        let id = entry.id.clone();
        self.entries.push(entry);
        self.index.push(&self.entries);
        self.leaf_id = Some(id.clone());
        Ok(id.into())
    }

    fn write_line(&mut self, line: &str) -> Result<(), SessionError> {
        if let Some(file) = self.file.as_mut() {
            if let Err(e) = file.write_all(line.as_bytes()) {
                // Part of the line may be on disk (a full disk writes what fits): end it before
                // the next entry, or that entry would be glued to the fragment and lost.
                self.needs_newline = true;
                return Err(SessionError::Io { path: self.path.clone(), source: e });
            }
        }
        self.needs_newline = false;
        Ok(())
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
        self.append_custom_message_with_details(custom_type, content, display, None)
    }

    /// A `custom_message` with pi's optional `details` (data for extensions, not for the model).
    pub fn append_custom_message_with_details(
        &mut self,
        custom_type: &str,
        content: &str,
        display: bool,
        details: Option<Value>,
    ) -> Result<String, SessionError> {
        let content =
            serde_json::to_value(Content::Text(content.into())).map_err(|e| SessionError::Encode(e.to_string()))?;
        let mut fields = Map::from_iter([
            ("customType".to_string(), Value::String(custom_type.into())),
            ("content".to_string(), content),
            ("display".to_string(), Value::Bool(display)),
        ]);
        if let Some(details) = details.filter(|d| !d.is_null()) {
            fields.insert("details".to_string(), details);
        }
        self.append(kind::CUSTOM_MESSAGE, fields)
    }

    /// pi's extension entry (`"type":"custom"`): kept and resumed past, never sent to a model.
    pub fn append_custom_entry(&mut self, custom_type: &str, data: Value) -> Result<String, SessionError> {
        self.append(
            kind::CUSTOM,
            Map::from_iter([("customType".to_string(), Value::String(custom_type.into())), ("data".to_string(), data)]),
        )
    }

    /// The pins of the current branch ([`super::pins`]).
    pub fn pins(&self) -> Vec<String> {
        super::pins::of_branch(&self.get_branch(None))
    }

    /// Makes `pins` the branch's list from here on.
    pub fn set_pins(&mut self, pins: &[String]) -> Result<String, SessionError> {
        self.append_custom_entry(super::pins::CUSTOM_TYPE, super::pins::data(pins))
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
}
