//! What kind of failure the user is told about, beside its text: a front end branches on the
//! kind (retry once the session is open, offer `:checkhealth` for a key) and shows the text.
//! Each layer's error enum says its own kind (`ProviderError::kind` in `provider::types`, `controller::failure_of`);
//! this module knows no layer above `message`.

use serde::Serialize;


/// The kinds a front end can branch on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The provider refused the key (401, 403) or there is none.
    Auth,
    /// Too many requests (429), or a rate limit the provider names on another status or in
    /// the stream.
    RateLimit,
    /// The request is larger than the model's context window.
    Overflow,
    /// The provider could not be reached, or its stream broke.
    Network,
    /// The provider sent nothing for too long.
    Timeout,
    /// Any other answer of the provider's (a 5xx, a 400 that is no overflow, an error it
    /// reported in the stream).
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
    /// The model must be enabled for the account first (a Copilot model whose policy is not
    /// `enabled`): a front end offers to enable it.
    ModelNotEnabled,
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

/// Error codes (`error.code`, else `error.type`) that mean the request does not fit the
/// window: OpenAI's, llama.cpp's, GitHub Copilot's, Anthropic's request-size type, z.ai's.
const OVERFLOW_CODES: [&str; 5] = [
    "context_length_exceeded",
    "exceed_context_size_error",
    "model_max_prompt_tokens_exceeded",
    "request_too_large",
    "model_context_window_exceeded",
];

/// What providers write when a request does not fit the window, lowercase: each entry's
/// phrases must all occur (the second is often empty). pi's list (`pi-ai`'s
/// `utils/overflow.js`) and the local servers' wording.
const OVERFLOW_WORDS: [(&str, &str); 22] = [
    ("prompt is too long", ""),                     // Anthropic: "prompt is too long: 213462 tokens > 200000 maximum"
    ("request_too_large", ""),                      // Anthropic's request-size error
    ("input is too long for requested model", ""),  // Amazon Bedrock
    ("exceeds the context window", ""),             // OpenAI: "Your input exceeds the context window of this model"
    ("maximum context length", ""),                 // OpenAI, OpenRouter, vLLM, Mistral: "This model's maximum context length is N tokens"
    ("longer than the maximum model length", ""),   // vLLM: "The decoder prompt (length M) is longer than the maximum model length of N"
    ("input token count", "exceeds the maximum"),   // Gemini: "The input token count (M) exceeds the maximum number of tokens allowed (N)"
    ("maximum prompt length is", ""),               // xAI: "This model's maximum prompt length is N but the request contains M tokens"
    ("reduce the length of the messages", ""),      // Groq, OpenAI
    ("prompt token count of", "exceeds the limit"), // GitHub Copilot: "prompt token count of M exceeds the limit of N"
    ("exceeds the available context size", ""),     // llama.cpp: "the request exceeds the available context size, try increasing it"
    ("greater than the context length", ""),        // LM Studio: "tokens to keep from the initial prompt is greater than the context length"
    ("loaded with context length of only", ""),     // LM Studio: "the model is loaded with context length of only N tokens, which is not enough"
    ("context window exceeds limit", ""),           // MiniMax
    ("exceeded model token limit", ""),             // Kimi For Coding
    ("prompt too long; exceeded", "context length"), // Ollama: "prompt too long; exceeded max context length by M tokens"
    ("exceeds the context length", ""),             // Ollama: "the input length exceeds the context length"
    ("context_length_exceeded", ""),                // any code quoted in a message
    ("context length exceeded", ""),
    ("model_max_prompt_tokens_exceeded", ""),
    ("too many tokens", ""),
    ("token limit exceeded", ""),
];

/// What rate limits say, lowercase: never an overflow, even on a 400 or 413 (Groq answers a
/// request larger than its tokens-per-minute limit with 413; Bedrock throttles with "Too many
/// tokens").
const RATE_LIMIT_WORDS: [&str; 8] =
    ["rate limit", "rate_limit", "too many requests", "tokens per minute", "requests per minute", "quota", "throttl", "please wait"];

