//! One HTTP attempt shared by both wire formats: send, map failures, read the SSE stream with an
//! idle timeout and abort on cancellation. The format-specific parts (body, auth headers, event
//! decoding) live in `openai.rs` and `anthropic.rs`.

use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{anthropic, openai, retry, truncate, Api, ChatRequest, Provider, ProviderConfig};
use super::{ProviderError, StreamEnd, StreamEvent};

/// Longest error body read from a failed response: enough for any provider's JSON error, small
/// enough that a misconfigured base URL answering with a web page costs nothing.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Decodes one wire format's events into deltas and the final [`StreamEnd`].
pub(super) trait Decoder: Send {
    /// Handles one SSE event; `Ok(true)` when the reply is complete and reading should stop.
    /// `Err` is a protocol error, reported as [`ProviderError::Stream`].
    fn on_event(
        &mut self,
        event: &Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, String>;

    /// The server closed the stream without the end marker: fine only if the reply had finished.
    fn on_close(&mut self) -> Result<(), String>;

    fn end(self: Box<Self>) -> StreamEnd;
}

/// Everything about a request that does not change between attempts.
pub(super) struct Wire {
    api: Api,
    url: String,
    body: Value,
}

impl Wire {
    pub(super) fn new(config: &ProviderConfig, request: &ChatRequest) -> Self {
        let base = config.base_url.trim_end_matches('/');
        match config.api {
            Api::Openai => Wire {
                api: config.api,
                url: format!("{base}/chat/completions"),
                body: openai::request_body(config, request),
            },
            Api::Anthropic => Wire {
                api: config.api,
                url: format!("{base}/messages"),
                body: anthropic::request_body(config, request),
            },
        }
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        match self.api {
            Api::Openai => Box::new(openai::Decoder::default()),
            Api::Anthropic => Box::new(anthropic::Decoder::default()),
        }
    }

    /// Auth and protocol headers. Key headers are marked sensitive so that no `Debug` output of
    /// the request (reqwest's or ours) ever shows them.
    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(reqwest::header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        let secret = |value: String| {
            HeaderValue::from_str(&value)
                .map(|mut v| {
                    v.set_sensitive(true);
                    v
                })
                .map_err(|_| {
                    ProviderError::MissingKey(
                        "the API key contains characters not allowed in an HTTP header".into(),
                    )
                })
        };
        match self.api {
            Api::Openai => {
                if let Some(key) = key {
                    headers
                        .insert(reqwest::header::AUTHORIZATION, secret(format!("Bearer {key}"))?);
                }
            }
            Api::Anthropic => {
                if let Some(key) = key {
                    headers.insert("x-api-key", secret(key.to_owned())?);
                }
                headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
            }
        }
        Ok(headers)
    }
}

/// A failed attempt, with the server's `retry-after` hint when it gave one.
pub(super) struct Failure {
    pub(super) error: ProviderError,
    pub(super) retry_after: Option<Duration>,
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Self {
        Failure { error, retry_after: None }
    }
}

/// One request and its whole reply. Dropping the response (on abort, timeout or error) closes
/// the connection, which is also how a local server learns to stop generating.
pub(super) async fn attempt(
    provider: &Provider,
    wire: &Wire,
    key: Option<&str>,
    cancel: &CancellationToken,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<StreamEnd, Failure> {
    let config = provider.config();
    let idle = config.idle_timeout;
    let request = provider.client.post(&wire.url).headers(wire.headers(key)?).json(&wire.body);
    tracing::debug!(provider = %config.name, url = %wire.url, model = %config.model, "sending request");

    let sent = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(ProviderError::Aborted.into()),
        sent = tokio::time::timeout(idle, request.send()) => sent,
    };
    let response = match sent {
        Err(_) => return Err(timeout(config).into()),
        Ok(Err(e)) => return Err(send_error(config, &wire.url, e).into()),
        Ok(Ok(response)) => response,
    };

    let status = response.status();
    if !status.is_success() {
        let retry_after = retry::retry_after(response.headers());
        let body = read_body(response, idle, cancel).await?;
        let message = if body.trim().is_empty() {
            status.canonical_reason().unwrap_or("no message").to_owned()
        } else {
            error_message(&body)
        };
        return Err(Failure {
            error: ProviderError::Http {
                provider: config.name.clone(),
                status: status.as_u16(),
                message,
            },
            retry_after,
        });
    }

    let is_json = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        // A proxy or server that ignored `stream: true`, or reported an error with status 200.
        let body = read_body(response, idle, cancel).await?;
        return Err(stream_error(
            config,
            format!("expected an event stream, got JSON: {}", error_message(&body)),
        )
        .into());
    }

