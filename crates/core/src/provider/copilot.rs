//! GitHub Copilot (`provider = "copilot"`): the GitHub token the user already has, exchanged for
//! a short-lived Copilot token; the chat base that exchange names; the wire format and limits of
//! each model from `GET {base}/models`; the headers Copilot expects.
//!
//! Both tokens live only in this module's memory (the Copilot one cached until shortly before it
//! expires); they never reach a config struct, a session, a log line or an error message.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::http::join_url;
use super::models::{ModelInfo, Source};
use super::types::{Api, CopilotConfig, ProviderConfig, ProviderError};
use super::wire::secret_header;
use crate::message::{ContextMessage, Role};

/// Where the token is exchanged unless configured.
pub use super::types::COPILOT_TOKEN_URL as DEFAULT_TOKEN_URL;

/// The chat base when the exchange names none.
pub const DEFAULT_CHAT_BASE: &str = "https://api.githubcopilot.com";

/// pi's provider id for Copilot, recorded on messages and `model_change` entries.
pub const PROVIDER_NAME: &str = "github-copilot";

/// The environment variables a GitHub token is read from, first wins.
pub use super::types::COPILOT_TOKEN_VARS as TOKEN_VARS;

/// How long before its expiry a Copilot token is exchanged again.
const EXPIRY_MARGIN: Duration = Duration::from_secs(120);

/// What the sign-in error says.
const SIGN_IN: &str = "no GitHub token for Copilot: sign in with `:Copilot auth` (copilot.vim or copilot.lua), which writes $XDG_CONFIG_HOME/github-copilot/apps.json or hosts.json, or set $COPILOT_GITHUB_TOKEN";

/// The wire format a Copilot model most likely takes, before `/models` said: Claude speaks
/// Anthropic Messages, gpt-5 and codex models Responses, the rest Chat Completions.
pub fn guess_api(model: &str) -> Api {
    let m = model.to_ascii_lowercase();
    if m.starts_with("claude") {
        Api::Anthropic
    } else if m.starts_with("gpt-5") || m.contains("codex") {
        Api::OpenaiResponses
    } else {
        Api::Openai
    }
}

/// Where the GitHub token was found, as the health check may say it (never the value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    Env(&'static str),
    File(PathBuf),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Env(var) => write!(f, "${var}"),
            TokenSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The GitHub token and where it came from: the first of [`TOKEN_VARS`] that is set, else the
/// first `github.com` entry's `oauth_token` in copilot.lua's `hosts.json` or copilot.vim's
/// `apps.json` under `$XDG_CONFIG_HOME/github-copilot` (`~/.config` without it). `env` reads a
/// variable (the process environment in use; a map in tests).
pub fn github_token(env: &dyn Fn(&str) -> Option<String>) -> Result<(String, TokenSource), ProviderError> {
    let set = |var: &str| env(var).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    for var in TOKEN_VARS {
        if let Some(token) = set(var) {
            return Ok((token, TokenSource::Env(var)));
        }
    }
    let config_home = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(dir) = config_home.map(|d| d.join("github-copilot")) {
        for file in ["hosts.json", "apps.json"] {
            let path = dir.join(file);
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            if let Some(token) = oauth_token(&text) {
                return Ok((token, TokenSource::File(path)));
            }
        }
    }
    Err(ProviderError::MissingKey(SIGN_IN.into()))
}

/// [`github_token`] from the process environment.
pub fn github_token_from_env() -> Result<(String, TokenSource), ProviderError> {
    github_token(&|var| std::env::var(var).ok())
}

/// The `oauth_token` of the first entry whose key names github.com (`"github.com"` in
/// hosts.json, `"github.com:Iv1.b507a08c87ecfe98"` in apps.json).
fn oauth_token(text: &str) -> Option<String> {
    let hosts: serde_json::Map<String, Value> = serde_json::from_str(text).ok()?;
    hosts
        .iter()
        .filter(|(key, _)| key.contains("github.com"))
        .find_map(|(_, entry)| entry.get("oauth_token")?.as_str().filter(|t| !t.is_empty()).map(str::to_owned))
}

/// A Copilot token and the chat base it is for.
#[derive(Clone)]
pub(super) struct Token {
    pub(super) value: String,
    pub(super) base: String,
    /// When it is exchanged again (shortly before it expires).
    renew_at: Instant,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("base", &self.base).finish_non_exhaustive()
    }
}

