//! Anthropic Messages: request body and SSE decoding.
//!
//! The API is stricter than Chat Completions: roles must alternate, tool results travel inside
//! user messages, empty text blocks are rejected and tool ids must match `[a-zA-Z0-9_-]+`. The
//! conversion below makes pi's history fit those rules.

use std::collections::HashMap;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::types::{ChatRequest, ProviderConfig, ProviderError, StreamEnd, StreamEvent, ThinkingLevel};
use super::view::{self, BlockView, ContentView, JsonOut, List, MessageView, Str};
use super::wire::{self, Decoder, Flow, SseEvent, ToolCalls, WireFormat};
use crate::core::message::{Role, StopReason};

/// The Messages wire format.
#[derive(Debug)]
pub(super) struct Anthropic;

impl WireFormat for Anthropic {
    fn path(&self) -> &'static str {
        "/messages"
    }

    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            headers.insert("x-api-key", wire::secret_header(key.to_owned())?);
        }
        headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        Ok(headers)
    }

    fn body(&self, config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
        request_body(config, request)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<AnthropicDecoder>::default()
    }
}

/// The prompt-cache breakpoint pi 0.73.1 sends (its default "short" retention: five minutes).
const CACHE_CONTROL: &str = r#""cache_control":{"type":"ephemeral"}"#;

/// The request body. As pi does, three prompt-cache breakpoints mark the stable prefix: the
/// system prompt (sent as one text block to carry the marker), the last tool definition and the
/// last block of the last user message. Anthropic caches on the prefix and leaves the markers out
/// of the cache key, so the next request (the next turn, or the handoff, which sends the same
/// system prompt, tools and conversation) reads everything up to its predecessor's marker from
/// the cache.
///
/// Written straight from the messages' views (see [`view`]), fields in the order they have
/// always gone out in.
fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
    let thinking = thinking(config, request.thinking);
    let views = view::prepare(view::read_all(&request.messages), config);
    let mut out = JsonOut::with_capacity(view::body_capacity(&request.messages, request.system.as_deref()));
    out.raw("{");
    out.key("model");
    out.text(&config.model);
    out.raw(",");
    out.key("max_tokens");
    out.value(&thinking.max_tokens);
    if let Some(system) = request.system.as_deref().filter(|s| !s.trim().is_empty()) {
        out.raw(r#","system":[{"type":"text","text":"#);
        out.text(system);
        out.raw(",");
        out.raw(CACHE_CONTROL);
        out.raw("}]");
    }
    out.raw(",");
    out.key("messages");
    write_messages(&mut out, config, &views);
    out.raw(r#","stream":true"#);
    // No `temperature` is ever sent: the API refuses it together with thinking.
    for (field, value) in &thinking.fields {
        out.raw(",");
        out.key(field);
        out.value(value);
    }
    if !request.tools.is_empty() {
        let last = request.tools.len() - 1;
        let tools: Vec<Value> = request
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                // pi sends the schema's properties and required list only.
                let field = |k: &str, empty: Value| t.parameters.get(k).cloned().unwrap_or(empty);
                let mut tool = json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": {
                        "type": "object",
                        "properties": field("properties", json!({})),
                        "required": field("required", json!([])),
                    },
                });
                if i == last {
                    tool["cache_control"] = json!({ "type": "ephemeral" });
                }
                tool
            })
            .collect();
        out.raw(",");
        out.key("tools");
        out.value(&tools);
        out.raw(",");
        out.key("tool_choice");
        out.value(&json!({ "type": request.tool_choice.as_str() }));
    }
    out.raw("}");
    out.into_bytes()
}

