//! Git inside the sandbox: an allowlist, not a list of names.
//!
//! Anything a command can create or change that git later *follows* is code: `config` in any
//! form, hooks, `commondir`, `gitdir`, `info/`, rebase and sequencer todo files, a `.git`
//! pointer file. A list of such names always misses the next one, and Landlock cannot take a
//! name back from a writable folder. So a sandboxed command sees each git folder the project's
//! git resolves to through an overlay of its own (its writes land in a private upper folder),
//! and after the command the host carries back into the real folder only git's *data* —
//! objects, refs, logs, the index, `HEAD`, `packed-refs`, `COMMIT_EDITMSG` and the like
//! ([`is_git_data`]) — and reports the rest as refused ([`GitView::merge`]). A process the
//! command leaves running writes into the same upper folder: what it changes is merged by the
//! same rule when it ends (or when the prompt ends it), so later is never wider than now.
//!
//! What git itself says (not a parser of ours) decides which folders those are and which files
//! in the tree git runs code from: `git rev-parse` for the git folders, `git config --list
//! --show-origin` for `core.hooksPath`, included config files and command-valued settings
//! that name a file of the project, `git ls-files --stage` for submodules ([`layout`]), run by
//! the host outside the sandbox with hooks and the fsmonitor off.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::paths::real_path;

/// How many submodule checkouts [`layout`] looks into (nested ones included).
const MAX_SUBMODULES: usize = 64;

/// What the project's git is, as git answers it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitLayout {
    /// The git folders commands see through an overlay (outermost only: a folder inside
    /// another, as `.git/modules/x` or `.git/worktrees/y` in `.git`, rides on it).
    pub git_dirs: Vec<PathBuf>,
    /// Files and folders of the tree git runs code from, with why: read-only to commands.
    pub planted: Vec<(PathBuf, String)>,
    /// The `.git` pointer files and nested `.git` folders git follows in the tree (submodule
    /// checkouts, linked worktrees inside the project): read-only to commands.
    pub pointers: Vec<PathBuf>,
    /// Hooks folders git's settings name inside the project that do not exist yet: nothing
    /// is there to make read-only, so a command that creates one is reported.
    pub absent: Vec<PathBuf>,
}

/// Git's answer for `project`: the one cached while every input it was made from is as it was
/// then ([`Inputs`]: what git read and what was looked at, a few dozen `stat`s and small reads
/// per check), else asked anew. One answer at a time per project: a command that comes while
/// [`prefetch`] asks waits for that answer instead of asking again.
pub fn layout(project: &Path) -> Arc<GitLayout> {
    /// A project's answer, if one was made; locked while it is made.
    type Slot = Arc<Mutex<Option<Cached>>>;
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Slot>>> = OnceLock::new();
    let slot = crate::sync::lock(CACHE.get_or_init(Default::default)).entry(project.to_path_buf()).or_default().clone();
    let mut slot = crate::sync::lock(&slot);
    if slot.is_none() {
        *slot = Kept::read(project);
    }
    if let Some(cached) = slot.as_ref() {
        if cached.settled && cached.inputs.hold() {
            return cached.layout.clone();
        }
    }
    // What the last answer read, or what a repository usually makes git read, as it is before
    // git runs: an input that reads the same after is one git read as it is now.
    let expected = slot.as_ref().map_or_else(|| usual_inputs(project), |c| c.inputs.looks());
    let before = Inputs::see(expected);
    let mut seen = Recorder::default();
    let fresh = Arc::new(ask_git(project, &mut seen));
    let inputs = seen.finish();
    let settled = inputs.settled(&before);
    if settled {
        Kept::write(project, &fresh, &inputs);
    }
    *slot = Some(Cached { layout: fresh.clone(), inputs, settled });
    fresh
}

/// A settled answer as the next process finds it ([`super::kept`]): git is not run again while
/// everything it was made from reads the same. Its inputs must hold every input an answer
/// made now would start from ([`search_inputs`]: another `$HOME`, another `git` on `PATH`,
/// and it is not this project's answer).
#[derive(Serialize, Deserialize)]
struct Kept {
    project: PathBuf,
    layout: GitLayout,
    inputs: Vec<((PathBuf, Look), Seen)>,
}

impl Kept {
    /// The kept answer's name for `project`.
    fn name(project: &Path) -> String {
        super::kept::name_for("git", project)
    }

    /// The answer an earlier process kept for `project`, when it covers what an answer made now
    /// would start from; whether its inputs still hold is [`layout`]'s usual check.
    fn read(project: &Path) -> Option<Cached> {
        let bytes = super::kept::read(&Self::name(project), Some(project))?;
        let kept: Kept = serde_json::from_slice(&bytes).ok()?;
        if kept.project != project {
            return None;
        }
        let inputs = Inputs(kept.inputs.into_iter().collect());
        let covers = search_inputs(project).iter().all(|key| inputs.0.contains_key(key));
        covers.then(|| Cached { layout: Arc::new(kept.layout), inputs, settled: true })
    }

