//! `ls`: one folder's entries, sorted case-insensitively, `/` after folders, dotfiles included,
//! at most `limit` (500).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Value};

use super::args;
use super::truncate::DEFAULT_MAX_BYTES;
use super::walk::{listing, run_blocking, search_root, Counted};
use super::{ToolContext, ToolDefinition, ToolError, ToolOutput};

const DEFAULT_LIMIT: usize = 500;
const ENTRIES: Counted = Counted { noun: "entries", key: "entryLimitReached", hint: "" };

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "ls".into(),
        description: format!(
            "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes dotfiles. Output is truncated to {DEFAULT_LIMIT} entries or {}KB (whichever is hit first).",
            DEFAULT_MAX_BYTES / 1024
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default: current directory)"},
                "limit": {"type": "number", "description": "Maximum number of entries to return (default: 500)"}
            }
        }),
    }
}

#[derive(Deserialize)]
struct Args {
    path: Option<String>,
    limit: Option<f64>,
}

pub(crate) async fn run(arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let a: Args = args::parse("ls", &definition().parameters, arguments)?;
    let dir = search_root(a.path.as_deref(), &ctx.cwd);
    let limit = args::count(a.limit).unwrap_or(DEFAULT_LIMIT).max(1);
    run_blocking("ls", ctx, move |_| list(&dir, limit)).await
}

fn list(dir: &Path, limit: usize) -> Result<ToolOutput, ToolError> {
    let meta = std::fs::metadata(dir)
        .map_err(|_| ToolError::Failed(format!("Path not found: {}", dir.display())))?;
    if !meta.is_dir() {
        return Err(ToolError::Failed(format!("Not a directory: {}", dir.display())));
    }
    let read = std::fs::read_dir(dir)
        .map_err(|e| ToolError::Failed(format!("Cannot read directory: {e}")))?;
    let mut entries: Vec<(String, PathBuf)> = read
        .filter_map(Result::ok)
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    entries.sort_by(|a, b| a.0.to_lowercase().cmp(&b.0.to_lowercase()).then_with(|| a.0.cmp(&b.0)));
    let mut results = Vec::new();
    let mut limit_reached = false;
    for (name, path) in entries {
        if results.len() >= limit {
            limit_reached = true;
            break;
        }
        // Entries that cannot be stat'ed (a dangling link) are left out, as pi does.
        let Ok(m) = std::fs::metadata(&path) else {
            continue;
        };
        results.push(if m.is_dir() { format!("{name}/") } else { name });
    }
    if results.is_empty() {
        return Ok(ToolOutput::text("(empty directory)", Value::Null));
    }
    Ok(listing(&results, &ENTRIES, limit, limit_reached, None))
}

/// The `ls` tool (see [`super::Tool`]).
pub struct Ls;

#[async_trait::async_trait]
impl super::Tool for Ls {
    fn kind(&self) -> super::ToolKind {
        super::ToolKind::ReadOnly
    }

    fn activity(&self) -> super::Activity {
        super::Activity::Read
    }

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run(arguments, ctx).await
    }
}

#[cfg(test)]
mod tests {
    use crate::tools::{execute, ToolContext};
    use serde_json::json;

    #[tokio::test]
    async fn sorted_with_slashes_and_dotfiles() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("Src")).unwrap();
        std::fs::write(dir.path().join("b.txt"), "").unwrap();
        std::fs::write(dir.path().join(".env"), "").unwrap();
        std::fs::write(dir.path().join("A.md"), "").unwrap();
        let ctx = ToolContext::new(dir.path());
        let out = execute("ls", json!({}), &ctx).await;
        assert_eq!(out.joined_text(), ".env\nA.md\nb.txt\nSrc/");
        let out = execute("ls", json!({"limit": 2}), &ctx).await;
        assert_eq!(
            out.joined_text(),
            ".env\nA.md\n\n[2 entries limit reached. Use limit=4 for more]"
        );
        assert_eq!(out.details["entryLimitReached"], 2);
        let out = execute("ls", json!({"path": "Src"}), &ctx).await;
        assert_eq!(out.joined_text(), "(empty directory)");
        let out = execute("ls", json!({"path": "b.txt"}), &ctx).await;
        assert!(out.is_error);
        assert!(out.joined_text().starts_with("Not a directory: "));
        let out = execute("ls", json!({"path": "nope"}), &ctx).await;
        assert!(out.joined_text().starts_with("Path not found: "));
    }
}
