//! What the listing tools (`grep`, `find`, `ls`) share: the folder they search, running the
//! blocking search off the async runtime, the `ignore` walk, paths relative to the searched
//! folder, and the output cut at [`DEFAULT_MAX_BYTES`] with pi's `[… limit reached]` notices.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::paths::resolve_to_cwd;
use super::truncate::{format_size, truncate_head, DEFAULT_MAX_BYTES};
use super::{ToolContext, ToolError, ToolOutput};

/// The `path` argument resolved against the cwd; none or an empty one is the cwd itself.
pub(crate) fn search_root(path: Option<&str>, cwd: &Path) -> PathBuf {
    resolve_to_cwd(path.filter(|p| !p.is_empty()).unwrap_or("."), cwd)
}

/// Runs the blocking `search` on tokio's blocking pool; an abort of `ctx` ends the wait at once
/// (the search itself stops at its next look at the token).
pub(crate) async fn run_blocking<F>(
    tool: &str,
    ctx: &ToolContext,
    search: F,
) -> Result<ToolOutput, ToolError>
where
    F: FnOnce(&CancellationToken) -> Result<ToolOutput, ToolError> + Send + 'static,
{
    let cancel = ctx.cancel.clone();
    let task = tokio::task::spawn_blocking(move || search(&cancel));
    ctx.abortable(async {
        task.await.map_err(|e| ToolError::Failed(format!("{tool} failed: {e}")))?
    })
    .await
}

/// The walk grep and find share: hidden files in, ignore files respected (also outside a git
/// repository, as pi's `fd --no-require-git`), links not followed, `.git` left out, sorted so
/// results and limits are the same on every run.
pub(crate) fn walker(root: &Path) -> WalkBuilder {
    let mut b = WalkBuilder::new(root);
    b.hidden(false)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.depth() == 0 || e.file_name() != ".git");
    b
}

/// `path` relative to `root` with `/` separators (the name alone when `root` is the file).
pub(crate) fn relative(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => {
            rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
        }
        _ => path
            .file_name()
            .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned()),
    }
}

/// How a listing tool names what its `limit` counts: `{limit} {noun} limit reached. Use
/// limit={2 × limit} for more{hint}`, and `key` (set to the limit) in the details.
pub(crate) struct Counted {
    pub noun: &'static str,
    pub key: &'static str,
    pub hint: &'static str,
}

/// `lines` joined and cut at [`DEFAULT_MAX_BYTES`], followed by the notices in pi's order: the
/// count limit (when `limit_reached`), the byte limit, then `extra` (a notice and its details
/// entry, e.g. grep's cut lines). Details are `null` when there is nothing to say.
pub(crate) fn listing(
    lines: &[String],
    counted: &Counted,
    limit: usize,
    limit_reached: bool,
    extra: Option<(String, &str, Value)>,
) -> ToolOutput {
    let (mut output, t) = truncate_head(&lines.join("\n"), usize::MAX, DEFAULT_MAX_BYTES);
    let mut details = Map::new();
    let mut notices = Vec::new();
    if limit_reached {
        notices.push(format!(
            "{limit} {} limit reached. Use limit={} for more{}",
            counted.noun,
            limit * 2,
            counted.hint
        ));
        details.insert(counted.key.into(), json!(limit));
    }
    if t.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES as u64)));
        details.insert("truncation".into(), t.to_value());
    }
    if let Some((notice, key, value)) = extra {
        notices.push(notice);
        details.insert(key.into(), value);
    }
    if !notices.is_empty() {
        output = format!("{output}\n\n[{}]", notices.join(". "));
    }
    let details = if details.is_empty() { Value::Null } else { Value::Object(details) };
    ToolOutput::text(output, details)
}
