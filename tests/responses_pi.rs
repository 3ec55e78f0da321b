//! pi 0.73.1 and our CLI on one Responses session (`openai-responses`), against the mock: pi
//! resumes a session we wrote and sends our reasoning item, message ids and calls back as it
//! would its own; we resume the file pi appended to and send pi's reasoning item back byte for
//! byte. pi is `$PI_BIN` or the repository's `.cache/pi` (see tests/common/pi.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::entry_lines;
use common::pi::{pi_bin, pi_env, pi_home};
use handoff_mock::{MockReply, MockServer, MockToolCall};
use handoff_nvim::core::session::SessionManager;
use serde_json::{json, Value};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
const T: Duration = Duration::from_secs(60);

/// The reasoning item the mock finishes as the first item of reply `n`.
fn mock_item(n: usize, thinking: &str, encrypted: &str) -> String {
    json!({ "id": format!("rs_mock_{n}_0"), "type": "reasoning",
            "summary": [{ "type": "summary_text", "text": thinking }], "encrypted_content": encrypted })
    .to_string()
}

fn reasoning(thinking: &str, encrypted: &str, text: &str, calls: Vec<MockToolCall>) -> MockReply {
    MockReply::Reasoning {
        thinking: vec![thinking.into()],
        signature: Some(encrypted.into()),
        redacted: None,
        field: None,
        chunks: vec![text.into()],
        calls,
    }
}

fn items(body: &Value, kind: &str) -> Vec<Value> {
    body["input"].as_array().unwrap().iter().filter(|i| i["type"] == kind).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_our_responses_session_with_our_reasoning_items_and_we_resume_pis() {
    let Some(pi) = pi_bin() else { return };
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("project")).unwrap();
    pi_home(root, "openai-responses", &mock.openai_base_url());
    // A reasoning model: pi sends the thinking level and asks for encrypted reasoning.
    let models = json!({ "providers": { "mock": {
        "baseUrl": mock.openai_base_url(), "api": "openai-responses", "apiKey": "x",
        "models": [{ "id": "mock-model", "contextWindow": 32000, "maxTokens": 4096, "reasoning": true }] } } });
    std::fs::write(root.join("pi-agent/models.json"), models.to_string()).unwrap();
    let command = |program: &Path| {
        let mut c = common::clean_command_async(program);
        pi_env(&mut c, root)
            .current_dir(root.join("project"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    };
    let ours = |args: &[&str]| {
        let mut c = command(Path::new(BIN));
        c.args(["--api", "openai-responses", "--provider-name", "mock", "--model", "mock-model"])
            .args(["--thinking", "high", "--reasoning-effort", "true"])
            .arg("--base-url")
            .arg(mock.openai_base_url())
            .arg("--session-dir")
            .arg(root.join("sessions"))
            .args(args);
        c
    };
    let run = |mut c: Command| async move {
        let out = tokio::time::timeout(T, c.output()).await.expect("hung").unwrap();
        let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
        assert_eq!(out.status.code(), Some(0), "failed:\nstdout: {stdout}\nstderr: {stderr}");
        (stdout, stderr)
    };

    // Ours: reasoning, a call, its result, reasoning and the answer.
    let call = MockToolCall::new("read", &json!({ "path": "missing.txt" }), 2).with_id("call_a");
    mock.push(reasoning("Look first.", "gAAAA-ours-1", "Reading.", vec![call]));
    mock.push(reasoning("Not there.", "gAAAA-ours-2", "No such file.", Vec::new()));
    let (_, stderr) = run(ours(&["prompt", "--new", "read missing.txt"])).await;
    let file = PathBuf::from(stderr.lines().next().unwrap());
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(mock.requests()[0].path, "/v1/responses");

    // pi resumes it: our items as the server sent them, our message ids, our call.
    mock.push(reasoning("Pi ponders.", "gAAAA-pi-3", "Pi says five.", Vec::new()));
    let mut c = command(&pi);
    c.arg("--session")
        .arg(&file)
        .args(["--provider", "mock", "--model", "mock-model"])
        .args(["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes"])
        .args(["--offline", "-p", "and 2+3?"]);
    let (out, _) = run(c).await;
    assert!(out.contains("Pi says five."), "{out}");
    let sent = mock.requests()[2].clone();
    assert_eq!(sent.path, "/v1/responses");
    assert_eq!(sent.body["reasoning"], json!({ "effort": "high", "summary": "auto" }), "pi thinks at our level");
    let raw = String::from_utf8(sent.raw.clone()).unwrap();
    for item in [mock_item(1, "Look first.", "gAAAA-ours-1"), mock_item(2, "Not there.", "gAAAA-ours-2")] {
        assert!(raw.contains(&item), "pi did not send {item} back:\n{raw}");
    }
    let messages = items(&sent.body, "message");
    assert_eq!(messages[0]["id"], "msg_mock_1_1");
    assert_eq!(messages[0]["content"][0]["text"], "Reading.");
    assert_eq!(items(&sent.body, "function_call")[0]["id"], "fc_mock_1_0");
    assert_eq!(items(&sent.body, "function_call")[0]["call_id"], "call_a");
    assert_eq!(items(&sent.body, "function_call_output")[0]["call_id"], "call_a");

    // We resume pi's file: its reasoning item back byte for byte, its message id.
    let session = SessionManager::open(&file, &root.join("sessions")).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    mock.push(MockReply::text("Back here."));
    run(ours(&["prompt", "--session", file.to_str().unwrap(), "and 3+3?"])).await;
    let sent = mock.requests()[3].clone();
    let raw = String::from_utf8(sent.raw.clone()).unwrap();
    let pis = mock_item(3, "Pi ponders.", "gAAAA-pi-3");
    assert!(raw.contains(&pis), "we did not send pi's item back:\n{raw}");
    assert_eq!(items(&sent.body, "reasoning").len(), 3);
    assert!(items(&sent.body, "message").iter().any(|m| m["id"] == "msg_mock_3_1" && m["content"][0]["text"] == "Pi says five."));

    // Both wrote the same shapes.
    let assistants: Vec<Value> =
        entry_lines(&file).into_iter().filter(|e| e["message"]["role"] == "assistant").map(|e| e["message"].clone()).collect();
    assert_eq!(assistants.len(), 4);
    for a in &assistants[..3] {
        assert_eq!(a["api"], "openai-responses");
        let thinking = &a["content"][0];
        assert_eq!(thinking["type"], "thinking");
        let item: Value = serde_json::from_str(thinking["thinkingSignature"].as_str().unwrap()).unwrap();
        assert_eq!(item["type"], "reasoning");
        let text = a["content"].as_array().unwrap().iter().find(|b| b["type"] == "text").unwrap();
        assert!(text["textSignature"].as_str().unwrap().starts_with("{\"v\":1,\"id\":\"msg_mock_"), "{text}");
    }
    assert_eq!(assistants[2]["content"][0]["thinking"], "Pi ponders.");
    assert_eq!(assistants[0]["content"][2]["id"], "call_a|fc_mock_1_0");
}
