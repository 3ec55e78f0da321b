//! `edit`: exact text replacements in one file, with pi's rules.
//!
//! Every `oldText` is matched against the *original* file (not after the edits before it), must
//! be found exactly once, and edits must not overlap; any failure changes nothing. The BOM and
//! the file's line ending (CRLF or LF, by the first line break) are kept: matching works on
//! LF-normalized text without the BOM, which is restored on writing.
//!
//! When an `oldText` is not found as is, pi's fuzzy match is tried: the file and the text are
//! both compared after NFKC, trailing whitespace stripped per line, and smart quotes, Unicode
//! dashes and special spaces made ASCII. As in pi, the edit is then applied to that normalized
//! text, so the written file carries the normalization.
//!
//! `details` are pi's `{diff, firstChangedLine}`, the diff in pi's numbered-line format (what
//! pi's renderer parses), computed with `similar`.

use serde::Deserialize;
use serde_json::{json, Value};
use similar::{Algorithm, DiffOp};
use unicode_normalization::UnicodeNormalization;

use super::args;
use super::paths::resolve_to_cwd;
use super::{ToolContext, ToolDefinition, ToolError, ToolOutput};

pub(crate) fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "edit".into(),
        description: "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping region of the original file. If two changes affect the same block or nearby lines, merge them into one edit instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
                "edits": {
                    "type": "array",
                    "description": "One or more targeted replacements. Each edit is matched against the original file, not incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby lines, merge them into one edit instead.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "oldText": {"type": "string", "description": "Exact text for one targeted replacement. It must be unique in the original file and must not overlap with any other edits[].oldText in the same call."},
                            "newText": {"type": "string", "description": "Replacement text for this targeted edit."}
                        },
                        "required": ["oldText", "newText"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["path", "edits"],
            "additionalProperties": false
        }),
    }
}

/// One replacement.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Replacement {
    pub old_text: String,
    pub new_text: String,
}

#[derive(Deserialize)]
struct Args {
    path: String,
    edits: Vec<Replacement>,
}

/// pi's `prepareArguments`: `edits` sent as a JSON string is parsed; a legacy top-level
/// `oldText`/`newText` pair becomes one more edit.
fn prepare(arguments: Value) -> Value {
    let mut arguments = match arguments {
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        other => other,
    };
    let Some(map) = arguments.as_object_mut() else {
        return arguments;
    };
    if let Some(Value::String(s)) = map.get("edits") {
        if let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(s) {
            map.insert("edits".into(), parsed);
        }
    }
    let legacy = match (map.get("oldText"), map.get("newText")) {
        (Some(Value::String(o)), Some(Value::String(n))) => {
            Some(json!({"oldText": o, "newText": n}))
        }
        _ => None,
    };
    if let Some(edit) = legacy {
        map.remove("oldText");
        map.remove("newText");
        match map.get_mut("edits") {
            Some(Value::Array(edits)) => edits.push(edit),
            _ => {
                map.insert("edits".into(), Value::Array(vec![edit]));
            }
        }
    }
    arguments
}

/// An edit worked out and not yet written: what the approval shows, and what `run` writes.
pub(crate) struct Planned {
    abs: std::path::PathBuf,
    path: String,
    count: usize,
    /// The text the edits were matched in (LF line endings) and the result.
    base: String,
    new: String,
    /// What goes to disk: the result with the file's BOM and line endings.
    bytes: Vec<u8>,
    /// The file as it is now (for a side-by-side view).
    pub(crate) before: String,
}

