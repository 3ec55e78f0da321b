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
mod health;
mod http;
mod key;
mod openai;
mod responses;
mod retry;
mod tls;
mod types;
mod view;
mod wire;

pub use health::{probe, Reachability, Unreachable, PROBE_TIMEOUT};
pub use key::describe_cmd;
pub use types::{
    Api, ChatRequest, MalformedArguments, ProviderConfig, ProviderError, StreamEnd, StreamEvent,
    ThinkingLevel, ToolCall, ToolChoice,
};

use std::sync::atomic::{AtomicBool, Ordering};
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
}

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
        Self { config, client, format, reasoning_effort_refused: Arc::new(AtomicBool::new(false)) }
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
            config.to_mut().reasoning_effort = Some(false);
            let prepared = http::Prepared::new(self.format, &config, request);
            result = self.with_retries(client, &prepared, key.as_deref(), cancel, on_event).await;
        }
        result.map_err(|e| key::redact_error(e, key.as_deref()))
    }

    /// The config requests are built from: `reasoning_effort` off once the server refused it.
    fn effective_config(&self) -> std::borrow::Cow<'_, ProviderConfig> {
        if self.reasoning_effort_refused.load(Ordering::Relaxed) && self.config.sends_reasoning_effort() {
            let mut config = self.config.clone();
            config.reasoning_effort = Some(false);
            std::borrow::Cow::Owned(config)
        } else {
            std::borrow::Cow::Borrowed(&self.config)
        }
    }

    /// Runs attempts until one succeeds, fails for good, delivers a delta and then fails, or
    /// the retry budget (`max_retries`) is spent.
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
        let chunked = body.chunks(chunk_size.max(1)).map(bytes::Bytes::copy_from_slice).collect();
        let a = decode_body(api, chunked);
        let b = decode_body(api, vec![bytes::Bytes::copy_from_slice(body)]);
        match (&a, &b) {
            (Ok(x), Ok(y)) if same(x, y) => Ok(true),
            (Err(_), Err(_)) => Ok(false),
            _ => Err(format!("chunks of {chunk_size} changed the verdict: {a:?} vs {b:?}")),
        }
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
#[allow(clippy::unwrap_used)]
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

    #[test]
    fn each_api_has_its_format() {
        assert_eq!(format_for(Api::Openai).path(), "/chat/completions");
        assert_eq!(format_for(Api::Anthropic).path(), "/messages");
        assert_eq!(format_for(Api::OpenaiResponses).path(), "/responses");
    }
}
