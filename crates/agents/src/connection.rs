//! An external agent's process and the JSON-RPC line to it: newline-delimited JSON-RPC 2.0 on
//! its stdin and stdout, its stderr to our log. The agent leads a process group of its own,
//! registered with the host's (`core::process_groups`): whatever it starts ends with it, and
//! none of it outlives the host, even a host killed outright. [`Connection::close`] closes its
//! stdin (the protocol's way to end) and ends the group if it is still there after a grace.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, oneshot};

use super::{AgentError, AgentSpec};
use handoff_core::process_groups;
use handoff_core::sync::lock;

/// How long an agent has to exit after its stdin closed before its group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What the agent sent that is not an answer to us: its requests and notifications, in order.
#[derive(Debug)]
pub enum FromAgent {
    Request { id: Value, method: String, params: Value },
    Notification { method: String, params: Value },
}

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Result<Value, AgentError>>>>>;

/// The line to one running agent; clones share it.
#[derive(Clone)]
pub struct Peer {
    out: mpsc::UnboundedSender<String>,
    next_id: Arc<AtomicI64>,
    pending: Pending,
    name: Arc<str>,
}

impl Peer {
    fn send(&self, message: &Value) -> Result<(), AgentError> {
        let line = serde_json::to_string(message).map_err(|e| AgentError::Protocol(e.to_string()))?;
        self.out.send(line).map_err(|_| AgentError::Gone { name: self.name.to_string() })
    }

    /// A request to the agent, answered when it answers (or fails when it goes away).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, AgentError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        match rx.await {
            Ok(result) => result,
            Err(_) => Err(AgentError::Gone { name: self.name.to_string() }),
        }
    }

    pub fn notify(&self, method: &str, params: Value) -> Result<(), AgentError> {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }))
    }

    /// Answers the agent's request `id`.
    pub fn respond(&self, id: Value, result: Result<Value, (i32, String)>) {
        let message = match result {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err((code, message)) => json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }),
        };
        if let Err(e) = self.send(&message) {
            tracing::info!("an answer to the agent was not sent: {e}");
        }
    }
}

/// A running agent: its process, the line to it, what it sends us.
pub struct Connection {
    pub peer: Peer,
    /// What the agent offers its session, kept up to date as its updates arrive.
    pub offers: Arc<Mutex<super::offers::Offers>>,
    pub incoming: mpsc::UnboundedReceiver<FromAgent>,
    child: Child,
    /// Its process group (its pid), while the host holds it.
    group: Option<i32>,
    /// Cancelled to close the agent's stdin (clones of the peer may outlive the connection).
    closing: tokio_util::sync::CancellationToken,
    name: String,
}

impl Connection {
    /// Starts `spec`'s command in `cwd`, in a process group of its own that the host ends.
    pub fn spawn(spec: &AgentSpec, cwd: &std::path::Path) -> Result<Connection, AgentError> {
        let (program, args) = spec.command.split_first().ok_or_else(|| AgentError::NoCommand { name: spec.name.clone() })?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .current_dir(cwd)
            .envs(&spec.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn().map_err(|e| AgentError::Start {
            name: spec.name.clone(),
            command: spec.command.join(" "),
            error: e.to_string(),
        })?;
        let group = child.id().and_then(|pid| i32::try_from(pid).ok());
        if let Some(group) = group {
            process_groups::adopt(group);
        }
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
            return Err(AgentError::Protocol("the agent's pipes were not made".into()));
        };
        let (out, lines) = mpsc::unbounded_channel();
        let closing = tokio_util::sync::CancellationToken::new();
        tokio::spawn(write_lines(stdin, lines, closing.clone()));
        let pending: Pending = Arc::default();
        let (to_us, incoming) = mpsc::unbounded_channel();
        let name: Arc<str> = spec.name.as_str().into();
        let offers = Arc::<Mutex<super::offers::Offers>>::default();
        tokio::spawn(read_lines(stdout, pending.clone(), to_us, offers.clone(), name.clone()));
        {
            let name = name.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(agent = %name, "stderr: {line}");
                }
            });
        }
        let peer = Peer { out, next_id: Arc::new(AtomicI64::new(1)), pending, name };
        Ok(Connection { peer, offers, incoming, child, group, closing, name: spec.name.clone() })
    }

    /// Ends the agent: its stdin closes, and its process group is killed if the agent has not
    /// exited within the grace (an agent that does not exit on EOF) or has left processes.
    pub async fn close(mut self) {
        // The writer closes the agent's stdin.
        self.closing.cancel();
        self.incoming.close();
        match tokio::time::timeout(EXIT_GRACE, self.child.wait()).await {
            Ok(Ok(status)) => tracing::debug!(agent = %self.name, "exited: {status}"),
            _ => tracing::info!(agent = %self.name, "did not exit on the end of its input: its process group is ended"),
        }
        self.end_group();
    }

    fn end_group(&mut self) {
        if let Some(group) = self.group.take() {
            process_groups::kill(group);
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.end_group();
    }
}

async fn write_lines(mut stdin: ChildStdin, mut lines: mpsc::UnboundedReceiver<String>, closing: tokio_util::sync::CancellationToken) {
    loop {
        let mut line = tokio::select! {
            line = lines.recv() => match line {
                Some(line) => line,
                None => break,
            },
            () = closing.cancelled() => break,
        };
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

async fn read_lines(
    stdout: tokio::process::ChildStdout,
    pending: Pending,
    to_us: mpsc::UnboundedSender<FromAgent>,
    offers: Arc<Mutex<super::offers::Offers>>,
    name: Arc<str>,
) {
    let mut lines = tokio::io::BufReader::with_capacity(1 << 16, stdout).lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(agent = %name, "stdout: {e}");
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(&line) else {
            tracing::warn!(agent = %name, "not a JSON-RPC message: {line}");
            continue;
        };
        let id = message.remove("id");
        let params = message.remove("params").unwrap_or(Value::Null);
        match (message.remove("method"), id) {
            (Some(Value::String(method)), Some(id)) => {
                let _ = to_us.send(FromAgent::Request { id, method, params });
            }
            (Some(Value::String(method)), None) => {
                // Taken as it arrives: between prompts nobody reads the queue.
                if method == handoff_acp_wire::method::SESSION_UPDATE {
                    lock(&offers).take_update(&params["update"]);
                }
                let _ = to_us.send(FromAgent::Notification { method, params });
            }
            (_, Some(id)) => {
                let result = match (message.remove("result"), message.remove("error")) {
                    (_, Some(error)) => Err(AgentError::Answered {
                        code: error.get("code").and_then(Value::as_i64).unwrap_or_default(),
                        message: error.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_string(),
                    }),
                    (result, None) => Ok(result.unwrap_or(Value::Null)),
                };
                let waiting = id.as_i64().and_then(|id| lock(&pending).remove(&id));
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(result);
                    }
                    None => tracing::info!(agent = %name, %id, "an answer to no request of ours"),
                }
            }
            _ => tracing::warn!(agent = %name, "not a JSON-RPC message: {line}"),
        }
    }
    // The agent is gone: every request still waiting fails.
    lock(&pending).clear();
}
