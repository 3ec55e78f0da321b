//! Which binary confines commands, and why no command can change it.
//!
//! The helper is `handoff-sandbox` beside the host (else the host's own binary,
//! `handoff-nvim sandbox-exec`). Both may sit in a folder commands can write: a build inside the
//! project leaves them in its `target/`. Were the host to run that file for each command, one
//! command could replace it, and every later command would run unconfined while still
//! labelled sandboxed. So the host never runs the file:
//!
//! - `handoff-sandbox` is copied, once, as the host starts (before its first command can run),
//!   into a memfd that is then sealed (`F_SEAL_WRITE`, `GROW`, `SHRINK`, `SEAL`: no process,
//!   the host included, can change it again), and every command runs that copy through
//!   `/proc/self/fd/N` (the kernel opens the file before the exec closes the close-on-exec
//!   descriptor). It keeps the small binary's quick start, and does not depend on what the
//!   kernel refuses to write (a memfd has no path a command could name).
//! - The host's own binary, when there is no `handoff-sandbox`, is re-entered through
//!   `/proc/self/exe`: the image this process runs, which a rename cannot swap (it names the
//!   inode, not the path) and a write cannot change while it runs (`ETXTBSY`). Copying tens of
//!   megabytes at every start would cost more than it adds.
//!
//! What this does not cover: a file replaced *before* the host started (by a command of an
//! earlier session, when the build is inside the project) is what the next host copies, as
//! the next host is itself what that build left (`:help handoff-sandbox`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The small helper binary (`src/bin/handoff-sandbox.rs`): it starts faster than the host's
/// (no relocations of the whole host to do), and takes the same `sandbox-exec …` line.
pub const HELPER_BINARY: &str = "handoff-sandbox";

/// The binary that confines commands, as the host runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperBinary {
    /// What the host executes: the sealed copy (`/proc/self/fd/N`), `/proc/self/exe`, or (a
    /// test's own) the file itself.
    exec: PathBuf,
    /// The file it was taken from.
    source: PathBuf,
    how: Taken,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // sealed copies and /proc/self/exe are Linux's
enum Taken {
    /// Copied into a sealed memfd as the host started.
    Sealed,
    /// The host's own running image.
    OwnImage,
    /// The file as it is at each command (only what a test builds by hand).
    File,
}

impl HelperBinary {
    /// What to execute.
    pub fn path(&self) -> &Path {
        &self.exec
    }

    /// The file it was taken from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Whether no file a command can write changes what confines the next command.
    pub fn is_fixed(&self) -> bool {
        self.how != Taken::File
    }

    /// One sentence for the approval and `:checkhealth`: which binary, and why it holds.
    pub fn describe(&self) -> String {
        let source = self.source.display();
        match self.how {
            Taken::Sealed => format!("{source}, run from a sealed in-memory copy the host made as it started: a command cannot change it"),
            Taken::OwnImage => format!("{source}, the host's own binary as it runs (/proc/self/exe): a command cannot change it"),
            Taken::File => format!("{source}, run from the file itself"),
        }
    }
}

/// A helper run from its file (tests that build a sandbox by hand).
impl From<PathBuf> for HelperBinary {
    fn from(path: PathBuf) -> HelperBinary {
        HelperBinary { exec: path.clone(), source: path, how: Taken::File }
    }
}

impl From<&str> for HelperBinary {
    fn from(path: &str) -> HelperBinary {
        HelperBinary::from(PathBuf::from(path))
    }
}

/// The helper's file: `handoff-sandbox` beside this binary, else this binary (`handoff-nvim
/// sandbox-exec`). A test binary of the crate (`target/<profile>/deps/…`) looks in
/// `target/<profile>`, where cargo puts the crate's binaries.
pub fn source() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let Some(dir) = exe.parent() else { return Ok(exe) };
    let is_ours = exe.file_name().is_some_and(|n| n == "handoff-nvim" || n == HELPER_BINARY);
    let dir = if is_ours { dir } else { dir.parent().unwrap_or(dir) };
    for name in [HELPER_BINARY, "handoff-nvim"] {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Ok(exe)
}

/// This process's helper, taken on the first call (see the module's doc); the same answer
/// after. `Err`: why there is none (then commands cannot be sandboxed, and ask).
pub fn taken() -> Result<HelperBinary, String> {
    static TAKEN: OnceLock<Result<HelperBinary, String>> = OnceLock::new();
    TAKEN
        .get_or_init(|| {
            let source = source().map_err(|e| format!("cannot find the sandbox's helper: {e}"))?;
            take(source)
        })
        .clone()
}

