//! What one model or server of the Chat Completions family takes: the reply limit's field, the
//! reasoning effort's value, whether the prompt cache key goes along. Kept apart from the body
//! writer so that a new server's quirk is one function here.

use super::super::types::ThinkingLevel;


/// The `reasoning_effort` of a level: its name, but `minimal` (gpt-5's) is `low` for the
/// o-series, which refuse it.
pub(in crate::provider) fn reasoning_effort(model: &str, level: ThinkingLevel) -> &'static str {
    let m = model.to_ascii_lowercase();
    let o_series = m.starts_with('o') && m.as_bytes().get(1).is_some_and(u8::is_ascii_digit);
    if level == ThinkingLevel::Minimal && o_series {
        return ThinkingLevel::Low.as_str();
    }
    level.as_str()
}

/// OpenAI's own API (and Azure's) takes the reply limit as `max_completion_tokens`: it deprecated
/// `max_tokens`, and its reasoning models (o-series, gpt-5) refuse it. The local servers that
/// speak the protocol (llama.cpp, Ollama, vLLM, LM Studio) know `max_tokens`.
pub(super) fn max_tokens_field(base_url: &str) -> &'static str {
    match host(base_url).as_deref() {
        Some(h) if h == "api.openai.com" || h.ends_with(".openai.azure.com") => "max_completion_tokens",
        _ => "max_tokens",
    }
}

fn host(base_url: &str) -> Option<String> {
    reqwest::Url::parse(base_url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase))
}

/// OpenAI's own API, the one server pi sends `prompt_cache_key` to.
pub(super) fn is_openai(base_url: &str) -> bool {
    host(base_url).as_deref() == Some("api.openai.com")
}

