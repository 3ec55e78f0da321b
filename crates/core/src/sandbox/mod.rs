//! The sandbox for `bash`: what a command may do once consent let it run.
//!
//! The host never restricts itself (it is multi-threaded and must keep writing sessions and
//! reaching the provider). It runs a helper ([`helper_binary`]: `handoff-sandbox`, else its own
//! binary, taken as the host starts so that no command can swap it: [`helper`]),
//! `handoff-nvim sandbox-exec
//! --sandbox MODE --network BOOL [--writable DIR]… --tmpdir DIR -- PROGRAM ARGS…` (the settings'
//! own flags say the policy), which restricts
//! itself ([`linux::restrict_self`]: no_new_privs, Landlock with what it may read
//! ([`read_rules`]) and write, a seccomp filter) and execs the
//! command; the command's children inherit the limits.
//!
//! What the engine knows here: the modes ([`SandboxMode`], [`SandboxSettings`]), whether this
//! system can enforce them ([`Support`]), how bash spawns through the helper ([`Sandboxed`]), and
//! whether a result looks blocked by the sandbox ([`looks_blocked`]), which leads to the offer to
//! re-run the command outside it.

pub mod command;
pub mod git;
pub mod helper;
pub mod kept;
pub mod links;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod paths;
pub mod protected;
pub mod read_rules;
pub mod rule_wire;

pub use helper::{HelperBinary, HELPER_BINARY};
pub use read_rules::READ_RULES_FD;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// What a sandboxed command may write (`sandbox = …`, `--sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// The project folder (the session's cwd), the sandbox's temp folder and `/dev/null`.
    #[default]
    WorkspaceWrite,
    /// Only the sandbox's temp folder and `/dev/null`.
    ReadOnly,
    /// No sandbox: commands run with the user's rights.
    Off,
}

impl SandboxMode {
    pub const ALL: [SandboxMode; 3] = [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly, SandboxMode::Off];

    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }

    pub fn parse(name: &str) -> Option<SandboxMode> {
        SandboxMode::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// The sandbox as the user set it: the mode and whether commands may reach the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    pub network: bool,
}

impl SandboxSettings {
    pub fn is_on(&self) -> bool {
        self.mode != SandboxMode::Off
    }

    /// How the chat and the approvals name it: `workspace-write, no network`.
    pub fn describe(&self) -> String {
        let net = if self.network { "network allowed" } else { "no network" };
        format!("{}, {net}", self.mode.as_str())
    }
}

/// The Landlock ABI that enforces everything the sandbox needs but signal scoping: file
/// access (1–3) and TCP bind/connect (4).
pub const REQUIRED_ABI: u32 = 4;
/// The ABI from which signals to processes outside the sandbox are refused.
pub const SIGNALS_ABI: u32 = 6;
/// Set to a number, the Landlock ABI this process reports instead of the kernel's (tests
/// simulate a system that cannot enforce the sandbox with `0`). Not a setting.
pub const SIMULATED_ABI_VAR: &str = "HANDOFF_SANDBOX_SIMULATE_ABI";

/// What this system can enforce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// The kernel's Landlock ABI (0: none); always 0 off Linux.
    pub abi: u32,
}

impl Support {
    /// This system's, asked once per process (the kernel's answer does not change).
    pub fn probe() -> Support {
        static PROBED: OnceLock<Support> = OnceLock::new();
        *PROBED.get_or_init(|| {
            let simulated = std::env::var(SIMULATED_ABI_VAR).ok().and_then(|v| v.trim().parse().ok());
            Support { abi: simulated.unwrap_or_else(kernel_abi) }
        })
    }

    /// `Ok` when the sandbox can be enforced as asked; else why not, in words for the user.
    pub fn enforceable(&self) -> Result<(), String> {
        if !cfg!(target_os = "linux") {
            return Err(format!(
                "commands cannot be sandboxed on {} yet (only Linux, with Landlock)",
                std::env::consts::OS
            ));
        }
        match self.abi {
            0 => Err("this kernel has no Landlock (Linux 5.13 or later, with landlock among its LSMs)".into()),
            abi if abi < REQUIRED_ABI => Err(format!(
                "this kernel's Landlock ABI is {abi}: writes could be limited but not TCP (ABI {REQUIRED_ABI}, Linux 6.7)"
            )),
            _ => Ok(()),
        }
    }

    /// Whether a sandboxed command is kept from signalling processes outside it.
    pub fn signals_scoped(&self) -> bool {
        self.abi >= SIGNALS_ABI
    }

    /// One line for `:checkhealth`: the ABI and how much of the sandbox it enforces.
    pub fn summary(&self) -> String {
        match self.enforceable() {
            Err(why) => format!("Landlock ABI {}: not enforceable ({why})", self.abi),
            Ok(()) if self.signals_scoped() => format!("Landlock ABI {}: fully enforced", self.abi),
            Ok(()) => format!(
                "Landlock ABI {}: enforced, except signals to processes outside the sandbox (ABI {SIGNALS_ABI})",
                self.abi
            ),
        }
    }
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the kernel's ABI, 0
/// when it has no Landlock (ENOSYS) or it is off (EOPNOTSUPP).
#[cfg(target_os = "linux")]
fn kernel_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and the VERSION flag the call reads nothing and only
    // returns a number (or -1 and errno).
    let v = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<libc::c_void>(), 0usize, LANDLOCK_CREATE_RULESET_VERSION)
    };
    u32::try_from(v).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
