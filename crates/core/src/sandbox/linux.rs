//! The helper's side on Linux: restrict this (single-threaded) process, then exec the command.
//!
//! In order: a mount namespace of its own (in a user namespace, when the host found that this
//! system allows one), where every mount is read-only but the writable folders (so `chmod`,
//! `chown`, `utimes` and `setxattr` outside them fail, which Landlock does not cover), the
//! terminals are the namespace's own, git's folders are seen through their views, the
//! project's planted-code paths are bound read-only, credential folders covered by an empty
//! read-only tmpfs and credential files and the editor's socket by `/dev/null` — what Landlock
//! cannot do, since it cannot take a sub-folder back from a writable one; a pid namespace whose
//! pid 1 is this helper; then no_new_privs; Landlock (writes only where allowed, no TCP, no
//! signals or abstract sockets outside the sandbox from ABI 6); a seccomp filter (see
//! [`seccomp`]). The command runs in a session of its own, without a controlling terminal.
//! Every child of the command inherits all of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use seccompiler::{BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};

use super::{HelperArgs, Support};


/// Restricts this process as `args` say and execs the command with `TMPDIR` set to the
/// sandbox's temp folder; returns only when the command did not run, saying why.
pub fn exec(args: &HelperArgs) -> String {
    use std::os::unix::process::CommandExt;
    if let Err(e) = restrict_self(args) {
        return format!("{e}: the command was not run (--sandbox off runs commands outside the sandbox)");
    }
    // Descriptors the host (or the editor before it) left open do not reach the command.
    close_inherited();
    if let Err(e) = leave_terminal() {
        return format!("the sandbox cannot be enforced: cannot leave the terminal: {e}: the command was not run (--sandbox off runs commands outside the sandbox)");
    }
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
    #[error("cannot read what the command may read (descriptor {fd}): {source}")]
    ReadRules { fd: i32, source: std::io::Error },
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
    if in_namespaces(r) {
        mount_namespace(&r.mounts, &r.writable_roots())?;
        // From here on this process is pid 1 of the command's own pid namespace.
        pid_namespace()?;
    }
    no_new_privs()?;
    landlock(r, support)?;
    seccomp(r.settings.network)?;
    if in_namespaces(r) {
        // This process stays as the namespace's init; the command runs in a child of it.
        init_and_fork(r.lifeline);
    }
    Ok(())
}

/// Whether the command gets its namespaces (user, mount, pid): the host found them possible, or
/// it asked for mounts (which the helper then refuses to run without).
fn in_namespaces(r: &HelperArgs) -> bool {
    r.isolate || !r.mounts.is_empty()
}

