//! The entry tree: entries indexed by id, each naming its parent, and the leaf where the next
//! entry goes. The branch from the root to the leaf is what the conversation is built from.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use compact_str::CompactString;

use super::SessionManager;
use crate::core::session::context::{self, SessionContext};
use crate::core::message::{ContextMessage, Message, Role};
use crate::core::session::{SessionEntry, SessionError};

/// Entry id → position in `entries`. foldhash rather than SipHash: the keys come from the
/// user's own files, and hashing them was a tenth of loading a large session.
pub(super) type EntryIndex = HashMap<CompactString, usize, foldhash::fast::RandomState>;

/// A fresh 8-hex-char entry id, unique in `taken`.
pub(super) fn new_entry_id(taken: &EntryIndex) -> String {
    loop {
        let id = format!("{:08x}", rand::random::<u32>());
        if !taken.contains_key(id.as_str()) {
            return id;
        }
    }
}

/// Indexes entries by id. The same entry written twice (pi's re-append of a session it
/// resumed) is kept once; of two different entries with one id, the later one wins.
pub(super) fn index_entries(path: &Path, entries: &mut Vec<SessionEntry>, warnings: &mut Vec<String>) -> EntryIndex {
    loop {
        let mut index = EntryIndex::with_capacity_and_hasher(entries.len(), Default::default());
        let mut repeats = Vec::new();
        let mut reused = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            match index.insert(entry.id.clone(), i) {
                Some(first) if entries[first] == *entry => {
                    index.insert(entry.id.clone(), first);
                    repeats.push(i);
                }
                Some(_) => reused.push(format!(
                    "{}: entry id {} appears more than once; the later one wins",
                    path.display(),
                    entry.id
                )),
                None => {}
            }
        }
        if repeats.is_empty() {
            warnings.extend(reused);
            return index;
        }
        // Rare: drop the repeats and index again, so that positions are right.
        let mut position = 0;
        entries.retain(|_| {
            position += 1;
            repeats.binary_search(&(position - 1)).is_err()
        });
    }
}

impl SessionManager {
    pub fn get_entries(&self) -> &[SessionEntry] {
        &self.entries
    }

    pub fn get_entry(&self, id: &str) -> Option<&SessionEntry> {
        self.index.get(id).map(|&i| &self.entries[i])
    }

    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf_id.as_deref()
    }

    /// The path from the root to `from` (default: the leaf), root first. A parent id that points
    /// nowhere ends the walk there; a cycle is cut.
    pub fn get_branch(&self, from: Option<&str>) -> Vec<&SessionEntry> {
        let mut path = Vec::new();
        // A parent cycle (a damaged file) ends the walk; marked by position, not hashed by id:
        // this walk runs several times per request.
        let mut seen = vec![false; self.entries.len()];
        let mut cursor = from.or(self.leaf_id.as_deref()).and_then(|id| self.index.get(id).copied());
        while let Some(i) = cursor {
            let entry = &self.entries[i];
            if std::mem::replace(&mut seen[i], true) {
                break;
            }
            path.push(entry);
            cursor = entry.parent_id.as_deref().and_then(|p| self.index.get(p).copied());
        }
        path.reverse();
        path
    }

    /// Moves the leaf to `id`: the next append starts a new branch there.
    pub fn branch(&mut self, id: &str) -> Result<(), SessionError> {
        if !self.index.contains_key(id) {
            return Err(SessionError::UnknownEntry(id.to_string()));
        }
        self.leaf_id = Some(id.into());
        Ok(())
    }

    /// Messages on the current branch (the rule both handoff guards use).
    pub fn count_branch_messages(&self) -> usize {
        self.get_branch(None).iter().filter(|e| e.is_message()).count()
    }

    /// The results of `tool` on the current branch, oldest first. Only those messages are
    /// parsed (a cheap text test picks them), so a large session costs little.
    pub fn branch_tool_results(&self, tool: &str) -> Vec<Message> {
        Self::tool_results_in(&self.get_branch(None), tool)
    }

    /// The results of `tool` among `entries` (a branch already walked), oldest first.
    pub fn tool_results_in(entries: &[&SessionEntry], tool: &str) -> Vec<Message> {
        entries
            .iter()
            .copied()
            .filter(|e| {
                e.message_role() == Some(Role::ToolResult)
                    && e.message_json().is_some_and(|j| memchr::memmem::find(j.as_bytes(), tool.as_bytes()).is_some())
            })
            .filter_map(SessionEntry::message)
            .filter(|m| m.extra_str("toolName") == Some(tool))
            .collect()
    }

    /// The LLM context for the leaf.
    pub fn build_session_context(&self) -> SessionContext {
        context::build(&self.get_branch(None))
    }

    /// The messages of the LLM context for the leaf as a request needs them: stored ones as
    /// their JSON text, unparsed.
    pub fn request_messages(&self) -> Vec<ContextMessage> {
        context::request_messages(&self.get_branch(None))
    }

    /// `(model, thinking level)` in force at the leaf, without reading the messages.
    pub fn context_settings(&self) -> (Option<(String, String)>, Option<String>) {
        context::settings(&self.get_branch(None))
    }

    /// The messages of the LLM context for the leaf, written as a JSON array (stored messages
    /// exactly as they are in the file).
    pub fn write_context_json(&self, out: &mut impl Write) -> std::io::Result<()> {
        context::write_json(&self.get_branch(None), out)
    }
}
