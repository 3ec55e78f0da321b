//! The ledger of one handoff (`details.ledger`, shaped and worded in `session::ledger`): counted
//! from the old session's branch against the text the new session starts from, when that text is
//! final (the new session written, or the review buffer opened).
//!
//! A part of the old session counts as carried when the new session's text quotes its start (the
//! fallback document quotes the last turns; a reviewer may paste an output in): its first
//! [`QUOTE_PROBE_CHARS`] characters, whitespace trimmed.

use crate::core::agent::fit::estimate_text_tokens;
use crate::core::message::{Message, Role};
use crate::core::session::entry::SessionEntry;
use crate::core::session::ledger::{CarriedShare, DocumentShare, Ledger};
use crate::core::session::{self, Author};

use super::Carried;

/// How much of an output's or a message's start the new session's text must hold to carry it.
const QUOTE_PROBE_CHARS: usize = 120;

/// Whether `text` quotes the start of `part`.
fn quotes(text: &str, part: &str) -> bool {
    let part = part.trim();
    let end = part.char_indices().nth(QUOTE_PROBE_CHARS).map_or(part.len(), |(i, _)| i);
    text.contains(&part[..end])
}

/// The `## ` headings of a document, in order.
fn sections(text: &str) -> Vec<String> {
    text.lines().filter_map(|l| l.strip_prefix("## ")).map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// The ledger of handing `branch` (the old session's, root first) over as `text` (the document
/// and what follows it), with the host's `carried` and `pins` pins.
pub fn of_handoff(branch: &[&SessionEntry], text: &str, carried: &Carried, pins: usize) -> Ledger {
    let mut ledger = Ledger {
        carried: CarriedShare {
            document: DocumentShare { sections: sections(text), tokens: estimate_text_tokens(text) as u64 },
            facts: carried.facts.counts(),
            user_words: usize::from(carried.words.task.is_some()) + usize::from(carried.words.latest.is_some()),
            pins,
        },
        ..Ledger::default()
    };
    let dropped = &mut ledger.dropped;
    for message in branch.iter().filter_map(|e| e.message()) {
        count_message(&message, text, dropped);
    }
    dropped.files_read = carried.facts.read_files.iter().filter(|f| !text.contains(f.as_str())).cloned().collect();
    ledger
}

fn count_message(message: &Message, text: &str, dropped: &mut session::ledger::Dropped) {
    match message.role {
        Role::ToolResult => {
            let output = message.text();
            if output.trim().is_empty() || quotes(text, &output) {
                return;
            }
            let results = &mut dropped.tool_results;
            results.count += 1;
            results.tokens += estimate_text_tokens(&output) as u64;
            let tool = message.tool_result().and_then(|r| r.tool_name()).unwrap_or("?");
            *results.tools.entry(tool.to_string()).or_default() += 1;
        }
        Role::User => {
            // The host's own messages (a handoff's request, a continuation, a reminder) are not
            // part of the conversation to carry.
            let said = message.text();
            if session::author(message) == Author::User && !said.trim().is_empty() && !quotes(text, &said) {
                dropped.messages += 1;
            }
        }
        Role::Assistant => {
            let said = message.text();
            if !said.trim().is_empty() && !quotes(text, &said) {
                dropped.messages += 1;
            }
            for block in message.content.blocks() {
                if let Some(thinking) = block.thinking.as_deref().filter(|t| !t.trim().is_empty()) {
                    dropped.thinking.blocks += 1;
                    dropped.thinking.tokens += estimate_text_tokens(thinking) as u64;
                }
            }
        }
        Role::Other(_) => {}
    }
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
        let ledger = of_handoff(&branch, text, &Carried::default(), 2);
        assert_eq!(ledger.carried.document.sections, ["Goal", "Critical Context"]);
        assert_eq!(ledger.carried.pins, 2);
        assert_eq!(ledger.dropped.tool_results.count, 1, "the bash output is quoted, the read one is not");
        assert_eq!(ledger.dropped.tool_results.tools.get("read"), Some(&1));
        assert_eq!(ledger.dropped.tool_results.tokens, estimate_text_tokens("fn parse() {}") as u64);
        assert_eq!(ledger.dropped.messages, 0, "the user's message is quoted; the calls say nothing");
        assert_eq!(ledger.dropped.thinking.blocks, 1);
    }
}
