//! An MCP server's tool as one more [`Tool`]: its name as the model sees it
//! (`mcp__<server>__<tool>`), its definition, its kind (always [`ToolKind::Mcp`]: what a server
//! says of its tool is a hint), its origin for the approval, and its result as pi stores a tool's
//! (text, images as image blocks, structured content as JSON text, `isError`), cut as the host's
//! other tools cut theirs with the whole text in a spill file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Weak;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::link::ServerLink;
use crate::message::ContentBlock;
use crate::tools::truncate::{format_size, truncate_head, TruncatedBy, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use crate::tools::{image_block, Tool, ToolContext, ToolDefinition, ToolError, ToolKind, Activity, ToolOrigin, ToolOutput};

/// The longest tool name OpenAI takes.
pub const MAX_NAME: usize = 64;

/// `s` with every character outside `[A-Za-z0-9_-]` as `_`.
pub fn sanitise(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// The name the model calls a server's tool by: `mcp__<server>__<tool>`, sanitised; a longer
/// one than [`MAX_NAME`] is cut and ends with `_` and 8 hex digits of its whole name's hash.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let full = format!("{}{}__{}", crate::tools::MCP_PREFIX, sanitise(server), sanitise(tool));
    if full.len() <= MAX_NAME {
        return full;
    }
    hashed(&full)
}

/// `name` cut to leave room for `_` and 8 hex digits of its hash (also how a second tool whose
/// sanitised name equals another's is told apart).
pub(crate) fn hashed(name: &str) -> String {
    let hash = &super::config::digest(name.as_bytes())[..8];
    let keep = name.len().min(MAX_NAME - 9);
    format!("{}_{hash}", &name[..keep])
}

/// What a call of a tool with these hints does (MCP's `readOnlyHint`, `destructiveHint`,
/// `openWorldHint`; the spec's defaults when unsaid are not assumed: unsaid is unknown).
pub fn activity_of_hints(read_only: Option<bool>, destructive: Option<bool>, open_world: Option<bool>) -> Activity {
    match (read_only, destructive) {
        (Some(true), _) if open_world == Some(true) => Activity::Fetch,
        (Some(true), _) => Activity::Read,
        (_, Some(true)) => Activity::Delete,
        (Some(false), _) | (_, Some(false)) => Activity::Edit,
        (None, None) => Activity::Other,
    }
}

/// One tool of a running server.
pub struct McpTool {
    /// Its server (weak: the server holds its tools).
    pub(crate) server: Weak<dyn ServerLink>,
    pub(crate) server_name: String,
    /// Its name on the server.
    pub(crate) remote: String,
    pub(crate) definition: ToolDefinition,
    pub(crate) read_only_hint: Option<bool>,
    pub(crate) destructive_hint: Option<bool>,
    pub(crate) open_world_hint: Option<bool>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("name", &self.definition.name).field("remote", &self.remote).finish()
    }
}

impl McpTool {
    /// The tool `listed` (one item of the server's `tools/list`, as JSON) as `name`.
    pub(crate) fn new(server: Weak<dyn ServerLink>, server_name: &str, name: String, listed: &Value) -> Option<McpTool> {
        let remote = listed.get("name")?.as_str()?.to_string();
        let description = listed.get("description").and_then(Value::as_str).unwrap_or_default();
        let title = listed.get("title").and_then(Value::as_str);
        let description = match title {
            Some(title) if !description.contains(title) => format!("{title}: {description}"),
            _ => description.to_string(),
        };
        let mut parameters = listed.get("inputSchema").cloned().unwrap_or_else(|| json!({"type": "object"}));
        // Both wire formats want an object schema with properties.
        if let Value::Object(schema) = &mut parameters {
            schema.entry("type").or_insert_with(|| json!("object"));
            schema.entry("properties").or_insert_with(|| json!({}));
        }
        let hint = |key: &str| listed.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_bool);
        Some(McpTool {
            read_only_hint: hint("readOnlyHint"),
            destructive_hint: hint("destructiveHint"),
            open_world_hint: hint("openWorldHint"),
            definition: ToolDefinition { name: name.into(), description, parameters },
            server,
            server_name: server_name.to_string(),
            remote,
        })
    }
}

#[async_trait]
impl Tool for McpTool {
    fn kind(&self) -> ToolKind {
        ToolKind::Mcp
    }

