//! Which session file each ACP session id goes on in. The client keeps its id for good, while
//! the file behind it changes: a handoff's chain can be followed through the files' parent
//! links, but `/new` and `/back` leave no such link. So every change of file is written here,
//! one small JSON object per project folder (`acp-sessions.json` beside the session files:
//! pi and our session list read only `*.jsonl`), and `session/load` and `session/list` read it
//! before following links.
//!
//! A session left by `/new` keeps a way back: it gets an id of its own here, under which
//! `session/list` shows it and `session/load` opens it.
//!
//! A session `session/new` made is recorded at once, with the file it will have: like pi, we
//! write no file for a session never used, yet another process must be able to load its id
//! (acpx makes a session in one process and prompts it in the next). Such an id opens as a new
//! session under it ([`AcpIndex::unwritten`]), and goes on in that session's file once prompted.
//!
//! Two agents writing at the same moment may lose one's change (the last rename wins); the
//! links are then the fallback, as they are for a file this record does not know.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use handoff_core::session::file;
use handoff_core::session::paths::{self, cwd_folder_name};
use handoff_core::session::chain;

/// The record's file name in a project's session folder.
pub const FILE: &str = "acp-sessions.json";

/// The record of one project's folder.
#[derive(Clone, Debug)]
pub struct AcpIndex {
    path: PathBuf,
}

impl AcpIndex {
    /// The record of the sessions of `cwd` under `session_dir`.
    pub fn of(session_dir: &Path, cwd: &Path) -> Self {
        AcpIndex { path: session_dir.join(cwd_folder_name(cwd)).join(FILE) }
    }

    /// Every id and its file, as recorded (an unreadable record is empty: the links remain).
    pub fn entries(&self) -> BTreeMap<String, PathBuf> {
        let Ok(bytes) = std::fs::read(&self.path) else { return BTreeMap::new() };
        serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %self.path.display(), "an unreadable ACP session record is ignored: {e}");
            BTreeMap::new()
        })
    }

    /// The file `id` goes on in, when recorded and still there.
    /// Only a session file of this folder: a record edited to name another file (a tool told
    /// to write it, say) opens nothing.
    pub fn file_of(&self, id: &str) -> Option<PathBuf> {
        let folder = self.path.parent()?;
        let file = self.entries().remove(id)?;
        let ours = file.parent() == Some(folder) && file.extension().is_some_and(|x| x == "jsonl");
        (ours && file.is_file()).then_some(file)
    }

    /// The file `id` was recorded with when that file was never written: the session
    /// `session/new` made under the id, never prompted (its own file, named for the id, not on
    /// disk). `None` for an id not recorded, or recorded with a file that is there or another's.
    pub fn unwritten(&self, id: &str) -> Option<PathBuf> {
        let file = self.entries().remove(id)?;
        (file.parent() == self.path.parent() && unwritten_own(id, &file)).then_some(file)
    }

    /// Records that `id` goes on in `now`, having left `left`. A file left for one of another
    /// chain (`/new`) gets an id of its own, so that it stays listed and loadable. Entries
    /// whose files are gone are dropped.
    pub fn switched(&self, id: &str, left: Option<&Path>, now: &Path) -> io::Result<()> {
        let mut entries = self.entries();
        entries.insert(id.to_string(), now.to_path_buf());
        if let Some(left) = left.filter(|left| left.is_file() && chain::root(left) != chain::root(now)) {
            if !entries.values().any(|file| file == left) {
                entries.insert(uuid::Uuid::now_v7().to_string(), left.to_path_buf());
            }
        }
        // The file of a session not yet written stays: it appears with the first prompt.
        entries.retain(|key, file| key == id || file.is_file() || unwritten_own(key, file));
        self.write(&entries)
    }

    fn write(&self, entries: &BTreeMap<String, PathBuf>) -> io::Result<()> {
        let Some(dir) = self.path.parent() else { return Err(io::Error::other("no folder for the record")) };
        file::create_private_dir(dir).map_err(io::Error::other)?;
        let text = serde_json::to_vec_pretty(entries).map_err(io::Error::other)?;
        file::replace_private_file(&self.path, &text).map_err(io::Error::other)
    }
}