/// The command runs in a session of its own, without a controlling terminal: nothing it runs
/// can type into the terminal the editor or the CLI runs in (`TIOCSTI`: the user's shell
/// would read it after), nor get its signals. In a pid namespace this process is pid 1's
/// child and makes the session; without one it leads its process group (bash ends the group
/// at a timeout), which cannot make a session, so it gives up its terminal instead.
fn leave_terminal() -> std::io::Result<()> {
    // SAFETY: setsid takes nothing.
    if unsafe { libc::setsid() } >= 0 {
        return Ok(());
    }
    // SAFETY: open with a NUL-terminated path; ioctl(TIOCNOTTY) takes no argument; close ours.
    unsafe {
        let tty = libc::open(c"/dev/tty".as_ptr(), libc::O_RDONLY | libc::O_NOCTTY | libc::O_CLOEXEC);
        if tty < 0 {
            // No controlling terminal to leave.
            return Ok(());
        }
        let rc = libc::ioctl(tty, libc::TIOCNOTTY);
        libc::close(tty);
        os_result(rc)
    }
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
    // The host's read layer, when it handed one: what the command may read, built ahead of
    // the command (`read_rules::ReadRules::take_layer`); the rules on what this namespace
    // mounted (`r.read_after`) are added to it here, then it binds this process and goes.
    let layered = match r.read_layer {
        Some(fd) => {
            // SAFETY: the host handed this descriptor to us alone (a ruleset made for this
            // command); it is closed as it drops, before the command runs.
            let layer = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            use std::os::fd::AsFd;
            for (fd, access) in opened_read_rules(&r.read_after, AccessFs::Refer.into()) {
                // An error leaves this rule out (the path stays unreadable, never the other way).
                let _ = add_rule_to(layer.as_fd(), fd.as_fd(), access);
            }
            restrict_to(layer.as_fd()).map_err(|source| RestrictError::ReadRules { fd, source })?;
            true
        }
        None => false,
    };
    // With the host's layer, this one handles what that one does not: writes, the network,
    // signals; without it, everything.
    let handled = if layered { AccessFs::from_all(FS_ABI) & !AccessFs::from_read(FS_ABI) } else { AccessFs::from_all(FS_ABI) };
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement).handle_access(handled)?;
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
    // Read (and run) what the host's rules name (everything but the credentials, existing or
    // not), or everything without them; write only where allowed.
    let read_rules = match r.read_rules {
        Some(fd) if !layered => Some(super::rule_wire::load(fd).map_err(|source| RestrictError::ReadRules { fd, source })?),
        _ => None,
    };
    match &read_rules {
        Some(rules) => add_read_rules(&mut created, rules),
        None if layered => {}
        None => created = created.add_rule(PathBeneath::new(path_fd(Path::new("/"))?, AccessFs::from_read(FS_ABI)))?,
    }
    for dir in r.writable_roots() {
        created = created.add_rule(PathBeneath::new(path_fd(dir)?, write_access(dir, read_rules.as_deref(), layered)))?;
    }
    created = created.add_rule(PathBeneath::new(path_fd(Path::new("/dev/null"))?, AccessFs::from_file(FS_ABI) & handled))?;
    if in_namespaces(r) {
        // The namespace's own terminals (`private_terminals`): `script` and the like open them.
        for terminal in PRIVATE_TERMINALS {
            created = created.add_rule(PathBeneath::new(path_fd(Path::new(terminal))?, AccessFs::from_file(FS_ABI) & handled))?;
        }
    }
    let status = created.restrict_self()?;
    if !status.no_new_privs {
        return Err(RestrictError::Partial("no_new_privs is not set".into()));
    }
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        other => Err(RestrictError::Partial(format!("Landlock: {other:?}"))),
    }
}

/// The rights on a writable folder: all of them, but reading where the folder holds one on the
/// way to a credential (the project is the home folder): there the read rules decide; and
/// none of reading under the host's read layer (`layered`), which decides it.
fn write_access(dir: &Path, read_rules: Option<&[(super::rule_wire::ReadRule, PathBuf)]>, layered: bool) -> landlock::BitFlags<AccessFs> {
    use super::rule_wire::ReadRule;
    let holds_the_way = read_rules.is_some_and(|rules| rules.iter().any(|(rule, p)| *rule == ReadRule::ListOnly && p.starts_with(dir)));
    if holds_the_way || layered {
        AccessFs::from_all(FS_ABI) & !AccessFs::from_read(FS_ABI)
    } else {
        AccessFs::from_all(FS_ABI)
    }
}

/// Adds the host's read rules (`read_rules`): each path opened with no symlink followed, a
/// folder read whole or listed only, a file read. What cannot be opened or added (gone since
/// the host listed it, a link, a socket) is left out: it stays unreadable, never the other way.
/// Public for the benchmark (`benches/inprocess.rs`), which times it without restricting itself.
pub fn add_read_rules(created: &mut landlock::RulesetCreated, rules: &[(super::rule_wire::ReadRule, PathBuf)]) {
    for (fd, access) in opened_read_rules(rules, landlock::BitFlags::empty()) {
        // An error leaves this rule out (the ruleset stays as it was).
        let _ = (&mut *created).add_rule(PathBeneath::new(fd, access));
    }
}

