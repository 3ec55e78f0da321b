//! Newline-delimited JSON-RPC 2.0 over stdin/stdout, both ways: the client's requests and
//! notifications in, our answers, our notifications (`session/update`) and our own requests to
//! the client (`session/request_permission`, `fs/*`) out. One writer task owns stdout, so
//! lines never interleave and leave in the order they were sent. Every request is handled in
//! its own task: a handler that waits for the client's answer never holds the reading loop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Notify};

use super::wire::RpcError;
use handoff_core::sync::lock;

/// The line to the client; clones share it.
#[derive(Clone)]
pub struct Peer {
    inner: Arc<PeerInner>,
}

/// Bytes of output queued for stdout at most before the session updates wait
/// ([`Peer::writable`]): a client that stops reading stops the updates, not the host's memory.
pub const OUTPUT_BOUND: usize = 1 << 20;

struct PeerInner {
    out: mpsc::UnboundedSender<String>,
    /// Bytes sent to the writer and not yet taken by it.
    queued: AtomicUsize,
    /// Told each time the writer takes lines.
    drained: Notify,
    next_id: AtomicI64,
    /// Our requests waiting for the client's answer, by id.
    pending: Mutex<HashMap<i64, oneshot::Sender<Result<Value, RpcError>>>>,
}

/// What one incoming line is.
pub enum Incoming {
    Request { id: Value, method: String, params: Value },
    Notification { method: String, params: Value },
}

/// Why one of our requests got no result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("the client answered with an error: {}", .0.message)]
    Client(RpcError),
    #[error("the client went away before answering")]
    Gone,
}

impl Peer {
    /// A peer, and the writer that owns stdout (it ends when every clone of the peer is gone).
    pub fn new() -> (Self, tokio::task::JoinHandle<()>) {
        let (out, lines) = mpsc::unbounded_channel();
        let inner = Arc::new(PeerInner {
            out,
            queued: AtomicUsize::new(0),
            drained: Notify::new(),
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
        });
        let writer = spawn_writer(lines, Arc::downgrade(&inner));
        (Peer { inner }, writer)
    }

    /// Queues a line for stdout.
    fn line(&self, line: String) {
        self.inner.queued.fetch_add(line.len() + 1, Ordering::Relaxed);
        // The writer ends only with the process: a send after it is nothing to report.
        let _ = self.inner.out.send(line);
    }

    fn send(&self, message: &Value) {
        match serde_json::to_string(message) {
            Ok(line) => self.line(line),
            Err(e) => tracing::error!("cannot encode a JSON-RPC message: {e}"),
        }
    }

    /// Waits until the output queued for stdout is below [`OUTPUT_BOUND`]. What produces many
    /// lines (a session's updates) waits here before each: while the client does not read,
    /// its updates wait as agent events, whose channel is bounded, and the queue stays within
    /// the bound (answers and our requests are few, and never wait).
    pub async fn writable(&self) {
        loop {
            let drained = self.inner.drained.notified();
            if self.inner.queued.load(Ordering::Relaxed) < OUTPUT_BOUND {
                return;
            }
            drained.await;
        }
    }

    /// A notification to the client, encoded once, straight to its line (a streamed reply is
    /// one per delta).
    pub fn notify(&self, method: &str, params: impl Serialize) {
        #[derive(Serialize)]
        struct Notification<'a, P> {
            jsonrpc: &'static str,
            method: &'a str,
            params: P,
        }
        match serde_json::to_string(&Notification { jsonrpc: "2.0", method, params }) {
            Ok(line) => self.line(line),
            Err(e) => tracing::error!(%method, "cannot encode a notification: {e}"),
        }
    }

    /// Answers request `id`.
    pub fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        let message = match result {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
        };
        self.send(&message);
    }

    /// A request to the client, answered when it answers. Dropping the future forgets the
    /// request (a late answer is then ignored).
    pub async fn request(&self, method: &str, params: impl Serialize) -> Result<Value, CallError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.pending).insert(id, tx);
        let _forget = Forget { peer: self, id };
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        match rx.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(CallError::Client(error)),
            Err(_) => Err(CallError::Gone),
        }
    }

    /// Every request still waiting fails (the client closed its side).
    pub fn fail_pending(&self) {
        lock(&self.inner.pending).clear();
    }

    /// An answer from the client to one of our requests.
    fn deliver(&self, id: &Value, result: Result<Value, RpcError>) {
        let waiting = id.as_i64().and_then(|id| lock(&self.inner.pending).remove(&id));
        match waiting {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => tracing::info!(%id, "an answer to no request of ours (late, or not ours)"),
        }
    }
}

