//! What a wire format is ([`WireFormat`], [`Decoder`]) and what the formats share: pi's history
//! made acceptable to strict servers (`view::prepare`), tool-call assembly
//! ([`ToolCalls`]) and argument parsing.
//!
//! This module depends only on the layer's types and on messages: the formats (`openai/`,
//! `anthropic/`) depend on it, and `http.rs` runs any [`WireFormat`] without knowing which.

use std::fmt::Debug;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value};

use super::types::{ChatRequest, MalformedArguments, ProviderConfig, ProviderError};
use super::types::{StreamEnd, StreamEvent, ToolCall};

/// One API's request and reply shapes. The HTTP attempt, retries, timeouts and cancellation are
/// the same for every format and live elsewhere.
pub(super) trait WireFormat: Debug + Send + Sync {
    /// The endpoint under the base URL, e.g. `/chat/completions`.
    fn path(&self) -> &'static str;

    /// Protocol and auth headers for `key`. Key headers are marked sensitive (see
    /// [`secret_header`]) so that no `Debug` output of a request ever shows them.
    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ProviderError>;

    /// The JSON request body.
    fn body(&self, config: &ProviderConfig, request: &ChatRequest) -> Vec<u8>;

    /// A fresh decoder for one reply.
    fn decoder(&self) -> Box<dyn Decoder>;

    /// `body` (this format's request) asked without streaming and for the shortest reply the
    /// API takes: the probe sent when a stream closed before its first event, to learn whether
    /// the server refuses the request (see `Provider::with_retries`). `None` when `body` is no
    /// JSON object. The default is Chat Completions': `stream_options` gone and the reply
    /// limit, whichever field carries it, 1.
    fn probe_body(&self, body: &[u8]) -> Option<Vec<u8>> {
        unstreamed(body, &[("max_tokens", 1), ("max_completion_tokens", 1)], &["stream_options"])
    }
}

/// `body` with `"stream": false`, each of `limits` that it has set to its value, and `drop`
/// removed.
pub(super) fn unstreamed(body: &[u8], limits: &[(&str, u32)], drop: &[&str]) -> Option<Vec<u8>> {
    let mut fields = serde_json::from_slice::<Map<String, Value>>(body).ok()?;
    fields.insert("stream".into(), Value::Bool(false));
    for field in drop {
        fields.remove(*field);
    }
    for (field, limit) in limits {
        if let Some(value) = fields.get_mut(*field) {
            *value = Value::from(*limit);
        }
    }
    serde_json::to_vec(&fields).ok()
}

/// One server-sent event: its name (`message` when the stream named none) and its data.
#[derive(Clone, Copy, Debug)]
pub(super) struct SseEvent<'a> {
    pub(super) name: &'a str,
    pub(super) data: &'a str,
}

/// Whether the reader should go on after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    Continue,
    /// The reply is complete: stop reading (the rest of the stream, if any, is ignored).
    Done,
}

/// Why a decoder stopped reading before the reply was complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum DecodeError {
    /// The server sent something unreadable: the attempt fails with [`ProviderError::Stream`].
    Broken(String),
    /// The server reported a failure in place of the reply, with its error code when it gave
    /// one: the attempt fails with [`ProviderError::Reported`], whose kind the code tells.
    Reported { code: Option<String>, message: String },
}

impl From<String> for DecodeError {
    fn from(message: String) -> Self {
        DecodeError::Broken(message)
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Broken(message) => f.write_str(message),
            DecodeError::Reported { code: Some(code), message } => {
                write!(f, "the server reported an error: {code}: {message}")
            }
            DecodeError::Reported { code: None, message } => write!(f, "the server reported an error: {message}"),
        }
    }
}

/// A provider's error object as a [`DecodeError::Reported`], or `None` when `v` holds none.
/// Read: `{"error":{"message":…,"code"|"type"|"status":…}}` (OpenAI, Anthropic, llama.cpp,
/// Gemini), `{"error":"…"}` (Ollama), and `{"code":…,"message":…}` at the top (a Responses
/// `error` event). A numeric code (llama.cpp's and Gemini's repeat the status) gives way to
/// the `type` or `status` beside it.
pub(super) fn reported_error(v: &Value) -> Option<DecodeError> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let (code, message) = match v.get("error") {
        Some(Value::String(message)) => (None, Some(message.clone())),
        Some(error @ Value::Object(_)) => (
            text(error, "code").or_else(|| text(error, "type")).or_else(|| text(error, "status")),
            text(error, "message").or_else(|| text(v, "message")),
        ),
        Some(Value::Null) | None => (text(v, "code"), Some(text(v, "message")?)),
        Some(other) => (None, Some(other.to_string())),
    };
    let mut message = message.unwrap_or_else(|| code.clone().unwrap_or_else(|| "unknown error".into()));
    // llama.cpp names its window beside the message only: said, so the user and the window
    // reader (`failure::window_named`) both see it.
    if let Some(n_ctx) = v.get("error").and_then(|e| e.get("n_ctx")).and_then(Value::as_u64) {
        message = format!("{} (context size {n_ctx} tokens)", message.trim());
    }
    Some(DecodeError::Reported { code, message: truncate(message.trim(), 1000) })
}

