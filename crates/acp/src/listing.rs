//! `session/list`: one entry per chain of handoffs, under the id a client knows it by.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::index::AcpIndex;
use super::server::{encode, AcpError, Answer, Server};
use super::sessions::absolute_cwd;
use super::wire;
use handoff_core::session::chain::{Chain, Chains};
use handoff_core::session::{SessionInfo, SessionManager};
use handoff_frontend_paths as frontend_paths;

impl Server {
    /// `session/list`: one entry per chain of handoffs (under its first session's id, which is
    /// the ACP id `session/new` gave it), the newest activity first; chains with nothing said are left out.
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
        let mut sessions: Vec<wire::SessionInfo> = chains(&listed)
            .into_iter()
            .filter_map(|chain| {
                let id = listed_id(&chain, &recorded)?;
                let Chain { root, newest, members } = chain;
                let title = if root.first_message.is_empty() { newest.first_message.clone() } else { root.first_message.clone() };
                // The chain's last activity, wherever it was (after `/back`, in an older member).
                let updated = members.iter().map(|member| &member.updated).max().unwrap_or(&newest.updated);
                Some(
                    wire::SessionInfo::new(id, cwd.clone())
                        .title((!title.is_empty()).then_some(title))
                        .updated_at(updated.clone()),
                )
            })
            .collect();
        // Newest activity first, as clients show the list (the chains come by creation).
        sessions.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
        encode(wire::ListSessionsResponse::new(sessions))
    }
}

/// Each chain of handoffs among `listed` ([`Chains`]: newest first), without the chains where
/// nothing was said.
pub(super) fn chains(listed: &[SessionInfo]) -> Vec<Chain<'_>> {
    let mut chains = Chains::of(listed).chains();
    chains.retain(|c| !(c.root.empty && c.newest.empty));
    chains
}

/// The id `session/list` shows `chain` under: an id recorded as going on in one of its files
/// (the newest such file's), else its first session's id, unless the record sends that id to
/// another chain (it went on elsewhere after `/new`); then its newest session's id.
pub(super) fn listed_id(chain: &Chain<'_>, recorded: &BTreeMap<String, PathBuf>) -> Option<String> {
    let going_on = chain.members.iter().find_map(|member| recorded.iter().find(|(_, f)| *f == &member.path).map(|(id, _)| id));
    if let Some(id) = going_on {
        return Some(id.clone());
    }
    [&chain.root.id, &chain.newest.id].into_iter().find(|id| !recorded.contains_key(id.as_str())).cloned()
}

/// The newest session of the chain that holds the session of `id` (its first session's id is
/// the ACP id): the file `session/load` opens.
pub(super) fn newest_of_chain(session_dir: &Path, cwd: &Path, id: &str) -> Result<PathBuf, AcpError> {
    let listed = SessionManager::list_sessions(session_dir, cwd).map_err(|e| AcpError::Failed(e.to_string()))?;
    let newest = Chains::of(&listed).chain_of(id).map(|chain| chain.newest.path.clone());
    newest.ok_or_else(|| AcpError::UnknownSession(id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, parent: Option<&str>, empty: bool) -> SessionInfo {
        SessionInfo::listed(id, parent, empty)
    }

    #[test]
    fn a_chain_of_handoffs_is_listed_once_under_its_first_session() {
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

    /// Bug: `session/load` followed the newest child of each session from the first one, so a
    /// chain that branched (`/back`, then another handoff) opened another file than the one
    /// `session/list` dated the chain by. Both now take the chain's newest session.
    #[test]
    fn load_opens_the_newest_session_of_a_branched_chain() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = Path::new("/p");
        let folder = dir.path().join(handoff_core::session::paths::cwd_folder_name(cwd));
        std::fs::create_dir_all(&folder).unwrap();
        // a ⇠ b ⇠ d and a ⇠ c; d is the newest of all, c newer than b.
        let write = |id: &str, minute: u32, parent: Option<&str>| {
            let parent = parent.map(|p| format!(r#","parentSession":"{}""#, folder.join(format!("{p}.jsonl")).display()));
            let header = format!(
                r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T10:{minute:02}:00.000Z","cwd":"/p"{}}}"#,
                parent.unwrap_or_default()
            );
            let said = format!(r#"{{"type":"message","id":"m{id}","parentId":null,"timestamp":"t","message":{{"role":"user","content":"in {id}"}}}}"#);
            std::fs::write(folder.join(format!("{id}.jsonl")), format!("{header}\n{said}\n")).unwrap();
        };
        write("a", 0, None);
        write("b", 1, Some("a"));
        write("c", 2, Some("a"));
        write("d", 3, Some("b"));
        assert_eq!(newest_of_chain(dir.path(), cwd, "a").unwrap(), folder.join("d.jsonl"));
        let listed = SessionManager::list_sessions(dir.path(), cwd).unwrap();
        let chains = chains(&listed);
        assert_eq!(chains.len(), 1);
        assert_eq!(chains[0].newest.id, "d");
    }
}
