//! The assistant message as it streams: each provider [`StreamEvent`] goes into the message
//! pi stores (text, thinking with its signature, redacted thinking, `toolCall` blocks where the
//! calls started) and comes out as the event the front ends draw, if any.
//!
//! Kept apart from the run loop so that the shapes the session file gets can be tested event by
//! event, without a provider.

use crate::message::{Content, ContentBlock, Message};
use crate::provider::{StreamEvent, ToolCall};

use super::events::AssistantMessageEvent;

/// The text pi stores for a `redacted_thinking` block.
const REDACTED_THINKING: &str = "[Reasoning redacted]";

/// What one stream event means for the front ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Assembled {
    /// Nothing to draw (the message changed, or the event only completes something).
    Nothing,
    /// A piece of text or thinking, at its content index.
    Update(AssistantMessageEvent),
    /// Something about the request the user should hear of (not part of the reply).
    Notice(String),
}

/// One assistant message being assembled from its stream.
#[derive(Debug)]
pub struct MessageAssembler {
    message: Message,
    /// Content index of each tool call's block, by the call's index.
    call_blocks: Vec<usize>,
    /// The complete calls, with their arguments or why they are malformed, in order.
    tool_calls: Vec<ToolCall>,
    /// The thinking block being streamed (its content index), until its end.
    open_thinking: Option<usize>,
    /// The text block a [`StreamEvent::TextEnd`] closed (its content index): more text starts
    /// a new block.
    closed_text: Option<usize>,
}

impl MessageAssembler {
    /// Starts from the empty message the stream fills (its api, provider and model set).
    pub fn new(message: Message) -> Self {
        Self { message, call_blocks: Vec::new(), tool_calls: Vec::new(), open_thinking: None, closed_text: None }
    }

    /// The message so far.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The message and the complete tool calls (the message already holds them as `toolCall`
    /// blocks; malformed ones with `{}` arguments, as pi stores what it cannot parse).
    pub fn finish(self) -> (Message, Vec<ToolCall>) {
        (self.message, self.tool_calls)
    }

    /// Takes one event of the stream into the message.
    pub fn push(&mut self, event: StreamEvent) -> Assembled {
        match event {
            StreamEvent::TextDelta(delta) => {
                let content_index = match self.open_text() {
                    Some(at) => {
                        self.message.push_text(&delta);
                        at
                    }
                    None => push_block(&mut self.message, ContentBlock::text(delta.clone())),
                };
                Assembled::Update(AssistantMessageEvent::TextDelta { content_index, delta })
            }
            StreamEvent::TextEnd { signature } => {
                let at = match self.open_text() {
                    Some(at) => at,
                    None => push_block(&mut self.message, ContentBlock::text("")),
                };
                if let (Some(signature), Some(block)) = (signature, self.block_mut(at)) {
                    block.extra.insert("textSignature".into(), signature.into());
                }
                self.closed_text = Some(at);
                Assembled::Nothing
            }
            StreamEvent::ThinkingDelta(delta) => {
                // Each signed block stays whole: a new one starts after the last one ended.
                let content_index = match self.open_thinking {
                    Some(at) => {
                        if let Some(t) = self.block_mut(at).and_then(|b| b.thinking.as_mut()) {
                            t.push_str(&delta);
                        }
                        at
                    }
                    None => *self.open_thinking.insert(push_block(&mut self.message, ContentBlock::thinking(delta.clone()))),
                };
                Assembled::Update(AssistantMessageEvent::ThinkingDelta { content_index, delta })
            }
            StreamEvent::ThinkingEnd { signature } => {
                // A block signed without any text shown (Anthropic) is kept too, as pi does.
                let at = match self.open_thinking.take() {
                    Some(at) => at,
                    None => push_block(&mut self.message, ContentBlock::thinking("")),
                };
                if let (Some(signature), Some(block)) = (signature, self.block_mut(at)) {
                    block.extra.insert("thinkingSignature".into(), signature.into());
                }
                Assembled::Nothing
            }
            StreamEvent::RedactedThinking(data) => {
                // pi's shape: a thinking block marked redacted, the data as its signature.
                let mut block = ContentBlock::thinking(REDACTED_THINKING);
                block.extra.insert("thinkingSignature".into(), data.into());
                block.extra.insert("redacted".into(), true.into());
                push_block(&mut self.message, block);
                self.open_thinking = None;
                Assembled::Nothing
            }
            StreamEvent::Notice(text) => Assembled::Notice(text),
            StreamEvent::ToolCallStart { id, name, .. } => {
                let block = ContentBlock::tool_call(id, name, serde_json::json!({}));
                self.call_blocks.push(push_block(&mut self.message, block));
                Assembled::Nothing
            }
            StreamEvent::ToolCallDelta { .. } => Assembled::Nothing,
            StreamEvent::ToolCall(call) => {
                let arguments = match &call.arguments {
                    Ok(map) => serde_json::Value::Object(map.clone()),
                    Err(_) => serde_json::json!({}),
                };
                let mut block = ContentBlock::tool_call(call.id.clone(), call.name.clone(), arguments);
                if let Some(signature) = &call.signature {
                    block.extra.insert("thoughtSignature".into(), signature.clone().into());
                }
                if let Some(slot) = self.call_blocks.get(call.index).copied().and_then(|at| self.block_mut(at)) {
                    *slot = block;
                }
                self.tool_calls.push(call);
                Assembled::Nothing
            }
        }
    }

