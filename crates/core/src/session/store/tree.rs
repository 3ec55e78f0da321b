//! The entry tree: entries indexed by id, each naming its parent, and the leaf where the next
//! entry goes. The branch from the root to the leaf is what the conversation is built from.

use std::io::Write;
use std::path::Path;

use super::index::EntryIndex;
use super::SessionManager;
use crate::session::context::{self, SessionContext};
use crate::message::{ContextMessage, Message, Role};
use crate::session::entry::may_name_tool;
use crate::session::{derived, todos, SessionEntry, SessionError, Todo};

/// A fresh 8-hex-char entry id, unique among `entries`.
pub(super) fn new_entry_id(taken: &EntryIndex, entries: &[SessionEntry]) -> String {
    loop {
        let id = format!("{:08x}", rand::random::<u32>());
        if !taken.contains(entries, &id) {
            return id;
        }
    }
}

/// Indexes entries by id. The same entry written twice (pi's re-append of a session it
/// resumed) is kept once; of two different entries with one id, the later one wins.
pub(super) fn index_entries(path: &Path, entries: &mut Vec<SessionEntry>, warnings: &mut Vec<String>) -> EntryIndex {
    loop {
        let mut index = EntryIndex::with_capacity(entries.len());
        let mut repeats = Vec::new();
        let mut reused = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            match index.insert_id(entries, i) {
                Some(first) if entries[first] == *entry => {
                    index.insert_id(entries, first);
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
            index.link_parents(entries);
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
        self.index.get(&self.entries, id).map(|i| &self.entries[i])
    }

    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf_id.as_deref()
    }

    /// The path from the root to `from` (default: the leaf), root first. A parent id that points
    /// nowhere ends the walk there; a cycle is cut.
    pub fn get_branch(&self, from: Option<&str>) -> Vec<&SessionEntry> {
        let mut path = Vec::new();
        // Parents are positions, and a cycle is met again as a position seen: a walk hashes
        // nothing (with ids, each of the four walks per transcript of a 100k-entry session took ~45 ms).
        let mut seen = vec![0u64; self.entries.len().div_ceil(64)];
        let mut cursor = from.or(self.leaf_id.as_deref()).and_then(|id| self.index.get(&self.entries, id));
        while let Some(i) = cursor {
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            if seen[word] & bit != 0 {
                break;
            }
            seen[word] |= bit;
            path.push(&self.entries[i]);
            cursor = self.index.parent(i);
        }
        path.reverse();
        path
    }

    /// Moves the leaf to `id`: the next append starts a new branch there.
    pub fn branch(&mut self, id: &str) -> Result<(), SessionError> {
        if !self.index.contains(&self.entries, id) {
            return Err(SessionError::UnknownEntry(id.to_string()));
        }
        self.leaf_id = Some(id.into());
        Ok(())
    }

    /// Messages on the current branch ([`derived::message_count`]: the picker shows it, the
    /// handoff's guard checks it).
    pub fn count_branch_messages(&self) -> usize {
        derived::message_count(&self.get_branch(None))
    }

    /// The todo list of the current branch ([`todos::of_branch`]).
    pub fn todos(&self) -> Vec<Todo> {
        todos::of_branch(&self.get_branch(None))
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
            .filter(|e| e.message_role() == Some(Role::ToolResult) && e.message_json().is_some_and(|j| may_name_tool(j, tool)))
            .filter_map(SessionEntry::message)
            .filter(|m| m.tool_result().and_then(|r| r.tool_name()) == Some(tool))
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