fn kernel_abi() -> u32 {
    0
}

/// Set to `1`, the helper behaves as on a system without unprivileged user namespaces (tests
/// simulate one): it cannot make the mount namespace, so the probe says so. Not a setting.
pub const SIMULATED_NO_MOUNTS_VAR: &str = "HANDOFF_SANDBOX_SIMULATE_NO_MOUNTS";

/// The helper's subcommand that only tries the mount namespace (see [`mount_namespaces`]).
pub const PROBE_COMMAND: &str = "sandbox-probe";

/// What the probe writes on stdout, and then closes it, when the namespaces can be made.
pub const PROBE_YES: &[u8] = b"yes\n";

/// Whether sandboxed commands can get their mount namespace (read-only planted code, hidden
/// credentials, the editor's socket hidden) on this system, else why not. Asked once per
/// process, by running the helper's probe: the same code that would make it. A yes is taken
/// as the probe writes it ([`PROBE_YES`]), before it removes its folders; the process is
/// waited for on a thread of its own.
pub fn mount_namespaces() -> &'static Result<(), String> {
    static PROBED: OnceLock<Result<(), String>> = OnceLock::new();
    PROBED.get_or_init(|| {
        use std::io::Read;
        PROBE_STARTED.store(true, std::sync::atomic::Ordering::SeqCst);
        let helper = helper_binary().map_err(|e| e.to_string())?;
        let ours = helper.source().file_name().is_some_and(|n| n == "handoff-nvim" || n == HELPER_BINARY);
        if !ours {
            return Err(format!("{} is not the sandbox's helper", helper.source().display()));
        }
        // Its folders go in the git views' state folder (outside every writable root), not in
        // `$TMPDIR`: a folder made and removed there changes it, and the read rules list it
        // when it is on the way to a credential.
        let within = git::state_root().ok();
        // A yes from an earlier process on this same system is taken as it is (`kept`): a
        // command whose namespaces then fail does not run, and says why.
        let system = probe_inputs(&helper, within.as_deref());
        let kept_name = kept::name_for(PROBE_KEPT, helper.source());
        if system.as_ref().is_some_and(|now| kept::read(&kept_name, None).as_ref() == Some(now)) {
            return Ok(());
        }
        let keep_yes = || {
            if let Some(system) = &system {
                kept::write(&kept_name, system, None);
            }
        };
        let mut probe = std::process::Command::new(helper.path());
        probe.arg(PROBE_COMMAND);
        if let Some(within) = &within {
            probe.arg(within);
        }
        let mut child = probe
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", helper.source().display()))?;
        let mut said = Vec::new();
        if let Some(mut stdout) = child.stdout.take() {
            let _ = stdout.read_to_end(&mut said);
        }
        if said == PROBE_YES {
            let reaped = std::thread::Builder::new().name("sandbox-probe-end".into()).spawn(move || drop(child.wait()));
            if let Err(e) = reaped {
                tracing::debug!("cannot wait for the sandbox's probe on a thread: {e}");
            }
            keep_yes();
            return Ok(());
        }
        let out = child.wait_with_output().map_err(|e| format!("cannot run {}: {e}", helper.source().display()))?;
        if out.status.success() {
            // A helper from before the early yes says it by its status alone.
            keep_yes();
            return Ok(());
        }
        let why = String::from_utf8_lossy(&out.stderr);
        Err(why.trim().trim_start_matches("error: ").to_string())
    })
}

/// The kind of answer [`mount_namespaces`]'s yes is kept as ([`kept::name_for`]: one per helper file).
const PROBE_KEPT: &str = "namespaces-probe";