/// A state machine turning one reply's events into [`StreamEvent`]s and its [`StreamEnd`].
/// `Err` says why the reply cannot go on: the server reported a failure, or sent something
/// unreadable.
pub(super) trait Decoder: Send {
    fn on_event(
        &mut self,
        event: SseEvent<'_>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<Flow, DecodeError>;

    /// The stream is over: `on_event` returned [`Flow::Done`] or the server closed it. Delivers
    /// the tool calls still open and says how the reply ended; `Err` when it had not finished
    /// (the connection closed mid-reply).
    fn finish(self: Box<Self>, emit: &mut dyn FnMut(StreamEvent)) -> Result<StreamEnd, String>;
}

/// `Authorization: Bearer <key>` when there is a key: the headers of the OpenAI formats.
pub(super) fn bearer_headers(key: Option<&str>) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = key {
        headers.insert(reqwest::header::AUTHORIZATION, secret_header(format!("Bearer {key}"))?);
    }
    Ok(headers)
}

/// A header value holding the key, marked sensitive.
pub(super) fn secret_header(value: String) -> Result<HeaderValue, ProviderError> {
    let mut v = HeaderValue::from_str(&value).map_err(|_| {
        ProviderError::MissingKey(
            "the API key contains characters not allowed in an HTTP header".into(),
        )
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// What pi sends in place of a tool result without text (only images, or nothing).
pub(super) const NO_TEXT_RESULT: &str = "(see attached image)";

/// `s` cut to at most `max` bytes on a character boundary, with an ellipsis when cut.
pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A tool call's arguments text as an object. Empty text is `{}` (servers send nothing for a
/// call without parameters). Text that does not parse gets pi's repairs (raw control characters
/// in strings escaped, invalid escapes doubled) and one more try; what still fails, or parses to
/// something other than an object, is [`MalformedArguments`] (see there why we do not parse
/// partial JSON as pi does).
pub(super) fn parse_arguments(raw: &str) -> Result<Map<String, Value>, MalformedArguments> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    let parsed = serde_json::from_str::<Value>(raw).or_else(|first| {
        let repaired = repair_json(raw);
        if repaired == raw {
            return Err(first);
        }
        serde_json::from_str::<Value>(&repaired).map_err(|_| first)
    });
    match parsed {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(MalformedArguments {
            raw: raw.to_owned(),
            error: format!("expected an object, got {}", json_kind(&other)),
        }),
        Err(e) => Err(MalformedArguments { raw: raw.to_owned(), error: e.to_string() }),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// pi's `repairJson`: inside string literals, raw control characters are escaped and a
/// backslash before a character that cannot follow one is doubled. Outside strings nothing
/// changes.
fn repair_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 8);
    let mut in_string = false;
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        if !in_string {
            out.push(c);
            in_string = c == '"';
            continue;
        }
        match c {
            '"' => {
                out.push(c);
                in_string = false;
            }
            '\\' => match chars.peek().copied() {
                None => out.push_str("\\\\"),
                Some('u') => {
                    let hex: String = chars.clone().skip(1).take(4).collect();
                    if hex.len() == 4 && hex.chars().all(|h| h.is_ascii_hexdigit()) {
                        out.push_str("\\u");
                        out.push_str(&hex);
                        for _ in 0..5 {
                            chars.next();
                        }
                    } else {
                        out.push_str("\\\\");
                    }
                }
                Some(next @ ('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't')) => {
                    out.push('\\');
                    out.push(next);
                    chars.next();
                }
                Some(_) => out.push_str("\\\\"),
            },
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The tool calls of one reply while they stream: opens, grows and completes them, emitting
/// the matching [`StreamEvent`]s. Calls are numbered in the order they start.
#[derive(Debug, Default)]
pub(super) struct ToolCalls {
    calls: Vec<PendingCall>,
}

#[derive(Debug)]
struct PendingCall {
    id: String,
    name: String,
    /// Whether `id` was made up because the server sent none (a late real one replaces it).
    made_up_id: bool,
    arguments: String,
    /// Arguments the server sent whole when the call started (Anthropic's `input`).
    initial: Option<Map<String, Value>>,
    /// The call's signature (see [`ToolCall::signature`]).
    signature: Option<String>,
    done: bool,
}

impl ToolCalls {
    /// Opens a call and returns its index.
    pub(super) fn start(
        &mut self,
        id: Option<&str>,
        name: Option<&str>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> usize {
        let index = self.calls.len();
        let given = id.filter(|s| !s.is_empty());
        let id = given.map_or_else(|| made_up_id(index), str::to_owned);
        let name = name.unwrap_or_default().to_owned();
        emit(StreamEvent::ToolCallStart { index, id: id.clone(), name: name.clone() });
        self.calls.push(PendingCall {
            id,
            name,
            made_up_id: given.is_none(),
            arguments: String::new(),
            initial: None,
            signature: None,
            done: false,
        });
        index
    }

    pub(super) fn len(&self) -> usize {
        self.calls.len()
    }

    /// The call with this id.
    pub(super) fn find_id(&self, id: &str) -> Option<usize> {
        self.calls.iter().position(|c| c.id == id)
    }

    pub(super) fn id(&self, index: usize) -> Option<&str> {
        self.calls.get(index).map(|c| c.id.as_str())
    }

    /// Whether the call's id was made up here.
    pub(super) fn has_made_up_id(&self, index: usize) -> bool {
        self.calls.get(index).is_some_and(|c| c.made_up_id)
    }

    /// A late id or name for a call that started without one.
    pub(super) fn complete_header(&mut self, index: usize, id: Option<&str>, name: Option<&str>) {
        let Some(call) = self.calls.get_mut(index) else { return };
        if let Some(id) = id.filter(|s| !s.is_empty()) {
            if call.made_up_id {
                call.id = id.to_owned();
                call.made_up_id = false;
            }
        }
        if let Some(name) = name.filter(|s| !s.is_empty()) {
            if call.name.is_empty() {
                call.name = name.to_owned();
            }
        }
    }

    /// Arguments the server sent whole with the start of the call.
    pub(super) fn set_initial(&mut self, index: usize, arguments: Map<String, Value>) {
        if let Some(call) = self.calls.get_mut(index) {
            call.initial = Some(arguments);
        }
    }

    /// The call's signature; a later empty one keeps it (servers may send it with the first
    /// piece only, as pi's `retainThoughtSignature` expects).
    pub(super) fn set_signature(&mut self, index: usize, signature: &str) {
        if let Some(call) = self.calls.get_mut(index).filter(|c| !c.done && !signature.is_empty()) {
            call.signature = Some(signature.to_owned());
        }
    }

    pub(super) fn append(&mut self, index: usize, delta: &str, emit: &mut dyn FnMut(StreamEvent)) {
        let Some(call) = self.calls.get_mut(index).filter(|c| !c.done) else { return };
        if delta.is_empty() {
            return;
        }
        call.arguments.push_str(delta);
        emit(StreamEvent::ToolCallDelta { index, arguments_delta: delta.to_owned() });
    }

    /// Completes a call (once; later calls for it do nothing).
    pub(super) fn finish(&mut self, index: usize, emit: &mut dyn FnMut(StreamEvent)) {
        let Some(call) = self.calls.get_mut(index).filter(|c| !c.done) else { return };
        call.done = true;
        let arguments = match call.initial.take() {
            Some(initial) if call.arguments.trim().is_empty() => Ok(initial),
            _ => parse_arguments(&call.arguments),
        };
        emit(StreamEvent::ToolCall(ToolCall {
            index,
            id: call.id.clone(),
            name: call.name.clone(),
            arguments,
            signature: call.signature.clone(),
        }));
    }

    /// Completes a call that was cut off (the reply hit its limit before the server finished
    /// it) as malformed, whatever its arguments parse to, so that it is never run as if whole.
    pub(super) fn cut(&mut self, index: usize, why: &str, emit: &mut dyn FnMut(StreamEvent)) {
        let Some(call) = self.calls.get_mut(index).filter(|c| !c.done) else { return };
        call.done = true;
        let arguments = Err(MalformedArguments { raw: call.arguments.clone(), error: why.to_owned() });
        let signature = call.signature.clone();
        emit(StreamEvent::ToolCall(ToolCall { index, id: call.id.clone(), name: call.name.clone(), arguments, signature }));
    }

    /// Whether the call's arguments end before their JSON does (a reply cut there), as opposed
    /// to whole JSON, none, or text that is no JSON at all.
    pub(super) fn ends_early(&self, index: usize) -> bool {
        self.calls.get(index).is_some_and(|c| {
            c.initial.is_none()
                && !c.arguments.trim().is_empty()
                && serde_json::from_str::<serde::de::IgnoredAny>(&c.arguments).is_err_and(|e| e.is_eof())
        })
    }

    /// Completes every call still open at the end of a reply that hit its output limit: one
    /// whose JSON ended early was cut there and is malformed with `why` (see [`cut_call`]), so
    /// it is never run as if whole; the others complete as usual.
    pub(super) fn finish_all_at_limit(&mut self, why: &str, emit: &mut dyn FnMut(StreamEvent)) {
        for index in 0..self.calls.len() {
            if self.ends_early(index) {
                self.cut(index, why, emit);
            } else {
                self.finish(index, emit);
            }
        }
    }

    /// Whether the call was completed.
    pub(super) fn is_done(&self, index: usize) -> bool {
        self.calls.get(index).is_some_and(|c| c.done)
    }

    /// Completes every call still open, in order.
    pub(super) fn finish_all(&mut self, emit: &mut dyn FnMut(StreamEvent)) {
        for index in 0..self.calls.len() {
            self.finish(index, emit);
        }
    }
}

/// Why a call the reply did not finish is not run (what the model reads in its error result):
/// `limit` names the API's output limit.
pub(super) fn cut_call(limit: &str) -> String {
    format!("the reply reached its output limit ({limit}) before the call was complete")
}

/// An id for a call the server sent without one: unique within the reply, and very likely
/// across the session (both APIs want a result's id to name exactly one call).
fn made_up_id(index: usize) -> String {
    let millis = crate::message::now_millis();
    format!("call_{millis:x}_{index}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_parse_repair_or_come_back_raw() {
        assert_eq!(parse_arguments("").unwrap(), Map::new());
        assert_eq!(parse_arguments("  ").unwrap(), Map::new());
        assert_eq!(Value::Object(parse_arguments(r#"{"a":1}"#).unwrap()), json!({"a": 1}));
        // A raw newline and an invalid escape inside a string: repaired as pi does.
        let repaired = parse_arguments("{\"cmd\":\"echo a\nb \\d\"}").unwrap();
        assert_eq!(Value::Object(repaired), json!({"cmd": "echo a\nb \\d"}));
        let cut = parse_arguments(r#"{"path":"a.txt","content":"hel"#).unwrap_err();
        assert_eq!(cut.raw, r#"{"path":"a.txt","content":"hel"#);
        assert!(cut.error.contains("EOF"), "{}", cut.error);
        let list = parse_arguments("[1]").unwrap_err();
        assert_eq!(list.error, "expected an object, got an array");
        assert!(parse_arguments("not json").is_err());
    }

    #[test]
    fn repair_leaves_valid_json_alone() {
        for s in [r#"{"a":"x\"y\\z\u00e9\n"}"#, "[1, 2]", r#"{"k": "\/"}"#] {
            assert_eq!(repair_json(s), s);
        }
        assert_eq!(repair_json("\"a\u{1}\""), "\"a\\u0001\"");
        assert_eq!(repair_json("\"\\uZZ\""), "\"\\\\uZZ\"");
    }

    #[test]
    fn calls_assemble_and_complete_once() {
        let mut events = Vec::new();
        let mut emit = |e| events.push(e);
        let mut calls = ToolCalls::default();
        let a = calls.start(Some("c1"), Some("read"), &mut emit);
        let b = calls.start(None, None, &mut emit);
        calls.append(a, "{\"path\":", &mut emit);
        calls.complete_header(b, Some("c2"), Some("ls"));
        calls.append(b, "", &mut emit);
        calls.append(a, "\"x\"}", &mut emit);
        calls.finish(a, &mut emit);
        calls.finish(a, &mut emit);
        calls.finish_all(&mut emit);
        assert_eq!(events.len(), 6, "{events:?}");
        assert!(matches!(&events[1], StreamEvent::ToolCallStart { index: 1, id, name } if id.starts_with("call_") && name.is_empty()));
        let StreamEvent::ToolCall(first) = &events[4] else { panic!("{events:?}") };
        assert_eq!((first.index, first.id.as_str(), first.name.as_str()), (0, "c1", "read"));
        assert_eq!(Value::Object(first.arguments.clone().unwrap()), json!({"path": "x"}));
        let StreamEvent::ToolCall(second) = &events[5] else { panic!("{events:?}") };
        assert_eq!((second.id.as_str(), second.name.as_str()), ("c2", "ls"));
        assert_eq!(second.arguments, Ok(Map::new()));
    }
}
