//! Streaming model providers: OpenAI-compatible Chat Completions and Anthropic Messages.
//!
//! A provider turns the conversation into one HTTP request and reports the reply as a stream of
//! deltas. It knows nothing about sessions or front ends. Retries happen only before the first delta
//! reached the caller, so a retried request never duplicates text.

mod anthropic;
mod http;
mod key;
mod openai;
mod retry;

pub use key::describe_cmd;

use std::borrow::Cow;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::core::message::{Content, ContentBlock, Message, Role, StopReason, Usage};

/// Which wire protocol a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI Chat Completions (`/chat/completions`): OpenAI, Ollama, llama.cpp, vLLM, LM Studio, OpenRouter.
    Openai,
    /// Anthropic Messages (`/messages`).
    Anthropic,
}

impl Api {
    /// The `api` value pi records on assistant messages.
    pub fn pi_name(self) -> &'static str {
        match self {
            Api::Openai => "openai-completions",
            Api::Anthropic => "anthropic-messages",
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            Api::Openai => "https://api.openai.com/v1",
            Api::Anthropic => "https://api.anthropic.com/v1",
        }
    }

    pub fn default_key_env(self) -> &'static str {
        match self {
            Api::Openai => "OPENAI_API_KEY",
            Api::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// A context window to assume when the user configured none.
    pub fn default_context_window(self) -> u64 {
        match self {
            Api::Openai => 128_000,
            Api::Anthropic => 200_000,
        }
    }
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
    /// Retries on 429/5xx/connection errors before the first delta.
    pub max_retries: u32,
    /// First retry delay; doubles each time, capped by `max_retry_delay`.
    pub retry_base_delay: Duration,
    pub max_retry_delay: Duration,
    /// How long to wait for response headers, and then for each chunk of the stream.
    pub idle_timeout: Duration,
}

impl ProviderConfig {
    pub fn new(api: Api, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api,
            name: match api {
                Api::Openai => "openai".into(),
                Api::Anthropic => "anthropic".into(),
            },
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            api_key_cmd: None,
            context_window: api.default_context_window(),
            max_tokens: 4096,
            max_retries: 3,
            retry_base_delay: Duration::from_millis(500),
            max_retry_delay: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// What the model is asked: a system prompt and the conversation (pi messages).
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    pub system: Option<String>,
    pub messages: Vec<Message>,
}

/// A piece of the reply as it arrives.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ThinkingDelta(String),
}

/// How a completed stream ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamEnd {
    pub stop_reason: StopReason,
    pub usage: Usage,
    pub response_id: Option<String>,
}

/// Provider failures. Messages name what failed and never contain the key.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{provider} returned HTTP {status}: {message}")]
    Http { provider: String, status: u16, message: String },
    #[error("cannot reach {provider} at {url}: {message}")]
    Connect { provider: String, url: String, message: String },
    #[error("{provider} sent nothing for {seconds} s")]
    Timeout { provider: String, seconds: u64 },
    #[error("{provider} stream broke: {message}")]
    Stream { provider: String, message: String },
    #[error("no API key: {0}")]
    MissingKey(String),
    #[error("request aborted")]
    Aborted,
}

impl ProviderError {
    /// Whether a new attempt may succeed (429, 5xx, connection trouble, timeouts).
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => *status == 429 || *status >= 500,
            ProviderError::Connect { .. } | ProviderError::Timeout { .. } => true,
            _ => false,
        }
    }
}

/// A configured provider with its HTTP client (connection pool shared across requests).
#[derive(Clone, Debug)]
pub struct Provider {
    config: ProviderConfig,
    client: reqwest::Client,
}

impl Provider {
    pub fn new(config: ProviderConfig) -> Self {
        crate::install_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Self { config, client }
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// Streams one reply. `on_event` sees every delta in order; the result says how the stream
    /// ended. Cancelling `cancel` closes the connection at once and returns `Aborted`.
    ///
    /// The key is resolved here, per call, so a rotated key or a `pass` entry unlocked later is
    /// picked up without restarting; it lives only in this call's memory. Every error message is
    /// scrubbed of it before it leaves, in case a server or a shell echoes it back.
    pub async fn stream(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<StreamEnd, ProviderError> {
        let key = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Aborted),
            key = key::resolve(&self.config) => key?,
        };
        let wire = http::Wire::new(&self.config, request);
        let result = retry::with_retries(self, &wire, key.as_deref(), cancel, on_event).await;
        result.map_err(|e| key::redact_error(e, key.as_deref()))
    }
}

