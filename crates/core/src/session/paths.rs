//! Where session files live: pi's naming scheme, so one folder can be shared with pi.

use std::path::{Path, PathBuf};

/// pi's own folder, where it keeps `models.json`, `auth.json` and its sessions:
/// `$PI_CODING_AGENT_DIR` (a leading `~/` is the home folder), else `~/.pi/agent`. `env` reads
/// a variable (tests pass their own).
pub fn pi_agent_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |var: &str| env(var).filter(|v| !v.trim().is_empty());
    if let Some(dir) = set("PI_CODING_AGENT_DIR") {
        return Some(match (dir.strip_prefix("~/"), set("HOME")) {
            (Some(rest), Some(home)) => Path::new(&home).join(rest),
            _ => PathBuf::from(dir),
        });
    }
    set("HOME").map(|home| Path::new(&home).join(".pi").join("agent"))
}

/// `--<cwd without its leading slash, with / \ : replaced by ->--`, pi's folder name for a cwd.
pub fn cwd_folder_name(cwd: &Path) -> String {
    let cwd = cwd.to_string_lossy();
    let trimmed = cwd.strip_prefix(['/', '\\']).unwrap_or(&cwd);
    let safe: String =
        trimmed.chars().map(|c| if matches!(c, '/' | '\\' | ':') { '-' } else { c }).collect();
    format!("--{safe}--")
}

/// `<session_dir>/<cwd folder>/<ISO time with : and . replaced by ->_<id>.jsonl`.
pub fn session_file_path(session_dir: &Path, cwd: &Path, timestamp_iso: &str, id: &str) -> PathBuf {
    let stamp: String =
        timestamp_iso.chars().map(|c| if matches!(c, ':' | '.') { '-' } else { c }).collect();
    session_dir.join(cwd_folder_name(cwd)).join(format!("{stamp}_{id}.jsonl"))
}

/// Whether `path` is named as the file of the session `id` ([`session_file_path`]'s name).
pub fn is_named_for(path: &Path, id: &str) -> bool {
    path.file_name().and_then(|name| name.to_str()).is_some_and(|name| name.ends_with(&format!("_{id}.jsonl")))
}

/// The folder that keeps files belonging to a session (its handoff document): the session file's
/// path without `.jsonl`.
pub fn session_side_dir(session_file: &Path) -> PathBuf {
    session_file.with_extension("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_pi_naming() {
        let p = session_file_path(
            Path::new("/home/dev/.pi/agent/sessions"),
            Path::new("/home/dev/project"),
            "2026-11-29T19:09:19.407Z",
            "01a228b6-34ae-70d6-be02-728aff4799e7",
        );
        assert_eq!(
            p,
            Path::new("/home/dev/.pi/agent/sessions/--home-dev-project--/2026-11-29T19-09-19-407Z_01a228b6-34ae-70d6-be02-728aff4799e7.jsonl")
        );
        assert_eq!(cwd_folder_name(Path::new("C:\\x\\y")), "--C--x-y--");
    }
}
