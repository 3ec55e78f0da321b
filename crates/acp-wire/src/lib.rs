//! The Agent Client Protocol's wire types: the one module that names the pinned
//! `agent-client-protocol-schema` crate (its types only: the JSON-RPC loop is ours, `rpc.rs`).
//! A new version of the crate changes this file and whatever no longer compiles, nothing else.

pub use agent_client_protocol_schema::v1::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateResponse, AvailableCommand, AvailableCommandInput,
    AvailableCommandsUpdate, CancelNotification, ClientCapabilities, CompactionStatus, CompactionSummaryChunk,
    CompactionUpdate, ContentBlock, ContentChunk, Diff, EmbeddedResourceResource, Error as RpcError,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    CloseSessionRequest, CloseSessionResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse,
    PermissionOption, PermissionOptionKind, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, PromptCapabilities,
    PromptRequest, PromptResponse, ReadTextFileRequest, ReadTextFileResponse, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities, SessionResumeCapabilities, SessionId, SessionInfo,
    SessionListCapabilities, SessionNotification, SessionUpdate, StopReason, TextContent, ToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UnstructuredCommandInput,
    UsageUpdate, WriteTextFileRequest,
};
pub use agent_client_protocol_schema::ProtocolVersion;

use handoff_core::tools::Activity;

/// ACP's kind of a call that does `activity` (the tool's own word: `Tool::activity`). The one
/// table between ACP's kinds and our activities: [`activity`] reads it backwards.
pub fn kind(activity: Activity) -> ToolKind {
    match activity {
        Activity::Read => ToolKind::Read,
        Activity::Edit => ToolKind::Edit,
        Activity::Delete => ToolKind::Delete,
        Activity::Move => ToolKind::Move,
        Activity::Search => ToolKind::Search,
        Activity::Execute => ToolKind::Execute,
        Activity::Think => ToolKind::Think,
        Activity::Fetch => ToolKind::Fetch,
        Activity::Other => ToolKind::Other,
    }
}

/// What a call of ACP's kind `kind` does ([`kind`] backwards); a kind we have no activity for
/// (`switch_mode`) is [`Activity::Other`].
pub fn activity(kind: ToolKind) -> Activity {
    use Activity::*;
    [Read, Edit, Delete, Move, Search, Execute, Think, Fetch].into_iter().find(|a| self::kind(*a) == kind).unwrap_or(Other)
}

/// The methods we answer and send, by their wire names.
pub mod method {
    pub const INITIALIZE: &str = "initialize";
    pub const AUTHENTICATE: &str = "authenticate";
    pub const SESSION_NEW: &str = "session/new";
    pub const SESSION_LOAD: &str = "session/load";
    pub const SESSION_LIST: &str = "session/list";
    pub const SESSION_RESUME: &str = "session/resume";
    pub const SESSION_CLOSE: &str = "session/close";
    pub const SESSION_PROMPT: &str = "session/prompt";
    pub const SESSION_CANCEL: &str = "session/cancel";
    pub const SESSION_UPDATE: &str = "session/update";
    pub const REQUEST_PERMISSION: &str = "session/request_permission";
    pub const READ_TEXT_FILE: &str = "fs/read_text_file";
    pub const WRITE_TEXT_FILE: &str = "fs/write_text_file";
}

/// JSON-RPC error codes we answer with (JSON-RPC 2.0's, and ACP's "resource not found" for a
/// session id we do not know).
pub mod code {
    pub const PARSE_ERROR: i32 = -32700;
    pub const INVALID_REQUEST: i32 = -32600;
    pub const METHOD_NOT_FOUND: i32 = -32601;
    pub const INVALID_PARAMS: i32 = -32602;
    pub const INTERNAL_ERROR: i32 = -32603;
    pub const RESOURCE_NOT_FOUND: i32 = -32002;
}

/// A text content block.
pub fn text(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

/// A text chunk of a message or thought.
pub fn chunk(text_: impl Into<String>) -> ContentChunk {
    ContentChunk::new(text(text_))
}
