//! What a session's entries say beyond their content, each worked out here only: how many
//! messages a branch holds, and whether a user message is a handoff's request (marked when it is
//! written, never guessed from its text). The todo list is in [`super::todos`].

use serde_json::{Map, Value};

use super::SessionEntry;
use crate::core::message::{Message, Role};

/// The field that marks a user message as a handoff's request, with the focus asked for:
/// `"handoffRequest": {"focus": "…"}`. pi keeps fields it does not know and sends none of them
/// to a model, and so does the request writer here.
pub const HANDOFF_REQUEST: &str = "handoffRequest";

/// How every handoff request written before the mark began (the instruction's first sentence at
/// the time). Frozen here, not read from the current instruction, so that editing the
/// instruction never changes how a session shows; only an unmarked (legacy) message is read so.
const LEGACY_REQUEST_OPENING: &str = "Write a handoff document for this session so that a fresh session, which will see nothing of this conversation but your document, can continue the work seamlessly.";

/// How legacy requests named their focus (after the instruction).
const LEGACY_FOCUS: &str = "\n\nAdditional focus:";

/// The messages of a branch: the count the session picker shows and the handoff's guard checks.
pub fn message_count(branch: &[&SessionEntry]) -> usize {
    branch.iter().filter(|e| e.is_message()).count()
}

/// Marks `message` (the handoff's prompt) as a handoff request for `focus`.
pub fn mark_handoff_request(message: &mut Message, focus: Option<&str>) {
    let focus = focus.map(str::trim).unwrap_or_default();
    let mark = Map::from_iter([("focus".to_string(), Value::String(focus.to_string()))]);
    message.extra.insert(HANDOFF_REQUEST.into(), Value::Object(mark));
}

/// The focus of a handoff request (empty for none); `None` when `message` is not one. A marked
/// message is one; an unmarked user message is one only when it has the legacy opening (sessions
/// written before the mark).
pub fn handoff_request(message: &Message) -> Option<String> {
    if message.role != Role::User {
        return None;
    }
    if let Some(mark) = message.extra.get(HANDOFF_REQUEST) {
        return Some(mark.get("focus").and_then(Value::as_str).unwrap_or_default().to_string());
    }
    let text = message.text();
    let rest = text.trim_start().strip_prefix(LEGACY_REQUEST_OPENING)?;
    Some(rest.rsplit_once(LEGACY_FOCUS).map(|(_, focus)| focus.trim().to_string()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_marked_request_is_one_whatever_its_text() {
        let mut m = Message::user("any instruction at all");
        assert_eq!(handoff_request(&m), None);
        mark_handoff_request(&mut m, Some(" the parser "));
        assert_eq!(handoff_request(&m).as_deref(), Some("the parser"));
        let stored: Message = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(handoff_request(&stored).as_deref(), Some("the parser"));
        let mut none = Message::user("x");
        mark_handoff_request(&mut none, None);
        assert_eq!(handoff_request(&none).as_deref(), Some(""));
    }

    #[test]
    fn an_unmarked_legacy_request_is_read_by_its_opening() {
        let legacy = format!("{LEGACY_REQUEST_OPENING}\n\n## Goal\n…{LEGACY_FOCUS} tests");
        assert_eq!(handoff_request(&Message::user(legacy)).as_deref(), Some("tests"));
        assert_eq!(handoff_request(&Message::user(LEGACY_REQUEST_OPENING)).as_deref(), Some(""));
        assert_eq!(handoff_request(&Message::user("Write a handoff document, please")), None);
    }
}
