//! What a tool answers: its definition for the model, its result, and why it failed.

use std::io;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::message::{now_millis, tool_result_keys, Content, ContentBlock, Message, Role};

/// What the model is offered of a tool: the provider layer's type (the request carries it).
pub use crate::provider::ToolDefinition;

/// One tool's result, in the shape pi stores in a `toolResult` message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolOutput {
    /// Text blocks, and image blocks (`{type: "image", data, mimeType}`) for `read` of an image.
    pub content: Vec<ContentBlock>,
    /// pi's `details` for the tool (`{diff, firstChangedLine}` for edit, `{truncation,
    /// fullOutputPath}` for bash, `{todos}` for todo_write, …); `Null` when there are none, `{}`
    /// for errors (as pi).
    pub details: Value,
    #[serde(rename = "isError")]
    pub is_error: bool,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>, details: Value) -> Self {
        Self { content: vec![ContentBlock::text(text)], details, is_error: false }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            details: Value::Object(Map::new()),
            is_error: true,
        }
    }

    /// All text blocks joined with `\n`.
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter(|b| b.is_text())
            .filter_map(|b| b.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The `toolResult` message pi stores for this result (`toolCallId`, `toolName`, `content`,
    /// `details` when there are any, `isError`, `timestamp`).
    pub fn into_message(self, tool_call_id: &str, tool_name: &str) -> Message {
        let mut extra = Map::new();
        extra.insert(tool_result_keys::CALL_ID.into(), Value::String(tool_call_id.into()));
        extra.insert(tool_result_keys::TOOL_NAME.into(), Value::String(tool_name.into()));
        if !self.details.is_null() {
            extra.insert(tool_result_keys::DETAILS.into(), self.details);
        }
        extra.insert(tool_result_keys::IS_ERROR.into(), Value::Bool(self.is_error));
        Message {
            role: Role::ToolResult,
            content: Content::Blocks(self.content),
            stop_reason: None,
            error_message: None,
            usage: None,
            timestamp: Some(now_millis()),
            extra,
        }
    }
}

pub(crate) fn image_block(data: String, mime_type: &str) -> ContentBlock {
    let mut extra = Map::new();
    extra.insert("data".into(), Value::String(data));
    extra.insert("mimeType".into(), Value::String(mime_type.into()));
    ContentBlock { kind: "image".into(), text: None, thinking: None, extra }
}

/// Why a tool did not do what it was asked. [`execute`] turns it into an error [`ToolOutput`]
/// whose text is this error's display.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("Tool {0} not found")]
    UnknownTool(String),
    /// The arguments do not fit the schema; the text is pi's validation message.
    #[error("{0}")]
    InvalidArguments(String),
    #[error("Operation aborted")]
    Aborted,
    /// The tool ran and refused or failed; the text says why and, where it can, what to do.
    #[error("{0}")]
    Failed(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl ToolError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        ToolError::Io { context: context.into(), source }
    }
}

