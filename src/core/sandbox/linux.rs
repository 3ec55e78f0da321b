//! The helper's side on Linux: restrict this (single-threaded) process, then exec the command.
//!
//! In order: a mount namespace of its own (in a user namespace, when the host found that this
//! system allows one), where the project's planted-code paths are bound read-only, its `.git`
//! pinned, credential folders covered by an empty read-only tmpfs and credential files and the
//! editor's socket by `/dev/null` — what Landlock cannot do, since it cannot take a sub-folder
//! back from a writable one; then no_new_privs; Landlock (writes only where allowed, no TCP,
//! no signals or abstract sockets outside the sandbox from ABI 6); a seccomp filter (with the
//! network off: no socket but `AF_UNIX` stream ones, and no `connect`, `bind`, `listen`,
//! `accept` or addressed send at all, so only socketpairs talk; always: no `ptrace`, no
//! `io_uring`, no mount changes). Every child of the command inherits all of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use seccompiler::{BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};

use super::{HelperArgs, SandboxMode, Support};


/// Restricts this process as `args` say and execs the command with `TMPDIR` set to the
/// sandbox's temp folder; returns only when the command did not run, saying why.
pub fn exec(args: &HelperArgs) -> String {
    use std::os::unix::process::CommandExt;
    if let Err(e) = restrict_self(args) {
        return format!("{e}: the command was not run (--sandbox off runs commands outside the sandbox)");
    }
    // Descriptors the host (or the editor before it) left open do not reach the command.
    close_inherited();
    let Some((program, rest)) = args.command.split_first() else { return super::HELPER_USAGE.into() };
    let error = std::process::Command::new(program).args(rest).env("TMPDIR", &args.tmpdir).exec();
    format!("cannot run {}: {error}", Path::new(program).display())
}

/// Why the sandbox could not be put in place (the helper refuses to run the command).
#[derive(Debug, thiserror::Error)]
pub enum RestrictError {
    #[error("the sandbox cannot be enforced: {0}")]
    Unsupported(String),
    #[error("the sandbox was only partly enforced ({0})")]
    Partial(String),
    #[error("cannot set up Landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("cannot open {path} for a Landlock rule: {source}")]
    Path { path: PathBuf, source: landlock::PathFdError },
    #[error("cannot set up the seccomp filter: {0}")]
    Seccomp(#[from] seccompiler::Error),
    #[error("cannot build the seccomp filter: {0}")]
    SeccompFilter(#[from] seccompiler::BackendError),
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(std::io::Error),
    #[error("the host's lifeline (descriptor {0}) is not open: the command's processes could outlive it")]
    NoLifeline(i32),
    #[error("cannot make the sandbox's mount namespace ({step}): {source}")]
    Mount { step: String, source: std::io::Error },
}

/// The file rights Landlock must enforce (ABI 3: writes, renames across folders, truncation).
const FS_ABI: ABI = ABI::V3;

/// Restricts this process for good: no_new_privs, Landlock, seccomp. The process must be
/// single-threaded (Landlock and seccomp bind the calling thread, and its later children).
pub fn restrict_self(r: &HelperArgs) -> Result<(), RestrictError> {
    let support = Support::probe();
    support.enforceable().map_err(RestrictError::Unsupported)?;
    if let Some(fd) = r.lifeline {
        // SAFETY: F_GETFD reads a descriptor's flags; no pointers.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(RestrictError::NoLifeline(fd));
        }
    }
    if r.isolate || !r.mounts.is_empty() {
        mount_namespace(&r.mounts)?;
        // From here on this process is pid 1 of the command's own pid namespace.
        pid_namespace()?;
    }
    no_new_privs()?;
    landlock(r, support)?;
    seccomp(r.settings.network)?;
    if r.isolate || !r.mounts.is_empty() {
        // This process stays as the namespace's init; the command runs in a child of it.
        init_and_fork(r.lifeline);
    }
    Ok(())
}

fn no_new_privs() -> Result<(), RestrictError> {
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes no pointers and only sets a flag on us.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if rc != 0 {
        return Err(RestrictError::NoNewPrivs(std::io::Error::last_os_error()));
    }
    Ok(())
}

fn path_fd(path: &Path) -> Result<PathFd, RestrictError> {
    PathFd::new(path).map_err(|source| RestrictError::Path { path: path.to_path_buf(), source })
}

fn landlock(r: &HelperArgs, support: Support) -> Result<(), RestrictError> {
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement).handle_access(AccessFs::from_all(FS_ABI))?;
    if !r.settings.network {
        // No port is allowed: every TCP bind and connect is refused.
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    if support.signals_scoped() {
        // Signals, and abstract AF_UNIX sockets (which have no file Landlock could guard), only
        // within the sandbox.
        ruleset = ruleset.scope(Scope::Signal | Scope::AbstractUnixSocket)?;
    }
    let mut created = ruleset.create()?;
    // Read (and run) everything; write only where allowed.
    created = created.add_rule(PathBeneath::new(path_fd(Path::new("/"))?, AccessFs::from_read(FS_ABI)))?;
    let mut writable: Vec<&Path> = vec![&r.tmpdir];
    if r.settings.mode == SandboxMode::WorkspaceWrite {
        writable.extend(r.writable.iter().map(PathBuf::as_path));
    }
    for dir in writable {
        created = created.add_rule(PathBeneath::new(path_fd(dir)?, AccessFs::from_all(FS_ABI)))?;
    }
    created = created.add_rule(PathBeneath::new(path_fd(Path::new("/dev/null"))?, AccessFs::from_file(FS_ABI)))?;
    let status = created.restrict_self()?;
    if !status.no_new_privs {
        return Err(RestrictError::Partial("no_new_privs is not set".into()));
    }
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        other => Err(RestrictError::Partial(format!("Landlock: {other:?}"))),
    }
}