/// What thinking at a level adds to a request: the reply limit it needs and its fields.
struct Thinking {
    max_tokens: u32,
    fields: Vec<(&'static str, Value)>,
}

/// Anthropic's fields for `level`, as pi 0.73.1 sends them. Off: nothing (the API's default).
/// Models with adaptive thinking (Opus 4.6 and 4.7, Sonnet 4.6) get `thinking: {type:
/// "adaptive"}` and an effort; the others budget-based thinking, `thinking: {type: "enabled",
/// budget_tokens}` with pi's budgets (minimal 1024, low 2048, medium 8192, high 16384). The
/// budget is added to `max_tokens` (the room for the answer), capped at the model's output
/// limit; what does not fit comes off the budget, keeping 1024 tokens for the answer. A budget
/// under the API's minimum of 1024 sends no thinking at all.
fn thinking(config: &ProviderConfig, level: ThinkingLevel) -> Thinking {
    let off = Thinking { max_tokens: config.max_tokens, fields: Vec::new() };
    if !level.is_on() {
        return off;
    }
    if adaptive_thinking(&config.model) {
        let effort = match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        };
        return Thinking {
            max_tokens: config.max_tokens,
            fields: vec![
                ("thinking", json!({ "type": "adaptive", "display": "summarized" })),
                ("output_config", json!({ "effort": effort })),
            ],
        };
    }
    const MIN_BUDGET: u32 = 1024;
    let mut budget = level.anthropic_budget();
    let max_tokens = config.max_tokens.saturating_add(budget).min(output_limit(&config.model).max(config.max_tokens));
    if max_tokens <= budget {
        budget = max_tokens.saturating_sub(1024);
    }
    if budget < MIN_BUDGET {
        return off;
    }
    Thinking { max_tokens, fields: vec![("thinking", json!({ "type": "enabled", "budget_tokens": budget }))] }
}

/// pi's `supportsAdaptiveThinking`: the models that decide themselves how long to think.
fn adaptive_thinking(model: &str) -> bool {
    ["opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7", "sonnet-4-6", "sonnet-4.6"].iter().any(|m| model.contains(m))
}

/// The most output tokens a model takes (pi's registry): 32k for Opus 4 and 4.1, 128k for the
/// adaptive Opus models, 64k for the other thinking models (and any model we do not know).
fn output_limit(model: &str) -> u32 {
    if ["opus-4-0", "opus-4-1", "opus-4-2025"].iter().any(|m| model.contains(m)) {
        32_000
    } else if ["opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7"].iter().any(|m| model.contains(m)) {
        128_000
    } else {
        64_000
    }
}

/// One content block of the body, still pointing into the views.
enum Block<'m, 'a> {
    Text(&'m Str<'a>),
    Image(&'m BlockView<'a>),
    Thinking { thinking: &'m Str<'a>, signature: &'m Str<'a> },
    Redacted(&'m Str<'a>),
    ToolUse(&'m BlockView<'a>),
    ToolResult(&'m MessageView<'a>),
}

impl Block<'_, '_> {
    /// Whether pi's last breakpoint may go on this block.
    fn takes_cache_marker(&self) -> bool {
        matches!(self, Block::Text(_) | Block::Image(_) | Block::ToolResult(_))
    }

