//! Path arguments as pi's `path-utils` reads them: relative to the session's cwd, `~` for the
//! home folder, a leading `@` (how users mention files) dropped, odd Unicode spaces made plain.
//! `read` also tries the spellings macOS uses in screenshot names.

use std::path::{Path, PathBuf};

use crate::sandbox::paths::{home as home_dir, normalize_lexically};

use unicode_normalization::UnicodeNormalization;

fn is_unicode_space(c: char) -> bool {
    matches!(c, '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}')
}

/// `@foo` → `foo`, `~` and `~/…` → the home folder, Unicode spaces → ` `.
pub fn expand_path(path: &str) -> PathBuf {
    let path = path.strip_prefix('@').unwrap_or(path);
    let normalized: String =
        path.chars().map(|c| if is_unicode_space(c) { ' ' } else { c }).collect();
    if let Some(home) = home_dir() {
        if normalized == "~" {
            return home;
        }
        if let Some(rest) = normalized.strip_prefix("~/") {
            return home.join(rest);
        }
    }
    PathBuf::from(normalized)
}

/// The absolute path a tool argument names.
pub fn resolve_to_cwd(path: &str, cwd: &Path) -> PathBuf {
    let expanded = expand_path(path);
    if expanded.is_absolute() {
        normalize_lexically(&expanded)
    } else {
        normalize_lexically(&cwd.join(expanded))
    }
}

/// As [`resolve_to_cwd`], then, when nothing is there, the variants macOS writes for screenshot
/// names (narrow no-break space before AM/PM, NFD, curly apostrophe), as pi's `resolveReadPath`.
pub fn resolve_read_path(path: &str, cwd: &Path) -> PathBuf {
    let resolved = resolve_to_cwd(path, cwd);
    if resolved.exists() {
        return resolved;
    }
    let Some(text) = resolved.to_str() else {
        return resolved;
    };
    let am_pm = text.replace(" AM.", "\u{202F}AM.").replace(" PM.", "\u{202F}PM.");
    let am_pm = am_pm.replace(" am.", "\u{202F}am.").replace(" pm.", "\u{202F}pm.");
    let nfd: String = text.nfd().collect();
    let curly = text.replace('\'', "\u{2019}");
    let nfd_curly = nfd.replace('\'', "\u{2019}");
    for candidate in [am_pm, nfd, curly, nfd_curly] {
        if candidate != text && Path::new(&candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_join_the_cwd_and_dots_are_resolved() {
        let cwd = Path::new("/work/project");
        assert_eq!(resolve_to_cwd("src/main.rs", cwd), Path::new("/work/project/src/main.rs"));
        assert_eq!(resolve_to_cwd("./a/../b", cwd), Path::new("/work/project/b"));
        assert_eq!(resolve_to_cwd("/etc/hosts", cwd), Path::new("/etc/hosts"));
        assert_eq!(resolve_to_cwd("@src/lib.rs", cwd), Path::new("/work/project/src/lib.rs"));
    }

    #[test]
    fn tilde_is_the_home_folder() {
        let Some(home) = home_dir() else { return };
        assert_eq!(resolve_to_cwd("~", Path::new("/x")), home);
        assert_eq!(resolve_to_cwd("~/notes.md", Path::new("/x")), home.join("notes.md"));
        assert_eq!(resolve_to_cwd("@~/notes.md", Path::new("/x")), home.join("notes.md"));
    }

    #[test]
    fn unicode_spaces_become_plain_spaces() {
        assert_eq!(expand_path("a\u{00A0}b\u{3000}c"), PathBuf::from("a b c"));
    }

    #[test]
    fn read_path_finds_the_macos_screenshot_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let real = "Screenshot 2024 at 10.00.00\u{202F}AM.png";
        std::fs::write(dir.path().join(real), b"x").unwrap();
        let found = resolve_read_path("Screenshot 2024 at 10.00.00 AM.png", dir.path());
        assert_eq!(found, dir.path().join(real));
    }
}
