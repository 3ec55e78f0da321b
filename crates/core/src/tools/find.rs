//! `find`: files (and folders, with a trailing `/`) whose name matches a glob, in-process on the
//! `ignore` walk grep uses and `globset`: no `fd` binary.
//!
//! As pi's `fd --glob --hidden --no-require-git`: a pattern without `/` matches the name, one with
//! `/` the path (relative to the searched folder, `**/` put in front as pi does, so `src/*.ts`
//! also finds `app/src/x.ts`; a pattern starting with `/` matches the absolute path); smart case
//! (a pattern without capitals ignores case); .gitignore respected; `*` does not cross `/`.

use std::path::PathBuf;

use globset::GlobBuilder;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::args;
use super::truncate::DEFAULT_MAX_BYTES;
use super::walk::{listing, relative, run_blocking, search_root, walker, Counted};
use super::{ToolContext, ToolDefinition, ToolError, ToolOutput};

const DEFAULT_LIMIT: usize = 1000;
const RESULTS: Counted =
    Counted { noun: "results", key: "resultLimitReached", hint: ", or refine pattern" };

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "find".into(),
        description: format!(
            "Search for files by glob pattern. Returns matching file paths relative to the search directory. Respects .gitignore. Output is truncated to {DEFAULT_LIMIT} results or {}KB (whichever is hit first).",
            DEFAULT_MAX_BYTES / 1024
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern to match files, e.g. '*.ts', '**/*.json', or 'src/**/*.spec.ts'"},
                "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
                "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"}
            },
            "required": ["pattern"]
        }),
    }
}

#[derive(Deserialize)]
struct Args {
    pattern: String,
    path: Option<String>,
    limit: Option<f64>,
}

pub(crate) async fn run(arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let a: Args = args::parse("find", &definition().parameters, arguments)?;
    let root = search_root(a.path.as_deref(), &ctx.cwd);
    run_blocking("find", ctx, move |cancel| find(a, root, cancel)).await
}

fn find(a: Args, root: PathBuf, cancel: &CancellationToken) -> Result<ToolOutput, ToolError> {
    if !root.exists() {
        return Err(ToolError::Failed(format!("Path not found: {}", root.display())));
    }
    let limit = args::count(a.limit).unwrap_or(DEFAULT_LIMIT).max(1);
    let pattern = a.pattern.as_str();
    let full_path = pattern.contains('/');
    let absolute = pattern.starts_with('/');
    let effective = if full_path && !absolute && !pattern.starts_with("**/") && pattern != "**" {
        format!("**/{pattern}")
    } else {
        pattern.to_owned()
    };
    let smart_case = !pattern.chars().any(char::is_uppercase);
    let glob = GlobBuilder::new(&effective)
        .literal_separator(true)
        .case_insensitive(smart_case)
        .build()
        .map_err(|e| ToolError::Failed(format!("Invalid glob pattern: {e}")))?
        .compile_matcher();

    let mut results: Vec<String> = Vec::new();
    for entry in walker(&root).build() {
        if cancel.is_cancelled() {
            return Err(ToolError::Aborted);
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let rel = relative(&root, entry.path());
        let matched = if absolute {
            glob.is_match(entry.path())
        } else if full_path {
            glob.is_match(&rel)
        } else {
            glob.is_match(entry.file_name())
        };
        if !matched {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        results.push(if is_dir { format!("{rel}/") } else { rel });
        if results.len() >= limit {
            break;
        }
    }
    if results.is_empty() {
        return Ok(ToolOutput::text("No files found matching pattern", Value::Null));
    }
    let limit_reached = results.len() >= limit;
    Ok(listing(&results, &RESULTS, limit, limit_reached, None))
}

/// The `find` tool (see [`super::Tool`]).
pub struct Find;

#[async_trait::async_trait]
impl super::Tool for Find {
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
}

#[cfg(test)]
mod tests {
    use crate::tools::{execute, ToolContext};
    use serde_json::json;

    #[tokio::test]
    async fn names_paths_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        for p in ["src/a.ts", "src/b.spec.ts", "app/src/c.ts", "README.md", ".hidden.ts"] {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let ctx = ToolContext::new(dir.path());
        let out = execute("find", json!({"pattern": "*.ts"}), &ctx).await;
        assert_eq!(out.joined_text(), ".hidden.ts\napp/src/c.ts\nsrc/a.ts\nsrc/b.spec.ts");
        let out = execute("find", json!({"pattern": "src/*.ts"}), &ctx).await;
        assert_eq!(out.joined_text(), "app/src/c.ts\nsrc/a.ts\nsrc/b.spec.ts");
        let out = execute("find", json!({"pattern": "src"}), &ctx).await;
        assert_eq!(out.joined_text(), "app/src/\nsrc/");
        let out = execute("find", json!({"pattern": "readme.md"}), &ctx).await;
        assert_eq!(out.joined_text(), "README.md");
        let out = execute("find", json!({"pattern": "*.ts", "path": "src"}), &ctx).await;
        assert_eq!(out.joined_text(), "a.ts\nb.spec.ts");
        let out = execute("find", json!({"pattern": "*.ts", "limit": 1}), &ctx).await;
        assert_eq!(
            out.joined_text(),
            ".hidden.ts\n\n[1 results limit reached. Use limit=2 for more, or refine pattern]"
        );
        let out = execute("find", json!({"pattern": "*.zig"}), &ctx).await;
        assert_eq!(out.joined_text(), "No files found matching pattern");
        let out = execute("find", json!({"pattern": "*", "path": "nope"}), &ctx).await;
        assert!(out.is_error);
    }
}
