//! The provider's own model list: `GET {base}/models` of an OpenAI-compatible server (each names
//! its limits its own way), Anthropic's `/v1/models`, and Ollama's native API (`/api/tags`,
//! `/api/show`, `/api/ps`: its OpenAI-compatible list names no window). Fetched once per provider
//! and shared by its clones; a failed fetch is tried again after a minute, not on every request.
//! Copilot's list is read with its token, in `copilot.rs`, into the same [`ModelInfo`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::models::{ModelInfo, Source};
use crate::provider::http::{display_url, error_body, error_chain, join_url};
use crate::provider::types::{Api, ProviderConfig, ProviderError};

/// How long one list request may take: it may stand before a first request.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a failed fetch is remembered before it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// How a provider lists its models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    OpenAi,
    Anthropic,
    Ollama,
}

fn kind_of(config: &ProviderConfig) -> Kind {
    let port = reqwest::Url::parse(&config.base_url).ok().and_then(|u| u.port());
    if config.name == "ollama" || port == Some(11434) {
        Kind::Ollama
    } else if config.api == Api::Anthropic {
        Kind::Anthropic
    } else {
        Kind::OpenAi
    }
}

/// Services whose list knows more of a model's limits than any table: asked before the first
/// request unless the user set the window (others only when no table knows the model).
const LISTS_LIMITS: &[&str] = &["openrouter", "ollama", "groq", "mistral"];

/// Whether the first request should wait for the list: the user set no window, and the list is
/// the better source for it (a service in [`LISTS_LIMITS`], or a model no table knows).
pub(crate) fn worth_asking(config: &ProviderConfig) -> bool {
    if config.limits.context_window.is_some() {
        return false;
    }
    kind_of(config) == Kind::Ollama
        || LISTS_LIMITS.contains(&config.name.as_str())
        || config.table.facts(&config.model, None).and_then(|i| i.context_window).is_none()
}

#[derive(Debug, Default)]
enum Fetched {
    #[default]
    NotYet,
    Got(Arc<Vec<ModelInfo>>),
    /// When, and what the error said (kept as text: a cached error is only shown).
    Failed { at: Instant, error: String },
}

/// One provider's list, fetched once. Clones of a provider share it, and so does the provider
/// of another model at the same base URL.
#[derive(Debug, Default)]
pub struct Listing {
    fetched: tokio::sync::Mutex<Fetched>,
    /// The list once fetched, for the synchronous readers (the meter, the wall).
    known: Mutex<Option<Arc<Vec<ModelInfo>>>>,
}

impl Listing {
    /// The list, fetched now unless it was (or failed less than a minute ago).
    pub(crate) async fn fetch(
        &self,
        client: &reqwest::Client,
        config: &ProviderConfig,
        key: Option<&str>,
    ) -> Result<Arc<Vec<ModelInfo>>, ProviderError> {
        let mut fetched = self.fetched.lock().await;
        match &*fetched {
            Fetched::Got(list) => return Ok(list.clone()),
            Fetched::Failed { at, error } if at.elapsed() < RETRY_AFTER => {
                return Err(ProviderError::Stream { provider: config.name.clone(), message: error.clone() })
            }
            _ => {}
        }
        let result = match kind_of(config) {
            Kind::Ollama => ollama(client, config).await,
            kind => openai_like(client, config, key, kind).await,
        };
        match result {
            Ok(list) => {
                let list = Arc::new(list);
                tracing::debug!(provider = %config.name, models = list.len(), "read the provider's model list");
                *fetched = Fetched::Got(list.clone());
                *crate::provider::lock(&self.known) = Some(list.clone());
                Ok(list)
            }
            Err(error) => {
                tracing::debug!(provider = %config.name, error = %error, "the provider's model list is not available");
                *fetched = Fetched::Failed { at: Instant::now(), error: error.to_string() };
                Err(error)
            }
        }
    }

    /// The list, once fetched.
    pub(crate) fn known(&self) -> Option<Arc<Vec<ModelInfo>>> {
        crate::provider::lock(&self.known).clone()
    }

    /// What the fetched list says of `id` (`None` before it was fetched).
    pub(crate) fn listed(&self, id: &str) -> Option<ModelInfo> {
        let known = crate::provider::lock(&self.known);
        known.as_ref()?.iter().find(|m| same_model(&m.id, id)).cloned()
    }
}