    fn write(project: &Path, layout: &GitLayout, inputs: &Inputs) {
        let kept = Kept { project: project.to_path_buf(), layout: layout.clone(), inputs: inputs.0.iter().map(|(k, v)| (k.clone(), v.clone())).collect() };
        match serde_json::to_vec(&kept) {
            Ok(bytes) => super::kept::write(&Self::name(project), &bytes, Some(project)),
            Err(e) => tracing::debug!(error = %e, "cannot keep git's answer"),
        }
    }
}

/// Asks git about `project` on a thread of its own (a session starts in it: its first command
/// then finds the answer made, or waits for the one being made).
pub fn prefetch(project: &Path) {
    let project = real_path(project);
    super::ahead("handoff-git-layout", super::AHEAD_NICE, move || drop(layout(&project)));
}

/// Each project's slot for its cached answer (locked while an answer is made).
/// A cached answer and what it was made from.
struct Cached {
    layout: Arc<GitLayout>,
    inputs: Inputs,
    /// Whether every input read the same before git ran as after (else git may have read one
    /// as it was a moment before: the next call asks again).
    settled: bool,
}

/// What an answer used of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Look {
    /// Whether it exists, and as what (a link: where it points).
    Kind,
    /// Its content (through links): a file git reads, or a `.git` pointer.
    Read,
    /// Its entries (names, kinds, link targets): a hooks folder, `worktrees/`.
    List,
}

/// A file's kind, as `lstat` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Kind {
    Absent,
    File,
    Dir,
    Link,
    Other,
}

impl Kind {
    fn of(kind: std::fs::FileType) -> Kind {
        if kind.is_symlink() {
            Kind::Link
        } else if kind.is_dir() {
            Kind::Dir
        } else if kind.is_file() {
            Kind::File
        } else {
            Kind::Other
        }
    }
}

/// Files up to this size are compared by content, whatever their times say.
const SMALL_FILE: u64 = 64 * 1024;

/// What a [`Look`] at a path found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    kind: Kind,
    link: Option<PathBuf>,
    body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Body {
    None,
    /// A small file's content, by its SHA-256 (what an answer keeps is written to disk
    /// ([`Kept`]): a token in a remote's URL in a config must not be copied there).
    Digest([u8; 32]),
    /// A larger file (an index): device, inode, size, mtime and ctime. git replaces such a file
    /// by renaming a new one over it (a new inode), and the host's merge does the same.
    Large(u64, u64, u64, (i64, i64), (i64, i64)),
    /// What a link or a `Read` found that is not a file (a folder, say).
    Target(Kind),
    Entries(Vec<(std::ffi::OsString, Kind, Option<PathBuf>)>),
}

impl Seen {
    fn of(path: &Path, look: Look) -> Seen {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::symlink_metadata(path) else { return Seen { kind: Kind::Absent, link: None, body: Body::None } };
        let kind = Kind::of(meta.file_type());
        let link = if kind == Kind::Link { std::fs::read_link(path).ok() } else { None };
        let body = match look {
            Look::Kind => Body::None,
            Look::Read => match std::fs::metadata(path) {
                Ok(m) if m.is_file() && m.len() <= SMALL_FILE => std::fs::read(path).map_or(Body::None, |bytes| {
                    use sha2::Digest;
                    Body::Digest(sha2::Sha256::digest(bytes).into())
                }),
                Ok(m) if m.is_file() => Body::Large(m.dev(), m.ino(), m.len(), (m.mtime(), m.mtime_nsec()), (m.ctime(), m.ctime_nsec())),
                Ok(m) => Body::Target(Kind::of(m.file_type())),
                Err(_) => Body::None,
            },
            Look::List => match std::fs::read_dir(path) {
                Ok(entries) => {
                    let mut found: Vec<_> = entries
                        .flatten()
                        .map(|e| {
                            let kind = e.file_type().map_or(Kind::Absent, Kind::of);
                            let link = if kind == Kind::Link { std::fs::read_link(e.path()).ok() } else { None };
                            (e.file_name(), kind, link)
                        })
                        .collect();
                    found.sort();
                    Body::Entries(found)
                }
                Err(_) => Body::None,
            },
        };
        Seen { kind, link, body }
    }
}

/// The inputs of an answer and what each was when it was made.
#[derive(Debug, Default)]
struct Inputs(std::collections::BTreeMap<(PathBuf, Look), Seen>);

impl Inputs {
    fn see(looks: impl IntoIterator<Item = (PathBuf, Look)>) -> Inputs {
        Inputs(looks.into_iter().map(|(path, look)| {
            let seen = Seen::of(&path, look);
            ((path, look), seen)
        }).collect())
    }

    fn looks(&self) -> Vec<(PathBuf, Look)> {
        self.0.keys().cloned().collect()
    }

    /// Whether every input is as it was.
    fn hold(&self) -> bool {
        self.0.iter().all(|((path, look), seen)| Seen::of(path, *look) == *seen)
    }

    /// Whether every input is as `before` (seen before git ran) found it.
    fn settled(&self, before: &Inputs) -> bool {
        self.0.iter().all(|(key, seen)| before.0.get(key) == Some(seen))
    }
}

/// What [`ask_git`] looks at, besides what git reads itself: each look is taken as it is made,
/// and what it found is what the answer goes by.
#[derive(Default)]
struct Recorder(Inputs);

impl Recorder {
    fn look(&mut self, path: &Path, look: Look) -> &Seen {
        self.0 .0.entry((path.to_path_buf(), look)).or_insert_with(|| Seen::of(path, look))
    }

