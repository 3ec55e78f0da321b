//! What a tool is to the rest of the host: its definition and kind, how it runs, and what one of
//! its calls means — the chat's line for it, the file it changes, what an "always" answer
//! covers, its preview for an approval, and its part of a handoff's facts. Each tool's module
//! implements [`Tool`] (codex's per-tool handler is the model); [`super::ToolName::tool`] is the
//! registry's table. Adding a tool is its own file and one line there.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::Value;

use super::{Preview, ToolContext, ToolDefinition, ToolError, ToolKind, ToolName, ToolOutput};
use crate::core::message::Message;

/// What an "always" answer to a call covers for the rest of the session.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConsentKey {
    /// Every call of the tool.
    Tool,
    /// Calls with exactly this key (bash: the exact command).
    Exact(String),
}

/// A call's part of a handoff's facts (see `handoff::facts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallFact {
    /// A file read, as the call named it.
    Read(String),
    /// A file changed (edited, written), as the call named it.
    Modified(String),
    /// A command run and how it ended: its exit code, or else how it stopped ("aborted", the
    /// last line of a failure).
    Command { command: String, exit_code: Option<i32>, ended: Option<String> },
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn name(&self) -> ToolName;

    /// What it may do: the basis of the consent policy.
    fn kind(&self) -> ToolKind;

    /// The name, description and JSON Schema parameters the model sees.
    fn definition(&self) -> ToolDefinition;

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;

    /// The chat's line for a call: the argument that says what it does (by default its path).
    fn summary(&self, args: &Value) -> String {
        argument_summary(args, "path")
    }

    /// What an "always" answer covers; `None`: it cannot be granted (a call without the
    /// argument the key is made of).
    fn consent_key(&self, _args: &Value) -> Option<ConsentKey> {
        Some(ConsentKey::Tool)
    }

    /// The file a call changes (absolute, resolved as the tool resolves it), if it changes one.
    fn changed_path(&self, _args: &Value, _cwd: &Path) -> Option<PathBuf> {
        None
    }

    /// What the call would change, for its approval (`None`: nothing to show, or the call
    /// would fail, which it does when run).
    async fn preview(&self, _args: &Value, _ctx: &ToolContext) -> Option<Preview> {
        None
    }

    /// The call's part of a handoff's facts, from its arguments and its stored result.
    fn fact(&self, _args: &Value, _result: &Message) -> Option<CallFact> {
        None
    }
}

/// The `key` argument of a call as its summary; for a call without it, nothing when it has no
/// arguments, else the arguments as JSON. Also the line of a tool this host does not know (a
/// session written elsewhere).
pub fn argument_summary(args: &Value, key: &str) -> String {
    match args.get(key).and_then(Value::as_str) {
        Some(s) => s.to_string(),
        None if args.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        None => args.to_string(),
    }
}

/// Whether a stored tool result is an error.
pub(crate) fn is_error(result: &Message) -> bool {
    result.extra.get("isError").and_then(Value::as_bool).unwrap_or(false)
}

/// The `path` argument of a call, when the call succeeded (the fact of `read`, `edit`, `write`).
pub(crate) fn path_if_done(args: &Value, result: &Message) -> Option<String> {
    if is_error(result) {
        return None;
    }
    args.get("path").and_then(Value::as_str).map(str::to_string)
}
