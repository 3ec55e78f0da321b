//! The engine's one way of taking a lock. A panic while a lock was held poisons it; the data
//! behind every lock here stays consistent through a panic (each critical section is a handful
//! of assignments), so the lock is taken anyway instead of spreading the panic.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// `m`'s guard, poisoned or not.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
