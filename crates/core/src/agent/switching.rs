//! Changing what the agent works on: the model and thinking level (recorded as pi records
//! them), the in-memory context, and the one way to change sessions (`/new`, resume, handoff).

use super::*;

impl AgentSession {
    /// Sets the thinking level of the session; a change is recorded as pi records it (a
    /// `thinking_level_change` entry), so the session resumes with it, in pi too. It applies
    /// from the next prompt on (a response that runs keeps the level it started with). Returns
    /// whether it changed.
    pub fn set_thinking_level(&self, level: ThinkingLevel) -> Result<bool, AgentError> {
        let fallback = self.state().unrecorded_thinking;
        let mut session = self.session();
        if level_of(&session, fallback) == level {
            return Ok(false);
        }
        session.append_thinking_level_change(level.as_str())?;
        Ok(true)
    }

    /// Switches the model; recorded in the session as a `model_change` entry.
    pub fn set_model(&self, config: ProviderConfig) -> Result<(), AgentError> {
        self.session().append_model_change(&config.name, &config.model)?;
        crate::sandbox::protected::remember_credential_files(config.key_files());
        let mut provider = lock(&self.provider);
        *provider = provider.switched(config);
        Ok(())
    }

    /// Forgets the in-memory conversation and queues (pi's `agent.reset()`), and the count of
    /// todo reminders.
    pub fn reset(&self) {
        let mut state = self.state();
        state.messages = Some(Vec::new());
        state.steering.clear();
        state.follow_up.clear();
        state.pending_next_turn.clear();
        state.todo_reminder_counter = 0;
    }

    pub fn replace_messages(&self, messages: Vec<Message>) {
        self.state().messages = Some(messages);
    }

    /// Records the model and `session`'s own thinking level (the default for a new one) as its
    /// first entries, as pi starts every session: for the agent's own session, just made (the
    /// CLI, the host).
    pub fn record_settings(&self, session: &mut SessionManager) -> Result<(), SessionError> {
        let level = level_of(session, self.state().unrecorded_thinking);
        self.write_settings(session, level)
    }

    /// Records the model and the thinking level in force in the current session as the first
    /// entries of `next`, a session to switch to (`/new`, the handoff). Call it without holding
    /// the session's lock.
    pub fn carry_settings(&self, next: &mut SessionManager) -> Result<(), SessionError> {
        self.settings_carrier()(next)
    }

    /// [`AgentSession::carry_settings`] read now and written later: what writes them into a
    /// session made while the current one is locked (`handoff::seed_new_session`).
    pub fn settings_carrier(&self) -> impl FnOnce(&mut SessionManager) -> Result<(), SessionError> {
        let level = self.thinking_level();
        let config = self.provider_config();
        move |next| {
            next.append_model_change(&config.name, &config.model)?;
            next.append_thinking_level_change(level.as_str())?;
            Ok(())
        }
    }

    fn write_settings(&self, session: &mut SessionManager, level: ThinkingLevel) -> Result<(), SessionError> {
        let config = self.provider_config();
        session.append_model_change(&config.name, &config.model)?;
        session.append_thinking_level_change(level.as_str())?;
        Ok(())
    }

    /// The one way to change sessions (`/new`, resume, handoff): the old session is flushed,
    /// `next` becomes the session, its context the active one, and the queues and counters start
    /// afresh; subscribers hear of it with the reason. Only the holder of the agent switches
    /// (`hold`: the lifecycle's phase guard carries it, so no prompt starts meanwhile); a
    /// response of its own still running refuses it.
    pub(crate) fn switch_to(&self, _hold: &Hold, next: SessionManager, reason: SwitchReason) -> Result<SessionSwitched, AgentError> {
        if self.is_busy() {
            return Err(AgentError::Busy);
        }
        let new = next.path().to_path_buf();
        // The session's id and thinking level come with it (a new or handed-off session recorded
        // the level in force; a resumed one brings its own).
        let in_force = self.thinking_level();
        let leaf = next.leaf_id().map(str::to_string);
        let old = {
            let mut current = self.session();
            if let Err(e) = current.flush() {
                // The switch goes on (the next session is complete), but the user hears of it.
                tracing::error!(session = %current.path().display(), "cannot flush the old session: {e}");
                self.emit(AgentEvent::Notice(Notice::new(
                    Level::Warn,
                    format!("The previous session could not be saved completely: {e}"),
                )));
            }
            let old = current.path().to_path_buf();
            *current = next;
            old
        };
        self.reset();
        self.grants.clear();
        {
            let mut state = self.state();
            state.messages = None;
            state.unrecorded_thinking = in_force;
        }
        self.emit(AgentEvent::SessionSwitch {
            old: Some(old.to_string_lossy().into_owned()),
            new: new.to_string_lossy().into_owned(),
            reason,
            leaf,
        });
        Ok(SessionSwitched { old, new, reason })
    }

    /// Starts a new, empty session (pi's `/new`) with the model and thinking level in force.
    pub(crate) fn new_session(&self, hold: &Hold) -> Result<SessionSwitched, AgentError> {
        if self.is_busy() {
            return Err(AgentError::Busy);
        }
        let mut next = {
            let current = self.session();
            SessionManager::create(current.session_dir(), current.cwd(), None)?
        };
        self.carry_settings(&mut next)?;
        self.switch_to(hold, next, SwitchReason::New)
    }
}
