//! Listing the sessions of a working directory (the picker, `handoff-nvim sessions`): each
//! file is read just far enough to summarize it.

use std::fs;
use std::path::{Path, PathBuf};

use super::file::io_err;
use super::parse::parse_file;
use super::SessionManager;
use crate::core::message::Role;
use crate::core::session::entry::{kind, SessionEntry};
use crate::core::session::{paths, SessionError};

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
