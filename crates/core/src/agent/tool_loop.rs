//! Running the tool calls of one assistant message, in order: consent first (the policy, the
//! session's grants, then the front end), then the tool, then its result on disk before the next
//! call starts. Steering typed meanwhile is delivered between tools (the rest are skipped, as pi
//! does); an abort stops the running tool and skips the rest. Every call gets a result, so the
//! conversation stays valid for both APIs (each tool call must be answered).
//!
//! With the sandbox on, `read`, `grep`, `edit` and `write` obey its confinement: the real path a
//! call reaches is checked (`sandbox::protected`), a protected one asks under every policy (an
//! "always" counts once), and the tool acts on the real path checked. What remains open: a
//! folder on that path swapped for a link after the check (by a process an earlier command
//! left running) is followed by the write.
//!
//! Before an `edit` or `write` runs, the file's content is read (unless the session keeps its
//! original already); when the call succeeds, that content is kept beside the session as the
//! file's original (see `session::changes`), which the session's changes are shown against.
//! Before a `bash` command, the files the host can know the content of are read the same way
//! ([`AgentSession::watched_by_commands`]); those the command changed are kept and reviewed
//! like an edit's, attributed to the command.

use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::events::live_tail;
use super::{AgentError, AgentEvent, AgentSession, Level, Notice, RunResult};
use crate::message::{now_millis, Message};
use crate::provider::ToolCall;
use crate::session::review::{self, CallOf, HunkState, ReviewedCall};
use crate::session::{todos, Before, SessionError};
use crate::sync::lock;
use crate::sandbox::protected::Protected;
use crate::sandbox::{self, Sandboxed};
use crate::tools::consent::{self, ApprovalRequest, Decision, Verdict};
use crate::tools::{self, ConsentKey, Preview, ToolContext, ToolKind, ToolName, ToolOutput, ToolRef};

/// pi's text for calls skipped because the user typed meanwhile.
const SKIPPED_FOR_STEERING: &str = "Skipped due to queued user message.";
/// The result of calls skipped because the run was stopped.
const SKIPPED_FOR_ABORT: &str = "Skipped: the user stopped the run before this tool call.";
/// The result of a call the user cancelled (the turn stops there).
const CANCELLED: &str = "The user cancelled this tool call and stopped the turn.";

// The grants' name for "this exact command may run outside the sandbox" (an "always" answer to
// an approval that lifts it), the consent's.
use crate::tools::consent::OUTSIDE_THE_SANDBOX;

/// Where a bash call runs.
enum Confinement {
    /// With the user's rights: the sandbox is off (or lifted for this command), or another tool.
    Unconfined,
    Sandboxed(Sandboxed),
    /// The sandbox is asked for but cannot be enforced, for this reason: the user decides.
    Unavailable(String),
}

/// What makes a call ask whatever the policy says: where bash runs, and whether a host tool's
/// call reaches a protected path or a command's sandbox has holes here (`protected`: asked per
/// call, "always" counting once).
struct Asks<'a> {
    confinement: &'a Confinement,
    protected: bool,
}

/// A file an `edit` or `write` call is about to change, as it was before the call: the session's
/// original when it is the first change, and that call's baseline for the review.
struct Capture {
    path: PathBuf,
    before: Before,
}

/// What a call may change, as it was before the call.
enum Captured {
    /// The one file of an `edit` or `write`: kept when the call succeeds.
    File(Capture),
    /// An `edit` or `write` reviewed before it was written: kept, its hunks recorded as kept.
    Reviewed(Capture),
    /// The files a command may have changed (see [`AgentSession::watched_by_commands`]): those
    /// it did change are kept, whether the command succeeded or not.
    Command(Vec<Capture>),
}

/// Files read before each command, at most (the editor's open files first).
const MAX_WATCHED_BY_COMMANDS: usize = 512;
/// A larger file is not read before a command (nor reviewed when one changes it), nor before
/// an external agent's edit (`handoff_agents`' `EditOriginals`).
pub const MAX_WATCHED_BYTES: u64 = 4 << 20;
/// Bytes read before one command at most, all files together: past it, the rest are not read.
const MAX_WATCHED_TOTAL: u64 = 64 << 20;