/// Denied with EPERM. With the network off: sockets of any family but `AF_UNIX`, `AF_UNIX`
/// datagram sockets (a datagram may carry its own address), and `connect`, `bind`, `listen`,
/// `accept`, `accept4` on any socket, and `sendto` with an address: a command's sockets are
/// the socketpairs it makes, and nothing it did not make (the editor's RPC socket, D-Bus,
/// an SSH or Docker agent) can be reached. Always: `ptrace`, `io_uring` (its requests would
/// bypass these rules), and changes to the mounts (Landlock refuses them too).
fn seccomp(network: bool) -> Result<(), RestrictError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    if !network {
        let arg = |index: u8, op: SeccompCmpOp, value: u64| SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value);
        let not_unix = || -> Result<SeccompRule, seccompiler::BackendError> {
            SeccompRule::new(vec![arg(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?])
        };
        // The type's low bits, without SOCK_NONBLOCK and SOCK_CLOEXEC.
        let unix_datagram = || -> Result<SeccompRule, seccompiler::BackendError> {
            SeccompRule::new(vec![
                arg(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?,
                arg(1, SeccompCmpOp::MaskedEq(0xf), libc::SOCK_DGRAM as u64)?,
            ])
        };
        rules.insert(libc::SYS_socket, vec![not_unix()?, unix_datagram()?]);
        rules.insert(libc::SYS_socketpair, vec![not_unix()?]);
        for always in [libc::SYS_connect, libc::SYS_bind, libc::SYS_listen, libc::SYS_accept, libc::SYS_accept4] {
            rules.insert(always, Vec::new());
        }
        // `send` is `sendto` without an address: only an addressed one is refused.
        let addressed = SeccompCondition::new(4, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)?;
        rules.insert(libc::SYS_sendto, vec![SeccompRule::new(vec![addressed])?]);
    }
    for always in [
        libc::SYS_ptrace,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_mount_setattr,
    ] {
        // No condition: every call matches.
        rules.insert(always, Vec::new());
    }
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let program: BpfProgram = filter.try_into()?;
    seccompiler::apply_filter(&program)?;
    Ok(())
}

/// Marks every descriptor from 3 on close-on-exec (`close_range`, Linux 5.11): the command
/// gets stdin, stdout and stderr only. On an older kernel nothing changes (Rust's own
/// descriptors are close-on-exec already).
fn close_inherited() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range takes two numbers and flags, no pointers; with CLOEXEC it closes
    // nothing now, so no descriptor this process still uses goes away before the exec.
    unsafe { libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) };
}

fn mount_error(step: impl Into<String>) -> impl FnOnce(std::io::Error) -> RestrictError {
    let step = step.into();
    move |source| RestrictError::Mount { step, source }
}

