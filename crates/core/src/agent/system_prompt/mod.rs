//! The system prompt: our words (`prompt.md`) for the tools enabled, or the user's own
//! (`system_prompt`), then `append_system_prompt`, the instruction files (`instructions`), the
//! skills (`skills`) and where the agent works, in pi's order; then the user's pins.
//!
//! It is built once per session and kept: every request of the session, the handoff's too,
//! sends the same bytes, so a provider's prompt cache keeps hitting. The instruction files are
//! read again only when one changes (its size or time, checked per request: a few `stat`s).

pub mod instructions;
pub mod skills;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::tools::ToolName;
pub use instructions::InstructionFile;
pub use skills::Skill;

/// Our words, with `{{tools}}` and lines kept only for some tools (`[edit|write] - …`).
pub const TEMPLATE: &str = include_str!("prompt.md");

/// Where the parts of the prompt come from: settings and the front end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptSources {
    /// Replaces our words (the `system_prompt` setting).
    pub replace: Option<String>,
    /// Follows them (the `append_system_prompt` setting).
    pub append: Option<String>,
    /// The user-level folder whose `AGENTS.md` comes first (the front end's). `None`: none.
    pub user_dir: Option<PathBuf>,
    /// The user's home, for `~/.agents/skills`. `None`: no user-level skills.
    pub home: Option<PathBuf>,
}

/// Where the agent works. The date is the day the session's prompt was first built: it stays
/// the same for the whole session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Environment {
    pub date: String,
    pub cwd: PathBuf,
    pub os: String,
    pub shell: String,
}

impl Environment {
    /// Today (the local date), `cwd`, this machine's OS and the shell bash runs.
    pub fn current(cwd: &Path) -> Self {
        Self {
            date: local_date(),
            cwd: cwd.to_path_buf(),
            os: std::env::consts::OS.to_string(),
            shell: crate::tools::bash::default_shell().display().to_string(),
        }
    }
}

/// `YYYY-MM-DD` in local time (UTC when the local time cannot be known).
fn local_date() -> String {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let t = libc::time_t::try_from(now).unwrap_or_default();
    // SAFETY: `tm` is plain data (all zeros is a valid value) that localtime_r fills; both
    // pointers are valid for the call, and localtime_r (unlike localtime) keeps no shared state.
    let (filled, tm) = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        (!libc::localtime_r(&t, &mut tm).is_null(), tm)
    };
    if filled {
        format!("{:04}-{:02}-{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday)
    } else {
        let d = time::OffsetDateTime::now_utc().date();
        format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
    }
}

/// A file's state when it was read: its size and modification time, or absent.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    path: PathBuf,
    state: Option<(u64, Option<SystemTime>)>,
}

impl Stamp {
    fn of(path: PathBuf) -> Self {
        let state = std::fs::metadata(&path).ok().filter(|m| m.is_file()).map(|m| (m.len(), m.modified().ok()));
        Stamp { path, state }
    }

    fn is_current(&self) -> bool {
        *self == Stamp::of(self.path.clone())
    }
}

/// A system prompt as sent, and what it was built from.
#[derive(Clone, Debug)]
pub struct SystemPrompt {
    pub text: String,
    /// The instruction files it holds, in order.
    pub instruction_files: Vec<PathBuf>,
    /// The skills it lists (none without the read tool, which the model needs to load one).
    pub skills: Vec<Skill>,
    pub environment: Environment,
    /// The session's pins it ends with (the session's list when it was built).
    pub pins: Vec<String>,
    /// Every instruction file it could hold and the skill files it lists, as they were.
    stamps: Vec<Stamp>,
}

