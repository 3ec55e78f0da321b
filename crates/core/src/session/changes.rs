//! The files the agent changed in a session (its successful `edit` and `write` calls, and what its
//! commands changed in files the host watched), each with
//! its content from before the agent's first change to it in that session.
//!
//! Kept beside the session file, in its side folder, so that they survive restarts and resumes:
//! `<side dir>/originals/index.json` lists the files, `<side dir>/originals/NNNN-<name>` holds
//! each file's original bytes (none for a file the agent created). Files are 0600 in 0700
//! folders, like the session itself; the index is replaced atomically. A new session (a
//! handoff's too) has a side folder of its own, so it starts a new set.
//!
//! Changes made by `bash` commands are recorded here when the tool loop read the file before the
//! command (`agent::tool_loop`'s `watched_by_commands`: the editor's open files and the files
//! the review knows). An external agent's edits are recorded by the ACP client
//! (`handoff_agents`' `EditOriginals`), which reads the files before the agent changes them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store::file::{create_private_dir, write_private_file, IndexedDir};
use super::SessionError;

/// The folder of the originals inside a session's side folder.
pub const ORIGINALS_DIR: &str = "originals";
const INDEX_VERSION: u32 = 1;

/// A file the agent changed in the session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// The name of the file (in the originals folder) holding its content before the first
    /// change; `None` when the agent created it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<String>,
    /// The file did not exist before the agent's first change.
    pub created: bool,
    /// The `toolResult` entry of the first change, and of the latest.
    pub first_change_entry_id: String,
    pub last_change_entry_id: String,
    /// When the first and the latest change were recorded (ms since the epoch).
    pub first_changed: i64,
    pub last_changed: i64,
    /// Successful edit and write calls to the file.
    pub changes: u32,
}

/// The file's state before the agent's first change, as the tool loop found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Before {
    /// The file did not exist.
    Missing,
    /// Its bytes.
    Content(Vec<u8>),
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    version: u32,
    files: Vec<ChangedFile>,
}

/// The originals of one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Originals {
    dir: IndexedDir,
}

impl Originals {
    /// The originals of the session stored in `session_file`.
    pub fn of_session(session_file: &Path) -> Self {
        Self { dir: IndexedDir::of_session(session_file, ORIGINALS_DIR) }
    }

    /// The originals folder (it exists once a change was recorded).
    pub fn dir(&self) -> &Path {
        self.dir.dir()
    }

    fn load(&self) -> Result<Index, SessionError> {
        let index = self.dir.read("index of changed files")?;
        Ok(index.unwrap_or(Index { version: INDEX_VERSION, files: Vec::new() }))
    }

    /// The changed files, the most recently changed first (an empty list when there are none).
    pub fn list(&self) -> Result<Vec<ChangedFile>, SessionError> {
        let mut files = self.load()?.files;
        files.reverse();
        Ok(files)
    }

    /// Where the original of `file` is (`None` for a created file).
    pub fn original_path(&self, file: &ChangedFile) -> Option<PathBuf> {
        file.original.as_deref().map(|name| self.dir().join(name))
    }

    /// The original bytes of `file` (empty for a created file).
    pub fn original_bytes(&self, file: &ChangedFile) -> Result<Vec<u8>, SessionError> {
        match self.original_path(file) {
            Some(path) => std::fs::read(&path).map_err(|source| SessionError::Io { path, source }),
            None => Ok(Vec::new()),
        }
    }

