//! The automatic handoff at the wall (issue 21, `doc/design.md` "At the wall"), against the
//! loopback mock with a small window and replies that report their usage: the threshold after a
//! final answer, mid tool loop, overflow errors, the handoff request refused too, errors left
//! alone, cancel, queued input, the guard of one prompt, and pi resuming both sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{config, entry_lines, seeded_session, session_files, slow, tool_call_reply, wait_until, DOCUMENT};
use handoff_mock::{MockOverflow, MockReply, MockServer, MockUsage, MockWindow};
use handoff_nvim::core::agent::{AgentConfig, AgentEvent, AgentSession, Boundary, Threshold, WallReason, WallSettings};
use handoff_nvim::core::controller::{self, text, Controller, FrontEndTexts, InputOutcome};
use handoff_nvim::core::handoff::{self, auto, AutoHandoff};
use handoff_nvim::core::provider::{Api, ProviderConfig};
use handoff_nvim::core::tools::consent::{Level, Policy};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(20);
/// The window of these tests: its wall is at half of it (the reserve and the room leave less).
const WINDOW: u64 = 20_000;

struct Env {
    mock: MockServer,
    dir: tempfile::TempDir,
    agent: Arc<AgentSession>,
    controller: Arc<Controller>,
    events: std::sync::Arc<std::sync::Mutex<Vec<AgentEvent>>>,
}

impl Env {
    async fn new() -> Env {
        Self::with(|c| c).await
    }

    async fn with(adjust: impl FnOnce(ProviderConfig) -> ProviderConfig) -> Env {
        Self::build(adjust, WallSettings::default()).await
    }

    async fn build(adjust: impl FnOnce(ProviderConfig) -> ProviderConfig, wall: WallSettings) -> Env {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut provider = config(&mock);
        provider.context_window = WINDOW;
        let provider = adjust(provider);
        let session = seeded_session(dir.path(), 2);
        let agent = Arc::new(AgentSession::new(
            AgentConfig { policy: Policy { level: Level::AllowAll, ..Policy::default() }, wall, ..AgentConfig::new(provider) },
            session,
        ));
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut rx = agent.subscribe();
        let sink = events.clone();
        tokio::spawn(async move {
            while let Ok(e) = rx.recv().await {
                sink.lock().unwrap().push(e);
            }
        });
        Env { mock, dir, agent, controller, events }
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn session_path(&self) -> PathBuf {
        self.agent.session().path().to_path_buf()
    }

    fn sessions(&self) -> Vec<PathBuf> {
        session_files(&self.dir.path().join("sessions"))
    }

    fn notices(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Notice(n) => Some(n.message.clone()),
                _ => None,
            })
            .collect()
    }

    /// Waits until a notice `pred` accepts was heard.
    async fn heard(&self, what: &str, pred: impl Fn(&str) -> bool) {
        wait_until(what, T, || self.notices().iter().any(|n| pred(n))).await;
    }

    /// The automatic handoffs' ends, once at least one was heard.
    async fn auto_ends_heard(&self) -> Vec<(handoff::HandoffOutcome, handoff_nvim::core::agent::Wall)> {
        wait_until("an automatic handoff's end", T, || !self.auto_ends().is_empty()).await;
        self.auto_ends()
    }

    fn auto_ends(&self) -> Vec<(handoff::HandoffOutcome, handoff_nvim::core::agent::Wall)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::HandoffEnd { outcome, auto: Some(wall), .. } => Some((outcome.clone(), *wall)),
                _ => None,
            })
            .collect()
    }
}

/// A usage that alone passes the wall of [`WINDOW`].
fn big_usage() -> MockUsage {
    MockUsage { input: 15_000, output: Some(100), ..MockUsage::default() }
}

/// The text of the last user message of a recorded OpenAI request.
fn last_user_text(request: &handoff_mock::RecordedRequest) -> String {
    common::wire_messages(request).into_iter().rev().find(|(role, _)| role == "user").map(|(_, t)| t).unwrap_or_default()
}

fn is_handoff_request(request: &handoff_mock::RecordedRequest) -> bool {
    last_user_text(request).starts_with(handoff::PROMPT.lines().next().unwrap())
}

