//! Session file lines: the header and the entries, in pi's format version 3.
//!
//! Entries keep every field they carry in `fields`, so unknown entry types and unknown fields of
//! known types survive a load and reach any export untouched. Typed views (`message()`,
//! `custom_message()`, …) read from those fields.

use std::borrow::Cow;

use std::ops::Range;
use std::sync::Arc;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::message::{role_of_json, Content, Message, Role, StoredMessage};

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
///
/// The entry keeps its line as JSON text (`raw`) and parses only the four fields every entry
/// has; typed views (`message()`, …) parse the rest on demand. Loading a 100k-entry session then
/// costs the file's size in memory, once, instead of a tree of JSON values, and unknown types
/// and fields are kept byte for byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionEntry {
    pub kind: CompactString,
    pub id: CompactString,
    pub parent_id: Option<CompactString>,
    pub timestamp: CompactString,
    raw: LineText,
    /// Where the `message` object is in `raw` (empty: none): the context can then be written
    /// out without parsing the messages (`handoff-nvim context`).
    message_at: Span,
}

/// A byte range in 32 bits: a large session holds one per entry and line (two `usize` ranges
/// were a sixth of the entries' memory). Lines of files above 4 GiB get a text of their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn new(range: Range<usize>) -> Option<Self> {
        Some(Self { start: u32::try_from(range.start).ok()?, len: u32::try_from(range.len()).ok()? })
    }

    fn range(self) -> Range<usize> {
        let start = self.start as usize;
        start..start + self.len as usize
    }
}

/// The JSON text of an entry: a range of its session file's text, which all the file's entries
/// share (no copy per line: copying was a third of loading a large session); an entry made in
/// memory has a text of its own.
#[derive(Clone, Debug)]
struct LineText {
    text: Arc<String>,
    span: Span,
}

impl LineText {
    fn as_str(&self) -> &str {
        self.text.get(self.span.range()).unwrap_or_default()
    }
}

impl PartialEq for LineText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for LineText {}

/// What an entry holds besides its line: the fields every entry has, and where its message is.
/// Read apart from the entry so that a file's lines can be read on several threads, without
/// them all counting references to the file's text.
pub(crate) struct EntryHead {
    kind: CompactString,
    id: CompactString,
    parent_id: Option<CompactString>,
    timestamp: CompactString,
    message_at: Span,
}

/// Why a line cannot be an entry although it is JSON: longer than 4 GiB.
fn too_long() -> serde_json::Error {
    serde::de::Error::custom("the line is longer than 4 GiB")
}

impl EntryHead {
    /// Reads the head of one line. Fails on invalid JSON or a line without a string `type`.
    /// A line of the common shape is only skimmed ([`super::skim`]); the others are parsed.
    pub(crate) fn read(line: &str) -> Result<Self, serde_json::Error> {
        if let Some(skimmed) = super::skim::skim(line) {
            return Self::of_skimmed(&skimmed);
        }
        let head: HeadView<'_> = serde_json::from_str(line)?;
        // The raw value borrows from `line`: its offset there is the distance between the two.
        let message_at = match head.message {
            Some(m) => {
                let start = m.get().as_ptr() as usize - line.as_ptr() as usize;
                Span::new(start..start + m.get().len()).ok_or_else(too_long)?
            }
            None => Span::default(),
        };
        Ok(Self {
            kind: head.kind.as_ref().into(),
            id: head.id.as_deref().map(CompactString::from).unwrap_or_default(),
            parent_id: head.parent_id.as_deref().map(CompactString::from),
            timestamp: head.timestamp.as_deref().map(CompactString::from).unwrap_or_default(),
            message_at,
        })
    }
}

impl EntryHead {
    fn of_skimmed(s: &super::skim::Skimmed<'_>) -> Result<Self, serde_json::Error> {
        let message_at = match &s.message {
            Some(range) => Span::new(range.clone()).ok_or_else(too_long)?,
            None => Span::default(),
        };
        Ok(Self {
            kind: s.kind.into(),
            id: s.id.map(CompactString::from).unwrap_or_default(),
            parent_id: s.parent_id.map(CompactString::from),
            timestamp: s.timestamp.map(CompactString::from).unwrap_or_default(),
            message_at,
        })
    }
}

/// The fields every entry has, borrowed from its line, and where its message is.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeadView<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    parent_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
}

