//! The session's MCP servers: started together on the first prompt (each within the start-up
//! timeout), their tools offered through the [`ToolSource`] seam, a dead one started again by the
//! next call of its tool, and all of them ended with the hub (or `process_groups::end_all` at exit).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use super::client::{self, Connection};
use super::config::{McpConfig, McpSettings, Origin, ProjectFile, ServerConfig, TrustStore};
use super::tool::{exposed_name, hashed, McpTool};
use super::link::ServerLink;
use super::McpError;
use crate::tools::{EnvPolicy, Tool, ToolError, ToolSource};

/// Where a server is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Configured; starts on the first prompt.
    Idle,
    Starting,
    Running,
    /// It failed to start, or died: the next call starts it again.
    Failed,
    /// Stopped by the user: nothing starts it but the user.
    Stopped,
    /// The project's file is not trusted: it never starts.
    Untrusted,
}

/// One server as the server list shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    pub name: String,
    pub state: State,
    /// Where it is configured.
    pub origin: String,
    /// `stdio: command args…` or `http: url`, as written (`${VAR}` unexpanded).
    pub transport: String,
    /// The names the model calls its tools by.
    pub tools: Vec<String>,
    pub error: Option<String>,
}

pub(crate) struct Server {
    config: ServerConfig,
    cwd: PathBuf,
    env: EnvPolicy,
    startup_timeout: Duration,
    me: Weak<Server>,
    /// The connection; its lock is held while one starts, so a start happens once.
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    status: Mutex<(State, Option<String>)>,
    trusted: std::sync::atomic::AtomicBool,
    tools: Mutex<Vec<Arc<McpTool>>>,
    /// The tests' in-process server: each start takes a new stream from it.
    #[cfg(test)]
    pub(crate) link: Mutex<Option<Link>>,
}

use crate::sync::lock;

/// The tests' seam: the in-process server a start connects to.
#[cfg(test)]
pub(crate) type Link = Box<dyn Fn() -> tokio::io::DuplexStream + Send + Sync>;

#[cfg(test)]
pub(crate) fn lock_link(server: &Server) -> std::sync::MutexGuard<'_, Option<Link>> {
    lock(&server.link)
}

#[async_trait]
impl ServerLink for Server {
    fn name(&self) -> &str {
        Server::name(self)
    }

    fn set_tools(&self, listed: &[Value]) {
        Server::set_tools(self, listed)
    }

    async fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolError> {
        Server::call(self, tool, arguments).await
    }
}

impl Server {
    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    fn set_state(&self, state: State, error: Option<String>) {
        *lock(&self.status) = (state, error);
    }

