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
use super::wire::{self, truncate, DecodeError, Decoder, Flow, SseEvent, WireFormat};

/// Longest error body read from a failed response: enough for any provider's JSON error, small
/// enough that a misconfigured base URL answering with a web page costs nothing.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Everything about a request that does not change between attempts.
pub(super) struct Prepared<'f> {
    format: &'f dyn WireFormat,
    url: String,
    /// Written once; each attempt sends the same bytes (a clone is a reference count).
    body: bytes::Bytes,
    /// Headers over the format's own (Copilot's token and editor headers).
    extra: reqwest::header::HeaderMap,
    /// Whether the format's own key headers go along (not when `extra` carries the auth).
    send_key: bool,
}

impl<'f> Prepared<'f> {
    pub(super) fn new(format: &'f dyn WireFormat, config: &ProviderConfig, request: &ChatRequest) -> Self {
        let url = join_url(&config.base_url, format.path());
        // The headers were checked when the config was made (`Settings::provider_config`).
        let extra = config.extra_headers().unwrap_or_default();
        Prepared { format, url, body: format.body(config, request).into(), extra, send_key: true }
    }

    /// These headers in place of the format's key headers (the auth is among them).
    pub(super) fn with_headers(mut self, extra: reqwest::header::HeaderMap) -> Self {
        self.extra = extra;
        self.send_key = false;
        self
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
    let headers = request_headers(prepared, key, "text/event-stream")?;
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
        return Err(Failure { error: http_error(config, status, &body), retry_after, before_first_event: false });
    }

    let is_json = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        // A proxy or server that ignored `stream: true`, or reported an error with status 200.
        let body = read_body(response, idle, cancel).await?;
        let reported = serde_json::from_str::<Value>(&body).ok().and_then(|v| wire::reported_error(&v));
        let error = reported.unwrap_or_else(|| {
            DecodeError::Broken(format!("expected an event stream, got JSON: {}", truncate(body.trim(), 300)))
        });
        return Err(decode_error(config, error).into());
    }

    let mut events = Box::pin(timed_chunks(response, idle).eventsource());
    let mut decoder = prepared.format.decoder();
    let mut any_event = false;
    // The stream ended or broke with `error`: before its first event the probe may say why.
    let broke = |any_event: bool, error: ProviderError| {
        if any_event {
            Failure::from(error)
        } else {
            Failure::before_first_event(error)
        }
    };
    loop {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Aborted.into()),
            item = events.next() => item,
        };
        let event = match item {
            // The server closed the stream: `finish` says whether the reply was complete.
            None => break,
            Some(Ok(event)) => {
                any_event = true;
                event
            }
            Some(Err(EventStreamError::Transport(ChunkError::Idle))) => {
                return Err(timeout(config).into())
            }
            Some(Err(EventStreamError::Transport(ChunkError::Body(e)))) => {
                let message =
                    format!("connection closed before the reply finished ({})", error_chain(&e));
                return Err(broke(any_event, stream_error(config, message)));
            }
            Some(Err(EventStreamError::Utf8(e))) => {
                return Err(stream_error(config, format!("invalid UTF-8 in the stream: {e}")).into())
            }
            Some(Err(EventStreamError::Parser(e))) => {
                return Err(stream_error(config, format!("invalid event stream: {e}")).into())
            }
        };
        let sse = SseEvent { name: &event.event, data: &event.data };
        match decoder.on_event(sse, emit).map_err(|e| decode_error(config, e))? {
            Flow::Continue => {}
            Flow::Done => break,
        }
    }
    decoder.finish(emit).map_err(|m| broke(any_event, stream_error(config, m)))
}

