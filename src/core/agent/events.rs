//! Events of an agent session, in the shapes pi prints with `--mode json`
//! (`agent_start` … `agent_end`), plus the handoff and session-switch events of this project.

use serde::Serialize;

use crate::core::message::Message;

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
    HandoffStart { focus: Option<String> },
    HandoffEnd { outcome: HandoffOutcome },
    /// The session file changed (`reason`: `handoff`, `new`, `resume`).
    SessionSwitch { old: Option<String>, new: String, reason: String },
}
