//! Streaming model providers: OpenAI-compatible Chat Completions and Anthropic Messages.
//!
//! A provider turns the conversation into one HTTP request and reports the reply as a stream of
//! deltas. It knows nothing about sessions or Neovim. Retries happen only before the first delta
//! reached the caller, so a retried request never duplicates text.

mod anthropic;
mod openai;
mod retry;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::message::{Message, StopReason, Usage};

/// Which wire protocol a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
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
    pub async fn stream(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<StreamEnd, ProviderError> {
        todo!("implemented in openai.rs / anthropic.rs / retry.rs")
    }
}
