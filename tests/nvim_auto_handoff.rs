//! The automatic handoff in a real headless Neovim (issue 21): the banner in the chat, the
//! document live in its split, `User HandoffAutoStart`/`HandoffAutoEnd`, input typed during it
//! queued for the new session, and `<Esc>` from a code window cancelling it. Issue 32: the
//! handoff drafted before the wall (the meter, the chat, the banner "continuing from the prepared
//! handoff", `<Esc>` at a wall whose draft is still being written).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::nvim::Editor;
use handoff_mock::{MockReply, MockToolCall, MockUsage};
use handoff_nvim::core::controller::text;
use handoff_nvim::core::handoff;
use serde_json::{json, Value};

const DOC: &str = common::DOCUMENT;
const T: Duration = Duration::from_secs(15);

async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(90), f).await.expect("the test hung");
}

/// An editor whose model has a 20k window (its wall at half of it), a file open in the code
/// window, and the chat beside it after one exchange.
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

/// The model reads the file, reporting a usage past the wall; the document then streams slowly.
fn script_wall_mid_tool_loop(ed: &Editor, file: &std::path::Path, chunk_delay_ms: u64) {
    read_past_the_wall(ed, file);
    let chunks: Vec<String> = DOC.split_inclusive('\n').map(str::to_string).collect();
    ed.mock.push(MockReply::Text { chunks, chunk_delay_ms, first_delay_ms: 0, stop: "stop".into(), thinking: Vec::new() });
}

/// The model reads the file, reporting a usage past the wall.
fn read_past_the_wall(ed: &Editor, file: &std::path::Path) {
    let call = MockToolCall::new("read", &json!({ "path": file.to_str().unwrap() }), 1).with_id("call_1");
    let calls = MockReply::ToolCalls { calls: vec![call], text_before: Vec::new(), chunk_delay_ms: 0, stop: "tool_calls".into(), interleave: false };
    ed.mock.push(calls.with_usage(MockUsage { input: 15_000, output: Some(50), ..MockUsage::default() }));
}