/// How the tool calls of a message ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolsOutcome {
    /// All ran (or were refused): the model goes on with the results.
    Continue,
    /// Steering arrived between tools: the rest were skipped, the model reads the steering next.
    Steered,
    /// The user cancelled a call, or the run was stopped: the turn ends.
    Stop,
}

impl AgentSession {
    /// The context a tool call runs in: the session's folder, the run's cancellation, the
    /// front end's file access, an environment without the provider's keys, the session's
    /// parent and its model (`session_query`).
    pub(super) fn tool_context(&self, cancel: &CancellationToken) -> ToolContext {
        let (cwd, parent) = {
            let session = self.session();
            (session.cwd().to_path_buf(), session.header().parent_session.as_ref().map(PathBuf::from))
        };
        let files = lock_arc(&self.files);
        let model = Arc::new(super::ask::SessionModel::new(super::lock(&self.provider).clone(), self.thinking_level()));
        ToolContext::new(cwd)
            .with_cancel(cancel.child_token())
            .with_files(files)
            // The provider in use now (a model switch may have changed it) keeps its keys too.
            .with_env(self.tool_env.clone().with_secrets(self.provider_config().secret_vars()))
            .with_parent_session(parent)
            .with_model(model)
    }

    /// Runs `calls` (the tool calls of the assistant message just committed).
    pub(super) async fn run_tool_calls(
        &self,
        calls: Vec<ToolCall>,
        cancel: &CancellationToken,
        result: &mut RunResult,
    ) -> Result<ToolsOutcome, AgentError> {
        self.emit(self.batch_of(&calls));
        let outcome = self.run_batch(calls, cancel, result).await;
        self.emit(AgentEvent::ToolBatch { running: false, files: Vec::new(), any_file: false });
        outcome
    }

    /// What the calls of a batch may change (see [`AgentEvent::ToolBatch`]).
    fn batch_of(&self, calls: &[ToolCall]) -> AgentEvent {
        let cwd = self.session().cwd().to_path_buf();
        let mut files = Vec::new();
        let mut any_file = false;
        for call in calls {
            let args = call.arguments.as_ref().map(|m| Value::Object(m.clone())).unwrap_or_default();
            match tools::changed_path(&call.name, &args, &cwd) {
                Some(path) => files.push(path),
                None => any_file |= matches!(tools::kind_of(&call.name), Some(ToolKind::Execute | ToolKind::Mcp)),
            }
        }
        AgentEvent::ToolBatch { running: true, files, any_file }
    }

    async fn run_batch(&self, calls: Vec<ToolCall>, cancel: &CancellationToken, result: &mut RunResult) -> Result<ToolsOutcome, AgentError> {
        let mut outcome = ToolsOutcome::Continue;
        for call in calls {
            if outcome != ToolsOutcome::Continue || cancel.is_cancelled() {
                let why = match outcome {
                    ToolsOutcome::Steered => SKIPPED_FOR_STEERING,
                    _ => SKIPPED_FOR_ABORT,
                };
                if outcome == ToolsOutcome::Continue {
                    outcome = ToolsOutcome::Stop;
                }
                self.finish_call(&call, &Value::Null, ToolOutput::error(why), None, result)?;
                continue;
            }
            let (args, output, capture) = self.run_one(&call, cancel).await;
            let stop = output.as_ref().is_none();
            let output = output.unwrap_or_else(|| ToolOutput::error(CANCELLED));
            self.finish_call(&call, &args, output, capture, result)?;
            if stop || cancel.is_cancelled() {
                outcome = ToolsOutcome::Stop;
            } else if !self.state().steering.is_empty() {
                outcome = ToolsOutcome::Steered;
            }
        }
        Ok(outcome)
    }

