//! Instruction files: `AGENTS.md` (else `CLAUDE.md`) of the user-level folder and of every folder
//! from the filesystem root down to the session's working directory, in that order (pi's
//! `loadProjectContextFiles`): the most general first, the closest last.

use std::path::{Path, PathBuf};

/// The names looked for in each folder, the first present one wins (pi's order).
pub const NAMES: [&str; 4] = ["AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"];

/// One instruction file as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstructionFile {
    pub path: PathBuf,
    pub content: String,
}

/// The folders an instruction file is looked for in, in the prompt's order: the user-level one,
/// then the filesystem root down to `cwd`. A folder is named once.
pub fn folders(user_dir: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = user_dir.map(Path::to_path_buf).into_iter().collect();
    let mut chain: Vec<&Path> = cwd.ancestors().collect();
    chain.reverse();
    for dir in chain {
        if !out.iter().any(|d| d == dir) {
            out.push(dir.to_path_buf());
        }
    }
    out
}

/// The file of `dir` that counts: the first of [`NAMES`] that is a readable file.
fn read_in(dir: &Path) -> Option<InstructionFile> {
    NAMES.iter().map(|name| dir.join(name)).filter(|p| p.is_file()).find_map(|path| {
        match std::fs::read_to_string(&path) {
            Ok(content) => Some(InstructionFile { path, content }),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read an instruction file");
                None
            }
        }
    })
}

/// The instruction files for a session in `cwd`, in the prompt's order.
pub fn load(user_dir: Option<&Path>, cwd: &Path) -> Vec<InstructionFile> {
    folders(user_dir, cwd).iter().filter_map(|dir| read_in(dir)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_folder_comes_first_then_root_to_cwd_and_agents_md_wins_over_claude_md() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let user = root.join("config/handoff");
        let cwd = root.join("work/project/sub");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(user.join("AGENTS.md"), "user").unwrap();
        std::fs::write(root.join("work/AGENTS.md"), "work").unwrap();
        std::fs::write(root.join("work/CLAUDE.md"), "not this one").unwrap();
        std::fs::write(root.join("work/project/CLAUDE.md"), "project claude").unwrap();
        std::fs::write(cwd.join("AGENTS.md"), "sub").unwrap();
        let files = load(Some(&user), &cwd);
        let got: Vec<(&Path, &str)> = files.iter().map(|f| (f.path.as_path(), f.content.as_str())).collect();
        assert_eq!(
            got,
            [
                (user.join("AGENTS.md").as_path(), "user"),
                (root.join("work/AGENTS.md").as_path(), "work"),
                (root.join("work/project/CLAUDE.md").as_path(), "project claude"),
                (cwd.join("AGENTS.md").as_path(), "sub"),
            ]
        );
        // A user folder inside the chain is read once, first.
        let inside = load(Some(&root.join("work")), &cwd);
        assert_eq!(inside.iter().filter(|f| f.content == "work").count(), 1);
        assert_eq!(inside[0].content, "work");
    }
}
