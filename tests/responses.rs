//! The OpenAI Responses wire format (`api = "openai-responses"`) against the loopback mock, over
//! real HTTP: a conversation with reasoning and a tool loop, the reasoning item sent back byte for
//! byte to the model that wrote it and to no other, the shapes pi stores, `incomplete` as a
//! length stop, mid-stream errors and torn streams. The corpus of real-looking Responses streams
//! is tests/stream_corpus.rs's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{entry_lines, new_session};
use handoff_mock::{MockReply, MockServer, MockToolCall};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::message::StopReason;
use handoff_nvim::core::provider::{Api, ChatRequest, ProviderConfig, ProviderError, StreamEvent, ThinkingLevel};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(20);

/// The mock as a Responses provider for a reasoning model.
fn provider(server: &MockServer, model: &str) -> ProviderConfig {
    let mut c = common::config(server);
    c.api = Api::OpenaiResponses;
    c.model = model.into();
    c.reasoning_effort = Some(true);
    c
}

fn agent_at(config: ProviderConfig, dir: &Path, level: ThinkingLevel) -> Arc<AgentSession> {
    let agent = Arc::new(AgentSession::new(AgentConfig { thinking: level, ..AgentConfig::new(config) }, new_session(dir)));
    agent.record_settings(&mut agent.session()).unwrap();
    agent
}

async fn prompt(agent: &Arc<AgentSession>, text: &str) {
    let result = tokio::time::timeout(T, agent.prompt(text, RunOptions::default())).await.expect("prompt timed out").unwrap();
    let last = result.last_assistant().unwrap();
    assert_ne!(last.stop_reason, Some(StopReason::Error), "{:?}", last.error_message);
}

/// The reasoning item the mock finishes for `thinking` with this encrypted content, as it
/// writes it (its id is the mock's: `rs_mock_<n>_0` for the first item of reply n).
fn mock_item(n: usize, thinking: &str, encrypted: &str) -> String {
    json!({ "id": format!("rs_mock_{n}_0"), "type": "reasoning",
            "summary": [{ "type": "summary_text", "text": thinking }], "encrypted_content": encrypted })
    .to_string()
}

