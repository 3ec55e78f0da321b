//! The agent loop and `AgentSession` (issue 2, "Agent loop and AgentSession") against the loopback
//! mock model: persistence at `message_end`, the event sequence of pi's `--mode json`, steering,
//! follow-ups and the pending next-turn queue, prompt templates on and off, abort, busy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::sync::Arc;
use std::time::Duration;

use common::{agent, agent_with, config, entry_lines, new_session, slow, wire_messages};
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::{AgentError, AgentEvent, AgentSession, AssistantMessageEvent, RunOptions, SwitchReason};
use handoff_nvim::core::message::{Message, Role, StopReason};
use handoff_nvim::core::session::SessionManager;
use serde_json::Value;
use tokio::sync::broadcast;

const T: Duration = Duration::from_secs(10);

/// Collects events until `agent_end`.
fn collect(agent: &AgentSession) -> tokio::task::JoinHandle<Vec<AgentEvent>> {
    let mut rx = agent.subscribe();
    tokio::spawn(async move {
        let mut out = Vec::new();
        loop {
            match rx.recv().await {
                Ok(e) => {
                    let end = matches!(e, AgentEvent::AgentEnd { .. });
                    out.push(e);
                    if end {
                        return out;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => panic!("lagged {n}"),
                Err(broadcast::error::RecvError::Closed) => return out,
            }
        }
    })
}


fn spawn_prompt(
    agent: &Arc<AgentSession>,
    text: &str,
) -> tokio::task::JoinHandle<Result<handoff_nvim::core::agent::RunResult, AgentError>> {
    let agent = agent.clone();
    let text = text.to_string();
    tokio::spawn(async move { agent.prompt(&text, RunOptions::default()).await })
}

/// `(role, text)` of the `message` entries of a session file.
fn stored(path: &std::path::Path) -> Vec<(String, String)> {
    entry_lines(path)
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| {
            let m: Message = serde_json::from_value(e["message"].clone()).unwrap();
            (e["message"]["role"].as_str().unwrap().to_string(), m.text())
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

fn event_type(e: &AgentEvent) -> String {
    serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_string()
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn prompt_persists_the_user_message_and_the_reply_at_message_end() {
    let mock = MockServer::start().await.unwrap();
    mock.push(MockReply::text("Hi there, human."));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    let result = agent.prompt("hello", RunOptions::default()).await.unwrap();
    assert_eq!(result.messages.len(), 2);
    assert_eq!(result.last_assistant().unwrap().text(), "Hi there, human.");
    assert_eq!(stored(&path), pairs(&[("user", "hello"), ("assistant", "Hi there, human.")]));
    let reply = &entry_lines(&path)[1]["message"];
    assert_eq!(reply["stopReason"], "stop");
    assert_eq!(reply["provider"], "mock");
    assert_eq!(reply["model"], "mock-model");
    assert_eq!(reply["api"], "openai-completions");
    assert!(reply["usage"]["output"].as_u64().unwrap() > 0, "{reply}");
    // The entries form a chain and the in-memory context matches the file.
    let entries = entry_lines(&path);
    assert_eq!(entries[1]["parentId"], entries[0]["id"]);
    assert_eq!(agent.context_messages().len(), 2);
    assert!(!agent.is_busy());
    // The request carried the prompt.
    assert_eq!(wire_messages(&mock.requests()[0]), pairs(&[("user", "hello")]));
}

#[tokio::test]
async fn prompt_persists_the_user_message_before_the_reply_has_finished() {
    let mock = MockServer::start().await.unwrap();
    mock.push(slow(&["a ", "b ", "c"], 300, 100));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    let run = spawn_prompt(&agent, "keep me");
    assert!(mock.wait_for_requests(1, T).await);
    assert_eq!(stored(&path), pairs(&[("user", "keep me")]));
    run.await.unwrap().unwrap();
    assert_eq!(stored(&path).len(), 2);
}

#[tokio::test]
async fn prompt_continues_the_conversation_with_earlier_messages_in_the_request() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, common::seeded_session(dir.path(), 1));
    agent.prompt("and now?", RunOptions::default()).await.unwrap();
    assert_eq!(
        wire_messages(&mock.requests()[0]),
        pairs(&[("user", "question 0"), ("assistant", "answer 0"), ("user", "and now?")])
    );
}

#[tokio::test]
async fn events_follow_pis_order_agent_start_turn_start_messages_turn_end_agent_end() {
    let mock = MockServer::start().await.unwrap();
    mock.push(MockReply::text("Hello from the mock server."));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let events = collect(&agent);
    agent.prompt("Say hello", RunOptions::default()).await.unwrap();
    // The lifecycle's phase changes (the run holds `prompting`) are the controller's, not pi's.
    let events: Vec<AgentEvent> =
        events.await.unwrap().into_iter().filter(|e| !matches!(e, AgentEvent::Lifecycle { .. })).collect();
    let ours: Vec<String> =
        events.iter().map(event_type).filter(|t| t != "message_update").collect();
    // The same sequence pi 0.73.1 printed for the same exchange (updates left aside).
    let fixture = std::fs::read_to_string(common::fixtures_dir().join("pi-events-pimono-0.73.1.jsonl")).unwrap();
    let pis: Vec<String> = fixture
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_string())
        .filter(|t| t != "session" && t != "message_update")
        .collect();
    assert_eq!(ours, pis);
    assert_eq!(
        ours,
        ["agent_start", "turn_start", "message_start", "message_end", "message_start", "message_end", "turn_end", "agent_end"]
    );
    // Updates sit between the assistant's start and end, and carry the text in order.
    let start = events.iter().rposition(|e| matches!(e, AgentEvent::MessageStart { .. })).unwrap();
    let end = events.iter().rposition(|e| matches!(e, AgentEvent::MessageEnd { .. })).unwrap();
    let mut text = String::new();
    for (i, e) in events.iter().enumerate() {
        if let AgentEvent::MessageUpdate { assistant_message_event } = e {
            assert!(start < i && i < end, "update outside its message");
            match assistant_message_event {
                AssistantMessageEvent::TextDelta { delta, content_index } => {
                    assert_eq!(*content_index, 0);
                    text.push_str(delta);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(text, "Hello from the mock server.");
    // Shapes: camelCase payloads as in pi's JSON mode.
    let update = events.iter().find(|e| matches!(e, AgentEvent::MessageUpdate { .. })).unwrap();
    let v = serde_json::to_value(update).unwrap();
    assert_eq!(v["assistantMessageEvent"]["type"], "text_delta");
    assert!(v["assistantMessageEvent"]["contentIndex"].is_u64());
    match &events[2] {
        AgentEvent::MessageStart { message } => assert_eq!(message.text(), "Say hello"),
        other => panic!("{other:?}"),
    }
    match &events[start] {
        AgentEvent::MessageStart { message } => {
            assert_eq!(message.role, Role::Assistant);
            assert_eq!(message.extra_str("provider"), Some("mock"));
        }
        other => panic!("{other:?}"),
    }
    match events.last().unwrap() {
        AgentEvent::AgentEnd { messages, .. } => assert_eq!(messages.len(), 2),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn events_reach_every_subscriber() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let (a, b) = (collect(&agent), collect(&agent));
    agent.prompt("hi", RunOptions::default()).await.unwrap();
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!(a, b);
    assert!(a.len() >= 8);
}

#[tokio::test]
async fn steering_is_delivered_at_the_next_turn_boundary() {
    let mock = MockServer::start().await.unwrap();
    mock.push(slow(&["first ", "reply ", "streams ", "slowly"], 0, 150));
    mock.push(MockReply::text("steered reply"));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    let mut rx = agent.subscribe();
    let run = spawn_prompt(&agent, "start");
    common::first_delta(&mut rx).await;
    agent.steer("change of plan");
    let result = run.await.unwrap().unwrap();
    // The first reply was not cut; the steering message opened a second turn.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        wire_messages(&requests[1]),
        pairs(&[("user", "start"), ("assistant", "first reply streams slowly"), ("user", "change of plan")])
    );
    assert_eq!(result.last_assistant().unwrap().text(), "steered reply");
    assert_eq!(
        stored(&path),
        pairs(&[
            ("user", "start"),
            ("assistant", "first reply streams slowly"),
            ("user", "change of plan"),
            ("assistant", "steered reply"),
        ])
    );
    assert!(agent.queued().steering == 0);
}

#[tokio::test]
async fn follow_up_is_delivered_when_the_agent_would_stop_after_steering() {
    let mock = MockServer::start().await.unwrap();
    mock.push(slow(&["one ", "two ", "three"], 0, 150));
    mock.push(MockReply::text("after steering"));
    mock.push(MockReply::text("after follow-up"));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    let mut rx = agent.subscribe();
    let run = spawn_prompt(&agent, "start");
    common::first_delta(&mut rx).await;
    // Queued follow-up first, steering second: steering still goes first.
    agent.follow_up("and then this");
    agent.steer("now this");
    run.await.unwrap().unwrap();
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(
        stored(&path),
        pairs(&[
            ("user", "start"),
            ("assistant", "one two three"),
            ("user", "now this"),
            ("assistant", "after steering"),
            ("user", "and then this"),
            ("assistant", "after follow-up"),
        ])
    );
    assert!(agent.queued().follow_up == 0);
}

#[tokio::test]
async fn follow_up_alone_opens_one_more_turn() {
    let mock = MockServer::start().await.unwrap();
    mock.push(slow(&["one ", "two"], 0, 300));
    mock.push(MockReply::text("second"));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let events = collect(&agent);
    let mut rx = agent.subscribe();
    let run = spawn_prompt(&agent, "start");
    common::first_delta(&mut rx).await;
    agent.follow_up("more please");
    let result = run.await.unwrap().unwrap();
    assert_eq!(result.messages.iter().map(Message::text).collect::<Vec<_>>(), ["start", "one two", "more please", "second"]);
    // Two turns, one agent run.
    let types: Vec<String> = events.await.unwrap().iter().map(event_type).collect();
    assert_eq!(types.iter().filter(|t| *t == "turn_start").count(), 2);
    assert_eq!(types.iter().filter(|t| *t == "agent_start").count(), 1);
    // No todo list, so no reminder: the counter counts reminders, not turns.
    assert_eq!(agent.todo_reminders(), 0);
}

#[tokio::test]
async fn pending_next_turn_messages_are_sent_with_the_next_prompt() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    agent.queue_next_turn(Message::user("note for the next turn"));
    assert_eq!(mock.requests().len(), 0, "queueing sends nothing");
    agent.prompt("the prompt", RunOptions::default()).await.unwrap();
    assert_eq!(
        wire_messages(&mock.requests()[0]),
        pairs(&[("user", "note for the next turn"), ("user", "the prompt")])
    );
    assert!(agent.queued().next_turn == 0);
    assert_eq!(stored(&path)[..2], pairs(&[("user", "note for the next turn"), ("user", "the prompt")]));
    // Sent once only.
    agent.prompt("again", RunOptions::default()).await.unwrap();
    let second = wire_messages(&mock.requests()[1]);
    assert_eq!(second.iter().filter(|(_, t)| t == "note for the next turn").count(), 1);
}

fn templates_dir(dir: &std::path::Path) -> std::path::PathBuf {
    let t = dir.join("prompts");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(
        t.join("review.md"),
        "---\ndescription: Review a file\n---\nReview $1 carefully. All: $@ | $ARGUMENTS\n",
    )
    .unwrap();
    t
}

#[tokio::test]
async fn templates_slash_name_args_expands_the_user_template() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with(config(&mock), new_session(dir.path()), Some(templates_dir(dir.path())));
    let path = agent.session().path().to_path_buf();
    agent.prompt("/review src/main.rs \"the loop\"", RunOptions::default()).await.unwrap();
    let expected = "Review src/main.rs carefully. All: src/main.rs the loop | src/main.rs the loop\n";
    assert_eq!(wire_messages(&mock.requests()[0]), pairs(&[("user", expected)]));
    assert_eq!(stored(&path)[0], ("user".to_string(), expected.to_string()));
    // An unknown template is sent as typed.
    agent.prompt("/nosuch thing", RunOptions::default()).await.unwrap();
    assert_eq!(wire_messages(&mock.requests()[1]).last().unwrap().1, "/nosuch thing");
}

#[tokio::test]
async fn templates_expand_prompt_templates_false_sends_the_text_verbatim() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with(config(&mock), new_session(dir.path()), Some(templates_dir(dir.path())));
    let options = RunOptions { expand_prompt_templates: false, ..RunOptions::default() };
    agent.prompt("/review $1 src/main.rs", options).await.unwrap();
    assert_eq!(wire_messages(&mock.requests()[0]), pairs(&[("user", "/review $1 src/main.rs")]));
}

#[tokio::test]
async fn abort_mid_stream_persists_the_partial_reply_with_stop_reason_aborted() {
    let mock = MockServer::start().await.unwrap();
    mock.push(slow(&["partial ", "text ", "that ", "never ", "ends ", "in ", "time"], 0, 200));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    let mut rx = agent.subscribe();
    let run = spawn_prompt(&agent, "go");
    common::first_delta(&mut rx).await;
    agent.abort();
    let result = run.await.unwrap().unwrap();
    let reply = result.last_assistant().unwrap();
    assert_eq!(reply.stop_reason, Some(StopReason::Aborted));
    assert!(reply.text().starts_with("partial"), "{}", reply.text());
    // Cut, not waited out: the last piece ("time") comes 1.2 s after the first.
    assert!(!reply.text().contains("time"), "the stream ran to its end: {}", reply.text());
    let entries = entry_lines(&path);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["message"]["stopReason"], "aborted");
    assert!(!agent.is_busy());
    // Aborted means stopped: queued follow-ups do not start another turn.
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn abort_stops_a_run_before_its_first_token_and_skips_follow_ups() {
    let mock = MockServer::start().await.unwrap();
    mock.push(slow(&["late"], 3_000, 0));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let run = spawn_prompt(&agent, "go");
    assert!(mock.wait_for_requests(1, T).await);
    agent.follow_up("should not be sent");
    agent.abort();
    let result = run.await.unwrap().unwrap();
    assert_eq!(result.last_assistant().unwrap().stop_reason, Some(StopReason::Aborted));
    // Not waited out: the reply's only piece comes 3 s after the request.
    assert!(!result.last_assistant().unwrap().text().contains("late"), "the reply arrived before the abort took");
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn busy_a_second_prompt_while_one_streams_is_refused() {
    let mock = MockServer::start().await.unwrap();
    mock.push(slow(&["slow ", "reply"], 0, 500));
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    let run = spawn_prompt(&agent, "first");
    assert!(mock.wait_for_requests(1, T).await);
    assert!(agent.is_busy());
    let err = agent.prompt("second", RunOptions::default()).await.unwrap_err();
    assert!(matches!(err, AgentError::Busy), "{err:?}");
    assert!(matches!(agent.new_session(), Err(f) if f.kind == handoff_nvim::core::failure::FailureKind::Busy));
    run.await.unwrap().unwrap();
    // The refused prompt left no trace.
    assert!(stored(&path).iter().all(|(_, t)| t != "second"));
    assert_eq!(mock.requests().len(), 1);
    assert!(!agent.is_busy());
}

#[tokio::test]
async fn provider_error_is_persisted_as_an_assistant_message_with_stop_reason_error() {
    let mock = MockServer::start().await.unwrap();
    mock.push(MockReply::Status { status: 401, body: r#"{"error":{"message":"bad key"}}"#.into(), retry_after: None });
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, new_session(dir.path()));
    let path = agent.session().path().to_path_buf();
    agent.follow_up("never");
    let result = agent.prompt("hi", RunOptions::default()).await.unwrap();
    let reply = result.last_assistant().unwrap();
    assert_eq!(reply.stop_reason, Some(StopReason::Error));
    let msg = reply.error_message.clone().unwrap();
    assert!(msg.contains("401") && msg.contains("bad key"), "{msg}");
    assert_eq!(entry_lines(&path)[1]["message"]["stopReason"], "error");
    assert_eq!(mock.requests().len(), 1, "an error ends the run");
}

#[tokio::test]
async fn reset_and_replace_messages_change_what_the_next_request_carries() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, common::seeded_session(dir.path(), 2));
    agent.replace_messages(vec![Message::user("only this context")]);
    agent.prompt("q", RunOptions::default()).await.unwrap();
    assert_eq!(wire_messages(&mock.requests()[0]), pairs(&[("user", "only this context"), ("user", "q")]));
    agent.follow_up("x");
    agent.reset();
    assert!(agent.context_messages().is_empty());
    assert!(agent.queued().follow_up == 0);
    assert_eq!(agent.todo_reminders(), 0);
    agent.prompt("fresh", RunOptions::default()).await.unwrap();
    assert_eq!(wire_messages(&mock.requests()[1]), pairs(&[("user", "fresh")]));
}

#[tokio::test]
async fn new_session_switches_file_records_the_model_and_announces_the_switch() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, common::seeded_session(dir.path(), 1));
    let old = agent.session().path().to_path_buf();
    let mut rx = agent.subscribe();
    agent.new_session().unwrap();
    let new = agent.session().path().to_path_buf();
    assert_ne!(old, new);
    assert!(!new.exists(), "an unused session leaves no file");
    // The switch holds the lifecycle's `switching` phase around it.
    assert!(matches!(rx.try_recv().unwrap(), AgentEvent::Lifecycle { phase: "switching", .. }));
    match rx.try_recv().unwrap() {
        AgentEvent::SessionSwitch { old: o, new: n, reason, .. } => {
            assert_eq!(o.as_deref(), Some(old.to_str().unwrap()));
            assert_eq!(n, new.to_str().unwrap());
            assert_eq!(reason, SwitchReason::New);
        }
        other => panic!("{other:?}"),
    }
    agent.prompt("hi", RunOptions::default()).await.unwrap();
    assert_eq!(wire_messages(&mock.requests()[0]), pairs(&[("user", "hi")]));
    // Written with its first message, the settings first.
    let entries = entry_lines(&new);
    assert_eq!(entries[0]["type"], "model_change");
    assert_eq!(entries[2]["message"]["content"][0]["text"], "hi");
}

#[tokio::test]
async fn after_a_resume_the_next_request_carries_the_resumed_sessions_context() {
    // The context of a resumed session is read from it when a request needs it (not held in
    // memory from the resume on): the request must carry exactly that session's branch.
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&mock, common::new_session(dir.path()));
    let mut other = common::seeded_session(dir.path(), 2);
    other.flush().unwrap();
    let other = SessionManager::open(other.path(), &dir.path().join("sessions")).unwrap();
    let expected: Vec<(String, String)> = other
        .build_session_context()
        .messages
        .iter()
        .map(|m| (if m.is_assistant() { "assistant" } else { "user" }.to_string(), m.text()))
        .collect();
    agent.resume(other).unwrap();
    assert_eq!(agent.context_messages().len(), 4);
    agent.prompt("after the resume", RunOptions::default()).await.unwrap();
    let mut want = expected.clone();
    want.push(("user".into(), "after the resume".into()));
    assert_eq!(wire_messages(&mock.requests()[0]), want);
    // The reply is part of the context of the next request, as the session now holds it.
    agent.prompt("and again", RunOptions::default()).await.unwrap();
    assert_eq!(wire_messages(&mock.requests()[1]).len(), 7);
}
