//! The agent's sessions: one ACP session per controller, opened as every front end opens one
//! (`controller::open_for`, the client's MCP servers added), with its consent and files through
//! the client; `session/new`, `session/load` (replayed), `session/resume`, `session/close`;
//! the record of the file an id goes on in.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::commands::send_commands_later;
use super::listing::newest_of_chain;
use super::index::AcpIndex;
use super::client;
use super::server::{encode, params, AcpError, Answer, Server};
use super::updates::{self, spawn_translator, Flusher, Translator, Updates};
use super::wire;
use handoff_core::config::Settings;
use handoff_core::controller::{self, Controller, FrontEndTexts, OpenedFor, SessionChoice};
use handoff_core::handoff::AutoHandoff;
use handoff_core::sync::lock;
use handoff_frontend_paths as frontend_paths;

/// One ACP session: the controller behind it and what the prompt in flight needs.
pub(super) struct AcpSession {
    pub(super) controller: Arc<Controller>,
    pub(super) flusher: Flusher,
    /// `session/cancel` arrived for the prompt in flight (or a question was answered
    /// `cancelled`).
    pub(super) cancelled: Arc<AtomicBool>,
    /// One prompt at a time: a second waits for the first's answer.
    pub(super) prompt: tokio::sync::Mutex<()>,
    pub(super) updates: Updates,
    /// Where the file behind the id is recorded, and that file when last recorded.
    pub(super) record: AcpIndex,
    pub(super) file: Mutex<PathBuf>,
}

impl AcpSession {
    /// Records the file behind the id when it changed since (a handoff, `/new`, `/back`): a
    /// later `session/load` of the id opens it.
    pub(super) async fn record_file(&self) {
        let now = self.controller.agent().session().path().to_path_buf();
        let left = std::mem::replace(&mut *lock(&self.file), now.clone());
        if left == now {
            return;
        }
        self.record(Some(left), now).await;
    }

    /// Records the file a session `session/new` just made will have: its id loads in another
    /// process before the file is written ([`AcpIndex::unwritten`]).
    pub(super) async fn record_made(&self) {
        let file = lock(&self.file).clone();
        self.record(None, file).await;
    }

    async fn record(&self, left: Option<PathBuf>, now: PathBuf) {
        let (record, id) = (self.record.clone(), self.updates.session_id.clone());
        let written = tokio::task::spawn_blocking(move || record.switched(&id, left.as_deref(), &now)).await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("cannot record the session file behind an ACP id: {e}"),
            Err(e) => tracing::error!("the session record stopped: {e}"),
        }
    }

    /// Waits until every event emitted so far has been sent as an update.
    pub(super) async fn flushed(&self) {
        self.flusher.flushed().await;
    }
}

impl Server {
    /// Opens `choice` for `cwd` with the client's MCP servers beside ours, its consent and
    /// file access through the client, and registers it as `id` (or the new session's own id).
    pub(super) async fn open(
        self: &Arc<Self>,
        cwd: PathBuf,
        choice: SessionChoice,
        client_servers: Vec<Value>,
        id: Option<String>,
    ) -> Result<(String, Arc<AcpSession>), AcpError> {
        let settings = self.settings.clone();
        let opened = {
            let cwd = cwd.clone();
            tokio::task::spawn_blocking(move || open_agent(&settings, &cwd, choice, &client_servers))
                .await
                .map_err(|e| AcpError::Failed(format!("the loader stopped: {e}")))?
                .map_err(AcpError::Failed)?
        };
        for warning in &opened.warnings {
            tracing::warn!("{warning}");
        }
        let agent = opened.agent;
        let id = id.unwrap_or_else(|| agent.session().session_id().to_string());
        let client = lock(&self.client).clone();
        // The prompt's own words: an ACP client types `/handoff` as the editor's prompt does.
        let texts = FrontEndTexts::default();
        let updates = Updates { peer: self.peer.clone(), session_id: id.clone() };
        let compaction = reports_compaction(&client);
        let translator = Translator::new(updates.clone(), compaction, cwd.clone(), &agent, texts.clone());
        let flusher = spawn_translator(translator, agent.subscribe());
        let cancelled = Arc::new(AtomicBool::new(false));
        let requests = client::SessionRequests { peer: self.peer.clone(), session_id: id.clone(), flusher: flusher.clone() };
        agent.set_consent(client::ClientConsent::new(requests.clone(), cancelled.clone()));
        agent.set_file_access(Arc::new(client::ClientFiles {
            requests,
            read: client.fs.read_text_file,
            write: client.fs.write_text_file,
        }));
        let controller = Controller::new(agent.clone(), texts.clone());
        // A review needs an editor buffer to write the document in: ACP has none, so the
        // handoff at the wall goes on as with `continue`.
        controller.set_auto_handoff(match self.settings.auto_handoff() {
            AutoHandoff::Review => AutoHandoff::Continue,
            mode => mode,
        });
        let session = Arc::new(AcpSession {
            controller,
            flusher,
            cancelled,
            prompt: tokio::sync::Mutex::new(()),
            updates,
            record: AcpIndex::of(&frontend_paths::session_dir(&self.settings), &cwd),
            file: Mutex::new(agent.session().path().to_path_buf()),
        });
        if let Some(old) = lock(&self.sessions).insert(id.clone(), session.clone()) {
            old.controller.abort();
        }
        Ok((id, session))
    }