/// The handoff entry of a new session and its details.
fn handoff_entry(path: &Path) -> Value {
    entry_lines(path).into_iter().find(|e| e["customType"] == "handoff").expect("no handoff entry")
}

fn texts_of(path: &Path) -> Vec<(String, String)> {
    entry_lines(path)
        .into_iter()
        .filter(|e| e["type"] == "message")
        .map(|e| {
            let m = &e["message"];
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap().to_string(), text)
        })
        .collect()
}

async fn run(env: &Env, text: &str) -> InputOutcome {
    tokio::time::timeout(T, env.controller.run_input(text)).await.expect("the prompt hung")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threshold_after_a_final_answer_hands_off_and_does_not_continue() {
    let env = Env::new().await;
    let old = env.session_path();
    env.mock.push(MockReply::text("All done.").with_usage(big_usage()));
    env.mock.push(MockReply::text(DOCUMENT));
    let ran = run(&env, "summarise the project").await;
    let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
    assert!(result.wall.is_none(), "the wall was met by the handoff");
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 2, "the prompt and the handoff, no continuation");
    assert!(is_handoff_request(&requests[1]));
    assert!(last_user_text(&requests[1]).contains("waits for the user's next request"));
    let new = env.session_path();
    assert_ne!(new, old);
    assert_eq!(env.sessions().len(), 2);
    let entry = handoff_entry(&new);
    assert_eq!(entry["details"]["auto"]["reason"], "threshold");
    assert_eq!(entry["details"]["auto"]["boundary"], "after_reply");
    assert_eq!(entry["details"]["auto"]["window"], WINDOW);
    assert_eq!(entry["details"]["userWords"]["task"], "question 0");
    assert_eq!(entry["details"]["userWords"]["latest"], "summarise the project");
    let content = entry["content"].as_str().map(str::to_string).unwrap_or_else(|| entry["content"][0]["text"].as_str().unwrap().to_string());
    assert!(content.contains("<user-task>\nquestion 0\n</user-task>"), "{content}");
    assert!(content.contains("<user-latest-message>\nsummarise the project\n</user-latest-message>"), "{content}");
    assert!(texts_of(&new).is_empty(), "no continuation after a final answer: {:?}", texts_of(&new));
    // The old session shows the handoff as `:Handoff` leaves it.
    let old_texts = texts_of(&old);
    assert_eq!(old_texts[old_texts.len() - 1].1, DOCUMENT);
    let (outcome, wall) = env.auto_ends_heard().await.pop().unwrap();
    assert!(matches!(outcome, handoff::HandoffOutcome::Done { .. }));
    assert_eq!((wall.reason, wall.boundary, wall.in_flight), (WallReason::Threshold, Boundary::AfterReply, false));
    let told = controller::auto_handoff_notices(&outcome, &wall, &FrontEndTexts::default());
    assert!(told[0].message.contains("the new session waits for your next prompt"), "{told:?}");
    assert!(told[1].message.contains("handoff.md"), "{told:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_tool_loop_the_batch_completes_then_the_handoff_then_the_task_finishes_in_the_new_session() {
    let env = Env::new().await;
    let old = env.session_path();
    let file = env.file("notes.txt", "the secret number is 42\n");
    env.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1").with_usage(big_usage()));
    env.mock.push(MockReply::text(DOCUMENT));
    env.mock.push(MockReply::text("The number is 42: finished."));
    let ran = run(&env, "read notes.txt and tell me the number").await;
    let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
    assert_eq!(result.last_assistant().unwrap().text(), "The number is 42: finished.");
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3);
    // The handoff request went out before any further model request, with the call's result.
    assert!(is_handoff_request(&requests[1]));
    let body = requests[1].body.to_string();
    assert!(body.contains("the secret number is 42"), "the tool result is in the handoff request");
    assert!(last_user_text(&requests[1]).contains("read"), "the focus names the tool in flight");
    // The pair stays whole in the old session.
    let old_entries = entry_lines(&old);
    let roles: Vec<&str> = old_entries.iter().filter_map(|e| e["message"]["role"].as_str()).collect();
    assert_eq!(&roles[roles.len() - 5..], ["user", "assistant", "toolResult", "user", "assistant"], "{roles:?}");
    // The continuation runs in the new session: the host's, marked, after the document.
    let new = env.session_path();
    assert_ne!(new, old);
    let sent = common::wire_messages(&requests[2]);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent[0].1.starts_with("<handoff-context>"));
    assert_eq!(sent[1].1, auto::CONTINUATION_TEXT);
    let new_entries = entry_lines(&new);
    let continuation = new_entries.iter().find(|e| e["message"]["role"] == "user").unwrap();
    assert_eq!(continuation["message"]["handoffAuthor"], "continuation");
    assert!(!requests[2].body.to_string().contains("handoffAuthor"), "the mark reached the model");
    assert_eq!(texts_of(&new).last().unwrap().1, "The number is 42: finished.");
    let entry = handoff_entry(&new);
    assert_eq!(entry["details"]["auto"]["boundary"], "after_tools");
    assert_eq!(entry["details"]["auto"]["inFlight"], true);
    assert_eq!(entry["details"]["readFiles"], json!([file.to_str().unwrap()]));
    assert_eq!(new_entries.iter().filter(|e| e["type"] == "model_change").count(), 1, "the model is carried");
    // The automatic handoff's ledger: the read's output left behind, the user's words carried.
    let ledger = &entry["details"]["ledger"];
    assert_eq!(ledger["dropped"]["toolResults"]["count"], 1, "{ledger}");
    assert_eq!(ledger["dropped"]["toolResults"]["tools"], json!({ "read": 1 }), "{ledger}");
    assert_eq!(ledger["carried"]["userWords"], 2, "{ledger}");
    assert_eq!(ledger["carried"]["facts"]["readFiles"], 1, "{ledger}");
}

