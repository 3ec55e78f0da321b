//! The helper's side on Linux: restrict this (single-threaded) process, then exec the command.
//! Landlock limits writes and TCP; a seccomp filter allows sockets only for `AF_UNIX` (Landlock
//! does not stop UDP below ABI 10) and denies `ptrace` and `io_uring`. Neither needs user
//! namespaces; both are inherited by every child of the command.

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
}

/// The file rights Landlock must enforce (ABI 3: writes, renames across folders, truncation).
const FS_ABI: ABI = ABI::V3;

/// Restricts this process for good: no_new_privs, Landlock, seccomp. The process must be
/// single-threaded (Landlock and seccomp bind the calling thread, and its later children).
pub fn restrict_self(r: &HelperArgs) -> Result<(), RestrictError> {
    let support = Support::probe();
    support.enforceable().map_err(RestrictError::Unsupported)?;
    no_new_privs()?;
    landlock(r, support)?;
    seccomp(r.settings.network)?;
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
        ruleset = ruleset.scope(Scope::Signal)?;
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

/// Denied with EPERM: sockets of any family but `AF_UNIX` (unless `network`), `ptrace`, and
/// `io_uring` (its requests would bypass the socket rule).
fn seccomp(network: bool) -> Result<(), RestrictError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    if !network {
        let not_unix = || -> Result<SeccompRule, seccompiler::BackendError> {
            let domain = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?;
            SeccompRule::new(vec![domain])
        };
        rules.insert(libc::SYS_socket, vec![not_unix()?]);
        rules.insert(libc::SYS_socketpair, vec![not_unix()?]);
    }
    for always in [libc::SYS_ptrace, libc::SYS_io_uring_setup, libc::SYS_io_uring_enter, libc::SYS_io_uring_register] {
        // No condition: every call matches.
        rules.insert(always, Vec::new());
    }
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let program: BpfProgram = filter.try_into()?;
    seccompiler::apply_filter(&program)?;
    Ok(())
}
