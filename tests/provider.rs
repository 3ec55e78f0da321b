//! Providers against the scriptable mock server: both wire formats, every failure mode the mock
//! can stage, request conversion as seen on the wire, retries and aborts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::provider_run as run;
use common::HANG_GUARD;
use handoff_mock::{MockReply, MockServer, RecordedRequest};
use handoff_nvim::core::message::{Content, ContentBlock, ContextMessage, Message, StopReason};
use handoff_nvim::core::provider::{
    Api, ChatRequest, Provider, ProviderConfig, ProviderError, StreamEnd, StreamEvent,
};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const BOTH: [Api; 2] = [Api::Openai, Api::Anthropic];
/// Every wire format, for the tests whose replies each can stage.
const ALL: [Api; 3] = [Api::Openai, Api::OpenaiResponses, Api::Anthropic];
const CANARY_VAR: &str = "HANDOFF_TEST_CANARY_KEY";
const CANARY: &str = "sk-canary-123";

/// Environment variables are set once, before any test reads them, so no test races a
/// `set_var` against another's `getenv`.
fn env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_var(CANARY_VAR, CANARY);
        std::env::remove_var("HANDOFF_TEST_UNSET_KEY");
    });
}

fn config(api: Api, server: &MockServer) -> ProviderConfig {
    env();
    let mut c = ProviderConfig::new(api, server.openai_base_url(), "mock-model");
    c.max_retries = 2;
    c.retry_base_delay = Duration::from_millis(5);
    c.max_retry_delay = Duration::from_millis(20);
    c.idle_timeout = Duration::from_secs(5);
    c
}

/// Messages made in memory, as a request carries them.
fn made(messages: Vec<Message>) -> Vec<ContextMessage> {
    messages.into_iter().map(ContextMessage::from).collect()
}

fn hello() -> ChatRequest {
    ChatRequest {
        system: Some("Be brief.".into()),
        messages: made(vec![Message::user("Say hello")]),
        ..ChatRequest::default()
    }
}

