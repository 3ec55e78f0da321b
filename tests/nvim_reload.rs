//! What the help promises after a `bash` tool call: "Buffers of files a command changed on disk
//! are reloaded" (events.lua runs `:checktime` when a bash call ends). Real headless Neovim, the
//! real host, a real command changing a real file; the model is the loopback mock.

mod common;


use common::nvim::{bounded, Editor};
use common::tool_call_reply;
use handoff_mock::MockReply;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_a_bash_command_changed_is_reloaded_in_its_buffer() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
        let file = ed.work_dir().join("notes.txt");
        std::fs::write(&file, "as it was\n").unwrap();
        ed.command("edit notes.txt").await;
        let buf = ed.eval("vim.api.nvim_get_current_buf()").await;
        ed.mock.push(tool_call_reply("bash", json!({ "command": "printf 'rewritten by the command\\nline two\\n' > notes.txt" }), "call_b1"));
        ed.mock.push(MockReply::text("Done."));
        ed.lua("require('handoff').prompt('rewrite notes.txt')", json!([])).await;
        ed.wait_event("HandoffToolEnd", 1).await;
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "rewritten by the command\nline two\n");
        // Reloaded when the call ended (not on some later focus event: there is none here).
        let lines = ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf])).await;
        assert_eq!(lines, json!(["rewritten by the command", "line two"]), "{}", ed.dump().await);
        assert_eq!(ed.lua("return vim.bo[...].modified", json!([buf])).await, json!(false));
        ed.wait_event("HandoffAgentEnd", 1).await;
        ed.quit().await;
    })
    .await;
}
