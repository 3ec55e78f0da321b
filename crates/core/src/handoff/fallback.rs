//! Never die at the wall (issue 32): when the model writes no usable document for an automatic
//! handoff (the provider down, every fitted request refused, an empty or cut-off reply), the host
//! builds one itself, deterministically, so the new session still starts and the work goes on.
//!
//! It summarises nothing: the six sections point at what the host knows for certain and
//! carries after the document anyway ([`Carried`]: the facts and the user's own words, never
//! computed twice), and quote the last turns verbatim within a token budget. It says it was
//! written without the model, and the new session's entry records why (`details.fallback`).

use serde_json::{json, Value};

use super::{auto, Carried, HandoffError};
use crate::agent::{fit, AfterWall, Wall};
use crate::message::{Message, Role};
use crate::session::{self, todos::TodoStatus, SessionEntry};

/// The document's first line: the chat, the CLI and a reader of `handoff.md` see at once who
/// wrote it.
pub const TITLE: &str = "# Handoff written by handoff.nvim without the model";

/// Tokens of verbatim turns at most (and at most a tenth of the window): the new session must
/// start well below its own wall.
const LAST_TURNS_TOKENS: usize = 6000;

/// Characters of one quoted message at most (its middle is left out).
const MAX_MESSAGE_CHARS: usize = 2000;

/// Characters of the reason kept (a provider's error body can be long).
const MAX_REASON_CHARS: usize = 300;

/// Whether a handoff that wrote no document falls back to the host's: not when it was
/// cancelled (the user said stop) nor when the session could not be read or written (the
/// fallback would fail the same way).
pub(super) fn applies(reason: &HandoffError) -> bool {
    matches!(reason, HandoffError::NoText | HandoffError::ModelError(_) | HandoffError::CutOff | HandoffError::ToolUse)
}

