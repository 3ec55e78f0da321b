//! Facts the session owns and every front end reads the same way (issue 20): the todo list a
//! handoff carries (the CLI's `todos`, the chat's, the next handoff's), a handoff request known
//! by its mark rather than its text, and the message count the picker shows and the handoff's
//! guard checks. Real session files, the loopback mock model, the real binary for the CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::Path;
use std::sync::Arc;

use common::{assistant, config, entry_lines, result_message, seeded_session, todo_call, call_message};
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::controller::{Controller, FrontEndTexts};
use handoff_nvim::core::handoff::{self, HandoffOptions, HandoffOutcome};
use handoff_nvim::core::message::Message;
use handoff_nvim::core::session::{mark_handoff_request, SessionManager, Todo};
use handoff_nvim::nvim::transcript;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");

fn item(content: &str, status: &str) -> Value {
    json!({ "content": content, "status": status, "activeForm": format!("{content}ing") })
}

/// The open items the first session leaves (its completed one is not carried).
fn open_items() -> Value {
    json!([item("Fix the parser", "in_progress"), item("Write docs", "pending")])
}

/// An agent (no todo reminders: each reply is the test's) on a session that wrote a todo list.
fn agent_with_todos(mock: &MockServer, dir: &Path) -> Arc<AgentSession> {
    let mut session = seeded_session(dir, 1);
    session.append_message(&call_message("c1", "todo_write", json!({}))).unwrap();
    let mut list = open_items().as_array().unwrap().clone();
    list.push(item("Set up CI", "completed"));
    session.append_message(&result_message("c1", "todo_write", "Todo list updated", false, json!({ "todos": list }))).unwrap();
    session.flush().unwrap();
    let config = AgentConfig { max_todo_reminders: 0, ..AgentConfig::new(config(mock)) };
    Arc::new(AgentSession::new(config, session))
}

async fn hand_off(agent: &Arc<AgentSession>, mock: &MockServer, document: &str) -> String {
    mock.push(MockReply::text(document));
    match Controller::new(agent.clone(), FrontEndTexts::default()).handoff(HandoffOptions::default()).await {
        HandoffOutcome::Done { session_file, .. } => session_file,
        other => panic!("the handoff did not finish: {other:?}"),
    }
}

/// `handoff-nvim todos FILE`, parsed.
fn cli_todos(file: &str, dir: &Path) -> Value {
    let out = common::clean_command(BIN)
        .args(["todos", file])
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("HANDOFF_SESSION_DIR", dir.join("sessions"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn as_json(todos: &[Todo]) -> Value {
    serde_json::to_value(todos).unwrap()
}

/// The `details.todos` of a handoff's injected entry.
fn carried(session_file: &str) -> Value {
    let entry = entry_lines(Path::new(session_file)).into_iter().find(|e| e["type"] == "custom_message").unwrap();
    entry["details"]["todos"].clone()
}

#[tokio::test]
async fn the_cli_prints_the_todos_a_handoff_carried_as_the_chat_shows_them() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with_todos(&mock, dir.path());
    let new = hand_off(&agent, &mock, "## Goal\nGo on.").await;
    assert_eq!(as_json(&agent.todos()), open_items(), "the chat's list in the new session");
    assert_eq!(cli_todos(&new, dir.path()), open_items(), "the CLI's list of the same session");
}

#[tokio::test]
async fn a_failed_todo_write_in_a_handed_off_session_leaves_the_carried_list_for_the_next_handoff() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with_todos(&mock, dir.path());
    hand_off(&agent, &mock, "## Goal\nGo on.").await;
    // Two items in progress: the call fails, and the list stays as it was.
    mock.push(todo_call(json!([item("a", "in_progress"), item("b", "in_progress")]), "t1"));
    mock.push(MockReply::text("I will go on."));
    agent.prompt("go on", RunOptions::default()).await.unwrap();
    let failed = entry_lines(agent.session().path())
        .into_iter()
        .any(|e| e["message"]["toolName"] == "todo_write" && e["message"]["isError"] == true);
    assert!(failed, "the todo_write call failed");
    assert_eq!(as_json(&agent.todos()), open_items(), "the chat still shows the carried list");
    let next = hand_off(&agent, &mock, "## Goal\nGo on again.").await;
    assert_eq!(carried(&next), open_items(), "the next handoff carries the same list");
    assert_eq!(cli_todos(&next, dir.path()), open_items());
}

/// The chat's items of a session file, as JSON.
fn shown(path: &Path, dir: &Path) -> Vec<Value> {
    let view = transcript::view(path, &dir.join("sessions"), transcript::PAGE);
    assert!(view.error.is_none(), "{:?}", view.error);
    view.items.iter().map(|i| serde_json::to_value(i).unwrap()).collect()
}

#[tokio::test]
async fn a_handoff_request_shows_by_its_mark_whatever_its_text() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with_todos(&mock, dir.path());
    let old = agent.session().path().to_path_buf();
    mock.push(MockReply::text("## Goal\nGo on."));
    let controller = Controller::new(agent.clone(), FrontEndTexts::default());
    assert!(matches!(controller.handoff(HandoffOptions::focus("the parser")).await, HandoffOutcome::Done { .. }));
    // The handoff marks its request where it writes it.
    let request = entry_lines(&old).into_iter().rev().find(|e| e["message"]["role"] == "user").unwrap();
    assert_eq!(request["message"]["handoffRequest"], json!({ "focus": "the parser" }), "{request}");
    let items = shown(&old, dir.path());
    assert!(items.contains(&json!({ "kind": "handoff_request", "focus": "the parser" })), "{items:?}");

    // A request written with another wording of the instruction (the prompt was edited since)
    // is still one; a user message that only repeats today's instruction is not.
    let mut s = seeded_session(dir.path(), 1);
    let mut edited = Message::user("Summarize this session for a successor, in six sections.");
    mark_handoff_request(&mut edited, None);
    s.append_message(&edited).unwrap();
    s.append_message(&assistant("## Goal\n…")).unwrap();
    s.append_message(&Message::user(format!("{}\nplease", handoff::PROMPT.replace("Write a handoff", "Write a hand-off")))).unwrap();
    s.flush().unwrap();
    let items = shown(s.path(), dir.path());
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["model", "user", "assistant", "handoff_request", "assistant", "user"], "{items:?}");
    assert_eq!(items[3]["focus"], "");
}