/// Takes the helper now: the host calls this as it starts, before it can run any command, so
/// that nothing a command writes later is what confines the next one.
pub fn take_at_start() {
    if let Err(e) = taken() {
        tracing::warn!("{e}");
    }
}

#[cfg(target_os = "linux")]
fn take(source: PathBuf) -> Result<HelperBinary, String> {
    let own = std::env::current_exe().ok().is_some_and(|exe| exe == source);
    if own {
        return Ok(HelperBinary { exec: PathBuf::from("/proc/self/exe"), source, how: Taken::OwnImage });
    }
    match sealed_copy(&source) {
        Ok(fd) => Ok(HelperBinary { exec: PathBuf::from(format!("/proc/self/fd/{fd}")), source, how: Taken::Sealed }),
        // No copy (a file size limit, no memfd): the host's own image confines commands as well,
        // only starts slower; never the file itself.
        Err(e) => {
            tracing::warn!("cannot make a sealed copy of the sandbox's helper {}: {e}; the host's own binary confines commands", source.display());
            let own = std::env::current_exe().map_err(|e| format!("cannot find the host's own binary for the sandbox's helper: {e}"))?;
            Ok(HelperBinary { exec: PathBuf::from("/proc/self/exe"), source: own, how: Taken::OwnImage })
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn take(source: PathBuf) -> Result<HelperBinary, String> {
    Ok(HelperBinary::from(source))
}

/// The seals that make a memfd unchangeable for good.
#[cfg(target_os = "linux")]
const SEALS: libc::c_int = libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;

/// Descriptors from this number on are out of the way of those bash's spawn puts in place
/// for the helper (`LIFELINE_FD`, `READ_RULES_FD`).
#[cfg(target_os = "linux")]
const FIRST_FREE_FD: libc::c_int = 10;

/// `source` copied into a new memfd (close-on-exec), checked to be a program, sealed: its
/// descriptor, open for the rest of this process.
#[cfg(target_os = "linux")]
fn sealed_copy(source: &Path) -> std::io::Result<libc::c_int> {
    use std::io::{Read, Seek};
    use std::os::fd::AsRawFd;
    let mut from = std::fs::File::open(source)?;
    let mut copy = std::fs::File::from(sealable_memfd(c"handoff-sandbox")?);
    std::io::copy(&mut from, &mut copy)?;
    copy.rewind()?;
    let mut magic = [0u8; 4];
    copy.read_exact(&mut magic)?;
    if magic != *b"\x7fELF" {
        return Err(std::io::Error::other("it is not a program (was it replaced?)"));
    }
    seal(copy.as_raw_fd())?;
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own; the copy is ours to keep.
    let high = unsafe { libc::fcntl(copy.as_raw_fd(), libc::F_DUPFD_CLOEXEC, FIRST_FREE_FD) };
    if high < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // The copy's first descriptor goes; `high` stays open (never closed) for every command.
    drop(copy);
    Ok(high)
}

/// A new memfd that can be sealed (close-on-exec; marked executable where the kernel knows
/// `MFD_EXEC`, Linux 6.3).
#[cfg(target_os = "linux")]
pub(crate) fn sealable_memfd(name: &std::ffi::CStr) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: memfd_create reads the NUL-terminated name and returns a new descriptor.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), flags | libc::MFD_EXEC) };
    if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // SAFETY: as above, without the flag older kernels do not know.
        fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, ours alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Seals the memfd `fd` for good, and checks that the seals hold.
#[cfg(target_os = "linux")]
pub(crate) fn seal(fd: libc::c_int) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns, with integer arguments.
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, SEALS) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    let held = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    if held < 0 || held & SEALS != SEALS {
        return Err(std::io::Error::other("the seals did not hold"));
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd};

    #[test]
    fn a_sealed_copy_is_a_program_no_one_can_change() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("prog");
        std::fs::copy("/bin/true", &program).unwrap();
        let fd = sealed_copy(&program).unwrap();
        assert!(fd >= FIRST_FREE_FD);
        // SAFETY: a descriptor this test owns now.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        assert!(file.write_all(b"x").is_err(), "a sealed copy was written");
        assert!(file.set_len(0).is_err(), "a sealed copy was truncated");
        // Writing through another open of it is refused as well.
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        assert!(std::fs::OpenOptions::new().write(true).open(&path).and_then(|mut f| f.write_all(b"x")).is_err());
        // It runs, whatever becomes of the file it came from.
        std::fs::write(&program, "#!/bin/sh\nexit 7\n").unwrap();
        assert!(std::process::Command::new(&path).status().unwrap().success());
        let script = dir.path().join("script");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert!(sealed_copy(&script).unwrap_err().to_string().contains("not a program"));
    }
}
