//! The entries' index: entry id → position, and each entry's parent as a position, so a branch
//! is walked without hashing an id per step.
//!
//! The table holds positions only (4 bytes a slot) and hashes the ids the entries themselves
//! hold: a map from cloned ids held 32 bytes a slot, 4 MiB of a 100k-entry session's memory.
//! Positions are `u32`: the loader refuses a file of more entries (see `MAX_ENTRIES`).

use hashbrown::hash_table::{Entry, HashTable};

use crate::session::SessionEntry;

/// A position that names no entry (a root, or a parent that is not in the file).
const NONE: u32 = u32::MAX;

/// The most entries a session holds (positions are `u32`, one value means "none").
pub(super) const MAX_ENTRIES: usize = NONE as usize;

#[derive(Debug, Default)]
pub(super) struct EntryIndex {
    table: HashTable<u32>,
    /// The position of each entry's parent, `NONE` for a root or a parent that is not there.
    parents: Vec<u32>,
    /// foldhash rather than SipHash: the keys come from the user's own files, and hashing them
    /// was a tenth of loading a large session.
    hasher: foldhash::fast::RandomState,
}

/// `position` as stored; `None` past `MAX_ENTRIES`.
fn slot(position: usize) -> Option<u32> {
    u32::try_from(position).ok().filter(|&p| p != NONE)
}

impl EntryIndex {
    pub(super) fn with_capacity(entries: usize) -> Self {
        Self { table: HashTable::with_capacity(entries), parents: Vec::with_capacity(entries), ..Self::default() }
    }

    fn hash(&self, id: &str) -> u64 {
        std::hash::BuildHasher::hash_one(&self.hasher, id)
    }

    /// The position of the entry with `id`.
    pub(super) fn get(&self, entries: &[SessionEntry], id: &str) -> Option<usize> {
        let found = self.table.find(self.hash(id), |&p| entries.get(p as usize).is_some_and(|e| e.id == id));
        found.map(|&p| p as usize)
    }

    pub(super) fn contains(&self, entries: &[SessionEntry], id: &str) -> bool {
        self.get(entries, id).is_some()
    }

    /// Points the id of `entries[position]` at `position`; returns where it pointed before (the
    /// same id met again). Parents are resolved apart, once every id is in (`link_parents`).
    pub(super) fn insert_id(&mut self, entries: &[SessionEntry], position: usize) -> Option<usize> {
        let (Some(entry), Some(slot)) = (entries.get(position), slot(position)) else { return None };
        let hasher = &self.hasher;
        let rehash = |&p: &u32| entries.get(p as usize).map_or(0, |e| std::hash::BuildHasher::hash_one(hasher, e.id.as_str()));
        let same = |&p: &u32| entries.get(p as usize).is_some_and(|e| e.id == entry.id);
        match self.table.entry(std::hash::BuildHasher::hash_one(hasher, entry.id.as_str()), same, rehash) {
            Entry::Occupied(mut found) => Some(std::mem::replace(found.get_mut(), slot) as usize),
            Entry::Vacant(room) => {
                room.insert(slot);
                None
            }
        }
    }

    /// Resolves every entry's parent id to a position (after all ids are in).
    pub(super) fn link_parents(&mut self, entries: &[SessionEntry]) {
        self.parents.clear();
        self.parents.reserve_exact(entries.len());
        for entry in entries {
            let parent = entry.parent_id.as_deref().and_then(|p| self.get(entries, p)).and_then(slot);
            self.parents.push(parent.unwrap_or(NONE));
        }
    }

    /// Indexes the entry just pushed as the last of `entries` (its id is new, its parent known).
    pub(super) fn push(&mut self, entries: &[SessionEntry]) {
        let Some(last) = entries.len().checked_sub(1) else { return };
        self.insert_id(entries, last);
        let parent = entries[last].parent_id.as_deref().and_then(|p| self.get(entries, p)).and_then(slot);
        self.parents.push(parent.unwrap_or(NONE));
    }

    /// The position of the parent of the entry at `position`.
    pub(super) fn parent(&self, position: usize) -> Option<usize> {
        self.parents.get(position).copied().filter(|&p| p != NONE).map(|p| p as usize)
    }

    pub(super) fn clear(&mut self) {
        self.table.clear();
        self.parents.clear();
    }
}
