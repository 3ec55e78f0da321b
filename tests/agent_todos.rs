//! The todo list in the agent (`todo_write` through the loop, `AgentSession::todos()`, the
//! `todos_changed` event) and the reminder sent when the model stops with open items: once per
//! stop, bounded by the counter a session switch resets, never in a handoff. Against the
//! loopback mock model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::Path;
use std::sync::Arc;

use common::{agent, agent_with, config, entry_lines, new_session, seeded_session, todo_call, wire_messages, with_stop};
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::{
    AgentConfig, AgentEvent, AgentSession, RunOptions, DEFAULT_MAX_TODO_REMINDERS,
};
use handoff_nvim::core::controller::{Controller, FrontEndTexts};
use handoff_nvim::core::handoff::HandoffOutcome;
use handoff_nvim::core::message::{Message, Role};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::{Todo, TodoStatus};
use serde_json::{json, Value};
use tokio::sync::broadcast;

const REMINDER_START: &str = "Your todo list still has";

fn item(content: &str, status: &str) -> Value {
    json!({ "content": content, "status": status, "activeForm": format!("{content}ing") })
}

/// `(content, status)` of each item.
fn shape(todos: &[Todo]) -> Vec<(String, TodoStatus)> {
    todos.iter().map(|t| (t.content.clone(), t.status)).collect()
}

fn pairs(v: &[(&str, TodoStatus)]) -> Vec<(String, TodoStatus)> {
    v.iter().map(|(c, s)| (c.to_string(), *s)).collect()
}

/// The user messages of a session file (text).
fn user_texts(path: &Path) -> Vec<String> {
    entry_lines(path)
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .map(|e| serde_json::from_value::<Message>(e["message"].clone()).unwrap().text())
        .collect()
}

fn reminders(path: &Path) -> Vec<String> {
    user_texts(path).into_iter().filter(|t| t.starts_with(REMINDER_START)).collect()
}

/// Every `todos_changed` list seen until `agent_end`.
fn collect_todo_events(agent: &AgentSession) -> tokio::task::JoinHandle<Vec<Vec<Todo>>> {
    let mut rx = agent.subscribe();
    tokio::spawn(async move {
        let mut out = Vec::new();
        loop {
            match rx.recv().await {
                Ok(AgentEvent::TodosChanged { todos }) => out.push(todos),
                Ok(AgentEvent::AgentEnd { .. }) | Err(broadcast::error::RecvError::Closed) => return out,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => panic!("lagged {n}"),
            }
        }
    })
}

fn agent_reminding(mock: &MockServer, session: SessionManager, max: u32) -> Arc<AgentSession> {
    Arc::new(AgentSession::new(AgentConfig { max_todo_reminders: max, ..AgentConfig::new(config(mock)) }, session))
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn todo_write_runs_unasked_the_list_is_announced_and_one_reminder_goes_out_when_the_model_stops() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // No one is there to approve anything: todo_write is read-only and runs unasked.
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    mock.push(todo_call(
        json!([item("Read", "completed"), item("Fix", "in_progress"), item("Test", "pending")]),
        "call_t1",
    ));
    mock.push(MockReply::text("Fixed it."));
    // Reminded, the model finishes its list, then stops for good.
    mock.push(todo_call(json!([item("Read", "completed"), item("Fix", "completed"), item("Test", "completed")]), "call_t2"));
    mock.push(MockReply::text("All done."));
    mock.set_default(MockReply::text("SHOULD NOT BE ASKED"));
    let events = collect_todo_events(&agent);
    let result = agent.prompt("fix the bug", RunOptions::default()).await.unwrap();
    assert_eq!(result.last_assistant().unwrap().text(), "All done.");
    // Two lists announced, each after its result was stored.
    let events = events.await.unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        shape(&events[0]),
        pairs(&[("Read", TodoStatus::Completed), ("Fix", TodoStatus::InProgress), ("Test", TodoStatus::Pending)])
    );
    assert_eq!(events[0][1].active_form, "Fixing");
    assert!(events[1].iter().all(|t| !t.is_open()));
    assert_eq!(agent.todos(), events[1]);
    // One reminder: a plain user message naming the open items, stored in the session.
    let sent = reminders(&path);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0],
        "Your todo list still has 2 open items:\n[~] Fix\n[ ] Test\nContinue with them, or, if they are done or no longer needed, update the list with todo_write."
    );
    assert_eq!(agent.todo_reminders(), 1);
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(wire_messages(&requests[2]).last().unwrap(), &("user".to_string(), sent[0].clone()));
    // The stored reminder is an ordinary pi user message.
    let stored = entry_lines(&path);
    let reminder = stored.iter().find(|e| e["message"]["content"][0]["text"] == sent[0].as_str()).unwrap();
    assert_eq!(reminder["message"]["role"], "user");
    // The result the loop stored carries the list, as the session rebuilds it.
    let results: Vec<&Value> = stored.iter().filter(|e| e["message"]["role"] == "toolResult").collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["message"]["toolName"], "todo_write");
    assert_eq!(results[0]["message"]["isError"], false);
    assert_eq!(results[0]["message"]["details"]["todos"][1]["activeForm"], "Fixing");
    // All items completed: the next stop sends no reminder.
    mock.push(MockReply::text("Anything else?"));
    agent.prompt("thanks", RunOptions::default()).await.unwrap();
    assert_eq!(mock.requests().len(), 5);
    assert_eq!(reminders(&path).len(), 1);
}

