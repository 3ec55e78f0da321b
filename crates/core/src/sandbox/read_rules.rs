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
//! one of those folders changes: their mtimes say so, and while an mtime is too recent to
//! tell, their entries), and hands them to the helper as [`READ_RULES_FD`] in one of two
//! forms. Usually a Landlock ruleset the host built with them ahead of the command
//! ([`ReadRules::layer_for`], `--read-layer`): opening each path and adding it costs a few µs a
//! rule (hundreds of rules where the home is in a busy folder), which no longer waits in the
//! command's path; the helper adds the rules on what its namespace mounts over (`/proc`, a git
//! view: a rule holds an inode, and those paths are new ones there), binds itself with it, and
//! makes a second ruleset for writes, the network and signals. Else (a writable folder the
//! rules do not let read whole: it would lose that) the rules themselves, in a sealed memfd
//! (`--read-rules`), which the helper opens and adds to its single ruleset. Either way each
//! path is opened without following any symlink ([`open_no_symlinks`]: a link swapped in
//! cannot redirect a rule) (`linux::landlock`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::protected;
pub use super::rule_wire::{decode, decode_one, encode, encode_one, ReadRule, READ_RULES_FD};
#[cfg(target_os = "linux")]
pub use super::rule_wire::{load, open_no_symlinks};

/// The rules for `locations` (absolute credential locations, as named and as they really are:
/// `protected::credential_locations`), and the folders they list (whose changes make them
/// stale). Paths only: the helper opens them, and skips what is gone or is a symlink.
pub fn rules_for(locations: &[PathBuf]) -> (Vec<(ReadRule, PathBuf)>, Vec<PathBuf>) {
    let (rules, folders, _) = listed(locations);
    (rules, folders)
}

/// A folder's entries as listed: each name and inode, sorted.
type Entries = Vec<(std::ffi::OsString, u64)>;

/// The entries of `folder` now (`None`: it cannot be listed).
fn entries_of(folder: &Path) -> Option<Entries> {
    use std::os::unix::fs::DirEntryExt;
    let mut entries: Entries = std::fs::read_dir(folder).ok()?.flatten().map(|e| (e.file_name(), e.ino())).collect();
    entries.sort_unstable();
    Some(entries)
}

/// The rules, the folders they list, and each folder's entries as read (`None`: unlisted).
type Listing = (Vec<(ReadRule, PathBuf)>, Vec<PathBuf>, Vec<Option<Entries>>);

/// [`rules_for`], with each listed folder's entries as they were read.
///
/// An entry of a listed folder is on the way to a credential, or one, exactly when it is one
/// of the listed folders or a location itself (a location above the folder would put the
/// folder inside a credential, and such a folder is not listed): so each folder's names to
/// leave out are known before it is read, and each entry costs one lookup of its name (a few
/// hundred entries where the home is in `/tmp`), not a comparison with every location.
fn listed(locations: &[PathBuf]) -> Listing {
    let locations = absolute(locations);
    let folders = folders_for(&locations);
    let mut left_out: HashMap<&Path, HashSet<&OsStr>> = HashMap::new();
    for path in folders.iter().chain(&locations) {
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            left_out.entry(parent).or_default().insert(name);
        }
    }
    let mut rules = Vec::new();
    let mut listings = Vec::with_capacity(folders.len());
    for folder in &folders {
        rules.push((ReadRule::ListOnly, folder.clone()));
        let Ok(entries) = std::fs::read_dir(folder) else {
            listings.push(None);
            continue;
        };
        let left_out = left_out.get(folder.as_path());
        let mut listing = Entries::new();
        for entry in entries.flatten() {
            use std::os::unix::fs::DirEntryExt;
            let name = entry.file_name();
            listing.push((name.clone(), entry.ino()));
            if left_out.is_some_and(|names| names.contains(name.as_os_str())) {
                continue;
            }
            // A symlink gets no rule: what it points at has its own (or none).
            if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            rules.push((ReadRule::Beneath, entry.path()));
        }
        listing.sort_unstable();
        listings.push(Some(listing));
    }
    (rules, folders.into_iter().collect(), listings)
}

fn absolute(locations: &[PathBuf]) -> Vec<PathBuf> {
    locations.iter().filter(|l| l.is_absolute()).map(|l| super::paths::normalize_lexically(l)).collect()
}

/// Every folder on the way to one of `locations`, but those inside one (nothing there is
/// listed): what [`rules_for`] lists. No file is read. A folder is inside a location when one
/// of the folders above it (or it) is one: each location's way is walked down from `/` and
/// left at the first location on it.
fn folders_for(locations: &[PathBuf]) -> BTreeSet<PathBuf> {
    let named: HashSet<&Path> = locations.iter().map(PathBuf::as_path).collect();
    let mut folders = BTreeSet::new();
    for location in locations {
        let way: Vec<&Path> = location.ancestors().skip(1).collect();
        for folder in way.into_iter().rev() {
            if named.contains(folder) {
                break;
            }
            folders.insert(folder.to_path_buf());
        }
    }
    folders
}