fn os_result(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn cstring(path: &Path) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// `mount(source, target, fstype, flags, data)` with paths.
fn mount(source: Option<&Path>, target: &Path, fstype: Option<&str>, flags: libc::c_ulong, data: Option<&str>) -> std::io::Result<()> {
    let source = source.map(cstring).transpose()?;
    let target = cstring(target)?;
    let fstype = fstype.map(std::ffi::CString::new).transpose().map_err(std::io::Error::other)?;
    let data = data.map(std::ffi::CString::new).transpose().map_err(std::io::Error::other)?;
    let ptr = |c: &Option<std::ffi::CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string that lives across the call, or null.
    os_result(unsafe { libc::mount(ptr(&source), target.as_ptr(), ptr(&fstype), flags, ptr(&data).cast()) })
}

/// The flags a read-only remount must keep (a user namespace may not drop them: EPERM).
fn locked_flags(path: &Path) -> std::io::Result<libc::c_ulong> {
    let c = cstring(path)?;
    // SAFETY: statvfs fills the zeroed struct we own; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    os_result(unsafe { libc::statvfs(c.as_ptr(), &mut st) })?;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        // ST_RELATIME (the kernel's 4096): the libc crate names it for glibc only, and the
        // static release binary is built against musl.
        (4096, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

/// `path` bound onto itself, then made read-only (keeping the flags it must keep).
fn bind_read_only(source: &Path, target: &Path) -> std::io::Result<()> {
    mount(Some(source), target, None, libc::MS_BIND | libc::MS_REC, None)?;
    let keep = locked_flags(target)?;
    mount(None, target, None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | keep, None)
}

/// An overlay over the git folder `lower`: the command's writes land in `state/upper` (the
/// host merges git's data back after it, `sandbox::git`). `userxattr`: the overlay's marks are
/// `user.` attributes, which a user namespace may write.
fn git_view(lower: &Path, state: &Path) -> std::io::Result<()> {
    let options = format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        overlay_path(lower)?,
        overlay_path(&state.join("upper"))?,
        overlay_path(&state.join("work"))?
    );
    mount(Some(Path::new("overlay")), lower, Some("overlay"), libc::MS_NOSUID | libc::MS_NODEV, Some(&options))
}

/// A path in the overlay's options: `\`, `,` and `:` escaped, as the overlay reads them.
fn overlay_path(path: &Path) -> std::io::Result<String> {
    let text = path.to_str().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | ',' | ':') {
            out.push('\\');
        }
        out.push(c);
    }
    Ok(out)
}

/// Enters a user namespace (mapping this user to itself) and a mount namespace, and there
/// carries out `mounts`. Nothing of it propagates back to the system's mounts.
fn mount_namespace(mounts: &super::protected::SandboxMounts) -> Result<(), RestrictError> {
    enter_namespaces().map_err(mount_error("unshare"))?;
    // Our changes stay ours (as root without a user namespace, "/" may be shared).
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None).map_err(mount_error("make / private"))?;
    for (lower, state) in &mounts.git_views {
        git_view(lower, state).map_err(mount_error(format!("see {} through its view", lower.display())))?;
    }
    for path in &mounts.read_only {
        bind_read_only(path, path).map_err(mount_error(format!("make {} read-only", path.display())))?;
    }
    for path in &mounts.hidden {
        let hide = if path.is_dir() {
            mount(None, path, Some("tmpfs"), libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, Some("size=4k,mode=0500"))
        } else {
            bind_read_only(Path::new("/dev/null"), path)
        };
        hide.map_err(mount_error(format!("hide {}", path.display())))?;
    }
    Ok(())
}

/// `unshare(CLONE_NEWUSER | CLONE_NEWNS)` with this user and group mapped to themselves (the
/// files keep their owners); as root without user namespaces, a mount namespace alone.
fn enter_namespaces() -> std::io::Result<()> {
    if std::env::var(super::SIMULATED_NO_MOUNTS_VAR).is_ok_and(|v| v == "1") {
        return Err(std::io::Error::other(format!("simulated: no user namespaces ({})", super::SIMULATED_NO_MOUNTS_VAR)));
    }
    // SAFETY: getuid/getgid/unshare take no pointers.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if os_result(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) }).is_ok() {
        std::fs::write("/proc/self/setgroups", "deny")?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
        return Ok(());
    }
    let user_ns = std::io::Error::last_os_error();
    if uid == 0 && os_result(unsafe { libc::unshare(libc::CLONE_NEWNS) }).is_ok() {
        return Ok(());
    }
    Err(user_ns)
}

