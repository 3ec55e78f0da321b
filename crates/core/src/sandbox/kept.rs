//! Answers the sandbox keeps across the host's processes: every CLI prompt and every editor is
//! a new process, and asking the system again each time (the namespaces' probe, git's three
//! processes) was most of what a sandboxed one-command turn cost over `--sandbox off`.
//!
//! Each answer is a file in `$XDG_CACHE_HOME/handoff-nvim/sandbox/` (else `~/.cache/…`) that
//! holds the answer together with everything it was made from, and is used only while all of
//! that reads the same (each user of this module compares what it was made from). A file is trusted only when this user wrote it (owned by
//! us, not writable by others, not a link) and it is not inside the folder commands may write
//! (`inside`: the project): a command must not be able to write the answer the next process
//! reads. Nothing here is needed: an answer that cannot be read or written is asked again.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How long an answer is used at most, whatever its inputs say: what no input names (a
/// system-wide git setting created since, an LSM policy reloaded) is seen within a day.
const MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// Set to a folder, where the answers are kept instead (tests); set empty, none is kept.
pub const DIR_VAR: &str = "HANDOFF_SANDBOX_CACHE_DIR";

/// The folder of kept answers, if there is a home or a cache folder to keep them in. Where a
/// project holds it (a session in the home folder), every command's namespace has it read-only
/// ([`super::protected::sandbox_mounts`]): no command writes what another project's next
/// process reads.
pub fn dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(DIR_VAR) {
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let cache = absolute("XDG_CACHE_HOME").or_else(|| super::paths::home().map(|h| h.join(".cache")))?;
    Some(cache.join("handoff-nvim").join("sandbox"))
}

/// The name of the answer of kind `kind` about `key` (a project, a helper's file): one file
/// each, so that two projects, or two host builds used in turn, do not replace each other's.
pub fn name_for(kind: &str, key: &Path) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_os_str().as_encoded_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("{kind}-{hex}")
}

/// Where the answer `name` is kept, unless that is inside `inside` (a folder commands may
/// write: the answer could then be a command's).
fn path_for(dir: &Path, name: &str, inside: Option<&Path>) -> Option<PathBuf> {
    let dir = super::paths::real_path(dir);
    if inside.is_some_and(|writable| dir.starts_with(writable)) {
        return None;
    }
    Some(dir.join(name))
}

/// The bytes kept as `name`, if this user wrote them less than [`MAX_AGE`] ago and they are
/// outside `inside`.
pub fn read(name: &str, inside: Option<&Path>) -> Option<Vec<u8>> {
    read_in(&dir()?, name, inside)
}

fn read_in(dir: &Path, name: &str, inside: Option<&Path>) -> Option<Vec<u8>> {
    use std::io::Read;
    let path = path_for(dir, name, inside)?;
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(&path).ok()?;
    let meta = file.metadata().ok()?;
    // SAFETY: geteuid has no preconditions.
    let ours = meta.uid() == unsafe { libc::geteuid() } && meta.mode() & 0o022 == 0 && meta.is_file();
    let young = meta.modified().ok().and_then(|m| SystemTime::now().duration_since(m).ok()).is_some_and(|age| age < MAX_AGE);
    if !ours || !young {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Keeps `bytes` as `name` (a whole new file renamed over the old one: a reader sees one or
/// the other), unless the folder is inside `inside`. Failures are only logged. Not
/// `session::store::file::replace_private_file`: that one syncs to the disk, which a cache that
/// is only asked again when lost does not need, on the first command's path.
pub fn write(name: &str, bytes: &[u8], inside: Option<&Path>) {
    if let Some(dir) = dir() {
        write_in(&dir, name, bytes, inside);
    }
}

fn write_in(dir: &Path, name: &str, bytes: &[u8], inside: Option<&Path>) {
    let Some(path) = path_for(dir, name, inside) else { return };
    let Some(dir) = path.parent() else { return };
    let written = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| tempfile::Builder::new().prefix(".kept-").tempfile_in(dir))
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.persist(&path).map_err(|e| e.error)?;
            Ok(())
        });
    if let Err(e) = written {
        tracing::debug!(path = %path.display(), error = %e, "cannot keep the sandbox's answer");
    }
    prune(dir);
}