/// One entry of Copilot's `/models`: its wire format (from `supported_endpoints`), limits
/// (`capabilities.limits`), vision support and policy.
fn model_entry(model: &Value) -> Option<ModelInfo> {
    let id = model.get("id")?.as_str()?.to_owned();
    let endpoints: Vec<&str> = model
        .get("supported_endpoints")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let api = if endpoints.contains(&"/v1/messages") {
        Api::Anthropic
    } else if endpoints.contains(&"/responses") {
        Api::OpenaiResponses
    } else {
        Api::Openai
    };
    let limits = &model["capabilities"]["limits"];
    let limit = |k: &str| limits.get(k).and_then(Value::as_u64).filter(|n| *n > 0);
    let max_output = limit("max_output_tokens");
    let context_window = limit("max_context_window_tokens")
        .or_else(|| Some(limit("max_prompt_tokens")? + max_output.unwrap_or(0)));
    let disabled = model
        .get("policy")
        .and_then(|p| p.get("state"))
        .and_then(Value::as_str)
        .filter(|s| *s != "enabled")
        .map(str::to_owned);
    let supports = &model["capabilities"]["supports"];
    Some(ModelInfo {
        id,
        api: Some(api),
        context_window,
        max_output: max_output.map(|n| n.min(u32::MAX as u64) as u32),
        images: supports.get("vision").and_then(Value::as_bool),
        reasoning: supports.get("reasoning_effort").map(|v| !v.is_null()),
        disabled,
        source: Source::Listed,
    })
}

/// `config` for the model `info` describes: its wire format, the chat base (`/v1` under it for
/// Anthropic Messages, whose path is `/messages`), and its limits as the catalogue resolves
/// them (the user's first, then this list's).
pub(super) fn apply(info: &ModelInfo, config: &mut ProviderConfig, base: &str) {
    let api = info.api.unwrap_or_else(|| guess_api(&info.id));
    config.api = api;
    config.base_url = match api {
        Api::Anthropic => join_url(base, "/v1"),
        _ => base.trim_end_matches('/').to_owned(),
    };
    let facts = config.table.facts(&config.model, Some(info));
    config.apply_limits(facts.as_ref());
}

/// The shared state of one Copilot login: the token and the model list, each fetched once.
/// Clones of a provider, and the provider of another model (`/model`), share it.
#[derive(Debug, Default)]
pub(super) struct Copilot {
    token: tokio::sync::Mutex<Option<Token>>,
    models: tokio::sync::Mutex<Option<Arc<Vec<ModelInfo>>>>,
    /// The last model list and the base it came from, for the synchronous config readers (the
    /// meter, the wall).
    known: Mutex<Option<(Arc<Vec<ModelInfo>>, String)>>,
}

impl Copilot {
    /// The cached token, or a new one from the exchange when there is none, it nears expiry, or
    /// `stale` is the token the chat endpoint just refused.
    pub(super) async fn token(
        &self,
        client: &reqwest::Client,
        config: &ProviderConfig,
        copilot: &CopilotConfig,
        stale: Option<&str>,
    ) -> Result<Token, ProviderError> {
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref() {
            let refused = stale.is_some_and(|s| s == token.value);
            if !refused && Instant::now() < token.renew_at {
                return Ok(token.clone());
            }
        }
        let (github, _) = github_token_from_env()?;
        let token = exchange(client, config, copilot, &github).await.map_err(|e| super::key::redact_error(e, Some(&github)))?;
        *cached = Some(token.clone());
        Ok(token)
    }

    /// The model list of `token`'s base, fetched once.
    pub(super) async fn models(
        &self,
        client: &reqwest::Client,
        config: &ProviderConfig,
        copilot: &CopilotConfig,
        token: &Token,
    ) -> Result<Arc<Vec<ModelInfo>>, ProviderError> {
        let mut models = self.models.lock().await;
        if let Some(list) = models.as_ref() {
            return Ok(list.clone());
        }
        let list = Arc::new(fetch_models(client, config, copilot, token).await?);
        *models = Some(list.clone());
        *super::lock(&self.known) = Some((list.clone(), token.base.clone()));
        Ok(list)
    }

