//! The JSON-RPC side of the agent: serving one client (stdin to its requests, each in a task),
//! the methods' dispatch, `initialize`, and a prompt's turn through the controller (its text
//! from the content blocks, its stop reason).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::commands::as_typed;
use super::rpc::{self, Incoming, Peer};
use super::sessions::AcpSession;
use super::text;
use super::wire::{self, code, method, RpcError, StopReason};
use handoff_core::config::Settings;
use handoff_core::controller::{commands, InputOutcome};
use handoff_core::handoff::HandoffOutcome;
use handoff_core::message::StopReason as ReplyStop;
use handoff_core::sync::lock;

/// Errors of this front end, each answered as a JSON-RPC error.
#[derive(Debug, thiserror::Error)]
pub(super) enum AcpError {
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
    pub(super) fn into_rpc(self) -> RpcError {
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

pub(super) type Answer = Result<Value, AcpError>;

pub(super) fn params<T: DeserializeOwned>(params: Value) -> Result<T, AcpError> {
    serde_json::from_value(params).map_err(|e| AcpError::InvalidParams(e.to_string()))
}

pub(super) fn encode(value: impl Serialize) -> Answer {
    serde_json::to_value(value).map_err(|e| AcpError::Failed(e.to_string()))
}

pub(super) struct Server {
    pub(super) peer: Peer,
    pub(super) settings: Settings,
    pub(super) client: Mutex<wire::ClientCapabilities>,
    pub(super) sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
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
            handoff_core::task::spawn("an ACP request", async move {
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
    pub(super) async fn answer(self: &Arc<Self>, name: &str, params_: Value) -> Answer {
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

    pub(super) fn notified(&self, name: &str, params_: Value) {
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

    pub(super) fn session(&self, id: &wire::SessionId) -> Result<Arc<AcpSession>, AcpError> {
        lock(&self.sessions).get(id.0.as_ref()).cloned().ok_or_else(|| AcpError::UnknownSession(id.0.to_string()))
    }

    pub(super) fn initialize(&self, request: wire::InitializeRequest) -> Answer {
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

    /// `session/prompt`: the text through the controller (the session commands first), its
    /// updates, then the stop reason.
    pub(super) async fn prompt(&self, request: wire::PromptRequest) -> Answer {
        let session = self.session(&request.session_id)?;
        let _one = session.prompt.lock().await;
        session.cancelled.store(false, Ordering::SeqCst);
        let input = prompt_input(&request.prompt);
        let ran = session.controller.run_input(&input).await;
        session.flushed().await;
        let stop = stop_reason(ran, session.cancelled.load(Ordering::SeqCst)).map_err(AcpError::Failed);
        session.record_file().await;
        encode(wire::PromptResponse::new(stop?))
    }
}

/// What a prompt's content blocks ask, as the controller takes it: a command in the last text
/// block runs (with the blocks after it, as its argument's context, as before), whatever came
/// before it (a client that sends the cancelled text again before the command typed next:
/// `[{"text":"…"},{"text":"/model x"}]`); else the blocks' text.
pub(super) fn prompt_input(prompt: &[wire::ContentBlock]) -> String {
    let last_text = prompt.iter().rposition(|block| matches!(block, wire::ContentBlock::Text(_)));
    if let Some(at) = last_text.filter(|&at| at > 0) {
        let command = as_typed(&prompt_text(&prompt[at..]));
        if commands::parse(&command).is_some() {
            tracing::info!("a command in the prompt's last text block runs; the blocks before it are left out");
            return command;
        }
    }
    as_typed(&prompt_text(prompt))
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

/// The stop reason of what ran, or why the prompt failed (the model request's error).
pub(super) fn stop_reason(ran: InputOutcome, cancelled: bool) -> Result<StopReason, String> {
    if cancelled {
        return Ok(StopReason::Cancelled);
    }
    match ran {
        InputOutcome::Prompt(Ok(result)) => match result.last_assistant() {
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
        InputOutcome::Prompt(Err(e)) => Err(e.to_string()),
        InputOutcome::Handoff(HandoffOutcome::Cancelled) => Ok(StopReason::Cancelled),
        InputOutcome::Handoff(_) | InputOutcome::Steered | InputOutcome::Nothing | InputOutcome::Pins(_) | InputOutcome::Back(_) | InputOutcome::Said(_) => Ok(StopReason::EndTurn),
    }
}
