//! Listing the sessions of a working directory (the picker, `handoff-nvim sessions`): each
//! file is loaded and its current branch summarized.

use std::fs;
use std::path::{Path, PathBuf};

use super::SessionManager;
use crate::core::message::Role;
use crate::core::session::entry::kind;
use crate::core::session::{derived, paths, SessionError};

/// What `list_sessions` reports of one session file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SessionInfo {
    pub id: String,
    pub path: PathBuf,
    pub cwd: String,
    pub timestamp: String,
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

impl SessionManager {
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
    Ok(SessionInfo {
        id: header.id.clone(),
        path: path.to_path_buf(),
        cwd: header.cwd.clone(),
        timestamp: header.timestamp.clone(),
        parent_session: header.parent_session.clone(),
        first_message,
        message_count,
        empty,
    })
}
