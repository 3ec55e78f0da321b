//! The host ⇄ Lua protocol as Rust types, encoded with rmp-serde. Lua receives [`Record`]s (one
//! batch per frame, `require("handoff.events").dispatch(batch)`) and the answers of requests;
//! it sends the arguments below. Optional members are left out when absent (never nil: msgpack
//! nil becomes `vim.NIL` in Lua, which is truthy and a trap in every `if x then`).

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use handoff_core::agent::{Notice, SwitchReason};
use handoff_core::config::Settings;
use handoff_core::failure::Failure;
use handoff_core::handoff::HandoffOutcome;
use handoff_core::provider::{Api, ThinkingLevel};
use handoff_core::session::SessionInfo;
use handoff_core::tools::consent::ApprovalRequest;
use handoff_core::tools::Todo;

/// Failures of encoding or decoding a protocol value.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("cannot encode {what} for Neovim: {source}")]
    Encode { what: &'static str, source: rmp_serde::encode::Error },
    #[error("invalid {what}: {source}")]
    Decode { what: &'static str, source: rmp_serde::decode::Error },
    #[error("cannot re-read an encoded value: {0}")]
    Value(String),
}

/// Encodes `value` as the msgpack value nvim-rs sends (maps with field names).
pub fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<rmpv::Value, ProtocolError> {
    let bytes = rmp_serde::to_vec_named(value).map_err(|source| ProtocolError::Encode { what, source })?;
    rmpv::decode::read_value(&mut bytes.as_slice()).map_err(|e| ProtocolError::Value(e.to_string()))
}

/// Decodes an argument Lua sent. Lua sends an empty table as an empty array: `T::default()`.
pub fn decode<T: DeserializeOwned + Default>(what: &'static str, value: &rmpv::Value) -> Result<T, ProtocolError> {
    match value {
        rmpv::Value::Nil => return Ok(T::default()),
        rmpv::Value::Array(items) if items.is_empty() => return Ok(T::default()),
        _ => {}
    }
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, value).map_err(|e| ProtocolError::Value(e.to_string()))?;
    rmp_serde::from_slice(&bytes).map_err(|source| ProtocolError::Decode { what, source })
}

// Lua → host ----------------------------------------------------------------------------------

/// Which session `configure` opens.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Resume {
    /// A new session (the default).
    #[default]
    New,
    /// The newest session of the working directory (`resume_last`), or a new one.
    Newest,
}

/// `configure`'s argument.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConfigureArgs {
    /// `setup()`'s provider settings (an empty Lua table arrives as an empty array).
    #[serde(deserialize_with = "table_or_empty")]
    pub settings: Settings,
    pub cwd: Option<PathBuf>,
    /// Reopen this file (after a host restart): wins over `resume`.
    pub session_file: Option<PathBuf>,
    pub resume: Resume,
    /// Lines of a tool's output the chat shows (`setup{ tool_output_lines }`): a transcript
    /// carries no more of each.
    pub tool_output_lines: Option<usize>,
    /// The plugin's user-level folder, `stdpath("config")/handoff`: its `AGENTS.md` comes
    /// first in the system prompt.
    pub config_dir: Option<PathBuf>,
    /// `setup{ handoff = { review } }`: whether a handoff that does not say (`:Handoff`, or
    /// `/handoff` typed in the prompt) opens its document for review first.
    pub handoff_review: Option<bool>,
    /// The editor and its version (`Neovim/0.11.2`): Copilot's `Editor-Version`.
    pub editor_version: Option<String>,
}

/// `handoff`'s second argument: `{ review?, to? }` (`:Handoff!` sends `review = true`; absent,
/// the configured default applies; `:Handoff --to NAME` sends `to`: where the new session goes
/// on, an agent of `agents` or `ours`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffFlags {
    pub review: Option<bool>,
    pub to: Option<String>,
}


/// A request from Lua, its arguments decoded. Every request answers at once: none waits for a
/// session being loaded (that is a `not_ready` failure, and Lua retries once it is open).
#[derive(Clone, Debug)]
pub enum Request {
    Ping,
    Version,
    /// The settings schema's digest ([`handoff_core::config::schema::digest`]).
    SchemaDigest,
    Configure(Box<ConfigureArgs>),
    Status,
    /// The last `limit` items (a page by default).
    Transcript { limit: Option<usize> },
    Changes,
    /// Every hunk of the session's changes, per call, with the files of each call's versions.
    Review,
    /// The editor's keep/reject decisions, to keep beside the session.
    ReviewDecide { decisions: Vec<handoff_core::session::review::Decision> },
    /// A hunk cut in parts (a Visual selection inside it): the parts' new ids.
    ReviewSplit { split: handoff_core::session::review::Split },
    Templates,
    /// What the external agent of the session offers (commands, mode, model), or nil.
    AgentOffers,
    /// Sets the external agent's `what` (`mode`, `model`) to `value`.
    AgentChoose { what: String, value: String },
    /// The session's pins, in order (`/unpin`'s completion).
    Pins,
    NewSession,
    SetModel { model: String },
    /// A level name (parsed by the host: case-insensitive, pi's `xhigh` is `high`).
    SetThinking { level: String },
    Health,
    /// The system prompt as the session's requests send it (`:HandoffContext`).
    SystemPrompt,
    /// `:HandoffMcp [list|start|stop|trust] [server]`: [`McpList`] after the action.
    Mcp { action: Option<String>, server: Option<String> },
    /// The models known at once; `fetch`: and the provider's list, read in a task when it was
    /// not yet (the answer says `pending`, a `models` record brings the list).
    Models { fetch: bool },
    /// Enables a Copilot model for the account (the user said yes), in a task: a
    /// `model_enabled` record says how it ended.
    EnableModel { model: String },
}

