//! The agent's events as ACP `session/update`s, live ([`Translator`]) and from a session's file
//! ([`replay`], for `session/load`): text and thinking as message and thought chunks, tool calls
//! as `tool_call` then `tool_call_update`s (a diff for edits), the todo list as a `plan`, the
//! context's use as `usage_update`, a handoff as a compaction when the client reports those,
//! else as a headed agent message.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use tokio::sync::{broadcast, mpsc, oneshot};

use serde_json::Value;

use super::rpc::Peer;
use super::text;
use super::wire::{
    self, method, CompactionStatus, CompactionSummaryChunk, CompactionUpdate, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionNotification, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, UsageUpdate,
};
use handoff_core::agent::{wall, AgentEvent, AgentSession, AssistantMessageEvent};
use handoff_core::controller::{self, FrontEndTexts};
use handoff_core::handoff::{self, HandoffOutcome};
use handoff_core::message::{Content, ContentBlock, Message, Role};
use handoff_core::session::{self, SessionEntry, TodoStatus};
use handoff_core::tools::{self, Activity, Todo, ToolRegistry};

/// The title a client shows for a call: what it does and where, said by the tool's summary
/// (the chat's line for it, [`tools::call_summary`]): a command as code (`` `cargo test` ``),
/// else the tool and its summary (`Read src/main.rs:10-40`). Never `name: …`: codecompanion
/// shows only what comes before a colon. A summary of many lines gives its first.
pub fn title(tool: &str, activity: Activity, summary: &str) -> String {
    let mut lines = summary.trim().lines();
    let Some(first) = lines.next() else { return tool.to_string() };
    let more = if lines.next().is_some() { " …" } else { "" };
    if activity == Activity::Execute {
        // Code that holds a backtick is fenced by two, spaced (markdown's rule).
        return match first.contains('`') {
            true => format!("`` {first} ``{more}"),
            false => format!("`{first}`{more}"),
        };
    }
    // The host's own tools by their name capitalized; another's (an MCP server's) as it is.
    let name = match (tools::lookup(tool), tool.chars().next()) {
        (Some(_), Some(c)) => format!("{}{}", c.to_uppercase(), &tool[c.len_utf8()..]),
        _ => tool.to_string(),
    };
    format!("{name} {first}{more}")
}

/// The file a call reads or changes, for the client to follow ([`tools::call_location`]).
fn locations(name: &str, args: &Value, cwd: &Path) -> Option<Vec<wire::ToolCallLocation>> {
    let location = tools::call_location(name, args, cwd)?;
    Some(vec![wire::ToolCallLocation::new(location.path).line(location.line)])
}

/// Where an edit lands: its file, at the first line its preview changes.
pub fn edit_location(path: &Path, preview: &tools::Preview) -> wire::ToolCallLocation {
    let hunks = session::review::split_hunks(preview.before.as_bytes(), preview.after.as_bytes());
    let line = hunks.first().map(|(_, after)| after.start + 1);
    wire::ToolCallLocation::new(path).line(line)
}

/// Where updates for one ACP session go.
#[derive(Clone)]
pub struct Updates {
    pub peer: Peer,
    pub session_id: String,
}

impl Updates {
    pub fn send(&self, update: SessionUpdate) {
        self.peer.notify(method::SESSION_UPDATE, SessionNotification::new(self.session_id.clone(), update));
    }

    pub fn message(&self, text: impl Into<String>) {
        self.send(SessionUpdate::AgentMessageChunk(wire::chunk(text)));
    }

    pub fn plan(&self, todos: &[Todo]) {
        let entries = todos
            .iter()
            .map(|t| {
                let status = match t.status {
                    TodoStatus::Pending => PlanEntryStatus::Pending,
                    TodoStatus::InProgress => PlanEntryStatus::InProgress,
                    TodoStatus::Completed => PlanEntryStatus::Completed,
                };
                PlanEntry::new(t.content.clone(), PlanEntryPriority::Medium, status)
            })
            .collect();
        self.send(SessionUpdate::Plan(Plan::new(entries)));
    }
}

fn blocks(message: &Message) -> &[ContentBlock] {
    match &message.content {
        Content::Blocks(blocks) => blocks,
        Content::Text(_) => &[],
    }
}

/// The tool calls an assistant message asks for: id, name, arguments.
fn calls_of(message: &Message) -> impl Iterator<Item = (&str, &str, &Value)> {
    blocks(message).iter().filter(|b| b.kind == "toolCall").map(|b| {
        (
            b.extra_str("id").unwrap_or_default(),
            b.extra_str("name").unwrap_or_default(),
            b.extra.get("arguments").unwrap_or(&Value::Null),
        )
    })
}

