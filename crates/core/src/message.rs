//! Agent messages in pi's wire shape (`role`, `content` blocks, `stopReason`, `usage`).
//!
//! Every struct keeps the fields it does not know in `extra`, so a message read from a pi
//! session and written back (or sent on to the UI) loses nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Milliseconds since the Unix epoch, as pi stores message timestamps.
pub fn now_millis() -> i64 {
    let now = time::OffsetDateTime::now_utc();
    (now.unix_timestamp_nanos() / 1_000_000) as i64
}

/// An ISO-8601 UTC timestamp with milliseconds (`2026-11-29T19:08:59.865Z`), as pi writes them.
pub fn now_iso() -> String {
    iso_from_datetime(time::OffsetDateTime::now_utc())
}

pub fn iso_from_datetime(dt: time::OffsetDateTime) -> String {
    let dt = dt.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.millisecond()
    )
}

/// Why an assistant turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    #[default]
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolUse => "toolUse",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
        }
    }
}

/// Token counts of one response, as pi records them.
///
/// Written with a `cost` object always: pi reads `usage.cost.total` of every assistant message
/// of a session (its footer, `get_session_stats`) and fails on a message without one. We do not
/// price requests, so a usage of ours that has none says zero, as pi writes for a model without
/// prices; a cost read from a file is kept as it was.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub extra: Map<String, Value>,
}

impl Serialize for Usage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("input", &self.input)?;
        map.serialize_entry("output", &self.output)?;
        map.serialize_entry("cacheRead", &self.cache_read)?;
        map.serialize_entry("cacheWrite", &self.cache_write)?;
        map.serialize_entry("totalTokens", &self.total_tokens)?;
        if !self.extra.contains_key("cost") {
            let zero = serde_json::json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0});
            map.serialize_entry("cost", &zero)?;
        }
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// One block of message content: `text`, `thinking`, `toolCall`, `image`, or anything else.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ContentBlock {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        Self { kind: "text".into(), text: Some(text.into()), thinking: None, extra: Map::new() }
    }

    pub fn thinking(thinking: impl Into<String>) -> Self {
        Self {
            kind: "thinking".into(),
            text: None,
            thinking: Some(thinking.into()),
            extra: Map::new(),
        }
    }

    /// A `toolCall` block in pi's shape: `{type: "toolCall", id, name, arguments}`.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        let mut extra = Map::new();
        extra.insert("id".into(), Value::String(id.into()));
        extra.insert("name".into(), Value::String(name.into()));
        extra.insert("arguments".into(), arguments);
        Self { kind: "toolCall".into(), text: None, thinking: None, extra }
    }

    pub fn is_text(&self) -> bool {
        self.kind == "text"
    }

    /// A string field of `extra` (`id`, `name`, `toolCallId`, …).
    pub fn extra_str(&self, key: &str) -> Option<&str> {
        self.extra.get(key).and_then(Value::as_str)
    }
}

/// Message content: pi accepts a plain string for user messages, blocks everywhere.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Blocks(Vec::new())
    }
}

impl Content {
    /// All `text` blocks joined with `\n` (thinking and tool calls are left out).
    pub fn joined_text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Blocks(blocks) => blocks
                .iter()
                .filter(|b| b.is_text())
                .filter_map(|b| b.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    pub fn has_text_block(&self) -> bool {
        match self {
            Content::Text(_) => true,
            Content::Blocks(blocks) => blocks.iter().any(|b| b.is_text() && b.text.is_some()),
        }
    }

    pub fn blocks(&self) -> Vec<ContentBlock> {
        match self {
            Content::Text(s) => vec![ContentBlock::text(s.clone())],
            Content::Blocks(b) => b.clone(),
        }
    }

    /// Number of characters across text, thinking and the serialized rest: the basis of token
    /// estimates.
    pub fn char_len(&self) -> usize {
        match self {
            Content::Text(s) => s.chars().count(),
            Content::Blocks(blocks) => blocks
                .iter()
                .map(|b| {
                    b.text.as_deref().map_or(0, |t| t.chars().count())
                        + b.thinking.as_deref().map_or(0, |t| t.chars().count())
                        + if b.extra.is_empty() {
                            0
                        } else {
                            serde_json::to_string(&b.extra).map_or(0, |s| s.len())
                        }
                })
                .sum(),
        }
    }
}

/// Who wrote a message. pi uses `user`, `assistant` and `toolResult`; anything else is kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    User,
    Assistant,
    ToolResult,
    #[serde(untagged)]
    Other(String),
}