/// A notification from Lua (long work, or an abort), its arguments decoded.
#[derive(Clone, Debug)]
pub enum Notification {
    /// What the user typed: the controller classifies it (`/handoff …` too).
    Prompt { text: String },
    Handoff { focus: Option<String>, flags: HandoffFlags },
    HandoffCommit { text: String },
    HandoffDiscard,
    Approve { id: String, decision: handoff_core::tools::consent::Answer, reason: Option<String> },
    /// `changes.review = "before"`: allow an edit or write with the file's text as the user
    /// kept its hunks.
    ApproveReviewed { id: String, text: String },
    Resume { path: PathBuf },
    /// `:HandoffAgent NAME`: a new session on that external agent (`agents`), or on ours.
    Agent { name: String },
    ViewSession { path: PathBuf, limit: Option<usize> },
    /// The sessions of the working directory, listed in a task: a `sessions` record brings them.
    Sessions,
    Abort,
    AbortHandoff,
    Shutdown,
}

/// Decodes the positional arguments of `method` as the tuple `T`: missing trailing ones are
/// nil (an option of Lua's left out), extra ones are an error.
fn args<T: DeserializeOwned>(method: &str, args: &[rmpv::Value], arity: usize) -> Result<T, Failure> {
    if args.len() > arity {
        return Err(Failure::invalid(format!("{method}: takes {arity} arguments, got {}", args.len())));
    }
    let mut padded = args.to_vec();
    padded.resize(arity, rmpv::Value::Nil);
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, &rmpv::Value::Array(padded))
        .map_err(|e| Failure::invalid(format!("{method}: {e}")))?;
    rmp_serde::from_slice(&bytes).map_err(|e| Failure::invalid(format!("{method}: invalid arguments: {e}")))
}

/// `T` from a map, or the empty array an empty Lua table becomes, or nil.
#[derive(Default)]
struct Table<T>(T);

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for Table<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        table_or_empty(deserializer).map(Table)
    }
}

impl Request {
    pub fn decode(method: &str, a: &[rmpv::Value]) -> Result<Request, Failure> {
        Ok(match method {
            "ping" => Request::Ping,
            "version" => Request::Version,
            "schema_digest" => Request::SchemaDigest,
            "configure" => {
                let (Table(parsed),): (Table<ConfigureArgs>,) = args(method, a, 1)?;
                Request::Configure(Box::new(parsed))
            }
            "status" => Request::Status,
            "transcript" => {
                let (limit,) = args(method, a, 1)?;
                Request::Transcript { limit }
            }
            "changes" => Request::Changes,
            "review" => Request::Review,
            "review_decide" => {
                let (decisions,): (Vec<handoff_core::session::review::Decision>,) = args(method, a, 1)?;
                Request::ReviewDecide { decisions }
            }
            "review_split" => {
                let (split,) = args(method, a, 1)?;
                Request::ReviewSplit { split }
            }
            "templates" => Request::Templates,
            "agent_offers" => Request::AgentOffers,
            "agent_choose" => {
                let (what, value) = args(method, a, 2)?;
                Request::AgentChoose { what, value }
            }
            "pins" => Request::Pins,
            "new_session" => Request::NewSession,
            "set_model" => {
                let (model,): (Option<String>,) = args(method, a, 1)?;
                Request::SetModel { model: model.unwrap_or_default() }
            }
            "set_thinking" => {
                let (level,): (Option<String>,) = args(method, a, 1)?;
                Request::SetThinking { level: level.unwrap_or_default() }
            }
            "health" => Request::Health,
            "system_prompt" => Request::SystemPrompt,
            "mcp" => {
                let (action, server) = args(method, a, 2)?;
                Request::Mcp { action, server }
            }
            "models" => {
                let (fetch,): (Option<bool>,) = args(method, a, 1)?;
                Request::Models { fetch: fetch.unwrap_or(true) }
            }
            "enable_model" => {
                let (model,): (Option<String>,) = args(method, a, 1)?;
                Request::EnableModel { model: model.unwrap_or_default() }
            }
            other => return Err(Failure::invalid(format!("unknown request {other}"))),
        })
    }
}

