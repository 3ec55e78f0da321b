//! The handoff drafted before the wall in a real headless Neovim (issue 32): the meter shows the
//! draft and the chat its cost, the banner says the wall continues from it, and `<Esc>` cancels a
//! wall whose draft is still being written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::nvim::Editor;
use handoff_mock::{MockReply, MockToolCall, MockUsage};
use handoff_nvim::core::controller::text;
use handoff_nvim::core::handoff;
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(15);

async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(90), f).await.expect("the test hung");
}

/// An editor whose model has a 20k window (the wall at 10k, the band from 8k), a file open in
/// the code window, and the chat beside it after one exchange.
async fn editor() -> (Editor, std::path::PathBuf) {
    let ed = Editor::start().await;
    let provider = json!({
        "api": "openai", "base_url": ed.mock.openai_base_url(), "model": "mock-model",
        "max_retries": 0, "timeout": 10, "context_window": 20000,
    });
    ed.lua(
        "require('handoff').setup({ bin = require('handoff.config').options.bin, provider = ..., tools = { policy = 'allow_all' } })",
        json!([provider]),
    )
    .await;
    let file = ed.work_dir().join("notes.txt");
    std::fs::write(&file, "the secret number is 42\n").unwrap();
    ed.command(&format!("edit {}", file.display())).await;
    ed.lua("require('handoff').open_chat()", json!([])).await;
    ed.converse("first question", "first answer").await;
    (ed, file)
}

/// A reply whose usage puts the next request in the band: the host starts the draft, which
/// gets `draft`.
fn script_band(ed: &Editor, draft: MockReply) {
    ed.mock.push_for(handoff::PROMPT.lines().next().unwrap(), draft);
    ed.mock.push(MockReply::text("Noted.").with_usage(MockUsage { input: 8500, output: Some(50), ..MockUsage::default() }));
}

/// The model reads the file, reporting a usage past the wall; then the task's end.
fn script_wall(ed: &Editor, file: &std::path::Path) {
    let call = MockToolCall::new("read", &json!({ "path": file.to_str().unwrap() }), 1).with_id("call_1");
    let calls = MockReply::ToolCalls { calls: vec![call], text_before: Vec::new(), chunk_delay_ms: 0, stop: "tool_calls".into(), interleave: false };
    ed.mock.push(calls.with_usage(MockUsage { input: 15_000, output: Some(50), ..MockUsage::default() }));
    ed.mock.push(MockReply::text("Done in the new session."));
}

fn chat_has(what: &str) -> String {
    format!("table.concat(T.chat(), '\\n'):find({}, 1, true) ~= nil", Value::String(what.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_meter_shows_the_draft_and_the_banner_says_the_wall_continues_from_it() {
    bounded(async {
        let (ed, file) = editor().await;
        let old = ed.session_file().await;
        ed.lua(
            "vim.api.nvim_create_autocmd('User', { pattern = 'HandoffDraft', callback = function(ev) \
               if ev.data.state == 'ready' then _G.ready_meter = require('handoff.meter').text() end end }) \
             vim.api.nvim_create_autocmd('User', { pattern = 'HandoffAutoStart', once = true, callback = function() \
               _G.banner = require('handoff.state').auto_banner end })",
            json!([]),
        )
        .await;
        script_band(&ed, MockReply::text(common::DOCUMENT));
        ed.lua("require('handoff').prompt('remember the plan')", json!([])).await;
        let meter = ed.wait_until("_G.ready_meter", T).await;
        assert!(meter.as_str().unwrap().contains("handoff prepared ("), "{meter}");
        ed.wait_until(&chat_has("Handoff prepared in the background ("), T).await;
        script_wall(&ed, &file);
        ed.lua("require('handoff').prompt('read notes.txt and report the number')", json!([])).await;
        let banner = ed.wait_until("_G.banner", T).await;
        assert!(banner.as_str().unwrap().ends_with(&format!("full — {}…", text::FROM_PREPARED)), "{banner}");
        let end = ed.wait_event("HandoffAutoEnd", 1).await;
        assert_eq!(end["result"], "done", "{end}");
        // The chat of the new session says how it was reached.
        ed.wait_until(&chat_has(&format!("), {}: the work goes on", text::FROM_PREPARED)), T).await;
        ed.wait_until(&chat_has("Done in the new session."), T).await;
        assert_ne!(ed.session_file().await, old);
        // The new session's first request holds the draft and the file read after it.
        let first = ed.mock.requests().into_iter().rev().find(|r| {
            common::wire_messages(r).first().is_some_and(|(_, t)| t.starts_with("<handoff-context>"))
        });
        let context = common::wire_messages(&first.expect("a request of the new session"))[0].1.clone();
        assert!(context.contains("## Key Decisions") && context.contains("the secret number is 42"), "{context}");
        // One handoff request in all: the draft.
        let handoffs = ed.mock.requests().iter().filter(|r| {
            common::wire_messages(r).iter().rev().find(|(role, _)| role == "user").is_some_and(|(_, t)| t.starts_with(handoff::PROMPT.lines().next().unwrap()))
        }).count();
        assert_eq!(handoffs, 1);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_cancels_a_wall_whose_draft_is_still_being_written() {
    bounded(async {
        let (ed, file) = editor().await;
        let old = ed.session_file().await;
        // The draft never ends by itself.
        script_band(&ed, MockReply::Stall { chunks: vec!["## Goal\n".into()] });
        ed.lua("require('handoff').prompt('remember the plan')", json!([])).await;
        ed.wait_until("(require('handoff.meter').text():find('preparing handoff', 1, true)) ~= nil", T).await;
        script_wall(&ed, &file);
        ed.lua("require('handoff').prompt('read notes.txt and report the number')", json!([])).await;
        ed.wait_event("HandoffAutoStart", 1).await;
        let indicator = ed.eval("require('handoff.chat').indicator_text()").await;
        assert!(indicator.as_str().unwrap().contains(&format!("{}… <Esc> to cancel", text::FROM_PREPARED)), "{indicator}");
        let sessions = ed.session_files().len();
        ed.command("wincmd t").await;
        ed.input("<Esc>").await;
        let end = ed.wait_event("HandoffAutoEnd", 1).await;
        assert_eq!(end["result"], "cancelled", "{end}");
        ed.wait_until("T.noted('Automatic handoff cancelled') ~= nil", T).await;
        assert_eq!(ed.session_file().await, old);
        assert_eq!(ed.session_files().len(), sessions, "no session was created");
        ed.settle().await;
        // The exchange, the band's reply, the draft, the tool call: nothing after the cancel.
        assert_eq!(ed.mock.requests().len(), 4, "{:?}", ed.mock.requests().iter().map(|r| r.raw_len).collect::<Vec<_>>());
        ed.quit().await;
    })
    .await;
}
