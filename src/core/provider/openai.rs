//! OpenAI Chat Completions: request body and SSE decoding. Spoken by OpenAI itself and by most
//! local servers (llama.cpp, Ollama, vLLM, LM Studio), so the decoder accepts their variations:
//! `reasoning_content` or `reasoning` for thinking, a missing `[DONE]`, usage-only chunks, tool
//! calls without an `index` or with every call numbered 0.
//!
//! Thinking: the level goes out as `reasoning_effort` where the model takes it
//! ([`ProviderConfig::sends_reasoning_effort`]); reasoning streams back in `reasoning_content`,
//! `reasoning` or `reasoning_text` and is stored as pi stores it, the field's name as the
//! block's signature, so that it can go back in that field to the model that wrote it.

use std::collections::HashMap;

use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use super::types::{ChatRequest, ProviderConfig, ProviderError, StreamEnd, StreamEvent, ThinkingLevel};
use super::view::{self, BlockView, ContentView, JsonOut, List, MessageView, Str};
use super::wire::{self, Decoder, Flow, SseEvent, ToolCalls, WireFormat};
use crate::core::message::{Role, StopReason, Usage};

/// The Chat Completions wire format.
#[derive(Debug)]
pub(super) struct OpenAi;

impl WireFormat for OpenAi {
    fn path(&self) -> &'static str {
        "/chat/completions"
    }

    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            headers.insert(reqwest::header::AUTHORIZATION, wire::secret_header(format!("Bearer {key}"))?);
        }
        Ok(headers)
    }

    fn body(&self, config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
        request_body(config, request)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<OpenAiDecoder>::default()
    }
}

/// The request body, written straight from the messages' views (see [`view`]), its fields in
/// the order they have always gone out in.
fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
    let views = view::prepare(view::read_all(&request.messages), config);
    let mut out = JsonOut::with_capacity(view::body_capacity(&request.messages, request.system.as_deref()));
    out.raw("{");
    out.key("model");
    out.text(&config.model);
    out.raw(",");
    out.key("messages");
    write_messages(&mut out, config, request, &views);
    out.raw(r#","stream":true,"stream_options":{"include_usage":true},"#);
    out.key(max_tokens_field(&config.base_url));
    out.value(&config.max_tokens);
    if request.thinking.is_on() && config.sends_reasoning_effort() {
        out.raw(",");
        out.key("reasoning_effort");
        out.text(reasoning_effort(&config.model, request.thinking));
    }
    if let Some(key) = request.cache_key.as_deref().filter(|k| !k.is_empty() && is_openai(&config.base_url)) {
        out.raw(",");
        out.key("prompt_cache_key");
        out.text(key);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                })
            })
            .collect();
        out.raw(",");
        out.key("tools");
        out.value(&tools);
        out.raw(",");
        out.key("tool_choice");
        out.text(request.tool_choice.as_str());
    }
    out.raw("}");
    out.into_bytes()
}

/// The `reasoning_effort` of a level: its name, but `minimal` (gpt-5's) is `low` for the
/// o-series, which refuse it.
fn reasoning_effort(model: &str, level: ThinkingLevel) -> &'static str {
    let m = model.to_ascii_lowercase();
    let o_series = m.starts_with('o') && m.as_bytes().get(1).is_some_and(u8::is_ascii_digit);
    if level == ThinkingLevel::Minimal && o_series {
        return ThinkingLevel::Low.as_str();
    }
    level.as_str()
}

/// The fields reasoning streams in, in the order pi reads them (the first non-empty one wins:
/// some servers send the same text in two).
const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "reasoning", "reasoning_text"];

/// OpenAI's own API (and Azure's) takes the reply limit as `max_completion_tokens`: it deprecated
/// `max_tokens`, and its reasoning models (o-series, gpt-5) refuse it. The local servers that
/// speak the protocol (llama.cpp, Ollama, vLLM, LM Studio) know `max_tokens`.
fn max_tokens_field(base_url: &str) -> &'static str {
    match host(base_url).as_deref() {
        Some(h) if h == "api.openai.com" || h.ends_with(".openai.azure.com") => "max_completion_tokens",
        _ => "max_tokens",
    }
}

