//! The `/handoff` pipeline (issue 3, `doc/design.md`) against the loopback mock model. Each test
//! is named after the pipeline step or the improvement on the original (`Gap:`) it proves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{
    agent, agent_with, config, entry_lines, lines, seeded_session, session_files, slow, wire_messages, with_stop,
    DOCUMENT,
};
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::{AgentEvent, AgentSession, RunOptions, SwitchReason};
use handoff_nvim::core::controller::commands::{self, HandoffArgs};
use handoff_nvim::core::controller::{self, Controller, FrontEndTexts, Input, Level, Notice};
use handoff_nvim::core::handoff::{self, HandoffOptions, HandoffOutcome, Refusal};
use handoff_nvim::core::message::{Message, StopReason};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(10);

const NOTHING: &str = "Nothing to hand off (no messages yet)";
const BUSY: &str = "Cannot hand off while a response is in progress";

/// The exact content of the injected entry for `doc`.
fn wrapped(doc: &str) -> String {
    format!(
        "<handoff-context>\n{doc}\n</handoff-context>\n\nThe above is a handoff document from a previous session. Use this context to continue the work seamlessly."
    )
}

/// The prompt as the spec's section list requires it (our wording around it).
fn the_prompt() -> String {
    handoff::build_prompt(None)
}

fn spawn_handoff(controller: &Arc<Controller>, focus: Option<&str>) -> tokio::task::JoinHandle<HandoffOutcome> {
    let controller = controller.clone();
    let focus = focus.map(str::to_string);
    tokio::spawn(async move { controller.handoff(HandoffOptions { focus, ..Default::default() }).await })
}

/// The controller a front end would make for `agent`.
fn controller_of(agent: &Arc<AgentSession>) -> Arc<Controller> {
    Controller::new(agent.clone(), FrontEndTexts::default())
}


fn done(outcome: HandoffOutcome) -> (String, PathBuf, PathBuf, Vec<String>, PathBuf) {
    match outcome {
        HandoffOutcome::Done { document, session_file, parent_session, missing_sections, document_file, .. } => {
            (document, session_file.into(), parent_session.into(), missing_sections, document_file.into())
        }
        other => panic!("expected Done, got {other:?}"),
    }
}

