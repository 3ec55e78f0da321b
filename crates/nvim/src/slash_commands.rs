//! `lua/handoff/slash_commands.lua`: the controller's command table
//! ([`handoff_core::controller::commands`]) as data for the plugin, which completes and hints
//! the commands from it. Generated, never edited: `HANDOFF_BLESS=1 cargo test --test commands`
//! rewrites it, and that test fails while it is stale.

use handoff_core::config::schema::lua_string;
use handoff_core::controller::SlashCommand;

/// The file's text.
pub fn lua_file() -> String {
    let mut out = String::new();
    out.push_str("-- Generated from crates/core/src/controller/commands.rs: do not edit. `HANDOFF_BLESS=1 cargo test\n");
    out.push_str("-- --test commands` rewrites it (tests/commands.rs fails while it is stale).\n");
    out.push_str("-- Each slash command: `name` (typed after `/`), `args` (its argument as the prompt shows it;\n");
    out.push_str("-- nil: it takes none) and `help`.\n");
    out.push_str("return {\n");
    for command in SlashCommand::ALL {
        out.push_str(&format!("  {{ name = {}", lua_string(command.name())));
        if let Some(args) = command.args() {
            out.push_str(&format!(", args = {}", lua_string(args)));
        }
        out.push_str(&format!(", help = {} }},\n", lua_string(command.help())));
    }
    out.push_str("}\n");
    out
}