    pub(super) async fn new_session(self: &Arc<Self>, raw: Value) -> Answer {
        let request: wire::NewSessionRequest = params(raw.clone())?;
        let cwd = absolute_cwd(&request.cwd)?;
        let servers = client_servers(&raw);
        let (id, session) = self.open(cwd, SessionChoice::New, servers, None).await?;
        session.record_made().await;
        send_commands_later(session.updates.clone(), self.settings.templates_dir.clone());
        encode(wire::NewSessionResponse::new(id))
    }

    /// The session of `id` for `session/load` and `session/resume`: open here already, else the
    /// file the record says it goes on in, else the newest of its chain on disk, else (a session
    /// `session/new` made and nobody prompted) a new session under the id.
    pub(super) async fn reopen(self: &Arc<Self>, id: &str, cwd: &Path, raw: &Value) -> Result<Arc<AcpSession>, AcpError> {
        if let Some(session) = lock(&self.sessions).get(id).cloned() {
            return Ok(session);
        }
        let dir = frontend_paths::session_dir(&self.settings);
        let (find_id, find_cwd) = (id.to_string(), cwd.to_path_buf());
        let found = tokio::task::spawn_blocking(move || {
            let record = AcpIndex::of(&dir, &find_cwd);
            if let Some(file) = record.file_of(&find_id) {
                return Ok(Found::File(file));
            }
            match newest_of_chain(&dir, &find_cwd, &find_id) {
                Ok(file) => Ok(Found::File(file)),
                Err(unknown) => record.unwritten(&find_id).map(Found::Unwritten).ok_or(unknown),
            }
        })
        .await
        .map_err(|e| AcpError::Failed(format!("the loader stopped: {e}")))??;
        let servers = client_servers(raw);
        let (choice, unwritten) = match found {
            Found::File(file) => (SessionChoice::File(file), None),
            Found::Unwritten(file) => (SessionChoice::New, Some(file)),
        };
        let session = self.open(cwd.to_path_buf(), choice, servers, Some(id.to_string())).await?.1;
        if let Some(file) = unwritten {
            // The id stays recorded with the file it was made with until the new session's own
            // file is written (the first prompt): then it goes on in that one.
            *lock(&session.file) = file;
        }
        Ok(session)
    }

    /// `session/load`: the session of this id replayed as updates; then answered.
    pub(super) async fn load_session(self: &Arc<Self>, raw: Value) -> Answer {
        let request: wire::LoadSessionRequest = params(raw.clone())?;
        let cwd = absolute_cwd(&request.cwd)?;
        let session = self.reopen(&request.session_id.0, &cwd, &raw).await?;
        {
            let agent = session.controller.agent();
            // Read before the session is locked (they read its header).
            let tools = agent.offered_tools();
            let manager = agent.session();
            let branch = manager.get_branch(None);
            let compaction = reports_compaction(&lock(&self.client));
            updates::replay(&session.updates, &branch, &cwd, &manager.todos(), &tools, compaction);
        }
        session.flushed().await;
        send_commands_later(session.updates.clone(), self.settings.templates_dir.clone());
        encode(wire::LoadSessionResponse::new())
    }

    /// `session/resume`: as `session/load`, without the replay (the client shows the
    /// conversation it kept).
    pub(super) async fn resume_session(self: &Arc<Self>, raw: Value) -> Answer {
        let request: wire::ResumeSessionRequest = params(raw.clone())?;
        let cwd = absolute_cwd(&request.cwd)?;
        let session = self.reopen(&request.session_id.0, &cwd, &raw).await?;
        send_commands_later(session.updates.clone(), self.settings.templates_dir.clone());
        encode(wire::ResumeSessionResponse::new())
    }

