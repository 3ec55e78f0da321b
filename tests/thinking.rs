//! Thinking levels that reach the model, against the loopback mock over both wire formats: the
//! fields each level puts on the request (none when off), a server that refuses
//! `reasoning_effort`, thinking stored as pi stores it (signed, redacted, an OpenAI-compatible
//! server's reasoning field) and sent back from the session file, the level recorded as pi
//! records it, and the handoff asking with the session's level.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{entry_lines, new_session, DOCUMENT};
use handoff_mock::{MockReply, MockServer, MockToolCall};
use handoff_nvim::core::agent::{AgentConfig, AgentEvent, AgentSession, Level, RunOptions};
use handoff_nvim::core::controller::{Controller, FrontEndTexts};
use handoff_nvim::core::handoff::HandoffOutcome;
use handoff_nvim::core::message::{Message, StopReason};
use handoff_nvim::core::provider::{Api, ProviderConfig, ThinkingLevel};
use handoff_nvim::core::session::SessionManager;
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(20);
/// Every wire format.
const ALL: [Api; 3] = [Api::Openai, Api::OpenaiResponses, Api::Anthropic];

/// The mock's provider for `api`; OpenAI-compatible with `reasoning_effort` switched on.
fn provider(server: &MockServer, api: Api) -> ProviderConfig {
    let mut c = common::config(server);
    c.api = api;
    if matches!(api, Api::Openai | Api::OpenaiResponses) {
        c.reasoning_effort = Some(true);
    }
    c
}

/// An agent on a new session whose level is `level` (recorded first, as pi starts a session).
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

fn budget(level: ThinkingLevel) -> u64 {
    match level {
        ThinkingLevel::Off => 0,
        ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium => 8192,
        ThinkingLevel::High => 16384,
    }
}

