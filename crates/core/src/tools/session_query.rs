//! `session_query`: a session asks its ancestors (the session it was handed off from, and
//! theirs) what happened there. Read-only, and offered only to a session that has a parent.
//!
//! The ancestor's file is searched for the question's terms (lowercased words; stop words and
//! words under three letters dropped), an entry scoring the number of terms its text, tool-call
//! arguments, tool results or custom messages (a handoff document too) contain. The file is
//! read twice, a line at a time: once for the scores (only the best few are kept), once for
//! the text of the best entries and their neighbours. A 63 MB session is never held parsed.
//!
//! `mode: "search"` returns those entries in file order (id, time, who, clipped text): no model
//! call, so the same file gives the same answer. The default mode sends them in one request to
//! the session's model ([`super::ModelOnce`]: no tools, recorded in no session) under rules for
//! reading a session, and returns its answer, which cites entry ids.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Value};

use super::{args, paths, ToolContext, ToolDefinition, ToolError, ToolKind, ToolOutput};
use crate::message::{Message, Role};
use crate::session::entry::kind;
use crate::session::{chain, scan, SessionEntry, SessionError, SessionHeader};

pub const TOOL_NAME: &str = "session_query";

/// Matching entries shown at most (each with its neighbours).
const MAX_MATCHES: usize = 8;
/// Characters of an entry's text shown in search mode, and sent to the model in answer mode
/// (less when the entries would not fit the model's window, but not under the least).
const SEARCH_CLIP_CHARS: usize = 600;
const ANSWER_CLIP_CHARS: usize = 2000;
const LEAST_CLIP_CHARS: usize = 200;
/// What an entry's listing adds to its text: its line of id, time, author and terms.
const ENTRY_LINE_CHARS: usize = 100;
/// Ancestors followed at most (a chain that loops ends where it would repeat).
const MAX_ANCESTORS: usize = 64;
/// Shorter words are not terms.
const MIN_TERM_CHARS: usize = 3;
/// Words that say nothing about what to look for.
const STOP_WORDS: &[&str] = &[
    "about", "above", "after", "again", "all", "also", "and", "any", "are", "because", "been", "before", "being",
    "but", "can", "could", "did", "does", "doing", "done", "for", "from", "had", "has", "have", "how", "into", "its",
    "just", "more", "most", "not", "now", "only", "other", "our", "out", "over", "same", "should", "some", "such",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "too",
    "under", "until", "use", "used", "very", "was", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your",
];

/// The rules the model answers under (answer mode's system prompt).
const RULES: &str = "You answer a question about an earlier session of a coding agent (an ancestor of the session asking) from entries of its session file. Each entry shows its id in brackets, its time, who wrote it (user, assistant, a tool's result, a handoff document or summary) and its text, clipped where long (…).

Rules:
- The entries are in the order they were written, and a later entry may revise or revert an earlier one: the latest word on a matter wins. When it changed, say what it was and what it became.
- A tool call (→ name and arguments) is an attempt; its toolResult is the outcome. Report something as done only when its result shows it was.
- Summaries (handoff documents, compaction and branch summaries) orient you; the original entries decide where they disagree.
- Cite the entries your answer rests on by id, like [a1b2c3d4].
- When the entries do not answer the question, say so plainly and say what they do show; do not guess.
- Be brief.";

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: TOOL_NAME.into(),
        description: "Ask the session this one was handed off from (or an older ancestor) about what happened there: decisions, errors, file contents, commands and their results. It searches that session's file for the question's words and answers from the matching entries, citing their ids; mode \"search\" returns the matching entries themselves, without an answer. Use it when the handoff document leaves out a detail you need.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "What you want to know, in the words the session would have used (file names, commands, errors, the choices made)"},
                "session": {"type": "string", "description": "Which ancestor: its session id (or a unique prefix of it) or its file's path; default: the parent"},
                "mode": {"type": "string", "enum": ["answer", "search"], "description": "answer (default): an answer from the matching entries, citing their ids; search: the matching entries and their neighbours as they are"}
            },
            "required": ["question"]
        }),
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    Answer,
    Search,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Answer => "answer",
            Mode::Search => "search",
        }
    }
}

