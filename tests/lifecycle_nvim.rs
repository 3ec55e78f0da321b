//! The prompt's lifecycle (issue 31) from the editor: a reviewed handoff followed by a prompt and
//! another reviewed handoff (the chain that said "Nothing to hand off"). Real headless Neovim, the
//! built host, the loopback mock model.

mod common;

use std::time::Duration;

use common::nvim::{bounded, Editor, DOC};
use handoff_mock::MockReply;
use serde_json::json;

/// Bug: `:Handoff!`, `:w`, one exchange in the new session, `:Handoff!` again said "Nothing to
/// hand off (no messages yet)". Now the second review opens a draft of the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewed_handoff_then_a_prompt_then_another_reviewed_handoff_opens_a_draft() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("first question", "first answer").await;
        let first = ed.session_file().await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff!").await;
        ed.wait_event("HandoffReview", 1).await;
        ed.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(vim.fn.bufnr('handoff://review.md'))[1])", json!([])).await;
        ed.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, { 'Ship the parser, edited.' })", json!([])).await;
        ed.command("write").await;
        let done = ed.wait_event("HandoffDone", 1).await;
        assert_eq!(done["parent_session"], first.as_str(), "{done}");
        let second = done["session_file"].as_str().unwrap().to_string();
        ed.wait_until(&format!("require('handoff').status().session_file == {second:?}"), Duration::from_secs(5)).await;
        ed.mock.push(MockReply::text("an answer in the new session"));
        ed.lua(
            "local c = require('handoff.chat') vim.api.nvim_buf_set_lines(c.prompt_buf, 0, -1, false, { 'a question in the new session' }) c.submit()",
            json!([]),
        )
        .await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff!").await;
        for _ in 0..300 {
            if ed.eval("T.count('HandoffReview') >= 2 or T.noted('Nothing to hand off') ~= nil").await == json!(true) { break; }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let notes = ed.eval("vim.tbl_map(function(n) return n.msg end, T.notes)").await;
        let events = ed.eval("vim.tbl_map(function(e) return e.name end, T.events)").await;
        assert_eq!(ed.eval("T.count('HandoffReview')").await, json!(2), "notes {notes}\nevents {events}\nstatus {}\nchat {}", ed.status().await, ed.eval("table.concat(T.chat(), '\\n')").await);
        assert_eq!(ed.eval("T.noted('Nothing to hand off') == nil").await, json!(true), "{}", ed.dump().await);
        // The draft is of the session the prompt went to.
        let last = ed.mock.requests().last().cloned().unwrap();
        let said: Vec<String> = common::wire_messages(&last).into_iter().map(|(_, t)| t).collect();
        assert!(said.iter().any(|t| t.contains("a question in the new session")), "{said:?}");
        ed.quit().await;
    })
    .await;
}
