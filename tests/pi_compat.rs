//! The real client (issue 2, "Real client"): pi 0.73.1 resumes sessions written by our CLI, against
//! the mock, and the mock sees our messages in pi's request; our reader then accepts the file pi
//! appended to.
//!
//! pi is `$PI_BIN`, or else `<repo>/.cache/pi/node_modules/.bin/pi` (`scripts/deps.sh` installs it with
//! `npm install --prefix .cache/pi @mariozechner/pi-coding-agent@0.73.1`). A missing pi fails
//! the test; `HANDOFF_SKIP_PI=1` turns that into a loud skip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::pi::{pi_bin as pi, PiAndOurs};
use common::{entry_lines, wire_messages, DOCUMENT};
use handoff_mock::{MockReply, MockServer, RecordedRequest};
use handoff_nvim::core::session::SessionManager;
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
const T: Duration = Duration::from_secs(60);

fn last_request(mock: &MockServer) -> RecordedRequest {
    mock.requests().last().cloned().unwrap()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_0_73_1_is_the_installed_client() {
    let Some(pi) = pi() else { return };
    let out = tokio::time::timeout(T, Command::new(&pi).arg("--version").output()).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("0.73.1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_written_by_our_cli_and_the_mock_sees_our_messages() {
    let Some(pi) = pi() else { return };
    let env = PiAndOurs::new().await;
    env.mock.push(MockReply::text("The answer is four."));
    let (stdout, stderr) = env.ours(&["prompt", "--new", "What is 2+2?"]).await;
    assert_eq!(stdout.trim(), "The answer is four.");
    let file = PathBuf::from(stderr.lines().next().unwrap());
    let ours_bytes = std::fs::read(&file).unwrap();

    env.mock.push(MockReply::text("Pi continues here."));
    let out = env.pi(&pi, &file, "next question").await;
    assert!(out.contains("Pi continues here."), "{out}");
    // pi sent our conversation, then its prompt.
    assert_eq!(env.mock.requests().len(), 2);
    assert_eq!(
        wire_messages(&last_request(&env.mock)),
        pairs(&[("user", "What is 2+2?"), ("assistant", "The answer is four."), ("user", "next question")])
    );
    assert_eq!(last_request(&env.mock).body["model"], "mock-model");

    // pi appended to our file without touching our lines, and we read its lines back.
    let after = std::fs::read(&file).unwrap();
    assert!(after.starts_with(&ours_bytes), "pi rewrote our lines");
    let session = SessionManager::open(&file, &env.dir.path().join("sessions")).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    let texts: Vec<String> = session.build_session_context().messages.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["What is 2+2?", "The answer is four.", "next question", "Pi continues here."]);

    // And our CLI continues the file pi wrote, sending pi's messages on.
    env.mock.push(MockReply::text("Back in handoff.nvim."));
    env.ours(&["prompt", "--session", file.to_str().unwrap(), "third question"]).await;
    assert_eq!(
        wire_messages(&last_request(&env.mock)),
        pairs(&[
            ("user", "What is 2+2?"),
            ("assistant", "The answer is four."),
            ("user", "next question"),
            ("assistant", "Pi continues here."),
            ("user", "third question"),
        ])
    );
    assert_eq!(entry_lines(&file).iter().filter(|e| e["type"] == "message").count(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_handoff_session_and_sends_the_document_first() {
    let Some(pi) = pi() else { return };
    let env = PiAndOurs::new().await;
    env.mock.push(MockReply::text("Sure."));
    let (_, stderr) = env.ours(&["prompt", "--new", "Plan the parser"]).await;
    let old = PathBuf::from(stderr.lines().next().unwrap());
    env.mock.push(MockReply::text(DOCUMENT));
    let (stdout, _) = env.ours(&["handoff", old.to_str().unwrap()]).await;
    let new = PathBuf::from(stdout.trim());
    assert!(new.is_file());

    env.mock.push(MockReply::text("Continuing from the handoff."));
    env.pi(&pi, &new, "go on").await;
    let sent = wire_messages(&last_request(&env.mock));
    let wrapped = format!(
        "<handoff-context>\n{DOCUMENT}\n</handoff-context>\n\nThe above is a handoff document from a previous session. Use this context to continue the work seamlessly."
    );
    assert_eq!(sent, [("user".to_string(), wrapped), ("user".to_string(), "go on".to_string())]);
    let session = SessionManager::open(&new, &env.dir.path().join("sessions")).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    assert_eq!(session.header().parent_session.as_deref(), Some(old.to_str().unwrap()));
    assert_eq!(session.build_session_context().messages.len(), 3);
}

/// The session handed off holds the handoff's request, marked as one (`handoffRequest`): pi
/// resumes it, sends the request as the plain user message it is (no mark reaches the model),
/// and leaves the mark in the file, where the chat reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_whose_handoff_request_is_marked() {
    let Some(pi) = pi() else { return };
    let env = PiAndOurs::new().await;
    env.mock.push(MockReply::text("Sure."));
    let (_, stderr) = env.ours(&["prompt", "--new", "Plan the parser"]).await;
    let old = PathBuf::from(stderr.lines().next().unwrap());
    env.mock.push(MockReply::text(DOCUMENT));
    env.ours(&["handoff", old.to_str().unwrap(), "--focus", "the tests"]).await;
    let marked = |path: &Path| {
        entry_lines(path).into_iter().filter(|e| e["message"].get("handoffRequest").is_some()).collect::<Vec<_>>()
    };
    let before = marked(&old);
    assert_eq!(before.len(), 1, "the request is marked where it is written");
    assert_eq!(before[0]["message"]["handoffRequest"]["focus"], "the tests");

    env.mock.push(MockReply::text("Back in the old session."));
    env.pi(&pi, &old, "one more thing").await;
    let request = last_request(&env.mock);
    let sent = wire_messages(&request);
    let roles: Vec<&str> = sent.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"], "{sent:?}");
    assert!(sent[2].1.starts_with("Write a handoff document"), "{}", sent[2].1);
    assert!(!request.body.to_string().contains("handoffRequest"), "the mark reached the model");
    assert_eq!(marked(&old), before, "pi kept the marked line as it was");
}

/// The content blocks of the messages of `role` in an Anthropic request body.
fn anthropic_blocks(request: &RecordedRequest, role: &str) -> Vec<serde_json::Value> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == role)
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_thinking_session_at_its_level_and_sends_our_signed_thinking_back_and_we_send_pis() {
    let Some(pi) = pi() else { return };
    let env = PiAndOurs::new().await;
    // pi's Anthropic provider for the same mock, a reasoning model (pi thinks only with those).
    let base = format!("http://{}", env.mock.addr());
    let models = serde_json::json!({ "providers": { "mock": {
        "baseUrl": base, "api": "anthropic-messages", "apiKey": "x",
        "models": [{ "id": "mock-model", "contextWindow": 32000, "maxTokens": 4096, "reasoning": true }] } } });
    std::fs::write(env.dir.path().join("pi-agent/models.json"), models.to_string()).unwrap();
    let ours = |args: &[&str]| {
        let mut c = env.base(Path::new(BIN));
        c.args(["--provider", "anthropic", "--provider-name", "mock", "--model", "mock-model", "--thinking", "high"])
            .arg("--base-url")
            .arg(env.mock.openai_base_url())
            .arg("--session-dir")
            .arg(env.dir.path().join("sessions"))
            .args(args);
        c
    };
    let run = |mut c: Command| async move {
        let out = tokio::time::timeout(T, c.output()).await.expect("our CLI hung").unwrap();
        assert_eq!(out.status.code(), Some(0), "our CLI failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stderr).unwrap()
    };
    env.mock.push(MockReply::Reasoning {
        thinking: vec!["Two plus ".into(), "two.".into()],
        signature: Some("b3VyLXNpZw==".into()),
        redacted: Some("b3VyLXJlZGFjdGVk".into()),
        field: None,
        chunks: vec!["Four.".into()],
        calls: Vec::new(),
    });
    let stderr = run(ours(&["prompt", "--new", "What is 2+2?"])).await;
    let file = PathBuf::from(stderr.lines().next().unwrap());
    assert_eq!(env.mock.requests()[0].body["thinking"]["type"], "enabled");

    // pi: the session's level (high, our last thinking_level_change), our thinking sent back.
    env.mock.push(MockReply::Reasoning {
        thinking: vec!["Pi ponders.".into()],
        signature: Some("cGktc2ln".into()),
        redacted: None,
        field: None,
        chunks: vec!["Pi says five.".into()],
        calls: Vec::new(),
    });
    let out = env.pi(&pi, &file, "and 2+3?").await;
    assert!(out.contains("Pi says five."), "{out}");
    let sent = last_request(&env.mock);
    assert_eq!(sent.body["thinking"]["type"], "enabled", "pi thinks at the recorded level: {}", sent.body);
    let pis_budget = sent.body["thinking"]["budget_tokens"].clone();
    assert!(pis_budget.as_u64().unwrap() > 0);
    assert_eq!(
        anthropic_blocks(&sent, "assistant"),
        [
            serde_json::json!({ "type": "redacted_thinking", "data": "b3VyLXJlZGFjdGVk" }),
            serde_json::json!({ "type": "thinking", "thinking": "Two plus two.", "signature": "b3VyLXNpZw==" }),
            serde_json::json!({ "type": "text", "text": "Four." }),
        ]
    );
    // pi recorded no level of its own: it read ours.
    let levels: Vec<_> = entry_lines(&file).into_iter().filter(|e| e["type"] == "thinking_level_change").collect();
    assert_eq!(levels.len(), 1, "{levels:?}");

    // We read pi's thinking back and send it with its signature.
    let session = SessionManager::open(&file, &env.dir.path().join("sessions")).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    env.mock.push(MockReply::text("Back here."));
    run(ours(&["prompt", "--session", file.to_str().unwrap(), "and 3+3?"])).await;
    let sent = last_request(&env.mock);
    // The model's limits are the catalogue's, pi's models.json among its sources: `high`'s 16384
    // comes down to what fits the 4096 tokens it allows, as pi's own budget does.
    assert_eq!(sent.body["thinking"], serde_json::json!({ "type": "enabled", "budget_tokens": pis_budget }), "pi's budget, and ours");
    assert_eq!(sent.body["max_tokens"], 4096, "{}", sent.body);
    let assistant = anthropic_blocks(&sent, "assistant");
    assert_eq!(assistant.len(), 5, "{assistant:?}");
    assert_eq!(assistant[3], serde_json::json!({ "type": "thinking", "thinking": "Pi ponders.", "signature": "cGktc2ln" }));
    assert_eq!(assistant[4], serde_json::json!({ "type": "text", "text": "Pi says five." }));
}

/// A session with MCP calls (our CLI, `--mcp-config`, `--yes`): pi resumes it and sends the
/// calls and results of tools it does not have; we read what pi appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_with_mcp_calls() {
    let Some(pi) = pi() else { return };
    let env = PiAndOurs::new().await;
    let script = common::fixtures_dir().join("mcp/stdio_server.py");
    let config = env.dir.path().join("mcp.json");
    let servers = serde_json::json!({"mcpServers": {"py": {"command": "python3", "args": [script]}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    env.mock.push(common::tool_call_reply("mcp__py__echo", serde_json::json!({"text": "hi"}), "call_mcp1"));
    env.mock.push(MockReply::text("The server said hi."));
    let (stdout, stderr) = env.ours(&["--yes", "--mcp-config", config.to_str().unwrap(), "prompt", "--new", "ask the server"]).await;
    assert!(stdout.contains("The server said hi."), "{stdout}");
    let file = PathBuf::from(stderr.lines().find(|l| l.ends_with(".jsonl")).unwrap_or_else(|| panic!("no session path: {stderr}")));
    let stored: Vec<serde_json::Value> = entry_lines(&file).into_iter().filter(|e| e["message"]["role"] == "toolResult").collect();
    assert_eq!(stored[0]["message"]["toolName"], "mcp__py__echo");
    assert_eq!(stored[0]["message"]["content"][0]["text"], "echo: hi", "{stderr}");

    env.mock.push(MockReply::text("Pi goes on."));
    let out = env.pi(&pi, &file, "and now?").await;
    assert!(out.contains("Pi goes on."), "{out}");
    let body = last_request(&env.mock).body.to_string();
    assert!(body.contains("mcp__py__echo") && body.contains("echo: hi"), "pi left out the MCP call: {body}");
    let session = SessionManager::open(&file, &env.dir.path().join("sessions")).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    assert_eq!(session.build_session_context().messages.len(), 6);
}

/// A session with review states (issue 41): a `write` our CLI made is two hunks in the review
/// beside the session, one rejected (with a reason), one still pending; the next prompt stores
/// the host's note about the reject (a `custom_message` entry of type `handoff_review`). pi
/// resumes that session and sends the note on; `handoff-nvim changes` lists only the pending
/// hunk, before and after pi appended to the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_with_review_states_and_the_cli_lists_its_pending_hunks() {
    use handoff_nvim::core::session::review::{Decision, HunkState, Review};
    let Some(pi) = pi() else { return };
    let env = PiAndOurs::new().await;
    let a = env.dir.path().join("project/a.txt");
    std::fs::write(&a, "one\ntwo\nthree\nfour\n").unwrap();
    env.mock.push(common::tool_call_reply("write", serde_json::json!({ "path": "a.txt", "content": "ONE\ntwo\nthree\nFOUR\n" }), "call_w"));
    env.mock.push(MockReply::text("Written."));
    let (_, stderr) = env.ours(&["--yes", "prompt", "--new", "shout in a.txt"]).await;
    let file = PathBuf::from(stderr.lines().find(|l| l.ends_with(".jsonl")).unwrap_or_else(|| panic!("no session path: {stderr}")));
    let review = Review::of_session(&file);
    let ids: Vec<u64> = review.unreviewed().unwrap().iter().flat_map(|c| c.hunks.iter().map(|h| h.id)).collect();
    assert_eq!(ids.len(), 2, "two places changed: two hunks");
    // The editor's decision, as it reaches the host.
    let reject = Decision { id: ids[0], state: HunkState::Rejected, reason: Some("keep it lower case".into()), edited: false };
    assert!(review.decide(&[reject]).unwrap().is_empty());

    env.mock.push(MockReply::text("Noted."));
    env.ours(&["prompt", "--session", file.to_str().unwrap(), "go on"]).await;
    let note = entry_lines(&file).into_iter().find(|e| e["type"] == "custom_message").expect("the note is an entry");
    assert_eq!(note["customType"], "handoff_review");

    let pending = |stdout: &str| -> Vec<serde_json::Value> { stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect() };
    let (listed, _) = env.ours(&["changes", file.to_str().unwrap(), "--json"]).await;
    let listed = pending(&listed);
    assert_eq!(listed.len(), 1, "only the pending hunk: {listed:?}");
    assert_eq!((listed[0]["id"].as_u64(), listed[0]["state"].as_str(), listed[0]["tool"].as_str()), (Some(ids[1]), Some("pending"), Some("write")));
    let (text, _) = env.ours(&["changes", file.to_str().unwrap()]).await;
    assert_eq!(text.lines().collect::<Vec<_>>(), [format!("{}:4: write call_w (line 4 as the call wrote them)", a.display())]);

    env.mock.push(MockReply::text("Pi goes on."));
    let out = env.pi(&pi, &file, "and now?").await;
    assert!(out.contains("Pi goes on."), "{out}");
    let body = last_request(&env.mock).body.to_string();
    assert!(body.contains("Written by handoff.nvim, not by the user") && body.contains("reason: keep it lower case"), "pi left out the note: {body}");
    let session = SessionManager::open(&file, &env.dir.path().join("sessions")).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    let (again, _) = env.ours(&["changes", file.to_str().unwrap(), "--json"]).await;
    assert_eq!(pending(&again), listed, "pi left the review beside the session alone");
}
