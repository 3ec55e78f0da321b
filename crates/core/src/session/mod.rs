//! Sessions: pi-compatible JSONL files holding a tree of entries (`SessionManager`).

pub mod chain;
pub mod changes;
pub mod context;
pub mod derived;
pub mod entry;
pub mod ledger;
pub mod paths;
pub mod pins;
pub mod review;
pub mod scan;
mod skim;
mod store;
pub mod todos;

use std::path::PathBuf;

pub use changes::{Before, ChangedFile, Originals};
pub use context::SessionContext;
pub use entry::{SessionEntry, SessionHeader};
pub use derived::{author, handoff_request, mark_handoff_request, mark_host, message_count, Author, HostMessage};
pub use store::{SessionInfo, SessionManager};
pub use todos::{Todo, TodoStatus};
/// The store's private-file rules, for files kept beside a session (the handoff document).
pub use store::file;

/// Failures of the session store. Each names the file and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is empty: it is not a session file")]
    Empty { path: PathBuf },
    #[error("{path} has no session header (no line with \"type\":\"session\"): it is not a session file")]
    NoHeader { path: PathBuf },
    #[error("{path}: the session header is invalid: {message}")]
    BadHeader { path: PathBuf, message: String },
    #[error("{path} is not a regular file (a directory, pipe or device), so not a session file")]
    NotAFile { path: PathBuf },
    #[error("{path} holds more entries than a session can (4 billion)")]
    TooManyEntries { path: PathBuf },
    #[error("no entry with id {0} in this session")]
    UnknownEntry(String),
    #[error("cannot encode an entry: {0}")]
    Encode(String),
}
