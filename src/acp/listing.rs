//! `session/list`: one entry per chain of handoffs, under the id a client knows it by.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::index::AcpIndex;
use super::server::{encode, AcpError, Answer, Server};
use super::sessions::absolute_cwd;
use super::wire;
use crate::core::session::{SessionInfo, SessionManager};
use crate::frontend_paths;

impl Server {
    /// `session/list`: one entry per chain of handoffs (under its first session's id, which is
    /// the ACP id `session/new` gave it), newest first; chains with nothing said are left out.
    pub(super) async fn list_sessions(&self, request: wire::ListSessionsRequest) -> Answer {
        let cwd = match request.cwd {
            Some(cwd) => absolute_cwd(&cwd)?,
            None => std::env::current_dir().map_err(|e| AcpError::Failed(e.to_string()))?,
        };
        let dir = frontend_paths::session_dir(&self.settings);
        let list_cwd = cwd.clone();
        let (listed, recorded) = tokio::task::spawn_blocking(move || {
            let recorded = AcpIndex::of(&dir, &list_cwd).entries();
            SessionManager::list_sessions(&dir, &list_cwd).map(|listed| (listed, recorded))
        })
        .await
        .map_err(|e| AcpError::Failed(e.to_string()))?
        .map_err(|e| AcpError::Failed(e.to_string()))?;
        let sessions = chains(&listed)
            .into_iter()
            .filter_map(|chain| {
                let id = listed_id(&chain, &recorded)?;
                let Chain { root, newest, .. } = chain;
                let title = if root.first_message.is_empty() { newest.first_message.clone() } else { root.first_message.clone() };
                Some(
                    wire::SessionInfo::new(id, cwd.clone())
                        .title((!title.is_empty()).then_some(title))
                        .updated_at(newest.timestamp.clone()),
                )
            })
            .collect();
        encode(wire::ListSessionsResponse::new(sessions))
    }
}

/// A chain of handoffs among the listed sessions.
pub(super) struct Chain<'a> {
    pub(super) root: &'a SessionInfo,
    pub(super) newest: &'a SessionInfo,
    /// Its files, newest first.
    pub(super) members: Vec<&'a Path>,
}

/// Each chain of handoffs among `listed` (newest first), newest first.
pub(super) fn chains(listed: &[SessionInfo]) -> Vec<Chain<'_>> {
    let by_path: HashMap<&Path, &SessionInfo> = listed.iter().map(|s| (s.path.as_path(), s)).collect();
    pub(super) fn root_of<'a>(mut info: &'a SessionInfo, by_path: &HashMap<&Path, &'a SessionInfo>) -> &'a SessionInfo {
        // A chain is as long as the folder's sessions at most: a loop in the links ends there.
        for _ in 0..by_path.len() {
            match info.parent_session.as_deref().and_then(|p| by_path.get(Path::new(p))) {
                Some(parent) => info = parent,
                None => break,
            }
        }
        info
    }
    let mut chains: Vec<Chain<'_>> = Vec::new();
    for info in listed {
        let root = root_of(info, &by_path);
        match chains.iter_mut().find(|c| c.root.path == root.path) {
            Some(chain) => chain.members.push(&info.path),
            // The first met is the newest of its chain: the list is newest first.
            None => chains.push(Chain { root, newest: info, members: vec![&info.path] }),
        }
    }
    chains.retain(|c| !(c.root.empty && c.newest.empty));
    chains
}

/// The id `session/list` shows `chain` under: an id recorded as going on in one of its files
/// (the newest such file's), else its first session's id, unless the record sends that id to
/// another chain (it went on elsewhere after `/new`); then its newest session's id.
pub(super) fn listed_id(chain: &Chain<'_>, recorded: &BTreeMap<String, PathBuf>) -> Option<String> {
    let going_on = chain.members.iter().find_map(|file| recorded.iter().find(|(_, f)| f.as_path() == *file).map(|(id, _)| id));
    if let Some(id) = going_on {
        return Some(id.clone());
    }
    [&chain.root.id, &chain.newest.id].into_iter().find(|id| !recorded.contains_key(id.as_str())).cloned()
}

/// The newest session of the chain whose first session has `id` (or that holds a session of
/// `id`): the file `session/load` opens.
pub(super) fn newest_of_chain(session_dir: &Path, cwd: &Path, id: &str) -> Result<PathBuf, AcpError> {
    let listed = SessionManager::list_sessions(session_dir, cwd).map_err(|e| AcpError::Failed(e.to_string()))?;
    let Some(start) = listed.iter().find(|s| s.id == id) else {
        return Err(AcpError::UnknownSession(id.to_string()));
    };
    let mut newest = start;
    for _ in 0..listed.len() {
        let child = listed.iter().find(|s| s.parent_session.as_deref().map(Path::new) == Some(newest.path.as_path()));
        match child {
            Some(child) => newest = child,
            None => break,
        }
    }
    Ok(newest.path.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn info(id: &str, parent: Option<&str>, empty: bool) -> SessionInfo {
        SessionInfo {
            id: id.into(),
            path: PathBuf::from(format!("/s/{id}.jsonl")),
            cwd: "/p".into(),
            timestamp: format!("t-{id}"),
            parent_session: parent.map(|p| format!("/s/{p}.jsonl")),
            first_message: format!("first of {id}"),
            message_count: usize::from(!empty),
            empty,
        }
    }

    #[test]
    pub(super) fn a_chain_of_handoffs_is_listed_once_under_its_first_session() {
        // Newest first: c was handed off from b, b from a; d stands alone; e is empty.
        let listed = vec![info("e", None, true), info("c", Some("b"), false), info("d", None, false), info("b", Some("a"), false), info("a", None, false)];
        let found: Vec<(&str, &str)> = chains(&listed).into_iter().map(|c| (c.root.id.as_str(), c.newest.id.as_str())).collect();
        assert_eq!(found, [("a", "c"), ("d", "d")]);
        let none = BTreeMap::new();
        let ids: Vec<Option<String>> = chains(&listed).iter().map(|c| listed_id(c, &none)).collect();
        assert_eq!(ids, [Some("a".into()), Some("d".into())]);
        // `a`'s id went on in `d` after `/new`; `a`'s chain kept an id of its own.
        let recorded = BTreeMap::from([("a".to_string(), PathBuf::from("/s/d.jsonl")), ("kept".to_string(), PathBuf::from("/s/a.jsonl"))]);
        let ids: Vec<Option<String>> = chains(&listed).iter().map(|c| listed_id(c, &recorded)).collect();
        assert_eq!(ids, [Some("kept".into()), Some("a".into())]);
        // A loop in the links (files edited by hand) ends instead of hanging; each is listed.
        let looped = vec![info("x", Some("y"), false), info("y", Some("x"), false)];
        assert_eq!(chains(&looped).len(), 2);
    }
}