    fn may_start(&self) -> bool {
        self.config.origin.may_start() || self.trusted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Takes the server's `tools/list` (as JSON) as its tools.
    pub(crate) fn set_tools(&self, listed: &[Value]) {
        let mut tools: Vec<Arc<McpTool>> = Vec::new();
        for item in listed {
            let Some(remote) = item.get("name").and_then(Value::as_str) else { continue };
            let mut name = exposed_name(self.name(), remote);
            if tools.iter().any(|t| t.definition.name == name) {
                name = hashed(&format!("{name}{remote}"));
            }
            if let Some(tool) = McpTool::new(self.me.clone(), self.name(), name, item) {
                tools.push(Arc::new(tool));
            }
        }
        tracing::info!(server = self.name(), "{} tools", tools.len());
        *lock(&self.tools) = tools;
    }

    /// The live connection, starting the server when it has none (or its one died).
    async fn connection(&self) -> Result<Arc<Connection>, McpError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(connection.clone());
        }
        slot.take();
        let state = lock(&self.status).0;
        if state == State::Stopped {
            return Err(McpError::Stopped);
        }
        if !self.may_start() {
            self.set_state(State::Untrusted, None);
            return Err(McpError::Untrusted);
        }
        let transport = match &self.config.transport {
            Ok(t) => t,
            Err(e) => {
                self.set_state(State::Failed, Some(e.clone()));
                return Err(McpError::Config(e.clone()));
            }
        };
        self.set_state(State::Starting, None);
        #[cfg(test)]
        let linked = lock(&self.link).as_ref().map(|link| link());
        let started = async {
            #[cfg(test)]
            if let Some(stream) = linked {
                let connection = client::connect_stream(self.me.clone(), stream).await?;
                let tools = connection.list_tools().await?;
                return Ok((connection, tools));
            }
            let connection = client::connect(self.me.clone(), self.name(), transport, &self.cwd, &self.env).await?;
            let tools = connection.list_tools().await?;
            Ok::<_, McpError>((connection, tools))
        };
        match tokio::time::timeout(self.startup_timeout, started).await {
            Ok(Ok((connection, tools))) => {
                self.set_tools(&tools);
                self.set_state(State::Running, None);
                let connection = Arc::new(connection);
                *slot = Some(connection.clone());
                Ok(connection)
            }
            Ok(Err(e)) => {
                tracing::warn!(server = self.name(), "cannot start: {e}");
                self.set_state(State::Failed, Some(e.to_string()));
                Err(e)
            }
            Err(_) => {
                let e = McpError::Timeout(self.startup_timeout.as_secs());
                tracing::warn!(server = self.name(), "{e}");
                self.set_state(State::Failed, Some(e.to_string()));
                Err(e)
            }
        }
    }

    /// One call of the server's tool `tool`; a server that died meanwhile gives an error (and
    /// starts again on the next call).
    pub(crate) async fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolError> {
        let failed = |e: McpError| ToolError::Failed(format!("MCP server {}: {e}", self.name()));
        let connection = self.connection().await.map_err(failed)?;
        match connection.call(tool, arguments).await {
            Ok(result) => Ok(result),
            Err(McpError::Closed) => {
                let why = "the server stopped during the call; it is started again on the next call".to_string();
                tracing::warn!(server = self.name(), "{why}");
                self.set_state(State::Failed, Some(why.clone()));
                Err(ToolError::Failed(format!("MCP server {}: {why}", self.name())))
            }
            Err(e) => Err(failed(e)),
        }
    }

    async fn stop(&self) {
        let connection = self.connection.lock().await.take();
        self.set_state(State::Stopped, None);
        lock(&self.tools).clear();
        if let Some(connection) = connection.and_then(|c| Arc::try_unwrap(c).ok()) {
            connection.close().await;
        }
    }

    fn status(&self) -> ServerStatus {
        let (mut state, error) = lock(&self.status).clone();
        if state == State::Untrusted && self.may_start() {
            state = State::Idle;
        }
        let error = error.or_else(|| self.config.transport.as_ref().err().cloned());
        // As the source writes it: an expanded `${VAR}` may be a secret.
        let transport = self.config.shown.clone();
        let origin = match (&self.config.origin, self.may_start()) {
            (Origin::Project { file, .. }, true) => Origin::Project { file: file.clone(), trusted: true }.describe(),
            (origin, _) => origin.describe(),
        };
        let tools = lock(&self.tools).iter().map(|t| t.definition.name.to_string()).collect();
        ServerStatus { name: self.config.name.clone(), state, origin, transport, tools, error }
    }
}

/// The MCP servers of a session (of the editor: a handoff's new session keeps them).
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    trust: TrustStore,
    /// The project's file as it was read (what its servers come from and a trust records).
    project: Option<ProjectFile>,
    /// Set once the first prompt has started the servers.
    started: tokio::sync::OnceCell<()>,
    /// What could not be read of the configuration.
    errors: Vec<String>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub").field("servers", &self.servers.len()).finish_non_exhaustive()
    }
}

impl McpHub {
    /// The servers `settings` (the settings' `mcp`) configure for a session in `cwd` (`None`:
    /// there are none), added to `config`'s tools. Their processes get the environment
    /// `config.command_env()` builds.
    pub fn attach(
        settings: Option<&McpSettings>,
        config: &mut crate::agent::AgentConfig,
        cwd: &std::path::Path,
        trust: TrustStore,
    ) -> Option<Arc<McpHub>> {
        let settings = settings.cloned().unwrap_or_default();
        let mcp = McpConfig::load(&settings, cwd, &trust);
        if mcp.servers.is_empty() && mcp.errors.is_empty() {
            return None;
        }
        for error in &mcp.errors {
            tracing::warn!("MCP configuration: {error}");
        }
        let hub = McpHub::new(mcp, cwd, config.command_env(), trust);
        config.tools.add_source(hub.clone());
        Some(hub)
    }