fn text_reply(chunks: &[&str], stop: &str, thinking: &[&str]) -> MockReply {
    MockReply::Text {
        chunks: chunks.iter().map(|s| s.to_string()).collect(),
        chunk_delay_ms: 0,
        first_delay_ms: 0,
        stop: stop.into(),
        thinking: thinking.iter().map(|s| s.to_string()).collect(),
    }
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn stream_message(r: Result<StreamEnd, ProviderError>) -> String {
    match r {
        Err(ProviderError::Stream { message, .. }) => message,
        other => panic!("expected a Stream error, got {other:?}"),
    }
}

#[tokio::test]
async fn streams_text_in_order_with_usage_and_id() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(text_reply(&["Hel", "lo, ", "world"], "stop", &[]));
        let (events, result) = run(config(api, &server), &hello()).await;
        let end = result.unwrap_or_else(|e| panic!("{api:?}: {e}"));
        let mut want = vec![
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo, ".into()),
            StreamEvent::TextDelta("world".into()),
        ];
        // Anthropic's text block stops: the block ends (a later text would be another block).
        if api == Api::Anthropic {
            want.push(StreamEvent::TextEnd { signature: None });
        }
        assert_eq!(events, want, "{api:?}");
        assert_eq!(end.stop_reason, StopReason::Stop);
        assert_eq!(end.response_id.as_deref(), Some("mock-1"), "{api:?}");
        assert_eq!(end.usage.output, 3, "{api:?}");
        assert!(end.usage.input > 10, "{api:?}: {:?}", end.usage);
        assert_eq!(end.usage.total_tokens, end.usage.input + end.usage.output);
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn thinking_deltas_come_before_text() {
    for api in ALL {
        let server = MockServer::start().await.unwrap();
        server.push(text_reply(&["Answer."], "stop", &["Let me ", "think."]));
        let (events, result) = run(config(api, &server), &hello()).await;
        result.unwrap_or_else(|e| panic!("{api:?}: {e}"));
        // The block's signature: the field it came in on OpenAI (as pi records it); Anthropic
        // signs it with a `signature_delta`, which this reply has none of.
        let signature = match api {
            Api::Openai => Some("reasoning_content".to_string()),
            Api::Anthropic => None,
            // Responses: the mock's finished reasoning item, whole.
            Api::OpenaiResponses => Some(
                json!({"id": "rs_mock_1_0", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Let me think."}],
                       "encrypted_content": "gAAAAmock-rs_mock_1_0"})
                .to_string(),
            ),
        };
        let mut want = vec![
            StreamEvent::ThinkingDelta("Let me ".into()),
            StreamEvent::ThinkingDelta("think.".into()),
            StreamEvent::ThinkingEnd { signature },
            StreamEvent::TextDelta("Answer.".into()),
        ];
        match api {
            Api::OpenaiResponses => {
                want.push(StreamEvent::TextEnd { signature: Some(r#"{"v":1,"id":"msg_mock_1_1"}"#.into()) })
            }
            Api::Anthropic => want.push(StreamEvent::TextEnd { signature: None }),
            Api::Openai => {}
        }
        assert_eq!(events, want, "{api:?}");
    }
}

#[tokio::test]
async fn length_and_tool_stop_reasons_are_mapped() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(text_reply(&["cut"], "length", &[]));
        server.push(text_reply(&["calling"], "tool_calls", &[]));
        let (_, first) = run(config(api, &server), &hello()).await;
        assert_eq!(first.unwrap().stop_reason, StopReason::Length, "{api:?}");
        let (_, second) = run(config(api, &server), &hello()).await;
        assert_eq!(second.unwrap().stop_reason, StopReason::ToolUse, "{api:?}");
    }
}

#[tokio::test]
async fn http_401_carries_the_servers_message_but_never_the_key() {
    for api in ALL {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Status {
            status: 401,
            body: r#"{"error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
                .into(),
            retry_after: None,
        });
        let mut c = config(api, &server);
        c.api_key_env = Some(CANARY_VAR.into());
        let (_, result) = run(c, &hello()).await;
        let err = result.unwrap_err();
        let shown = err.to_string();
        match &err {
            ProviderError::Http { status: 401, message, .. } => {
                assert_eq!(message, "invalid x-api-key", "{api:?}")
            }
            other => panic!("{api:?}: expected Http 401, got {other:?}"),
        }
        assert!(!shown.contains(CANARY), "{api:?}: key leaked into {shown}");
        assert!(!format!("{err:?}").contains(CANARY), "{api:?}: key leaked into Debug");
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{api:?}: 401 must not be retried");
        match api {
            Api::Openai | Api::OpenaiResponses => {
                assert_eq!(requests[0].header("authorization"), Some("Bearer sk-canary-123"))
            }
            Api::Anthropic => {
                assert_eq!(requests[0].header("x-api-key"), Some(CANARY));
                assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(requests[0].header("authorization"), None);
            }
        }
    }
}

#[tokio::test]
async fn a_key_echoed_by_the_server_is_redacted() {
    let server = MockServer::start().await.unwrap();
    server.push(MockReply::Status {
        status: 401,
        body: format!(r#"{{"error":{{"message":"Incorrect API key provided: {CANARY}"}}}}"#),
        retry_after: None,
    });
    let mut c = config(Api::Openai, &server);
    c.api_key_env = Some(CANARY_VAR.into());
    let (_, result) = run(c, &hello()).await;
    let shown = result.unwrap_err().to_string();
    assert!(!shown.contains(CANARY), "{shown}");
    assert!(shown.contains("Incorrect API key provided: [redacted]"), "{shown}");
}

#[tokio::test]
async fn retry_after_zero_is_honoured_then_the_retry_succeeds() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Status {
            status: 429,
            body: r#"{"error":{"message":"rate limited"}}"#.into(),
            retry_after: Some("0".into()),
        });
        server.push(MockReply::text("after the wait"));
        let mut c = config(api, &server);
        // Without the header the first retry would wait ten minutes: the hang guard would end
        // the test.
        c.retry_base_delay = Duration::from_secs(600);
        c.max_retry_delay = Duration::from_secs(600);
        let (events, result) = tokio::time::timeout(HANG_GUARD, run(c, &hello()))
            .await
            .unwrap_or_else(|_| panic!("{api:?}: the retry waited the backoff, not the header's 0"));
        result.unwrap_or_else(|e| panic!("{api:?}: {e}"));
        assert_eq!(text_of(&events), "after the wait");
        assert_eq!(server.requests().len(), 2, "{api:?}");
    }
}

