//! The store's file handling: private folders and files (0700 and 0600: sessions hold
//! everything the user said), appends of whole lines, a new file that appears complete or not
//! at all, and fsync wherever a write must survive a crash. The handoff document written beside
//! a session follows the same rules through `write_private_file`.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::session::paths::session_side_dir;
use crate::session::SessionError;

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io { path: path.to_path_buf(), source }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// Creates `dir` and any missing parents, the created ones with mode 0700.
pub fn create_private_dir(dir: &Path) -> Result<(), SessionError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_private_dir(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => set_mode(dir, 0o700).map_err(io_err(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(SessionError::Io { path: dir.to_path_buf(), source: e }),
    }
}

/// Opens `path` for appending (created 0600; with `create_new`, only if it does not exist yet).
pub(super) fn open_append(path: &Path, create_new: bool) -> Result<File, SessionError> {
    let mut options = OpenOptions::new();
    options.append(true);
    if create_new {
        options.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).map_err(io_err(path))
}

/// Makes a rename or a new file in `dir` durable (best effort: not every file system can).
pub(super) fn fsync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Creates `path` holding `contents`, all or nothing: the bytes are written and synced under the
/// temporary name `staging` (same folder), then renamed into place, so `path` never exists half
/// written whenever the process dies, and a failed write (a full disk) leaves nothing behind.
/// Returns the file, open for appending.
pub(super) fn create_complete(staging: &Path, path: &Path, contents: &[u8]) -> Result<File, SessionError> {
    let mut file = open_append(staging, true)?;
    let written = file.write_all(contents).and_then(|()| file.sync_data()).and_then(|()| fs::rename(staging, path));
    if let Err(e) = written {
        drop(file);
        let _ = fs::remove_file(staging);
        return Err(SessionError::Io { path: path.to_path_buf(), source: e });
    }
    if let Some(dir) = path.parent() {
        fsync_dir(dir);
    }
    Ok(file)
}

/// Writes `contents` to `path` (created 0600, or truncated) and syncs it to the disk.
pub(crate) fn write_private_file(path: &Path, contents: &[u8]) -> Result<(), SessionError> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(io_err(path))?;
    file.write_all(contents).and_then(|()| file.sync_data()).map_err(io_err(path))
}

/// Replaces `path` with `contents`, all or nothing: written (0600, synced) under a staging name
/// of this process's own beside it (`.<name>.<pid>.tmp`: two processes never write the same
/// one), then renamed over it. The small indexes and records kept beside sessions are written
/// so: a reader sees the old file or the new one, never half of one.
pub fn replace_private_file(path: &Path, contents: &[u8]) -> Result<(), SessionError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staging = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    if let Err(e) = write_private_file(&staging, contents) {
        let _ = fs::remove_file(&staging);
        return Err(e);
    }
    fs::rename(&staging, path).map_err(io_err(path))
}

/// The JSON file at `path` read as a `T`; `None` when there is no such file. A file that is not
/// a `T` is an error naming it as `what` (`invalid <what>: …`).
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path, what: &str) -> Result<Option<T>, SessionError> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| SessionError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(ErrorKind::InvalidData, format!("invalid {what}: {e}")),
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SessionError::Io { path: path.to_path_buf(), source }),
    }
}

/// A folder in a session's side folder that keeps its state in one JSON index, `index.json`,
/// replaced all or nothing: the originals of the agent's changes (`changes::Originals`) and
/// their review (`review::Review`) each have one. The one owner of where such an index is and
/// how it is read and written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IndexedDir {
    dir: PathBuf,
}

impl IndexedDir {
    /// The index file's name in its folder.
    pub(crate) const INDEX_FILE: &'static str = "index.json";

    /// The folder `name` of the session stored in `session_file`.
    pub(crate) fn of_session(session_file: &Path, name: &str) -> Self {
        Self { dir: session_side_dir(session_file).join(name) }
    }

    /// The folder at `dir` (one named in another session's index).
    pub(crate) fn at(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The index as a `T`; `None` when there is none yet (a file that is not a `T` is an error
    /// naming it as `what`).
    pub(crate) fn read<T: DeserializeOwned>(&self, what: &str) -> Result<Option<T>, SessionError> {
        read_json(&self.dir.join(Self::INDEX_FILE), what)
    }

    /// Replaces the index with `index`, the folder made first (0700).
    pub(crate) fn write<T: Serialize>(&self, index: &T) -> Result<(), SessionError> {
        create_private_dir(&self.dir)?;
        let json = serde_json::to_vec(index).map_err(|e| SessionError::Encode(e.to_string()))?;
        replace_private_file(&self.dir.join(Self::INDEX_FILE), &json)
    }
}