fn failed(outcome: HandoffOutcome) -> String {
    match outcome {
        HandoffOutcome::Failed { message } => message,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// The old session after a handoff that did not happen: what it was, plus the attempt's two
/// messages (the prompt and the reply), nothing else. Returns the reply.
fn assert_old_session_gained_only_the_attempt(path: &Path, before: &[u8]) -> Value {
    let after = std::fs::read(path).unwrap();
    assert!(after.starts_with(before), "the old session's earlier lines changed");
    let added: Vec<Value> = std::str::from_utf8(&after[before.len()..])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(added.len(), 2, "{added:?}");
    assert!(added.iter().all(|e| e["type"] == "message"));
    assert_eq!(added[0]["message"]["role"], "user");
    assert_eq!(added[0]["message"]["content"][0]["text"], the_prompt().as_str());
    assert_eq!(added[1]["message"]["role"], "assistant");
    added[1]["message"].clone()
}

struct Setup {
    mock: MockServer,
    dir: tempfile::TempDir,
    agent: Arc<AgentSession>,
    controller: Arc<Controller>,
    old: PathBuf,
    before: Vec<u8>,
}

impl Setup {
    /// An agent on a session with `pairs` exchanges.
    async fn new(pairs: usize) -> Setup {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let agent = agent(&mock, seeded_session(dir.path(), pairs));
        let old = agent.session().path().to_path_buf();
        // A session with no message yet has no file (empty here).
        let before = std::fs::read(&old).unwrap_or_default();
        let controller = controller_of(&agent);
        Setup { mock, dir, agent, controller, old, before }
    }

    fn sessions(&self) -> Vec<PathBuf> {
        session_files(&self.dir.path().join("sessions"))
    }

    /// Nothing was created: only the old session exists, and no handoff document folder.
    fn assert_no_new_session(&self) {
        // The old session, if it has a file (one with no message yet has none).
        let expected: Vec<PathBuf> = Some(self.old.clone()).filter(|p| p.exists()).into_iter().collect();
        assert_eq!(self.sessions(), expected);
        let folder = self.old.parent().unwrap();
        let dirs: Vec<_> =
            std::fs::read_dir(folder).into_iter().flatten().flatten().filter(|e| e.path().is_dir()).collect();
        assert!(dirs.is_empty(), "{dirs:?}");
        assert_eq!(self.agent.session().path(), self.old);
    }
}

// ---------------------------------------------------------------------------------------------
// Success: §2.4–2.6, §3, and the gaps about lineage, model entries, durability, the markdown file

#[tokio::test]
async fn success_old_session_gains_the_prompt_and_the_reply_as_message_entries_and_nothing_else() {
    let s = Setup::new(2).await;
    s.mock.push(MockReply::text(DOCUMENT));
    done(s.controller.handoff(HandoffOptions::default()).await);
    let reply = assert_old_session_gained_only_the_attempt(&s.old, &s.before);
    assert_eq!(reply["content"][0]["text"], DOCUMENT);
    assert_eq!(reply["stopReason"], "stop");
    // The request was the whole transcript and then the prompt, sent verbatim.
    assert_eq!(
        wire_messages(&s.mock.requests()[0]),
        [
            ("user", "question 0"),
            ("assistant", "answer 0"),
            ("user", "question 1"),
            ("assistant", "answer 1"),
            ("user", the_prompt().as_str()),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}

#[tokio::test]
async fn success_new_session_header_names_the_old_file_and_its_first_entries_are_exact() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::text(DOCUMENT));
    let (document, session_file, parent, missing, _) = done(s.controller.handoff(HandoffOptions::default()).await);
    assert_eq!(document, DOCUMENT);
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(parent, s.old);
    assert!(parent.is_absolute());
    assert_ne!(session_file, s.old);
    assert_eq!(s.agent.session().path(), session_file);
    assert_eq!(s.sessions().len(), 2);
    // Header: a new v3 session whose parent is the old file's absolute path.
    let all = lines(&session_file);
    assert_eq!(all[0]["type"], "session");
    assert_eq!(all[0]["version"], 3);
    assert_eq!(all[0]["parentSession"], s.old.to_str().unwrap());
    assert_eq!(all[0]["cwd"], common::CWD);
    assert_eq!(all[0]["id"], s.agent.session().session_id());
    // Entries: model_change, thinking_level_change, the handoff custom_message; nothing else.
    let entries = &all[1..];
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert_eq!(entries[0]["type"], "model_change");
    assert_eq!((&entries[0]["provider"], &entries[0]["modelId"]), (&json!("mock"), &json!("mock-model")));
    assert_eq!(entries[0]["parentId"], Value::Null);
    assert_eq!(entries[1]["type"], "thinking_level_change");
    assert_eq!(entries[1]["thinkingLevel"], "off");
    assert_eq!(entries[1]["parentId"], entries[0]["id"]);
    assert_eq!(entries[2]["type"], "custom_message");
    assert_eq!(entries[2]["customType"], "handoff");
    assert_eq!(entries[2]["display"], true);
    assert_eq!(entries[2]["content"], wrapped(DOCUMENT).as_str());
    assert_eq!(entries[2]["parentId"], entries[1]["id"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&session_file).unwrap().permissions().mode() & 0o777, 0o600);
    }
}

#[tokio::test]
async fn success_document_is_also_written_as_handoff_md_beside_the_new_session() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::text(DOCUMENT));
    let (_, session_file, _, _, document_file) = done(s.controller.handoff(HandoffOptions::default()).await);
    let expected = session_file.with_extension("").join("handoff.md");
    assert_eq!(document_file, expected);
    assert_eq!(std::fs::read_to_string(&expected).unwrap().trim_end(), DOCUMENT);
}

#[tokio::test]
async fn success_the_next_prompt_starts_with_the_wrapped_document_as_a_user_message() {
    let s = Setup::new(2).await;
    s.mock.push(MockReply::text(DOCUMENT));
    let (_, session_file, ..) = done(s.controller.handoff(HandoffOptions::default()).await);
    // The active context is the injected document, not the old transcript.
    let state_messages: Vec<String> = s.agent.context_messages().iter().map(Message::text).collect();
    assert_eq!(state_messages, [wrapped(DOCUMENT)]);
    s.agent.prompt("carry on", RunOptions::default()).await.unwrap();
    let request = s.mock.requests().last().cloned().unwrap();
    assert_eq!(
        wire_messages(&request),
        [("user".to_string(), wrapped(DOCUMENT)), ("user".to_string(), "carry on".to_string())]
    );
    // And it goes on in the new session, which reads back the same way.
    let entries = entry_lines(&session_file);
    assert_eq!(entries.len(), 5);
    let reopened = handoff_nvim::core::session::SessionManager::open(&session_file, Path::new("/unused")).unwrap();
    assert_eq!(reopened.build_session_context().messages[0].text(), wrapped(DOCUMENT));
}

#[tokio::test]
async fn success_events_handoff_start_session_switch_handoff_end_and_the_flag_clears() {
    let s = Setup::new(1).await;
    s.mock.push(slow(&["## Goal\n", "x"], 0, 200));
    let mut rx = s.agent.subscribe();
    assert!(!s.controller.is_generating_handoff());
    let run = spawn_handoff(&s.controller, Some("tests"));
    common::first_delta(&mut rx).await;
    assert!(s.controller.is_generating_handoff());
    let (_, session_file, ..) = done(run.await.unwrap());
    assert!(!s.controller.is_generating_handoff());
    let mut seen = Vec::new();
    while let Ok(e) = rx.try_recv() {
        match e {
            AgentEvent::SessionSwitch { old, new, reason, .. } => {
                assert_eq!(old.as_deref(), Some(s.old.to_str().unwrap()));
                assert_eq!(new, session_file.to_str().unwrap());
                assert_eq!(reason, SwitchReason::Handoff);
                seen.push("session_switch");
            }
            AgentEvent::HandoffEnd { outcome, .. } => {
                assert!(matches!(outcome, HandoffOutcome::Done { .. }));
                seen.push("handoff_end");
            }
            AgentEvent::AgentEnd { .. } => seen.push("agent_end"),
            _ => {}
        }
    }
    assert_eq!(seen, ["agent_end", "session_switch", "handoff_end"]);
}

