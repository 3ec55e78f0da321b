//! Tools from MCP servers, configured as Claude Code configures them (`config`), reached over
//! rmcp (`client`, the only file that knows it besides `hub`), offered to the model as one more
//! kind of [`Tool`](crate::tools::Tool) (`tool`) through the registry's
//! [`ToolSource`](crate::tools::ToolSource) seam (`hub`). Consent is the tools' own: an MCP
//! tool's kind is `mcp`, which asks unless the user's rules say otherwise.

mod client;
pub mod config;
mod hub;
mod link;
pub mod tool;
#[cfg(test)]
mod tests;

pub use config::{McpConfig, McpSettings, ProjectFile, ServerConfig, Transport, TrustStore};
pub use hub::{McpHub, ServerStatus, State};

/// Why a server cannot be reached or did not answer.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("{0}")]
    Config(String),
    #[error("cannot start: {0}")]
    Spawn(String),
    #[error("the handshake failed: {0}")]
    Handshake(String),
    #[error("did not start within {0} s")]
    Timeout(u64),
    #[error("{0}")]
    Protocol(String),
    #[error("the connection is closed")]
    Closed,
    #[error("stopped by the user")]
    Stopped,
    #[error("the project's .mcp.json is not trusted")]
    Untrusted,
    /// The project's file is not what the user was shown: trusting it is refused.
    #[error("{0} changed since it was read: nothing was trusted. Read it again (setup() again or a restart of the editor; the CLI reads it on each run) and look at the servers it names now")]
    Changed(String),
    #[error("cannot keep the trust of {0}")]
    Trust(String),
}
