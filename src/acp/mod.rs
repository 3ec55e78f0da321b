//! `handoff-nvim acp`: the Agent Client Protocol (v1) on stdin/stdout, a third front end beside
//! the Neovim host and the CLI, so that any ACP client (Zed, codecompanion.nvim, avante.nvim, …)
//! drives the same controller: prompts, `/handoff` and the automatic handoff, consent, the
//! sandbox, sessions pi resumes.
//!
//! The ACP `sessionId` is the id of the session file `session/new` created. A handoff, `/new`
//! or `/back` changes the file behind it (the controller's agent switches), never the id:
//! `session/load` of the id in a later process opens the file the id went on in
//! ([`record::Record`]), else the newest session of its chain (the `parentSession` links).
//! Nothing but JSON-RPC goes to stdout (`rpc.rs` owns it); logs go to `--log-file`.

mod record;
mod rpc;
mod seams;
mod text;
mod updates;
pub mod wire;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::core::agent::{AgentEvent, AssistantMessageEvent};
use crate::core::config::Settings;
use crate::core::controller::{self, Controller, FrontEndTexts, OpenedFor, Ran, SessionChoice, SlashCommand};
use crate::core::handoff::{AutoHandoff, HandoffOutcome};
use crate::core::message::StopReason as ReplyStop;
use crate::core::session::chain::{Chain, Chains};
use crate::core::session::{SessionInfo, SessionManager};
use crate::core::sync::lock;
use crate::frontend_paths;
use record::Record;
use rpc::{Incoming, Peer};
use updates::{Translator, Updates};
use wire::{code, method, RpcError, StopReason};

/// How long after answering `session/new` (or `session/load`) the command list is sent: Zed
/// drops updates for a session it has not registered yet.
const COMMANDS_DELAY: Duration = Duration::from_millis(50);

/// Errors of this front end, each answered as a JSON-RPC error.
#[derive(Debug, thiserror::Error)]
enum AcpError {
    #[error("Invalid params: {0}")]
    InvalidParams(String),
    #[error("{}", text::unknown_session(.0))]
    UnknownSession(String),
    #[error("Method not found: {0}")]
    UnknownMethod(String),
    #[error("{0}")]
    Failed(String),
}

impl AcpError {
    fn into_rpc(self) -> RpcError {
        let code = match &self {
            AcpError::InvalidParams(_) => code::INVALID_PARAMS,
            AcpError::UnknownSession(_) => code::RESOURCE_NOT_FOUND,
            AcpError::UnknownMethod(_) => code::METHOD_NOT_FOUND,
            AcpError::Failed(_) => code::INTERNAL_ERROR,
        };
        let data = match &self {
            AcpError::UnknownSession(id) => Some(serde_json::json!({ "sessionId": id })),
            _ => None,
        };
        RpcError::new(code, self.to_string()).data(data)
    }
}

type Answer = Result<Value, AcpError>;

fn params<T: DeserializeOwned>(params: Value) -> Result<T, AcpError> {
    serde_json::from_value(params).map_err(|e| AcpError::InvalidParams(e.to_string()))
}

fn encode(value: impl Serialize) -> Answer {
    serde_json::to_value(value).map_err(|e| AcpError::Failed(e.to_string()))
}

/// A flush request to a session's translator: every event emitted so far is sent before the
/// answer (a prompt's updates go out before its `stopReason`).
type Flush = oneshot::Sender<()>;

/// One ACP session: the controller behind it and what the prompt in flight needs.
struct AcpSession {
    controller: Arc<Controller>,
    flush: mpsc::UnboundedSender<Flush>,
    /// `session/cancel` arrived for the prompt in flight (or a question was answered
    /// `cancelled`).
    cancelled: Arc<AtomicBool>,
    /// One prompt at a time: a second waits for the first's answer.
    prompt: tokio::sync::Mutex<()>,
    updates: Updates,
    /// Where the file behind the id is recorded, and that file when last recorded.
    record: Record,
    file: Mutex<PathBuf>,
}

