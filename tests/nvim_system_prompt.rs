//! The system prompt in the editor (issue 25): the user-level `AGENTS.md` of
//! `stdpath("config")/handoff` and the project's, in order; `:HandoffContext` shows the prompt
//! exactly as the model gets it; the chat's header and `:checkhealth handoff` name the files.
//! Real headless Neovim, the built host, the mock. Needs `NVIM_BIN` or the checkout's `.venv`.

mod common;

use std::time::Duration;

use common::nvim::{bounded, Editor};
use handoff_mock::MockReply;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_context_shows_the_prompt_as_sent_and_the_header_and_health_name_the_instruction_files() {
    bounded(async {
        let ed = Editor::start().await;
        // stdpath("config") is $XDG_CONFIG_HOME/nvim; the session works in `work`.
        let user = ed.dir.path().join("config/nvim/handoff/AGENTS.md");
        let project = ed.work_dir().join("AGENTS.md");
        std::fs::create_dir_all(user.parent().unwrap()).unwrap();
        std::fs::write(&user, "User rule: answer in English.\n").unwrap();
        std::fs::write(&project, "Project rule: run the tests.\n").unwrap();
        // Neovim's view of the folders (the temp folder may be behind a symlink).
        let user = ed.eval(&format!("vim.fn.resolve({:?})", user.to_str().unwrap())).await;
        let project = ed.eval(&format!("vim.fn.resolve({:?})", project.to_str().unwrap())).await;
        let (user, project) = (user.as_str().unwrap().to_string(), project.as_str().unwrap().to_string());

        ed.command("HandoffContext").await;
        let shown = ed
            .wait_until("vim.api.nvim_buf_get_name(0):match('system%-prompt') and table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')", Duration::from_secs(10))
            .await;
        let shown = shown.as_str().unwrap().to_string();
        assert_eq!(ed.eval("vim.bo.filetype").await, json!("markdown"));
        assert_eq!(ed.eval("vim.bo.buftype").await, json!("nofile"));
        let at_user = shown.find(&format!("## {user}\n\nUser rule: answer in English.")).unwrap_or_else(|| panic!("{shown}"));
        let at_project = shown.find(&format!("## {project}\n\nProject rule: run the tests.")).unwrap_or_else(|| panic!("{shown}"));
        assert!(at_user < at_project, "the user's file first:\n{shown}");

        // What the model gets is what was shown.
        ed.mock.push(MockReply::text("Understood."));
        ed.lua("require('handoff').prompt('hello')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let request = ed.mock.requests().last().cloned().unwrap();
        assert_eq!(request.body["messages"][0], json!({ "role": "system", "content": shown }));

        // The chat's header names the files.
        ed.lua("require('handoff').open_chat()", json!([])).await;
        let reply = ed.eval("require('handoff.host').request('transcript')").await;
        ed.lua("require('handoff.host').apply_transcript(...)", json!([reply])).await;
        let chat: Vec<String> = serde_json::from_value(ed.eval("T.chat()").await).unwrap();
        let header = chat.iter().find(|l| l.starts_with("*Instructions: ")).unwrap_or_else(|| panic!("{chat:?}"));
        let short = ed.lua("return vim.fn.fnamemodify(select(1, ...), ':~:.') .. ', ' .. vim.fn.fnamemodify(select(2, ...), ':~:.')", json!([user, project])).await;
        let expected = format!("*Instructions: {}*", short.as_str().unwrap());
        assert_eq!(header, &expected);

        // :checkhealth lists them.
        ed.command("checkhealth handoff").await;
        let health = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
        let health = health.as_str().unwrap();
        for file in [&user, &project] {
            assert!(health.contains(&format!("instructions: {file}")), "{health}");
        }
        assert!(health.contains(":HandoffContext shows it"), "{health}");
        ed.quit().await;
    })
    .await;
}