/// One set of rules, in a sealed memfd that a command's helper may read (`pread`, so that
/// commands running at once do not share an offset), and the next command's Landlock layer
/// with them, built ahead.
#[derive(Debug)]
pub struct ReadRules {
    file: std::os::fd::OwnedFd,
    /// How many rules it holds.
    pub len: usize,
    rules: Vec<(ReadRule, PathBuf)>,
    /// The paths of the `Beneath` rules, for [`ReadRules::covers`] (asked on a command's path).
    beneath: HashSet<PathBuf>,
    /// A layer no command has taken yet ([`ReadRules::layer_for`]); `None` while none is made.
    next: Mutex<Option<std::os::fd::OwnedFd>>,
}

/// Where the namespace mounts a file system of its own (`linux::pid_namespace`): a rule on the
/// host's `/proc` would name an inode the command cannot reach, so the helper adds it.
const PROC: &str = "/proc";

/// What [`ReadRules::layer_for`] gives a command: the layer, and the rules its helper adds to
/// it after the mounts.
#[derive(Debug)]
pub struct Layer {
    pub ruleset: std::os::fd::OwnedFd,
    pub after: Vec<(ReadRule, PathBuf)>,
}

impl ReadRules {
    /// The memfd's descriptor, for bash's spawn to put at [`READ_RULES_FD`].
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.file.as_fd()
    }

    #[cfg(target_os = "linux")]
    fn sealed(rules: Vec<(ReadRule, PathBuf)>) -> std::io::Result<ReadRules> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let mut file = std::fs::File::from(super::helper::sealable_memfd(c"handoff-read-rules")?);
        file.write_all(&encode(&rules))?;
        super::helper::seal(file.as_raw_fd())?;
        let beneath = rules.iter().filter(|(rule, _)| *rule == ReadRule::Beneath).map(|(_, p)| p.clone()).collect();
        let made = ReadRules { file: file.into(), len: rules.len(), rules, beneath, next: Mutex::new(None) };
        // The first command's layer, now: this runs ahead of it (`sandbox::prefetch`), or it
        // needs one at once.
        made.refill_now();
        Ok(made)
    }

    #[cfg(not(target_os = "linux"))]
    fn sealed(_: Vec<(ReadRule, PathBuf)>) -> std::io::Result<ReadRules> {
        Err(std::io::Error::other("the read rules are Landlock's (Linux)"))
    }

    /// The layer for a command whose helper may write `roots` and mounts over `mounted` (its
    /// git views; `/proc` always counts), its own: made ahead, else now. `None` when a layer
    /// would read less than the rules themselves ([`ReadRules::covers`]) or cannot be made:
    /// then the helper gets the rules (`--read-rules`).
    pub fn layer_for(&self, roots: &[PathBuf], mounted: &[PathBuf]) -> Option<Layer> {
        if !roots.iter().all(|root| self.covers(root)) {
            return None;
        }
        let ruleset = crate::sync::lock(&self.next).take().or_else(|| self.build())?;
        let proc_ = Path::new(PROC);
        let after = self
            .rules
            .iter()
            .filter(|(_, p)| p.starts_with(proc_) || mounted.iter().any(|m| p.starts_with(m)))
            .cloned()
            .collect();
        Some(Layer { ruleset, after })
    }

    /// Whether reading in the writable folder `root` is what the rules alone allow, as with
    /// a single ruleset, where a writable folder's rule lets it be read whole unless it holds a
    /// folder on the way to a credential (`linux::write_access`): it is inside a folder read
    /// whole, or holds such a folder.
    fn covers(&self, root: &Path) -> bool {
        let root = super::paths::real_path(root);
        root.ancestors().any(|above| self.beneath.contains(above))
            || self.rules.iter().any(|(rule, p)| *rule == ReadRule::ListOnly && p.starts_with(&root))
    }

    /// Makes the next command's layer, when none is waiting, on a thread of its own (called as
    /// a command ends: off the next one's path).
    pub fn refill(self: &Arc<Self>) {
        if crate::sync::lock(&self.next).is_some() {
            return;
        }
        let rules = self.clone();
        // Work for a command that may never come (the next command makes its own layer when
        // none is waiting): it yields to everything else.
        super::ahead("handoff-read-layer", 19, move || rules.refill_now());
    }

    fn refill_now(&self) {
        if crate::sync::lock(&self.next).is_some() {
            return;
        }
        if let Some(layer) = self.build() {
            let mut next = crate::sync::lock(&self.next);
            if next.is_none() {
                *next = Some(layer);
            }
        }
    }

    /// A new layer with every rule but those under `/proc` (the helper adds them).
    #[cfg(target_os = "linux")]
    fn build(&self) -> Option<std::os::fd::OwnedFd> {
        let proc_ = Path::new(PROC);
        let rules: Vec<(ReadRule, PathBuf)> = self.rules.iter().filter(|(_, p)| !p.starts_with(proc_)).cloned().collect();
        super::linux::read_layer(&rules).map_err(|e| tracing::debug!("cannot make a read layer: {e}")).ok()
    }

    #[cfg(not(target_os = "linux"))]
    fn build(&self) -> Option<std::os::fd::OwnedFd> {
        None
    }
}