/// Each of `rules` opened with no symlink followed, with the rights it gives by what its path
/// is (`folder_extra` added on folders); what cannot be opened, or is neither a file nor a
/// folder, left out.
fn opened_read_rules<'a>(
    rules: &'a [(super::rule_wire::ReadRule, PathBuf)],
    folder_extra: landlock::BitFlags<AccessFs>,
) -> impl Iterator<Item = (std::os::fd::OwnedFd, landlock::BitFlags<AccessFs>)> + 'a {
    use super::rule_wire::ReadRule;
    use std::os::fd::{AsFd, AsRawFd};
    // The folder last listed (`ListOnly`) and its descriptor: the rules for its entries come
    // after it (`read_rules::listed`), and each is opened from it, one name without a symlink
    // (not the whole path again from `/`).
    let mut folder: Option<(&'a Path, std::os::fd::OwnedFd)> = None;
    rules.iter().filter_map(move |(rule, path)| {
        let in_folder = folder.as_ref().filter(|(dir, _)| path.parent() == Some(*dir));
        let fd = match (in_folder, path.file_name()) {
            (Some((_, dir)), Some(name)) => super::rule_wire::open_no_symlinks_in(dir.as_fd(), Path::new(name)).ok()?,
            _ => super::rule_wire::open_no_symlinks(path).ok()?,
        };
        // SAFETY: fstat fills the zeroed struct we own, from a descriptor we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return None;
        }
        let access = match (rule, st.st_mode & libc::S_IFMT) {
            (ReadRule::Beneath, libc::S_IFDIR) => AccessFs::from_read(FS_ABI) | folder_extra,
            (ReadRule::Beneath, libc::S_IFREG) => AccessFs::ReadFile | AccessFs::Execute,
            (ReadRule::ListOnly, libc::S_IFDIR) => {
                folder = fd.try_clone().ok().map(|copy| (path.as_path(), copy));
                folder_extra | AccessFs::ReadDir
            }
            _ => return None,
        };
        Some((fd, access))
    })
}

/// What the host's read layer handles: reading (and running), and `Refer` — which Landlock
/// handles in every ruleset whether named or not (a ruleset that does not grant it refuses
/// every rename and link across folders), so the layer grants it on every folder it names and
/// leaves renames to the write layer, which grants it only in the writable folders.
fn layer_access() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_read(FS_ABI) | AccessFs::Refer
}

/// In the host: a Landlock ruleset with `rules` (opened now, with no symlink followed), for
/// one command's helper to add what its namespace mounted to and bind itself with (see
/// `read_rules::ReadRules::take_layer`). Its descriptor is close-on-exec.
pub fn read_layer(rules: &[(super::rule_wire::ReadRule, PathBuf)]) -> Result<std::os::fd::OwnedFd, RestrictError> {
    use std::os::fd::AsFd;
    let created = Ruleset::default().set_compatibility(CompatLevel::HardRequirement).handle_access(layer_access())?.create()?;
    let layer = Option::<std::os::fd::OwnedFd>::from(created).ok_or_else(|| RestrictError::Unsupported("Landlock made no ruleset".into()))?;
    // Added as the helper adds its `--read-after` rules: `opened_read_rules` has looked at
    // each path's kind already (the crate's `PathBeneath` would `fstat` it a second time).
    for (fd, access) in opened_read_rules(rules, AccessFs::Refer.into()) {
        // An error leaves this rule out (the path stays unreadable, never the other way).
        let _ = add_rule_to(layer.as_fd(), fd.as_fd(), access);
    }
    Ok(layer)
}

/// `landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH)` on a ruleset this process holds only as a
/// descriptor (the host's read layer).
fn add_rule_to(ruleset: std::os::fd::BorrowedFd<'_>, path: std::os::fd::BorrowedFd<'_>, access: landlock::BitFlags<AccessFs>) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let attr = PathBeneathAttr { allowed_access: access.bits(), parent_fd: path.as_raw_fd() };
    // SAFETY: the attribute lives across the call; both descriptors are open.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_add_rule, ruleset.as_raw_fd(), LANDLOCK_RULE_PATH_BENEATH, &attr as *const PathBeneathAttr, 0 as libc::c_uint) };
    syscall_result(rc).map(drop)
}

/// `landlock_restrict_self`: this process (and what it runs) bound by `ruleset`, on top of
/// whatever binds it already. no_new_privs must be set.
fn restrict_to(ruleset: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a descriptor and flags, no pointers.
    syscall_result(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0 as libc::c_uint) }).map(drop)
}

