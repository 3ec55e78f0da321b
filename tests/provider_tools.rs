//! Tool calls on the wire, against the scriptable mock server: tool definitions and
//! `tool_choice` in both formats, tool calls streamed as each API streams them (interleaved,
//! malformed), conversations holding calls and results serialized as each API requires, and a
//! session pi 0.73.1 wrote while running tools sent as pi itself sent it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::Path;
use std::time::Duration;

use common::{provider_run as run, tool_calls_reply};
use handoff_mock::{MockReply, MockServer, MockToolCall, RecordedRequest};
use handoff_nvim::core::message::{Content, ContentBlock, ContextMessage, Message, Role, StopReason};
use handoff_nvim::core::provider::{
    Api, ChatRequest, ProviderConfig, ProviderError, StreamEnd, StreamEvent, ToolCall, ToolChoice,
};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::{ToolName, ToolRegistry};
use serde_json::{json, Map, Value};

const BOTH: [Api; 2] = [Api::Openai, Api::Anthropic];

/// Messages made in memory, as a request carries them.
fn made(messages: Vec<Message>) -> Vec<ContextMessage> {
    messages.into_iter().map(ContextMessage::from).collect()
}

fn config(api: Api, server: &MockServer) -> ProviderConfig {
    let mut c = ProviderConfig::new(api, server.openai_base_url(), "mock-model");
    c.max_retries = 0;
    c.idle_timeout = Duration::from_secs(5);
    c
}

/// The request as the mock received it (the reply is the mock's default text).
async fn recorded(api: Api, request: &ChatRequest) -> RecordedRequest {
    common::recorded(|server| config(api, server), request).await
}

/// The events and end of streaming [`pi_tools`] from a fresh mock for `api` answering `reply`.
async fn streamed(api: Api, reply: MockReply) -> (Vec<StreamEvent>, Result<StreamEnd, ProviderError>) {
    let server = MockServer::start().await.unwrap();
    server.push(reply);
    run(config(api, &server), &pi_tools()).await
}

/// The tools pi 0.73.1 offers by default, as our registry defines them.
fn pi_tools() -> ChatRequest {
    let registry = ToolRegistry::new([ToolName::Read, ToolName::Bash, ToolName::Edit, ToolName::Write]);
    ChatRequest {
        system: Some("sys".into()),
        messages: made(vec![Message::user("hi")]),
        tools: registry.definitions(),
        tool_choice: ToolChoice::Auto,
        ..ChatRequest::default()
    }
}