#[tokio::test]
async fn reminders_stop_at_the_bound_and_new_session_resets_the_counter() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    mock.push(todo_call(json!([item("Plan", "in_progress"), item("Build", "pending")]), "call_b1"));
    // The model never updates its list: every stop is answered with a reminder, up to the bound.
    mock.set_default(MockReply::text("I stop here."));
    agent.prompt("go", RunOptions::default()).await.unwrap();
    let bound = DEFAULT_MAX_TODO_REMINDERS as usize;
    assert_eq!(reminders(&path).len(), bound);
    assert_eq!(mock.requests().len(), 2 + bound);
    assert_eq!(agent.todo_reminders(), DEFAULT_MAX_TODO_REMINDERS);
    // The bound holds across prompts until a reset.
    agent.prompt("still there?", RunOptions::default()).await.unwrap();
    assert_eq!(mock.requests().len(), 3 + bound);
    assert_eq!(reminders(&path).len(), bound);
    // A reset (what a session switch does) allows reminders again; the list is still open.
    agent.reset();
    assert_eq!(agent.todo_reminders(), 0);
    agent.prompt("once more", RunOptions::default()).await.unwrap();
    assert_eq!(reminders(&path).len(), 2 * bound);
    // /new resets the counter; the new session has no list, so nothing is reminded there.
    agent.new_session().unwrap();
    assert_eq!(agent.todo_reminders(), 0);
    assert!(agent.todos().is_empty());
    let before = mock.requests().len();
    agent.prompt("fresh start", RunOptions::default()).await.unwrap();
    assert_eq!(mock.requests().len(), before + 1);
    assert_eq!(agent.todo_reminders(), 0);
}

#[tokio::test]
async fn no_reminder_when_the_reply_is_cut_off_or_reminders_are_configured_off() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    mock.push(todo_call(json!([item("Plan", "pending")]), "call_c1"));
    // Stopped by the length limit: not a normal stop, nothing is reminded.
    mock.push(with_stop("cut off mid", "length"));
    agent.prompt("go", RunOptions::default()).await.unwrap();
    assert_eq!(mock.requests().len(), 2);
    assert!(reminders(&path).is_empty());
    // A bound of 0 turns reminders off.
    let dir = tempfile::tempdir().unwrap();
    let off = agent_reminding(&mock, new_session(dir.path()), 0);
    let path = off.session().path().to_path_buf();
    mock.push(todo_call(json!([item("Plan", "pending")]), "call_c2"));
    mock.push(MockReply::text("stopping"));
    off.prompt("go", RunOptions::default()).await.unwrap();
    assert_eq!(mock.requests().len(), 4);
    assert!(reminders(&path).is_empty());
    assert_eq!(shape(&off.todos()), pairs(&[("Plan", TodoStatus::Pending)]));
}

