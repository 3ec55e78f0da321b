//! `todo_write`: the model's task list. pi 0.73.1 has no todo tool; this follows the spec:
//! `todos: [{content, status, activeForm}]`, each call replaces the whole list, at most one item
//! `in_progress`. The list is stored in the result's `details.todos`, so the current list is
//! rebuilt from the session (`session::todos`): the latest successful `todo_write` result on the
//! branch wins, which makes resume and branching give the right list.

use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::{json, Value};

use super::args;
use super::{ToolContext, ToolDefinition, ToolError, ToolOutput};

/// The list's types and the rule that reads it back from a session are the session's (the
/// chat, the CLI, the handoff and the reminder all ask it); this module writes the list.
pub use crate::session::todos::{current_todos, todos_from_details, Todo, TodoStatus, TOOL_NAME};

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: TOOL_NAME.into(),
        description: "Create and update a todo list for the current task. Each call replaces the whole list, so always send every item. Use it for work with several steps: plan the steps as pending items, mark one item in_progress before starting on it (at most one at a time), and mark it completed as soon as it is done. Skip it for a single trivial step.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The complete, updated todo list",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "The task in the imperative, e.g. \"Run the tests\""},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"], "description": "pending, in_progress (at most one item) or completed"},
                            "activeForm": {"type": "string", "description": "The task in the present continuous, shown while it is in progress, e.g. \"Running the tests\""}
                        },
                        "required": ["content", "status", "activeForm"]
                    }
                }
            },
            "required": ["todos"]
        }),
    }
}

#[derive(Deserialize)]
struct Args {
    todos: Vec<Todo>,
}

pub(crate) async fn run(arguments: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let a: Args = args::parse(TOOL_NAME, &definition().parameters, arguments)?;
    for (i, t) in a.todos.iter().enumerate() {
        if t.content.trim().is_empty() {
            return Err(ToolError::Failed(format!("todos[{i}].content must not be empty.")));
        }
    }
    let in_progress = a.todos.iter().filter(|t| t.status == TodoStatus::InProgress).count();
    if in_progress > 1 {
        return Err(ToolError::Failed(format!(
            "Only one todo may be in_progress at a time; {in_progress} are. Mark the others pending or completed."
        )));
    }
    let text = summary(&a.todos);
    Ok(ToolOutput::text(text, json!({ "todos": a.todos })))
}

/// The mark of an item in the texts the model reads (`[ ]`, `[~]`, `[x]`).
fn mark(status: TodoStatus) -> &'static str {
    match status {
        TodoStatus::Completed => "[x]",
        TodoStatus::InProgress => "[~]",
        TodoStatus::Pending => "[ ]",
    }
}

/// The result text: the list as the model will see it.
fn summary(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return "Todo list cleared.".into();
    }
    let done = todos.iter().filter(|t| !t.is_open()).count();
    let mut s = format!("Todo list updated ({done}/{} completed):", todos.len());
    for t in todos {
        let _ = write!(s, "\n{} {}", mark(t.status), t.content);
    }
    s
}

/// The user message that reminds the model of the open items of `todos` when it stopped with
/// some left (see `AgentSession`'s todo reminder).
pub fn reminder_text(todos: &[Todo]) -> String {
    let open: Vec<&Todo> = todos.iter().filter(|t| t.is_open()).collect();
    let mut s = format!(
        "Your todo list still has {} open item{}:",
        open.len(),
        if open.len() == 1 { "" } else { "s" }
    );
    for t in open {
        let _ = write!(s, "\n{} {}", mark(t.status), t.content);
    }
    let _ = write!(
        s,
        "\nContinue with them, or, if they are done or no longer needed, update the list with {TOOL_NAME}."
    );
    s
}

/// The `todo_write` tool (see [`super::Tool`]).
pub struct TodoWrite;

#[async_trait::async_trait]
impl super::Tool for TodoWrite {
    fn kind(&self) -> super::ToolKind {
        super::ToolKind::ReadOnly
    }

    fn activity(&self) -> super::Activity {
        super::Activity::Think
    }

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run(arguments, ctx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{execute, ToolContext};

    fn ctx() -> ToolContext {
        ToolContext::new(std::env::temp_dir())
    }

    #[tokio::test]
    async fn the_list_is_replaced_and_stored_in_details() {
        let out = execute(
            TOOL_NAME,
            json!({"todos": [
                {"content": "Run tests", "status": "completed", "activeForm": "Running tests"},
                {"content": "Fix bug", "status": "in_progress", "activeForm": "Fixing bug"},
                {"content": "Write docs", "status": "pending", "activeForm": "Writing docs"}]}),
            &ctx(),
        )
        .await;
        assert!(!out.is_error, "{}", out.joined_text());
        assert_eq!(
            out.joined_text(),
            "Todo list updated (1/3 completed):\n[x] Run tests\n[~] Fix bug\n[ ] Write docs"
        );
        let list = todos_from_details(&out.details).unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[1].status, TodoStatus::InProgress);
        assert_eq!(list[1].active_form, "Fixing bug");
    }

    #[tokio::test]
    async fn two_in_progress_or_a_bad_status_are_refused() {
        let out = execute(
            TOOL_NAME,
            json!({"todos": [
                {"content": "a", "status": "in_progress", "activeForm": "A"},
                {"content": "b", "status": "in_progress", "activeForm": "B"}]}),
            &ctx(),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.joined_text().starts_with("Only one todo may be in_progress"),
            "{}",
            out.joined_text()
        );
        let out = execute(
            TOOL_NAME,
            json!({"todos": [{"content": "a", "status": "doing", "activeForm": "A"}]}),
            &ctx(),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.joined_text()
                .contains("todos.0.status: Expected one of: pending, in_progress, completed"),
            "{}",
            out.joined_text()
        );
    }

    #[tokio::test]
    async fn the_latest_successful_result_wins() {
        let first = execute(
            TOOL_NAME,
            json!({"todos": [{"content": "a", "status": "pending", "activeForm": "A"}]}),
            &ctx(),
        )
        .await;
        let second = execute(
            TOOL_NAME,
            json!({"todos": [{"content": "b", "status": "completed", "activeForm": "B"}]}),
            &ctx(),
        )
        .await;
        let failed = execute(TOOL_NAME, json!({"todos": "nonsense"}), &ctx()).await;
        assert!(failed.is_error);
        let other = ToolOutput::text("x", json!({"todos": []}));
        let msgs = [
            first.clone().into_message("1", TOOL_NAME),
            second.into_message("2", TOOL_NAME),
            failed.into_message("3", TOOL_NAME),
            other.into_message("4", "read"),
        ];
        let list = current_todos(&msgs);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].content, "b");
        // A branch that stops after the first result sees the first list.
        assert_eq!(current_todos(&msgs[..1])[0].content, "a");
        assert!(current_todos(&msgs[3..]).is_empty());
        // Stored and read back as JSON (as a session file does).
        let json = serde_json::to_string(&first.into_message("1", TOOL_NAME)).unwrap();
        let back: crate::message::Message = serde_json::from_str(&json).unwrap();
        assert_eq!(current_todos([&back])[0].content, "a");
    }
}