    /// `session/close`: stops what the session runs, answers its pending questions as
    /// cancelled, writes what it holds, and forgets the id in this process (the files stay:
    /// `session/load` opens it again).
    pub(super) async fn close_session(&self, request: wire::CloseSessionRequest) -> Answer {
        let id = request.session_id.0.to_string();
        let Some(session) = lock(&self.sessions).remove(&id) else {
            return Err(AcpError::UnknownSession(id));
        };
        session.cancelled.store(true, Ordering::SeqCst);
        session.controller.abort();
        // The prompt in flight ends (and records its file) before the session is written.
        let _ = session.prompt.lock().await;
        let agent = session.controller.agent();
        if let Err(e) = agent.session().flush() {
            tracing::error!("cannot flush a closed session: {e}");
        }
        encode(wire::CloseSessionResponse::new())
    }
}

/// The client reports compactions (`session.compaction`): a handoff is shown as one.
fn reports_compaction(client: &wire::ClientCapabilities) -> bool {
    client.session.as_ref().is_some_and(|s| s.compaction.is_some())
}

/// Where the session of an id is.
enum Found {
    File(PathBuf),
    /// Made by `session/new` and never written: recorded with this file.
    Unwritten(PathBuf),
}

pub(super) fn absolute_cwd(cwd: &Path) -> Result<PathBuf, AcpError> {
    if !cwd.is_absolute() {
        return Err(AcpError::InvalidParams(format!("cwd must be an absolute path, not {}", cwd.display())));
    }
    Ok(cwd.to_path_buf())
}

/// The MCP servers the client passed (`mcpServers`), as entries of Claude Code's format.
pub(super) fn client_servers(raw: &Value) -> Vec<Value> {
    raw.get("mcpServers").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// One client server as `(name, entry)` of Claude Code's format; `None` for a transport we do
/// not speak (SSE).
pub(super) fn mcp_entry(server: &Value) -> Option<(String, Value)> {
    let name = server.get("name")?.as_str()?.to_string();
    let pairs = |key: &str| -> Map<String, Value> {
        let list = server.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
        list.iter()
            .filter_map(|p| Some((p.get("name")?.as_str()?.to_string(), p.get("value")?.clone())))
            .collect()
    };
    match server.get("type").and_then(Value::as_str) {
        None | Some("stdio") => {
            let command = server.get("command")?.clone();
            let args = server.get("args").cloned().unwrap_or(Value::Array(Vec::new()));
            Some((name, serde_json::json!({ "command": command, "args": args, "env": pairs("env") })))
        }
        Some("http") => {
            let url = server.get("url")?.clone();
            Some((name, serde_json::json!({ "type": "http", "url": url, "headers": pairs("headers") })))
        }
        Some(other) => {
            tracing::warn!(%name, transport = %other, "an MCP server of a transport we do not speak was left out");
            None
        }
    }
}

/// Opens the chosen session as the CLI does (`controller::open_for`: the same AGENTS.md, MCP
/// files and `--thinking`), with the client's MCP servers added to the configured ones.
pub(super) fn open_agent(settings: &Settings, cwd: &Path, choice: SessionChoice, client_servers: &[Value]) -> Result<OpenedFor, String> {
    let mut front_end = frontend_paths::front_end(settings);
    front_end.mcp_servers = client_servers.iter().filter_map(mcp_entry).collect();
    controller::open_for(&front_end, settings, cwd, choice).map_err(|failure| failure.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    pub(super) fn client_mcp_servers_become_entries_of_claude_codes_format() {
        let stdio = json!({ "name": "fs", "command": "/bin/srv", "args": ["-v"], "env": [{ "name": "A", "value": "1" }] });
        assert_eq!(mcp_entry(&stdio), Some(("fs".into(), json!({ "command": "/bin/srv", "args": ["-v"], "env": { "A": "1" } }))));
        let http = json!({ "type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": [{ "name": "X", "value": "y" }] });
        assert_eq!(
            mcp_entry(&http),
            Some(("web".into(), json!({ "type": "http", "url": "http://127.0.0.1:1/mcp", "headers": { "X": "y" } })))
        );
        assert_eq!(mcp_entry(&json!({ "type": "sse", "name": "old", "url": "http://x" })), None);
        assert_eq!(mcp_entry(&json!({ "command": "no name" })), None);
    }
}