/// The complete calls among `events`.
fn calls(events: &[StreamEvent]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Tool definitions and tool_choice

#[tokio::test]
async fn both_formats_send_tool_definitions_and_tool_choice_auto() {
    let request = pi_tools();
    let defs = &request.tools;

    let openai = recorded(Api::Openai, &request).await.body;
    let tools = openai["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 4);
    for (tool, def) in tools.iter().zip(defs) {
        assert_eq!(
            tool,
            &json!({"type": "function", "function": {
                "name": def.name, "description": def.description, "parameters": def.parameters}})
        );
    }
    assert_eq!(openai["tool_choice"], "auto");

    let anthropic = recorded(Api::Anthropic, &request).await.body;
    let tools = anthropic["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 4);
    for (tool, def) in tools.iter().zip(defs) {
        assert_eq!(tool["name"], def.name.as_ref());
        assert_eq!(tool["description"], def.description.as_str());
        assert_eq!(tool["input_schema"]["type"], "object");
        assert_eq!(tool["input_schema"]["properties"], def.parameters["properties"]);
        assert_eq!(tool["input_schema"]["required"], def.parameters["required"]);
        assert_eq!(tool.as_object().unwrap().len(), if tool == tools.last().unwrap() { 4 } else { 3 }, "name, description, input_schema (and the last, cache_control): {tool}");
    }
    // pi's prompt-cache breakpoint after the tool definitions.
    assert_eq!(tools[3]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(anthropic["tool_choice"], json!({"type": "auto"}));
}

#[tokio::test]
async fn the_handoff_request_keeps_the_same_tools_with_tool_choice_none() {
    for api in [Api::Openai, Api::OpenaiResponses, Api::Anthropic] {
        let auto = recorded(api, &pi_tools()).await.body;
        let none = recorded(api, &ChatRequest { tool_choice: ToolChoice::None, ..pi_tools() }).await.body;
        assert_eq!(auto["tools"], none["tools"], "{api:?}: the same definitions, for the prompt cache");
        match api {
            Api::Openai | Api::OpenaiResponses => assert_eq!(none["tool_choice"], "none"),
            Api::Anthropic => assert_eq!(none["tool_choice"], json!({"type": "none"})),
        }
        // Nothing else differs.
        let (mut a, mut n) = (auto.clone(), none.clone());
        a.as_object_mut().unwrap().remove("tool_choice");
        n.as_object_mut().unwrap().remove("tool_choice");
        assert_eq!(a, n, "{api:?}");
    }
}

#[tokio::test]
async fn a_request_without_tools_has_no_tools_field_and_is_unchanged() {
    for api in BOTH {
        // tool_choice alone (the handoff of a conversation without tools) sends nothing either.
        for choice in [ToolChoice::Auto, ToolChoice::None] {
            let request = ChatRequest { tools: Vec::new(), tool_choice: choice, ..pi_tools() };
            let body = recorded(api, &request).await.body;
            assert!(body.get("tools").is_none(), "{api:?}: {body}");
            assert!(body.get("tool_choice").is_none(), "{api:?}: {body}");
        }
        // A request with tools is the same request plus the two fields (and on Anthropic, the
        // last tool's prompt-cache marker).
        let with = recorded(api, &pi_tools()).await.body;
        let without = recorded(api, &ChatRequest { tools: Vec::new(), ..pi_tools() }).await.body;
        let mut stripped = with.clone();
        stripped.as_object_mut().unwrap().remove("tools");
        stripped.as_object_mut().unwrap().remove("tool_choice");
        assert_eq!(stripped, without, "{api:?}");
    }
    // The exact bytes of a request without tools, as before tools existed.
    let openai = recorded(Api::Openai, &ChatRequest { tools: Vec::new(), ..pi_tools() }).await;
    assert_eq!(
        openai.body,
        json!({"model": "mock-model", "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
               "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 4096})
    );
    let anthropic = recorded(Api::Anthropic, &ChatRequest { tools: Vec::new(), ..pi_tools() }).await;
    assert_eq!(
        anthropic.body,
        json!({"model": "mock-model", "max_tokens": 4096,
               "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
               "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}],
               "stream": true})
    );
}

// ---------------------------------------------------------------------------------------------
// Streaming tool calls

#[tokio::test]
async fn two_tool_calls_in_one_reply_assemble_in_order() {
    let read = json!({"path": "src/main.rs", "offset": 10, "limit": 20});
    let bash = json!({"command": "ls -la && echo \"done\""});
    for api in BOTH {
        let reply = MockReply::ToolCalls {
            calls: vec![
                MockToolCall::new("read", &read, 5).with_id("call_a"),
                MockToolCall::new("bash", &bash, 4).with_id("call_b"),
            ],
            text_before: vec!["Let me ".into(), "look.".into()],
            chunk_delay_ms: 0,
            stop: "tool_calls".into(),
            // OpenAI: the two calls' pieces alternate on the wire.
            interleave: true,
        };
        let (events, result) = streamed(api, reply).await;
        let end = result.unwrap_or_else(|e| panic!("{api:?}: {e}"));
        assert_eq!(end.stop_reason, StopReason::ToolUse, "{api:?}");

        let text: String = events
            .iter()
            .filter_map(|e| if let StreamEvent::TextDelta(t) = e { Some(t.as_str()) } else { None })
            .collect();
        assert_eq!(text, "Let me look.", "{api:?}");
        let first_call_event = events.iter().position(|e| !matches!(e, StreamEvent::TextDelta(_))).unwrap();
        assert!(
            events[first_call_event..].iter().all(|e| !matches!(e, StreamEvent::TextDelta(_))),
            "{api:?}: the text came first"
        );

        let starts: Vec<(usize, String, String)> = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallStart { index, id, name } => Some((*index, id.clone(), name.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(starts, vec![(0, "call_a".into(), "read".into()), (1, "call_b".into(), "bash".into())], "{api:?}");

        // The pieces of each call join back to what the model sent; on OpenAI they interleave.
        let mut joined = [String::new(), String::new()];
        let mut order = Vec::new();
        for e in &events {
            if let StreamEvent::ToolCallDelta { index, arguments_delta } = e {
                joined[*index].push_str(arguments_delta);
                order.push(*index);
            }
        }
        assert_eq!(joined, [read.to_string(), bash.to_string()], "{api:?}");
        match api {
            Api::Openai => assert_eq!(&order[..4], &[0, 1, 0, 1], "interleaved: {order:?}"),
            Api::Anthropic => assert!(order.windows(2).all(|w| w[0] <= w[1]), "one block after another: {order:?}"),
            Api::OpenaiResponses => unreachable!("not in BOTH (tests/responses.rs streams its calls)"),
        }

        let calls = calls(&events);
        assert_eq!(calls.len(), 2, "{api:?}");
        assert_eq!((calls[0].index, calls[0].id.as_str(), calls[0].name.as_str()), (0, "call_a", "read"));
        assert_eq!((calls[1].index, calls[1].id.as_str(), calls[1].name.as_str()), (1, "call_b", "bash"));
        assert_eq!(calls[0].arguments, Ok(object(read.clone())), "{api:?}");
        assert_eq!(calls[1].arguments, Ok(object(bash.clone())), "{api:?}");
        // Each call completes after its last piece.
        let done_at = |i: usize| events.iter().position(|e| matches!(e, StreamEvent::ToolCall(c) if c.index == i)).unwrap();
        let last_piece = |i: usize| {
            events.iter().rposition(|e| matches!(e, StreamEvent::ToolCallDelta { index, .. } if *index == i)).unwrap()
        };
        assert!(done_at(0) > last_piece(0) && done_at(1) > last_piece(1), "{api:?}");
    }
}

#[tokio::test]
async fn empty_arguments_are_an_empty_object() {
    for api in BOTH {
        let reply = tool_calls_reply(vec![MockToolCall::raw("ls", "{}", 1), MockToolCall::raw("ls", "", 1)]);
        let (events, result) = streamed(api, reply).await;
        result.unwrap();
        let calls = calls(&events);
        assert_eq!(calls.len(), 2);
        assert_ne!(calls[0].id, calls[1].id, "the mock's made-up ids");
        assert!(calls.iter().all(|c| c.arguments == Ok(Map::new())), "{calls:?}");
    }
}

#[tokio::test]
async fn malformed_arguments_arrive_as_such_without_an_error() {
    // Cut off mid-string (max_tokens hit while writing a file), not JSON at all, and an array.
    let cut = r##"{"path": "notes.md", "content": "# Title\nSome te"##;
    let cases = [cut, "ls -la", "[\"a\"]"];
    for api in BOTH {
        let reply = MockReply::ToolCalls {
            calls: vec![
                MockToolCall::raw("write", cases[0], 4).with_id("c1"),
                MockToolCall::raw("bash", cases[1], 2).with_id("c2"),
                MockToolCall::raw("ls", cases[2], 1).with_id("c3"),
                // A raw newline inside a string: repaired, as pi does.
                MockToolCall::raw("bash", "{\"command\": \"echo a\necho b\"}", 3).with_id("c4"),
            ],
            text_before: Vec::new(),
            chunk_delay_ms: 0,
            stop: "length".into(),
            interleave: false,
        };
        let (events, result) = streamed(api, reply).await;
        let end = result.unwrap_or_else(|e| panic!("{api:?}: a malformed call failed the stream: {e}"));
        assert_eq!(end.stop_reason, StopReason::Length, "{api:?}");
        let calls = calls(&events);
        assert_eq!(calls.len(), 4, "{api:?}");
        for (call, raw) in calls.iter().zip(cases) {
            let malformed = call.arguments.clone().unwrap_err();
            assert_eq!(malformed.raw, raw, "{api:?}: the arguments exactly as sent");
            assert!(!malformed.error.is_empty());
        }
        assert!(calls[2].arguments.clone().unwrap_err().error.contains("array"));
        assert_eq!(calls[3].arguments, Ok(object(json!({"command": "echo a\necho b"}))), "{api:?}");
    }
}

#[test]
fn a_reply_cut_inside_a_tool_call_is_an_error_and_the_call_never_completes() {
    use handoff_nvim::core::provider::fuzzing::decode_body;
    let openai_call = concat!(
        "data: {\"id\":\"r\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",",
        "\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n",
    );
    let openai_finish = "data: {\"id\":\"r\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n";
    let anthropic_call = concat!(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,",
        "\"content_block\":{\"type\":\"tool_use\",\"id\":\"c\",\"name\":\"ls\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,",
        "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pa\"}}\n\n",
    );
    let anthropic_finish = concat!(
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    for (api, call, finish) in [(Api::Openai, openai_call, openai_finish), (Api::Anthropic, anthropic_call, anthropic_finish)] {
        let cut = decode_body(api, vec![call.as_bytes().to_vec().into()]);
        let message = cut.unwrap_err();
        assert!(message.contains("closed before the reply finished"), "{api:?}: {message}");
        // The same call in a finished reply: complete, its cut-off arguments malformed.
        let whole = format!("{call}{finish}");
        let (events, end) = decode_body(api, vec![whole.into_bytes().into()]).unwrap();
        assert_eq!(end.stop_reason, StopReason::ToolUse);
        let calls = calls(&events);
        assert_eq!(calls.len(), 1, "{api:?}");
        assert_eq!(calls[0].arguments.clone().unwrap_err().raw, "{\"pa", "{api:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Conversations holding tool calls and results

fn call_block(id: &str, name: &str, arguments: Value) -> ContentBlock {
    ContentBlock::tool_call(id, name, arguments)
}

fn result(id: &str, name: &str, content: Vec<ContentBlock>, is_error: bool) -> Message {
    let mut m = Message::user("");
    m.role = Role::ToolResult;
    m.content = Content::Blocks(content);
    m.extra.insert("toolCallId".into(), id.into());
    m.extra.insert("toolName".into(), name.into());
    m.extra.insert("isError".into(), is_error.into());
    m
}

fn image(data: &str) -> ContentBlock {
    let mut b = ContentBlock::text("");
    b.kind = "image".into();
    b.text = None;
    b.extra.insert("data".into(), data.into());
    b.extra.insert("mimeType".into(), "image/png".into());
    b
}

fn tool_conversation() -> ChatRequest {
    let mut assistant = Message::assistant("openai-completions", "mock", "mock-model");
    assistant.content = Content::Blocks(vec![
        ContentBlock::text("Two things."),
        call_block("call_1", "read", json!({"path": "a.png"})),
        call_block("call_2", "bash", json!({"command": "false"})),
        call_block("call_3", "ls", json!({})),
    ]);
    assistant.stop_reason = Some(StopReason::ToolUse);
    let mut only_calls = Message::assistant("openai-completions", "mock", "mock-model");
    only_calls.content = Content::Blocks(vec![call_block("call_4", "read", json!({"path": "b.txt"}))]);
    only_calls.stop_reason = Some(StopReason::ToolUse);
    ChatRequest {
        system: None,
        messages: made(vec![
            Message::user("go"),
            assistant,
            result("call_1", "read", vec![ContentBlock::text("Read image file [image/png]"), image("QUJD")], false),
            result("call_2", "bash", vec![ContentBlock::text("(no output)\n\nCommand exited with code 1")], true),
            // Nothing at all: pi's placeholder on OpenAI, no content on Anthropic.
            result("call_3", "ls", vec![], false),
            only_calls,
            result("call_4", "read", vec![image("REVG")], false),
            Message::user("thanks"),
        ]),
        ..pi_tools()
    }
}

#[tokio::test]
async fn openai_serializes_tool_calls_and_results_as_pi_does() {
    let body = recorded(Api::Openai, &tool_conversation()).await.body;
    let expected = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Two things.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.png\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"false\"}"}},
            {"id": "call_3", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Read image file [image/png]"},
        {"role": "tool", "tool_call_id": "call_2", "content": "(no output)\n\nCommand exited with code 1"},
        {"role": "tool", "tool_call_id": "call_3", "content": "(see attached image)"},
        // A tool message carries text only: the run's images follow in one user message.
        {"role": "user", "content": [
            {"type": "text", "text": "Attached image(s) from tool result:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_4", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"b.txt\"}"}}]},
        {"role": "tool", "tool_call_id": "call_4", "content": "(see attached image)"},
        {"role": "user", "content": [
            {"type": "text", "text": "Attached image(s) from tool result:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,REVG"}}]},
        {"role": "user", "content": "thanks"},
    ]);
    assert_eq!(body["messages"], expected);
}

#[tokio::test]
async fn anthropic_serializes_tool_use_and_merges_results_into_one_user_message() {
    let body = recorded(Api::Anthropic, &tool_conversation()).await.body;
    let png = |data: &str| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
    let expected = json!([
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Two things."},
            {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.png"}},
            {"type": "tool_use", "id": "call_2", "name": "bash", "input": {"command": "false"}},
            {"type": "tool_use", "id": "call_3", "name": "ls", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "is_error": false, "content": [
                {"type": "text", "text": "Read image file [image/png]"}, png("QUJD")]},
            {"type": "tool_result", "tool_use_id": "call_2", "is_error": true,
             "content": "(no output)\n\nCommand exited with code 1"},
            {"type": "tool_result", "tool_use_id": "call_3", "is_error": false}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_4", "name": "read", "input": {"path": "b.txt"}}]},
        {"role": "user", "content": [
            // Only an image: pi's placeholder text goes first.
            {"type": "tool_result", "tool_use_id": "call_4", "is_error": false, "content": [
                {"type": "text", "text": "(see attached image)"}, png("REVG")]},
            // pi's prompt-cache breakpoint: the last block of the last user message.
            {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}}]},
    ]);
    assert_eq!(body["messages"], expected);
}

// ---------------------------------------------------------------------------------------------
// A session pi wrote while running tools, sent as pi sent it

/// The request pi 0.73.1 sent after running the tools of `pimono-0.73.1-tool-calls-<api>.jsonl`
/// (both written by scripts/pi-tool-call-fixtures.sh).
fn pi_request(api: &str) -> Value {
    let path = common::fixtures_dir().join(format!("pi-requests/pimono-0.73.1-tool-calls-{api}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The context of the pi session `pimono-0.73.1-tool-calls-<api>.jsonl` up to its last
/// assistant message (what pi sent the second request with).
fn pi_session_context(api: &str, dir: &Path) -> Vec<Message> {
    let path = common::copy_fixture(&format!("pimono-0.73.1-tool-calls-{api}.jsonl"), dir);
    let session = SessionManager::open(&path, dir).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    let mut messages = session.build_session_context().messages;
    assert_eq!(messages.pop().unwrap().text(), "Done.");
    messages
}

#[tokio::test]
async fn a_session_pi_wrote_with_tool_calls_is_sent_as_pi_sent_it() {
    let dir = tempfile::tempdir().unwrap();
    for (api, short) in [(Api::Openai, "openai"), (Api::Anthropic, "anthropic")] {
        let messages = pi_session_context(short, dir.path());
        let roles: Vec<&Role> = messages.iter().map(|m| &m.role).collect();
        assert_eq!(
            roles,
            [&Role::User, &Role::Assistant, &Role::ToolResult, &Role::ToolResult, &Role::ToolResult],
            "{short}"
        );
        let calls: Vec<(String, Value)> = messages[1]
            .content
            .blocks()
            .iter()
            .filter(|b| b.kind == "toolCall")
            .map(|b| (b.extra_str("id").unwrap().to_owned(), b.extra["arguments"].clone()))
            .collect();
        assert_eq!(calls[0], ("call_read_1".to_owned(), json!({"path": "a.txt"})), "{short}");

        let pi = pi_request(short);
        // Anthropic: pi's system prompt too, to compare the block that carries its marker.
        let system = match api {
            Api::Openai => None,
            Api::Anthropic => Some(pi["system"][0]["text"].as_str().unwrap().to_owned()),
            Api::OpenaiResponses => unreachable!("no pi fixture of Responses here (tests/responses_pi.rs)"),
        };
        let request = ChatRequest { system, messages: made(messages), ..pi_tools() };
        let ours = recorded(api, &request).await.body;
        let (pi_messages, our_messages) = (pi["messages"].as_array().unwrap(), ours["messages"].as_array().unwrap());
        match api {
            Api::Openai => {
                // pi's first message is its system prompt; its user prompt is in the array form.
                assert_eq!(pi_messages[0]["role"], "system");
                assert_eq!(pi_messages[1]["content"][0]["text"], our_messages[0]["content"]);
                assert_eq!(&pi_messages[2..], &our_messages[1..], "{short}: assistant, tool results, images");
                // The tool definitions pi sent are ours (pi adds `strict: false`).
                let pi_tools: Vec<Value> = pi["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| {
                        let mut t = t.clone();
                        t["function"].as_object_mut().unwrap().remove("strict");
                        t
                    })
                    .collect();
                assert_eq!(Value::Array(pi_tools), ours["tools"], "{short}");
            }
            Api::Anthropic => {
                // Prompt-cache breakpoints included: the system block, the last tool and the
                // last block of the last user message (here a tool result with an image).
                assert_eq!(pi["messages"], ours["messages"], "{short}");
                assert_eq!(pi["system"], ours["system"], "{short}");
                // pi adds `eager_input_streaming`, a newer API's option.
                let pi_tools: Vec<Value> = pi["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| {
                        let mut t = t.clone();
                        t.as_object_mut().unwrap().remove("eager_input_streaming");
                        t
                    })
                    .collect();
                assert_eq!(Value::Array(pi_tools), ours["tools"], "{short}");
                let marked = |v: &Value| v.as_array().unwrap().iter().filter(|t| t.get("cache_control").is_some()).count();
                assert_eq!(marked(&ours["tools"]), 1, "only the last tool");
            }
            Api::OpenaiResponses => unreachable!("no pi fixture of Responses here"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The agent keeps the calls in the assistant message

#[tokio::test]
async fn the_agent_records_tool_calls_in_the_assistant_message_in_stream_order() {
    use handoff_nvim::core::agent::RunOptions;
    let dir = tempfile::tempdir().unwrap();
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::ToolCalls {
            calls: vec![
                MockToolCall::new("read", &json!({"path": "a.txt"}), 3).with_id("call_x"),
                MockToolCall::raw("bash", "{\"command\": \"ec", 2).with_id("call_y"),
            ],
            text_before: vec!["Checking.".into()],
            chunk_delay_ms: 0,
            stop: "tool_calls".into(),
            interleave: true,
        });
        let mut c = common::config(&server);
        c.api = api;
        let agent = common::agent_with(c, common::new_session(&dir.path().join(format!("{api:?}"))), None);
        let run = agent.prompt("look", RunOptions::default()).await.unwrap();
        // The first reply asked for the tools; the loop answered both and asked again.
        let reply = run.messages.iter().find(|m| m.is_assistant()).unwrap();
        assert_eq!(reply.stop_reason, Some(StopReason::ToolUse), "{api:?}");
        let blocks = serde_json::to_value(&reply.content).unwrap();
        assert_eq!(
            blocks,
            json!([
                {"type": "text", "text": "Checking."},
                {"type": "toolCall", "id": "call_x", "name": "read", "arguments": {"path": "a.txt"}},
                // Malformed: stored as pi stores what it cannot parse.
                {"type": "toolCall", "id": "call_y", "name": "bash", "arguments": {}},
            ]),
            "{api:?}"
        );
        // The session file holds the same message.
        let path = agent.session().path().to_path_buf();
        agent.session().flush().unwrap();
        let stored = common::entry_lines(&path);
        let asked = stored.iter().find(|e| e["message"]["stopReason"] == "toolUse").unwrap();
        assert_eq!(asked["message"]["content"], blocks, "{api:?}");
        // Each call got its result, in order, right after it: both are errors (no a.txt here,
        // and the malformed arguments were not run).
        let results: Vec<&Value> =
            stored.iter().filter(|e| e["message"]["role"] == "toolResult").map(|e| &e["message"]).collect();
        assert_eq!(results.len(), 2, "{api:?}");
        assert_eq!(results[0]["toolCallId"], "call_x");
        assert_eq!(results[1]["toolCallId"], "call_y");
        assert_eq!(results[1]["isError"], true);
        assert!(results[1]["content"][0]["text"].as_str().unwrap().contains("not valid JSON"), "{:?}", results[1]);
    }
}

/// The fuzz seeds with tool calls (fuzz/seeds/sse_*/tools) are replies that decode, so the
/// mutations the fuzzers make of them start from the tool-call paths of the decoders.
#[test]
fn the_tool_call_fuzz_seeds_decode() {
    use handoff_nvim::core::provider::fuzzing::decode_body;
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    for (api, name, expected) in [(Api::Openai, "sse_openai/tools", 2), (Api::Anthropic, "sse_anthropic/tools", 1)] {
        // The first byte is the chunk size the fuzz targets cut the body into.
        let bytes = std::fs::read(seeds.join(name)).unwrap();
        let (events, end) = decode_body(api, vec![bytes[1..].to_vec().into()]).unwrap();
        assert_eq!(end.stop_reason, StopReason::ToolUse, "{name}");
        let calls = calls(&events);
        assert_eq!(calls.len(), expected, "{name}");
        assert!(calls.iter().all(|c| c.arguments.is_ok()), "{name}: {calls:?}");
    }
}
