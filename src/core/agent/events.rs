//! Events of an agent session, in the shapes pi prints with `--mode json`
//! (`agent_start` … `agent_end`), plus the handoff and session-switch events of this project.

use serde::Serialize;

use crate::core::message::Message;
use crate::core::tools::Todo;

/// One streamed change to the assistant message being written.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantMessageEvent {
    #[serde(rename_all = "camelCase")]
    TextDelta { content_index: usize, delta: String },
    #[serde(rename_all = "camelCase")]
    ThinkingDelta { content_index: usize, delta: String },
}

/// The outcome of a handoff as UIs see it (see `crate::core::handoff::HandoffOutcome`).
pub use crate::core::handoff::HandoffOutcome;

/// Why the session file changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwitchReason {
    /// `/new`: a new, empty session.
    New,
    /// Another session file was opened.
    Resume,
    /// A handoff continued in the session it created.
    Handoff,
}

/// How loudly to say it (a front end maps it to its own levels, e.g. `vim.log.levels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// One line for the user: a refusal, a warning, the outcome of a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Notice {
    pub level: Level,
    pub message: String,
}

impl Notice {
    pub fn new(level: Level, message: impl Into<String>) -> Self {
        Self { level, message: message.into() }
    }
}

/// Everything a subscriber (a front end's event bridge, the CLI's printer) can observe.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    AgentStart,
    TurnStart,
    MessageStart { message: Message },
    #[serde(rename_all = "camelCase")]
    MessageUpdate { assistant_message_event: AssistantMessageEvent },
    MessageEnd { message: Message },
    #[serde(rename_all = "camelCase")]
    TurnEnd { message: Message, tool_results: Vec<Message> },
    AgentEnd { messages: Vec<Message> },
    /// A tool call starts (after consent).
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart { tool_call_id: String, tool_name: String, args: serde_json::Value },
    /// Output of a running tool so far (bash); each update replaces the last.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate { tool_call_id: String, tool_name: String, partial: String },
    /// A tool call ended; `result` is the `toolResult` message stored for it.
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd { tool_call_id: String, tool_name: String, args: serde_json::Value, is_error: bool, result: Message },
    /// A successful `todo_write` changed the todo list (its result is stored): the whole list.
    TodosChanged { todos: Vec<Todo> },
    HandoffStart { focus: Option<String> },
    HandoffEnd { outcome: HandoffOutcome },
    /// The session file changed.
    SessionSwitch { old: Option<String>, new: String, reason: SwitchReason },
    /// Something the user must be told that is no part of a message: refusals included, so
    /// every outcome of a command travels the same route.
    Notice(Notice),
}