impl Planned {
    pub(crate) fn after(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    pub(crate) fn diff(&self) -> String {
        diff_string(&self.base, &self.new, 4).0
    }
}

/// Reads the file and applies the edits in memory.
pub(crate) async fn plan(arguments: Value, ctx: &ToolContext) -> Result<Planned, ToolError> {
    let a: Args = args::parse("edit", &definition().parameters, prepare(arguments))?;
    if a.edits.is_empty() {
        return Err(ToolError::Failed(
            "Edit tool input is invalid. edits must contain at least one replacement.".into(),
        ));
    }
    let abs = ctx.target(|| resolve_to_cwd(&a.path, &ctx.cwd));
    let path = a.path.as_str();
    let raw = ctx
        .abortable(async {
            ctx.files
                .read(&abs)
                .await
                .map_err(|e| ToolError::Failed(format!("Could not edit file: {path}. {e}.")))
        })
        .await?;
    let Ok(raw) = String::from_utf8(raw) else {
        return Err(ToolError::Failed(format!(
            "Could not edit file: {path}. It is not valid UTF-8 text; use write to replace it whole, or bash."
        )));
    };
    let (bom, content) = match raw.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", raw.as_str()),
    };
    let ending = detect_line_ending(content);
    let normalized = normalize_to_lf(content);
    let (base, new) = apply_edits(&normalized, &a.edits, path)?;
    let restored = if ending == "\r\n" { new.replace('\n', "\r\n") } else { new.clone() };
    let bytes = format!("{bom}{restored}").into_bytes();
    Ok(Planned { abs, path: a.path.clone(), count: a.edits.len(), base, new, bytes, before: raw })
}

pub(crate) async fn run(arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let planned = plan(arguments, ctx).await?;
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Aborted);
    }
    let path = planned.path.as_str();
    // Once started, the write is not interrupted: a half-written file is worse than a late abort.
    let saved = ctx
        .files
        .write_and_read_back(&planned.abs, &planned.bytes)
        .await
        .map_err(|e| ToolError::Failed(format!("Could not edit file: {path}. {e}.")))?;
    let mut text = format!("Successfully replaced {} block(s) in {path}.", planned.count);
    // The diff shown is the one the file went through: to what it holds after the save.
    let (diff, first_changed_line) = match &saved {
        Some(now) => {
            text.push_str(&changed_on_save(&planned.bytes, now));
            diff_string(&planned.base, &comparable(now), 4)
        }
        None => diff_string(&planned.base, &planned.new, 4),
    };
    Ok(ToolOutput::text(text, json!({"diff": diff, "firstChangedLine": first_changed_line})))
}

/// `\r\n` when the first line break is one, else `\n`.
pub fn detect_line_ending(content: &str) -> &'static str {
    match (content.find("\r\n"), content.find('\n')) {
        (Some(crlf), Some(lf)) if crlf < lf => "\r\n",
        _ => "\n",
    }
}