/// Whether the provider's `code` or `message` names a rate limit.
fn is_rate_limit(code: Option<&str>, message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    let code = code.map(str::to_ascii_lowercase).unwrap_or_default();
    RATE_LIMIT_WORDS.iter().any(|w| lower.contains(w) || code.contains(w))
        || ["TPM", "RPM"].iter().any(|w| has_word(message, w))
}

/// Whether the provider's `code` or `message` says the request does not fit the window.
fn is_overflow(code: Option<&str>, message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    code.is_some_and(|c| OVERFLOW_CODES.iter().any(|o| c.eq_ignore_ascii_case(o)))
        || OVERFLOW_WORDS.iter().any(|(a, b)| lower.contains(a) && lower.contains(b))
}

/// Whether `word` occurs in `text` with no letter or digit on either side.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// The kind of a refusal the provider explained (an HTTP error body, or an error it reported
/// in place of the reply): rate limits first, since their wording can look like an overflow's.
pub(crate) fn refusal_kind(code: Option<&str>, message: &str, otherwise: FailureKind) -> FailureKind {
    if is_rate_limit(code, message) {
        FailureKind::RateLimit
    } else if is_overflow(code, message) {
        FailureKind::Overflow
    } else {
        otherwise
    }
}

/// The model's window as an overflow error names it ("maximum context length is 8192
/// tokens", "prompt is too long: 210000 tokens > 200000 maximum", "exceeds the limit of
/// 128000", llama.cpp's context size…): what the provider itself says of the model, which no
/// table knows better. `None` when the message names none.
pub fn window_named(message: &str) -> Option<u64> {
    let m = message.to_ascii_lowercase();
    let number_after = |phrase: &str| -> Option<u64> {
        m.match_indices(phrase).find_map(|(at, _)| {
            let rest = m[at + phrase.len()..].trim_start_matches([' ', '(', ':']);
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == ',').filter(|c| *c != ',').collect();
            digits.parse().ok().filter(|n| *n > 0)
        })
    };
    let number_before = |phrase: &str| -> Option<u64> {
        let head = m[..m.find(phrase)?].trim_end();
        let digits: String = head.chars().rev().take_while(|c| c.is_ascii_digit()).collect();
        digits.chars().rev().collect::<String>().parse().ok().filter(|n| *n > 0)
    };
    const AFTER: &[&str] = &[
        "maximum context length is",
        "context window of",
        "context size",
        "maximum number of tokens allowed",
        "exceeds the limit of",
        "context length of",
    ];
    AFTER
        .iter()
        .find_map(|p| number_after(p))
        .or_else(|| number_before(" maximum context length"))
        .or_else(|| number_before(" maximum"))
}

/// The code of a model the account has not enabled (`provider::copilot`).
pub const MODEL_NOT_ENABLED: &str = "model_not_enabled";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overflow_error_says_the_window_in_each_providers_words() {
        let said = [
            ("This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", 128_000),
            ("prompt is too long: 210000 tokens > 200000 maximum", 200_000),
            ("the request exceeds the available context size, try increasing it (context size 8192 tokens)", 8_192),
            ("Requested tokens (9000) exceed context window of 8192", 8_192),
            ("The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 1_048_576),
            ("prompt token count of 140000 exceeds the limit of 128000", 128_000),
            ("Prompt contains 40000 tokens, too large for model with 32768 maximum context length", 32_768),
        ];
        for (message, window) in said {
            assert_eq!(window_named(message), Some(window), "{message}");
        }
        assert_eq!(window_named("Your input exceeds the context window of this model."), None);
        assert_eq!(window_named("rate limit reached"), None);
    }

    #[test]
    fn rate_limit_abbreviations_count_as_words_only() {
        assert!(is_rate_limit(None, "Limit 6000 (TPM)"));
        assert!(is_rate_limit(None, "RPM: 3"));
        assert!(!is_rate_limit(None, "SIGTPMX"));
        assert!(!is_rate_limit(None, "the maximum context length is 8192 tokens"));
    }
}
