//! Hard links that exist already: a file of the project whose inode has other names, maybe
//! outside the project (uv and pnpm link the files of their cache into every project that
//! installs them). A write through any name changes the one file every name shares, so a
//! write the sandbox allows in the project can land in another project or the cache, and no
//! path rule sees it. The host tools ask before writing such a file
//! (`Protected::HardLinked`, naming the other links this index finds); for
//! commands, which may write any file of the project, the files with other links are known
//! before ([`watch`]) and looked at after ([`Watch::report`]): a changed one is reported in
//! the command's result.
//!
//! The index of a project is built once per process (a bounded walk, [`MAX_ENTRIES`], off the
//! hot path when [`prefetch`] starts it with the session) and refreshed before each use by
//! folder: a folder whose mtime has not changed has the same names (a link made or removed in
//! it changes it), so only changed folders are read again.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use crate::sync::lock;

/// Entries (files and folders) a walk of the project reads at most: past it, the files beyond
/// are not watched (said in `:help handoff-sandbox`).
pub const MAX_ENTRIES: usize = 200_000;

/// Files with other links watched around one command at most (each is looked at twice).
pub const MAX_WATCHED: usize = 20_000;

/// A folder changed this recently is read again at the next refresh (its mtime may not show a
/// change made within the same clock tick).
const RACY: std::time::Duration = std::time::Duration::from_secs(2);

/// How many changed files a report names; the rest are counted.
const MAX_NAMED: usize = 10;

/// A file's identity and what a write changes: its inode, its links, its size and times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    nlink: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            nlink: meta.nlink(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the same file (inode) was changed between `self` and `now`: its content (size,
    /// mtime), or its metadata (ctime) with its links unchanged (a link added or removed
    /// elsewhere changes the ctime and is no write).
    fn changed_to(&self, now: &Stamp) -> bool {
        (self.dev, self.ino) == (now.dev, now.ino)
            && (self.len != now.len || self.mtime != now.mtime || (self.ctime != now.ctime && self.nlink == now.nlink))
    }
}

/// One folder as last read: its mtime then, its regular files with more than one link, and
/// its `.git` entry if it has one (git follows it: `sandbox::git` reports a new one).
#[derive(Debug)]
struct Folder {
    mtime: (i64, i64),
    linked: Vec<(PathBuf, u64, u64)>,
    git: Option<PathBuf>,
}

/// The project's folders and the files in them with other links.
#[derive(Debug, Default)]
struct Index {
    folders: HashMap<PathBuf, Folder>,
    /// Whether a walk stopped at [`MAX_ENTRIES`].
    truncated: bool,
}

impl Index {
    /// Reads `dir` (its mtime first, so a change while reading is seen next time) and walks the
    /// folders under it this index does not know, within what is left of `budget`.
    fn read(&mut self, dir: PathBuf, budget: &mut usize) {
        let mut stack = vec![dir];
        while let Some(dir) = stack.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&dir) else { continue };
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            // A folder changed within the clock's last tick may change again with the same
            // mtime ("racy git"): it is read again next time.
            let settled = meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|age| age > RACY);
            let mtime = if settled { (meta.mtime(), meta.mtime_nsec()) } else { (i64::MIN, 0) };
            let mut folder = Folder { mtime, linked: Vec::new(), git: None };
            for entry in entries.flatten() {
                if *budget == 0 {
                    self.truncated = true;
                    break;
                }
                *budget -= 1;
                let Ok(kind) = entry.file_type() else { continue };
                let path = entry.path();
                if entry.file_name() == ".git" {
                    folder.git = Some(path.clone());
                }
                // git's objects are never written in place (and `.git` asks for host tools).
                if kind.is_dir() && entry.file_name() != ".git" {
                    if !self.folders.contains_key(&path) {
                        stack.push(path);
                    }
                } else if kind.is_file() {
                    if let Some(meta) = entry.metadata().ok().filter(|m| m.nlink() > 1) {
                        folder.linked.push((path, meta.dev(), meta.ino()));
                    }
                }
            }
            self.folders.insert(dir, folder);
        }
    }

    /// Brings the index up to date: a folder gone is forgotten, a folder whose mtime changed is
    /// read again (and the new folders in it walked). A first call walks the whole project.
    fn refresh(&mut self, project: &Path) {
        let mut budget = MAX_ENTRIES;
        if self.folders.is_empty() {
            self.read(project.to_path_buf(), &mut budget);
            return;
        }
        let mut changed = Vec::new();
        self.folders.retain(|dir, folder| match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.is_dir() => {
                if (meta.mtime(), meta.mtime_nsec()) != folder.mtime {
                    changed.push(dir.clone());
                }
                true
            }
            _ => false,
        });
        // What is already indexed is not counted again; the budget bounds what is new.
        for dir in changed {
            self.folders.remove(&dir);
            self.read(dir, &mut budget);
        }
    }

    fn linked(&self) -> impl Iterator<Item = &(PathBuf, u64, u64)> {
        self.folders.values().flat_map(|f| f.linked.iter())
    }

    /// The `.git` entries of `project` (a real path) but its own: see [`git_entries`].
    fn git_entries(&self, project: &Path) -> HashSet<PathBuf> {
        let own = project.join(".git");
        self.folders.values().filter_map(|f| f.git.clone()).filter(|g| *g != own).collect()
    }
}