/// The request once more without streaming and for the shortest reply (the format's
/// [`WireFormat::probe_body`]), through the same URL and headers: after a stream that ended
/// before its first event, whether the server refuses the request. `Ok(Some)`: its refusal, with
/// a note that the stream had broken; `Ok(None)`: it took the request (or the probe learned
/// nothing: no answer, or a body that is not JSON). `Err` only when aborted.
///
/// A probe that cannot be sent is sent once more: a stream that ended cleanly gave its
/// connection back to the pool, and llama-cpp-python's server (uvicorn) resets it, so the
/// first send may die on it; the pool then drops it and the second opens a new one.
pub(super) async fn probe(
    client: &reqwest::Client,
    config: &ProviderConfig,
    prepared: &Prepared<'_>,
    key: Option<&str>,
    cancel: &CancellationToken,
) -> Result<Option<ProviderError>, ProviderError> {
    const SENDS: u32 = 2;
    let Some(body) = prepared.format.probe_body(&prepared.body) else { return Ok(None) };
    let body = bytes::Bytes::from(body);
    let idle = config.idle_timeout;
    let headers = request_headers(prepared, key, "application/json")?;
    tracing::info!(provider = %config.name, url = %display_url(&prepared.url), model = %config.model, "the stream ended before its first event; asking once without streaming why");
    let mut sends = 0;
    let response = loop {
        sends += 1;
        let request = client.post(&prepared.url).headers(headers.clone()).body(body.clone());
        let sent = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Aborted),
            sent = tokio::time::timeout(idle, request.send()) => sent,
        };
        match sent {
            Ok(Ok(response)) => break response,
            Ok(Err(e)) if sends < SENDS => {
                tracing::debug!(provider = %config.name, error = %error_chain(&e), "the probe could not be sent; sending it again");
            }
            Ok(Err(e)) => {
                tracing::info!(provider = %config.name, error = %error_chain(&e), "the probe got no answer");
                return Ok(None);
            }
            Err(_) => {
                tracing::info!(provider = %config.name, "the probe got no answer in time");
                return Ok(None);
            }
        }
    };
    let status = response.status();
    tracing::info!(provider = %config.name, status = status.as_u16(), "the probe was answered");
    if status.is_success() {
        return Ok(None);
    }
    let body = read_body(response, idle, cancel).await?;
    let mut refusal = http_error(config, status, &body);
    if let ProviderError::Http { message, .. } = &mut refusal {
        message.push_str(" (the stream had ended before its first event; the same request without streaming got this answer)");
    }
    Ok(Some(refusal))
}

/// The format's headers for `key` (or the prepared ones that carry the auth), with `accept`
/// and a JSON body.
fn request_headers(
    prepared: &Prepared<'_>,
    key: Option<&str>,
    accept: &'static str,
) -> Result<reqwest::header::HeaderMap, ProviderError> {
    use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
    let mut headers = prepared.format.headers(key.filter(|_| prepared.send_key))?;
    headers.extend(prepared.extra.clone());
    headers.insert(ACCEPT, HeaderValue::from_static(accept));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(headers)
}

