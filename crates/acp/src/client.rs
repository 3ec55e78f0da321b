//! The client's side of the engine's two seams for tools:
//! - [`ClientConsent`]: a call that needs the user becomes `session/request_permission` with
//!   the four kinds of answer; both "always" answers are the engine's to remember
//!   (`consent::Grants`). A call that reaches a protected path or runs in a sandbox with holes
//!   is asked as a question of its own, answered for this call only.
//! - [`ClientFiles`]: when the client said it can, files are read and written through it
//!   (`fs/read_text_file`, `fs/write_text_file`), so the editor's buffers see the change; the
//!   rest goes to the disk.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::rpc::{CallError, Peer};
use super::text;
use super::updates::Flusher;
use super::wire::{
    self, method, PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionResponse,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use handoff_core::tools::consent::{ApprovalRequest, Consent, Decision};
use handoff_core::tools::{DiskFileAccess, FileAccess};

/// The ids of the four answers we offer.
mod option {
    pub const ALLOW_ONCE: &str = "allow_once";
    pub const ALLOW_ALWAYS: &str = "allow_always";
    pub const REJECT_ONCE: &str = "reject_once";
    pub const REJECT_ALWAYS: &str = "reject_always";
}

/// Our requests to the client about one session. Each goes out after every update emitted
/// before it: a question after the `tool_call` it asks about and the text before that call, a
/// file read after the call's start.
#[derive(Clone)]
pub struct SessionRequests {
    pub peer: Peer,
    pub session_id: String,
    pub flusher: Flusher,
}

impl SessionRequests {
    async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.flusher.flushed().await;
        self.peer.request(method, params).await
    }
}

/// Asks the client.
pub struct ClientConsent {
    pub requests: SessionRequests,
    /// The session's "the turn was cancelled": a question answered `cancelled` stops the turn
    /// as `session/cancel` does, and the prompt's stop reason says so.
    pub cancelled: Arc<AtomicBool>,
}

impl ClientConsent {
    pub fn new(requests: SessionRequests, cancelled: Arc<AtomicBool>) -> Arc<Self> {
        Arc::new(Self { requests, cancelled })
    }
}

/// The answers offered for `request`: where "always" would count for this call only (a
/// protected path, a sandbox with holes: `ApprovalRequest::always_counts_once`), neither
/// "always" is offered.
fn options(request: &ApprovalRequest) -> Vec<PermissionOption> {
    let once_only = request.always_counts_once();
    let mut options = vec![PermissionOption::new(option::ALLOW_ONCE, text::ALLOW_ONCE, PermissionOptionKind::AllowOnce)];
    if !once_only {
        options.push(PermissionOption::new(option::ALLOW_ALWAYS, text::ALLOW_ALWAYS, PermissionOptionKind::AllowAlways));
    }
    options.push(PermissionOption::new(option::REJECT_ONCE, text::REJECT_ONCE, PermissionOptionKind::RejectOnce));
    if !once_only {
        options.push(PermissionOption::new(option::REJECT_ALWAYS, text::REJECT_ALWAYS, PermissionOptionKind::RejectAlways));
    }
    options
}

/// The tool call as the permission request shows it: its title says why it is asked when the
/// sandbox is the reason, the diff of an edit, the command's sandbox.
fn asked_call(request: &ApprovalRequest) -> ToolCallUpdate {
    let mut content = Vec::new();
    if let (Some(path), Some(preview)) = (&request.path, &request.preview) {
        content.push(wire::ToolCallContent::from(wire::Diff::new(path, preview.after.clone()).old_text(preview.before.clone())));
    }
    let why = [
        request.protected.as_ref().map(|w| format!("{}{w}", text::PROTECTED)),
        request.unsandboxed.as_ref().map(|w| format!("{}{w}", text::OUTSIDE_SANDBOX)),
        request.holes.as_ref().map(|w| format!("{}{w}", text::SANDBOX_HOLES)),
        request.sandbox.as_ref().map(|w| format!("{}{w}", text::IN_SANDBOX)),
    ];
    for line in why.into_iter().flatten() {
        content.push(wire::ToolCallContent::from(wire::text(line)));
    }
    let mut fields = ToolCallUpdateFields::new()
        .title(super::updates::title(&request.tool, request.activity, &request.summary))
        .kind(wire::kind(request.activity))
        .status(ToolCallStatus::Pending)
        .raw_input(request.args.clone());
    if !content.is_empty() {
        fields = fields.content(content);
    }
    match (&request.path, &request.preview) {
        (Some(path), Some(preview)) => fields = fields.locations(vec![super::updates::edit_location(Path::new(path), preview)]),
        (Some(path), None) => fields = fields.locations(vec![wire::ToolCallLocation::new(path)]),
        _ => {}
    }
    // The call the client was told of (an escalation's question is about its call).
    ToolCallUpdate::new(request.call_id().to_string(), fields)
}