/// The pid namespace: `unshare(CLONE_NEWPID)`, then a fork. The parent (still in the host's
/// namespace) waits for the command's status from the child and exits with it, never
/// returning; the child, pid 1 of the new namespace, mounts a `/proc` of its own (the command
/// sees no process outside: not the editor's or the host's environment, which hold keys) and
/// returns. Background processes a command leaves keep running under that pid 1, as without
/// the sandbox.
fn pid_namespace() -> Result<(), RestrictError> {
    // SAFETY: unshare takes flags only.
    os_result(unsafe { libc::unshare(libc::CLONE_NEWPID) }).map_err(mount_error("unshare the pid namespace"))?;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two-int array we own.
    os_result(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }).map_err(mount_error("pipe"))?;
    let [read_end, write_end] = fds;
    // SAFETY: the helper is single-threaded (it runs nothing else before this), so the child
    // may go on running Rust code after the fork.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(mount_error("fork")(std::io::Error::last_os_error())),
        0 => {
            // SAFETY: closing our copy of the read end.
            unsafe { libc::close(read_end) };
            STATUS_PIPE.with(|p| p.set(write_end));
            let proc_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            mount(None, Path::new("/proc"), Some("proc"), proc_flags, None).map_err(mount_error("mount /proc"))
        }
        child => {
            // SAFETY: closing our copy of the write end.
            unsafe { libc::close(write_end) };
            let mut status = [0u8; 4];
            // SAFETY: reads at most 4 bytes into the array we own.
            let n = unsafe { libc::read(read_end, status.as_mut_ptr().cast(), 4) };
            let status = if n == 4 {
                i32::from_ne_bytes(status)
            } else {
                // pid 1 ended without a word (it could not start the command): its own status.
                let mut raw = 0;
                // SAFETY: waits for our own child, writing its status into `raw`.
                unsafe { libc::waitpid(child, &mut raw, 0) };
                raw
            };
            exit_like(status)
        }
    }
}

std::thread_local! {
    /// In pid 1 of the namespace: where the command's wait status goes to the helper outside.
    static STATUS_PIPE: std::cell::Cell<libc::c_int> = const { std::cell::Cell::new(-1) };
}

/// In pid 1 of the namespace, restricted already: forks the command's process (which returns
/// from here and execs it), then waits for it, tells the helper outside how it ended, and
/// reaps whatever the command left behind until nothing is left — or, when the host writes to
/// the `lifeline` or goes away (the run that started the command ended, or the editor quit),
/// ends every process of the namespace first.
fn init_and_fork(lifeline: Option<i32>) {
    let status_pipe = STATUS_PIPE.with(std::cell::Cell::get);
    // SAFETY: still single-threaded; see pid_namespace.
    let command = unsafe { libc::fork() };
    if command == 0 {
        // SAFETY: the command keeps neither the status pipe nor the lifeline.
        unsafe {
            libc::close(status_pipe);
            if let Some(fd) = lifeline {
                libc::close(fd);
            }
        }
        return;
    }
    if command > 0 {
        // pid 1 does not hold the command's output open: the host sees it end with the command.
        // SAFETY: open/dup2/close on descriptors we own.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            libc::close(null);
        }
        match lifeline {
            Some(fd) => reap_watching(command, status_pipe, fd),
            None => {
                let mut raw = 0;
                // SAFETY: waits for the child just forked.
                let waited = unsafe { libc::waitpid(command, &mut raw, 0) };
                if waited == command {
                    send_status(status_pipe, raw);
                }
                // SAFETY: reaping until ECHILD, taking every status.
                unsafe { while libc::waitpid(-1, std::ptr::null_mut(), 0) > 0 {} }
            }
        }
    }
    // SAFETY: ends pid 1 (and so the namespace) without running Rust's exit handlers twice.
    unsafe { libc::_exit(if command > 0 { 0 } else { 127 }) }
}

/// Writes the command's wait status to the helper outside, once, and closes the pipe.
fn send_status(status_pipe: libc::c_int, raw: libc::c_int) {
    let bytes = raw.to_ne_bytes();
    // SAFETY: writes the 4 bytes of the array we own, then closes our pipe.
    unsafe {
        libc::write(status_pipe, bytes.as_ptr().cast(), 4);
        libc::close(status_pipe);
    }
}