impl Role {
    /// The role of a message's `role` field.
    pub fn from_name(name: &str) -> Self {
        match name {
            "user" => Self::User,
            "assistant" => Self::Assistant,
            "toolResult" => Self::ToolResult,
            other => Self::Other(other.to_string()),
        }
    }
}

/// The typed view of a stored `toolResult` message: the one reader of the fields pi keeps beside
/// its content (`toolCallId`, `toolName`, `isError`, `details`), whose names the one writer
/// (`ToolOutput::into_message`) takes from [`tool_result_keys`].
#[derive(Clone, Copy, Debug)]
pub struct ToolResultView<'a> {
    message: &'a Message,
}

/// The names of a `toolResult` message's own fields, as pi writes them.
pub mod tool_result_keys {
    pub const CALL_ID: &str = "toolCallId";
    pub const TOOL_NAME: &str = "toolName";
    pub const IS_ERROR: &str = "isError";
    pub const DETAILS: &str = "details";
}

impl<'a> ToolResultView<'a> {
    /// The call this result answers.
    pub fn call_id(self) -> Option<&'a str> {
        self.message.extra_str(tool_result_keys::CALL_ID)
    }

    pub fn tool_name(self) -> Option<&'a str> {
        self.message.extra_str(tool_result_keys::TOOL_NAME)
    }

    /// `isError` as stored, `None` when absent or not a boolean.
    pub fn is_error_stored(self) -> Option<bool> {
        self.message.extra.get(tool_result_keys::IS_ERROR).and_then(Value::as_bool)
    }

    /// Whether the call failed (absent counts as success, as pi reads it).
    pub fn is_error(self) -> bool {
        self.is_error_stored().unwrap_or(false)
    }

    /// The tool's `details`, when it wrote any.
    pub fn details(self) -> Option<&'a Value> {
        self.message.extra.get(tool_result_keys::DETAILS)
    }

    pub fn message(self) -> &'a Message {
        self.message
    }
}

/// One message of the conversation, exactly as pi stores it inside a `message` entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: Content,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: Content::Blocks(vec![ContentBlock::text(text)]),
            stop_reason: None,
            error_message: None,
            usage: None,
            timestamp: Some(now_millis()),
            extra: Map::new(),
        }
    }

    /// An empty assistant message to be filled by a streaming response.
    pub fn assistant(api: &str, provider: &str, model: &str) -> Self {
        let mut extra = Map::new();
        extra.insert("api".into(), Value::String(api.into()));
        extra.insert("provider".into(), Value::String(provider.into()));
        extra.insert("model".into(), Value::String(model.into()));
        Self {
            role: Role::Assistant,
            content: Content::Blocks(Vec::new()),
            stop_reason: Some(StopReason::Stop),
            error_message: None,
            usage: Some(Usage::default()),
            timestamp: Some(now_millis()),
            extra,
        }
    }

    pub fn is_assistant(&self) -> bool {
        self.role == Role::Assistant
    }

    pub fn text(&self) -> String {
        self.content.joined_text()
    }

    pub fn extra_str(&self, key: &str) -> Option<&str> {
        self.extra.get(key).and_then(Value::as_str)
    }

    /// This message as a tool's result, if it is one.
    pub fn tool_result(&self) -> Option<ToolResultView<'_>> {
        (self.role == Role::ToolResult).then_some(ToolResultView { message: self })
    }

    /// Appends a streamed text delta, extending the last text block or opening a new one.
    pub fn push_text(&mut self, delta: &str) {
        self.push_delta("text", delta);
    }

    pub fn push_thinking(&mut self, delta: &str) {
        self.push_delta("thinking", delta);
    }

    fn push_delta(&mut self, kind: &str, delta: &str) {
        if let Content::Text(s) = &self.content {
            self.content = Content::Blocks(vec![ContentBlock::text(s.clone())]);
        }
        let Content::Blocks(blocks) = &mut self.content else { return };
        if let Some(last) = blocks.last_mut().filter(|b| b.kind == kind) {
            let field = if kind == "text" { &mut last.text } else { &mut last.thinking };
            if let Some(s) = field.as_mut() {
                s.push_str(delta);
                return;
            }
        }
        blocks.push(if kind == "text" {
            ContentBlock::text(delta)
        } else {
            ContentBlock::thinking(delta)
        });
    }
}