/// The `tool_call` announcing a call, without its diff.
fn announced(id: &str, name: &str, args: &Value, cwd: &Path, activity: Activity) -> ToolCall {
    let mut call = ToolCall::new(id.to_string(), title(name, activity, &tools::call_summary(name, args)))
        .kind(wire::kind(activity))
        .status(ToolCallStatus::Pending)
        .raw_input(args.clone());
    if let Some(locations) = locations(name, args, cwd) {
        call = call.locations(locations);
    }
    call
}

/// The end of a call: its status and its result's text (after the diff, for an edit).
fn finished(id: &str, result: &Message, is_error: bool, diff: Option<ToolCallContent>) -> ToolCallUpdate {
    let mut content: Vec<ToolCallContent> = diff.into_iter().collect();
    let output = result.text();
    if !output.is_empty() {
        content.push(ToolCallContent::from(wire::text(output)));
    }
    let status = if is_error { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
    ToolCallUpdate::new(id.to_string(), ToolCallUpdateFields::new().status(status).content(content))
}


/// A handoff being reported.
struct HandoffReport {
    compaction_id: String,
    streamed: bool,
}

/// Turns one ACP session's agent events into updates, in order.
pub struct Translator {
    pub updates: Updates,
    /// The client reports compactions (`session.compaction`).
    pub compaction: bool,
    pub cwd: PathBuf,
    /// The agent, for its model's context window when a reply reports its usage.
    agent: Weak<AgentSession>,
    /// The controller's texts of this front end (how to hand off by hand, in a notice).
    texts: FrontEndTexts,
    handoff: Option<HandoffReport>,
    handoffs: u64,
    /// The diff shown for each edit announced, shown again with its result.
    diffs: HashMap<String, ToolCallContent>,
}

impl Translator {
    pub fn new(updates: Updates, compaction: bool, cwd: PathBuf, agent: &Arc<AgentSession>, texts: FrontEndTexts) -> Self {
        let agent = Arc::downgrade(agent);
        Translator { updates, compaction, cwd, agent, texts, handoff: None, handoffs: 0, diffs: HashMap::new() }
    }

    /// Sends what `event` means to the client.
    pub async fn event(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::MessageUpdate { assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. } } => {
                match &mut self.handoff {
                    Some(report) if self.compaction => {
                        report.streamed = true;
                        let chunk = CompactionSummaryChunk::new(report.compaction_id.clone(), wire::text(delta));
                        self.updates.send(SessionUpdate::CompactionSummaryChunk(chunk));
                    }
                    _ => self.updates.message(delta),
                }
            }
            AgentEvent::MessageUpdate { assistant_message_event: AssistantMessageEvent::ThinkingDelta { delta, .. } }
                if self.handoff.is_none() =>
            {
                self.updates.send(SessionUpdate::AgentThoughtChunk(wire::chunk(delta)));
            }
            AgentEvent::MessageEnd { message } if message.is_assistant() && self.handoff.is_none() => {
                self.announce_calls(&message).await;
                // The context's use after a reply: what the model read and wrote, of the window.
                // A reply that reports none (cancelled) leaves the last one standing.
                let window = self.agent.upgrade().map(|agent| agent.provider_config().context_window);
                if let (Some(used), Some(window)) = (wall::reported(&message), window) {
                    self.updates.send(SessionUpdate::UsageUpdate(UsageUpdate::new(used, window)));
                }
            }
            AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args, preview } => {
                let mut fields = ToolCallUpdateFields::new().status(ToolCallStatus::InProgress);
                // The engine's preview (the approval's, when it was asked): the diff shown now
                // and again with the result.
                if let (Some(path), Some(preview)) = (tools::changed_path(&tool_name, &args, &self.cwd), preview) {
                    let location = edit_location(&path, &preview);
                    let diff = ToolCallContent::from(wire::Diff::new(path, preview.after).old_text(preview.before));
                    self.diffs.insert(tool_call_id.clone(), diff.clone());
                    fields = fields.content(vec![diff]).locations(vec![location]);
                }
                self.updates.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(tool_call_id, fields)));
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, tail, .. } => {
                let fields = ToolCallUpdateFields::new().content(vec![ToolCallContent::from(wire::text(tail))]);
                self.updates.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(tool_call_id, fields)));
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, is_error, result, .. } => {
                let diff = self.diffs.remove(&tool_call_id).filter(|_| !is_error);
                self.updates.send(SessionUpdate::ToolCallUpdate(finished(&tool_call_id, &result, is_error, diff)));
            }
            AgentEvent::TodosChanged { todos } => self.updates.plan(&todos),
            AgentEvent::HandoffStart { auto, prepared, .. } => {
                self.handoffs += 1;
                let compaction_id = format!("handoff-{}", self.handoffs);
                if self.compaction {
                    let update = CompactionUpdate::new(compaction_id.clone(), CompactionStatus::InProgress);
                    self.updates.send(SessionUpdate::CompactionUpdate(update));
                } else {
                    self.updates.message(text::handoff_heading(auto.as_ref(), prepared));
                }
                self.handoff = Some(HandoffReport { compaction_id, streamed: false });
            }
            AgentEvent::HandoffEnd { outcome, auto, .. } => {
                let report = self.handoff.take();
                if let (Some(report), true) = (&report, self.compaction) {
                    self.end_compaction(report, &outcome);
                }
                let notices = controller::handoff_end_notices(&outcome, auto.as_ref(), &self.texts);
                let lines: Vec<String> = notices.into_iter().map(|n| n.message).collect();
                if !lines.is_empty() {
                    self.updates.message(text::notice_block(&lines.join("\n")));
                }
            }
            AgentEvent::Notice(notice) => self.updates.message(text::notice_block(&notice.message)),
            _ => {}
        }
    }

    fn end_compaction(&self, report: &HandoffReport, outcome: &HandoffOutcome) {
        let status = match outcome {
            HandoffOutcome::Done { .. } => CompactionStatus::Completed,
            HandoffOutcome::Cancelled | HandoffOutcome::Discarded => CompactionStatus::Cancelled,
            _ => CompactionStatus::Failed,
        };
        // A document the host wrote (the fallback) was never streamed: it is the summary.
        if let (HandoffOutcome::Done { document, .. }, false) = (outcome, report.streamed) {
            let chunk = CompactionSummaryChunk::new(report.compaction_id.clone(), wire::text(document.clone()));
            self.updates.send(SessionUpdate::CompactionSummaryChunk(chunk));
        }
        self.updates.send(SessionUpdate::CompactionUpdate(CompactionUpdate::new(report.compaction_id.clone(), status)));
    }

    /// Announces each call the reply asks for, an edit with its diff (what the file would become,
    /// read now, before it runs).
    async fn announce_calls(&mut self, message: &Message) {
        let tools = self.agent.upgrade().map(|agent| agent.offered_tools()).unwrap_or_default();
        for (id, name, args) in calls_of(message) {
            let call = announced(id, name, args, &self.cwd, tools.activity(name));
            self.updates.send(SessionUpdate::ToolCall(call));
        }
    }
}

