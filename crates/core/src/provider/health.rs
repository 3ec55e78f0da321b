//! Whether the provider answers at all: the health check behind `:checkhealth`. A `GET` of
//! `{base_url}/models` without a key, bounded by a few seconds. Any HTTP status counts as
//! reachable (a 401 still proves the server is there); only the transport can fail.

use std::fmt;
use std::time::Duration;

use super::http::{display_url, join_url};
use super::types::ProviderConfig;

/// How long the probe waits for an answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The probe's result. `url` is the probed URL as it may be shown: without credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reachability {
    pub url: String,
    pub outcome: Result<u16, Unreachable>,
}

/// Why the probe got no HTTP answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unreachable {
    /// Nothing came back within [`PROBE_TIMEOUT`].
    Timeout,
    /// The connection was refused or the host is unknown.
    Connect,
    /// The HTTP client could not be built (TLS setup).
    Client(String),
    /// Anything else the transport reported (its message, without the URL).
    Other(String),
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreachable::Timeout => write!(f, "no answer within {} s", PROBE_TIMEOUT.as_secs()),
            Unreachable::Connect => f.write_str("connection refused or host unknown"),
            Unreachable::Client(m) => write!(f, "cannot set up the HTTP client: {m}"),
            Unreachable::Other(m) => f.write_str(m),
        }
    }
}

impl Reachability {
    /// Whether the server answered (with any status).
    pub fn ok(&self) -> bool {
        self.outcome.is_ok()
    }

    /// One line for the user: `{url} answered HTTP 200`, `cannot reach {url}: …`.
    pub fn detail(&self) -> String {
        match &self.outcome {
            Ok(status) => format!("{} answered HTTP {status}", self.url),
            Err(why) => format!("cannot reach {}: {why}", self.url),
        }
    }
}

/// Probes `{base_url}/models`. Sends no key: the check must not depend on one, and a server that
/// wants one answers 401, which is reachable enough.
pub async fn probe(config: &ProviderConfig) -> Reachability {
    let url = join_url(&config.base_url, "/models");
    let shown = display_url(&url);
    let client = match super::tls::client_builder().timeout(PROBE_TIMEOUT).build() {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the HTTP client for the health check");
            return Reachability { url: shown, outcome: Err(Unreachable::Client(e.to_string())) };
        }
    };
    let outcome = match client.get(&url).send().await {
        Ok(response) => Ok(response.status().as_u16()),
        Err(e) if e.is_timeout() => Err(Unreachable::Timeout),
        Err(e) if e.is_connect() => Err(Unreachable::Connect),
        Err(e) => Err(Unreachable::Other(e.without_url().to_string())),
    };
    Reachability { url: shown, outcome }
}