/// A message's JSON text as its session file holds it: a range of the file's text, which the
/// session's entries share (cloning one is a reference count, not a copy).
#[derive(Clone, Debug)]
pub struct StoredMessage {
    text: std::sync::Arc<String>,
    range: std::ops::Range<usize>,
}

impl StoredMessage {
    pub fn new(text: std::sync::Arc<String>, range: std::ops::Range<usize>) -> Self {
        Self { text, range }
    }

    pub fn json(&self) -> &str {
        self.text.get(self.range.clone()).unwrap_or_default()
    }

    /// The message's role, read off its text (see [`role_of_json`]).
    pub fn role(&self) -> Option<Role> {
        role_of_json(self.json())
    }

    /// The message parsed (`None` when its text does not read as one).
    pub fn message(&self) -> Option<Message> {
        serde_json::from_str(self.json()).ok()
    }
}

#[derive(Deserialize)]
struct RoleView {
    role: Role,
}

/// The role of a message given as JSON text. Messages written as pi writes them
/// (`{"role":"…"` first, no escapes) are not parsed: the context of a large session is built,
/// and fitted, from roles alone.
pub fn role_of_json(json: &str) -> Option<Role> {
    match json.strip_prefix(r#"{"role":""#).and_then(|rest| rest.split_once('"')) {
        Some((role, _)) if !role.contains('\\') => Some(Role::from_name(role)),
        _ => serde_json::from_str::<RoleView>(json).ok().map(|v| v.role),
    }
}

/// A message of the context on its way to the model: stored ones stay JSON text until the
/// request is written (the wire formats copy their strings as they are, see
/// `provider::view`), messages made in memory (summaries, a replaced context) are structs.
#[derive(Clone, Debug)]
pub enum ContextMessage {
    Stored(StoredMessage),
    Made(Box<Message>),
}

impl ContextMessage {
    /// The role, without parsing a stored message written as pi writes them.
    pub fn role(&self) -> Option<Role> {
        match self {
            ContextMessage::Stored(stored) => stored.role(),
            ContextMessage::Made(message) => Some(message.role.clone()),
        }
    }

    /// The message as a struct: a stored one parsed (`None` when it does not read as one).
    pub fn to_message(&self) -> Option<Message> {
        match self {
            ContextMessage::Stored(stored) => stored.message(),
            ContextMessage::Made(message) => Some(Message::clone(message)),
        }
    }
}

impl From<Message> for ContextMessage {
    fn from(message: Message) -> Self {
        ContextMessage::Made(Box::new(message))
    }
}

// Hand-written `Deserialize` for the open structs above. serde's `flatten` and `untagged`
// buffer every field into an intermediate tree first: with them, reading messages was 60% of
// loading a large session. These visitors read each field straight into its place and only
// unknown fields into `extra`.

/// A key or name, borrowed from the input when it has no escapes (nearly always): reading a
/// message then allocates only for what it keeps.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(s.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(s)))
            }
        }
        deserializer.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Key::deserialize(deserializer).map(|Key(name)| Role::from_name(&name))
    }
}