#[tokio::test]
async fn the_list_is_the_latest_successful_one_of_the_branch_after_a_resume_and_on_another_branch() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Reminders off: each prompt is exactly its scripted replies.
    let agent = agent_reminding(&mock, new_session(dir.path()), 0);
    let path = agent.session().path().to_path_buf();
    assert!(agent.todos().is_empty());
    mock.push(todo_call(json!([item("One", "in_progress"), item("Two", "pending")]), "call_r1"));
    mock.push(MockReply::text("first list"));
    agent.prompt("plan", RunOptions::default()).await.unwrap();
    mock.push(todo_call(json!([item("One", "completed"), item("Two", "in_progress")]), "call_r2"));
    mock.push(MockReply::text("second list"));
    agent.prompt("go on", RunOptions::default()).await.unwrap();
    // A failed todo_write (two items in progress) leaves the list as it was, and is not announced.
    mock.push(todo_call(json!([item("X", "in_progress"), item("Y", "in_progress")]), "call_r3"));
    mock.push(MockReply::text("oops"));
    let events = collect_todo_events(&agent);
    agent.prompt("break it", RunOptions::default()).await.unwrap();
    assert!(events.await.unwrap().is_empty());
    let second = pairs(&[("One", TodoStatus::Completed), ("Two", TodoStatus::InProgress)]);
    assert_eq!(shape(&agent.todos()), second);
    agent.session().flush().unwrap();

    // Resumed from the file, in a fresh agent and by a switch: the same list.
    let reopened = SessionManager::open(&path, &dir.path().join("sessions")).unwrap();
    let fresh = agent_reminding(&mock, reopened, 0);
    assert_eq!(shape(&fresh.todos()), second);
    let other = agent_reminding(&mock, new_session(dir.path()), 0);
    assert!(other.todos().is_empty());
    other.resume(SessionManager::open(&path, &dir.path().join("sessions")).unwrap()).unwrap();
    assert_eq!(shape(&other.todos()), second);

    // On the branch that leaves off after the first list, the first list is current.
    let first_reply = {
        let session = fresh.session();
        let entry = session
            .get_entries()
            .iter()
            .find(|e| e.message().is_some_and(|m| m.is_assistant() && m.text() == "first list"))
            .unwrap();
        entry.id.to_string()
    };
    fresh.session().branch(&first_reply).unwrap();
    assert_eq!(shape(&fresh.todos()), pairs(&[("One", TodoStatus::InProgress), ("Two", TodoStatus::Pending)]));
    // Going on there keeps to that branch.
    mock.push(MockReply::text("on the branch"));
    fresh.prompt("from here", RunOptions::default()).await.unwrap();
    assert_eq!(shape(&fresh.todos()), pairs(&[("One", TodoStatus::InProgress), ("Two", TodoStatus::Pending)]));
    // Before any todo_write, there is no list.
    let first_user = {
        let session = fresh.session();
        let entry = session.get_entries().iter().find(|e| e.message().is_some_and(|m| m.role == Role::User)).unwrap();
        entry.id.to_string()
    };
    fresh.session().branch(&first_user).unwrap();
    assert!(fresh.todos().is_empty());
}

#[tokio::test]
async fn a_handoff_or_a_single_turn_run_never_reminds_and_the_handoff_resets_the_counter() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with(config(&mock), seeded_session(dir.path(), 1), None);
    let old = agent.session().path().to_path_buf();
    // An open list, one reminder spent on it, then a reply cut off (no reminder for that).
    mock.push(todo_call(json!([item("Ship", "in_progress")]), "call_h1"));
    mock.push(MockReply::text("stopping"));
    mock.push(with_stop("cut", "length"));
    agent.prompt("work", RunOptions::default()).await.unwrap();
    assert_eq!(agent.todo_reminders(), 1);
    assert_eq!(reminders(&old).len(), 1);
    assert!(agent.todos().iter().any(Todo::is_open));
    let before = mock.requests().len();
    // The handoff's single turn ends with a normal stop, the list still open: no reminder.
    mock.push(MockReply::text(common::DOCUMENT));
    mock.set_default(MockReply::text("SHOULD NOT BE ASKED"));
    let controller = Controller::new(agent.clone(), FrontEndTexts::default());
    let outcome = controller.handoff(Default::default()).await;
    assert!(matches!(outcome, HandoffOutcome::Done { .. }), "{outcome:?}");
    assert_eq!(mock.requests().len(), before + 1);
    assert_eq!(reminders(&old).len(), 1);
    // The new session starts with the open items the handoff carried, and a fresh counter.
    assert_ne!(agent.session().path(), old);
    assert_eq!(agent.todo_reminders(), 0);
    assert!(!agent.todos().is_empty() && agent.todos().iter().all(Todo::is_open), "{:?}", agent.todos());

    // A single-turn prompt ending with a normal stop, the list open: no reminder either.
    let dir = tempfile::tempdir().unwrap();
    let single = agent_with(config(&mock), new_session(dir.path()), None);
    let path = single.session().path().to_path_buf();
    mock.push(todo_call(json!([item("Ship", "pending")]), "call_h2"));
    mock.push(with_stop("cut", "length"));
    single.prompt("plan", RunOptions::default()).await.unwrap();
    let before = mock.requests().len();
    mock.push(MockReply::text("a single answer"));
    let single_turn = RunOptions { single_turn: true, ..RunOptions::default() };
    let result = single.prompt("one answer please", single_turn).await.unwrap();
    assert_eq!(result.last_assistant().unwrap().text(), "a single answer");
    assert_eq!(mock.requests().len(), before + 1);
    assert!(reminders(&path).is_empty());
    assert_eq!(single.todo_reminders(), 0);
}
