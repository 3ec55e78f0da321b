//! The agent loop and `AgentSession`: the conversation in memory, its session file, the
//! provider, the queues of a running response, and the events every front end listens to.
//!
//! One `AgentSession` is shared (`Arc`) by the front end and the tasks it spawns. Locks are held
//! only for short, non-async work; nothing awaits while holding one.

mod assembler;
pub mod events;
pub mod fit;
pub mod system_prompt;
pub mod templates;
mod tool_loop;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use assembler::{Assembled, MessageAssembler};
pub use events::{AgentEvent, AssistantMessageEvent, Level, Notice, SwitchReason};

use crate::core::failure::FailureKind;
use crate::core::message::{ContextMessage, Message, StopReason};
use crate::core::provider::{
    ChatRequest, Provider, ProviderConfig, ProviderError, StreamEvent, ThinkingLevel, ToolCall, ToolChoice,
};
use crate::core::session::{Originals, SessionError, SessionManager};
use crate::core::tools::consent::{Consent, Decision, Grants, Policy};
use crate::core::tools::{todo, DiskFileAccess, EnvPolicy, FileAccess, Todo, ToolRegistry};

pub use system_prompt::{PromptSources, SystemPrompt};
pub use tool_loop::ToolsOutcome;

/// Turns of one prompt at most (each tool round is a turn), unless configured otherwise.
pub const DEFAULT_MAX_TURNS: u32 = 50;

/// Todo reminders at most between two resets (a session switch: `/new`, resume, handoff),
/// unless configured otherwise.
pub const DEFAULT_MAX_TODO_REMINDERS: u32 = 3;

/// Failures of the agent layer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("a response is already in progress")]
    Busy,
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// How a run goes. The defaults are a user's prompt; internal runs (the handoff) change them.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Expand `/name args` user templates. Internal prompts turn this off.
    pub expand_prompt_templates: bool,
    /// Shrink the conversation to fit the model's context window (see `fit`).
    pub fit_to_window: bool,
    /// Stop after the first assistant message: steering and follow-ups queued meanwhile stay
    /// queued instead of being answered in this run.
    pub single_turn: bool,
    /// Let the model call tools. Off (the handoff), the request still carries the tool
    /// definitions, so a provider's prompt cache still hits, with tool choice "none".
    pub use_tools: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self { expand_prompt_templates: true, fit_to_window: false, single_turn: false, use_tools: true }
    }
}

/// A session change: the files before and after, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSwitched {
    pub old: PathBuf,
    pub new: PathBuf,
    pub reason: SwitchReason,
}

/// What one prompt produced: the payload of `agent_end`.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// Messages added by this run, in order (the user prompt first).
    pub messages: Vec<Message>,
    /// The fitted request said this, when `fit_to_window` had to elide anything.
    pub elisions: Option<fit::Elisions>,
    /// What kind of failure ended the last model request, when one failed (the message says
    /// it in words).
    pub failure: Option<FailureKind>,
}

impl RunResult {
    /// The last assistant message of the run.
    pub fn last_assistant(&self) -> Option<&Message> {
        self.messages.iter().rev().find(|m| m.is_assistant())
    }
}

/// In-memory agent state (pi's `Agent.state` plus `AgentSession`'s queues).
#[derive(Debug, Default)]
pub struct AgentState {
    /// The active LLM context when it is not the session's (after `replace_messages` or
    /// `reset`). `None`: the session's context, built when a request needs it, so that resuming
    /// a large session neither parses nor holds all its messages (see `context_messages`).
    pub messages: Option<Vec<Message>>,
    /// Delivered at the next turn boundary of the running response.
    pub steering: VecDeque<Message>,
    /// Delivered when the running response would otherwise stop.
    pub follow_up: VecDeque<Message>,
    /// Sent along with the next prompt.
    pub pending_next_turn: Vec<Message>,
    /// Todo reminders sent since the last `reset()` (bounded by `max_todo_reminders`).
    pub todo_reminder_counter: u32,
    /// The thinking level of a session that records none: the configured one, then the level in
    /// force when the agent switched to such a session (a resumed file without a level keeps the
    /// level in force; opening a file never writes to it). Not a copy of the session's level,
    /// which is read from the session each time (`AgentSession::thinking_level`).
    pub unrecorded_thinking: ThinkingLevel,
    /// Cancels the running response; `Some` while one streams.
    run: Option<CancellationToken>,
}