#[async_trait]
impl Consent for ClientConsent {
    async fn ask(&self, request: ApprovalRequest) -> Decision {
        let once_only = request.always_counts_once();
        let params = json!({
            "sessionId": self.requests.session_id,
            "toolCall": asked_call(&request),
            "options": options(&request),
        });
        let answer = match self.requests.request(method::REQUEST_PERMISSION, params).await {
            Ok(answer) => answer,
            Err(CallError::Gone) => return Decision::Reject { reason: Some(text::CLIENT_GONE.into()) },
            Err(e) => return Decision::Reject { reason: Some(e.to_string()) },
        };
        let outcome = match serde_json::from_value::<RequestPermissionResponse>(answer) {
            Ok(response) => response.outcome,
            Err(e) => return Decision::Reject { reason: Some(format!("{}: {e}", text::UNREADABLE_ANSWER)) },
        };
        let chosen = match outcome {
            RequestPermissionOutcome::Selected(selected) => selected.option_id.0.to_string(),
            _ => {
                self.cancelled.store(true, Ordering::SeqCst);
                return Decision::Cancel;
            }
        };
        match chosen.as_str() {
            option::ALLOW_ONCE => Decision::Allow,
            option::ALLOW_ALWAYS if !once_only => Decision::Always,
            option::REJECT_ALWAYS if !once_only => Decision::Never { reason: None },
            option::REJECT_ONCE => Decision::Reject { reason: None },
            other => Decision::Reject { reason: Some(format!("{}: {other:?}", text::UNREADABLE_ANSWER)) },
        }
    }
}

/// Files larger than this are read from the disk: the client would send the whole text in one
/// message, where `read` pulls only the lines it shows.
const CLIENT_READ_LIMIT: u64 = 4 << 20;

/// Files through the client, as far as it said it can.
pub struct ClientFiles {
    pub requests: SessionRequests,
    pub read: bool,
    pub write: bool,
}

impl ClientFiles {
    async fn read_text(&self, path: &Path) -> io::Result<String> {
        let params = json!({ "sessionId": self.requests.session_id, "path": path });
        let answer = self.requests.request(method::READ_TEXT_FILE, params).await.map_err(io::Error::other)?;
        let answer: wire::ReadTextFileResponse = serde_json::from_value(answer).map_err(io::Error::other)?;
        Ok(answer.content)
    }
}

#[async_trait]
impl FileAccess for ClientFiles {
    async fn open(&self, path: &Path) -> io::Result<Box<dyn tokio::io::AsyncRead + Send + Unpin>> {
        // A file that is not on disk is not asked for: the tools' own "not found" and "is a
        // folder" answers stay as they are.
        let on_disk = tokio::fs::metadata(path).await;
        let through_client = on_disk.is_ok_and(|m| m.is_file() && m.len() <= CLIENT_READ_LIMIT);
        if !self.read || !through_client {
            return DiskFileAccess.open(path).await;
        }
        let path = std::path::absolute(path)?;
        let text = self.read_text(&path).await?;
        Ok(Box::new(io::Cursor::new(text.into_bytes())))
    }

    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.write_through(path, bytes).await.map(drop)
    }

    /// Writes through the client when it said it can and the bytes are text (`true`: read back
    /// through the client), else to the disk (`false`: the disk holds what was written, and the
    /// client's buffer of it may be stale).
    async fn write_through(&self, path: &Path, bytes: &[u8]) -> io::Result<bool> {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) if self.write => text,
            _ => return DiskFileAccess.write(path, bytes).await.map(|()| false),
        };
        let path = std::path::absolute(path)?;
        // The tools' promise (missing folders are made) does not depend on the client's.
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        let params = json!({ "sessionId": self.requests.session_id, "path": path, "content": text });
        let answer: Result<Value, CallError> = self.requests.request(method::WRITE_TEXT_FILE, params).await;
        answer.map(|_| true).map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::tools::ToolKind;

    fn request(holes: Option<&str>, protected: Option<&str>) -> ApprovalRequest {
        ApprovalRequest {
            id: "c1".into(),
            tool: "bash".into(),
            kind: ToolKind::Execute,
            activity: handoff_core::tools::Activity::Execute,
            args: json!({ "command": "make" }),
            summary: "make".into(),
            path: None,
            preview: None,
            origin: None,
            sandbox: None,
            unsandboxed: None,
            confined_by: None,
            holes: holes.map(str::to_string),
            protected: protected.map(str::to_string),
        }
    }

    fn kinds(request: &ApprovalRequest) -> Vec<PermissionOptionKind> {
        options(request).into_iter().map(|o| o.kind).collect()
    }

    #[test]
    fn always_is_offered_only_where_an_answer_may_cover_more_than_this_call() {
        use PermissionOptionKind::*;
        assert_eq!(kinds(&request(None, None)), [AllowOnce, AllowAlways, RejectOnce, RejectAlways]);
        assert_eq!(kinds(&request(Some("no mount namespace"), None)), [AllowOnce, RejectOnce]);
        assert_eq!(kinds(&request(None, Some("~/.ssh is a credential"))), [AllowOnce, RejectOnce]);
    }

    #[test]
    fn the_question_says_why_the_sandbox_asks() {
        let asked = serde_json::to_value(asked_call(&request(Some("no mount namespace"), None))).unwrap();
        assert_eq!(asked["toolCallId"], "c1");
        assert_eq!(asked["kind"], "execute");
        assert_eq!(asked["status"], "pending");
        let text = asked["content"][0]["content"]["text"].as_str().unwrap();
        assert!(text.starts_with(text::SANDBOX_HOLES) && text.ends_with("no mount namespace"), "{text}");
    }
}