#[tokio::test]
async fn server_errors_are_retried_max_retries_times_then_reported() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.set_default(MockReply::Status {
            status: 500,
            body: r#"{"error":{"message":"the model fell over"}}"#.into(),
            retry_after: None,
        });
        let mut c = config(api, &server);
        c.max_retries = 3;
        let (_, result) = run(c, &hello()).await;
        match result {
            Err(ProviderError::Http { status: 500, message, .. }) => {
                assert_eq!(message, "the model fell over")
            }
            other => panic!("{api:?}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 4, "{api:?}");
    }
}

#[tokio::test]
async fn a_plain_text_error_body_is_reported_truncated() {
    let server = MockServer::start().await.unwrap();
    server.push(MockReply::Status { status: 400, body: "x".repeat(5000), retry_after: None });
    let (_, result) = run(config(Api::Openai, &server), &hello()).await;
    match result {
        Err(ProviderError::Http { status: 400, message, .. }) => {
            assert!(message.len() < 400 && message.starts_with("xxxx"), "{}", message.len())
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "400 must not be retried");
}

#[tokio::test]
async fn a_torn_stream_is_a_stream_error_and_not_retried() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Torn { chunks: vec!["partial ".into(), "reply".into()] });
        let (events, result) = run(config(api, &server), &hello()).await;
        let message = stream_message(result);
        assert!(message.contains("closed before the reply finished"), "{api:?}: {message}");
        assert_eq!(text_of(&events), "partial reply", "{api:?}");
        assert_eq!(server.requests().len(), 1, "{api:?}");
    }
}

#[tokio::test]
async fn a_malformed_event_is_a_stream_error() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Malformed { chunks: vec!["fine ".into()] });
        let (events, result) = run(config(api, &server), &hello()).await;
        let message = stream_message(result);
        assert!(message.contains("invalid JSON"), "{api:?}: {message}");
        assert_eq!(text_of(&events), "fine ");
    }
}

#[tokio::test]
async fn a_stream_that_ends_without_finishing_is_an_error() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::NoChoices);
        let (events, result) = run(config(api, &server), &hello()).await;
        let message = stream_message(result);
        assert!(message.contains("closed before the reply finished"), "{api:?}: {message}");
        assert!(events.is_empty());
    }
}

#[tokio::test]
async fn an_empty_reply_is_ok() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Empty);
        let (events, result) = run(config(api, &server), &hello()).await;
        let end = result.unwrap_or_else(|e| panic!("{api:?}: {e}"));
        assert!(events.is_empty(), "{api:?}: {events:?}");
        assert_eq!(end.stop_reason, StopReason::Stop);
    }
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_is_not_retried_after_a_delta() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Stall { chunks: vec!["then silence".into()] });
        let mut c = config(api, &server);
        c.idle_timeout = Duration::from_millis(300);
        // The stall lasts forever: ending at all is the idle timeout's doing.
        let (events, result) = tokio::time::timeout(HANG_GUARD, run(c, &hello())).await.expect("the idle timeout never fired");
        assert!(matches!(result, Err(ProviderError::Timeout { .. })), "{api:?}: {result:?}");
        assert_eq!(text_of(&events), "then silence");
        assert_eq!(server.requests().len(), 1, "{api:?}: retried after a delta");
    }
}