    let mut events = Box::pin(timed_chunks(response, idle).eventsource());
    let mut decoder = wire.decoder();
    loop {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Aborted.into()),
            item = events.next() => item,
        };
        match item {
            None => {
                decoder.on_close().map_err(|m| stream_error(config, m))?;
                break;
            }
            Some(Ok(event)) => {
                if decoder.on_event(&event, emit).map_err(|m| stream_error(config, m))? {
                    break;
                }
            }
            Some(Err(EventStreamError::Transport(ChunkError::Idle))) => {
                return Err(timeout(config).into())
            }
            Some(Err(EventStreamError::Transport(ChunkError::Body(e)))) => {
                let message =
                    format!("connection closed before the reply finished ({})", error_chain(&e));
                return Err(stream_error(config, message).into());
            }
            Some(Err(EventStreamError::Utf8(e))) => {
                return Err(stream_error(config, format!("invalid UTF-8 in the stream: {e}")).into())
            }
            Some(Err(EventStreamError::Parser(e))) => {
                return Err(stream_error(config, format!("invalid event stream: {e}")).into())
            }
        }
    }
    Ok(decoder.end())
}

/// A whole response body through the SSE parser and `api`'s decoder, the way `attempt` reads it
/// (for the fuzz targets): the text and the end, or the protocol error `attempt` would report.
pub(super) fn decode_body(api: Api, chunks: Vec<bytes::Bytes>) -> Result<(String, StreamEnd), String> {
    let mut decoder: Box<dyn Decoder> = match api {
        Api::Openai => Box::new(openai::Decoder::default()),
        Api::Anthropic => Box::new(anthropic::Decoder::default()),
    };
    let body = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
    let mut events = Box::pin(body.eventsource());
    let mut text = String::new();
    futures::executor::block_on(async {
        while let Some(item) = events.next().await {
            let event = item.map_err(|e| format!("invalid event stream: {e}"))?;
            let mut emit = |e: StreamEvent| {
                if let StreamEvent::TextDelta(t) = e {
                    text.push_str(&t);
                }
            };
            if decoder.on_event(&event, &mut emit)? {
                return Ok(());
            }
        }
        decoder.on_close()
    })?;
    Ok((text, decoder.end()))
}

/// Why the byte stream stopped early.
enum ChunkError {
    Body(reqwest::Error),
    Idle,
}

/// The response body as a stream that fails with [`ChunkError::Idle`] when no bytes arrive for
/// `idle`. Timing raw chunks rather than events means SSE comments (keep-alives some providers
/// send while a model thinks) count as life.
fn timed_chunks(
    response: reqwest::Response,
    idle: Duration,
) -> impl Stream<Item = Result<bytes::Bytes, ChunkError>> {
    let body = Box::pin(response.bytes_stream());
    futures::stream::unfold(Some(body), move |state| async move {
        let mut body = state?;
        match tokio::time::timeout(idle, body.next()).await {
            Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some(body))),
            Ok(Some(Err(e))) => Some((Err(ChunkError::Body(e)), None)),
            Ok(None) => None,
            Err(_) => Some((Err(ChunkError::Idle), None)),
        }
    })
}

/// Reads a (small) body as text, bounded by the idle timeout and the cancel token; fails only
/// when aborted.
async fn read_body(
    mut response: reqwest::Response,
    idle: Duration,
    cancel: &CancellationToken,
) -> Result<String, ProviderError> {
    let mut buf = Vec::new();
    loop {
        let chunk = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Aborted),
            chunk = tokio::time::timeout(idle, response.chunk()) => chunk,
        };
        match chunk {
            Ok(Ok(Some(bytes))) => {
                buf.extend_from_slice(&bytes);
                if buf.len() >= MAX_ERROR_BODY {
                    break;
                }
            }
            // A body cut short still says more than nothing: keep what arrived.
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The provider's own words from an error body: `error.message` (OpenAI, Anthropic), an
/// `error` string (Ollama, llama.cpp) or `message`; otherwise the start of the raw body.
pub(super) fn error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let found = v
            .pointer("/error/message")
            .and_then(Value::as_str)
            .or_else(|| v.get("error").and_then(Value::as_str))
            .or_else(|| v.get("message").and_then(Value::as_str));
        if let Some(m) = found {
            return truncate(m.trim(), 1000);
        }
    }
    truncate(body.trim(), 300)
}

fn timeout(config: &ProviderConfig) -> ProviderError {
    ProviderError::Timeout {
        provider: config.name.clone(),
        seconds: config.idle_timeout.as_secs_f64().ceil() as u64,
    }
}

fn stream_error(config: &ProviderConfig, message: String) -> ProviderError {
    ProviderError::Stream { provider: config.name.clone(), message }
}

fn send_error(config: &ProviderConfig, url: &str, e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        return timeout(config);
    }
    ProviderError::Connect {
        provider: config.name.clone(),
        url: url.to_owned(),
        message: error_chain(&e),
    }
}

/// The causes of a reqwest error, innermost last ("client error (Connect): tcp connect error:
/// Connection refused"). reqwest's own top line only repeats the URL the caller already shows.
fn error_chain(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        let text = err.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        source = err.source();
    }
    if parts.is_empty() {
        parts.push(e.to_string());
    }
    parts.join(": ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn error_message_prefers_the_providers_words() {
        assert_eq!(error_message(r#"{"error":{"message":"bad key","type":"x"}}"#), "bad key");
        assert_eq!(error_message(r#"{"error":"model not found"}"#), "model not found");
        assert_eq!(error_message(r#"{"message":"nope"}"#), "nope");
        let long = "x".repeat(1000);
        assert!(error_message(&long).chars().count() <= 301);
    }
}