#[derive(Deserialize)]
struct Args {
    question: String,
    session: Option<String>,
    mode: Option<Mode>,
}

/// The `session_query` tool (see [`super::Tool`]).
pub struct SessionQuery;

#[async_trait::async_trait]
impl super::Tool for SessionQuery {
    fn kind(&self) -> ToolKind {
        ToolKind::ReadOnly
    }

    fn activity(&self) -> super::Activity {
        super::Activity::Search
    }

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    fn needs_parent(&self) -> bool {
        true
    }

    fn summary(&self, args: &Value) -> String {
        super::argument_summary(args, "question")
    }

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run(arguments, ctx).await
    }
}

async fn run(arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let a: Args = args::parse(TOOL_NAME, &definition().parameters, arguments)?;
    let mode = a.mode.unwrap_or_default();
    let terms = terms(&a.question);
    if terms.is_empty() {
        return Err(ToolError::Failed(format!(
            "The question has no words to search for (words of {MIN_TERM_CHARS} letters or more that are not stop words): name the file, command, error or choice you are asking about."
        )));
    }
    let Some(parent) = ctx.parent_session.clone() else {
        return Err(ToolError::Failed(
            "This session was not handed off from another: it has no parent session to ask.".into(),
        ));
    };
    let (wanted, cwd) = (a.session, ctx.cwd.clone());
    // In answer mode, the entries' share of the request: what the rules, the question and the
    // listing's first line leave of the model's window.
    let clip = match (mode, &ctx.model) {
        (Mode::Answer, Some(model)) => {
            let total = model.prompt_room().saturating_sub(RULES.len() + a.question.len() + 1000);
            Clip { per_entry: ANSWER_CLIP_CHARS, total }
        }
        _ => Clip { per_entry: SEARCH_CLIP_CHARS, total: usize::MAX },
    };
    let search_terms = terms.clone();
    // The file is read on a blocking thread: a large one takes a while.
    let searching = tokio::task::spawn_blocking(move || -> Result<Found, ToolError> {
        let chain = ancestors(&parent);
        let (ancestor, header) = pick(&chain, wanted.as_deref(), &cwd)?;
        let found = search(&ancestor.path, &search_terms, clip)
            .map_err(|e| ToolError::Failed(format!("Cannot read this session's {}: {e}", relation(ancestor.generation))))?;
        Ok(Found { session: Named::of(ancestor, header), ..found })
    });
    let found = ctx
        .abortable(async { searching.await.map_err(|e| ToolError::Failed(format!("The search failed: {e}")))? })
        .await?;
    let listing = found.listing(&terms);
    let details = found.details(mode, &terms);
    if mode == Mode::Search || found.matching == 0 {
        return Ok(ToolOutput::text(listing, details));
    }
    let Some(model) = ctx.model.clone() else {
        return Err(ToolError::Failed(
            "No model to answer with here: call session_query with mode \"search\" for the matching entries.".into(),
        ));
    };
    let prompt = format!("Question: {}\n\n{listing}", a.question.trim());
    let answer = model.ask(RULES, &prompt, &ctx.cancel).await.map_err(|e| {
        if ctx.cancel.is_cancelled() {
            ToolError::Aborted
        } else {
            ToolError::Failed(format!("The model could not answer ({e}); mode \"search\" lists the matching entries."))
        }
    })?;
    let text = format!(
        "{}\n\n(Answered from {} entries of session {}, this session's {}.)",
        answer.trim(),
        found.excerpts.len(),
        found.session.id,
        relation(found.session.generation)
    );
    Ok(ToolOutput::text(text, details))
}