/// What decides the namespaces' probe, read without running anything (a few small files of
/// `/proc`): the boot, this process's user and namespaces, the kernel's settings for user
/// namespaces, the LSM's label and the seccomp and capability state this process (and so the
/// helper) starts with, the mounts it sees, the helper's file, and the file system the views'
/// state goes on. `None` where a simulation is asked for (tests) or the helper's file cannot be
/// read: the probe then runs. A kept yes is used only while all of it is the same.
fn probe_inputs(helper: &HelperBinary, within: Option<&Path>) -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    if !cfg!(target_os = "linux") || std::env::var_os(SIMULATED_NO_MOUNTS_VAR).is_some() || std::env::var_os(SIMULATED_ABI_VAR).is_some() {
        return None;
    }
    let mut out = format!("{} {}\n", env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")).into_bytes();
    let mut add = |label: &str, bytes: &[u8]| {
        out.extend_from_slice(label.as_bytes());
        out.extend_from_slice(format!(" {}\n", bytes.len()).as_bytes());
        out.extend_from_slice(bytes);
        out.push(b'\n');
    };
    for file in [
        "/proc/sys/kernel/random/boot_id",
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/user/max_mnt_namespaces",
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "/proc/self/attr/current",
        "/proc/self/mountinfo",
    ] {
        add(file, &std::fs::read(file).unwrap_or_default());
    }
    for ns in ["user", "mnt", "pid"] {
        let link = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap_or_default();
        add(ns, link.as_os_str().as_encoded_bytes());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in status.lines().filter(|l| ["Uid:", "Gid:", "Cap", "NoNewPrivs:", "Seccomp"].iter().any(|p| l.starts_with(p))) {
        add("status", line.as_bytes());
    }
    let source = std::fs::metadata(helper.source()).ok()?;
    let stamp = |m: &std::fs::Metadata| format!("{} {} {} {}.{} {}.{}", m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec());
    add("helper", format!("{} {}", helper.source().display(), stamp(&source)).as_bytes());
    if let Some(parent) = within.and_then(Path::parent) {
        let meta = std::fs::metadata(parent).ok()?;
        add("state", format!("{} {} {}", parent.display(), meta.dev(), file_system_kind(parent).unwrap_or(0)).as_bytes());
    }
    Some(out)
}

/// The kind of file system `dir` is on (`statfs`'s magic number).
#[cfg(target_os = "linux")]
fn file_system_kind(dir: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut fs = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a NUL-terminated path and a buffer of the size statfs writes.
    if unsafe { libc::statfs(path.as_ptr(), fs.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statfs succeeded, so it wrote the buffer.
    let kind = unsafe { fs.assume_init() }.f_type;
    // Its type differs between architectures (i64 here, i32 on 32-bit ones).
    #[allow(clippy::unnecessary_cast)]
    Some(kind as i64)
}

#[cfg(not(target_os = "linux"))]
fn file_system_kind(_dir: &Path) -> Option<i64> {
    None
}

/// How much lower than the host's the priority of work made ahead of a command is: it yields
/// the cores to what the user waits for (the model's request, the editor), and a build at the
/// normal priority still leaves it about a tenth of a core, so the first command is not
/// starved of it (a nice of 19 would leave 1.5%).
pub const AHEAD_NICE: i32 = 10;

/// Runs `work` on a thread of its own named `name`, its priority `nice` lower than the host's
/// (what it starts inherits it; [`AHEAD_NICE`] for what a first command will wait for).
/// Failing to spawn is only logged: the first command then makes it itself.
pub(crate) fn ahead(name: &str, nice: i32, work: impl FnOnce() + Send + 'static) {
    let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
        #[cfg(target_os = "linux")]
        // SAFETY: gettid, getpriority and setpriority take numbers only; this thread's own
        // priority (getpriority's -1 on error is also a nice value: the sum is only clamped).
        unsafe {
            let nice = libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t).saturating_add(nice).min(19);
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice);
        }
        work();
    });
    if let Err(e) = spawned {
        tracing::debug!("cannot start {name} in the background: {e}");
    }
}

/// Whether [`mount_namespaces`]'s probe was started: its folders are in the git views' state
/// folder, which the host's exit waits for the answer to remove ([`remove_private_tmpdir`]).
static PROBE_STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Starts [`mount_namespaces`]'s probe on a thread of its own (a few ms: it runs the helper),
/// so that the first command does not wait for it; a later call waits for that answer.
pub fn probe_in_background() {
    PROBE_STARTED.store(true, std::sync::atomic::Ordering::SeqCst);
    ahead("sandbox-probe", AHEAD_NICE, || {
        let _ = mount_namespaces();
    });
}

/// When a session starts [`prefetch`]: that work takes the cores from whatever runs beside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PrefetchAt {
    /// As the session is made: an editor's session then waits for the user's prompt.
    #[default]
    SessionStart,
    /// When the model's first reply begins to arrive: a session made for a prompt sent at once
    /// (the CLI), whose first request it would otherwise delay on a small machine while the
    /// model's own time is left idle.
    FirstReply,
}

/// Starts what a session's first command in `project` needs, each on a thread of its own, once
/// per project and process: the namespaces' probe ([`mount_namespaces`]), the project's index
/// of folders ([`links::prefetch`]), git's answer for it ([`git::prefetch`], `workspace-write`)
/// and the read rules ([`read_rules::current`]). A command that comes before one is made waits
/// for it (each is made once); later commands check theirs for changes.
pub fn prefetch(project: &Path, settings: SandboxSettings) {
    static STARTED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    if !settings.is_on() {
        return;
    }
    let project = paths::real_path(project);
    {
        let mut started = crate::sync::lock(&STARTED);
        if started.contains(&project) {
            return;
        }
        started.push(project.clone());
    }
    // The folders the host makes in `$TMPDIR` for commands, made first: a folder made there
    // later changes `$TMPDIR`, and the read rules list it when it is on the way to a credential.
    if let Err(e) = private_tmpdir().and_then(|_| git::state_root()) {
        tracing::debug!("cannot make the sandbox's folders ahead: {e}");
    }
    probe_in_background();
    links::prefetch(&project);
    if settings.mode == SandboxMode::WorkspaceWrite {
        git::prefetch(&project);
    }
    ahead("handoff-read-rules", AHEAD_NICE, || {
        if let Err(e) = read_rules::current() {
            tracing::debug!("cannot make the read rules in the background: {e}");
        }
    });
}