/// The conversation of a session's current branch as updates (`session/load`): the user's
/// messages, the replies and their thinking, each tool call with its result, a handoff's
/// document as the live handoff showed it (a compaction's summary when the client reports
/// those, else a headed message; never the wrapper the model reads); then the todo list.
/// `tools`: the session's, each replayed call's kind its tool's (an MCP server's tool is known
/// once its server runs, from the first prompt on; before, its kind is `other`).
pub fn replay(updates: &Updates, branch: &[&SessionEntry], cwd: &Path, todos: &[Todo], tools: &ToolRegistry, compaction: bool) {
    for entry in branch {
        if let Some(document) = handoff::shown_document(entry) {
            if compaction {
                let id = format!("handoff-{}", entry.id);
                updates.send(SessionUpdate::CompactionUpdate(CompactionUpdate::new(id.clone(), CompactionStatus::InProgress)));
                updates.send(SessionUpdate::CompactionSummaryChunk(CompactionSummaryChunk::new(id.clone(), wire::text(document))));
                updates.send(SessionUpdate::CompactionUpdate(CompactionUpdate::new(id, CompactionStatus::Completed)));
            } else {
                updates.message(format!("{}{document}", text::HANDED_OFF_HEADING));
            }
            continue;
        }
        if entry.custom_message().is_some() {
            continue;
        }
        let Some(message) = entry.message() else { continue };
        match &message.role {
            Role::User => {
                if session::author(&message) == session::Author::User {
                    updates.send(SessionUpdate::UserMessageChunk(wire::chunk(message.text())));
                }
            }
            Role::Assistant => {
                for block in blocks(&message) {
                    match (block.kind.as_str(), &block.text, &block.thinking) {
                        ("text", Some(text), _) if !text.is_empty() => updates.message(text.clone()),
                        ("thinking", _, Some(thinking)) if !thinking.trim().is_empty() => {
                            updates.send(SessionUpdate::AgentThoughtChunk(wire::chunk(thinking.clone())));
                        }
                        _ => {}
                    }
                }
                for (id, name, args) in calls_of(&message) {
                    updates.send(SessionUpdate::ToolCall(announced(id, name, args, cwd, tools.activity(name))));
                }
            }
            Role::ToolResult => {
                let id = message.extra_str("toolCallId").unwrap_or_default().to_string();
                let is_error = message.extra.get("isError").and_then(Value::as_bool).unwrap_or(false);
                updates.send(SessionUpdate::ToolCallUpdate(finished(&id, &message, is_error, None)));
            }
            Role::Other(_) => {}
        }
    }
    if !todos.is_empty() {
        updates.plan(todos);
    }
}