/// `Deserialize` for a struct with `extra: Map<String, Value>` and `Default`: named keys go to
/// their fields, the rest to `extra`.
macro_rules! open_struct_deserialize {
    ($ty:ident, $what:literal, { $($key:literal => $field:ident),* $(,)? }) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$ty, A::Error> {
                        let mut out = $ty::default();
                        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                            match key.as_ref() {
                                $($key => out.$field = map.next_value()?,)*
                                _ => {
                                    let value: Value = map.next_value()?;
                                    out.extra.insert(key.into_owned(), value);
                                }
                            }
                        }
                        Ok(out)
                    }
                }
                deserializer.deserialize_map(V)
            }
        }
    };
}

open_struct_deserialize!(Usage, "token usage", {
    "input" => input, "output" => output, "cacheRead" => cache_read, "cacheWrite" => cache_write,
    "totalTokens" => total_tokens,
});

open_struct_deserialize!(ContentBlock, "a content block", {
    "type" => kind, "text" => text, "thinking" => thinking,
});

/// Only for the visitor: a message is `Default` while it is being read.
impl Default for Message {
    fn default() -> Self {
        Self {
            role: Role::Other(String::new()),
            content: Content::default(),
            stop_reason: None,
            error_message: None,
            usage: None,
            timestamp: None,
            extra: Map::new(),
        }
    }
}

open_struct_deserialize!(Message, "a message", {
    "role" => role, "content" => content, "stopReason" => stop_reason, "errorMessage" => error_message,
    "usage" => usage, "timestamp" => timestamp,
});

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of content blocks")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Content, E> {
                Ok(Content::Text(s.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Content, E> {
                Ok(Content::Text(s))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Content, E> {
                Ok(Content::default())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some(block) = seq.next_element()? {
                    blocks.push(block);
                }
                Ok(Content::Blocks(blocks))
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assistant_message_from_pi_round_trips_unknown_fields() {
        let raw = r#"{"role":"assistant","content":[{"type":"text","text":"Hi"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"cmd":"ls"}}],"api":"openai-completions","provider":"mock","model":"m","usage":{"input":42,"output":7,"cacheRead":0,"cacheWrite":0,"totalTokens":49,"cost":{"total":0}},"stopReason":"stop","timestamp":1795979339933,"responseId":"r1"}"#;
        let msg: Message = serde_json::from_str(raw).unwrap();
        assert_eq!(msg.role, Role::Assistant);
        assert_eq!(msg.text(), "Hi");
        let back: Value = serde_json::to_value(&msg).unwrap();
        let orig: Value = serde_json::from_str(raw).unwrap();
        assert_eq!(back, orig);
    }

    #[test]
    fn our_usage_says_a_zero_cost_as_pi_needs_it() {
        let mut m = Message::assistant("openai-completions", "p", "m");
        m.usage = Some(Usage { input: 3, output: 2, total_tokens: 5, ..Usage::default() });
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v["usage"],
            serde_json::json!({"input": 3, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 5,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
        );
    }

    #[test]
    fn unknown_role_is_kept() {
        let raw = r#"{"role":"bashExecution","command":"ls","output":"a"}"#;
        let msg: Message = serde_json::from_str(raw).unwrap();
        assert_eq!(msg.role, Role::Other("bashExecution".into()));
        let back = serde_json::to_value(&msg).unwrap();
        assert_eq!(back["role"], "bashExecution");
        assert_eq!(back["output"], "a");
    }

    #[test]
    fn text_joins_only_text_blocks() {
        let mut m = Message::assistant("a", "p", "m");
        m.push_thinking("hmm");
        m.push_text("one");
        m.push_text(" two");
        if let Content::Blocks(b) = &mut m.content {
            b.push(ContentBlock::text("three"));
        }
        assert_eq!(m.text(), "one two\nthree");
    }
}