    /// The content index of the text block more text goes into: the last block, when it is
    /// text no [`StreamEvent::TextEnd`] closed.
    fn open_text(&self) -> Option<usize> {
        let Content::Blocks(blocks) = &self.message.content else { return Some(0) };
        let last = blocks.len().checked_sub(1)?;
        (blocks[last].kind == "text" && self.closed_text != Some(last)).then_some(last)
    }

    fn block_mut(&mut self, at: usize) -> Option<&mut ContentBlock> {
        match &mut self.message.content {
            Content::Blocks(blocks) => blocks.get_mut(at),
            Content::Text(_) => None,
        }
    }
}

/// Appends a block to a streaming message and returns its content index.
fn push_block(message: &mut Message, block: ContentBlock) -> usize {
    if let Content::Text(s) = &message.content {
        message.content = Content::Blocks(vec![ContentBlock::text(s.clone())]);
    }
    match &mut message.content {
        Content::Blocks(blocks) => {
            blocks.push(block);
            blocks.len() - 1
        }
        Content::Text(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn assemble(events: Vec<StreamEvent>) -> (Value, Vec<Assembled>, Vec<ToolCall>) {
        let mut a = MessageAssembler::new(Message::assistant("anthropic-messages", "anthropic", "m"));
        let out = events.into_iter().map(|e| a.push(e)).collect();
        let (message, calls) = a.finish();
        (serde_json::to_value(&message).unwrap(), out, calls)
    }

    fn call(index: usize, id: &str, arguments: Result<Value, &str>) -> StreamEvent {
        StreamEvent::ToolCall(ToolCall {
            index,
            id: id.into(),
            name: "read".into(),
            arguments: match arguments {
                Ok(Value::Object(map)) => Ok(map),
                Ok(other) => panic!("not an object: {other}"),
                Err(text) => Err(crate::provider::MalformedArguments { raw: text.into(), error: "EOF".into() }),
            },
            signature: None,
        })
    }

    #[test]
    fn thinking_then_text_gives_two_blocks_with_the_signature_on_the_thinking() {
        let (message, out, _) = assemble(vec![
            StreamEvent::ThinkingDelta("Let me ".into()),
            StreamEvent::ThinkingDelta("see.".into()),
            StreamEvent::ThinkingEnd { signature: Some("c2ln".into()) },
            StreamEvent::TextDelta("Yes.".into()),
        ]);
        assert_eq!(
            message["content"],
            json!([
                {"type": "thinking", "thinking": "Let me see.", "thinkingSignature": "c2ln"},
                {"type": "text", "text": "Yes."},
            ])
        );
        assert_eq!(
            out,
            vec![
                Assembled::Update(AssistantMessageEvent::ThinkingDelta { content_index: 0, delta: "Let me ".into() }),
                Assembled::Update(AssistantMessageEvent::ThinkingDelta { content_index: 0, delta: "see.".into() }),
                Assembled::Nothing,
                Assembled::Update(AssistantMessageEvent::TextDelta { content_index: 1, delta: "Yes.".into() }),
            ]
        );
    }

    #[test]
    fn a_signed_block_without_text_and_a_redacted_block_are_kept_as_pi_keeps_them() {
        let (message, _, _) = assemble(vec![
            StreamEvent::ThinkingEnd { signature: Some("b25seQ==".into()) },
            StreamEvent::RedactedThinking("EncRypt3d".into()),
            StreamEvent::ThinkingDelta("next".into()),
        ]);
        assert_eq!(
            message["content"],
            json!([
                {"type": "thinking", "thinking": "", "thinkingSignature": "b25seQ=="},
                {"type": "thinking", "thinking": "[Reasoning redacted]", "thinkingSignature": "EncRypt3d", "redacted": true},
                {"type": "thinking", "thinking": "next"},
            ])
        );
    }

    #[test]
    fn tool_calls_take_the_place_they_started_in_and_malformed_arguments_are_stored_as_an_empty_object() {
        let (message, _, calls) = assemble(vec![
            StreamEvent::TextDelta("Looking.".into()),
            StreamEvent::ToolCallStart { index: 0, id: "a".into(), name: "read".into() },
            StreamEvent::ToolCallStart { index: 1, id: "b".into(), name: "read".into() },
            StreamEvent::ToolCallDelta { index: 0, arguments_delta: "{\"path\"".into() },
            StreamEvent::TextDelta(" More.".into()),
            call(1, "b", Err("{\"path\": \"x")),
            call(0, "a", Ok(json!({"path": "a.txt"}))),
        ]);
        assert_eq!(
            message["content"],
            json!([
                {"type": "text", "text": "Looking."},
                {"type": "toolCall", "id": "a", "name": "read", "arguments": {"path": "a.txt"}},
                {"type": "toolCall", "id": "b", "name": "read", "arguments": {}},
                {"type": "text", "text": " More."},
            ])
        );
        assert_eq!(calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["b", "a"], "in the order they completed");
        assert!(calls[0].arguments.is_err());
    }

    #[test]
    fn each_ended_text_block_keeps_its_signature_and_more_text_starts_a_new_block() {
        let (message, out, _) = assemble(vec![
            StreamEvent::TextDelta("Checking.".into()),
            StreamEvent::TextEnd { signature: Some(r#"{"v":1,"id":"msg_1","phase":"commentary"}"#.into()) },
            StreamEvent::TextDelta("Done".into()),
            StreamEvent::TextDelta(".".into()),
            StreamEvent::TextEnd { signature: Some(r#"{"v":1,"id":"msg_2"}"#.into()) },
            StreamEvent::TextEnd { signature: Some(r#"{"v":1,"id":"msg_3"}"#.into()) },
        ]);
        assert_eq!(
            message["content"],
            json!([
                {"type": "text", "text": "Checking.", "textSignature": r#"{"v":1,"id":"msg_1","phase":"commentary"}"#},
                {"type": "text", "text": "Done.", "textSignature": r#"{"v":1,"id":"msg_2"}"#},
                {"type": "text", "text": "", "textSignature": r#"{"v":1,"id":"msg_3"}"#},
            ])
        );
        assert_eq!(out[2], Assembled::Update(AssistantMessageEvent::TextDelta { content_index: 1, delta: "Done".into() }));
    }

    #[test]
    fn notices_are_not_part_of_the_message() {
        let (message, out, _) = assemble(vec![StreamEvent::Notice("left out reasoning_effort".into())]);
        assert_eq!(out, vec![Assembled::Notice("left out reasoning_effort".into())]);
        assert_eq!(message["content"], json!([]));
    }
}