/// Denied with EPERM:
/// - always: `ptrace`, `io_uring` (its requests would bypass these rules), changes to the
///   mounts (Landlock refuses them too); the kernel's keyrings (`add_key`, `request_key`,
///   `keyctl`: the session keyring is the user's, with what other programs keep there); the
///   `ioctl`s `TIOCSTI` and `TIOCLINUX` (typing into a terminal, or pasting its selection:
///   the user's shell would run it after; the command has no controlling terminal already,
///   this is belt and braces); and `AF_UNIX` sockets that are not streams, made by `socket`
///   or `socketpair` — a datagram's `sendmsg` may carry any path as its destination, which a
///   filter cannot read (in `AF_UNIX`, `SOCK_RAW` is a datagram socket too).
/// - with the network off: sockets of any family but `AF_UNIX`, and `connect`, `bind`,
///   `listen`, `accept`, `accept4` on any socket, and `sendto` with an address: a command's
///   sockets are the socketpairs it makes, and nothing it did not make (the editor's RPC
///   socket, D-Bus, an SSH or Docker agent) can be reached.
/// - with the network on: any `AF_UNIX` socket but a socketpair: the network opens, other
///   programs' sockets (another editor's, D-Bus, an agent) stay out of reach. `connect` cannot
///   be told apart by family (its address is behind a pointer), so the socket is refused.
///
/// Before all of it, [`abi_guard`]: other ABIs killed, x32 numbers refused.
fn seccomp(network: bool) -> Result<(), RestrictError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let arg = |index: u8, op: SeccompCmpOp, value: u64| SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value);
    let family = |op: SeccompCmpOp| -> Result<SeccompRule, seccompiler::BackendError> { SeccompRule::new(vec![arg(0, op, libc::AF_UNIX as u64)?]) };
    // The type's low bits, without SOCK_NONBLOCK and SOCK_CLOEXEC: AF_UNIX takes no others.
    let unix_not_stream = || -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        [libc::SOCK_DGRAM, libc::SOCK_SEQPACKET, libc::SOCK_RAW]
            .into_iter()
            .map(|kind| SeccompRule::new(vec![arg(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?, arg(1, SeccompCmpOp::MaskedEq(0xf), kind as u64)?]))
            .collect()
    };
    let mut socketpair = unix_not_stream()?;
    socketpair.push(family(SeccompCmpOp::Ne)?);
    rules.insert(libc::SYS_socketpair, socketpair);
    if network {
        rules.insert(libc::SYS_socket, vec![family(SeccompCmpOp::Eq)?]);
    } else {
        let mut socket = unix_not_stream()?;
        socket.push(family(SeccompCmpOp::Ne)?);
        rules.insert(libc::SYS_socket, socket);
        for always in [libc::SYS_connect, libc::SYS_bind, libc::SYS_listen, libc::SYS_accept, libc::SYS_accept4] {
            rules.insert(always, Vec::new());
        }
        // `send` is `sendto` without an address: only an addressed one is refused.
        let addressed = SeccompCondition::new(4, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)?;
        rules.insert(libc::SYS_sendto, vec![SeccompRule::new(vec![addressed])?]);
    }
    // The request is an `unsigned int`: its low 32 bits are all the kernel reads. (`Ioctl` is
    // an unsigned long with glibc, an int with musl.)
    #[allow(clippy::unnecessary_cast)]
    let request = |value: libc::Ioctl| -> Result<SeccompRule, seccompiler::BackendError> { SeccompRule::new(vec![arg(1, SeccompCmpOp::Eq, value as u64)?]) };
    rules.insert(libc::SYS_ioctl, vec![request(libc::TIOCSTI)?, request(libc::TIOCLINUX)?]);
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
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
    ] {
        // No condition: every call matches.
        rules.insert(always, Vec::new());
    }
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let mut program: BpfProgram = abi_guard();
    program.extend(BpfProgram::try_from(filter)?);
    seccompiler::apply_filter(&program)?;
    Ok(())
}

