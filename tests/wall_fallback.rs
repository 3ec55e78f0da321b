//! Never die at the wall (issue 32, `:help handoff-auto`): when the model writes no document for
//! the automatic handoff (5xx after the retries, a 401, every fitted request refused as too
//! large, an empty reply cut at the output limit), the new session starts from the host's own
//! document and the task goes on; `:Handoff` typed by the user still fails. pi 0.73.1 resumes
//! the new session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::wall::{WallEnv, T};
use common::{entry_lines, tool_call_reply, wire_messages};
use handoff_mock::{MockReply, MockUsage};
use handoff_nvim::core::controller::{self, FrontEndTexts, InputOutcome};
use handoff_nvim::core::handoff::{self, fallback, HandoffOptions, HandoffOutcome};
use serde_json::{json, Value};

const TASK: &str = "read notes.txt and tell me the number";

type Env = WallEnv;

/// A prompt whose tool call passes the wall (mid tool loop), the handoff's replies
/// `failures`, and the task's answer in the new session; returns the old session.
async fn tool_loop_with_failing_handoff(env: &Env, failures: Vec<MockReply>) -> PathBuf {
    let old = env.session_path();
    let file = env.dir.path().join("notes.txt");
    std::fs::write(&file, "the secret number is 42\n").unwrap();
    let usage = MockUsage { input: 15_000, output: Some(100), ..MockUsage::default() };
    env.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1").with_usage(usage));
    for reply in failures {
        env.mock.push(reply);
    }
    env.mock.push(MockReply::text("The number is 42: finished."));
    let ran = tokio::time::timeout(T, env.controller.run_input(TASK)).await.expect("the prompt hung");
    let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
    assert_eq!(result.last_assistant().unwrap().text(), "The number is 42: finished.", "the task went on");
    assert!(result.wall.is_none());
    old
}

fn notes(env: &Env) -> String {
    env.dir.path().join("notes.txt").to_string_lossy().into_owned()
}

fn handoff_entry(path: &Path) -> Value {
    entry_lines(path).into_iter().find(|e| e["customType"] == "handoff").expect("no handoff entry")
}

fn is_handoff_request(request: &handoff_mock::RecordedRequest) -> bool {
    wire_messages(request)
        .iter()
        .rev()
        .find(|(role, _)| role == "user")
        .is_some_and(|(_, t)| t.starts_with(handoff::PROMPT.lines().next().unwrap()))
}