/// Why there is no model-written document, short enough for a chat line.
pub(super) fn reason_text(reason: &HandoffError) -> String {
    let text = reason.to_string();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(MAX_REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The entry's `details.fallback`.
pub(super) fn details(reason: &str) -> Value {
    json!({ "reason": reason })
}

/// The token budget of the verbatim turns for a model of `window` tokens.
pub(super) fn turns_budget(window: u64) -> usize {
    LAST_TURNS_TOKENS.min(usize::try_from(window / 10).unwrap_or(usize::MAX))
}

/// The host's document for a handoff at `wall` that the model could not write (`reason`), from
/// the branch handed off and what is carried after the document.
pub fn document(branch: &[&SessionEntry], carried: &Carried, wall: &Wall, reason: &str, budget: usize) -> String {
    let facts = &carried.facts;
    let words = &carried.words;
    let mut out = vec![
        TITLE.to_string(),
        format!(
            "The model could not write this handoff document ({reason}). handoff.nvim built it from what it records for certain: the user's own words and the facts of the work, which follow this document, and the last turns of the previous session, verbatim. It summarises nothing: read the turns and the facts before acting."
        ),
    ];

    out.push("## Goal".into());
    out.push(if words.task.is_some() {
        "The user's task, in their own words, follows this document (<user-task>; their latest message, when it differs, in <user-latest-message>).".into()
    } else {
        "Not recorded apart from the last turns below.".into()
    });

    out.push("## Constraints & Preferences".into());
    out.push("Only what the user wrote: their words after this document and their messages among the last turns.".into());

    out.push("## Progress".into());
    let mut progress = Vec::new();
    let count = |n: usize, (one, many): (&str, &str), tag: &str| {
        (n > 0).then(|| format!("- {n} {} (<{tag}>).", if n == 1 { one } else { many }))
    };
    progress.extend(count(facts.modified_files.len(), ("file modified", "files modified"), "modified-files"));
    progress.extend(count(facts.read_files.len(), ("file read only", "files read only"), "read-files"));
    progress.extend(count(facts.commands.len(), ("recent command, with its exit code", "recent commands, with their exit codes"), "commands-run"));
    progress.extend(count(facts.todos.len(), ("todo still open", "todos still open"), "open-todos"));
    if progress.is_empty() {
        progress.push("- Nothing recorded: see the last turns below.".into());
    }
    out.push(progress.join("\n"));

    out.push("## Key Decisions".into());
    out.push("Not recorded: no model summarised the previous session. Any decision made is in the last turns below.".into());

    out.push("## Critical Context".into());
    let mut context = vec![format!("- {}", auto::why(wall)), format!("- The model could not write the handoff: {reason}.")];
    if facts.last_error.is_some() {
        context.push("- An error was left unresolved (<last-error>).".into());
    }
    let (turns, left_out) = last_turns(branch, budget);
    let earlier = if left_out > 0 { format!(" ({left_out} earlier messages left out)") } else { String::new() };
    context.push(format!("\nThe last turns of the previous session, verbatim, oldest first{earlier}:\n\n<last-turns>\n{turns}\n</last-turns>"));
    out.push(context.join("\n"));

    out.push("## Next Steps".into());
    let mut steps = Vec::new();
    match wall.after() {
        AfterWall::GoesOn => {
            let tools = auto::last_tools(branch);
            let from = if tools.is_empty() { String::new() } else { format!(" (the last tool results are from: {})", tools.join(", ")) };
            steps.push(format!("Continue the step in flight where the last turns stop{from}."));
        }
        AfterWall::Answers => steps.push("Answer the user's message that follows this document: it was not sent before the handoff.".into()),
        AfterWall::Waits => steps.push("The last reply answered the user: wait for their next request.".into()),
    }
    let open = facts.todos.iter().find(|t| t.status == TodoStatus::InProgress).or_else(|| facts.todos.first());
    if let Some(todo) = open {
        steps.push(format!("Then the open todos, starting with: {}", todo.content));
    }
    steps.push("Read a file again before editing it: its content is not carried.".into());
    out.push(steps.iter().enumerate().map(|(i, s)| format!("{}. {s}", i + 1)).collect::<Vec<_>>().join("\n"));

    out.join("\n\n")
}

/// The newest messages of `branch` that fit `budget` tokens, oldest first, each quoted as it was
/// written (the middle of a long one left out), and how many earlier messages were left out.
/// The host's own user messages (a continuation, a todo reminder) are not the conversation.
fn last_turns(branch: &[&SessionEntry], budget: usize) -> (String, usize) {
    let messages: Vec<Message> = branch
        .iter()
        .filter(|e| matches!(e.message_role(), Some(Role::User | Role::Assistant | Role::ToolResult)))
        .filter_map(|e| e.message())
        .filter(|m| m.role != Role::User || session::author(m).is_user())
        .collect();
    let mut quoted = Vec::new();
    let mut used = 0;
    for message in messages.iter().rev() {
        let text = quote(message, MAX_MESSAGE_CHARS);
        let tokens = fit::estimate_text_tokens(&text);
        // The newest message goes in whatever its size (it is clipped already).
        if !quoted.is_empty() && used + tokens > budget {
            break;
        }
        used += tokens;
        quoted.push(text);
    }
    let left_out = messages.len() - quoted.len();
    quoted.reverse();
    (quoted.join("\n\n"), left_out)
}

/// One message as the last turns quote it: who, then the text, the tool calls and their
/// arguments, or the tool's output, clipped in its middle to `max_chars`.
pub(super) fn quote(message: &Message, max_chars: usize) -> String {
    match message.role {
        Role::User => format!("[user]\n{}", auto::clip_middle(message.text().trim(), max_chars)),
        Role::ToolResult => {
            let result = message.tool_result();
            let tool = result.and_then(|r| r.tool_name()).unwrap_or("tool");
            let error = result.is_some_and(|r| r.is_error());
            let label = if error { format!("[{tool} result: error]") } else { format!("[{tool} result]") };
            format!("{label}\n{}", auto::clip_middle(message.text().trim(), max_chars))
        }
        _ => {
            let mut parts = Vec::new();
            let text = message.text();
            if !text.trim().is_empty() {
                parts.push(text.trim().to_string());
            }
            for block in message.content.blocks().iter().filter(|b| b.kind == "toolCall") {
                let name = block.extra_str("name").unwrap_or("tool");
                let args = block.extra.get("arguments").map(Value::to_string).unwrap_or_default();
                parts.push(format!("(calls {name} {args})"));
            }
            format!("[assistant]\n{}", auto::clip_middle(&parts.join("\n"), max_chars))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{Boundary, WallReason};
    use crate::handoff::{missing_sections, Facts, UserWords};

    fn entry(id: &str, message: Value) -> SessionEntry {
        let line = json!({ "type": "message", "id": id, "parentId": null, "timestamp": "t", "message": message });
        SessionEntry::parse(&line.to_string()).expect("an entry")
    }

    fn wall() -> Wall {
        Wall { reason: WallReason::Threshold, boundary: Boundary::AfterTools, tokens: 9000, window: 10_000, threshold: 5000, in_flight: true }
    }

    fn branch() -> Vec<SessionEntry> {
        vec![
            entry("1", json!({ "role": "user", "content": "old question ".repeat(200) })),
            entry("2", json!({ "role": "assistant", "content": [{ "type": "text", "text": "old answer" }] })),
            entry("6", json!({ "role": "user", "content": "reminder", "handoffAuthor": "todo_reminder" })),
            entry("3", json!({ "role": "user", "content": "read notes.txt" })),
            entry("4", json!({ "role": "assistant", "content": [{ "type": "toolCall", "id": "c1", "name": "read", "arguments": { "path": "notes.txt" } }] })),
            entry("5", json!({ "role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{ "type": "text", "text": "the number is 42" }] })),
        ]
    }

    #[test]
    fn the_document_has_the_six_sections_says_who_wrote_it_and_quotes_the_last_turns() {
        let entries = branch();
        let refs: Vec<&SessionEntry> = entries.iter().collect();
        let carried = Carried {
            facts: Facts { read_files: vec!["notes.txt".into()], ..Facts::default() },
            words: UserWords { task: Some("read notes.txt".into()), latest: None },
            auto: Some(wall()),
            ..Carried::default()
        };
        let doc = document(&refs, &carried, &wall(), "HTTP 500", 100);
        assert!(doc.starts_with(TITLE), "{doc}");
        assert!(missing_sections(&doc).is_empty(), "{doc}");
        assert!(doc.contains("(HTTP 500)") && doc.contains("1 file read only (<read-files>)"), "{doc}");
        assert!(doc.contains("[read result]\nthe number is 42"), "{doc}");
        assert!(doc.contains(r#"(calls read {"path":"notes.txt"})"#), "{doc}");
        assert!(doc.contains("(the last tool results are from: read)"), "{doc}");
        // The budget leaves the long old question out; the host's reminder is never quoted.
        assert!(!doc.contains("old question") && !doc.contains("reminder"), "{doc}");
        assert!(doc.contains("(1 earlier messages left out)"), "{doc}");
        // Deterministic: the same branch gives the same document.
        assert_eq!(doc, document(&refs, &carried, &wall(), "HTTP 500", 100));
    }

    #[test]
    fn only_a_failure_of_the_model_falls_back() {
        assert!(applies(&HandoffError::ModelError("HTTP 500".into())));
        assert!(applies(&HandoffError::NoText));
        assert!(!applies(&HandoffError::Cancelled));
        assert!(!applies(&HandoffError::Run(crate::agent::AgentError::Busy)));
        let long = HandoffError::ModelError("x\n".repeat(400));
        assert!(reason_text(&long).chars().count() <= MAX_REASON_CHARS + 1);
    }
}