    /// From the server's hints (shown, never trusted: consent asks by `kind`): read-only is a
    /// read (a fetch when it reaches the world outside), one that says it changes something an
    /// edit (a delete when it says it destroys), else nothing known.
    fn activity(&self) -> Activity {
        activity_of_hints(self.read_only_hint, self.destructive_hint, self.open_world_hint)
    }

    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let server = self.server.upgrade().ok_or_else(|| ToolError::Failed(format!("MCP server {} has ended", self.server_name)))?;
        let result = ctx.abortable(server.call(&self.remote, arguments)).await?;
        Ok(tool_output(&result, ctx.spill_dir.as_deref()))
    }

    /// The arguments: an MCP tool has no argument that says what it does.
    fn summary(&self, args: &Value) -> String {
        crate::tools::argument_summary(args, "")
    }

    fn origin(&self) -> Option<ToolOrigin> {
        Some(ToolOrigin {
            server: self.server_name.clone(),
            tool: self.remote.clone(),
            read_only_hint: self.read_only_hint,
            destructive_hint: self.destructive_hint,
        })
    }
}

/// A `tools/call` result (as JSON) as pi's tool result: text blocks joined (resources as their
/// text, or named), images as image blocks, `structuredContent` as JSON text when the content
/// says nothing else, `isError`. The text is cut at pi's limits; the whole is in a spill file.
pub fn tool_output(result: &Value, spill_dir: Option<&Path>) -> ToolOutput {
    let mut texts: Vec<String> = Vec::new();
    let mut images: Vec<ContentBlock> = Vec::new();
    for block in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        let str_of = |key: &str| block.get(key).and_then(Value::as_str);
        match str_of("type") {
            Some("text") => texts.push(str_of("text").unwrap_or_default().to_string()),
            Some("image") => match (str_of("data"), str_of("mimeType")) {
                (Some(data), Some(mime)) => images.push(image_block(data.to_string(), mime)),
                _ => texts.push("[image without data]".into()),
            },
            Some("audio") => texts.push(format!("[audio: {}]", str_of("mimeType").unwrap_or("unknown type"))),
            Some("resource") => {
                let resource = block.get("resource");
                let field = |key: &str| resource.and_then(|r| r.get(key)).and_then(Value::as_str);
                match field("text") {
                    Some(text) => texts.push(text.to_string()),
                    None => texts.push(format!("[resource {}]", field("uri").unwrap_or("without uri"))),
                }
            }
            Some("resource_link") => texts.push(format!("[resource link {}]", str_of("uri").unwrap_or_default())),
            _ => texts.push(block.to_string()),
        }
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        // Servers often repeat it as a text block; then it is said once.
        let text = serde_json::to_string_pretty(structured).unwrap_or_default();
        let repeated = texts.iter().any(|t| serde_json::from_str::<Value>(t).ok().as_ref() == Some(structured));
        if !repeated {
            texts.push(text);
        }
    }
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let whole = texts.join("\n");
    let (text, details) = cut(&whole, spill_dir);
    let mut content = Vec::new();
    if !text.is_empty() || images.is_empty() {
        content.push(ContentBlock::text(if text.is_empty() { "(no output)".to_string() } else { text }));
    }
    content.extend(images);
    ToolOutput { content, details: if is_error && details.is_null() { json!({}) } else { details }, is_error }
}