#[tokio::test]
async fn success_handoff_start_is_emitted_with_the_focus() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::text(DOCUMENT));
    let mut rx = s.agent.subscribe();
    done(s.controller.handoff(HandoffOptions::focus("  the parser ")).await);
    // The lifecycle entering its handoff phase comes first; then the pipeline's start.
    assert_eq!(rx.try_recv().unwrap(), AgentEvent::Lifecycle { phase: "handoff", busy: true });
    match rx.try_recv().unwrap() {
        AgentEvent::HandoffStart { focus, .. } => assert_eq!(focus.as_deref(), Some("the parser")),
        other => panic!("first event after the lifecycle's {other:?}"),
    }
}

#[tokio::test]
async fn section_check_missing_sections_are_a_warning_not_a_failure() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::text("## Goal\nShip it.\n\n## Next Steps\n1. Ship"));
    let outcome = s.controller.handoff(HandoffOptions::default()).await;
    let notices = controller::handoff_notices(&outcome);
    let (_, _, _, missing, _) = done(outcome);
    assert_eq!(missing, ["Constraints & Preferences", "Progress", "Key Decisions", "Critical Context"]);
    assert_eq!(notices[0], Notice { level: Level::Info, message: "New session started with handoff context".into() });
    assert_eq!(notices[1].level, Level::Warn);
    assert!(notices[1].message.contains("Constraints & Preferences, Progress, Key Decisions, Critical Context"));
}

// ---------------------------------------------------------------------------------------------
// §2.1: the prompt, focus, template expansion off

#[tokio::test]
async fn prompt_asks_for_the_six_sections_in_order_as_headings() {
    let prompt = the_prompt();
    let mut at = 0;
    for s in handoff::SECTIONS {
        let i = prompt[at..].find(&format!("## {s}")).unwrap_or_else(|| panic!("{s} missing or out of order"));
        at += i + 1;
    }
    assert_eq!(
        handoff::SECTIONS,
        ["Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Critical Context", "Next Steps"]
    );
}

#[tokio::test]
async fn focus_is_appended_as_additional_focus() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::text(DOCUMENT));
    done(s.controller.handoff(HandoffOptions::focus("  only the parser  ")).await);
    let sent = wire_messages(&s.mock.requests()[0]).last().unwrap().1.clone();
    assert_eq!(sent, format!("{}\n\nAdditional focus: only the parser", the_prompt()));
}

#[tokio::test]
async fn focus_blank_is_not_appended() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::text(DOCUMENT));
    s.mock.push(MockReply::text(DOCUMENT));
    done(s.controller.handoff(HandoffOptions::focus(" \n\t ")).await);
    let sent = wire_messages(&s.mock.requests()[0]).last().unwrap().1.clone();
    assert!(!sent.contains("Additional focus"), "{sent}");
    assert_eq!(sent, the_prompt());
}

/// Templates expand only text that starts with `/name`, and the handoff's prompt starts with the
/// fixed instruction: a handoff alone cannot show whether its run expands templates. What can
/// fail is the setting itself: the agent, given the handoff's run options (`RUN_OPTIONS`, the
/// constant `generate_and_switch` runs with), sends `/review x` as typed, while the default
/// options expand the same text from the same templates folder.
#[tokio::test]
async fn handoff_run_options_send_a_template_command_verbatim_where_the_default_expands_it() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let templates = dir.path().join("prompts");
    std::fs::create_dir_all(&templates).unwrap();
    std::fs::write(templates.join("review.md"), "TEMPLATE BODY for $1").unwrap();
    let agent = agent_with(config(&mock), seeded_session(dir.path(), 1), Some(templates));
    agent.prompt("/review x", RunOptions::default()).await.unwrap();
    agent.prompt("/review x", handoff::RUN_OPTIONS).await.unwrap();
    let last_user = |i: usize| wire_messages(&mock.requests()[i]).last().unwrap().clone();
    assert_eq!(last_user(0), ("user".to_string(), "TEMPLATE BODY for x".to_string()), "the default expands");
    assert_eq!(last_user(1), ("user".to_string(), "/review x".to_string()), "the handoff's options do not");
    // And a focus that looks like a template reaches the model as typed, after the instruction.
    mock.push(MockReply::text(DOCUMENT));
    done(controller_of(&agent).handoff(HandoffOptions::focus("/review $1")).await);
    let sent = wire_messages(&mock.requests()[2]).last().unwrap().1.clone();
    assert_eq!(sent, format!("{}\n\nAdditional focus: /review $1", the_prompt()));
}