extern "C" fn on_child(_: libc::c_int) {}

/// pid 1's loop with a lifeline: reaps children as they end (SIGCHLD interrupts the wait),
/// sends the command's status when it ends, returns when no child is left, and ends them all
/// when the lifeline becomes readable or hangs up.
fn reap_watching(command: libc::pid_t, status_pipe: libc::c_int, lifeline: libc::c_int) {
    // SAFETY: signal masks and a handler that does nothing, in this single-threaded process;
    // SIGCHLD stays blocked but while ppoll waits, so no child's end slips between the reap
    // and the wait.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_child as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut blocked);
        libc::sigaddset(&mut blocked, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut());
    }
    let mut sent = false;
    loop {
        loop {
            let mut raw = 0;
            // SAFETY: reaps any child without waiting.
            let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
            if pid == command && !sent {
                send_status(status_pipe, raw);
                sent = true;
            }
            if pid == 0 {
                break;
            }
            if pid < 0 {
                // No child left: the namespace is done.
                return;
            }
        }
        let mut fds = [libc::pollfd { fd: lifeline, events: libc::POLLIN, revents: 0 }];
        // SAFETY: an empty mask while waiting (SIGCHLD may interrupt it); fds is ours.
        let ready = unsafe {
            let mut open: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut open);
            libc::ppoll(fds.as_mut_ptr(), 1, std::ptr::null(), &open)
        };
        if ready > 0 && fds[0].revents != 0 {
            // SAFETY: kill(-1) from pid 1 of a pid namespace reaches every other process in it.
            unsafe {
                libc::kill(-1, libc::SIGKILL);
                while libc::waitpid(-1, std::ptr::null_mut(), 0) > 0 {}
            }
            return;
        }
    }
}

/// Ends this process as the wait status `status` says: the same exit code, or the same signal.
fn exit_like(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: back to the default action for that signal, then raise it on ourselves.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        std::process::exit(128 + signal);
    }
    std::process::exit(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 1 })
}

/// `handoff-nvim sandbox-probe`: whether this system lets the helper make its namespaces —
/// read-only binds (an AppArmor-restricted user namespace has no rights to mount), a pid
/// namespace and its `/proc` (refused where `/proc` is partly covered, as in some containers).
/// `Err`: why not.
pub fn probe_mounts() -> Result<(), String> {
    // A read-only bind and a git view, over folders of the probe's own (removed after).
    let scratch = tempfile::Builder::new().prefix("handoff-probe-").tempdir().map_err(|e| format!("cannot make a folder to probe in: {e}"))?;
    for sub in ["ro", "lower", "state/upper", "state/work"] {
        std::fs::create_dir_all(scratch.path().join(sub)).map_err(|e| format!("cannot make a folder to probe in: {e}"))?;
    }
    let (read_only, view) = (scratch.path().join("ro"), (scratch.path().join("lower"), scratch.path().join("state")));
    let mounts = super::protected::SandboxMounts { read_only: vec![read_only.clone()], git_views: vec![view.clone()], ..Default::default() };
    let made = mount_namespace(&mounts);
    for target in [&read_only, &view.0] {
        if let Ok(target) = cstring(target) {
            // SAFETY: umount2 takes a NUL-terminated path we own and flags.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
    super::git::remove_view_state(&view.1);
    made.map_err(|e| e.to_string())?;
    // SAFETY: unshare takes flags only; fork in this single-threaded process.
    os_result(unsafe { libc::unshare(libc::CLONE_NEWPID) }).map_err(|e| format!("cannot make a pid namespace: {e}"))?;
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let proc_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        let code = if mount(None, Path::new("/proc"), Some("proc"), proc_flags, None).is_ok() { 0 } else { 1 };
        // SAFETY: ends the probe's child at once.
        unsafe { libc::_exit(code) };
    }
    if pid < 0 {
        return Err(format!("cannot fork: {}", std::io::Error::last_os_error()));
    }
    let mut raw = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut raw, 0) };
    if libc::WIFEXITED(raw) && libc::WEXITSTATUS(raw) == 0 {
        Ok(())
    } else {
        Err("cannot mount a /proc of its own in a pid namespace (is /proc partly covered, as in a container?)".into())
    }
}
