//! External agents in the editor's chat: the engine's [`ExternalRunner`] for sessions that run
//! on one. A run of such a session (the controller's, as any prompt's: busy, abort, the queue)
//! goes to the agent; its replies are recorded in the session and emitted as the engine's
//! events, so the chat shows them as it shows ours. The agent's requests go to the session's
//! own consent (the editor's approval UI), file access (the editor's buffers), environment
//! policy and sandbox. One agent process is kept between prompts, for the session it serves.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::client::{ExternalSession, Services, Shown};
use super::handoff::Target;
use super::AgentSpec;
use super::offers::{Handle, Kind};
use handoff_core::config::Settings;
use handoff_core::sync::lock;
use super::record;
use handoff_core::agent::{AgentEvent, AgentSession, AssistantMessageEvent, ExternalRunner, SessionSetting};
use handoff_core::message::Message;
use handoff_core::session::SessionManager;

/// How long the editor waits for the agent to take a mode or model.
const CHOOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The agent process serving one session file.
struct Live {
    file: PathBuf,
    session: ExternalSession,
    /// A new session on the agent, sent nothing yet: its first prompt goes after our record.
    fresh: bool,
}

/// The runner a front end sets on its agent (`AgentSession::set_external_runner`).
#[derive(Default)]
pub struct Runner {
    /// The settings the agents of `--to NAME` are read from.
    settings: Settings,
    live: tokio::sync::Mutex<Option<Live>>,
    /// What the live agent offers, by its session file: read and set while a prompt holds
    /// `live`.
    offered: std::sync::Mutex<Option<(PathBuf, Handle)>>,
}

/// The turn as the engine's events.
struct Events<'a> {
    agent: &'a AgentSession,
}

impl Shown for Events<'_> {
    fn text(&self, index: usize, delta: &str) {
        let event = AssistantMessageEvent::TextDelta { content_index: index, delta: delta.to_string() };
        self.agent.emit(AgentEvent::MessageUpdate { assistant_message_event: event });
    }

    fn message_start(&self, message: &Message) {
        self.agent.emit(AgentEvent::MessageStart { message: message.clone() });
    }

    fn message_end(&self, message: &Message) {
        self.agent.emit(AgentEvent::MessageEnd { message: message.clone() });
    }

    fn tool_start(&self, id: &str, name: &str, args: &serde_json::Value) {
        let (tool_call_id, tool_name, args) = (id.to_string(), name.to_string(), args.clone());
        self.agent.emit(AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args, preview: None });
    }

    fn hunks(&self, call: &handoff_core::session::review::ReviewedCall) {
        self.agent.emit(AgentEvent::HunksChanged { call: Some(call.clone()) });
    }

    fn tool_end(&self, id: &str, name: &str, args: &serde_json::Value, result: &Message) {
        let is_error = result.tool_result().is_some_and(|r| r.is_error());
        let (tool_call_id, tool_name, args, result) = (id.to_string(), name.to_string(), args.clone(), result.clone());
        self.agent.emit(AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, args, is_error, result });
    }
}

/// How the session's agent serves the external agent's requests.
fn services(agent: &AgentSession) -> Arc<Services> {
    Arc::new(Services {
        cwd: agent.session().cwd().to_path_buf(),
        policy: agent.policy().clone(),
        grants: Default::default(),
        consent: agent.consent(),
        files: agent.file_access(),
        env: agent.command_env(),
        sandbox: agent.sandbox_settings(),
        terminals: Default::default(),
        edit_originals: Default::default(),
    })
}

/// What a handoff's new session records to go on on `agent`.
fn goes_on_on(agent: AgentSpec) -> SessionSetting {
    Box::new(move |next: &mut SessionManager| record::record_agent_spec(next, &agent))
}

impl Runner {
    /// A runner that knows the agents of `settings` by name.
    pub fn new(settings: Settings) -> Runner {
        Runner { settings, ..Runner::default() }
    }

    /// The agent serving `agent`'s current session: the one running, else started (the one of
    /// another session ended), its session loaded or new, its offers read from the answer.
    async fn serving<'l>(&self, live: &'l mut Option<Live>, agent: &AgentSession) -> Result<&'l mut Live, String> {
        let (file, entry) = {
            let session = agent.session();
            (session.path().to_path_buf(), record::agent_of(&session))
        };
        let entry = entry.ok_or("this session does not run on an external agent")?;
        let serves = live.as_ref().is_some_and(|l| l.file == file && l.session.spec == entry.agent);
        if !serves {
            if let Some(old) = live.take() {
                *lock(&self.offered) = None;
                old.session.close().await;
            }
            let (session, resumed) = ExternalSession::open(entry.agent.clone(), services(agent), entry.session_id.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            *lock(&self.offered) = Some((file.clone(), session.handle()));
            *live = Some(Live { file, session, fresh: !resumed });
        }
        live.as_mut().ok_or_else(|| "the agent is not running".to_string())
    }

    fn handle(&self, file: &std::path::Path) -> Option<Handle> {
        lock(&self.offered).as_ref().filter(|(f, _)| f == file).map(|(_, h)| h.clone())
    }
}

#[async_trait]
impl ExternalRunner for Runner {
    fn drives(&self, session: &SessionManager) -> bool {
        record::agent_of(session).is_some()
    }

    fn successor(&self, old: &SessionManager) -> Option<SessionSetting> {
        Some(goes_on_on(record::agent_of(old)?.agent))
    }

    fn successor_to(&self, to: &str) -> Result<Option<SessionSetting>, String> {
        match Target::named(&self.settings, to).map_err(|e| e.to_string())? {
            Target::Agent(agent) => Ok(Some(goes_on_on(agent))),
            Target::Ours | Target::Same => Ok(None),
        }
    }

    fn offers(&self, file: &std::path::Path) -> Option<serde_json::Value> {
        let handle = self.handle(file)?;
        serde_json::to_value(handle.offers()).ok()
    }

    async fn choose(&self, file: &std::path::Path, what: &str, value: &str) -> Result<(), String> {
        let kind = Kind::parse(what).ok_or_else(|| format!("an agent has no {what:?} to set (mode, model)"))?;
        let handle = self.handle(file).ok_or("the session's agent has not started (yet)")?;
        // The editor waits for the answer: an agent that never gives one is not waited for long.
        match tokio::time::timeout(CHOOSE_WAIT, handle.choose(kind, value)).await {
            Ok(chosen) => chosen.map_err(|e| e.to_string()),
            Err(_) => Err(format!("the agent did not answer in {} s", CHOOSE_WAIT.as_secs())),
        }
    }

    async fn start(&self, agent: &AgentSession) -> Result<(), String> {
        let mut live = self.live.lock().await;
        self.serving(&mut live, agent).await.map(drop)
    }

    async fn prompt(&self, agent: &AgentSession, prompt: &Message, cancel: &CancellationToken) -> Result<Vec<Message>, String> {
        let mut live = self.live.lock().await;
        let serving = self.serving(&mut live, agent).await?;
        let mut blocks = match std::mem::take(&mut serving.fresh) {
            true => super::handoff::context_blocks(&agent.session(), 1),
            false => Vec::new(),
        };
        blocks.push(json!({ "type": "text", "text": prompt.text() }));
        let session = || agent.session();
        let turn = serving.session.prompt(&session, blocks, None, cancel, &Events { agent }).await;
        match turn {
            Ok(turn) => Ok(turn.messages),
            Err(e) => {
                if let Some(gone) = live.take() {
                    *lock(&self.offered) = None;
                    gone.session.close().await;
                }
                Err(e.to_string())
            }
        }
    }
}
