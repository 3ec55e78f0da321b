//! The host's side of one sandboxed command: the views of its git folders and its lifeline.
//!
//! Before the command spawns: a fresh view of each git folder ([`git::views_for`]), a socket
//! pair whose far end the helper's namespace init keeps ([`super::LIFELINE_FD`]), and what the
//! command may read ([`super::read_rules`], at [`super::READ_RULES_FD`]). After the
//! command's foreground ends: git's data it changed is merged into the real folders and what
//! was refused is said in its result. What it left running goes on until the run ends (the
//! host writes to the lifeline, or goes away: the init ends them all); when the last of them
//! has ended, its views are merged a last time and what they did that was refused is told to
//! the user ([`super::CommandScope::notify`]).

use std::ffi::OsString;
use std::collections::HashSet;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::git::{self, CommandViews};
use super::{protected, Sandboxed};

/// How long the namespace's processes have to end once told to (they are SIGKILLed: at once).
const END_WAIT: Duration = Duration::from_secs(2);

/// What [`SandboxedCommand::finish`] has to say for the command's result, each `None` when
/// there is nothing to say.
#[derive(Debug, Default)]
pub struct Finished {
    /// What the command changed in git's folders that was refused, the `.git` entries it made
    /// in the tree, the hooks folders it created.
    pub git: Option<String>,
    /// The files with other hard links it changed (`links::Watch::report`).
    pub hard_links: Option<String>,
}

/// One sandboxed command, prepared ([`SandboxedCommand::prepare`]) before it spawns.
pub struct SandboxedCommand {
    views: Arc<CommandViews>,
    host_end: Option<UnixStream>,
    child_end: Option<UnixStream>,
    project: PathBuf,
    /// The tree's `.git` entries before the command (`None`: not looked for), to say which
    /// are new after it.
    git_entries: Option<Arc<HashSet<PathBuf>>>,
    /// The project's files with other links before the command, to say which it changed.
    links: super::links::Watch,
    /// Hooks folders git names that did not exist before the command (`GitLayout::absent`).
    absent_hooks: Vec<PathBuf>,
    /// What the command may read: every credential location left out, existing or not.
    read_rules: Arc<super::read_rules::ReadRules>,
    /// Those rules as this command's own Landlock layer, when it can have one (handed to the
    /// helper instead of the rules: `ReadRules::layer_for`).
    read_layer: Option<super::read_rules::Layer>,
    /// The mount namespace's changes (none without a mount namespace), from the same answer of
    /// git's as the views.
    mounts: protected::SandboxMounts,
}

impl SandboxedCommand {
    /// The views and the lifeline for a command run in `cwd` under `sandbox` (git is asked
    /// once per command, cached while nothing it read changed, and the tree walked the first
    /// time, on the blocking pool).
    pub async fn prepare(sandbox: &Sandboxed, cwd: &Path) -> std::io::Result<SandboxedCommand> {
        let project = super::paths::real_path(cwd);
        super::own_folder_outside(&sandbox.tmpdir, &project)?;
        let watch_tree = sandbox.mounts && sandbox.settings.mode == super::SandboxMode::WorkspaceWrite;
        let (with_mounts, cwd_copy, project_copy) = (sandbox.mounts, cwd.to_path_buf(), project.clone());
        let mut roots: Vec<PathBuf> = sandbox.writable(cwd).into_iter().map(Path::to_path_buf).collect();
        let (views, absent_hooks, git_entries, links, read_rules, read_layer, mounts) = tokio::task::spawn_blocking(move || {
            // Only a mount namespace uses git's answer (its views and read-only files).
            let layout = watch_tree.then(|| git::layout(&project_copy));
            let (links, entries) = super::links::before_command(&project_copy, watch_tree);
            let entries = entries.map(Arc::new);
            let absent = layout.as_ref().map_or_else(Vec::new, |layout| layout.absent.clone());
            let read_rules = super::read_rules::current()?;
            let mounts = if with_mounts { protected::sandbox_mounts(&cwd_copy, layout.as_deref()) } else { Default::default() };
            // A fresh view of each git folder (`workspace-write` with a mount namespace; in
            // `read-only` git cannot write, without a namespace `Sandboxed::holes` says so).
            let views = layout.as_deref().map(git::views_for).transpose()?.unwrap_or_default();
            // The helper may write the git folders it sees through views; each view is a mount.
            let lowers: Vec<PathBuf> = views.views.iter().map(|v| v.lower.clone()).collect();
            roots.extend(lowers.iter().cloned());
            let read_layer = read_rules.layer_for(&roots, &lowers);
            Ok::<_, std::io::Error>((views, absent, entries, links, read_rules, read_layer, mounts))
        })
        .await
        .map_err(std::io::Error::other)??;
        let (host_end, child_end) = if sandbox.mounts {
            let (host, child) = UnixStream::pair()?;
            (Some(host), Some(child))
        } else {
            (None, None)
        };
        Ok(SandboxedCommand { views: Arc::new(views), host_end, child_end, project, git_entries, links, absent_hooks, read_rules, read_layer, mounts })
    }