/// The file whose age says when [`prune`] last ran in a folder.
const PRUNED: &str = ".pruned";

/// Removes the answers no process would use any more (older than [`MAX_AGE`]): there is one
/// per project ever worked in, so the folder would only grow. Runs at most once per
/// [`MAX_AGE`] per folder (one `stat` otherwise), as an answer is written.
fn prune(dir: &Path) {
    let marker = dir.join(PRUNED);
    let now = SystemTime::now();
    let older = |meta: &std::fs::Metadata| meta.modified().ok().and_then(|m| now.duration_since(m).ok()).is_some_and(|age| age >= MAX_AGE);
    if std::fs::symlink_metadata(&marker).is_ok_and(|m| !older(&m)) {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_name() != PRUNED && entry.metadata().is_ok_and(|m| m.is_file() && older(&m)) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    if let Err(e) = std::fs::File::create(&marker).and_then(|f| f.set_modified(now)) {
        tracing::debug!(path = %marker.display(), error = %e, "cannot mark the kept answers pruned");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn an_answer_is_read_back_only_while_this_user_alone_could_have_written_it() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cache/handoff-nvim/sandbox");
        write_in(&dir, "a", b"yes", None);
        assert_eq!(read_in(&dir, "a", None).as_deref(), Some(&b"yes"[..]));
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        // Writable by the group or others: anyone may have written it.
        std::fs::set_permissions(dir.join("a"), std::fs::Permissions::from_mode(0o664)).unwrap();
        assert_eq!(read_in(&dir, "a", None), None);
        std::fs::set_permissions(dir.join("a"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_in(&dir, "a", None).is_some());
        // A link by its name is not followed (it could name a file a command wrote).
        std::fs::write(root.path().join("forged"), b"yes").unwrap();
        std::os::unix::fs::symlink(root.path().join("forged"), dir.join("b")).unwrap();
        assert_eq!(read_in(&dir, "b", None), None);
        // Older than a day: asked again.
        let old = SystemTime::now() - MAX_AGE - Duration::from_secs(60);
        std::fs::File::options().write(true).open(dir.join("a")).unwrap().set_modified(old).unwrap();
        assert_eq!(read_in(&dir, "a", None), None);
    }

    #[test]
    fn answers_no_process_would_use_are_removed_once_a_day_as_one_is_written() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("sandbox");
        write_in(&dir, "fresh", b"yes", None);
        let stale = SystemTime::now() - MAX_AGE - Duration::from_secs(60);
        let age = |name: &str, when: SystemTime| std::fs::File::options().write(true).open(dir.join(name)).unwrap().set_modified(when).unwrap();
        std::fs::write(dir.join("git-old"), b"old").unwrap();
        age("git-old", stale);
        // Pruned less than a day ago: the old answer stays until the next day's write.
        write_in(&dir, "another", b"yes", None);
        assert!(dir.join("git-old").exists());
        age(PRUNED, stale);
        write_in(&dir, "another", b"yes", None);
        assert!(!dir.join("git-old").exists(), "an answer older than a day was left");
        for kept in ["fresh", "another", PRUNED] {
            assert!(dir.join(kept).exists(), "{kept} was removed");
        }
    }

    #[test]
    fn nothing_is_kept_in_nor_read_from_a_folder_commands_may_write() {
        let root = tempfile::tempdir().unwrap();
        let project = crate::sandbox::paths::real_path(root.path());
        let dir = project.join(".cache/handoff-nvim/sandbox");
        write_in(&dir, "a", b"yes", Some(&project));
        assert!(!dir.join("a").exists(), "kept inside the project");
        // One a command left there is not read; the control: the same file, the project elsewhere.
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a"), b"yes").unwrap();
        std::fs::set_permissions(dir.join("a"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_in(&dir, "a", Some(&project)), None);
        assert!(read_in(&dir, "a", Some(Path::new("/elsewhere"))).is_some());
    }
}