    /// One call: its arguments, its output (`None`: the user cancelled the turn), and what the
    /// changed file held before (edit and write).
    async fn run_one(&self, call: &ToolCall, cancel: &CancellationToken) -> (Value, Option<ToolOutput>, Option<Captured>) {
        let args = match &call.arguments {
            Ok(map) => Value::Object(map.clone()),
            Err(malformed) => {
                let text = format!(
                    "The arguments of this {} call are not valid JSON ({}); nothing was run. Received: {}",
                    call.name, malformed.error, malformed.raw
                );
                return (Value::Object(Default::default()), Some(ToolOutput::error(text)), None);
            }
        };
        let ctx = self.tool_context(cancel);
        // The registry's tool (ours, or an MCP server's) says what the call is.
        let tool = self.tools.find(&call.name);
        let (checked, protected) = self.reach(tool.as_ref(), &args, &ctx.cwd);
        let ctx = ctx.with_checked(checked).with_credentials_hidden(self.sandbox.is_on() && protected.is_none());
        let enabled = tool.is_some();
        let kind = tool.as_ref().map_or(ToolKind::Execute, |t| t.kind());
        let key = tool.as_ref().map_or_else(|| tools::consent_key(&call.name, &args), |t| t.consent_key(&args));
        let confinement = if enabled { self.confinement(&call.name, key.as_ref()) } else { Confinement::Unconfined };
        let consent = lock_arc(&self.consent);
        // What a sandbox without its namespaces cannot protect here: asked about, as a protected path is.
        let holes = match &confinement {
            Confinement::Sandboxed(s) => s.holes(&ctx.cwd),
            _ => None,
        };
        // The preview the approval showed, carried on `ToolExecutionStart` (never worked out
        // twice; an edit that was not asked about is previewed there).
        let previewed: std::sync::Mutex<Option<Box<Preview>>> = std::sync::Mutex::new(None);
        // The file's text as the user kept the change (`changes.review = "before"`).
        let mut reviewed: Option<String> = None;
        if let Some(tool) = &tool {
            // What the tool says of the call: the front ends show it as it is.
            let request = async {
                let preview = tool.preview(&args, &ctx).await.map(Box::new);
                *lock(&previewed) = preview.clone();
                ApprovalRequest {
                    id: call.id.clone(),
                    tool: call.name.clone(),
                    kind,
                    activity: tool.activity(),
                    args: args.clone(),
                    summary: tool.summary(&args),
                    path: match &protected {
                        Some(p) => Some(p.real().to_string_lossy().into_owned()),
                        None => tool.changed_path(&args, &ctx.cwd).map(|p| p.to_string_lossy().into_owned()),
                    },
                    preview,
                    origin: tool.origin(),
                    sandbox: matches!(confinement, Confinement::Sandboxed(_)).then(|| self.sandbox.describe()),
                    confined_by: match &confinement {
                        Confinement::Sandboxed(s) => Some(s.helper.describe()),
                        _ => None,
                    },
                    unsandboxed: match &confinement {
                        Confinement::Unavailable(why) => Some(why.clone()),
                        _ => None,
                    },
                    holes: holes.clone(),
                    protected: protected.as_ref().map(Protected::describe),
                }
            };
            let asks = Asks { confinement: &confinement, protected: protected.is_some() || holes.is_some() };
            let verdict = tokio::select! {
                verdict = self.decide(asks, consent.as_ref(), request, call, kind, key.clone()) => verdict,
                () = cancel.cancelled() => Verdict::Cancel,
            };
            match verdict {
                Verdict::Run => {}
                Verdict::RunReviewed(text) => reviewed = Some(text),
                Verdict::Refuse(text) => return (args, Some(ToolOutput::error(text)), None),
                Verdict::Cancel => return (args, None, None),
            }
        }
        let asked_preview = lock(&previewed).take();
        if let Some(text) = reviewed {
            return self.write_reviewed(call, args, &text, asked_preview.as_deref(), &ctx).await;
        }
        let preview = match (asked_preview, &tool) {
            (Some(preview), _) => Some(preview),
            (None, Some(tool)) if tool.activity() == tools::Activity::Edit => tool.preview(&args, &ctx).await.map(Box::new),
            (None, _) => None,
        };
        self.emit(AgentEvent::ToolExecutionStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            args: args.clone(),
            preview,
        });
        let progress = {
            let events = self.events.clone();
            let (id, name) = (call.id.clone(), call.name.clone());
            Arc::new(move |partial: ToolOutput| {
                let (tail, lines_before) = live_tail(&partial);
                let _ = events.send(AgentEvent::ToolExecutionUpdate {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    tail,
                    lines_before,
                });
            })
        };
        let ctx = ctx.with_progress(progress);
        let capture = if enabled { self.capture_before(&call.name, &args, &ctx).await } else { None };
        let Confinement::Sandboxed(sandboxed) = confinement else {
            let output = self.tools.execute(&call.name, args.clone(), &ctx).await;
            return (args, Some(output), capture);
        };
        let inside = ctx.clone().with_sandbox(Some(sandboxed.clone()));
        let mut output = self.tools.execute(&call.name, args.clone(), &inside).await;
        mark(&mut output, "sandbox", self.sandbox.describe());
        let Some(why) = self.blocked(&output, &sandboxed, &ctx) else { return (args, Some(output), capture) };
        // Refused outside before ("reject always"): the sandboxed result stands, unasked.
        if self.grants.refuses(OUTSIDE_THE_SANDBOX, key.as_ref()) {
            return (args, Some(output), capture);
        }
        // The escalation: this exact command again, outside, if the user says so.
        let request = ApprovalRequest {
            id: ApprovalRequest::escalation_id(&call.id),
            tool: call.name.clone(),
            kind,
            activity: self.tools.activity(&call.name),
            args: args.clone(),
            summary: tools::call_summary(&call.name, &args),
            path: None,
            preview: None,
            origin: None,
            sandbox: None,
            confined_by: None,
            unsandboxed: Some(format!("the sandboxed run looks blocked by the sandbox: {why}")),
            holes: None,
            protected: None,
        };
        let decision = tokio::select! {
            decision = consent.ask(request) => decision,
            () = cancel.cancelled() => Decision::Cancel,
        };
        match decision {
            Decision::Allow | Decision::Always | Decision::AllowReviewed { .. } => {
                if decision == Decision::Always {
                    self.grants.remember(OUTSIDE_THE_SANDBOX, key);
                }
                let mut outside = self.tools.execute(&call.name, args.clone(), &ctx).await;
                mark(&mut outside, "unsandboxed", why);
                (args, Some(outside), capture)
            }
            Decision::Never { .. } => {
                self.grants.refuse(OUTSIDE_THE_SANDBOX, key);
                (args, Some(output), capture)
            }
            Decision::Reject { .. } => (args, Some(output), capture),
            Decision::Cancel => (args, None, capture),
        }
    }

    /// An `edit` or `write` the user reviewed hunk by hunk before it was written: the file gets
    /// `text` (what the user kept, through the `write` tool: the same checks, buffers and read
    /// back), and the model's result names the places of its version that were not written.
    /// Its hunks are recorded as kept (they were reviewed).
    async fn write_reviewed(
        &self,
        call: &ToolCall,
        args: Value,
        text: &str,
        preview: Option<&Preview>,
        ctx: &ToolContext,
    ) -> (Value, Option<ToolOutput>, Option<Captured>) {
        let Some(path) = tools::changed_path(&call.name, &args, &ctx.cwd) else {
            return (args, Some(ToolOutput::error("The reviewed change names no file: nothing was written.")), None);
        };
        self.emit(AgentEvent::ToolExecutionStart { tool_call_id: call.id.clone(), tool_name: call.name.clone(), args: args.clone(), preview: None });
        let capture = match self.capture_before(ToolName::Write.as_str(), &args, ctx).await {
            Some(Captured::File(c)) => Some(Captured::Reviewed(c)),
            _ => None,
        };
        let write = serde_json::json!({ "path": path.to_string_lossy(), "content": text });
        let written = self.tools.execute(ToolName::Write.as_str(), write, ctx).await;
        if written.is_error {
            return (args, Some(written), capture);
        }
        let name = path.strip_prefix(&ctx.cwd).unwrap_or(&path).display().to_string();
        let proposed = preview.map(|p| p.after.as_bytes()).unwrap_or_default();
        let left_out: Vec<String> =
            review::split_hunks(proposed, text.as_bytes()).into_iter().map(|(yours, _)| review::line_span(yours)).collect();
        let said = if left_out.is_empty() {
            format!("The user reviewed this change hunk by hunk before it was written and kept all of it: {name} holds your version.")
        } else {
            format!(
                "The user reviewed this change hunk by hunk before it was written and kept only part of it: in {name}, these places of your version were not written: {}. They hold what was there before (or the user's own text). Read the file again before editing it.",
                left_out.join("; ")
            )
        };
        (args, Some(ToolOutput::text(said, Value::Null)), capture)
    }

    /// Where a call of `name` runs: bash in the sandbox when it is on, can be enforced, and was
    /// not lifted for this command (`key`) for the session.
    fn confinement(&self, name: &str, key: Option<&ConsentKey>) -> Confinement {
        if name != ToolName::Bash.as_str() || !self.sandbox.is_on() || self.grants.covers(OUTSIDE_THE_SANDBOX, key) {
            return Confinement::Unconfined;
        }
        let scope = self.state().run_scope.clone().map(|ended| {
            let events = self.events.clone();
            let notify: sandbox::Notify = Arc::new(move |text: String| {
                let _ = events.send(AgentEvent::Notice(super::Notice::new(Level::Warn, text)));
            });
            sandbox::CommandScope { ended, notify }
        });
        match sandbox::confine(self.sandbox, scope) {
            Ok(sandboxed) => Confinement::Sandboxed(sandboxed),
            Err(why) => Confinement::Unavailable(why),
        }
    }

    /// Where a host tool's call really lands and why it must ask first, when the sandbox is on
    /// (`Tool::reach`, checked by `sandbox::protected`); with it off only consent applies.
    fn reach(&self, tool: Option<&ToolRef>, args: &Value, cwd: &std::path::Path) -> (Option<PathBuf>, Option<Protected>) {
        if !self.sandbox.is_on() {
            return (None, None);
        }
        match tool.and_then(|t| t.reach(args, cwd)) {
            Some(reach) => {
                let (real, protected) = reach.check(cwd);
                // In the read-only sandbox no write runs unasked: commands cannot write either.
                let read_only = self.sandbox.mode == crate::sandbox::SandboxMode::ReadOnly;
                let protected = match (&reach, protected) {
                    (tools::Reach::Write(_), None) if read_only => Some(Protected::ReadOnlySandbox { real: real.clone() }),
                    (_, protected) => protected,
                };
                (Some(real), protected)
            }
            None => (None, None),
        }
    }

    /// The consent for one call: the policy (which may let a sandboxed command run unasked), the
    /// session's grants, the user. A command the sandbox cannot confine, and a host tool's call
    /// that reaches a protected path, are always asked about (no policy or grant lifts the
    /// sandbox), unless the tool is denied; for a protected path "always" counts this once.
    async fn decide(
        &self,
        asks: Asks<'_>,
        consent: &dyn consent::Consent,
        request: impl std::future::Future<Output = ApprovalRequest>,
        call: &ToolCall,
        kind: ToolKind,
        key: Option<ConsentKey>,
    ) -> Verdict {
        let must = match (asks.protected, asks.confinement) {
            (true, _) => consent::MustAsk::Protected,
            (false, Confinement::Unavailable(_)) => consent::MustAsk::Unconfinable,
            (false, confinement) => {
                let sandboxed = matches!(confinement, Confinement::Sandboxed(_));
                return consent::decide(&self.policy, &self.grants, consent, request, &call.name, kind, key, sandboxed).await;
            }
        };
        consent::decide_asking(&self.policy, &self.grants, consent, request, &call.name, kind, key, must).await
    }

    /// Why a sandboxed result looks blocked by the sandbox (see [`sandbox::looks_blocked`]); a
    /// stopped command is not offered a re-run.
    fn blocked(&self, output: &ToolOutput, sandboxed: &Sandboxed, ctx: &ToolContext) -> Option<String> {
        if !output.is_error || ctx.cancel.is_cancelled() {
            return None;
        }
        let text = output.joined_text();
        let code = text.rsplit_once("Command exited with code ").and_then(|(_, c)| c.trim().parse().ok());
        sandboxed.blocked(code, &text, &ctx.cwd)
    }

    /// What the file an edit or write call changes holds now, through the front end's file
    /// access (so what the editor shows): every call's baseline, read even when the session
    /// keeps the file's original already. For `bash`: the files it may change that the host
    /// can know ([`Self::watched_by_commands`]).
    async fn capture_before(&self, name: &str, args: &Value, ctx: &ToolContext) -> Option<Captured> {
        if name == ToolName::Bash.as_str() {
            return Some(Captured::Command(self.watched_by_commands(ctx).await));
        }
        let path = tools::changed_path(name, args, &ctx.cwd)?;
        let before = match ctx.files.read(&path).await {
            Ok(bytes) => Before::Content(bytes),
            Err(e) if e.kind() == ErrorKind::NotFound => Before::Missing,
            // The call fails the same way (a folder, no permission), or its original is unknown.
            Err(e) => {
                tracing::info!(path = %path.display(), "cannot read a file before {name}: {e}");
                return None;
            }
        };
        Some(Captured::File(Capture { path, before }))
    }

    /// The files whose content before a command the host reads, so that what the command
    /// changes in them is reviewed against it: the files open in the front end (Neovim's loaded
    /// buffers), then the files the session's review knows (the agent changed them before).
    /// There is no walk of the project: a file in neither list (one the command creates, or
    /// one nobody opened or changed before) is not seen. At most [`MAX_WATCHED_BY_COMMANDS`]
    /// files of at most [`MAX_WATCHED_BYTES`] each, [`MAX_WATCHED_TOTAL`] in all, read from the
    /// disk on a blocking thread.
    async fn watched_by_commands(&self, ctx: &ToolContext) -> Vec<Capture> {
        let mut paths = ctx.files.open_files().await;
        match self.review().calls() {
            Ok(calls) => paths.extend(calls.into_iter().map(|c| c.path)),
            Err(e) => tracing::warn!("cannot read the review's files before a command: {e}"),
        }
        let mut seen = std::collections::HashSet::new();
        paths.retain(|p| p.is_absolute() && seen.insert(p.clone()));
        paths.truncate(MAX_WATCHED_BY_COMMANDS);
        let read = tokio::task::spawn_blocking(move || {
            let mut total = 0u64;
            paths
                .into_iter()
                .filter_map(|path| {
                    let meta = std::fs::metadata(&path).ok().filter(|m| m.is_file() && m.len() <= MAX_WATCHED_BYTES)?;
                    if total + meta.len() > MAX_WATCHED_TOTAL {
                        return None;
                    }
                    let bytes = std::fs::read(&path).ok().filter(|b| b.len() as u64 == meta.len())?;
                    total += meta.len();
                    Some(Capture { path, before: Before::Content(bytes) })
                })
                .collect()
        });
        read.await.unwrap_or_default()
    }

    /// Keeps the original of a file a call changed (its first change in the session), or moves
    /// its latest change. A failure is told, never fatal: the change itself is done.
    fn keep_original(&self, capture: &Capture, entry_id: &str) {
        let recorded = self.originals().record(&capture.path, &capture.before, entry_id, now_millis());
        if let Err(e) = recorded {
            tracing::error!(path = %capture.path.display(), "cannot keep the original: {e}");
            self.emit(AgentEvent::Notice(Notice::new(
                Level::Warn,
                format!(
                    "The content of {} before the agent's change could not be kept ({e}): the session's changes will not show it",
                    capture.path.display()
                ),
            )));
        }
    }

    /// Splits a successful change into pending hunks against the file as it was before this
    /// call (the review). The file is read from the disk, where the tool just wrote it. A
    /// failure is told, never fatal: the change itself is done.
    fn record_for_review(&self, capture: &Capture, call: &ToolCall, entry_id: &str) -> Option<ReviewedCall> {
        let recorded = std::fs::read(&capture.path).map_err(|source| SessionError::Io { path: capture.path.clone(), source }).and_then(
            |after| {
                let of = CallOf { call_id: &call.id, tool: &call.name, entry_id, path: &capture.path };
                self.review().record(&of, &capture.before, &after, now_millis())
            },
        );
        match recorded {
            Ok(Some(recorded)) => {
                self.emit(AgentEvent::HunksChanged { call: Some(recorded.clone()) });
                Some(recorded)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::error!(path = %capture.path.display(), "cannot record the change for review: {e}");
                self.emit(AgentEvent::Notice(Notice::new(
                    Level::Warn,
                    format!("The agent's change to {} could not be kept for review ({e})", capture.path.display()),
                )));
                None
            }
        }
    }

    /// Stores the result (on disk before the next call starts) and announces it.
    fn finish_call(
        &self,
        call: &ToolCall,
        args: &Value,
        output: ToolOutput,
        capture: Option<Captured>,
        result: &mut RunResult,
    ) -> Result<(), AgentError> {
        let is_error = output.is_error;
        let message: Message = output.into_message(&call.id, &call.name);
        self.emit(AgentEvent::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            args: args.clone(),
            is_error,
            result: message.clone(),
        });
        self.emit(AgentEvent::MessageStart { message: message.clone() });
        let entry_id = self.commit_message(&message, result, true)?;
        match capture {
            Some(Captured::File(capture)) if !is_error => {
                self.keep_original(&capture, &entry_id);
                self.record_for_review(&capture, call, &entry_id);
            }
            Some(Captured::Reviewed(capture)) if !is_error => {
                self.keep_original(&capture, &entry_id);
                if let Some(recorded) = self.record_for_review(&capture, call, &entry_id) {
                    let kept: Vec<review::Decision> = recorded
                        .hunks
                        .iter()
                        .map(|h| review::Decision { id: h.id, state: HunkState::Kept, reason: None, edited: false })
                        .collect();
                    match self.review().decide(&kept) {
                        Ok(_) => self.emit(AgentEvent::HunksChanged { call: None }),
                        Err(e) => tracing::error!("cannot mark the reviewed change kept: {e}"),
                    }
                }
            }
            // A command that failed may have changed files all the same.
            Some(Captured::Command(captures)) => {
                for capture in captures {
                    let Before::Content(before) = &capture.before else { continue };
                    if std::fs::read(&capture.path).is_ok_and(|now| now != *before) {
                        self.keep_original(&capture, &entry_id);
                        self.record_for_review(&capture, call, &entry_id);
                    }
                }
            }
            _ => {}
        }
        // The list changed once its result is stored (`todos()` reads it from there), by the
        // session's rule for which results set it.
        if let Some(todos) = todos::list_set_by(&message) {
            self.emit(AgentEvent::TodosChanged { todos });
        }
        Ok(())
    }
}

/// Notes in the result's details how the command ran (`sandbox`: the sandbox it ran in;
/// `unsandboxed`: why it was run again outside): the chat shows it, the session keeps it.
fn mark(output: &mut ToolOutput, key: &str, note: String) {
    if !output.details.is_object() {
        output.details = Value::Object(Default::default());
    }
    if let Value::Object(details) = &mut output.details {
        details.insert(key.into(), Value::String(note));
    }
}

/// A clone of the `Arc` a mutex holds (the front end may swap it at any time).
fn lock_arc<T: ?Sized>(m: &std::sync::Mutex<Arc<T>>) -> Arc<T> {
    super::lock(m).clone()
}