/// The thinking fields of a request body (everything that depends on the level).
fn thinking_fields(body: &Value) -> Value {
    json!({
        "thinking": body.get("thinking"),
        "reasoning_effort": body.get("reasoning_effort"),
        "max_tokens": body.get("max_tokens"),
        "temperature": body.get("temperature"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_level_puts_its_fields_on_the_request_and_off_puts_none() {
    for api in ALL {
        for level in ThinkingLevel::ALL {
            let server = MockServer::start().await.unwrap();
            let dir = tempfile::tempdir().unwrap();
            let agent = agent_at(provider(&server, api), dir.path(), level);
            server.push(MockReply::text("ok"));
            prompt(&agent, "think about it").await;
            let body = server.requests()[0].body.clone();
            if api == Api::OpenaiResponses {
                let reasoning = level.is_on().then(|| json!({ "effort": level.as_str(), "summary": "auto" }));
                assert_eq!(body.get("reasoning").cloned(), reasoning, "{level}");
                assert_eq!(body.get("include").is_some(), level.is_on(), "{level}");
                assert_eq!(body["max_output_tokens"], 4096);
            }
            let want = match (api, level) {
                // Its fields are checked above: none of the others'.
                (Api::OpenaiResponses, _) => json!({ "thinking": null, "reasoning_effort": null, "max_tokens": null, "temperature": null }),
                (_, ThinkingLevel::Off) => json!({ "thinking": null, "reasoning_effort": null, "max_tokens": 4096, "temperature": null }),
                (Api::Anthropic, _) => json!({
                    "thinking": { "type": "enabled", "budget_tokens": budget(level) },
                    "reasoning_effort": null,
                    // The budget comes on top of the room for the answer.
                    "max_tokens": 4096 + budget(level),
                    "temperature": null,
                }),
                (Api::Openai, _) => json!({ "thinking": null, "reasoning_effort": level.as_str(), "max_tokens": 4096, "temperature": null }),
            };
            assert_eq!(thinking_fields(&body), want, "{api:?} {level}");
            // The session recorded the level as pi does.
            let file = agent.session().path().to_path_buf();
            agent.session().flush().unwrap();
            let entries = entry_lines(&file);
            assert_eq!(entries[1]["type"], "thinking_level_change");
            assert_eq!(entries[1]["thinkingLevel"], level.as_str());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_switch_gets_no_reasoning_effort() {
    let server = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A local OpenAI-compatible server, nothing configured: the field stays home.
    let agent = agent_at(common::config(&server), dir.path(), ThinkingLevel::High);
    server.push(MockReply::text("ok"));
    prompt(&agent, "hi").await;
    assert!(server.requests()[0].body.get("reasoning_effort").is_none(), "{}", server.requests()[0].body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_reasoning_effort_is_asked_again_without_it_and_the_user_is_told_once() {
    let server = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_at(provider(&server, Api::Openai), dir.path(), ThinkingLevel::Medium);
    let mut events = agent.subscribe();
    server.push(MockReply::Status {
        status: 400,
        body: json!({ "error": { "message": "Unrecognized request argument supplied: reasoning_effort", "type": "invalid_request_error" } }).to_string(),
        retry_after: None,
    });
    server.push(MockReply::text("First answer."));
    server.push(MockReply::text("Second answer."));
    prompt(&agent, "one").await;
    prompt(&agent, "two").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the refused request, its retry, the next prompt");
    assert_eq!(requests[0].body["reasoning_effort"], "medium");
    assert!(requests[1].body.get("reasoning_effort").is_none(), "{}", requests[1].body);
    assert!(requests[2].body.get("reasoning_effort").is_none(), "{}", requests[2].body);
    // The reply came from the retry, and the session holds no failed turn.
    let texts: Vec<String> = agent.session().build_session_context().messages.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["one", "First answer.", "two", "Second answer."]);
    let mut notices = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let AgentEvent::Notice(n) = event {
            notices.push(n);
        }
    }
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].level, Level::Warn);
    assert!(notices[0].message.contains("reasoning_effort"), "{}", notices[0].message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_400_is_an_error_and_asks_nothing_again() {
    let server = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_at(provider(&server, Api::Openai), dir.path(), ThinkingLevel::Low);
    server.push(MockReply::Status { status: 400, body: json!({ "error": { "message": "context too long" } }).to_string(), retry_after: None });
    let result = agent.prompt("hi", RunOptions::default()).await.unwrap();
    assert_eq!(result.last_assistant().unwrap().stop_reason, Some(StopReason::Error));
    assert_eq!(server.requests().len(), 1);
    server.push(MockReply::text("ok"));
    prompt(&agent, "again").await;
    assert_eq!(server.requests()[1].body["reasoning_effort"], "low", "still sent");
}

/// Anthropic's reply with a redacted block, signed thinking and a tool call.
fn signed_reply_with_a_call() -> MockReply {
    MockReply::Reasoning {
        thinking: vec!["Let me ".into(), "look.".into()],
        signature: Some("c2lnLW9uZQ==".into()),
        redacted: Some("RW5jcnlwdGVk".into()),
        field: None,
        chunks: Vec::new(),
        calls: vec![MockToolCall::new("read", &json!({ "path": "nothing.txt" }), 2).with_id("toolu_1")],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_signed_and_redacted_thinking_is_stored_as_pi_stores_it_and_sent_back_from_the_file() {
    let server = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_at(provider(&server, Api::Anthropic), dir.path(), ThinkingLevel::High);
    server.push(signed_reply_with_a_call());
    server.push(MockReply::Reasoning {
        thinking: vec!["Nothing there.".into()],
        signature: Some("c2lnLXR3bw==".into()),
        redacted: None,
        field: None,
        chunks: vec!["The file does not exist.".into()],
        calls: Vec::new(),
    });
    prompt(&agent, "read nothing.txt").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // With the tool's result, the thinking goes back as it came, before the call.
    let turn = json!([
        { "type": "redacted_thinking", "data": "RW5jcnlwdGVk" },
        { "type": "thinking", "thinking": "Let me look.", "signature": "c2lnLW9uZQ==" },
        { "type": "tool_use", "id": "toolu_1", "name": "read", "input": { "path": "nothing.txt" } },
    ]);
    assert_eq!(requests[1].body["messages"][1]["role"], "assistant");
    assert_eq!(requests[1].body["messages"][1]["content"], turn);
    assert_eq!(requests[1].body["thinking"]["budget_tokens"], 16384);

    // On disk, pi's shapes: thinking blocks with `thinkingSignature`, the redacted one marked.
    let file = agent.session().path().to_path_buf();
    agent.session().flush().unwrap();
    let assistants: Vec<Value> = entry_lines(&file)
        .into_iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .map(|e| e["message"]["content"].clone())
        .collect();
    assert_eq!(
        assistants[0],
        json!([
            { "type": "thinking", "thinking": "[Reasoning redacted]", "thinkingSignature": "RW5jcnlwdGVk", "redacted": true },
            { "type": "thinking", "thinking": "Let me look.", "thinkingSignature": "c2lnLW9uZQ==" },
            { "type": "toolCall", "id": "toolu_1", "name": "read", "arguments": { "path": "nothing.txt" } },
        ])
    );
    assert_eq!(
        assistants[1],
        json!([
            { "type": "thinking", "thinking": "Nothing there.", "thinkingSignature": "c2lnLXR3bw==" },
            { "type": "text", "text": "The file does not exist." },
        ])
    );

    // Resumed from the file, by an agent whose own default is off: the session's level, and
    // its thinking sent back.
    drop(agent);
    let session = SessionManager::open(&file, &dir.path().join("sessions")).unwrap();
    let resumed = Arc::new(AgentSession::new(AgentConfig::new(provider(&server, Api::Anthropic)), session));
    assert_eq!(resumed.thinking_level(), ThinkingLevel::High);
    server.push(MockReply::text("Still nothing."));
    prompt(&resumed, "and now?").await;
    let body = &server.requests()[2].body;
    assert_eq!(body["thinking"]["budget_tokens"], 16384);
    assert_eq!(body["messages"][1]["content"], turn);
    assert_eq!(
        body["messages"][3]["content"][0],
        json!({ "type": "thinking", "thinking": "Nothing there.", "signature": "c2lnLXR3bw==" })
    );

    // Another model gets the thinking as text, and none of the redacted thinking (pi's rule).
    let mut other = provider(&server, Api::Anthropic);
    other.model = "another-model".into();
    resumed.set_model(other).unwrap();
    server.push(MockReply::text("Hello."));
    prompt(&resumed, "other model").await;
    let body = &server.requests()[3].body;
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            { "type": "text", "text": "Let me look." },
            { "type": "tool_use", "id": "toolu_1", "name": "read", "input": { "path": "nothing.txt" } },
        ])
    );
    assert!(!body.to_string().contains("RW5jcnlwdGVk"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_compatible_reasoning_is_stored_with_its_field_and_sent_back_in_it() {
    for field in ["reasoning_content", "reasoning", "reasoning_text"] {
        let server = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let agent = agent_at(common::config(&server), dir.path(), ThinkingLevel::Off);
        server.push(MockReply::Reasoning {
            thinking: vec!["Two plus ".into(), "two.".into()],
            signature: None,
            redacted: None,
            field: Some(field.into()),
            chunks: vec!["Four.".into()],
            calls: Vec::new(),
        });
        server.push(MockReply::text("Five."));
        prompt(&agent, "2+2?").await;
        let file = agent.session().path().to_path_buf();
        agent.session().flush().unwrap();
        let reply = entry_lines(&file).into_iter().rev().find(|e| e["message"]["role"] == "assistant").unwrap();
        assert_eq!(
            reply["message"]["content"],
            json!([{ "type": "thinking", "thinking": "Two plus two.", "thinkingSignature": field }, { "type": "text", "text": "Four." }])
        );
        prompt(&agent, "and 2+3?").await;
        // After the system prompt and the question.
        let sent = &server.requests()[1].body["messages"][2];
        assert_eq!(sent, &json!({ "role": "assistant", "content": "Four.", field: "Two plus two." }), "{field}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_recorded_once_as_pi_records_it_and_a_resumed_session_brings_its_own_level() {
    let server = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_at(provider(&server, Api::Anthropic), dir.path(), ThinkingLevel::Low);
    let low_file = agent.session().path().to_path_buf();
    assert!(agent.set_thinking_level(ThinkingLevel::Medium).unwrap());
    assert!(!agent.set_thinking_level(ThinkingLevel::Medium).unwrap(), "no change, no entry");
    server.push(MockReply::text("ok"));
    prompt(&agent, "hi").await;
    assert_eq!(server.requests()[0].body["thinking"]["budget_tokens"], 8192);
    agent.session().flush().unwrap();
    let levels: Vec<Value> = entry_lines(&low_file)
        .into_iter()
        .filter(|e| e["type"] == "thinking_level_change")
        .map(|e| e["thinkingLevel"].clone())
        .collect();
    assert_eq!(levels, [json!("low"), json!("medium")]);
    // `/new` keeps the level in force and records it.
    agent.new_session().unwrap();
    assert_eq!(agent.session().context_settings().1.as_deref(), Some("medium"));
    // Resuming a session brings its last recorded level; a file without one keeps ours.
    let other = {
        let mut s = new_session(dir.path());
        s.append_model_change("mock", "mock-model").unwrap();
        s.append_thinking_level_change("high").unwrap();
        s.append_thinking_level_change("minimal").unwrap();
        s.append_message(&Message::user("earlier")).unwrap();
        s.flush().unwrap();
        s.path().to_path_buf()
    };
    let open = |path: &Path| SessionManager::open(path, &dir.path().join("sessions")).unwrap();
    agent.resume(open(&other)).unwrap();
    assert_eq!(agent.thinking_level(), ThinkingLevel::Minimal);
    let bare = {
        let mut s = new_session(dir.path());
        s.append_model_change("mock", "mock-model").unwrap();
        s.append_message(&Message::user("earlier")).unwrap();
        s.flush().unwrap();
        s.path().to_path_buf()
    };
    agent.resume(open(&bare)).unwrap();
    assert_eq!(agent.thinking_level(), ThinkingLevel::Minimal);
    agent.resume(open(&low_file)).unwrap();
    assert_eq!(agent.thinking_level(), ThinkingLevel::Medium);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_asks_with_the_sessions_level_and_the_new_session_starts_at_it() {
    for api in ALL {
        let server = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let agent = agent_at(provider(&server, api), dir.path(), ThinkingLevel::Medium);
        server.push(MockReply::text("Sure."));
        prompt(&agent, "plan the parser").await;
        // The document may come after thinking: only its text is the document.
        server.push(MockReply::Reasoning {
            thinking: vec!["Summing up.".into()],
            signature: Some("c2ln".into()),
            redacted: None,
            field: None,
            chunks: vec![DOCUMENT.into()],
            calls: Vec::new(),
        });
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        let outcome = tokio::time::timeout(T, controller.handoff(Default::default())).await.unwrap();
        let HandoffOutcome::Done { document, session_file, .. } = outcome else { panic!("{api:?}: {outcome:?}") };
        assert_eq!(document, DOCUMENT);
        let body = &server.requests()[1].body;
        match api {
            Api::Anthropic => assert_eq!(body["thinking"], json!({ "type": "enabled", "budget_tokens": 8192 })),
            Api::Openai => assert_eq!(body["reasoning_effort"], "medium"),
            Api::OpenaiResponses => assert_eq!(body["reasoning"]["effort"], "medium"),
        }
        let entries = entry_lines(Path::new(&session_file));
        assert_eq!(entries[1]["type"], "thinking_level_change");
        assert_eq!(entries[1]["thinkingLevel"], "medium", "{api:?}");
        assert_eq!(agent.thinking_level(), ThinkingLevel::Medium);
        // The new session's first request asks at that level too.
        server.push(MockReply::text("Continuing."));
        prompt(&agent, "go on").await;
        let body = &server.requests()[2].body;
        match api {
            Api::Anthropic => assert_eq!(body["thinking"]["budget_tokens"], 8192),
            Api::Openai => assert_eq!(body["reasoning_effort"], "medium"),
            Api::OpenaiResponses => assert_eq!(body["reasoning"]["effort"], "medium"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_while_a_reply_runs_applies_from_the_next_prompt() {
    let server = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_at(provider(&server, Api::Anthropic), dir.path(), ThinkingLevel::Off);
    // A tool call streamed slowly, then the answer to its result.
    server.push(MockReply::ToolCalls {
        calls: vec![MockToolCall::new("read", &json!({ "path": "nothing.txt" }), 3).with_id("toolu_1")],
        text_before: Vec::new(),
        chunk_delay_ms: 150,
        stop: "tool_calls".into(),
        interleave: false,
    });
    server.push(MockReply::text("Nothing there."));
    let run = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.prompt("read it", RunOptions::default()).await })
    };
    assert!(server.wait_for_requests(1, T).await);
    assert!(agent.set_thinking_level(ThinkingLevel::High).unwrap());
    tokio::time::timeout(T, run).await.unwrap().unwrap().unwrap();
    // The tool loop kept the level it started with: Anthropic would refuse a tool-use turn
    // without thinking once thinking is on.
    assert_eq!(server.requests().len(), 2);
    assert!(server.requests()[1].body.get("thinking").is_none(), "{}", server.requests()[1].body);
    server.push(MockReply::text("ok"));
    prompt(&agent, "next").await;
    assert_eq!(server.requests()[2].body["thinking"]["budget_tokens"], 16384);
}