/// The `.git` entries (pointer files, repositories) in `project`'s tree but its own, as the
/// index finds them now. Blocking (a first call walks the project).
pub fn git_entries(project: &Path) -> HashSet<PathBuf> {
    let project = super::paths::real_path(project);
    with_index(&project, |index| index.git_entries(&project))
}

/// Each project's index, by its real path: one per process, shared by its sessions.
static INDEXES: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<Index>>>>> = LazyLock::new(Default::default);

/// The index of `project` (real path), refreshed now; made (walked) on first use. Blocking.
fn with_index<T>(project: &Path, f: impl FnOnce(&Index) -> T) -> T {
    let index = lock(&INDEXES).entry(project.to_path_buf()).or_default().clone();
    let mut index = lock(&index);
    index.refresh(project);
    f(&index)
}

/// Starts walking `project` in the background (a session starts: its first command then
/// finds the index made).
pub fn prefetch(project: &Path) {
    let project = super::paths::real_path(project);
    super::ahead("handoff-links", super::AHEAD_NICE, move || with_index(&project, |_| ()));
}

/// The other names of the file `real` (a real path with more than one link, `dev`/`ino` its
/// inode) in `project`, as the index finds them, and whether the index is partial (it stopped
/// at [`MAX_ENTRIES`]). Blocking (a first call walks the project).
pub fn other_links(project: &Path, real: &Path, dev: u64, ino: u64) -> (Vec<PathBuf>, bool) {
    let project = super::paths::real_path(project);
    with_index(&project, |index| {
        let mut others: Vec<PathBuf> =
            index.linked().filter(|(p, d, i)| (*d, *i) == (dev, ino) && p != real).map(|(p, ..)| p.clone()).collect();
        others.sort();
        (others, index.truncated)
    })
}

/// The files of a project with other links, as they were before a command ran.
#[derive(Debug, Default)]
pub struct Watch {
    project: PathBuf,
    files: Vec<(PathBuf, Stamp)>,
    /// The index stopped at [`MAX_ENTRIES`], or more than [`MAX_WATCHED`] files have links.
    partial: bool,
}

/// Before a command runs in `project`: its files with other links and their state now.
/// Blocking.
pub fn watch(project: &Path) -> Watch {
    before_command(project, false).0
}

/// What a command in `project` needs of the index before it runs, from one refresh of it: its
/// files with other links and their state now ([`watch`]) and, `with_git`, the tree's `.git`
/// entries ([`git_entries`]). Blocking.
pub fn before_command(project: &Path, with_git: bool) -> (Watch, Option<HashSet<PathBuf>>) {
    let project = super::paths::real_path(project);
    let (paths, truncated, git_entries) = with_index(&project, |index| {
        let paths: Vec<PathBuf> = index.linked().map(|(p, ..)| p.clone()).collect();
        (paths, index.truncated, with_git.then(|| index.git_entries(&project)))
    });
    let partial = truncated || paths.len() > MAX_WATCHED;
    let files = paths
        .into_iter()
        .take(MAX_WATCHED)
        .filter_map(|p| std::fs::symlink_metadata(&p).ok().filter(|m| m.is_file()).map(|m| (p, Stamp::of(&m))))
        .collect();
    (Watch { project, files, partial }, git_entries)
}

