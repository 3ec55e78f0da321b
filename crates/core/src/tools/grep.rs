//! `grep`: searches file contents in-process with ripgrep's crates (`ignore` for the walk and
//! .gitignore, `grep-regex` + `grep-searcher` for matching): no `rg` binary.
//!
//! As pi's `rg --hidden` call: hidden files are searched, .gitignore/.ignore and git's excludes
//! are respected, binary files are skipped, symlinks are not followed (so a link loop cannot trap
//! the walk), folders that cannot be read are passed over. `.git` itself is never searched.
//! Output is `path:line: text` (context lines `path-line- text`), paths relative to the searched
//! folder; lines are cut at 500 characters; at most `limit` (100) matches and 50 KiB.
//!
//! The files are searched on every core, as rg searches them, but the output is the sorted
//! one-threaded walk's: the same matches in the same order on every run, the first `limit`.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, TrySendError};
use std::sync::{Mutex, PoisonError};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{sinks, BinaryDetection, Searcher, SearcherBuilder};
use ignore::overrides::OverrideBuilder;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::args;
use super::truncate::{truncate_line, DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH};
use super::walk::{listing, relative, run_blocking, search_root, walker, Counted};
use super::{ToolContext, ToolDefinition, ToolError, ToolOutput};
use crate::sandbox::protected;

const DEFAULT_LIMIT: usize = 100;
const MATCHES: Counted =
    Counted { noun: "matches", key: "matchLimitReached", hint: ", or refine pattern" };

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "grep".into(),
        description: format!(
            "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore. Output is truncated to {DEFAULT_LIMIT} matches or {}KB (whichever is hit first). Long lines are truncated to {GREP_MAX_LINE_LENGTH} chars.",
            DEFAULT_MAX_BYTES / 1024
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
                "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
                "glob": {"type": "string", "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"},
                "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
                "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
                "context": {"type": "number", "description": "Number of lines to show before and after each match (default: 0)"},
                "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"}
            },
            "required": ["pattern"]
        }),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    ignore_case: Option<bool>,
    literal: Option<bool>,
    context: Option<f64>,
    limit: Option<f64>,
}

pub(crate) async fn run(arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let a: Args = args::parse("grep", &definition().parameters, arguments)?;
    let root = ctx.target(|| search_root(a.path.as_deref(), &ctx.cwd));
    let hidden = if ctx.credentials_hidden { protected::credential_locations() } else { Vec::new() };
    run_blocking("grep", ctx, move |cancel| search(a, root, &hidden, cancel)).await
}

struct Hit {
    path: PathBuf,
    line_number: u64,
    text: String,
}

/// One matching line of a file.
struct Line {
    number: u64,
    text: String,
}

/// Files a search thread takes at a time: one hand-over per file would cost more wake-ups than
/// a small file costs to search.
const BATCH: usize = 16;
/// Batches the walk may be ahead of the search threads (bounds the memory of a huge tree).
const QUEUED_BATCHES: usize = 64;

/// What the search threads found: each file's matching lines under its index in the sorted
/// walk, so the first `limit` lines are those of a one-threaded search, whatever order the
/// threads finish in.
struct Found {
    limit: usize,
    /// The index of the file holding the `limit`-th line once there is one (`usize::MAX`
    /// before). Files after it cannot be shown, so they are not searched, nor walked to; it only
    /// moves earlier as files are added.
    last: AtomicUsize,
    inner: Mutex<FoundInner>,
}

#[derive(Default)]
struct FoundInner {
    files: BTreeMap<usize, (PathBuf, Vec<Line>)>,
    /// Lines held in `files`.
    held: usize,
}

impl Found {
    fn new(limit: usize) -> Self {
        Self { limit, last: AtomicUsize::new(usize::MAX), inner: Mutex::default() }
    }

    fn is_past(&self, index: usize) -> bool {
        index > self.last.load(Ordering::Acquire)
    }

