//! The provider layer's data: configuration, the request, what the stream reports and how it
//! fails. Plain types with no behaviour beyond small helpers, so that every other module of the
//! layer (the wire formats, the HTTP attempt, retries) can depend on them without depending on
//! each other.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

pub use super::api::Api;
use super::models::{self, ModelInfo, ModelTable, Source};
use crate::failure::{self, FailureKind};
use crate::message::{ContextMessage, StopReason, Usage};

/// A tool as the model sees it: name, description and JSON Schema parameters (pi's texts). The
/// request's own type: the tools layer builds them, the wire formats send them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ToolDefinition {
    pub name: std::borrow::Cow<'static, str>,
    pub description: String,
    pub parameters: Value,
}

/// Everything needed to talk to one model. Keys are resolved at request time and never stored
/// here, so this struct can be logged.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    pub api: Api,
    /// Name recorded as `provider` on messages and in `model_change` entries (pi's provider id).
    pub name: String,
    /// Base URL without the endpoint, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    pub model: String,
    /// Environment variable holding the key; `None` with no `api_key_cmd` means no key is sent.
    pub api_key_env: Option<String>,
    /// Shell command whose trimmed stdout is the key (`pass show openai`).
    pub api_key_cmd: Option<String>,
    pub context_window: u64,
    pub max_tokens: u32,
    /// The longest reply the model takes, as the catalogue says (`None`: nobody said; see
    /// [`ProviderConfig::reply_cap`]). Set with the window by [`ProviderConfig::apply_limits`].
    pub max_output: Option<u32>,
    /// Retries on 429/5xx/connection errors before the first delta.
    pub max_retries: u32,
    /// First retry delay; doubles each time, capped by `max_retry_delay`.
    pub retry_base_delay: Duration,
    pub max_retry_delay: Duration,
    /// How long to wait for response headers, and then for each chunk of the stream.
    pub idle_timeout: Duration,
    /// Whether the model takes OpenAI's `reasoning_effort` (pi's `compat.supportsReasoningEffort`
    /// for a reasoning model). `None`: on for OpenAI's own API and its reasoning models (o1, o3,
    /// o4, gpt-5), off elsewhere (see [`ProviderConfig::sends_reasoning_effort`]). Over the
    /// Responses API it says whether the model reasons (`reasoning.effort`, a `developer`
    /// prompt). Anthropic ignores it: thinking there is the `thinking` field.
    pub reasoning_effort: Option<bool>,
    /// GitHub Copilot (`provider = "copilot"`): the token is exchanged and the wire format,
    /// base and window come from its model list (see `copilot.rs`); `api` and `base_url` are
    /// then only the guess before the list was read.
    pub copilot: Option<CopilotConfig>,
    /// What the user set of the limits; `context_window` and `max_tokens` above are what is in
    /// force, learnt again for each model ([`ProviderConfig::apply_limits`]).
    pub limits: SetLimits,
    /// What is known of the provider's models without asking it (see `models`).
    pub table: Arc<ModelTable>,
    /// A key given as a value, not a variable or a command: a pi provider's literal `apiKey`.
    pub api_key_value: Option<Secret>,
    /// Headers every request of this provider carries (a pi provider's `headers`).
    pub headers: Vec<(String, Secret)>,
    /// Variables besides `api_key_env` that hold this provider's secrets (a pi provider's
    /// header values, the variables pi's other providers name): no tool sees them.
    pub secret_env: Vec<String>,
    /// Files the user's provider settings name as holding a key besides `api_key_cmd`'s (those
    /// of pi's other providers' `!command`s): protected as credentials.
    pub secret_files: Vec<std::path::PathBuf>,
}

/// The limits the user set (`context_window`, `max_tokens`): these win over what any model list
/// or table says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetLimits {
    pub context_window: Option<u64>,
    pub max_tokens: Option<u32>,
}

/// The reply bound when neither the user nor the model says one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A value never shown: its `Debug` says it is hidden.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(hidden)")
    }
}

/// Where a Copilot token is exchanged unless configured (`copilot_token_url`,
/// `HANDOFF_COPILOT_TOKEN_URL`).
pub const COPILOT_TOKEN_URL: &str = "https://api.github.com/copilot_internal/v2/token";

