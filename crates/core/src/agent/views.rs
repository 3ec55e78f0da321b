//! What the agent reads off its session: the thinking level in force, the todo list, the
//! originals of changed files, the context and its usage, the system prompt. Nothing here is a
//! cached copy of the session (one owner per fact: the session layer).

use super::*;

/// The field of a reply's usage naming the window it was counted against, when that is not our
/// model's (an external agent reports its own).
pub const CONTEXT_WINDOW: &str = "contextWindow";

impl AgentSession {
    /// The thinking level in force: the session's last recorded one (`thinking_level_change`),
    /// else the configured default. Read from the session each time (no copy to keep in step):
    /// every request of the session sends it, the handoff's too.
    pub fn thinking_level(&self) -> ThinkingLevel {
        let fallback = self.state().unrecorded_thinking;
        level_of(&self.session(), fallback)
    }

    /// What waits for the running response or the next prompt.
    pub fn queued(&self) -> Queued {
        let state = self.state();
        Queued { steering: state.steering.len(), follow_up: state.follow_up.len(), next_turn: state.pending_next_turn.len() }
    }

    /// Todo reminders sent since the last session switch (at most `max_todo_reminders`).
    pub fn todo_reminders(&self) -> u32 {
        self.state().todo_reminder_counter
    }

    /// The todo list of the session's current branch, as the session reads it (the latest
    /// successful `todo_write` result, else what a handoff carried over): the chat, the CLI,
    /// the handoff's facts and the reminder all see this list.
    pub fn todos(&self) -> Vec<Todo> {
        self.session().todos()
    }

    /// The files the agent changed in the current session (successful `edit` and `write`
    /// calls) and their content before its first change: kept beside the session file, so they
    /// survive a restart and a resume. A new session (a handoff's too) starts without any.
    pub fn originals(&self) -> Originals {
        Originals::of_session(self.session().path())
    }

    /// Every change the agent made in the current session as hunks with a review state, each
    /// against the file before its own call (beside the session file, like the originals).
    pub fn review(&self) -> Review {
        Review::of_session(self.session().path())
    }

    /// Tokens the conversation fills in the model's window, as the provider last counted them
    /// (the latest assistant reply that reports a usage: `wall::reported`; a reply cut off by
    /// a stop reports none), and the window: the one that reply was counted against when it
    /// says (an external agent's, [`CONTEXT_WINDOW`]), else our model's. 0 before the first reply.
    pub fn context_usage(&self) -> (u64, u64) {
        let ours = self.provider_config().context_window;
        let session = self.session();
        let last = session
            .get_branch(None)
            .iter()
            .rev()
            .filter(|e| e.message_role() == Some(crate::message::Role::Assistant))
            .find_map(|e| e.message().and_then(|m| Some((super::wall::reported(&m)?, m.usage?))));
        match last {
            Some((used, usage)) => (used, usage.extra.get(CONTEXT_WINDOW).and_then(serde_json::Value::as_u64).unwrap_or(ours)),
            None => (0, ours),
        }
    }

    /// The active context as a request sends it: the session's stored messages as their JSON
    /// text, unparsed (the request is written from it), or the replaced context.
    pub fn request_messages(&self) -> Vec<ContextMessage> {
        let replaced = self.state().messages.clone();
        match replaced {
            Some(messages) => messages.into_iter().map(ContextMessage::from).collect(),
            None => self.session().request_messages(),
        }
    }

    /// The active LLM context: what the next request carries before it is fitted.
    pub fn context_messages(&self) -> Vec<Message> {
        let replaced = self.state().messages.clone();
        replaced.unwrap_or_else(|| self.session().build_session_context().messages)
    }

    /// The tools offered to the current session: the enabled ones, `session_query` only when it
    /// has a parent. Its requests and its system prompt list these.
    pub fn offered_tools(&self) -> ToolRegistry {
        self.tools.offered(self.session().header().parent_session.is_some())
    }

    /// The system prompt every request of the current session sends, the handoff's too: built
    /// at the session's first request and kept (the same bytes each time, for the provider's
    /// prompt cache), built again for another session or working directory, or when an
    /// instruction or skill file changed or the pins did (then with the same date).
    pub fn system_prompt(&self) -> Arc<SystemPrompt> {
        let (session_id, cwd, pins) = {
            let session = self.session();
            (session.session_id().to_string(), session.cwd().to_path_buf(), session.pins())
        };
        let tools = self.offered_tools();
        let mut kept = lock(&self.system_prompt);
        let same_session = kept.as_ref().filter(|(id, p)| *id == session_id && p.environment.cwd == cwd);
        if let Some((_, prompt)) = same_session {
            if prompt.is_current() && prompt.pins == pins {
                return prompt.clone();
            }
        }
        let environment = match same_session {
            Some((_, prompt)) => prompt.environment.clone(),
            None => system_prompt::Environment::current(&cwd),
        };
        let built = Arc::new(SystemPrompt::build(&self.prompt_sources, tools.tools(), environment, pins));
        *kept = Some((session_id, built.clone()));
        built
    }
}