    fn add(&self, index: usize, path: PathBuf, lines: Vec<Line>) {
        // A panicking thread leaves whole entries behind: the map is still consistent.
        let mut inner = crate::sync::lock(&self.inner);
        if self.is_past(index) {
            return;
        }
        inner.held += lines.len();
        inner.files.insert(index, (path, lines));
        if inner.held < self.limit {
            return;
        }
        let mut count = 0;
        let last = inner.files.iter().find_map(|(&i, (_, lines))| {
            count += lines.len();
            (count >= self.limit).then_some(i)
        });
        if let Some(last) = last {
            inner.files.split_off(&(last + 1));
            inner.held = count;
            self.last.store(last, Ordering::Release);
        }
    }

    /// The first `limit` lines in walk order, and whether the limit was reached (as the
    /// one-threaded search had it: `limit` lines found, even if no more exist).
    fn into_hits(self) -> (Vec<Hit>, bool) {
        let inner = self.inner.into_inner().unwrap_or_else(PoisonError::into_inner);
        let limit_reached = inner.held >= self.limit;
        let hits = inner
            .files
            .into_values()
            .flat_map(|(path, lines)| {
                lines.into_iter().map(move |l| Hit {
                    path: path.clone(),
                    line_number: l.number,
                    text: l.text,
                })
            })
            .take(self.limit)
            .collect();
        (hits, limit_reached)
    }
}

/// Searches the files of `batch` that can still be shown, adding what it finds to `found`.
fn search_batch(
    batch: Vec<(usize, PathBuf)>,
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    found: &Found,
    cancel: &CancellationToken,
) {
    for (index, path) in batch {
        if cancel.is_cancelled() || found.is_past(index) {
            return;
        }
        let mut lines: Vec<Line> = Vec::new();
        let sink = sinks::Bytes(|number, bytes| {
            let text = String::from_utf8_lossy(bytes);
            let text = text.trim_end_matches('\n').replace('\r', "");
            lines.push(Line { number, text });
            // No file shows more than `limit` lines, nor any once it is past the limit.
            Ok(lines.len() < found.limit && !cancel.is_cancelled() && !found.is_past(index))
        });
        // A file that cannot be read is passed over, as rg does (it only warns).
        let _ = searcher.search_path(matcher, &path, sink);
        if !lines.is_empty() {
            found.add(index, path, lines);
        }
    }
}

