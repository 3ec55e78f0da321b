//! What a tool runs with: the working folder, cancellation, the front end's file access, the
//! environment policy, the sandbox, and the session's model for a tool that asks it.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;

use super::{EnvPolicy, ToolError, ToolOutput};

/// How tools read and write files. The Neovim host implements it to go through loaded buffers
/// (so the editor shows a change and `u` undoes it); [`DiskFileAccess`] is the plain disk.
/// `grep`, `find` and `ls` walk the disk directly.
#[async_trait]
pub trait FileAccess: Send + Sync {
    /// A reader over the file's bytes. `read` pulls from it only as far as it needs, so a huge
    /// file is never loaded whole for its first lines.
    async fn open(&self, path: &Path) -> io::Result<Box<dyn AsyncRead + Send + Unpin>>;

    /// The whole file (for `edit`).
    async fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        use tokio::io::AsyncReadExt;
        let mut reader = self.open(path).await?;
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes).await?;
        Ok(bytes)
    }

    /// Replaces the file's bytes, creating the file and any missing parent folders.
    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;

    /// Writes the bytes; `true` when something between (an editor's buffer, a client) wrote
    /// them and may have changed them on the way, so [`Self::write_and_read_back`] reads them
    /// back; `false` when they went to the disk as they are.
    async fn write_through(&self, path: &Path, bytes: &[u8]) -> io::Result<bool> {
        self.write(path, bytes).await.map(|()| true)
    }

    /// Writes, then reads the file back: an editor that writes through its buffer may format
    /// on save, and what the file holds after the write is what the model must be told.
    /// `Some` with the file's bytes when they differ from `bytes`. A file that cannot be read
    /// back counts as written (the write itself succeeded); one written to the disk as it is
    /// is not read back.
    async fn write_and_read_back(&self, path: &Path, bytes: &[u8]) -> io::Result<Option<Vec<u8>>> {
        match self.write_through(path, bytes).await? {
            true => Ok(self.read_back(path, bytes).await),
            false => Ok(None),
        }
    }

    /// The files the front end has open (absolute): read before a command, so that what it
    /// changes in them can be reviewed. None for the plain disk.
    async fn open_files(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    /// The file as it is after `written` was written to it, when it differs. A front end that
    /// wrote to the disk itself (no editor in between) has nothing to read back.
    async fn read_back(&self, path: &Path, written: &[u8]) -> Option<Vec<u8>> {
        match self.read(path).await {
            Ok(now) => (now != written).then_some(now),
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot read a file back after writing it: {e}");
                None
            }
        }
    }
}

/// One question to the session's model, outside the conversation: its own system prompt and
/// one user message, no tools, recorded in no session (the agent implements it with the
/// session's provider and thinking level). The answer's text, or why there is none.
#[async_trait]
pub trait ModelOnce: Send + Sync {
    async fn ask(&self, system: &str, prompt: &str, cancel: &CancellationToken) -> Result<String, String>;

    /// Characters the system prompt and the prompt may have together, so that the request
    /// fits the model's window with room for the answer.
    fn prompt_room(&self) -> usize;
}

/// [`FileAccess`] on the local disk.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskFileAccess;

#[async_trait]
impl FileAccess for DiskFileAccess {
    async fn open(&self, path: &Path) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let file = tokio::fs::File::open(path).await?;
        if file.metadata().await?.is_dir() {
            return Err(io::Error::other("Is a directory"));
        }
        Ok(Box::new(file))
    }

    async fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(parent).await?;
        }
        tokio::fs::write(path, bytes).await
    }

    /// The disk keeps what it is given: nothing to read back.
    async fn write_through(&self, path: &Path, bytes: &[u8]) -> io::Result<bool> {
        self.write(path, bytes).await.map(|()| false)
    }
}

/// Receives a tool's partial result while it runs (bash's output so far); each call replaces
/// the one before, as pi's `onUpdate`.
pub type ProgressFn = Arc<dyn Fn(ToolOutput) + Send + Sync>;