fn user_texts(ed: &Editor) -> Vec<String> {
    let last = ed.mock.requests().last().cloned().unwrap();
    common::wire_messages(&last).into_iter().filter(|(r, _)| r == "user").map(|(_, t)| t).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_wall_the_chat_shows_the_banner_the_split_the_document_and_queued_input_goes_to_the_new_session() {
    bounded(async {
        let (ed, file) = editor().await;
        let old = ed.session_file().await;
        script_wall_mid_tool_loop(&ed, &file, 150);
        ed.mock.push(MockReply::text("Done in the new session."));
        ed.lua("require('handoff').prompt('read notes.txt and report the number')", json!([])).await;
        let start = ed.wait_event("HandoffAutoStart", 1).await;
        assert_eq!(start["reason"], "threshold");
        assert_eq!(start["boundary"], "after_tools");
        assert_eq!(start["window"], 20000);
        assert!(start["tokens"].as_u64().unwrap() > start["threshold"].as_u64().unwrap(), "{start}");
        // The banner in the chat and the indicator; the document grows in its split.
        ed.wait_until("table.concat(T.chat(), '\\n'):find('handing off to a new session', 1, true) ~= nil", T).await;
        let indicator = ed.eval("require('handoff.chat').indicator_text()").await;
        assert!(indicator.as_str().unwrap().contains("full — handing off to a new session… <Esc> to cancel"), "{indicator}");
        ed.wait_until(
            "(function() for _, b in ipairs(vim.api.nvim_list_bufs()) do \
               if vim.api.nvim_buf_get_name(b):find('handoff', 1, true) and table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n'):find('## Goal', 1, true) then return true end \
             end return false end)()",
            T,
        )
        .await;
        // Typed meanwhile: queued for the new session.
        ed.lua("require('handoff').prompt('and the README too')", json!([])).await;
        ed.wait_until("T.noted('Queued: sent in the new session') ~= nil", T).await;
        let end = ed.wait_event("HandoffAutoEnd", 1).await;
        assert_eq!(end["result"], "done", "{end}");
        assert_eq!(end["parent_session"], old.as_str());
        ed.wait_until("T.count('HandoffAgentEnd') >= 3", T).await;
        let new = ed.session_file().await;
        assert_ne!(new, old);
        assert_eq!(end["session_file"], new.as_str());
        assert_eq!(user_texts(&ed).last().unwrap(), "and the README too", "the queued input replaced the continuation");
        ed.wait_until("table.concat(T.chat(), '\\n'):find('Handed off automatically', 1, true) ~= nil", T).await;
        ed.wait_until("table.concat(T.chat(), '\\n'):find('Done in the new session.', 1, true) ~= nil", T).await;
        // Drawn once: the new session's transcript stops where it was at the switch, and the run
        // that started in it at once comes as its events.
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert_eq!(chat.as_str().unwrap().matches("and the README too").count(), 1, "{chat}");
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_in_the_code_window_cancels_the_automatic_handoff_and_nothing_is_created() {
    bounded(async {
        let (ed, file) = editor().await;
        let old = ed.session_file().await;
        script_wall_mid_tool_loop(&ed, &file, 2_000);
        ed.lua("require('handoff').prompt('read notes.txt')", json!([])).await;
        ed.wait_event("HandoffAutoStart", 1).await;
        ed.wait_until("require('handoff.state').tokens > 0", T).await;
        let sessions = ed.session_files().len();
        // Back in the code window, Normal mode: <Esc> cancels there too.
        ed.command("wincmd t").await;
        let name: Value = ed.eval("vim.api.nvim_buf_get_name(0)").await;
        assert!(name.as_str().unwrap().ends_with("notes.txt"), "{name}");
        ed.input("<Esc>").await;
        let end = ed.wait_event("HandoffAutoEnd", 1).await;
        assert_eq!(end["result"], "cancelled", "{end}");
        ed.wait_until("T.noted('Automatic handoff cancelled') ~= nil", T).await;
        // The chat is the session again: the handoff's request and partial document, shown as
        // they streamed, were never written to it.
        ed.wait_until("table.concat(T.chat(), '\\n'):find('Handoff requested', 1, true) == nil", T).await;
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("read notes.txt"), "{chat}");
        assert_eq!(ed.session_file().await, old);
        assert_eq!(ed.session_files().len(), sessions, "no session was created");
        ed.settle().await;
        assert_eq!(ed.mock.requests().len(), 3, "the exchange, the tool call, the handoff: nothing after");
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_final_answer_at_the_wall_it_hands_off_without_continuing_or_suggesting_a_handoff() {
    bounded(async {
        let (ed, _) = editor().await;
        let before = ed.mock.requests().len();
        // 85% of the window: above both the wall (50%) and handoff.suggest_at (80%).
        ed.mock.push(MockReply::text("The answer.").with_usage(MockUsage { input: 17_000, output: Some(10), ..MockUsage::default() }));
        ed.mock.push(MockReply::text(DOC));
        ed.lua("require('handoff').prompt('one more question')", json!([])).await;
        let start = ed.wait_event("HandoffAutoStart", 1).await;
        assert_eq!(start["boundary"], "after_reply", "{start}");
        let end = ed.wait_event("HandoffAutoEnd", 1).await;
        assert_eq!(end["result"], "done", "{end}");
        ed.settle().await;
        assert_eq!(ed.mock.requests().len(), before + 2, "the prompt and the handoff: no continuation");
        assert_eq!(ed.eval("T.count('HandoffSuggested')").await, json!(0), "the host handed off: no suggestion");
        ed.wait_until("table.concat(T.chat(), '\\n'):find('the new session waits for your next prompt', 1, true) ~= nil", T).await;
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_continuation_shows_as_the_hosts_not_under_the_users_heading() {
    bounded(async {
        let (ed, file) = editor().await;
        script_wall_mid_tool_loop(&ed, &file, 0);
        ed.mock.push(MockReply::text("Went on in the new session."));
        ed.lua("require('handoff').prompt('read notes.txt and report the number')", json!([])).await;
        ed.wait_event("HandoffAutoEnd", 1).await;
        ed.wait_until("table.concat(T.chat(), '\\n'):find('Went on in the new session.', 1, true) ~= nil", T).await;
        let shown = |chat: &str| {
            assert!(chat.contains("## handoff.nvim · continuing after the handoff\n\n> [Written by handoff.nvim"), "{chat}");
            assert!(!chat.contains("## You\n\n[Written by handoff.nvim"), "{chat}");
        };
        shown(ed.eval("table.concat(T.chat(), '\\n')").await.as_str().unwrap());
        // Drawn again from the session file (a resume), the same.
        let file = ed.session_file().await;
        let switches = ed.eval("T.count('HandoffSessionSwitch')").await.as_u64().unwrap() as usize;
        ed.lua("require('handoff').resume(...)", json!([file])).await;
        ed.wait_event("HandoffSessionSwitch", switches + 1).await;
        ed.wait_until("table.concat(T.chat(), '\\n'):find('Went on in the new session.', 1, true) ~= nil", T).await;
        shown(ed.eval("table.concat(T.chat(), '\\n')").await.as_str().unwrap());
        ed.quit().await;
    })
    .await;
}

/// Issue 31: the banner and the meter computed "how full" each its own way (the host truncated,
/// the meter rounded), so at 85.55% the chat said 85% above a meter saying 86%. The host's one
/// function gives both: the same figure, taken at the same moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_banner_and_the_meter_say_the_same_percentage() {
    bounded(async {
        let (ed, _) = editor().await;
        ed.lua(
            "vim.api.nvim_create_autocmd('User', { pattern = 'HandoffAutoStart', once = true, callback = function() \
               _G.at_wall = { meter = require('handoff.meter').text(), banner = require('handoff.state').auto_banner } end })",
            json!([]),
        )
        .await;
        // 17,100 + 10 of a 20,000 window: 85.55%, 85 truncated and 86 rounded.
        ed.mock.push(MockReply::text("The answer.").with_usage(MockUsage { input: 17_100, output: Some(10), ..MockUsage::default() }));
        ed.mock.push(MockReply::text(DOC));
        ed.lua("require('handoff').prompt('one more question')", json!([])).await;
        let seen = ed.wait_until("_G.at_wall", T).await;
        let percent = |text: &str, before: &str| -> u64 {
            let at = text.find(before).unwrap_or_else(|| panic!("no {before:?} in {text:?}"));
            let digits: String = text[at + before.len()..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap_or_else(|_| panic!("no percentage after {before:?} in {text:?}"))
        };
        let (meter, banner) = (seen["meter"].as_str().unwrap(), seen["banner"].as_str().unwrap());
        assert!(meter.contains("17.1k/20k"), "the meter shows the reply's usage: {meter}");
        assert_eq!(percent(meter, "("), percent(banner, "Context "), "meter {meter:?}, banner {banner:?}");
        assert_eq!(percent(banner, "Context "), 85, "{banner}");
        ed.wait_event("HandoffAutoEnd", 1).await;
        ed.quit().await;
    })
    .await;
}

/// Never die at the wall: the handoff request fails (a server error), the chat says the work goes
/// on from the host's own document, and the task finishes in the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handoff_request_at_the_wall_goes_on_from_the_hosts_document_and_the_chat_says_so() {
    bounded(async {
        let (ed, file) = editor().await;
        let old = ed.session_file().await;
        read_past_the_wall(&ed, &file);
        ed.mock.push(MockReply::Status { status: 500, body: "internal error".into(), retry_after: None });
        ed.mock.push(MockReply::text("Done in the new session."));
        ed.lua("require('handoff').prompt('read notes.txt and report the number')", json!([])).await;
        let end = ed.wait_event("HandoffAutoEnd", 1).await;
        assert_eq!(end["result"], "done", "{end}");
        ed.wait_until("table.concat(T.chat(), '\\n'):find('continuing from a handoff written without the model (', 1, true) ~= nil", T).await;
        ed.wait_until("table.concat(T.chat(), '\\n'):find('Done in the new session.', 1, true) ~= nil", T).await;
        assert_ne!(ed.session_file().await, old, "the new session is in force");
        let users = user_texts(&ed);
        assert!(users[0].contains("# Handoff written by handoff.nvim without the model"), "{users:?}");
        assert!(users[0].contains("read notes.txt and report the number"), "{users:?}");
        ed.quit().await;
    })
    .await;
}

// Issue 32: the handoff drafted before the wall -------------------------------------------

/// A reply whose usage puts the next request in the band: the host starts the draft, which
/// gets `draft`.
fn script_band(ed: &Editor, draft: MockReply) {
    ed.mock.push_for(handoff::PROMPT.lines().next().unwrap(), draft);
    ed.mock.push(MockReply::text("Noted.").with_usage(MockUsage { input: 8500, output: Some(50), ..MockUsage::default() }));
}

/// The model reads the file, reporting a usage past the wall; then the task's end.
fn script_wall(ed: &Editor, file: &std::path::Path) {
    read_past_the_wall(ed, file);
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