// ---------------------------------------------------------------------------------------------
// §1.4 pre-flight guard, twice, one rule, current branch

async fn assert_refused_by_both_layers(s: &Setup, reason: Refusal, message: &str) {
    let mut rx = s.agent.subscribe();
    // The UI layer's guard, and the pipeline's own rule (a `Handoff` runs only through the
    // lifecycle, which asks both).
    assert_eq!(s.controller.preflight(), Err(reason));
    if reason != Refusal::ReviewPending {
        assert_eq!(handoff::preflight(&s.agent, false), Err(reason));
    }
    assert!(rx.try_recv().is_err(), "the pipeline announces no refusal");
    // Through the controller, the refusal is reported on the event route, and only that.
    assert_eq!(s.controller.handoff(HandoffOptions::default()).await, HandoffOutcome::Refused { reason });
    match rx.try_recv() {
        Ok(AgentEvent::Notice(notice)) => assert_eq!(notice, Notice { level: Level::Warn, message: message.into() }),
        other => panic!("expected the refusal as a notice, got {other:?}"),
    }
    assert!(rx.try_recv().is_err(), "a refused handoff emits nothing else");
    assert!(!s.controller.is_generating_handoff());
}

#[tokio::test]
async fn guard_fewer_than_2_messages_refused_by_both_layers() {
    for pairs in [0, 1] {
        let s = Setup::new(0).await;
        if pairs == 1 {
            s.agent.session().append_message(&Message::user("only one")).unwrap();
        }
        // With no message at all the session has no file yet: a refusal must not make one.
        let before = std::fs::read(&s.old).ok();
        assert_refused_by_both_layers(&s, Refusal::NothingToHandOff, NOTHING).await;
        assert_eq!(std::fs::read(&s.old).ok(), before);
        assert_eq!(s.mock.requests().len(), 0);
        s.assert_no_new_session();
        let notices = controller::handoff_notices(&HandoffOutcome::Refused { reason: Refusal::NothingToHandOff });
        assert_eq!(notices, [Notice { level: Level::Warn, message: NOTHING.into() }]);
    }
}

#[tokio::test]
async fn guard_counts_the_current_branch_only_not_all_branches() {
    let s = Setup::new(0).await;
    let root = s.agent.session().get_entries()[0].id.clone();
    {
        let mut session = s.agent.session();
        for i in 0..3 {
            session.append_message(&Message::user(format!("old branch {i}"))).unwrap();
            session.append_message(&common::assistant("reply")).unwrap();
        }
        session.branch(&root).unwrap();
        session.append_message(&Message::user("the current branch has one message")).unwrap();
        assert_eq!(session.get_entries().iter().filter(|e| e.is_message()).count(), 7);
    }
    assert_refused_by_both_layers(&s, Refusal::NothingToHandOff, NOTHING).await;
    assert_eq!(s.mock.requests().len(), 0);
    // One more message on the current branch and both layers agree it may go ahead.
    s.agent.session().append_message(&common::assistant("second on this branch")).unwrap();
    assert_eq!(s.controller.preflight(), Ok(()));
}

#[tokio::test]
async fn busy_handoff_while_a_response_streams_is_refused_and_nothing_changes() {
    let s = Setup::new(1).await;
    s.mock.push(slow(&["long ", "reply"], 0, 500));
    let run = {
        let agent = s.agent.clone();
        tokio::spawn(async move { agent.prompt("busy now", RunOptions::default()).await })
    };
    assert!(s.mock.wait_for_requests(1, T).await);
    assert_refused_by_both_layers(&s, Refusal::Busy, BUSY).await;
    run.await.unwrap().unwrap();
    assert_eq!(s.mock.requests().len(), 1);
    s.assert_no_new_session();
}