impl Watch {
    /// After the command: one sentence per watched file it changed (at most [`MAX_NAMED`]),
    /// naming its other links in the project and saying how many are elsewhere; `None` when it
    /// changed none. Blocking.
    pub fn report(&self) -> Option<String> {
        let mut changed: Vec<(&Path, Stamp)> = Vec::new();
        // Sorted, so that a report reads the same on every run.
        for (path, before) in &self.files {
            let Ok(now) = std::fs::symlink_metadata(path).map(|m| Stamp::of(&m)) else { continue };
            if now.nlink > 1 && before.changed_to(&now) {
                changed.push((path, now));
            }
        }
        if changed.is_empty() {
            return None;
        }
        changed.sort_by(|a, b| a.0.cmp(b.0));
        let relative = |p: &Path| p.strip_prefix(&self.project).unwrap_or(p).display().to_string();
        let mut lines: Vec<String> = changed
            .iter()
            .take(MAX_NAMED)
            .map(|(path, now)| {
                let others: Vec<&Path> = self
                    .files
                    .iter()
                    .filter(|(p, s)| (s.dev, s.ino) == (now.dev, now.ino) && p != path)
                    .map(|(p, _)| p.as_path())
                    .collect();
                let mut named: Vec<String> = others.iter().map(|p| relative(p)).collect();
                named.sort();
                let elsewhere = now.nlink.saturating_sub(1 + others.len() as u64);
                format!(
                    "This command changed {}, which has {} hard links: the change reached the other links too ({}).",
                    relative(path),
                    now.nlink,
                    where_the_others_are(&named, elsewhere, self.partial)
                )
            })
            .collect();
        if changed.len() > MAX_NAMED {
            lines.push(format!("And {} more files with other hard links changed.", changed.len() - MAX_NAMED));
        }
        lines.push("A hard link is the same file under another name: the user should check what else uses it.".into());
        Some(lines.join(" "))
    }
}

/// Where the other links of a file are, for a report or an approval: `named` (found in the
/// project) and `elsewhere` more; `partial`: the project was not indexed whole, so "elsewhere"
/// may be in it.
pub fn where_the_others_are(named: &[String], elsewhere: u64, partial: bool) -> String {
    let mut parts = Vec::new();
    if !named.is_empty() {
        parts.push(format!("in the project: {}", named.join(", ")));
    }
    if elsewhere > 0 {
        let place = if partial { "not found in the part of the project indexed" } else { "outside the project" };
        parts.push(format!(
            "{elsewhere} {place}, such as a package cache (uv and pnpm link their cache's files into projects) or another project"
        ));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_finds_linked_files_and_follows_changes_by_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (project, cache) = (root.join("p"), root.join("cache"));
        std::fs::create_dir_all(project.join(".venv/lib")).unwrap();
        std::fs::create_dir_all(project.join(".git/objects")).unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(cache.join("mod.py"), "x = 1\n").unwrap();
        std::fs::hard_link(cache.join("mod.py"), project.join(".venv/lib/mod.py")).unwrap();
        std::fs::write(project.join("plain.txt"), "p\n").unwrap();
        std::fs::write(project.join(".git/objects/o"), "o").unwrap();
        std::fs::hard_link(project.join(".git/objects/o"), root.join("o2")).unwrap();
        let mut index = Index::default();
        index.refresh(&project);
        let linked: Vec<&PathBuf> = index.linked().map(|(p, ..)| p).collect();
        assert_eq!(linked, [&project.join(".venv/lib/mod.py")], "plain files and .git are left out");
        // A link made later in a new folder is found by the refresh.
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::hard_link(project.join("plain.txt"), project.join("src/alias.txt")).unwrap();
        index.refresh(&project);
        let mut linked: Vec<&PathBuf> = index.linked().map(|(p, ..)| p).collect();
        linked.sort();
        assert_eq!(linked, [&project.join(".venv/lib/mod.py"), &project.join("plain.txt"), &project.join("src/alias.txt")]);
        std::fs::remove_dir_all(project.join("src")).unwrap();
        index.refresh(&project);
        assert_eq!(index.linked().count(), 1, "a folder gone is forgotten (plain.txt has one link again once read)");
    }

    #[test]
    fn a_watch_reports_a_write_through_a_link_and_not_a_replacement() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (project, cache) = (root.join("p"), root.join("cache"));
        std::fs::create_dir_all(project.join("lib")).unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        for name in ["a.py", "b.py"] {
            std::fs::write(cache.join(name), "x\n").unwrap();
            std::fs::hard_link(cache.join(name), project.join("lib").join(name)).unwrap();
        }
        let watch = watch(&project);
        assert_eq!(watch.report(), None);
        use std::io::Write;
        std::fs::OpenOptions::new().append(true).open(project.join("lib/a.py")).unwrap().write_all(b"y\n").unwrap();
        // b.py replaced by a new file (as `sed -i` does): the cache's copy is untouched.
        std::fs::remove_file(project.join("lib/b.py")).unwrap();
        std::fs::write(project.join("lib/b.py"), "new\n").unwrap();
        let report = watch.report().unwrap();
        assert!(report.starts_with("This command changed lib/a.py, which has 2 hard links: the change reached the other links too (1 outside the project"), "{report}");
        assert!(!report.contains("b.py"), "{report}");
        assert_eq!(std::fs::read_to_string(cache.join("a.py")).unwrap(), "x\ny\n");
    }
}
