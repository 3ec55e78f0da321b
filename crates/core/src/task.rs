//! Tasks that cannot fail silently: every task the engine and the host spawn goes through
//! [`spawn`], which logs a panic that ended it (what it held is released by its guards as the
//! panic unwinds), and [`install_panic_hook`] logs every panic through `tracing`, with where it
//! happened — the host's stderr is no place anyone reads.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

/// Spawns `future` on the runtime; a panic that ends it is logged as the end of `what`.
pub fn spawn<F>(what: &'static str, future: F) -> tokio::task::JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(panic) = AssertUnwindSafe(future).catch_unwind().await {
            tracing::error!(task = what, "a task ended by a panic ({}); what it held is released", panic_text(panic.as_ref()));
        }
    })
}

/// Runs file work that may block (an fsync) from async code without holding a runtime worker:
/// on a multi-thread runtime the worker's other tasks move to another thread while it runs
/// (`block_in_place`); elsewhere (a current-thread runtime, a test's, or no runtime) it runs
/// as it is. For work that borrows what it needs, where `spawn_blocking` would need it owned.
pub fn blocking<R>(work: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// The text a panic was raised with.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// Logs every panic (message, place, thread) at error level through `tracing`, then reports it
/// as before (the host's stderr is the log file too: `RUST_BACKTRACE` still works there).
pub fn install_panic_hook() {
    let before = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let place = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
        tracing::error!(%place, %thread, "panicked: {}", panic_text(info.payload()));
        before(info);
    }));
}
