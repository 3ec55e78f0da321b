//! What a handoff carried into the new session and what it left behind: `details.ledger` on the
//! new session's handoff entry (pi keeps an entry's `details` and sends none of it to the model).
//! The ledger is computed once, when the new session is written (`core::handoff::ledger`); this
//! is its stored shape and its one wording, which the chat, the review buffer and the CLI show.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The key of the ledger in a handoff entry's `details`.
pub const DETAILS_KEY: &str = "ledger";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Ledger {
    pub carried: CarriedShare,
    pub dropped: Dropped,
}

/// What the new session holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CarriedShare {
    pub document: DocumentShare,
    /// The facts the host appended, by kind: files read, files modified, commands, open todos,
    /// the last error.
    pub facts: BTreeMap<String, usize>,
    /// The user's own messages carried word for word (an automatic handoff's).
    pub user_words: usize,
    /// The user's pins, carried byte for byte.
    pub pins: usize,
    /// The agent's changes not reviewed yet, which the new session offers (`session::review`).
    pub unreviewed: UnreviewedShare,
}

/// Hunks not reviewed yet at the handoff, and the files they are in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UnreviewedShare {
    pub hunks: usize,
    pub files: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DocumentShare {
    /// The document's sections (its `## ` headings), in order.
    pub sections: Vec<String>,
    /// Estimated tokens of the whole text handed over (the document and what follows it).
    pub tokens: u64,
}

/// What the new session does not hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Dropped {
    pub tool_results: DroppedResults,
    /// Files the old session read that the new session's text does not name.
    pub files_read: Vec<String>,
    /// The user's and the model's messages the new session has only as the document's summary.
    pub messages: usize,
    pub thinking: DroppedThinking,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DroppedResults {
    pub count: usize,
    /// Estimated tokens of their output.
    pub tokens: u64,
    /// How many of them each tool wrote.
    pub tools: BTreeMap<String, usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DroppedThinking {
    pub blocks: usize,
    pub tokens: u64,
}

/// A token count as the ledger says it: 420, 9.8k, 41k, 1.2M.
pub fn tokens_text(n: u64) -> String {
    let short = |value: f64, unit: &str| {
        let text = format!("{value:.1}");
        format!("{}{unit}", text.strip_suffix(".0").unwrap_or(&text))
    };
    match n {
        0..=999 => n.to_string(),
        1_000..=999_949 => short(n as f64 / 1e3, "k"),
        _ => short(n as f64 / 1e6, "M"),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl Ledger {
    /// Items the new session holds beside the document: facts, the user's words, pins.
    pub fn carried_count(&self) -> usize {
        self.carried.facts.values().sum::<usize>() + self.carried.user_words + self.carried.pins
    }

    /// The ledger in one line: `Carried 7 · dropped 23 tool results (41k tokens)`.
    pub fn summary(&self) -> String {
        let results = &self.dropped.tool_results;
        format!(
            "Carried {} · dropped {} ({} tokens)",
            self.carried_count(),
            plural(results.count, "tool result", "tool results"),
            tokens_text(results.tokens)
        )
    }

    /// The ledger in full, a line per part (under [`Ledger::summary`]).
    pub fn lines(&self) -> Vec<String> {
        let c = &self.carried;
        let mut carried = vec![format!(
            "the document ({}, {} tokens)",
            plural(c.document.sections.len(), "section", "sections"),
            tokens_text(c.document.tokens)
        )];
        let facts: Vec<String> = c
            .facts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(kind, n)| format!("{n} {}", fact_kind_text(kind)))
            .collect();
        if !facts.is_empty() {
            carried.push(format!("facts: {}", facts.join(", ")));
        }
        if c.user_words > 0 {
            carried.push(format!("your words ({})", plural(c.user_words, "message", "messages")));
        }
        if c.pins > 0 {
            carried.push(plural(c.pins, "pin", "pins"));
        }
        let d = &self.dropped;
        let mut dropped = Vec::new();
        if d.tool_results.count > 0 {
            let tools: Vec<String> = d.tool_results.tools.iter().map(|(tool, n)| format!("{tool} {n}")).collect();
            dropped.push(format!(
                "{} ({} tokens: {})",
                plural(d.tool_results.count, "tool result", "tool results"),
                tokens_text(d.tool_results.tokens),
                tools.join(", ")
            ));
        }
        if !d.files_read.is_empty() {
            dropped.push(format!("files read and not named: {}", d.files_read.join(", ")));
        }
        if d.messages > 0 {
            dropped.push(format!("{} only summarised", plural(d.messages, "message", "messages")));
        }
        if d.thinking.blocks > 0 {
            dropped.push(format!(
                "{} ({} tokens)",
                plural(d.thinking.blocks, "thinking block", "thinking blocks"),
                tokens_text(d.thinking.tokens)
            ));
        }
        let mut lines = vec![format!("carried: {}", carried.join("; "))];
        lines.push(format!("dropped: {}", if dropped.is_empty() { "nothing".to_string() } else { dropped.join("; ") }));
        let u = &c.unreviewed;
        if u.hunks > 0 {
            lines.push(format!(
                "{} in {} not reviewed (the new session offers them)",
                plural(u.hunks, "hunk", "hunks"),
                plural(u.files, "file", "files")
            ));
        }
        lines
    }

    /// The ledger a handoff entry's `details` hold, if any.
    pub fn of_details(details: &serde_json::Value) -> Option<Ledger> {
        serde_json::from_value(details.get(DETAILS_KEY)?.clone()).ok()
    }
}

/// How a fact's kind (its key in `facts`) reads in the ledger.
fn fact_kind_text(kind: &str) -> &str {
    match kind {
        "readFiles" => "files read",
        "modifiedFiles" => "files modified",
        "commands" => "commands",
        "todos" => "open todos",
        "lastError" => "last error",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_read_short() {
        assert_eq!(tokens_text(420), "420");
        assert_eq!(tokens_text(9_800), "9.8k");
        assert_eq!(tokens_text(41_000), "41k");
        assert_eq!(tokens_text(999_949), "999.9k");
        assert_eq!(tokens_text(1_200_000), "1.2M");
    }

    #[test]
    fn the_summary_counts_what_was_carried_and_dropped() {
        let mut ledger = Ledger::default();
        ledger.carried.facts.insert("readFiles".into(), 4);
        ledger.carried.facts.insert("commands".into(), 2);
        ledger.carried.pins = 1;
        ledger.dropped.tool_results = DroppedResults { count: 23, tokens: 41_000, tools: BTreeMap::from([("bash".into(), 23)]) };
        assert_eq!(ledger.summary(), "Carried 7 · dropped 23 tool results (41k tokens)");
        let lines = ledger.lines();
        assert_eq!(lines[0], "carried: the document (0 sections, 0 tokens); facts: 2 commands, 4 files read; 1 pin");
        assert_eq!(lines[1], "dropped: 23 tool results (41k tokens: bash 23)");
        assert_eq!(lines.len(), 2, "no line for the review when nothing is unreviewed");
        let mut with_hunks = ledger.clone();
        with_hunks.carried.unreviewed = UnreviewedShare { hunks: 3, files: 2 };
        assert_eq!(with_hunks.lines()[2], "3 hunks in 2 files not reviewed (the new session offers them)");
        let round = serde_json::json!({ DETAILS_KEY: ledger.clone() });
        assert_eq!(Ledger::of_details(&round), Some(ledger));
    }
}