const HEAD_KEYS: [&str; 4] = ["type", "id", "parentId", "timestamp"];

impl SessionEntry {
    /// Reads one line. Fails on invalid JSON or a line without a string `type`.
    pub fn parse(line: &str) -> Result<Self, serde_json::Error> {
        let head = EntryHead::read(line)?;
        Self::with_head(head, Arc::new(line.to_string()), 0..line.len()).ok_or_else(too_long)
    }

    /// The entry whose line is at `range` of `text` and whose head was read from it (`None`
    /// past 4 GiB of `text`: such a line needs a text of its own).
    pub(crate) fn with_head(head: EntryHead, text: Arc<String>, range: Range<usize>) -> Option<Self> {
        let EntryHead { kind, id, parent_id, timestamp, message_at } = head;
        let span = Span::new(range)?;
        Some(Self { kind, id, parent_id, timestamp, raw: LineText { text, span }, message_at })
    }

    /// Builds an entry from its parts (the line is written in pi's key order).
    pub fn new(
        kind: &str,
        id: String,
        parent_id: Option<String>,
        timestamp: String,
        fields: Map<String, Value>,
    ) -> Result<Self, serde_json::Error> {
        let mut line = Map::new();
        line.insert("type".into(), Value::String(kind.into()));
        line.insert("id".into(), Value::String(id.clone()));
        line.insert("parentId".into(), parent_id.clone().map_or(Value::Null, Value::String));
        line.insert("timestamp".into(), Value::String(timestamp.clone()));
        for (k, v) in fields {
            if !HEAD_KEYS.contains(&k.as_str()) {
                line.insert(k, v);
            }
        }
        Self::parse(&serde_json::to_string(&line)?).map(|entry| Self {
            id: id.into(),
            parent_id: parent_id.map(Into::into),
            timestamp: timestamp.into(),
            ..entry
        })
    }

    /// The entry's line, as JSON text.
    pub fn raw_json(&self) -> &str {
        self.raw.as_str()
    }

    /// Every field except `type`, `id`, `parentId` and `timestamp`, in line order.
    pub fn fields(&self) -> Map<String, Value> {
        let mut map: Map<String, Value> = serde_json::from_str(self.raw_json()).unwrap_or_default();
        for key in HEAD_KEYS {
            map.shift_remove(key);
        }
        map
    }

    /// Rewrites the entry with changed head or fields (format migrations, in memory only).
    pub(crate) fn rebuild(&mut self, fields: Map<String, Value>) -> Result<(), serde_json::Error> {
        *self = Self::new(
            &self.kind,
            self.id.to_string(),
            self.parent_id.as_deref().map(str::to_string),
            self.timestamp.to_string(),
            fields,
        )?;
        Ok(())
    }

    /// Parses the line as `T` (a typed view of some of its fields).
    fn view<'a, T: Deserialize<'a>>(&'a self) -> Option<T> {
        serde_json::from_str(self.raw_json()).ok()
    }
}

impl Serialize for SessionEntry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match serde_json::value::RawValue::from_string(self.raw_json().to_string()) {
            Ok(raw) => raw.serialize(serializer),
            Err(e) => Err(serde::ser::Error::custom(e)),
        }
    }
}

impl<'de> Deserialize<'de> for SessionEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let line = serde_json::to_string(&value).map_err(serde::de::Error::custom)?;
        Self::parse(&line).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