    /// `model`'s entry of the list and the token to send: an error when Copilot does not offer
    /// it, or offers it only once the user enabled it.
    pub(super) async fn model(
        &self,
        client: &reqwest::Client,
        config: &ProviderConfig,
        copilot: &CopilotConfig,
        stale: Option<&str>,
    ) -> Result<(ModelInfo, Token), ProviderError> {
        let token = self.token(client, config, copilot, stale).await?;
        let list = self.models(client, config, copilot, &token).await?;
        let Some(info) = list.iter().find(|m| m.id == config.model) else {
            let ids: Vec<&str> = list.iter().map(|m| m.id.as_str()).collect();
            return Err(ProviderError::Reported {
                provider: config.name.clone(),
                code: Some("model_not_found".into()),
                message: format!("Copilot offers no model {:?} (it offers: {})", config.model, ids.join(", ")),
            });
        };
        if let Some(state) = &info.disabled {
            return Err(ProviderError::Reported {
                provider: config.name.clone(),
                code: Some(crate::failure::MODEL_NOT_ENABLED.into()),
                message: format!(
                    "the Copilot model {} is not enabled for this account (policy: {state}): accept its terms where you are offered to (that enables it), or enable it in GitHub's Copilot settings, then try again",
                    info.id
                ),
            });
        }
        Ok((info.clone(), token))
    }

    /// Enables `model` for the account (`POST {base}/models/{id}/policy {"state":"enabled"}`,
    /// what Copilot Chat does when the user accepts a model's terms), and forgets the model list
    /// so that the next request reads the new policy. Only when the user asked for it.
    pub(super) async fn enable(
        &self,
        client: &reqwest::Client,
        config: &ProviderConfig,
        copilot: &CopilotConfig,
        model: &str,
    ) -> Result<(), ProviderError> {
        let token = self.token(client, config, copilot, None).await?;
        let mut headers = base_headers(copilot, &token.value)?;
        headers.insert(reqwest::header::ACCEPT, HeaderValue::from_static("application/json"));
        let id: String = url_segment(model);
        let url = join_url(&token.base, &format!("/models/{id}/policy"));
        let request = client.post(&url).headers(headers).json(&serde_json::json!({ "state": "enabled" }));
        super::listing::json_request(request, config, &url, "enabling the Copilot model")
            .await
            .map_err(|e| super::key::redact_error(e, Some(&token.value)))?;
        tracing::info!(provider = %config.name, model, "enabled the Copilot model for this account");
        *self.models.lock().await = None;
        *super::lock(&self.known) = None;
        Ok(())
    }

    /// The last model list.
    pub(super) fn known_list(&self) -> Option<Arc<Vec<ModelInfo>>> {
        super::lock(&self.known).as_ref().map(|(list, _)| list.clone())
    }

    /// What the last model list said of `model`, and the base it is served from.
    pub(super) fn known(&self, model: &str) -> Option<(ModelInfo, String)> {
        let known = super::lock(&self.known);
        let (list, base) = known.as_ref()?;
        Some((list.iter().find(|m| m.id == model)?.clone(), base.clone()))
    }
}

/// `model` as one path segment (ids are `[a-z0-9.-]`; anything else is percent-encoded).
fn url_segment(model: &str) -> String {
    model
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// The headers every Copilot request carries: the Copilot token, the editor and plugin, the
/// integration id. `Content-Type` and `Accept` are the caller's.
fn base_headers(copilot: &CopilotConfig, token: &str) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, secret_header(format!("Bearer {token}"))?);
    let text = |v: &str| HeaderValue::from_str(v).unwrap_or_else(|_| HeaderValue::from_static("handoff-nvim"));
    headers.insert(HeaderName::from_static("editor-version"), text(&copilot.editor_version));
    headers.insert(
        HeaderName::from_static("editor-plugin-version"),
        HeaderValue::from_static(concat!("handoff.nvim/", env!("CARGO_PKG_VERSION"))),
    );
    headers.insert(HeaderName::from_static("copilot-integration-id"), HeaderValue::from_static("vscode-chat"));
    headers.insert(
        reqwest::header::USER_AGENT,
        HeaderValue::from_static(concat!("handoff.nvim/", env!("CARGO_PKG_VERSION"))),
    );
    Ok(headers)
}

/// The headers of a chat request: [`base_headers`] and `X-Initiator`, `agent` when the request
/// follows the model's own work (its last message is not the user's: a tool result, as pi
/// decides), else `user` (which Copilot counts as a premium request).
pub(super) fn chat_headers(
    copilot: &CopilotConfig,
    token: &str,
    messages: &[ContextMessage],
) -> Result<HeaderMap, ProviderError> {
    let mut headers = base_headers(copilot, token)?;
    let initiator = match messages.last().map(role_of) {
        Some(Role::User) | None => "user",
        Some(_) => "agent",
    };
    headers.insert(HeaderName::from_static("x-initiator"), HeaderValue::from_static(initiator));
    headers.insert(HeaderName::from_static("openai-intent"), HeaderValue::from_static("conversation-edits"));
    Ok(headers)
}