#[tokio::test]
async fn missing_response_headers_time_out_and_are_retried() {
    let server = MockServer::start().await.unwrap();
    server.set_default(MockReply::NoAnswer);
    let mut c = config(Api::Openai, &server);
    c.idle_timeout = Duration::from_millis(300);
    c.max_retries = 1;
    // The server never answers: ending at all is the idle timeout's doing (twice).
    let (_, result) = tokio::time::timeout(HANG_GUARD, run(c, &hello())).await.expect("the idle timeout never fired");
    assert!(matches!(result, Err(ProviderError::Timeout { .. })), "{result:?}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_stall_before_any_delta_times_out() {
    let server = MockServer::start().await.unwrap();
    server.push(MockReply::Stall { chunks: vec![] });
    let mut c = config(Api::Anthropic, &server);
    c.idle_timeout = Duration::from_millis(300);
    c.max_retries = 0;
    let (_, result) = run(c, &hello()).await;
    assert!(matches!(result, Err(ProviderError::Timeout { .. })), "{result:?}");
}

#[tokio::test]
async fn a_dead_port_is_a_connect_error_after_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut c = ProviderConfig::new(Api::Openai, format!("http://{addr}/v1"), "m");
    c.max_retries = 1;
    c.retry_base_delay = Duration::from_millis(5);
    let (_, result) = run(c, &hello()).await;
    match result {
        Err(e @ ProviderError::Connect { .. }) => {
            let shown = e.to_string();
            assert!(shown.contains(&addr.to_string()), "{shown}");
            assert!(shown.to_lowercase().contains("refused"), "{shown}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn abort_mid_stream_returns_promptly() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Text {
            chunks: (0..50).map(|i| format!("w{i} ")).collect(),
            chunk_delay_ms: 500,
            first_delay_ms: 0,
            stop: "stop".into(),
            thinking: vec![],
        });
        let provider = Provider::new(config(api, &server));
        let cancel = CancellationToken::new();
        let mut events = Vec::new();
        let result = {
            let cancel2 = cancel.clone();
            provider
                .stream(&hello(), &cancel, &mut |e| {
                    events.push(e);
                    cancel2.cancel();
                })
                .await
        };
        assert!(matches!(result, Err(ProviderError::Aborted)), "{api:?}: {result:?}");
        // Only the piece that cancelled: the rest of the stream was not read.
        assert_eq!(events, vec![StreamEvent::TextDelta("w0 ".into())]);
    }
}

#[tokio::test]
async fn abort_during_retry_backoff_returns_promptly() {
    let server = MockServer::start().await.unwrap();
    server.set_default(MockReply::Status { status: 503, body: "busy".into(), retry_after: None });
    let mut c = config(Api::Anthropic, &server);
    c.retry_base_delay = Duration::from_secs(600);
    c.max_retry_delay = Duration::from_secs(600);
    let provider = Provider::new(c);
    let cancel = CancellationToken::new();
    let retry_waits = common::RetryWaits::default();
    let canceller = {
        let (retry_waits, cancel) = (retry_waits.clone(), cancel.clone());
        tokio::spawn(async move {
            // The 503 was read and the ten-minute backoff begins: cancel inside it.
            common::wait_until("the retry wait", HANG_GUARD, || retry_waits.count() == 1).await;
            cancel.cancel();
            Instant::now()
        })
    };
    // The backoff is ten minutes: ending inside the hang guard is the abort cutting it short.
    let result = {
        use tracing::instrument::WithSubscriber;
        let (request, mut sink) = (hello(), |_| {});
        let stream = provider.stream(&request, &cancel, &mut sink).with_subscriber(retry_waits.dispatch());
        tokio::time::timeout(HANG_GUARD, stream).await.expect("the abort waited out the backoff")
    };
    canceller.await.unwrap();
    assert!(matches!(result, Err(ProviderError::Aborted)), "{result:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn abort_while_waiting_for_headers_returns_promptly() {
    let server = MockServer::start().await.unwrap();
    server.push(MockReply::NoAnswer);
    let provider = Provider::new(config(Api::Openai, &server));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let waiter = server.clone();
    tokio::spawn(async move {
        waiter.wait_for_requests(1, Duration::from_secs(5)).await;
        trigger.cancel();
    });
    // Aborted, not Timeout: the abort came before the idle timeout gave up on the headers.
    let result = provider.stream(&hello(), &cancel, &mut |_| {}).await;
    assert!(matches!(result, Err(ProviderError::Aborted)), "{result:?}");
}

#[tokio::test]
async fn a_huge_event_arrives_whole() {
    const SIZE: usize = 1 << 20;
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Huge { bytes: SIZE });
        let (events, result) = run(config(api, &server), &hello()).await;
        result.unwrap_or_else(|e| panic!("{api:?}: {e}"));
        let deltas: Vec<&StreamEvent> = events.iter().filter(|e| !matches!(e, StreamEvent::TextEnd { .. })).collect();
        assert_eq!(deltas.len(), 1, "{api:?}");
        let StreamEvent::TextDelta(text) = deltas[0] else { panic!("{:?}", deltas[0]) };
        assert_eq!(text.len(), SIZE);
        assert!(text.starts_with("abcdefghijklmnopqrstuvwxyzabc"));
        assert_eq!(text.as_bytes()[SIZE - 1], b'a' + ((SIZE - 1) % 26) as u8);
    }
}

