//! What a session's entries say beyond their content, each worked out here only: how many
//! messages a branch holds, and whether a user message is a handoff's request (marked when it is
//! written, never guessed from its text). The todo list is in [`super::todos`].

use serde_json::{Map, Value};

use super::SessionEntry;
use crate::message::{Message, Role};

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

/// The one mark of a user-role message the host wrote, with what it is:
/// `"handoffAuthor": "handoff_request" | "continuation" | "todo_reminder"`. Like the marks before
/// it, a field pi 0.73.1 keeps in the file and never sends to a model.
pub const AUTHOR_MARK: &str = "handoffAuthor";

/// The mark of the host's continuation before [`AUTHOR_MARK`] (still read).
const LEGACY_CONTINUATION: &str = "handoffContinuation";

/// What the host writes in the user's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostMessage {
    /// The handoff's instruction.
    HandoffRequest,
    /// The message that goes on after an automatic handoff.
    Continuation,
    /// The reminder of open todo items when the model would stop.
    TodoReminder,
}

impl HostMessage {
    fn as_str(self) -> &'static str {
        match self {
            HostMessage::HandoffRequest => "handoff_request",
            HostMessage::Continuation => "continuation",
            HostMessage::TodoReminder => "todo_reminder",
        }
    }
}

/// Who wrote a user message: the one answer the facts, the chat's transcript, session_query,
/// the session list and the automatic handoff's carried words all read ([`author`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Author {
    /// Not a user message.
    NotUser,
    /// The user typed it.
    User,
    /// A handoff's request, with the focus asked for (empty for none).
    HandoffRequest { focus: String },
    /// The host's continuation after an automatic handoff.
    Continuation,
    /// The host's todo reminder.
    TodoReminder,
}

impl Author {
    /// The user's own words (not the host's, not another role's).
    pub fn is_user(&self) -> bool {
        matches!(self, Author::User)
    }
}

/// Marks `message` as the host's `kind` of message (every host-written user message is marked
/// so, where it is written).
pub fn mark_host(message: &mut Message, kind: HostMessage) {
    message.extra.insert(AUTHOR_MARK.into(), Value::String(kind.as_str().into()));
}

/// Who wrote `message`: the mark, else the marks of older sessions (the handoff request's own
/// field, `handoffContinuation`), else a legacy handoff request's opening; else the user.
pub fn author(message: &Message) -> Author {
    if message.role != Role::User {
        return Author::NotUser;
    }
    if let Some(focus) = handoff_request(message) {
        return Author::HandoffRequest { focus };
    }
    match message.extra.get(AUTHOR_MARK).and_then(Value::as_str) {
        Some("continuation") => return Author::Continuation,
        Some("todo_reminder") => return Author::TodoReminder,
        // A kind written by a later version: the host's anyway, never the user's words.
        Some(_) => return Author::Continuation,
        None => {}
    }
    if message.extra.get(LEGACY_CONTINUATION).and_then(Value::as_bool) == Some(true) {
        return Author::Continuation;
    }
    Author::User
}

/// The messages of a branch: the count the session picker shows and the handoff's guard checks.
pub fn message_count(branch: &[&SessionEntry]) -> usize {
    branch.iter().filter(|e| e.is_message()).count()
}

/// Marks `message` (the handoff's prompt) as a handoff request for `focus`.
pub fn mark_handoff_request(message: &mut Message, focus: Option<&str>) {
    mark_host(message, HostMessage::HandoffRequest);
    let focus = focus.map(str::trim).unwrap_or_default();
    let mark = Map::from_iter([("focus".to_string(), Value::String(focus.to_string()))]);
    message.extra.insert(HANDOFF_REQUEST.into(), Value::Object(mark));
}

/// The focus of a handoff request (empty for none); `None` when `message` is not one (what
/// [`author`] reads). A marked
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
    fn the_host_s_messages_are_never_the_user_s() {
        let mut reminder = Message::user("You have open todo items");
        assert_eq!(author(&reminder), Author::User);
        mark_host(&mut reminder, HostMessage::TodoReminder);
        let stored: Message = serde_json::from_str(&serde_json::to_string(&reminder).unwrap()).unwrap();
        assert_eq!(author(&stored), Author::TodoReminder);
        let mut old = Message::user("go on");
        old.extra.insert(LEGACY_CONTINUATION.into(), Value::Bool(true));
        assert_eq!(author(&old), Author::Continuation);
        let mut request = Message::user("write it");
        mark_handoff_request(&mut request, Some("x"));
        assert_eq!(author(&request), Author::HandoffRequest { focus: "x".into() });
    }

    #[test]
    fn an_unmarked_legacy_request_is_read_by_its_opening() {
        let legacy = format!("{LEGACY_REQUEST_OPENING}\n\n## Goal\n…{LEGACY_FOCUS} tests");
        assert_eq!(handoff_request(&Message::user(legacy)).as_deref(), Some("tests"));
        assert_eq!(handoff_request(&Message::user(LEGACY_REQUEST_OPENING)).as_deref(), Some(""));
        assert_eq!(handoff_request(&Message::user("Write a handoff document, please")), None);
    }
}
