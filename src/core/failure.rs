//! What kind of failure the user is told about, beside its text: a front end branches on the
//! kind (retry once the session is open, offer `:checkhealth` for a key) and shows the text.
//! Each layer's error enum says its own kind (`ProviderError::kind`, `controller::failure_of`).

use serde::Serialize;

use crate::core::provider::ProviderError;

/// The kinds a front end can branch on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The provider refused the key (401, 403) or there is none.
    Auth,
    /// Too many requests (429).
    RateLimit,
    /// The request is larger than the model's context window.
    Overflow,
    /// The provider could not be reached, or its stream broke.
    Network,
    /// The provider sent nothing for too long.
    Timeout,
    /// Any other answer of the provider's (a 5xx, a 400 that is no overflow).
    Provider,
    /// A response or a handoff runs: the command needs the agent idle.
    Busy,
    /// No session is open yet (it is loading): try again once it is.
    NotReady,
    /// The arguments were wrong (an unknown level, a missing name, a bad type).
    Invalid,
    /// Reading or writing a session file failed.
    Io,
    /// The work was stopped on request.
    Cancelled,
}

/// A failure as a front end receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Invalid, message)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What the providers say when a request does not fit the window (OpenAI's
/// `context_length_exceeded`, Anthropic's "prompt is too long", llama.cpp's and vLLM's wording).
const OVERFLOW_WORDS: [&str; 5] =
    ["context_length_exceeded", "context length", "context window", "prompt is too long", "too many tokens"];

impl ProviderError {
    /// The kind of this failure, for a front end to branch on.
    pub fn kind(&self) -> FailureKind {
        match self {
            ProviderError::Http { status: 401 | 403, .. } | ProviderError::MissingKey(_) => FailureKind::Auth,
            ProviderError::Http { status: 429, .. } => FailureKind::RateLimit,
            ProviderError::Http { status: 400 | 413 | 422, message, .. } => {
                let message = message.to_ascii_lowercase();
                if OVERFLOW_WORDS.iter().any(|w| message.contains(w)) {
                    FailureKind::Overflow
                } else {
                    FailureKind::Provider
                }
            }
            ProviderError::Http { .. } => FailureKind::Provider,
            ProviderError::Connect { .. } | ProviderError::Stream { .. } | ProviderError::Client(_) => {
                FailureKind::Network
            }
            ProviderError::Timeout { .. } => FailureKind::Timeout,
            ProviderError::Aborted => FailureKind::Cancelled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, message: &str) -> ProviderError {
        ProviderError::Http { provider: "p".into(), status, message: message.into() }
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
        let connect = ProviderError::Connect { provider: "p".into(), url: "u".into(), message: "refused".into() };
        assert_eq!(connect.kind(), FailureKind::Network);
        assert_eq!(ProviderError::Timeout { provider: "p".into(), seconds: 5 }.kind(), FailureKind::Timeout);
        assert_eq!(ProviderError::Aborted.kind(), FailureKind::Cancelled);
    }
}
