//! The rmcp side: connecting to one server over stdio or streamable HTTP, its notifications, and
//! the process it runs in. Everything of rmcp stays in this file and `hub.rs`.

use std::path::Path;
use std::process::Stdio;
use std::sync::Weak;

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::config::Transport;
use super::link::ServerLink;
use super::McpError;
use crate::process_groups;
use crate::tools::EnvPolicy;

/// A live connection; dropping it ends the server (its whole process group for stdio).
pub(crate) struct Connection {
    /// `None` once closed.
    service: Option<RunningService<RoleClient, Handler>>,
    /// The stdio server's process group (its pid: it leads one of its own).
    group: Option<i32>,
    /// Ends the watch on the server's process.
    _watch: Option<tokio_util::sync::DropGuard>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(group) = self.group {
            kill_group(group);
        }
    }
}

/// Ends the server's group once the server's own process has exited: a child it left running
/// may hold its stdout open, and the connection would wait for an answer that never comes.
fn watch_exit(name: &str, group: i32) -> tokio_util::sync::DropGuard {
    let cancel = tokio_util::sync::CancellationToken::new();
    let (watching, name) = (cancel.clone(), name.to_string());
    crate::task::spawn("watching an MCP server's exit", async move {
        loop {
            tokio::select! {
                () = watching.cancelled() => return,
                () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            }
            if has_exited(group) {
                tracing::warn!(server = %name, "the server's process exited");
                kill_group(group);
                return;
            }
        }
    });
    cancel.drop_guard()
}

/// Whether our child `pid` has exited, without reaping it (its handle does that).
#[cfg(unix)]
fn has_exited(pid: i32) -> bool {
    let Ok(id) = libc::id_t::try_from(pid) else { return true };
    // SAFETY: waitid writes only into `info`, which is ours and zeroed; WNOWAIT leaves the
    // child to be reaped by its owner.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let done = libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
        done == 0 && info.si_pid() != 0
    }
}

#[cfg(not(unix))]
fn has_exited(_pid: i32) -> bool {
    false
}

fn kill_group(group: i32) {
    process_groups::kill(group);
}

impl Connection {
    fn peer(&self) -> Result<&rmcp::Peer<RoleClient>, McpError> {
        self.service.as_ref().map(|s| s.peer()).ok_or(McpError::Closed)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.service.as_ref().is_none_or(|s| s.is_closed() || s.peer().is_transport_closed())
    }

    /// Every tool the server lists (all pages), as JSON.
    pub(crate) async fn list_tools(&self) -> Result<Vec<Value>, McpError> {
        list_tools(self.peer()?).await
    }

    /// One `tools/call`; its result as JSON. Dropping the future cancels the request.
    pub(crate) async fn call(&self, tool: &str, arguments: Value) -> Result<Value, McpError> {
        let params: CallToolRequestParams = serde_json::from_value(serde_json::json!({"name": tool, "arguments": arguments}))
            .map_err(|e| McpError::Protocol(e.to_string()))?;
        let result = self.peer()?.call_tool(params).await.map_err(|e| match e {
            rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => McpError::Closed,
            e => McpError::Protocol(e.to_string()),
        })?;
        serde_json::to_value(result).map_err(|e| McpError::Protocol(e.to_string()))
    }

    /// Closes the connection, waiting a little for the server's own ending.
    pub(crate) async fn close(mut self) {
        if let Some(service) = self.service.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), service.cancel()).await;
        }
    }
}

async fn list_tools(peer: &rmcp::Peer<RoleClient>) -> Result<Vec<Value>, McpError> {
    let tools = peer.list_all_tools().await.map_err(|e| McpError::Protocol(e.to_string()))?;
    tools.into_iter().map(|t| serde_json::to_value(t).map_err(|e| McpError::Protocol(e.to_string()))).collect()
}

/// What the host answers a server: its name, and a fresh tool list on `tools/list_changed`.
pub(crate) struct Handler {
    server: Weak<dyn ServerLink>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(server) = self.server.upgrade() else { return };
        match list_tools(&context.peer).await {
            Ok(tools) => server.set_tools(&tools),
            Err(e) => tracing::warn!(server = server.name(), "cannot list the changed tools: {e}"),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info.name = "handoff-nvim".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }
}

/// Connects to a server (spawning it for stdio, in `cwd`, its stderr to the log) and completes
/// the protocol's handshake.
pub(crate) async fn connect(
    server: Weak<dyn ServerLink>,
    name: &str,
    transport: &Transport,
    cwd: &Path,
    env_policy: &EnvPolicy,
) -> Result<Connection, McpError> {
    let handler = Handler { server };
    match transport {
        Transport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).current_dir(cwd).kill_on_drop(true);
            // Servers run unsandboxed (they keep NVIM and the agents' sockets) but get no
            // secret the entry does not give them itself: its `env` is explicit and wins.
            env_policy.apply(&mut cmd, false);
            cmd.envs(env);
            #[cfg(unix)]
            cmd.process_group(0);
            let (process, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| McpError::Spawn(format!("{command}: {e}")))?;
            let group = process.id().and_then(|id| i32::try_from(id).ok());
            // Killed with the host, even a host killed outright (its keeper does it then).
            if let Some(group) = group {
                process_groups::adopt(group);
            }
            if let Some(stderr) = stderr {
                let name = name.to_string();
                crate::task::spawn("an MCP server's stderr", async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::info!(target: "handoff::mcp", server = %name, "stderr: {line}");
                    }
                });
            }
            // Until the handshake is done, the group is killed on failure by this guard.
            let mut guard = GroupGuard(group);
            let service = handler.serve(process).await.map_err(|e| McpError::Handshake(e.to_string()))?;
            guard.0 = None;
            let watch = group.map(|g| watch_exit(name, g));
            Ok(Connection { service: Some(service), group, _watch: watch })
        }
        Transport::Http { url, headers } => {
            let client = crate::provider::http_client_builder()
                .build()
                .map_err(|e| McpError::Spawn(format!("HTTP client: {e}")))?;
            let mut custom = std::collections::HashMap::new();
            for (key, value) in headers {
                let key = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                    .map_err(|e| McpError::Config(format!("header {key:?}: {e}")))?;
                let value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|e| McpError::Config(format!("header {key}: {e}")))?;
                custom.insert(key, value);
            }
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let service = handler.serve(transport).await.map_err(|e| McpError::Handshake(e.to_string()))?;
            Ok(Connection { service: Some(service), group: None, _watch: None })
        }
    }
}

/// A connection over any byte stream (the in-process servers of the tests).
#[cfg(test)]
pub(crate) async fn connect_stream<S>(server: Weak<dyn ServerLink>, stream: S) -> Result<Connection, McpError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let service = Handler { server }.serve(stream).await.map_err(|e| McpError::Handshake(e.to_string()))?;
    Ok(Connection { service: Some(service), group: None, _watch: None })
}

/// Kills a process group when dropped (a handshake that failed or timed out).
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            kill_group(group);
        }
    }
}
