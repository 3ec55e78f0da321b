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

/// Found by hand (issue 40): after `/back` to a shorter session the chat's window stayed scrolled
/// past the new end (topline 94 of 94) and looked empty. A session drawn anew shows its last
/// lines: the window ends at the buffer's last line and shows more than that line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_a_shorter_session_shows_its_last_lines() {
    use handoff_nvim::core::message::Message;
    use handoff_nvim::core::session::SessionManager;
    bounded(async {
        let ed = Editor::start().await;
        let seeded = ed.dir.path().join("seeded");
        let parent = seeded_session(&seeded, 3).path().to_path_buf();
        let mut child = SessionManager::create(&seeded.join("sessions"), &ed.work_dir(), Some(parent.display().to_string())).unwrap();
        child.append_model_change("mock", "mock-model").unwrap();
        for i in 0..60 {
            child.append_message(&Message::user(format!("child question {i}"))).unwrap();
            // Replies with thinking, folded in the chat as a real session's are.
            let mut reply = Message::assistant("openai-completions", "mock", "mock-model");
            reply.push_thinking("thought\nat length\nand more");
            reply.push_text(&format!("child answer {i}\n\nwith a second paragraph"));
            child.append_message(&reply).unwrap();
        }
        child.flush().unwrap();
        let child = child.path().to_path_buf();

        // A screen, as by hand: Neovim draws for a UI of 100×40.
        let mut ui = nvim_rs::UiAttachOptions::new();
        ui.set_linegrid_external(true);
        ed.nvim.ui_attach(100, 40, &ui).await.unwrap();
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.wait_until("require('handoff').status().session_file ~= nil", T).await;
        ed.lua("require('handoff').resume(...)", json!([child])).await;
        ed.wait_until("table.concat(T.chat(), '\\n'):find('child answer 59', 1, true) ~= nil", T).await;
        ed.settle().await;
        // The window over the chat, as the user sees it after a redraw.
        const VIEW: &str = "(function() vim.cmd('redraw') \
            local win = vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1] \
            return vim.api.nvim_win_call(win, function() return { top = vim.fn.line('w0'), bottom = vim.fn.line('w$'), last = vim.fn.line('$'), height = vim.api.nvim_win_get_height(0) } end) end)()";
        let long = ed.eval(VIEW).await;
        assert_eq!(long["bottom"], long["last"], "the long session ends at the window's bottom: {long}");

        // `/back` typed in the prompt, as the user does.
        ed.lua("local chat = require('handoff.chat') vim.api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { '/back' }) chat.submit()", json!([])).await;
        ed.wait_until(&format!("require('handoff').status().session_file == {:?}", parent.display().to_string()), T).await;
        ed.wait_until("table.concat(T.chat(), '\\n'):find('child answer', 1, true) == nil", T).await;
        ed.settle().await;
        let short = ed.eval(VIEW).await;
        let (top, last) = (short["top"].as_i64().unwrap(), short["last"].as_i64().unwrap());
        assert_eq!(short["bottom"], short["last"], "the short session's last line is in view: {short}");
        assert!(top < last - 5, "the window shows the session's last lines, not only its last one: {short}\n{}", ed.dump().await);
        ed.quit().await;
    })
    .await;
}
