//! The Messages SSE stream: content blocks (text, thinking, tool use) and usage in pieces.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::super::types::{StreamEnd, StreamEvent};
use super::super::wire::{self, DecodeError, Decoder, Flow, SseEvent, ToolCalls};
use crate::message::StopReason;

/// Decoder state: what has been seen so far of one reply.
#[derive(Default)]
pub(super) struct AnthropicDecoder {
    end: StreamEnd,
    /// `message_delta` carried a stop reason: the reply is complete even without `message_stop`.
    finished: bool,
    calls: ToolCalls,
    /// The content block `index` of each `tool_use` block → its index in `calls`.
    by_block: HashMap<u64, usize>,
    /// The open `thinking` blocks by content block `index`, with their signature so far.
    thinking: HashMap<u64, String>,
    /// The open `text` blocks by content block `index`: each ends as its own block, as pi
    /// keeps them (two texts around a server tool's blocks, which are dropped, stay two).
    text: HashSet<u64>,
}

impl Decoder for AnthropicDecoder {
    fn on_event(
        &mut self,
        event: SseEvent<'_>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<Flow, DecodeError> {
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
                if field("type") == Some("text") {
                    self.text.insert(block_index.unwrap_or(u64::MAX));
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
                // A call whose JSON ended early waits for the stop reason (cut by `max_tokens`,
                // it is said so when the reply ends), and the calls after it wait with it, so
                // that they complete in order.
                if let Some(call) = block_index.and_then(|b| self.by_block.get(&b).copied()) {
                    if !self.calls.ends_early(call) && (0..call).all(|earlier| self.calls.is_done(earlier)) {
                        self.calls.finish(call, emit);
                    }
                }
                if let Some(signature) = self.thinking.remove(&block_index.unwrap_or(u64::MAX)) {
                    emit(thinking_end(signature));
                }
                if self.text.remove(&block_index.unwrap_or(u64::MAX)) {
                    emit(StreamEvent::TextEnd { signature: None });
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.end.stop_reason = match reason {
                        "end_turn" | "stop_sequence" | "pause_turn" => StopReason::Stop,
                        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
                        "tool_use" => StopReason::ToolUse,
                        "refusal" | "sensitive" => StopReason::Error,
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
            // `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`.
            "error" => {
                return Err(wire::reported_error(&data).unwrap_or_else(|| "an empty error event".to_owned().into()));
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
        if self.end.stop_reason == StopReason::Length {
            self.calls.finish_all_at_limit(&wire::cut_call("max_tokens"), emit);
        } else {
            self.calls.finish_all(emit);
        }
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
mod tests {
    use super::*;
    use serde_json::json;

    fn feed(d: &mut AnthropicDecoder, name: &str, data: &str) -> (Result<Flow, DecodeError>, Vec<StreamEvent>) {
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
        assert_eq!(r, Err(DecodeError::Reported { code: Some("overloaded_error".into()), message: "Overloaded".into() }));
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
        // The text block's stop ends it: a text after the calls would be a block of its own.
        assert_eq!(events[1], StreamEvent::TextEnd { signature: None });
        assert_eq!(events[2], StreamEvent::ToolCallStart { index: 0, id: "toolu_1".into(), name: "read".into() });
        assert_eq!(events.iter().filter(|e| matches!(e, StreamEvent::ToolCallDelta { .. })).count(), 2, "empty pieces are not events");
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
    }}
