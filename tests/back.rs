//! `/back` and `:HandoffBack` (issue 33): after a handoff, back to the parent session as it was;
//! the next prompt is written there, the child is kept. A session without a parent refuses in
//! one line. Through the controller (the one parser both front ends use) and in headless Neovim.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::nvim::{bounded, jsonl, Editor, DOC};
use common::{config, entry_lines, seeded_session, DOCUMENT};
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::{AgentConfig, AgentSession};
use handoff_nvim::core::controller::{text, Controller, FrontEndTexts, Input, InputOutcome};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

/// The user messages' texts of a session file.
fn user_texts(path: &std::path::Path) -> Vec<String> {
    entry_lines(path)
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .map(|e| e["message"]["content"].to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_returns_to_the_parent_and_the_next_prompt_is_written_there() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = Arc::new(AgentSession::new(AgentConfig::new(config(&mock)), seeded_session(dir.path(), 2)));
    let controller = Controller::new(agent.clone(), FrontEndTexts::default());
    assert_eq!(handoff_nvim::core::controller::classify_input(" /back "), Input::Back);
    assert_eq!(handoff_nvim::core::controller::classify_input("/backup the db"), Input::Prompt("/backup the db".into()));

    // Without a parent: one line, nothing sent, nothing switched.
    let parent = agent.session().path().to_path_buf();
    let InputOutcome::Back(Err(refused)) = tokio::time::timeout(T, controller.run_input("/back")).await.unwrap() else { panic!() };
    assert_eq!(refused.message, text::NO_PARENT);
    assert_eq!(agent.session().path(), parent);

    mock.push(MockReply::text(DOCUMENT));
    let InputOutcome::Handoff(_) = tokio::time::timeout(T, controller.run_input("/handoff")).await.unwrap() else { panic!() };
    let child = agent.session().path().to_path_buf();
    assert_ne!(child, parent);
    let requests = mock.requests().len();

    let InputOutcome::Back(Ok(back)) = tokio::time::timeout(T, controller.run_input("/back")).await.unwrap() else { panic!() };
    assert_eq!(back, parent);
    assert_eq!(agent.session().path(), parent);
    assert_eq!(mock.requests().len(), requests, "/back is no model request");

    mock.push(MockReply::text("answered in the parent"));
    let InputOutcome::Prompt(Ok(_)) = tokio::time::timeout(T, controller.run_input("after going back")).await.unwrap() else { panic!() };
    agent.session().flush().unwrap();
    assert!(user_texts(&parent).iter().any(|t| t.contains("after going back")), "{:?}", user_texts(&parent));
    assert!(!user_texts(&child).iter().any(|t| t.contains("after going back")), "the child got it");
    assert!(child.exists(), "the child is kept");
    // The request is the parent's conversation as its file holds it (its exchanges first).
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(last.contains("question 0") && last.contains("after going back"), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_back_in_neovim_switches_the_chat_to_the_parent_and_the_next_prompt_lands_there() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("first question", "first answer").await;
        let parent = ed.session_file().await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff").await;
        let done = ed.wait_event("HandoffDone", 1).await;
        let child = done["session_file"].as_str().unwrap().to_string();
        ed.wait_until(&format!("require('handoff').status().session_file == {child:?}"), Duration::from_secs(5)).await;

        ed.command("HandoffBack").await;
        ed.wait_until(&format!("require('handoff').status().session_file == {parent:?}"), Duration::from_secs(5)).await;
        ed.wait_until("table.concat(T.chat(), '\\n'):find('first answer', 1, true) ~= nil", Duration::from_secs(5)).await;

        ed.mock.push(MockReply::text("answered in the parent"));
        ed.lua("require('handoff').prompt('after going back')", json!([])).await;
        ed.wait_until("table.concat(T.chat(), '\\n'):find('answered in the parent', 1, true) ~= nil", Duration::from_secs(10)).await;
        ed.settle().await;
        let in_file = |path: &str| {
            jsonl(std::path::Path::new(path)).iter().any(|l| l["message"]["role"] == "user" && l["message"]["content"].to_string().contains("after going back"))
        };
        assert!(in_file(&parent), "the prompt is not in the parent's file");
        assert!(!in_file(&child), "the prompt went to the child");
        assert!(std::path::Path::new(&child).exists());
        ed.quit().await;
    })
    .await;
}