/// The question's terms: lowercased words of at least [`MIN_TERM_CHARS`] letters that are not
/// stop words, each once, in the question's order.
fn terms(question: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in question.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let word = word.to_lowercase();
        if word.chars().count() >= MIN_TERM_CHARS && !STOP_WORDS.contains(&word.as_str()) && !terms.contains(&word) {
            terms.push(word);
        }
    }
    terms
}

// ---------------------------------------------------------------------------------------------
// Which session

/// One link of this session's chain of ancestors.
struct Ancestor {
    /// 1: the parent, 2: the grandparent, …
    generation: usize,
    path: PathBuf,
    /// Its header, or why its file cannot be read (the chain ends there).
    header: Result<SessionHeader, SessionError>,
}

/// The ancestors from `parent` on, each read as far as its header ([`chain::ancestors`]).
fn ancestors(parent: &Path) -> Vec<Ancestor> {
    chain::ancestors(parent)
        .take(MAX_ANCESTORS)
        .enumerate()
        .map(|(i, link)| Ancestor { generation: i + 1, path: link.path, header: link.header })
        .collect()
}

/// What an ancestor is to this session.
fn relation(generation: usize) -> String {
    match generation {
        1 => "parent".into(),
        2 => "grandparent".into(),
        3 => "great-grandparent".into(),
        n => format!("ancestor {n} generations back"),
    }
}

/// The chain, for an error that says what can be asked.
fn chain_list(chain: &[Ancestor]) -> String {
    let links: Vec<String> = chain
        .iter()
        .map(|a| {
            let id = a.header.as_ref().map_or("(unreadable)", |h| h.id.as_str());
            format!("{} {id} ({})", relation(a.generation), a.path.display())
        })
        .collect();
    format!("This session's ancestors: {}.", links.join(", "))
}

/// Whether a `session` argument names a file rather than an id.
fn names_a_path(wanted: &str) -> bool {
    wanted.contains('/') || wanted.ends_with(".jsonl") || wanted.starts_with('~') || wanted.starts_with('.')
}