impl Notification {
    pub fn decode(method: &str, a: &[rmpv::Value]) -> Result<Notification, Failure> {
        Ok(match method {
            "prompt" => {
                let (text,) = args(method, a, 1)?;
                Notification::Prompt { text }
            }
            "handoff" => {
                let (focus, Table(flags)) = args(method, a, 2)?;
                Notification::Handoff { focus, flags }
            }
            "handoff_commit" => {
                let (text,) = args(method, a, 1)?;
                Notification::HandoffCommit { text }
            }
            "handoff_discard" => Notification::HandoffDiscard,
            "approve" => {
                let (id, decision, reason) = args(method, a, 3)?;
                Notification::Approve { id, decision, reason }
            }
            "approve_reviewed" => {
                let (id, text) = args(method, a, 2)?;
                Notification::ApproveReviewed { id, text }
            }
            "resume" => {
                let (path,) = args(method, a, 1)?;
                Notification::Resume { path }
            }
            "agent" => {
                let (name,) = args(method, a, 1)?;
                Notification::Agent { name }
            }
            "view_session" => {
                let (path, limit) = args(method, a, 2)?;
                Notification::ViewSession { path, limit }
            }
            "sessions" => Notification::Sessions,
            "abort" => Notification::Abort,
            "abort_handoff" => Notification::AbortHandoff,
            "shutdown" => Notification::Shutdown,
            other => return Err(Failure::invalid(format!("unknown notification {other}"))),
        })
    }
}

/// A request's answer as Lua receives it: `{ ok = value }` or `{ error = { kind, message } }`
/// (an RPC error would reach Lua as a bare string, without its kind).
pub fn answer(result: Result<rmpv::Value, Failure>) -> rmpv::Value {
    let key = |k: &str| rmpv::Value::from(k);
    match result {
        Ok(value) => rmpv::Value::Map(vec![(key("ok"), value)]),
        Err(failure) => {
            let kind = encode("a failure", &failure.kind).unwrap_or_else(|_| key("invalid"));
            rmpv::Value::Map(vec![(
                key("error"),
                rmpv::Value::Map(vec![(key("kind"), kind), (key("message"), rmpv::Value::from(failure.message))]),
            )])
        }
    }
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// A map of named options, or the empty array an empty Lua table becomes, or nil.
fn table_or_empty<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    struct TableOrEmpty<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de> + Default> serde::de::Visitor<'de> for TableOrEmpty<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a table of named options")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
            match seq.next_element::<serde::de::IgnoredAny>()? {
                None => Ok(T::default()),
                Some(_) => Err(serde::de::Error::custom("expected a table of named options, not a list")),
            }
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<T, E> {
            Ok(T::default())
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<T, E> {
            Ok(T::default())
        }
    }
    deserializer.deserialize_any(TableOrEmpty(std::marker::PhantomData))
}

// Host → Lua ----------------------------------------------------------------------------------

/// One item of the chat.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Item {
    User {
        text: String,
    },
    /// The message the host sends to go on after an automatic handoff: the host's words, not
    /// the user's, and shown so.
    Continuation {
        text: String,
    },
    /// The host's reminder of open todo items: its words, not the user's, and shown so.
    Reminder {
        text: String,
    },
    /// The handoff's internal prompt, shown as what the user asked for.
    HandoffRequest {
        focus: String,
    },
    Assistant {
        /// Absent in `message_start`/`message_end` records: the deltas carry the text.
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        stop_reason: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        output_tokens: Option<u64>,
        /// The whole prompt of the request, in tokens: pi's `input` + `cacheRead` + `cacheWrite`.
        #[serde(skip_serializing_if = "Option::is_none")]
        input_tokens: Option<u64>,
        /// Of `input_tokens`, those read from the provider's prompt cache (pi's `cacheRead`).
        #[serde(skip_serializing_if = "Option::is_none")]
        cached_tokens: Option<u64>,
        /// Of `input_tokens`, those written to the prompt cache (pi's `cacheWrite`).
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_write_tokens: Option<u64>,
        /// The tools it called, in order.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallItem>,
    },
    /// A tool's result.
    Tool {
        #[serde(skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// The output's last lines, as many as the chat shows (`tool_output_lines`).
        text: String,
        is_error: bool,
        /// Lines of the output before `text` that the result does not hold (bash past its
        /// limits: they are in the file its last line names).
        #[serde(skip_serializing_if = "is_zero")]
        earlier: u64,
        /// Lines of the output before `text`, not sent: a `read` result can be 2,000 lines the
        /// chat never shows.
        #[serde(skip_serializing_if = "is_zero")]
        earlier_lines: usize,
    },
    Custom {
        custom_type: String,
        text: String,
    },
    /// The injected handoff document of a handed-off session.
    Handoff {
        text: String,
        /// What the handoff carried and dropped (its entry's `details.ledger`), in words.
        #[serde(skip_serializing_if = "Option::is_none")]
        ledger: Option<Box<LedgerText>>,
    },
    Compaction {
        text: String,
    },
    BranchSummary {
        text: String,
    },
    Model {
        provider: String,
        model: String,
    },
}

