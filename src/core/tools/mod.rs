//! The agent's tools: `read`, `bash`, `edit`, `write`, `grep`, `find`, `ls` (names, parameters
//! and result texts as pi 0.73.1's), `todo_write`, and `session_query` (asks an ancestor
//! session; offered only to a session that has a parent).
//!
//! Each tool is a [`Tool`] in its own module (`tool.rs`): what it is and what one of its calls
//! means to the front ends and the handoff. This layer only runs tools. It knows no agent loop,
//! no wire format, no consent and no Neovim:
//! the agent loop asks the [`ToolRegistry`] for its [`ToolDefinition`]s (JSON Schema, turned into
//! OpenAI or Anthropic `tools` by the provider layer), decides about consent from
//! [`ToolKind`], and calls [`ToolRegistry::execute`] with the model's arguments and a
//! [`ToolContext`]. Whatever happens — unknown tool, arguments that do not fit, a missing file, a
//! failing command, an abort — comes back as a [`ToolOutput`] (`is_error` set, a text the model
//! can act on), never as a panic.
//!
//! Two seams belong to the front ends: [`FileAccess`] (the Neovim host reads and writes through
//! loaded buffers; [`DiskFileAccess`] is the plain disk) and the progress callback that streams
//! bash's partial output. One belongs to the agent: [`ModelOnce`], one question to the session's
//! model (`session_query`'s answer).

mod args;
pub mod consent;
pub mod bash;
pub mod edit;
pub mod env;
pub mod find;
pub mod grep;
pub mod ls;
pub mod paths;
pub mod read;
pub mod session_query;
pub mod todo;
mod tool;
pub mod truncate;
mod walk;
pub mod write;

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;

use crate::core::message::{now_millis, Content, ContentBlock, Message, Role};

pub use env::{EnvPolicy, EnvSettings, Inherit};
pub use todo::{current_todos, Todo, TodoStatus};
pub use tool::{argument_summary, CallFact, ConsentKey, Reach, Tool, ToolOrigin};

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
    result.extra_str("toolName").and_then(lookup).map_or(0, |tool| tool.lines_not_kept(result))
}

/// A call's part of a handoff's facts (see [`Tool::fact`]); nothing for an unknown tool.
pub fn call_fact(name: &str, args: &Value, result: &Message) -> Option<CallFact> {
    lookup(name)?.fact(args, result)
}

/// A tool as the model sees it: name, description and JSON Schema parameters (pi's texts).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: Cow<'static, str>,
    pub description: String,
    pub parameters: Value,
}

/// One tool's result, in the shape pi stores in a `toolResult` message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolOutput {
    /// Text blocks, and image blocks (`{type: "image", data, mimeType}`) for `read` of an image.
    pub content: Vec<ContentBlock>,
    /// pi's `details` for the tool (`{diff, firstChangedLine}` for edit, `{truncation,
    /// fullOutputPath}` for bash, `{todos}` for todo_write, …); `Null` when there are none, `{}`
    /// for errors (as pi).
    pub details: Value,
    #[serde(rename = "isError")]
    pub is_error: bool,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>, details: Value) -> Self {
        Self { content: vec![ContentBlock::text(text)], details, is_error: false }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            details: Value::Object(Map::new()),
            is_error: true,
        }
    }

    /// All text blocks joined with `\n`.
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter(|b| b.is_text())
            .filter_map(|b| b.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The `toolResult` message pi stores for this result (`toolCallId`, `toolName`, `content`,
    /// `details` when there are any, `isError`, `timestamp`).
    pub fn into_message(self, tool_call_id: &str, tool_name: &str) -> Message {
        let mut extra = Map::new();
        extra.insert("toolCallId".into(), Value::String(tool_call_id.into()));
        extra.insert("toolName".into(), Value::String(tool_name.into()));
        if !self.details.is_null() {
            extra.insert("details".into(), self.details);
        }
        extra.insert("isError".into(), Value::Bool(self.is_error));
        Message {
            role: Role::ToolResult,
            content: Content::Blocks(self.content),
            stop_reason: None,
            error_message: None,
            usage: None,
            timestamp: Some(now_millis()),
            extra,
        }
    }
}

pub(crate) fn image_block(data: String, mime_type: &str) -> ContentBlock {
    let mut extra = Map::new();
    extra.insert("data".into(), Value::String(data));
    extra.insert("mimeType".into(), Value::String(mime_type.into()));
    ContentBlock { kind: "image".into(), text: None, thinking: None, extra }
}

/// Why a tool did not do what it was asked. [`execute`] turns it into an error [`ToolOutput`]
/// whose text is this error's display.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("Tool {0} not found")]
    UnknownTool(String),
    /// The arguments do not fit the schema; the text is pi's validation message.
    #[error("{0}")]
    InvalidArguments(String),
    #[error("Operation aborted")]
    Aborted,
    /// The tool ran and refused or failed; the text says why and, where it can, what to do.
    #[error("{0}")]
    Failed(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl ToolError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        ToolError::Io { context: context.into(), source }
    }
}

