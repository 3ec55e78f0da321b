//! OpenAI Chat Completions: request body and SSE decoding. Spoken by OpenAI itself and by most
//! local servers (llama.cpp, Ollama, vLLM, LM Studio), so the decoder accepts their variations:
//! `reasoning_content` or `reasoning` for thinking, a missing `[DONE]`, usage-only chunks.

use eventsource_stream::Event;
use serde_json::{json, Map, Value};

use super::http;
use super::{prepare_messages, tool_calls, truncate, ChatRequest, ProviderConfig};
use super::{StreamEnd, StreamEvent};
use crate::core::message::{Content, ContentBlock, Role, StopReason, Usage};

pub(super) fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Value {
    let mut body = json!({
        "model": config.model,
        "messages": messages(request),
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    body[max_tokens_field(&config.base_url)] = config.max_tokens.into();
    body
}

/// OpenAI's own API (and Azure's) takes the reply limit as `max_completion_tokens`: it deprecated
/// `max_tokens`, and its reasoning models (o-series, gpt-5) refuse it. The local servers that
/// speak the protocol (llama.cpp, Ollama, vLLM, LM Studio) know `max_tokens`.
fn max_tokens_field(base_url: &str) -> &'static str {
    let host = reqwest::Url::parse(base_url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase));
    match host.as_deref() {
        Some(h) if h == "api.openai.com" || h.ends_with(".openai.azure.com") => "max_completion_tokens",
        _ => "max_tokens",
    }
}

/// pi messages in Chat Completions shape. Thinking blocks stay home: the API has no field for
/// them and sending them as text would make the model read its own scratchpad as an answer.
fn messages(request: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        out.push(json!({ "role": "system", "content": system }));
    }
    for msg in prepare_messages(&request.messages) {
        match &msg.role {
            Role::User => {
                if let Some(content) = user_content(&msg.content) {
                    out.push(json!({ "role": "user", "content": content }));
                }
            }
            Role::Assistant => {
                let text = msg.content.joined_text();
                let calls: Vec<Value> = tool_calls(&msg).into_iter().map(tool_call).collect();
                if text.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut m = Map::new();
                m.insert("role".into(), "assistant".into());
                // `null` content is how the API spells "only tool calls".
                m.insert("content".into(), if text.is_empty() { Value::Null } else { text.into() });
                if !calls.is_empty() {
                    m.insert("tool_calls".into(), calls.into());
                }
                out.push(Value::Object(m));
            }
            Role::ToolResult => out.push(json!({
                "role": "tool",
                "tool_call_id": msg.extra_str("toolCallId").unwrap_or_default(),
                "content": msg.content.joined_text(),
            })),
            Role::Other(_) => {}
        }
    }
    out
}

/// A plain string when the message is only text (what every server accepts), the array form
/// when it carries images.
fn user_content(content: &Content) -> Option<Value> {
    let blocks = match content {
        Content::Text(s) => return (!s.is_empty()).then(|| s.clone().into()),
        Content::Blocks(blocks) => blocks,
    };
    let has_image = blocks.iter().any(|b| b.kind == "image");
    if !has_image {
        let text = content.joined_text();
        return (!text.is_empty()).then(|| text.into());
    }
    let parts: Vec<Value> = blocks
        .iter()
        .filter_map(|b| match b.kind.as_str() {
            "text" => b.text.as_ref().map(|t| json!({ "type": "text", "text": t })),
            "image" => {
                let data = b.extra_str("data")?;
                let mime = b.extra_str("mimeType").unwrap_or("image/png");
                Some(json!({
                    "type": "image_url",
                    "image_url": { "url": format!("data:{mime};base64,{data}") },
                }))
            }
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.into())
}

/// pi `toolCall` block → Chat Completions tool call (arguments as a JSON string).
fn tool_call(block: &ContentBlock) -> Value {
    let arguments = match block.extra.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "{}".to_owned(),
    };
    json!({
        "id": block.extra_str("id").unwrap_or_default(),
        "type": "function",
        "function": {
            "name": block.extra_str("name").unwrap_or_default(),
            "arguments": arguments,
        },
    })
}

/// Decoder state: what has been seen so far of one reply.
#[derive(Default)]
pub(super) struct Decoder {
    end: StreamEnd,
    /// A `finish_reason` arrived: the reply is complete even if `[DONE]` never comes.
    finished: bool,
}

