//! `grep`: searches file contents in-process with ripgrep's crates (`ignore` for the walk and
//! .gitignore, `grep-regex` + `grep-searcher` for matching): no `rg` binary.
//!
//! As pi's `rg --hidden` call: hidden files are searched, .gitignore/.ignore and git's excludes
//! are respected, binary files are skipped, symlinks are not followed (so a link loop cannot trap
//! the walk), folders that cannot be read are passed over. `.git` itself is never searched.
//! Output is `path:line: text` (context lines `path-line- text`), paths relative to the searched
//! folder; lines are cut at 500 characters; at most `limit` (100) matches and 50 KiB.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{sinks, BinaryDetection, SearcherBuilder};
use ignore::overrides::OverrideBuilder;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::args;
use super::truncate::{truncate_line, DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH};
use super::walk::{listing, relative, run_blocking, search_root, walker, Counted};
use super::{ToolContext, ToolDefinition, ToolError, ToolOutput};

const DEFAULT_LIMIT: usize = 100;
const MATCHES: Counted =
    Counted { noun: "matches", key: "matchLimitReached", hint: ", or refine pattern" };

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "grep",
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
    let root = search_root(a.path.as_deref(), &ctx.cwd);
    run_blocking("grep", ctx, move |cancel| search(a, root, cancel)).await
}

struct Hit {
    path: PathBuf,
    line_number: u64,
    text: String,
}

fn search(a: Args, root: PathBuf, cancel: &CancellationToken) -> Result<ToolOutput, ToolError> {
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
    let mut searcher =
        SearcherBuilder::new().line_number(true).binary_detection(BinaryDetection::quit(0)).build();

    let mut hits: Vec<Hit> = Vec::new();
    let mut limit_reached = false;
    for entry in walk.build() {
        if cancel.is_cancelled() {
            return Err(ToolError::Aborted);
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path().to_path_buf();
        let sink = sinks::Bytes(|line_number, bytes| {
            if hits.len() >= limit {
                limit_reached = true;
                return Ok(false);
            }
            let text = String::from_utf8_lossy(bytes);
            let text = text.trim_end_matches('\n').replace('\r', "");
            hits.push(Hit { path: path.clone(), line_number, text });
            Ok(!cancel.is_cancelled())
        });
        // A file that cannot be read is passed over, as rg does (it only warns).
        let _ = searcher.search_path(&matcher, &path, sink);
        if limit_reached || hits.len() >= limit {
            limit_reached = true;
            break;
        }
    }
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

#[cfg(test)]
mod tests {
    use crate::core::tools::{execute, ToolContext};
    use serde_json::json;

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
