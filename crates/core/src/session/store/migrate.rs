//! Older format versions (1 and 2) brought to version 3 in memory. The file itself is never
//! rewritten: appends go after the old lines, which is why migrated ids must be stable.

use std::collections::HashSet;

use compact_str::CompactString;
use serde_json::Value;

use crate::session::entry::{kind, SessionEntry, SessionHeader};

/// Brings entries of format versions 1 and 2 to version 3, in memory only. Returns a warning
/// for each entry that could not be rebuilt (it is kept as it was, so nothing is lost).
pub(super) fn migrate(header: &mut SessionHeader, entries: &mut [SessionEntry]) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut rebuild = |entry: &mut SessionEntry, fields| {
        if let Err(e) = entry.rebuild(fields) {
            warnings.push(format!(
                "entry {} could not be brought to format version 3 ({e}); it is kept as it was",
                entry.id
            ));
        }
    };
    if header.version < 2 {
        // Version 1 was a linear list without ids: chain the entries in file order. The ids are
        // derived from the position, not random: the file keeps its version-1 lines, so entries
        // appended since name these ids as parents and must find them again on the next load.
        let mut taken: HashSet<CompactString> =
            entries.iter().filter(|e| !e.id.is_empty()).map(|e| e.id.clone()).collect();
        let mut prev: Option<CompactString> = None;
        for (i, entry) in entries.iter_mut().enumerate() {
            if entry.id.is_empty() {
                let mut n = i as u32 + 1;
                while taken.contains(format!("{n:08x}").as_str()) {
                    n = n.wrapping_add(0x0100_0000);
                }
                entry.id = format!("{n:08x}").into();
                taken.insert(entry.id.clone());
            }
            if entry.parent_id.is_none() {
                entry.parent_id = prev.clone();
            }
            prev = Some(entry.id.clone());
        }
        // Compactions named their first kept entry by its index among the file's lines, the
        // header being line 0.
        let ids: Vec<CompactString> = entries.iter().map(|e| e.id.clone()).collect();
        for entry in entries.iter_mut() {
            let mut fields = entry.fields();
            if entry.kind == kind::COMPACTION {
                if let Some(index) = fields.shift_remove("firstKeptEntryIndex") {
                    let target =
                        index.as_u64().and_then(|i| (i as usize).checked_sub(1)).and_then(|i| ids.get(i));
                    if let Some(id) = target {
                        fields.insert("firstKeptEntryId".into(), Value::String(id.to_string()));
                    }
                }
            }
            rebuild(entry, fields);
        }
    }
    if header.version < 3 {
        // Version 3 renamed the `hookMessage` role to `custom`.
        for entry in entries.iter_mut().filter(|e| e.is_message() && e.raw_json().contains("hookMessage")) {
            let mut fields = entry.fields();
            if let Some(Value::Object(msg)) = fields.get_mut("message") {
                if msg.get("role").and_then(Value::as_str) == Some("hookMessage") {
                    msg.insert("role".into(), Value::String("custom".into()));
                    rebuild(entry, fields);
                }
            }
        }
    }
    warnings
}