impl http::Decoder for Decoder {
    fn on_event(
        &mut self,
        event: &Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, String> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| format!("invalid JSON in an event ({e}): {}", truncate(data, 120)))?;
        // OpenRouter, vLLM and others report mid-stream failures as an `error` chunk.
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(format!("the server reported an error: {}", error_text(error)));
        }
        if self.end.response_id.is_none() {
            if let Some(id) = chunk.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                self.end.response_id = Some(id.to_owned());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.end.usage = parse_usage(usage);
        }
        let Some(choice) = chunk.pointer("/choices/0") else { return Ok(false) };
        if let Some(delta) = choice.get("delta") {
            let thinking = ["reasoning_content", "reasoning"]
                .iter()
                .find_map(|k| delta.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()));
            if let Some(t) = thinking {
                emit(StreamEvent::ThinkingDelta(t.to_owned()));
            }
            if let Some(t) = delta.get("content").and_then(Value::as_str).filter(|s| !s.is_empty())
            {
                emit(StreamEvent::TextDelta(t.to_owned()));
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
        Ok(false)
    }

    fn on_close(&mut self) -> Result<(), String> {
        if self.finished {
            Ok(())
        } else {
            Err("connection closed before the reply finished".into())
        }
    }

    fn end(self: Box<Self>) -> StreamEnd {
        self.end
    }
}

/// `usage` in pi's terms: cached prompt tokens count as `cacheRead`, not `input`.
fn parse_usage(usage: &Value) -> Usage {
    let n = |ptr: &str| usage.pointer(ptr).and_then(Value::as_u64).unwrap_or(0);
    let prompt = n("/prompt_tokens");
    let cached = n("/prompt_tokens_details/cached_tokens").min(prompt);
    let output = n("/completion_tokens");
    Usage {
        input: prompt - cached,
        output,
        cache_read: cached,
        cache_write: 0,
        total_tokens: prompt + output,
        extra: Map::new(),
    }
}

fn error_text(error: &Value) -> String {
    let text = error
        .as_str()
        .or_else(|| error.get("message").and_then(Value::as_str))
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    truncate(&text, 500)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::core::provider::http::Decoder as _;

    fn feed(d: &mut Decoder, data: &str) -> (Result<bool, String>, Vec<StreamEvent>) {
        let mut events = Vec::new();
        let event = Event { data: data.into(), event: "message".into(), ..Default::default() };
        let r = d.on_event(&event, &mut |e| events.push(e));
        (r, events)
    }

    #[test]
    fn the_reply_limit_is_max_completion_tokens_for_openai_and_max_tokens_elsewhere() {
        let request = ChatRequest { system: None, messages: vec![crate::core::message::Message::user("hi")] };
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
    fn finish_then_close_without_done_is_complete() {
        let mut d = Decoder::default();
        let (r, ev) = feed(
            &mut d,
            r#"{"id":"c1","choices":[{"delta":{"reasoning":"hm","content":"Hi"},"finish_reason":"content_filter"}]}"#,
        );
        assert_eq!(r, Ok(false));
        assert_eq!(
            ev,
            vec![StreamEvent::ThinkingDelta("hm".into()), StreamEvent::TextDelta("Hi".into())]
        );
        assert_eq!(d.on_close(), Ok(()));
        let end = Box::new(d).end();
        assert_eq!(end.stop_reason, StopReason::Error);
        assert_eq!(end.response_id.as_deref(), Some("c1"));
    }

    #[test]
    fn close_before_finish_is_an_error_and_done_ends() {
        let mut d = Decoder::default();
        assert_eq!(feed(&mut d, r#"{"choices":[{"delta":{"content":"Hi"}}]}"#).0, Ok(false));
        assert!(d.on_close().is_err());
        assert_eq!(feed(&mut d, "[DONE]").0, Ok(true));
    }

    #[test]
    fn error_chunks_and_cached_usage() {
        let mut d = Decoder::default();
        let (r, _) = feed(&mut d, r#"{"error":{"message":"upstream overloaded"}}"#);
        assert!(r.unwrap_err().contains("upstream overloaded"));
        let mut d = Decoder::default();
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":60}}}"#;
        assert_eq!(feed(&mut d, usage).0, Ok(false));
        let u = Box::new(d).end().usage;
        assert_eq!((u.input, u.cache_read, u.output, u.total_tokens), (40, 60, 7, 107));
    }

    #[test]
    fn tool_call_arguments_become_a_json_string() {
        let mut b = ContentBlock::text("");
        b.kind = "toolCall".into();
        b.extra.insert("id".into(), "c".into());
        b.extra.insert("name".into(), "bash".into());
        b.extra.insert("arguments".into(), json!({"a": 1}));
        assert_eq!(tool_call(&b)["function"]["arguments"], "{\"a\":1}");
    }
}