/// What every fallback leaves: a new session started from the host's document (the user's words
/// and a fact of the first turn in it, the entry's details saying why), the task's next request
/// sent there, the old session without the failed attempts, and the chat told.
async fn assert_continued_from_the_hosts_document(env: &Env, old: &Path, handoff_requests: usize, reason: &str) {
    let new = env.session_path();
    assert_ne!(new, old, "a new session started");
    assert_eq!(env.sessions().len(), 2);
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 1 + handoff_requests + 1, "the prompt, the handoff's attempts, the continuation");
    assert!(requests[1..=handoff_requests].iter().all(is_handoff_request));
    // The next request goes to the new session: the host's document, then the continuation.
    let sent = wire_messages(requests.last().unwrap());
    assert_eq!(sent.len(), 2, "{sent:?}");
    let context = &sent[0].1;
    assert!(context.starts_with("<handoff-context>") && context.contains(fallback::TITLE), "{context}");
    assert!(context.contains(&format!("<user-latest-message>\n{TASK}\n</user-latest-message>")), "{context}");
    assert!(context.contains("<user-task>\nquestion 0\n</user-task>"), "{context}");
    assert!(context.contains(&format!("<read-files>\n{}\n</read-files>", notes(env))), "the fact: {context}");
    assert!(context.contains("[read result]\nthe secret number is 42"), "the last turns verbatim: {context}");
    assert_eq!(sent[1].1, handoff::auto::CONTINUATION_TEXT);
    let entry = handoff_entry(&new);
    let why = entry["details"]["fallback"]["reason"].as_str().expect("details.fallback.reason");
    assert!(why.contains(reason), "{why}");
    assert_eq!(entry["details"]["auto"]["inFlight"], true);
    assert_eq!(entry["details"]["readFiles"], json!([notes(env)]));
    // Nothing of the failed attempts reached the old session.
    let roles: Vec<String> =
        entry_lines(old).iter().filter_map(|e| e["message"]["role"].as_str().map(str::to_string)).collect();
    assert_eq!(roles.last().map(String::as_str), Some("toolResult"), "{roles:?}");
    let (outcome, wall) = env.auto_end().await;
    let HandoffOutcome::Done { fallback: Some(told), missing_sections, .. } = &outcome else { panic!("{outcome:?}") };
    assert!(told.contains(reason) && missing_sections.is_empty(), "{outcome:?}");
    let chat = controller::auto_handoff_notices(&outcome, &wall, &FrontEndTexts::default());
    assert!(chat[0].message.contains("continuing from a handoff written without the model"), "{chat:?}");
    assert!(chat[0].message.contains(reason), "{chat:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_after_the_retries_at_the_wall_continue_from_the_hosts_document() {
    let env = WallEnv::new(|c| c.max_retries = 2).await;
    let boom = || MockReply::Status { status: 500, body: "internal error".into(), retry_after: None };
    let old = tool_loop_with_failing_handoff(&env, vec![boom(), boom(), boom()]).await;
    assert_continued_from_the_hosts_document(&env, &old, 3, "500").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthorised_handoff_request_at_the_wall_continues_from_the_hosts_document() {
    let env = WallEnv::new(|_| {}).await;
    let denied = MockReply::Status { status: 401, body: r#"{"error":{"message":"invalid api key"}}"#.into(), retry_after: None };
    let old = tool_loop_with_failing_handoff(&env, vec![denied]).await;
    assert_continued_from_the_hosts_document(&env, &old, 1, "401").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fitted_handoff_request_refused_as_too_large_continues_from_the_hosts_document() {
    let env = WallEnv::new(|_| {}).await;
    let overflow = || MockReply::Status {
        status: 400,
        body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#.into(),
        retry_after: None,
    };
    let old = tool_loop_with_failing_handoff(&env, (0..handoff_fit_attempts()).map(|_| overflow()).collect()).await;
    assert_continued_from_the_hosts_document(&env, &old, handoff_fit_attempts(), "maximum context length").await;
}

/// The attempts of a refused handoff request (`auto::FIT_ATTEMPTS`, private: three).
fn handoff_fit_attempts() -> usize {
    3
}

/// An empty document cut at the output limit is no document; one with content is kept marked
/// (tests/auto_handoff.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_reply_cut_at_the_output_limit_continues_from_the_hosts_document() {
    let env = WallEnv::new(|_| {}).await;
    let old = tool_loop_with_failing_handoff(&env, vec![common::with_stop("", "length")]).await;
    assert_continued_from_the_hosts_document(&env, &old, 1, "no text").await;
}

/// `:Handoff` typed by the user does not fall back: they are there to try again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_the_user_asked_for_still_fails_without_a_document() {
    let env = WallEnv::new(|_| {}).await;
    let old = env.session_path();
    env.mock.push(MockReply::Status { status: 500, body: "internal error".into(), retry_after: None });
    let outcome = tokio::time::timeout(T, env.controller.handoff(HandoffOptions::default())).await.unwrap();
    assert!(matches!(outcome, HandoffOutcome::Failed { .. }), "{outcome:?}");
    assert_eq!(env.session_path(), old);
    assert_eq!(env.sessions().len(), 1, "no new session");
}

/// pi resumes a session started from the host's document, and its request holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_started_from_the_hosts_document() {
    let env = WallEnv::new(|_| {}).await;
    let denied = MockReply::Status { status: 401, body: "unauthorised".into(), retry_after: None };
    tool_loop_with_failing_handoff(&env, vec![denied]).await;
    let Some(sent) = env.pi_resumes().await else { return };
    assert!(sent[0].1.starts_with("<handoff-context>") && sent[0].1.contains(fallback::TITLE), "{sent:?}");
}
