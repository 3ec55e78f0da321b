//! Replaying history by pi's rules (issue 25): a session pi 0.73.1 wrote
//! (`pimono-0.73.1-history.jsonl`, see `scripts/pi-history-fixture.py`: signed and redacted
//! thinking, a model switch, a turn aborted while streaming, one aborted mid tool call, a failed
//! one, a compaction) is resumed with one prompt by pi and by us, against the same mock, with the
//! same model: the same messages reach the model (roles, texts, thinking, tool calls and results
//! with their ids).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::pi::{pi_bin, pi_resume};
use handoff_mock::{MockReply, MockServer, RecordedRequest};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::provider::Api;
use handoff_nvim::core::session::SessionManager;
use serde_json::{json, Value};

const FIXTURE: &str = "pimono-0.73.1-history.jsonl";
const T: Duration = Duration::from_secs(60);

/// pi's home: provider `mock` speaking Anthropic's API, with both models of the fixture.
fn pi_home(root: &Path, origin: &str) {
    for d in ["home", "pi-agent", "project"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let models: Vec<Value> = ["mock-model", "mock-model-b"]
        .iter()
        .map(|id| json!({ "id": id, "contextWindow": 32000, "maxTokens": 4096, "reasoning": true }))
        .collect();
    let config = json!({ "providers": { "mock": { "baseUrl": origin, "api": "anthropic-messages", "apiKey": "x", "models": models } } });
    std::fs::write(root.join("pi-agent/models.json"), config.to_string()).unwrap();
}

/// The fixture as `name` in `dir`, its working directory the test's project folder (pi resumes
/// a session only where its folder exists).
fn copy_fixture(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let text = std::fs::read_to_string(common::fixtures_dir().join("pi-sessions").join(FIXTURE)).unwrap();
    std::fs::write(&path, text.replace("/home/dev/project", dir.join("project").to_str().unwrap())).unwrap();
    path
}

/// The conversation of an Anthropic body, block by block (consecutive messages of a role are
/// one message for us and several for pi: the blocks and their order are what the model reads).
fn blocks(request: &RecordedRequest) -> Vec<Value> {
    let mut out = Vec::new();
    for message in request.body["messages"].as_array().unwrap() {
        let role = &message["role"];
        let content = match &message["content"] {
            Value::String(s) => vec![json!({ "type": "text", "text": s })],
            Value::Array(blocks) => blocks.clone(),
            other => panic!("content {other}"),
        };
        for mut block in content {
            let map = block.as_object_mut().unwrap();
            map.remove("cache_control");
            // A result's text as a string or as blocks is the same text.
            if let Some(Value::Array(parts)) = map.get("content") {
                let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
                map.insert("content".into(), Value::String(text.join("\n")));
            }
            out.push(json!({ "role": role, "block": block }));
        }
    }
    out
}

async fn pi_resumes(pi: &Path, mock: &MockServer, root: &Path, session: &Path, model: &str) -> RecordedRequest {
    mock.push(MockReply::text("pi answers."));
    let mut c = pi_resume(pi, root, session, "mock", model, "One more question.");
    let out = tokio::time::timeout(T, c.output()).await.expect("pi hung").unwrap();
    assert_eq!(out.status.code(), Some(0), "pi failed: {}", String::from_utf8_lossy(&out.stderr));
    mock.requests().last().cloned().unwrap()
}

async fn we_resume(mock: &MockServer, root: &Path, session: &Path, model: &str) -> RecordedRequest {
    mock.push(MockReply::text("We answer."));
    let session = SessionManager::open(session, &root.join("sessions")).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    let mut provider = common::config(mock);
    provider.api = Api::Anthropic;
    provider.base_url = mock.anthropic_base_url();
    provider.model = model.into();
    let agent = Arc::new(AgentSession::new(AgentConfig::new(provider), session));
    agent.prompt("One more question.", RunOptions::default()).await.unwrap();
    mock.requests().last().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pi_session_with_failed_turns_a_model_switch_and_a_compaction_replays_as_pi_replays_it() {
    let Some(pi) = pi_bin() else { return };
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    pi_home(dir.path(), &format!("http://{}", mock.addr()));
    for model in ["mock-model-b", "mock-model"] {
        let theirs = pi_resumes(&pi, &mock, dir.path(), &copy_fixture(dir.path(), &format!("pi-{model}.jsonl")), model).await;
        let ours = we_resume(&mock, dir.path(), &copy_fixture(dir.path(), &format!("ours-{model}.jsonl")), model).await;
        let (theirs, ours) = (blocks(&theirs), blocks(&ours));
        assert_eq!(ours, theirs, "{model}: the same conversation reaches the model");

        // What that conversation is: no aborted or failed turn (nor its call), thinking as the
        // model spoken to may read it, the summary, then the turns kept after it.
        let texts: Vec<String> = ours.iter().map(|b| format!("{} {}", b["role"].as_str().unwrap(), describe(&b["block"]))).collect();
        let first_reply = if model == "mock-model" {
            vec![
                "assistant redacted_thinking cmVkLWE=",
                "assistant thinking I should read it.",
                "assistant text Reading a.txt.",
                "assistant tool_use toolu_read_1",
                "user tool_result toolu_read_1",
                "assistant thinking It says alpha.",
            ]
        } else {
            vec![
                "assistant text I should read it.",
                "assistant text Reading a.txt.",
                "assistant tool_use toolu_read_1",
                "user tool_result toolu_read_1",
                "assistant text It says alpha.",
            ]
        };
        let expected: Vec<String> = ["user text The conversation history before this point was compacted into the following summary", "user text What is in a.txt?"]
            .into_iter()
            .chain(first_reply)
            .chain([
                "assistant text a.txt says alpha.",
                "user text Write a long story.",
                "user text List /tmp.",
                "user text Try again.",
                "user text Just say something.",
                "assistant text Here it is.",
                "user text Go on after the compaction.",
                "assistant text After the summary.",
                "user text One more question.",
            ])
            .map(String::from)
            .collect();
        assert_eq!(texts, expected, "{model}");
    }
}

/// A block in a line: its type and its text (the first line), id or data.
fn describe(block: &Value) -> String {
    let kind = block["type"].as_str().unwrap();
    let what = match kind {
        "text" => block["text"].as_str().unwrap().lines().next().unwrap_or_default().to_string(),
        "thinking" => block["thinking"].as_str().unwrap().to_string(),
        "redacted_thinking" => block["data"].as_str().unwrap().to_string(),
        "tool_use" => block["id"].as_str().unwrap().to_string(),
        "tool_result" => block["tool_use_id"].as_str().unwrap().to_string(),
        other => other.to_string(),
    };
    let what = what.split(':').next().unwrap_or_default().to_string();
    format!("{kind} {what}")
}
