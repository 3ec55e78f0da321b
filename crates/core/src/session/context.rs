//! Building the LLM context of a branch, as pi does (`buildSessionContext` + `convertToLlm`).

use serde_json::Value;

use super::entry::SessionEntry;
use crate::message::{Content, ContextMessage, Message, Role};

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

/// A message of the context before it is needed in full: a stored message that reaches the model
/// as it is, or one made from another entry (summaries, extension messages).
enum Part<'a> {
    Stored(&'a SessionEntry),
    Made(Box<Message>),
}

fn append_entry<'a>(push: &mut impl FnMut(Part<'a>), entry: &'a SessionEntry) {
    if entry.is_message() {
        match entry.message_role() {
            Some(Role::User | Role::Assistant | Role::ToolResult) => push(Part::Stored(entry)),
            Some(Role::Other(_)) => {
                if let Some(message) = entry.message().and_then(to_llm) {
                    push(Part::Made(Box::new(message)));
                }
            }
            None => {}
        }
    } else if let Some(custom) = entry.custom_message() {
        // `display` and `details` are for the UI only: just the content reaches the model.
        let content = Content::Blocks(custom.content.blocks());
        push(Part::Made(Box::new(Message { content, ..user_text(String::new(), entry_millis(entry)) })));
    } else if let Some(summary) = entry.branch_summary().filter(|s| !s.is_empty()) {
        push(Part::Made(Box::new(user_text(
            format!("{BRANCH_SUMMARY_PREFIX}{summary}{BRANCH_SUMMARY_SUFFIX}"),
            entry_millis(entry),
        ))));
    }
}

/// The context of a branch with its stored messages not parsed yet.
struct Plan<'a> {
    parts: Vec<Part<'a>>,
    model: Option<(String, String)>,
    thinking_level: Option<String>,
}

/// `(model, thinking level)` in force at the end of `path`, read without its messages but a
/// few from the end.
pub fn settings(path: &[&SessionEntry]) -> (Option<(String, String)>, Option<String>) {
    let thinking_level = path.iter().rev().find_map(|e| e.thinking_level());
    // The model in force is the last model change or assistant reply: look from the leaf back,
    // so that only a few messages are read.
    let mut model = None;
    for entry in path.iter().rev() {
        if let Some(change) = entry.model_change() {
            model = Some(change);
            break;
        }
        if entry.message_role() != Some(Role::Assistant) {
            continue;
        }
        if let Some(m) = entry.message() {
            if let (Some(p), Some(id)) = (m.extra_str("provider"), m.extra_str("model")) {
                model = Some((p.to_string(), id.to_string()));
                break;
            }
        }
    }
    (model, thinking_level)
}

fn plan<'a>(path: &[&'a SessionEntry]) -> Plan<'a> {
    let (model, thinking_level) = settings(path);
    Plan { parts: parts_of(path, Some), model, thinking_level }
}

/// The parts of the context of `path`, in order, each turned into what the caller keeps by
/// `part` (straight into the result: a large session's context is not listed twice).
fn parts_of<'a, T>(path: &[&'a SessionEntry], mut part: impl FnMut(Part<'a>) -> Option<T>) -> Vec<T> {
    let mut parts = Vec::with_capacity(path.len());
    let mut push = |p: Part<'a>| parts.extend(part(p));
    let compaction_idx = path.iter().rposition(|e| e.compaction().is_some());
    let Some(ci) = compaction_idx else {
        for entry in path {
            append_entry(&mut push, entry);
        }
        return parts;
    };
    let (summary, first_kept) = path[ci].compaction().unwrap_or_default();
    push(Part::Made(Box::new(user_text(
        format!("{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}"),
        entry_millis(path[ci]),
    ))));
    let mut kept = false;
    for entry in &path[..ci] {
        kept |= first_kept.as_deref() == Some(entry.id.as_str());
        if kept {
            append_entry(&mut push, entry);
        }
    }
    for entry in &path[ci + 1..] {
        append_entry(&mut push, entry);
    }
    parts
}

/// From this many messages on, they are parsed on all cores.
const PARALLEL_PARSE_MIN_MESSAGES: usize = 512;

/// Builds the context of `path` (root first, leaf last).
pub fn build(path: &[&SessionEntry]) -> SessionContext {
    let Plan { parts, model, thinking_level } = plan(path);
    let parallel = parts.len() >= PARALLEL_PARSE_MIN_MESSAGES;
    let messages = crate::parallel::map_in_parallel(&parts, parallel, |part| match part {
        Part::Stored(entry) => entry.message(),
        Part::Made(message) => Some(Message::clone(message)),
    });
    SessionContext { messages: messages.into_iter().flatten().collect(), model, thinking_level }
}

/// The messages of the context of `path` for a request: stored messages as their JSON text,
/// unparsed (the request is written from it), the others built.
pub fn request_messages(path: &[&SessionEntry]) -> Vec<ContextMessage> {
    parts_of(path, |part| match part {
        Part::Stored(entry) => entry.stored_message().map(ContextMessage::Stored),
        Part::Made(message) => Some(ContextMessage::Made(message)),
    })
}

/// Writes the messages of the context of `path` as a JSON array. Stored messages are copied
/// as they are in the file, without being parsed: this is what makes `handoff-nvim context`
/// on a large session cost little more than reading it.
pub fn write_json(path: &[&SessionEntry], out: &mut impl std::io::Write) -> std::io::Result<()> {
    out.write_all(b"[")?;
    for (i, part) in plan(path).parts.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        match part {
            Part::Stored(entry) => out.write_all(entry.message_json().unwrap_or("null").as_bytes())?,
            Part::Made(message) => serde_json::to_writer(&mut *out, message)?,
        }
    }
    out.write_all(b"]")
}