/// Translates a session's events to updates until its agent goes away; a flush request is
/// answered once every event emitted before it is sent. Returns the way to ask for one.
pub(super) fn spawn_translator(mut translator: Translator, mut events: broadcast::Receiver<AgentEvent>) -> Flusher {
    use broadcast::error::RecvError;
    let (flusher, mut flushes) = mpsc::unbounded_channel::<Flush>();
    handoff_core::task::spawn("the ACP updates", async move {
        loop {
            // While the client does not read, events wait in their (bounded) channel, not as
            // lines: the next ones are merged, or lost and told (`lost`).
            translator.updates.peer.writable().await;
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Ok(event) => translate_queued(&mut translator, Some(event), &mut events).await,
                    Err(RecvError::Lagged(n)) => lost(&translator, n),
                    Err(RecvError::Closed) => break,
                },
                flush = flushes.recv() => {
                    let Some(done) = flush else { break };
                    translate_queued(&mut translator, None, &mut events).await;
                    let _ = done.send(());
                }
            }
        }
    });
    Flusher(flusher)
}

/// Translates `first` and every event already waiting. Deltas of the same kind that wait one
/// after another go out as one chunk: a client that reads slower than the model writes gets
/// fewer, larger chunks instead of falling behind the channel.
async fn translate_queued(translator: &mut Translator, first: Option<AgentEvent>, events: &mut broadcast::Receiver<AgentEvent>) {
    use broadcast::error::TryRecvError;
    let mut next = first;
    loop {
        let event = match next.take() {
            Some(event) => event,
            None => match events.try_recv() {
                Ok(event) => event,
                Err(TryRecvError::Lagged(n)) => {
                    lost(translator, n);
                    continue;
                }
                Err(_) => return,
            },
        };
        translator.updates.peer.writable().await;
        let AgentEvent::MessageUpdate { assistant_message_event: delta } = event else {
            translator.event(event).await;
            continue;
        };
        let (thinking, mut merged) = match delta {
            AssistantMessageEvent::TextDelta { delta, .. } => (false, delta),
            AssistantMessageEvent::ThinkingDelta { delta, .. } => (true, delta),
        };
        while let Ok(event) = events.try_recv() {
            match event {
                AgentEvent::MessageUpdate { assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. } }
                    if !thinking =>
                {
                    merged.push_str(&delta)
                }
                AgentEvent::MessageUpdate { assistant_message_event: AssistantMessageEvent::ThinkingDelta { delta, .. } }
                    if thinking =>
                {
                    merged.push_str(&delta)
                }
                other => {
                    next = Some(other);
                    break;
                }
            }
        }
        let delta = match thinking {
            false => AssistantMessageEvent::TextDelta { content_index: 0, delta: merged },
            true => AssistantMessageEvent::ThinkingDelta { content_index: 0, delta: merged },
        };
        translator.event(AgentEvent::MessageUpdate { assistant_message_event: delta }).await;
    }
}

/// Events the channel dropped before they were read (the client stopped reading, or the
/// machine stalled): the client is told that the session file has what it missed.
fn lost(translator: &Translator, n: u64) {
    tracing::warn!("{n} agent events were lost to a slow client");
    translator.updates.message(text::notice_block(text::EVENTS_LOST));
}

/// A flush request to a session's translator: every event emitted so far is sent before the
/// answer (a prompt's updates go out before its `stopReason`).
type Flush = oneshot::Sender<()>;

/// Asks a session's translator for a flush. Updates are translated in their own task while our
/// answers and requests go straight to the line: whatever must follow the updates emitted
/// before it (a prompt's `stopReason`, a question about a call the client must have been shown)
/// waits for [`Flusher::flushed`] first.
#[derive(Clone)]
pub struct Flusher(mpsc::UnboundedSender<Flush>);

impl Flusher {
    /// Waits until every event emitted so far has been sent as an update (at once when the
    /// translator is gone).
    pub async fn flushed(&self) {
        let (tx, rx) = oneshot::channel();
        if self.0.send(tx).is_ok() {
            let _ = rx.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_says_what_and_where_without_a_name_before_a_colon() {
        assert_eq!(title("read", Activity::Read, "src/main.rs:10-40"), "Read src/main.rs:10-40");
        assert_eq!(title("edit", Activity::Edit, "src/lib.rs"), "Edit src/lib.rs");
        assert_eq!(title("bash", Activity::Execute, "cargo test"), "`cargo test`");
        assert_eq!(title("bash", Activity::Execute, "echo `date`"), "`` echo `date` ``");
        assert_eq!(title("bash", Activity::Execute, "cat <<EOF\nline\nEOF"), "`cat <<EOF` …");
        assert_eq!(title("mcp__fx__echo", Activity::Read, "hello"), "mcp__fx__echo hello");
        assert_eq!(title("ls", Activity::Search, ""), "ls");
    }
}