/// The helper's subcommand.
pub const HELPER_COMMAND: &str = "sandbox-exec";

/// The helper's subcommand that prints the read rules a command would get now
/// ([`read_rules`]).
pub const READ_RULES_COMMAND: &str = "sandbox-read-rules";

/// Where the helper finds its end of the lifeline ([`HelperArgs::lifeline`]): bash puts it there.
pub const LIFELINE_FD: i32 = 3;

/// Tells the user one sentence about what a sandboxed command's leftover processes did.
pub type Notify = std::sync::Arc<dyn Fn(String) + Send + Sync>;

/// What ends a sandboxed command's processes, and who hears what they did after the command
/// returned: a command's background processes live until the run that started it ends (its
/// namespace's init ends them all), so what a command can reach is never wider later.
#[derive(Clone)]
pub struct CommandScope {
    /// Cancelled when the run ends.
    pub ended: tokio_util::sync::CancellationToken,
    pub notify: Notify,
}

impl std::fmt::Debug for CommandScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandScope").field("ended", &self.ended.is_cancelled()).finish_non_exhaustive()
    }
}

/// How `bash` runs a command inside the sandbox: the helper binary and what it is told.
#[derive(Clone, Debug)]
pub struct Sandboxed {
    /// The binary that confines the command (see [`helper_binary`]).
    pub helper: HelperBinary,
    pub settings: SandboxSettings,
    /// The sandbox's own temp folder (the command's `TMPDIR`), writable in every mode: its real
    /// path as made ([`private_tmpdir`]), never inside the project ([`own_folder_outside`]).
    pub tmpdir: PathBuf,
    /// Whether the helper sets up the mount namespace ([`protected::sandbox_mounts`]): false
    /// where this system cannot (then the approval says what is not protected).
    pub mounts: bool,
    /// The run the command belongs to (`None`: a call outside a run, as in tests; its
    /// processes then end when the host does).
    pub scope: Option<CommandScope>,
}

impl Sandboxed {
    /// The folders a command run in `cwd` may write: its temp folder, and the project in
    /// `workspace-write` (`/dev/null` besides). A git folder outside the project, which the
    /// command sees through its view (`git::views_for`), is added by [`Sandboxed::helper_args`].
    pub fn writable<'a>(&'a self, cwd: &'a Path) -> Vec<&'a Path> {
        match self.settings.mode {
            SandboxMode::WorkspaceWrite => vec![cwd, &self.tmpdir],
            SandboxMode::ReadOnly | SandboxMode::Off => vec![&self.tmpdir],
        }
    }

    /// What this sandbox cannot protect for a command run in `cwd`, and why, when it has no
    /// mount namespace ([`mount_namespaces`]) and there is something to protect: the command
    /// must then be asked about, whatever the policy (never silently weaker).
    pub fn holes(&self, cwd: &Path) -> Option<String> {
        if self.mounts {
            return None;
        }
        // Git's answer, asked once for both uses.
        let git = (self.settings.mode == SandboxMode::WorkspaceWrite).then(|| git::layout(&paths::real_path(cwd)));
        let mounts = protected::sandbox_mounts(cwd, git.as_deref());
        let name = |p: &PathBuf| p.strip_prefix(cwd).map_or_else(|_| p.display().to_string(), |r| r.display().to_string());
        let mut open = Vec::new();
        if let Some(git) = git.filter(|git| !git.git_dirs.is_empty()) {
            let dirs = git.git_dirs.iter().map(name).collect::<Vec<_>>().join(", ");
            open.push(format!("git's folders ({dirs}) stay writable whole (its settings and hooks, not only its data)"));
        }
        if !mounts.read_only.is_empty() {
            open.push(format!("{} stay writable", mounts.read_only.iter().map(name).collect::<Vec<_>>().join(", ")));
        }
        // Credentials are kept from reading by Landlock (`read_rules`), mounts or not; without
        // the mounts their folders' names can be listed, and the editor's socket is not hidden.
        let (credentials, others): (Vec<&PathBuf>, Vec<&PathBuf>) =
            mounts.hidden.iter().partition(|p| protected::is_credential(p));
        let credentials: Vec<&PathBuf> = credentials.into_iter().filter(|p| p.is_dir()).collect();
        if !credentials.is_empty() {
            open.push(format!(
                "the names in {} stay listable (not what they hold)",
                credentials.into_iter().map(name).collect::<Vec<_>>().join(", ")
            ));
        }
        if !others.is_empty() {
            open.push(format!("{} stay reachable", others.into_iter().map(name).collect::<Vec<_>>().join(", ")));
        }
        open.push("other processes' environments (/proc/PID/environ: the editor's may hold keys) stay readable".into());
        open.push("the rest of the tree's metadata (chmod, chown, times, extended attributes) stays changeable, and your other terminals (/dev/pts) visible".into());
        let why = match mount_namespaces() {
            Err(why) => why.clone(),
            Ok(()) => "the namespaces are off for this sandbox".into(),
        };
        Some(format!("the sandbox cannot fully protect this command ({why}): {}", open.join("; ")))
    }