/// What a tool runs with.
#[derive(Clone)]
pub struct ToolContext {
    /// The session's working folder: relative paths and bash start here.
    pub cwd: PathBuf,
    /// Cancelling aborts the running tool (bash's whole process group is killed).
    pub cancel: CancellationToken,
    pub on_progress: Option<ProgressFn>,
    pub files: Arc<dyn FileAccess>,
    /// The environment bash builds for its command (`env.rs`).
    pub env: EnvPolicy,
    /// The shell for bash (pi's `shellPath` setting); default `/bin/bash`, else `bash` on PATH,
    /// else `sh`.
    pub shell: Option<PathBuf>,
    /// Where bash spills full output; default the system temp folder.
    pub spill_dir: Option<PathBuf>,
    /// The session file this session was handed off (or forked) from, its header's
    /// `parentSession`: `session_query` reads it and its ancestors. `None`: no parent.
    pub parent_session: Option<PathBuf>,
    /// The session's model, for a tool that asks it one question (`session_query`).
    pub model: Option<Arc<dyn ModelOnce>>,
    /// bash runs its command in this sandbox (`None`: with the user's rights).
    pub sandbox: Option<crate::sandbox::Sandboxed>,
    /// The real location the agent checked for this call ([`Reach::check`], the sandbox on):
    /// `read`, `grep`, `edit` and `write` act on it instead of resolving their argument again,
    /// so a link planted after the check is not followed. `None`: they resolve the argument.
    pub checked: Option<PathBuf>,
    /// `grep` leaves the user's credential locations out of a folder it walks (the sandbox is
    /// on and the folder itself was not approved as one).
    pub credentials_hidden: bool,
}

impl ToolContext {
    /// The disk, no progress callback, a fresh cancellation token, the default env policy.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            cancel: CancellationToken::new(),
            on_progress: None,
            files: Arc::new(DiskFileAccess),
            env: EnvPolicy::default(),
            shell: None,
            spill_dir: None,
            parent_session: None,
            model: None,
            sandbox: None,
            checked: None,
            credentials_hidden: false,
        }
    }

    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    pub fn with_progress(mut self, on_progress: ProgressFn) -> Self {
        self.on_progress = Some(on_progress);
        self
    }

    pub fn with_files(mut self, files: Arc<dyn FileAccess>) -> Self {
        self.files = files;
        self
    }

    pub fn with_env(mut self, env: EnvPolicy) -> Self {
        self.env = env;
        self
    }

    pub fn with_parent_session(mut self, parent_session: Option<PathBuf>) -> Self {
        self.parent_session = parent_session;
        self
    }

    pub fn with_model(mut self, model: Arc<dyn ModelOnce>) -> Self {
        self.model = Some(model);
        self
    }

    pub fn with_sandbox(mut self, sandbox: Option<crate::sandbox::Sandboxed>) -> Self {
        self.sandbox = sandbox;
        self
    }

    pub fn with_checked(mut self, checked: Option<PathBuf>) -> Self {
        self.checked = checked;
        self
    }

    pub fn with_credentials_hidden(mut self, hidden: bool) -> Self {
        self.credentials_hidden = hidden;
        self
    }

    /// The path a call acts on: the one the agent checked ([`Self::checked`]), else `resolve()`
    /// (the argument resolved as the tool resolves it).
    pub(crate) fn target(&self, resolve: impl FnOnce() -> PathBuf) -> PathBuf {
        self.checked.clone().unwrap_or_else(resolve)
    }

    pub(crate) fn progress(&self, output: ToolOutput) {
        if let Some(f) = &self.on_progress {
            f(output);
        }
    }

    /// Runs `fut` unless or until the token is cancelled.
    pub(crate) async fn abortable<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        if self.cancel.is_cancelled() {
            return Err(ToolError::Aborted);
        }
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(ToolError::Aborted),
            r = fut => r,
        }
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("cwd", &self.cwd)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("env", &self.env)
            .field("shell", &self.shell)
            .field("parent_session", &self.parent_session)
            .field("sandbox", &self.sandbox)
            .field("checked", &self.checked)
            .field("credentials_hidden", &self.credentials_hidden)
            .finish_non_exhaustive()
    }
}

