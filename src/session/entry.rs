//! Session file lines: the header and the entries, in pi's format version 3.
//!
//! Entries keep every field they carry in `fields`, so unknown entry types and unknown fields of
//! known types survive a load and reach any export untouched. Typed views (`message()`,
//! `custom_message()`, …) read from those fields.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{Content, Message};

pub const CURRENT_VERSION: u64 = 3;

/// The first `type:"session"` line of a file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default = "default_version")]
    pub version: u64,
    pub id: String,
    #[serde(default)]
    pub timestamp: String,
    #[serde(default)]
    pub cwd: String,
    /// Absolute path of the session this one was handed off (or forked) from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn default_version() -> u64 {
    1
}

/// One entry of the session tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    /// Everything else on the line, in file order.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// Entry type names used by pi.
pub mod kind {
    pub const MESSAGE: &str = "message";
    pub const CUSTOM_MESSAGE: &str = "custom_message";
    pub const MODEL_CHANGE: &str = "model_change";
    pub const THINKING_LEVEL_CHANGE: &str = "thinking_level_change";
    pub const COMPACTION: &str = "compaction";
    pub const BRANCH_SUMMARY: &str = "branch_summary";
    pub const LABEL: &str = "label";
    pub const SESSION_INFO: &str = "session_info";
    pub const CUSTOM: &str = "custom";
}

/// A `custom_message` entry: extension-provided content that takes part in the LLM context.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomMessage {
    pub custom_type: String,
    pub content: Content,
    pub display: bool,
}

impl SessionEntry {
    pub fn is_message(&self) -> bool {
        self.kind == kind::MESSAGE
    }

    fn str_field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }

    /// The message of a `message` entry (`None` for other types or an unreadable message).
    pub fn message(&self) -> Option<Message> {
        if !self.is_message() {
            return None;
        }
        self.fields.get("message").and_then(|v| Message::deserialize(v).ok())
    }

    pub fn custom_message(&self) -> Option<CustomMessage> {
        if self.kind != kind::CUSTOM_MESSAGE {
            return None;
        }
        Some(CustomMessage {
            custom_type: self.str_field("customType").unwrap_or_default().to_string(),
            content: self
                .fields
                .get("content")
                .and_then(|v| Content::deserialize(v).ok())
                .unwrap_or_default(),
            display: self.fields.get("display").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// `(provider, model id)` of a `model_change` entry, in pi's (`provider`+`modelId`) or
    /// oh-my-pi's (`model: "provider/id"`) spelling.
    pub fn model_change(&self) -> Option<(String, String)> {
        if self.kind != kind::MODEL_CHANGE {
            return None;
        }
        if let Some(id) = self.str_field("modelId") {
            return Some((self.str_field("provider").unwrap_or_default().to_string(), id.into()));
        }
        let model = self.str_field("model")?;
        Some(match model.split_once('/') {
            Some((provider, id)) => (provider.into(), id.into()),
            None => (String::new(), model.into()),
        })
    }

    pub fn thinking_level(&self) -> Option<String> {
        if self.kind != kind::THINKING_LEVEL_CHANGE {
            return None;
        }
        self.str_field("thinkingLevel").map(str::to_string)
    }

    /// `(summary, first kept entry id)` of a `compaction` entry.
    pub fn compaction(&self) -> Option<(String, Option<String>)> {
        if self.kind != kind::COMPACTION {
            return None;
        }
        Some((
            self.str_field("summary").unwrap_or_default().to_string(),
            self.str_field("firstKeptEntryId").map(str::to_string),
        ))
    }

    pub fn branch_summary(&self) -> Option<String> {
        if self.kind != kind::BRANCH_SUMMARY {
            return None;
        }
        self.str_field("summary").map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_types_survive_a_round_trip() {
        let line = r#"{"type":"future_thing","id":"abcd1234","parentId":null,"timestamp":"t","payload":{"x":[1,2]},"zeta":true}"#;
        let entry: SessionEntry = serde_json::from_str(line).unwrap();
        assert_eq!(entry.kind, "future_thing");
        assert_eq!(serde_json::to_string(&entry).unwrap(), line);
    }

    #[test]
    fn model_change_reads_both_spellings() {
        let pi: SessionEntry = serde_json::from_str(
            r#"{"type":"model_change","id":"a","parentId":null,"timestamp":"t","provider":"mock","modelId":"m"}"#,
        )
        .unwrap();
        let omp: SessionEntry = serde_json::from_str(
            r#"{"type":"model_change","id":"a","parentId":null,"timestamp":"t","model":"mock/m"}"#,
        )
        .unwrap();
        assert_eq!(pi.model_change(), Some(("mock".into(), "m".into())));
        assert_eq!(omp.model_change(), Some(("mock".into(), "m".into())));
    }
}
