//! Streaming model providers: OpenAI-compatible Chat Completions, OpenAI Responses and Anthropic
//! Messages.
//!
//! A provider turns the conversation into one HTTP request and reports the reply as a stream of
//! deltas. It knows nothing about sessions or front ends. Retries happen only before the first delta
//! reached the caller, so a retried request never duplicates text.
//!
//! Modules, each depending only on those above it:
//!
//! | module         | what                                                                  |
//! |----------------|-----------------------------------------------------------------------|
//! | `types`        | config, request, stream events, errors                                |
//! | `key`          | API key resolution and redaction                                      |
//! | `retry`        | the retry policy (backoff, `retry-after`)                             |
//! | `tls`          | the clients' TLS: system roots loaded at the first handshake          |
//! | `wire`         | the [`WireFormat`](wire::WireFormat) trait, tool-call assembly        |
//! | `view`         | messages as the formats read them (stored JSON kept as tokens), history fix-ups, the body writer |
//! | `openai`, `responses`, `anthropic` | the three wire formats                            |
//! | `http`         | one attempt for any wire format                                       |
//! | `health`       | the reachability probe                                                |
//! | this file      | [`Provider`]: picks the format, resolves the key, runs the attempts   |

mod anthropic;
mod api;
pub mod copilot;
mod health;
mod http;
mod key;
mod listing;
pub mod models;
mod openai;
pub mod presets;
mod responses;
mod retry;
mod tls;
mod types;
mod view;
mod wire;

pub use copilot::{github_token_from_env, TokenSource};
pub use health::{probe, Reachability, Unreachable, PROBE_TIMEOUT};
pub use key::{describe_cmd, key_sources, names_a_variable, KeySources};
/// The HTTP clients' builder (lazily verifying TLS), for the other clients of the host (MCP).
pub(crate) use tls::client_builder as http_client_builder;
pub use models::{ModelFacts, ModelInfo, ModelTable, PiModels, PiProvider, Source};
pub use presets::{Preset, ProviderKind};
pub use types::{
    Api, ChatRequest, CopilotConfig, MalformedArguments, ProviderConfig, ProviderError, Secret, SetLimits, StreamEnd,
    StreamEvent, ThinkingLevel, ToolCall, ToolChoice, ToolDefinition, DEFAULT_MAX_TOKENS,
};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use wire::WireFormat;

/// The wire format of `api`.
fn format_for(api: Api) -> &'static dyn WireFormat {
    match api {
        Api::Openai => &openai::OpenAi,
        Api::Anthropic => &anthropic::Anthropic,
        Api::OpenaiResponses => &responses::Responses,
    }
}

/// A URL as it may be shown: without credentials or query (see the health check).
pub fn display_url(url: &str) -> String {
    http::display_url(url)
}

/// The models a picker offers ([`Provider::catalogue`]).
#[derive(Debug)]
pub struct Catalogue {
    /// The provider's list first, then the tables' other models.
    pub models: Vec<ModelInfo>,
    /// How many of `models` the provider's list named.
    pub listed: usize,
    /// Why the provider's list is missing, when it is.
    pub error: Option<ProviderError>,
}

/// A configured provider with its HTTP client (connection pool shared across requests).
#[derive(Clone, Debug)]
pub struct Provider {
    config: ProviderConfig,
    /// The client, or why it could not be built: then every request fails with
    /// [`ProviderError::Client`], so the user sees the reason in the transcript.
    client: Result<reqwest::Client, String>,
    format: &'static dyn WireFormat,
    /// The server refused `reasoning_effort` once: it is left out from then on (shared by the
    /// clones, so for as long as this model is in use).
    reasoning_effort_refused: Arc<AtomicBool>,
    /// Copilot's token and model list, when the provider is Copilot.
    copilot: Option<Arc<copilot::Copilot>>,
    /// Any other provider's model list (`GET /models`), fetched once.
    listing: Arc<listing::Listing>,
    /// The window an overflow error of this model named (0: none yet): the provider's own
    /// word, below whatever was configured or listed.
    refused_window: Arc<AtomicU64>,
}

use crate::sync::lock;

/// The request field some OpenAI-compatible servers refuse.
const REASONING_EFFORT: &str = "reasoning_effort";

