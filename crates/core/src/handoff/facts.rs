//! The facts a handoff carries whatever the model writes: files read and modified (pi's tag names
//! and rule), the commands run with their exit codes, the open todos and the last error left
//! unresolved. They come from the session's current branch and, cumulatively, from the handoff
//! that started it (its entry's `details`), so a chain of handoffs loses nothing.

use std::collections::{BTreeSet, HashMap, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, Role};
use crate::session::SessionEntry;
use crate::session::todos::{self, Todo, TodoStatus};
use crate::tools::{self, CallFact};

/// Commands kept (the most recent ones).
const MAX_COMMANDS: usize = 20;
/// Characters of a command or an error kept.
const MAX_TEXT: usize = 300;

/// One bash call and how it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandRun {
    pub command: String,
    /// `None` when it did not finish (aborted, timed out) or its result is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// How it ended when there is no exit code ("aborted", "timed out after 5 seconds").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

/// What the host knows for certain about the work of a session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Facts {
    /// Files only read (pi: read minus modified), sorted.
    pub read_files: Vec<String>,
    /// Files edited or written, sorted.
    pub modified_files: Vec<String>,
    pub commands: Vec<CommandRun>,
    /// The open items (pending, in progress) of the todo list.
    pub todos: Vec<Todo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Whether a message entry may hold a fact: a tool result, or an assistant message that may