/// The environment variables a GitHub token is read from for Copilot, first wins (as pi reads
/// them). They never reach a tool's environment.
pub const COPILOT_TOKEN_VARS: [&str; 3] = ["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"];

/// Copilot's settings (the rest of [`ProviderConfig`] applies as for any provider).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopilotConfig {
    /// The token exchange's URL.
    pub token_url: String,
    /// `Editor-Version`: `Neovim/0.11.2` from the plugin, the CLI's own name otherwise.
    pub editor_version: String,
}

impl Default for CopilotConfig {
    fn default() -> Self {
        Self {
            token_url: COPILOT_TOKEN_URL.into(),
            editor_version: format!("handoff-nvim/{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

impl ProviderConfig {
    pub fn new(api: Api, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api,
            name: match api {
                Api::Openai | Api::OpenaiResponses => "openai".into(),
                Api::Anthropic => "anthropic".into(),
            },
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            api_key_cmd: None,
            context_window: models::assumed_window(api),
            max_tokens: DEFAULT_MAX_TOKENS,
            max_output: None,
            max_retries: 3,
            retry_base_delay: Duration::from_millis(500),
            max_retry_delay: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            reasoning_effort: None,
            copilot: None,
            limits: SetLimits::default(),
            table: Arc::default(),
            api_key_value: None,
            headers: Vec::new(),
            secret_env: Vec::new(),
            secret_files: Vec::new(),
        }
    }

    /// The window, the reply bound and the model's reply cap for this model: what the user set,
    /// else what `info` (the catalogue's facts, [`ProviderConfig::model_info`]) says, else what
    /// is assumed of the wire format. The one place a request's limits are decided.
    pub fn apply_limits(&mut self, info: Option<&ModelInfo>) {
        self.context_window = self
            .limits
            .context_window
            .or_else(|| info.and_then(|i| i.context_window))
            .unwrap_or_else(|| models::assumed_window(self.api));
        let bound = self.limits.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        let max_output = info.and_then(|i| i.max_output);
        self.max_tokens = max_output.map_or(bound, |out| bound.min(out));
        self.max_output = max_output;
    }

    /// The cap of a request's `max_tokens` (Anthropic's thinking budget is added under it):
    /// the catalogue's reply limit of the model, else what is assumed of the wire format (read
    /// now: Copilot decides the format only once its list is read).
    pub fn reply_cap(&self) -> Option<u32> {
        self.max_output.or_else(|| models::assumed_max_output(self.api))
    }

    /// Everything known of this config's model, with `listed` (the provider's list) in its
    /// place among the sources; the window's source is `Default` when nobody knows it.
    pub fn model_info(&self, listed: Option<&ModelInfo>) -> ModelInfo {
        let mut info = self
            .table
            .facts(&self.model, listed)
            .unwrap_or_else(|| ModelInfo { id: self.model.clone(), source: Source::Default, ..ModelInfo::default() });
        if self.limits.context_window.is_some() {
            info.context_window = self.limits.context_window;
            info.source = Source::Settings;
        }
        if info.context_window.is_none() {
            info.source = Source::Default;
        }
        info
    }

    /// This config for another model of the same provider: its limits learnt again (the
    /// provider's list, when it has one, is applied by the provider).
    pub fn for_model(&self, model: &str) -> ProviderConfig {
        let mut config = self.clone();
        config.model = model.to_owned();
        let facts = config.table.facts(model, None);
        config.apply_limits(facts.as_ref());
        config
    }

    /// The headers of [`ProviderConfig::headers`], marked sensitive.
    pub fn extra_headers(&self) -> Result<reqwest::header::HeaderMap, ProviderError> {
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in &self.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ProviderError::Client(format!("the header name {name:?} is not valid")))?;
            let mut value = reqwest::header::HeaderValue::from_str(value.expose())
                .map_err(|_| ProviderError::Client(format!("the value of the header {name} is not valid in HTTP")))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        Ok(map)
    }

    /// The environment variables holding this provider's secrets, which no tool may see: the
    /// key's, those its `api_key_cmd` reads ([`super::key_sources`]), and for Copilot the
    /// GitHub token's.
    pub fn secret_vars(&self) -> Vec<String> {
        let mut vars: Vec<String> = self.api_key_env.iter().cloned().collect();
        vars.extend(self.secret_env.iter().cloned());
        vars.extend(self.key_cmd_sources().vars);
        if self.copilot.is_some() {
            vars.extend(COPILOT_TOKEN_VARS.iter().map(|v| v.to_string()));
        }
        vars
    }

    /// The files holding this provider's secrets, which no tool may reach (`sandbox::protected`
    /// takes them as credentials): those `api_key_cmd` reads, and [`Self::secret_files`].
    pub fn key_files(&self) -> Vec<std::path::PathBuf> {
        let mut files = self.key_cmd_sources().files;
        files.extend(self.secret_files.iter().cloned());
        files
    }

    /// What `api_key_cmd` names ([`super::key_sources`]).
    fn key_cmd_sources(&self) -> super::KeySources {
        let home = crate::sandbox::paths::home();
        self.api_key_cmd.as_deref().map(|cmd| super::key_sources(cmd, home.as_deref())).unwrap_or_default()
    }

    /// Whether OpenAI-compatible requests carry `reasoning_effort` when thinking is on: as
    /// configured, else as pi's model registry has it for OpenAI's API (its o-series and gpt-5
    /// models reason; the `-chat` variants of gpt-5 mostly do not, and are left off). Any other
    /// server gets it only when configured: many reject fields they do not know.
    pub fn sends_reasoning_effort(&self) -> bool {
        if self.api != Api::Openai {
            return false;
        }
        if let Some(on) = self.reasoning_effort {
            return on;
        }
        let host = reqwest::Url::parse(&self.base_url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase));
        host.as_deref() == Some("api.openai.com") && is_openai_reasoning_model(&self.model)
    }
}

/// OpenAI's reasoning models, as pi's registry marks them (`reasoning: true`): o1, o3, o4-mini…
/// and gpt-5 but its `gpt-5-chat-latest`.
pub(super) fn is_openai_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let o_series = m.len() >= 2
        && m.starts_with('o')
        && m.as_bytes()[1].is_ascii_digit();
    o_series || (m.starts_with("gpt-5") && !m.starts_with("gpt-5-chat"))
}