    /// Whether `path` exists, by a look already taken at it if there is one.
    fn exists(&mut self, path: &Path) -> bool {
        let taken = [Look::Read, Look::List].into_iter().find_map(|look| self.0 .0.get(&(path.to_path_buf(), look)));
        match taken {
            Some(seen) => seen.kind != Kind::Absent,
            None => self.look(path, Look::Kind).kind != Kind::Absent,
        }
    }

    /// The files git reads to answer in a repository whose git folder is `git_dir`.
    fn git_folder(&mut self, git_dir: &Path) {
        for name in GIT_FOLDER_READS {
            self.look(&git_dir.join(name), Look::Read);
        }
    }

    fn finish(self) -> Inputs {
        self.0
    }
}

/// The files git reads in a git folder to answer: [`Recorder::git_folder`]'s, and what a first
/// answer expects ([`usual_inputs`]).
const GIT_FOLDER_READS: [&str; 6] = ["HEAD", "config", "config.worktree", "commondir", "gitdir", "index"];

/// What every answer reads before git is asked: the way from the project up to `/` (where git
/// looks for a repository) and the settings of the user and of the system.
fn search_inputs(project: &Path) -> Vec<(PathBuf, Look)> {
    let ancestors = project.ancestors().map(|dir| (dir.join(".git"), Look::Read));
    let git = git_on_path().map(|git| (git, Look::Read));
    ancestors.chain(user_configs().into_iter().map(|p| (p, Look::Read))).chain(git).collect()
}

/// The `git` that [`git_command`] runs: the first on `PATH` (its file is an input: another
/// version may answer otherwise).
fn git_on_path() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("git"))
        .find(|git| std::fs::metadata(git).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// [`search_inputs`], and what git reads in the `.git` folder nearest the project (its own, or
/// its repository's when it is a folder of one): the inputs a first answer is expected to have.
fn usual_inputs(project: &Path) -> Vec<(PathBuf, Look)> {
    let git = project.ancestors().map(|dir| dir.join(".git")).find(|git| git.exists()).unwrap_or_else(|| project.join(".git"));
    let mut looks = search_inputs(project);
    looks.extend(GIT_FOLDER_READS.iter().map(|name| (git.join(name), Look::Read)));
    looks.extend([(git.join("hooks"), Look::List), (git.join("worktrees"), Look::List)]);
    looks
}

/// The settings files git reads besides a repository's: the system's and the user's (real
/// paths, as git's own answers are made).
fn user_configs() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("/etc/gitconfig")];
    if let Some(home) = super::paths::home() {
        files.push(home.join(".gitconfig"));
        let xdg = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()).map_or_else(|| home.join(".config"), PathBuf::from);
        files.push(xdg.join("git/config"));
    }
    files.iter().map(|f| real_path(f)).collect()
}

/// `git` run by the host in `dir` as the user's editor would, but with hooks and the
/// fsmonitor off and git's own variables cleared (they would point it elsewhere).
fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("GIT_OPTIONAL_LOCKS", "0");
    cmd
}

/// git's three answers in one checkout (the top, or a submodule's), each `None` where git
/// failed.
struct Answers {
    /// `rev-parse --absolute-git-dir --git-common-dir` (and `--show-toplevel` at the top), a
    /// line each.
    folders: Option<Vec<u8>>,
    /// `config --list --show-origin -z`: the config git finds there.
    config: Option<Vec<u8>>,
    /// `ls-files --stage -z`: the index's part of the tree there, relative to `dir`.
    index: Option<Vec<u8>>,
}

impl Answers {
    /// Asks git's three questions in `dir` at once (`top`: where its work tree's top is too):
    /// each is a process of its own, which a loaded machine runs side by side.
    fn ask(dir: &Path, top: bool) -> Answers {
        let rev_parse: &[&str] = if top {
            &["rev-parse", "--absolute-git-dir", "--git-common-dir", "--show-toplevel"]
        } else {
            &["rev-parse", "--absolute-git-dir", "--git-common-dir"]
        };
        let queries: [&[&str]; 3] = [
            rev_parse,
            &["config", "--list", "--show-origin", "-z"],
            &["ls-files", "--stage", "-z"],
        ];
        let [folders, config, index] = queries.map(|args| git_command(dir, args).spawn().ok()).map(|child| {
            let out = child?.wait_with_output().ok()?;
            out.status.success().then_some(out.stdout)
        });
        Answers { folders, config, index }
    }

    /// The git folder, the common folder and the top (if asked) `rev-parse` named, as real
    /// paths.
    fn folders(&self, dir: &Path) -> [Option<PathBuf>; 3] {
        let text = self.folders.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        let mut lines = text.lines();
        [(); 3].map(|()| lines.next().map(|line| absolute(dir, line)))
    }
}

fn absolute(base: &Path, text: &str) -> PathBuf {
    let path = Path::new(text.trim_end_matches(['\n', '\r']));
    real_path(&if path.is_absolute() { path.to_path_buf() } else { base.join(path) })
}

