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
        let handle = self.handle(file).ok_or("the agent starts with the session's first prompt: send one first")?;
        // The editor waits for the answer: an agent that never gives one is not waited for long.
        match tokio::time::timeout(CHOOSE_WAIT, handle.choose(kind, value)).await {
            Ok(chosen) => chosen.map_err(|e| e.to_string()),
            Err(_) => Err(format!("the agent did not answer in {} s", CHOOSE_WAIT.as_secs())),
        }
    }

    async fn prompt(&self, agent: &AgentSession, prompt: &Message, cancel: &CancellationToken) -> Result<Vec<Message>, String> {
        let (file, entry) = {
            let session = agent.session();
            (session.path().to_path_buf(), record::agent_of(&session))
        };
        let entry = entry.ok_or("this session does not run on an external agent")?;
        let mut live = self.live.lock().await;
        let serving = live.as_ref().is_some_and(|l| l.file == file && l.session.spec == entry.agent);
        let mut blocks = Vec::new();
        if !serving {
            if let Some(old) = live.take() {
                *lock(&self.offered) = None;
                old.session.close().await;
            }
            let (session, resumed) = ExternalSession::open(entry.agent.clone(), services(agent), entry.session_id.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            if !resumed {
                blocks = super::handoff::context_blocks(&agent.session(), 1);
            }
            *lock(&self.offered) = Some((file.clone(), session.handle()));
            *live = Some(Live { file, session });
        }
        let Some(serving) = live.as_mut() else { return Err("the agent is not running".into()) };
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