fn items_of(body: &Value, kind: &str) -> Vec<Value> {
    body["input"].as_array().unwrap().iter().filter(|i| i["type"] == kind).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_loop_with_reasoning_sends_the_reasoning_item_back_byte_for_byte_and_stores_it_as_pi_does() {
    let server = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_at(provider(&server, "gpt-5-mock"), dir.path(), ThinkingLevel::Medium);
    server.push(MockReply::Reasoning {
        thinking: vec!["Need the ".into(), "file.".into()],
        signature: Some("gAAAAB-encrypted-one==".into()),
        redacted: None,
        field: None,
        chunks: vec!["Reading it.".into()],
        calls: vec![MockToolCall::new("read", &json!({ "path": "nothing.txt" }), 3).with_id("call_a")],
    });
    server.push(MockReply::Reasoning {
        thinking: vec!["It is missing.".into()],
        signature: Some("gAAAAB-encrypted-two==".into()),
        redacted: None,
        field: None,
        chunks: vec!["The file does not exist.".into()],
        calls: Vec::new(),
    });
    prompt(&agent, "read nothing.txt").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.path == "/v1/responses"));

    // The first request: the level as reasoning.effort, stateless reasoning asked for.
    let first = &requests[0].body;
    assert_eq!(first["reasoning"], json!({ "effort": "medium", "summary": "auto" }));
    assert_eq!(first["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(first["store"], false);
    assert_eq!(first["stream"], true);
    assert!(first["tools"].as_array().unwrap().iter().any(|t| t["type"] == "function" && t["name"] == "read"));

    // The second: the reasoning item as the server sent it, byte for byte, then the message
    // with its id, the call, its result under the call id.
    let item = mock_item(1, "Need the file.", "gAAAAB-encrypted-one==");
    let raw = String::from_utf8(requests[1].raw.clone()).unwrap();
    assert!(raw.contains(&item), "the item went back changed:\n{raw}");
    let second = &requests[1].body;
    let input = second["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap()).collect();
    // Our system prompt first, as a reasoning model's `developer` message.
    assert_eq!(kinds, ["developer", "user", "reasoning", "message", "function_call", "function_call_output"]);
    assert_eq!(input[3]["id"], "msg_mock_1_1");
    assert_eq!(input[3]["content"][0]["text"], "Reading it.");
    assert_eq!(input[4], json!({ "type": "function_call", "id": "fc_mock_1_0", "call_id": "call_a", "name": "read",
                                 "arguments": "{\"path\":\"nothing.txt\"}" }));
    assert_eq!(input[5]["call_id"], "call_a");

    // On disk, pi's shapes.
    let file = agent.session().path().to_path_buf();
    agent.session().flush().unwrap();
    let assistants: Vec<Value> =
        entry_lines(&file).into_iter().filter(|e| e["message"]["role"] == "assistant").map(|e| e["message"].clone()).collect();
    assert_eq!(assistants[0]["api"], "openai-responses");
    assert_eq!(assistants[0]["stopReason"], "toolUse");
    assert_eq!(
        assistants[0]["content"],
        json!([
            { "type": "thinking", "thinking": "Need the file.", "thinkingSignature": item },
            { "type": "text", "text": "Reading it.", "textSignature": "{\"v\":1,\"id\":\"msg_mock_1_1\"}" },
            { "type": "toolCall", "id": "call_a|fc_mock_1_0", "name": "read", "arguments": { "path": "nothing.txt" } },
        ])
    );
    assert_eq!(assistants[1]["content"][0]["thinkingSignature"], mock_item(2, "It is missing.", "gAAAAB-encrypted-two=="));
    let result = entry_lines(&file).into_iter().find(|e| e["message"]["role"] == "toolResult").unwrap();
    assert_eq!(result["message"]["toolCallId"], "call_a|fc_mock_1_0");

    // The same conversation from the file, to the same model: both items back; to another
    // model: none, the thinking as text, no item ids that would pair with reasoning it never saw.
    server.push(MockReply::text("Again."));
    prompt(&agent, "and now?").await;
    let third = server.requests()[2].body.clone();
    assert_eq!(items_of(&third, "reasoning").len(), 2);
    agent.set_model(provider(&server, "gpt-5-other")).unwrap();
    server.push(MockReply::text("Other."));
    prompt(&agent, "once more").await;
    let fourth = server.requests()[3].body.clone();
    assert!(items_of(&fourth, "reasoning").is_empty(), "{fourth}");
    assert!(!server.requests()[3].raw.windows(6).any(|w| w == b"gAAAAB"), "no encrypted content to another model");
    let calls = items_of(&fourth, "function_call");
    assert_eq!(calls[0].get("id"), None, "{calls:?}");
    // Provider `mock` is not OpenAI's: pi cleans the whole id, and the result names the same.
    assert_eq!(calls[0]["call_id"], "call_a_fc_mock_1_0");
    assert_eq!(items_of(&fourth, "function_call_output")[0]["call_id"], "call_a_fc_mock_1_0");
    let texts: Vec<Value> = items_of(&fourth, "message").iter().map(|m| m["content"][0]["text"].clone()).collect();
    assert!(texts.contains(&json!("Need the file.")), "{texts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incomplete_is_a_length_stop_and_a_call_it_cut_is_not_run() {
    let server = MockServer::start().await.unwrap();
    let c = provider(&server, "gpt-5-mock");
    server.push(MockReply::ToolCalls {
        calls: vec![MockToolCall::raw("write", "{\"path\":\"a.txt\",\"content\":\"hal", 2)],
        text_before: vec!["Writing.".into()],
        chunk_delay_ms: 0,
        stop: "length".into(),
        interleave: false,
    });
    // The mock finishes the call's item before the incomplete response: decoded whole it
    // would parse; only its own JSON decides. Here it is cut JSON: malformed either way.
    let (events, result) = common::provider_run(c.clone(), &hello()).await;
    assert_eq!(result.unwrap().stop_reason, StopReason::Length);
    let call = events.iter().find_map(|e| if let StreamEvent::ToolCall(c) = e { Some(c.clone()) } else { None }).unwrap();
    assert!(call.arguments.is_err());

    server.push(MockReply::Text { chunks: vec!["Cut ".into(), "off".into()], chunk_delay_ms: 0, first_delay_ms: 0,
                                  stop: "length".into(), thinking: Vec::new() });
    let (events, result) = common::provider_run(c, &hello()).await;
    assert_eq!(result.unwrap().stop_reason, StopReason::Length);
    assert_eq!(text_of(&events), "Cut off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_with_cached_tokens_errors_mid_stream_torn_streams_and_http_errors() {
    let server = MockServer::start().await.unwrap();
    let c = provider(&server, "gpt-5-mock");
    server.push(MockReply::text("Hi there.").with_usage(handoff_mock::MockUsage { input: 40, output: Some(7), cache_read: 60, cache_write: 0 }));
    let (_, result) = common::provider_run(c.clone(), &hello()).await;
    let end = result.unwrap();
    assert_eq!((end.usage.input, end.usage.cache_read, end.usage.output, end.usage.total_tokens), (40, 60, 7, 107));
    assert_eq!(end.response_id.as_deref(), Some("mock-1"));

    server.push(MockReply::StreamError { chunks: vec!["Par".into()], code: "server_error".into(), message: "The model crashed".into() });
    let (events, result) = common::provider_run(c.clone(), &hello()).await;
    assert_eq!(text_of(&events), "Par");
    match result {
        Err(ProviderError::Reported { code, message, .. }) => {
            assert_eq!((code.as_deref(), message.as_str()), (Some("server_error"), "The model crashed"));
        }
        other => panic!("{other:?}"),
    }

    server.push(MockReply::Torn { chunks: vec!["Half".into()] });
    let (_, result) = common::provider_run(c.clone(), &hello()).await;
    assert!(matches!(result, Err(ProviderError::Stream { .. })), "{result:?}");

    server.push(MockReply::NoChoices);
    let (_, result) = common::provider_run(c.clone(), &hello()).await;
    assert!(matches!(result, Err(ProviderError::Stream { ref message, .. }) if message.contains("closed before")), "{result:?}");

    server.push(MockReply::Status { status: 400, body: r#"{"error":{"message":"Item 'rs_x' not found."}}"#.into(), retry_after: None });
    let (_, result) = common::provider_run(c, &hello()).await;
    assert!(matches!(result, Err(ProviderError::Http { status: 400, ref message, .. }) if message.contains("not found")), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reasoning_model_gets_a_developer_prompt_and_one_that_does_not_a_system_message_and_no_reasoning_fields() {
    let server = MockServer::start().await.unwrap();
    let (_, result) = common::provider_run(provider(&server, "gpt-5-mock"), &hello()).await;
    result.unwrap();
    assert_eq!(server.requests()[0].body["input"][0], json!({ "role": "developer", "content": "Be brief." }));
    let mut c = provider(&server, "gpt-4.1");
    c.reasoning_effort = None;
    let request = ChatRequest { thinking: ThinkingLevel::High, ..hello() };
    let (_, result) = common::provider_run(c, &request).await;
    result.unwrap();
    let body = server.requests()[1].body.clone();
    assert_eq!(body["input"][0], json!({ "role": "system", "content": "Be brief." }));
    assert!(body.get("reasoning").is_none() && body.get("include").is_none(), "{body}");
}

fn hello() -> ChatRequest {
    ChatRequest {
        system: Some("Be brief.".into()),
        messages: vec![handoff_nvim::core::message::Message::user("Say hello").into()],
        ..ChatRequest::default()
    }
}

fn text_of(events: &[StreamEvent]) -> String {
    events.iter().filter_map(|e| if let StreamEvent::TextDelta(t) = e { Some(t.as_str()) } else { None }).collect()
}
