//! Events of an agent session, in the shapes pi prints with `--mode json`
//! (`agent_start` … `agent_end`), plus the handoff and session-switch events of this project.

use serde::Serialize;

use crate::failure::FailureKind;
use crate::message::Message;
use crate::session::ledger::Ledger;
use crate::tools::{Todo, ToolOutput};

/// One streamed change to the assistant message being written.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantMessageEvent {
    #[serde(rename_all = "camelCase")]
    TextDelta { content_index: usize, delta: String },
    #[serde(rename_all = "camelCase")]
    ThinkingDelta { content_index: usize, delta: String },
}

/// Why a command did nothing. The controller words each reason (`controller::text`); the
/// handoff pipeline, which refuses too, names the reason only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// A response or a handoff runs.
    Busy,
    /// A handoff document waits for the user's review.
    ReviewPending,
    /// No handoff document waits for review (a commit came too late, or twice).
    NoReview,
    /// Fewer than two messages on the current branch.
    NothingToHandOff,
}

/// How a handoff ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HandoffOutcome {
    Done {
        document: String,
        session_file: String,
        parent_session: String,
        /// Sections of `SECTIONS` the document lacks (a warning, not a failure).
        missing_sections: Vec<String>,
        /// Where the document was also written as markdown.
        document_file: String,
        /// What had to be left out of the request to fit the context window, if anything.
        #[serde(skip_serializing_if = "Option::is_none")]
        elided: Option<String>,
        /// The facts the host appended after the document (rendered; absent when none).
        #[serde(skip_serializing_if = "Option::is_none")]
        facts: Option<String>,
        /// Why the document is the host's own, written without the model (an automatic
        /// handoff whose request failed: `core::handoff::fallback`).
        #[serde(skip_serializing_if = "Option::is_none")]
        fallback: Option<String>,
        /// What the new session holds and what it left behind (its entry's `details.ledger`).
        ledger: Box<Ledger>,
        /// The document is the one drafted before the wall (`handoff.prepare`), with the turns
        /// since carried after it.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        prepared: bool,
    },
    /// Review mode: the document (and the facts after it) waits for the user to edit and
    /// write it (`Handoff::commit`) or to discard it (`Handoff::discard`).
    Review {
        /// The text that will be injected as it stands: the document, then the facts.
        text: String,
        missing_sections: Vec<String>,
        /// Where in `text` the facts start (a byte offset), so an editor can mark them.
        #[serde(skip_serializing_if = "Option::is_none")]
        facts_at: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        elided: Option<String>,
        /// The ledger of the text as the host wrote it (writing it counts it again as edited).
        ledger: Box<Ledger>,
    },
    /// A review ended without writing: nothing was created.
    Discarded,
    Cancelled,
    Failed { message: String },
    /// Nothing happened: nothing to hand off, or a response is in progress.
    Refused { reason: Refusal },
}

/// Where the handoff drafted before the wall stands (`handoff.prepare`), with what it cost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum DraftStatus {
    /// The next request's estimate entered the band below the wall (`tokens`): the draft is
    /// being written, detached, while the work goes on.
    Writing { tokens: u64 },
    /// Written: what its request cost (input tokens, of which read from the prompt cache, and
    /// the document's tokens).
    Ready { input: u64, cached: u64, output: u64 },
    /// Not written (the automatic handoff then writes the document at the wall).
    Failed { message: String },
    /// Thrown away: the model or the session changed.
    Discarded,
}

/// Why the session file changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwitchReason {
    /// `/new`: a new, empty session.
    New,
    /// Another session file was opened.
    Resume,
    /// A handoff continued in the session it created.
    Handoff,
}

/// How loudly to say it (a front end maps it to its own levels, e.g. `vim.log.levels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// One line for the user: a refusal, a warning, the outcome of a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Notice {
    pub level: Level,
    pub message: String,
}

impl Notice {
    pub fn new(level: Level, message: impl Into<String>) -> Self {
        Self { level, message: message.into() }
    }
}

