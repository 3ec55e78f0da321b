//! User prompt templates: `/name args` expands `<templates dir>/name.md`.
//!
//! Placeholders follow pi: `$1`…`$9` are positional arguments, `$@` and `$ARGUMENTS` all of them.
//! A leading `---` front-matter block is dropped.

use std::path::{Path, PathBuf};

/// A template found on disk.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PromptTemplate {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
}

/// The front matter (between `---` lines at the top) and the body after it.
pub(crate) fn split_front_matter(text: &str) -> (&str, &str) {
    if let Some(rest) = text.strip_prefix("---\n") {
        if let Some(end) = rest.find("\n---") {
            let body = rest[end + 4..].trim_start_matches(['\r', '\n']);
            return (&rest[..end], body);
        }
    }
    ("", text)
}

/// Templates in `dir` (`*.md`), sorted by name.
pub fn list(dir: &Path) -> Vec<PromptTemplate> {
    let Ok(read) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PromptTemplate> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter_map(|path| {
            let name = path.file_stem()?.to_str()?.to_string();
            let text = std::fs::read_to_string(&path).ok()?;
            let (front, body) = split_front_matter(&text);
            let description = front
                .lines()
                .find_map(|l| l.strip_prefix("description:"))
                .map(|d| d.trim().trim_matches('"').to_string())
                .unwrap_or_else(|| body.lines().next().unwrap_or_default().chars().take(60).collect());
            Some(PromptTemplate { name, description, path })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Splits arguments on whitespace, keeping "double" or 'single' quoted groups together.
fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    for c in args.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                has = true;
            }
            None if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            None => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Substitutes `$1`…`$9`, `$@` and `$ARGUMENTS` in `body`.
pub fn substitute(body: &str, args: &str) -> String {
    let positional = split_args(args);
    let all = positional.join(" ");
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix("ARGUMENTS") {
            out.push_str(&all);
            rest = r;
        } else if let Some(r) = after.strip_prefix('@') {
            out.push_str(&all);
            rest = r;
        } else if let Some(d) = after.chars().next().and_then(|c| c.to_digit(10)).filter(|d| *d > 0) {
            out.push_str(positional.get(d as usize - 1).map(String::as_str).unwrap_or_default());
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Expands `text` if it is `/name args` and `dir/name.md` exists; otherwise returns it unchanged.
pub fn expand(text: &str, dir: Option<&Path>) -> String {
    let (Some(dir), Some(command)) = (dir, text.strip_prefix('/')) else {
        return text.to_string();
    };
    let (name, args) = command.split_once(char::is_whitespace).unwrap_or((command, ""));
    if name.is_empty() || name.contains(['/', '\\', '.']) {
        return text.to_string();
    }
    match std::fs::read_to_string(dir.join(format!("{name}.md"))) {
        Ok(template) => substitute(split_front_matter(&template).1, args.trim()),
        Err(_) => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_positional_and_all() {
        assert_eq!(substitute("a=$1 b=$2 all=$@ | $ARGUMENTS $9 $x", "one \"two three\""), "a=one b=two three all=one two three | one two three  $x");
    }
}
