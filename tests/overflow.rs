//! Requests larger than the model's context window, against the mock's window: each provider's
//! real overflow error is an `Overflow` (what the automatic handoff reacts to), sent once and
//! never retried, and told to the user as a request that did not fit; rate limits and other
//! refusals are not overflows, whatever their status.

mod common;
use common::Drive as _;

use std::time::Duration;

use common::provider_run as run;
use handoff_mock::{MockOverflow, MockReply, MockServer, MockWindow};
use handoff_nvim::core::agent::RunOptions;
use handoff_nvim::core::failure::FailureKind;
use handoff_nvim::core::message::{ContextMessage, Message, StopReason};
use handoff_nvim::core::provider::{Api, ChatRequest, ProviderConfig, ProviderError, StreamEvent};
use serde_json::Value;

const ALL: [Api; 3] = [Api::Openai, Api::OpenaiResponses, Api::Anthropic];

/// What the user reads first when a request did not fit.
const DID_NOT_FIT: &str = "the request did not fit the model's context window: ";

/// A provider for `api` at `server` that would retry three times.
fn config(api: Api, server: &MockServer) -> ProviderConfig {
    let mut c = ProviderConfig::new(api, server.openai_base_url(), "mock-model");
    c.max_retries = 3;
    c.retry_base_delay = Duration::from_millis(5);
    c.max_retry_delay = Duration::from_millis(20);
    c.idle_timeout = Duration::from_secs(5);
    c
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest { messages: vec![ContextMessage::from(Message::user(text))], ..ChatRequest::default() }
}

fn text_of(events: &[StreamEvent]) -> String {
    events.iter().filter_map(|e| if let StreamEvent::TextDelta(t) = e { Some(t.as_str()) } else { None }).collect()
}

#[tokio::test]
async fn every_style_of_the_mocks_window_is_an_overflow_sent_once() {
    let styles = [
        (MockOverflow::Openai, Api::Openai, "maximum context length is 10 tokens"),
        (MockOverflow::Anthropic, Api::Anthropic, "prompt is too long"),
        (MockOverflow::Llamacpp, Api::Openai, "exceeds the available context size"),
        (MockOverflow::Bare413, Api::Openai, "413"),
        (MockOverflow::Bare413, Api::Anthropic, "413"),
        (MockOverflow::Responses, Api::OpenaiResponses, "exceeds the context window"),
    ];
    for (style, api, words) in styles {
        let server = MockServer::start().await.unwrap();
        server.set_window(Some(MockWindow { tokens: 10, style }));
        server.push(MockReply::text("accepted"));
        let (events, result) = run(config(api, &server), &ask("Say hello")).await;
        let error = result.expect_err(&format!("{style:?}: the window refused nothing"));
        assert_eq!(error.kind(), FailureKind::Overflow, "{style:?} over {api:?}: {error:?}");
        let text = error.to_string();
        assert!(text.starts_with(DID_NOT_FIT) && text.contains(words), "{style:?}: {text}");
        assert!(text_of(&events).is_empty());
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{style:?}: an overflow is not retried");
        assert!(requests[0].refused, "{style:?}");

        // The refused request took no queued reply: the next accepted one gets it.
        server.set_window(None);
        let (events, result) = run(config(api, &server), &ask("Say hello")).await;
        result.unwrap_or_else(|e| panic!("{style:?}: {e}"));
        assert_eq!(text_of(&events), "accepted", "{style:?}");
        assert!(!server.requests()[1].refused);
    }
}

#[tokio::test]
async fn the_window_counts_the_tokens_the_mock_reports_as_input() {
    let server = MockServer::start().await.unwrap();
    let request = ask("Say hello");
    let (_, result) = run(config(Api::Openai, &server), &request).await;
    let input = result.unwrap().usage.input;
    assert_eq!(input, (server.requests()[0].raw_len / 4) as u64);

    // A request of exactly the window fits; one token less refuses it.
    server.set_window(Some(MockWindow { tokens: input, style: MockOverflow::Openai }));
    server.push(MockReply::text("fits"));
    let (events, result) = run(config(Api::Openai, &server), &request).await;
    result.unwrap();
    assert_eq!(text_of(&events), "fits");
    server.set_window(Some(MockWindow { tokens: input - 1, style: MockOverflow::Openai }));
    server.push(MockReply::text("after"));
    let (_, result) = run(config(Api::Openai, &server), &request).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind(), FailureKind::Overflow);
    let expected = format!("maximum context length is {} tokens. However, your messages resulted in {input} tokens.", input - 1);
    assert!(error.to_string().contains(&expected), "{error}");
    // A small request still fits and gets the reply the refused one did not take.
    let (events, result) = run(config(Api::Openai, &server), &ask("Hi")).await;
    result.unwrap();
    assert_eq!(text_of(&events), "after");
    let refused: Vec<bool> = server.requests().iter().map(|r| r.refused).collect();
    assert_eq!(refused, [false, false, true, false]);
}