#[tokio::test]
async fn the_picker_counts_the_messages_the_handoff_guard_counts_on_a_branched_session() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    // Four messages, then the leaf moves back before all of them (a branch from the start).
    let mut s = seeded_session(dir.path(), 2);
    let root = s.get_entries()[0].id.to_string();
    s.branch(&root).unwrap();
    s.append_thinking_level_change("low").unwrap();
    s.flush().unwrap();
    let path = s.path().to_path_buf();
    let cwd = s.cwd().to_path_buf();
    drop(s);

    let listed = SessionManager::list_sessions(&sessions, &cwd).unwrap();
    let info = listed.iter().find(|i| i.path == path).unwrap();
    let opened = SessionManager::open(&path, &sessions).unwrap();
    assert_eq!(opened.get_entries().iter().filter(|e| e.is_message()).count(), 4, "messages in the file");
    assert_eq!(info.message_count, opened.count_branch_messages(), "the picker's count is the guard's");
    assert_eq!(info.message_count, 0);
    // And the guard refuses what the picker shows as empty.
    let mock = MockServer::start().await.unwrap();
    let agent = AgentSession::new(AgentConfig::new(config(&mock)), opened);
    assert_eq!(handoff::preflight(&agent, false), Err(handoff::Refusal::NothingToHandOff));
}

#[tokio::test]
async fn the_thinking_level_is_the_one_the_current_branch_recorded() {
    use handoff_nvim::core::provider::ThinkingLevel;
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut s = seeded_session(dir.path(), 1);
    s.append_thinking_level_change("low").unwrap();
    let at_low = s.append_message(&Message::user("at low")).unwrap();
    s.append_thinking_level_change("high").unwrap();
    s.flush().unwrap();
    let agent = AgentSession::new(AgentConfig::new(config(&mock)), s);
    assert_eq!(agent.thinking_level(), ThinkingLevel::High);
    // Back on the branch before the change to high (pi's tree navigation): the level of that
    // branch, as the session says it, with no copy left behind.
    agent.session().branch(&at_low).unwrap();
    assert_eq!(agent.thinking_level(), ThinkingLevel::Low);
    // Setting the level there records it on that branch.
    assert!(agent.set_thinking_level(ThinkingLevel::Medium).unwrap());
    assert!(!agent.set_thinking_level(ThinkingLevel::Medium).unwrap());
    assert_eq!(agent.session().context_settings().1.as_deref(), Some("medium"));
}
