//! The agent's plain state: what a run is told (`RunOptions`), what it produced
//! (`RunResult`), what the agent keeps between runs (`AgentState`: the queues, the reminder
//! counter) and what it is built from (`AgentConfig`).

use std::collections::VecDeque;
use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::{fit, wall, SwitchReason, DEFAULT_MAX_TODO_REMINDERS, DEFAULT_MAX_TURNS};
use crate::failure::FailureKind;
use crate::message::Message;
use crate::provider::{ProviderConfig, ThinkingLevel};
use crate::tools::consent::Policy;
use crate::tools::ToolRegistry;

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
    /// Stop at the wall (see `wall`): before a prompt, after a tool batch, after the final
    /// reply, at an overflow. Off for the handoff's own run and when automatic handoffs are off.
    pub watch_wall: bool,
    /// Do not stop at the wall before the run's first request (its prompt is sent whatever the
    /// estimate: a handoff was refused or cancelled for it).
    pub send_first: bool,
    /// Write the run's messages to the session as they come (pi persists at `message_end`).
    /// Off (the automatic handoff), they are only in the result, for the caller to record
    /// ([`AgentSession::record_messages`]) or drop; such a run runs no tools.
    pub record: bool,
    /// With `fit_to_window`: the whole request's estimate at most (system prompt and tool
    /// definitions included), below what the window leaves.
    pub fit_limit: Option<u64>,
    /// Requests go to the document model (`AgentSession::set_document_model`, the handoff's
    /// `handoff.model`) instead of the session's.
    pub document_model: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            expand_prompt_templates: true,
            fit_to_window: false,
            single_turn: false,
            use_tools: true,
            watch_wall: false,
            send_first: false,
            record: true,
            fit_limit: None,
            document_model: false,
        }
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
    /// The estimate of the last request sent (system prompt and tool definitions included).
    pub request_tokens: Option<u64>,
    /// The run stopped at the wall (`RunOptions::watch_wall`).
    pub wall: Option<wall::Wall>,
    /// Messages the run did not send because the wall came first (a prompt, steering or a
    /// follow-up typed by the user), in order: they belong to the session after a handoff.
    pub unsent: Vec<Message>,
}

impl RunResult {
    /// The last assistant message of the run.
    pub fn last_assistant(&self) -> Option<&Message> {
        self.messages.iter().rev().find(|m| m.is_assistant())
    }
}

/// In-memory agent state (pi's `Agent.state` plus `AgentSession`'s queues): the engine's
/// alone (its fields are not public), so that nothing outside it changes what runs or waits.
#[derive(Debug, Default)]
pub struct AgentState {
    /// The active LLM context when it is not the session's (after `replace_messages` or
    /// `reset`). `None`: the session's context, built when a request needs it, so that resuming
    /// a large session neither parses nor holds all its messages (see `context_messages`).
    pub(crate) messages: Option<Vec<Message>>,
    /// Delivered at the next turn boundary of the running response.
    pub(crate) steering: VecDeque<Message>,
    /// Delivered when the running response would otherwise stop.
    pub(crate) follow_up: VecDeque<Message>,
    /// Sent along with the next prompt.
    pub(crate) pending_next_turn: Vec<Message>,
    /// Todo reminders sent since the last `reset()` (bounded by `max_todo_reminders`).
    pub(crate) todo_reminder_counter: u32,
    /// The thinking level of a session that records none: the configured one, then the level in
    /// force when the agent switched to such a session (a resumed file without a level keeps the
    /// level in force; opening a file never writes to it). Not a copy of the session's level,
    /// which is read from the session each time (`AgentSession::thinking_level`).
    pub(crate) unrecorded_thinking: ThinkingLevel,
    /// Cancels the running response; `Some` while one streams.
    pub(super) run: Option<CancellationToken>,
    /// Cancelled when the run ends, however it ends (`RunClaim`'s drop): what sandboxed
    /// commands of the run left running is ended then (`sandbox::CommandScope`).
    pub(super) run_scope: Option<CancellationToken>,
}

/// What waits for the running response or the next prompt (read by front ends and tests; the
/// queues themselves are the engine's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queued {
    /// Messages for the next turn boundary.
    pub steering: usize,
    /// Messages for when the response would stop.
    pub follow_up: usize,
    /// Messages sent along with the next prompt.
    pub next_turn: usize,
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
    /// The tools the model may call (the defaults: read, bash, edit, write, todo_write,
    /// session_query).
    pub tools: ToolRegistry,
    /// Which calls run unasked, which ask, which are refused.
    pub policy: Policy,
    /// Turns of one prompt at most.
    pub max_turns: u32,
    /// Todo reminders at most between two resets (0: never remind).
    pub max_todo_reminders: u32,
    /// The thinking level of a session that has none recorded (a new one).
    pub thinking: ThinkingLevel,
    /// Where the wall is (`handoff.threshold`, `handoff.room`).
    pub wall: wall::WallSettings,
    /// Tool output tokens sent whole, older results cleared from requests
    /// (`handoff.clear_tool_results`, see `clear`); `None`: every result sent.
    pub clear_tool_results: Option<u64>,
    /// How bash commands are confined (`sandbox`, `network`).
    pub sandbox: crate::sandbox::SandboxSettings,
    /// What environment commands get (`tools.env`).
    pub env: crate::tools::EnvSettings,
    /// When the sandbox's work for the first command starts (the front end's choice).
    pub sandbox_prefetch: crate::sandbox::PrefetchAt,
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
            wall: wall::WallSettings::default(),
            clear_tool_results: None,
            sandbox: crate::sandbox::SandboxSettings::default(),
            env: crate::tools::EnvSettings::default(),
            sandbox_prefetch: crate::sandbox::PrefetchAt::default(),
        }
    }

    /// The environment policy of bash and of MCP stdio servers: `tools.env`, and the configured
    /// provider's secret variables never passed on.
    pub fn command_env(&self) -> crate::tools::EnvPolicy {
        crate::tools::EnvPolicy::new(&self.env).with_secrets(self.provider.secret_vars())
    }
}

/// The run slot, taken (`claim_run`) and not yet run: the run's token and the messages queued
/// for its first turn. A guard: dropping it frees the slot, so a run whose future panicked or
/// was dropped never leaves the agent busy (it was freed only when `run()` returned).
pub struct RunClaim<'a> {
    pub(super) slot: &'a std::sync::Mutex<AgentState>,
    pub(super) token: CancellationToken,
    pub(super) pending: Vec<Message>,
    pub(super) scope: CancellationToken,
}

impl Drop for RunClaim<'_> {
    fn drop(&mut self) {
        let mut state = super::lock(self.slot);
        state.run = None;
        state.run_scope = None;
        self.scope.cancel();
    }
}