fn host(base_url: &str) -> Option<String> {
    reqwest::Url::parse(base_url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase))
}

/// OpenAI's own API, the one server pi sends `prompt_cache_key` to.
fn is_openai(base_url: &str) -> bool {
    host(base_url).as_deref() == Some("api.openai.com")
}

/// pi messages in Chat Completions shape. Thinking goes back only as pi sends it: to the model
/// that wrote it, in the field it came in (`reasoning_content`, …: the block's signature, as pi
/// records it); another model's thinking arrives here as text already (`view::prepare`).
///
/// Tool results become `tool` messages; a `tool` message carries text only, so the images of a
/// run of consecutive results follow it in one user message, as pi sends them.
fn write_messages(out: &mut JsonOut, config: &ProviderConfig, request: &ChatRequest, views: &[MessageView<'_>]) {
    let mut list = List::new(out);
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        let out = list.item();
        out.raw(r#"{"role":"system","content":"#);
        out.text(system);
        out.raw("}");
    }
    // Images of the tool results just sent, waiting for the end of the run of results.
    let mut result_images: Vec<&BlockView<'_>> = Vec::new();
    for msg in views {
        if msg.role != Role::ToolResult && !result_images.is_empty() {
            tool_images_message(list.item(), &std::mem::take(&mut result_images));
        }
        match &msg.role {
            Role::User => {
                if has_user_content(&msg.content) {
                    let out = list.item();
                    out.raw(r#"{"role":"user","content":"#);
                    user_content(out, &msg.content);
                    out.raw("}");
                }
            }
            Role::Assistant => {
                let text = msg.content.text_pieces();
                let calls = msg.content.blocks_of("toolCall");
                let no_text = view::joined_is_empty(&text);
                if no_text && calls.is_empty() {
                    continue;
                }
                let out = list.item();
                out.raw(r#"{"role":"assistant","content":"#);
                // `null` content is how the API spells "only tool calls".
                if no_text {
                    out.raw("null");
                } else {
                    out.joined(&text, "\n");
                }
                if !calls.is_empty() {
                    out.raw(r#","tool_calls":["#);
                    for (i, call) in calls.iter().enumerate() {
                        if i > 0 {
                            out.raw(",");
                        }
                        tool_call(out, call);
                    }
                    out.raw("]");
                }
                if msg.same_model(config) {
                    if let Some((field, thinking)) = reasoning_of(msg) {
                        out.raw(",");
                        out.key(field);
                        out.joined(&thinking, "\n");
                    }
                }
                out.raw("}");
            }
            Role::ToolResult => {
                let out = list.item();
                out.raw(r#"{"role":"tool","tool_call_id":"#);
                out.str(msg.tool_call_id.as_ref().unwrap_or(&Str::plain("")));
                out.raw(r#","content":"#);
                let text = msg.content.text_pieces();
                if view::joined_is_empty(&text) {
                    out.text(wire::NO_TEXT_RESULT);
                } else {
                    out.joined(&text, "\n");
                }
                out.raw("}");
                result_images.extend(msg.content.blocks_of("image").into_iter().filter(|b| b.data.is_some()));
            }
            Role::Other(_) => {}
        }
    }
    if !result_images.is_empty() {
        tool_images_message(list.item(), &result_images);
    }
    list.end();
}

/// The field and the texts of a message's reasoning, as pi sends it back: the non-blank
/// thinking blocks (joined with `\n`), in the field the first one's signature names (one of
/// [`REASONING_FIELDS`]: a signature from elsewhere names no field of this API).
fn reasoning_of<'m, 'a>(msg: &'m MessageView<'a>) -> Option<(&'static str, Vec<&'m Str<'a>>)> {
    let ContentView::Blocks(all) = &msg.content else { return None };
    let blocks: Vec<&BlockView<'a>> =
        all.iter().filter(|b| b.is("thinking") && b.thinking.as_ref().is_some_and(|t| !t.is_blank())).collect();
    let signature = blocks.first()?.thinking_signature()?;
    let field = REASONING_FIELDS.into_iter().find(|f| signature.eq_str(f))?;
    Some((field, blocks.iter().filter_map(|b| b.thinking.as_ref()).collect()))
}

fn tool_images_message(out: &mut JsonOut, images: &[&BlockView<'_>]) {
    out.raw(r#"{"role":"user","content":[{"type":"text","text":"Attached image(s) from tool result:"}"#);
    for image in images {
        out.raw(",");
        image_part(out, image);
    }
    out.raw("]}");
}

/// Whether a user message has anything to send (see [`user_content`]).
fn has_user_content(content: &ContentView<'_>) -> bool {
    match content {
        ContentView::Text(s) => !s.is_empty(),
        ContentView::Blocks(blocks) => {
            if blocks.iter().any(|b| b.is("image")) {
                blocks.iter().any(|b| (b.is("text") && b.text.is_some()) || (b.is("image") && b.data.is_some()))
            } else {
                !view::joined_is_empty(&content.text_pieces())
            }
        }
    }
}

/// A plain string when the message is only text (what every server accepts), the array form
/// when it carries images.
fn user_content(out: &mut JsonOut, content: &ContentView<'_>) {
    let blocks = match content {
        ContentView::Text(s) => return out.str(s),
        ContentView::Blocks(blocks) => blocks,
    };
    if !blocks.iter().any(|b| b.is("image")) {
        return out.joined(&content.text_pieces(), "\n");
    }
    let mut parts = List::new(out);
    for b in blocks {
        match b.kind.as_ref() {
            "text" => {
                if let Some(text) = &b.text {
                    let out = parts.item();
                    out.raw(r#"{"type":"text","text":"#);
                    out.str(text);
                    out.raw("}");
                }
            }
            "image" if b.data.is_some() => image_part(parts.item(), b),
            _ => {}
        }
    }
    parts.end();
}

/// A pi `image` block (with its `data`) as an `image_url` part with a data URL.
fn image_part(out: &mut JsonOut, block: &BlockView<'_>) {
    out.raw(r#"{"type":"image_url","image_url":{"url":"data:"#);
    out.str_contents(block.mime_type.as_ref().unwrap_or(&Str::plain("image/png")));
    out.raw(";base64,");
    out.str_contents(block.data.as_ref().unwrap_or(&Str::plain("")));
    out.raw(r#""}}"#);
}

/// pi `toolCall` block → Chat Completions tool call (arguments as a JSON string).
fn tool_call(out: &mut JsonOut, block: &BlockView<'_>) {
    let arguments = block.arguments.as_ref().map(|a| a.value());
    let arguments = match arguments.as_deref() {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "{}".to_owned(),
    };
    out.raw(r#"{"id":"#);
    out.str(block.id.as_ref().unwrap_or(&Str::plain("")));
    out.raw(r#","type":"function","function":{"name":"#);
    out.str(block.name.as_ref().unwrap_or(&Str::plain("")));
    out.raw(r#","arguments":"#);
    out.text(&arguments);
    out.raw("}}");
}

/// Decoder state: what has been seen so far of one reply.
#[derive(Default)]
struct OpenAiDecoder {
    end: StreamEnd,
    /// A `finish_reason` or `[DONE]` arrived: the reply is complete even if the other never comes.
    finished: bool,
    calls: ToolCalls,
    /// The wire's `index` of each tool call → its index in `calls`.
    by_wire_index: HashMap<u64, usize>,
    /// The field the thinking streaming now comes in (until text or a call follows it).
    thinking: Option<&'static str>,
}

impl Decoder for OpenAiDecoder {
    fn on_event(
        &mut self,
        event: SseEvent<'_>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<Flow, String> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finished = true;
            return Ok(Flow::Done);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| format!("invalid JSON in an event ({e}): {}", wire::truncate(data, 120)))?;
        // OpenRouter, vLLM and others report mid-stream failures as an `error` chunk.
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(format!("the server reported an error: {}", error_text(error)));
        }
        if self.end.response_id.is_none() {
            if let Some(id) = chunk.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                self.end.response_id = Some(id.to_owned());
            }
        }
        let usage = chunk.get("usage").filter(|u| u.is_object());
        if let Some(usage) = usage {
            self.end.usage = parse_usage(usage);
        }
        let Some(choice) = chunk.pointer("/choices/0") else { return Ok(Flow::Continue) };
        // Some servers (Moonshot) put the usage in the choice instead.
        if let Some(usage) = choice.get("usage").filter(|u| usage.is_none() && u.is_object()) {
            self.end.usage = parse_usage(usage);
        }
        if let Some(delta) = choice.get("delta") {
            let thinking = REASONING_FIELDS
                .iter()
                .find_map(|k| delta.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(|t| (*k, t)));
            if let Some((field, t)) = thinking {
                self.thinking.get_or_insert(field);
                emit(StreamEvent::ThinkingDelta(t.to_owned()));
            }
            let text = delta.get("content").and_then(Value::as_str).filter(|s| !s.is_empty());
            let calls = delta.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty());
            if text.is_some() || calls.is_some() {
                self.end_thinking(emit);
            }
            if let Some(t) = text {
                emit(StreamEvent::TextDelta(t.to_owned()));
            }
            if let Some(calls) = calls {
                for call in calls {
                    self.on_tool_call_delta(call, emit);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.end.stop_reason = match reason {
                "stop" => StopReason::Stop,
                "length" => StopReason::Length,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "content_filter" => StopReason::Error,
                other => {
                    tracing::debug!(finish_reason = other, "unknown finish_reason, taken as stop");
                    StopReason::Stop
                }
            };
            self.finished = true;
        }
        Ok(Flow::Continue)
    }

    fn finish(mut self: Box<Self>, emit: &mut dyn FnMut(StreamEvent)) -> Result<StreamEnd, String> {
        if !self.finished {
            return Err("connection closed before the reply finished".into());
        }
        self.end_thinking(emit);
        // Calls may interleave until the end: they are complete only now.
        self.calls.finish_all(emit);
        Ok(self.end)
    }
}

impl OpenAiDecoder {
    /// The thinking streaming so far is a block: its signature is its field, as pi records it.
    fn end_thinking(&mut self, emit: &mut dyn FnMut(StreamEvent)) {
        if let Some(field) = self.thinking.take() {
            emit(StreamEvent::ThinkingEnd { signature: Some(field.to_owned()) });
        }
    }

    /// One entry of `delta.tool_calls`: the first piece of a call carries its `id` and
    /// `function.name`, later pieces only `function.arguments`, all matched by `index`.
    /// Servers without `index` are matched by `id`, then taken as continuing the last call; a new
    /// `id` at a known `index` (servers that number every call 0) starts a new call.
    fn on_tool_call_delta(&mut self, call: &Value, emit: &mut dyn FnMut(StreamEvent)) {
        let wire_index = call.get("index").and_then(Value::as_u64);
        let id = call.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
        let name = call.pointer("/function/name").and_then(Value::as_str).filter(|s| !s.is_empty());
        let found = match (wire_index, id) {
            (Some(w), _) => self.by_wire_index.get(&w).copied(),
            (None, Some(id)) => self.calls.find_id(id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let same_call = |i: usize| match id {
            Some(id) => self.calls.id(i) == Some(id) || self.calls.has_made_up_id(i),
            None => true,
        };
        let index = match found.filter(|&i| same_call(i)) {
            Some(i) => {
                self.calls.complete_header(i, id, name);
                i
            }
            None => {
                let i = self.calls.start(id, name, emit);
                if let Some(w) = wire_index {
                    self.by_wire_index.insert(w, i);
                }
                i
            }
        };
        match call.pointer("/function/arguments") {
            Some(Value::String(piece)) => self.calls.append(index, piece, emit),
            // A few servers send the arguments as an object rather than JSON text.
            Some(v @ Value::Object(_)) => self.calls.append(index, &v.to_string(), emit),
            _ => {}
        }
    }
}

/// `usage` in pi's terms (its `parseChunkUsage`): prompt tokens read from the cache count as
/// `cacheRead` and those written to it as `cacheWrite`, not as `input`. The cached count is
/// OpenAI's `prompt_tokens_details.cached_tokens`, else DeepSeek's `prompt_cache_hit_tokens`;
/// servers that report writes (`prompt_tokens_details.cache_write_tokens`, OpenRouter) may count
/// them in `cached_tokens` too, so they are taken out of the reads.
fn parse_usage(usage: &Value) -> Usage {
    let n = |ptr: &str| usage.pointer(ptr).and_then(Value::as_u64);
    let prompt = n("/prompt_tokens").unwrap_or(0);
    let reported = n("/prompt_tokens_details/cached_tokens").or_else(|| n("/prompt_cache_hit_tokens")).unwrap_or(0);
    let cache_write = n("/prompt_tokens_details/cache_write_tokens").unwrap_or(0);
    let cache_read = if cache_write > 0 { reported.saturating_sub(cache_write) } else { reported };
    let input = prompt.saturating_sub(cache_read).saturating_sub(cache_write);
    let output = n("/completion_tokens").unwrap_or(0);
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: input + output + cache_read + cache_write,
        extra: Map::new(),
    }
}

fn error_text(error: &Value) -> String {
    let text = error
        .as_str()
        .or_else(|| error.get("message").and_then(Value::as_str))
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    wire::truncate(&text, 500)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::core::message::{Content, ContentBlock, Message};

    /// The body as a value, for tests that look at its fields.
    fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Value {
        serde_json::from_slice(&super::request_body(config, request)).unwrap()
    }

    fn feed(d: &mut OpenAiDecoder, data: &str) -> (Result<Flow, String>, Vec<StreamEvent>) {
        let mut events = Vec::new();
        let r = d.on_event(SseEvent { name: "message", data }, &mut |e| events.push(e));
        (r, events)
    }

    #[test]
    fn the_reply_limit_is_max_completion_tokens_for_openai_and_max_tokens_elsewhere() {
        let request = ChatRequest {
            messages: vec![Message::user("hi").into()],
            ..ChatRequest::default()
        };
        for (base, field, other) in [
            ("https://api.openai.com/v1", "max_completion_tokens", "max_tokens"),
            ("https://my-team.openai.azure.com/openai/deployments/x", "max_completion_tokens", "max_tokens"),
            ("http://127.0.0.1:8080/v1", "max_tokens", "max_completion_tokens"),
            ("http://localhost:11434/v1", "max_tokens", "max_completion_tokens"),
        ] {
            let mut config = ProviderConfig::new(super::super::Api::Openai, base, "m");
            config.max_tokens = 321;
            let body = request_body(&config, &request);
            assert_eq!(body[field], 321, "{base}: {body}");
            assert!(body.get(other).is_none(), "{base}: {body}");
        }
    }

    #[test]
    fn reasoning_effort_goes_where_the_model_takes_it() {
        use super::super::Api;
        let request = |thinking| ChatRequest {
            messages: vec![Message::user("hi").into()],
            thinking,
            ..ChatRequest::default()
        };
        let effort = |base: &str, model: &str, switch: Option<bool>, level| {
            let mut config = ProviderConfig::new(Api::Openai, base, model);
            config.reasoning_effort = switch;
            request_body(&config, &request(level)).get("reasoning_effort").cloned()
        };
        let openai = "https://api.openai.com/v1";
        let local = "http://127.0.0.1:8080/v1";
        assert_eq!(effort(openai, "gpt-5", None, ThinkingLevel::High), Some(json!("high")));
        assert_eq!(effort(openai, "gpt-5-mini", None, ThinkingLevel::Minimal), Some(json!("minimal")));
        // The o-series take no `minimal`.
        assert_eq!(effort(openai, "o3", None, ThinkingLevel::Minimal), Some(json!("low")));
        assert_eq!(effort(openai, "o4-mini", None, ThinkingLevel::Medium), Some(json!("medium")));
        // Not for models that do not reason, nor other servers unless configured; never when off.
        assert_eq!(effort(openai, "gpt-4.1-mini", None, ThinkingLevel::High), None);
        assert_eq!(effort(openai, "gpt-5-chat-latest", None, ThinkingLevel::High), None);
        assert_eq!(effort(local, "qwen3", None, ThinkingLevel::High), None);
        assert_eq!(effort(local, "qwen3", Some(true), ThinkingLevel::Low), Some(json!("low")));
        assert_eq!(effort(openai, "gpt-5", Some(false), ThinkingLevel::High), None);
        assert_eq!(effort(openai, "gpt-5", None, ThinkingLevel::Off), None);
        assert_eq!(effort(local, "qwen3", Some(true), ThinkingLevel::Off), None);
    }

    #[test]
    fn reasoning_goes_back_in_its_field_to_the_model_that_wrote_it() {
        use super::super::Api;
        use crate::core::message::Message;
        let config = ProviderConfig::new(Api::Openai, "http://127.0.0.1:8080/v1", "qwen3");
        let reply = |model: &str, field: &str| {
            let mut m = Message::assistant("openai-completions", "openai", model);
            let mut a = ContentBlock::thinking("step one");
            a.extra.insert("thinkingSignature".into(), field.into());
            m.content = Content::Blocks(vec![a, ContentBlock::thinking("step two"), ContentBlock::text("Done.")]);
            m
        };
        let sent = |m: Message| {
            let request = ChatRequest { messages: vec![Message::user("go").into(), m.into()], ..ChatRequest::default() };
            request_body(&config, &request)["messages"][1].clone()
        };
        assert_eq!(
            sent(reply("qwen3", "reasoning_content")),
            json!({"role": "assistant", "content": "Done.", "reasoning_content": "step one\nstep two"})
        );
        assert_eq!(sent(reply("qwen3", "reasoning"))["reasoning"], "step one\nstep two");
        // Another model's reasoning goes as text (pi's rule); a signature naming no reasoning
        // field stays home.
        assert_eq!(
            sent(reply("llama3", "reasoning_content")),
            json!({"role": "assistant", "content": "step one\nstep two\nDone."})
        );
        assert_eq!(sent(reply("qwen3", "role")), json!({"role": "assistant", "content": "Done."}));
    }

    #[test]
    fn the_cache_key_goes_to_openai_only() {
        let request = ChatRequest { cache_key: Some("session-1".into()), ..ChatRequest::default() };
        for (base, sent) in [
            ("https://api.openai.com/v1", true),
            ("https://my-team.openai.azure.com/openai/deployments/x", false),
            ("http://127.0.0.1:8080/v1", false),
        ] {
            let body = request_body(&ProviderConfig::new(super::super::Api::Openai, base, "m"), &request);
            assert_eq!(body.get("prompt_cache_key").is_some(), sent, "{base}: {body}");
        }
        let openai = ProviderConfig::new(super::super::Api::Openai, "https://api.openai.com/v1", "m");
        assert_eq!(request_body(&openai, &request)["prompt_cache_key"], "session-1");
    }

    #[test]
    fn finish_then_close_without_done_is_complete() {
        let mut d = OpenAiDecoder::default();
        let (r, ev) = feed(
            &mut d,
            r#"{"id":"c1","choices":[{"delta":{"reasoning":"hm","content":"Hi"},"finish_reason":"content_filter"}]}"#,
        );
        assert_eq!(r, Ok(Flow::Continue));
        assert_eq!(
            ev,
            vec![
                StreamEvent::ThinkingDelta("hm".into()),
                // The field it came in is the block's signature, as pi records it.
                StreamEvent::ThinkingEnd { signature: Some("reasoning".into()) },
                StreamEvent::TextDelta("Hi".into()),
            ]
        );
        let end = Box::new(d).finish(&mut |_| {}).unwrap();
        assert_eq!(end.stop_reason, StopReason::Error);
        assert_eq!(end.response_id.as_deref(), Some("c1"));
    }

    #[test]
    fn close_before_finish_is_an_error_and_done_ends() {
        let mut d = OpenAiDecoder::default();
        assert_eq!(feed(&mut d, r#"{"choices":[{"delta":{"content":"Hi"}}]}"#).0, Ok(Flow::Continue));
        let mut done = OpenAiDecoder::default();
        assert!(Box::new(d).finish(&mut |_| {}).is_err());
        assert_eq!(feed(&mut done, "[DONE]").0, Ok(Flow::Done));
        assert!(Box::new(done).finish(&mut |_| {}).is_ok());
    }

    #[test]
    fn error_chunks_and_cached_usage() {
        let mut d = OpenAiDecoder::default();
        let (r, _) = feed(&mut d, r#"{"error":{"message":"upstream overloaded"}}"#);
        assert!(r.unwrap_err().contains("upstream overloaded"));
        let mut d = OpenAiDecoder::default();
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":60}}}"#;
        assert_eq!(feed(&mut d, usage).0, Ok(Flow::Continue));
        assert_eq!(feed(&mut d, "[DONE]").0, Ok(Flow::Done));
        let u = Box::new(d).finish(&mut |_| {}).unwrap().usage;
        assert_eq!((u.input, u.cache_read, u.output, u.total_tokens), (40, 60, 7, 107));
    }

    /// pi's `parseChunkUsage` on the shapes compatible servers send.
    #[test]
    fn cached_usage_of_compatible_servers_is_read_as_pi_reads_it() {
        let usage_of = |chunks: &[&str]| {
            let mut d = OpenAiDecoder::default();
            for c in chunks {
                feed(&mut d, c).0.unwrap();
            }
            feed(&mut d, "[DONE]").0.unwrap();
            let u = Box::new(d).finish(&mut |_| {}).unwrap().usage;
            (u.input, u.cache_read, u.cache_write, u.output, u.total_tokens)
        };
        // DeepSeek: prompt_cache_hit_tokens.
        let deepseek = r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}}"#;
        assert_eq!(usage_of(&[deepseek]), (36, 64, 0, 5, 105));
        // OpenRouter: writes reported, and counted in cached_tokens as well.
        let openrouter = r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":70,"cache_write_tokens":20}}}"#;
        assert_eq!(usage_of(&[openrouter]), (30, 50, 20, 5, 105));
        // Moonshot: the usage in the choice of the last chunk.
        let moonshot = r#"{"choices":[{"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}]}"#;
        assert_eq!(usage_of(&[moonshot]), (2, 8, 0, 2, 12));
    }

    #[test]
    fn tool_call_arguments_become_a_json_string() {
        let mut b = ContentBlock::text("");
        b.kind = "toolCall".into();
        b.extra.insert("id".into(), "c".into());
        b.extra.insert("name".into(), "bash".into());
        b.extra.insert("arguments".into(), json!({"a": 1}));
        let mut out = JsonOut::with_capacity(64);
        tool_call(&mut out, &BlockView::of(&b));
        let call: Value = serde_json::from_slice(&out.into_bytes()).unwrap();
        assert_eq!(call["function"]["arguments"], "{\"a\":1}");
    }

    /// The calls of a reply, as (index, id, name, arguments) once the decoder finished.
    fn calls_of(chunks: &[&str]) -> Vec<(usize, String, String, Result<Value, String>)> {
        let mut d = OpenAiDecoder::default();
        let mut events = Vec::new();
        for c in chunks {
            let (r, mut ev) = feed(&mut d, c);
            r.unwrap();
            events.append(&mut ev);
        }
        Box::new(d).finish(&mut |e| events.push(e)).unwrap();
        events
            .into_iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCall(c) => {
                    Some((c.index, c.id, c.name, c.arguments.map(Value::Object).map_err(|m| m.raw)))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn servers_without_index_or_numbering_every_call_zero_still_give_separate_calls() {
        // Every call at index 0, told apart by their ids.
        let calls = calls_of(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"ls","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"read","arguments":"{\"path\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[1], (1, "b".into(), "read".into(), Ok(json!({"path": "x"}))));
        // No index at all, arguments as an object, no id: one call, with a made-up id.
        let calls = calls_of(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"ls","arguments":{"path":"."}}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(calls.len(), 1);
        assert!(calls[0].1.starts_with("call_"), "{calls:?}");
        assert_eq!(calls[0].3, Ok(json!({"path": "."})));
        // The id arrives after the first piece.
        let calls = calls_of(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"ls","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"late","function":{"arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ]);
        assert_eq!(calls, vec![(0, "late".into(), "ls".into(), Ok(json!({})))]);
    }
}
