//! End-to-end: editor context in prompts, with a real headless Neovim, the built host and the
//! mock model. A selection sent with `:'<,'>HandoffChat`, an `@file` typed (and completed) in the
//! prompt, and `#diagnostics` reach the model as fenced blocks headed by the path; the chat shows
//! one "📎" line for each.

mod common;

use std::time::Duration;

use common::nvim::{bounded, user_texts, Editor};
use handoff_mock::MockReply;
use serde_json::json;

const ITEMS: &str = "(function() local i = vim.fn.complete_info({ 'items' }).items; \
                     if #i == 0 then return nil end; return vim.tbl_map(function(x) return x.word end, i) end)()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selection_file_and_diagnostics_reach_the_model_as_fenced_blocks() {
    bounded(async {
        let ed = Editor::start().await;
        let work = ed.work_dir();
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::write(work.join("src/x.lua"), "local one = 1\nlocal two = 2\nlocal three = 3\nreturn one\n").unwrap();
        std::fs::write(work.join("notes.md"), "# Notes\nparse first\n").unwrap();

        // A visual selection, then `:'<,'>HandoffChat`: the lines go into the prompt.
        ed.command("edit src/x.lua").await;
        ed.lua("vim.cmd('normal! 2GVj' .. vim.keycode('<Esc>'))", json!([])).await;
        ed.command("'<,'>HandoffChat").await;
        let prompt = ed
            .eval("vim.api.nvim_get_current_buf() == require('handoff.chat').prompt_buf and vim.api.nvim_buf_get_lines(0, 0, -1, false)")
            .await;
        assert_eq!(prompt, json!(["```lua src/x.lua:2-3", "local two = 2", "local three = 3", "```", ""]));
        ed.mock.push(MockReply::text("It declares two locals."));
        ed.input("iexplain this<C-s>").await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let sent = user_texts(&ed.mock).last().cloned().unwrap();
        assert_eq!(sent, "```lua src/x.lua:2-3\nlocal two = 2\nlocal three = 3\n```\nexplain this");
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        let chat = chat.as_str().unwrap();
        assert!(chat.contains("## You\n\n📎 src/x.lua:2-3 (2 lines)\nexplain this"), "{chat}");
        assert!(!chat.contains("local three = 3"), "{chat}");

        // `@` typed in the prompt offers the project's files; the file is attached when sent.
        ed.input("<Esc>isummarize @").await;
        let words = ed.wait_until(ITEMS, Duration::from_secs(5)).await;
        let words: Vec<String> = serde_json::from_value(words).unwrap();
        assert!(words.contains(&"@notes.md".to_string()) && words.contains(&"@src/x.lua".to_string()), "{words:?}");
        ed.mock.push(MockReply::text("Parse first."));
        ed.input("<C-e>notes.md please<C-s>").await;
        ed.wait_event("HandoffAgentEnd", 2).await;
        let sent = user_texts(&ed.mock).last().cloned().unwrap();
        assert_eq!(sent, "summarize `notes.md` please\n\n```markdown notes.md\n# Notes\nparse first\n```");

        // `#diagnostics`: those of the buffer the user came from.
        ed.lua(
            "local buf = vim.fn.bufnr('src/x.lua') \
             vim.diagnostic.set(vim.api.nvim_create_namespace('e2e'), buf, { \
               { lnum = 3, col = 7, severity = vim.diagnostic.severity.ERROR, message = 'undefined global one' } })",
            json!([]),
        )
        .await;
        ed.mock.push(MockReply::text("Define it."));
        ed.lua("require('handoff.chat').ensure_buffers() vim.api.nvim_buf_set_lines(require('handoff.chat').prompt_buf, 0, -1, false, { 'fix #diagnostics' }) require('handoff.chat').submit()", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        let sent = user_texts(&ed.mock).last().cloned().unwrap();
        assert_eq!(
            sent,
            "fix the diagnostics of `src/x.lua`\n\n```diagnostics src/x.lua\nsrc/x.lua:4:8 error undefined global one\n```"
        );
        // The session keeps the full text; the rebuilt chat shows it compactly again.
        let reply = ed.eval("require('handoff.host').request('transcript')").await;
        ed.lua("require('handoff.host').apply_transcript(...)", json!([reply])).await;
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        let chat = chat.as_str().unwrap();
        for line in ["📎 src/x.lua:2-3 (2 lines)", "📎 notes.md (2 lines)", "📎 #diagnostics of src/x.lua (1)"] {
            assert!(chat.contains(line), "{line:?} not in:\n{chat}");
        }
        assert!(!chat.contains("parse first"), "{chat}");
        ed.quit().await;
    })
    .await;
}
