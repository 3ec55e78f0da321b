//! The engine's one way of spreading work over the cores: a large session's lines at load, its
//! messages when a context or a request is built.

/// Maps `items` in order, on all cores when `parallel` (the caller knows when the work is worth
/// a thread) and there are enough of them.
pub(crate) fn map_in_parallel<'a, T: Sync, U: Send>(
    items: &'a [T],
    parallel: bool,
    f: impl Fn(&'a T) -> U + Sync,
) -> Vec<U> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(8);
    if !parallel || threads < 2 || items.len() < threads {
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
