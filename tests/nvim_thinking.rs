//! Thinking levels in real headless Neovim against the loopback mock: `setup{ provider = {
//! thinking } }` is a new session's level, `/thinking high` typed in the prompt records the
//! change and the next request carries it, the meter shows the level, and the reply's thinking
//! streams folded into the chat.

mod common;

use std::time::Duration;

use common::nvim::{bounded, jsonl, Editor};
use handoff_mock::MockReply;
use serde_json::json;

/// The chat window's winbar as drawn.
const WINBAR: &str = "vim.api.nvim_eval_statusline(vim.wo[vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1]].winbar, \
                      { winid = vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1], maxwidth = 200 }).str";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_high_typed_in_the_prompt_reaches_the_next_request_and_the_meter() {
    bounded(async {
        let ed = Editor::start_with(Some(json!({ "api": "anthropic", "model": "mock-model", "max_retries": 0, "timeout": 10, "thinking": "low" }))).await;
        // The provider table above has no base_url: point it at this test's mock.
        let provider = json!({ "api": "anthropic", "base_url": ed.mock.anthropic_base_url(), "model": "mock-model", "max_retries": 0, "timeout": 10, "thinking": "low" });
        ed.lua("require('handoff').setup({ bin = ..., provider = select(2, ...) })", json!([common::nvim::HOST_BIN, provider])).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        // setup()'s level is the new session's.
        ed.wait_until("require('handoff').status().thinking == 'low'", Duration::from_secs(10)).await;
        assert_eq!(ed.eval("require('handoff.meter').text()").await, "mock-model · low");

        ed.lua(
            "local chat = require('handoff.chat') vim.api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { '/thinking high' }) chat.submit()",
            json!([]),
        )
        .await;
        ed.wait_until("require('handoff').status().thinking == 'high'", Duration::from_secs(5)).await;
        assert!(ed.eval("T.noted('Thinking: high') ~= nil").await == json!(true));
        assert_eq!(ed.mock.requests().len(), 0, "/thinking is no prompt");

        ed.mock.push(MockReply::Reasoning {
            thinking: vec!["Let me think ".into(), "it over.\nCarefully.".into()],
            signature: Some("c2ln".into()),
            redacted: None,
            field: None,
            chunks: vec!["Here is the answer.".into()],
            calls: Vec::new(),
        });
        ed.lua("require('handoff').prompt('a hard question')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let body = &ed.mock.requests()[0].body;
        assert_eq!(body["thinking"], json!({ "type": "enabled", "budget_tokens": 16384 }), "{body}");
        assert_eq!(body["max_tokens"], 4096 + 16384);

        // The meter: model, level, figures; the same in the chat's winbar and statusline().
        let text = ed.eval("require('handoff.meter').text()").await;
        let text = text.as_str().unwrap();
        assert!(text.starts_with("mock-model · high · ") && text.ends_with("%)"), "{text}");
        assert_eq!(ed.eval(WINBAR).await, text);
        assert_eq!(ed.eval("require('handoff').statusline()").await, text);

        // The thinking is in the chat as a quote, folded to one line; the answer is not.
        let folds = ed
            .lua(
                "local buf = require('handoff.chat').chat_buf local win = vim.fn.win_findbuf(buf)[1] \
                 local rows = {} for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do rows[l] = i end \
                 return vim.api.nvim_win_call(win, function() \
                   local first = rows['> Let me think it over.'] \
                   return { start = vim.fn.foldclosed(first + 1), first = first, text = vim.fn.foldtextresult(first), \
                            answer = vim.fn.foldclosed(rows['Here is the answer.']) } end)",
                json!([]),
            )
            .await;
        assert_eq!(folds["start"], folds["first"], "{folds}\n{}", ed.dump().await);
        assert_eq!(folds["text"], "▸ Thinking (2 lines)");
        assert_eq!(folds["answer"], -1);

        // The session file: the change as pi records it, then the reply's signed thinking.
        let file = ed.session_file().await;
        let lines = jsonl(std::path::Path::new(&file));
        let levels: Vec<&str> = lines
            .iter()
            .filter(|l| l["type"] == "thinking_level_change")
            .map(|l| l["thinkingLevel"].as_str().unwrap())
            .collect();
        assert_eq!(levels, ["low", "high"]);
        let reply = lines.iter().find(|l| l["message"]["role"] == "assistant").unwrap();
        assert_eq!(
            reply["message"]["content"][0],
            json!({ "type": "thinking", "thinking": "Let me think it over.\nCarefully.", "thinkingSignature": "c2ln" })
        );
        ed.quit().await;
    })
    .await;
}