/// `hidden`: locations whose files are left out of the walk (credentials, see
/// [`ToolContext::credentials_hidden`]).
fn search(a: Args, root: PathBuf, hidden: &[PathBuf], cancel: &CancellationToken) -> Result<ToolOutput, ToolError> {
    let meta = std::fs::metadata(&root)
        .map_err(|_| ToolError::Failed(format!("Path not found: {}", root.display())))?;
    let is_dir = meta.is_dir();
    let context = args::count(a.context).unwrap_or(0);
    let limit = args::count(a.limit).unwrap_or(DEFAULT_LIMIT).max(1);
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(a.ignore_case.unwrap_or(false))
        .fixed_strings(a.literal.unwrap_or(false))
        .line_terminator(Some(b'\n'))
        .build(&a.pattern)
        .map_err(|e| ToolError::Failed(format!("Invalid pattern: {e}")))?;
    let mut walk = walker(&root);
    if let Some(glob) = a.glob.as_deref().filter(|g| !g.is_empty()) {
        let mut ob = OverrideBuilder::new(&root);
        ob.add(glob).map_err(|e| ToolError::Failed(format!("Invalid glob: {e}")))?;
        walk.overrides(ob.build().map_err(|e| ToolError::Failed(format!("Invalid glob: {e}")))?);
    }
    let mut searcher = SearcherBuilder::new();
    searcher.line_number(true).binary_detection(BinaryDetection::quit(0));

    // The sorted walk runs here and hands its files, numbered, to search threads, one per core
    // besides this one, which searches too when they are behind (opening and reading the files
    // is the cost, and it splits across cores as rg's does).
    // `Found` keeps the numbers, so the output and the limit are the one-threaded search's, and
    // the walk stops as soon as the files walked so far hold `limit` lines.
    let found = Found::new(limit);
    let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get).min(12);
    let (tx, rx) = mpsc::sync_channel::<Vec<(usize, PathBuf)>>(QUEUED_BATCHES);
    let rx = Mutex::new(rx);
    std::thread::scope(|s| {
        let worker = || {
            let mut searcher = searcher.build();
            let matcher = matcher.clone();
            loop {
                let next = crate::sync::lock(&rx).recv();
                let Ok(batch) = next else { return };
                search_batch(batch, &mut searcher, &matcher, &found, cancel);
            }
        };
        let mut own = searcher.build();
        let mut started = false;
        let mut batch = Vec::with_capacity(BATCH);
        let mut index = 0;
        for entry in walk.build() {
            if cancel.is_cancelled() || found.is_past(index) {
                break;
            }
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) || protected::in_credentials(entry.path(), hidden) {
                continue;
            }
            batch.push((index, entry.into_path()));
            index += 1;
            if batch.len() == BATCH {
                if !started {
                    started = true;
                    for _ in 0..threads.saturating_sub(1).max(1) {
                        s.spawn(worker);
                    }
                }
                match tx.try_send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))) {
                    Ok(()) => {}
                    // The threads are behind: this one searches rather than sleeps, so there are
                    // as many busy threads as cores and no wake-up per batch.
                    Err(TrySendError::Full(full)) => {
                        search_batch(full, &mut own, &matcher, &found, cancel);
                    }
                    Err(TrySendError::Disconnected(_)) => break,
                }
            }
        }
        drop(tx);
        // The last files (all of them in a tree of fewer than `BATCH`: no thread started), then
        // this thread helps with what is queued.
        search_batch(batch, &mut own, &matcher, &found, cancel);
        if started {
            worker();
        }
    });
    let (hits, limit_reached) = found.into_hits();
    if cancel.is_cancelled() {
        return Err(ToolError::Aborted);
    }
    if hits.is_empty() {
        return Ok(ToolOutput::text("No matches found", Value::Null));
    }

    let shown = |p: &Path| {
        if is_dir {
            relative(&root, p)
        } else {
            relative(p.parent().unwrap_or(p), p)
        }
    };
    let mut lines_truncated = false;
    let mut out: Vec<String> = Vec::new();
    let mut files: HashMap<PathBuf, Vec<String>> = HashMap::new();
    for hit in &hits {
        let name = shown(&hit.path);
        if context == 0 {
            let (text, cut) = truncate_line(&hit.text, GREP_MAX_LINE_LENGTH);
            lines_truncated |= cut;
            out.push(format!("{name}:{}: {text}", hit.line_number));
            continue;
        }
        let lines = files.entry(hit.path.clone()).or_insert_with(|| {
            std::fs::read(&hit.path)
                .map(|b| {
                    let t = super::edit::normalize_to_lf(&String::from_utf8_lossy(&b));
                    t.split('\n').map(str::to_owned).collect()
                })
                .unwrap_or_default()
        });
        if lines.is_empty() {
            out.push(format!("{name}:{}: (unable to read file)", hit.line_number));
            continue;
        }
        let n = hit.line_number as usize;
        let start = n.saturating_sub(context).max(1);
        let end = (n + context).min(lines.len());
        for current in start..=end {
            let text = lines.get(current - 1).map_or("", String::as_str);
            let (text, cut) = truncate_line(text, GREP_MAX_LINE_LENGTH);
            lines_truncated |= cut;
            if current == n {
                out.push(format!("{name}:{current}: {text}"));
            } else {
                out.push(format!("{name}-{current}- {text}"));
            }
        }
    }
    let cut = lines_truncated.then(|| {
        (
            format!(
                "Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
            ),
            "linesTruncated",
            Value::Bool(true),
        )
    });
    Ok(listing(&out, &MATCHES, limit, limit_reached, cut))
}

/// The `grep` tool (see [`super::Tool`]).
pub struct Grep;

#[async_trait::async_trait]
impl super::Tool for Grep {
    fn kind(&self) -> super::ToolKind {
        super::ToolKind::ReadOnly
    }

    fn activity(&self) -> super::Activity {
        super::Activity::Search
    }

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run(arguments, ctx).await
    }

    fn summary(&self, args: &Value) -> String {
        super::argument_summary(args, "pattern")
    }

    /// The folder or file it searches: its contents reach the model.
    fn reach(&self, args: &Value, cwd: &Path) -> Option<super::Reach> {
        Some(super::Reach::Read(search_root(args.get("path").and_then(Value::as_str), cwd)))
    }
}

#[cfg(test)]
mod tests {
    use super::{Found, Line};
    use crate::tools::{execute, ToolContext};
    use serde_json::json;