/// pi's successful result of call `id`.
fn tool_result(id: &str, name: &str, text: &str) -> Message {
    common::result_message(id, name, text, false, Value::Null)
}

fn assistant(blocks: Vec<ContentBlock>, stop: StopReason) -> Message {
    let mut m = Message::assistant("openai-completions", "mock", "m");
    m.content = Content::Blocks(blocks);
    m.stop_reason = Some(stop);
    m
}

/// A pi conversation exercising every conversion rule.
fn conversation() -> ChatRequest {
    let other: Message =
        serde_json::from_value(json!({"role":"bashExecution","command":"ls","output":"a"}))
            .unwrap();
    ChatRequest {
        system: Some("You are terse.".into()),
        messages: made(vec![
            Message::user("first"),
            Message::user("second"),
            assistant(
                vec![
                    ContentBlock::thinking("secret scratchpad"),
                    ContentBlock::text("Let me look."),
                    ContentBlock::tool_call("call_1", "bash", json!({"cmd": "ls"})),
                ],
                StopReason::ToolUse,
            ),
            tool_result("call_1", "bash", "a.txt"),
            other,
            Message::user("thanks"),
            assistant(vec![], StopReason::Aborted),
            assistant(vec![], StopReason::Error),
            Message::user("again"),
        ]),
        ..ChatRequest::default()
    }
}

async fn recorded(api: Api, request: &ChatRequest) -> RecordedRequest {
    common::recorded(|server| config(api, server), request).await
}

#[tokio::test]
async fn openai_request_is_converted_from_pi_messages() {
    let req = recorded(Api::Openai, &conversation()).await;
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), None, "no key configured, no auth header");
    let body = &req.body;
    assert_eq!(body["model"], "mock-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["max_tokens"], 4096);
    let expected = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
        // Another model's thinking (the reply is model "m"'s) goes as text, as pi sends it.
        {"role": "assistant", "content": "secret scratchpad\nLet me look.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "bash", "arguments": "{\"cmd\":\"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        {"role": "user", "content": "thanks"},
        // The aborted and the failed turn are not sent again.
        {"role": "user", "content": "again"},
    ]);
    assert_eq!(body["messages"], expected);
}

#[tokio::test]
async fn anthropic_request_merges_roles_and_converts_tools() {
    let req = recorded(Api::Anthropic, &conversation()).await;
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("x-api-key"), None);
    let body = &req.body;
    assert_eq!(body["model"], "mock-model");
    // A text block, to carry pi's prompt-cache marker.
    assert_eq!(body["system"], json!([{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]));
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096);
    let expected = json!([
        {"role": "user", "content": [
            {"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "secret scratchpad"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"cmd": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt", "is_error": false},
            {"type": "text", "text": "thanks"},
            {"type": "text", "text": "again", "cache_control": {"type": "ephemeral"}}]},
    ]);
    assert_eq!(body["messages"], expected);
}