/// How tools read and write files. The Neovim host implements it to go through loaded buffers
/// (so the editor shows a change and `u` undoes it); [`DiskFileAccess`] is the plain disk.
/// `grep`, `find` and `ls` walk the disk directly.
#[async_trait]
pub trait FileAccess: Send + Sync {
    /// A reader over the file's bytes. `read` pulls from it only as far as it needs, so a huge
    /// file is never loaded whole for its first lines.
    async fn open(&self, path: &Path) -> io::Result<Box<dyn AsyncRead + Send + Unpin>>;

    /// The whole file (for `edit`).
    async fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        use tokio::io::AsyncReadExt;
        let mut reader = self.open(path).await?;
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes).await?;
        Ok(bytes)
    }

    /// Replaces the file's bytes, creating the file and any missing parent folders.
    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
}

/// One question to the session's model, outside the conversation: its own system prompt and
/// one user message, no tools, recorded in no session (the agent implements it with the
/// session's provider and thinking level). The answer's text, or why there is none.
#[async_trait]
pub trait ModelOnce: Send + Sync {
    async fn ask(&self, system: &str, prompt: &str, cancel: &CancellationToken) -> Result<String, String>;

    /// Characters the system prompt and the prompt may have together, so that the request
    /// fits the model's window with room for the answer.
    fn prompt_room(&self) -> usize;
}

/// [`FileAccess`] on the local disk.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskFileAccess;

#[async_trait]
impl FileAccess for DiskFileAccess {
    async fn open(&self, path: &Path) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let file = tokio::fs::File::open(path).await?;
        if file.metadata().await?.is_dir() {
            return Err(io::Error::other("Is a directory"));
        }
        Ok(Box::new(file))
    }

    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(parent).await?;
        }
        tokio::fs::write(path, bytes).await
    }
}

/// Receives a tool's partial result while it runs (bash's output so far); each call replaces
/// the one before, as pi's `onUpdate`.
pub type ProgressFn = Arc<dyn Fn(ToolOutput) + Send + Sync>;

/// What a tool runs with.
#[derive(Clone)]
pub struct ToolContext {
    /// The session's working folder: relative paths and bash start here.
    pub cwd: PathBuf,
    /// Cancelling aborts the running tool (bash's whole process group is killed).
    pub cancel: CancellationToken,
    pub on_progress: Option<ProgressFn>,
    pub files: Arc<dyn FileAccess>,
    /// The environment bash builds for its command (`env.rs`).
    pub env: EnvPolicy,
    /// The shell for bash (pi's `shellPath` setting); default `/bin/bash`, else `bash` on PATH,
    /// else `sh`.
    pub shell: Option<PathBuf>,
    /// Where bash spills full output; default the system temp folder.
    pub spill_dir: Option<PathBuf>,
    /// The session file this session was handed off (or forked) from, its header's
    /// `parentSession`: `session_query` reads it and its ancestors. `None`: no parent.
    pub parent_session: Option<PathBuf>,
    /// The session's model, for a tool that asks it one question (`session_query`).
    pub model: Option<Arc<dyn ModelOnce>>,
    /// bash runs its command in this sandbox (`None`: with the user's rights).
    pub sandbox: Option<crate::core::sandbox::Sandboxed>,
    /// The real location the agent checked for this call ([`Reach::check`], the sandbox on):
    /// `read`, `grep`, `edit` and `write` act on it instead of resolving their argument again,
    /// so a link planted after the check is not followed. `None`: they resolve the argument.
    pub checked: Option<PathBuf>,
    /// `grep` leaves the user's credential locations out of a folder it walks (the sandbox is
    /// on and the folder itself was not approved as one).
    pub credentials_hidden: bool,
}

