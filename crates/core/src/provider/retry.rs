//! Retries with exponential backoff. A request is retried only while nothing of its reply has
//! reached the caller: once a delta was shown, a new attempt would duplicate or contradict it.

use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use super::types::{ProviderConfig, ProviderError};

/// A failed attempt, with the server's `retry-after` hint when it gave one.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) error: ProviderError,
    pub(super) retry_after: Option<Duration>,
    /// The server answered 200 with an event stream that ended or broke before its first
    /// event: it may have refused the request without saying why (llama-cpp-python raises its
    /// overflow inside the stream), which a probe can find out.
    pub(super) before_first_event: bool,
}

impl Failure {
    /// A stream that ended or broke, with `error`, before any event arrived.
    pub(super) fn before_first_event(error: ProviderError) -> Self {
        Failure { error, retry_after: None, before_first_event: true }
    }
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Self {
        Failure { error, retry_after: None, before_first_event: false }
    }
}

/// The retry budget of one request.
pub(super) struct Retries<'a> {
    config: &'a ProviderConfig,
    used: u32,
}

impl<'a> Retries<'a> {
    pub(super) fn new(config: &'a ProviderConfig) -> Self {
        Retries { config, used: 0 }
    }

    /// Retries spent so far.
    pub(super) fn used(&self) -> u32 {
        self.used
    }

    /// After a failed attempt: how long to wait before the next one, or `None` when the
    /// failure is final (not retryable, the budget is spent, or part of the reply already
    /// reached the caller).
    pub(super) fn next_delay(&mut self, failure: &Failure, delivered: bool) -> Option<Duration> {
        if delivered || self.used >= self.config.max_retries || !failure.error.is_retryable() {
            return None;
        }
        let delay = backoff(self.config, self.used, failure.retry_after);
        self.used += 1;
        Some(delay)
    }
}

/// Delay before retry number `retries + 1`: the server's `retry-after` when given, else
/// `retry_base_delay * 2^retries`; either way never more than `max_retry_delay`, so a server
/// asking for an hour does not freeze the editor for an hour.
pub(super) fn backoff(
    config: &ProviderConfig,
    retries: u32,
    retry_after: Option<Duration>,
) -> Duration {
    let delay = retry_after.unwrap_or_else(|| {
        let factor = 1u32.checked_shl(retries).unwrap_or(u32::MAX);
        config.retry_base_delay.saturating_mul(factor)
    });
    delay.min(config.max_retry_delay)
}

/// Sleeps, or returns `Aborted` as soon as `cancel` fires.
pub(super) async fn sleep_abortable(delay: Duration, cancel: &CancellationToken) -> Result<(), ProviderError> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(ProviderError::Aborted),
        _ = tokio::time::sleep(delay) => Ok(()),
    }
}

/// The server's wait hint: `retry-after-ms` (OpenAI), else `retry-after` as seconds or an HTTP
/// date.
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    parse_retry_after(header("retry-after")?)
}

fn parse_retry_after(value: &str) -> Option<Duration> {
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let date =
        time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc2822).ok()?;
    let wait = date - time::OffsetDateTime::now_utc();
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Api;

    #[test]
    fn retry_after_accepts_seconds_and_http_dates() {
        assert_eq!(parse_retry_after("0"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"), Some(Duration::ZERO));
        let future = time::OffsetDateTime::now_utc() + time::Duration::seconds(100);
        let text = future
            .format(&time::format_description::well_known::Rfc2822)
            .unwrap()
            .replace("+0000", "GMT");
        let parsed = parse_retry_after(&text).unwrap();
        assert!(
            parsed > Duration::from_secs(95) && parsed <= Duration::from_secs(100),
            "{parsed:?}"
        );
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_retry_after("-3"), None);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let mut c = ProviderConfig::new(Api::Openai, "http://x", "m");
        c.retry_base_delay = Duration::from_millis(100);
        c.max_retry_delay = Duration::from_millis(350);
        assert_eq!(backoff(&c, 0, None), Duration::from_millis(100));
        assert_eq!(backoff(&c, 1, None), Duration::from_millis(200));
        assert_eq!(backoff(&c, 2, None), Duration::from_millis(350));
        assert_eq!(backoff(&c, 40, None), Duration::from_millis(350));
        assert_eq!(backoff(&c, 0, Some(Duration::from_secs(3600))), Duration::from_millis(350));
        assert_eq!(backoff(&c, 2, Some(Duration::ZERO)), Duration::ZERO);
    }
}