#[tokio::test]
async fn busy_a_second_handoff_while_one_generates_is_refused() {
    let s = Setup::new(1).await;
    s.mock.push(slow(&["## Goal\n", "x"], 0, 500));
    let run = spawn_handoff(&s.controller, None);
    assert!(s.mock.wait_for_requests(1, T).await);
    assert_eq!(s.controller.handoff(HandoffOptions::default()).await, HandoffOutcome::Refused { reason: Refusal::Busy });
    assert_eq!(s.controller.preflight(), Err(Refusal::Busy));
    // The first handoff is unharmed by the refused one.
    done(run.await.unwrap());
    assert_eq!(s.mock.requests().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// §5 cancellation, and the gap "generic abort succeeds with a partial document"

#[tokio::test]
async fn abort_handoff_before_the_first_token_is_cancelled_and_creates_no_session() {
    let s = Setup::new(1).await;
    s.mock.push(slow(&["## Goal\n", "too late"], 3_000, 0));
    let run = spawn_handoff(&s.controller, None);
    assert!(s.mock.wait_for_requests(1, T).await);
    s.controller.abort_handoff();
    // Cancelled, not Done: the document's first piece was 3 s away when the cancel came.
    let outcome = run.await.unwrap();
    assert_eq!(outcome, HandoffOutcome::Cancelled);
    assert_eq!(controller::handoff_notices(&outcome), [Notice { level: Level::Error, message: "Handoff cancelled".into() }]);
    s.assert_no_new_session();
    let reply = assert_old_session_gained_only_the_attempt(&s.old, &s.before);
    assert_eq!(reply["stopReason"], "aborted");
    assert!(!s.controller.is_generating_handoff());
    assert!(!s.agent.is_busy());
}

#[tokio::test]
async fn abort_handoff_mid_stream_is_cancelled_and_creates_no_session() {
    let s = Setup::new(1).await;
    s.mock.push(slow(&["## Goal\n", "half ", "a ", "document ", "that ", "goes ", "on"], 0, 150));
    let mut rx = s.agent.subscribe();
    let run = spawn_handoff(&s.controller, None);
    common::first_delta(&mut rx).await;
    s.controller.abort_handoff();
    assert_eq!(run.await.unwrap(), HandoffOutcome::Cancelled);
    s.assert_no_new_session();
    let reply = assert_old_session_gained_only_the_attempt(&s.old, &s.before);
    assert_eq!(reply["stopReason"], "aborted");
    assert!(reply["content"][0]["text"].as_str().unwrap().starts_with("## Goal"));
    // The agent stays on the old session with the old context plus the attempt.
    assert_eq!(s.agent.context_messages().len(), 4);
    assert!(!s.controller.is_generating_handoff());
}

#[tokio::test]
async fn generic_abort_during_a_handoff_is_cancelled_not_a_handoff_of_partial_text() {
    let s = Setup::new(1).await;
    s.mock.push(slow(&["## Goal\n", "partial ", "document ", "never ", "finished"], 0, 150));
    let mut rx = s.agent.subscribe();
    let run = spawn_handoff(&s.controller, None);
    common::first_delta(&mut rx).await;
    s.agent.abort();
    assert_eq!(run.await.unwrap(), HandoffOutcome::Cancelled);
    s.assert_no_new_session();
    assert_old_session_gained_only_the_attempt(&s.old, &s.before);
}

#[tokio::test]
async fn generic_abort_before_any_token_is_cancelled_not_an_older_reply() {
    let s = Setup::new(1).await;
    s.mock.push(slow(&["late"], 3_000, 0));
    let run = spawn_handoff(&s.controller, None);
    assert!(s.mock.wait_for_requests(1, T).await);
    s.agent.abort();
    assert_eq!(run.await.unwrap(), HandoffOutcome::Cancelled);
    s.assert_no_new_session();
}

// ---------------------------------------------------------------------------------------------
// Failures: provider errors, no text, length; stale replies never reused

#[tokio::test]
async fn provider_error_500_fails_naming_it_and_creates_no_session() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::Status { status: 500, body: r#"{"error":{"message":"model melted"}}"#.into(), retry_after: None });
    let outcome = s.controller.handoff(HandoffOptions::default()).await;
    let notice = controller::handoff_notices(&outcome);
    let message = failed(outcome);
    assert!(message.contains("500") && message.contains("model melted"), "{message}");
    assert_eq!(notice, [Notice { level: Level::Error, message: format!("Handoff failed: {message}") }]);
    s.assert_no_new_session();
    let reply = assert_old_session_gained_only_the_attempt(&s.old, &s.before);
    assert_eq!(reply["stopReason"], "error");
}

#[tokio::test]
async fn provider_error_401_fails_naming_it_and_creates_no_session() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::Status { status: 401, body: r#"{"error":{"message":"invalid api key"}}"#.into(), retry_after: None });
    let message = failed(s.controller.handoff(HandoffOptions::default()).await);
    assert!(message.contains("401") && message.contains("invalid api key"), "{message}");
    s.assert_no_new_session();
}

#[tokio::test]
async fn empty_reply_fails_with_no_text_not_cancelled() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::Empty);
    let outcome = s.controller.handoff(HandoffOptions::default()).await;
    assert_eq!(
        controller::handoff_notices(&outcome),
        [Notice { level: Level::Error, message: "Handoff failed: the model returned no text".into() }]
    );
    assert_eq!(failed(outcome), "the model returned no text");
    s.assert_no_new_session();
}

#[tokio::test]
async fn thinking_only_reply_fails_with_no_text() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::Text {
        chunks: vec![],
        chunk_delay_ms: 0,
        first_delay_ms: 0,
        stop: "stop".into(),
        thinking: vec!["I should write ".into(), "a document.".into()],
    });
    assert_eq!(failed(s.controller.handoff(HandoffOptions::default()).await), "the model returned no text");
    s.assert_no_new_session();
}

