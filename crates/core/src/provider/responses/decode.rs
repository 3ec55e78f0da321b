//! The Responses SSE stream: typed events (`response.output_item.added`, `….delta`,
//! `response.output_item.done`, `response.completed`, …), one output item after another.
//!
//! The finished item is what is kept: a reasoning item whole (its `encrypted_content` is what
//! the server wants back), a message item's id and phase. Deltas are shown as they come, even
//! those a server sends before the part they belong to was announced; what the finished item
//! adds to them (a proxy that sends only finished items) is sent as one more delta. Unknown
//! events are ignored.

use serde_json::{json, Map, Value};

use super::super::types::{StreamEnd, StreamEvent};
use super::super::wire::{self, DecodeError, Decoder, Flow, SseEvent, ToolCalls};
use crate::message::{StopReason, Usage};

/// Decoder state: what has been seen so far of one reply.
#[derive(Default)]
pub(super) struct ResponsesDecoder {
    end: StreamEnd,
    /// `response.completed` or `response.incomplete` arrived.
    finished: bool,
    calls: ToolCalls,
    /// Each call's item id and its arguments so far, by the call's index.
    call_items: Vec<CallItem>,
    /// The output item streaming now.
    current: Option<Item>,
}

struct CallItem {
    item_id: String,
    arguments: String,
}

/// An output item being streamed, with the text shown of it so far.
enum Item {
    Reasoning {
        shown: String,
        /// A summary part ended: the next part's text follows after a blank line (the
        /// separator pi joins the parts with).
        part_ended: bool,
    },
    Message {
        shown: String,
    },
    Call,
}

impl Decoder for ResponsesDecoder {
    fn on_event(&mut self, event: SseEvent<'_>, emit: &mut dyn FnMut(StreamEvent)) -> Result<Flow, DecodeError> {
        let data = event.data.trim();
        // Not sent by OpenAI, but by some proxies.
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| format!("invalid JSON in an event ({e}): {}", wire::truncate(data, 120)))?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(event.name);
        let str_of = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default();
        match kind {
            "response.created" | "response.in_progress" => self.take_id(&v["response"]),
            "response.output_item.added" => {
                let item = &v["item"];
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        self.close_current(emit);
                        self.current = Some(Item::Reasoning { shown: String::new(), part_ended: false });
                    }
                    Some("message") => {
                        self.close_current(emit);
                        self.current = Some(Item::Message { shown: String::new() });
                    }
                    Some("function_call") => {
                        self.close_current(emit);
                        self.start_call(item, emit);
                    }
                    _ => {}
                }
            }
            "response.reasoning_summary_part.done" => {
                if let Some(Item::Reasoning { part_ended, .. }) = &mut self.current {
                    *part_ended = true;
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.thinking_delta(str_of("delta"), emit);
            }
            "response.output_text.delta" | "response.refusal.delta" => self.text_delta(str_of("delta"), emit),
            "response.function_call_arguments.delta" => {
                if let Some(index) = self.call_of(str_of("item_id")) {
                    self.append_arguments(index, str_of("delta"), emit);
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(index) = self.call_of(str_of("item_id")) {
                    self.complete_arguments(index, str_of("arguments"), emit);
                }
            }
            "response.output_item.done" => self.item_done(&v["item"], emit),
            "response.completed" | "response.incomplete" => {
                let response = &v["response"];
                self.take_id(response);
                if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
                    self.end.usage = parse_usage(usage);
                }
                self.end.stop_reason = match response.get("status").and_then(Value::as_str) {
                    Some("incomplete") => StopReason::Length,
                    None if kind == "response.incomplete" => StopReason::Length,
                    Some("failed" | "cancelled") => StopReason::Error,
                    _ => StopReason::Stop,
                };
                self.finished = true;
                return Ok(Flow::Done);
            }
            // `{"response":{"status":"failed","error":{"code":"context_length_exceeded","message":…}}}`.
            "response.failed" => {
                let response = &v["response"];
                let reported = wire::reported_error(response).unwrap_or_else(|| {
                    let message = match response.pointer("/incomplete_details/reason").and_then(Value::as_str) {
                        Some(reason) => format!("incomplete: {reason}"),
                        None => "unknown error (no error details in the response)".into(),
                    };
                    DecodeError::Reported { code: None, message }
                });
                return Err(reported);
            }
            // `{"type":"error","code":…,"message":…}`; some proxies nest it in `error`.
            "error" => {
                return Err(wire::reported_error(&v).unwrap_or_else(|| DecodeError::Reported { code: None, message: "unknown error".into() }));
            }
            // content_part.added/done, output_text.done, reasoning_summary_part.added (the
            // separator is written when a part ends), rate limits, and events to come.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn finish(mut self: Box<Self>, emit: &mut dyn FnMut(StreamEvent)) -> Result<StreamEnd, String> {
        if !self.finished {
            return Err("connection closed before the reply finished".into());
        }
        self.close_current(emit);
        let cut = (self.end.stop_reason == StopReason::Length).then(|| wire::cut_call("max_output_tokens"));
        for index in 0..self.calls.len() {
            if let Some(why) = &cut {
                self.calls.cut(index, why, emit);
            } else {
                self.calls.finish(index, emit);
            }
        }
        if self.end.stop_reason == StopReason::Stop && self.calls.len() > 0 {
            self.end.stop_reason = StopReason::ToolUse;
        }
        Ok(self.end)
    }
}

