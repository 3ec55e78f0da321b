//! The handoff of an external agent's session: the agent writes the document with our
//! instruction (`core::handoff::build_prompt`), in its own session when it can load it, else
//! from our record; our facts of the session are added; the new session starts on the same
//! agent, another one, or ours (`core::handoff::seed_new_session`, as every handoff does),
//! with the document as its first context. The next prompt there opens a new session on the
//! agent and sends our record (the document) first ([`context_blocks`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::client::{ExternalSession, Services, Shown};
use super::record::{self, AgentEntry};
use super::{AgentError, AgentSpec, OURS};
use handoff_core::config::Settings;
use handoff_core::handoff::{self, Carried, HandoffError};
use handoff_core::message::{Message, Role};
use handoff_core::session::{mark_handoff_request, SessionManager};
use handoff_core::sync::lock;

/// Where the work goes on after the handoff.
#[derive(Clone, Debug)]
pub enum Target {
    /// The same agent, a new session on it.
    Same,
    /// Another external agent.
    Agent(AgentSpec),
    /// Our own engine (the configured provider and model).
    Ours,
}

impl Target {
    /// Where `--to NAME` goes on: ours (`ours`), else the agent of the settings by that name
    /// (or a command line), which must be found here. The CLI's `handoff --to` and the
    /// editor's `:Handoff --to` both read it here.
    pub fn named(settings: &Settings, to: &str) -> Result<Target, AgentError> {
        if to.trim() == OURS {
            return Ok(Target::Ours);
        }
        let spec = AgentSpec::resolve(settings, to)?;
        match spec.missing() {
            Some(missing) => Err(AgentError::Missing(missing)),
            None => Ok(Target::Agent(spec)),
        }
    }
}

/// Why an external agent's handoff made no new session.
#[derive(Debug, thiserror::Error)]
pub enum ExternalHandoffError {
    #[error("this session does not run on an external agent (no acp-agent entry): hand it off with our own model")]
    NotAnAgentSession,
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error("the agent ended the handoff's turn with {stop:?} and no document")]
    NoDocument { stop: String },
    #[error(transparent)]
    Handoff(#[from] HandoffError),
}

/// The handed-off session's successor.
#[derive(Clone, Debug)]
pub struct HandedOff {
    pub session_file: PathBuf,
    pub document_file: PathBuf,
    pub document: String,
}

/// Hands `session` (an external agent's) off to `target`; `focus` as `:Handoff focus` takes
/// it. The request and the document are recorded in `session` as any handoff's are.
pub async fn hand_off(
    record: &Mutex<SessionManager>,
    services: Arc<Services>,
    focus: Option<&str>,
    target: Target,
    cancel: &CancellationToken,
    shown: &dyn Shown,
) -> Result<HandedOff, ExternalHandoffError> {
    let session = || lock(record);
    let entry = record::agent_of(&session()).ok_or(ExternalHandoffError::NotAnAgentSession)?;
    let (mut agent, resumed) = ExternalSession::open(entry.agent.clone(), services, entry.session_id.as_deref()).await?;
    let instruction = handoff::build_prompt(focus);
    let mut blocks = if resumed { Vec::new() } else { context_blocks(&session(), 0) };
    blocks.push(json!({ "type": "text", "text": instruction }));
    let mut request = Message::user(instruction);
    mark_handoff_request(&mut request, focus);
    let turn = agent.prompt(&session, blocks, Some(request), cancel, shown).await;
    agent.close().await;
    let turn = turn?;
    let document = turn.text.trim().to_string();
    if turn.stop != "end_turn" || document.is_empty() {
        return Err(ExternalHandoffError::NoDocument { stop: turn.stop });
    }
    let mut session = session();
    let carried = Carried::of_session(&session, None);
    let text = handoff::with_facts(&document, &carried);
    let next_agent = match target {
        Target::Same => Some(entry.agent),
        Target::Agent(spec) => Some(spec),
        Target::Ours => None,
    };
    let (next, _parent, document_file, _ledger) = handoff::seed_new_session(&mut session, &text, &carried, |next| match next_agent {
        Some(agent) => record::record_agent(next, &AgentEntry { agent, session_id: None }),
        None => Ok(()),
    })?;
    Ok(HandedOff { session_file: next.path().to_path_buf(), document_file, document })
}

/// What an agent that does not know the conversation is sent before the prompt: our record of
/// it (a handoff's document as the new session holds it; else the conversation as text).
/// Empty for a session with nothing in it. `leave_out`: messages at the end not sent this way
/// (the prompt just recorded, which goes as the prompt).
pub fn context_blocks(session: &SessionManager, leave_out: usize) -> Vec<Value> {
    let mut messages = session.build_session_context().messages;
    messages.truncate(messages.len().saturating_sub(leave_out));
    if messages.is_empty() {
        return Vec::new();
    }
    if let [only] = messages.as_slice() {
        if only.role == Role::User {
            return vec![json!({ "type": "text", "text": only.text() })];
        }
    }
    let mut text = String::from("<conversation-so-far>\n");
    for message in &messages {
        let who = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            _ => "tool result",
        };
        let said = message.text();
        if said.trim().is_empty() {
            continue;
        }
        text.push_str(&format!("[{who}]\n{said}\n\n"));
    }
    text.push_str("</conversation-so-far>\n\nThe above is the conversation so far, recorded by the client. Continue it.");
    vec![json!({ "type": "text", "text": text })]
}