/// Everything needed to build an `AgentSession`.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub provider: ProviderConfig,
    /// Replaces our words in the system prompt (instruction files, skills and the environment
    /// still follow, as pi's `--system-prompt`).
    pub system_prompt: Option<String>,
    /// Added after the system prompt's words (pi's `--append-system-prompt`).
    pub append_system_prompt: Option<String>,
    /// The user-level folder of instructions (`AGENTS.md`), the front end's; `None`: none.
    pub instructions_dir: Option<PathBuf>,
    /// The user's home, for `~/.agents/skills`; `None`: no user-level skills.
    pub home: Option<PathBuf>,
    pub templates_dir: Option<PathBuf>,
    /// The tools the model may call (pi's defaults: read, bash, edit, write, todo_write).
    pub tools: ToolRegistry,
    /// Which calls run unasked, which ask, which are refused.
    pub policy: Policy,
    /// Turns of one prompt at most.
    pub max_turns: u32,
    /// Todo reminders at most between two resets (0: never remind).
    pub max_todo_reminders: u32,
    /// The thinking level of a session that has none recorded (a new one).
    pub thinking: ThinkingLevel,
}

impl AgentConfig {
    /// The defaults for everything but the provider.
    pub fn new(provider: ProviderConfig) -> Self {
        Self {
            provider,
            system_prompt: None,
            append_system_prompt: None,
            instructions_dir: None,
            home: None,
            templates_dir: None,
            tools: ToolRegistry::default(),
            policy: Policy::default(),
            max_turns: DEFAULT_MAX_TURNS,
            max_todo_reminders: DEFAULT_MAX_TODO_REMINDERS,
            thinking: ThinkingLevel::Off,
        }
    }
}

/// The answer when no front end said how to ask (a library user, a test).
fn no_one_to_ask() -> Arc<dyn Consent> {
    Arc::new(crate::core::tools::consent::Always(Decision::Reject {
        reason: Some("no one is there to approve it".into()),
    }))
}

pub struct AgentSession {
    provider: Mutex<Provider>,
    session: Mutex<SessionManager>,
    state: Mutex<AgentState>,
    events: broadcast::Sender<AgentEvent>,
    prompt_sources: PromptSources,
    /// The system prompt of the session whose id it holds (see `system_prompt`).
    system_prompt: Mutex<Option<(String, Arc<SystemPrompt>)>>,
    templates_dir: Option<PathBuf>,
    tools: ToolRegistry,
    policy: Policy,
    max_turns: u32,
    max_todo_reminders: u32,
    /// "Always" answers of this session (forgotten on a session switch).
    grants: Grants,
    /// How the front end asks the user (`set_consent`).
    consent: Mutex<Arc<dyn Consent>>,
    /// How tools read and write files (`set_file_access`: the editor goes through its buffers).
    files: Mutex<Arc<dyn FileAccess>>,
    /// Variables that never reach a tool's environment (the provider's key among them).
    tool_env: EnvPolicy,
}