    fn write(&self, out: &mut JsonOut, marked: bool) {
        match self {
            Block::Text(text) => {
                out.raw(r#"{"type":"text","text":"#);
                out.str(text);
            }
            Block::Image(image) => {
                out.raw(r#"{"type":"image","source":{"type":"base64","media_type":"#);
                out.str(image.mime_type.as_ref().unwrap_or(&Str::plain("image/png")));
                out.raw(r#","data":"#);
                out.str(image.data.as_ref().unwrap_or(&Str::plain("")));
                out.raw("}");
            }
            Block::Thinking { thinking, signature } => {
                out.raw(r#"{"type":"thinking","thinking":"#);
                out.str(thinking);
                out.raw(r#","signature":"#);
                out.str(signature);
            }
            Block::Redacted(data) => {
                out.raw(r#"{"type":"redacted_thinking","data":"#);
                out.str(data);
            }
            Block::ToolUse(call) => tool_use(out, call),
            Block::ToolResult(msg) => tool_result(out, msg),
        }
        if marked {
            out.raw(",");
            out.raw(CACHE_CONTROL);
        }
        out.raw("}");
    }
}

/// pi messages as Anthropic messages, consecutive same-role messages merged into one (a tool
/// result followed by the user's next prompt becomes one user message, results first).
fn write_messages(out: &mut JsonOut, config: &ProviderConfig, views: &[MessageView<'_>]) {
    let mut merged: Vec<(&'static str, Vec<Block<'_, '_>>)> = Vec::new();
    for msg in views {
        let (role, blocks) = match &msg.role {
            Role::User => ("user", user_blocks(&msg.content)),
            Role::Assistant => ("assistant", assistant_blocks(msg, msg.same_model(config))),
            Role::ToolResult => ("user", vec![Block::ToolResult(msg)]),
            Role::Other(_) => continue,
        };
        if blocks.is_empty() {
            continue;
        }
        match merged.last_mut() {
            Some((last_role, content)) if *last_role == role => content.extend(blocks),
            _ => merged.push((role, blocks)),
        }
    }
    let mut list = List::new(out);
    let last = merged.len().saturating_sub(1);
    for (i, (role, blocks)) in merged.iter().enumerate() {
        let out = list.item();
        out.raw(r#"{"role":"#);
        out.text(role);
        out.raw(r#","content":"#);
        let mut content = List::new(out);
        for (j, block) in blocks.iter().enumerate() {
            // pi's third breakpoint: the last block of the last message, when that is the
            // user's (text, image or tool result), caches the conversation so far.
            let marked = i == last && *role == "user" && j + 1 == blocks.len() && block.takes_cache_marker();
            block.write(content.item(), marked);
        }
        content.end();
        out.raw("}");
    }
    list.end();
}

/// Text is sent only when it has something besides whitespace: Anthropic rejects blank blocks.
fn text_block<'m, 'a>(text: &'m Str<'a>) -> Option<Block<'m, 'a>> {
    (!text.is_blank()).then_some(Block::Text(text))
}

fn user_blocks<'m, 'a>(content: &'m ContentView<'a>) -> Vec<Block<'m, 'a>> {
    match content {
        ContentView::Text(s) => text_block(s).into_iter().collect(),
        ContentView::Blocks(blocks) => blocks
            .iter()
            .filter_map(|b| match b.kind.as_ref() {
                "text" => b.text.as_ref().and_then(text_block),
                "image" if b.data.is_some() => Some(Block::Image(b)),
                _ => None,
            })
            .collect(),
    }
}

/// Text, tool calls, and the model's own signed thinking, in order. Anthropic wants thinking
/// back as it came (with its signature, before the tool calls of the turn it belongs to) when
/// thinking is on; `redacted_thinking` goes back as its data. Thinking without a signature is
/// left out; another model's thinking arrives here as text already (`view::prepare`, as pi).
fn assistant_blocks<'m, 'a>(msg: &'m MessageView<'a>, same_model: bool) -> Vec<Block<'m, 'a>> {
    let blocks = match &msg.content {
        ContentView::Text(s) => return text_block(s).into_iter().collect(),
        ContentView::Blocks(blocks) => blocks,
    };
    blocks
        .iter()
        .filter_map(|b| match b.kind.as_ref() {
            "text" => b.text.as_ref().and_then(text_block),
            "thinking" if same_model => thinking_block(b),
            "toolCall" => Some(Block::ToolUse(b)),
            _ => None,
        })
        .collect()
}

fn thinking_block<'m, 'a>(block: &'m BlockView<'a>) -> Option<Block<'m, 'a>> {
    let signature = block.thinking_signature()?;
    if block.redacted == Some(true) {
        return Some(Block::Redacted(signature));
    }
    let thinking = block.thinking.as_ref().filter(|t| !t.is_blank())?;
    Some(Block::Thinking { thinking, signature })
}

fn tool_use(out: &mut JsonOut, block: &BlockView<'_>) {
    let arguments = block.arguments.as_ref().map(|a| a.value());
    let input = match arguments.as_deref() {
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(Value::String(s)) => serde_json::from_str::<Value>(s)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({})),
        _ => json!({}),
    };
    out.raw(r#"{"type":"tool_use","id":"#);
    out.text(&tool_id(&block.id.as_ref().map(Str::text).unwrap_or_default()));
    out.raw(r#","name":"#);
    out.str(block.name.as_ref().unwrap_or(&Str::plain("")));
    out.raw(r#","input":"#);
    out.value(&input);
}

/// A `toolResult` message as a `tool_result` block: its text as a string, or blocks when it
/// has images (with pi's placeholder text when it has no text). Blank text is left out:
/// Anthropic rejects empty text blocks.
fn tool_result(out: &mut JsonOut, msg: &MessageView<'_>) {
    out.raw(r#"{"type":"tool_result","tool_use_id":"#);
    out.text(&tool_id(&msg.tool_call_id.as_ref().map(Str::text).unwrap_or_default()));
    if msg.content.blocks_of("image").is_empty() {
        let text = msg.content.text_pieces();
        if !view::joined_is_blank(&text) {
            out.raw(r#","content":"#);
            out.joined(&text, "\n");
        }
    } else {
        let parts = user_blocks(&msg.content);
        out.raw(r#","content":"#);
        let mut content = List::new(out);
        if !parts.iter().any(|p| matches!(p, Block::Text(_))) {
            Block::Text(&Str::plain(wire::NO_TEXT_RESULT)).write(content.item(), false);
        }
        for part in &parts {
            part.write(content.item(), false);
        }
        content.end();
    }
    if let Some(is_error) = msg.is_error {
        out.raw(r#","is_error":"#);
        out.value(&is_error);
    }
}

/// Tool call ids from other providers (`call_abc|xyz`, 100-char ids) made acceptable to
/// Anthropic; applied to both sides of a call so they still match.
fn tool_id(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    if clean.is_empty() {
        "tool_call".to_owned()
    } else {
        clean
    }
}

/// Decoder state: what has been seen so far of one reply.
#[derive(Default)]
struct AnthropicDecoder {
    end: StreamEnd,
    /// `message_delta` carried a stop reason: the reply is complete even without `message_stop`.
    finished: bool,
    calls: ToolCalls,
    /// The content block `index` of each `tool_use` block → its index in `calls`.
    by_block: HashMap<u64, usize>,
    /// The open `thinking` blocks by content block `index`, with their signature so far.
    thinking: HashMap<u64, String>,
}

impl Decoder for AnthropicDecoder {
    fn on_event(
        &mut self,
        event: SseEvent<'_>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<Flow, String> {
        let data: Value = serde_json::from_str(event.data).map_err(|e| {
            format!(
                "invalid JSON in a `{}` event ({e}): {}",
                event.name,
                wire::truncate(event.data, 120)
            )
        })?;
        // The `event:` line names the event; servers that omit it still put it in `type`.
        let name = if event.name == "message" {
            data.get("type").and_then(Value::as_str).unwrap_or("message")
        } else {
            event.name
        };
        let block_index = data.get("index").and_then(Value::as_u64);
        match name {
            "message_start" => {
                if let Some(id) = data.pointer("/message/id").and_then(Value::as_str) {
                    self.end.response_id = Some(id.to_owned());
                }
                if let Some(usage) = data.pointer("/message/usage") {
                    self.add_usage(usage);
                }
            }
            "content_block_start" => {
                let block = data.get("content_block");
                let field = |k: &str| {
                    block.and_then(|b| b.get(k)).and_then(Value::as_str).filter(|s| !s.is_empty())
                };
                if field("type") == Some("redacted_thinking") {
                    if let Some(data) = field("data") {
                        emit(StreamEvent::RedactedThinking(data.to_owned()));
                    }
                    return Ok(Flow::Continue);
                }
                if field("type") == Some("thinking") {
                    let signature = field("signature").unwrap_or_default().to_owned();
                    self.thinking.insert(block_index.unwrap_or(u64::MAX), signature);
                }
                if field("type") == Some("tool_use") {
                    let call = self.calls.start(field("id"), field("name"), emit);
                    if let Some(Value::Object(input)) = block.and_then(|b| b.get("input")) {
                        if !input.is_empty() {
                            self.calls.set_initial(call, input.clone());
                        }
                    }
                    if let Some(b) = block_index {
                        self.by_block.insert(b, call);
                    }
                    return Ok(Flow::Continue);
                }
                if let Some(t) = field("thinking") {
                    emit(StreamEvent::ThinkingDelta(t.to_owned()));
                }
                if let Some(t) = field("text") {
                    emit(StreamEvent::TextDelta(t.to_owned()));
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta");
                let field = |k: &str| delta.and_then(|d| d.get(k)).and_then(Value::as_str);
                match field("type") {
                    Some("text_delta") => {
                        if let Some(t) = field("text").filter(|s| !s.is_empty()) {
                            emit(StreamEvent::TextDelta(t.to_owned()));
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(t) = field("thinking").filter(|s| !s.is_empty()) {
                            emit(StreamEvent::ThinkingDelta(t.to_owned()));
                        }
                    }
                    Some("input_json_delta") => {
                        let call = block_index.and_then(|b| self.by_block.get(&b).copied());
                        if let (Some(call), Some(piece)) = (call, field("partial_json")) {
                            self.calls.append(call, piece, emit);
                        }
                    }
                    Some("signature_delta") => {
                        let open = self.thinking.get_mut(&block_index.unwrap_or(u64::MAX));
                        if let (Some(signature), Some(piece)) = (open, field("signature")) {
                            signature.push_str(piece);
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(call) = block_index.and_then(|b| self.by_block.get(&b).copied()) {
                    self.calls.finish(call, emit);
                }
                if let Some(signature) = self.thinking.remove(&block_index.unwrap_or(u64::MAX)) {
                    emit(thinking_end(signature));
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.end.stop_reason = match reason {
                        "end_turn" | "stop_sequence" | "pause_turn" => StopReason::Stop,
                        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
                        "tool_use" => StopReason::ToolUse,
                        "refusal" => StopReason::Error,
                        other => {
                            tracing::debug!(
                                stop_reason = other,
                                "unknown stop_reason, taken as stop"
                            );
                            StopReason::Stop
                        }
                    };
                    self.finished = true;
                }
                if let Some(usage) = data.get("usage") {
                    self.add_usage(usage);
                }
            }
            "message_stop" => {
                self.finished = true;
                return Ok(Flow::Done);
            }
            "error" => {
                let message = data
                    .pointer("/error/message")
                    .or_else(|| data.pointer("/error/type"))
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                return Err(format!("the server reported an error: {}", wire::truncate(message, 500)));
            }
            "ping" => {}
            other => tracing::debug!(event = other, "ignoring unknown event"),
        }
        Ok(Flow::Continue)
    }

    fn finish(mut self: Box<Self>, emit: &mut dyn FnMut(StreamEvent)) -> Result<StreamEnd, String> {
        if !self.finished {
            return Err("connection closed before the reply finished".into());
        }
        // A server that never closed a block still finished the reply.
        let mut open: Vec<(u64, String)> = self.thinking.drain().collect();
        open.sort_by_key(|(index, _)| *index);
        for (_, signature) in open {
            emit(thinking_end(signature));
        }
        self.calls.finish_all(emit);
        Ok(self.end)
    }
}

fn thinking_end(signature: String) -> StreamEvent {
    StreamEvent::ThinkingEnd { signature: Some(signature).filter(|s| !s.is_empty()) }
}

impl AnthropicDecoder {
    /// Anthropic reports usage in pieces (`message_start`, then cumulative counts in
    /// `message_delta`): each field present overwrites the one before.
    fn add_usage(&mut self, usage: &Value) {
        let u = &mut self.end.usage;
        let n = |k: &str| usage.get(k).and_then(Value::as_u64);
        if let Some(v) = n("input_tokens") {
            u.input = v;
        }
        if let Some(v) = n("output_tokens") {
            u.output = v;
        }
        if let Some(v) = n("cache_read_input_tokens") {
            u.cache_read = v;
        }
        if let Some(v) = n("cache_creation_input_tokens") {
            u.cache_write = v;
        }
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::core::message::{Content, Message};

    /// The body as a value, for tests that look at its fields.
    fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Value {
        serde_json::from_slice(&super::request_body(config, request)).unwrap()
    }

    fn feed(d: &mut AnthropicDecoder, name: &str, data: &str) -> (Result<Flow, String>, Vec<StreamEvent>) {
        let mut events = Vec::new();
        let r = d.on_event(SseEvent { name, data }, &mut |e| events.push(e));
        (r, events)
    }

    #[test]
    fn error_event_is_reported_with_its_message() {
        let mut d = AnthropicDecoder::default();
        let (r, _) = feed(
            &mut d,
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert!(r.unwrap_err().contains("Overloaded"));
    }

    #[test]
    fn usage_pieces_add_up_and_stop_delta_completes() {
        let start = r#"{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}"#;
        let mut cut = AnthropicDecoder::default();
        assert_eq!(feed(&mut cut, "message_start", start).0, Ok(Flow::Continue));
        assert!(Box::new(cut).finish(&mut |_| {}).is_err(), "closed before the reply finished");

        let mut d = AnthropicDecoder::default();
        assert_eq!(feed(&mut d, "message_start", start).0, Ok(Flow::Continue));
        // No `event:` line: the type field names the event.
        let delta = r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":20}}"#;
        assert_eq!(feed(&mut d, "message", delta).0, Ok(Flow::Continue));
        assert_eq!(feed(&mut d, "message_stop", r#"{"type":"message_stop"}"#).0, Ok(Flow::Done));
        let end = Box::new(d).finish(&mut |_| {}).unwrap();
        assert_eq!(end.stop_reason, StopReason::Length);
        assert_eq!(end.response_id.as_deref(), Some("msg_1"));
        assert_eq!((end.usage.input, end.usage.output, end.usage.cache_read), (10, 20, 5));
        assert_eq!(end.usage.total_tokens, 35);
    }

    #[test]
    fn tool_use_blocks_become_calls_at_their_block_stop() {
        let mut d = AnthropicDecoder::default();
        let mut events = Vec::new();
        for (name, data) in [
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Looking."}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":{}}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": "}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"a.txt\"}"}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
            // Whole input at the start and no deltas (some compatible servers).
            ("content_block_start", r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"ls","input":{"path":"."}}}"#),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#),
        ] {
            let (r, mut ev) = feed(&mut d, name, data);
            assert_eq!(r, Ok(Flow::Continue), "{name}");
            events.append(&mut ev);
        }
        let end = Box::new(d).finish(&mut |e| events.push(e)).unwrap();
        assert_eq!(end.stop_reason, StopReason::ToolUse);
        let calls: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCall(c) => Some((c.index, c.id.as_str(), c.name.as_str(), c.arguments.clone().map(Value::Object))),
                _ => None,
            })
            .collect();
        assert_eq!(
            calls,
            vec![(0, "toolu_1", "read", Ok(json!({"path": "a.txt"}))), (1, "toolu_2", "ls", Ok(json!({"path": "."})))]
        );
        assert_eq!(events[0], StreamEvent::TextDelta("Looking.".into()));
        assert_eq!(events[1], StreamEvent::ToolCallStart { index: 0, id: "toolu_1".into(), name: "read".into() });
        assert_eq!(events.iter().filter(|e| matches!(e, StreamEvent::ToolCallDelta { .. })).count(), 2, "empty pieces are not events");
    }

    #[test]
    fn thinking_budgets_are_pis_and_added_to_max_tokens() {
        use super::super::Api;
        let mut config = ProviderConfig::new(Api::Anthropic, "http://127.0.0.1:9/v1", "claude-sonnet-4-5");
        config.max_tokens = 4096;
        let off = thinking(&config, ThinkingLevel::Off);
        assert_eq!((off.max_tokens, off.fields.len()), (4096, 0));
        for (level, budget) in [
            (ThinkingLevel::Minimal, 1024),
            (ThinkingLevel::Low, 2048),
            (ThinkingLevel::Medium, 8192),
            (ThinkingLevel::High, 16384),
        ] {
            let t = thinking(&config, level);
            assert_eq!(t.max_tokens, 4096 + budget, "{level}");
            assert_eq!(t.fields, vec![("thinking", json!({"type": "enabled", "budget_tokens": budget}))], "{level}");
        }
        // Capped at the model's output limit: the budget still fits below it.
        config.model = "claude-opus-4-1-20250805".into();
        config.max_tokens = 30_000;
        let t = thinking(&config, ThinkingLevel::High);
        assert_eq!(t.max_tokens, 32_000);
        assert_eq!(t.fields[0].1["budget_tokens"], 16384);
        // Adaptive models choose their budget: an effort instead.
        config.model = "claude-opus-4-6".into();
        let t = thinking(&config, ThinkingLevel::Minimal);
        assert_eq!(t.max_tokens, 30_000);
        assert_eq!(
            t.fields,
            vec![
                ("thinking", json!({"type": "adaptive", "display": "summarized"})),
                ("output_config", json!({"effort": "low"})),
            ]
        );
    }

    #[test]
    fn thinking_blocks_end_with_their_signature_and_redacted_blocks_come_whole() {
        let mut d = AnthropicDecoder::default();
        let mut events = Vec::new();
        for (name, data) in [
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EncRypt3d"}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":""}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"Hm."}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"c2ln"}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"Tg=="}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
            // Thinking the API signs without showing it.
            ("content_block_start", r#"{"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"","signature":"b25seQ=="}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":2}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"Yes."}}"#),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
        ] {
            let (r, mut ev) = feed(&mut d, name, data);
            assert_eq!(r, Ok(Flow::Continue), "{name}");
            events.append(&mut ev);
        }
        Box::new(d).finish(&mut |e| events.push(e)).unwrap();
        assert_eq!(
            events,
            vec![
                StreamEvent::RedactedThinking("EncRypt3d".into()),
                StreamEvent::ThinkingDelta("Hm.".into()),
                StreamEvent::ThinkingEnd { signature: Some("c2lnTg==".into()) },
                StreamEvent::ThinkingEnd { signature: Some("b25seQ==".into()) },
                StreamEvent::TextDelta("Yes.".into()),
            ]
        );
    }

    #[test]
    fn signed_thinking_goes_back_to_the_model_that_wrote_it_and_as_text_to_another() {
        use super::super::Api;
        use crate::core::message::ContentBlock;
        let config = ProviderConfig::new(Api::Anthropic, "http://127.0.0.1:9/v1", "claude-sonnet-4-5");
        let mut signed = ContentBlock::thinking("Let me check.");
        signed.extra.insert("thinkingSignature".into(), "c2ln".into());
        let mut redacted = ContentBlock::thinking("[Reasoning redacted]");
        redacted.extra.insert("thinkingSignature".into(), "EncRypt3d".into());
        redacted.extra.insert("redacted".into(), true.into());
        let unsigned = ContentBlock::thinking("aborted mid-thought");
        let reply = |model: &str| {
            let mut m = Message::assistant("anthropic-messages", "anthropic", model);
            m.content = Content::Blocks(vec![
                redacted.clone(),
                signed.clone(),
                unsigned.clone(),
                ContentBlock::text("Done."),
                ContentBlock::tool_call("toolu_1", "ls", json!({})),
            ]);
            m
        };
        let request = |m: Message| ChatRequest { messages: vec![Message::user("go").into(), m.into()], ..ChatRequest::default() };
        let body = request_body(&config, &request(reply("claude-sonnet-4-5")));
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "redacted_thinking", "data": "EncRypt3d"},
                {"type": "thinking", "thinking": "Let me check.", "signature": "c2ln"},
                {"type": "text", "text": "Done."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
            ])
        );
        assert!(body.get("thinking").is_none() && body.get("temperature").is_none(), "{body}");
        let other = request_body(&config, &request(reply("claude-opus-4-1")));
        // Another model's thinking goes as text, its redacted thinking not at all (pi's rule).
        assert_eq!(
            other["messages"][1]["content"],
            json!([
                {"type": "text", "text": "Let me check."},
                {"type": "text", "text": "aborted mid-thought"},
                {"type": "text", "text": "Done."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
            ])
        );
    }

    #[test]
    fn tool_ids_are_sanitized() {
        assert_eq!(tool_id("call_abc|fc_1.x"), "call_abc_fc_1_x");
        assert_eq!(tool_id(&"a".repeat(100)).len(), 64);
        assert_eq!(tool_id(""), "tool_call");
    }
}
