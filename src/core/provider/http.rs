//! One HTTP attempt for any [`WireFormat`]: send, map failures, read the SSE stream with an
//! idle timeout and abort on cancellation. What differs between APIs (endpoint, headers, body,
//! event decoding) comes from the format; this module never asks which API it speaks.

use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::retry::{self, Failure};
use super::types::{ChatRequest, ProviderConfig, ProviderError, StreamEnd, StreamEvent};
use super::wire::{truncate, Decoder, Flow, SseEvent, WireFormat};

/// Longest error body read from a failed response: enough for any provider's JSON error, small
/// enough that a misconfigured base URL answering with a web page costs nothing.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Everything about a request that does not change between attempts.
pub(super) struct Prepared<'f> {
    format: &'f dyn WireFormat,
    url: String,
    /// Written once; each attempt sends the same bytes (a clone is a reference count).
    body: bytes::Bytes,
}

impl<'f> Prepared<'f> {
    pub(super) fn new(format: &'f dyn WireFormat, config: &ProviderConfig, request: &ChatRequest) -> Self {
        let url = join_url(&config.base_url, format.path());
        Prepared { format, url, body: format.body(config, request).into() }
    }
}

/// `path` appended to the base URL's path, keeping its query (`?api-version=…`, as Azure
/// wants): `http://h/v1?q=1` + `/models` is `http://h/v1/models?q=1`.
pub(super) fn join_url(base: &str, path: &str) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut url) if url.has_host() => {
            let joined = format!("{}{path}", url.path().trim_end_matches('/'));
            url.set_path(&joined);
            url.to_string()
        }
        // reqwest will refuse it anyway, with its own message.
        _ => format!("{}{path}", base.trim_end_matches('/')),
    }
}

/// One request and its whole reply. Dropping the response (on abort, timeout or error) closes
/// the connection, which is also how a local server learns to stop generating.
pub(super) async fn attempt(
    client: &reqwest::Client,
    config: &ProviderConfig,
    prepared: &Prepared<'_>,
    key: Option<&str>,
    cancel: &CancellationToken,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<StreamEnd, Failure> {
    let idle = config.idle_timeout;
    let mut headers = prepared.format.headers(key)?;
    headers.insert(
        reqwest::header::ACCEPT,
        reqwest::header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        reqwest::header::HeaderValue::from_static("application/json"),
    );
    let request = client.post(&prepared.url).headers(headers).body(prepared.body.clone());
    tracing::debug!(provider = %config.name, url = %display_url(&prepared.url), model = %config.model, "sending request");

    let sent = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(ProviderError::Aborted.into()),
        sent = tokio::time::timeout(idle, request.send()) => sent,
    };
    let response = match sent {
        Err(_) => return Err(timeout(config).into()),
        Ok(Err(e)) => return Err(send_error(config, &prepared.url, e).into()),
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
    let mut decoder = prepared.format.decoder();
    loop {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Aborted.into()),
            item = events.next() => item,
        };
        let event = match item {
            // The server closed the stream: `finish` says whether the reply was complete.
            None => break,
            Some(Ok(event)) => event,
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
        };
        let sse = SseEvent { name: &event.event, data: &event.data };
        match decoder.on_event(sse, emit).map_err(|m| stream_error(config, m))? {
            Flow::Continue => {}
            Flow::Done => break,
        }
    }
    decoder.finish(emit).map_err(|m| stream_error(config, m).into())
}

/// A whole response body through the SSE parser and `format`'s decoder, the way `attempt`
/// reads it (for the fuzz targets): every event and the end, or the protocol error `attempt`
/// would report.
pub(super) fn decode_body(
    format: &dyn WireFormat,
    chunks: Vec<bytes::Bytes>,
) -> Result<(Vec<StreamEvent>, StreamEnd), String> {
    let mut decoder: Box<dyn Decoder> = format.decoder();
    let body = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
    let mut events = Box::pin(body.eventsource());
    let mut out = Vec::new();
    let mut emit = |e: StreamEvent| out.push(e);
    futures::executor::block_on(async {
        while let Some(item) = events.next().await {
            let event = item.map_err(|e| format!("invalid event stream: {e}"))?;
            let sse = SseEvent { name: &event.event, data: &event.data };
            if decoder.on_event(sse, &mut emit)? == Flow::Done {
                break;
            }
        }
        Ok::<_, String>(())
    })?;
    let end = decoder.finish(&mut emit)?;
    Ok((out, end))
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
        url: display_url(url),
        message: error_chain(&e),
    }
}

/// A URL as it may be shown or logged: without the user name and password a base URL can
/// carry (`https://user:secret@proxy/v1`) and without its query (`?key=…`).
pub(super) fn display_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.has_host() => {
            let clean = u.username().is_empty()
                && u.password().is_none()
                && u.query().is_none()
                && u.fragment().is_none();
            if clean {
                // Shown as configured (the parser would add a `/` to a bare host).
                return url.to_owned();
            }
            // Cannot fail for a URL with a host.
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        // Not a URL reqwest could send to either: show only what follows any `@`.
        _ => match url.rsplit_once('@') {
            Some((_, rest)) => format!("…@{rest}"),
            None => url.to_owned(),
        },
    }
}

/// The causes of a reqwest error, innermost last ("client error (Connect): tcp connect error:
/// Connection refused"). reqwest's own top line only repeats the URL the caller already shows.
pub(super) fn error_chain(e: &reqwest::Error) -> String {
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

    #[test]
    fn paths_join_the_base_url_before_its_query() {
        assert_eq!(join_url("http://127.0.0.1:8080/v1", "/chat/completions"), "http://127.0.0.1:8080/v1/chat/completions");
        assert_eq!(join_url("https://api.anthropic.com/v1/", "/messages"), "https://api.anthropic.com/v1/messages");
        assert_eq!(join_url("http://localhost:11434", "/models"), "http://localhost:11434/models");
        assert_eq!(
            join_url("https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "/chat/completions"),
            "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(join_url("not a url/", "/models"), "not a url/models");
    }

    #[test]
    fn shown_urls_carry_no_credentials() {
        assert_eq!(display_url("https://u:secret@proxy.example/v1/models"), "https://proxy.example/v1/models");
        assert_eq!(display_url("https://proxy.example/v1?key=secret"), "https://proxy.example/v1");
        assert_eq!(display_url("http://127.0.0.1:8080/v1/models"), "http://127.0.0.1:8080/v1/models");
        assert_eq!(display_url("http://localhost:8080"), "http://localhost:8080");
        assert_eq!(display_url("user:pw@host/v1"), "…@host/v1");
    }
}