/// A message's role; a stored one's read from its JSON text.
fn role_of(message: &ContextMessage) -> Role {
    #[derive(serde::Deserialize)]
    struct Roled<'a> {
        #[serde(borrow)]
        role: std::borrow::Cow<'a, str>,
    }
    match message {
        ContextMessage::Made(m) => m.role.clone(),
        ContextMessage::Stored(s) => serde_json::from_str::<Roled>(s.json())
            .map(|r| Role::from_name(&r.role))
            .unwrap_or(Role::User),
    }
}

/// `GET {token_url}` with the GitHub token: `{token, expires_at, refresh_in, endpoints: {api}}`.
async fn exchange(
    client: &reqwest::Client,
    config: &ProviderConfig,
    copilot: &CopilotConfig,
    github: &str,
) -> Result<Token, ProviderError> {
    let mut headers = base_headers(copilot, "unused")?;
    headers.insert(reqwest::header::AUTHORIZATION, secret_header(format!("token {github}"))?);
    headers.insert(reqwest::header::ACCEPT, HeaderValue::from_static("application/json"));
    let body = get_json(client, config, &copilot.token_url, headers, "the Copilot token exchange").await?;
    let value = body.get("token").and_then(Value::as_str).filter(|t| !t.is_empty()).ok_or_else(|| {
        exchange_error(config, "the Copilot token exchange answered without a token")
    })?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    // Renewed at `refresh_in` (GitHub says when), else shortly before `expires_at`.
    let lifetime = match (body.get("refresh_in").and_then(Value::as_u64), body.get("expires_at").and_then(Value::as_u64)) {
        (Some(refresh), _) => Duration::from_secs(refresh),
        (None, Some(expires)) => Duration::from_secs(expires.saturating_sub(now)).saturating_sub(EXPIRY_MARGIN),
        (None, None) => Duration::from_secs(600),
    };
    let lifetime = match body.get("expires_at").and_then(Value::as_u64) {
        Some(expires) => lifetime.min(Duration::from_secs(expires.saturating_sub(now)).saturating_sub(EXPIRY_MARGIN)),
        None => lifetime,
    };
    let base = body["endpoints"]["api"].as_str().filter(|b| !b.is_empty()).unwrap_or(DEFAULT_CHAT_BASE);
    tracing::debug!(provider = %config.name, base, seconds = lifetime.as_secs(), "exchanged the GitHub token for a Copilot token");
    Ok(Token { value: value.to_owned(), base: base.trim_end_matches('/').to_owned(), renew_at: Instant::now() + lifetime })
}

/// `GET {base}/models`.
async fn fetch_models(
    client: &reqwest::Client,
    config: &ProviderConfig,
    copilot: &CopilotConfig,
    token: &Token,
) -> Result<Vec<ModelInfo>, ProviderError> {
    let mut headers = base_headers(copilot, &token.value)?;
    headers.insert(reqwest::header::ACCEPT, HeaderValue::from_static("application/json"));
    let url = join_url(&token.base, "/models");
    let body = get_json(client, config, &url, headers, "Copilot's model list").await?;
    let list = body.get("data").and_then(Value::as_array).cloned().unwrap_or_default();
    Ok(list.iter().filter_map(model_entry).collect())
}

/// A JSON `GET`; a refused GitHub token says how to sign in again.
async fn get_json(
    client: &reqwest::Client,
    config: &ProviderConfig,
    url: &str,
    headers: HeaderMap,
    what: &str,
) -> Result<Value, ProviderError> {
    let answer = super::listing::json_request(client.get(url).headers(headers), config, url, what).await;
    answer.map_err(|e| match e {
        ProviderError::Http { provider, status: status @ (401 | 403), code, message } if url.contains("copilot_internal") => {
            ProviderError::Http {
                provider,
                status,
                code,
                message: format!("{message} (the GitHub token was refused: sign in again with `:Copilot auth`, or check that this account has Copilot)"),
            }
        }
        e => e,
    })
}

fn exchange_error(config: &ProviderConfig, message: &str) -> ProviderError {
    ProviderError::Stream { provider: config.name.clone(), message: message.to_owned() }
}

