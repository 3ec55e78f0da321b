//! Skills, as the Agent Skills standard (agentskills.io) has them: a folder holding a `SKILL.md`
//! whose front matter gives its `name` and `description`. The system prompt lists them (name,
//! description, location) and the model reads one with `read` when a task matches;
//! `/skill:NAME args` in a prompt sends one's instructions along (pi's handling).
//!
//! Where they are found, in order (the first of a name wins, as in pi): `~/.agents/skills/`, then
//! `.agents/skills/` and Claude Code's `.claude/skills/` of the working directory and of each
//! folder above it up to the git root (the filesystem root outside a repository).

use std::path::{Path, PathBuf};

use crate::agent::templates::split_front_matter;

/// The skill file of a skill folder.
pub const SKILL_FILE: &str = "SKILL.md";

/// Folders below a skills folder searched at most, for `SKILL.md` files nested in groups.
const MAX_DEPTH: usize = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Its `SKILL.md`.
    pub path: PathBuf,
}

impl Skill {
    /// The skill's folder: its relative paths start here.
    pub fn base_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("/"))
    }
}

/// The skills folders for a session in `cwd`, in discovery order.
pub fn roots(home: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = home.map(|h| h.join(".agents/skills")).into_iter().collect();
    for dir in cwd.ancestors() {
        out.push(dir.join(".agents/skills"));
        out.push(dir.join(".claude/skills"));
        if dir.join(".git").exists() {
            break;
        }
    }
    out
}

/// Every skill for a session in `cwd` (see the module's doc for where and in which order).
pub fn discover(home: Option<&Path>, cwd: &Path) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    for root in roots(home, cwd) {
        let mut found = Vec::new();
        scan(&root, 0, &mut found);
        found.sort();
        for file in found {
            let Some(skill) = read_skill(&file) else { continue };
            if skills.iter().any(|s| s.name == skill.name) {
                tracing::info!(name = %skill.name, path = %file.display(), "a skill of the same name was found first");
                continue;
            }
            skills.push(skill);
        }
    }
    skills
}

/// The `SKILL.md` files under `dir`: a folder holding one is a skill (not searched further);
/// hidden folders and `node_modules` are skipped.
fn scan(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let skill = dir.join(SKILL_FILE);
    if depth > 0 && skill.is_file() {
        out.push(skill);
        return;
    }
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            scan(&path, depth + 1, out);
        }
    }
}

/// A skill from its file; `None` without a description (the standard requires one).
fn read_skill(path: &Path) -> Option<Skill> {
    let text = std::fs::read_to_string(path).ok()?;
    let (front, _) = split_front_matter(&text);
    let description = field(front, "description").filter(|d| !d.is_empty());
    let Some(description) = description else {
        tracing::warn!(path = %path.display(), "a skill without a description is left out");
        return None;
    };
    let folder = path.parent()?.file_name()?.to_string_lossy().into_owned();
    let name = field(front, "name").filter(|n| !n.is_empty()).unwrap_or(folder);
    Some(Skill { name, description, path: path.to_path_buf() })
}

/// A top-level scalar of YAML front matter: `key: value` (quotes dropped), or a block (`>`,
/// `|`, or nothing after the colon) of the indented lines that follow, joined by spaces.
fn field(front: &str, key: &str) -> Option<String> {
    let mut lines = front.lines();
    while let Some(line) = lines.next() {
        let Some(value) = line.strip_prefix(key).and_then(|r| r.strip_prefix(':')) else { continue };
        let value = value.trim();
        if value.is_empty() || value.starts_with('>') || value.starts_with('|') {
            let block: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.starts_with(' ') || l.starts_with('\t') || l.trim().is_empty())
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            return Some(block.join(" "));
        }
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        return Some(unquoted.to_string());
    }
    None
}

fn escape_xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

