//! The slash commands' one table (`crates/core/src/controller/commands.rs`) against what derives from
//! it on the plugin's side: the generated `lua/handoff/slash_commands.lua`, and the completion
//! the prompt buffer offers in a real headless Neovim. (ACP's advertised list is checked in
//! `tests/acp.rs`, the CLI's `prompt` in `tests/cli.rs`.)
//!
//! `HANDOFF_BLESS=1 cargo test --test commands` rewrites `lua/handoff/slash_commands.lua`.

mod common;

use std::path::Path;

use common::nvim::{bounded, Editor};
use handoff_nvim::core::controller::SlashCommand;
use serde_json::{json, Value};

#[test]
fn the_plugins_command_file_is_the_tables() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/handoff/slash_commands.lua");
    let want = handoff_nvim::nvim::slash_commands::lua_file();
    if std::env::var_os("HANDOFF_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(got == want, "{} is stale: HANDOFF_BLESS=1 cargo test --test commands rewrites it", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_completes_the_table_and_nothing_else() {
    bounded(async {
        let ed = Editor::start().await;
        let items = ed
            .lua(
                "return vim.tbl_map(function(i) return { i.word, i.menu, i.info } end, require('handoff.commands').complete(''))",
                json!([]),
            )
            .await;
        let items: Vec<(String, String, String)> = serde_json::from_value(items).unwrap();
        let table: Vec<(String, String, String)> = SlashCommand::ALL
            .iter()
            .map(|c| (format!("/{}", c.name()), c.args().unwrap_or("").to_string(), c.help().to_string()))
            .collect();
        assert_eq!(items, table);
        // And the hint after a typed name is the table's argument.
        let hint: Value = ed.lua("return require('handoff.commands').complete('think')[1].menu", json!([])).await;
        assert_eq!(hint, SlashCommand::Thinking.args().unwrap());
        ed.quit().await;
    })
    .await;
}