/// A whole response body through the SSE parser and `format`'s decoder, the way `attempt`
/// reads it (for the fuzz targets): every event and the end, or the protocol error `attempt`
/// would report.
pub(super) fn decode_body(
    format: &dyn WireFormat,
    chunks: Vec<bytes::Bytes>,
) -> Result<(Vec<StreamEvent>, StreamEnd), DecodeError> {
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
        Ok::<_, DecodeError>(())
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

/// A failed response's error: the provider's code and words from its body; the title of an
/// HTML page (a proxy's, or a web server's at a wrong base URL); the status's reason when the
/// body says nothing.
fn http_error(config: &ProviderConfig, status: reqwest::StatusCode, body: &str) -> ProviderError {
    let reason = || status.canonical_reason().unwrap_or("no message").to_owned();
    let (code, message) = if body.trim().is_empty() {
        (None, reason())
    } else if body.trim_start().starts_with('<') {
        (None, html_title(body).unwrap_or_else(|| format!("{} (an HTML page)", reason())))
    } else {
        error_body(body)
    };
    ProviderError::Http { provider: config.name.clone(), status: status.as_u16(), code, message }
}

/// The text of an HTML page's `<title>`, when it has one.
fn html_title(page: &str) -> Option<String> {
    let lower = page.to_ascii_lowercase();
    let start = lower.find("<title>")? + "<title>".len();
    let end = start + lower[start..].find("</title>")?;
    let title = page.get(start..end)?.trim();
    (!title.is_empty()).then(|| truncate(title, 200))
}

/// The provider's code and own words from an error body (see [`wire::reported_error`]);
/// otherwise no code and the start of the raw body.
pub(super) fn error_body(body: &str) -> (Option<String>, String) {
    let reported = serde_json::from_str::<Value>(body).ok().and_then(|v| wire::reported_error(&v));
    match reported {
        Some(DecodeError::Reported { code, message }) => (code, message),
        _ => (None, truncate(body.trim(), 300)),
    }
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

fn decode_error(config: &ProviderConfig, error: DecodeError) -> ProviderError {
    match error {
        DecodeError::Broken(message) => stream_error(config, message),
        DecodeError::Reported { code, message } => {
            ProviderError::Reported { provider: config.name.clone(), code, message }
        }
    }
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
mod tests {
    use super::*;

    #[test]
    fn error_bodies_give_the_providers_code_and_words() {
        let body = |code: Option<&str>, message: &str| (code.map(str::to_owned), message.to_owned());
        assert_eq!(error_body(r#"{"error":{"message":"bad key","type":"x"}}"#), body(Some("x"), "bad key"));
        assert_eq!(error_body(r#"{"error":"model not found"}"#), body(None, "model not found"));
        assert_eq!(error_body(r#"{"message":"nope"}"#), body(None, "nope"));
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#;
        assert_eq!(error_body(llama).0.as_deref(), Some("exceed_context_size_error"));
        let openai = r#"{"error":{"message":"m","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(error_body(openai).0.as_deref(), Some("context_length_exceeded"));
        let long = "x".repeat(1000);
        assert!(error_body(&long).1.chars().count() <= 301);
        assert_eq!(error_body("<html><body>413 Request Entity Too Large</body></html>").0, None);
    }

    use crate::failure::FailureKind;
    use crate::provider::{format_for, Api};

    /// The error a response with `status` and `body` fails with.
    fn refused(status: u16, body: &str) -> ProviderError {
        let config = ProviderConfig::new(Api::Openai, "http://127.0.0.1:9/v1", "m");
        http_error(&config, reqwest::StatusCode::from_u16(status).unwrap(), body)
    }

    /// The error a streamed `body` of `api` fails with.
    fn broken_off(api: Api, body: &str) -> ProviderError {
        let config = ProviderConfig::new(api, "http://127.0.0.1:9/v1", "m");
        let error = decode_body(format_for(api), vec![bytes::Bytes::copy_from_slice(body.as_bytes())]).unwrap_err();
        decode_error(&config, error)
    }

    /// Each provider's real answer to a request larger than the window.
    #[test]
    fn each_providers_overflow_body_is_an_overflow_and_is_not_retried() {
        let bodies = [
            ("OpenAI Chat Completions", 400, r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#),
            ("OpenAI Responses", 400, r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#),
            ("Anthropic", 400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"},"request_id":"req_011CV5Hs2"}"#),
            ("Anthropic, by size", 413, r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#),
            ("llama.cpp", 400, r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5120,"n_ctx":4096}}"#),
            ("Ollama", 400, r#"{"error":"prompt too long; exceeded max context length by 1480 tokens"}"#),
            ("Ollama, OpenAI-compatible", 400, r#"{"error":{"message":"prompt too long; exceeded max context length by 1480 tokens","type":"invalid_request_error","param":null,"code":null}}"#),
            ("vLLM", 400, r#"{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens (39000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#),
            ("vLLM, prompt only", 400, r#"{"error":{"message":"The decoder prompt (length 40000) is longer than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","param":null,"code":400}}"#),
            ("LM Studio", 400, r#"{"error":"Trying to keep the first 5190 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#),
            ("Gemini", 400, r#"{"error":{"code":400,"message":"The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).","status":"INVALID_ARGUMENT"}}"#),
            ("Gemini, OpenAI-compatible", 400, r#"[{"error":{"code":400,"message":"The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).","status":"INVALID_ARGUMENT"}}]"#),
            ("GitHub Copilot", 400, r#"{"error":{"message":"prompt token count of 140025 exceeds the limit of 128000","code":"model_max_prompt_tokens_exceeded"}}"#),
            ("OpenRouter", 400, r#"{"error":{"message":"This endpoint's maximum context length is 200000 tokens. However, you requested about 251234 tokens (251234 of text input). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.","code":400,"metadata":{"provider_name":null}}}"#),
            ("Mistral", 400, r#"{"object":"error","message":"Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_error","param":null,"code":null}"#),
            ("xAI", 400, r#"{"code":"Client specified an invalid argument","error":"This model's maximum prompt length is 131072 but the request contains 537812 tokens."}"#),
            ("a proxy's page", 413, "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"),
            ("Cerebras, no body", 413, ""),
        ];
        let page = bodies.iter().find(|(provider, ..)| *provider == "a proxy's page").unwrap().2;
        assert_eq!(refused(413, page).to_string(), "the request did not fit the model's context window: openai returned HTTP 413: 413 Request Entity Too Large");
        assert_eq!(refused(502, "<html><body>bad</body></html>").to_string(), "openai returned HTTP 502: Bad Gateway (an HTML page)");
        for (provider, status, body) in bodies {
            let error = refused(status, body);
            assert_eq!(error.kind(), FailureKind::Overflow, "{provider}: {error:?}");
            assert!(!error.is_retryable(), "{provider}");
            let text = error.to_string();
            assert!(text.starts_with("the request did not fit the model's context window: openai returned HTTP"), "{provider}: {text}");
        }
        let openai = refused(400, bodies[0].2).to_string();
        assert!(openai.ends_with("This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages."), "{openai}");
    }

    #[test]
    fn rate_limits_and_other_refusals_are_no_overflow() {
        let openai_tpm = r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per minute (TPM): Limit 30000, Used 29000, Requested 5000. Please try again in 8s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
        let groq_413 = r#"{"error":{"message":"Request too large for model `llama-3.3-70b-versatile` in organization `org_01` service tier `on_demand` on tokens per minute (TPM): Limit 12000, Requested 20000, please reduce your message size and try again.","type":"tokens","code":"rate_limit_exceeded"}}"#;
        let bedrock = r#"{"message":"ThrottlingException: Too many tokens, please wait before trying again."}"#;
        let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        for (status, body) in [(429, openai_tpm), (413, groq_413), (400, bedrock), (400, quota)] {
            let error = refused(status, body);
            assert_eq!(error.kind(), FailureKind::RateLimit, "{status} {body}");
            assert!(!error.to_string().contains("context window"), "{error}");
        }
        assert!(refused(429, openai_tpm).is_retryable());
        let unknown = r#"{"error":{"message":"Unknown parameter: 'foo'.","type":"invalid_request_error","param":"foo","code":"unknown_parameter"}}"#;
        assert_eq!(refused(400, unknown).kind(), FailureKind::Provider);
        assert_eq!(refused(400, "").kind(), FailureKind::Provider);
        assert_eq!(refused(422, r#"{"detail":[{"msg":"field required"}]}"#).kind(), FailureKind::Provider);
        // The words of an overflow on a status that is no refusal of the request's size.
        assert_eq!(refused(500, r#"{"error":"context length exceeded? internal error"}"#).kind(), FailureKind::Provider);
    }

    /// An overflow reported inside the stream, in each format's shape.
    #[test]
    fn an_overflow_reported_in_the_stream_is_an_overflow() {
        let cases = [
            (Api::Openai, "data: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"This model's maximum context length is 8192 tokens.\"},\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"error\"}]}\n\n"),
            (Api::OpenaiResponses, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\nevent: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model. Please adjust your input and try again.\"},\"incomplete_details\":null}}\n\n"),
            (Api::OpenaiResponses, "event: error\ndata: {\"type\":\"error\",\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\",\"param\":\"input\",\"sequence_number\":1}\n\n"),
            (Api::Anthropic, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 201000 tokens > 200000 maximum\"}}\n\n"),
        ];
        for (api, body) in cases {
            let error = broken_off(api, body);
            assert!(matches!(error, ProviderError::Reported { .. }), "{api:?}: {error:?}");
            assert_eq!(error.kind(), FailureKind::Overflow, "{api:?}: {error:?}");
            assert!(!error.is_retryable());
            assert!(error.to_string().starts_with("the request did not fit the model's context window: "), "{error}");
        }
        let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let error = broken_off(Api::Anthropic, overloaded);
        assert_eq!(error.kind(), FailureKind::Provider);
        assert_eq!(error.to_string(), "anthropic reported an error: overloaded_error: Overloaded");
        let limited = "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached\"}\n\n";
        assert_eq!(broken_off(Api::OpenaiResponses, limited).kind(), FailureKind::RateLimit);
        assert_eq!(broken_off(Api::Openai, "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n").kind(), FailureKind::Network);
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