impl AcpSession {
    /// Records the file behind the id when it changed since (a handoff, `/new`, `/back`): a
    /// later `session/load` of the id opens it.
    async fn record_file(&self) {
        let now = self.controller.agent().session().path().to_path_buf();
        let left = std::mem::replace(&mut *lock(&self.file), now.clone());
        if left == now {
            return;
        }
        let (record, id) = (self.record.clone(), self.updates.session_id.clone());
        let written = tokio::task::spawn_blocking(move || record.switched(&id, Some(&left), &now)).await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("cannot record the session file behind an ACP id: {e}"),
            Err(e) => tracing::error!("the session record stopped: {e}"),
        }
    }

    /// Waits until every event emitted so far has been sent as an update.
    async fn flushed(&self) {
        let (tx, rx) = oneshot::channel();
        if self.flush.send(tx).is_ok() {
            let _ = rx.await;
        }
    }
}

struct Server {
    peer: Peer,
    settings: Settings,
    client: Mutex<wire::ClientCapabilities>,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
}

/// Serves one ACP client on stdin/stdout until it closes stdin; then stops what runs and
/// flushes every session.
pub async fn serve(settings: Settings) -> anyhow::Result<()> {
    let (peer, writer) = Peer::new();
    let server = Arc::new(Server {
        peer: peer.clone(),
        settings,
        client: Mutex::new(wire::ClientCapabilities::default()),
        sessions: Mutex::new(HashMap::new()),
    });
    tracing::info!(pid = std::process::id(), "ACP agent started");
    rpc::read_lines(&peer, |incoming| match incoming {
        Incoming::Request { id, method, params } => {
            let server = server.clone();
            crate::core::task::spawn("an ACP request", async move {
                tracing::debug!(%method, "request");
                let answer = server.answer(&method, params).await;
                server.peer.respond(id, answer.map_err(AcpError::into_rpc));
            });
        }
        Incoming::Notification { method, params } => server.notified(&method, params),
    })
    .await;
    tracing::info!("the client closed stdin");
    peer.fail_pending();
    let sessions: Vec<Arc<AcpSession>> = lock(&server.sessions).values().cloned().collect();
    for session in sessions {
        session.controller.abort();
        if let Err(e) = session.controller.agent().session().flush() {
            tracing::error!("cannot flush a session at exit: {e}");
        }
        // A prompt cut off by the exit may have handed off before it ends.
        session.record_file().await;
    }
    drop(server);
    drop(peer);
    let _ = tokio::time::timeout(Duration::from_millis(200), writer).await;
    Ok(())
}

impl Server {
    async fn answer(self: &Arc<Self>, name: &str, params_: Value) -> Answer {
        match name {
            method::INITIALIZE => self.initialize(params(params_)?),
            method::AUTHENTICATE => encode(wire::AuthenticateResponse::default()),
            method::SESSION_NEW => self.new_session(params_).await,
            method::SESSION_LOAD => self.load_session(params_).await,
            method::SESSION_RESUME => self.resume_session(params_).await,
            method::SESSION_CLOSE => self.close_session(params(params_)?).await,
            method::SESSION_LIST => self.list_sessions(params(params_)?).await,
            method::SESSION_PROMPT => self.prompt(params(params_)?).await,
            other => Err(AcpError::UnknownMethod(other.to_string())),
        }
    }

    fn notified(&self, name: &str, params_: Value) {
        match name {
            method::SESSION_CANCEL => match params::<wire::CancelNotification>(params_) {
                Ok(cancel) => {
                    let session = lock(&self.sessions).get(cancel.session_id.0.as_ref()).cloned();
                    match session {
                        Some(session) => {
                            session.cancelled.store(true, Ordering::SeqCst);
                            session.controller.abort();
                        }
                        None => tracing::info!(id = %cancel.session_id, "cancel for an unknown session"),
                    }
                }
                Err(e) => tracing::warn!("session/cancel: {e}"),
            },
            other => tracing::info!(method = %other, "notification ignored"),
        }
    }

    fn session(&self, id: &wire::SessionId) -> Result<Arc<AcpSession>, AcpError> {
        lock(&self.sessions).get(id.0.as_ref()).cloned().ok_or_else(|| AcpError::UnknownSession(id.0.to_string()))
    }