/// Entry points for the fuzz targets in `fuzz/` and the bounded stable-Rust fuzz run; not an API.
#[doc(hidden)]
pub mod fuzzing {
    use super::{Api, StreamEnd};

    /// A response body, cut into `chunks` as the network delivered it, through the SSE parser and
    /// `api`'s event decoder. Never panics: the text and the end, or the error the user would see.
    pub fn decode_body(api: Api, chunks: Vec<bytes::Bytes>) -> Result<(String, StreamEnd), String> {
        super::http::decode_body(api, chunks)
    }

    /// The property both the fuzz targets and the seeded test check: `body` decodes the same
    /// (text, end, or failure) whether it arrives whole or in chunks of `chunk_size` bytes.
    /// `Ok(true)` when it decoded, `Ok(false)` when both failed, `Err` saying how they differ.
    pub fn chunking_keeps_the_verdict(api: Api, body: &[u8], chunk_size: usize) -> Result<bool, String> {
        let chunked = body.chunks(chunk_size.max(1)).map(bytes::Bytes::copy_from_slice).collect();
        let a = decode_body(api, chunked);
        let b = decode_body(api, vec![bytes::Bytes::copy_from_slice(body)]);
        match (&a, &b) {
            (Ok(x), Ok(y)) if x == y => Ok(true),
            (Err(_), Err(_)) => Ok(false),
            _ => Err(format!("chunks of {chunk_size} changed the verdict: {a:?} vs {b:?}")),
        }
    }
}

/// Messages as they go on the wire: what pi would send, fixed up so strict servers accept it.
///
/// pi keeps aborted and failed turns in the session, and a turn can end between a tool call and
/// its result (abort, crash). OpenAI and Anthropic both reject a tool call without its result
/// and a result without its call, so empty failed turns are dropped, missing results are filled
/// with an error result and orphaned results are dropped.
fn prepare_messages(messages: &[Message]) -> Vec<Cow<'_, Message>> {
    let mut out: Vec<Cow<'_, Message>> = Vec::with_capacity(messages.len());
    // Tool calls of the last assistant message still waiting for their result: (id, name).
    let mut pending: Vec<(String, String)> = Vec::new();
    for msg in messages {
        match &msg.role {
            Role::ToolResult => {
                let id = msg.extra_str("toolCallId").unwrap_or_default();
                if let Some(pos) = pending.iter().position(|(p, _)| p == id) {
                    pending.remove(pos);
                    out.push(Cow::Borrowed(msg));
                } else {
                    tracing::debug!(tool_call_id = id, "dropping a tool result without its call");
                }
            }
            Role::User | Role::Assistant => {
                let calls = tool_calls(msg);
                let failed =
                    matches!(msg.stop_reason, Some(StopReason::Error) | Some(StopReason::Aborted));
                if msg.is_assistant()
                    && failed
                    && calls.is_empty()
                    && msg.content.joined_text().trim().is_empty()
                {
                    // A turn that failed before saying anything is as if it never happened.
                    continue;
                }
                fill_missing_results(&mut out, &mut pending);
                if msg.is_assistant() {
                    pending = calls
                        .iter()
                        .map(|b| {
                            (
                                b.extra_str("id").unwrap_or_default().to_owned(),
                                b.extra_str("name").unwrap_or_default().to_owned(),
                            )
                        })
                        .collect();
                }
                out.push(Cow::Borrowed(msg));
            }
            // bashExecution, custom messages…: pi's own bookkeeping, not model input.
            Role::Other(_) => {}
        }
    }
    fill_missing_results(&mut out, &mut pending);
    out
}

fn fill_missing_results(out: &mut Vec<Cow<'_, Message>>, pending: &mut Vec<(String, String)>) {
    for (id, name) in pending.drain(..) {
        let mut extra = serde_json::Map::new();
        extra.insert("toolCallId".into(), id.into());
        extra.insert("toolName".into(), name.into());
        extra.insert("isError".into(), true.into());
        out.push(Cow::Owned(Message {
            role: Role::ToolResult,
            content: Content::Blocks(vec![ContentBlock::text("No result provided")]),
            stop_reason: None,
            error_message: None,
            usage: None,
            timestamp: None,
            extra,
        }));
    }
}

/// The `toolCall` blocks of a message.
fn tool_calls(msg: &Message) -> Vec<&ContentBlock> {
    match &msg.content {
        Content::Blocks(blocks) => blocks.iter().filter(|b| b.kind == "toolCall").collect(),
        Content::Text(_) => Vec::new(),
    }
}

/// `s` cut to at most `max` bytes on a character boundary, with an ellipsis when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
