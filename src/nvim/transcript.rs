//! What the chat buffer shows of a session: its current branch as display items, and the
//! records Lua receives for agent events. Lua renders; it never reads session files itself.

use serde_json::{json, Map, Value};

use crate::core::agent::{AgentEvent, AgentSession, AssistantMessageEvent};
use crate::core::controller;
use crate::core::handoff::{self, HandoffOutcome};
use crate::core::message::{Message, Role};
use crate::core::session::entry::kind;
use crate::core::session::{SessionEntry, SessionManager};

/// Removes `null` members recursively: msgpack nil becomes `vim.NIL` inside Lua tables, which
/// is truthy and a trap in every `if x then`; an absent key is plain `nil`.
pub fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, strip_nulls(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// Focus of an internal handoff request, when `text` is one (`None` otherwise).
fn handoff_request_focus(text: &str) -> Option<String> {
    let prompt = handoff::PROMPT.trim_end();
    let rest = text.strip_prefix(prompt)?;
    Some(rest.trim().strip_prefix("Additional focus:").map(|f| f.trim().to_string()).unwrap_or_default())
}

fn thinking_of(message: &Message) -> String {
    message
        .content
        .blocks()
        .iter()
        .filter(|b| b.kind == "thinking")
        .filter_map(|b| b.thinking.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

/// One message as a display item (`None` for roles the chat does not show).
pub fn message_item(message: &Message) -> Option<Value> {
    let text = message.text();
    let item = match &message.role {
        Role::User => match handoff_request_focus(&text) {
            Some(focus) => json!({ "kind": "handoff_request", "focus": focus }),
            None => json!({ "kind": "user", "text": text }),
        },
        Role::Assistant => json!({
            "kind": "assistant",
            "text": text,
            "thinking": Some(thinking_of(message)).filter(|t| !t.is_empty()),
            "model": message.extra_str("model"),
            "stop_reason": message.stop_reason.map(|s| s.as_str()),
            "error_message": message.error_message,
            "output_tokens": message.usage.as_ref().map(|u| u.output).filter(|o| *o > 0),
        }),
        Role::ToolResult => json!({ "kind": "tool", "text": text }),
        Role::Other(role) => json!({ "kind": "custom", "custom_type": role, "text": text }),
    };
    Some(item)
}

/// Items a transcript carries unless more are asked for: a long session's chat opens on its
/// latest part, and the chat asks for earlier ones a page at a time. Building and drawing all
/// 100k items of a large session took the host 100+ MB and Neovim 1.3 s and 200 MB.
pub const PAGE: usize = 1000;

/// One branch entry as a display item (`None` for entries the chat does not show).
fn entry_item(entry: &SessionEntry) -> Option<Value> {
    if let Some(message) = entry.message() {
        message_item(&message)
    } else if let Some(custom) = entry.custom_message().filter(|c| c.display) {
        let text = custom.content.joined_text();
        Some(if custom.custom_type == handoff::CUSTOM_TYPE {
            json!({ "kind": "handoff", "text": text })
        } else {
            json!({ "kind": "custom", "custom_type": custom.custom_type, "text": text })
        })
    } else if let Some((summary, _)) = entry.compaction() {
        Some(json!({ "kind": "compaction", "text": summary }))
    } else if let Some(summary) = entry.branch_summary() {
        Some(json!({ "kind": "branch_summary", "text": summary }))
    } else if entry.kind == kind::MODEL_CHANGE {
        let (provider, model) = entry.model_change()?;
        Some(json!({ "kind": "model", "provider": provider, "model": model }))
    } else {
        None
    }
}

/// Whether `entry` shows in the chat, without reading its message.
fn shows(entry: &SessionEntry) -> bool {
    if entry.is_message() {
        return entry.message_role().is_some();
    }
    match entry.kind.as_str() {
        kind::COMPACTION | kind::BRANCH_SUMMARY | kind::MODEL_CHANGE => true,
        kind::CUSTOM_MESSAGE => entry.custom_message().is_some_and(|c| c.display),
        _ => false,
    }
}

/// The last `limit` display items of the current branch of `session`, root first, and how
/// many items come before them.
pub fn items(session: &SessionManager, limit: usize) -> (Vec<Value>, usize) {
    let branch = session.get_branch(None);
    let mut out = Vec::new();
    let mut rest = branch.len();
    while rest > 0 && out.len() < limit {
        rest -= 1;
        out.extend(entry_item(branch[rest]));
    }
    out.reverse();
    let earlier = branch[..rest].iter().filter(|e| shows(e)).count();
    (out, earlier)
}

/// Session identity and run state, as `status()` reports it.
pub fn status(agent: &AgentSession) -> Value {
    let (session_file, session_id, parent) = {
        let session = agent.session();
        (
            session.path().to_string_lossy().into_owned(),
            session.session_id().to_string(),
            session.header().parent_session.clone(),
        )
    };
    let config = agent.provider_config();
    strip_nulls(json!({
        "session_file": session_file,
        "session_id": session_id,
        "parent_session": parent,
        "busy": agent.is_busy(),
        "generating_handoff": agent.is_generating_handoff(),
        "provider": config.name,
        "api": config.api,
        "model": config.model,
    }))
}

/// A `transcript` record with the last `limit` items (`earlier`: how many come before them;
/// `page`: how many more to ask for at a time): the chat rebuilds from it.
pub fn transcript(agent: &AgentSession, limit: usize) -> Value {
    let (items, earlier) = items(&agent.session(), limit);
    let mut record = status(agent);
    if let Value::Object(map) = &mut record {
        map.insert("type".into(), "transcript".into());
        map.insert("items".into(), strip_nulls(Value::Array(items)));
        map.insert("earlier".into(), earlier.into());
        map.insert("page".into(), PAGE.into());
    }
    record
}

/// One notice record (`controller::Notice`).
pub fn notice(notice: &controller::Notice) -> Value {
    json!({ "type": "notice", "level": notice.level, "message": notice.message })
}

/// The outcome of a handoff with the controller's notices, for `handoff_end`.
pub fn handoff_end(outcome: &HandoffOutcome) -> Value {
    let notices: Vec<Value> = controller::handoff_notices(outcome)
        .iter()
        .map(|n| json!({ "level": n.level, "message": n.message }))
        .collect();
    strip_nulls(json!({ "type": "handoff_end", "outcome": outcome, "notices": notices }))
}

/// Lua's record for an agent event that is not a streamed delta (`None`: not shown).
pub fn event_record(event: &AgentEvent, agent: &AgentSession) -> Option<Value> {
    let record = match event {
        AgentEvent::AgentStart => json!({ "type": "agent_start" }),
        AgentEvent::MessageStart { message } => {
            let mut item = message_item(message)?;
            if let Value::Object(map) = &mut item {
                map.insert("type".into(), "message_start".into());
                if message.is_assistant() {
                    // An assistant message starts empty; the deltas fill it.
                    map.remove("text");
                    map.remove("thinking");
                    map.remove("stop_reason");
                }
            }
            item
        }
        AgentEvent::MessageEnd { message } if message.is_assistant() => {
            let mut item = message_item(message)?;
            if let Value::Object(map) = &mut item {
                map.insert("type".into(), "message_end".into());
                map.remove("text");
                map.remove("thinking");
            }
            item
        }
        AgentEvent::AgentEnd { messages } => {
            let last = messages.iter().rev().find(|m| m.is_assistant());
            json!({
                "type": "agent_end",
                "stop_reason": last.and_then(|m| m.stop_reason).map(|s| s.as_str()),
                "error_message": last.and_then(|m| m.error_message.clone()),
                "session_file": agent.session().path().to_string_lossy(),
            })
        }
        AgentEvent::HandoffStart { focus } => json!({ "type": "handoff_start", "focus": focus }),
        AgentEvent::HandoffEnd { outcome } => handoff_end(outcome),
        AgentEvent::SessionSwitch { old, new, reason } => {
            json!({ "type": "session_switch", "old": old, "new": new, "reason": reason })
        }
        AgentEvent::MessageUpdate { .. }
        | AgentEvent::TurnStart
        | AgentEvent::TurnEnd { .. }
        | AgentEvent::MessageEnd { .. } => return None,
    };
    Some(strip_nulls(record))
}

/// A streamed piece of text: `(is_thinking, delta)`.
pub fn delta_of(event: &AgentEvent) -> Option<(bool, &str)> {
    match event {
        AgentEvent::MessageUpdate { assistant_message_event } => match assistant_message_event {
            AssistantMessageEvent::TextDelta { delta, .. } => Some((false, delta)),
            AssistantMessageEvent::ThinkingDelta { delta, .. } => Some((true, delta)),
        },
        _ => None,
    }
}

/// An object record with one more member.
pub fn with(mut record: Value, key: &str, value: Value) -> Value {
    if let Value::Object(map) = &mut record {
        map.insert(key.into(), value);
    } else {
        let mut map = Map::new();
        map.insert(key.into(), value);
        return Value::Object(map);
    }
    record
}