impl ToolContext {
    /// The disk, no progress callback, a fresh cancellation token, the default env policy.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            cancel: CancellationToken::new(),
            on_progress: None,
            files: Arc::new(DiskFileAccess),
            env: EnvPolicy::default(),
            shell: None,
            spill_dir: None,
            parent_session: None,
            model: None,
            sandbox: None,
            checked: None,
            credentials_hidden: false,
        }
    }

    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    pub fn with_progress(mut self, on_progress: ProgressFn) -> Self {
        self.on_progress = Some(on_progress);
        self
    }

    pub fn with_files(mut self, files: Arc<dyn FileAccess>) -> Self {
        self.files = files;
        self
    }

    pub fn with_env(mut self, env: EnvPolicy) -> Self {
        self.env = env;
        self
    }

    pub fn with_parent_session(mut self, parent_session: Option<PathBuf>) -> Self {
        self.parent_session = parent_session;
        self
    }

    pub fn with_model(mut self, model: Arc<dyn ModelOnce>) -> Self {
        self.model = Some(model);
        self
    }

    pub fn with_sandbox(mut self, sandbox: Option<crate::core::sandbox::Sandboxed>) -> Self {
        self.sandbox = sandbox;
        self
    }

    pub fn with_checked(mut self, checked: Option<PathBuf>) -> Self {
        self.checked = checked;
        self
    }

    pub fn with_credentials_hidden(mut self, hidden: bool) -> Self {
        self.credentials_hidden = hidden;
        self
    }

    /// The path a call acts on: the one the agent checked ([`Self::checked`]), else `resolve()`
    /// (the argument resolved as the tool resolves it).
    pub(crate) fn target(&self, resolve: impl FnOnce() -> PathBuf) -> PathBuf {
        self.checked.clone().unwrap_or_else(resolve)
    }

    pub(crate) fn progress(&self, output: ToolOutput) {
        if let Some(f) = &self.on_progress {
            f(output);
        }
    }

    /// Runs `fut` unless or until the token is cancelled.
    pub(crate) async fn abortable<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        if self.cancel.is_cancelled() {
            return Err(ToolError::Aborted);
        }
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(ToolError::Aborted),
            r = fut => r,
        }
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("cwd", &self.cwd)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("env", &self.env)
            .field("shell", &self.shell)
            .field("parent_session", &self.parent_session)
            .field("sandbox", &self.sandbox)
            .field("checked", &self.checked)
            .field("credentials_hidden", &self.credentials_hidden)
            .finish_non_exhaustive()
    }
}

/// Tools that come and go while the host runs (an MCP server's): the registry asks a source for
/// its tools at each request, and runs a call of one of them through it.
#[async_trait]
pub trait ToolSource: Send + Sync + fmt::Debug {
    /// Waits until the source knows its tools (the first prompt starts its servers), for at
    /// most its own start-up timeout; once started, at once.
    async fn ready(&self);

    /// Its tools now.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;

    /// Its tool called `name`.
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools().into_iter().find(|t| t.definition().name == name)
    }
}

