//! The user's pins: texts that hold for the whole task, whatever a handoff document says. The
//! list is kept in the session as pi's extension entry (`"type":"custom"`), which pi keeps, resumes
//! past and never sends to a model; each entry holds the whole list from there on, so the list of
//! a branch is its latest such entry. The session owns this rule: the system prompt, the handoff
//! (which seeds the new session with the same entry) and `/pins` all read it here.

use serde_json::{Map, Value};

use super::entry::kind;
use super::SessionEntry;

/// `customType` of the entry holding the list.
pub const CUSTOM_TYPE: &str = "handoff_pins";

/// The entry's `data`: `{"pins": [...]}`.
pub fn data(pins: &[String]) -> Value {
    Value::Object(Map::from_iter([("pins".to_string(), Value::from(pins.to_vec()))]))
}

/// The list an entry sets, if it is a pins entry. Only a `custom` entry that mentions the type
/// is parsed.
fn set_by(entry: &SessionEntry) -> Option<Vec<String>> {
    if entry.kind != kind::CUSTOM || !entry.raw_json().contains(CUSTOM_TYPE) {
        return None;
    }
    let fields = entry.fields();
    if fields.get("customType").and_then(Value::as_str) != Some(CUSTOM_TYPE) {
        return None;
    }
    let pins = fields.get("data")?.get("pins")?.as_array()?;
    Some(pins.iter().filter_map(Value::as_str).map(str::to_string).collect())
}

/// The pins of a branch (root first): its latest pins entry's list, empty when it has none.
pub fn of_branch(branch: &[&SessionEntry]) -> Vec<String> {
    branch.iter().rev().find_map(|e| set_by(e)).unwrap_or_default()
}

/// The system prompt's section for `pins` (empty for none): each pin whole, as the user wrote it.
pub fn prompt_section(pins: &[String]) -> String {
    if pins.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "# Pinned by the user\n\nThe user pinned these for the whole task: they hold whatever else the conversation or a handoff document says.\n",
    );
    for (n, pin) in pins.iter().enumerate() {
        text.push_str(&format!("\n<pin n=\"{}\">\n{pin}\n</pin>\n", n + 1));
    }
    text.truncate(text.trim_end().len());
    text
}