#[cfg(test)]
impl Item {
    /// An assistant item with nothing but `model` (as a `message_start` record carries one).
    pub(crate) fn bare_assistant(model: Option<&str>) -> Item {
        Item::Assistant {
            text: None,
            thinking: None,
            model: model.map(str::to_string),
            stop_reason: None,
            error_message: None,
            output_tokens: None,
            input_tokens: None,
            cached_tokens: None,
            cache_write_tokens: None,
            tool_calls: Vec::new(),
        }
    }
}

/// A tool call of an assistant message, as the chat names it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallItem {
    pub id: String,
    pub tool: String,
    /// The argument that says what it does: the command, the path, the pattern.
    pub summary: String,
}

/// The editor's answer to a write through a buffer (`require('handoff.files').write`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct BufferWrite {
    /// A buffer held the file and took the text (and wrote it).
    pub through_buffer: bool,
    /// Why the write was refused (unsaved changes in the buffer).
    pub error: Option<String>,
}

/// Session identity and run state, as `status()` reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    pub session_file: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    pub busy: bool,
    pub generating_handoff: bool,
    pub provider: String,
    pub api: Api,
    pub model: String,
    /// The session's thinking level (`off`, `minimal`, `low`, `medium`, `high`).
    pub thinking: ThinkingLevel,
    /// Tokens of the model's window the conversation fills (the provider's last count).
    pub context_tokens: u64,
    pub context_window: u64,
    /// How full the window is, in percent, as every text says it (the meter, the banner):
    /// `controller::text::percent`, the one place it is computed.
    pub context_percent: u64,
    /// The instruction files (`AGENTS.md`, `CLAUDE.md`) the system prompt holds, in order.
    pub instruction_files: Vec<String>,
    /// The user's pins, in order.
    pub pins: Vec<String>,
}

/// `system_prompt`: the system prompt as the session's requests send it, and its sources.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SystemPromptInfo {
    pub text: String,
    pub instruction_files: Vec<String>,
    pub skills: Vec<SkillItem>,
    pub date: String,
    pub cwd: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SkillItem {
    pub name: String,
    pub description: String,
    pub path: String,
}

/// The chat rebuilds from this: the last items of the current branch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transcript {
    #[serde(flatten)]
    pub status: Status,
    pub items: Vec<Item>,
    /// How many items come before `items`.
    pub earlier: usize,
    /// How many more to ask for at a time.
    pub page: usize,
    /// The todo list of the current branch (`{content, status, activeForm}` items).
    pub todos: Vec<Todo>,
}

/// A session of the picker (the `sessions` record), placed in its chain of handoffs
/// ([`handoff_core::session::chain::Chains::placed`]): the picker draws the list in this order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionListItem {
    pub path: PathBuf,
    pub id: String,
    pub timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    pub first_message: String,
    pub message_count: usize,
    /// 0 for a chain's first session, 1 for one handed off from it, …
    pub depth: usize,
    /// The agent's session now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub current: bool,
}

impl SessionListItem {
    pub fn new(s: &SessionInfo, depth: usize, current: bool) -> Self {
        Self {
            path: s.path.clone(),
            id: s.id.clone(),
            timestamp: s.timestamp.clone(),
            parent_session: s.parent_session.clone(),
            first_message: s.first_message.clone(),
            message_count: s.message_count,
            depth,
            current,
        }
    }
}

/// A session file's transcript for reading (`view_session`): shown in a buffer of its own,
/// never opened as the agent's session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionView {
    /// The file as asked for.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The session it was handed off from (pi's `parentSession`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// The last items of its current branch, root first.
    pub items: Vec<Item>,
    /// How many items come before `items`.
    pub earlier: usize,
    /// Why the file could not be read (then `items` is empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The files the agent changed in the current session (`changes`), the most recently changed
/// first; Lua diffs each against its original.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Changes {
    pub session_file: String,
    pub session_id: String,
    pub files: Vec<ChangedFileItem>,
}

/// One changed file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangedFileItem {
    /// Absolute.
    pub path: String,
    /// The file holding its content before the agent's first change; absent when the agent
    /// created it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_file: Option<String>,
    pub created: bool,
    /// Successful edit and write calls to it.
    pub changes: u32,
    /// The session entry of the first change (the tool result).
    pub first_change_entry_id: String,
    /// When it was last changed (ms since the epoch).
    pub last_changed: i64,
}

