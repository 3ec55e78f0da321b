//! The editor's side of the engine's two seams for tools:
//! - [`EditorConsent`]: a tool call that needs the user shows in the chat (a `tool_approval`
//!   record) and waits, without blocking anything, for `approve(id, decision, reason?)`.
//! - [`EditorFiles`]: a write to a file loaded in a buffer goes through that buffer (the editor
//!   shows it at once, writes it, and `u` undoes it as one step); a buffer with unsaved changes
//!   is never overwritten. Other files are read and written on disk.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use nvim_rs::Neovim;
use tokio::sync::oneshot;

use super::bridge::Outbox;
use super::protocol::{self, Record};
use super::stdio::Writer;
use handoff_core::agent::lock;
use handoff_core::tools::consent::{ApprovalRequest, Consent, Decision};
use handoff_core::tools::{DiskFileAccess, FileAccess};

/// The requests waiting for an answer, by tool call id.
#[derive(Default)]
pub struct Approvals {
    waiting: Mutex<HashMap<String, oneshot::Sender<Decision>>>,
}

impl Approvals {
    /// Delivers the user's answer; a second answer, or one for an unknown id, is ignored.
    pub fn answer(&self, id: &str, decision: Decision) -> bool {
        match lock(&self.waiting).remove(id) {
            Some(tx) => tx.send(decision).is_ok(),
            None => false,
        }
    }
}

/// Asks in the chat.
pub struct EditorConsent {
    pub approvals: Arc<Approvals>,
    pub outbox: Arc<Outbox>,
}

/// Takes a request off the waiting list when its question goes away unanswered (the run was
/// stopped), and tells the chat.
struct Withdraw<'a> {
    id: String,
    consent: &'a EditorConsent,
    answered: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if !self.answered && lock(&self.consent.approvals.waiting).remove(&self.id).is_some() {
            self.consent.outbox.push(Record::ToolApprovalEnd { id: self.id.clone(), decision: "withdrawn".into() });
        }
    }
}

#[async_trait]
impl Consent for EditorConsent {
    async fn ask(&self, request: ApprovalRequest) -> Decision {
        let (tx, rx) = oneshot::channel();
        let id = request.id.clone();
        lock(&self.approvals.waiting).insert(id.clone(), tx);
        let mut guard = Withdraw { id, consent: self, answered: false };
        self.outbox.push(Record::ToolApproval(Box::new(request.into())));
        let decision = rx.await;
        guard.answered = true;
        decision.unwrap_or(Decision::Reject { reason: Some("the editor went away before answering".into()) })
    }
}

/// Files through the editor's buffers.
pub struct EditorFiles {
    /// The connection to Neovim (set once it is up).
    pub nvim: Arc<OnceLock<Neovim<Writer>>>,
}

const WRITE_LUA: &str = "return require('handoff.files').write(...)";

impl EditorFiles {
    /// Asks the editor to write `text` through the buffer of `path`; `Ok(false)` when no buffer
    /// holds the file. The call runs in a task of its own: a tool's future may be dropped on
    /// abort, and a dropped nvim-rs call would break the connection.
    async fn write_through_buffer(&self, path: &Path, text: &str) -> io::Result<bool> {
        let Some(nvim) = self.nvim.get().cloned() else { return Ok(false) };
        let args = vec![rmpv::Value::from(path.to_string_lossy().as_ref()), rmpv::Value::from(text)];
        let call = tokio::spawn(async move { nvim.exec_lua(WRITE_LUA, args).await });
        let reply = call.await.map_err(|e| io::Error::other(format!("the editor call stopped: {e}")))?;
        let reply = reply.map_err(|e| io::Error::other(format!("the editor could not write the buffer: {e}")))?;
        let answer: protocol::BufferWrite = protocol::decode("the editor's answer", &reply).map_err(io::Error::other)?;
        match answer.error {
            Some(message) => Err(io::Error::other(message)),
            None => Ok(answer.through_buffer),
        }
    }
}

#[async_trait]
impl FileAccess for EditorFiles {
    async fn open(&self, path: &Path) -> io::Result<Box<dyn tokio::io::AsyncRead + Send + Unpin>> {
        DiskFileAccess.open(path).await
    }

    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.write_through(path, bytes).await.map(drop)
    }

    /// The files of Neovim's loaded buffers. The call runs in a task of its own (see
    /// `write_through_buffer`); no editor, or no answer: none.
    async fn open_files(&self) -> Vec<PathBuf> {
        let Some(nvim) = self.nvim.get().cloned() else { return Vec::new() };
        let call = tokio::spawn(async move { nvim.exec_lua("return require('handoff.files').loaded()", Vec::new()).await });
        let Ok(Ok(reply)) = call.await else { return Vec::new() };
        let names: Vec<String> = protocol::decode("the editor's open files", &reply).unwrap_or_default();
        names.into_iter().map(PathBuf::from).collect()
    }

    /// Writes through the buffer holding the file (`true`: read back, as its `:write` runs the
    /// user's BufWritePre formatters): text only; anything else, and any file no buffer holds,
    /// to the disk (`false`).
    async fn write_through(&self, path: &Path, bytes: &[u8]) -> io::Result<bool> {
        if let Ok(text) = std::str::from_utf8(bytes) {
            let path: PathBuf = std::path::absolute(path)?;
            if self.write_through_buffer(&path, text).await? {
                return Ok(true);
            }
        }
        DiskFileAccess.write(path, bytes).await.map(|()| false)
    }
}