    fn lines(n: u64) -> Vec<Line> {
        (1..=n).map(|number| Line { number, text: format!("line {number}") }).collect()
    }

    /// Files finishing out of walk order: the first `limit` lines in walk order win, and files
    /// after the one holding the `limit`-th line are dropped and reported past.
    #[test]
    fn found_keeps_the_walk_order_whatever_order_files_finish_in() {
        let found = Found::new(3);
        found.add(9, "f9".into(), lines(2));
        assert!(!found.is_past(100));
        found.add(5, "f5".into(), lines(2));
        assert!(found.is_past(10) && !found.is_past(9));
        found.add(2, "f2".into(), lines(1));
        assert!(found.is_past(6) && !found.is_past(5) && !found.is_past(3));
        found.add(7, "f7".into(), lines(5)); // finished after the limit moved before it
        let (hits, limit_reached) = found.into_hits();
        let got: Vec<(String, u64)> =
            hits.iter().map(|h| (h.path.display().to_string(), h.line_number)).collect();
        assert_eq!(got, [("f2".into(), 1), ("f5".into(), 1), ("f5".into(), 2)]);
        assert!(limit_reached);
        let found = Found::new(3);
        found.add(4, "f4".into(), lines(2));
        let (hits, limit_reached) = found.into_hits();
        assert_eq!(hits.len(), 2);
        assert!(!limit_reached);
    }

    #[tokio::test]
    async fn finds_lines_with_paths_and_numbers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn main() {}\nlet x = 1;\nfn other() {}\n")
            .unwrap();
        std::fs::write(dir.path().join("b.txt"), "nothing\r\nFN here\r\n").unwrap();
        let ctx = ToolContext::new(dir.path());
        let out = execute("grep", json!({"pattern": "fn \\w+"}), &ctx).await;
        assert_eq!(out.joined_text(), "src/a.rs:1: fn main() {}\nsrc/a.rs:3: fn other() {}");
        let out =
            execute("grep", json!({"pattern": "fn", "ignoreCase": true, "glob": "*.txt"}), &ctx)
                .await;
        assert_eq!(out.joined_text(), "b.txt:2: FN here");
        let out = execute("grep", json!({"pattern": "x = 1", "context": 1}), &ctx).await;
        assert_eq!(
            out.joined_text(),
            "src/a.rs-1- fn main() {}\nsrc/a.rs:2: let x = 1;\nsrc/a.rs-3- fn other() {}"
        );
        let out = execute("grep", json!({"pattern": "()", "literal": true}), &ctx).await;
        assert_eq!(out.joined_text(), "src/a.rs:1: fn main() {}\nsrc/a.rs:3: fn other() {}");
        let out = execute("grep", json!({"pattern": "let", "path": "src/a.rs"}), &ctx).await;
        assert_eq!(out.joined_text(), "a.rs:2: let x = 1;");
        let out = execute("grep", json!({"pattern": "zzz"}), &ctx).await;
        assert_eq!(out.joined_text(), "No matches found");
        assert!(!out.is_error);
        let out = execute("grep", json!({"pattern": "("}), &ctx).await;
        assert!(out.is_error);
        assert!(out.joined_text().starts_with("Invalid pattern"), "{}", out.joined_text());
    }

    #[tokio::test]
    async fn limits_and_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..50).map(|i| format!("hit {i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).unwrap();
        std::fs::write(dir.path().join("long.txt"), format!("hit {}\n", "x".repeat(600))).unwrap();
        let ctx = ToolContext::new(dir.path());
        let out = execute("grep", json!({"pattern": "hit", "limit": 3}), &ctx).await;
        assert_eq!(
            out.joined_text(),
            "a.txt:1: hit 0\na.txt:2: hit 1\na.txt:3: hit 2\n\n[3 matches limit reached. Use limit=6 for more, or refine pattern]"
        );
        assert_eq!(out.details["matchLimitReached"], 3);
        let out = execute("grep", json!({"pattern": "hit", "path": "long.txt"}), &ctx).await;
        assert!(out.joined_text().contains("... [truncated]"));
        assert!(out
            .joined_text()
            .ends_with("[Some lines truncated to 500 chars. Use read tool to see full lines]"));
        assert_eq!(out.details["linesTruncated"], true);
    }
}
