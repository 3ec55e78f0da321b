//! Handoff 2 (issue 13): the facts a handoff carries whatever the model writes — files read and
//! modified (pi's tags and rule), commands with exit codes, open todos, the last unresolved
//! error — from the branch and, cumulatively, from the handoff before it; and review mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::Path;
use std::sync::Arc;

use common::{agent, call_message as call, entry_lines, result_message as result, seeded_session};
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::AgentSession;
use handoff_nvim::core::controller::{Controller, FrontEndTexts};
use handoff_nvim::core::handoff::{Facts, HandoffOptions, HandoffOutcome};
use handoff_nvim::core::message::Message;
use handoff_nvim::core::session::SessionManager;
use serde_json::{json, Value};

/// A session that read, edited, ran commands, kept todos and hit an error.
fn working_session(s: &mut SessionManager) {
    let steps: Vec<(Message, Message)> = vec![
        (call("c1", "read", json!({"path": "src/lib.rs"})), result("c1", "read", "fn main() {}", false, Value::Null)),
        (call("c2", "read", json!({"path": "src/parse.rs"})), result("c2", "read", "...", false, Value::Null)),
        (call("c3", "edit", json!({"path": "src/parse.rs", "edits": []})), result("c3", "edit", "Successfully replaced 1 block(s) in src/parse.rs.", false, Value::Null)),
        (call("c4", "write", json!({"path": "NOTES.md", "content": "x"})), result("c4", "write", "Successfully wrote 1 bytes to NOTES.md", false, Value::Null)),
        (call("c5", "bash", json!({"command": "cargo build"})), result("c5", "bash", "Finished", false, Value::Null)),
        (call("c6", "bash", json!({"command": "cargo test"})), result("c6", "bash", "test failed\n\nCommand exited with code 101", true, Value::Null)),
        (
            call("c7", "todo_write", json!({})),
            result("c7", "todo_write", "todos", false, json!({"todos": [
                {"content": "Fix the parser test", "status": "in_progress", "activeForm": "Fixing the parser test"},
                {"content": "Write docs", "status": "pending", "activeForm": "Writing docs"},
                {"content": "Set up CI", "status": "completed", "activeForm": "Setting up CI"}
            ]})),
        ),
    ];
    for (c, r) in steps {
        s.append_message(&c).unwrap();
        s.append_message(&r).unwrap();
    }
    s.flush().unwrap();
}

/// A mock, and an agent with its controller on a session (in `dir`) that did the steps of
/// [`working_session`].
struct Worked {
    mock: MockServer,
    dir: tempfile::TempDir,
    agent: Arc<AgentSession>,
    controller: Arc<Controller>,
}

impl Worked {
    async fn new() -> Worked {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut session = seeded_session(dir.path(), 1);
        working_session(&mut session);
        let agent = agent(&mock, session);
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        Worked { mock, dir, agent, controller }
    }
}

/// The injected entry of a handoff's new session.
fn handoff_entry(session_file: &str) -> Value {
    entry_lines(Path::new(session_file)).into_iter().find(|e| e["type"] == "custom_message").unwrap()
}

#[tokio::test]
async fn a_document_without_any_section_still_hands_over_every_fact() {
    let Worked { mock, agent, controller, .. } = Worked::new().await;
    // A model that ignores the six sections.
    mock.push(MockReply::text("We worked on the parser."));
    let HandoffOutcome::Done { session_file, missing_sections, facts, document, .. } = controller.handoff(HandoffOptions::default()).await else {
        panic!("the handoff failed")
    };
    assert_eq!(missing_sections.len(), 6);
    assert_eq!(document, "We worked on the parser.");
    let facts = facts.expect("facts for the split");
    let entry = handoff_entry(&session_file);
    let content = entry["content"].as_str().unwrap();
    assert!(content.starts_with("<handoff-context>\nWe worked on the parser.\n\n<read-files>\nsrc/lib.rs\n</read-files>"), "{content}");
    // pi's rule: a file read and then edited is modified, not read.
    assert!(content.contains("<modified-files>\nNOTES.md\nsrc/parse.rs\n</modified-files>"), "{content}");
    assert!(content.contains("<commands-run>\n[exit 0] cargo build\n[exit 101] cargo test\n</commands-run>"), "{content}");
    assert!(content.contains("<open-todos>\n- [in progress] Fix the parser test\n- [pending] Write docs\n</open-todos>"), "{content}");
    assert!(!content.contains("Set up CI"), "a completed todo was handed over");
    assert!(content.contains("<last-error>\nbash: test failed\n</last-error>"), "{content}");
    assert!(content.contains(&facts));
    assert!(content.ends_with("</handoff-context>\n\nThe above is a handoff document from a previous session. Use this context to continue the work seamlessly."));
    // The entry's details carry pi's field names, and the todos.
    let details = &entry["details"];
    assert_eq!(details["readFiles"], json!(["src/lib.rs"]));
    assert_eq!(details["modifiedFiles"], json!(["NOTES.md", "src/parse.rs"]));
    assert_eq!(details["todos"].as_array().unwrap().len(), 2);
    assert_eq!(details["todos"][0]["activeForm"], "Fixing the parser test");
    // The markdown file beside the session holds the same text.
    let md = std::fs::read_to_string(
        Path::new(&session_file).with_extension("").join("handoff.md"),
    )
    .unwrap();
    assert!(md.contains("<modified-files>"), "{md}");
    // The new session's todo list is the old one's open items; its reminders start at 0.
    let todos: Vec<String> = agent.todos().iter().map(|t| t.content.clone()).collect();
    assert_eq!(todos, ["Fix the parser test", "Write docs"]);
    assert_eq!(agent.todo_reminders(), 0);
    // The model of the new session reads the facts.
    mock.push(MockReply::text("ok"));
    agent.prompt("go on", Default::default()).await.unwrap();
    let body = mock.requests().last().unwrap().body.to_string();
    assert!(body.contains("[exit 101] cargo test"), "{body}");
}

