//! The ledger of a handoff (issue 33): what the new session holds and what it left behind, as
//! `details.ledger` on its handoff entry, counted against the parent session's file; shown by the
//! CLI on stderr, folded under the handoff in the chat, and under the text in the review buffer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::nvim::{bounded, Editor, DOC};
use common::{config, entry_lines, seeded_session, tool_calls_reply, DOCUMENT};
use handoff_mock::{MockReply, MockServer, MockToolCall};
use handoff_nvim::core::agent::fit::estimate_text_tokens;
use handoff_nvim::core::agent::{AgentConfig, AgentSession};
use handoff_nvim::core::controller::{Controller, FrontEndTexts, InputOutcome};
use handoff_nvim::core::handoff::HandoffOutcome;
use handoff_nvim::core::session::ledger::Ledger;
use handoff_nvim::core::tools::consent::{Level, Policy};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(60);

/// The texts of the tool results in a session file, with their tools.
fn tool_results(path: &Path) -> Vec<(String, String)> {
    entry_lines(path)
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| {
            let m = &e["message"];
            let text = m["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n");
            (m["toolName"].as_str().unwrap().to_string(), text)
        })
        .collect()
}

fn stored_ledger(path: &Path) -> Value {
    let entry = entry_lines(path).into_iter().find(|e| e["customType"] == "handoff").expect("no handoff entry");
    entry["details"]["ledger"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_after_a_tool_turn_records_what_it_carried_and_dropped_as_the_parent_holds_it() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "the secret number is 42\nand the colour is teal\n").unwrap();
    let plan = dir.path().join("plan.txt");
    std::fs::write(&plan, "1. build\n2. ship\n").unwrap();
    let agent = Arc::new(AgentSession::new(
        AgentConfig { policy: Policy { level: Level::AllowAll, ..Policy::default() }, ..AgentConfig::new(config(&mock)) },
        seeded_session(dir.path(), 1),
    ));
    let controller = Controller::new(agent.clone(), FrontEndTexts::default());
    let run = |text: &'static str| {
        let controller = controller.clone();
        async move { tokio::time::timeout(T, controller.run_input(text)).await.expect("hung") }
    };
    let InputOutcome::Pins(Ok(_)) = run("/pin Keep the API stable").await else { panic!("not a pin") };
    mock.push(tool_calls_reply(vec![
        MockToolCall::new("read", &json!({ "path": notes.to_str().unwrap() }), 1).with_id("c1"),
        MockToolCall::new("read", &json!({ "path": plan.to_str().unwrap() }), 1).with_id("c2"),
    ]));
    mock.push(MockReply::text("The number is 42."));
    let InputOutcome::Prompt(Ok(_)) = run("read the notes and the plan").await else { panic!("the prompt failed") };
    let parent = agent.session().path().to_path_buf();

    mock.push(MockReply::text(DOCUMENT));
    let InputOutcome::Handoff(outcome) = run("/handoff").await else { panic!("not a handoff") };
    let HandoffOutcome::Done { session_file, ledger, .. } = outcome else { panic!("{outcome:?}") };

    // Counted against the parent's file, independently of the host's own walk.
    let results = tool_results(&parent);
    assert_eq!(results.len(), 2, "{results:?}");
    let tokens: u64 = results.iter().map(|(_, t)| estimate_text_tokens(t) as u64).sum();
    let stored = stored_ledger(Path::new(&session_file));
    assert_eq!(stored["dropped"]["toolResults"]["count"], 2, "{stored}");
    assert_eq!(stored["dropped"]["toolResults"]["tokens"], tokens, "{stored}");
    assert_eq!(stored["dropped"]["toolResults"]["tools"], json!({ "read": 2 }));
    // The facts name the files read, so they are not among the dropped ones.
    assert_eq!(stored["carried"]["facts"], json!({ "readFiles": 2 }), "{stored}");
    assert_eq!(stored["dropped"]["filesRead"], json!([]));
    assert_eq!(stored["carried"]["pins"], 1);
    assert_eq!(stored["carried"]["document"]["sections"].as_array().unwrap().len(), 6, "{stored}");
    // The seeded exchange, the prompt and the final answer are only summarised; the handoff's
    // own request is the host's, and its document is the text itself.
    assert_eq!(stored["dropped"]["messages"], 4, "{stored}");
    // What the front ends were told is what the file keeps.
    assert_eq!(serde_json::to_value(&*ledger).unwrap(), stored);
    let summary = Ledger::of_details(&json!({ "ledger": stored })).unwrap().summary();
    assert_eq!(summary, format!("Carried 3 · dropped 2 tool results ({tokens} tokens)"), "{stored}");
    // None of it reaches the model: the next request holds no ledger.
    mock.push(MockReply::text("ok"));
    let InputOutcome::Prompt(Ok(_)) = run("go on").await else { panic!() };
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(!last.contains("toolResults") && !last.contains("dropped"), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_the_ledger_on_stderr() {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let session = seeded_session(dir.path(), 2).path().to_path_buf();
    mock.push(MockReply::text(DOCUMENT));
    let mut c = common::clean_command_async(env!("CARGO_BIN_EXE_handoff-nvim"));
    c.env("MOCK_KEY", "k")
        .args(["--provider", "openai", "--model", "mock-model", "--api-key-env", "MOCK_KEY"])
        .arg("--base-url")
        .arg(mock.openai_base_url())
        .arg("handoff")
        .arg(&session)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .stdin(std::process::Stdio::null());
    let out = tokio::time::timeout(T, c.output()).await.expect("hung").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let new = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let ledger = Ledger::of_details(&json!({ "ledger": stored_ledger(Path::new(&new)) })).unwrap();
    assert!(stderr.lines().any(|l| l == ledger.summary()), "{stderr}");
    assert_eq!(ledger.dropped.messages, 4, "{ledger:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_folds_the_ledger_under_the_handoff_and_the_review_buffer_shows_it_before_writing() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("first question", "first answer").await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff").await;
        let done = ed.wait_event("HandoffDone", 1).await;
        let child = done["session_file"].as_str().unwrap().to_string();
        ed.wait_until(&format!("require('handoff').status().session_file == {child:?}"), Duration::from_secs(5)).await;
        let ledger = Ledger::of_details(&json!({ "ledger": stored_ledger(Path::new(&child)) })).unwrap();
        let line = format!("▸ {}", ledger.summary());
        let found = ed
            .wait_until(
                &format!(
                    "(function() for i, l in ipairs(T.chat()) do if l == {line:?} then return i end end return false end)()"
                ),
                Duration::from_secs(5),
            )
            .await;
        let row = found.as_i64().unwrap();
        // Folded to its one line in the chat's window: the parts are under it.
        let chat_win = "vim.fn.win_findbuf(require('handoff.state').ui.chat_buf)[1]";
        let folded = ed
            .eval(&format!("vim.api.nvim_win_call({chat_win}, function() return {{ vim.fn.foldclosed({row}), vim.fn.foldclosedend({row}) }} end)"))
            .await;
        assert_eq!(folded, json!([row, row + 2]), "{}", ed.dump().await);
        let parts = ed.eval(&format!("{{ T.chat()[{}], T.chat()[{}] }}", row + 1, row + 2)).await;
        assert_eq!(parts, json!(ledger.lines().iter().map(|l| format!("  {l}")).collect::<Vec<_>>()));

        // A reviewed one: the review buffer shows the ledger under the text, before :w.
        ed.converse("second question", "second answer").await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff!").await;
        ed.wait_event("HandoffReview", 1).await;
        let virt = ed
            .eval(
                "(function() local buf = vim.fn.bufnr('handoff://review.md') local out = {} \
                 for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = true })) do \
                 for _, l in ipairs(m[4].virt_lines or {}) do out[#out + 1] = l[1][1] end end return out end)()",
            )
            .await;
        let virt: Vec<String> = serde_json::from_value(virt).unwrap();
        assert!(virt.iter().any(|l| l.starts_with("▸ Carried ") && l.contains("dropped")), "{virt:?}");
        assert!(virt.iter().any(|l| l.starts_with("  dropped: ")), "{virt:?}");
        ed.quit().await;
    })
    .await;
}