    /// Why a result of a command run in `cwd` looks blocked by this sandbox (see
    /// [`looks_blocked`]).
    pub fn blocked(&self, exit_code: Option<i32>, output: &str, cwd: &Path) -> Option<String> {
        looks_blocked(exit_code, output, &self.writable(cwd), self.settings.network)
    }

    /// The helper's arguments that run `program args…` in `cwd` under this sandbox (the project
    /// folder is writable in `workspace-write`, and the git folders through `views`); `mounts`:
    /// the mount namespace's changes ([`protected::sandbox_mounts`], passed when this
    /// sandbox has a namespace); `read`: what the helper finds at [`READ_RULES_FD`] (nothing:
    /// it may read everything). A command's are `command::SandboxedCommand::helper_args`.
    pub fn helper_args(
        &self,
        cwd: &Path,
        program: &Path,
        args: &[&str],
        views: &git::CommandViews,
        mounts: &protected::SandboxMounts,
        read: ReadHanded<'_>,
    ) -> Vec<OsString> {
        let network = if self.settings.network { "true" } else { "false" };
        let mut out: Vec<OsString> =
            vec![HELPER_COMMAND.into(), "--sandbox".into(), self.settings.mode.as_str().into(), "--network".into(), network.into()];
        let writable = self.writable(cwd);
        for dir in writable.iter().filter(|d| **d != self.tmpdir) {
            out.push("--writable".into());
            out.push(dir.into());
        }
        // A git folder outside the project (a linked worktree's, a parent repository's) is
        // writable through its view only.
        for view in &views.views {
            if !writable.iter().any(|w| view.lower.starts_with(w)) {
                out.push("--writable".into());
                out.push(view.lower.clone().into());
            }
        }
        if self.mounts {
            out.push("--isolate".into());
            out.push("true".into());
            out.push("--lifeline".into());
            out.push(LIFELINE_FD.to_string().into());
            for view in &views.views {
                out.push("--git-view".into());
                out.push(view.lower.clone().into());
                out.push("--git-state".into());
                out.push(view.state.clone().into());
            }
            for (flag, paths) in [("--read-only", &mounts.read_only), ("--hide", &mounts.hidden)] {
                for path in paths {
                    out.push(flag.into());
                    out.push(path.into());
                }
            }
        }
        match read {
            ReadHanded::Nothing => {}
            ReadHanded::Rules => {
                out.push("--read-rules".into());
                out.push(READ_RULES_FD.to_string().into());
            }
            ReadHanded::Layer { after } => {
                out.push("--read-layer".into());
                out.push(READ_RULES_FD.to_string().into());
                for rule in after {
                    out.push("--read-after".into());
                    out.push(read_rules::encode_one(rule));
                }
            }
        }
        out.push("--tmpdir".into());
        out.push(self.tmpdir.clone().into());
        out.push("--".into());
        out.push(program.into());
        out.extend(args.iter().map(OsString::from));
        out
    }
}

/// What the host hands the helper at [`READ_RULES_FD`] about what a command may read.
#[derive(Clone, Copy, Debug)]
pub enum ReadHanded<'a> {
    /// Nothing: everything may be read.
    Nothing,
    /// The rules, in a sealed memfd: the helper opens each path and adds it to its ruleset.
    Rules,
    /// A Landlock ruleset the host built with them, for this command alone
    /// (`read_rules::ReadRules::take_layer`); `after`: the rules whose paths this command's
    /// namespace mounts over (`/proc`, a git view), which the helper adds once it has.
    Layer { after: &'a [(read_rules::ReadRule, PathBuf)] },
}

/// What the helper is told, as [`Sandboxed::helper_args`] writes it and [`HelperArgs::parse`]
/// reads it (`sandbox-exec` first; both binaries take the same line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperArgs {
    pub settings: SandboxSettings,
    pub writable: Vec<PathBuf>,
    /// The mount namespace's changes.
    pub mounts: protected::SandboxMounts,
    /// Whether the command gets its own user, mount and pid namespaces (and `/proc`): set by
    /// the host where [`mount_namespaces`] holds, even with nothing to mount.
    pub isolate: bool,
    /// A descriptor (a socket to the host, [`LIFELINE_FD`]) that the namespace's init watches:
    /// when the host writes to it or goes away, every process of the namespace is ended. The
    /// host sees it close when they all have.
    pub lifeline: Option<i32>,
    /// A descriptor ([`READ_RULES_FD`]) holding what the command may read ([`read_rules`]);
    /// without it, everything.
    pub read_rules: Option<i32>,
    /// A descriptor ([`READ_RULES_FD`]) holding a Landlock ruleset the host built with those
    /// rules ([`ReadHanded::Layer`]); `read_after`: the rules to add to it after the mounts.
    pub read_layer: Option<i32>,
    pub read_after: Vec<(read_rules::ReadRule, PathBuf)>,
    pub tmpdir: PathBuf,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// The helper's usage, for its errors.