/// How hard the model thinks before it answers: pi's thinking levels (`off`, `minimal`, `low`,
/// `medium`, `high`), recorded per session as `thinking_level_change` entries. pi's `xhigh`
/// reads as `high` (its own providers clamp it so for every model we speak to).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    #[default]
    Off,
    Minimal,
    Low,
    Medium,
    #[serde(alias = "xhigh")]
    High,
}

impl ThinkingLevel {
    /// Every level, lowest first.
    pub const ALL: [ThinkingLevel; 5] =
        [ThinkingLevel::Off, ThinkingLevel::Minimal, ThinkingLevel::Low, ThinkingLevel::Medium, ThinkingLevel::High];

    /// The name pi records (`thinkingLevel`).
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
        }
    }

    /// A level by name (case-insensitive; pi's `xhigh` is `high`); `None` for anything else.
    pub fn parse(name: &str) -> Option<ThinkingLevel> {
        let name = name.trim().to_ascii_lowercase();
        if name == "xhigh" {
            return Some(ThinkingLevel::High);
        }
        ThinkingLevel::ALL.into_iter().find(|l| l.as_str() == name)
    }

    pub fn is_on(self) -> bool {
        self != ThinkingLevel::Off
    }

    /// The token budget of Anthropic's budget-based thinking: pi's defaults.
    pub fn anthropic_budget(self) -> u32 {
        match self {
            ThinkingLevel::Off => 0,
            ThinkingLevel::Minimal => 1024,
            ThinkingLevel::Low => 2048,
            ThinkingLevel::Medium => 8192,
            ThinkingLevel::High => 16384,
        }
    }
}

impl std::fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ThinkingLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ThinkingLevel::parse(s).ok_or_else(|| {
            format!("unknown thinking level {s:?} (known: off, minimal, low, medium, high)")
        })
    }
}

/// Whether the model may call the tools of a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (`"auto"`).
    #[default]
    Auto,
    /// The model must answer in text (`"none"`). The handoff uses it: its request keeps the
    /// conversation's tool definitions, so the provider's prompt cache still matches, but the
    /// document must not turn into a tool call.
    None,
}

impl ToolChoice {
    /// The value both APIs use (`"auto"`, `"none"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
        }
    }
}