/// `file` is the own file of the session `id`, not on disk: made and never written.
fn unwritten_own(id: &str, file: &Path) -> bool {
    paths::is_named_for(file, id) && !file.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_left_by_new_gets_an_id_of_its_own_and_one_of_the_same_chain_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = Path::new("/project");
        let record = AcpIndex::of(dir.path(), cwd);
        let folder = dir.path().join(cwd_folder_name(cwd));
        std::fs::create_dir_all(&folder).unwrap();
        let [a, b, c] = ["a", "b", "c"].map(|n| folder.join(format!("{n}.jsonl")));
        let header = |id: &str, parent: Option<&Path>| {
            let mut h = serde_json::json!({ "type": "session", "version": 3, "id": id, "timestamp": "2026-12-01T00:00:00.000Z", "cwd": "/project" });
            if let Some(parent) = parent {
                h["parentSession"] = parent.to_str().unwrap().into();
            }
            format!("{h}\n")
        };
        std::fs::write(&a, header("a", None)).unwrap();
        std::fs::write(&b, header("b", Some(&a))).unwrap();
        std::fs::write(&c, header("c", None)).unwrap();
        record.switched("X", Some(&a), &b).unwrap();
        assert_eq!(record.entries().len(), 1, "a handoff needs no id of its own");
        assert_eq!(record.file_of("X"), Some(b.clone()));
        record.switched("X", Some(&b), &a).unwrap();
        assert_eq!(record.entries().len(), 1, "nor does going back");
        record.switched("X", Some(&a), &c).unwrap();
        let entries = record.entries();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(record.file_of("X"), Some(c.clone()));
        assert!(entries.iter().any(|(id, file)| id != "X" && *file == a), "{entries:?}");
        std::fs::remove_file(&a).unwrap();
        record.switched("X", None, &c).unwrap();
        assert_eq!(record.entries().len(), 1, "an entry whose file is gone is dropped");
        std::fs::write(&record.path, "not json").unwrap();
        assert!(record.entries().is_empty());
    }

    /// Issue 42: a session `session/new` made and nobody prompted has no file; its entry stays
    /// while other ids change, and names the file it will have.
    #[test]
    fn a_session_made_and_never_written_keeps_its_entry() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = Path::new("/project");
        let record = AcpIndex::of(dir.path(), cwd);
        let folder = dir.path().join(cwd_folder_name(cwd));
        let made = paths::session_file_path(dir.path(), cwd, "2026-12-01T00:00:00.000Z", "M");
        record.switched("M", None, &made).unwrap();
        assert_eq!(record.file_of("M"), None, "no file yet");
        assert_eq!(record.unwritten("M"), Some(made.clone()));
        // Another id's change keeps it; a gone file of another id's is dropped.
        let other = folder.join("other.jsonl");
        std::fs::write(&other, "{}\n").unwrap();
        record.switched("O", None, &folder.join("gone.jsonl")).unwrap();
        record.switched("P", None, &other).unwrap();
        let entries = record.entries();
        assert_eq!(entries.get("M"), Some(&made));
        assert!(!entries.contains_key("O"), "{entries:?}");
        // An id recorded with a file of another session's name is not one never written.
        record.switched("X", None, &folder.join("2026_Y.jsonl")).unwrap();
        assert_eq!(record.unwritten("X"), None);
        assert_eq!(record.unwritten("nope"), None);
    }

    #[test]
    fn a_record_naming_a_file_outside_its_folder_opens_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = Path::new("/project");
        let record = AcpIndex::of(dir.path(), cwd);
        let folder = dir.path().join(cwd_folder_name(cwd));
        std::fs::create_dir_all(&folder).unwrap();
        let inside = folder.join("s.jsonl");
        let outside = dir.path().join("planted.jsonl");
        let not_a_session = folder.join("notes.txt");
        for file in [&inside, &outside, &not_a_session] {
            std::fs::write(file, "{}\n").unwrap();
        }
        // As a tool told by a prompt injection would write it.
        let planted = serde_json::json!({ "ours": inside, "out": outside, "up": folder.join("../planted.jsonl"), "txt": not_a_session });
        std::fs::write(&record.path, planted.to_string()).unwrap();
        assert_eq!(record.file_of("ours"), Some(inside));
        assert_eq!(record.file_of("out"), None);
        assert_eq!(record.file_of("up"), None);
        assert_eq!(record.file_of("txt"), None);
    }
}