/// Whether `error` is a server refusing `field` (a 400, or a 422 from validating servers, whose
/// message names it).
fn refuses_field(error: &ProviderError, field: &str) -> bool {
    matches!(error, ProviderError::Http { status: 400 | 422, message, .. } if message.to_ascii_lowercase().contains(field))
}

impl Provider {
    pub fn new(config: ProviderConfig) -> Self {
        let client = tls::client_builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| {
                tracing::error!(provider = %config.name, error = %e, "cannot build the HTTP client");
                e.to_string()
            });
        let format = format_for(config.api);
        let copilot = config.copilot.as_ref().map(|_| Arc::default());
        Self {
            config,
            client,
            format,
            reasoning_effort_refused: Arc::new(AtomicBool::new(false)),
            copilot,
            listing: Arc::default(),
            refused_window: Arc::default(),
        }
    }

    /// A provider for `config` (another model, `/model`) that keeps this one's Copilot token
    /// and model list when both are Copilot's with the same token URL (no new exchange), and
    /// any other provider's model list when the base URL is the same.
    pub fn switched(&self, config: ProviderConfig) -> Provider {
        let same_login = match (&self.config.copilot, &config.copilot) {
            (Some(a), Some(b)) => a.token_url == b.token_url,
            _ => false,
        };
        let same_server = self.config.base_url == config.base_url && self.config.name == config.name;
        let mut next = Provider::new(config);
        if same_login {
            next.copilot = self.copilot.clone();
        }
        if same_server {
            next.listing = self.listing.clone();
        }
        next
    }

    /// The config as configured (for Copilot: before its model list was read; see
    /// [`Provider::current_config`]).
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The config requests are sent with, as far as known now: for Copilot, the model's wire
    /// format, base and window once its model list was read. What the meter, the wall and the
    /// recorded messages use.
    pub fn current_config(&self) -> ProviderConfig {
        let mut config = self.config.clone();
        if let Some(state) = &self.copilot {
            if let Some((info, base)) = state.known(&self.config.model) {
                copilot::apply(&info, &mut config, &base);
            }
        } else if let Some(listed) = self.listing.listed(&self.config.model) {
            let facts = config.table.facts(&config.model, Some(&listed));
            config.apply_limits(facts.as_ref());
        }
        if let Some(window) = self.refused_window() {
            config.context_window = config.context_window.min(window);
        }
        config
    }

    /// The window the provider named when it refused a request as too large, if it did.
    fn refused_window(&self) -> Option<u64> {
        Some(self.refused_window.load(Ordering::Relaxed)).filter(|w| *w > 0)
    }

    /// Remembers the window an overflow error names, and says so once when it is below the
    /// one in force (a configured or default window the model does not have).
    fn learn_from(&self, error: &ProviderError, on_event: &mut (dyn FnMut(StreamEvent) + Send)) {
        let Some(named) = error.window_named() else { return };
        let before = self.current_config().context_window;
        self.refused_window.store(named, Ordering::Relaxed);
        if named < before {
            tracing::info!(provider = %self.config.name, model = %self.config.model, named, before, "the provider named a smaller window");
            on_event(StreamEvent::Notice(format!(
                "{} says {}'s context window is {named} tokens, not {before}: the meter and the automatic handoff go by {named} from now on (set provider.context_window to say it up front)",
                self.config.name, self.config.model
            )));
        }
    }

    /// What is known of the configured model now (see [`Provider::current_config`]).
    pub fn model_info(&self) -> ModelInfo {
        let mut info = match &self.copilot {
            Some(state) => self.config.model_info(state.known(&self.config.model).map(|(info, _)| info).as_ref()),
            None => self.config.model_info(self.listing.listed(&self.config.model).as_ref()),
        };
        if let Some(window) = self.refused_window().filter(|w| info.context_window.is_none_or(|known| *w < known)) {
            info.context_window = Some(window);
            info.source = Source::Refused;
        }
        info
    }

    /// Reads what a request needs to know beforehand, so that [`Provider::current_config`] is
    /// the one the request will use: Copilot's token and model list, or another provider's
    /// list when it is the best source of the model's window (once). A failure is left to the
    /// request, which reports it, or to the table.
    pub async fn prepare(&self, cancel: &CancellationToken) {
        let Ok(client) = &self.client else { return };
        if let (Some(state), Some(settings)) = (&self.copilot, &self.config.copilot) {
            if state.known(&self.config.model).is_some() {
                return;
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {}
                result = state.model(client, &self.config, settings, None) => {
                    if let Err(e) = result {
                        tracing::debug!(provider = %self.config.name, error = %e, "Copilot's model list is not available yet");
                    }
                }
            }
            return;
        }
        if !listing::worth_asking(&self.config) || self.listing.listed(&self.config.model).is_some() {
            return;
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {}
            _ = self.fetch_list(client) => {}
        }
    }

    /// The provider's own list (`Err` when it has none or it failed), fetched once.
    async fn fetch_list(&self, client: &reqwest::Client) -> Result<Arc<Vec<ModelInfo>>, ProviderError> {
        // A list read is not asked for again: nor is the key (an `api_key_cmd` may take seconds).
        if let Some(list) = self.known_list() {
            return Ok(list);
        }
        if let (Some(state), Some(settings)) = (&self.copilot, &self.config.copilot) {
            let token = state.token(client, &self.config, settings, None).await?;
            return state.models(client, &self.config, settings, &token).await;
        }
        let key = key::resolve(&self.config).await?;
        let list = self.listing.fetch(client, &self.config, key.as_deref()).await;
        list.map_err(|e| key::redact_error(e, key.as_deref()))
    }

    /// Every model a picker offers: the provider's own list (each with what the tables add),
    /// then the tables' models it does not list. The second value is why the provider's list
    /// is missing, when it is. `fetch`: read the list now if it was not (else only what is
    /// known already, at once: for completion).
    pub async fn catalogue(&self, fetch: bool) -> Catalogue {
        // Without `fetch` a list not read yet is no error: there is just nothing listed yet.
        let listed = match (&self.client, fetch) {
            (Ok(client), true) => self.fetch_list(client).await,
            (Err(e), true) => Err(ProviderError::Client(e.clone())),
            (_, false) => Ok(self.known_list().unwrap_or_default()),
        };
        let table = &self.config.table;
        let (mut models, error): (Vec<ModelInfo>, _) = match listed {
            Ok(list) => (list.iter().map(|m| table.facts(&m.id, Some(m)).unwrap_or_else(|| m.clone())).collect(), None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let listed = models.len();
        for info in table.models() {
            if !models.iter().any(|m| m.id == info.id) {
                models.push(info);
            }
        }
        Catalogue { models, listed, error }
    }

    /// Whether the provider's own list was read: then [`Provider::catalogue`] answers at once,
    /// fetching or not.
    pub fn list_read(&self) -> bool {
        self.known_list().is_some()
    }

    /// The provider's list as far as it was read.
    fn known_list(&self) -> Option<Arc<Vec<ModelInfo>>> {
        match &self.copilot {
            Some(state) => state.known_list(),
            None => self.listing.known(),
        }
    }

    /// Enables a Copilot model for the account, after the user said so.
    pub async fn enable_model(&self, model: &str) -> Result<(), ProviderError> {
        let client = self.client.as_ref().map_err(|e| ProviderError::Client(e.clone()))?;
        match (&self.copilot, &self.config.copilot) {
            (Some(state), Some(settings)) => state.enable(client, &self.config, settings, model).await,
            _ => Err(ProviderError::Client("only a Copilot model is enabled for an account".into())),
        }
    }

    /// Streams one reply. `on_event` sees every delta in order; the result says how the stream
    /// ended. Cancelling `cancel` closes the connection at once and returns `Aborted`.
    ///
    /// The key is resolved here, per call, so a rotated key or a `pass` entry unlocked later is
    /// picked up without restarting; it lives only in this call's memory. Every error message is
    /// scrubbed of it before it leaves, in case a server or a shell echoes it back.
    ///
    /// A server that refuses `reasoning_effort` (a 400 naming it) is asked again without it, and
    /// never sent it again by this provider; `on_event` hears of it once, as a
    /// [`StreamEvent::Notice`].
    pub async fn stream(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<StreamEnd, ProviderError> {
        let client = self.client.as_ref().map_err(|e| ProviderError::Client(e.clone()))?;
        if let (Some(state), Some(settings)) = (&self.copilot, &self.config.copilot) {
            let result = tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(ProviderError::Aborted),
                result = self.stream_copilot(client, state, settings, request, cancel, on_event) => result,
            };
            if let Err(e) = &result {
                self.learn_from(e, on_event);
            }
            return result;
        }
        let key = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Aborted),
            key = key::resolve(&self.config) => key?,
        };
        let mut config = self.effective_config();
        let mut result = {
            let prepared = http::Prepared::new(self.format, &config, request);
            self.with_retries(client, &prepared, key.as_deref(), cancel, on_event).await
        };
        let sent_effort = request.thinking.is_on() && config.sends_reasoning_effort();
        if sent_effort && result.as_ref().is_err_and(|e| refuses_field(e, REASONING_EFFORT)) {
            self.reasoning_effort_refused.store(true, Ordering::Relaxed);
            tracing::warn!(provider = %config.name, model = %config.model, "the server refused reasoning_effort; asking again without it");
            on_event(StreamEvent::Notice(format!(
                "{} ({}) does not take reasoning_effort: the thinking level is not sent to it for the rest of the session (set reasoning_effort = false to skip the first try)",
                config.name, config.model
            )));
            config.reasoning_effort = Some(false);
            let prepared = http::Prepared::new(self.format, &config, request);
            result = self.with_retries(client, &prepared, key.as_deref(), cancel, on_event).await;
        }
        if let Err(e) = &result {
            self.learn_from(e, on_event);
        }
        result.map_err(|e| key::redact_error(e, key.as_deref()))
    }

    /// One Copilot reply: the token (cached) and the model's entry of the list (fetched once)
    /// decide the format, base and headers. A 401 from the chat endpoint means the token was
    /// revoked or expired early: it is exchanged again, once.
    async fn stream_copilot(
        &self,
        client: &reqwest::Client,
        state: &copilot::Copilot,
        settings: &CopilotConfig,
        request: &ChatRequest,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<StreamEnd, ProviderError> {
        let mut refused: Option<String> = None;
        loop {
            let (info, token) = state.model(client, &self.config, settings, refused.as_deref()).await?;
            let mut config = self.config.clone();
            copilot::apply(&info, &mut config, &token.base);
            let format = format_for(config.api);
            let headers = copilot::chat_headers(settings, &token.value, &request.messages)?;
            let prepared = http::Prepared::new(format, &config, request).with_headers(headers);
            let result = self.with_retries(client, &prepared, Some(&token.value), cancel, on_event).await;
            match result {
                Err(ProviderError::Http { status: 401, .. }) if refused.is_none() => {
                    tracing::info!(provider = %config.name, "the chat endpoint refused the Copilot token; exchanging it again");
                    refused = Some(token.value.clone());
                }
                result => {
                    return result.map_err(|e| copilot::quota_sentence(key::redact_error(e, Some(&token.value))));
                }
            }
        }
    }

    /// The config requests are built from: [`Provider::current_config`], with
    /// `reasoning_effort` off once the server refused it.
    fn effective_config(&self) -> ProviderConfig {
        let mut config = self.current_config();
        if self.reasoning_effort_refused.load(Ordering::Relaxed) && config.sends_reasoning_effort() {
            config.reasoning_effort = Some(false);
        }
        config
    }

    /// Runs attempts until one succeeds, fails for good, delivers a delta and then fails, or
    /// the retry budget (`max_retries`) is spent.
    ///
    /// A stream that ended or broke before its first event, when no attempt is left, is probed
    /// once (see [`http::probe`]): a server that raises its overflow inside the stream
    /// (llama-cpp-python) answers the same request without streaming with a proper 400, and
    /// that refusal is the error then. A probe the server takes leaves the stream's error.
    async fn with_retries(
        &self,
        client: &reqwest::Client,
        prepared: &http::Prepared<'_>,
        api_key: Option<&str>,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<StreamEnd, ProviderError> {
        let config = &self.config;
        let mut retries = retry::Retries::new(config);
        loop {
            let mut delivered = false;
            let result = {
                let mut emit = |event: StreamEvent| {
                    delivered = true;
                    on_event(event);
                };
                http::attempt(client, config, prepared, api_key, cancel, &mut emit).await
            };
            let failure = match result {
                Ok(end) => return Ok(end),
                Err(failure) => failure,
            };
            let Some(delay) = retries.next_delay(&failure, delivered) else {
                if failure.before_first_event && !delivered {
                    let probed = http::probe(client, config, prepared, api_key, cancel).await?;
                    return Err(probed.unwrap_or(failure.error));
                }
                return Err(failure.error);
            };
            let status = match &failure.error {
                ProviderError::Http { status, .. } => Some(*status),
                _ => None,
            };
            tracing::warn!(
                provider = %config.name,
                status,
                attempt = retries.used(),
                max_retries = config.max_retries,
                delay_ms = delay.as_millis() as u64,
                error = %key::redact_str(&failure.error.to_string(), api_key),
                "request failed, retrying"
            );
            retry::sleep_abortable(delay, cancel).await?;
        }
    }
}

/// Copilot's part of the health check: whether the token exchange and the model list answered,
/// and what the list says of the configured model. Never names a token.
pub async fn copilot_check(config: &ProviderConfig) -> Result<String, ProviderError> {
    let provider = Provider::new(config.clone());
    let client = provider.client.as_ref().map_err(|e| ProviderError::Client(e.clone()))?;
    let (Some(state), Some(settings)) = (&provider.copilot, &config.copilot) else {
        return Err(ProviderError::Client("not a Copilot provider".into()));
    };
    let (info, token) = state.model(client, config, settings, None).await?;
    let mut model = config.clone();
    copilot::apply(&info, &mut model, &token.base);
    Ok(format!(
        "{} answered: {} speaks {} at {}, window {} tokens",
        display_url(&http::join_url(&token.base, "/models")),
        info.id,
        model.api.pi_name(),
        display_url(&model.base_url),
        model.context_window
    ))
}

/// Entry points for the fuzz targets in `fuzz/` and the bounded stable-Rust fuzz run; not an API.
#[doc(hidden)]
pub mod fuzzing {
    use super::{format_for, Api, StreamEnd, StreamEvent};

    /// A response body, cut into `chunks` as the network delivered it, through the SSE parser and
    /// `api`'s event decoder. Never panics: every event and the end, or the error the user would
    /// see.
    pub fn decode_body(
        api: Api,
        chunks: Vec<bytes::Bytes>,
    ) -> Result<(Vec<StreamEvent>, StreamEnd), String> {
        super::http::decode_body(format_for(api), chunks).map_err(|e| e.to_string())
    }

    /// The property both the fuzz targets and the seeded test check: `body` decodes the same
    /// (events, end, or failure) whether it arrives whole or in chunks of `chunk_size` bytes.
    /// `Ok(true)` when it decoded, `Ok(false)` when both failed, `Err` saying how they differ.
    pub fn chunking_keeps_the_verdict(api: Api, body: &[u8], chunk_size: usize) -> Result<bool, String> {
        let lengths = vec![chunk_size.max(1); body.len().div_ceil(chunk_size.max(1))];
        slicing_keeps_the_verdict(api, body, &lengths).map_err(|e| format!("chunks of {chunk_size}: {e}"))
    }

    /// The same property for any cuts: `body` in pieces of the `lengths` (the rest, if they
    /// add up to less, in one piece) decodes as it does whole: the same events and end, or
    /// the same failure.
    pub fn slicing_keeps_the_verdict(api: Api, body: &[u8], lengths: &[usize]) -> Result<bool, String> {
        let a = decode_body(api, slices(body, lengths));
        let b = decode_body(api, vec![bytes::Bytes::copy_from_slice(body)]);
        match (&a, &b) {
            (Ok(x), Ok(y)) if same(x, y) => Ok(true),
            (Err(x), Err(y)) if x == y => Ok(false),
            _ => Err(format!("the slices changed the verdict: {a:?} vs {b:?}")),
        }
    }

    /// `body` cut into pieces of the `lengths`, the rest in one.
    fn slices(body: &[u8], lengths: &[usize]) -> Vec<bytes::Bytes> {
        let mut out = Vec::new();
        let mut rest = body;
        for &len in lengths {
            if rest.is_empty() {
                break;
            }
            let (piece, after) = rest.split_at(len.clamp(1, rest.len()));
            out.push(bytes::Bytes::copy_from_slice(piece));
            rest = after;
        }
        if !rest.is_empty() {
            out.push(bytes::Bytes::copy_from_slice(rest));
        }
        out
    }

    /// Equal, except for the ids made up for calls without one (they carry the time).
    fn same(a: &(Vec<StreamEvent>, StreamEnd), b: &(Vec<StreamEvent>, StreamEnd)) -> bool {
        let strip = |events: &[StreamEvent]| -> Vec<StreamEvent> {
            events
                .iter()
                .cloned()
                .map(|e| match e {
                    StreamEvent::ToolCallStart { index, name, .. } => {
                        StreamEvent::ToolCallStart { index, id: String::new(), name }
                    }
                    StreamEvent::ToolCall(mut c) => {
                        c.id.clear();
                        StreamEvent::ToolCall(c)
                    }
                    other => other,
                })
                .collect()
        };
        a.1 == b.1 && strip(&a.0) == strip(&b.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_client_that_could_not_be_built_fails_every_request_with_the_reason() {
        let mut provider = Provider::new(ProviderConfig::new(Api::Openai, "http://127.0.0.1:9/v1", "m"));
        provider.client = Err("no TLS backend".into());
        let request = ChatRequest::default();
        let result = provider.stream(&request, &CancellationToken::new(), &mut |_| {}).await;
        let error = result.unwrap_err();
        assert!(matches!(error, ProviderError::Client(_)), "{error:?}");
        assert!(!error.is_retryable());
        assert_eq!(error.to_string(), "cannot set up the HTTP client: no TLS backend");
    }

    /// The probe of each format's real body: no stream, the API's smallest reply limit, the
    /// conversation as it was, and nothing the probe would be refused for instead (Anthropic's
    /// thinking budget above a one-token limit).
    #[test]
    fn each_formats_probe_asks_without_streaming_for_the_smallest_reply() {
        use crate::message::{ContextMessage, Message};
        let request = ChatRequest {
            messages: vec![ContextMessage::from(Message::user("Say hello"))],
            thinking: ThinkingLevel::High,
            ..ChatRequest::default()
        };
        let cases = [
            (Api::Openai, "http://127.0.0.1:8080/v1", "o3", "max_tokens", 1, "messages"),
            (Api::Openai, "https://api.openai.com/v1", "o3", "max_completion_tokens", 1, "messages"),
            (Api::Anthropic, "https://api.anthropic.com/v1", "claude-sonnet-4-5", "max_tokens", 1, "messages"),
            (Api::Anthropic, "https://api.anthropic.com/v1", "claude-opus-4-6", "max_tokens", 1, "messages"),
            (Api::OpenaiResponses, "https://api.openai.com/v1", "gpt-5", "max_output_tokens", 16, "input"),
        ];
        for (api, base, model, limit, value, conversation) in cases {
            let format = format_for(api);
            let config = ProviderConfig::new(api, base, model);
            let body = format.body(&config, &request);
            let streamed: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let probe: serde_json::Value = serde_json::from_slice(&format.probe_body(&body).unwrap()).unwrap();
            assert_eq!(streamed["stream"], true, "{api:?}");
            assert_eq!(probe["stream"], false, "{api:?}");
            assert_eq!(probe[limit], value, "{api:?} {model}: {probe}");
            assert_eq!(probe[conversation], streamed[conversation], "{api:?}");
            assert_eq!(probe["model"], model);
            for gone in ["stream_options", "thinking", "output_config"] {
                assert!(probe.get(gone).is_none(), "{api:?} {model}: {gone} in {probe}");
            }
        }
        let anthropic = format_for(Api::Anthropic).body(&ProviderConfig::new(Api::Anthropic, "https://api.anthropic.com/v1", "claude-sonnet-4-5"), &request);
        assert!(String::from_utf8_lossy(&anthropic).contains("budget_tokens"), "the streamed request thinks");
        assert_eq!(format_for(Api::Openai).probe_body(b"not json"), None);
    }

    #[test]
    fn each_api_has_its_format() {
        assert_eq!(format_for(Api::Openai).path(), "/chat/completions");
        assert_eq!(format_for(Api::Anthropic).path(), "/messages");
        assert_eq!(format_for(Api::OpenaiResponses).path(), "/responses");
    }
}