impl ResponsesDecoder {
    fn take_id(&mut self, response: &Value) {
        if let Some(id) = response.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            self.end.response_id = Some(id.to_owned());
        }
    }

    /// The item streaming ends before another starts without its `output_item.done`: what it
    /// showed stays a block of its own, unsigned.
    fn close_current(&mut self, emit: &mut dyn FnMut(StreamEvent)) {
        match self.current.take() {
            Some(Item::Reasoning { shown, .. }) if !shown.is_empty() => emit(StreamEvent::ThinkingEnd { signature: None }),
            Some(Item::Message { shown }) if !shown.is_empty() => emit(StreamEvent::TextEnd { signature: None }),
            _ => {}
        }
    }

    fn thinking_delta(&mut self, delta: &str, emit: &mut dyn FnMut(StreamEvent)) {
        if delta.is_empty() {
            return;
        }
        if !matches!(self.current, Some(Item::Reasoning { .. })) {
            self.close_current(emit);
            self.current = Some(Item::Reasoning { shown: String::new(), part_ended: false });
        }
        let Some(Item::Reasoning { shown, part_ended }) = &mut self.current else { return };
        if std::mem::take(part_ended) && !shown.is_empty() {
            shown.push_str("\n\n");
            emit(StreamEvent::ThinkingDelta("\n\n".into()));
        }
        shown.push_str(delta);
        emit(StreamEvent::ThinkingDelta(delta.to_owned()));
    }

    fn text_delta(&mut self, delta: &str, emit: &mut dyn FnMut(StreamEvent)) {
        if delta.is_empty() {
            return;
        }
        if !matches!(self.current, Some(Item::Message { .. })) {
            self.close_current(emit);
            self.current = Some(Item::Message { shown: String::new() });
        }
        if let Some(Item::Message { shown }) = &mut self.current {
            shown.push_str(delta);
        }
        emit(StreamEvent::TextDelta(delta.to_owned()));
    }

    /// A `function_call` item starts: its id is `call_id|item_id`, as pi stores it.
    fn start_call(&mut self, item: &Value, emit: &mut dyn FnMut(StreamEvent)) -> usize {
        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
        let id = format!("{}|{}", field("call_id"), field("id"));
        let index = self.calls.start(Some(&id), Some(field("name")), emit);
        self.call_items.push(CallItem { item_id: field("id").to_owned(), arguments: String::new() });
        self.append_arguments(index, field("arguments"), emit);
        self.current = Some(Item::Call);
        index
    }

    /// The call of an event: by its item id, else the last one.
    fn call_of(&self, item_id: &str) -> Option<usize> {
        let found = (!item_id.is_empty()).then(|| self.call_items.iter().position(|c| c.item_id == item_id)).flatten();
        found.or_else(|| self.call_items.len().checked_sub(1))
    }

    fn append_arguments(&mut self, index: usize, piece: &str, emit: &mut dyn FnMut(StreamEvent)) {
        let Some(call) = self.call_items.get_mut(index) else { return };
        if piece.is_empty() || self.calls.is_done(index) {
            return;
        }
        call.arguments.push_str(piece);
        self.calls.append(index, piece, emit);
    }

    /// The whole arguments (`arguments.done`, or the finished item): what the deltas did not
    /// bring yet.
    fn complete_arguments(&mut self, index: usize, whole: &str, emit: &mut dyn FnMut(StreamEvent)) {
        let Some(call) = self.call_items.get(index) else { return };
        if let Some(rest) = whole.strip_prefix(call.arguments.as_str()) {
            let rest = rest.to_owned();
            self.append_arguments(index, &rest, emit);
        } else {
            tracing::debug!("the finished arguments differ from their deltas; the deltas are kept");
        }
    }

    fn item_done(&mut self, item: &Value, emit: &mut dyn FnMut(StreamEvent)) {
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => {
                let shown = match self.current.take() {
                    Some(Item::Reasoning { shown, .. }) => shown,
                    other => {
                        self.current = other;
                        self.close_current(emit);
                        String::new()
                    }
                };
                let text = joined(item.get("summary"), "text", "\n\n")
                    .filter(|t| !t.is_empty())
                    .or_else(|| joined(item.get("content"), "text", "\n\n"))
                    .unwrap_or_default();
                if let Some(rest) = text.strip_prefix(shown.as_str()).filter(|r| !r.is_empty()) {
                    emit(StreamEvent::ThinkingDelta(rest.to_owned()));
                }
                // The whole item, in the order the server wrote it: what goes back to it.
                emit(StreamEvent::ThinkingEnd { signature: Some(item.to_string()) });
            }
            Some("message") => {
                let shown = match self.current.take() {
                    Some(Item::Message { shown }) => shown,
                    other => {
                        self.current = other;
                        self.close_current(emit);
                        String::new()
                    }
                };
                let text = message_text(item);
                if let Some(rest) = text.strip_prefix(shown.as_str()).filter(|r| !r.is_empty()) {
                    emit(StreamEvent::TextDelta(rest.to_owned()));
                }
                emit(StreamEvent::TextEnd { signature: text_signature(item) });
            }
            Some("function_call") => {
                let item_id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                let index = match self.call_items.iter().position(|c| c.item_id == item_id) {
                    Some(index) => index,
                    None => {
                        self.close_current(emit);
                        self.start_call(item, emit)
                    }
                };
                if let Some(whole) = item.get("arguments").and_then(Value::as_str) {
                    self.complete_arguments(index, whole, emit);
                }
                self.calls.finish(index, emit);
                if matches!(self.current, Some(Item::Call)) {
                    self.current = None;
                }
            }
            _ => {}
        }
    }
}

