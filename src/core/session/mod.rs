//! Sessions: pi-compatible JSONL files holding a tree of entries (`SessionManager`).

pub mod changes;
pub mod context;
pub mod entry;
pub mod paths;
mod store;

use std::path::PathBuf;

pub use changes::{Before, ChangedFile, Originals};
pub use context::SessionContext;
pub use entry::{SessionEntry, SessionHeader};
pub use store::{SessionInfo, SessionManager};
/// The store's private-file rules, for files kept beside a session (the handoff document).
pub(crate) use store::file;

/// Maps `items` in order; on all cores when `parallel` (the caller knows when the work is worth
/// a thread: parsing a large session's lines or messages).
pub(crate) fn map_in_parallel<T: Send, U: Send>(items: Vec<T>, parallel: bool, f: impl Fn(T) -> U + Sync) -> Vec<U> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(8);
    if !parallel || threads < 2 || items.len() < threads {
        return items.into_iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let mut items = items;
    let mut tails = Vec::new();
    while items.len() > chunk {
        tails.push(items.split_off(items.len() - chunk));
    }
    tails.reverse();
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> =
            tails.into_iter().map(|part| scope.spawn(move || part.into_iter().map(f).collect::<Vec<_>>())).collect();
        let mut mapped: Vec<U> = Vec::with_capacity(items.len() * threads);
        mapped.extend(items.into_iter().map(f));
        for worker in workers {
            match worker.join() {
                Ok(part) => mapped.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        mapped
    })
}

/// Maps `items` in order on all cores (a large session's lines, a batch at a time).
pub(crate) fn map_slice_in_parallel<T: Sync, U: Send>(items: &[T], f: impl Fn(&T) -> U + Sync) -> Vec<U> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(8);
    if threads < 2 || items.len() < threads {
        return items.iter().map(f).collect();
    }
    let mut parts = items.chunks(items.len().div_ceil(threads));
    let first = parts.next().unwrap_or_default();
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> =
            parts.map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<_>>())).collect();
        let mut mapped: Vec<U> = Vec::with_capacity(items.len());
        mapped.extend(first.iter().map(f));
        for worker in workers {
            match worker.join() {
                Ok(part) => mapped.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        mapped
    })
}

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