/// Whether a listed id names the model the user configured: the same, or for Ollama the same
/// with or without its `:latest` tag.
fn same_model(listed: &str, id: &str) -> bool {
    let bare = |s: &str| s.strip_suffix(":latest").unwrap_or(s).to_owned();
    listed == id || bare(listed) == bare(id)
}

/// A JSON request bounded by [`LIST_TIMEOUT`]. Errors name `what` and the status, never a header.
pub(crate) async fn json_request(
    request: reqwest::RequestBuilder,
    config: &ProviderConfig,
    url: &str,
    what: &str,
) -> Result<Value, ProviderError> {
    let timeout = LIST_TIMEOUT.min(config.idle_timeout);
    let response = match tokio::time::timeout(timeout, request.send()).await {
        Err(_) => return Err(ProviderError::Timeout { provider: config.name.clone(), seconds: timeout.as_secs() }),
        Ok(Err(e)) => {
            return Err(ProviderError::Connect {
                provider: config.name.clone(),
                url: display_url(url),
                message: error_chain(&e),
            })
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let text = tokio::time::timeout(timeout, response.text()).await.ok().and_then(Result::ok).unwrap_or_default();
    if !status.is_success() {
        let (code, said) = error_body(&text);
        return Err(ProviderError::Http {
            provider: config.name.clone(),
            status: status.as_u16(),
            code,
            message: format!("{what} failed: {said}"),
        });
    }
    serde_json::from_str(&text).map_err(|e| ProviderError::Stream {
        provider: config.name.clone(),
        message: format!("{what} answered with invalid JSON: {e}"),
    })
}

/// `GET {base}/models` with the format's own auth headers.
async fn openai_like(
    client: &reqwest::Client,
    config: &ProviderConfig,
    key: Option<&str>,
    kind: Kind,
) -> Result<Vec<ModelInfo>, ProviderError> {
    let url = join_url(&config.base_url, "/models");
    let mut headers: HeaderMap = crate::provider::format_for(config.api).headers(key)?;
    headers.extend(config.extra_headers()?);
    headers.insert(reqwest::header::ACCEPT, HeaderValue::from_static("application/json"));
    let what = if kind == Kind::Anthropic { "Anthropic's model list" } else { "the model list" };
    let body = json_request(client.get(&url).headers(headers), config, &url, what).await?;
    let data = body.get("data").or_else(|| body.get("models")).and_then(Value::as_array).cloned().unwrap_or_default();
    Ok(data.iter().filter_map(openai_entry).collect())
}

/// One entry of an OpenAI-style list, reading the fields the servers use for limits:
/// OpenRouter (`context_length`, `top_provider`, `architecture.input_modalities`,
/// `supported_parameters`), Groq (`context_window`, `max_completion_tokens`), Mistral
/// (`max_context_length`, `capabilities.vision`), vLLM (`max_model_len`), LM Studio
/// (`loaded_context_length`), Gemini (`models/` ids, `inputTokenLimit`).
pub(crate) fn openai_entry(model: &Value) -> Option<ModelInfo> {
    let id = model.get("id").or_else(|| model.get("name")).and_then(Value::as_str)?;
    let id = id.strip_prefix("models/").unwrap_or(id).to_owned();
    let count = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).filter(|n| *n > 0);
    let top = model.get("top_provider").unwrap_or(&Value::Null);
    let window = ["loaded_context_length", "context_length", "context_window", "max_context_length", "max_model_len", "inputTokenLimit"]
        .iter()
        .find_map(|k| count(model, k))
        .or_else(|| count(top, "context_length"));
    let output = count(top, "max_completion_tokens")
        .or_else(|| ["max_completion_tokens", "max_output_tokens", "outputTokenLimit"].iter().find_map(|k| count(model, k)));
    let strings = |v: Option<&Value>| -> Option<Vec<String>> {
        Some(v?.as_array()?.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
    };
    let images = strings(model.pointer("/architecture/input_modalities"))
        .map(|m| m.iter().any(|k| k == "image"))
        .or_else(|| model.pointer("/capabilities/vision").and_then(Value::as_bool));
    let reasoning = strings(model.get("supported_parameters")).map(|p| p.iter().any(|k| k == "reasoning"));
    Some(ModelInfo {
        id,
        context_window: window,
        max_output: output.map(|n| n.min(u32::MAX as u64) as u32),
        reasoning,
        images,
        source: Source::Listed,
        ..ModelInfo::default()
    })
}

/// Ollama's root: the base URL without its OpenAI-compatible `/v1`.
fn ollama_root(base: &str) -> String {
    let base = base.trim_end_matches('/');
    base.strip_suffix("/v1").unwrap_or(base).to_owned()
}

/// Ollama's models (`/api/tags`), each with its window: the one it is loaded with (`/api/ps`,
/// what it really serves), else the model's own (`/api/show`'s `<arch>.context_length`, which
/// Ollama serves only when its `OLLAMA_CONTEXT_LENGTH` allows as much).
async fn ollama(client: &reqwest::Client, config: &ProviderConfig) -> Result<Vec<ModelInfo>, ProviderError> {
    let root = ollama_root(&config.base_url);
    let tags_url = format!("{root}/api/tags");
    let tags = json_request(client.get(&tags_url), config, &tags_url, "Ollama's model list").await?;
    let ps_url = format!("{root}/api/ps");
    let loaded = json_request(client.get(&ps_url), config, &ps_url, "Ollama's running models").await.unwrap_or(Value::Null);
    let names: Vec<String> = tags["models"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m.get("name").or_else(|| m.get("model"))?.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let show_url = format!("{root}/api/show");
    let shows = names.iter().map(|name| {
        let request = client.post(&show_url).json(&json!({ "model": name }));
        json_request(request, config, &show_url, "Ollama's model details")
    });
    let shows = futures::future::join_all(shows).await;
    let mut out = Vec::with_capacity(names.len());
    for (name, show) in names.into_iter().zip(shows) {
        let show = show.unwrap_or(Value::Null);
        let own = show["model_info"]
            .as_object()
            .and_then(|info| info.iter().find(|(k, _)| k.ends_with(".context_length")).and_then(|(_, v)| v.as_u64()));
        let serving = loaded["models"].as_array().and_then(|a| {
            a.iter()
                .find(|m| m.get("name").and_then(Value::as_str).is_some_and(|n| same_model(n, &name)))
                .and_then(|m| m.get("context_length").and_then(Value::as_u64))
        });
        let capabilities: Option<Vec<&str>> = show["capabilities"].as_array().map(|c| c.iter().filter_map(Value::as_str).collect());
        out.push(ModelInfo {
            id: name,
            context_window: serving.or(own).filter(|n| *n > 0),
            reasoning: capabilities.as_ref().map(|c| c.contains(&"thinking")),
            images: capabilities.as_ref().map(|c| c.contains(&"vision")),
            source: Source::Listed,
            ..ModelInfo::default()
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_way_of_naming_limits_is_read() {
        let openrouter = json!({ "id": "anthropic/claude-sonnet-4.5", "context_length": 1000000,
            "architecture": { "input_modalities": ["text", "image"] },
            "top_provider": { "context_length": 1000000, "max_completion_tokens": 64000 },
            "supported_parameters": ["tools", "reasoning"] });
        let m = openai_entry(&openrouter).unwrap();
        assert_eq!((m.context_window, m.max_output, m.images, m.reasoning), (Some(1_000_000), Some(64_000), Some(true), Some(true)));
        let groq = openai_entry(&json!({ "id": "llama-3.3-70b-versatile", "context_window": 131072, "max_completion_tokens": 32768 })).unwrap();
        assert_eq!((groq.context_window, groq.max_output), (Some(131_072), Some(32_768)));
        let mistral = openai_entry(&json!({ "id": "mistral-large-latest", "max_context_length": 131072, "capabilities": { "vision": true } })).unwrap();
        assert_eq!((mistral.context_window, mistral.images), (Some(131_072), Some(true)));
        assert_eq!(openai_entry(&json!({ "id": "qwen", "max_model_len": 32768 })).unwrap().context_window, Some(32_768));
        let gemini = openai_entry(&json!({ "id": "models/gemini-2.5-flash", "object": "model" })).unwrap();
        assert_eq!((gemini.id.as_str(), gemini.context_window), ("gemini-2.5-flash", None));
        assert!(openai_entry(&json!({ "object": "model" })).is_none());
    }

    #[test]
    fn ollamas_tags_match_with_or_without_latest() {
        assert!(same_model("llama3.2:latest", "llama3.2"));
        assert!(same_model("llama3.2", "llama3.2:latest"));
        assert!(!same_model("llama3.2:1b", "llama3.2"));
        assert_eq!(ollama_root("http://127.0.0.1:11434/v1/"), "http://127.0.0.1:11434");
    }
}
