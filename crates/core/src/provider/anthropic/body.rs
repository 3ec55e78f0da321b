//! The Messages request body, written straight from the stored messages' views.

use serde_json::{json, Value};

use super::super::types::{ChatRequest, ProviderConfig};
use super::super::view::{self, BlockView, ContentView, JsonOut, List, MessageView, Str};
use super::super::wire;
use super::policy::thinking;
use crate::message::Role;

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
pub(super) fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Content, Message};

    /// The body as a value, for tests that look at its fields.
    fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Value {
        serde_json::from_slice(&super::request_body(config, request)).unwrap()
    }


    #[test]
    fn signed_thinking_goes_back_to_the_model_that_wrote_it_and_as_text_to_another() {
        use crate::provider::Api;
        use crate::message::ContentBlock;
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