thread_local! {
    /// Messages parsed whole on this thread ([`SessionEntry::message`]), for the tests that
    /// hold a path to parsing each message once.
    pub(crate) static MESSAGE_PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CustomMessageView {
    #[serde(default)]
    custom_type: String,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    display: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelChangeView {
    provider: Option<String>,
    model_id: Option<String>,
    model: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SummaryView {
    summary: Option<Value>,
    first_kept_entry_id: Option<Value>,
    thinking_level: Option<Value>,
}

fn as_string(v: Option<Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

impl SessionEntry {
    pub fn is_message(&self) -> bool {
        self.kind == kind::MESSAGE
    }

    /// The message of a `message` entry (`None` for other types or an unreadable message).
    pub fn message(&self) -> Option<Message> {
        #[cfg(test)]
        MESSAGE_PARSES.with(|n| n.set(n.get() + 1));
        // The message's own text, found when the line was read: the rest of the line is not
        // scanned again.
        serde_json::from_str(self.message_json()?).ok()
    }

    /// The `message` object of a `message` entry as a [`StoredMessage`], sharing the text.
    pub fn stored_message(&self) -> Option<StoredMessage> {
        if !self.is_message() {
            return None;
        }
        let at = Some(self.message_at).filter(|at| at.len > 0)?.range();
        let start = self.raw.span.range().start + at.start;
        Some(StoredMessage::new(self.raw.text.clone(), start..start + at.len()))
    }

    /// The `message` object of a `message` entry, as JSON text exactly as stored.
    pub fn message_json(&self) -> Option<&str> {
        if !self.is_message() {
            return None;
        }
        Some(self.message_at).filter(|at| at.len > 0).and_then(|at| self.raw_json().get(at.range()))
    }

    /// The role of a `message` entry's message, read off its text ([`role_of_json`]: pi's
    /// messages are not parsed).
    pub fn message_role(&self) -> Option<Role> {
        role_of_json(self.message_json()?)
    }

    pub fn custom_message(&self) -> Option<CustomMessage> {
        if self.kind != kind::CUSTOM_MESSAGE {
            return None;
        }
        let v = self.view::<CustomMessageView>()?;
        Some(CustomMessage {
            custom_type: v.custom_type,
            content: v.content.unwrap_or_default(),
            display: v.display.unwrap_or(false),
        })
    }

    /// `(provider, model id)` of a `model_change` entry, in pi's (`provider`+`modelId`) or
    /// oh-my-pi's (`model: "provider/id"`) spelling.
    pub fn model_change(&self) -> Option<(String, String)> {
        if self.kind != kind::MODEL_CHANGE {
            return None;
        }
        let v = self.view::<ModelChangeView>()?;
        if let Some(id) = v.model_id {
            return Some((v.provider.unwrap_or_default(), id));
        }
        let model = as_string(v.model)?;
        Some(match model.split_once('/') {
            Some((provider, id)) => (provider.into(), id.into()),
            None => (String::new(), model),
        })
    }

    pub fn thinking_level(&self) -> Option<String> {
        if self.kind != kind::THINKING_LEVEL_CHANGE {
            return None;
        }
        as_string(self.view::<SummaryView>()?.thinking_level)
    }

    /// `(summary, first kept entry id)` of a `compaction` entry.
    pub fn compaction(&self) -> Option<(String, Option<String>)> {
        if self.kind != kind::COMPACTION {
            return None;
        }
        let v = self.view::<SummaryView>()?;
        Some((as_string(v.summary).unwrap_or_default(), as_string(v.first_kept_entry_id)))
    }

    pub fn branch_summary(&self) -> Option<String> {
        if self.kind != kind::BRANCH_SUMMARY {
            return None;
        }
        as_string(self.view::<SummaryView>()?.summary)
    }
}

/// Whether a tool result's JSON may be one of `tool` (the caller parses those that may). pi
/// writes `toolName` before the content: when it is in the first bytes, outside any nested
/// object or array, its value decides without reading the output (a search of every output was
/// 30 ms of a 100k-entry session's todo list); otherwise any mention of the name does.
pub(in crate::session) fn may_name_tool(json: &str, tool: &str) -> bool {
    const KEY: &str = "\"toolName\":\"";
    let head = &json.as_bytes()[..json.len().min(512)];
    let top_level = |at: usize| !head[1.min(at)..at].iter().any(|&b| b == b'{' || b == b'[');
    match memchr::memmem::find(head, KEY.as_bytes()).filter(|&at| top_level(at)) {
        Some(at) => {
            let value = &json.as_bytes()[at + KEY.len()..];
            match value.strip_prefix(tool.as_bytes()) {
                Some(rest) => rest.first() == Some(&b'"'),
                // An escaped name is compared by the parse.
                None => value.iter().take(tool.len() + 1).any(|&b| b == b'\\'),
            }
        }
        None => json.contains(tool),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_types_survive_a_round_trip() {
        let line = r#"{"type":"future_thing","id":"abcd1234","parentId":null,"timestamp":"t","payload":{"x":[1,2]},"zeta":true}"#;
        let entry = SessionEntry::parse(line).unwrap();
        assert_eq!(entry.kind, "future_thing");
        assert_eq!(entry.fields()["payload"]["x"][1], 2);
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