/// Takes a request off the waiting list when its caller stops waiting.
struct Forget<'a> {
    peer: &'a Peer,
    id: i64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.peer.inner.pending).remove(&self.id);
    }
}

/// Writes the lines to stdout, in order, each complete line flushed at once: what waits when
/// the writer gets to it goes out in one write (a streamed reply is a line per delta, and each
/// write of tokio's stdout is a trip to its blocking pool).
/// `queue`: the peer's count of queued bytes, lowered as lines are taken.
fn spawn_writer(mut lines: mpsc::UnboundedReceiver<String>, queue: Weak<PeerInner>) -> tokio::task::JoinHandle<()> {
    /// Bytes gathered into one write at most.
    const BATCH: usize = 1 << 20;
    tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut batch = Vec::with_capacity(64 * 1024);
        while let Some(line) = lines.recv().await {
            batch.extend_from_slice(line.as_bytes());
            batch.push(b'\n');
            while batch.len() < BATCH {
                let Ok(line) = lines.try_recv() else { break };
                batch.extend_from_slice(line.as_bytes());
                batch.push(b'\n');
            }
            if let Some(queue) = queue.upgrade() {
                queue.queued.fetch_sub(batch.len(), Ordering::Relaxed);
                queue.drained.notify_waiters();
            }
            if let Err(e) = stdout.write_all(&batch).await {
                tracing::warn!("stdout closed: {e}");
                break;
            }
            let _ = stdout.flush().await;
            batch.clear();
        }
    })
}

/// One line from the client, sorted: a request or notification to handle, an answer to one of
/// ours (delivered here), or an error to answer at once (malformed JSON, not JSON-RPC).
pub fn classify(peer: &Peer, line: &str) -> Option<Incoming> {
    let message: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(e) => {
            peer.respond(Value::Null, Err(RpcError::new(-32700, format!("Parse error: {e}"))));
            return None;
        }
    };
    let Value::Object(mut message) = message else {
        peer.respond(Value::Null, Err(RpcError::new(-32600, "Invalid Request: not a JSON-RPC object")));
        return None;
    };
    let id = message.remove("id");
    let params = message.remove("params").unwrap_or(Value::Null);
    match (message.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Some(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Some(Incoming::Notification { method, params }),
        (None, Some(id)) if message.contains_key("result") || message.contains_key("error") => {
            let result = match (message.remove("result"), message.remove("error")) {
                (_, Some(error)) => Err(serde_json::from_value(error)
                    .unwrap_or_else(|_| RpcError::new(-32603, "the client's error could not be read"))),
                (result, None) => Ok(result.unwrap_or(Value::Null)),
            };
            peer.deliver(&id, result);
            None
        }
        (_, id) => {
            peer.respond(id.unwrap_or(Value::Null), Err(RpcError::new(-32600, "Invalid Request: no method")));
            None
        }
    }
}

/// Reads lines from stdin until it closes, passing each to `each`. A line that is not UTF-8 is
/// a parse error like any other.
pub async fn read_lines(peer: &Peer, mut each: impl FnMut(Incoming)) {
    let mut stdin = tokio::io::BufReader::with_capacity(1 << 16, tokio::io::stdin());
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match stdin.read_until(b'\n', &mut buf).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("stdin: {e}");
                break;
            }
        }
        let line = String::from_utf8_lossy(&buf);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(incoming) = classify(peer, line.trim_end()) {
            each(incoming);
        }
    }
}
