//! What the chat shows of a session: its current branch as display items, and the records Lua
//! receives for agent events. Lua renders; it never reads session files itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use handoff_core::agent::events::HandoffOutcome;
use handoff_core::agent::{AgentEvent, AgentSession, AssistantMessageEvent};
use handoff_core::controller::{self, Controller};
use handoff_core::handoff;
use handoff_core::message::{Content, ContentBlock, Message, Role, Usage};
use handoff_core::session::entry::kind;
use handoff_core::session::{self, SessionEntry, SessionManager};
use handoff_core::tools;

use super::protocol::{Item, LedgerText, Record, ReviewCallItem, SessionView, Status, ToolCallItem, Transcript};

/// The content blocks of a message, borrowed (a plain-text content has none of the kinds the
/// chat looks for; `Content::blocks` would clone every block, text included).
fn blocks(message: &Message) -> &[ContentBlock] {
    match &message.content {
        Content::Blocks(blocks) => blocks,
        Content::Text(_) => &[],
    }
}

fn thinking_of(message: &Message) -> String {
    blocks(message)
        .iter()
        .filter(|b| b.kind == "thinking")
        // A block signed without text (Anthropic's hidden thinking) shows nothing.
        .filter_map(|b| b.thinking.as_deref().filter(|t| !t.trim().is_empty()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_calls_of(message: &Message) -> Vec<ToolCallItem> {
    blocks(message)
        .iter()
        .filter(|b| b.kind == "toolCall")
        .map(|b| {
            let tool = b.extra_str("name").unwrap_or_default().to_string();
            let summary = tools::call_summary(&tool, b.extra.get("arguments").unwrap_or(&serde_json::Value::Null));
            ToolCallItem { id: b.extra_str("id").unwrap_or_default().to_string(), tool, summary }
        })
        .collect()
}

/// Lines of a tool's output a transcript carries: the chat's `tool_output_lines`, which
/// `configure` sets (the chat's default until then).
static TOOL_OUTPUT_LINES: AtomicUsize =
    AtomicUsize::new(handoff_core::config::schema::DEFAULT_TOOL_OUTPUT_LINES as usize);

/// Sets how many lines of each tool output transcripts carry (the chat shows no more).
pub fn set_tool_output_lines(lines: usize) {
    TOOL_OUTPUT_LINES.store(lines, Ordering::Relaxed);
}

/// The last `keep` lines of `text` (its trailing line breaks dropped, as the chat drops them),
/// and how many lines come before them.
fn tail(text: String, keep: usize) -> (String, usize) {
    let body = text.trim_end_matches('\n');
    let cut = memchr::memrchr_iter(b'\n', body.as_bytes()).nth(keep.saturating_sub(1)).filter(|_| keep > 0);
    match cut {
        Some(at) => {
            let earlier = memchr::memchr_iter(b'\n', &body.as_bytes()[..at]).count() + 1;
            (body[at + 1..].to_string(), earlier)
        }
        None => (text, 0),
    }
}

/// One message as a display item.
pub fn message_item(message: &Message) -> Item {
    let text = message.text();
    match &message.role {
        Role::User => match session::author(message) {
            session::Author::HandoffRequest { focus } => Item::HandoffRequest { focus },
            session::Author::Continuation => Item::Continuation { text },
            session::Author::TodoReminder => Item::Reminder { text },
            session::Author::User | session::Author::NotUser => Item::User { text },
        },
        Role::Assistant => {
            let usage = message.usage.as_ref();
            let count = |f: fn(&Usage) -> u64| usage.map(f).filter(|n| *n > 0);
            Item::Assistant {
                text: Some(text),
                thinking: Some(thinking_of(message)).filter(|t| !t.is_empty()),
                model: message.extra_str("model").map(str::to_string),
                stop_reason: message.stop_reason.map(|s| s.as_str()),
                error_message: message.error_message.clone(),
                output_tokens: count(|u| u.output),
                input_tokens: count(|u| u.input + u.cache_read + u.cache_write),
                cached_tokens: count(|u| u.cache_read),
                cache_write_tokens: count(|u| u.cache_write),
                tool_calls: tool_calls_of(message),
            }
        }
        Role::ToolResult => {
            let (text, earlier_lines) = tail(text, TOOL_OUTPUT_LINES.load(Ordering::Relaxed));
            Item::Tool {
                tool: message.tool_result().and_then(|r| r.tool_name()).map(str::to_string),
                text,
                is_error: message.tool_result().is_some_and(|r| r.is_error()),
                earlier: tools::lines_not_kept(message),
                earlier_lines,
            }
        }
        Role::Other(role) => Item::Custom { custom_type: role.clone(), text },
    }
}

/// Items a transcript carries unless more are asked for: a long session's chat opens on its
/// latest part, and the chat asks for earlier ones a page at a time. Building and drawing all
/// 100k items of a large session took the host 100+ MB and Neovim 1.3 s and 200 MB; 200 items
/// (screens of scrollback) are drawn in a third of the time 1,000 took, which is most of what
/// resuming a short session costs.
pub const PAGE: usize = 200;

/// One branch entry as a display item (`None` for entries the chat does not show).
fn entry_item(entry: &SessionEntry) -> Option<Item> {
    if let Some(message) = entry.message() {
        Some(message_item(&message))
    } else if let Some(custom) = entry.custom_message().filter(|c| c.display) {
        let text = custom.content.joined_text();
        Some(if custom.custom_type == handoff::CUSTOM_TYPE {
            let ledger = handoff_core::session::todos::handoff_details(entry)
                .and_then(|details| handoff_core::session::ledger::Ledger::of_details(&details));
            Item::Handoff { text, ledger: ledger.as_ref().map(|l| Box::new(LedgerText::from(l))) }
        } else {
            Item::Custom { custom_type: custom.custom_type.clone(), text }
        })
    } else if let Some((summary, _)) = entry.compaction() {
        Some(Item::Compaction { text: summary })
    } else if let Some(summary) = entry.branch_summary() {
        Some(Item::BranchSummary { text: summary })
    } else if entry.kind == kind::MODEL_CHANGE {
        let (provider, model) = entry.model_change()?;
        Some(Item::Model { provider, model })
    } else {
        None
    }
}

/// Whether `entry` shows in the chat, without reading its message.
fn shows(entry: &SessionEntry) -> bool {
    if entry.is_message() {
        return entry.message_role().is_some();
    }
    match entry.kind.as_str() {
        kind::COMPACTION | kind::BRANCH_SUMMARY | kind::MODEL_CHANGE => true,
        kind::CUSTOM_MESSAGE => entry.custom_message().is_some_and(|c| c.display),
        _ => false,
    }
}

/// The last `limit` display items of the current branch of `session`, root first, and how
/// many items come before them.
pub fn items(session: &SessionManager, limit: usize) -> (Vec<Item>, usize) {
    items_upto(session, limit, None)
}

/// [`items`] of the branch that ends at `leaf` (`None`: the current leaf).
fn items_upto(session: &SessionManager, limit: usize, leaf: Option<&str>) -> (Vec<Item>, usize) {
    let branch = session.get_branch(leaf.filter(|id| session.get_entry(id).is_some()));
    let mut out = Vec::new();
    let mut rest = branch.len();
    while rest > 0 && out.len() < limit {
        rest -= 1;
        out.extend(entry_item(branch[rest]));
    }
    out.reverse();
    let earlier = branch[..rest].iter().filter(|e| shows(e)).count();
    (out, earlier)
}

/// A session file's transcript for reading, without making it the agent's session: the file is
/// only read (never migrated on disk, never appended to). Blocking: run it off the runtime.
pub fn view(path: &std::path::Path, session_dir: &std::path::Path, limit: usize) -> SessionView {
    let shown = path.to_string_lossy().into_owned();
    match SessionManager::open(path, session_dir) {
        Ok(session) => {
            let (items, earlier) = items(&session, limit);
            SessionView {
                path: shown,
                session_id: Some(session.session_id().to_string()),
                parent_session: session.header().parent_session.clone(),
                items,
                earlier,
                error: None,
            }
        }
        Err(e) => SessionView {
            path: shown,
            session_id: None,
            parent_session: None,
            items: Vec::new(),
            earlier: 0,
            error: Some(e.to_string()),
        },
    }
}

/// Session identity and run state, as `status()` reports it.
pub fn status(controller: &Controller) -> Status {
    let agent = controller.agent();
    let (session_file, session_id, parent_session, pins) = {
        let session = agent.session();
        (
            session.path().to_string_lossy().into_owned(),
            session.session_id().to_string(),
            session.header().parent_session.clone(),
            session.pins(),
        )
    };
    let config = agent.provider_config();
    let (context_tokens, context_window) = agent.context_usage();
    let instruction_files = agent.system_prompt().instruction_files.iter().map(|p| p.display().to_string()).collect();
    Status {
        session_file,
        session_id,
        parent_session,
        busy: controller.is_busy(),
        generating_handoff: controller.is_generating_handoff(),
        provider: config.name,
        api: config.api,
        model: config.model,
        thinking: agent.thinking_level(),
        context_tokens,
        context_window,
        context_percent: controller::text::percent(context_tokens, context_window),
        instruction_files,
        pins,
    }
}

/// The transcript of a session just opened or switched to, built on a blocking thread: a large
/// session's branch takes milliseconds to walk.
pub async fn opened(controller: &Arc<Controller>) -> Transcript {
    opened_upto(controller, None).await
}

/// [`opened`] up to `leaf`, the session's last entry when it was switched to: what came after
/// reaches the chat as events.
pub async fn opened_upto(controller: &Arc<Controller>, leaf: Option<String>) -> Transcript {
    let (c, at) = (controller.clone(), leaf.clone());
    let built = tokio::task::spawn_blocking(move || transcript_upto(&c, PAGE, at.as_deref())).await;
    // The blocking pool only fails while the runtime shuts down: build it here then.
    built.unwrap_or_else(|_| transcript_upto(controller, PAGE, leaf.as_deref()))
}

/// The last `limit` items with the status: the chat rebuilds from it.
pub fn transcript(controller: &Controller, limit: usize) -> Transcript {
    transcript_upto(controller, limit, None)
}

fn transcript_upto(controller: &Controller, limit: usize, leaf: Option<&str>) -> Transcript {
    let (items, earlier) = items_upto(&controller.agent().session(), limit, leaf);
    let todos = controller.agent().todos();
    Transcript { status: status(controller), items, earlier, page: PAGE, todos }
}

/// Lua's record for an agent event that is not a streamed delta (`None`: not shown).
pub fn event_record(event: &AgentEvent, agent: &AgentSession) -> Option<Record> {
    /// An assistant message's item without its text: the deltas carry that.
    fn without_text(mut item: Item, keep_stop: bool) -> Item {
        if let Item::Assistant { text, thinking, stop_reason, tool_calls, .. } = &mut item {
            *text = None;
            *thinking = None;
            // The calls show as they run (`tool_start`).
            tool_calls.clear();
            if !keep_stop {
                *stop_reason = None;
            }
        }
        item
    }
    Some(match event {
        AgentEvent::AgentStart => Record::AgentStart,
        AgentEvent::MessageStart { message } if message.is_assistant() => {
            Record::MessageStart(without_text(message_item(message), false))
        }
        // A tool's result shows with its `tool_end`.
        AgentEvent::MessageStart { message } if message.role == Role::ToolResult => return None,
        AgentEvent::MessageStart { message } => Record::MessageStart(message_item(message)),
        AgentEvent::MessageEnd { message } if message.is_assistant() => {
            Record::MessageEnd(without_text(message_item(message), true))
        }
        AgentEvent::AgentEnd { messages, failure, at_wall } => {
            let last = messages.iter().rev().find(|m| m.is_assistant());
            let (context_tokens, context_window) = agent.context_usage();
            Record::AgentEnd {
                stop_reason: last.and_then(|m| m.stop_reason).map(|s| s.as_str()),
                error_message: last.and_then(|m| m.error_message.clone()),
                error_kind: *failure,
                session_file: agent.session().path().to_string_lossy().into_owned(),
                context_tokens,
                context_window,
                context_percent: controller::text::percent(context_tokens, context_window),
                at_wall: *at_wall,
            }
        }
        AgentEvent::HandoffStart { focus, auto, prepared } => Record::HandoffStart {
            focus: focus.clone(),
            auto: *auto,
            banner: auto.as_ref().map(|wall| controller::text::auto_banner(wall, *prepared)),
        },
        AgentEvent::HandoffDraft(draft) => {
            Record::HandoffDraft { draft: draft.clone(), text: controller::text::draft_status(draft) }
        }
        AgentEvent::HandoffEnd { outcome, auto, .. } => Record::HandoffEnd {
            outcome: outcome.clone(),
            notices: controller::handoff_end_notices(outcome, auto.as_ref(), &super::editor_texts()),
            ledger: match outcome {
                HandoffOutcome::Done { ledger, .. } | HandoffOutcome::Review { ledger, .. } => Some(Box::new(LedgerText::from(&**ledger))),
                _ => None,
            },
            auto: *auto,
        },
        AgentEvent::Lifecycle { phase, busy } => Record::Lifecycle { phase, busy: *busy },
        AgentEvent::SessionSwitch { old, new, reason, .. } => {
            Record::SessionSwitch { old: old.clone(), new: new.clone(), reason: *reason }
        }
        AgentEvent::Notice(notice) => Record::Notice(notice.clone()),
        AgentEvent::TodosChanged { todos } => Record::Todos { todos: todos.clone() },
        AgentEvent::PinsChanged { pins } => Record::Pins { pins: pins.clone() },
        AgentEvent::HunksChanged { call } => Record::Hunks { call: call.clone().map(ReviewCallItem::of) },
        AgentEvent::ToolBatch { running, files, any_file } => Record::ToolBatch {
            running: *running,
            files: files.iter().map(|f| f.to_string_lossy().into_owned()).collect(),
            any_file: *any_file,
        },
        AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args, .. } => {
            Record::ToolStart {
                id: tool_call_id.clone(),
                tool: tool_name.clone(),
                args: args.clone(),
                summary: tools::call_summary(tool_name, args),
            }
        }
        AgentEvent::ToolExecutionUpdate { tool_call_id, tail, lines_before, .. } => {
            Record::ToolUpdate { id: tool_call_id.clone(), tail: tail.clone(), earlier: *lines_before }
        }
        AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, is_error, result, .. } => Record::ToolEnd {
            id: tool_call_id.clone(),
            tool: tool_name.clone(),
            kind: tools::kind_of(tool_name),
            reload: reloads(tool_name, agent),
            is_error: *is_error,
            text: result.text(),
            earlier: tools::lines_not_kept(result),
            sandbox: sandbox_note(result),
        },
        AgentEvent::MessageUpdate { .. }
        | AgentEvent::TurnStart
        | AgentEvent::TurnEnd { .. }
        | AgentEvent::MessageEnd { .. } => return None,
    })
}

/// Whether a call may have changed files the editor shows outside its buffers: a command or
/// an MCP server's tool of ours (edits of ours go through the buffers), or an external agent's
/// change made with its own IO.
fn reloads(tool: &str, agent: &AgentSession) -> bool {
    matches!(tools::kind_of(tool), Some(tools::ToolKind::Execute | tools::ToolKind::Mcp))
        || (handoff_agents::changes_files(tool) && handoff_agents::agent_of(&agent.session()).is_some())
}

/// The chat's note on how a command ran: in the sandbox, or again outside it (and why).
fn sandbox_note(result: &handoff_core::message::Message) -> Option<String> {
    let details = result.tool_result()?.details()?;
    if let Some(why) = details.get("unsandboxed").and_then(serde_json::Value::as_str) {
        return Some(format!("re-run outside the sandbox (it looked blocked: {why})"));
    }
    details.get("sandbox").and_then(serde_json::Value::as_str).map(|mode| format!("sandboxed: {mode}"))
}

/// A streamed piece of text: `(is_thinking, delta)`.
pub fn delta_of(event: &AgentEvent) -> Option<(bool, &str)> {
    match event {
        AgentEvent::MessageUpdate { assistant_message_event } => match assistant_message_event {
            AssistantMessageEvent::TextDelta { delta, .. } => Some((false, delta)),
            AssistantMessageEvent::ThinkingDelta { delta, .. } => Some((true, delta)),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_output_is_cut_to_the_lines_the_chat_shows() {
        let lines = |n: usize| (1..=n).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n");
        assert_eq!(tail(lines(3), 12), (lines(3), 0), "short: as it is");
        assert_eq!(tail(lines(12), 12), (lines(12), 0), "exactly as many");
        let (text, earlier) = tail(lines(20) + "\n\n", 12);
        assert_eq!((text.lines().next(), text.lines().count(), earlier), (Some("line 9"), 12, 8));
        assert!(text.ends_with("line 20"), "trailing breaks dropped: {text:?}");
        assert_eq!(tail("a\n\nb".into(), 1), ("b".into(), 2), "empty lines count");
        assert_eq!(tail(String::new(), 12), (String::new(), 0));
        assert_eq!(tail(lines(5), 0), (lines(5), 0), "0: all of it (the chat counts them)");
    }
}