/// What the cached rules were made from: the credential locations as named, and each listed
/// folder ([`Listed`]).
struct Made {
    named: Vec<PathBuf>,
    folders: Vec<Listed>,
}

/// A folder the rules list: its identity and mtime (a folder whose entries change gets a new
/// mtime), its entries as listed, and when they were last found the same.
///
/// An mtime is the kernel's coarse clock (a few ms a tick, on kernels or file systems without
/// fine-grained timestamps): a change in the same tick as the stamp leaves it as it was. Such
/// a change matters more than it did: a command's layer is built ahead and holds each rule's
/// inode, so an entry renamed away (into a credential folder) after the listing would keep
/// its rule there. So while a folder's mtime is within [`COARSE`] of when it was last checked,
/// its entries are listed again and compared (names and inodes: one `getdents`, no `stat`).
struct Listed {
    path: PathBuf,
    stamp: Option<Stamp>,
    entries: Option<Entries>,
    checked: std::time::SystemTime,
}

/// Longer than any tick of the kernel's coarse clock (1 to 10 ms).
const COARSE: std::time::Duration = std::time::Duration::from_millis(50);

impl Listed {
    /// Whether the folder is as it was listed, as far as the rules go.
    fn unchanged(&mut self) -> bool {
        let now = stamp(&self.path);
        if now != self.stamp {
            return false;
        }
        let Some(mtime) = now.and_then(|s| s.mtime_at()) else { return true };
        if mtime + COARSE < self.checked {
            return true;
        }
        // Too recent to tell by the mtime: by the entries.
        let checked = std::time::SystemTime::now();
        if entries_of(&self.path) != self.entries {
            return false;
        }
        self.checked = checked;
        true
    }
}

#[derive(PartialEq, Eq, Clone, Copy, Debug)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    fn mtime_at(&self) -> Option<std::time::SystemTime> {
        let since = std::time::Duration::new(u64::try_from(self.mtime).ok()?, u32::try_from(self.mtime_nsec).ok()?);
        std::time::UNIX_EPOCH.checked_add(since)
    }
}

fn stamp(folder: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(folder).ok()?;
    Some(Stamp { dev: m.dev(), ino: m.ino(), mtime: m.mtime(), mtime_nsec: m.mtime_nsec() })
}