#[tokio::test]
async fn dangling_tool_calls_get_a_result_and_orphan_results_are_dropped() {
    let request = ChatRequest {
        system: None,
        messages: made(vec![
            Message::user("go"),
            assistant(
                vec![ContentBlock::tool_call("call|9", "read", json!({"path": "x"}))],
                StopReason::ToolUse,
            ),
            Message::user("never mind"),
            tool_result("ghost", "bash", "orphan"),
            assistant(vec![ContentBlock::tool_call("call_2", "ls", json!({}))], StopReason::ToolUse),
            // An empty failed turn between a call and its result must not separate them.
            assistant(vec![], StopReason::Aborted),
            tool_result("call_2", "ls", "listing"),
        ]),
        ..ChatRequest::default()
    };
    let openai = recorded(Api::Openai, &request).await.body;
    let msgs = openai["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 6, "{msgs:?}");
    assert_eq!(msgs[5], json!({"role": "tool", "tool_call_id": "call_2", "content": "listing"}));
    assert_eq!(msgs[0]["role"], "user", "no system message without a system prompt");
    assert_eq!(msgs[1]["content"], Value::Null);
    assert_eq!(
        msgs[2],
        json!({"role": "tool", "tool_call_id": "call|9", "content": "No result provided"})
    );
    assert_eq!(msgs[3]["content"], "never mind");
    assert!(!openai.to_string().contains("orphan"));

    let anthropic = recorded(Api::Anthropic, &request).await.body;
    assert!(anthropic.get("system").is_none());
    let msgs = anthropic["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5, "{msgs:?}");
    assert_eq!(msgs[4]["content"][0]["content"], "listing");
    assert_eq!(msgs[1]["content"][0]["id"], "call_9", "ids made Anthropic-safe");
    assert_eq!(
        msgs[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "call_9", "content": "No result provided", "is_error": true})
    );
}

#[tokio::test]
async fn api_key_cmd_output_is_the_key() {
    for api in ALL {
        let server = MockServer::start().await.unwrap();
        let mut c = config(api, &server);
        c.api_key_cmd = Some("printf sk-x".into());
        c.api_key_env = Some("HANDOFF_TEST_UNSET_KEY".into());
        let (_, result) = run(c, &hello()).await;
        result.unwrap_or_else(|e| panic!("{api:?}: {e}"));
        let req = server.requests().remove(0);
        match api {
            Api::Openai | Api::OpenaiResponses => assert_eq!(req.header("authorization"), Some("Bearer sk-x")),
            Api::Anthropic => assert_eq!(req.header("x-api-key"), Some("sk-x")),
        }
    }
}

#[tokio::test]
async fn key_problems_are_reported_before_any_request() {
    let server = MockServer::start().await.unwrap();
    let mut c = config(Api::Openai, &server);
    c.api_key_cmd = Some("echo sk-leaky; exit 3".into());
    let (_, result) = run(c, &hello()).await;
    match result {
        Err(ProviderError::MissingKey(m)) => {
            assert!(m.contains("`echo …`"), "names the command's program: {m}");
            assert!(!m.contains("sk-leaky"), "the command line may hold the key: {m}");
            assert!(m.contains("failed"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let mut c = config(Api::Openai, &server);
    c.api_key_env = Some("HANDOFF_TEST_UNSET_KEY".into());
    let (_, result) = run(c, &hello()).await;
    match result {
        Err(ProviderError::MissingKey(m)) => assert!(m.contains("$HANDOFF_TEST_UNSET_KEY"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn echo_replies_with_the_last_user_message() {
    for api in BOTH {
        let server = MockServer::start().await.unwrap();
        server.set_default(MockReply::Echo);
        let request =
            ChatRequest { messages: made(vec![Message::user("repeat after me")]), ..ChatRequest::default() };
        let (events, result) = run(config(api, &server), &request).await;
        result.unwrap();
        assert_eq!(text_of(&events), "repeat after me", "{api:?}");
        assert!(events.len() > 1, "streamed in pieces");
    }
}

#[tokio::test]
async fn control_endpoints_script_the_server_over_http() {
    let server = MockServer::start().await.unwrap();
    let client = reqwest::Client::new();
    let root = format!("http://{}", server.addr());
    let pushed = client
        .post(format!("{root}/__mock/push"))
        .body(r#"[{"kind":"text","chunks":["one"]},{"kind":"status","status":503,"body":"x"}]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), 200);
    let bad = client.post(format!("{root}/__mock/push")).body(r#"{"kind":"nope"}"#).send().await;
    assert_eq!(bad.unwrap().status(), 400);
    let set = client
        .post(format!("{root}/__mock/default"))
        .body(r#"{"kind":"text","chunks":["dflt"]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);

    let mut c = config(Api::Openai, &server);
    c.max_retries = 0;
    let (events, _) = run(c.clone(), &hello()).await;
    assert_eq!(text_of(&events), "one");
    let (_, result) = run(c.clone(), &hello()).await;
    assert!(matches!(result, Err(ProviderError::Http { status: 503, .. })), "{result:?}");
    let (events, _) = run(c.clone(), &hello()).await;
    assert_eq!(text_of(&events), "dflt");

    let listed: Vec<Value> =
        client.get(format!("{root}/__mock/requests")).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed.len(), 3, "control calls are not recorded");
    assert_eq!(listed[0]["body"]["messages"][1]["content"], "Say hello");

    // Plain JSON when the client does not ask for a stream.
    let plain: Value = client
        .post(format!("{}/chat/completions", server.openai_base_url()))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(plain["choices"][0]["message"]["content"], "dflt");

    let reset = client.post(format!("{root}/__mock/reset")).send().await.unwrap();
    assert_eq!(reset.status(), 200);
    assert!(server.requests().is_empty());
}

#[test]
fn mock_reply_helpers_and_json_shape() {
    let MockReply::Text { chunks, stop, .. } = MockReply::text("a few words here") else {
        panic!()
    };
    assert_eq!(chunks.concat(), "a few words here");
    assert_eq!(chunks.len(), 4);
    assert_eq!(stop, "stop");
    let MockReply::Text { chunks, .. } = MockReply::long(7) else { panic!() };
    assert_eq!(chunks.len(), 7);
    let parsed: MockReply =
        serde_json::from_str(r#"{"kind":"status","status":429,"body":"x","retry_after":"1"}"#)
            .unwrap();
    assert!(matches!(parsed, MockReply::Status { status: 429, .. }));
    let unit: MockReply = serde_json::from_str(r#"{"kind":"no_answer"}"#).unwrap();
    assert_eq!(serde_json::to_value(&unit).unwrap(), json!({"kind": "no_answer"}));
}

/// The agent spawns provider calls on tokio tasks: the future must stay `Send`.
#[allow(dead_code)]
fn stream_future_is_send(p: &Provider, r: &ChatRequest, c: &CancellationToken) {
    fn assert_send<T: Send>(_: T) {}
    let mut sink = |_: StreamEvent| {};
    assert_send(p.stream(r, c, &mut sink));
}

#[tokio::test]
async fn the_health_probe_reports_any_answer_as_reachable_and_never_shows_credentials() {
    use handoff_nvim::core::provider::{probe, Unreachable};
    let server = MockServer::start().await.unwrap();
    // A server without /models: a 404 still proves the server is there.
    server.listing(|l| l.status = 404);
    let with_credentials = format!("http://user:s3cret@{}/v1", server.addr());
    let c = ProviderConfig::new(Api::Openai, with_credentials, "m");
    let reach = probe(&c).await;
    assert!(reach.ok(), "{reach:?}");
    assert_eq!(reach.outcome, Ok(404));
    assert_eq!(reach.detail(), format!("http://{}/v1/models answered HTTP 404", server.addr()));
    assert!(!format!("{reach:?}").contains("s3cret"));
    let req = server.listing_requests().remove(0);
    assert_eq!((req.method.as_str(), req.path.as_str()), ("GET", "/v1/models"));
    // The URL's user and password go as Basic auth (a proxy may want them); no API key is sent.
    assert!(req.header("authorization").is_some_and(|a| a.starts_with("Basic ")), "{req:?}");

    // Nobody listens: refused, said without the URL's secrets.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = ProviderConfig::new(Api::Anthropic, format!("http://k:s3cret@127.0.0.1:{port}/v1?key=s3cret"), "m");
    let reach = probe(&c).await;
    assert!(!reach.ok());
    assert_eq!(reach.outcome, Err(Unreachable::Connect));
    assert_eq!(
        reach.detail(),
        format!("cannot reach http://127.0.0.1:{port}/v1/models: connection refused or host unknown"),
    );

    // A server that accepts and never answers: the probe gives up after its timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let holder = tokio::spawn(async move {
        let (socket, _) = silent.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(600)).await;
        drop(socket);
    });
    // The server holds the connection for ten minutes: a result before then is the probe's own
    // timeout (and says so: a closed connection would be another outcome).
    let reach = tokio::time::timeout(HANG_GUARD, probe(&ProviderConfig::new(Api::Openai, format!("http://{addr}/v1"), "m")))
        .await
        .expect("the probe waited for the silent server");
    holder.abort();
    assert_eq!(reach.outcome, Err(Unreachable::Timeout), "{reach:?}");
}

/// A preset fills in its service's base URL, key variable, default model and pi's name for it;
/// what the user sets wins; the request goes out as Chat Completions with the preset's key.
#[tokio::test]
async fn a_preset_names_its_service_and_its_key_and_what_the_user_sets_wins() {
    use handoff_nvim::core::config::{ProviderKind, Settings};
    let groq = Settings { api: Some(ProviderKind::Groq), ..Settings::default() }.provider_config().unwrap();
    assert_eq!(groq.base_url, "https://api.groq.com/openai/v1");
    assert_eq!(groq.api_key_env.as_deref(), Some("GROQ_API_KEY"));
    assert_eq!(groq.model, "llama-3.3-70b-versatile");
    assert_eq!(groq.name, "groq");
    assert_eq!(groq.api, Api::Openai);
    let gemini = Settings { api: Some(ProviderKind::Gemini), ..Settings::default() }.provider_config().unwrap();
    assert_eq!(gemini.base_url, "https://generativelanguage.googleapis.com/v1beta/openai");
    assert_eq!(gemini.name, "google", "pi's provider id");
    let ollama = Settings { api: Some(ProviderKind::Ollama), ..Settings::default() }.provider_config().unwrap();
    assert_eq!(ollama.api_key_env, None, "a local Ollama takes no key");
    for kind in ProviderKind::ALL {
        if let Some(preset) = kind.preset() {
            assert!(preset.base_url.starts_with("http"), "{kind:?}");
        }
    }
    // Against the mock: the user's base URL and model win, the preset's key variable is used.
    env();
    let server = MockServer::start().await.unwrap();
    let mut settings = Settings {
        api: Some(ProviderKind::Openrouter),
        base_url: Some(server.openai_base_url()),
        model: Some("anthropic/claude-sonnet-4.5".into()),
        ..Settings::default()
    };
    let config = settings.provider_config().unwrap();
    assert_eq!(config.api_key_env.as_deref(), Some("OPENROUTER_API_KEY"));
    assert_eq!(config.name, "openrouter");
    // The tests set no real service's variable: this one names the tests' own for the key.
    settings.api_key_env = Some(CANARY_VAR.into());
    let mut config = settings.provider_config().unwrap();
    config.max_retries = 0;
    let (_, end) = run(config, &hello()).await;
    end.unwrap();
    let sent = server.requests();
    assert_eq!(sent[0].path, "/v1/chat/completions");
    assert_eq!(sent[0].header("authorization"), Some(format!("Bearer {CANARY}").as_str()));
    assert_eq!(sent[0].body["model"], "anthropic/claude-sonnet-4.5");
}

/// Issue 31: Anthropic's reply cap (what a thinking budget is added under) came from a table of
/// model names in the wire format's code, so `provider.model_info` could neither raise nor lower
/// it. The catalogue owns it now: the request's `max_tokens`, as the server receives it, goes by
/// the user's `max_tokens` of `model_info`.
#[tokio::test]
async fn model_info_sets_anthropics_reply_cap_as_the_request_shows() {
    use handoff_nvim::core::config::{ProviderKind, Settings};
    use handoff_nvim::core::provider::{ModelFacts, ThinkingLevel};
    let sent = |max_tokens: Option<u32>, cap: u32| async move {
        let server = MockServer::start().await.unwrap();
        let settings = Settings {
            api: Some(ProviderKind::Anthropic),
            base_url: Some(server.anthropic_base_url()),
            model: Some("claude-sonnet-4-5".into()),
            max_tokens,
            model_info: Some(std::collections::BTreeMap::from([(
                "claude-sonnet-4-5".to_string(),
                ModelFacts { max_tokens: Some(cap), ..ModelFacts::default() },
            )])),
            ..Settings::default()
        };
        let request = ChatRequest { thinking: ThinkingLevel::High, ..hello() };
        let (_, result) = run(settings.provider_config().unwrap(), &request).await;
        result.unwrap();
        server.requests()[0].body.clone()
    };
    // 90k for the answer and high's 16k budget: up to the 100k model_info gives, above the
    // built-in table's 64k for this model.
    let body = sent(Some(90_000), 100_000).await;
    assert_eq!((body["max_tokens"].clone(), body["thinking"]["budget_tokens"].clone()), (json!(100_000), json!(16_384)), "{body}");
    // And down: 4096 for the answer and the budget, capped at 20k.
    let body = sent(None, 20_000).await;
    assert_eq!((body["max_tokens"].clone(), body["thinking"]["budget_tokens"].clone()), (json!(20_000), json!(16_384)), "{body}");
}