/// Asks git about `project` (see [`layout`]), recording in `seen` what the answer depends on.
/// Without git (or outside a repository) the project's own `.git`, if it is a folder, is still
/// seen through an overlay.
fn ask_git(project: &Path, seen: &mut Recorder) -> GitLayout {
    let mut layout = GitLayout::default();
    let project = real_path(project);
    for (path, look) in search_inputs(&project) {
        seen.look(&path, look);
    }
    // The config and the index git finds from the project are the top's; the index lists the
    // project's part of the tree, relative to it.
    let answers = Answers::ask(&project, true);
    if answers.folders.is_none() {
        let git = project.join(".git");
        if seen.look(&git, Look::Read).kind == Kind::Dir {
            layout.git_dirs.push(git);
        }
        return layout;
    }
    let [Some(git_dir), Some(common), top] = answers.folders(&project) else { return layout };
    for dir in [&common, &git_dir] {
        seen.git_folder(dir);
        if !layout.git_dirs.iter().any(|d| dir.starts_with(d)) {
            layout.git_dirs.retain(|d| !d.starts_with(dir));
            layout.git_dirs.push(dir.clone());
        }
    }
    let top = top.unwrap_or_else(|| project.clone());
    // The project's own `.git` file (a submodule's or a linked worktree's checkout).
    let own = top.join(".git");
    if own.starts_with(&project) && seen.look(&own, Look::Read).kind == Kind::File {
        layout.pointers.push(own);
    }
    let mut checkouts = vec![Checkout { dir: top, common, answers, listed_from: project.clone() }];
    let mut visited = HashSet::new();
    while let Some(checkout) = checkouts.pop() {
        if !visited.insert(checkout.dir.clone()) || visited.len() > MAX_SUBMODULES {
            continue;
        }
        if let Some(config) = &checkout.answers.config {
            planted_in_config(config, &checkout.dir, &project, &mut layout.planted, &mut layout.absent, seen);
        }
        // The hooks of its own folder may link to tracked scripts (`core.hooksPath`'s are
        // read above; git's `--git-path hooks` would answer our own `/dev/null`).
        hook_targets(&checkout.common.join("hooks"), &project, &mut layout.planted, seen);
        for sub in gitlinks(checkout.answers.index.as_deref(), &checkout.listed_from) {
            let pointer = sub.join(".git");
            if !pointer.starts_with(&project) || seen.look(&pointer, Look::Read).kind == Kind::Absent {
                continue;
            }
            layout.pointers.push(pointer.clone());
            let answers = Answers::ask(&sub, false);
            let [git_dir, common, _] = answers.folders(&sub);
            for dir in git_dir.iter().chain(&common) {
                seen.git_folder(dir);
            }
            let common = common.unwrap_or_else(|| pointer.clone());
            checkouts.push(Checkout { dir: sub.clone(), common, answers, listed_from: sub });
        }
    }
    // Linked worktrees inside the project: their `.git` files.
    for git_dir in layout.git_dirs.clone() {
        let worktrees = git_dir.join("worktrees");
        let Body::Entries(entries) = seen.look(&worktrees, Look::List).body.clone() else { continue };
        for (name, ..) in entries {
            let gitdir = worktrees.join(&name).join("gitdir");
            if !matches!(seen.look(&gitdir, Look::Read).body, Body::Digest(_)) {
                continue;
            }
            let Ok(text) = std::fs::read(&gitdir) else { continue };
            let pointer = absolute(&worktrees.join(&name), String::from_utf8_lossy(&text).trim());
            if pointer.starts_with(&project) && seen.look(&pointer, Look::Kind).kind == Kind::File && !layout.pointers.contains(&pointer) {
                layout.pointers.push(pointer);
            }
        }
    }
    layout.planted.retain(|(p, _)| !layout.git_dirs.iter().any(|d| p.starts_with(d)));
    layout
}

/// One repository checked out in the project (the top, or a submodule's) and git's answers in
/// it.
struct Checkout {
    dir: PathBuf,
    /// Its common git folder (where its own hooks are).
    common: PathBuf,
    answers: Answers,
    /// The folder the answers were asked in (the index's paths are relative to it).
    listed_from: PathBuf,
}

/// The submodule checkouts `ls-files --stage -z` lists (gitlinks), as paths under `listed_from`.
fn gitlinks(index: Option<&[u8]>, listed_from: &Path) -> Vec<PathBuf> {
    let Some(out) = index else { return Vec::new() };
    out.split(|b| *b == 0)
        .filter_map(|entry| {
            let text = std::str::from_utf8(entry).ok()?;
            let (meta, path) = text.split_once('\t')?;
            meta.starts_with("160000 ").then(|| listed_from.join(path))
        })
        .collect()
}

/// Settings whose value is a command git (or a program it starts) runs, by the key's last part.
const COMMAND_KEYS: [&str; 16] = [
    "fsmonitor", "editor", "pager", "sshcommand", "askpass", "gitproxy", "external", "program", "helper", "clean",
    "smudge", "process", "driver", "command", "textconv", "packobjectshook",
];