/// The ancestor `wanted` names (default: the parent) and its header; anything else is refused.
fn pick<'a>(chain: &'a [Ancestor], wanted: Option<&str>, cwd: &Path) -> Result<(&'a Ancestor, &'a SessionHeader), ToolError> {
    let refuse = |text: String| Err(ToolError::Failed(text));
    let ancestor = match wanted.map(str::trim).filter(|w| !w.is_empty()) {
        None => match chain.first() {
            Some(parent) => parent,
            None => return refuse("This session has no parent session to ask.".into()),
        },
        Some(wanted) if names_a_path(wanted) => {
            let path = paths::resolve_to_cwd(wanted, cwd);
            let same = |a: &&Ancestor| {
                a.path == path || matches!((a.path.canonicalize(), path.canonicalize()), (Ok(x), Ok(y)) if x == y)
            };
            match chain.iter().find(same) {
                Some(ancestor) => ancestor,
                None if !path.exists() => return refuse(format!("No session file at {}.", path.display())),
                None => {
                    return refuse(format!(
                        "{} is not an ancestor of this session, so it cannot be asked. {}",
                        path.display(),
                        chain_list(chain)
                    ))
                }
            }
        }
        Some(wanted) => {
            let prefix = wanted.to_lowercase();
            let named = |a: &&Ancestor| a.header.as_ref().is_ok_and(|h| h.id.to_lowercase().starts_with(&prefix));
            let matching: Vec<&Ancestor> = chain.iter().filter(named).collect();
            match matching[..] {
                [one] => one,
                [] => {
                    return refuse(format!(
                        "No ancestor of this session has an id starting with {wanted:?}, so it cannot be asked. {}",
                        chain_list(chain)
                    ))
                }
                _ => return refuse(format!("{wanted:?} starts the ids of several ancestors: give more of the id. {}", chain_list(chain))),
            }
        }
    };
    match &ancestor.header {
        Ok(header) => Ok((ancestor, header)),
        Err(SessionError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => refuse(format!(
            "The file of this session's {}, {}, is missing (moved or deleted): it cannot be asked.",
            relation(ancestor.generation),
            ancestor.path.display()
        )),
        Err(e) => refuse(format!("This session's {} cannot be read: {e}", relation(ancestor.generation))),
    }
}

// ---------------------------------------------------------------------------------------------
// The search

/// The session searched, as the result names it.
#[derive(Default)]
struct Named {
    id: String,
    path: PathBuf,
    generation: usize,
}

impl Named {
    fn of(ancestor: &Ancestor, header: &SessionHeader) -> Self {
        Self { id: header.id.clone(), path: ancestor.path.clone(), generation: ancestor.generation }
    }
}

/// One entry as shown.
struct Excerpt {
    /// Its place among the entries searched (for the gaps between excerpts).
    position: usize,
    id: String,
    timestamp: String,
    who: String,
    text: String,
    /// The terms it contains (none: a neighbour of a match).
    matched: Vec<String>,
}

/// What the search found.
#[derive(Default)]
struct Found {
    session: Named,
    /// Entries searched, and how many contain a term.
    searched: usize,
    matching: usize,
    /// The best matches and their neighbours, in file order.
    excerpts: Vec<Excerpt>,
}

/// Entries of these types are searched: what was said, done and summarised.
fn is_searched(entry: &SessionEntry) -> bool {
    [kind::MESSAGE, kind::CUSTOM_MESSAGE, kind::COMPACTION, kind::BRANCH_SUMMARY].contains(&entry.kind.as_str())
}

/// Who wrote an entry, and its text: a message's text and its tool calls (name and arguments),
/// a tool's result, a custom message's content (a handoff document), a summary.
fn readable(entry: &SessionEntry) -> (String, String) {
    match entry.kind.as_str() {
        kind::MESSAGE => entry.message().map_or_else(|| ("message".into(), String::new()), |m| message_text(&m)),
        kind::CUSTOM_MESSAGE => entry
            .custom_message()
            .map_or_else(Default::default, |c| (format!("custom_message {}", c.custom_type), c.content.joined_text())),
        kind::COMPACTION => ("compaction summary".into(), entry.compaction().map(|(s, _)| s).unwrap_or_default()),
        kind::BRANCH_SUMMARY => ("branch summary".into(), entry.branch_summary().unwrap_or_default()),
        other => (other.to_string(), String::new()),
    }
}

fn message_text(message: &Message) -> (String, String) {
    match &message.role {
        Role::User => match crate::session::author(message) {
            crate::session::Author::User | crate::session::Author::NotUser => ("user".into(), message.text()),
            // The host's words in the user's role: never quoted as the user's.
            _ => ("user (written by handoff.nvim)".into(), message.text()),
        },
        Role::Assistant => {
            let mut parts: Vec<String> = Vec::new();
            for block in message.content.blocks() {
                if block.is_text() {
                    parts.extend(block.text);
                } else if block.kind == "toolCall" {
                    let arguments = block.extra.get("arguments").map(Value::to_string).unwrap_or_default();
                    parts.push(format!("→ {} {arguments}", block.extra_str("name").unwrap_or("?")));
                }
            }
            if let Some(error) = &message.error_message {
                parts.push(format!("(the request failed: {error})"));
            }
            ("assistant".into(), parts.join("\n"))
        }
        Role::ToolResult => {
            let result = message.tool_result();
            let tool = result.and_then(|r| r.tool_name()).unwrap_or("?");
            let failed = if result.is_some_and(|r| r.is_error()) { " (error)" } else { "" };
            (format!("toolResult {tool}{failed}"), message.text())
        }
        Role::Other(role) => (role.clone(), message.text()),
    }
}

/// The terms `lower` (a lowercased text) contains.
fn matched_terms<'a>(lower: &'a str, terms: &'a [String]) -> impl Iterator<Item = &'a String> + 'a {
    terms.iter().filter(move |t| lower.contains(t.as_str()))
}