#[tokio::test]
async fn length_stop_fails_naming_the_reason() {
    let s = Setup::new(1).await;
    s.mock.push(with_stop("## Goal\nA document cut off at the out", "length"));
    let message = failed(s.controller.handoff(HandoffOptions::default()).await);
    assert!(message.contains("length"), "{message}");
    s.assert_no_new_session();
}

#[tokio::test]
async fn an_older_assistant_reply_is_never_reused_when_the_first_turn_errors() {
    let s = Setup::new(2).await;
    s.mock.push(MockReply::Status { status: 500, body: "boom".into(), retry_after: None });
    let outcome = s.controller.handoff(HandoffOptions::default()).await;
    let text = format!("{outcome:?}");
    assert!(!text.contains("answer 1") && !text.contains("answer 0"), "{text}");
    assert!(matches!(outcome, HandoffOutcome::Failed { .. }), "{outcome:?}");
    // Nor when the turn streams nothing at all.
    s.mock.push(MockReply::NoChoices);
    let outcome = s.controller.handoff(HandoffOptions::default()).await;
    assert!(matches!(outcome, HandoffOutcome::Failed { .. }), "{outcome:?}");
    assert!(!format!("{outcome:?}").contains("answer"));
    s.assert_no_new_session();
}

// ---------------------------------------------------------------------------------------------
// §2.4: queues cleared, todo counter reset

#[tokio::test]
async fn queues_are_cleared_and_the_todo_counter_reset_on_success() {
    let s = Setup::new(1).await;
    s.agent.prompt("warm up", RunOptions::default()).await.unwrap();
    s.mock.push(slow(&["## Goal\n", "the ", "document"], 0, 200));
    let mut rx = s.agent.subscribe();
    let run = spawn_handoff(&s.controller, None);
    common::first_delta(&mut rx).await;
    s.agent.steer("steer during handoff");
    s.agent.follow_up("follow up during handoff");
    s.agent.queue_next_turn(Message::user("next turn during handoff"));
    let (document, ..) = done(run.await.unwrap());
    // The document is the reply to the handoff prompt, not to a message queued meanwhile.
    assert_eq!(document, "## Goal\nthe document");
    assert_eq!(s.mock.requests().len(), 2, "the queued messages must not be answered inside the handoff");
    // (The todo counter is reset by the same session switch: tests/agent_todos.rs sends real
    // reminders and sees it reset by `/new`.)
    assert_eq!(s.agent.queued(), Default::default());
}

#[tokio::test]
async fn queues_survive_a_failed_handoff() {
    // Nothing the user wrote is lost: when the handoff does not happen, queued messages stay.
    let s = Setup::new(1).await;
    s.mock.push(MockReply::Status { status: 500, body: "boom".into(), retry_after: None });
    s.agent.follow_up("later");
    failed(s.controller.handoff(HandoffOptions::default()).await);
    assert_eq!(s.agent.queued().follow_up, 1);
}

// ---------------------------------------------------------------------------------------------
// Lineage: a second handoff chains child → parent → grandparent