/// The overflow bodies the providers send, each as the provider sends it.
fn overflow_bodies() -> Vec<(&'static str, Api, u16, String)> {
    vec![
        (
            "openai",
            Api::Openai,
            400,
            json!({"error": {"message": "This model's maximum context length is 20000 tokens. However, your messages resulted in 23000 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}).to_string(),
        ),
        (
            "anthropic",
            Api::Anthropic,
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 23000 tokens > 20000 maximum"}}).to_string(),
        ),
        (
            "llama.cpp",
            Api::Openai,
            400,
            json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 23000, "n_ctx": 20000}}).to_string(),
        ),
        ("bare 413", Api::Openai, 413, "<html><body><h1>413 Request Entity Too Large</h1></body></html>".to_string()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_error_of_each_provider_hands_off_and_the_task_goes_on() {
    for (name, api, status, body) in overflow_bodies() {
        let env = Env::with(|mut c| {
            c.api = api;
            c
        })
        .await;
        let old = env.session_path();
        env.mock.push(MockReply::Status { status, body, retry_after: None });
        env.mock.push(MockReply::text(DOCUMENT));
        env.mock.push(MockReply::text("Resumed and done."));
        let ran = run(&env, "do the big thing").await;
        let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{name}: {ran:?}") };
        assert_eq!(result.last_assistant().unwrap().text(), "Resumed and done.", "{name}");
        assert_eq!(env.mock.requests().len(), 3, "{name}: never retried as transient");
        assert_ne!(env.session_path(), old, "{name}");
        let entry = handoff_entry(&env.session_path());
        assert_eq!(entry["details"]["auto"]["reason"], "overflow", "{name}");
        assert_eq!(entry["details"]["userWords"]["latest"], "do the big thing", "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_request_refused_as_too_large_is_trimmed_and_sent_again() {
    let env = Env::new().await;
    // A large tool output makes the fitted request big enough to be trimmed further.
    let file = env.file("big.log", &"log line with some words in it\n".repeat(2_000));
    env.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1").with_usage(big_usage()));
    let (_, _, _, overflow) = overflow_bodies().remove(0);
    env.mock.push(MockReply::Status { status: 400, body: overflow.clone(), retry_after: None });
    env.mock.push(MockReply::Status { status: 400, body: overflow, retry_after: None });
    env.mock.push(MockReply::text(DOCUMENT));
    env.mock.push(MockReply::text("Finished."));
    let ran = run(&env, "look at the log").await;
    let InputOutcome::Prompt(Ok(_)) = ran else { panic!("{ran:?}") };
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 5, "the prompt, three handoff attempts, the continuation");
    let sizes: Vec<usize> = requests[1..4].iter().map(|r| r.raw_len).collect();
    assert!(requests[1..4].iter().all(is_handoff_request));
    assert!(sizes[0] > sizes[1] && sizes[1] > sizes[2], "each attempt is smaller: {sizes:?}");
    assert!((sizes[0] / 4) as u64 <= WINDOW, "the first attempt is fitted below the window: {sizes:?}");
    assert_eq!(env.sessions().len(), 2);
}

/// A tool loop whose request with the tool result is over the server's real window (8k, smaller
/// than the configured one, so the wall lets it go out), refused in `style`; returns once the
/// task went on after the handoff.
async fn overflowing_tool_loop(style: MockOverflow) -> Env {
    let env = Env::build(|c| c, WallSettings { threshold: Threshold::Set(0.9), ..WallSettings::default() }).await;
    env.mock.set_window(Some(MockWindow { tokens: 8_000, style }));
    let file = env.file("big.log", &"a log line of a long build output\n".repeat(1_100));
    env.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1"));
    env.mock.push(MockReply::text(DOCUMENT));
    env.mock.push(MockReply::text("Went on after the overflow."));
    let ran = run(&env, "summarise big.log").await;
    let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
    assert_eq!(result.last_assistant().unwrap().text(), "Went on after the overflow.");
    env
}

/// The window configured is larger than the server's real one (8k): the request after a large
/// tool result is refused by the server's own count; the handoff request is fitted below the
/// request refused (not just below the configured window, which it fitted already), so the
/// server takes it at the first attempt, and the task goes on in the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_overflow_against_a_smaller_server_window_is_recovered_with_a_request_below_the_refused_one() {
    let env = overflowing_tool_loop(MockOverflow::Llamacpp).await;
    let requests = env.mock.requests();
    let refused: Vec<bool> = requests.iter().map(|r| r.refused).collect();
    assert_eq!(refused, [false, true, false, false], "the prompt, the refused request, the handoff, the continuation");
    assert!(is_handoff_request(&requests[2]));
    assert!(requests[2].raw_len < requests[1].raw_len * 3 / 4, "{} vs {}", requests[2].raw_len, requests[1].raw_len);
    let entry = handoff_entry(&env.session_path());
    assert_eq!(entry["details"]["auto"]["reason"], "overflow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_torn_out_of_the_stream_by_llama_cpp_python_is_probed_and_recovered_by_the_handoff() {
    let env = overflowing_tool_loop(MockOverflow::LlamacppPython).await;
    let requests = env.mock.requests();
    let shape: Vec<(bool, bool)> = requests.iter().map(|r| (r.body["stream"] == Value::Bool(true), r.refused)).collect();
    assert_eq!(shape[..3], [(true, false), (true, true), (false, true)], "the prompt, its tool result torn, the probe refused: {shape:?}");
    // Every refused streamed request was probed exactly once, right after it, with one token.
    for (i, r) in requests.iter().enumerate().filter(|(_, r)| r.refused && r.body["stream"] == Value::Bool(true)) {
        let probe = &requests[i + 1];
        assert_eq!((probe.body["stream"].clone(), probe.body["max_tokens"].clone()), (Value::Bool(false), json!(1)), "{i}");
        assert!(probe.refused);
        assert_eq!(probe.body["messages"], r.body["messages"]);
    }
    assert_eq!(requests.iter().filter(|r| r.body["stream"] == Value::Bool(false)).count(), requests.iter().filter(|r| r.refused).count() / 2);
    assert_eq!(shape[shape.len() - 2..], [(true, false), (true, false)], "then the trimmed handoff and the continuation fit: {shape:?}");
    let entry = handoff_entry(&env.session_path());
    assert_eq!(entry["details"]["auto"]["reason"], "overflow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_and_an_unrelated_400_are_left_alone() {
    for (status, body) in [
        (429, r#"{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per minute (TPM): Limit 30000","type":"tokens","code":"rate_limit_exceeded"}}"#),
        (400, r#"{"error":{"message":"Unrecognized request argument supplied: foo","type":"invalid_request_error"}}"#),
    ] {
        let env = Env::new().await;
        let old = env.session_path();
        env.mock.push(MockReply::Status { status, body: body.into(), retry_after: None });
        let ran = run(&env, "hello").await;
        let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
        assert!(result.wall.is_none(), "{status}");
        assert_ne!(result.failure, Some(handoff_nvim::core::failure::FailureKind::Overflow), "{status}");
        assert_eq!(env.mock.requests().len(), 1, "{status}");
        assert_eq!(env.session_path(), old);
        assert_eq!(env.sessions().len(), 1, "{status}: no new session");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_leaves_the_old_session_as_it_was_creates_nothing_and_sends_nothing_more() {
    let env = Env::new().await;
    let old = env.session_path();
    env.mock.push(MockReply::text("Answer.").with_usage(big_usage()));
    env.mock.push(slow(&["## Goal\n", "never finished"], 0, 3_000));
    let controller = env.controller.clone();
    let run = tokio::spawn(async move { controller.run_input("a question").await });
    // The handoff streams its document: the old file holds the prompt and the answer only.
    wait_until("the handoff request", T, || env.mock.requests().len() == 2).await;
    wait_until("the handoff started", T, || env.controller.is_generating_handoff()).await;
    env.agent.session().flush().unwrap();
    let before = std::fs::read(&old).unwrap();
    env.controller.abort_handoff();
    let ran = tokio::time::timeout(T, run).await.unwrap().unwrap();
    assert!(matches!(ran, InputOutcome::Prompt(Ok(ref r)) if r.wall.is_some()), "{ran:?}");
    env.agent.session().flush().unwrap();
    assert_eq!(std::fs::read(&old).unwrap(), before, "the old session is as it was");
    assert_eq!(env.session_path(), old);
    assert_eq!(env.sessions().len(), 1, "no file was created");
    // Nothing can send any more: the prompt's run is over, nothing holds the lifecycle, and no
    // draft is being written (the only work that sends on its own). And nothing was sent.
    assert!(!env.controller.is_busy());
    assert!(!env.controller.lifecycle().has_draft(), "a draft would send on its own");
    assert_eq!(env.mock.requests().len(), 2, "nothing more was sent");
    let (outcome, wall) = env.auto_ends_heard().await.pop().unwrap();
    assert_eq!(outcome, handoff::HandoffOutcome::Cancelled);
    assert_eq!(controller::auto_handoff_notices(&outcome, &wall, &FrontEndTexts::default())[0].message, text::auto_cancelled(&wall, &FrontEndTexts::default()));
    assert!(!env.controller.is_busy());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_typed_during_the_handoff_goes_to_the_new_session_instead_of_the_continuation() {
    let env = Env::new().await;
    let file = env.file("a.txt", "alpha\n");
    env.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1").with_usage(big_usage()));
    env.mock.push(slow(&[DOCUMENT], 400, 0));
    env.mock.push(MockReply::text("Checked the README too."));
    let controller = env.controller.clone();
    let run = tokio::spawn(async move { controller.run_input("read a.txt").await });
    wait_until("the handoff started", T, || env.controller.is_generating_handoff()).await;
    let queued = env.controller.run_input("also check the README").await;
    assert!(matches!(queued, InputOutcome::Steered), "{queued:?}");
    env.heard("queued", |n| n == text::QUEUED_FOR_NEW_SESSION).await;
    let ran = tokio::time::timeout(T, run).await.unwrap().unwrap();
    assert!(matches!(ran, InputOutcome::Prompt(Ok(_))), "{ran:?}");
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3);
    let sent = common::wire_messages(&requests[2]);
    assert_eq!(sent.last().unwrap().1, "also check the README", "{sent:?}");
    assert!(!requests[2].body.to_string().contains(auto::CONTINUATION_TEXT), "the queued input replaces the continuation");
    let texts = texts_of(&env.session_path());
    assert_eq!(texts, [("user".into(), "also check the README".into()), ("assistant".into(), "Checked the README too.".into())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_three_automatic_handoffs_run_for_one_prompt() {
    let env = Env::new().await;
    let file = env.file("a.txt", "alpha\n");
    let call = || tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_x").with_usage(big_usage());
    env.mock.push(call());
    for _ in 0..3 {
        env.mock.push(MockReply::text(DOCUMENT));
        env.mock.push(call());
    }
    env.mock.set_default(MockReply::text("should not be asked"));
    let ran = run(&env, "loop forever").await;
    let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
    assert!(result.wall.is_some(), "it stopped at the wall");
    assert_eq!(env.mock.requests().len(), 7);
    assert_eq!(env.sessions().len(), 4, "three new sessions");
    env.heard("the guard", |n| n == text::TOO_MANY_AUTO_HANDOFFS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_automatic_handoffs_off_the_wall_is_not_watched() {
    let env = Env::new().await;
    env.controller.set_auto_handoff(AutoHandoff::Off);
    env.mock.push(MockReply::text("Answer.").with_usage(big_usage()));
    let ran = run(&env, "a question").await;
    assert!(matches!(ran, InputOutcome::Prompt(Ok(ref r)) if r.wall.is_none()), "{ran:?}");
    assert_eq!(env.mock.requests().len(), 1);
    assert_eq!(env.sessions().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_that_would_pass_the_wall_hands_off_first_and_is_sent_in_the_new_session() {
    let env = Env::new().await;
    let old = env.session_path();
    // The last reply already filled most of the window.
    env.mock.push(MockReply::text("Noted.").with_usage(MockUsage { input: 9_900, output: Some(50), ..MockUsage::default() }));
    env.controller.set_auto_handoff(AutoHandoff::Off);
    run(&env, "remember this").await;
    env.controller.set_auto_handoff(AutoHandoff::Continue);
    env.mock.push(MockReply::text(DOCUMENT));
    env.mock.push(MockReply::text("Answered in the new session."));
    let long = format!("Here is a long question: {}", "words ".repeat(400));
    run(&env, &long).await;
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3);
    assert!(is_handoff_request(&requests[1]), "the handoff went out before the prompt");
    assert!(!texts_of(&old).iter().any(|(_, t)| t == &long), "the prompt was not sent in the old session");
    assert_eq!(last_user_text(&requests[2]), long);
    assert_eq!(handoff_entry(&env.session_path())["details"]["auto"]["boundary"], "before_prompt");
}

// ---------------------------------------------------------------------------------------------
// The CLI, and pi 0.73.1 resuming both sessions

mod cli {
    use std::path::{Path, PathBuf};
    use std::process::Stdio;

    use super::common::pi::{pi_bin, pi_env, pi_home};
    use super::common::{wire_messages, DOCUMENT};
    use handoff_mock::{MockReply, MockServer, MockUsage};
    use tokio::process::Command;

    const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");

    async fn ours(mock: &MockServer, root: &Path, args: &[&str]) -> (Option<i32>, String, String) {
        let mut c = super::common::clean_command_async(BIN);
        pi_env(&mut c, root)
            .current_dir(root.join("project"))
            .stdin(Stdio::null())
            .args(["--provider", "openai", "--provider-name", "mock", "--model", "mock-model", "--context-window", "20000"])
            .arg("--base-url")
            .arg(mock.openai_base_url())
            .arg("--session-dir")
            .arg(root.join("sessions"))
            .args(args);
        let out = tokio::time::timeout(super::T, c.output()).await.expect("our CLI hung").unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn prompt_hands_off_at_the_wall_names_both_files_the_new_last_and_pi_resumes_both() {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        pi_home(dir.path(), "openai-completions", &mock.openai_base_url());
        mock.push(MockReply::text("Sure.").with_usage(MockUsage { input: 15_000, output: Some(10), ..MockUsage::default() }));
        mock.push(MockReply::text(DOCUMENT));
        let (code, stdout, stderr) = ours(&mock, dir.path(), &["prompt", "--new", "Plan the parser"]).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert_eq!(stdout.trim(), "Sure.", "the document is not printed as the answer");
        let files: Vec<PathBuf> = stderr.lines().filter(|l| l.ends_with(".jsonl")).map(PathBuf::from).collect();
        assert_eq!(files.len(), 2, "{stderr}");
        let (old, new) = (&files[0], &files[1]);
        assert!(old.is_file() && new.is_file());
        assert!(stderr.contains("Context") && stderr.contains("handing off"), "{stderr}");
        assert!(stderr.contains("Handed off automatically"), "{stderr}");
        let Some(pi) = pi_bin() else { return };
        for (file, reply) in [(new, "pi in the new session"), (old, "pi in the old session")] {
            mock.push(MockReply::text(reply));
            let mut c = Command::new(&pi);
            pi_env(&mut c, dir.path())
                .current_dir(dir.path().join("project"))
                .arg("--session")
                .arg(file)
                .args(["--provider", "mock", "--model", "mock-model"])
                .args(["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes"])
                .args(["--offline", "-p", "go on"]);
            let out = tokio::time::timeout(super::T * 3, c.output()).await.expect("pi hung").unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            assert_eq!(out.status.code(), Some(0), "pi failed on {}: {text} {}", file.display(), String::from_utf8_lossy(&out.stderr));
            assert!(text.contains(reply), "{text}");
        }
        let requests = mock.requests();
        let to_new = wire_messages(&requests[requests.len() - 2]);
        assert!(to_new[0].1.starts_with("<handoff-context>") && to_new[0].1.contains("<user-task>\nPlan the parser"), "{to_new:?}");
        let to_old = wire_messages(&requests[requests.len() - 1]);
        assert_eq!(to_old.first().unwrap().1, "Plan the parser");
    }

    /// Bug (issue 40): `prompt --session BIG "next step?"` on a session already past the wall
    /// said "the new session waits for your next prompt", then answered that very prompt in it.
    /// The prompt the run had not sent goes to the new session first, and the notice says so.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_prompt_met_by_the_wall_is_answered_in_the_new_session_and_said_so() {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        // A session that ends past the wall (handing off was off when it got there).
        mock.push(MockReply::text("Sure.").with_usage(MockUsage { input: 15_000, output: Some(10), ..MockUsage::default() }));
        let (code, _, stderr) = ours(&mock, dir.path(), &["prompt", "--new", "--auto-handoff", "off", "Plan the parser"]).await;
        assert_eq!(code, Some(0), "{stderr}");
        let big = stderr.lines().find(|l| l.ends_with(".jsonl")).unwrap().to_string();
        mock.push(MockReply::text(DOCUMENT));
        mock.push(MockReply::text("Next: the tests."));
        let (code, stdout, stderr) = ours(&mock, dir.path(), &["prompt", "--session", &big, "next step?"]).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert_eq!(stdout.trim(), "Next: the tests.", "{stderr}");
        let requests = mock.requests();
        assert_eq!(wire_messages(&requests[requests.len() - 1]).last().unwrap().1, "next step?", "answered in the new session");
        assert!(stderr.contains("Handed off automatically"), "{stderr}");
        assert!(!stderr.contains("waits for your next prompt"), "{stderr}");
        assert!(stderr.contains(handoff_nvim::core::controller::text::AFTER_WALL_PROMPT), "{stderr}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn prompt_goes_on_from_the_hosts_document_when_the_handoff_fails_and_exits_1_when_review_is_refused() {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        // The handoff fails (a server error): the host writes the document, and says so.
        mock.push(MockReply::text("Sure.").with_usage(MockUsage { input: 15_000, output: Some(10), ..MockUsage::default() }));
        mock.push(MockReply::Status { status: 500, body: "boom".into(), retry_after: None });
        let (code, _, stderr) = ours(&mock, dir.path(), &["prompt", "--new", "--max-retries", "0", "Plan it"]).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.contains("continuing from a handoff written without the model (") && stderr.contains("500"), "{stderr}");
        assert_eq!(stderr.lines().filter(|l| l.ends_with(".jsonl")).count(), 2, "{stderr}");
        let (code, _, stderr) = ours(&mock, dir.path(), &["prompt", "--new", "--auto-handoff", "review", "x"]).await;
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("needs an editor"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_review_mode_nothing_is_sent_until_the_document_is_written_then_the_work_goes_on() {
    let env = Env::new().await;
    env.controller.set_auto_handoff(AutoHandoff::Review);
    let file = env.file("a.txt", "alpha\n");
    env.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1").with_usage(big_usage()));
    env.mock.push(MockReply::text(DOCUMENT));
    env.mock.push(MockReply::text("Resumed after the review."));
    let ran = run(&env, "read a.txt").await;
    assert!(matches!(ran, InputOutcome::Prompt(Ok(ref r)) if r.wall.is_none()), "{ran:?}");
    let (outcome, _) = env.auto_ends_heard().await.pop().unwrap();
    let handoff::HandoffOutcome::Review { text, .. } = outcome else { panic!("{outcome:?}") };
    assert_eq!(env.mock.requests().len(), 2, "nothing is sent while the document waits");
    assert_eq!(env.sessions().len(), 1);
    let edited = text.replace("Write the tests", "Write the tests, then the docs");
    let done = env.controller.commit_review(&edited).await;
    assert!(matches!(done, handoff::HandoffOutcome::Done { .. }), "{done:?}");
    wait_until("the continuation", T, || env.mock.requests().len() == 3).await;
    let sent = common::wire_messages(&env.mock.requests()[2]);
    assert!(sent[0].1.contains("then the docs"), "the document as written: {sent:?}");
    assert_eq!(sent[1].1, auto::CONTINUATION_TEXT);
    wait_until("the reply", T, || texts_of(&env.session_path()).last().is_some_and(|(_, t)| t == "Resumed after the review.")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_that_starts_at_the_wall_does_not_continue_and_says_why() {
    let env = Env::new().await;
    let file = env.file("a.txt", "alpha\n");
    env.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1").with_usage(big_usage()));
    // A document that alone passes the new session's wall.
    let huge = format!("{DOCUMENT}\n\n{}", "A very long critical context line.\n".repeat(1_500));
    env.mock.push(MockReply::text(&huge));
    env.mock.set_default(MockReply::text("should not be asked"));
    let ran = run(&env, "read a.txt").await;
    assert!(matches!(ran, InputOutcome::Prompt(Ok(_))), "{ran:?}");
    assert_eq!(env.mock.requests().len(), 2, "no continuation: it would hand off again at once");
    assert_eq!(env.sessions().len(), 2, "the handoff itself happened");
    env.heard("the warning", |n| n == text::document_at_the_wall(&FrontEndTexts::default())).await;
}

/// At the wall there is no going on where the session is: a document cut off at the output
/// limit is kept, marked where it stops, and the work goes on (`:Handoff` refuses it:
/// tests/handoff.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_cut_off_at_the_output_limit_is_kept_at_the_wall_marked_where_it_stops() {
    let env = Env::new().await;
    let old = env.session_path();
    let file = env.file("notes.txt", "the secret number is 42\n");
    env.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1").with_usage(big_usage()));
    env.mock.push(common::with_stop("## Goal\nRead notes.txt and report the number.\n\n## Progress\nRead the fi", "length"));
    env.mock.push(MockReply::text("The number is 42."));
    let ran = run(&env, "read notes.txt and tell me the number").await;
    let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
    assert_eq!(result.last_assistant().unwrap().text(), "The number is 42.");
    let (outcome, _) = env.auto_ends_heard().await.pop().unwrap();
    assert!(matches!(outcome, handoff::HandoffOutcome::Done { .. }), "{outcome:?}");
    let new = env.session_path();
    assert_ne!(new, old);
    let entry = handoff_entry(&new).to_string();
    assert!(entry.contains(&format!("Read the fi\\n\\n{}", handoff::CUT_OFF_MARK)), "{entry}");
    assert!(entry.contains("<user-task>"), "the user's words follow the cut document: {entry}");
}