/// Takes a match into `best` (score and position; at most [`MAX_MATCHES`]): a higher score
/// wins, and of equal scores the later entry.
fn keep_best(best: &mut Vec<(usize, usize)>, score: usize, position: usize) {
    if best.len() < MAX_MATCHES {
        best.push((score, position));
    } else if let Some(worst) = best.iter_mut().min().filter(|w| (score, position) > **w) {
        *worst = (score, position);
    }
}

/// How much of each entry's text is shown: at most `per_entry` characters, and all entries
/// together at most about `total`.
#[derive(Clone, Copy, Debug)]
struct Clip {
    per_entry: usize,
    total: usize,
}

impl Clip {
    /// The characters of each of `entries` entries.
    fn each(self, entries: usize) -> usize {
        let share = (self.total / entries.max(1)).saturating_sub(ENTRY_LINE_CHARS);
        self.per_entry.min(share).max(LEAST_CLIP_CHARS)
    }
}

/// Searches the session file at `path` for `terms`.
fn search(path: &Path, terms: &[String], clip: Clip) -> Result<Found, SessionError> {
    // First pass: the scores, keeping only the best.
    let (mut searched, mut matching) = (0, 0);
    let mut best: Vec<(usize, usize)> = Vec::with_capacity(MAX_MATCHES);
    scan::scan_entries(path, |entry| {
        if !is_searched(entry) {
            return;
        }
        let position = searched;
        searched += 1;
        let score = matched_terms(&readable(entry).1.to_lowercase(), terms).count();
        if score > 0 {
            matching += 1;
            keep_best(&mut best, score, position);
        }
    })?;
    let shown: BTreeSet<usize> =
        best.iter().flat_map(|&(_, p)| p.saturating_sub(1)..=p + 1).filter(|&p| p < searched).collect();
    // Second pass: the text of those entries.
    let clip_chars = clip.each(shown.len());
    let mut excerpts = Vec::with_capacity(shown.len());
    let mut position = 0;
    scan::scan_entries(path, |entry| {
        if !is_searched(entry) {
            return;
        }
        if shown.contains(&position) {
            let (who, text) = readable(entry);
            let lower = text.to_lowercase();
            excerpts.push(Excerpt {
                position,
                id: entry.id.to_string(),
                timestamp: entry.timestamp.to_string(),
                who,
                matched: matched_terms(&lower, terms).cloned().collect(),
                text: clip_text(&text, &lower, terms, clip_chars),
            });
        }
        position += 1;
    })?;
    Ok(Found { session: Named::default(), searched, matching, excerpts })
}

/// At most `max` characters of `text` (`lower` is it lowercased), from a little before the
/// first term it contains; `…` marks what was cut.
fn clip_text(text: &str, lower: &str, terms: &[String], max: usize) -> String {
    let text = text.trim();
    let chars = text.chars().count();
    if chars <= max {
        return text.to_string();
    }
    // Lowercasing keeps nearly every character one character: the first match's character
    // index in `lower` is (close to) its index in `text`.
    let first = terms.iter().filter_map(|t| lower.find(t.as_str())).min().map_or(0, |at| lower[..at].chars().count());
    let start = first.saturating_sub(max / 4).min(chars - max);
    let mut out: String = text.chars().skip(start).take(max).collect();
    if start + max < chars {
        out.push('…');
    }
    if start > 0 {
        out.insert(0, '…');
    }
    out
}

