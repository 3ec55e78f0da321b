//! The read rules as they travel from the host to the sandbox's helper, and as the helper opens
//! them: what a rule is ([`ReadRule`]), its bytes ([`encode`], [`decode`]), the memfd read back
//! ([`load`]) and a rule's path opened without following a symlink ([`open_no_symlinks`]).
//! Apart from `read_rules` (which works the rules out, above Landlock's `linux`) so that the
//! helper's side (`linux`) needs nothing of it: `read_rules` builds the host's layer with
//! `linux`, and `linux` opens rules with this.

use std::path::{Path, PathBuf};

/// Where the helper finds the rules: bash puts the memfd there.
pub const READ_RULES_FD: i32 = 4;

/// What a rule lets a command read of its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRule {
    /// Everything beneath it (a folder) or it (a file): read, list, run.
    Beneath,
    /// Only list it: a folder on the way to a credential location.
    ListOnly,
}

impl ReadRule {
    fn tag(self) -> u8 {
        match self {
            ReadRule::Beneath => b'r',
            ReadRule::ListOnly => b'd',
        }
    }
}

/// The rules as the helper reads them: each a tag byte (`r`, `d`), the path, a NUL.
pub fn encode(rules: &[(ReadRule, PathBuf)]) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::with_capacity(rules.iter().map(|(_, p)| p.as_os_str().len() + 2).sum());
    for (rule, path) in rules {
        out.push(rule.tag());
        out.extend_from_slice(path.as_os_str().as_bytes());
        out.push(0);
    }
    out
}

/// One rule as [`encode`] writes it, without the NUL: the helper's `--read-after` value.
pub fn encode_one(rule: &(ReadRule, PathBuf)) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let mut bytes = encode(std::slice::from_ref(rule));
    bytes.pop();
    std::ffi::OsString::from_vec(bytes)
}

/// [`encode_one`]'s value read back.
pub fn decode_one(item: &std::ffi::OsStr) -> Result<(ReadRule, PathBuf), String> {
    use std::os::unix::ffi::OsStrExt;
    decode_item(item.as_bytes())
}

fn decode_item(item: &[u8]) -> Result<(ReadRule, PathBuf), String> {
    use std::os::unix::ffi::OsStrExt;
    let (tag, path) = item.split_first().ok_or("an empty rule")?;
    let rule = match tag {
        b'r' => ReadRule::Beneath,
        b'd' => ReadRule::ListOnly,
        other => return Err(format!("an unknown rule {:?}", char::from(*other))),
    };
    let path = Path::new(std::ffi::OsStr::from_bytes(path));
    if !path.is_absolute() || path.as_os_str().as_bytes().contains(&0) {
        return Err(format!("a rule for a relative path {}", path.display()));
    }
    Ok((rule, path.to_path_buf()))
}

/// [`encode`]'s bytes read back; `Err` for anything else.
pub fn decode(bytes: &[u8]) -> Result<Vec<(ReadRule, PathBuf)>, String> {
    let Some(body) = bytes.strip_suffix(&[0]) else {
        return if bytes.is_empty() { Ok(Vec::new()) } else { Err("the last rule is cut short".into()) };
    };
    body.split(|b| *b == 0).map(decode_item).collect()
}

/// In the helper: the rules behind descriptor `fd` (then closed: the command does not get it).
#[cfg(target_os = "linux")]
pub fn load(fd: i32) -> std::io::Result<Vec<(ReadRule, PathBuf)>> {
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: reads at most chunk.len() bytes into the buffer we own, at an offset of our
        // own (the descriptor's is shared with other commands' helpers).
        let n = unsafe { libc::pread(fd, chunk.as_mut_ptr().cast(), chunk.len(), bytes.len() as libc::off_t) };
        match n {
            0 => break,
            n if n > 0 => bytes.extend_from_slice(&chunk[..n as usize]),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    // SAFETY: the descriptor was ours to read; the command must not inherit it.
    unsafe { libc::close(fd) };
    decode(&bytes).map_err(std::io::Error::other)
}

/// In the helper: `path` opened `O_PATH` with no symlink followed in any part of it (`openat2`
/// `RESOLVE_NO_SYMLINKS`, Linux 5.6: older than any kernel with the Landlock ABI the sandbox
/// needs), so that a link put in place after the host listed a folder cannot move a rule.
#[cfg(target_os = "linux")]
pub fn open_no_symlinks(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    openat2_no_symlinks(libc::AT_FDCWD, path, libc::RESOLVE_NO_SYMLINKS)
}

/// [`open_no_symlinks`] for `path` inside the folder `dir` (a name of it: a folder's entry),
/// never out of it: one component looked up, not the folder's whole path again.
#[cfg(target_os = "linux")]
pub fn open_no_symlinks_in(dir: std::os::fd::BorrowedFd<'_>, path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    openat2_no_symlinks(dir.as_raw_fd(), path, libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_BENEATH)
}

#[cfg(target_os = "linux")]
fn openat2_no_symlinks(dir: libc::c_int, path: &Path, resolve: u64) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a zeroed open_how is valid (no flags); the fields are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = resolve;
    // SAFETY: openat2 reads the NUL-terminated path and the open_how we own, of the size given.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dir, c.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, ours alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}
