//! What a sandboxed command may read: everything but the credential locations, whether they
//! exist yet or not, as Landlock rules.
//!
//! The mount namespace hides the credential folders and files that exist as a command starts
//! (`protected::sandbox_mounts`); a mount cannot cover what does not exist yet, and a process
//! the command leaves running keeps the mounts it started with. Landlock can: it allows what
//! its rules name and refuses the rest, for every file, existing or made later. So instead of
//! one rule that lets a command read everything (`/`), the host names everything *but* the
//! credentials: for each folder on the way to a credential location (`/`, `/home`, `~`,
//! `~/.config`, …) the right to list it, and for each of its entries that is neither such a
//! folder nor a credential, the right to read all of it. A credential made later has no rule:
//! it cannot be read, by the command or by anything it left running; neither can a new entry
//! of one of those folders (`~/new-file`) until the next command's rules name it.
//!
//! The host works the rules out ([`current`]: cached, made again when the credential list or
//! one of those folders changes: their mtimes say so), writes them into a sealed memfd, and
//! hands it to the helper as [`READ_RULES_FD`] (`--read-rules`); the helper opens each path
//! without following any symlink ([`open_no_symlinks`]: a link swapped in cannot redirect a
//! rule) and adds it to its ruleset (`linux::landlock`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::protected;

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

/// The rules for `locations` (absolute credential locations, as named and as they really are:
/// `protected::credential_locations`), and the folders they list (whose changes make them
/// stale). Paths only: the helper opens them, and skips what is gone or is a symlink.
pub fn rules_for(locations: &[PathBuf]) -> (Vec<(ReadRule, PathBuf)>, Vec<PathBuf>) {
    let locations = absolute(locations);
    let protected_here = |p: &Path| protected::in_credentials(p, &locations);
    let folders = folders_for(&locations);
    let mut rules = Vec::new();
    for folder in &folders {
        rules.push((ReadRule::ListOnly, folder.clone()));
        let Ok(entries) = std::fs::read_dir(folder) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if folders.contains(&path) || protected_here(&path) {
                continue;
            }
            // A symlink gets no rule: what it points at has its own (or none).
            if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            rules.push((ReadRule::Beneath, path));
        }
    }
    (rules, folders.into_iter().collect())
}

fn absolute(locations: &[PathBuf]) -> Vec<PathBuf> {
    locations.iter().filter(|l| l.is_absolute()).map(|l| super::paths::normalize_lexically(l)).collect()
}

/// Every folder on the way to one of `locations`, but those inside one (nothing there is
/// listed): what [`rules_for`] lists. No file is read.
fn folders_for(locations: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut folders = BTreeSet::new();
    for location in locations {
        for folder in location.ancestors().skip(1) {
            if !protected::in_credentials(folder, locations) {
                folders.insert(folder.to_path_buf());
            }
        }
    }
    folders
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

/// [`encode`]'s bytes read back; `Err` for anything else.
pub fn decode(bytes: &[u8]) -> Result<Vec<(ReadRule, PathBuf)>, String> {
    use std::os::unix::ffi::OsStrExt;
    let Some(body) = bytes.strip_suffix(&[0]) else {
        return if bytes.is_empty() { Ok(Vec::new()) } else { Err("the last rule is cut short".into()) };
    };
    body.split(|b| *b == 0)
        .map(|item| {
            let (tag, path) = item.split_first().ok_or("an empty rule")?;
            let rule = match tag {
                b'r' => ReadRule::Beneath,
                b'd' => ReadRule::ListOnly,
                other => return Err(format!("an unknown rule {:?}", char::from(*other))),
            };
            let path = Path::new(std::ffi::OsStr::from_bytes(path));
            if !path.is_absolute() {
                return Err(format!("a rule for a relative path {}", path.display()));
            }
            Ok((rule, path.to_path_buf()))
        })
        .collect()
}

/// One set of rules, in a sealed memfd that every command's helper reads (`pread`, so that
/// commands running at once do not share an offset).
#[derive(Debug)]
pub struct ReadRules {
    file: std::os::fd::OwnedFd,
    /// How many rules it holds.
    pub len: usize,
}

impl ReadRules {
    /// The memfd's descriptor, for bash's spawn to put at [`READ_RULES_FD`].
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.file.as_fd()
    }

    #[cfg(target_os = "linux")]
    fn sealed(rules: &[(ReadRule, PathBuf)]) -> std::io::Result<ReadRules> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let mut file = std::fs::File::from(super::helper::sealable_memfd(c"handoff-read-rules")?);
        file.write_all(&encode(rules))?;
        super::helper::seal(file.as_raw_fd())?;
        Ok(ReadRules { file: file.into(), len: rules.len() })
    }

    #[cfg(not(target_os = "linux"))]
    fn sealed(_: &[(ReadRule, PathBuf)]) -> std::io::Result<ReadRules> {
        Err(std::io::Error::other("the read rules are Landlock's (Linux)"))
    }
}