#[tokio::test]
async fn the_window_is_set_and_cleared_over_http_and_listed() {
    let server = MockServer::start().await.unwrap();
    let root = format!("http://{}", server.addr());
    let client = reqwest::Client::new();
    let set = client.post(format!("{root}/__mock/window")).body(r#"{"tokens":10,"style":"llamacpp"}"#).send().await.unwrap();
    assert_eq!(set.status(), 200);
    let (_, result) = run(config(Api::Openai, &server), &ask("Say hello")).await;
    match result {
        Err(e @ ProviderError::Http { status: 400, .. }) => assert_eq!(e.kind(), FailureKind::Overflow, "{e}"),
        other => panic!("{other:?}"),
    }
    let bad = client.post(format!("{root}/__mock/window")).body(r#"{"tokens":10,"style":"gemini"}"#).send().await.unwrap();
    assert_eq!(bad.status(), 400, "an unknown style is refused");
    let python = client.post(format!("{root}/__mock/window")).body(r#"{"tokens":10,"style":"llamacpp_python"}"#).send().await.unwrap();
    assert_eq!(python.status(), 200, "llama-cpp-python's style by its name");
    let cleared = client.post(format!("{root}/__mock/window")).body("null").send().await.unwrap();
    assert_eq!(cleared.status(), 200);
    let (_, result) = run(config(Api::Openai, &server), &ask("Say hello")).await;
    result.unwrap();
    let listed: Vec<Value> = client.get(format!("{root}/__mock/requests")).send().await.unwrap().json().await.unwrap();
    let refused: Vec<&Value> = listed.iter().map(|r| &r["refused"]).collect();
    assert_eq!(refused, [&Value::Bool(true), &Value::Bool(false)]);
}

#[tokio::test]
async fn a_tokens_per_minute_rate_limit_is_a_rate_limit_and_is_retried() {
    let body = r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per minute (TPM): Limit 30000, Used 29000, Requested 5000. Please try again in 8s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
    for api in ALL {
        let server = MockServer::start().await.unwrap();
        let limited = MockReply::Status { status: 429, body: body.into(), retry_after: Some("0".into()) };
        for _ in 0..4 {
            server.push(limited.clone());
        }
        let (_, result) = run(config(api, &server), &ask("Say hello")).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind(), FailureKind::RateLimit, "{api:?}: {error:?}");
        assert!(!error.to_string().contains("context window"), "{error}");
        assert_eq!(server.requests().len(), 4, "{api:?}: the first try and three retries");

        server.push(limited);
        server.push(MockReply::text("later"));
        let (events, result) = run(config(api, &server), &ask("Say hello")).await;
        result.unwrap();
        assert_eq!(text_of(&events), "later");
    }
}

#[tokio::test]
async fn an_unrelated_400_is_a_provider_error_sent_once() {
    let body = r#"{"error":{"message":"Unknown parameter: 'frobnicate'.","type":"invalid_request_error","param":"frobnicate","code":"unknown_parameter"}}"#;
    for api in ALL {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Status { status: 400, body: body.into(), retry_after: None });
        let (_, result) = run(config(api, &server), &ask("Say hello")).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind(), FailureKind::Provider, "{api:?}: {error:?}");
        assert!(!error.to_string().contains("context window"), "{error}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn an_overflow_reported_mid_stream_is_an_overflow() {
    for api in ALL {
        for chunks in [vec![], vec!["Par".to_owned()]] {
            let server = MockServer::start().await.unwrap();
            let message = "This model's maximum context length is 8192 tokens.";
            server.push(MockReply::StreamError { chunks: chunks.clone(), code: "context_length_exceeded".into(), message: message.into() });
            let (events, result) = run(config(api, &server), &ask("Say hello")).await;
            assert_eq!(text_of(&events), chunks.concat());
            let error = result.unwrap_err();
            assert!(matches!(error, ProviderError::Reported { .. }), "{api:?}: {error:?}");
            assert_eq!(error.kind(), FailureKind::Overflow, "{api:?}: {error:?}");
            let text = error.to_string();
            assert!(text.starts_with(DID_NOT_FIT) && text.contains(message), "{text}");
            assert_eq!(server.requests().len(), 1, "{api:?}: an overflow is not retried");
        }
    }
    // Anthropic's own words in its `error` event.
    let server = MockServer::start().await.unwrap();
    let message = "prompt is too long: 201000 tokens > 200000 maximum";
    server.push(MockReply::StreamError { chunks: vec![], code: "invalid_request_error".into(), message: message.into() });
    let (_, result) = run(config(Api::Anthropic, &server), &ask("Say hello")).await;
    assert_eq!(result.unwrap_err().kind(), FailureKind::Overflow);
    // Another error in the stream is the provider's.
    server.push(MockReply::StreamError { chunks: vec![], code: "overloaded_error".into(), message: "Overloaded".into() });
    let (_, result) = run(config(Api::Anthropic, &server), &ask("Say hello")).await;
    assert_eq!(result.unwrap_err().kind(), FailureKind::Provider);
}

/// The whole way to the agent: the failed turn is recorded with the overflow in words, and the
/// run's failure is `Overflow`.
#[tokio::test]
async fn an_agent_run_against_a_full_window_fails_with_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let server = MockServer::start().await.unwrap();
    server.set_window(Some(MockWindow { tokens: 10, style: MockOverflow::Llamacpp }));
    let mut c = common::config(&server);
    c.max_retries = 3;
    let agent = common::agent_with(c, common::new_session(dir.path()), None);
    let result = agent.prompt("hello", RunOptions::default()).await.unwrap();
    assert_eq!(result.failure, Some(FailureKind::Overflow));
    let last = result.last_assistant().unwrap();
    assert_eq!(last.stop_reason, Some(StopReason::Error));
    let text = last.error_message.as_deref().unwrap_or_default();
    assert!(text.starts_with(DID_NOT_FIT) && text.contains("the request exceeds the available context size"), "{text}");
    assert_eq!(server.requests().len(), 1);
}

/// The probes among `requests`: those sent without streaming.
fn probes(requests: &[handoff_mock::RecordedRequest]) -> Vec<&handoff_mock::RecordedRequest> {
    requests.iter().filter(|r| r.body["stream"] == Value::Bool(false)).collect()
}

/// llama-cpp-python raises its overflow inside the stream: 200, then the stream breaks before
/// any event. The one probe without streaming gets its 400, which is the error then.
#[tokio::test]
async fn a_stream_torn_before_any_event_is_probed_once_and_the_probes_overflow_is_the_error() {
    let server = MockServer::start().await.unwrap();
    server.set_window(Some(MockWindow { tokens: 10, style: MockOverflow::LlamacppPython }));
    let mut c = config(Api::Openai, &server);
    c.max_tokens = 777;
    let (events, result) = run(c, &ask("Say hello")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind(), FailureKind::Overflow, "{error:?}");
    assert!(matches!(error, ProviderError::Http { status: 400, .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.starts_with(DID_NOT_FIT), "{text}");
    assert!(text.contains("This model's maximum context length is 10 tokens. However, you requested"), "{text}");
    assert!(text.contains("(the stream had ended before its first event; the same request without streaming got this answer)"), "{text}");
    assert!(text_of(&events).is_empty());

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the stream, then exactly one probe");
    let (streamed, probe) = (&requests[0], &requests[1]);
    assert_eq!(streamed.body["stream"], true);
    assert_eq!(streamed.body["max_tokens"], 777);
    assert!(streamed.body.get("stream_options").is_some());
    assert_eq!(probe.path, streamed.path);
    assert_eq!(probe.body["stream"], false);
    assert_eq!(probe.body["max_tokens"], 1);
    assert!(probe.body.get("stream_options").is_none(), "{}", probe.body);
    assert_eq!(probe.body["messages"], streamed.body["messages"], "the same conversation");
    assert_eq!(probe.header("accept"), Some("application/json"));
    assert!(requests.iter().all(|r| r.refused));
    // llama-cpp-python's words count the completion asked for: the probe's one token.
    assert!(text.contains("(") && text.contains(" in the messages, 1 in the completion)"), "{text}");
}

/// A server that takes the probe took the request: no overflow, the torn stream's error stays.
#[tokio::test]
async fn a_stream_torn_before_any_event_whose_probe_is_answered_stays_a_network_error() {
    let server = MockServer::start().await.unwrap();
    server.push(MockReply::Torn { chunks: vec![] });
    server.push(MockReply::text("the probe's reply"));
    let (events, result) = run(config(Api::Openai, &server), &ask("Say hello")).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ProviderError::Stream { .. }), "{error:?}");
    assert_eq!(error.kind(), FailureKind::Network);
    assert!(error.to_string().contains("connection closed before the reply finished"), "{error}");
    assert!(text_of(&events).is_empty(), "the probe's reply is never shown");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(probes(&requests).len(), 1);
    assert_eq!(requests[1].body["max_tokens"], 1);

    // A probe answered with a server error of no overflow is the error, as any HTTP error is.
    server.push(MockReply::Torn { chunks: vec![] });
    server.push(MockReply::Status { status: 400, body: r#"{"error":{"message":"Unknown parameter: 'frobnicate'.","code":"unknown_parameter"}}"#.into(), retry_after: None });
    let (_, result) = run(config(Api::Openai, &server), &ask("Say hello")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind(), FailureKind::Provider, "{error:?}");
    assert!(error.to_string().contains("Unknown parameter"), "{error}");
    assert_eq!(server.requests().len(), 4, "one probe, not retried");
}

/// Once part of the reply arrived the server took the request: never probed, whatever broke.
#[tokio::test]
async fn a_stream_that_broke_after_an_event_or_timed_out_is_never_probed() {
    for api in ALL {
        let server = MockServer::start().await.unwrap();
        server.push(MockReply::Torn { chunks: vec!["Par".into()] });
        let (events, result) = run(config(api, &server), &ask("Say hello")).await;
        assert_eq!(text_of(&events), "Par");
        assert_eq!(result.unwrap_err().kind(), FailureKind::Network, "{api:?}");
        assert_eq!(server.requests().len(), 1, "{api:?}: no probe after a delta");
    }
    // A stall before any event is a timeout: retried, never probed.
    let server = MockServer::start().await.unwrap();
    for _ in 0..2 {
        server.push(MockReply::Stall { chunks: vec![] });
    }
    let mut c = config(Api::Openai, &server);
    c.idle_timeout = Duration::from_millis(200);
    c.max_retries = 1;
    let (_, result) = run(c, &ask("Say hello")).await;
    assert_eq!(result.unwrap_err().kind(), FailureKind::Timeout);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the try and its retry");
    assert!(probes(&requests).is_empty());

    // Aborted before any event: never probed.
    server.push(MockReply::Stall { chunks: vec![] });
    let provider = handoff_nvim::core::provider::Provider::new(config(Api::Openai, &server));
    let cancel = tokio_util::sync::CancellationToken::new();
    let canceller = cancel.clone();
    let stalled = server.clone();
    tokio::spawn(async move {
        // Cancelled once the stalled request is in (before any event).
        assert!(stalled.wait_for_requests(3, Duration::from_secs(20)).await);
        canceller.cancel();
    });
    let result = provider.stream(&ask("Say hello"), &cancel, &mut |_| {}).await;
    assert!(matches!(result, Err(ProviderError::Aborted)), "{result:?}");
    // A probe is made inside `stream`, before it returns (see `Provider::stream`): none now
    // means none at all.
    assert_eq!(server.requests().len(), 3, "no probe after an abort");
}

#[tokio::test]
async fn the_window_an_overflow_error_names_is_the_window_from_then_on() {
    use handoff_nvim::core::provider::{Provider, Source};
    let styles = [
        (MockOverflow::Openai, Api::Openai),
        (MockOverflow::Anthropic, Api::Anthropic),
        (MockOverflow::Llamacpp, Api::Openai),
        (MockOverflow::LlamacppPython, Api::Openai),
    ];
    for (style, api) in styles {
        let server = MockServer::start().await.unwrap();
        server.set_window(Some(MockWindow { tokens: 300, style }));
        let provider = Provider::new(config(api, &server));
        let configured = provider.current_config().context_window;
        let cancel = tokio_util::sync::CancellationToken::new();
        let mut events = Vec::new();
        let big = "word ".repeat(2_000);
        let result = provider.stream(&ask(&big), &cancel, &mut |e| events.push(e)).await;
        assert_eq!(result.unwrap_err().kind(), FailureKind::Overflow, "{style:?}");
        assert_eq!(provider.current_config().context_window, 300, "{style:?}: was {configured}");
        assert_eq!(provider.clone().current_config().context_window, 300, "{style:?}: clones share it");
        assert_eq!((provider.model_info().context_window, provider.model_info().source), (Some(300), Source::Refused));
        let notice: Vec<&String> = events.iter().filter_map(|e| if let StreamEvent::Notice(n) = e { Some(n) } else { None }).collect();
        assert_eq!(notice.len(), 1, "{style:?}: said once: {events:?}");
        assert!(notice[0].contains(&format!("context window is 300 tokens, not {configured}")), "{notice:?}");
    }
    // A 413 with no number leaves the window as it was.
    let server = MockServer::start().await.unwrap();
    server.set_window(Some(MockWindow { tokens: 300, style: MockOverflow::Bare413 }));
    let provider = Provider::new(config(Api::Openai, &server));
    let cancel = tokio_util::sync::CancellationToken::new();
    let _ = provider.stream(&ask(&"word ".repeat(2_000)), &cancel, &mut |_| {}).await;
    assert_eq!(provider.current_config().context_window, 128_000);
}
