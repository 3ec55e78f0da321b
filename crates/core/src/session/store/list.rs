//! Listing the sessions of a working directory (the picker, `handoff-nvim sessions`, ACP's
//! `session/list`): each file is loaded (its lines skimmed, `session::skim`) and its current
//! branch summarized, once per version of the file; the newest session, by headers alone.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use super::SessionManager;
use crate::message::Role;
use crate::parallel::map_in_parallel;
use crate::session::entry::kind;
use crate::session::{derived, paths, scan, SessionError};
use crate::sync::lock;

/// What `list_sessions` reports of one session file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SessionInfo {
    pub id: String,
    pub path: PathBuf,
    pub cwd: String,
    /// When it was made (its header's time).
    pub timestamp: String,
    /// Its last activity: the time of its last entry (the header's for a session without one).
    pub updated: String,
    /// The session this one was handed off from, under pi's name for it (`null` for none), so a
    /// chain can be followed in `handoff-nvim sessions`' JSON lines.
    #[serde(rename = "parentSession")]
    pub parent_session: Option<String>,
    /// Text of the first user message (first line, trimmed), or empty.
    pub first_message: String,
    /// Messages on the current branch (the count the handoff's guard checks).
    pub message_count: usize,
    /// Nothing was said in it yet (no message, no injected context such as a handoff).
    pub empty: bool,
}

#[cfg(any(test, feature = "testing"))]
impl SessionInfo {
    /// A listed session for tests of what reads listings: `/s/<id>.jsonl` in `/p`, handed off
    /// from `/s/<parent>.jsonl`; one message, or none when `empty`.
    pub fn listed(id: &str, parent: Option<&str>, empty: bool) -> SessionInfo {
        SessionInfo {
            id: id.into(),
            path: PathBuf::from(format!("/s/{id}.jsonl")),
            cwd: "/p".into(),
            timestamp: format!("t-{id}"),
            updated: format!("t-{id}"),
            parent_session: parent.map(|p| format!("/s/{p}.jsonl")),
            first_message: format!("first of {id}"),
            message_count: usize::from(!empty),
            empty,
        }
    }
}

impl SessionManager {
    /// Sessions stored for `cwd`, newest first. A file is summarized once for each (size,
    /// modification time) it has: the summaries are kept for the life of the process, so a
    /// listing reads only the files written since the last one (sessions are append-only: a
    /// change of content is a change of size).
    pub fn list_sessions(session_dir: &Path, cwd: &Path) -> Result<Vec<SessionInfo>, SessionError> {
        let dir = session_dir.join(paths::cwd_folder_name(cwd));
        let files = session_files(&dir)?;
        let (mut sessions, changed) = {
            let listed: HashSet<&Path> = files.iter().map(|(p, _)| p.as_path()).collect();
            let mut cache = lock(summaries());
            // Files gone from the folder are forgotten.
            cache.retain(|path, _| path.parent() != Some(dir.as_path()) || listed.contains(path.as_path()));
            let mut known = Vec::with_capacity(files.len());
            let mut changed = Vec::new();
            drop(listed);
            for (path, stamp) in files {
                match cache.get(&path).filter(|(s, _)| *s == stamp) {
                    Some((_, info)) => known.push(info.clone()),
                    None => changed.push((path, stamp)),
                }
            }
            (known, changed)
        };
        // The files not summarized yet, on all cores (a first listing of a large folder).
        let summarized = map_in_parallel(&changed, changed.len() > 1, |(path, _)| summarize(path).ok());
        let mut cache = lock(summaries());
        for ((path, stamp), info) in changed.into_iter().zip(summarized) {
            if let Some(info) = info {
                cache.insert(path, (stamp, info.clone()));
                sessions.push(info);
            }
        }
        drop(cache);
        sessions.sort_by(newest_first);
        Ok(sessions)
    }

    /// The newest session stored for `cwd` (by its header's time, as [`Self::list_sessions`]
    /// orders them): only each file's header is read.
    pub fn newest_session(session_dir: &Path, cwd: &Path) -> Result<Option<PathBuf>, SessionError> {
        let dir = session_dir.join(paths::cwd_folder_name(cwd));
        let newest = session_files(&dir)?
            .into_iter()
            .filter_map(|(path, _)| scan::read_header(&path).ok().map(|header| (header.timestamp, path)))
            .max();
        Ok(newest.map(|(_, path)| path))
    }
}

/// When a file last changed, as far as a listing can tell: its size and modification time.
type Stamp = (u64, Option<SystemTime>);

/// The summaries made so far, by file, with the stamp each was made at.
fn summaries() -> &'static Mutex<HashMap<PathBuf, (Stamp, SessionInfo)>> {
    static SUMMARIES: OnceLock<Mutex<HashMap<PathBuf, (Stamp, SessionInfo)>>> = OnceLock::new();
    SUMMARIES.get_or_init(Mutex::default)
}

/// The session files of a project's folder (`*.jsonl`, regular files or links to one), stamped.
fn session_files(dir: &Path) -> Result<Vec<(PathBuf, Stamp)>, SessionError> {
    let read = match fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SessionError::Io { path: dir.to_path_buf(), source: e }),
    };
    Ok(read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| {
            let meta = fs::metadata(&p).ok().filter(fs::Metadata::is_file)?;
            Some((p, (meta.len(), meta.modified().ok())))
        })
        .collect())
}

/// Newest first: by the header's time, then by path.
fn newest_first(a: &SessionInfo, b: &SessionInfo) -> std::cmp::Ordering {
    b.timestamp.cmp(&a.timestamp).then_with(|| b.path.cmp(&a.path))
}

/// Summarizes a session file for `list_sessions`: its current branch, as resuming it shows it
/// (the message count is the one the handoff's guard checks: [`derived::message_count`]).
fn summarize(path: &Path) -> Result<SessionInfo, SessionError> {
    let session = SessionManager::load(path, Path::new(""))?;
    let branch = session.get_branch(None);
    let empty = !branch.iter().any(|e| e.is_message() || e.kind == kind::CUSTOM_MESSAGE);
    // Roles are read without parsing the messages; only the first user message is.
    let first_message = branch
        .iter()
        .filter(|e| e.message_role() == Some(Role::User))
        .filter_map(|e| e.message())
        .find(|m| derived::author(m).is_user())
        .map(|m| m.text().lines().next().unwrap_or_default().trim().to_string())
        .unwrap_or_default();
    let message_count = derived::message_count(&branch);
    let header = session.header();
    let updated = session.get_entries().iter().rev().map(|e| e.timestamp.as_str()).find(|t| !t.is_empty());
    Ok(SessionInfo {
        id: header.id.clone(),
        path: path.to_path_buf(),
        cwd: header.cwd.clone(),
        timestamp: header.timestamp.clone(),
        updated: updated.unwrap_or(&header.timestamp).to_string(),
        parent_session: header.parent_session.clone(),
        first_message,
        message_count,
        empty,
    })
}