/// The session's review (`review`): every recorded call and its hunks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReviewList {
    pub session_file: String,
    pub calls: Vec<ReviewCallItem>,
}

/// One call's change to one file, its versions' files and its hunks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReviewCallItem {
    pub call_id: String,
    pub tool: String,
    pub entry_id: String,
    /// Absolute.
    pub path: String,
    /// The file holding its content before the call; absent: the call created it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_file: Option<String>,
    pub after_file: String,
    pub hunks: Vec<handoff_core::session::review::Hunk>,
}

impl ReviewCallItem {
    /// The editor's view of a recorded call: its versions as files it reads.
    pub fn of(c: handoff_core::session::review::ReviewedCall) -> Self {
        ReviewCallItem {
            before_file: c.before_path().map(|p| p.to_string_lossy().into_owned()),
            after_file: c.after_path().to_string_lossy().into_owned(),
            call_id: c.call_id,
            tool: c.tool,
            entry_id: c.entry_id,
            path: c.path.to_string_lossy().into_owned(),
            hunks: c.hunks,
        }
    }
}

/// A user template (`templates`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TemplateItem {
    pub name: String,
    pub description: String,
}

/// The MCP servers of the session (`mcp`): `:HandoffMcp` and `:checkhealth` show them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpList {
    pub servers: Vec<handoff_core::mcp::ServerStatus>,
    /// What could not be read of the configuration.
    pub errors: Vec<String>,
    /// The project's `.mcp.json`, if there is one.
    pub project_file: Option<String>,
    /// What `:HandoffMcp trust` shows and then trusts: the project file as it was read.
    pub project: Option<McpProject>,
}

/// The project's `.mcp.json` as read: the confirmation's lines and the digest of those bytes,
/// which the `trust` action sends back (a file changed since is refused).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpProject {
    pub file: String,
    pub digest: String,
    pub lines: Vec<String>,
}

/// Where the key comes from and whether it is set (never the key).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KeyHealth {
    pub source: &'static str,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
}

/// Whether the provider answered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reachable {
    pub ok: bool,
    pub detail: String,
}

/// The models `:HandoffModel` offers (`models`, and the `models` record).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelList {
    /// The provider's list is being read: a `models` record with it follows.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
    pub provider: String,
    /// What is known of the model in use, with the source of its window.
    pub current: handoff_core::provider::ModelInfo,
    /// The window in force (the user's `context_window` included).
    pub context_window: u64,
    pub models: Vec<handoff_core::provider::ModelInfo>,
    /// Why the provider's own list is missing, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `:checkhealth handoff`'s facts (`health`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Health {
    pub version: &'static str,
    pub api: Api,
    pub provider: String,
    pub base_url: String,
    pub model: String,
    pub key: KeyHealth,
    /// What the provider's probes said last for this provider and model, if they did: the
    /// `health` request never waits for the network (see [`HealthProbes`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes: Option<HealthProbes>,
    pub session_dir: PathBuf,
    pub session_dir_writable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_dir_error: Option<String>,
    pub sandbox: SandboxHealth,
}

/// The health check's network half, run in a task that each `health` request starts; its
/// result comes as a `health_probes` record and is kept for the next request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HealthProbes {
    pub reachable: Reachable,
    /// Whether the provider's model list answered, and what is known of the model.
    pub models: Reachable,
    /// How long ago the probes ran (0 in the record that brings them).
    pub age_secs: u64,
}

/// The sandbox for bash, as `:checkhealth` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SandboxHealth {
    /// `workspace-write, no network`, or `off`.
    pub mode: String,
    pub on: bool,
    /// The kernel's Landlock ABI (0: none).
    pub abi: u32,
    /// Whether this system enforces it (all of it: see `detail`).
    pub enforceable: bool,
    pub detail: String,
    /// Why sandboxed commands get no mount namespace here (planted code writable, credentials
    /// readable: each command asks), or `None` when they do.
    pub mounts_error: Option<String>,
    /// The binary that confines commands, and why no command can change it
    /// (`sandbox::HelperBinary::describe`), or why there is none (`helper_error`).
    pub helper: Option<String>,
    pub helper_error: Option<String>,
}

/// A tool call waiting for the user's answer, with the answers it offers (the core's list: the
/// chat's hint shows those, and no other).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalRecord {
    #[serde(flatten)]
    pub request: ApprovalRequest,
    pub answers: Vec<handoff_core::tools::consent::Answer>,
}

impl From<ApprovalRequest> for ApprovalRecord {
    fn from(request: ApprovalRequest) -> Self {
        ApprovalRecord { answers: request.answers(), request }
    }
}

/// A handoff's ledger as the chat and the review buffer show it: the one line, and the parts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LedgerText {
    pub summary: String,
    pub lines: Vec<String>,
}

