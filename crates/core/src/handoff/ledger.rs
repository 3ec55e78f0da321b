//! The ledger of one handoff (`details.ledger`, shaped and worded in `session::ledger`): counted
//! from the old session's branch against the text the new session starts from, when that text is
//! final (the new session written, or the review buffer opened).
//!
//! A part of the old session counts as carried when the new session's text quotes its start (the
//! fallback document quotes the last turns; a reviewer may paste an output in): its first
//! [`QUOTE_PROBE_CHARS`] characters, whitespace trimmed.

use crate::agent::fit::estimate_text_tokens;
use crate::message::{Message, Role};
use crate::session::entry::SessionEntry;
use crate::session::ledger::{CarriedShare, DocumentShare, Ledger};
use crate::session::{self, Author};

use super::Carried;

/// How much of an output's or a message's start the new session's text must hold to carry it.
const QUOTE_PROBE_CHARS: usize = 120;

/// The start of `part` a text must hold to quote it: its first [`QUOTE_PROBE_CHARS`]
/// characters, whitespace trimmed.
fn probe(part: &str) -> String {
    let part = part.trim();
    let end = part.char_indices().nth(QUOTE_PROBE_CHARS).map_or(part.len(), |(i, _)| i);
    part[..end].to_string()
}

/// The `## ` headings of a document, in order.
fn sections(text: &str) -> Vec<String> {
    text.lines().filter_map(|l| l.strip_prefix("## ")).map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// What the ledger needs of one message of the old session, read from the message where the
/// handoff's facts read it (parsed once for both), before the text it is checked against exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    kind: PartKind,
    /// The start the new session's text must quote to carry it (empty: nothing to carry).
    probe: String,
    /// The estimated tokens of each thinking block with text.
    thinking: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PartKind {
    /// A tool's output: its tokens and the tool's name.
    Output { tokens: u64, tool: String },
    /// What the user or the model said.
    Said,
    /// Nothing to count (the host's own messages, other roles).
    Nothing,
}

impl Part {
    /// The part of `message`.
    pub fn of(message: &Message) -> Part {
        let nothing = Part { kind: PartKind::Nothing, probe: String::new(), thinking: Vec::new() };
        match message.role {
            Role::ToolResult => {
                let output = message.text();
                let tool = message.tool_result().and_then(|r| r.tool_name()).unwrap_or("?").to_string();
                Part { kind: PartKind::Output { tokens: estimate_text_tokens(&output) as u64, tool }, probe: probe(&output), thinking: Vec::new() }
            }
            // The host's own messages (a handoff's request, a continuation, a reminder) are not
            // part of the conversation to carry.
            Role::User if session::author(message) != Author::User => nothing,
            Role::User => Part { kind: PartKind::Said, probe: probe(&message.text()), thinking: Vec::new() },
            Role::Assistant => Part {
                kind: PartKind::Said,
                probe: probe(&message.text()),
                thinking: message
                    .content
                    .blocks()
                    .iter()
                    .filter_map(|b| b.thinking.as_deref().filter(|t| !t.trim().is_empty()))
                    .map(|t| estimate_text_tokens(t) as u64)
                    .collect(),
            },
            Role::Other(_) => nothing,
        }
    }

    /// The parts of a branch's messages (each parsed here: for a branch whose messages were
    /// not read with the facts).
    pub fn of_branch(branch: &[&SessionEntry]) -> Vec<Part> {
        branch.iter().filter_map(|e| e.message()).map(|m| Part::of(&m)).collect()
    }
}

/// The ledger of handing a branch over as `text` (the document and what follows it): `parts`,
/// the branch's messages' ([`Part`]), root first, with the host's `carried` and `pins` pins.
pub fn of_handoff(parts: &[Part], text: &str, carried: &Carried, pins: usize) -> Ledger {
    let mut ledger = Ledger {
        carried: CarriedShare {
            document: DocumentShare { sections: sections(text), tokens: estimate_text_tokens(text) as u64 },
            facts: carried.facts.counts(),
            user_words: usize::from(carried.words.task.is_some()) + usize::from(carried.words.latest.is_some()),
            pins,
            // The review's count is the session's, not the branch's: `handoff::ledger_of` adds it.
            ..CarriedShare::default()
        },
        ..Ledger::default()
    };
    let dropped = &mut ledger.dropped;
    for part in parts {
        let carried_over = part.probe.is_empty() || text.contains(part.probe.as_str());
        match &part.kind {
            PartKind::Output { tokens, tool } if !carried_over => {
                let results = &mut dropped.tool_results;
                results.count += 1;
                results.tokens += tokens;
                *results.tools.entry(tool.clone()).or_default() += 1;
            }
            PartKind::Said if !carried_over => dropped.messages += 1,
            _ => {}
        }
        dropped.thinking.blocks += part.thinking.len();
        dropped.thinking.tokens += part.thinking.iter().sum::<u64>();
    }
    dropped.files_read = carried.facts.read_files.iter().filter(|f| !text.contains(f.as_str())).cloned().collect();
    ledger
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(message: serde_json::Value) -> SessionEntry {
        let line = serde_json::json!({"type": "message", "id": "a", "parentId": null, "timestamp": "t", "message": message});
        SessionEntry::parse(&line.to_string()).unwrap()
    }

    #[test]
    fn a_quoted_output_is_carried_and_the_rest_dropped() {
        let entries = [
            entry(serde_json::json!({"role": "user", "content": [{"type": "text", "text": "fix the parser"}]})),
            entry(serde_json::json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "let me look"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.rs"}},
                {"type": "toolCall", "id": "c2", "name": "bash", "arguments": {"command": "cargo test"}}]})),
            entry(serde_json::json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"type": "text", "text": "fn parse() {}"}]})),
            entry(serde_json::json!({"role": "toolResult", "toolCallId": "c2", "toolName": "bash", "content": [{"type": "text", "text": "test result: FAILED. 3 passed; 1 failed"}]})),
        ];
        let branch: Vec<&SessionEntry> = entries.iter().collect();
        let text = "## Goal\nfix the parser\n\n## Critical Context\ntest result: FAILED. 3 passed; 1 failed";
        let ledger = of_handoff(&Part::of_branch(&branch), text, &Carried::default(), 2);
        assert_eq!(ledger.carried.document.sections, ["Goal", "Critical Context"]);
        assert_eq!(ledger.carried.pins, 2);
        assert_eq!(ledger.dropped.tool_results.count, 1, "the bash output is quoted, the read one is not");
        assert_eq!(ledger.dropped.tool_results.tools.get("read"), Some(&1));
        assert_eq!(ledger.dropped.tool_results.tokens, estimate_text_tokens("fn parse() {}") as u64);
        assert_eq!(ledger.dropped.messages, 0, "the user's message is quoted; the calls say nothing");
        assert_eq!(ledger.dropped.thinking.blocks, 1);
    }
}