pub fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// pi's `normalizeForFuzzyMatch`.
pub fn normalize_for_fuzzy_match(text: &str) -> String {
    let nfkc: String = text.nfkc().collect();
    let trimmed: Vec<&str> = nfkc.split('\n').map(str::trim_end).collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

struct Found {
    index: usize,
    len: usize,
    fuzzy: bool,
}

fn fuzzy_find(content: &str, old: &str) -> Option<Found> {
    if let Some(index) = content.find(old) {
        return Some(Found { index, len: old.len(), fuzzy: false });
    }
    let fc = normalize_for_fuzzy_match(content);
    let fo = normalize_for_fuzzy_match(old);
    fc.find(&fo).map(|index| Found { index, len: fo.len(), fuzzy: true })
}

fn count_occurrences(content: &str, old: &str) -> usize {
    let fo = normalize_for_fuzzy_match(old);
    if fo.is_empty() {
        return 0;
    }
    normalize_for_fuzzy_match(content).matches(fo.as_str()).count()
}

/// Applies `edits` to LF-normalized `content`: returns the content the edits were matched in
/// (the fuzzy-normalized one when any edit needed it) and the result.
pub fn apply_edits(
    content: &str,
    edits: &[Replacement],
    path: &str,
) -> Result<(String, String), ToolError> {
    let n = edits.len();
    let edits: Vec<Replacement> = edits
        .iter()
        .map(|e| Replacement {
            old_text: normalize_to_lf(&e.old_text),
            new_text: normalize_to_lf(&e.new_text),
        })
        .collect();
    for (i, e) in edits.iter().enumerate() {
        if e.old_text.is_empty() {
            return Err(ToolError::Failed(if n == 1 {
                format!("oldText must not be empty in {path}.")
            } else {
                format!("edits[{i}].oldText must not be empty in {path}.")
            }));
        }
    }
    let any_fuzzy = edits.iter().any(|e| fuzzy_find(content, &e.old_text).is_some_and(|f| f.fuzzy));
    let base = if any_fuzzy { normalize_for_fuzzy_match(content) } else { content.to_owned() };

    let mut matched: Vec<(usize, usize, usize)> = Vec::with_capacity(n); // (edit, index, len)
    for (i, e) in edits.iter().enumerate() {
        let Some(found) = fuzzy_find(&base, &e.old_text) else {
            return Err(ToolError::Failed(if n == 1 {
                format!("Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines.")
            } else {
                format!("Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines.")
            }));
        };
        let occurrences = count_occurrences(&base, &e.old_text);
        if occurrences > 1 {
            return Err(ToolError::Failed(if n == 1 {
                format!("Found {occurrences} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique.")
            } else {
                format!("Found {occurrences} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide more context to make it unique.")
            }));
        }
        matched.push((i, found.index, found.len));
    }
    matched.sort_by_key(|&(_, index, _)| index);
    for pair in matched.windows(2) {
        let (a, a_index, a_len) = pair[0];
        let (b, b_index, _) = pair[1];
        if a_index + a_len > b_index {
            return Err(ToolError::Failed(format!(
                "edits[{a}] and edits[{b}] overlap in {path}. Merge them into one edit or target disjoint regions."
            )));
        }
    }
    let mut new = String::with_capacity(base.len());
    let mut at = 0;
    for &(i, index, len) in &matched {
        new.push_str(&base[at..index]);
        new.push_str(&edits[i].new_text);
        at = index + len;
    }
    new.push_str(&base[at..]);
    if new == base {
        return Err(ToolError::Failed(if n == 1 {
            format!("No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected.")
        } else {
            format!("No changes made to {path}. The replacements produced identical content.")
        }));
    }
    Ok((base, new))
}

/// Lines of a change made on save that a tool's result shows at most.
const SAVED_CHANGE_LINES: usize = 120;

/// The file's text as the diffs compare it: no BOM, LF line endings.
fn comparable(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    normalize_to_lf(text.strip_prefix('\u{FEFF}').unwrap_or(&text))
}

/// What a tool's result adds when the file changed as the editor saved it
/// ([`super::FileAccess::write_and_read_back`]): the change from what the tool wrote to what
/// the file holds, so that the model's next edit matches the file as it is.
pub(crate) fn changed_on_save(written: &[u8], now: &[u8]) -> String {
    const HEAD: &str = "The file changed as the editor saved it (formatting on save, most likely)";
    let (diff, _) = diff_string(&comparable(written), &comparable(now), 2);
    if diff.is_empty() {
        return format!("\n\n{HEAD}: only its line endings or byte order mark differ from what was written.");
    }
    let lines: Vec<&str> = diff.lines().collect();
    let mut shown = lines[..lines.len().min(SAVED_CHANGE_LINES)].join("\n");
    if lines.len() > SAVED_CHANGE_LINES {
        shown.push_str(&format!("\n... {} more lines of the change; read the file to see it whole.", lines.len() - SAVED_CHANGE_LINES));
    }
    format!("\n\n{HEAD}. From what was written to what the file holds now (edit the file as it is now):\n{shown}")
}

/// pi's `generateDiffString`: changed lines as `+N text` / `-N text`, up to `context` unchanged
/// lines around them as ` N text`, skipped stretches as ` ...`; numbers padded to one width.
/// Returns the diff and the first changed line (in the new file).
pub fn diff_string(old: &str, new: &str, context: usize) -> (String, Option<usize>) {
    let old_lines: Vec<&str> = old.split('\n').collect();
    let new_lines: Vec<&str> = new.split('\n').collect();
    let width = old_lines.len().max(new_lines.len()).to_string().len();
    let ops = similar::capture_diff_slices_deadline(
        Algorithm::Myers,
        &old_lines,
        &new_lines,
        Some(std::time::Instant::now() + std::time::Duration::from_secs(2)),
    );
    // pi's parts: runs of equal, removed and added lines (a replace is a removal then an addition).
    enum Part<'a> {
        Equal(&'a [&'a str]),
        Removed(&'a [&'a str]),
        Added(&'a [&'a str]),
    }
    let mut parts: Vec<Part<'_>> = Vec::new();
    for op in &ops {
        match *op {
            DiffOp::Equal { old_index, len, .. } => {
                parts.push(Part::Equal(&old_lines[old_index..old_index + len]))
            }
            DiffOp::Delete { old_index, old_len, .. } => {
                parts.push(Part::Removed(&old_lines[old_index..old_index + old_len]))
            }
            DiffOp::Insert { new_index, new_len, .. } => {
                parts.push(Part::Added(&new_lines[new_index..new_index + new_len]))
            }
            DiffOp::Replace { old_index, old_len, new_index, new_len } => {
                parts.push(Part::Removed(&old_lines[old_index..old_index + old_len]));
                parts.push(Part::Added(&new_lines[new_index..new_index + new_len]));
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    let (mut old_no, mut new_no) = (1usize, 1usize);
    let mut first_changed = None;
    let mut last_was_change = false;
    let blank = " ".repeat(width);
    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Added(lines) | Part::Removed(lines) => {
                first_changed.get_or_insert(new_no);
                let added = matches!(part, Part::Added(_));
                for line in lines.iter() {
                    if added {
                        out.push(format!("+{new_no:>width$} {line}"));
                        new_no += 1;
                    } else {
                        out.push(format!("-{old_no:>width$} {line}"));
                        old_no += 1;
                    }
                }
                last_was_change = true;
            }
            Part::Equal(lines) => {
                let next_is_change =
                    matches!(parts.get(i + 1), Some(Part::Added(_) | Part::Removed(_)));
                let len = lines.len();
                let shown: Vec<usize> = match (last_was_change, next_is_change) {
                    (true, true) if len <= context * 2 => (0..len).collect(),
                    (true, true) => (0..context).chain(len - context..len).collect(),
                    (true, false) => (0..len.min(context)).collect(),
                    (false, true) => (len.saturating_sub(context)..len).collect(),
                    (false, false) => Vec::new(),
                };
                let mut k = 0;
                for &idx in &shown {
                    if idx > k {
                        out.push(format!(" {blank} ..."));
                        old_no += idx - k;
                        new_no += idx - k;
                    }
                    out.push(format!(" {old_no:>width$} {}", lines[idx]));
                    old_no += 1;
                    new_no += 1;
                    k = idx + 1;
                }
                if k < lines.len() {
                    if last_was_change && !shown.is_empty() {
                        out.push(format!(" {blank} ..."));
                    }
                    old_no += lines.len() - k;
                    new_no += lines.len() - k;
                }
                last_was_change = false;
            }
        }
    }
    (out.join("\n"), first_changed)
}

