//! How a user's plugin manager loads handoff.nvim, in real headless Neovim: lazy.nvim's order
//! (stub commands first; the plugin's files sourced on the first `:Handoff…`; then
//! `setup(opts)`; then the command runs again) and a plain `:packadd`. lazy.nvim itself is in no
//! registry reachable here, so its loader's steps are reproduced as it documents them.

mod common;

use std::time::Duration;

use common::nvim::{bounded, Editor};
use handoff_mock::MockReply;
use serde_json::json;

/// lazy.nvim's `cmd = { … }` handler: a stub per command that, when run, deletes the stubs, puts
/// the plugin on 'runtimepath', sources its plugin/ files, calls `setup(opts)` and runs the
/// command again with its arguments and bang.
const LAZY_STUBS: &str = r#"
local root, opts = ...
_G.loads = 0
local cmds = { "Handoff", "HandoffChat" }
local function load()
  for _, name in ipairs(cmds) do pcall(vim.api.nvim_del_user_command, name) end
  vim.opt.rtp:prepend(root)
  vim.cmd("runtime! plugin/**/*.lua")
  require("handoff").setup(opts)
  _G.loads = _G.loads + 1
end
for _, name in ipairs(cmds) do
  vim.api.nvim_create_user_command(name, function(o)
    load()
    vim.cmd({ cmd = name, args = o.fargs, bang = o.bang })
  end, { nargs = "*", bang = true })
end
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_nvim_order_stub_commands_then_the_plugin_then_setup() {
    bounded(async {
        let ed = Editor::start_bare().await;
        let root = env!("CARGO_MANIFEST_DIR");
        ed.lua(LAZY_STUBS, json!([root, ed.default_setup()])).await;
        assert_eq!(ed.eval("package.loaded['handoff'] == nil").await, json!(true), "loaded before use");
        // The first command loads everything and then runs for real.
        ed.command("HandoffChat").await;
        assert_eq!(ed.eval("_G.loads").await, json!(1));
        ed.wait_until("require('handoff.chat').is_open() and vim.api.nvim_get_current_buf() == require('handoff.chat').prompt_buf", Duration::from_secs(5)).await;
        ed.converse("first question", "first answer").await;
        // Later commands are the plugin's own (no second load).
        ed.mock.push(MockReply::text("## Goal\nship it"));
        ed.command("Handoff the loader").await;
        let done = ed.wait_event("HandoffDone", 1).await;
        assert_eq!(done["document"], "## Goal\nship it");
        assert_eq!(ed.eval("_G.loads").await, json!(1));
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_packadd_then_setup() {
    bounded(async {
        let ed = Editor::start_bare().await;
        let pack = ed.dir.path().join("site/pack/plugins/opt");
        std::fs::create_dir_all(&pack).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_MANIFEST_DIR"), pack.join("handoff.nvim")).unwrap();
        ed.lua("vim.opt.packpath:prepend(...) vim.cmd('packadd handoff.nvim')", json!([ed.dir.path().join("site")])).await;
        assert_eq!(ed.eval("vim.fn.exists(':Handoff') == 2 and vim.fn.exists(':HandoffChat') == 2").await, json!(true));
        ed.lua("require('handoff').setup(...)", json!([ed.default_setup()])).await;
        ed.converse("hello", "hi").await;
        assert_eq!(ed.session_files().len(), 1);
        ed.quit().await;
    })
    .await;
}
