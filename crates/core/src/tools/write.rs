//! `write`: creates or overwrites a file with `content`, creating missing parent folders.

use serde::Deserialize;
use serde_json::{json, Value};

use super::args;
use super::paths::resolve_to_cwd;
use super::{ToolContext, ToolDefinition, ToolError, ToolOutput};

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "write".into(),
        description: "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
                "content": {"type": "string", "description": "Content to write to the file"}
            },
            "required": ["path", "content"]
        }),
    }
}

#[derive(Deserialize)]
struct Args {
    path: String,
    content: String,
}

pub(crate) async fn run(arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let a: Args = args::parse("write", &definition().parameters, arguments)?;
    let abs = ctx.target(|| resolve_to_cwd(&a.path, &ctx.cwd));
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Aborted);
    }
    // Not interrupted once started (a half-written file is worse than a late abort).
    let saved = ctx
        .files
        .write_and_read_back(&abs, a.content.as_bytes())
        .await
        .map_err(|e| ToolError::io(format!("Could not write {}", a.path), e))?;
    let mut text = format!("Successfully wrote {} bytes to {}", a.content.len(), a.path);
    if let Some(now) = saved {
        text.push_str(&super::edit::changed_on_save(a.content.as_bytes(), &now));
    }
    Ok(ToolOutput::text(text, Value::Null))
}

/// The `write` tool (see [`super::Tool`]).
pub struct Write;

#[async_trait::async_trait]
impl super::Tool for Write {
    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Edit
    }

    fn activity(&self) -> super::Activity {
        super::Activity::Edit
    }

    fn definition(&self) -> ToolDefinition {
        definition()
    }

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run(arguments, ctx).await
    }

    fn changed_path(&self, args: &Value, cwd: &std::path::Path) -> Option<std::path::PathBuf> {
        super::tool::path_argument(args, cwd)
    }

    /// The file now (empty when it does not exist yet), the content, and their diff.
    async fn preview(&self, args: &Value, ctx: &ToolContext) -> Option<super::Preview> {
        let resolved = self.changed_path(args, &ctx.cwd)?;
        let abs = ctx.target(|| resolved);
        let after = args.get("content")?.as_str()?.to_string();
        let before = match ctx.files.read(&abs).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => String::new(),
        };
        Some(super::Preview::of(before, after))
    }

    fn fact(&self, args: &Value, result: &crate::message::Message) -> Option<super::CallFact> {
        super::tool::path_if_done(args, result).map(super::CallFact::Modified)
    }
}

#[cfg(test)]
mod tests {
    use crate::tools::{execute, ToolContext};
    use serde_json::json;

    #[tokio::test]
    async fn creates_parents_and_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        let out = execute("write", json!({"path": "a/b/c.txt", "content": "héllo"}), &ctx).await;
        assert!(!out.is_error, "{}", out.joined_text());
        assert_eq!(out.joined_text(), "Successfully wrote 6 bytes to a/b/c.txt");
        let p = dir.path().join("a/b/c.txt");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "héllo");
        execute("write", json!({"path": "a/b/c.txt", "content": "x"}), &ctx).await;
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x");
    }

    #[tokio::test]
    async fn writes_to_the_path_the_agent_checked() {
        let dir = tempfile::tempdir().unwrap();
        let checked = dir.path().join("real.txt");
        let ctx = ToolContext::new(dir.path()).with_checked(Some(checked.clone()));
        let out = execute("write", json!({"path": "named.txt", "content": "x"}), &ctx).await;
        assert!(!out.is_error, "{}", out.joined_text());
        assert_eq!(out.joined_text(), "Successfully wrote 1 bytes to named.txt", "the model's words stay its own");
        assert_eq!(std::fs::read_to_string(&checked).unwrap(), "x");
        assert!(!dir.path().join("named.txt").exists());
    }

    #[tokio::test]
    async fn missing_content_is_an_argument_error() {
        let dir = tempfile::tempdir().unwrap();
        let out = execute("write", json!({"path": "a.txt"}), &ToolContext::new(dir.path())).await;
        assert!(out.is_error);
        assert!(
            out.joined_text().contains("content: Required property is missing"),
            "{}",
            out.joined_text()
        );
        assert!(!dir.path().join("a.txt").exists());
    }
}
