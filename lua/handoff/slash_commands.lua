-- Generated from crates/core/src/controller/commands.rs: do not edit. `HANDOFF_BLESS=1 cargo test
-- --test commands` rewrites it (tests/commands.rs fails while it is stale).
-- Each slash command: `name` (typed after `/`), `args` (its argument as the prompt shows it;
-- nil: it takes none) and `help`.
return {
  { name = "handoff", args = "[--to AGENT] [focus instructions]", help = "Hand off: write a handoff document and continue in a new session that starts from it (--to: on that agent, or ours)" },
  { name = "pin", args = "{text}", help = "Pin a text for the whole task: sent with every request, carried whole by every handoff" },
  { name = "pins", help = "List the pins, numbered" },
  { name = "unpin", args = "{number}", help = "Remove a pin (its number in /pins)" },
  { name = "back", help = "Go back to the session this one was handed off from" },
  { name = "new", help = "Start a new, empty session" },
  { name = "sessions", help = "List the sessions of this folder, newest first (the editor picks one to resume)" },
  { name = "model", args = "[name]", help = "Switch the model (no name: say which is in use)" },
  { name = "thinking", args = "[off|minimal|low|medium|high]", help = "Set how hard the model thinks (no level: say which is in force)" },
}