#[tokio::test]
async fn facts_accumulate_along_a_chain_of_handoffs_and_an_error_stays_until_resolved() {
    let Worked { mock, agent, controller, .. } = Worked::new().await;
    mock.push(MockReply::text("## Goal\nfirst"));
    assert!(matches!(controller.handoff(HandoffOptions::default()).await, HandoffOutcome::Done { .. }));
    // The child reads another file, runs the failing command again successfully.
    {
        let mut s = agent.session();
        s.append_message(&Message::user("continue")).unwrap();
        s.append_message(&call("d1", "read", json!({"path": "src/lex.rs"}))).unwrap();
        s.append_message(&result("d1", "read", "...", false, Value::Null)).unwrap();
        s.append_message(&call("d2", "bash", json!({"command": "cargo test"}))).unwrap();
        s.append_message(&result("d2", "bash", "ok", false, Value::Null)).unwrap();
        s.flush().unwrap();
    }
    mock.push(MockReply::text("## Goal\nsecond"));
    let HandoffOutcome::Done { session_file, .. } = controller.handoff(HandoffOptions::default()).await else { panic!() };
    let details = handoff_entry(&session_file)["details"].clone();
    assert_eq!(details["readFiles"], json!(["src/lex.rs", "src/lib.rs"]), "{details}");
    assert_eq!(details["modifiedFiles"], json!(["NOTES.md", "src/parse.rs"]));
    let commands: Vec<&str> = details["commands"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(commands, ["cargo build", "cargo test", "cargo test"]);
    assert_eq!(details["commands"][2]["exitCode"], 0);
    // The bash error was resolved by the later successful bash call.
    assert!(details.get("lastError").is_none(), "{details}");
    // The todos nobody touched in the child are still handed over.
    assert_eq!(details["todos"].as_array().unwrap().len(), 2, "{details}");
}

#[test]
fn no_tools_no_facts() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = SessionManager::create(dir.path(), dir.path(), None).unwrap();
    session.append_message(&Message::user("hi")).unwrap();
    let facts = Facts::gather(&session.get_branch(None));
    assert!(facts.is_empty());
    assert_eq!(facts.render(), "");
}

#[tokio::test]
async fn review_mode_waits_for_the_text_as_written_or_creates_nothing() {
    let Worked { mock, dir, agent, controller } = Worked::new().await;
    let old = agent.session().path().to_path_buf();
    mock.push(MockReply::text("## Goal\nDraft."));
    let HandoffOutcome::Review { text, facts_at, .. } = controller.handoff(HandoffOptions { review: Some(true), ..Default::default() }).await else { panic!() };
    assert!(text.starts_with("## Goal\nDraft.\n\n<read-files>"), "{text}");
    assert_eq!(&text[facts_at.unwrap()..facts_at.unwrap() + 12], "<read-files>");
    // Nothing exists yet, and another handoff is refused meanwhile.
    assert_eq!(agent.session().path(), old);
    assert!(matches!(controller.handoff(HandoffOptions::default()).await, HandoffOutcome::Refused { .. }));
    // Discarding creates nothing.
    assert!(controller.discard_review());
    assert!(!controller.discard_review(), "a second discard does nothing");
    assert_eq!(agent.session().path(), old);
    assert_eq!(common::session_files(&dir.path().join("sessions")), vec![old.clone()]);
    // Again, and this time the user edits the text and writes it.
    mock.push(MockReply::text("## Goal\nDraft."));
    let HandoffOutcome::Review { text, .. } = controller.handoff(HandoffOptions { review: Some(true), ..Default::default() }).await else { panic!() };
    let edited = text.replace("Draft.", "Edited by the user.").replace("src/lib.rs\n", "");
    let HandoffOutcome::Done { session_file, document, .. } = controller.commit_review(&edited).await else { panic!() };
    assert_eq!(document, edited);
    let entry = handoff_entry(&session_file);
    assert_eq!(
        entry["content"].as_str().unwrap(),
        format!("<handoff-context>\n{edited}\n</handoff-context>\n\nThe above is a handoff document from a previous session. Use this context to continue the work seamlessly.")
    );
    // The details keep what the host knows, whatever the edit removed.
    assert_eq!(entry["details"]["readFiles"], json!(["src/lib.rs"]));
    assert!(matches!(controller.commit_review("again").await, HandoffOutcome::Refused { .. }));
}
