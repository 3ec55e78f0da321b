//! The table of this layer's tools: their names, kinds and [`Tool`]s, and what a call of one
//! means when only its name is known (a stored session's call, a call the registry does not
//! enable): each helper asks the tool's [`Tool`] implementation, or says what an unknown one is.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;
use serde_json::Value;

use super::{argument_summary, bash, edit, find, grep, ls, read, session_query, todo, write};
use super::{CallFact, ConsentKey, Location, Tool, ToolContext, ToolDefinition, ToolError};
use crate::message::Message;

/// What a tool may do, the basis of the consent policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolKind {
    /// Looks, never changes: `read`, `grep`, `find`, `ls`, `todo_write`, `session_query`.
    ReadOnly,
    /// Changes files: `edit`, `write`.
    Edit,
    /// Runs commands: `bash`.
    Execute,
    /// An MCP server's tool: it may do anything, whatever it says of itself.
    Mcp,
}

/// What a call does, as a front end shows it: finer than [`ToolKind`] (what consent asks by),
/// coarser than the tool. ACP's tool kinds are these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activity {
    /// Reads files or data.
    Read,
    /// Changes files or content.
    Edit,
    /// Removes files or data.
    Delete,
    /// Moves or renames.
    Move,
    /// Searches.
    Search,
    /// Runs commands.
    Execute,
    /// Thinks or plans (the todo list).
    Think,
    /// Reaches for data outside (the network).
    Fetch,
    /// Nothing more is known.
    #[default]
    Other,
}

/// The tools this layer provides, in pi's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolName {
    Read,
    Bash,
    Edit,
    Write,
    Grep,
    Find,
    Ls,
    TodoWrite,
    SessionQuery,
}

impl ToolName {
    pub const ALL: [ToolName; 9] = [
        ToolName::Read,
        ToolName::Bash,
        ToolName::Edit,
        ToolName::Write,
        ToolName::Grep,
        ToolName::Find,
        ToolName::Ls,
        ToolName::TodoWrite,
        ToolName::SessionQuery,
    ];

    /// The name the model calls (and pi stores as `toolName`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Read => "read",
            ToolName::Bash => "bash",
            ToolName::Edit => "edit",
            ToolName::Write => "write",
            ToolName::Grep => "grep",
            ToolName::Find => "find",
            ToolName::Ls => "ls",
            ToolName::TodoWrite => "todo_write",
            ToolName::SessionQuery => "session_query",
        }
    }

    /// The tool itself: the registry's table, one line a tool.
    pub fn tool(self) -> &'static dyn Tool {
        match self {
            ToolName::Read => &read::Read,
            ToolName::Bash => &bash::Bash,
            ToolName::Edit => &edit::Edit,
            ToolName::Write => &write::Write,
            ToolName::Grep => &grep::Grep,
            ToolName::Find => &find::Find,
            ToolName::Ls => &ls::Ls,
            ToolName::TodoWrite => &todo::TodoWrite,
            ToolName::SessionQuery => &session_query::SessionQuery,
        }
    }

    pub fn kind(self) -> ToolKind {
        self.tool().kind()
    }

    /// On without being asked for: read, bash, edit, write, todo_write, session_query (offered
    /// only with a parent: [`ToolRegistry::offered`]). grep/find/ls on request.
    pub fn enabled_by_default(self) -> bool {
        !matches!(self, ToolName::Grep | ToolName::Find | ToolName::Ls)
    }

    pub fn definition(self) -> ToolDefinition {
        self.tool().definition()
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolName {
    type Err = ToolError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ToolName::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| ToolError::UnknownTool(s.to_owned()))
    }
}

/// The tool called `name`; `None` for a name this layer does not know (a session written by
/// another agent may name any).
pub fn lookup(name: &str) -> Option<&'static dyn Tool> {
    name.parse::<ToolName>().ok().map(ToolName::tool)
}

/// The kind of a tool by its called name; `None` for a name this layer does not know.
/// An MCP server's tool (`mcp__<server>__<tool>`) is [`ToolKind::Mcp`] by its name alone.
pub fn kind_of(name: &str) -> Option<ToolKind> {
    match lookup(name) {
        Some(tool) => Some(tool.kind()),
        None => name.starts_with(MCP_PREFIX).then_some(ToolKind::Mcp),
    }
}

/// How the name of every MCP server's tool starts (`mcp::tool::exposed_name` writes it; consent
/// rules and [`kind_of`] read it).
pub const MCP_PREFIX: &str = "mcp__";

/// The chat's line for a call of `name` (see [`Tool::summary`]); for a tool this layer does not
/// know, its `path` argument or its arguments.
pub fn call_summary(name: &str, args: &Value) -> String {
    match lookup(name) {
        Some(tool) => tool.summary(args),
        None => argument_summary(args, "path"),
    }
}

/// What an "always" answer to a call of `name` covers (see [`Tool::consent_key`]).
pub fn consent_key(name: &str, args: &Value) -> Option<ConsentKey> {
    match lookup(name) {
        Some(tool) => tool.consent_key(args),
        None => Some(ConsentKey::Tool),
    }
}

/// Lines of a stored result's output it does not hold (see [`Tool::lines_not_kept`]).
pub fn lines_not_kept(result: &Message) -> u64 {
    result.tool_result().and_then(|r| r.tool_name()).and_then(lookup).map_or(0, |tool| tool.lines_not_kept(result))
}

/// A call's part of a handoff's facts (see [`Tool::fact`]); nothing for an unknown tool.
pub fn call_fact(name: &str, args: &Value, result: &Message) -> Option<CallFact> {
    lookup(name)?.fact(args, result)
}

/// What an `edit` or `write` call would change, for its approval: the file before and after,
/// and the diff. `None` for other tools, and for a call that would fail (it fails when run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Preview {
    pub before: String,
    pub after: String,
    pub diff: String,
}

impl Preview {
    /// A file's change from `before` to `after` as an approval shows it: both texts, and their
    /// diff (line endings read as LF). Our `write`'s preview, and an external agent's diff.
    pub fn of(before: String, after: String) -> Preview {
        let diff = super::edit::diff_string(&super::edit::normalize_to_lf(&before), &super::edit::normalize_to_lf(&after), 4).0;
        Preview { before, after, diff }
    }
}

/// What a call of `name` would change, for its approval (see [`Tool::preview`]).
pub async fn preview(name: &str, arguments: &Value, ctx: &ToolContext) -> Option<Preview> {
    lookup(name)?.preview(arguments, ctx).await
}

/// The one file a call of `name` reads or changes (see [`Tool::location`]); `None` for an
/// unknown tool.
pub fn call_location(name: &str, arguments: &Value, cwd: &Path) -> Option<Location> {
    lookup(name)?.location(arguments, cwd)
}

/// The file a call of `name` changes (see [`Tool::changed_path`]); `None` for tools that change
/// none and for arguments without a path.
pub fn changed_path(name: &str, arguments: &Value, cwd: &Path) -> Option<PathBuf> {
    lookup(name)?.changed_path(arguments, cwd)
}

