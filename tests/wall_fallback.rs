//! Never die at the wall (issue 32, `:help handoff-auto`): when the model writes no document for
//! the automatic handoff (5xx after the retries, a 401, every fitted request refused as too
//! large, an empty reply cut at the output limit), the new session starts from the host's own
//! document and the task goes on; `:Handoff` typed by the user still fails. pi 0.73.1 resumes
//! the new session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{config, entry_lines, session_files, tool_call_reply, wait_until, wire_messages};
use handoff_mock::{MockReply, MockServer, MockUsage};
use handoff_nvim::core::agent::{AgentConfig, AgentEvent, AgentSession, Wall, WallSettings};
use handoff_nvim::core::controller::{self, Controller, FrontEndTexts, Ran};
use handoff_nvim::core::handoff::{self, fallback, HandoffOptions, HandoffOutcome};
use handoff_nvim::core::message::Message;
use handoff_nvim::core::provider::ProviderConfig;
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::consent::{Level, Policy};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(20);
const WINDOW: u64 = 20_000;
const TASK: &str = "read notes.txt and tell me the number";

struct Env {
    mock: MockServer,
    dir: tempfile::TempDir,
    agent: Arc<AgentSession>,
    controller: Arc<Controller>,
    events: Arc<Mutex<Vec<AgentEvent>>>,
}

impl Env {
    async fn new(adjust: impl FnOnce(&mut ProviderConfig)) -> Env {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut provider = config(&mock);
        provider.context_window = WINDOW;
        adjust(&mut provider);
        let agent = Arc::new(AgentSession::new(
            AgentConfig {
                policy: Policy { level: Level::AllowAll, ..Policy::default() },
                wall: WallSettings::default(),
                ..AgentConfig::new(provider)
            },
            seeded(dir.path()),
        ));
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut rx = agent.subscribe();
        let sink = events.clone();
        tokio::spawn(async move {
            while let Ok(e) = rx.recv().await {
                sink.lock().unwrap().push(e);
            }
        });
        Env { mock, dir, agent, controller, events }
    }

    fn session_path(&self) -> PathBuf {
        self.agent.session().path().to_path_buf()
    }

    fn sessions(&self) -> Vec<PathBuf> {
        session_files(&self.dir.path().join("sessions"))
    }

    async fn auto_end(&self) -> (HandoffOutcome, Wall) {
        let ends = || {
            self.events
                .lock()
                .unwrap()
                .iter()
                .filter_map(|e| match e {
                    AgentEvent::HandoffEnd { outcome, auto: Some(wall), .. } => Some((outcome.clone(), *wall)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        wait_until("an automatic handoff's end", T, || !ends().is_empty()).await;
        ends().pop().unwrap()
    }

    /// A prompt whose tool call passes the wall (mid tool loop), the handoff's replies
    /// `failures`, and the task's answer in the new session; returns the old session.
    async fn tool_loop_with_failing_handoff(&self, failures: Vec<MockReply>) -> PathBuf {
        let old = self.session_path();
        let file = self.dir.path().join("notes.txt");
        std::fs::write(&file, "the secret number is 42\n").unwrap();
        let usage = MockUsage { input: 15_000, output: Some(100), ..MockUsage::default() };
        self.mock.push(tool_call_reply("read", json!({ "path": file.to_str().unwrap() }), "call_1").with_usage(usage));
        for reply in failures {
            self.mock.push(reply);
        }
        self.mock.push(MockReply::text("The number is 42: finished."));
        let ran = tokio::time::timeout(T, self.controller.run_input(TASK)).await.expect("the prompt hung");
        let Ran::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
        assert_eq!(result.last_assistant().unwrap().text(), "The number is 42: finished.", "the task went on");
        assert!(result.wall.is_none());
        old
    }
}

/// [`common::seeded_session`]'s two exchanges, in a session whose working directory exists
/// (`<dir>/project`), so pi can resume it.
fn seeded(dir: &Path) -> SessionManager {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut s = SessionManager::create(&dir.join("sessions"), &project, None).unwrap();
    s.append_model_change("mock", "mock-model").unwrap();
    s.append_thinking_level_change("off").unwrap();
    for i in 0..2 {
        s.append_message(&Message::user(format!("question {i}"))).unwrap();
        s.append_message(&common::assistant(&format!("answer {i}"))).unwrap();
    }
    s.flush().unwrap();
    s
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
    let env = Env::new(|c| c.max_retries = 2).await;
    let boom = || MockReply::Status { status: 500, body: "internal error".into(), retry_after: None };
    let old = env.tool_loop_with_failing_handoff(vec![boom(), boom(), boom()]).await;
    assert_continued_from_the_hosts_document(&env, &old, 3, "500").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthorised_handoff_request_at_the_wall_continues_from_the_hosts_document() {
    let env = Env::new(|_| {}).await;
    let denied = MockReply::Status { status: 401, body: r#"{"error":{"message":"invalid api key"}}"#.into(), retry_after: None };
    let old = env.tool_loop_with_failing_handoff(vec![denied]).await;
    assert_continued_from_the_hosts_document(&env, &old, 1, "401").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fitted_handoff_request_refused_as_too_large_continues_from_the_hosts_document() {
    let env = Env::new(|_| {}).await;
    let overflow = || MockReply::Status {
        status: 400,
        body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#.into(),
        retry_after: None,
    };
    let old = env.tool_loop_with_failing_handoff((0..handoff_fit_attempts()).map(|_| overflow()).collect()).await;
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
    let env = Env::new(|_| {}).await;
    let old = env.tool_loop_with_failing_handoff(vec![common::with_stop("", "length")]).await;
    assert_continued_from_the_hosts_document(&env, &old, 1, "no text").await;
}

/// `:Handoff` typed by the user does not fall back: they are there to try again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_the_user_asked_for_still_fails_without_a_document() {
    let env = Env::new(|_| {}).await;
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
    use common::pi::{pi_bin, pi_home, pi_resume};
    let env = Env::new(|_| {}).await;
    let denied = MockReply::Status { status: 401, body: "unauthorised".into(), retry_after: None };
    env.tool_loop_with_failing_handoff(vec![denied]).await;
    let new = env.session_path();
    let Some(pi) = pi_bin() else { return };
    let root = env.dir.path();
    pi_home(root, "openai-completions", &env.mock.openai_base_url());
    env.mock.push(MockReply::text("pi goes on"));
    let out = tokio::time::timeout(T * 3, pi_resume(&pi, root, &new, "mock", "mock-model", "go on").output())
        .await
        .expect("pi hung")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "pi failed: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("pi goes on"), "{stdout}");
    let sent = wire_messages(env.mock.requests().last().unwrap());
    assert!(sent[0].1.starts_with("<handoff-context>") && sent[0].1.contains(fallback::TITLE), "{sent:?}");
    assert_eq!(sent.last().unwrap().1, "go on");
}