/// The `field` texts of a list of parts joined with `sep`; `None` without a list.
fn joined(parts: Option<&Value>, field: &str, sep: &str) -> Option<String> {
    let parts = parts?.as_array()?;
    Some(parts.iter().filter_map(|p| p.get(field).and_then(Value::as_str)).collect::<Vec<_>>().join(sep))
}

/// A message item's text: its `output_text` and `refusal` parts, as pi joins them.
fn message_text(item: &Value) -> String {
    let Some(parts) = item.get("content").and_then(Value::as_array) else { return String::new() };
    parts
        .iter()
        .filter_map(|p| match p.get("type").and_then(Value::as_str) {
            Some("output_text") => p.get("text").and_then(Value::as_str),
            Some("refusal") => p.get("refusal").and_then(Value::as_str),
            _ => None,
        })
        .collect()
}

/// pi's `textSignature` of a message item: `{"v":1,"id":…}`, with its `phase` when it has one.
fn text_signature(item: &Value) -> Option<String> {
    let id = item.get("id").and_then(Value::as_str)?;
    let mut signature = json!({ "v": 1, "id": id });
    if let Some(phase) = item.get("phase").and_then(Value::as_str) {
        signature["phase"] = phase.into();
    }
    Some(signature.to_string())
}

/// `usage` in pi's terms: `input_tokens` counts the cached prompt too, which is `cacheRead`.
fn parse_usage(usage: &Value) -> Usage {
    let n = |ptr: &str| usage.pointer(ptr).and_then(Value::as_u64);
    let cache_read = n("/input_tokens_details/cached_tokens").unwrap_or(0);
    let input = n("/input_tokens").unwrap_or(0).saturating_sub(cache_read);
    let output = n("/output_tokens").unwrap_or(0);
    Usage {
        input,
        output,
        cache_read,
        cache_write: 0,
        total_tokens: n("/total_tokens").unwrap_or(input + output + cache_read),
        extra: Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of `lines` (JSON objects), then the end.
    fn decode(lines: &[Value]) -> (Vec<StreamEvent>, Result<StreamEnd, DecodeError>) {
        let mut d = Box::<ResponsesDecoder>::default();
        let mut events = Vec::new();
        for line in lines {
            let data = line.to_string();
            match d.on_event(SseEvent { name: "message", data: &data }, &mut |e| events.push(e)) {
                Ok(Flow::Continue) => {}
                Ok(Flow::Done) => break,
                Err(e) => return (events, Err(e)),
            }
        }
        let end = d.finish(&mut |e| events.push(e)).map_err(DecodeError::Broken);
        (events, end)
    }

    fn completed(status: &str) -> Value {
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": status,
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60},
                      "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 4}, "total_tokens": 109}}})
    }

    #[test]
    fn reasoning_text_and_a_call_come_out_as_pi_stores_them() {
        let reasoning = json!({"id": "rs_1", "type": "reasoning", "summary": [
            {"type": "summary_text", "text": "One."}, {"type": "summary_text", "text": "Two."}], "encrypted_content": "gAAA"});
        let (events, end) = decode(&[
            json!({"type": "response.created", "response": {"id": "resp_1"}}),
            json!({"type": "response.output_item.added", "item": {"id": "rs_1", "type": "reasoning", "summary": []}}),
            json!({"type": "response.reasoning_summary_part.added", "item_id": "rs_1"}),
            json!({"type": "response.reasoning_summary_text.delta", "delta": "One."}),
            json!({"type": "response.reasoning_summary_part.done"}),
            json!({"type": "response.reasoning_summary_text.delta", "delta": "Two."}),
            json!({"type": "response.reasoning_summary_part.done"}),
            json!({"type": "response.output_item.done", "item": reasoning}),
            json!({"type": "response.output_item.added", "item": {"id": "msg_1", "type": "message", "content": []}}),
            // Text before its part was announced still counts.
            json!({"type": "response.output_text.delta", "delta": "Rea"}),
            json!({"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}}),
            json!({"type": "response.output_text.delta", "delta": "ding."}),
            json!({"type": "response.output_item.done", "item": {"id": "msg_1", "type": "message", "phase": "commentary",
                "content": [{"type": "output_text", "text": "Reading."}]}}),
            json!({"type": "response.output_item.added", "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "read", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{\"path\":"}),
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": "{\"path\":\"a\"}"}),
            json!({"type": "response.output_item.done", "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"a\"}"}}),
            completed("completed"),
        ]);
        let end = end.unwrap();
        assert_eq!(end.stop_reason, StopReason::ToolUse);
        assert_eq!(end.response_id.as_deref(), Some("resp_1"));
        assert_eq!((end.usage.input, end.usage.cache_read, end.usage.output, end.usage.total_tokens), (40, 60, 9, 109));
        let thinking: String =
            events.iter().filter_map(|e| if let StreamEvent::ThinkingDelta(t) = e { Some(t.as_str()) } else { None }).collect();
        assert_eq!(thinking, "One.\n\nTwo.", "parts joined as pi joins the finished item's");
        assert!(events.contains(&StreamEvent::ThinkingEnd { signature: Some(reasoning.to_string()) }));
        assert!(events.contains(&StreamEvent::TextEnd { signature: Some(r#"{"v":1,"id":"msg_1","phase":"commentary"}"#.into()) }));
        let text: String =
            events.iter().filter_map(|e| if let StreamEvent::TextDelta(t) = e { Some(t.as_str()) } else { None }).collect();
        assert_eq!(text, "Reading.");
        let call = events.iter().find_map(|e| if let StreamEvent::ToolCall(c) = e { Some(c.clone()) } else { None }).unwrap();
        assert_eq!(call.id, "call_1|fc_1");
        assert_eq!(Value::Object(call.arguments.unwrap()), json!({"path": "a"}));
    }

    #[test]
    fn arguments_and_text_come_from_the_finished_item_when_no_delta_came() {
        let (events, end) = decode(&[
            json!({"type": "response.output_item.done", "item": {"id": "msg_9", "type": "message",
                "content": [{"type": "refusal", "refusal": "No."}]}}),
            json!({"type": "response.output_item.done", "item": {"id": "fc_2", "type": "function_call", "call_id": "call_2", "name": "ls", "arguments": "{\"path\":\".\"}"}}),
            completed("completed"),
        ]);
        assert_eq!(end.unwrap().stop_reason, StopReason::ToolUse);
        assert_eq!(events[0], StreamEvent::TextDelta("No.".into()));
        let call = events.iter().find_map(|e| if let StreamEvent::ToolCall(c) = e { Some(c.clone()) } else { None }).unwrap();
        assert_eq!((call.id.as_str(), call.name.as_str()), ("call_2|fc_2", "ls"));
        assert_eq!(Value::Object(call.arguments.unwrap()), json!({"path": "."}));
    }

    #[test]
    fn incomplete_is_a_length_stop_and_an_unfinished_call_is_never_whole() {
        let (events, end) = decode(&[
            json!({"type": "response.output_item.added", "item": {"id": "fc_1", "type": "function_call", "call_id": "c", "name": "write"}}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{}"}),
            json!({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}),
        ]);
        assert_eq!(end.unwrap().stop_reason, StopReason::Length);
        let call = events.iter().find_map(|e| if let StreamEvent::ToolCall(c) = e { Some(c.clone()) } else { None }).unwrap();
        assert!(call.arguments.is_err(), "{call:?}");
    }

    #[test]
    fn unknown_events_are_ignored_and_failures_are_errors() {
        let (events, end) = decode(&[
            json!({"type": "response.web_search_call.searching", "item_id": "ws_1"}),
            json!({"type": "response.output_item.added", "item": {"id": "ws_1", "type": "web_search_call"}}),
            json!({"type": "response.output_item.done", "item": {"id": "ws_1", "type": "web_search_call"}}),
            json!({"type": "codex.rate_limits", "limits": {}}),
            json!({"no_type": true}),
            json!({"type": "response.output_text.delta", "delta": "Hi"}),
            completed("completed"),
        ]);
        assert_eq!(events, vec![StreamEvent::TextDelta("Hi".into()), StreamEvent::TextEnd { signature: None }]);
        assert_eq!(end.unwrap().stop_reason, StopReason::Stop);
        let reported = |code: &str, message: &str| DecodeError::Reported { code: Some(code.into()), message: message.into() };
        let (_, end) = decode(&[json!({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down"})]);
        assert_eq!(end.unwrap_err(), reported("rate_limit_exceeded", "Slow down"));
        let (_, end) = decode(&[json!({"type": "response.failed", "response": {"error": {"code": "server_error", "message": "Oops"}}})]);
        assert_eq!(end.unwrap_err(), reported("server_error", "Oops"));
        let (_, end) = decode(&[json!({"type": "response.failed", "response": {"incomplete_details": {"reason": "content_filter"}}})]);
        assert_eq!(end.unwrap_err(), DecodeError::Reported { code: None, message: "incomplete: content_filter".into() });
        let (_, end) = decode(&[json!({"type": "response.output_text.delta", "delta": "Hi"})]);
        assert_eq!(end.unwrap_err(), DecodeError::Broken("connection closed before the reply finished".into()));
    }
}
