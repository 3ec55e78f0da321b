//! The Responses request body (`input` items), written straight from the stored messages' views,
//! as pi's `convertResponsesMessages` builds it.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::super::types::{ChatRequest, ProviderConfig};
use super::super::view::{self, BlockView, ContentView, JsonOut, List, MessageView, Str};
use super::super::wire;
use super::policy::{effort, keeps_item_ids, system_role};
use crate::message::Role;

/// The longest item id the API takes.
const MAX_ID: usize = 64;

/// The request body, its fields in pi's order.
pub(super) fn request_body(config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
    let views = view::prepare(view::read_all(&request.messages), config);
    let mut out = JsonOut::with_capacity(view::body_capacity(&request.messages, request.system.as_deref()));
    out.raw("{");
    out.key("model");
    out.text(&config.model);
    out.raw(",");
    out.key("input");
    write_input(&mut out, config, request, &views);
    out.raw(r#","stream":true"#);
    if let Some(key) = request.cache_key.as_deref().filter(|k| !k.is_empty()) {
        out.raw(",");
        out.key("prompt_cache_key");
        out.text(key);
    }
    out.raw(r#","store":false,"#);
    out.key("max_output_tokens");
    out.value(&config.max_tokens);
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": false,
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
    if let Some(effort) = effort(config, request.thinking) {
        out.raw(r#","reasoning":{"effort":"#);
        out.text(effort);
        out.raw(r#","summary":"auto"},"include":["reasoning.encrypted_content"]"#);
    }
    out.raw("}");
    out.into_bytes()
}

/// The conversation as `input` items, from the history as pi replays it (`view::prepare`: no
/// failed or aborted turn, whose reasoning item without the item it led to the server refuses;
/// another model's thinking already text).
fn write_input(out: &mut JsonOut, config: &ProviderConfig, request: &ChatRequest, views: &[MessageView<'_>]) {
    let mut items = List::new(out);
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        let out = items.item();
        out.raw(r#"{"role":"#);
        out.text(system_role(config));
        out.raw(r#","content":"#);
        out.text(system);
        out.raw("}");
    }
    let mut ids = CallIds::default();
    // pi numbers messages to make ids for text without its own (`msg_<n>`); messages that
    // wrote no item do not count.
    let mut index = 0usize;
    for msg in views {
        let wrote = match &msg.role {
            Role::User => user_message(&mut items, &msg.content),
            Role::Assistant => assistant_items(&mut items, config, msg, index, &mut ids),
            Role::ToolResult => tool_result(&mut items, msg, &ids),
            Role::Other(_) => false,
        };
        if wrote {
            index += 1;
        }
    }
    items.end();
}

/// A user message: `input_text` and `input_image` parts. `false` when it has none.
fn user_message(items: &mut List<'_>, content: &ContentView<'_>) -> bool {
    let blocks = match content {
        ContentView::Text(s) => {
            let out = items.item();
            out.raw(r#"{"role":"user","content":[{"type":"input_text","text":"#);
            out.str(s);
            out.raw("}]}");
            return true;
        }
        ContentView::Blocks(blocks) => blocks,
    };
    let parts: Vec<&BlockView<'_>> =
        blocks.iter().filter(|b| (b.is("text") && b.text.is_some()) || (b.is("image") && b.data.is_some())).collect();
    if parts.is_empty() {
        return false;
    }
    let out = items.item();
    out.raw(r#"{"role":"user","content":"#);
    let mut list = List::new(out);
    for b in parts {
        match &b.text {
            Some(text) if b.is("text") => {
                let out = list.item();
                out.raw(r#"{"type":"input_text","text":"#);
                out.str(text);
                out.raw("}");
            }
            _ => image_part(list.item(), b),
        }
    }
    list.end();
    out.raw("}");
    true
}

/// A pi `image` block as an `input_image` part with a data URL.
fn image_part(out: &mut JsonOut, block: &BlockView<'_>) {
    out.raw(r#"{"type":"input_image","detail":"auto","image_url":"data:"#);
    out.str_contents(block.mime_type.as_ref().unwrap_or(&Str::plain("image/png")));
    out.raw(";base64,");
    out.str_contents(block.data.as_ref().unwrap_or(&Str::plain("")));
    out.raw(r#""}"#);
}

/// An assistant message as items: its reasoning items (to the model that wrote them), a
/// `message` item per text block, a `function_call` per call. `false` when it wrote none.
///
/// To another model (whose thinking `view::prepare` made text), ids are cleaned as pi cleans
/// them; a reasoning item never goes to another model.
fn assistant_items(
    items: &mut List<'_>,
    config: &ProviderConfig,
    msg: &MessageView<'_>,
    index: usize,
    ids: &mut CallIds,
) -> bool {
    let ContentView::Blocks(blocks) = &msg.content else {
        let text = msg.content.text_pieces();
        message_item(items.item(), text[0], None, index);
        return true;
    };
    let same = msg.same_model(config);
    let is = |field: &Option<Str<'_>>, value: &str| field.as_ref().is_some_and(|s| s.eq_str(value));
    // pi's "different model": the same provider and API, another model id. Its `fc_` item
    // ids are left out, so the server does not pair them with reasoning it never sees.
    let other_model_same_api = !same && is(&msg.provider, &config.name) && is(&msg.api, config.api.pi_name());
    let foreign = !is(&msg.provider, &config.name) || !is(&msg.api, config.api.pi_name());
    let mut wrote = false;
    for block in blocks {
        match block.kind.as_ref() {
            "thinking" if same => {
                if let Some(item) = block.thinking_signature().and_then(|s| reasoning_item(s)) {
                    items.item().raw(&item);
                    wrote = true;
                }
            }
            "text" => {
                let empty = Str::plain("");
                let text = block.text.as_ref().unwrap_or(&empty);
                let signature = if same { block.text_signature.as_ref() } else { None };
                message_item(items.item(), text, signature, index);
                wrote = true;
            }
            "toolCall" => {
                let stored = block.id.as_ref().map(Str::text).unwrap_or_default();
                let id = if same { stored.to_string() } else { ids.convert(&stored, &config.name, foreign) };
                let (call_id, item_id) = match id.split_once('|') {
                    Some((call, item)) => (call.to_owned(), Some(item.to_owned())),
                    None => (id.clone(), None),
                };
                let item_id = item_id.filter(|i| !(other_model_same_api && i.starts_with("fc_")));
                function_call(items.item(), block, &call_id, item_id.as_deref());
                wrote = true;
            }
            _ => {}
        }
    }
    wrote
}

/// The reasoning item a thinking block's signature holds, as stored; `None` when it is not one
/// (a signature from another API) or carries no encrypted content: with `store: false` a bare
/// reasoning id is refused ("Item … not found").
fn reasoning_item(signature: &Str<'_>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Item<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        encrypted_content: Option<&'a RawValue>,
    }
    let text = signature.text();
    let text = text.trim();
    let item: Item<'_> = serde_json::from_str(text).ok()?;
    let encrypted = item.encrypted_content.is_some_and(|e| e.get().starts_with('"'));
    (item.kind == "reasoning" && encrypted).then(|| text.to_owned())
}

/// An assistant `message` item with one `output_text` part. Its id and phase come from the
/// block's `textSignature` (pi's `{"v":1,"id":…,"phase":…}`, or a bare id as older pi wrote
/// it), else `msg_<index>`; an id longer than the API takes is hashed as pi hashes it.
fn message_item(out: &mut JsonOut, text: &Str<'_>, signature: Option<&Str<'_>>, index: usize) {
    let (id, phase) = signature.map(|s| parse_text_signature(&s.text())).unwrap_or_default();
    let id = match id {
        None => format!("msg_{index}"),
        Some(id) if id.len() > MAX_ID => format!("msg_{}", short_hash(&id)),
        Some(id) => id,
    };
    out.raw(r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"#);
    out.str(text);
    out.raw(r#","annotations":[]}],"status":"completed","id":"#);
    out.text(&id);
    if let Some(phase) = phase {
        out.raw(r#","phase":"#);
        out.text(phase);
    }
    out.raw("}");
}

/// The id and phase of a `textSignature` (pi's `parseTextSignature`).
fn parse_text_signature(signature: &str) -> (Option<String>, Option<&'static str>) {
    if signature.is_empty() {
        return (None, None);
    }
    if signature.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(signature) {
            if let (Some(1), Some(id)) = (v["v"].as_u64(), v["id"].as_str()) {
                let phase = match v["phase"].as_str() {
                    Some("commentary") => Some("commentary"),
                    Some("final_answer") => Some("final_answer"),
                    _ => None,
                };
                return (Some(id.to_owned()), phase);
            }
        }
    }
    (Some(signature.to_owned()), None)
}

/// A pi `toolCall` block as a `function_call` item (arguments as JSON text).
fn function_call(out: &mut JsonOut, block: &BlockView<'_>, call_id: &str, item_id: Option<&str>) {
    let arguments = block.arguments.as_ref().map(|a| a.value());
    let arguments = match arguments.as_deref() {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "{}".to_owned(),
    };
    out.raw(r#"{"type":"function_call","#);
    if let Some(item_id) = item_id {
        out.key("id");
        out.text(item_id);
        out.raw(",");
    }
    out.key("call_id");
    out.text(call_id);
    out.raw(r#","name":"#);
    out.str(block.name.as_ref().unwrap_or(&Str::plain("")));
    out.raw(r#","arguments":"#);
    out.text(&arguments);
    out.raw("}");
}

/// A tool result as a `function_call_output` item for the call id before the `|`. Text only,
/// or the text and the images as parts.
fn tool_result(items: &mut List<'_>, msg: &MessageView<'_>, ids: &CallIds) -> bool {
    let stored = msg.tool_call_id.as_ref().map(Str::text).unwrap_or_default();
    let id = ids.converted.get(stored.as_ref()).map_or(stored.as_ref(), String::as_str);
    let call_id = id.split('|').next().unwrap_or_default();
    let text = msg.content.text_pieces();
    let images = msg.content.blocks_of("image").into_iter().filter(|b| b.data.is_some()).collect::<Vec<_>>();
    let out = items.item();
    out.raw(r#"{"type":"function_call_output","call_id":"#);
    out.text(call_id);
    out.raw(r#","output":"#);
    let no_text = view::joined_is_empty(&text);
    if images.is_empty() {
        if no_text {
            out.text(wire::NO_TEXT_RESULT);
        } else {
            out.joined(&text, "\n");
        }
    } else {
        let mut parts = List::new(out);
        if !no_text {
            let out = parts.item();
            out.raw(r#"{"type":"input_text","text":"#);
            out.joined(&text, "\n");
            out.raw("}");
        }
        for image in images {
            image_part(parts.item(), image);
        }
        parts.end();
    }
    out.raw("}");
    true
}

/// Tool-call ids of other models' messages as they went out: their results must name the same
/// call.
#[derive(Default)]
struct CallIds {
    converted: HashMap<String, String>,
}

impl CallIds {
    /// Another model's call id as pi's `normalizeToolCallId` writes it for Responses: each part
    /// cleaned to `[A-Za-z0-9_-]{1,64}`; a foreign item id (another provider or API) hashed; an
    /// item id always starting with `fc_`. Providers other than OpenAI's get the whole id
    /// cleaned (its `|` too).
    fn convert(&mut self, id: &str, provider: &str, foreign: bool) -> String {
        let converted = match id.split_once('|') {
            Some((call, item)) if keeps_item_ids(provider) => {
                let item = if foreign { truncate(format!("fc_{}", short_hash(item))) } else { clean_id_part(item) };
                let item = if item.starts_with("fc_") { item } else { clean_id_part(&format!("fc_{item}")) };
                format!("{}|{item}", clean_id_part(call))
            }
            _ => clean_id_part(id),
        };
        if converted != id {
            self.converted.insert(id.to_owned(), converted.clone());
        }
        converted
    }
}

/// pi's `normalizeIdPart`: characters outside `[A-Za-z0-9_-]` become `_`, at most 64 of them,
/// trailing `_` removed.
fn clean_id_part(part: &str) -> String {
    let cleaned: String =
        part.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    truncate(cleaned).trim_end_matches('_').to_owned()
}

fn truncate(mut id: String) -> String {
    // Only ASCII is left in ids by now but the hash input: cut on a character boundary anyway.
    while id.len() > MAX_ID {
        id.pop();
    }
    id
}

/// pi's `shortHash` (cyrb53-like over UTF-16 code units, two 32-bit halves in base 36), so that
/// hashed ids are the ones pi would send.
fn short_hash(s: &str) -> String {
    let mut h1: u32 = 0xdead_beef;
    let mut h2: u32 = 0x41c6_ce57;
    for unit in s.encode_utf16() {
        let ch = u32::from(unit);
        h1 = (h1 ^ ch).wrapping_mul(2_654_435_761);
        h2 = (h2 ^ ch).wrapping_mul(1_597_334_677);
    }
    h1 = (h1 ^ (h1 >> 16)).wrapping_mul(2_246_822_507) ^ (h2 ^ (h2 >> 13)).wrapping_mul(3_266_489_909);
    h2 = (h2 ^ (h2 >> 16)).wrapping_mul(2_246_822_507) ^ (h1 ^ (h1 >> 13)).wrapping_mul(3_266_489_909);
    format!("{}{}", base36(h2), base36(h1))
}

fn base36(mut n: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Content, ContentBlock, Message, StopReason};
    use crate::provider::{Api, ThinkingLevel, ToolChoice};
    use crate::provider::ToolDefinition;

    fn body(config: &ProviderConfig, request: &ChatRequest) -> Value {
        serde_json::from_slice(&request_body(config, request)).unwrap()
    }

    fn config(model: &str) -> ProviderConfig {
        ProviderConfig::new(Api::OpenaiResponses, "http://127.0.0.1:1/v1", model)
    }

    const ITEM: &str = r#"{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Plan."}],"encrypted_content":"gAAA=="}"#;

    /// A reply of `model` with a reasoning item, signed text and a call.
    fn reply(model: &str) -> Message {
        let mut m = Message::assistant("openai-responses", "openai", model);
        let mut thinking = ContentBlock::thinking("Plan.");
        thinking.extra.insert("thinkingSignature".into(), ITEM.into());
        let mut text = ContentBlock::text("Reading.");
        text.extra.insert("textSignature".into(), r#"{"v":1,"id":"msg_a","phase":"commentary"}"#.into());
        let call = ContentBlock::tool_call("call_1|fc_1", "read", json!({"path": "a.txt"}));
        m.content = Content::Blocks(vec![thinking, text, call]);
        m.stop_reason = Some(StopReason::ToolUse);
        m
    }

    fn result(id: &str, text: &str) -> Message {
        let mut m = Message::user(text);
        m.role = Role::ToolResult;
        m.extra.insert("toolCallId".into(), id.into());
        m
    }

    fn conversation(model: &str) -> ChatRequest {
        ChatRequest {
            system: Some("Be brief.".into()),
            messages: vec![Message::user("go").into(), reply(model).into(), result("call_1|fc_1", "hello").into()],
            ..ChatRequest::default()
        }
    }

    #[test]
    fn the_same_model_gets_its_reasoning_item_its_message_ids_and_its_calls_back() {
        let sent = body(&config("gpt-5"), &conversation("gpt-5"));
        assert_eq!(
            sent["input"],
            json!([
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
                serde_json::from_str::<Value>(ITEM).unwrap(),
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
                 "status": "completed", "id": "msg_a", "phase": "commentary"},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"a.txt\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "hello"},
            ])
        );
        // The item goes back byte for byte.
        let raw = String::from_utf8(request_body(&config("gpt-5"), &conversation("gpt-5"))).unwrap();
        assert!(raw.contains(ITEM), "{raw}");
    }

    #[test]
    fn another_model_gets_no_reasoning_item_and_no_paired_ids() {
        let sent = body(&config("gpt-5-mini"), &conversation("gpt-5"));
        let input = sent["input"].as_array().unwrap();
        assert!(input.iter().all(|i| i["type"] != "reasoning"), "{sent}");
        // Thinking as text, text without its id (msg_<n>: the user message was 0).
        assert_eq!(input[2]["content"][0]["text"], "Plan.");
        assert_eq!(input[2]["id"], "msg_1");
        assert_eq!(input[3]["id"], "msg_1");
        assert!(input[3].get("phase").is_none());
        assert_eq!(input[4], json!({"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"a.txt\"}"}));
        assert_eq!(input[5]["call_id"], "call_1");
    }

    #[test]
    fn calls_of_another_provider_are_cleaned_and_hashed_as_pi_does() {
        let mut foreign = Message::assistant("anthropic-messages", "anthropic", "claude");
        foreign.content = Content::Blocks(vec![ContentBlock::tool_call("toolu_01.x", "ls", json!({}))]);
        let mut codex = Message::assistant("openai-codex-responses", "openai", "gpt-5");
        codex.content = Content::Blocks(vec![ContentBlock::tool_call("call_9|item+9", "ls", json!({}))]);
        let request = ChatRequest {
            messages: vec![
                Message::user("go").into(),
                foreign.into(),
                result("toolu_01.x", "a").into(),
                codex.into(),
                result("call_9|item+9", "b").into(),
            ],
            ..ChatRequest::default()
        };
        let sent = body(&config("gpt-5"), &request);
        let input = sent["input"].as_array().unwrap();
        assert_eq!(input[1]["call_id"], "toolu_01_x");
        assert!(input[1].get("id").is_none());
        assert_eq!(input[2]["call_id"], "toolu_01_x");
        assert_eq!(input[3]["call_id"], "call_9");
        assert_eq!(input[3]["id"], format!("fc_{}", short_hash("item+9")));
        assert_eq!(input[4]["call_id"], "call_9");
    }

    #[test]
    fn short_hash_is_pis() {
        // Values from pi-ai's utils/hash.js (node -e 'shortHash(…)').
        assert_eq!(short_hash(""), "k4n83c7h0j2b");
        assert_eq!(short_hash("item+9"), "1ongwm2fjlu34");
        assert_eq!(short_hash("é😀x"), "1i488u5srdge7");
    }

    #[test]
    fn failed_turns_their_results_and_bare_reasoning_ids_stay_out() {
        let mut failed = reply("gpt-5");
        failed.stop_reason = Some(StopReason::Error);
        let mut bare = Message::assistant("openai-responses", "openai", "gpt-5");
        let mut thinking = ContentBlock::thinking("");
        thinking.extra.insert("thinkingSignature".into(), r#"{"type":"reasoning","id":"rs_2","summary":[]}"#.into());
        bare.content = Content::Blocks(vec![thinking, ContentBlock::text("Hi.")]);
        let request = ChatRequest {
            messages: vec![
                Message::user("go").into(),
                failed.into(),
                result("call_1|fc_1", "late").into(),
                Message::user("again").into(),
                bare.into(),
            ],
            ..ChatRequest::default()
        };
        let sent = body(&config("gpt-5"), &request);
        let kinds: Vec<&str> =
            sent["input"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap_or("user")).collect();
        assert_eq!(kinds, ["user", "user", "message"], "{sent}");
        assert_eq!(sent["input"][2]["id"], "msg_2");
    }

    #[test]
    fn fields_tools_and_reasoning_as_pi_sends_them() {
        let tool = ToolDefinition { name: "ls".into(), description: "List.".into(), parameters: json!({"type": "object"}) };
        let request = ChatRequest {
            messages: vec![Message::user("hi").into()],
            tools: vec![tool],
            tool_choice: ToolChoice::None,
            thinking: ThinkingLevel::High,
            cache_key: Some("session-1".into()),
            ..ChatRequest::default()
        };
        let mut c = config("gpt-5");
        c.max_tokens = 1234;
        let raw = String::from_utf8(request_body(&c, &request)).unwrap();
        let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(&raw).unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            ["model", "input", "stream", "prompt_cache_key", "store", "max_output_tokens", "tools", "tool_choice", "reasoning", "include"]
        );
        let sent: Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(sent["store"], false);
        assert_eq!(sent["max_output_tokens"], 1234);
        assert_eq!(sent["tools"], json!([{"type": "function", "name": "ls", "description": "List.", "parameters": {"type": "object"}, "strict": false}]));
        assert_eq!(sent["tool_choice"], "none");
        assert_eq!(sent["reasoning"], json!({"effort": "high", "summary": "auto"}));
        assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
        let off = body(&c, &ChatRequest { thinking: ThinkingLevel::Off, tools: Vec::new(), ..request });
        assert!(off.get("reasoning").is_none() && off.get("include").is_none() && off.get("tools").is_none(), "{off}");
    }

    #[test]
    fn text_signatures_old_and_new_and_long_ids() {
        assert_eq!(parse_text_signature(r#"{"v":1,"id":"msg_1","phase":"final_answer"}"#), (Some("msg_1".into()), Some("final_answer")));
        assert_eq!(parse_text_signature(r#"{"v":1,"id":"msg_1","phase":"other"}"#), (Some("msg_1".into()), None));
        assert_eq!(parse_text_signature("msg_legacy"), (Some("msg_legacy".into()), None));
        let mut out = JsonOut::with_capacity(64);
        let long = "m".repeat(80);
        message_item(&mut out, &Str::plain("x"), Some(&Str::plain(&long)), 0);
        let item: Value = serde_json::from_slice(&out.into_bytes()).unwrap();
        assert_eq!(item["id"], format!("msg_{}", short_hash(&long)));
    }
}