/// What the model is asked: a system prompt, the conversation (pi messages: stored ones still
/// as their JSON text, see [`ContextMessage`]), the tools it
/// may call and how hard it thinks. With no tools, neither `tools` nor `tool_choice` goes on
/// the wire; with thinking off, no thinking field does.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    pub system: Option<String>,
    pub messages: Vec<ContextMessage>,
    pub tools: Vec<ToolDefinition>,
    pub tool_choice: ToolChoice,
    /// The session's thinking level: Anthropic's `thinking`, OpenAI's `reasoning_effort`.
    pub thinking: ThinkingLevel,
    /// What keeps the requests of one conversation on the same prompt cache: the session id.
    /// Sent as OpenAI's `prompt_cache_key` to api.openai.com only, as pi does (other servers
    /// may reject the field). Anthropic's cache needs no key (see `anthropic/body.rs`).
    pub cache_key: Option<String>,
}

/// A piece of the reply as it arrives.
///
/// Tool calls come as `ToolCallStart`, any number of `ToolCallDelta`s, then one `ToolCall`
/// with the assembled call. `index` numbers the calls of this reply 0, 1, 2… in the order they
/// started (not the wire's index: Anthropic counts text blocks too). Calls may interleave (an
/// OpenAI-compatible server can stream two calls' arguments alternately); every event names its
/// call. OpenAI-compatible calls complete when the reply finishes, Anthropic ones at the end of
/// their content block.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A piece of text. Consecutive pieces belong to one text block until a
    /// [`StreamEvent::TextEnd`].
    TextDelta(String),
    /// The text block streaming ends (OpenAI Responses: its `message` item is done; Anthropic:
    /// its `text` block stopped, so a text after the server's own tool blocks is another block,
    /// as pi keeps it). `signature`:
    /// what pi keeps as the block's `textSignature` (`{"v":1,"id":…}`, the item's id and phase),
    /// sent back with the text to the same model. The next text starts a new block. A block may
    /// end without any delta (an empty message item).
    TextEnd { signature: Option<String> },
    /// A piece of the model's thinking. Consecutive pieces belong to one thinking block until a
    /// [`StreamEvent::ThinkingEnd`].
    ThinkingDelta(String),
    /// The thinking block streaming ends. `signature`: what pi keeps as its `thinkingSignature`
    /// and the API wants back with it: Anthropic's signature (its `signature_delta`s), or for an
    /// OpenAI-compatible server the field the reasoning came in (`reasoning_content`, …). A block
    /// may end without any delta (Anthropic signs thinking it does not show).
    ThinkingEnd { signature: Option<String> },
    /// Anthropic's `redacted_thinking` block: encrypted thinking, `data` to send back as it came.
    RedactedThinking(String),
    /// Not part of the reply: something about the request the user should hear of (a field the
    /// server refused, left out from now on).
    Notice(String),
    /// A tool call began. `id` is the server's, or one made up (`call_<n>`) when it sent none.
    ToolCallStart { index: usize, id: String, name: String },
    /// A piece of the call's arguments (JSON text, as the server cut it).
    ToolCallDelta { index: usize, arguments_delta: String },
    /// The call is complete. Its `id` and `name` are final (a server may send the id late).
    ToolCall(ToolCall),
}

/// A complete tool call of the reply.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub index: usize,
    pub id: String,
    pub name: String,
    /// The arguments object, or what the model sent when it is not a JSON object. A malformed
    /// call never fails the stream: the agent answers it with an error result the model reads.
    pub arguments: Result<Map<String, Value>, MalformedArguments>,
    /// What the model signed the call with and wants back with it (Gemini 3's thought
    /// signature): kept as the `toolCall` block's `thoughtSignature`, as pi keeps Gemini's.
    pub signature: Option<String>,
}

/// Tool-call arguments that are not a JSON object: cut off (`max_tokens` hit mid-call), broken
/// JSON, or valid JSON of another type.
///
/// pi parses such text with a partial-JSON parser and runs the tool with whatever object comes
/// out (`{}` when nothing does). We do not: a `write` whose `content` was cut off would write a
/// truncated file. Only the repairs pi makes before that (raw control characters inside
/// strings, invalid escapes) are applied before a call counts as malformed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MalformedArguments {
    /// The arguments exactly as the model sent them.
    pub raw: String,
    /// Why they are not an object (the JSON parser's message).
    pub error: String,
}