/// `text` within pi's limits (the first lines; a first line over the byte limit is cut), with
/// pi's notice and `{truncation, fullOutputPath}` details when it was cut.
fn cut(text: &str, spill_dir: Option<&Path>) -> (String, Value) {
    let (mut kept, mut truncation) = truncate_head(text, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    if !truncation.truncated {
        return (kept, Value::Null);
    }
    if truncation.first_line_exceeds_limit {
        let mut end = DEFAULT_MAX_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        kept = text[..end].to_string();
        truncation.output_lines = 1;
        truncation.output_bytes = kept.len();
    }
    let mut details = serde_json::Map::new();
    let spilled = spill(text, spill_dir);
    let whole = match &spilled {
        Ok(path) => {
            details.insert("fullOutputPath".into(), json!(path.display().to_string()));
            format!("Full output: {}", path.display())
        }
        Err(e) => format!("The full output could not be kept: {e}"),
    };
    let limit = match truncation.truncated_by {
        Some(TruncatedBy::Lines) => format!("{DEFAULT_MAX_LINES} line limit"),
        _ => format!("{} limit", format_size(DEFAULT_MAX_BYTES as u64)),
    };
    let notice = format!(
        "\n\n[Showing {} of {} lines ({limit}). {whole}]",
        truncation.output_lines, truncation.total_lines
    );
    details.insert("truncation".into(), truncation.to_value());
    (kept + &notice, Value::Object(details))
}

/// Writes the whole text to a new 0600 file in `dir` (default: the temp folder).
fn spill(text: &str, dir: Option<&Path>) -> std::io::Result<PathBuf> {
    let dir = dir.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("handoff-mcp-{:016x}.log", rand::random::<u64>()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&path)?;
    file.write_all(text.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_activity_comes_from_its_servers_hints() {
        assert_eq!(activity_of_hints(Some(true), None, None), Activity::Read);
        assert_eq!(activity_of_hints(Some(true), None, Some(true)), Activity::Fetch);
        assert_eq!(activity_of_hints(Some(false), Some(true), None), Activity::Delete);
        assert_eq!(activity_of_hints(Some(false), Some(false), None), Activity::Edit);
        assert_eq!(activity_of_hints(Some(false), None, None), Activity::Edit);
        assert_eq!(activity_of_hints(None, None, Some(true)), Activity::Other);
        // The host's own tools say theirs.
        use crate::tools::ToolName;
        let own: Vec<Activity> = ToolName::ALL.iter().map(|t| t.tool().activity()).collect();
        use Activity::*;
        assert_eq!(own, [Read, Execute, Edit, Edit, Search, Search, Read, Think, Search]);
    }

    #[test]
    fn names_are_sanitised_and_kept_within_64_characters() {
        assert_eq!(exposed_name("github", "create_issue"), "mcp__github__create_issue");
        assert_eq!(exposed_name("my server", "get.file/v2"), "mcp__my_server__get_file_v2");
        let long = exposed_name("a-very-long-server-name", &"tool_with_a_long_name_".repeat(4));
        assert_eq!(long.len(), MAX_NAME);
        assert!(long.starts_with("mcp__a-very-long-server-name__tool_with"), "{long}");
        let other = exposed_name("a-very-long-server-name", &format!("{}x", "tool_with_a_long_name_".repeat(4)));
        assert_ne!(long, other, "names cut alike differ by their hash");
        assert!(long.rsplit_once('_').unwrap().1.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn results_map_to_pi_tool_results() {
        let out = tool_output(&json!({"content": [{"type": "text", "text": "hello"}, {"type": "image", "data": "iVBO", "mimeType": "image/png"}]}), None);
        assert!(!out.is_error);
        assert_eq!(out.joined_text(), "hello");
        assert_eq!(out.content[1].kind, "image");
        assert_eq!(out.content[1].extra["mimeType"], "image/png");
        // Structured content as JSON text, unless a text block says it already.
        let out = tool_output(&json!({"content": [], "structuredContent": {"sum": 3}}), None);
        assert_eq!(out.joined_text(), "{\n  \"sum\": 3\n}");
        let out = tool_output(&json!({"content": [{"type": "text", "text": "{\"sum\":3}"}], "structuredContent": {"sum": 3}}), None);
        assert_eq!(out.joined_text(), "{\"sum\":3}");
        let out = tool_output(&json!({"content": [{"type": "text", "text": "no such repo"}], "isError": true}), None);
        assert!(out.is_error);
        assert_eq!(out.details, json!({}));
        assert_eq!(tool_output(&json!({"content": []}), None).joined_text(), "(no output)");
        let out = tool_output(&json!({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "A"}}, {"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}}]}), None);
        assert_eq!(out.joined_text(), "A\n[resource file:///b]");
    }

    #[test]
    fn long_results_are_cut_with_the_whole_in_a_spill_file() {
        let dir = tempfile::tempdir().unwrap();
        let lines: Vec<String> = (1..=3000).map(|i| format!("line {i}")).collect();
        let out = tool_output(&json!({"content": [{"type": "text", "text": lines.join("\n")}]}), Some(dir.path()));
        let text = out.joined_text();
        assert!(text.starts_with("line 1\nline 2\n"));
        assert!(text.contains("[Showing 2000 of 3000 lines (2000 line limit). Full output: "), "{}", &text[text.len() - 200..]);
        let path = out.details["fullOutputPath"].as_str().unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), lines.join("\n"));
        assert_eq!(out.details["truncation"]["totalLines"], 3000);
        // One long JSON line keeps its first 50 KB.
        let long = "x".repeat(80 * 1024);
        let out = tool_output(&json!({"content": [{"type": "text", "text": long}]}), Some(dir.path()));
        assert!(out.joined_text().starts_with(&"x".repeat(DEFAULT_MAX_BYTES)));
        assert!(out.joined_text().contains("(50.0KB limit)"));
    }
}
