//! What a server's connection (`client`) and its tools (`tool`) ask of the server they belong to.
//! The hub's `Server` implements it; neither side imports the hub, so the three form no circle.

use async_trait::async_trait;
use serde_json::Value;

use crate::tools::ToolError;

#[async_trait]
pub(crate) trait ServerLink: Send + Sync {
    /// The server's configured name.
    fn name(&self) -> &str;

    /// Takes the server's `tools/list` (as JSON) as its tools (on `tools/list_changed`).
    fn set_tools(&self, listed: &[Value]);

    /// Calls the server's tool `tool` (its name on the server), starting the server if needed.
    async fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolError>;
}
