//! A session that runs on an external agent (an ACP agent the front end drives: see the
//! `agents` module beside the engine): the front end sets an [`ExternalRunner`], and a run of
//! such a session goes to it instead of the model. The lifecycle, the prompt's events, the
//! user's message recorded first, busy and abort work as for a run of ours.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{AgentError, AgentEvent, AgentSession, RunOptions, RunResult};
use crate::message::{Message, StopReason};
use crate::session::SessionManager;

/// Drives the external agents of a front end.
#[async_trait]
pub trait ExternalRunner: Send + Sync {
    /// Whether `session` runs on an external agent this runner drives.
    fn drives(&self, session: &SessionManager) -> bool;

    /// One prompt on it (its user message is recorded already): the replies recorded in
    /// `agent.session()` as they come, their events emitted on `agent`. Returns the messages
    /// recorded, or why the turn failed.
    async fn prompt(&self, agent: &AgentSession, prompt: &Message, cancel: &CancellationToken) -> Result<Vec<Message>, String>;

    /// What the session a handoff of `old` starts records, beside the model carried over, so
    /// that it runs on the same agent (written into the new session once it is made).
    fn successor(&self, old: &SessionManager) -> Option<SessionSetting>;

    /// Starts the agent of `agent`'s current session (a session on it opened or loaded)
    /// before its first prompt, so that what it offers (its modes, models, commands) is there
    /// as the session opens. A prompt starts it too.
    async fn start(&self, _agent: &AgentSession) -> Result<(), String> {
        Ok(())
    }

    /// What the agent running the session of `file` offers now (its commands, modes,
    /// models: the front end's completion and pickers), as the front end shows it; `None`
    /// when no agent runs it (not started yet).
    fn offers(&self, _file: &std::path::Path) -> Option<serde_json::Value> {
        None
    }

    /// What a handoff's new session records to go on where the user named (`--to NAME`: an
    /// agent the front end knows, or `ours`: nothing); why not, for a name it cannot start.
    fn successor_to(&self, to: &str) -> Result<Option<SessionSetting>, String> {
        Err(format!("{NO_AGENTS} ({to:?})"))
    }

    /// Sets the agent's `what` (`mode`, `model`) to `value` for the session of `file`.
    async fn choose(&self, _file: &std::path::Path, what: &str, _value: &str) -> Result<(), String> {
        Err(format!("this agent offers no {what}"))
    }
}

/// Why `--to` names nothing where no runner of external agents is set.
const NO_AGENTS: &str = "no external agent can be named here";

/// Entries a new session starts with (see [`ExternalRunner::successor`]).
pub type SessionSetting = Box<dyn FnOnce(&mut SessionManager) -> Result<(), crate::session::SessionError> + Send>;

impl AgentSession {
    /// The runner of sessions that run on an external agent (`None`: every run is ours).
    pub fn set_external_runner(&self, runner: Option<std::sync::Arc<dyn ExternalRunner>>) {
        *super::lock(&self.external) = runner;
    }

    /// What a handoff's new session records so that it runs on the same external agent
    /// (`None`: the session runs on ours).
    pub fn external_successor(&self) -> Option<SessionSetting> {
        self.external_runner()?.successor(&self.session())
    }

    /// What a handoff's new session records to go on where `to` names
    /// ([`ExternalRunner::successor_to`]), whatever the current session runs on.
    pub fn successor_to(&self, to: &str) -> Result<Option<SessionSetting>, String> {
        match super::lock(&self.external).clone() {
            Some(runner) => runner.successor_to(to),
            None => Err(format!("{NO_AGENTS} ({to:?})")),
        }
    }

    /// Starts the external agent of the current session, when it runs on one
    /// ([`ExternalRunner::start`]).
    pub async fn start_external(&self) -> Result<(), String> {
        match self.external_runner() {
            Some(runner) => runner.start(self).await,
            None => Ok(()),
        }
    }

    /// What the external agent of the current session offers ([`ExternalRunner::offers`]).
    pub fn external_offers(&self) -> Option<serde_json::Value> {
        let file = self.session().path().to_path_buf();
        self.external_runner()?.offers(&file)
    }

    /// Sets the external agent's `what` to `value` ([`ExternalRunner::choose`]).
    pub async fn external_choose(&self, what: &str, value: &str) -> Result<(), String> {
        let file = self.session().path().to_path_buf();
        let runner = self.external_runner().ok_or("this session runs on our own agent: its model is set with /model")?;
        runner.choose(&file, what, value).await
    }

    /// The runner when the current session runs on an external agent.
    pub(super) fn external_runner(&self) -> Option<std::sync::Arc<dyn ExternalRunner>> {
        let runner = super::lock(&self.external).clone()?;
        runner.drives(&self.session()).then_some(runner)
    }

    /// A run on the external agent: the messages waiting and the prompt recorded, the agent's
    /// turn, the run's end told as ours is.
    pub(super) async fn run_external(
        &self,
        runner: &dyn ExternalRunner,
        pending: Vec<Message>,
        prompt: Message,
        options: RunOptions,
        cancel: &CancellationToken,
    ) -> Result<RunResult, AgentError> {
        let mut result = RunResult::default();
        self.emit(AgentEvent::AgentStart);
        self.emit(AgentEvent::TurnStart);
        let mut inbox = pending;
        inbox.push(prompt.clone());
        for message in inbox {
            self.emit(AgentEvent::MessageStart { message: message.clone() });
            self.commit_message(&message, &mut result, options.record)?;
        }
        match runner.prompt(self, &prompt, cancel).await {
            Ok(messages) => result.messages.extend(messages),
            Err(why) => {
                let mut failed = Message::assistant("acp", "acp", "");
                failed.stop_reason = Some(StopReason::Error);
                failed.error_message = Some(why);
                self.emit(AgentEvent::MessageStart { message: failed.clone() });
                self.commit_message(&failed, &mut result, options.record)?;
            }
        }
        self.emit(AgentEvent::AgentEnd { messages: result.messages.clone(), failure: None, at_wall: false });
        Ok(result)
    }

    /// How the front end asks the user (what an external agent's permission requests go to).
    pub fn consent(&self) -> std::sync::Arc<dyn crate::tools::consent::Consent> {
        super::lock(&self.consent).clone()
    }

    /// How files are read and written (an external agent's `fs/*` too).
    pub fn file_access(&self) -> std::sync::Arc<dyn crate::tools::FileAccess> {
        super::lock(&self.files).clone()
    }

    /// The consent policy of the session's tools.
    pub fn policy(&self) -> &crate::tools::consent::Policy {
        &self.policy
    }

    /// The environment policy of commands (an external agent's terminals too).
    pub fn command_env(&self) -> crate::tools::EnvPolicy {
        self.tool_env.clone()
    }

    /// How commands are confined.
    pub fn sandbox_settings(&self) -> crate::sandbox::SandboxSettings {
        self.sandbox
    }
}