/// The run slot, taken (`claim_run`) and not yet run: the run's token and the messages queued
/// for its first turn.
pub struct RunClaim {
    token: CancellationToken,
    pending: Vec<Message>,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it (the state is still
/// consistent: every critical section is a handful of assignments).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AgentSession {
    pub fn new(config: AgentConfig, session: SessionManager) -> Self {
        let (events, _) = broadcast::channel(4096);
        let state = AgentState { unrecorded_thinking: config.thinking, ..AgentState::default() };
        let tool_env = EnvPolicy::new(config.provider.api_key_env.iter().cloned());
        Self {
            provider: Mutex::new(Provider::new(config.provider)),
            session: Mutex::new(session),
            state: Mutex::new(state),
            events,
            prompt_sources: PromptSources {
                replace: config.system_prompt,
                append: config.append_system_prompt,
                user_dir: config.instructions_dir,
                home: config.home,
            },
            system_prompt: Mutex::new(None),
            templates_dir: config.templates_dir,
            tools: config.tools,
            policy: config.policy,
            max_turns: config.max_turns.max(1),
            max_todo_reminders: config.max_todo_reminders,
            grants: Grants::default(),
            consent: Mutex::new(no_one_to_ask()),
            files: Mutex::new(Arc::new(DiskFileAccess)),
            tool_env,
        }
    }

    /// How the front end asks the user about tool calls.
    pub fn set_consent(&self, consent: Arc<dyn Consent>) {
        *lock(&self.consent) = consent;
    }

    /// How tools read and write files (the editor's goes through loaded buffers).
    pub fn set_file_access(&self, files: Arc<dyn FileAccess>) {
        *lock(&self.files) = files;
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.events.subscribe()
    }

    /// Sends an event to every subscriber (the controller reports its outcomes here too).
    pub fn emit(&self, event: AgentEvent) {
        let _ = self.events.send(event);
    }

    pub fn session(&self) -> MutexGuard<'_, SessionManager> {
        lock(&self.session)
    }