    /// Records a successful change of `path` (absolute), stored as entry `entry_id` at `now`
    /// (ms). The first change of a file keeps `before` (its state before that change); later
    /// ones only move its latest change, and `before` is ignored.
    pub fn record(&self, path: &Path, before: &Before, entry_id: &str, now: i64) -> Result<ChangedFile, SessionError> {
        let mut index = self.load()?;
        index.version = INDEX_VERSION;
        // The index lists the files in the order of their latest change, the latest last.
        if let Some(at) = index.files.iter().position(|f| f.path == path) {
            let mut file = index.files.remove(at);
            file.last_change_entry_id = entry_id.to_string();
            file.last_changed = now.max(file.last_changed);
            file.changes += 1;
            index.files.push(file.clone());
            self.save(&index)?;
            return Ok(file);
        }
        create_private_dir(self.dir())?;
        let original = match before {
            Before::Missing => None,
            Before::Content(bytes) => {
                let name = original_name(index.files.len() + 1, path);
                // The original first: the index never names a file that is not there.
                write_private_file(&self.dir().join(&name), bytes)?;
                Some(name)
            }
        };
        let file = ChangedFile {
            path: path.to_path_buf(),
            original,
            created: *before == Before::Missing,
            first_change_entry_id: entry_id.to_string(),
            last_change_entry_id: entry_id.to_string(),
            first_changed: now,
            last_changed: now,
            changes: 1,
        };
        index.files.push(file.clone());
        self.save(&index)?;
        Ok(file)
    }

    /// Replaces the index, all or nothing.
    fn save(&self, index: &Index) -> Result<(), SessionError> {
        self.dir.write(index)
    }
}

/// `0001-main.rs`: the order of the first change, and the file's name for whoever looks.
fn original_name(n: usize, path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name: String = name.chars().map(|c| if c.is_control() || c == '/' || c == '\\' { '_' } else { c }).collect();
    format!("{n:04}-{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_change_keeps_the_original_later_ones_move_the_latest() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s/2026_x.jsonl");
        let o = Originals::of_session(&session);
        assert_eq!(o.dir(), dir.path().join("s/2026_x/originals"));
        assert!(o.list().unwrap().is_empty());
        let a = Path::new("/p/a.rs");
        o.record(a, &Before::Content(b"one\n".to_vec()), "e1", 10).unwrap();
        assert!(o.list().unwrap().iter().any(|f| f.path == a));
        o.record(Path::new("/p/new.md"), &Before::Missing, "e2", 20).unwrap();
        // Ignored: a's original is kept already.
        o.record(a, &Before::Content(b"changed\n".to_vec()), "e3", 30).unwrap();
        let list = o.list().unwrap();
        assert_eq!(list.iter().map(|f| f.path.to_str().unwrap()).collect::<Vec<_>>(), ["/p/a.rs", "/p/new.md"]);
        assert_eq!(list[0].first_change_entry_id, "e1");
        assert_eq!(list[0].last_change_entry_id, "e3");
        assert_eq!(list[0].changes, 2);
        assert_eq!(o.original_bytes(&list[0]).unwrap(), b"one\n");
        assert_eq!(o.original_path(&list[0]).unwrap(), o.dir().join("0001-a.rs"));
        assert!(list[1].created);
        assert_eq!(o.original_path(&list[1]), None);
        assert!(o.original_bytes(&list[1]).unwrap().is_empty());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for f in ["0001-a.rs", IndexedDir::INDEX_FILE] {
                let mode = std::fs::metadata(o.dir().join(f)).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{f}");
            }
            let mode = std::fs::metadata(o.dir()).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700);
        }
        // No staging file is left (the index is written under one, then renamed).
        let staged: Vec<_> = std::fs::read_dir(o.dir()).unwrap().filter_map(|e| e.unwrap().file_name().into_string().ok()).filter(|n| n.ends_with(".tmp")).collect();
        assert!(staged.is_empty(), "{staged:?}");
    }

    #[test]
    fn a_damaged_index_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let o = Originals::of_session(&dir.path().join("x.jsonl"));
        std::fs::create_dir_all(o.dir()).unwrap();
        std::fs::write(o.dir().join(IndexedDir::INDEX_FILE), "{not json").unwrap();
        let e = o.list().unwrap_err().to_string();
        assert!(e.contains("index.json") && e.contains("invalid index"), "{e}");
    }
}
