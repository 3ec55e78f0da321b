//! The todo list of a session: the list the `todo_write` tool writes (each call replaces it; the
//! result's `details.todos` holds it) and the open items a handoff carries over (the handoff
//! entry's `details.todos`). The session owns the rule that reads it back, so the chat, the CLI,
//! the handoff's facts and the agent's reminder all see the same list.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::entry::kind;
use super::SessionEntry;
use crate::message::{Message, Role};

/// The tool that writes the list (the name its results are stored under).
pub const TOOL_NAME: &str = "todo_write";

/// `customType` of a handoff's injected entry (its `details` carry the open items over).
pub const HANDOFF_CUSTOM_TYPE: &str = "handoff";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// One item of the list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Todo {
    /// What is to be done, in the imperative ("Run the tests").
    pub content: String,
    pub status: TodoStatus,
    /// The same in the present continuous ("Running the tests"), shown while in progress.
    pub active_form: String,
}

impl Todo {
    /// Still to do: pending or in progress.
    pub fn is_open(&self) -> bool {
        self.status != TodoStatus::Completed
    }
}

/// The list in a `details` object (a `todo_write` result's, a handoff entry's), if it holds one.
pub fn todos_from_details(details: &Value) -> Option<Vec<Todo>> {
    serde_json::from_value(details.get("todos")?.clone()).ok()
}

/// The list a message sets, if it is a successful `todo_write` result. A failed call (refused
/// arguments, two items in progress) changes nothing: the list before it stands.
pub fn list_set_by(message: &Message) -> Option<Vec<Todo>> {
    let result = message.tool_result()?;
    if result.tool_name() != Some(TOOL_NAME) || result.is_error() {
        return None;
    }
    result.details().and_then(todos_from_details)
}

/// The current list after `messages` (oldest first): the latest successful `todo_write` result
/// wins; empty when there is none. For a whole branch, with what a handoff carried, see
/// [`of_branch`].
pub fn current_todos<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<Todo> {
    messages.into_iter().filter_map(list_set_by).last().unwrap_or_default()
}

/// The `details` of a handoff's injected entry (`Null` when it has none, as pi's own), `None`
/// for any other entry. Only a `custom_message` that mentions the type is parsed.
pub fn handoff_details(entry: &SessionEntry) -> Option<Value> {
    if entry.kind != kind::CUSTOM_MESSAGE || !entry.raw_json().contains(HANDOFF_CUSTOM_TYPE) {
        return None;
    }
    entry.custom_message().filter(|c| c.custom_type == HANDOFF_CUSTOM_TYPE)?;
    Some(entry.fields().shift_remove("details").unwrap_or(Value::Null))
}

/// The list a handoff entry carried over (its open items; empty for a handoff written without
/// any, pi's own included). `None` for any other entry.
fn carried_by(entry: &SessionEntry) -> Option<Vec<Todo>> {
    Some(todos_from_details(&handoff_details(entry)?).unwrap_or_default())
}

/// The todo list of a branch (root first): the latest of a successful `todo_write` result and
/// a handoff entry's carried list; empty when there is neither. Walked from the leaf, so only the
/// entries after the list's last change are read; only results that may be `todo_write`'s are
/// parsed.
pub fn of_branch(branch: &[&SessionEntry]) -> Vec<Todo> {
    for entry in branch.iter().rev() {
        if entry.message_role() == Some(Role::ToolResult) {
            let may_be = entry.message_json().is_some_and(|j| super::entry::may_name_tool(j, TOOL_NAME));
            if let Some(list) = may_be.then(|| entry.message()).flatten().as_ref().and_then(list_set_by) {
                return list;
            }
        } else if let Some(list) = carried_by(entry) {
            return list;
        }
    }
    Vec::new()
}
