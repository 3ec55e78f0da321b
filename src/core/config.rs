//! Settings shared by the CLI (flags and `HANDOFF_*` variables) and the Neovim host (the
//! `provider` table of `setup()`): which provider, model and key, and where sessions live.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::core::agent::AgentConfig;
use crate::core::provider::{Api, ProviderConfig};
use crate::core::session::paths;

/// Provider and storage settings. Every field is optional: defaults come from the provider.
#[derive(clap::Args, Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Wire protocol: openai (any Chat Completions server) or anthropic.
    #[arg(long = "provider", env = "HANDOFF_PROVIDER", value_enum, global = true)]
    #[serde(alias = "provider")]
    pub api: Option<Api>,
    /// Base URL of the API, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, env = "HANDOFF_BASE_URL", global = true)]
    pub base_url: Option<String>,
    #[arg(long, env = "HANDOFF_MODEL", global = true)]
    pub model: Option<String>,
    /// Environment variable that holds the API key.
    #[arg(long, global = true)]
    pub api_key_env: Option<String>,
    /// Shell command that prints the API key.
    #[arg(long, global = true)]
    pub api_key_cmd: Option<String>,
    /// The model's context window in tokens (the handoff request is fitted to it).
    #[arg(long, env = "HANDOFF_CONTEXT_WINDOW", global = true)]
    pub context_window: Option<u64>,
    /// Upper bound of reply tokens.
    #[arg(long, global = true)]
    pub max_tokens: Option<u32>,
    /// Provider name recorded in sessions (pi's provider id).
    #[arg(long = "provider-name", global = true)]
    #[serde(alias = "provider_name")]
    pub name: Option<String>,
    /// Folder of session files (pi's layout: one sub-folder per working directory).
    #[arg(long, env = "HANDOFF_SESSION_DIR", global = true)]
    pub session_dir: Option<PathBuf>,
    /// Folder of prompt templates (`name.md`, used as `/name args`).
    #[arg(long, env = "HANDOFF_TEMPLATES_DIR", global = true)]
    pub templates_dir: Option<PathBuf>,
    /// Retries on 429/5xx/connection errors.
    #[arg(long, global = true)]
    pub max_retries: Option<u32>,
    /// Seconds without data before a request is given up.
    #[arg(long, global = true)]
    pub timeout: Option<u64>,
    #[arg(long, global = true)]
    pub system_prompt: Option<String>,
}

impl Settings {
    pub fn api(&self) -> Api {
        self.api.unwrap_or(Api::Openai)
    }

    pub fn provider_config(&self) -> ProviderConfig {
        let api = self.api();
        let model = self.model.clone().unwrap_or_else(|| {
            match api {
                Api::Openai => "gpt-4.1-mini",
                Api::Anthropic => "claude-sonnet-4-5",
            }
            .to_string()
        });
        let base_url = self.base_url.clone().unwrap_or_else(|| api.default_base_url().to_string());
        let mut config = ProviderConfig::new(api, base_url.trim_end_matches('/'), model);
        if let Some(name) = &self.name {
            config.name = name.clone();
        }
        // An explicit variable is required; the provider's usual one is used when it is set.
        config.api_key_env = self.api_key_env.clone().or_else(|| {
            let default = api.default_key_env();
            std::env::var_os(default).filter(|v| !v.is_empty()).map(|_| default.to_string())
        });
        config.api_key_cmd = self.api_key_cmd.clone();
        if let Some(w) = self.context_window {
            config.context_window = w;
        }
        if let Some(t) = self.max_tokens {
            config.max_tokens = t;
        }
        if let Some(r) = self.max_retries {
            config.max_retries = r;
        }
        if let Some(t) = self.timeout {
            config.idle_timeout = Duration::from_secs(t.max(1));
        }
        config
    }

    /// What an `AgentSession` is built from.
    pub fn agent_config(&self) -> AgentConfig {
        AgentConfig {
            provider: self.provider_config(),
            system_prompt: self.system_prompt.clone(),
            templates_dir: self.templates_dir.clone(),
        }
    }

    pub fn session_dir(&self) -> PathBuf {
        self.session_dir.clone().unwrap_or_else(paths::default_session_dir)
    }
}
