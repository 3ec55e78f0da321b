//! The Chat Completions SSE stream, as OpenAI and the local servers that speak it send it.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::super::types::{StreamEnd, StreamEvent};
use super::super::wire::{self, DecodeError, Decoder, Flow, SseEvent, ToolCalls};
use crate::message::{StopReason, Usage};

/// The fields reasoning streams in, in the order pi reads them (the first non-empty one wins:
/// some servers send the same text in two).
pub(super) const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "reasoning", "reasoning_text"];


/// Where a tool call of the Chat Completions stream carries Gemini's thought signature (and
/// where the request sends it back: `view`'s tool call).
pub(super) const GEMINI_SIGNATURE: &str = "/extra_content/google/thought_signature";

/// Decoder state: what has been seen so far of one reply.
#[derive(Default)]
pub(super) struct OpenAiDecoder {
    end: StreamEnd,
    /// A `finish_reason` or `[DONE]` arrived: the reply is complete even if the other never comes.
    finished: bool,
    calls: ToolCalls,
    /// The wire's `index` of each tool call → its index in `calls`.
    by_wire_index: HashMap<u64, usize>,
    /// The field the thinking streaming now comes in (until text or a call follows it).
    thinking: Option<&'static str>,
    /// The `index` of the choice this reply is: the first one seen. We never ask for more than
    /// one (`n`), but a server that sends several interleaves them; pi reads whichever is first
    /// in each chunk and so mixes their text. We keep to one.
    choice: Option<u64>,
}

impl Decoder for OpenAiDecoder {
    fn on_event(
        &mut self,
        event: SseEvent<'_>,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<Flow, DecodeError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finished = true;
            return Ok(Flow::Done);
        }
        // A named `error` event (proxies, vLLM): whatever its data, the reply ends with it.
        if event.name == "error" {
            return Err(named_error(data));
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| format!("invalid JSON in an event ({e}): {}", wire::truncate(data, 120)))?;
        // OpenRouter, vLLM and others report mid-stream failures as an `error` chunk.
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(wire::reported_error(&chunk).unwrap_or_else(|| "an empty error chunk".to_owned().into()));
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
        let Some(choice) = self.our_choice(&chunk) else { return Ok(Flow::Continue) };
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
            // A refusal (`content` null beside it) is the reply's text, as the Responses
            // format's refusal part is: the user reads why there is no answer.
            let text = ["content", "refusal"]
                .iter()
                .find_map(|k| delta.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()));
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
        if self.end.stop_reason == StopReason::Length {
            self.calls.finish_all_at_limit(&wire::cut_call("max_tokens"), emit);
        } else {
            self.calls.finish_all(emit);
        }
        Ok(self.end)
    }
}

impl OpenAiDecoder {
    /// The chunk's choice of this reply: the one at the `index` of the first choice seen (a
    /// choice without `index` counts as 0). Chunks of other choices are skipped.
    fn our_choice<'c>(&mut self, chunk: &'c Value) -> Option<&'c Value> {
        let index_of = |c: &Value| c.get("index").and_then(Value::as_u64).unwrap_or(0);
        let choices = chunk.get("choices").and_then(Value::as_array)?;
        let ours = *self.choice.get_or_insert(index_of(choices.first()?));
        let choice = choices.iter().find(|c| index_of(c) == ours);
        if choice.is_none() {
            tracing::debug!(choice = ours, "skipping a chunk of another choice");
        }
        choice
    }

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
        // Gemini 3 (its OpenAI-compatible endpoint) signs a call; it refuses the call back
        // without the signature.
        if let Some(signature) = call.pointer(GEMINI_SIGNATURE).and_then(Value::as_str) {
            self.calls.set_signature(index, signature);
        }
        match call.pointer("/function/arguments") {
            Some(Value::String(piece)) => self.calls.append(index, piece, emit),
            // A few servers send the arguments as an object rather than JSON text.
            Some(v @ Value::Object(_)) => self.calls.append(index, &v.to_string(), emit),
            _ => {}
        }
    }
}

/// The error a named `error` event reports: its error object when the data holds one, else
/// the data itself as the message (some servers send plain text).
fn named_error(data: &str) -> DecodeError {
    let reported = serde_json::from_str::<Value>(data).ok().and_then(|v| wire::reported_error(&v));
    reported.unwrap_or_else(|| DecodeError::Reported {
        code: None,
        message: if data.is_empty() { "an empty error event".into() } else { wire::truncate(data, 1000) },
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feed(d: &mut OpenAiDecoder, data: &str) -> (Result<Flow, DecodeError>, Vec<StreamEvent>) {
        let mut events = Vec::new();
        let r = d.on_event(SseEvent { name: "message", data }, &mut |e| events.push(e));
        (r, events)
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
        assert_eq!(r, Err(DecodeError::Reported { code: None, message: "upstream overloaded".into() }));
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