impl std::fmt::Display for MalformedArguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the tool call's arguments are not a JSON object: {}", self.error)
    }
}

/// How a completed stream ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamEnd {
    pub stop_reason: StopReason,
    pub usage: Usage,
    pub response_id: Option<String>,
}

/// Provider failures. Messages name what failed and never contain the key.
///
/// `code` is the provider's own name for the failure, when its JSON gave one (`error.code`,
/// else `error.type`: `context_length_exceeded`, `exceed_context_size_error`,
/// `rate_limit_error`): [`ProviderError::kind`] reads it beside the status and the message.
#[derive(Debug)]
pub enum ProviderError {
    Http { provider: String, status: u16, code: Option<String>, message: String },
    Connect { provider: String, url: String, message: String },
    Timeout { provider: String, seconds: u64 },
    /// The stream broke: cut off, or unreadable.
    Stream { provider: String, message: String },
    /// The server reported a failure instead of the reply: inside the stream (an OpenAI
    /// `error` chunk, a Responses `error` or `response.failed` event, Anthropic's `event:
    /// error`) or as a JSON body with status 200.
    Reported { provider: String, code: Option<String>, message: String },
    MissingKey(String),
    /// The HTTP client could not be built (TLS setup failed): no request can be sent.
    Client(String),
    Aborted,
}

impl ProviderError {
    /// The window an overflow error names (see [`failure::window_named`]); `None` for any other error.
    pub fn window_named(&self) -> Option<u64> {
        if self.kind() != FailureKind::Overflow {
            return None;
        }
        match self {
            ProviderError::Http { message, .. } | ProviderError::Reported { message, .. } => failure::window_named(message),
            _ => None,
        }
    }

    /// The kind of this failure, for a front end to branch on.
    ///
    /// An overflow is a 400, 413 or 422 whose code or message says so, or any other 413 (a
    /// proxy's HTML page included: a request too large in bytes is too large in tokens), or an
    /// error reported in the stream that says so. Rate-limit wording is never an overflow.
    pub fn kind(&self) -> FailureKind {
        match self {
            ProviderError::Http { status: 401 | 403, .. } | ProviderError::MissingKey(_) => FailureKind::Auth,
            ProviderError::Http { status: 429, .. } => FailureKind::RateLimit,
            ProviderError::Http { status: status @ (400 | 413 | 422), code, message, .. } => {
                let otherwise = if *status == 413 { FailureKind::Overflow } else { FailureKind::Provider };
                failure::refusal_kind(code.as_deref(), message, otherwise)
            }
            ProviderError::Http { .. } => FailureKind::Provider,
            ProviderError::Reported { code: Some(code), .. } if code == failure::MODEL_NOT_ENABLED => FailureKind::ModelNotEnabled,
            ProviderError::Reported { code, message, .. } => {
                failure::refusal_kind(code.as_deref(), message, FailureKind::Provider)
            }
            ProviderError::Connect { .. } | ProviderError::Stream { .. } | ProviderError::Client(_) => {
                FailureKind::Network
            }
            ProviderError::Timeout { .. } => FailureKind::Timeout,
            ProviderError::Aborted => FailureKind::Cancelled,
        }
    }
}

impl std::error::Error for ProviderError {}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The user reads this as the failed turn's text: an overflow says so first, then the
        // provider's own words (which pi's overflow patterns recognise too).
        if self.kind() == FailureKind::Overflow {
            f.write_str("the request did not fit the model's context window: ")?;
        }
        match self {
            ProviderError::Http { provider, status, message, .. } => {
                write!(f, "{provider} returned HTTP {status}: {message}")
            }
            ProviderError::Connect { provider, url, message } => {
                write!(f, "cannot reach {provider} at {url}: {message}")
            }
            ProviderError::Timeout { provider, seconds } => write!(f, "{provider} sent nothing for {seconds} s"),
            ProviderError::Stream { provider, message } => write!(f, "{provider} stream broke: {message}"),
            ProviderError::Reported { provider, code: Some(code), message } => {
                write!(f, "{provider} reported an error: {code}: {message}")
            }
            ProviderError::Reported { provider, code: None, message } => {
                write!(f, "{provider} reported an error: {message}")
            }
            ProviderError::MissingKey(message) => write!(f, "no API key: {message}"),
            ProviderError::Client(message) => write!(f, "cannot set up the HTTP client: {message}"),
            ProviderError::Aborted => f.write_str("request aborted"),
        }
    }
}