pub const HELPER_USAGE: &str =
    "usage: handoff-nvim sandbox-exec --sandbox workspace-write|read-only --network true|false [--writable DIR]... [--isolate true|false] [--git-view DIR --git-state DIR]... [--lifeline FD] [--read-rules FD | --read-layer FD [--read-after RULE]...] [--read-only PATH]... [--hide PATH]... --tmpdir DIR -- PROGRAM [ARGS]...";

impl HelperArgs {
    /// The folders the command may write (besides `/dev/null`): the temp folder, and in
    /// `workspace-write` those the host named. Landlock lets it write there, and the mount
    /// namespace keeps them writable where everything else is read-only.
    pub fn writable_roots(&self) -> Vec<&Path> {
        let mut roots = vec![self.tmpdir.as_path()];
        if self.settings.mode == SandboxMode::WorkspaceWrite {
            roots.extend(self.writable.iter().map(PathBuf::as_path));
        }
        roots
    }

    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<HelperArgs, String> {
        let mut args = args.into_iter();
        if args.next().is_none_or(|a| a != HELPER_COMMAND) {
            return Err(HELPER_USAGE.into());
        }
        let (mut mode, mut network, mut writable, mut tmpdir) = (None, None, Vec::new(), None);
        let mut mounts = protected::SandboxMounts::default();
        let mut isolate = false;
        let (mut lifeline, mut read_rules, mut read_layer, mut read_after) = (None, None, None, Vec::new());
        let (mut git_views, mut git_states) = (Vec::new(), Vec::new());
        loop {
            let Some(flag) = args.next() else { return Err(HELPER_USAGE.into()) };
            if flag == "--" {
                break;
            }
            let value = args.next().ok_or_else(|| format!("{} needs a value; {HELPER_USAGE}", flag.to_string_lossy()))?;
            let text = value.to_string_lossy();
            match flag.to_str() {
                Some("--sandbox") => mode = Some(SandboxMode::parse(&text).ok_or_else(|| format!("unknown sandbox {text:?}"))?),
                Some("--network") => network = Some(text.parse::<bool>().map_err(|_| format!("--network takes true or false, not {text:?}"))?),
                Some("--writable") => writable.push(PathBuf::from(value)),
                Some("--git-view") => git_views.push(PathBuf::from(value)),
                Some("--git-state") => git_states.push(PathBuf::from(value)),
                Some("--read-only") => mounts.read_only.push(PathBuf::from(value)),
                Some("--hide") => mounts.hidden.push(PathBuf::from(value)),
                Some("--isolate") => isolate = text.parse::<bool>().map_err(|_| format!("--isolate takes true or false, not {text:?}"))?,
                Some("--tmpdir") => tmpdir = Some(PathBuf::from(value)),
                Some("--lifeline") => lifeline = Some(text.parse::<i32>().map_err(|_| format!("--lifeline takes a descriptor, not {text:?}"))?),
                Some("--read-rules") => read_rules = Some(text.parse::<i32>().map_err(|_| format!("--read-rules takes a descriptor, not {text:?}"))?),
                Some("--read-layer") => read_layer = Some(text.parse::<i32>().map_err(|_| format!("--read-layer takes a descriptor, not {text:?}"))?),
                Some("--read-after") => read_after.push(read_rules::decode_one(&value).map_err(|e| format!("--read-after: {e}"))?),
                _ => return Err(format!("unknown option {}; {HELPER_USAGE}", flag.to_string_lossy())),
            }
        }
        let command: Vec<OsString> = args.collect();
        if git_views.len() != git_states.len() {
            return Err(format!("each --git-view needs its --git-state; {HELPER_USAGE}"));
        }
        mounts.git_views = git_views.into_iter().zip(git_states).collect();
        if read_rules.is_some() && read_layer.is_some() {
            return Err(format!("--read-rules and --read-layer are two ways to say the same; {HELPER_USAGE}"));
        }
        match (mode, network, tmpdir) {
            (Some(SandboxMode::Off), ..) => Err("sandbox-exec needs --sandbox workspace-write or read-only".into()),
            (Some(mode), Some(network), Some(tmpdir)) if !command.is_empty() => {
                Ok(HelperArgs { settings: SandboxSettings { mode, network }, writable, mounts, isolate, lifeline, read_rules, read_layer, read_after, tmpdir, command })
            }
            _ => Err(HELPER_USAGE.into()),
        }
    }
}

/// The binary that confines commands: `handoff-sandbox` beside this binary, else this one
/// (`handoff-nvim sandbox-exec`), taken once as the host starts ([`helper::take_at_start`]):
/// a sealed in-memory copy, or this process's own image, never a file a command could have
/// replaced since ([`helper`]). `Err`: why there is none (commands then ask).
/// How a command runs in the sandbox of `settings` here (the agent's bash, an external
/// agent's terminal): the helper, the sandbox's temp folder, whether it has its mount
/// namespace; `scope`: the run the command belongs to. `Err` says why the sandbox cannot be
/// enforced or set up (the command must then be asked about before it runs outside).
pub fn confine(settings: SandboxSettings, scope: Option<CommandScope>) -> Result<Sandboxed, String> {
    if let Err(why) = Support::probe().enforceable() {
        return Err(format!("the sandbox cannot be enforced: {why}"));
    }
    match (helper_binary(), private_tmpdir()) {
        (Ok(helper), Ok(tmpdir)) => Ok(Sandboxed { helper, settings, tmpdir, mounts: mount_namespaces().is_ok(), scope }),
        (Err(e), _) | (_, Err(e)) => Err(format!("the sandbox cannot be set up: {e}")),
    }
}