#[tokio::test]
async fn lineage_a_second_handoff_chains_child_parent_grandparent() {
    let s = Setup::new(1).await;
    s.mock.push(MockReply::text("## Goal\nFIRST DOC"));
    let (_, child, parent_of_child, ..) = done(s.controller.handoff(HandoffOptions::default()).await);
    assert_eq!(parent_of_child, s.old);
    // The new session has no messages yet: a handoff right away has nothing to hand off.
    assert_eq!(s.controller.handoff(HandoffOptions::default()).await, HandoffOutcome::Refused { reason: Refusal::NothingToHandOff });
    s.agent.prompt("work in the child", RunOptions::default()).await.unwrap();
    s.mock.push(MockReply::text("## Goal\nSECOND DOC"));
    let (_, grandchild, parent_of_grandchild, ..) = done(s.controller.handoff(HandoffOptions::default()).await);
    assert_eq!(parent_of_grandchild, child);
    // The second handoff request carried the first document.
    let request = s.mock.requests().last().cloned().unwrap();
    assert_eq!(wire_messages(&request)[0], ("user".to_string(), wrapped("## Goal\nFIRST DOC")));
    // Follow the chain through the headers alone.
    let mut chain = vec![grandchild.clone()];
    while let Some(p) = lines(chain.last().unwrap())[0]["parentSession"].as_str() {
        chain.push(PathBuf::from(p));
    }
    assert_eq!(chain, [grandchild, child, s.old.clone()]);
    assert_eq!(s.sessions().len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Gap: the request is fitted to the model's context window

#[tokio::test]
async fn context_fit_a_transcript_three_times_the_window_still_hands_off() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut session = seeded_session(dir.path(), 0);
    session.append_message(&Message::user("Investigate the failing build")).unwrap();
    for i in 0..6 {
        let id = format!("call_{i}");
        session.append_message(&common::tool_call(&id, &format!("cat log{i}.txt"))).unwrap();
        let output: String = (0..800).map(|n| format!("log line {n:04} of file {i}\n")).collect();
        session.append_message(&common::tool_result(&id, &output)).unwrap();
    }
    session.append_message(&common::assistant("The build fails in the linker.")).unwrap();
    session.flush().unwrap();
    let old = session.path().to_path_buf();
    let stored_before = std::fs::read(&old).unwrap();
    let transcript_chars: usize =
        session.build_session_context().messages.iter().map(|m| m.content.char_len()).sum();
    let mut cfg = config(&mock);
    cfg.context_window = 8_000;
    cfg.max_tokens = 1_000;
    assert!(transcript_chars / 4 >= 3 * 8_000, "transcript is only {} tokens", transcript_chars / 4);
    let agent = agent_with(cfg, session, None);
    mock.push(MockReply::text(DOCUMENT));
    let outcome = controller_of(&agent).handoff(HandoffOptions::default()).await;
    let elided = match &outcome {
        HandoffOutcome::Done { elided, .. } => elided.clone(),
        other => panic!("{other:?}"),
    };
    assert!(elided.is_some());
    // Measured on the wire, estimated as documented (characters / 4, plus 8 per message for the
    // framing): the request leaves room for the reply.
    let body = &mock.requests()[0].body;
    let wire = body["messages"].as_array().unwrap();
    let chars: usize = wire
        .iter()
        .map(|m| {
            m["content"].as_str().map_or(0, |c| c.chars().count())
                + m.get("tool_calls").map_or(0, |t| t.to_string().chars().count())
        })
        .sum();
    let tokens = chars.div_ceil(4) + 8 * wire.len();
    assert!(tokens + 1_000 <= 8_000, "request of ~{tokens} tokens does not fit");
    let sent = wire_messages(&mock.requests()[0]);
    // It says what was elided, and the handoff prompt itself arrives whole, last.
    assert!(sent.iter().any(|(_, t)| t.contains("context window")), "no elision note");
    assert_eq!(sent.last().unwrap(), &("user".to_string(), the_prompt()));
    // The stored transcript is untouched: fitting happens in the request only.
    assert!(std::fs::read(&old).unwrap().starts_with(&stored_before));
}

// ---------------------------------------------------------------------------------------------
// §4 controller: the spec's exact strings; §1.2 trigger

#[test]
fn controller_notices_map_outcomes_to_the_specs_exact_strings() {
    let done = HandoffOutcome::Done {
        document: "d".into(),
        session_file: "/n.jsonl".into(),
        parent_session: "/o.jsonl".into(),
        missing_sections: vec![],
        document_file: "/n/handoff.md".into(),
        elided: None,
        facts: None,
        fallback: None,
        ledger: Default::default(),
        prepared: false,
    };
    let n = |level, m: &str| Notice { level, message: m.to_string() };
    assert_eq!(controller::handoff_notices(&done), [n(Level::Info, "New session started with handoff context")]);
    assert_eq!(controller::handoff_notices(&HandoffOutcome::Cancelled), [n(Level::Error, "Handoff cancelled")]);
    assert_eq!(
        controller::handoff_notices(&HandoffOutcome::Failed { message: "the model returned no text".into() }),
        [n(Level::Error, "Handoff failed: the model returned no text")]
    );
    assert_eq!(
        controller::handoff_notices(&HandoffOutcome::Refused { reason: Refusal::Busy }),
        [n(Level::Warn, BUSY)]
    );
}

#[test]
fn trigger_handoff_input_is_intercepted_before_prompt_submission() {
    let handoff = |focus: &str, to: Option<&str>| Input::Handoff(Ok(HandoffArgs { focus: focus.into(), to: to.map(str::to_string) }));
    assert_eq!(controller::classify_input("/handoff"), handoff("", None));
    assert_eq!(controller::classify_input("/handoff focus on X"), handoff("focus on X", None));
    assert_eq!(controller::classify_input("/handoff focus on X --to codex"), handoff("focus on X", Some("codex")));
    assert_eq!(controller::classify_input("/handoff --to"), Input::Handoff(Err(commands::TO_NEEDS_A_NAME)));
    assert_eq!(controller::classify_input("/handoffs"), Input::Prompt("/handoffs".into()));
    assert_eq!(controller::classify_input("tell me about /handoff"), Input::Prompt("tell me about /handoff".into()));
}

#[tokio::test]
async fn aborted_stop_reason_of_the_reply_is_what_makes_a_cancellation() {
    // Sanity of the mock setup used above: an aborted turn is recorded as such in the old session.
    let s = Setup::new(1).await;
    s.mock.push(slow(&["x"], 2_000, 0));
    let run = spawn_handoff(&s.controller, None);
    assert!(s.mock.wait_for_requests(1, T).await);
    s.controller.abort_handoff();
    run.await.unwrap();
    let last: Message = serde_json::from_value(entry_lines(&s.old).last().unwrap()["message"].clone()).unwrap();
    assert_eq!(last.stop_reason, Some(StopReason::Aborted));
}

#[tokio::test]
async fn context_fit_long_plain_turns_drop_the_oldest_first_and_keep_the_prompt_whole() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut session = seeded_session(dir.path(), 0);
    for i in 0..12 {
        session.append_message(&Message::user(format!("OLD-{i} {}", "question text ".repeat(300)))).unwrap();
        session.append_message(&common::assistant(&format!("REPLY-{i} {}", "answer text ".repeat(300)))).unwrap();
    }
    let mut cfg = config(&mock);
    cfg.context_window = 6_000;
    cfg.max_tokens = 1_000;
    let agent = agent_with(cfg, session, None);
    mock.push(MockReply::text(DOCUMENT));
    done(controller_of(&agent).handoff(HandoffOptions::default()).await);
    let sent = wire_messages(&mock.requests()[0]);
    let chars: usize = sent.iter().map(|(_, t)| t.chars().count()).sum();
    assert!(chars.div_ceil(4) + 8 * sent.len() + 1_000 <= 6_000, "~{} tokens", chars / 4);
    // The newest turns are there, the oldest are gone but the original task (the first user
    // message, right after the note), and the request says so first.
    assert!(sent[0].1.contains("oldest messages were left out"), "{}", sent[0].1);
    assert!(sent[1].1.starts_with("OLD-0 "), "{}", sent[1].1);
    assert!(sent.iter().any(|(_, t)| t.starts_with("REPLY-11")));
    assert!(!sent.iter().any(|(_, t)| t.starts_with("REPLY-0 ") || t.starts_with("OLD-1 ")));
    assert_eq!(sent.last().unwrap(), &("user".to_string(), the_prompt()));
}