    /// The helper's command line (see [`Sandboxed::helper_args`]).
    pub fn helper_args(&self, sandbox: &Sandboxed, cwd: &Path, program: &Path, args: &[&str]) -> Vec<OsString> {
        let read = match &self.read_layer {
            Some(layer) => super::ReadHanded::Layer { after: &layer.after },
            None => super::ReadHanded::Rules,
        };
        sandbox.helper_args(cwd, program, args, &self.views, &self.mounts, read)
    }

    /// Gives the helper its end of the lifeline as [`super::LIFELINE_FD`] and the read rules
    /// (or its layer of them) as [`super::READ_RULES_FD`].
    pub fn pass_descriptors(&self, cmd: &mut tokio::process::Command) {
        use std::os::fd::AsRawFd;
        let lifeline = self.child_end.as_ref().map(AsRawFd::as_raw_fd);
        let read_rules = match &self.read_layer {
            Some(layer) => layer.ruleset.as_raw_fd(),
            None => self.read_rules.fd().as_raw_fd(),
        };
        // SAFETY: between fork and exec only fcntl, dup2 and close run, which are
        // async-signal-safe. Each source is first copied above the targets (a source that is
        // itself 3 or 4 would be overwritten by the other's dup2); the new descriptors
        // (without close-on-exec) are the helper's, ours stay close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                let mut moves = [(lifeline, super::LIFELINE_FD), (Some(read_rules), super::READ_RULES_FD)];
                for (source, _) in &mut moves {
                    if let Some(fd) = source {
                        let high = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 10);
                        if high < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        *source = Some(high);
                    }
                }
                for (source, target) in moves {
                    if let Some(fd) = source {
                        if libc::dup2(fd, target) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        libc::close(fd);
                    }
                }
                Ok(())
            });
        }
    }

    /// After the spawn: the host keeps only its own end (the helper's init holds the other, so
    /// the host sees it close when the namespace is gone).
    pub fn spawned(&mut self) {
        self.child_end = None;
        // The layer was this command's alone.
        self.read_layer = None;
    }

    /// The command's foreground ended: merges its git views now (on the blocking pool) and
    /// says, each as sentences for its result, what was refused or made in git's folders and
    /// which files with other links it changed. What it left running is watched until the run
    /// ends (see the module's doc).
    pub async fn finish(mut self, sandbox: &Sandboxed) -> Finished {
        self.child_end = None;
        // The next command's layer, made while this one's result goes back.
        self.read_rules.refill();
        let (views, project, before) = (self.views.clone(), self.project.clone(), self.git_entries.clone());
        let links = std::mem::take(&mut self.links);
        let (report, pointers, after, hard_links) = tokio::task::spawn_blocking(move || {
            let after = before.as_ref().map(|_| Arc::new(super::links::git_entries(&project)));
            let pointers = match (&before, &after) {
                (Some(b), Some(a)) => git::new_pointers(b, a),
                _ => Vec::new(),
            };
            (views.merge(), pointers, after, links.report())
        })
        .await
        .unwrap_or_default();
        let notes: Vec<String> = [
            git::refused_note(&report, &self.project),
            git::new_pointers_note(&pointers, &self.project),
            git::created_hooks_note(&self.absent_hooks, &self.project),
        ]
        .into_iter()
        .flatten()
        .collect();
        let git = (!notes.is_empty()).then(|| notes.join("\n"));
        if let Some(host_end) = self.host_end.take() {
            let views = self.views.clone();
            let project = self.project.clone();
            let scope = sandbox.scope.clone();
            // What its leftover processes make is new against the tree as the command left it.
            let before = after;
            tokio::spawn(async move {
                watch(host_end, scope.as_ref().map(|s| s.ended.clone())).await;
                let project_copy = project.clone();
                let (report, pointers) = tokio::task::spawn_blocking(move || {
                    let pointers = before.as_ref().map_or_else(Vec::new, |b| git::new_pointers(b, &super::links::git_entries(&project_copy)));
                    (views.finish(), pointers)
                })
                .await
                .unwrap_or_default();
                let notes = [git::refused_note(&report, &project), git::new_pointers_note(&pointers, &project)];
                for note in notes.into_iter().flatten() {
                    let note = format!("A process a sandboxed command left running: {note}");
                    match &scope {
                        Some(scope) => (scope.notify)(note),
                        None => tracing::warn!("{note}"),
                    }
                }
            });
        } else {
            self.views.finish();
        }
        Finished { git, hard_links }
    }
}

/// Waits until the namespace is gone (the host's end reads end of file); when `ended` fires
/// first, tells the init to end every process and waits for that.
async fn watch(host_end: UnixStream, ended: Option<tokio_util::sync::CancellationToken>) {
    if host_end.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(mut stream) = tokio::net::UnixStream::from_std(host_end) else { return };
    let ended = async {
        match ended {
            Some(token) => token.cancelled_owned().await,
            None => std::future::pending().await,
        }
    };
    let told = tokio::select! {
        () = closed(&mut stream) => false,
        () = ended => true,
    };
    if told {
        let _ = stream.write_all(b"end").await;
        let _ = tokio::time::timeout(END_WAIT, closed(&mut stream)).await;
    }
}

async fn closed(stream: &mut tokio::net::UnixStream) {
    let mut buf = [0u8; 16];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}