/// Everything a subscriber (a front end's event bridge, the CLI's printer) can observe.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    AgentStart,
    TurnStart,
    MessageStart { message: Message },
    #[serde(rename_all = "camelCase")]
    MessageUpdate { assistant_message_event: AssistantMessageEvent },
    MessageEnd { message: Message },
    #[serde(rename_all = "camelCase")]
    TurnEnd { message: Message, tool_results: Vec<Message> },
    AgentEnd {
        messages: Vec<Message>,
        /// The kind of the model request's failure, when one ended the run (not in pi's shape).
        #[serde(skip_serializing_if = "Option::is_none")]
        failure: Option<FailureKind>,
        /// The run stopped at the wall (`RunOptions::watch_wall`): an automatic handoff follows
        /// unless it is off (not in pi's shape).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        at_wall: bool,
    },
    /// A tool call starts (after consent).
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        args: serde_json::Value,
        /// What the call will change (an edit's file before and after): the approval's, when
        /// it was asked about, so a front end never works it out again.
        #[serde(skip_serializing_if = "Option::is_none")]
        preview: Option<Box<crate::tools::Preview>>,
    },
    /// The end of a running tool's output so far (bash), as [`live_tail`] cuts it: `tail`, and
    /// the count of lines before it. Each update replaces the last.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate { tool_call_id: String, tool_name: String, tail: String, lines_before: u64 },
    /// A tool call ended; `result` is the `toolResult` message stored for it.
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd { tool_call_id: String, tool_name: String, args: serde_json::Value, is_error: bool, result: Message },
    /// A successful `todo_write` changed the todo list (its result is stored): the whole list.
    TodosChanged { todos: Vec<Todo> },
    /// A change was split into hunks for review (the review's calls are in the session's side
    /// folder): `call`, the call just recorded (the editor adds it without asking for the whole
    /// review again); `None` when other states changed.
    HunksChanged { call: Option<crate::session::review::ReviewedCall> },
    /// The tool calls of one assistant message start (`running`), or have all ended: the files
    /// their edits and writes change, and whether one of them (a command, an MCP tool) may
    /// change any file. The review holds a reject of such a file until the running call ends.
    #[serde(rename_all = "camelCase")]
    ToolBatch { running: bool, files: Vec<std::path::PathBuf>, any_file: bool },
    /// The user's pins changed (`/pin`, `/unpin`): all of them, in order.
    PinsChanged { pins: Vec<String> },
    /// A handoff starts; `auto`: the host started it at the wall (where, and the figures).
    HandoffStart {
        focus: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        auto: Option<super::Wall>,
        /// It continues from the draft written before the wall (`handoff.prepare`).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        prepared: bool,
    },
    HandoffEnd {
        outcome: HandoffOutcome,
        #[serde(skip_serializing_if = "Option::is_none")]
        auto: Option<super::Wall>,
        /// An automatic handoff that created nothing wrote nothing to the session either, but
        /// its request and reply were shown as they streamed: a front end draws the session
        /// again, as it is up to this entry (what runs in it next comes as events).
        #[serde(skip)]
        redraw_upto: Option<String>,
    },
    /// The handoff drafted before the wall changed (`handoff.prepare`).
    HandoffDraft(DraftStatus),
    /// The prompt's lifecycle entered `phase` (`core::controller::lifecycle::Phase`'s name);
    /// `busy` is the one "busy" every front end shows and the host refuses by.
    Lifecycle { phase: &'static str, busy: bool },
    /// The session file changed.
    SessionSwitch {
        old: Option<String>,
        new: String,
        reason: SwitchReason,
        /// The new session's last entry at the switch: a front end that draws the session
        /// later draws it up to here, and what came after from its own events (a run may start
        /// in it at once: the automatic handoff's continuation).
        #[serde(skip_serializing_if = "Option::is_none")]
        leaf: Option<String>,
    },
    /// Something the user must be told that is no part of a message: refusals included, so
    /// every outcome of a command travels the same route.
    Notice(Notice),
}

/// Bytes of a running tool's output an update carries at most. A UI shows a few lines of it, so
/// an update never carries the 50 KiB a result keeps: sending and drawing one stays cheap
/// whatever the command prints, and a subscriber that falls behind holds at most the channel's
/// capacity of these (4096 × 4 KiB), not of whole outputs.
pub const LIVE_TAIL_BYTES: usize = 4 * 1024;

/// The end of a tool's partial output: its last whole lines within [`LIVE_TAIL_BYTES`] (the end
/// of the last line when that alone is longer), and how many lines of the whole output came
/// before them. bash's partial output holds only the last lines once it passed its limits; the
/// lines before those are counted in its `details.truncation.totalLines`.
pub fn live_tail(partial: &ToolOutput) -> (String, u64) {
    let text = partial.joined_text();
    let newlines = |s: &str| memchr::memchr_iter(b'\n', s.as_bytes()).count() as u64;
    let total = partial
        .details
        .pointer("/truncation/totalLines")
        .and_then(serde_json::Value::as_u64)
        .map_or_else(|| newlines(&text), |lines| lines.saturating_sub(1));
    let start = match text.len().checked_sub(LIVE_TAIL_BYTES) {
        None | Some(0) => 0,
        Some(from) => {
            // The first line that starts inside the window; the final newline starts none.
            let end = text.trim_end_matches('\n').len().max(from);
            match memchr::memchr(b'\n', &text.as_bytes()[from - 1..end]) {
                Some(i) => from + i,
                None => (from..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len()),
            }
        }
    };
    let tail = text[start..].to_owned();
    let before = total.saturating_sub(newlines(&tail));
    (tail, before)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_short_output_is_its_own_tail() {
        let (tail, before) = live_tail(&ToolOutput::text("a\nb\n", serde_json::Value::Null));
        assert_eq!((tail.as_str(), before), ("a\nb\n", 0));
    }

    #[test]
    fn a_long_output_keeps_whole_lines_and_counts_the_ones_before() {
        let text: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
        let (tail, before) = live_tail(&ToolOutput::text(text, serde_json::Value::Null));
        assert!(tail.len() <= LIVE_TAIL_BYTES);
        assert!(tail.starts_with("line ") && tail.ends_with("line 0999\n"), "{tail}");
        // 10 bytes a line: 409 whole lines fit.
        assert_eq!(before, 1000 - 409);
        assert!(tail.starts_with(&format!("line {before:04}\n")));
    }

    #[test]
    fn lines_cut_off_by_the_result_limits_are_counted_from_the_details() {
        // bash past its limits: the partial output is the last lines, the details count them all.
        let text: String = (0..10).map(|i| format!("l{i}\n")).collect();
        let details = json!({ "truncation": { "totalLines": 1_000_001 } });
        let (tail, before) = live_tail(&ToolOutput::text(text, details));
        assert_eq!(tail.lines().count(), 10);
        assert_eq!(before, 1_000_000 - 10);
    }

    #[test]
    fn one_huge_line_gives_its_end_on_a_char_boundary() {
        let text = format!("{}\n", "é".repeat(LIVE_TAIL_BYTES));
        let (tail, before) = live_tail(&ToolOutput::text(text.clone(), serde_json::Value::Null));
        assert!(tail.len() <= LIVE_TAIL_BYTES && tail.len() > LIVE_TAIL_BYTES - 4);
        assert!(text.ends_with(&tail));
        assert_eq!(before, 0);
    }
}
