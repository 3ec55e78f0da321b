//! Gemini through its OpenAI-compatible endpoint (`provider = "gemini"`), against the mock:
//! Gemini 3 signs its tool calls (`extra_content.google.thought_signature` in the Chat
//! Completions stream) and refuses the history back without the signatures. They are stored as
//! pi stores Gemini's (`thoughtSignature` on the `toolCall` block), sent back byte for byte to
//! the model that signed them and to no other, and pi 0.73.1 resumes the session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::entry_lines;
use common::pi::{pi_bin, pi_home_with, pi_resume};
use handoff_mock::{MockReply, MockServer, RecordedRequest};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::config::{ProviderKind, Settings};
use handoff_nvim::core::provider::ProviderConfig;
use handoff_nvim::core::session::SessionManager;
use serde_json::{json, Value};

/// The signature of the first call of the corpus stream (its second call is not signed, as
/// Gemini signs only the first of parallel calls).
const SIGNATURE: &str = "CmMBjz1rX0Ijb3Z2Jc7UdZ0m3cS9a+Xo5lIvb0J1k0VqYy8hZkXyT0qN7w3mJ2f4dPq1Lr9sT6uV5wX4yZ3a2b1c0d9e8f7g6h5i4j3k2l1m0n9o8p7q6r5s4t3u2v1w0x9y8z7A6B5C4D3E2F1G0H9I8J7K6L5M4N3O2P1Q0R9S8T7U6V5W4X3Y2Z1==";
const MODEL: &str = "gemini-3-pro-preview";

/// Gemini's stream of two parallel `read` calls (tests/fixtures/streams/chat/).
fn signed_calls() -> MockReply {
    let bytes = std::fs::read(common::fixtures_dir().join("streams/chat/gemini_thought_signatures.sse")).unwrap();
    MockReply::Raw { bytes, slices: Vec::new() }
}

/// The Gemini preset pointed at the mock, for `model`.
fn gemini(mock: &MockServer, model: &str) -> ProviderConfig {
    let settings = Settings {
        api: Some(ProviderKind::Gemini),
        base_url: Some(mock.openai_base_url()),
        model: Some(model.into()),
        ..Settings::default()
    };
    let mut config = settings.provider_config().unwrap();
    // The tests set no real service's variable: no key goes out.
    config.api_key_env = None;
    config.max_retries = 0;
    config
}

/// The `tool_calls` of the assistant messages of a Chat Completions request.
fn sent_calls(request: &RecordedRequest) -> Vec<Value> {
    let messages = request.body["messages"].as_array().unwrap();
    messages.iter().filter_map(|m| m["tool_calls"].as_array()).flatten().cloned().collect()
}

fn posts(mock: &MockServer) -> Vec<RecordedRequest> {
    mock.requests().into_iter().filter(|r| r.method == "POST").collect()
}

/// A project with the two files the calls read, and a session in it.
fn project(root: &Path) -> SessionManager {
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README.md"), "# Read me\n").unwrap();
    std::fs::write(project.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    SessionManager::create(&root.join("sessions"), &project, None).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_gets_its_call_signatures_back_byte_for_byte_and_another_model_none() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let session = project(dir.path());
    let path = session.path().to_path_buf();
    let agent = Arc::new(AgentSession::new(AgentConfig::new(gemini(&mock, MODEL)), session));
    mock.push(signed_calls());
    mock.push(MockReply::text("Both read."));
    agent.prompt("Read README.md and Cargo.toml.", RunOptions::default()).await.unwrap();

    // Stored as pi stores Gemini's: on the call it signed, and only there.
    let stored: Vec<Value> = entry_lines(&path)
        .into_iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(stored[0]["provider"], "google");
    let calls: Vec<&Value> = stored[0]["content"].as_array().unwrap().iter().filter(|b| b["type"] == "toolCall").collect();
    assert_eq!(calls[0]["thoughtSignature"], SIGNATURE);
    assert!(calls[1].get("thoughtSignature").is_none(), "{}", calls[1]);

    // The next request sends it back where Gemini wants it, the bytes as they came.
    let second = &posts(&mock)[1];
    let calls = sent_calls(second);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["extra_content"], json!({ "google": { "thought_signature": SIGNATURE } }));
    assert!(calls[1].get("extra_content").is_none(), "{}", calls[1]);
    let raw = String::from_utf8(second.raw.clone()).unwrap();
    assert!(raw.contains(&format!(r#""extra_content":{{"google":{{"thought_signature":"{SIGNATURE}"}}}}"#)), "{raw}");

    // Another model gets the calls, but no signature of this one's.
    agent.set_model(gemini(&mock, "gemini-2.5-flash")).unwrap();
    mock.push(MockReply::text("Another model."));
    agent.prompt("And now?", RunOptions::default()).await.unwrap();
    let third = &posts(&mock)[2];
    assert_eq!(third.body["model"], "gemini-2.5-flash");
    assert_eq!(sent_calls(third).len(), 2);
    let raw = String::from_utf8(third.raw.clone()).unwrap();
    assert!(!raw.contains("extra_content") && !raw.contains(SIGNATURE), "{raw}");
}

/// pi 0.73.1 resumes our Gemini session (pi's `google` provider pointed at the mock through
/// Chat Completions, as our preset speaks it): it reads the signed calls, sends the history on,
/// and we resume the file it appended to with the signature still going back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_our_gemini_session_with_its_signed_calls() {
    let Some(pi) = pi_bin() else { return };
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let session = project(root);
    let path = session.path().to_path_buf();
    let agent = Arc::new(AgentSession::new(AgentConfig::new(gemini(&mock, MODEL)), session));
    mock.push(signed_calls());
    mock.push(MockReply::text("Both read."));
    agent.prompt("Read README.md and Cargo.toml.", RunOptions::default()).await.unwrap();
    drop(agent);

    // pi's built-in `google` provider, its model defined for the mock's Chat Completions.
    pi_home_with(root, json!({ "google": {
        "baseUrl": mock.openai_base_url(), "api": "openai-completions", "apiKey": "x",
        "models": [{ "id": MODEL, "contextWindow": 1048576, "maxTokens": 8192, "reasoning": true }] } }));
    mock.push(MockReply::text("Pi goes on."));
    let mut c = pi_resume(&pi, root, &path, "google", MODEL, "What did they say?");
    let out = tokio::time::timeout(Duration::from_secs(60), c.output()).await.expect("pi hung").unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "pi failed:\nstdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("Pi goes on."), "{stdout}");
    let by_pi = &posts(&mock)[2];
    assert_eq!(by_pi.body["model"], MODEL);
    let ids: Vec<String> = sent_calls(by_pi).iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids, ["function-call-11845513526341432914", "function-call-11845513526341432915"]);

    // We resume the file pi appended to: the signature still goes back to Gemini.
    let session = SessionManager::open(&path, &root.join("sessions")).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    let agent = Arc::new(AgentSession::new(AgentConfig::new(gemini(&mock, MODEL)), session));
    mock.push(MockReply::text("Back here."));
    agent.prompt("One more.", RunOptions::default()).await.unwrap();
    let ours = &posts(&mock)[3];
    assert_eq!(sent_calls(ours)[0]["extra_content"], json!({ "google": { "thought_signature": SIGNATURE } }));
    let texts: Vec<String> = entry_lines(&path)
        .into_iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .map(|e| e["message"]["content"].to_string())
        .collect();
    assert!(texts.iter().any(|t| t.contains("Pi goes on.")), "{texts:?}");
}
