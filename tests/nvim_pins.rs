//! Pins from the editor (issue 33, `:help handoff-pins`): `:HandoffPin` on a chat line pins that
//! line as shown, `/pin` typed in the prompt buffer pins its text, neither is a model request,
//! and the slash commands complete. Real headless Neovim, the built host, the loopback mock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::nvim::{bounded, jsonl, Editor};
use serde_json::{json, Value};

/// The pins of the newest pins entry of a session file (empty without one).
fn pins_in(path: &Path) -> Vec<String> {
    jsonl(path)
        .iter()
        .rev()
        .find(|e| e["type"] == "custom" && e["customType"] == "handoff_pins")
        .map(|e| serde_json::from_value(e["data"]["pins"].clone()).unwrap())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_pin_on_a_chat_line_pins_that_line_and_sends_nothing_to_the_model() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        let line = "Keep \"src/api\" stable — callers  depend on it";
        ed.converse("what matters here?", line).await;
        let file = ed.session_file().await;
        // The cursor on the reply's line in the chat window, then `:HandoffPin`.
        let row = ed
            .lua(
                "local b = require('handoff.chat').chat_buf \
                 for i, l in ipairs(vim.api.nvim_buf_get_lines(b, 0, -1, false)) do \
                   if l == ... then vim.api.nvim_set_current_win(vim.fn.bufwinid(b)) vim.api.nvim_win_set_cursor(0, { i, 0 }) return i end \
                 end",
                json!([line]),
            )
            .await;
        assert!(row.is_u64(), "the reply's line is not in the chat\n{}", ed.dump().await);
        ed.command("HandoffPin").await;
        ed.wait_until("T.noted('1. Keep')", Duration::from_secs(8)).await;
        assert_eq!(pins_in(Path::new(&file)), [line]);
        // `/pin` typed in the prompt buffer: the same command, through the one parser.
        ed.lua("require('handoff.commands').run('/pin second  pin')", json!([])).await;
        ed.wait_until("T.noted('2. second  pin')", Duration::from_secs(8)).await;
        ed.settle().await;
        assert_eq!(pins_in(Path::new(&file)), [line, "second  pin"]);
        assert_eq!(ed.mock.requests().len(), 1, "a pin reached the model as a prompt");
        let messages = jsonl(Path::new(&file)).into_iter().filter(|e| e["type"] == "message").count();
        assert_eq!(messages, 2, "a pin became a message");
        // The commands complete like the other slash commands.
        let words: Vec<Value> = ed
            .eval("vim.tbl_map(function(i) return i.word end, require('handoff.commands').complete('pin'))")
            .await
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(words, [json!("/pin"), json!("/pins")]);
        assert_eq!(ed.eval("require('handoff.commands').complete('unp')[1].word").await, json!("/unpin"));
        // The chat shows the pins under its title, as they change.
        let shown = "(function() local out = {} for _, m in ipairs(vim.api.nvim_buf_get_extmarks(require('handoff.state').ui.chat_buf, -1, 0, 0, { details = true })) do for _, l in ipairs(m[4].virt_lines or {}) do out[#out + 1] = l[1][1] end end return out end)()";
        ed.wait_until(&format!("#{shown} == 2"), Duration::from_secs(5)).await;
        assert_eq!(ed.eval(shown).await, json!([format!("📌 1. {line}"), "📌 2. second  pin"]));
        // `/unpin`'s argument: each pin's number, its text beside it.
        let numbers = ed
            .eval("vim.tbl_map(function(i) return { i.word, i.menu } end, require('handoff.commands').complete_arg('unpin', ''))")
            .await;
        assert_eq!(numbers, json!([["1", line], ["2", "second  pin"]]));
        ed.lua("require('handoff.commands').run('/unpin 1')", json!([])).await;
        ed.wait_until(&format!("#{shown} == 1"), Duration::from_secs(5)).await;
        assert_eq!(ed.eval(shown).await, json!(["📌 1. second  pin"]));
        ed.quit().await;
    })
    .await;
}