/// call a tool (its text names a `toolCall` block). Read off the entry's text: the user's
/// messages and the model's plain answers are not parsed.
fn may_carry_fact(entry: &SessionEntry) -> bool {
    match entry.message_role() {
        Some(Role::ToolResult) => true,
        Some(Role::Assistant) => {
            entry.message_json().is_some_and(|json| memchr::memmem::find(json.as_bytes(), br#""toolCall""#).is_some())
        }
        _ => false,
    }
}

fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_TEXT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl Facts {
    /// Gathers the facts of a branch: its entries in order, root first. The todo list is the
    /// session's ([`todos::of_branch`]: a failed `todo_write` leaves the list, a handed-over one
    /// included, as it was). Only the entries that can carry a fact are parsed ([`may_carry_fact`],
    /// the handoff entry's details), one at a time.
    pub fn gather(branch: &[&SessionEntry]) -> Facts {
        let messages = branch.iter().filter(|entry| may_carry_fact(entry)).filter_map(|entry| entry.message());
        Self::from_messages(messages, Self::inherited(branch), todos::of_branch(branch))
    }

    /// [`Facts::gather`], with every message of the branch parsed (once) and shown to `each`
    /// too, in order: the handoff's ledger reads them all, and a message is parsed once for both.
    pub fn gather_reading_all(branch: &[&SessionEntry], mut each: impl FnMut(&Message)) -> Facts {
        let messages = branch.iter().filter(|entry| entry.is_message()).filter_map(|entry| entry.message()).inspect(|m| each(m));
        Self::from_messages(messages, Self::inherited(branch), todos::of_branch(branch))
    }

    /// What the last handoff on the branch handed over.
    fn inherited(branch: &[&SessionEntry]) -> Facts {
        branch
            .iter()
            .rev()
            .filter_map(|entry| todos::handoff_details(entry))
            .find_map(|details| serde_json::from_value::<Facts>(details).ok())
            .unwrap_or_default()
    }

    /// The facts of `messages`, on top of what an earlier handoff handed over, with the branch's
    /// todo list.
    fn from_messages(messages: impl Iterator<Item = Message>, inherited: Facts, todos: Vec<Todo>) -> Facts {
        let mut read: BTreeSet<String> = inherited.read_files.into_iter().collect();
        let mut modified: BTreeSet<String> = inherited.modified_files.into_iter().collect();
        let mut commands: VecDeque<CommandRun> = inherited.commands.into();
        // The calls waiting for their result (a call has one: it leaves the map with it, so a
        // long session holds only the calls in flight).
        let mut calls: HashMap<String, (String, Value)> = HashMap::new();
        // The last error per tool, cleared when the same tool succeeds afterwards (an error
        // handed over stays until then too).
        let mut errors: Vec<(String, String)> = Vec::new();
        if let Some(error) = inherited.last_error {
            let tool = error.split(':').next().unwrap_or_default().to_string();
            errors.push((tool, error));
        }
        for message in messages {
            match message.role {
                Role::Assistant => {
                    for block in message.content.blocks().iter().filter(|b| b.kind == "toolCall") {
                        let name = block.extra_str("name").unwrap_or_default().to_string();
                        let args = block.extra.get("arguments").cloned().unwrap_or(Value::Null);
                        if let Some(id) = block.extra_str("id") {
                            calls.insert(id.to_string(), (name, args));
                        }
                    }
                }
                Role::ToolResult => {
                    let Some(result) = message.tool_result() else { continue };
                    let Some((name, args)) = result.call_id().and_then(|id| calls.remove(id)) else {
                        continue;
                    };
                    let is_error = result.is_error();
                    // Each tool says what its call adds.
                    match tools::call_fact(&name, &args, &message) {
                        Some(CallFact::Read(path)) => {
                            read.insert(path);
                        }
                        Some(CallFact::Modified(path)) => {
                            modified.insert(path);
                        }
                        Some(CallFact::Command { command, exit_code, ended }) => {
                            if commands.len() == MAX_COMMANDS {
                                commands.pop_front();
                            }
                            commands.push_back(CommandRun { command: clip(&command), exit_code, ended: ended.as_deref().map(clip) });
                        }
                        None => {}
                    }
                    errors.retain(|(tool, _)| *tool != name);
                    if is_error {
                        let text = message.text();
                        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("failed");
                        let error = format!("{name}: {}", clip(first));
                        errors.push((name, error));
                    }
                }
                _ => {}
            }
        }
        let keep = commands.len().saturating_sub(MAX_COMMANDS);
        commands.drain(..keep);
        Facts {
            read_files: read.difference(&modified).cloned().collect(),
            modified_files: modified.into_iter().collect(),
            commands: commands.into(),
            todos: todos.into_iter().filter(Todo::is_open).collect(),
            last_error: errors.pop().map(|(_, e)| e),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.read_files.is_empty()
            && self.modified_files.is_empty()
            && self.commands.is_empty()
            && self.todos.is_empty()
            && self.last_error.is_none()
    }

    /// The facts as they follow the document inside `<handoff-context>`: pi's file tags, then
    /// ours in the same style.
    pub fn render(&self) -> String {
        let mut sections = Vec::new();
        if !self.read_files.is_empty() {
            sections.push(format!("<read-files>\n{}\n</read-files>", self.read_files.join("\n")));
        }
        if !self.modified_files.is_empty() {
            sections.push(format!("<modified-files>\n{}\n</modified-files>", self.modified_files.join("\n")));
        }
        if !self.commands.is_empty() {
            let lines: Vec<String> = self
                .commands
                .iter()
                .map(|c| match (&c.exit_code, &c.ended) {
                    (Some(code), _) => format!("[exit {code}] {}", c.command),
                    (None, Some(ended)) => format!("[{ended}] {}", c.command),
                    (None, None) => format!("[no result] {}", c.command),
                })
                .collect();
            sections.push(format!("<commands-run>\n{}\n</commands-run>", lines.join("\n")));
        }
        if !self.todos.is_empty() {
            let lines: Vec<String> = self
                .todos
                .iter()
                .map(|t| {
                    let status = if t.status == TodoStatus::InProgress { "in progress" } else { "pending" };
                    format!("- [{status}] {}", t.content)
                })
                .collect();
            sections.push(format!("<open-todos>\n{}\n</open-todos>", lines.join("\n")));
        }
        if let Some(error) = &self.last_error {
            sections.push(format!("<last-error>\n{error}\n</last-error>"));
        }
        sections.join("\n\n")
    }

    /// How many facts of each kind there are, by their key in [`Facts::details`] (the ledger's).
    pub fn counts(&self) -> std::collections::BTreeMap<String, usize> {
        [
            ("readFiles", self.read_files.len()),
            ("modifiedFiles", self.modified_files.len()),
            ("commands", self.commands.len()),
            ("todos", self.todos.len()),
            ("lastError", usize::from(self.last_error.is_some())),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| (kind.to_string(), n))
        .collect()
    }

    /// The entry's `details`: pi's `readFiles` and `modifiedFiles`, and ours beside them.
    pub fn details(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(message: &str) -> SessionEntry {
        SessionEntry::parse(&format!(r#"{{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{message}}}"#)).unwrap()
    }

    #[test]
    fn only_tool_calls_and_their_results_are_read_for_facts() {
        let call = r#"{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{}}]}"#;
        assert!(may_carry_fact(&entry(call)));
        assert!(may_carry_fact(&entry(r#"{"role":"toolResult","toolCallId":"c1","content":[]}"#)));
        // An answer that only talks about tool calls, and the user's messages, are not.
        assert!(!may_carry_fact(&entry(r#"{"role":"assistant","content":[{"type":"text","text":"no toolCall here"}]}"#)));
        assert!(!may_carry_fact(&entry(r#"{"role":"user","content":[{"type":"text","text":"\"toolCall\""}]}"#)));
    }
}