/// The rules for this user's credentials as they are now: the cached set while nothing it was
/// made from changed (a few `stat`s per command, see [`Listed`]), else a new one.
pub fn current() -> std::io::Result<Arc<ReadRules>> {
    static CACHE: Mutex<Option<(Made, Arc<ReadRules>)>> = Mutex::new(None);
    let named = protected::credential_paths();
    let mut cache = crate::sync::lock(&CACHE);
    if let Some((made, rules)) = cache.as_mut() {
        if made.named == named && made.folders.iter_mut().all(Listed::unchanged) {
            return Ok(rules.clone());
        }
    }
    // Stamped before they are listed: a change while listing makes the next call list again.
    let locations = protected::credential_locations();
    let folders: Vec<PathBuf> = folders_for(&absolute(&locations)).into_iter().collect();
    let checked = std::time::SystemTime::now();
    let before: Vec<Option<Stamp>> = folders.iter().map(|f| stamp(f)).collect();
    let (rules, listed_folders, listings) = listed(&locations);
    // The same folders, in the same (sorted) order: `folders_for` both times.
    let folders = listed_folders
        .into_iter()
        .zip(before)
        .zip(listings)
        .map(|((path, stamp), entries)| Listed { path, stamp, entries, checked })
        .collect();
    let rules = Arc::new(ReadRules::sealed(rules)?);
    *cache = Some((Made { named, folders }, rules.clone()));
    Ok(rules)
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

    /// The rules as their definition says, comparing every path with every location: what
    /// `listed`'s lookups by name must give.
    fn by_definition(locations: &[PathBuf]) -> Vec<(ReadRule, PathBuf)> {
        let inside = |p: &Path| protected::in_credentials(p, locations);
        let mut folders = BTreeSet::new();
        for location in locations {
            folders.extend(location.ancestors().skip(1).filter(|f| !inside(f)).map(Path::to_path_buf));
        }
        let mut rules = Vec::new();
        for folder in &folders {
            rules.push((ReadRule::ListOnly, folder.clone()));
            for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
                let path = entry.path();
                if !folders.contains(&path) && !inside(&path) && !entry.file_type().unwrap().is_symlink() {
                    rules.push((ReadRule::Beneath, path));
                }
            }
        }
        rules
    }

    #[test]
    fn the_rules_are_those_their_definition_gives() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        for d in ["home/.ssh/keys", "home/.config/gh/deep", "home/.config/gh-not", "home/.local/share/keyrings", "home/a/b/c", "home/.sshx", "other/.ssh"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in ["home/.netrc", "home/.netrc.bak", "home/a/b/token", "home/a/b/c/token"] {
            std::fs::write(root.join(f), "").unwrap();
        }
        std::os::unix::fs::symlink(home.join(".ssh"), home.join("a/ssh-link")).unwrap();
        // Nested locations, one inside another, one a folder of another's way, one absent,
        // siblings whose names only start alike.
        let locations: Vec<PathBuf> = [".ssh", ".ssh/keys", ".config/gh", ".config/gh/hosts.yml", "a/b/token", "a/b", "a/b/c/token", ".netrc", ".aws/credentials", ".local/share/keyrings"]
            .iter()
            .map(|p| home.join(p))
            .chain([root.join("other/.ssh")])
            .collect();
        let (rules, folders) = rules_for(&locations);
        let expected = by_definition(&locations);
        assert_eq!(rules, expected);
        assert_eq!(folders, expected.iter().filter(|(r, _)| *r == ReadRule::ListOnly).map(|(_, p)| p.clone()).collect::<Vec<_>>());
        assert!(!rules.iter().any(|(_, p)| p.starts_with(home.join("a/b"))), "inside a location: {rules:?}");
        assert!(rules.contains(&(ReadRule::Beneath, home.join(".sshx"))) && rules.contains(&(ReadRule::Beneath, home.join(".config/gh-not"))));
    }

    #[test]
    fn a_change_the_mtime_cannot_show_is_seen_in_the_entries() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        let fresh = |checked| Listed { path: root.clone(), stamp: stamp(&root), entries: entries_of(&root), checked };
        let mut listed = fresh(std::time::SystemTime::now());
        assert!(listed.unchanged());
        // An entry renamed away within one tick of the coarse clock: the same mtime.
        let mtime = std::fs::metadata(&root).unwrap().modified().unwrap();
        std::fs::rename(root.join("a"), root.join("b")).unwrap();
        std::fs::File::open(&root).unwrap().set_modified(mtime).unwrap();
        assert_eq!(stamp(&root), listed.stamp, "the test did not put the mtime back");
        assert!(!listed.unchanged(), "a recent mtime was trusted");
        // The same again, where the mtime is long older than the last check: a change after that
        // check would have a later one, so the entries are not read again.
        std::fs::rename(root.join("b"), root.join("a")).unwrap();
        std::fs::File::open(&root).unwrap().set_modified(mtime).unwrap();
        let mut old = fresh(std::time::SystemTime::now() + std::time::Duration::from_secs(3600));
        std::fs::rename(root.join("a"), root.join("b")).unwrap();
        std::fs::File::open(&root).unwrap().set_modified(mtime).unwrap();
        assert!(old.unchanged());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_layer_only_for_writable_folders_the_rules_let_read_whole() {
        if crate::sandbox::Support::probe().enforceable().is_err() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        for d in ["home/.ssh/inside", "home/project/.git"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let (rules, _) = rules_for(&[home.join(".ssh")]);
        let made = ReadRules::sealed(rules).unwrap();
        assert!(made.next.lock().unwrap().is_some(), "the first layer is made with the rules");
        let layer = made.layer_for(&[home.join("project"), home.clone()], &[home.join("project/.git")]).unwrap();
        assert!(layer.after.contains(&(ReadRule::Beneath, PathBuf::from("/proc"))), "{:?}", layer.after);
        assert!(layer.after.iter().all(|(_, p)| p.starts_with("/proc")));
        assert!(made.next.lock().unwrap().is_none(), "a layer is one command's");
        // Where the project is the home folder's own git folder, the helper adds its rule after
        // mounting the view over it.
        let (rules, _) = rules_for(&[root.join("home/project/.ssh")]);
        let made = ReadRules::sealed(rules).unwrap();
        let git = home.join("project/.git");
        let layer = made.layer_for(&[home.join("project")], std::slice::from_ref(&git)).unwrap();
        assert!(layer.after.contains(&(ReadRule::Beneath, git)), "{:?}", layer.after);
        // A writable folder inside a credential folder is read only through its own rule.
        let made = ReadRules::sealed(rules_for(&[home.join(".ssh")]).0).unwrap();
        assert!(made.layer_for(&[home.join(".ssh/inside")], &[]).is_none());
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
