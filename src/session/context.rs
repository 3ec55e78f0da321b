//! Building the LLM context of a branch, as pi does (`buildSessionContext` + `convertToLlm`).

use serde_json::Value;

use super::entry::SessionEntry;
use crate::message::{Content, Message, Role};

const COMPACTION_SUMMARY_PREFIX: &str =
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

/// What the model sees for a leaf, and the settings in force there.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionContext {
    /// Only `user`, `assistant` and `toolResult` messages: ready for a provider.
    pub messages: Vec<Message>,
    /// `(provider, model id)` of the last model change or assistant reply on the branch.
    pub model: Option<(String, String)>,
    pub thinking_level: Option<String>,
}

fn user_text(text: String, timestamp: Option<i64>) -> Message {
    let mut m = Message::user(text);
    m.timestamp = timestamp;
    m
}

fn entry_millis(entry: &SessionEntry) -> Option<i64> {
    time::OffsetDateTime::parse(&entry.timestamp, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// A stored message as the LLM sees it: pi's own roles pass, its extension roles become user
/// text, anything else is left out.
fn to_llm(message: Message) -> Option<Message> {
    match &message.role {
        Role::User | Role::Assistant | Role::ToolResult => Some(message),
        Role::Other(role) if role == "custom" => {
            let content = Content::Blocks(message.content.blocks());
            Some(Message { content, ..user_text(String::new(), message.timestamp) })
        }
        Role::Other(role) if role == "bashExecution" => {
            if message.extra.get("excludeFromContext").and_then(Value::as_bool) == Some(true) {
                return None;
            }
            let field = |k: &str| message.extra.get(k).and_then(Value::as_str).unwrap_or_default();
            let mut text = format!("Ran `{}`\n", field("command"));
            let output = field("output");
            if output.is_empty() {
                text.push_str("(no output)");
            } else {
                text.push_str(&format!("```\n{output}\n```"));
            }
            if message.extra.get("cancelled").and_then(Value::as_bool) == Some(true) {
                text.push_str("\n\n(command cancelled)");
            } else if let Some(code) = message.extra.get("exitCode").and_then(Value::as_i64).filter(|c| *c != 0) {
                text.push_str(&format!("\n\nCommand exited with code {code}"));
            }
            Some(user_text(text, message.timestamp))
        }
        Role::Other(_) => None,
    }
}

fn append_entry(messages: &mut Vec<Message>, entry: &SessionEntry) {
    if let Some(message) = entry.message() {
        messages.extend(to_llm(message));
    } else if let Some(custom) = entry.custom_message() {
        // `display` and `details` are for the UI only: just the content reaches the model.
        let content = Content::Blocks(custom.content.blocks());
        messages.push(Message { content, ..user_text(String::new(), entry_millis(entry)) });
    } else if let Some(summary) = entry.branch_summary().filter(|s| !s.is_empty()) {
        messages.push(user_text(
            format!("{BRANCH_SUMMARY_PREFIX}{summary}{BRANCH_SUMMARY_SUFFIX}"),
            entry_millis(entry),
        ));
    }
}

/// Builds the context of `path` (root first, leaf last).
pub fn build(path: &[&SessionEntry]) -> SessionContext {
    let mut ctx = SessionContext::default();
    let mut compaction_idx = None;
    for (i, entry) in path.iter().enumerate() {
        if let Some(level) = entry.thinking_level() {
            ctx.thinking_level = Some(level);
        } else if entry.compaction().is_some() {
            compaction_idx = Some(i);
        }
    }
    // The model in force is the last model change or assistant reply: look from the leaf back,
    // so that only a few messages are read twice.
    for entry in path.iter().rev() {
        if let Some(model) = entry.model_change() {
            ctx.model = Some(model);
            break;
        }
        if let Some(m) = entry.message().filter(Message::is_assistant) {
            if let (Some(p), Some(id)) = (m.extra_str("provider"), m.extra_str("model")) {
                ctx.model = Some((p.to_string(), id.to_string()));
                break;
            }
        }
    }
    let Some(ci) = compaction_idx else {
        for entry in path {
            append_entry(&mut ctx.messages, entry);
        }
        return ctx;
    };
    let (summary, first_kept) = path[ci].compaction().unwrap_or_default();
    ctx.messages.push(user_text(
        format!("{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}"),
        entry_millis(path[ci]),
    ));
    let mut kept = false;
    for entry in &path[..ci] {
        kept |= first_kept.as_deref() == Some(entry.id.as_str());
        if kept {
            append_entry(&mut ctx.messages, entry);
        }
    }
    for entry in &path[ci + 1..] {
        append_entry(&mut ctx.messages, entry);
    }
    ctx
}