impl From<&handoff_core::session::ledger::Ledger> for LedgerText {
    fn from(ledger: &handoff_core::session::ledger::Ledger) -> Self {
        LedgerText { summary: ledger.summary(), lines: ledger.lines() }
    }
}

/// Everything the host pushes to Lua.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// Boxed: the largest record, and a rare one (a bridge batch holds many small ones).
    Transcript(Box<Transcript>),
    AgentStart,
    /// A message starts: a user prompt whole, an assistant message empty.
    MessageStart(Item),
    /// Streamed text of the assistant message; `tokens`: deltas so far (an estimate).
    Delta {
        text: String,
        tokens: u64,
    },
    ThinkingDelta {
        text: String,
        tokens: u64,
    },
    /// The assistant message ended (its text came as deltas).
    MessageEnd(Item),
    AgentEnd {
        #[serde(skip_serializing_if = "Option::is_none")]
        stop_reason: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
        /// What kind of failure `error_message` says (`auth`, `rate_limit`, `overflow`, …).
        #[serde(skip_serializing_if = "Option::is_none")]
        error_kind: Option<handoff_core::failure::FailureKind>,
        session_file: String,
        context_tokens: u64,
        context_window: u64,
        /// As [`Status::context_percent`].
        context_percent: u64,
        /// The run stopped at the wall: an automatic handoff follows (no suggestion then).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        at_wall: bool,
    },
    HandoffStart {
        #[serde(skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
        /// The host started it at the wall: reason, boundary, tokens, window.
        #[serde(skip_serializing_if = "Option::is_none")]
        auto: Option<handoff_core::agent::Wall>,
        /// The chat's banner for an automatic handoff (the editor adds how to cancel).
        #[serde(skip_serializing_if = "Option::is_none")]
        banner: Option<String>,
    },
    /// The handoff drafted before the wall changed (`handoff.prepare`); `text`: the host's
    /// words for it, when there are any (its cost once written).
    HandoffDraft {
        draft: handoff_core::agent::events::DraftStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    HandoffEnd {
        outcome: HandoffOutcome,
        notices: Vec<Notice>,
        /// The outcome's ledger (a new session's, or a review's before it is written), in words.
        #[serde(skip_serializing_if = "Option::is_none")]
        ledger: Option<Box<LedgerText>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        auto: Option<handoff_core::agent::Wall>,
    },
    /// The prompt's lifecycle changed phase: `busy` is what the chat shows as running.
    Lifecycle {
        phase: &'static str,
        busy: bool,
    },
    SessionSwitch {
        #[serde(skip_serializing_if = "Option::is_none")]
        old: Option<String>,
        new: String,
        reason: SwitchReason,
    },
    Notice(Notice),
    /// The todo list changed: the whole list.
    Todos {
        todos: Vec<Todo>,
    },
    /// A change was split into hunks for review: the call just recorded, which the editor adds
    /// to the review it has; without one, the editor asks for the `review` again.
    Hunks {
        #[serde(skip_serializing_if = "Option::is_none")]
        call: Option<ReviewCallItem>,
    },
    /// The running tool calls (see `AgentEvent::ToolBatch`): a reject of one of their files
    /// waits for the running call's end.
    ToolBatch {
        running: bool,
        files: Vec<String>,
        any_file: bool,
    },
    /// The pins changed: all of them, in order (the chat shows them under its header).
    Pins {
        pins: Vec<String>,
    },
    /// A tool call waits for the user's answer (`approve`); boxed: by far the largest record.
    ToolApproval(Box<ApprovalRecord>),
    /// A waiting request ended without an answer from the chat (the run was stopped).
    ToolApprovalEnd {
        id: String,
        decision: String,
    },
    /// A tool starts running (after consent).
    ToolStart {
        id: String,
        tool: String,
        args: serde_json::Value,
        /// The argument that says what it does (the command, the path).
        summary: String,
    },
    /// The end of the running tool's output so far (bash; at most 4 KiB, whole lines) and the
    /// count of lines before it; each replaces the last.
    ToolUpdate {
        id: String,
        tail: String,
        earlier: u64,
    },
    /// A session file read for `view_session`.
    SessionView(SessionView),
    /// The sessions of the working directory for `sessions`, in the picker's order (or why
    /// they could not be listed).
    Sessions {
        sessions: Vec<SessionListItem>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The provider's model list, read for a `models` request that answered `pending`
    /// (boxed: as large as an approval).
    Models(Box<ModelList>),
    /// How an `enable_model` ended: `error` absent when the model is enabled.
    ModelEnabled {
        model: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_kind: Option<handoff_core::failure::FailureKind>,
    },
    /// The health check's probes, run for a `health` request.
    HealthProbes(HealthProbes),
    /// A tool call ended (run, refused or skipped); `text` is what the model reads.
    ToolEnd {
        id: String,
        tool: String,
        /// What the tool may do; absent for a tool we do not know.
        kind: Option<handoff_core::tools::ToolKind>,
        /// It may have changed files the editor shows outside their buffers (a command, an MCP
        /// server's tool, an external agent's own write): the editor checks them.
        reload: bool,
        is_error: bool,
        text: String,
        /// As for [`Item::Tool`].
        earlier: u64,
        /// How the command ran, when it was sandboxed or re-run outside the sandbox (the
        /// result's `details.sandbox` / `details.unsandboxed`).
        #[serde(skip_serializing_if = "Option::is_none")]
        sandbox: Option<String>,
    },
}

impl Record {
    /// A new message starts: the estimate of its tokens counts from zero again.
    pub fn starts_message(&self) -> bool {
        matches!(self, Record::MessageStart(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::agent::Level;

    fn map(v: &rmpv::Value) -> Vec<(String, rmpv::Value)> {
        v.as_map().unwrap().iter().map(|(k, v)| (k.as_str().unwrap().to_string(), v.clone())).collect()
    }

    fn get(v: &rmpv::Value, key: &str) -> Option<rmpv::Value> {
        map(v).into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    #[test]
    fn records_are_maps_tagged_by_type_without_nils() {
        let start = encode(
            "record",
            &Record::MessageStart(Item::bare_assistant(Some("m"))),
        )
        .unwrap();
        let mut keys: Vec<String> = map(&start).into_iter().map(|(k, _)| k).collect();
        keys.sort();
        assert_eq!(keys, ["kind", "model", "type"]);
        assert_eq!(get(&start, "type").unwrap().as_str(), Some("message_start"));
        assert_eq!(get(&start, "kind").unwrap().as_str(), Some("assistant"));
        let notice = encode("record", &Record::Notice(Notice::new(Level::Warn, "careful"))).unwrap();
        assert_eq!(get(&notice, "level").unwrap().as_str(), Some("warn"));
        assert_eq!(get(&notice, "type").unwrap().as_str(), Some("notice"));
        let unit = encode("record", &Record::AgentStart).unwrap();
        assert_eq!(map(&unit).len(), 1);
        let switch = encode(
            "record",
            &Record::SessionSwitch { old: None, new: "/s.jsonl".into(), reason: SwitchReason::Handoff },
        )
        .unwrap();
        assert_eq!(get(&switch, "reason").unwrap().as_str(), Some("handoff"));
        assert!(get(&switch, "old").is_none());
    }

    #[test]
    fn transcripts_flatten_the_status_and_name_the_api() {
        let t = Transcript {
            status: Status {
                session_file: "/s.jsonl".into(),
                session_id: "id".into(),
                parent_session: None,
                busy: false,
                generating_handoff: false,
                provider: "openai".into(),
                api: Api::Anthropic,
                model: "m".into(),
                thinking: ThinkingLevel::High,
                context_tokens: 0,
                context_window: 128_000,
                context_percent: 0,
                instruction_files: vec!["/w/AGENTS.md".into()],
                pins: Vec::new(),
            },
            items: vec![Item::User { text: "hi".into() }],
            earlier: 0,
            page: crate::transcript::PAGE,
            todos: vec![Todo {
                content: "Run the tests".into(),
                status: handoff_core::tools::TodoStatus::InProgress,
                active_form: "Running the tests".into(),
            }],
        };
        let v = encode("transcript", &Record::Transcript(Box::new(t))).unwrap();
        assert_eq!(get(&v, "type").unwrap().as_str(), Some("transcript"));
        assert_eq!(get(&v, "api").unwrap().as_str(), Some("anthropic"));
        assert_eq!(get(&v, "session_id").unwrap().as_str(), Some("id"));
        assert_eq!(get(&v, "thinking").unwrap().as_str(), Some("high"));
        let items = get(&v, "items").unwrap();
        assert_eq!(get(&items.as_array().unwrap()[0], "kind").unwrap().as_str(), Some("user"));
        // Todos keep pi's field names.
        let todo = get(&v, "todos").unwrap().as_array().unwrap()[0].clone();
        assert_eq!(get(&todo, "status").unwrap().as_str(), Some("in_progress"));
        assert_eq!(get(&todo, "activeForm").unwrap().as_str(), Some("Running the tests"));
    }

    #[test]
    fn configure_args_accept_lua_tables_and_empty_settings() {
        let args = rmpv::Value::Map(vec![
            (rmpv::Value::from("settings"), rmpv::Value::Array(vec![])),
            (rmpv::Value::from("resume"), rmpv::Value::from("newest")),
            (rmpv::Value::from("cwd"), rmpv::Value::from("/w")),
        ]);
        let parsed: ConfigureArgs = decode("configure", &args).unwrap();
        assert_eq!(parsed.resume, Resume::Newest);
        assert_eq!(parsed.cwd.as_deref(), Some(std::path::Path::new("/w")));
        assert!(parsed.settings.model.is_none());
        let with_settings = rmpv::Value::Map(vec![(
            rmpv::Value::from("settings"),
            rmpv::Value::Map(vec![
                (rmpv::Value::from("api"), rmpv::Value::from("anthropic")),
                (rmpv::Value::from("model"), rmpv::Value::from("claude")),
                (rmpv::Value::from("max_retries"), rmpv::Value::from(2)),
            ]),
        )]);
        let parsed: ConfigureArgs = decode("configure", &with_settings).unwrap();
        assert_eq!(parsed.settings.api, Some(handoff_core::config::ProviderKind::Anthropic));
        assert_eq!(parsed.settings.model.as_deref(), Some("claude"));
        let bad = rmpv::Value::Map(vec![(
            rmpv::Value::from("settings"),
            rmpv::Value::Map(vec![(rmpv::Value::from("api"), rmpv::Value::from("bedrock"))]),
        )]);
        let err = decode::<ConfigureArgs>("configure", &bad).unwrap_err().to_string();
        assert!(err.contains("bedrock"), "{err}");
        let empty: ConfigureArgs = decode("configure", &rmpv::Value::Nil).unwrap();
        assert_eq!(empty.resume, Resume::New);
    }

    #[test]
    fn every_call_decodes_its_arguments_or_says_what_is_wrong() {
        use handoff_core::failure::FailureKind;
        let s = |v: &str| rmpv::Value::from(v);
        let n = |v: u64| rmpv::Value::from(v);
        // Trailing options left out are absent; an empty Lua table is no flags.
        assert!(matches!(Request::decode("transcript", &[]), Ok(Request::Transcript { limit: None })));
        assert!(matches!(Request::decode("transcript", &[n(40)]), Ok(Request::Transcript { limit: Some(40) })));
        let Ok(Notification::Handoff { focus, flags }) =
            Notification::decode("handoff", &[rmpv::Value::Nil, rmpv::Value::Array(vec![])])
        else {
            panic!()
        };
        assert_eq!((focus, flags), (None, HandoffFlags::default()));
        let review = rmpv::Value::Map(vec![(s("review"), rmpv::Value::Boolean(true))]);
        let Ok(Notification::Handoff { focus, flags }) = Notification::decode("handoff", &[s("the parser"), review])
        else {
            panic!()
        };
        assert_eq!((focus.as_deref(), flags.review), (Some("the parser"), Some(true)));
        let Ok(Notification::Approve { decision, reason, .. }) =
            Notification::decode("approve", &[s("id-1"), s("reject"), s("not that file")])
        else {
            panic!()
        };
        assert_eq!((decision, reason.as_deref()), (handoff_core::tools::consent::Answer::Reject, Some("not that file")));
        // Wrong arguments are an `invalid` failure that names the call and the problem.
        let typo = rmpv::Value::Map(vec![(s("reviw"), rmpv::Value::Boolean(true))]);
        for (method, args, says) in [
            ("transcript", vec![s("ten")], "transcript: invalid arguments"),
            ("set_thinking", vec![rmpv::Value::Array(vec![n(1)])], "set_thinking: invalid arguments"),
            ("approve", vec![s("id-1"), s("maybe")], "maybe"),
            ("prompt", vec![], "prompt: invalid arguments"),
            ("prompt", vec![s("a"), s("b")], "prompt: takes 1 arguments, got 2"),
            ("handoff", vec![rmpv::Value::Nil, typo], "reviw"),
            ("resume", vec![n(3)], "resume: invalid arguments"),
            ("frobnicate", vec![], "unknown notification frobnicate"),
        ] {
            let failure = if matches!(method, "transcript" | "set_thinking") {
                Request::decode(method, &args).map(|r| format!("{r:?}"))
            } else {
                Notification::decode(method, &args).map(|r| format!("{r:?}"))
            };
            let failure = failure.expect_err(method);
            assert_eq!(failure.kind, FailureKind::Invalid, "{method}");
            assert!(failure.message.contains(says), "{method}: {}", failure.message);
        }
    }

    #[test]
    fn answers_carry_the_value_or_the_failure_with_its_kind() {
        use handoff_core::failure::FailureKind;
        let ok = answer(Ok(rmpv::Value::from("pong")));
        assert_eq!(get(&ok, "ok").unwrap().as_str(), Some("pong"));
        let failed = answer(Err(Failure::new(FailureKind::NotReady, "loading")));
        let error = get(&failed, "error").unwrap();
        assert_eq!(get(&error, "kind").unwrap().as_str(), Some("not_ready"));
        assert_eq!(get(&error, "message").unwrap().as_str(), Some("loading"));
        assert!(get(&failed, "ok").is_none());
    }
}