/// A tool the registry found: one of the host's own, or a source's.
#[derive(Clone)]
pub enum ToolRef {
    Builtin(&'static dyn Tool),
    Source(Arc<dyn Tool>),
}

impl std::ops::Deref for ToolRef {
    type Target = dyn Tool;
    fn deref(&self) -> &Self::Target {
        match self {
            ToolRef::Builtin(tool) => *tool,
            ToolRef::Source(tool) => tool.as_ref(),
        }
    }
}

/// Which tools a session offers the model. Order is pi's (read, bash, edit, write, grep, find,
/// ls), then todo_write and session_query, then the sources' tools (MCP servers).
#[derive(Clone, Debug)]
pub struct ToolRegistry {
    tools: Vec<ToolName>,
    sources: Vec<Arc<dyn ToolSource>>,
}

impl PartialEq for ToolRegistry {
    fn eq(&self, other: &Self) -> bool {
        self.tools == other.tools
            && self.sources.len() == other.sources.len()
            && self.sources.iter().zip(&other.sources).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

impl Eq for ToolRegistry {}

impl Default for ToolRegistry {
    /// read, bash, edit, write, todo_write, session_query.
    fn default() -> Self {
        Self::new(ToolName::ALL.into_iter().filter(|t| t.enabled_by_default()))
    }
}

impl ToolRegistry {
    pub fn new(tools: impl IntoIterator<Item = ToolName>) -> Self {
        let mut tools: Vec<ToolName> = tools.into_iter().collect();
        tools.sort();
        tools.dedup();
        Self { tools, sources: Vec::new() }
    }

    /// Offers the tools of `source` too (MCP servers).
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// Waits for the sources' tools (see [`ToolSource::ready`]), all at once.
    pub async fn ready(&self) {
        futures::future::join_all(self.sources.iter().map(|s| s.ready())).await;
    }

    /// The tool called `name`, the host's own if it is enabled, else a source's.
    pub fn find(&self, name: &str) -> Option<ToolRef> {
        if let Some(tool) = self.get(name) {
            return Some(ToolRef::Builtin(tool.tool()));
        }
        self.sources.iter().find_map(|s| s.find(name)).map(ToolRef::Source)
    }

    pub fn all() -> Self {
        Self::new(ToolName::ALL)
    }

    pub fn enable(&mut self, tool: ToolName) {
        if !self.tools.contains(&tool) {
            self.tools.push(tool);
            self.tools.sort();
        }
    }

    pub fn disable(&mut self, tool: ToolName) {
        self.tools.retain(|t| *t != tool);
    }

    pub fn tools(&self) -> &[ToolName] {
        &self.tools
    }

    /// The enabled tool called `name`.
    pub fn get(&self, name: &str) -> Option<ToolName> {
        name.parse().ok().filter(|t| self.tools.contains(t))
    }

    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let own = self.tools.iter().map(|t| t.definition());
        own.chain(self.sources.iter().flat_map(|s| s.tools()).map(|t| t.definition())).collect()
    }

    /// The tools offered to a session: the enabled ones, less those that need a parent
    /// ([`Tool::needs_parent`]) when it has none. Its requests and its system prompt list these.
    pub fn offered(&self, has_parent: bool) -> ToolRegistry {
        Self {
            tools: self.tools.iter().copied().filter(|t| has_parent || !t.tool().needs_parent()).collect(),
            sources: self.sources.clone(),
        }
    }

    /// Runs `name` if it is enabled; a tool that is not is "not found", as pi says.
    pub async fn execute(&self, name: &str, arguments: Value, ctx: &ToolContext) -> ToolOutput {
        match self.find(name) {
            Some(tool) => run_tool(&*tool, arguments, ctx).await,
            None => ToolOutput::error(ToolError::UnknownTool(name.to_owned()).to_string()),
        }
    }
}

/// Runs any tool of this layer by name, whether or not a registry enables it.
pub async fn execute(name: &str, arguments: Value, ctx: &ToolContext) -> ToolOutput {
    match name.parse::<ToolName>() {
        Ok(tool) => execute_tool(tool, arguments, ctx).await,
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

/// What an `edit` or `write` call would change, for its approval: the file before and after,
/// and the diff. `None` for other tools, and for a call that would fail (it fails when run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Preview {
    pub before: String,
    pub after: String,
    pub diff: String,
}

/// What a call of `name` would change, for its approval (see [`Tool::preview`]).
pub async fn preview(name: &str, arguments: &Value, ctx: &ToolContext) -> Option<Preview> {
    lookup(name)?.preview(arguments, ctx).await
}

/// The file a call of `name` changes (see [`Tool::changed_path`]); `None` for tools that change
/// none and for arguments without a path.
pub fn changed_path(name: &str, arguments: &Value, cwd: &Path) -> Option<PathBuf> {
    lookup(name)?.changed_path(arguments, cwd)
}

async fn execute_tool(tool: ToolName, arguments: Value, ctx: &ToolContext) -> ToolOutput {
    run_tool(tool.tool(), arguments, ctx).await
}

async fn run_tool(tool: &dyn Tool, arguments: Value, ctx: &ToolContext) -> ToolOutput {
    if ctx.cancel.is_cancelled() {
        return ToolOutput::error(ToolError::Aborted.to_string());
    }
    let result = tool.run(arguments, ctx).await;
    result.unwrap_or_else(|e| ToolOutput::error(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_kinds() {
        let names: Vec<&str> = ToolRegistry::default().tools().iter().map(|t| t.as_str()).collect();
        assert_eq!(names, ["read", "bash", "edit", "write", "todo_write", "session_query"]);
        let offered = |has_parent| -> Vec<&str> {
            ToolRegistry::default().offered(has_parent).tools().iter().map(|t| t.as_str()).collect()
        };
        assert_eq!(offered(false), ["read", "bash", "edit", "write", "todo_write"]);
        assert_eq!(offered(true), names);
        assert_eq!(kind_of("bash"), Some(ToolKind::Execute));
        assert_eq!(kind_of("write"), Some(ToolKind::Edit));
        assert_eq!(kind_of("grep"), Some(ToolKind::ReadOnly));
        assert_eq!(kind_of("todo_write"), Some(ToolKind::ReadOnly));
        assert_eq!(kind_of("session_query"), Some(ToolKind::ReadOnly));
        assert_eq!(kind_of("nope"), None);
        assert_eq!(kind_of("mcp__docs__search"), Some(ToolKind::Mcp), "an MCP tool by its name");
    }

    #[test]
    fn definitions_are_json_schema_objects() {
        for def in ToolRegistry::all().definitions() {
            assert_eq!(def.parameters["type"], "object", "{}", def.name);
            assert!(def.parameters["properties"].is_object(), "{}", def.name);
            assert!(!def.description.is_empty());
            let wire = serde_json::to_value(&def).unwrap();
            assert_eq!(wire.as_object().unwrap().len(), 3, "name, description, parameters");
        }
    }

    #[tokio::test]
    async fn unknown_and_disabled_tools_are_not_found() {
        let ctx = ToolContext::new(std::env::temp_dir());
        let out = execute("frobnicate", json!({}), &ctx).await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "Tool frobnicate not found");
        let out = ToolRegistry::default().execute("grep", json!({"pattern": "x"}), &ctx).await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "Tool grep not found");
    }

    #[tokio::test]
    async fn a_cancelled_context_runs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        ctx.cancel.cancel();
        let out = execute("write", json!({"path": "a.txt", "content": "x"}), &ctx).await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "Operation aborted");
        assert!(!dir.path().join("a.txt").exists());
    }

    #[test]
    fn results_become_pi_tool_result_messages() {
        let msg = ToolOutput::text("ok", json!({"a": 1})).into_message("call_1", "read");
        let v = serde_json::to_value(&msg).unwrap();
        assert_eq!(v["role"], "toolResult");
        assert_eq!(v["toolCallId"], "call_1");
        assert_eq!(v["toolName"], "read");
        assert_eq!(v["isError"], false);
        assert_eq!(v["details"]["a"], 1);
        assert_eq!(v["content"][0]["text"], "ok");
        let v = serde_json::to_value(ToolOutput::text("x", Value::Null).into_message("c", "ls"))
            .unwrap();
        assert!(v.get("details").is_none());
    }
}