/// The `edit` tool (see [`super::Tool`]).
pub struct Edit;

#[async_trait::async_trait]
impl super::Tool for Edit {
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

    async fn preview(&self, args: &Value, ctx: &ToolContext) -> Option<super::Preview> {
        let planned = plan(args.clone(), ctx).await.ok()?;
        Some(super::Preview { diff: planned.diff(), after: planned.after(), before: planned.before })
    }

    fn fact(&self, args: &Value, result: &crate::message::Message) -> Option<super::CallFact> {
        super::tool::path_if_done(args, result).map(super::CallFact::Modified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{execute, ToolContext};
    use std::path::Path;

    fn r(o: &str, n: &str) -> Replacement {
        Replacement { old_text: o.into(), new_text: n.into() }
    }

    async fn edit(dir: &Path, args: Value) -> ToolOutput {
        execute("edit", args, &ToolContext::new(dir)).await
    }

    #[test]
    fn edits_match_the_original_and_apply_together() {
        let (_, new) = apply_edits("a b c d", &[r("d", "D"), r("a", "A")], "f").unwrap();
        assert_eq!(new, "A b c D");
        // The second oldText only exists after the first edit: not found in the original.
        let err = apply_edits("x y", &[r("x", "z"), r("z y", "q")], "f").unwrap_err();
        assert!(err.to_string().starts_with("Could not find edits[1] in f."), "{err}");
    }

    #[test]
    fn duplicates_overlaps_empties_and_no_ops_are_refused() {
        let err = apply_edits("ab ab", &[r("ab", "x")], "f").unwrap_err().to_string();
        assert_eq!(err, "Found 2 occurrences of the text in f. The text must be unique. Please provide more context to make it unique.");
        let err =
            apply_edits("abcdef", &[r("abcd", "x"), r("cdef", "y")], "f").unwrap_err().to_string();
        assert_eq!(err, "edits[0] and edits[1] overlap in f. Merge them into one edit or target disjoint regions.");
        let err = apply_edits("abc", &[r("", "x")], "f").unwrap_err().to_string();
        assert_eq!(err, "oldText must not be empty in f.");
        let err = apply_edits("abc", &[r("b", "b")], "f").unwrap_err().to_string();
        assert!(err.starts_with("No changes made to f."), "{err}");
        let err = apply_edits("abc", &[r("zzz", "b")], "f").unwrap_err().to_string();
        assert!(err.starts_with("Could not find the exact text in f."), "{err}");
    }

    #[test]
    fn fuzzy_matching_follows_pi() {
        // Smart quotes in the file, straight ones from the model; trailing spaces ignored.
        let content = "let s = \u{201C}hi\u{201D};   \nnext\n";
        let (base, new) =
            apply_edits(content, &[r("let s = \"hi\";\nnext", "let s = \"ho\";\nnext")], "f")
                .unwrap();
        assert_eq!(base, "let s = \"hi\";\nnext\n");
        assert_eq!(new, "let s = \"ho\";\nnext\n");
    }

    #[test]
    fn legacy_and_string_arguments_are_prepared() {
        let v = prepare(json!({"path": "p", "oldText": "a", "newText": "b"}));
        assert_eq!(v, json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}]}));
        let v = prepare(json!({"path": "p", "edits": "[{\"oldText\":\"a\",\"newText\":\"b\"}]"}));
        assert_eq!(v, json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}]}));
    }

    #[test]
    fn diff_is_in_pis_numbered_format() {
        let old = (1..=20).map(|i| format!("l{i}")).collect::<Vec<_>>().join("\n");
        let new = old.replace("l10", "L10");
        let (diff, first) = diff_string(&old, &new, 4);
        assert_eq!(first, Some(10));
        assert_eq!(
            diff,
            [
                "    ...", "  6 l6", "  7 l7", "  8 l8", "  9 l9", "-10 l10", "+10 L10", " 11 l11",
                " 12 l12", " 13 l13", " 14 l14", "    ..."
            ]
            .join("\n")
        );
    }

    #[tokio::test]
    async fn crlf_and_bom_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.txt");
        std::fs::write(&p, "\u{FEFF}one\r\ntwo\r\nthree\r\n").unwrap();
        let out = edit(
            dir.path(),
            json!({"path": "w.txt", "edits": [{"oldText": "two\nthree", "newText": "2\n3"}]}),
        )
        .await;
        assert!(!out.is_error, "{}", out.joined_text());
        assert_eq!(out.joined_text(), "Successfully replaced 1 block(s) in w.txt.");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "\u{FEFF}one\r\n2\r\n3\r\n");
        assert_eq!(out.details["firstChangedLine"], 2);
        assert!(out.details["diff"].as_str().unwrap().contains("+2 2"));
    }

    #[tokio::test]
    async fn nothing_is_written_when_one_edit_fails() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        std::fs::write(&p, "alpha beta").unwrap();
        let out = edit(
            dir.path(),
            json!({"path": "a.txt", "edits": [
            {"oldText": "alpha", "newText": "A"}, {"oldText": "gamma", "newText": "G"}]}),
        )
        .await;
        assert!(out.is_error);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "alpha beta");
        let out = edit(
            dir.path(),
            json!({"path": "missing.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.joined_text().starts_with("Could not edit file: missing.txt."),
            "{}",
            out.joined_text()
        );
        let out = edit(dir.path(), json!({"path": "a.txt", "edits": []})).await;
        assert_eq!(
            out.joined_text(),
            "Edit tool input is invalid. edits must contain at least one replacement."
        );
    }
}