impl ProviderError {
    /// Whether a new attempt may succeed (429, 5xx, connection trouble, timeouts). An
    /// overflow never does: the same request is as large the next time.
    pub fn is_retryable(&self) -> bool {
        match self {
            _ if self.kind() == FailureKind::Overflow => false,
            ProviderError::Http { status, .. } => *status == 429 || *status >= 500,
            ProviderError::Connect { .. } | ProviderError::Timeout { .. } => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    fn http(status: u16, message: &str) -> ProviderError {
        ProviderError::Http { provider: "p".into(), status, code: None, message: message.into() }
    }

    fn reported(code: Option<&str>, message: &str) -> ProviderError {
        ProviderError::Reported { provider: "p".into(), code: code.map(str::to_owned), message: message.into() }
    }

    #[test]
    fn provider_errors_have_the_kind_a_user_acts_on() {
        assert_eq!(http(401, "bad key").kind(), FailureKind::Auth);
        assert_eq!(ProviderError::MissingKey("$X is not set".into()).kind(), FailureKind::Auth);
        assert_eq!(http(429, "slow down").kind(), FailureKind::RateLimit);
        assert_eq!(http(400, "This model's maximum context length is 8192 tokens").kind(), FailureKind::Overflow);
        assert_eq!(http(400, "prompt is too long: 210000 tokens > 200000 maximum").kind(), FailureKind::Overflow);
        assert_eq!(http(400, "unknown field").kind(), FailureKind::Provider);
        assert_eq!(http(503, "overloaded").kind(), FailureKind::Provider);
        assert_eq!(http(413, "Payload Too Large").kind(), FailureKind::Overflow);
        assert_eq!(http(413, "on tokens per minute (TPM): Limit 6000, Requested 9000").kind(), FailureKind::RateLimit);
        assert_eq!(http(400, "Too many tokens: rate limit reached").kind(), FailureKind::RateLimit);
        let stream = ProviderError::Stream { provider: "p".into(), message: "connection closed".into() };
        assert_eq!(stream.kind(), FailureKind::Network);
        assert_eq!(reported(Some("context_length_exceeded"), "Your input is long").kind(), FailureKind::Overflow);
        assert_eq!(reported(Some("invalid_request_error"), "prompt is too long: 9 tokens > 8 maximum").kind(), FailureKind::Overflow);
        assert_eq!(reported(Some("rate_limit_exceeded"), "Slow down").kind(), FailureKind::RateLimit);
        assert_eq!(reported(Some("server_error"), "The model crashed").kind(), FailureKind::Provider);
        let connect = ProviderError::Connect { provider: "p".into(), url: "u".into(), message: "refused".into() };
        assert_eq!(connect.kind(), FailureKind::Network);
        assert_eq!(ProviderError::Timeout { provider: "p".into(), seconds: 5 }.kind(), FailureKind::Timeout);
        assert_eq!(ProviderError::Aborted.kind(), FailureKind::Cancelled);
    }

    use super::*;

    #[test]
    fn thinking_levels_parse_as_pi_names_them() {
        for level in ThinkingLevel::ALL {
            assert_eq!(ThinkingLevel::parse(level.as_str()), Some(level));
            assert_eq!(level.as_str().parse::<ThinkingLevel>(), Ok(level));
        }
        assert_eq!(ThinkingLevel::parse(" HIGH "), Some(ThinkingLevel::High));
        assert_eq!(ThinkingLevel::parse("xhigh"), Some(ThinkingLevel::High));
        assert_eq!(ThinkingLevel::parse("lots"), None);
        let err = "lots".parse::<ThinkingLevel>().unwrap_err();
        assert!(err.contains("off, minimal, low, medium, high"), "{err}");
        let parsed: ThinkingLevel = serde_json::from_str("\"xhigh\"").unwrap_or_default();
        assert_eq!(parsed, ThinkingLevel::High);
    }
}
