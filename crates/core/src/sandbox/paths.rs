//! Paths as the kernel will resolve them, and the user's home: the leaf every part of the
//! sandbox reads (`protected`, `git`, `links`), so that none of them needs another.

use std::path::{Component, Path, PathBuf};

/// The home folder (`$HOME`), if set.
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// Removes `.` and resolves `..` without touching the file system.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(component);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Where `path` (absolute) really lands: every symlink of the part that exists resolved, `..`
/// taken after that (as the kernel does), the part that does not exist yet appended. A symlink
/// planted at the end (dangling, say) is followed as the write would follow it.
pub fn real_path(path: &Path) -> PathBuf {
    let path = if path.is_absolute() { path.to_path_buf() } else { Path::new("/").join(path) };
    real_path_bounded(&path, 40)
}

/// [`real_path`], following at most `depth` dangling links (a loop of them ends there).
fn real_path_bounded(path: &Path, depth: u32) -> PathBuf {
    if depth == 0 {
        return normalize_lexically(path);
    }
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    let mut prefix = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(prefix) {
            let mut out = real;
            for part in missing.iter().rev() {
                out.push(part);
            }
            return normalize_lexically(&out);
        }
        if let Ok(target) = std::fs::read_link(prefix) {
            let base = prefix.parent().unwrap_or(Path::new("/"));
            let mut next = normalize_lexically(&base.join(target));
            for part in missing.iter().rev() {
                next.push(part);
            }
            return real_path_bounded(&next, depth - 1);
        }
        match (prefix.parent(), prefix.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                prefix = parent;
            }
            _ => return normalize_lexically(path),
        }
    }
}