    /// The servers of `config`; stdio servers run in `cwd` with the environment `env` builds
    /// (unsandboxed) and their entry's own `env` over it.
    pub fn new(config: McpConfig, cwd: impl Into<PathBuf>, env: EnvPolicy, trust: TrustStore) -> Arc<McpHub> {
        let cwd = cwd.into();
        let timeout = Duration::from_secs(config.startup_timeout.max(1));
        let servers = config
            .servers
            .into_iter()
            .map(|server| {
                let untrusted = !server.origin.may_start();
                Arc::new_cyclic(|me| Server {
                    cwd: cwd.clone(),
                    env: env.clone(),
                    startup_timeout: timeout,
                    me: me.clone(),
                    connection: tokio::sync::Mutex::new(None),
                    status: Mutex::new((if untrusted { State::Untrusted } else { State::Idle }, None)),
                    trusted: std::sync::atomic::AtomicBool::new(false),
                    tools: Mutex::new(Vec::new()),
                    #[cfg(test)]
                    link: Mutex::new(None),
                    config: server,
                })
            })
            .collect();
        Arc::new(McpHub { servers, trust, project: config.project, started: Default::default(), errors: config.errors })
    }

    /// The server called `name` (the tests link an in-process server to it).
    #[cfg(test)]
    pub(crate) fn server_named(&self, name: &str) -> &Arc<Server> {
        self.server(name).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Every server as the list shows it, in configuration order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| s.status()).collect()
    }

    /// What could not be read of the configuration.
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The project's `.mcp.json` as it was read, if there is one: what the user is shown
    /// before trusting it.
    pub fn project(&self) -> Option<&ProjectFile> {
        self.project.as_ref()
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, String> {
        self.servers.iter().find(|s| s.name() == name).ok_or_else(|| format!("no MCP server {name:?}"))
    }

    /// Starts every server that may start and is not running, all at once.
    pub async fn start_all(&self) {
        let servers = self.servers.iter().filter(|s| s.may_start() && lock(&s.status).0 != State::Stopped);
        futures::future::join_all(servers.map(|s| s.connection())).await;
    }

    /// Starts one server (after the user stopped it, too): its error, if it does not start.
    pub async fn start(&self, name: &str) -> Result<(), String> {
        let server = self.server(name)?;
        if lock(&server.status).0 == State::Stopped {
            server.set_state(State::Idle, None);
        }
        server.connection().await.map(|_| ()).map_err(|e| e.to_string())
    }

    pub async fn stop(&self, name: &str) -> Result<(), String> {
        self.server(name)?.stop().await;
        Ok(())
    }

    /// Trusts the project file's content the user was shown, `shown` being the digest of
    /// [`ProjectFile`] the listing came from: its servers may start (from the next prompt).
    /// Refused when that is not the content read, or the file changed since.
    pub fn trust_project(&self, shown: &str) -> Result<PathBuf, String> {
        let project = self.project.as_ref().ok_or("this project has no .mcp.json")?;
        let file = project.path.clone();
        if shown != project.digest {
            return Err(McpError::Changed(file.display().to_string()).to_string());
        }
        self.trust.trust(&file, &project.digest).map_err(|e| e.to_string())?;
        for server in &self.servers {
            if matches!(&server.config.origin, Origin::Project { file: f, .. } if *f == file) {
                server.trusted.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        Ok(file)
    }
}

#[async_trait]
impl ToolSource for McpHub {
    async fn ready(&self) {
        self.started.get_or_init(|| self.start_all()).await;
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.servers {
            out.extend(lock(&server.tools).iter().map(|t| t.clone() as Arc<dyn Tool>));
        }
        out
    }

    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.servers.iter().find_map(|server| {
            let tools = lock(&server.tools);
            tools.iter().find(|t| t.definition.name == name).map(|t| t.clone() as Arc<dyn Tool>)
        })
    }
}