    fn initialize(&self, request: wire::InitializeRequest) -> Answer {
        *lock(&self.client) = request.client_capabilities;
        let capabilities = wire::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(wire::PromptCapabilities::new().embedded_context(true))
            .mcp_capabilities(wire::McpCapabilities::new().http(true))
            .session_capabilities(
                wire::SessionCapabilities::new()
                    .list(wire::SessionListCapabilities::new())
                    .resume(wire::SessionResumeCapabilities::new())
                    .close(wire::SessionCloseCapabilities::new()),
            );
        let auth = wire::AuthMethod::Agent(wire::AuthMethodAgent::new("environment", text::AUTH_NAME).description(text::AUTH_DESCRIPTION));
        encode(
            wire::InitializeResponse::new(wire::ProtocolVersion::V1)
                .agent_capabilities(capabilities)
                .auth_methods(vec![auth])
                .agent_info(wire::Implementation::new("handoff-nvim", env!("CARGO_PKG_VERSION"))),
        )
    }

    /// Opens `choice` for `cwd` with the client's MCP servers beside ours, its consent and
    /// file access through the client, and registers it as `id` (or the new session's own id).
    async fn open(
        self: &Arc<Self>,
        cwd: PathBuf,
        choice: SessionChoice,
        client_servers: Vec<Value>,
        id: Option<String>,
    ) -> Result<(String, Arc<AcpSession>), AcpError> {
        let settings = self.settings.clone();
        let opened = {
            let cwd = cwd.clone();
            tokio::task::spawn_blocking(move || open_agent(&settings, &cwd, &choice, &client_servers))
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
        let cancelled = Arc::new(AtomicBool::new(false));
        agent.set_consent(seams::ClientConsent::new(self.peer.clone(), id.clone(), cancelled.clone()));
        agent.set_file_access(Arc::new(seams::ClientFiles {
            peer: self.peer.clone(),
            session_id: id.clone(),
            read: client.fs.read_text_file,
            write: client.fs.write_text_file,
        }));
        // The prompt's own words: an ACP client types `/handoff` as the editor's prompt does.
        let texts = FrontEndTexts::default();
        let controller = Controller::new(agent.clone(), texts.clone());
        // A review needs an editor buffer to write the document in: ACP has none, so the
        // handoff at the wall goes on as with `continue`.
        controller.set_auto_handoff(match self.settings.auto_handoff() {
            AutoHandoff::Review => AutoHandoff::Continue,
            mode => mode,
        });
        let updates = Updates { peer: self.peer.clone(), session_id: id.clone() };
        let compaction = client.session.as_ref().is_some_and(|s| s.compaction.is_some());
        let cwd_recorded = cwd.clone();
        let translator = Translator::new(updates.clone(), compaction, cwd, &agent, texts);
        let (flush, flushes) = mpsc::unbounded_channel();
        spawn_translator(translator, agent.subscribe(), flushes);
        let session = Arc::new(AcpSession {
            controller,
            flush,
            cancelled,
            prompt: tokio::sync::Mutex::new(()),
            updates,
            record: Record::of(&frontend_paths::session_dir(&self.settings), &cwd_recorded),
            file: Mutex::new(agent.session().path().to_path_buf()),
        });
        if let Some(old) = lock(&self.sessions).insert(id.clone(), session.clone()) {
            old.controller.abort();
        }
        Ok((id, session))
    }

    async fn new_session(self: &Arc<Self>, raw: Value) -> Answer {
        let request: wire::NewSessionRequest = params(raw.clone())?;
        let cwd = absolute_cwd(&request.cwd)?;
        let servers = client_servers(&raw);
        let (id, session) = self.open(cwd, SessionChoice::New, servers, None).await?;
        send_commands_later(session.updates.clone(), self.settings.templates_dir.clone());
        encode(wire::NewSessionResponse::new(id))
    }

    /// The session of `id` for `session/load` and `session/resume`: open here already, else the
    /// file the record says it goes on in, else the newest of its chain on disk.
    async fn reopen(self: &Arc<Self>, id: &str, cwd: &Path, raw: &Value) -> Result<Arc<AcpSession>, AcpError> {
        if let Some(session) = lock(&self.sessions).get(id).cloned() {
            return Ok(session);
        }
        let dir = frontend_paths::session_dir(&self.settings);
        let (find_id, find_cwd) = (id.to_string(), cwd.to_path_buf());
        let file = tokio::task::spawn_blocking(move || match Record::of(&dir, &find_cwd).file_of(&find_id) {
            Some(file) => Ok(file),
            None => newest_of_chain(&dir, &find_cwd, &find_id),
        })
        .await
        .map_err(|e| AcpError::Failed(format!("the loader stopped: {e}")))??;
        let servers = client_servers(raw);
        Ok(self.open(cwd.to_path_buf(), SessionChoice::File(file), servers, Some(id.to_string())).await?.1)
    }

    /// `session/load`: the session of this id replayed as updates; then answered.
    async fn load_session(self: &Arc<Self>, raw: Value) -> Answer {
        let request: wire::LoadSessionRequest = params(raw.clone())?;
        let cwd = absolute_cwd(&request.cwd)?;
        let session = self.reopen(&request.session_id.0, &cwd, &raw).await?;
        {
            let agent = session.controller.agent();
            // Read before the session is locked (they read its header).
            let tools = agent.offered_tools();
            let manager = agent.session();
            let branch = manager.get_branch(None);
            updates::replay(&session.updates, &branch, &cwd, &manager.todos(), &tools);
        }
        session.flushed().await;
        send_commands_later(session.updates.clone(), self.settings.templates_dir.clone());
        encode(wire::LoadSessionResponse::new())
    }

    /// `session/resume`: as `session/load`, without the replay (the client shows the
    /// conversation it kept).
    async fn resume_session(self: &Arc<Self>, raw: Value) -> Answer {
        let request: wire::ResumeSessionRequest = params(raw.clone())?;
        let cwd = absolute_cwd(&request.cwd)?;
        let session = self.reopen(&request.session_id.0, &cwd, &raw).await?;
        send_commands_later(session.updates.clone(), self.settings.templates_dir.clone());
        encode(wire::ResumeSessionResponse::new())
    }

    /// `session/close`: stops what the session runs, answers its pending questions as
    /// cancelled, writes what it holds, and forgets the id in this process (the files stay:
    /// `session/load` opens it again).
    async fn close_session(&self, request: wire::CloseSessionRequest) -> Answer {
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

    /// `session/list`: one entry per chain of handoffs (under its first session's id, which is
    /// the ACP id `session/new` gave it), newest first; chains with nothing said are left out.
    async fn list_sessions(&self, request: wire::ListSessionsRequest) -> Answer {
        let cwd = match request.cwd {
            Some(cwd) => absolute_cwd(&cwd)?,
            None => std::env::current_dir().map_err(|e| AcpError::Failed(e.to_string()))?,
        };
        let dir = frontend_paths::session_dir(&self.settings);
        let list_cwd = cwd.clone();
        let (listed, recorded) = tokio::task::spawn_blocking(move || {
            let recorded = Record::of(&dir, &list_cwd).entries();
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

    /// `session/prompt`: the text through the controller (the session commands first), its
    /// updates, then the stop reason.
    async fn prompt(&self, request: wire::PromptRequest) -> Answer {
        let session = self.session(&request.session_id)?;
        let _one = session.prompt.lock().await;
        session.cancelled.store(false, Ordering::SeqCst);
        let input = as_typed(&prompt_text(&request.prompt));
        let ran = session.controller.run_input(&input).await;
        session.flushed().await;
        let stop = stop_reason(ran, session.cancelled.load(Ordering::SeqCst)).map_err(AcpError::Failed);
        session.record_file().await;
        encode(wire::PromptResponse::new(stop?))
    }
}

/// Translates a session's events to updates until its agent goes away; a flush request is
/// answered once every event emitted before it is sent.
fn spawn_translator(
    mut translator: Translator,
    mut events: broadcast::Receiver<AgentEvent>,
    mut flushes: mpsc::UnboundedReceiver<Flush>,
) {
    use broadcast::error::RecvError;
    crate::core::task::spawn("the ACP updates", async move {
        loop {
            // While the client does not read, events wait in their (bounded) channel, not as
            // lines: the next ones are merged, or lost and told (`lost`).
            translator.updates.peer.writable().await;
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Ok(event) => translate_queued(&mut translator, Some(event), &mut events).await,
                    Err(RecvError::Lagged(n)) => lost(&translator, n),
                    Err(RecvError::Closed) => break,
                },
                flush = flushes.recv() => {
                    let Some(done) = flush else { break };
                    translate_queued(&mut translator, None, &mut events).await;
                    let _ = done.send(());
                }
            }
        }
    });
}

/// Translates `first` and every event already waiting. Deltas of the same kind that wait one
/// after another go out as one chunk: a client that reads slower than the model writes gets
/// fewer, larger chunks instead of falling behind the channel.
async fn translate_queued(translator: &mut Translator, first: Option<AgentEvent>, events: &mut broadcast::Receiver<AgentEvent>) {
    use broadcast::error::TryRecvError;
    let mut next = first;
    loop {
        let event = match next.take() {
            Some(event) => event,
            None => match events.try_recv() {
                Ok(event) => event,
                Err(TryRecvError::Lagged(n)) => {
                    lost(translator, n);
                    continue;
                }
                Err(_) => return,
            },
        };
        translator.updates.peer.writable().await;
        let AgentEvent::MessageUpdate { assistant_message_event: delta } = event else {
            translator.event(event).await;
            continue;
        };
        let (thinking, mut merged) = match delta {
            AssistantMessageEvent::TextDelta { delta, .. } => (false, delta),
            AssistantMessageEvent::ThinkingDelta { delta, .. } => (true, delta),
        };
        while let Ok(event) = events.try_recv() {
            match event {
                AgentEvent::MessageUpdate { assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. } }
                    if !thinking =>
                {
                    merged.push_str(&delta)
                }
                AgentEvent::MessageUpdate { assistant_message_event: AssistantMessageEvent::ThinkingDelta { delta, .. } }
                    if thinking =>
                {
                    merged.push_str(&delta)
                }
                other => {
                    next = Some(other);
                    break;
                }
            }
        }
        let delta = match thinking {
            false => AssistantMessageEvent::TextDelta { content_index: 0, delta: merged },
            true => AssistantMessageEvent::ThinkingDelta { content_index: 0, delta: merged },
        };
        translator.event(AgentEvent::MessageUpdate { assistant_message_event: delta }).await;
    }
}

/// Events the channel dropped before they were read (the client stopped reading, or the
/// machine stalled): the client is told that the session file has what it missed.
fn lost(translator: &Translator, n: u64) {
    tracing::warn!("{n} agent events were lost to a slow client");
    translator.updates.message(text::notice_block(text::EVENTS_LOST));
}

/// The command list, a moment after the session is answered: the controller's command table,
/// then the prompt templates of `templates_dir` (`/name args` expands one).
fn send_commands_later(updates: Updates, templates_dir: Option<PathBuf>) {
    crate::core::task::spawn("the ACP command list", async move {
        let templates = match templates_dir {
            Some(dir) => tokio::task::spawn_blocking(move || crate::core::agent::templates::list(&dir)).await.unwrap_or_default(),
            None => Vec::new(),
        };
        tokio::time::sleep(COMMANDS_DELAY).await;
        let mut commands: Vec<wire::AvailableCommand> = SlashCommand::ALL
            .into_iter()
            .map(|slash| {
                let command = wire::AvailableCommand::new(slash.name(), slash.help());
                match slash.args() {
                    Some(args) => command.input(wire::AvailableCommandInput::Unstructured(wire::UnstructuredCommandInput::new(args))),
                    None => command,
                }
            })
            .collect();
        for template in templates {
            if !commands.iter().any(|c| c.name == template.name) {
                commands.push(wire::AvailableCommand::new(template.name, template.description));
            }
        }
        updates.send(wire::SessionUpdate::AvailableCommandsUpdate(wire::AvailableCommandsUpdate::new(commands)));
    });
}

fn absolute_cwd(cwd: &Path) -> Result<PathBuf, AcpError> {
    if !cwd.is_absolute() {
        return Err(AcpError::InvalidParams(format!("cwd must be an absolute path, not {}", cwd.display())));
    }
    Ok(cwd.to_path_buf())
}

/// The text a prompt's content blocks say: text as it is, a linked resource as a link, an
/// embedded text resource as a fenced block headed by its URI.
fn prompt_text(prompt: &[wire::ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in prompt {
        match block {
            wire::ContentBlock::Text(t) => parts.push(t.text.clone()),
            wire::ContentBlock::ResourceLink(link) => parts.push(format!("[{}]({})", link.name, link.uri)),
            wire::ContentBlock::Resource(embedded) => {
                if let wire::EmbeddedResourceResource::TextResourceContents(r) = &embedded.resource {
                    parts.push(format!("{}\n```\n{}\n```", r.uri, r.text));
                }
            }
            _ => tracing::info!("a prompt block of a kind we do not take was left out"),
        }
    }
    parts.join("\n")
}

/// The input as the controller takes it: a client that types commands with `\` (codecompanion)
/// means the table's `/name`; anything else is as typed.
fn as_typed(input: &str) -> String {
    let trimmed = input.trim_start();
    if let Some(rest) = trimmed.strip_prefix('\\') {
        let name = rest.split(char::is_whitespace).next().unwrap_or(rest);
        if SlashCommand::named(name).is_some() {
            return format!("/{rest}");
        }
    }
    input.to_string()
}

/// The stop reason of what ran, or why the prompt failed (the model request's error).
fn stop_reason(ran: Ran, cancelled: bool) -> Result<StopReason, String> {
    if cancelled {
        return Ok(StopReason::Cancelled);
    }
    match ran {
        Ran::Prompt(Ok(result)) => match result.last_assistant() {
            Some(reply) => match reply.stop_reason.unwrap_or_default() {
                ReplyStop::Aborted => Ok(StopReason::Cancelled),
                ReplyStop::Length => Ok(StopReason::MaxTokens),
                ReplyStop::Error => Err(text::prompt_failed(reply.error_message.as_deref().unwrap_or("unknown error"))),
                // A run that ends on tool results without a reply after them stopped at the
                // turn limit (a wall with nothing to go on in ends there too: said as a notice).
                ReplyStop::ToolUse if result.wall.is_none() => Ok(StopReason::MaxTurnRequests),
                ReplyStop::Stop | ReplyStop::ToolUse => Ok(StopReason::EndTurn),
            },
            None => Ok(StopReason::EndTurn),
        },
        Ran::Prompt(Err(e)) => Err(e.to_string()),
        Ran::Handoff(HandoffOutcome::Cancelled) => Ok(StopReason::Cancelled),
        Ran::Handoff(_) | Ran::Steered | Ran::Nothing | Ran::Pins(_) | Ran::Back(_) | Ran::Said(_) => Ok(StopReason::EndTurn),
    }
}

/// The MCP servers the client passed (`mcpServers`), as entries of Claude Code's format.
fn client_servers(raw: &Value) -> Vec<Value> {
    raw.get("mcpServers").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// One client server as `(name, entry)` of Claude Code's format; `None` for a transport we do
/// not speak (SSE).
fn mcp_entry(server: &Value) -> Option<(String, Value)> {
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
fn open_agent(settings: &Settings, cwd: &Path, choice: &SessionChoice, client_servers: &[Value]) -> Result<OpenedFor, String> {
    let mut front_end = frontend_paths::front_end(settings);
    front_end.mcp_servers = client_servers.iter().filter_map(mcp_entry).collect();
    controller::open_for(&front_end, settings, cwd, choice).map_err(|failure| failure.message)
}

/// Each chain of handoffs among `listed` ([`chain::Chains`]: newest first), without the
/// chains where nothing was said.
fn chains(listed: &[SessionInfo]) -> Vec<Chain<'_>> {
    let mut chains = Chains::of(listed).chains();
    chains.retain(|c| !(c.root.empty && c.newest.empty));
    chains
}

/// The id `session/list` shows `chain` under: an id recorded as going on in one of its files
/// (the newest such file's), else its first session's id, unless the record sends that id to
/// another chain (it went on elsewhere after `/new`); then its newest session's id.
fn listed_id(chain: &Chain<'_>, recorded: &BTreeMap<String, PathBuf>) -> Option<String> {
    let going_on = chain.members.iter().find_map(|member| recorded.iter().find(|(_, f)| *f == &member.path).map(|(id, _)| id));
    if let Some(id) = going_on {
        return Some(id.clone());
    }
    [&chain.root.id, &chain.newest.id].into_iter().find(|id| !recorded.contains_key(id.as_str())).cloned()
}

/// The newest session of the chain that holds the session of `id` (its first session's id is
/// the ACP id): the file `session/load` opens.
fn newest_of_chain(session_dir: &Path, cwd: &Path, id: &str) -> Result<PathBuf, AcpError> {
    let listed = SessionManager::list_sessions(session_dir, cwd).map_err(|e| AcpError::Failed(e.to_string()))?;
    let newest = Chains::of(&listed).chain_of(id).map(|chain| chain.newest.path.clone());
    newest.ok_or_else(|| AcpError::UnknownSession(id.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn client_mcp_servers_become_entries_of_claude_codes_format() {
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

    fn info(id: &str, parent: Option<&str>, empty: bool) -> SessionInfo {
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
        let folder = dir.path().join(crate::core::session::paths::cwd_folder_name(cwd));
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