impl SystemPrompt {
    /// Reads the instruction files and skills and writes the prompt, ending with the session's
    /// `pins`: a section of the prompt reaches the model once per request, however many
    /// handoffs the session's chain holds.
    pub fn build(sources: &PromptSources, tools: &[ToolName], environment: Environment, pins: Vec<String>) -> Self {
        let cwd = environment.cwd.as_path();
        let candidates: Vec<PathBuf> = instructions::folders(sources.user_dir.as_deref(), cwd)
            .iter()
            .flat_map(|dir| instructions::NAMES.iter().map(move |n| dir.join(n)))
            .collect();
        let mut stamps: Vec<Stamp> = candidates.into_iter().map(Stamp::of).collect();
        let files = instructions::load(sources.user_dir.as_deref(), cwd);
        let skills = if tools.contains(&ToolName::Read) {
            skills::discover(sources.home.as_deref(), cwd)
        } else {
            Vec::new()
        };
        stamps.extend(skills.iter().map(|s| Stamp::of(s.path.clone())));
        let mut text = write(sources, tools, &files, &skills, &environment);
        let pinned = crate::session::pins::prompt_section(&pins);
        if !pinned.is_empty() {
            // Last, after the environment: the prefix a provider caches stays the same when
            // the pins change.
            text.push_str("\n\n");
            text.push_str(&pinned);
        }
        SystemPrompt {
            text,
            instruction_files: files.into_iter().map(|f| f.path).collect(),
            skills,
            environment,
            pins,
            stamps,
        }
    }

    /// Whether no instruction file or listed skill changed, appeared or went since the build.
    pub fn is_current(&self) -> bool {
        self.stamps.iter().all(Stamp::is_current)
    }
}

/// Our words for `tools`: the tools' list, and the lines of the tools enabled.
pub fn our_words(tools: &[ToolName]) -> String {
    let listed: Vec<String> = tools
        .iter()
        .map(|t| format!("- {}: {}", t.as_str(), first_sentence(&t.definition().description)))
        .collect();
    let listed = if listed.is_empty() { "(none)".to_string() } else { listed.join("\n") };
    let mut out = String::with_capacity(TEMPLATE.len() + listed.len());
    for line in TEMPLATE.trim_end().lines() {
        let line = match line.strip_prefix('[').and_then(|l| l.split_once("] ")) {
            Some((names, rest)) => {
                if !names.split('|').any(|n| tools.iter().any(|t| t.as_str() == n)) {
                    continue;
                }
                rest
            }
            None => line,
        };
        out.push_str(&line.replace("{{tools}}", &listed));
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// A tool's description up to its first full stop.
fn first_sentence(text: &str) -> &str {
    text.find(". ").map_or(text, |at| &text[..=at])
}

fn write(
    sources: &PromptSources,
    tools: &[ToolName],
    files: &[InstructionFile],
    skills: &[Skill],
    env: &Environment,
) -> String {
    let mut text = match &sources.replace {
        Some(own) => own.trim_end().to_string(),
        None => our_words(tools),
    };
    if let Some(append) = sources.append.as_deref().map(str::trim_end).filter(|a| !a.trim().is_empty()) {
        text.push_str("\n\n");
        text.push_str(append);
    }
    if !files.is_empty() {
        text.push_str(
            "\n\n# Instructions\n\nThe user's and the project's instructions, the most general first: where two disagree, the later one (closer to the working directory) wins.\n",
        );
        for file in files {
            text.push_str(&format!("\n## {}\n\n{}\n", file.path.display(), file.content.trim_end()));
        }
        text.truncate(text.trim_end().len());
    }
    if !skills.is_empty() {
        text.push_str("\n\n");
        text.push_str(&skills::prompt_section(skills));
    }
    text.push_str(&format!(
        "\n\nCurrent date: {}\nCurrent working directory: {}\nOperating system: {}\nShell: {}",
        env.date,
        env.cwd.display(),
        env.os,
        env.shell
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lines_of_enabled_tools_are_kept() {
        let read_only = our_words(&[ToolName::Read, ToolName::Grep]);
        assert!(read_only.contains("- read: Read the contents of a file."), "{read_only}");
        assert!(read_only.contains("- grep: Search file contents for a pattern."));
        assert!(read_only.contains("Explore files with grep"));
        assert!(!read_only.contains("- edit:") && !read_only.contains("exact edits") && !read_only.contains("todo_write") && !read_only.contains("consent"));
        assert!(!read_only.contains("[") && !read_only.contains("{{"), "{read_only}");
        let all = our_words(&ToolName::ALL);
        for needle in ["- edit:", "- todo_write:", "consent", "through its buffer", "Read a file before you change it"] {
            assert!(all.contains(needle), "{needle}: {all}");
        }
        assert!(our_words(&[]).contains("(none)"));
    }
}