/// What the cached rules were made from: the credential locations as named, and each listed
/// folder's identity and mtime (a folder whose entries change gets a new mtime).
#[derive(PartialEq, Eq)]
struct Made {
    named: Vec<PathBuf>,
    folders: Vec<(PathBuf, Option<Stamp>)>,
}

#[derive(PartialEq, Eq, Clone, Copy)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn stamp(folder: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(folder).ok()?;
    Some(Stamp { dev: m.dev(), ino: m.ino(), mtime: m.mtime(), mtime_nsec: m.mtime_nsec() })
}

fn stamps(folders: &[PathBuf]) -> Vec<(PathBuf, Option<Stamp>)> {
    folders.iter().map(|f| (f.clone(), stamp(f))).collect()
}

/// The rules for this user's credentials as they are now: the cached set while nothing it was
/// made from changed (a few `stat`s per command), else a new one.
pub fn current() -> std::io::Result<Arc<ReadRules>> {
    static CACHE: Mutex<Option<(Made, Arc<ReadRules>)>> = Mutex::new(None);
    let named = protected::credential_paths();
    let mut cache = crate::sync::lock(&CACHE);
    if let Some((made, rules)) = cache.as_ref() {
        if made.named == named && made.folders.iter().all(|(f, s)| stamp(f) == *s) {
            return Ok(rules.clone());
        }
    }
    // Stamped before they are listed: a change while listing makes the next call list again.
    let locations = protected::credential_locations();
    let folders: Vec<PathBuf> = folders_for(&absolute(&locations)).into_iter().collect();
    let before = stamps(&folders);
    let (rules, _) = rules_for(&locations);
    let rules = Arc::new(ReadRules::sealed(&rules)?);
    *cache = Some((Made { named, folders: before }, rules.clone()));
    Ok(rules)
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
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a zeroed open_how is valid (no flags); the fields are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: openat2 reads the NUL-terminated path and the open_how we own, of the size given.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, c.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, ours alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_but_the_way_to_a_credential_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        for d in ["home/.ssh", "home/.config/gh", "home/.config/nvim", "home/project", "other"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(home.join(".bashrc"), "").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), home.join("link")).unwrap();
        // .aws does not exist: its folder is on the way all the same.
        let locations = [".ssh", ".aws/credentials", ".config/gh", ".config/gh/hosts.yml"].map(|p| home.join(p));
        let (rules, folders) = rules_for(&locations);
        let has = |rule: ReadRule, p: &Path| rules.contains(&(rule, p.to_path_buf()));
        for beneath in [home.join(".bashrc"), home.join("project"), home.join(".config/nvim"), root.join("other")] {
            assert!(has(ReadRule::Beneath, &beneath), "{}: {rules:?}", beneath.display());
        }
        for listed in [home.clone(), home.join(".config"), home.join(".aws"), root.clone(), PathBuf::from("/")] {
            assert!(has(ReadRule::ListOnly, &listed), "{}: {rules:?}", listed.display());
            assert!(folders.contains(&listed));
        }
        for none in [home.join(".ssh"), home.join(".config/gh"), home.join("link"), home.join(".config"), home.clone()] {
            assert!(!has(ReadRule::Beneath, &none), "{} is read whole: {rules:?}", none.display());
        }
        assert!(!folders.contains(&home.join(".config/gh")), "nothing inside a credential folder is listed");
        assert_eq!(decode(&encode(&rules)).unwrap(), rules);
        assert!(decode(b"r/a\0x/b\0").is_err());
        assert!(decode(b"rrelative\0").is_err());
        assert!(decode(b"r/a").is_err());
        assert_eq!(decode(b"").unwrap(), []);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_helper_opens_no_rule_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("real/inner")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert!(open_no_symlinks(&root.join("real/inner")).is_ok());
        assert!(open_no_symlinks(&root.join("link/inner")).is_err(), "a link in the middle");
        assert!(open_no_symlinks(&root.join("link")).is_err(), "a link at the end");
    }
}