#[tokio::test]
async fn context_fit_a_small_window_with_the_default_max_tokens_keeps_the_instruction_and_the_transcript() {
    // A small local model configured with its window only: max_tokens keeps its default (4096),
    // which alone would fill the window. The reply's reserve must not squeeze the request down
    // to a truncated instruction about nothing.
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&mock);
    cfg.context_window = 4_096;
    assert!(cfg.max_tokens as u64 >= cfg.context_window);
    let agent = agent_with(cfg, seeded_session(dir.path(), 3), None);
    mock.push(MockReply::text(DOCUMENT));
    let (_, _, _, _, _) = done(controller_of(&agent).handoff(HandoffOptions::default()).await);
    let sent = wire_messages(&mock.requests()[0]);
    assert_eq!(sent.last().unwrap(), &("user".to_string(), the_prompt()), "the instruction was cut");
    assert_eq!(sent.len(), 7, "the short transcript fits whole: {sent:?}");
}

#[tokio::test]
async fn success_over_the_anthropic_wire_format_too() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = handoff_nvim::core::provider::ProviderConfig::new(
        handoff_nvim::core::provider::Api::Anthropic,
        mock.anthropic_base_url(),
        "mock-model",
    );
    cfg.name = "mock".into();
    cfg.max_retries = 0;
    let agent = agent_with(cfg, seeded_session(dir.path(), 1), None);
    mock.push(MockReply::text(DOCUMENT));
    let (document, session_file, ..) = done(controller_of(&agent).handoff(HandoffOptions::default()).await);
    assert_eq!(document, DOCUMENT);
    assert!(mock.requests()[0].path.ends_with("/messages"));
    agent.prompt("carry on", RunOptions::default()).await.unwrap();
    let request = mock.requests().last().cloned().unwrap();
    assert!(request.path.ends_with("/messages"));
    // Anthropic's wire joins consecutive user turns: the document is the first block.
    let first = &request.body["messages"][0];
    assert_eq!(first["role"], "user");
    let blocks: Vec<&str> =
        first["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect();
    assert_eq!(blocks, [wrapped(DOCUMENT).as_str(), "carry on"]);
    assert_eq!(entry_lines(&session_file)[0]["provider"], "mock");
}

#[tokio::test]
async fn success_from_a_session_written_by_omp_keeps_its_title_line_and_history() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = common::copy_fixture("omp-18.2.3-print-session.jsonl", dir.path());
    let before = std::fs::read(&file).unwrap();
    let session = handoff_nvim::core::session::SessionManager::open(&file, &dir.path().join("sessions")).unwrap();
    let agent = agent(&mock, session);
    mock.push(MockReply::text(DOCUMENT));
    let (_, session_file, parent, ..) = done(controller_of(&agent).handoff(HandoffOptions::default()).await);
    assert_eq!(parent, file);
    assert_old_session_gained_only_the_attempt(&file, &before);
    assert_eq!(
        wire_messages(&mock.requests()[0])[..2],
        [
            ("user".to_string(), "Say hello".to_string()),
            ("assistant".to_string(), "Hello from the mock server.".to_string())
        ]
    );
    // The new session lives in the session folder of the omp session's working directory.
    let folder = handoff_nvim::core::session::paths::cwd_folder_name(Path::new("/home/dev/project"));
    assert_eq!(session_file.parent().unwrap(), dir.path().join("sessions").join(folder));
}