impl Found {
    /// The excerpts as the model reads them: a line saying what was searched, then each entry
    /// (`[id] time who`, and the terms it matched) with its text indented, `…` between entries
    /// that are not next to each other.
    fn listing(&self, terms: &[String]) -> String {
        let Named { id, path, generation } = &self.session;
        let about = format!("session {id} (this session's {}, {})", relation(*generation), path.display());
        let terms = terms.join(", ");
        if self.matching == 0 {
            return format!(
                "No entry of {about} mentions any of: {terms} ({} entries searched). Try other words: file names, commands, errors.",
                self.searched
            );
        }
        let which = if self.matching > MAX_MATCHES { format!("the best {MAX_MATCHES}") } else { "they".into() };
        let mut out = format!(
            "{} of {} entries of {about} mention {terms}; {which} and their neighbours, in file order:\n",
            self.matching, self.searched
        );
        let mut last = None;
        for e in &self.excerpts {
            if last.is_some_and(|l: usize| e.position > l + 1) {
                out.push_str("\n…\n");
            }
            last = Some(e.position);
            let _ = write!(out, "\n[{}] {} {}", e.id, e.timestamp, e.who);
            if !e.matched.is_empty() {
                let _ = write!(out, " (matches {})", e.matched.join(", "));
            }
            out.push('\n');
            if e.text.is_empty() {
                out.push_str("  (no text)\n");
            }
            for line in e.text.lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        out.truncate(out.trim_end().len());
        out
    }

    /// The result's details: what was asked of which session, and the entries shown.
    fn details(&self, mode: Mode, terms: &[String]) -> Value {
        let ids = |matched: bool| -> Vec<&str> {
            self.excerpts.iter().filter(|e| !matched || !e.matched.is_empty()).map(|e| e.id.as_str()).collect()
        };
        json!({
            "mode": mode.as_str(),
            "session": self.session.path.to_string_lossy(),
            "sessionId": self.session.id,
            "terms": terms,
            "searched": self.searched,
            "matching": self.matching,
            "entries": ids(false),
            "matches": ids(true),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_lowercased_words_without_stop_words_or_short_ones() {
        assert_eq!(terms("Why did we switch from SQLite to Postgres? Which DB was used?"), ["switch", "sqlite", "postgres"]);
        assert_eq!(terms("the_parser in src/lib.rs, lib.rs"), ["the_parser", "src", "lib"]);
        assert!(terms("is it on?").is_empty());
    }

    #[test]
    fn the_best_matches_are_kept_higher_scores_then_later_ones() {
        let mut best = Vec::new();
        for (position, score) in [1, 3, 1, 2, 1, 1, 1, 1, 1, 1, 2].into_iter().enumerate() {
            keep_best(&mut best, score, position);
        }
        best.sort_by_key(|&(_, p)| p);
        let positions: Vec<usize> = best.iter().map(|&(_, p)| p).collect();
        assert_eq!(positions, [1, 3, 5, 6, 7, 8, 9, 10], "the ones of score 1 that went were the earliest");
    }

    #[test]
    fn long_texts_are_clipped_around_the_first_match() {
        let text = format!("{}needle{}", "a".repeat(1000), "b".repeat(1000));
        let lower = text.to_lowercase();
        let clipped = clip_text(&text, &lower, &["needle".into()], 100);
        assert!(clipped.starts_with('…') && clipped.ends_with('…'), "{clipped}");
        assert!(clipped.contains("needle"));
        assert_eq!(clipped.chars().count(), 102);
        assert_eq!(clip_text("short", "short", &[], 100), "short");
    }

    #[test]
    fn the_entries_share_what_the_window_leaves() {
        let search = Clip { per_entry: SEARCH_CLIP_CHARS, total: usize::MAX };
        assert_eq!(search.each(24), SEARCH_CLIP_CHARS);
        let answer = |total| Clip { per_entry: ANSWER_CLIP_CHARS, total };
        assert_eq!(answer(1_000_000).each(24), ANSWER_CLIP_CHARS);
        assert_eq!(answer(12_000).each(24), 400);
        assert_eq!(answer(1_000).each(24), LEAST_CLIP_CHARS);
        assert_eq!(answer(1_000).each(0), 900, "no entries: the whole share less a line");
    }

    #[test]
    fn an_ancestor_is_named_by_its_relation() {
        assert_eq!(relation(1), "parent");
        assert_eq!(relation(2), "grandparent");
        assert_eq!(relation(5), "ancestor 5 generations back");
    }
}