/// The skills' section of the system prompt, in the standard's form.
pub fn prompt_section(skills: &[Skill]) -> String {
    let mut out = String::from(
        "Skills hold instructions for particular kinds of tasks. When a task matches a skill's description, read its file with the read tool before you start, and follow it; paths in a skill are relative to the folder of its file.\n\n<available_skills>\n",
    );
    for skill in skills {
        out.push_str("  <skill>\n");
        out.push_str(&format!("    <name>{}</name>\n", escape_xml(&skill.name)));
        out.push_str(&format!("    <description>{}</description>\n", escape_xml(&skill.description)));
        out.push_str(&format!("    <location>{}</location>\n", escape_xml(&skill.path.to_string_lossy())));
        out.push_str("  </skill>\n");
    }
    out.push_str("</available_skills>");
    out
}

/// `/skill:NAME args`: the skill's instructions and the arguments, as pi sends them; `None`
/// when the text is no such command, the skill is unknown or its file cannot be read.
pub fn expand_command(text: &str, skills: &[Skill]) -> Option<String> {
    let rest = text.strip_prefix("/skill:")?;
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let skill = skills.iter().find(|s| s.name == name)?;
    let content = match std::fs::read_to_string(&skill.path) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(path = %skill.path.display(), error = %e, "cannot read a skill");
            return None;
        }
    };
    let body = split_front_matter(&content).1.trim();
    let block = format!(
        "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{body}\n</skill>",
        skill.name,
        skill.path.display(),
        skill.base_dir().display()
    );
    Some(if args.is_empty() { block } else { format!("{block}\n\n{args}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(dir: &Path, front: &str, body: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(SKILL_FILE);
        std::fs::write(&path, format!("---\n{front}\n---\n{body}")).unwrap();
        path
    }

    #[test]
    fn skills_are_found_in_the_home_and_project_folders_up_to_the_git_root() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let repo = tmp.path().join("outer/repo");
        let cwd = repo.join("crates/core");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        write_skill(&home.join(".agents/skills/release"), "name: release\ndescription: Cut a release.", "steps");
        write_skill(&repo.join(".agents/skills/group/lint"), "name: lint\ndescription: >\n  Run the linters\n  and fix them.", "");
        write_skill(&cwd.join(".claude/skills/pdf"), "description: 'Read PDFs.'", "");
        // Above the git root: not this project's.
        write_skill(&tmp.path().join("outer/.agents/skills/far"), "name: far\ndescription: Far away.", "");
        // No description: not a skill. The same name again: the first one wins.
        write_skill(&repo.join(".agents/skills/empty"), "name: empty", "");
        write_skill(&repo.join(".claude/skills/release"), "name: release\ndescription: Another.", "");
        let skills = discover(Some(&home), &cwd);
        let got: Vec<(&str, &str)> = skills.iter().map(|s| (s.name.as_str(), s.description.as_str())).collect();
        assert_eq!(got, [("release", "Cut a release."), ("pdf", "Read PDFs."), ("lint", "Run the linters and fix them.")]);
        assert_eq!(skills[1].path, cwd.join(".claude/skills/pdf/SKILL.md"));
    }

    #[test]
    fn a_skill_command_sends_the_skill_body_and_the_arguments() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write_skill(&tmp.path().join("s/review"), "name: review\ndescription: Review code.", "Look hard.\n");
        let skills = vec![Skill { name: "review".into(), description: "Review code.".into(), path: path.clone() }];
        let dir = tmp.path().join("s/review");
        assert_eq!(
            expand_command("/skill:review src/lib.rs please", &skills).unwrap(),
            format!(
                "<skill name=\"review\" location=\"{}\">\nReferences are relative to {}.\n\nLook hard.\n</skill>\n\nsrc/lib.rs please",
                path.display(),
                dir.display()
            )
        );
        assert!(expand_command("/skill:review", &skills).unwrap().ends_with("Look hard.\n</skill>"));
        assert_eq!(expand_command("/skill:unknown x", &skills), None);
        assert_eq!(expand_command("review", &skills), None);
    }
}