/// The instructions put before seccompiler's program on x86_64: a call through another ABI
/// (i386's `int 0x80`, whose numbers differ) kills the process, and an x32 call (the same
/// architecture, its number with bit 30 set) is refused. seccompiler checks the architecture
/// but has no notion of x32: its rules match x86_64's numbers, so on a kernel built with x32
/// the x32 twin of every call they refuse would go through. Written by hand because
/// seccompiler cannot express a check on the number's range.
#[cfg(target_arch = "x86_64")]
fn abi_guard() -> BpfProgram {
    use seccompiler::sock_filter;
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // Offsets in `struct seccomp_data`.
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    // BPF_LD | BPF_W | BPF_ABS; BPF_JMP | BPF_JEQ | BPF_K; BPF_JMP | BPF_JGE | BPF_K; BPF_RET | BPF_K.
    const LD_W_ABS: u16 = 0x20;
    const JMP_JEQ_K: u16 = 0x15;
    const JMP_JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    let op = |code: u16, k: u32, jt: u8, jf: u8| sock_filter { code, jt, jf, k };
    vec![
        op(LD_W_ABS, ARCH, 0, 0),
        op(JMP_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        op(RET_K, libc::SECCOMP_RET_KILL_PROCESS, 0, 0),
        op(LD_W_ABS, NR, 0, 0),
        op(JMP_JGE_K, X32_SYSCALL_BIT, 0, 1),
        op(RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32, 0, 0),
    ]
}

/// Other architectures have no second ABI of the same architecture value: seccompiler's own
/// check (any other architecture kills) is the whole guard.
#[cfg(not(target_arch = "x86_64"))]
fn abi_guard() -> BpfProgram {
    Vec::new()
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
/// `user.` attributes, which a user namespace may write. `volatile` (Linux 5.10): no sync of
/// the upper folder's file system, above all none as the namespace ends — unmounting an overlay
/// otherwise syncs that whole file system (the disk the state is on, with whatever the command
/// or a build beside it left unwritten), and the helper's exit waited for it: about 4 ms a
/// command on the benchmarks' machine, over 100 ms under a build (`doc/benchmarks.md` §11).
/// Nothing is lost: the host reads the upper folder through the same page cache, and each
/// command has a new one (a volatile overlay refuses a work folder it used before).
fn git_view(lower: &Path, state: &Path) -> std::io::Result<()> {
    let options = format!(
        "lowerdir={},upperdir={},workdir={},userxattr,volatile",
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

/// Enters a user namespace (mapping this user to itself) and a mount namespace, and there makes
/// every mount read-only but the `writable` folders, gives the namespace terminals of its own
/// and carries out `mounts`. Nothing of it propagates back to the system's mounts.
fn mount_namespace(mounts: &super::protected::SandboxMounts, writable: &[&Path]) -> Result<(), RestrictError> {
    // Entered again at the end: the folder this process holds is the one beneath the mounts
    // made on top of it (the writable copy, git's views).
    let cwd = std::env::current_dir().map_err(mount_error("find the working folder"))?;
    enter_namespaces().map_err(mount_error("unshare"))?;
    // Our changes stay ours (as root without a user namespace, "/" may be shared).
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None).map_err(mount_error("make / private"))?;
    // The git views before the read-only pass: an overlay's upper folder must be on a writable
    // mount when the overlay is made, and the views' state is in no writable root (a command
    // must not write it by its path). Each view lies in a writable root (the project, or a git
    // folder outside it that the host passes as writable), whose copy carries it.
    for (lower, state) in &mounts.git_views {
        git_view(lower, state).map_err(mount_error(format!("see {} through its view", lower.display())))?;
    }
    read_only_but(writable)?;
    private_terminals()?;
    // A read-only path inside a writable root must stay the file git reads: a mount moves with
    // its folder, so `mv scripts s2 && mkdir scripts` would put a new file at its path. Each
    // folder on the way from the root to it is bound onto itself (still writable, outer ones
    // first): a mount point cannot be renamed or removed.
    for folder in folders_on_the_way(&mounts.read_only, writable) {
        mount(Some(&folder), &folder, None, libc::MS_BIND | libc::MS_REC, None)
            .map_err(mount_error(format!("keep {} in place", folder.display())))?;
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
    std::env::set_current_dir(&cwd).map_err(mount_error(format!("enter {} again", cwd.display())))
}

/// The folders strictly between a writable root and each of `paths` inside it, outer ones
/// first, each once.
fn folders_on_the_way(paths: &[PathBuf], writable: &[&Path]) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = Vec::new();
    for path in paths {
        let Some(root) = writable.iter().filter(|r| path.starts_with(r)).max_by_key(|r| r.components().count()) else { continue };
        for folder in path.ancestors().skip(1).take_while(|a| a != root && a.starts_with(root)) {
            if !folders.iter().any(|f| f == folder) {
                folders.push(folder.to_path_buf());
            }
        }
    }
    folders.sort_by_key(|f| f.components().count());
    folders
}

/// Every mount of this namespace read-only but the `writable` folders, which keep their mounts
/// as they were (flags and sub-mounts): what bubblewrap's `--ro-bind / /` then a `--bind` of
/// each gives. A copy of each writable folder's tree is taken first, the whole tree is made
/// read-only, then the copies are put back on top (outer folders first, so that a writable
/// folder inside another stays on top of it). Clearing the flag on a copy instead would make
/// writable what was read-only before (and fails on a mount the user namespace must keep).
fn read_only_but(writable: &[&Path]) -> Result<(), RestrictError> {
    let mut roots = writable.to_vec();
    roots.sort_by(|a, b| a.components().count().cmp(&b.components().count()).then_with(|| a.cmp(b)));
    roots.dedup();
    let mut copies = Vec::with_capacity(roots.len());
    for root in roots {
        let copy = clone_tree(root).map_err(mount_error(format!("copy the mounts of {}", root.display())))?;
        copies.push((root, copy));
    }
    set_read_only(Path::new("/")).map_err(mount_error("make / read-only"))?;
    for (root, copy) in copies {
        attach(&copy, root).map_err(mount_error(format!("keep {} writable", root.display())))?;
    }
    Ok(())
}

fn syscall_result(rc: libc::c_long) -> std::io::Result<libc::c_long> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`: a detached copy of the mounts at and under
/// `path`, as they are.
fn clone_tree(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let path = cstring(path)?;
    let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as libc::c_uint;
    // SAFETY: a NUL-terminated path that lives across the call, and flags.
    let fd = syscall_result(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) })?;
    let fd = libc::c_int::try_from(fd).map_err(std::io::Error::other)?;
    // SAFETY: the descriptor was just made, and is ours alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `move_mount`: the detached `tree` ([`clone_tree`]) mounted on `target`, followed if it is a
/// link (as `open_tree` and Landlock's rules follow it: the same folder for all three).
fn attach(tree: &std::os::fd::OwnedFd, target: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let target = cstring(target)?;
    // SAFETY: a descriptor we own, an empty and a NUL-terminated path that live across the call.
    let rc = unsafe {
        libc::syscall(libc::SYS_move_mount, tree.as_raw_fd(), c"".as_ptr(), libc::AT_FDCWD, target.as_ptr(), libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_SYMLINKS)
    };
    syscall_result(rc).map(drop)
}

/// `mount_setattr(AT_RECURSIVE)`: the mount at `path` and every mount under it read-only.
fn set_read_only(path: &Path) -> std::io::Result<()> {
    let path = cstring(path)?;
    let attr = libc::mount_attr { attr_set: libc::MOUNT_ATTR_RDONLY, attr_clr: 0, propagation: 0, userns_fd: 0 };
    // SAFETY: a NUL-terminated path and a mount_attr that live across the call, with its size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    syscall_result(rc).map(drop)
}

/// The namespace's own terminals ([`private_terminals`]): writable to the command.
const PRIVATE_TERMINALS: [&str; 2] = ["/dev/pts", "/dev/ptmx"];

/// A devpts instance of the namespace's own over `/dev/pts`, and its `ptmx` over `/dev/ptmx`:
/// the command sees none of the user's terminals (`/dev/pts/N` of the editor, of other
/// shells), and `script`, `python -m pty` and the like still make theirs.
fn private_terminals() -> Result<(), RestrictError> {
    let [pts, ptmx] = PRIVATE_TERMINALS.map(Path::new);
    let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
    mount(Some(Path::new("devpts")), pts, Some("devpts"), flags, Some("newinstance,ptmxmode=0666,mode=0620"))
        .map_err(mount_error("mount a devpts of its own"))?;
    mount(Some(&pts.join("ptmx")), ptmx, None, libc::MS_BIND, None).map_err(mount_error("bind its ptmx over /dev/ptmx"))
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
        // Nor anything else it inherited (what the editor or the host left open): the command
        // could reach it as /proc/1/fd/N. The status pipe and the lifeline stay: they are how
        // the namespace ends.
        close_all_but(&[0, 1, 2, status_pipe, lifeline.unwrap_or(-1)]);
        // And its /proc files are out of the command's reach (ptrace's rule: not dumpable).
        // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes no pointers and only sets a flag on us.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
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

/// Closes every descriptor but those in `keep` (negative ones ignored).
fn close_all_but(keep: &[libc::c_int]) {
    let mut keep: Vec<libc::c_uint> = keep.iter().filter_map(|fd| libc::c_uint::try_from(*fd).ok()).collect();
    keep.sort_unstable();
    keep.dedup();
    let mut first: libc::c_uint = 0;
    for fd in keep.into_iter().chain([libc::c_uint::MAX]) {
        if fd > first {
            // SAFETY: close_range takes two numbers and flags, no pointers; it closes only
            // descriptors this process owns and no longer needs.
            unsafe { libc::syscall(libc::SYS_close_range, first, fd - 1, 0 as libc::c_uint) };
        }
        first = fd.saturating_add(1);
    }
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
/// the read-only tree with a writable folder kept, terminals of its own, read-only binds and a
/// git view (an AppArmor-restricted user namespace has no rights to mount), a pid namespace
/// and its `/proc` (refused where `/proc` is partly covered, as in some containers). `Err`:
/// why not. `answered` hears the answer as soon as it is known, before the probe's folders are
/// removed (each removal can wait on the disk: the host need not). `within`: where to make
/// them (the host's git-view state folder), else the temp folder.
pub fn probe_mounts(within: Option<&Path>, answered: impl FnOnce(&Result<(), String>)) -> Result<(), String> {
    // A writable folder holding a read-only bind and a git view whose state is outside it, as
    // the project and its `.git` are; the probe's own, removed after.
    let mut scratch = tempfile::Builder::new();
    scratch.prefix("handoff-probe-");
    let scratch = match within {
        Some(dir) => scratch.tempdir_in(dir),
        None => scratch.tempdir(),
    }
    .map_err(|e| format!("cannot make a folder to probe in: {e}"))?;
    let writable = scratch.path().join("writable");
    for sub in ["writable/ro", "writable/lower", "state/upper", "state/work"] {
        std::fs::create_dir_all(scratch.path().join(sub)).map_err(|e| format!("cannot make a folder to probe in: {e}"))?;
    }
    let view = (writable.join("lower"), scratch.path().join("state"));
    let mounts = super::protected::SandboxMounts { read_only: vec![writable.join("ro")], git_views: vec![view.clone()], ..Default::default() };
    // In a child: the namespaces go with it, and nothing is left mounted over the scratch folder.
    let probed = in_child(|| {
        std::env::set_current_dir(&writable).map_err(|e| format!("cannot enter {}: {e}", writable.display()))?;
        mount_namespace(&mounts, &[writable.as_path()]).map_err(|e| e.to_string())?;
        std::fs::write("kept-writable", "").map_err(|e| format!("the writable folder was not kept writable: {e}"))?;
        if std::fs::set_permissions(scratch.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).is_ok() {
            return Err("the tree outside the writable folders stayed writable".into());
        }
        // SAFETY: unshare takes flags only.
        os_result(unsafe { libc::unshare(libc::CLONE_NEWPID) }).map_err(|e| format!("cannot make a pid namespace: {e}"))?;
        in_child(|| {
            let proc_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            mount(None, Path::new("/proc"), Some("proc"), proc_flags, None)
                .map_err(|e| format!("cannot mount a /proc of its own in a pid namespace (is /proc partly covered, as in a container?): {e}"))
        })
    });
    answered(&probed);
    super::git::remove_view_state(&view.1);
    probed
}

/// Runs `probe` in a child process (what it changes of its namespaces goes with it) and
/// returns its answer. This process must be single-threaded (the probe is).
fn in_child(probe: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    use std::io::{Read, Write};
    let (mut reader, mut writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    // SAFETY: single-threaded (see above), so the child may run Rust code after the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        drop(reader);
        let code = match probe() {
            Ok(()) => 0,
            Err(why) => {
                let _ = writer.write_all(why.as_bytes());
                1
            }
        };
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) }
    }
    drop(writer);
    if pid < 0 {
        return Err(format!("cannot fork: {}", std::io::Error::last_os_error()));
    }
    // Until every copy of the write end is closed: the child's, and any its probe forked.
    let mut why = Vec::new();
    let _ = reader.read_to_end(&mut why);
    let mut raw = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut raw, 0) };
    if libc::WIFEXITED(raw) && libc::WEXITSTATUS(raw) == 0 {
        Ok(())
    } else if why.is_empty() {
        Err(format!("the probe ended without an answer (wait status {raw})"))
    } else {
        Err(String::from_utf8_lossy(&why).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::rule_wire::{open_no_symlinks, open_no_symlinks_in, ReadRule};
    use std::os::fd::AsFd;

    fn identity(fd: &std::os::fd::OwnedFd) -> (u64, u64) {
        use std::os::fd::AsRawFd;
        // SAFETY: fstat fills the zeroed struct we own, from a descriptor we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }, 0);
        (st.st_dev, st.st_ino)
    }

    #[test]
    fn an_entry_is_opened_in_its_folder_without_a_symlink_or_a_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("folder/inner")).unwrap();
        std::os::unix::fs::symlink(root.join("folder/inner"), root.join("folder/link")).unwrap();
        let folder = open_no_symlinks(&root.join("folder")).unwrap();
        let inner = open_no_symlinks_in(folder.as_fd(), Path::new("inner")).unwrap();
        assert_eq!(identity(&inner), identity(&open_no_symlinks(&root.join("folder/inner")).unwrap()));
        assert!(open_no_symlinks_in(folder.as_fd(), Path::new("link")).is_err(), "a link");
        assert!(open_no_symlinks_in(folder.as_fd(), Path::new("..")).is_err(), "out of the folder");
    }

    #[test]
    fn rules_opened_from_their_folder_are_those_opened_by_their_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["home/.ssh", "home/project", "other"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("home/.bashrc"), "").unwrap();
        std::os::unix::fs::symlink(root.join("home/.ssh"), root.join("home/project/ssh")).unwrap();
        let mut rules = crate::sandbox::read_rules::rules_for(&[root.join("home/.ssh")]).0;
        // This test's folders only (the temp folder's other entries come and go meanwhile).
        rules.retain(|(_, p)| p.starts_with(&root));
        // A file the listing gave a rule, replaced by a link to the credential since.
        assert!(rules.contains(&(ReadRule::Beneath, root.join("home/.bashrc"))));
        std::fs::remove_file(root.join("home/.bashrc")).unwrap();
        std::os::unix::fs::symlink(root.join("home/.ssh"), root.join("home/.bashrc")).unwrap();
        // One gone since the listing, one a link planted since: neither gets a rule; and one
        // rule whose folder is not the one listed before it (opened by its whole path).
        rules.push((ReadRule::Beneath, root.join("home/gone")));
        rules.push((ReadRule::Beneath, root.join("home/project/ssh")));
        rules.push((ReadRule::Beneath, root.join("other")));
        let opened: Vec<((u64, u64), landlock::BitFlags<AccessFs>)> =
            opened_read_rules(&rules, AccessFs::Refer.into()).map(|(fd, access)| (identity(&fd), access)).collect();
        let expected: Vec<((u64, u64), landlock::BitFlags<AccessFs>)> = rules
            .iter()
            .filter_map(|(rule, path)| {
                let fd = open_no_symlinks(path).ok()?;
                let meta = std::fs::symlink_metadata(path).ok()?;
                let access = match (rule, meta.is_dir(), meta.is_file()) {
                    (ReadRule::Beneath, true, _) => AccessFs::from_read(FS_ABI) | AccessFs::Refer,
                    (ReadRule::Beneath, _, true) => AccessFs::ReadFile | AccessFs::Execute,
                    (ReadRule::ListOnly, true, _) => AccessFs::Refer | AccessFs::ReadDir,
                    _ => return None,
                };
                Some((identity(&fd), access))
            })
            .collect();
        assert_eq!(opened, expected);
        assert!(opened.iter().any(|(id, _)| *id == identity(&open_no_symlinks(&root.join("other")).unwrap())));
        assert!(!rules.iter().any(|(_, p)| p == &root.join("home/.ssh")));
        let ssh = identity(&open_no_symlinks(&root.join("home/.ssh")).unwrap());
        assert!(!opened.iter().any(|(id, _)| *id == ssh), "the credential got a rule through the link planted since the listing");
    }
}