pub fn helper_binary() -> std::io::Result<HelperBinary> {
    helper::taken().map_err(std::io::Error::other)
}

/// The folder [`private_tmpdir`] made, once it did.
static MADE: OnceLock<PathBuf> = OnceLock::new();

/// The sandbox's temp folder for this process: a new folder `$TMPDIR/handoff-sandbox-XXXXXX`
/// (an unpredictable name, mode 0700, made with `mkdir`, which never follows a symlink another
/// user planted), made on first use and removed as the host exits ([`remove_private_tmpdir`]).
/// Its real path as it was made: what [`own_folder_outside`] compares with a project.
pub fn private_tmpdir() -> std::io::Result<PathBuf> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = crate::sync::lock(&LOCK);
    if let Some(dir) = MADE.get() {
        return Ok(dir.clone());
    }
    let dir = tempfile::Builder::new().prefix("handoff-sandbox-").permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700)).tempdir()?.keep();
    let dir = std::fs::canonicalize(dir)?;
    Ok(MADE.get_or_init(|| dir).clone())
}

/// `Ok` when `own`, the command's temp folder ([`private_tmpdir`]: its real path as made), is
/// outside `project` (a real path); else why a command there cannot run. Inside the project
/// (a `$TMPDIR` of the project's), a command could rename the folder above it and leave a
/// link by its name: the next command's writable temp folder would be what the link names (the
/// home folder, say). Git's views' state is made in the same `$TMPDIR` (`git::STATE_ROOT`):
/// this keeps it out of the project too.
pub fn own_folder_outside(own: &Path, project: &Path) -> std::io::Result<()> {
    if !own.starts_with(project) {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "the sandbox's own folder {} is inside the project {}: a command could move it and leave a link in its place, which the next command would write through. Set TMPDIR to a folder outside the project (or run the command without the sandbox)",
            own.display(),
            project.display()
        ),
    ))
}

/// Removes this process's temp folder ([`private_tmpdir`]) and what commands left in it, if it
/// was made, and the git views' state (`git::remove_state_root`): called as the host exits, so
/// that no folder per editor session piles up.
pub fn remove_private_tmpdir() {
    // A probe still running (a start that failed at once) would find its folders gone and
    // answer that this system has no mount namespace: its answer comes first.
    if PROBE_STARTED.load(std::sync::atomic::Ordering::SeqCst) {
        let _ = mount_namespaces();
    }
    git::remove_state_root();
    if let Some(dir) = MADE.get() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            tracing::debug!(dir = %dir.display(), error = %e, "cannot remove the sandbox's temp folder");
        }
    }
}

/// Why a sandboxed command's result looks blocked by the sandbox (its failing line), or `None`.
///
/// A failure (`exit_code` not 0) whose output says "Permission denied", "Operation not
/// permitted" or "Read-only file system" about a path outside the writable folders, or that a
/// connection was refused by the network rules (`network`: they allow it, so a network error is
/// the network's). A denial inside the project is the file's own
/// permissions, not the sandbox: it is not offered a re-run.
pub fn looks_blocked(exit_code: Option<i32>, output: &str, writable: &[&Path], network: bool) -> Option<String> {
    if exit_code == Some(0) {
        return None;
    }
    const DENIALS: [&str; 4] = ["permission denied", "operation not permitted", "read-only file system", "eacces"];
    const NETWORK: [&str; 6] = [
        "network is unreachable",
        "could not resolve host",
        "temporary failure in name resolution",
        "name or service not known",
        "failed to establish a new connection",
        "/dev/tcp/",
    ];
    for line in output.lines() {
        let lower = line.to_ascii_lowercase();
        if !network && NETWORK.iter().any(|n| lower.contains(n)) {
            return Some(line.trim().to_string());
        }
        if !DENIALS.iter().any(|d| lower.contains(d)) {
            continue;
        }
        let paths = paths_in(line);
        // A denial that names no path (a socket, a signal) is the sandbox's as likely as not.
        if paths.is_empty() || paths.iter().any(|p| !writable.iter().any(|w| p.starts_with(w))) {
            return Some(line.trim().to_string());
        }
    }
    None
}

