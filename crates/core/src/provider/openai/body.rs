//! The Chat Completions request body, written straight from the stored messages' views.

use serde_json::{json, Value};

use super::super::types::{ChatRequest, ProviderConfig};
use super::super::view::{self, BlockView, ContentView, JsonOut, List, MessageView, Str};
use super::super::wire;
use super::decode::REASONING_FIELDS;
use super::policy::{is_openai, max_tokens_field, reasoning_effort};
use crate::message::Role;


/// The request body, written straight from the messages' views (see [`view`]), its fields in
/// the order they have always gone out in.
pub(super) fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
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
                    // pi's OpenRouter signatures go back as pi sends them.
                    let details: Vec<Value> =
                        calls.iter().filter_map(|c| c.thought_signature.as_ref()).filter_map(|s| reasoning_detail(&s.text())).collect();
                    if !details.is_empty() {
                        out.raw(",");
                        out.key("reasoning_details");
                        out.value(&details);
                    }
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

/// A call's `thoughtSignature` when it is pi's record of an OpenRouter `reasoning_details`
/// entry (the entry's JSON, which pi sends back in the message's `reasoning_details`), not a
/// Gemini signature (base64, sent back on the call).
fn reasoning_detail(signature: &str) -> Option<Value> {
    serde_json::from_str::<Value>(signature).ok().filter(Value::is_object)
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
    out.raw("}");
    // Gemini's signature, where its stream carried it (`decode::GEMINI_SIGNATURE`); only the
    // model that signed the call still has it here (`view::prepare`).
    if let Some(signature) = block.thought_signature.as_ref().filter(|s| reasoning_detail(&s.text()).is_none()) {
        out.raw(r#","extra_content":{"google":{"thought_signature":"#);
        out.str(signature);
        out.raw("}}");
    }
    out.raw("}");
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Content, ContentBlock, Message};
    use crate::provider::ThinkingLevel;

    /// The body as a value, for tests that look at its fields.
    fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Value {
        serde_json::from_slice(&super::request_body(config, request)).unwrap()
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
            let mut config = ProviderConfig::new(crate::provider::Api::Openai, base, "m");
            config.max_tokens = 321;
            let body = request_body(&config, &request);
            assert_eq!(body[field], 321, "{base}: {body}");
            assert!(body.get(other).is_none(), "{base}: {body}");
        }
    }

    #[test]
    fn reasoning_effort_goes_where_the_model_takes_it() {
        use crate::provider::Api;
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
        use crate::provider::Api;
        use crate::message::Message;
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
            let body = request_body(&ProviderConfig::new(crate::provider::Api::Openai, base, "m"), &request);
            assert_eq!(body.get("prompt_cache_key").is_some(), sent, "{base}: {body}");
        }
        let openai = ProviderConfig::new(crate::provider::Api::Openai, "https://api.openai.com/v1", "m");
        assert_eq!(request_body(&openai, &request)["prompt_cache_key"], "session-1");
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

    /// A call's signature goes back where it came from: Gemini's on the call
    /// (`extra_content.google`), pi's OpenRouter record in the message's `reasoning_details`.
    #[test]
    fn call_signatures_go_back_in_the_shape_their_server_sent_them() {
        use crate::provider::Api;
        let config = ProviderConfig::new(Api::Openai, "http://127.0.0.1:8080/v1", "m");
        let detail = json!({ "type": "reasoning.encrypted", "id": "c2", "data": "ZW5j", "format": "google-gemini-v1", "index": 0 });
        let mut gemini = ContentBlock::tool_call("c1", "read", json!({ "path": "a" }));
        gemini.extra.insert("thoughtSignature".into(), json!("CiQBc2ln"));
        let mut openrouter = ContentBlock::tool_call("c2", "read", json!({ "path": "b" }));
        openrouter.extra.insert("thoughtSignature".into(), json!(detail.to_string()));
        let mut assistant = Message::assistant("openai-completions", &config.name, "m");
        assistant.content = Content::Blocks(vec![gemini, openrouter, ContentBlock::tool_call("c3", "ls", json!({}))]);
        let request = ChatRequest { messages: vec![Message::user("hi").into(), assistant.into()], ..ChatRequest::default() };
        let body = request_body(&config, &request);
        let message = &body["messages"][1];
        let calls = message["tool_calls"].as_array().unwrap();
        assert_eq!(calls[0]["extra_content"], json!({ "google": { "thought_signature": "CiQBc2ln" } }));
        assert!(calls[1].get("extra_content").is_none() && calls[2].get("extra_content").is_none(), "{message}");
        assert_eq!(message["reasoning_details"], json!([detail]));
    }
}