/// What the config git reads in `checkout` (`out`: its `config --list --show-origin -z`)
/// makes git run from inside `project`: the hooks folder (`core.hooksPath`, and what its hooks
/// link to), config files included from the tree, and the files command-valued settings name.
/// Every file it was read from, and every file an `include` names, is an input of the answer.
fn planted_in_config(out: &[u8], checkout: &Path, project: &Path, planted: &mut Vec<(PathBuf, String)>, absent: &mut Vec<PathBuf>, seen: &mut Recorder) {
    fn push(planted: &mut Vec<(PathBuf, String)>, project: &Path, path: PathBuf, why: String, seen: &mut Recorder) {
        if path.starts_with(project) && seen.exists(&path) && !planted.iter().any(|(p, _)| *p == path) {
            planted.push((path, why));
        }
    }
    let mut fields = out.split(|b| *b == 0);
    while let (Some(origin), Some(entry)) = (fields.next(), fields.next()) {
        // The host's own `-c` settings ([`git_command`]): no file of the project.
        if origin == b"command line:" {
            continue;
        }
        let origin = String::from_utf8_lossy(origin);
        let entry = String::from_utf8_lossy(entry);
        let (key, value) = entry.split_once('\n').unwrap_or((&entry, ""));
        let key = key.to_ascii_lowercase();
        // Relative origins are relative to the top, where git runs.
        let file = origin.strip_prefix("file:").map(|f| absolute(checkout, f));
        if let Some(file) = &file {
            seen.look(file, Look::Read);
            push(planted, project, file.clone(), "git reads its settings from it (an included config file)".into(), seen);
        }
        let section = key.split('.').next().unwrap_or_default();
        if (section == "include" || section == "includeif") && key.ends_with(".path") {
            // An include that names no file yet starts to count when one is made there.
            let base = file.as_deref().and_then(Path::parent).unwrap_or(checkout);
            let target = expand_home(value).unwrap_or_else(|| base.join(value));
            seen.look(&target, Look::Read);
        }
        if key == "core.hookspath" {
            let dir = expand_home(value).map_or_else(|| absolute(checkout, value), |p| real_path(&p));
            if dir.starts_with(project) && !seen.exists(&dir) && !absent.contains(&dir) {
                absent.push(dir.clone());
            }
            push(planted, project, dir.clone(), format!("git runs the hooks in it (core.hooksPath = {value})"), seen);
            hook_targets(&dir, project, planted, seen);
            continue;
        }
        let last = key.rsplit('.').next().unwrap_or_default();
        if COMMAND_KEYS.contains(&last) || section == "alias" || section == "pager" {
            let command = value.trim_start_matches('!').trim();
            let Some(word) = command.split_whitespace().next().map(|w| w.trim_matches(['"', '\''])) else { continue };
            if word.contains('/') {
                push(planted, project, absolute(checkout, word), format!("git runs it ({key})"), seen);
            }
        }
    }
}

fn expand_home(value: &str) -> Option<PathBuf> {
    value.strip_prefix("~/").and_then(|rest| super::paths::home().map(|h| h.join(rest)))
}