    pub fn state(&self) -> MutexGuard<'_, AgentState> {
        lock(&self.state)
    }

    pub fn provider_config(&self) -> ProviderConfig {
        lock(&self.provider).config().clone()
    }

    pub fn templates_dir(&self) -> Option<&std::path::Path> {
        self.templates_dir.as_deref()
    }

    /// The system prompt every request of the current session sends, the handoff's too: built
    /// at the session's first request and kept (the same bytes each time, for the provider's
    /// prompt cache), built again for another session or working directory, or when an
    /// instruction or skill file changed (then with the same date).
    pub fn system_prompt(&self) -> Arc<SystemPrompt> {
        let (session_id, cwd) = {
            let session = self.session();
            (session.session_id().to_string(), session.cwd().to_path_buf())
        };
        let mut kept = lock(&self.system_prompt);
        let same_session = kept.as_ref().filter(|(id, p)| *id == session_id && p.environment.cwd == cwd);
        if let Some((_, prompt)) = same_session {
            if prompt.is_current() {
                return prompt.clone();
            }
        }
        let environment = match same_session {
            Some((_, prompt)) => prompt.environment.clone(),
            None => system_prompt::Environment::current(&cwd),
        };
        let built = Arc::new(SystemPrompt::build(&self.prompt_sources, self.tools.tools(), environment));
        *kept = Some((session_id, built.clone()));
        built
    }

    /// The thinking level in force: the session's last recorded one (`thinking_level_change`),
    /// else the configured default. Read from the session each time (no copy to keep in step):
    /// every request of the session sends it, the handoff's too.
    pub fn thinking_level(&self) -> ThinkingLevel {
        let fallback = self.state().unrecorded_thinking;
        level_of(&self.session(), fallback)
    }

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
        *lock(&self.provider) = Provider::new(config);
        Ok(())
    }

    pub fn is_busy(&self) -> bool {
        self.state().run.is_some()
    }

    /// Stops the running response, if any (pi's `agent.abort()`).
    pub fn abort(&self) {
        if let Some(run) = self.state().run.as_ref() {
            run.cancel();
        }
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

    /// Tokens the conversation fills in the model's window, as the provider last counted them
    /// (the latest assistant reply's input, cached and output tokens), and the window. 0 before
    /// the first reply.
    pub fn context_usage(&self) -> (u64, u64) {
        let window = self.provider_config().context_window;
        let session = self.session();
        let used = session
            .get_branch(None)
            .iter()
            .rev()
            .filter(|e| e.message_role() == Some(crate::core::message::Role::Assistant))
            .find_map(|e| e.message().and_then(|m| m.usage))
            .map_or(0, |u| u.input + u.cache_read + u.cache_write + u.output);
        (used, window)
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

    /// Queues a message for the next turn boundary of the running response.
    pub fn steer(&self, text: &str) {
        self.state().steering.push_back(Message::user(text));
    }

    /// Queues a message to be sent when the running response would stop.
    pub fn follow_up(&self, text: &str) {
        self.state().follow_up.push_back(Message::user(text));
    }

    /// Queues a message to go along with the next prompt.
    pub fn queue_next_turn(&self, message: Message) {
        self.state().pending_next_turn.push(message);
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
        let level = self.thinking_level();
        self.write_settings(next, level)
    }

    fn write_settings(&self, session: &mut SessionManager, level: ThinkingLevel) -> Result<(), SessionError> {
        let config = self.provider_config();
        session.append_model_change(&config.name, &config.model)?;
        session.append_thinking_level_change(level.as_str())?;
        Ok(())
    }

    /// The one way to change sessions (`/new`, resume, handoff): the old session is flushed,
    /// `next` becomes the session, its context the active one, and the queues and counters start
    /// afresh; subscribers hear of it with the reason. Refused while a response runs.
    pub fn switch_to(&self, next: SessionManager, reason: SwitchReason) -> Result<SessionSwitched, AgentError> {
        if self.is_busy() {
            return Err(AgentError::Busy);
        }
        let new = next.path().to_path_buf();
        // The session's id and thinking level come with it (a new or handed-off session recorded
        // the level in force; a resumed one brings its own).
        let in_force = self.thinking_level();
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
        });
        Ok(SessionSwitched { old, new, reason })
    }

    /// Starts a new, empty session (pi's `/new`) with the model and thinking level in force.
    pub fn new_session(&self) -> Result<SessionSwitched, AgentError> {
        if self.is_busy() {
            return Err(AgentError::Busy);
        }
        let mut next = {
            let current = self.session();
            SessionManager::create(current.session_dir(), current.cwd(), None)?
        };
        self.carry_settings(&mut next)?;
        self.switch_to(next, SwitchReason::New)
    }

    /// Sends `text` as a user prompt and runs the agent until it stops.
    pub async fn prompt(&self, text: &str, options: RunOptions) -> Result<RunResult, AgentError> {
        let claim = self.claim_run(&CancellationToken::new())?;
        self.run_claimed(claim, text, options).await
    }

    /// Takes the run slot (one response at a time), or `Busy`. The run stops when `cancel` (a
    /// token of the caller's: the handoff's own) or `abort()` fires. The handoff takes the slot
    /// before it announces itself, so that a prompt racing it is refused instead of the handoff.
    pub fn claim_run(&self, cancel: &CancellationToken) -> Result<RunClaim, AgentError> {
        let mut state = self.state();
        if state.run.is_some() {
            return Err(AgentError::Busy);
        }
        let token = cancel.child_token();
        state.run = Some(token.clone());
        Ok(RunClaim { token, pending: std::mem::take(&mut state.pending_next_turn) })
    }

    /// Runs `text` in the slot `claim` holds, and frees the slot.
    pub async fn run_claimed(&self, claim: RunClaim, text: &str, options: RunOptions) -> Result<RunResult, AgentError> {
        let text = if options.expand_prompt_templates {
            // `/skill:name args` first, then `/template args` (pi's order).
            let skill = system_prompt::skills::expand_command(text, &self.system_prompt().skills);
            templates::expand(skill.as_deref().unwrap_or(text), self.templates_dir.as_deref())
        } else {
            text.to_string()
        };
        self.run_claimed_message(claim, Message::user(text), options).await
    }

    /// Runs `prompt` as it is (a caller's own message: the handoff marks its request) in the
    /// slot `claim` holds, and frees the slot.
    pub async fn run_claimed_message(&self, claim: RunClaim, prompt: Message, options: RunOptions) -> Result<RunResult, AgentError> {
        let RunClaim { token, pending } = claim;
        let result = self.run(pending, prompt, options, &token).await;
        self.state().run = None;
        result
    }

    /// Appends a message to the in-memory context and to the session file (pi persists at
    /// `message_end`).
    /// The file comes first: a message that could not be written (full disk) does not enter
    /// the in-memory context either, so the next request matches what a reload would see.
    /// Returns the id of the message's entry.
    fn commit_message(&self, message: &Message, result: &mut RunResult) -> Result<String, AgentError> {
        self.emit(AgentEvent::MessageEnd { message: message.clone() });
        result.messages.push(message.clone());
        let id = self.session().append_message(message)?;
        if let Some(replaced) = self.state().messages.as_mut() {
            replaced.push(message.clone());
        }
        Ok(id)
    }

    async fn run(
        &self,
        pending: Vec<Message>,
        prompt: Message,
        options: RunOptions,
        cancel: &CancellationToken,
    ) -> Result<RunResult, AgentError> {
        let mut result = RunResult::default();
        self.emit(AgentEvent::AgentStart);
        let mut inbox: Vec<Message> = pending;
        inbox.push(prompt);
        // One level for the whole run: a change while it runs applies from the next prompt, so
        // a tool loop never switches thinking on halfway (Anthropic refuses a tool-use turn
        // without the thinking that led to it once thinking is on).
        let thinking = self.thinking_level();
        let mut turns = 0u32;
        let outcome = 'turns: loop {
            self.emit(AgentEvent::TurnStart);
            for message in std::mem::take(&mut inbox) {
                self.emit(AgentEvent::MessageStart { message: message.clone() });
                if let Err(e) = self.commit_message(&message, &mut result) {
                    break 'turns Err(e);
                }
            }
            turns += 1;
            // The reply's calls, with their arguments or why they are malformed (the message
            // already holds them as `toolCall` blocks).
            let (assistant, tool_calls) = self.stream_turn(options, thinking, cancel, &mut result).await;
            let stop = assistant.stop_reason.unwrap_or_default();
            if let Err(e) = self.commit_message(&assistant, &mut result) {
                break Err(e);
            }
            // A failed or stopped reply runs none of its calls (the wire layer answers them).
            let failed = matches!(stop, StopReason::Error | StopReason::Aborted);
            let start = result.messages.len();
            let tools = if failed || tool_calls.is_empty() || !options.use_tools {
                None
            } else {
                match self.run_tool_calls(tool_calls, cancel, &mut result).await {
                    Ok(outcome) => Some(outcome),
                    Err(e) => break Err(e),
                }
            };
            let tool_results = result.messages[start..].to_vec();
            self.emit(AgentEvent::TurnEnd { message: assistant, tool_results });
            if failed || tools == Some(ToolsOutcome::Stop) {
                break Ok(());
            }
            // A single-turn run (the handoff's) answers only its prompt: messages queued
            // meanwhile are meant for the conversation. They stay queued.
            if options.single_turn {
                break Ok(());
            }
            if tools.is_some() && turns >= self.max_turns {
                self.emit(AgentEvent::Notice(Notice::new(
                    Level::Warn,
                    format!("Stopped after {turns} turns (the turn limit of one prompt); send a prompt to go on"),
                )));
                break Ok(());
            }
            {
                let mut state = self.state();
                // After tool results the model goes on, with any steering typed meanwhile.
                if tools.is_some() || !state.steering.is_empty() {
                    inbox.extend(state.steering.drain(..));
                    continue;
                }
                if let Some(next) = state.follow_up.pop_front() {
                    inbox.push(next);
                    continue;
                }
            }
            // The model would stop: with open items on its list, it is reminded of them.
            match self.todo_reminder(stop, options, cancel) {
                Some(reminder) => inbox.push(reminder),
                None => break Ok(()),
            }
        };
        self.emit(AgentEvent::AgentEnd { messages: result.messages.clone(), failure: result.failure });
        outcome.map(|()| result)
    }

    /// The reminder to send when the model stopped normally (no tool calls) with open items on
    /// its todo list, as an ordinary user message; counted, at most `max_todo_reminders` times
    /// between two resets. `None`: nothing to remind of, or no more reminders.
    fn todo_reminder(&self, stop: StopReason, options: RunOptions, cancel: &CancellationToken) -> Option<Message> {
        if stop != StopReason::Stop
            || !options.use_tools
            || options.single_turn
            || cancel.is_cancelled()
            || self.tools.get(todo::TOOL_NAME).is_none()
            || self.state().todo_reminder_counter >= self.max_todo_reminders
        {
            return None;
        }
        let todos = self.todos();
        if !todos.iter().any(Todo::is_open) {
            return None;
        }
        let mut state = self.state();
        if state.todo_reminder_counter >= self.max_todo_reminders {
            return None;
        }
        state.todo_reminder_counter += 1;
        Some(Message::user(todo::reminder_text(&todos)))
    }

    /// Streams one assistant message. Provider failures end up in the message
    /// (`stopReason: error|aborted`, `errorMessage`), as pi records them.
    ///
    /// Tool calls become `toolCall` blocks where they started in the stream, with the arguments
    /// object (`{}` when the model's arguments are malformed, as pi stores what it cannot
    /// parse); the complete calls are also returned, with the malformed text, in order.
    async fn stream_turn(
        &self,
        options: RunOptions,
        thinking: ThinkingLevel,
        cancel: &CancellationToken,
        result: &mut RunResult,
    ) -> (Message, Vec<ToolCall>) {
        let provider = lock(&self.provider).clone();
        let config = provider.config();
        let system = self.system_prompt();
        let messages = if options.fit_to_window {
            let system_tokens = fit::estimate_text_tokens(&system.text);
            // Room for the reply: max_tokens, but at most a quarter of the window. A small local
            // model configured with its window only keeps the default max_tokens, which alone
            // would fill the window and leave the request nothing but a truncated instruction.
            let reply_tokens = (config.max_tokens as usize).min(config.context_window as usize / 4);
            let budget = (config.context_window as usize)
                .saturating_sub(reply_tokens)
                .saturating_sub(system_tokens)
                .saturating_sub(256);
            let (fitted, elisions) = fit::fit(&self.context_messages(), budget);
            if !elisions.is_empty() {
                tracing::info!(?elisions, budget, "conversation shortened to fit the context window");
                result.elisions = Some(elisions);
            }
            fitted.into_iter().map(ContextMessage::from).collect()
        } else {
            self.request_messages()
        };
        // Without tools (the handoff) the definitions still go along, for a prompt-cache hit.
        let tool_choice = if options.use_tools { ToolChoice::Auto } else { ToolChoice::None };
        let request = ChatRequest {
            system: Some(system.text.clone()),
            messages,
            tools: self.tools.definitions(),
            tool_choice,
            thinking,
            cache_key: Some(self.session().session_id().to_string()),
        };
        let mut assembler = MessageAssembler::new(Message::assistant(config.api.pi_name(), &config.name, &config.model));
        self.emit(AgentEvent::MessageStart { message: assembler.message().clone() });
        let events = self.events.clone();
        let mut on_event = |event: StreamEvent| {
            let event = match assembler.push(event) {
                Assembled::Nothing => return,
                Assembled::Update(event) => AgentEvent::MessageUpdate { assistant_message_event: event },
                Assembled::Notice(text) => AgentEvent::Notice(Notice::new(Level::Warn, text)),
            };
            let _ = events.send(event);
        };
        let outcome = provider.stream(&request, cancel, &mut on_event).await;
        let (mut message, tool_calls) = assembler.finish();
        match outcome {
            Ok(end) => {
                message.stop_reason = Some(end.stop_reason);
                message.usage = Some(end.usage);
                if let Some(id) = end.response_id {
                    message.extra.insert("responseId".into(), id.into());
                }
            }
            Err(ProviderError::Aborted) => {
                message.stop_reason = Some(StopReason::Aborted);
                message.error_message = Some("Request was aborted".into());
            }
            Err(e) => {
                // Reported to the user through the message (every front end shows it): only
                // logged here, below the CLI's stderr level, so the failure is not said twice.
                tracing::info!(error = %e, "model request failed");
                message.stop_reason = Some(StopReason::Error);
                message.error_message = Some(e.to_string());
                result.failure = Some(e.kind());
            }
        }
        (message, tool_calls)
    }
}

/// The thinking level a session recorded last, else `default` (also for a level we do not know).
fn level_of(session: &SessionManager, default: ThinkingLevel) -> ThinkingLevel {
    session.context_settings().1.as_deref().and_then(ThinkingLevel::parse).unwrap_or(default)
}