/// A quota error in one sentence; any other error as it is.
pub(super) fn quota_sentence(error: ProviderError) -> ProviderError {
    let quota = |m: &str| {
        let m = m.to_ascii_lowercase();
        m.contains("quota") && (m.contains("exceed") || m.contains("reached"))
    };
    match error {
        ProviderError::Http { provider, status, code, message } if quota(&message) || code.as_deref().is_some_and(quota) => {
            ProviderError::Http {
                provider,
                status,
                code,
                message: "your Copilot quota for this model is used up: wait for it to reset, pick another model, or raise the limit in GitHub's Copilot settings".into(),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(vars: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_token_comes_from_the_environment_first_then_hosts_json_then_apps_json() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        let copilot_dir = dir.path().join("github-copilot");
        std::fs::create_dir_all(&copilot_dir).unwrap();
        let none = github_token(&env_of(&[("XDG_CONFIG_HOME", home.clone())])).unwrap_err();
        assert!(none.to_string().contains(":Copilot auth"), "{none}");

        std::fs::write(copilot_dir.join("apps.json"), r#"{"github.com:Iv1.b507a08c87ecfe98":{"user":"u","oauth_token":"gho_apps"}}"#).unwrap();
        let (token, source) = github_token(&env_of(&[("XDG_CONFIG_HOME", home.clone())])).unwrap();
        assert_eq!(token, "gho_apps");
        assert_eq!(source, TokenSource::File(copilot_dir.join("apps.json")));

        std::fs::write(copilot_dir.join("hosts.json"), r#"{"ghe.example":{"oauth_token":"other"},"github.com":{"oauth_token":"gho_hosts"}}"#).unwrap();
        assert_eq!(github_token(&env_of(&[("XDG_CONFIG_HOME", home.clone())])).unwrap().0, "gho_hosts");

        let env = env_of(&[("XDG_CONFIG_HOME", home), ("GH_TOKEN", "gho_env".into()), ("GITHUB_TOKEN", "later".into())]);
        assert_eq!(github_token(&env).unwrap(), ("gho_env".into(), TokenSource::Env("GH_TOKEN")));
        assert_eq!(TokenSource::Env("GH_TOKEN").to_string(), "$GH_TOKEN");
    }

    #[test]
    fn without_xdg_config_home_the_files_are_under_home() {
        let dir = tempfile::tempdir().unwrap();
        let copilot_dir = dir.path().join(".config/github-copilot");
        std::fs::create_dir_all(&copilot_dir).unwrap();
        std::fs::write(copilot_dir.join("hosts.json"), r#"{"github.com":{"oauth_token":"gho_home"}}"#).unwrap();
        let env = env_of(&[("HOME", dir.path().to_string_lossy().into_owned())]);
        assert_eq!(github_token(&env).unwrap().0, "gho_home");
    }

    #[test]
    fn the_wire_format_and_limits_come_from_the_model_list() {
        let model = |endpoints: Value| {
            model_entry(&serde_json::json!({ "id": "m", "supported_endpoints": endpoints,
                "capabilities": { "limits": { "max_context_window_tokens": 200000, "max_output_tokens": 16000 } } }))
            .unwrap()
        };
        assert_eq!(model(serde_json::json!(["/chat/completions", "/v1/messages"])).api, Some(Api::Anthropic));
        assert_eq!(model(serde_json::json!(["/chat/completions", "/responses"])).api, Some(Api::OpenaiResponses));
        assert_eq!(model(serde_json::json!(["/chat/completions"])).api, Some(Api::Openai));
        assert_eq!(model_entry(&serde_json::json!({ "id": "old" })).unwrap().api, Some(Api::Openai));
        let info = model(serde_json::json!([]));
        assert_eq!((info.context_window, info.max_output, info.disabled), (Some(200000), Some(16000), None));
        let off = model_entry(&serde_json::json!({ "id": "x", "policy": { "state": "unconfigured" } })).unwrap();
        assert_eq!(off.disabled.as_deref(), Some("unconfigured"));
        assert_eq!(guess_api("claude-sonnet-4.5"), Api::Anthropic);
        assert_eq!(guess_api("gpt-5-mini"), Api::OpenaiResponses);
        assert_eq!(guess_api("gpt-4.1"), Api::Openai);
    }

    #[test]
    fn a_quota_error_becomes_one_sentence() {
        let e = ProviderError::Http {
            provider: "github-copilot".into(),
            status: 402,
            code: Some("quota_exceeded".into()),
            message: "You have exceeded your premium request quota. Upgrade …".into(),
        };
        let text = quota_sentence(e).to_string();
        assert!(text.contains("your Copilot quota for this model is used up"), "{text}");
        assert!(!text.contains("Upgrade"), "{text}");
    }
}