/// The absolute paths a line of error output names (`touch: cannot touch '/etc/x': …`,
/// `bash: /etc/x: Permission denied`).
fn paths_in(line: &str) -> Vec<PathBuf> {
    line.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '‘' | '’' | '(' | ')' | ','))
        .map(|w| w.trim_end_matches(':'))
        .filter(|w| w.starts_with('/') && w.len() > 1)
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforceable_needs_landlock_with_tcp_rules() {
        if !cfg!(target_os = "linux") {
            return;
        }
        assert!(Support { abi: 0 }.enforceable().unwrap_err().contains("no Landlock"));
        assert!(Support { abi: 3 }.enforceable().unwrap_err().contains("ABI is 3"));
        assert!(Support { abi: 4 }.enforceable().is_ok());
        assert!(Support { abi: 5 }.summary().contains("except signals"));
        assert_eq!(Support { abi: 7 }.summary(), "Landlock ABI 7: fully enforced");
    }

    #[test]
    fn a_denial_outside_the_project_looks_blocked_and_one_inside_does_not() {
        let project = Path::new("/work/p");
        let w = [project, Path::new("/tmp/handoff-sandbox-1")];
        let blocked = looks_blocked(Some(1), "touch: cannot touch '/etc/x': Permission denied\n", &w, false);
        assert_eq!(blocked.as_deref(), Some("touch: cannot touch '/etc/x': Permission denied"));
        assert!(looks_blocked(Some(1), "bash: line 1: /home/u/.bashrc: Read-only file system", &w, false).is_some());
        assert_eq!(looks_blocked(Some(1), "bash: /work/p/locked: Permission denied", &w, false), None);
        assert_eq!(looks_blocked(Some(0), "touch: cannot touch '/etc/x': Permission denied", &w, false), None);
        assert_eq!(looks_blocked(Some(2), "error: no such file", &w, false), None);
        assert!(looks_blocked(Some(1), "bash: connect: Operation not permitted\nbash: line 1: /dev/tcp/127.0.0.1/80: Operation not permitted", &w, false).is_some());
        assert!(looks_blocked(Some(6), "curl: (6) Could not resolve host: example.com", &w, false).is_some());
        assert!(looks_blocked(None, "PermissionError: [Errno 1] Operation not permitted", &w, false).is_some());
    }

    #[test]
    fn the_helper_reads_back_what_the_host_writes() {
        let s = Sandboxed {
            helper: "/bin/handoff-sandbox".into(),
            settings: SandboxSettings { mode: SandboxMode::WorkspaceWrite, network: true },
            tmpdir: "/tmp/t".into(),
            mounts: false,
            scope: None,
        };
        let args = s.helper_args(Path::new("/p"), Path::new("/bin/bash"), &["-c", "echo -- --x"], &git::CommandViews::default(), &Default::default(), ReadHanded::Rules);
        let parsed = HelperArgs::parse(args).unwrap();
        assert_eq!(parsed.read_rules, Some(READ_RULES_FD));
        assert_eq!(parsed.settings, s.settings);
        assert_eq!(parsed.writable, [PathBuf::from("/p")]);
        assert_eq!(parsed.tmpdir, PathBuf::from("/tmp/t"));
        assert_eq!(parsed.command, ["/bin/bash", "-c", "echo -- --x"].map(OsString::from));
        let line = |a: &[&str]| HelperArgs::parse(a.iter().map(OsString::from));
        assert!(line(&["sandbox-exec", "--sandbox", "off", "--network", "false", "--tmpdir", "/t", "--", "true"]).is_err());
        assert!(line(&["sandbox-exec", "--sandbox", "read-only", "--network", "false", "--tmpdir", "/t", "--"]).is_err());
        assert!(line(&["sandbox-exec", "--sandbox", "read-only", "--network", "maybe", "--tmpdir", "/t", "--", "true"]).is_err());
        assert!(line(&["sandbox-exec", "--sandbox", "read-only", "--tmpdir", "/t", "--", "true"]).is_err(), "--network is required");
        let mounted = line(&["sandbox-exec", "--sandbox", "read-only", "--network", "false", "--git-view", "/p/.git", "--git-state", "/s/1", "--read-only", "/p/.git/config", "--hide", "/h/.ssh", "--tmpdir", "/t", "--", "true"]).unwrap();
        assert_eq!(mounted.mounts.git_views, [(PathBuf::from("/p/.git"), PathBuf::from("/s/1"))]);
        assert_eq!(mounted.mounts.read_only, [PathBuf::from("/p/.git/config")]);
        assert_eq!(mounted.mounts.hidden, [PathBuf::from("/h/.ssh")]);
    }

    #[test]
    fn helper_args_name_the_mode_the_project_and_the_tmpdir() {
        let s = Sandboxed {
            helper: "/bin/handoff-nvim".into(),
            settings: SandboxSettings { mode: SandboxMode::WorkspaceWrite, network: false },
            tmpdir: "/tmp/t".into(),
            mounts: false,
            scope: None,
        };
        let args = s.helper_args(Path::new("/p"), Path::new("/bin/bash"), &["-c", "ls"], &git::CommandViews::default(), &Default::default(), ReadHanded::Nothing);
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            ["sandbox-exec", "--sandbox", "workspace-write", "--network", "false", "--writable", "/p", "--tmpdir", "/tmp/t", "--", "/bin/bash", "-c", "ls"]
        );
        let ro = Sandboxed { settings: SandboxSettings { mode: SandboxMode::ReadOnly, network: true }, ..s };
        let args = ro.helper_args(Path::new("/p"), Path::new("/bin/bash"), &["-c", "ls"], &git::CommandViews::default(), &Default::default(), ReadHanded::Nothing);
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(&args[..6], ["sandbox-exec", "--sandbox", "read-only", "--network", "true", "--tmpdir"]);
    }
}
