//! Which tools a session offers, and running a call of one.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{Tool, ToolContext, ToolDefinition, ToolError, ToolName, ToolOutput};

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

    /// What a call of `name` does, as the tool says (an MCP server's tool too); `Other` for a
    /// name no tool of this registry has.
    pub fn activity(&self, name: &str) -> super::Activity {
        self.find(name).map_or(super::Activity::Other, |tool| tool.activity())
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

/// Runs any tool of this layer by name, whether or not a registry enables it: the tools' own unit
/// tests only (everything else runs tools through [`ToolRegistry::execute`]).
#[cfg(test)]
pub(crate) async fn execute(name: &str, arguments: Value, ctx: &ToolContext) -> ToolOutput {
    match name.parse::<ToolName>() {
        Ok(tool) => run_tool(tool.tool(), arguments, ctx).await,
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

async fn run_tool(tool: &dyn Tool, arguments: Value, ctx: &ToolContext) -> ToolOutput {
    if ctx.cancel.is_cancelled() {
        return ToolOutput::error(ToolError::Aborted.to_string());
    }
    let result = tool.run(arguments, ctx).await;
    result.unwrap_or_else(|e| ToolOutput::error(e.to_string()))
}