/// The files inside `project` that the hooks in `dir` are links to.
fn hook_targets(dir: &Path, project: &Path, planted: &mut Vec<(PathBuf, String)>, seen: &mut Recorder) {
    let Body::Entries(entries) = seen.look(dir, Look::List).body.clone() else { return };
    for (name, kind, _) in entries {
        if kind != Kind::Link {
            continue;
        }
        let target = real_path(&dir.join(&name));
        if target.starts_with(project) && seen.exists(&target) && !planted.iter().any(|(p, _)| *p == target) {
            let why = format!("git runs it as the hook {}", name.to_string_lossy());
            planted.push((target, why));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The allowlist

/// Whether `relative` (a path inside a git folder) is git's data, which a command may change:
/// objects (not `objects/info/alternates`), refs, logs, the index and its shared parts, `HEAD`
/// and the other `*_HEAD` files, `packed-refs`, the messages git writes, `shallow`, rerere's
/// cache; a submodule's folder (`modules/…`) and a linked worktree's (`worktrees/NAME/…`) by
/// the same rule. Not config in any form, hooks, `commondir`, `gitdir`, `info/`, or the
/// rebase and sequencer folders (their todo lists have `exec` lines).
pub fn is_git_data(relative: &Path, lower: &Path) -> bool {
    let parts: Vec<&OsStr> = relative
        .components()
        .map(|c| match c {
            Component::Normal(p) => Some(p),
            _ => None,
        })
        .collect::<Option<_>>()
        .unwrap_or_default();
    data_in(&parts, lower)
}

fn data_in(parts: &[&OsStr], dir: &Path) -> bool {
    let Some((first, rest)) = parts.split_first() else { return false };
    let Some(first) = first.to_str() else { return false };
    match first {
        "objects" => {
            // Alternates point git at another object store: not data, a redirection.
            let alternates = rest.first().is_some_and(|p| *p == "info") && rest.get(1).is_some_and(|p| p.to_string_lossy().ends_with("alternates"));
            !alternates
        }
        "refs" | "logs" | "rr-cache" => true,
        "modules" => {
            // The module's folder is the shortest prefix that holds a HEAD.
            for k in 1..=rest.len() {
                let module: PathBuf = std::iter::once(OsStr::new("modules")).chain(rest[..k].iter().copied()).collect();
                if dir.join(&module).join("HEAD").is_file() {
                    return data_in(&rest[k..], &dir.join(module));
                }
            }
            false
        }
        "worktrees" => rest.len() >= 2 && data_in(&rest[1..], &dir.join("worktrees").join(rest[0])),
        _ if rest.is_empty() => {
            matches!(
                first,
                "index" | "HEAD" | "ORIG_HEAD" | "FETCH_HEAD" | "MERGE_HEAD" | "MERGE_MSG" | "MERGE_MODE" | "MERGE_RR"
                    | "CHERRY_PICK_HEAD" | "REVERT_HEAD" | "AUTO_MERGE" | "REBASE_HEAD" | "packed-refs" | "COMMIT_EDITMSG"
                    | "SQUASH_MSG" | "TAG_EDITMSG" | "NOTES_EDITMSG" | "shallow" | "description"
            ) || first.starts_with("sharedindex.")
        }
        _ => false,
    }
}

/// Files git makes and removes within one of its own runs: never carried over (a stale lock
/// would stop the user's git), never reported.
fn is_transient(relative: &Path) -> bool {
    let name = relative.file_name().and_then(OsStr::to_str).unwrap_or_default();
    name.ends_with(".lock") || name == "gc.pid" || name == "gc.log"
}

// ---------------------------------------------------------------------------------------------
// One command's view of a git folder

/// One git folder as a command sees it: the real folder below, the command's changes in `state`
/// (`upper/` and `work/`, the overlay's), made by the host where no command can write.
#[derive(Debug)]
pub struct GitView {
    pub lower: PathBuf,
    pub state: PathBuf,
    /// What was carried over already, by upper path: (inode, mtime, size) when it was.
    merged: Mutex<HashMap<PathBuf, (u64, SystemTime, u64)>>,
}

/// What one merge did: the changes carried into the real folder, and the ones refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    pub applied: Vec<PathBuf>,
    /// Real paths a command changed, created or removed that git would follow.
    pub refused: Vec<PathBuf>,
}

impl MergeReport {
    fn add(&mut self, other: MergeReport) {
        self.applied.extend(other.applied);
        self.refused.extend(other.refused);
    }
}

/// The folder under which each command's [`GitView`] keeps its state: `$TMPDIR/handoff-git-XXXXXX`
/// (0700, a new name), made on first use, outside every folder a command may write (beside
/// the command's temp folder, which `sandbox::own_folder_outside` keeps out of the project),
/// removed as the host exits ([`remove_state_root`]).
static STATE_ROOT: OnceLock<PathBuf> = OnceLock::new();

pub(super) fn state_root() -> std::io::Result<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _one = crate::sync::lock(&LOCK);
    if let Some(dir) = STATE_ROOT.get() {
        return Ok(dir.clone());
    }
    let dir = tempfile::Builder::new()
        .prefix("handoff-git-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()?
        .keep();
    Ok(STATE_ROOT.get_or_init(|| dir).clone())
}

/// Removes every view's state, if any was made (called as the host exits).
pub fn remove_state_root() {
    if let Some(dir) = STATE_ROOT.get() {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                remove_view_state(&entry.path());
            }
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes a view's state folder. The overlay leaves `work/work` and what a volatile mount
/// makes in it with no rights at all (mode 0), which a user other than root cannot list to
/// remove: given back first, outermost first.
pub fn remove_view_state(state: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for sub in ["work/work", "work/work/incompat", "work/work/incompat/volatile", "work/index"] {
        let _ = std::fs::set_permissions(state.join(sub), std::fs::Permissions::from_mode(0o700));
    }
    if let Err(e) = std::fs::remove_dir_all(state) {
        tracing::debug!(state = %state.display(), error = %e, "cannot remove a git view's state");
    }
}

impl GitView {
    /// A fresh view of `lower` for one command.
    pub fn new(lower: &Path) -> std::io::Result<GitView> {
        let state = tempfile::Builder::new().prefix("view-").tempdir_in(state_root()?)?.keep();
        std::fs::create_dir(state.join("upper"))?;
        std::fs::create_dir(state.join("work"))?;
        Ok(GitView { lower: lower.to_path_buf(), state, merged: Mutex::new(HashMap::new()) })
    }

    pub fn upper(&self) -> PathBuf {
        self.state.join("upper")
    }

    /// Carries git's data the command changed since the last merge into the real folder and
    /// lists what it refused (a change to anything else, which the real folder never sees).
    pub fn merge(&self) -> MergeReport {
        let mut report = MergeReport::default();
        let mut merged = crate::sync::lock(&self.merged);
        self.merge_dir(&self.upper(), Path::new(""), &mut merged, &mut report);
        report
    }

    fn merge_dir(&self, upper: &Path, relative: &Path, merged: &mut HashMap<PathBuf, (u64, SystemTime, u64)>, report: &mut MergeReport) {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let Ok(entries) = std::fs::read_dir(upper) else { return };
        for entry in entries.flatten() {
            let from = entry.path();
            let rel = relative.join(entry.file_name());
            let real = self.lower.join(&rel);
            let Ok(meta) = std::fs::symlink_metadata(&from) else { continue };
            let data = is_git_data(&rel, &self.lower);
            let kind = meta.file_type();
            if is_transient(&rel) {
                continue;
            }
            let signature = (meta.ino(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.size());
            if merged.get(&rel) == Some(&signature) {
                if kind.is_dir() {
                    self.merge_dir(&from, &rel, merged, report);
                }
                continue;
            }
            if kind.is_char_device() && meta.rdev() == 0 {
                // A whiteout: the command removed it.
                if std::fs::symlink_metadata(&real).is_err() {
                } else if data {
                    let removed = if real.is_dir() && !real.is_symlink() { std::fs::remove_dir_all(&real) } else { std::fs::remove_file(&real) };
                    match removed {
                        Ok(()) => report.applied.push(real),
                        Err(e) => tracing::warn!(path = %real.display(), error = %e, "cannot remove what a sandboxed command removed in git's data"),
                    }
                } else {
                    report.refused.push(real);
                }
                merged.insert(rel, signature);
            } else if kind.is_dir() {
                let real_is_dir = std::fs::symlink_metadata(&real).is_ok_and(|m| m.is_dir());
                let leads_to_data = matches!(rel.components().next().and_then(|c| c.as_os_str().to_str()), Some("modules" | "worktrees"));
                if !(data || leads_to_data || real_is_dir) {
                    // A folder git would follow (hooks, info, rebase-merge…) made anew: refused whole.
                    report.refused.push(real);
                    merged.insert(rel, signature);
                    continue;
                }
                if data && real_is_dir && is_opaque(&from) {
                    // Removed and made again: what the real folder has beyond it goes.
                    if let Ok(old) = std::fs::read_dir(&real) {
                        for gone in old.flatten().filter(|e| std::fs::symlink_metadata(from.join(e.file_name())).is_err()) {
                            let path = gone.path();
                            let _ = if path.is_dir() && !path.is_symlink() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
                        }
                    }
                }
                self.merge_dir(&from, &rel, merged, report);
            } else if kind.is_file() && data {
                match copy_into(&from, &real) {
                    Ok(()) => report.applied.push(real),
                    Err(e) => tracing::warn!(path = %real.display(), error = %e, "cannot carry a sandboxed command's change to git's data"),
                }
                merged.insert(rel, signature);
            } else {
                // Not git's data, or not a plain file (a link planted where git reads a file).
                if !(kind.is_file() && same_content(&from, &real)) {
                    report.refused.push(real);
                }
                merged.insert(rel, signature);
            }
        }
    }

    /// Merges one last time and removes the state (the command's processes have all ended).
    pub fn finish(&self) -> MergeReport {
        let report = self.merge();
        remove_view_state(&self.state);
        report
    }
}

/// The overlay's mark on a folder removed and made again (`user.overlay.opaque`, as mounted
/// with `userxattr`).
#[cfg(target_os = "linux")]
fn is_opaque(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    let mut value = [0u8; 2];
    // SAFETY: the path is NUL-terminated; the value buffer is ours and its length is given.
    let n = unsafe { libc::lgetxattr(path.as_ptr(), c"user.overlay.opaque".as_ptr(), value.as_mut_ptr().cast(), value.len()) };
    n >= 1 && value[0] == b'y'
}

/// Overlay mounts, and so their marks, are Linux's: elsewhere no git view is mounted.
#[cfg(not(target_os = "linux"))]
fn is_opaque(_dir: &Path) -> bool {
    false
}

fn same_content(a: &Path, b: &Path) -> bool {
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Copies `from` over `to` by a new file beside it renamed into place (git's readers see the
/// old or the new file, never half of one); never follows a link at `to`.
fn copy_into(from: &Path, to: &Path) -> std::io::Result<()> {
    let dir = to.parent().ok_or_else(|| std::io::Error::other("no parent folder"))?;
    std::fs::create_dir_all(dir)?;
    let temp = tempfile::Builder::new().prefix(".handoff-merge-").tempfile_in(dir)?;
    std::fs::copy(from, temp.path())?;
    temp.persist(to).map_err(|e| e.error)?;
    Ok(())
}

/// The git views of one command and what the host does after it: merge each, say what it
/// refused. Made by [`views_for`] before the command spawns.
#[derive(Debug, Default)]
pub struct CommandViews {
    pub views: Vec<Arc<GitView>>,
}

impl CommandViews {
    /// Merges every view (the command's foreground has ended; processes it left may go on).
    pub fn merge(&self) -> MergeReport {
        let mut report = MergeReport::default();
        for view in &self.views {
            report.add(view.merge());
        }
        report
    }

    /// Merges every view one last time and removes their state (every process of the command
    /// has ended).
    pub fn finish(&self) -> MergeReport {
        let mut report = MergeReport::default();
        for view in &self.views {
            report.add(view.finish());
        }
        report
    }
}

/// A new view of each git folder of `layout` for one command.
pub fn views_for(layout: &GitLayout) -> std::io::Result<CommandViews> {
    let views = layout.git_dirs.iter().map(|dir| GitView::new(dir).map(Arc::new)).collect::<std::io::Result<_>>()?;
    Ok(CommandViews { views })
}

/// One sentence for the command's result about what it changed in git's folders that was not
/// carried over, with the project-relative names; `None` when nothing was refused.
pub fn refused_note(report: &MergeReport, project: &Path) -> Option<String> {
    if report.refused.is_empty() {
        return None;
    }
    let mut names: Vec<String> = report
        .refused
        .iter()
        .map(|p| p.strip_prefix(project).map_or_else(|_| p.display().to_string(), |r| r.display().to_string()))
        .collect();
    names.sort();
    names.dedup();
    Some(format!(
        "The sandbox did not apply this command's changes to {} (git's settings, hooks and pointer files run code outside the sandbox; only git's data — objects, refs, logs, the index, HEAD — is carried over). Ask the user to make such a change, or to run the command outside the sandbox.",
        names.join(", ")
    ))
}

// ---------------------------------------------------------------------------------------------
// Pointer files that appear

/// The `.git` entries of `project`'s tree that are in `now` and were not in `before` (both from
/// `links::git_entries`, the one index of the tree's folders), sorted.
pub fn new_pointers(before: &HashSet<PathBuf>, now: &HashSet<PathBuf>) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = now.difference(before).cloned().collect();
    found.sort();
    found
}

/// One sentence about hooks folders of `absent` (see [`GitLayout::absent`]) that exist now.
pub fn created_hooks_note(absent: &[PathBuf], project: &Path) -> Option<String> {
    let made: Vec<String> = absent
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .map(|p| p.strip_prefix(project).unwrap_or(p).display().to_string())
        .collect();
    (!made.is_empty()).then(|| {
        format!(
            "This command created {}, the hooks folder git's core.hooksPath names: git runs the hooks in it outside the sandbox; the user should review it.",
            made.join(", ")
        )
    })
}

/// One sentence about new `.git` entries in the tree, or `None`.
pub fn new_pointers_note(found: &[PathBuf], project: &Path) -> Option<String> {
    if found.is_empty() {
        return None;
    }
    let names: Vec<String> = found.iter().map(|p| p.strip_prefix(project).unwrap_or(p).display().to_string()).collect();
    Some(format!(
        "This command made {}: git follows a .git it finds in a folder (its settings and hooks run code outside the sandbox whenever git runs there, as an editor's git integration does); the user should review it.",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_data_is_an_allowlist() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path();
        std::fs::create_dir_all(git.join("modules/a/b/modules/c")).unwrap();
        std::fs::write(git.join("modules/a/b/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("modules/a/b/modules/c/HEAD"), "ref: refs/heads/main\n").unwrap();
        let data = |p: &str| is_git_data(Path::new(p), git);
        for ok in [
            "objects/ab/cdef", "objects/pack/pack-1.pack", "objects/info/commit-graph", "refs/heads/main", "refs/tags/v1",
            "refs/stash", "logs/HEAD", "logs/refs/heads/x", "index", "HEAD", "ORIG_HEAD", "packed-refs", "COMMIT_EDITMSG",
            "modules/a/b/index", "modules/a/b/refs/heads/m", "modules/a/b/modules/c/objects/12/34", "worktrees/w/HEAD",
            "worktrees/w/index", "worktrees/w/logs/HEAD",
        ] {
            assert!(data(ok), "{ok} is git's data");
        }
        for no in [
            "config", "config.worktree", "commondir", "gitdir", "hooks/pre-commit", "info/exclude", "info/attributes",
            "objects/info/alternates", "objects/info/http-alternates", "rebase-merge/git-rebase-todo", "sequencer/todo",
            "rebase-apply/patch", "modules/a/b/config", "modules/a/b/hooks/post-checkout", "modules/a/b/modules/c/config",
            "modules/x/config", "worktrees/w/commondir", "worktrees/w/gitdir", "worktrees/w/config.worktree", "branches/x",
            "FSMONITOR", "modules/a/b/commondir",
        ] {
            assert!(!data(no), "{no} is not git's data");
        }
    }

    /// What the session's prefetch asks must serve its first command: an answer for a plain
    /// repository, in its top or a folder of it, reads nothing that [`usual_inputs`] does not
    /// expect, so it is settled.
    #[test]
    fn a_first_answer_for_a_plain_repository_is_settled() {
        let dir = tempfile::tempdir().unwrap();
        let project = real_path(dir.path());
        let git = |args: &[&str]| assert!(Command::new("git").args(args).current_dir(&project).status().unwrap().success(), "git {args:?}");
        git(&["init", "-q"]);
        std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(project.join("pkg")).unwrap();
        // The repository's top, and a folder of it.
        for dir in [project.clone(), project.join("pkg")] {
            let before = Inputs::see(usual_inputs(&dir));
            let mut seen = Recorder::default();
            let answer = ask_git(&dir, &mut seen);
            assert_eq!(answer.git_dirs, [project.join(".git")]);
            let inputs = seen.finish();
            let unexpected: Vec<_> = inputs.0.iter().filter(|(key, seen)| before.0.get(*key) != Some(*seen)).map(|(key, _)| key).collect();
            assert!(inputs.settled(&before), "{}: read but not expected: {unexpected:?}", dir.display());
        }
    }

    #[test]
    fn the_note_names_what_was_refused_relative_to_the_project() {
        let report = MergeReport { applied: vec![], refused: vec!["/p/.git/commondir".into(), "/p/.git/config".into()] };
        let note = refused_note(&report, Path::new("/p")).unwrap();
        assert!(note.contains(".git/commondir, .git/config"), "{note}");
        assert_eq!(refused_note(&MergeReport::default(), Path::new("/p")), None);
    }
}
