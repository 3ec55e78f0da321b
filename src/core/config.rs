//! Settings every front end fills in its own way (the CLI from flags and `HANDOFF_*` variables,
//! the editor host from its setup table): which provider, model and key, and where sessions live.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::core::agent::{AgentConfig, DEFAULT_MAX_TODO_REMINDERS, DEFAULT_MAX_TURNS};
use crate::core::tools::consent::{self, Policy};
use crate::core::tools::{ToolName, ToolRegistry};
use crate::core::provider::{Api, ProviderConfig, ThinkingLevel};

/// Provider and storage settings. Every field is optional: defaults come from the provider, and
/// the session folder's default from the front end, which knows its folder layout.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Wire protocol: openai (any Chat Completions server) or anthropic.
    #[serde(alias = "provider")]
    pub api: Option<Api>,
    /// Base URL of the API, e.g. http://127.0.0.1:8080/v1.
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// Environment variable that holds the API key.
    pub api_key_env: Option<String>,
    /// Shell command that prints the API key.
    pub api_key_cmd: Option<String>,
    /// The model's context window in tokens (the handoff request is fitted to it).
    pub context_window: Option<u64>,
    /// Upper bound of reply tokens.
    pub max_tokens: Option<u32>,
    /// Provider name recorded in sessions (pi's provider id).
    #[serde(alias = "provider_name")]
    pub name: Option<String>,
    /// Folder of session files (pi's layout: one sub-folder per working directory).
    pub session_dir: Option<PathBuf>,
    /// Folder of prompt templates (`name.md`, used as `/name args`).
    pub templates_dir: Option<PathBuf>,
    /// Retries on 429/5xx/connection errors.
    pub max_retries: Option<u32>,
    /// Seconds without data before a request is given up.
    pub timeout: Option<u64>,
    /// Replaces our words in the system prompt (instruction files, skills, the date and the
    /// working directory still follow).
    pub system_prompt: Option<String>,
    /// Added after the system prompt's words.
    pub append_system_prompt: Option<String>,
    /// The front end's user-level folder (`stdpath("config")/handoff`): its `AGENTS.md` (else
    /// `CLAUDE.md`) comes first in the system prompt. Filled in by the front end.
    pub config_dir: Option<PathBuf>,
    /// Which tools the model may call, and which run without asking.
    pub tools: Option<ToolSettings>,
    /// Turns of one prompt at most (each round of tool calls is a turn).
    pub max_turns: Option<u32>,
    /// The thinking level of new sessions (off, minimal, low, medium, high); a resumed session
    /// keeps the one it recorded.
    pub thinking: Option<ThinkingLevel>,
    /// Whether the model takes `reasoning_effort` (OpenAI-compatible servers); default: on for
    /// OpenAI's reasoning models, off elsewhere.
    pub reasoning_effort: Option<bool>,
}

/// The tools' settings (`setup{ tools = … }`, `--tools`, `--yes`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSettings {
    /// The tools on (pi's names); default read, bash, edit, write, todo_write.
    pub enabled: Option<Vec<String>>,
    /// `ask` (the default: edits and commands ask), `allow_edits` or `allow_all`.
    pub policy: Option<consent::Level>,
    /// Per tool: `allow`, `ask` or `deny`, over the policy.
    pub rules: std::collections::HashMap<String, consent::Rule>,
}

impl ToolSettings {
    /// The registry of the enabled tools; an unknown name is an error that lists the known ones.
    pub fn registry(&self) -> Result<ToolRegistry, String> {
        let Some(names) = &self.enabled else { return Ok(ToolRegistry::default()) };
        let mut tools = Vec::new();
        for name in names {
            tools.push(name.parse::<ToolName>().map_err(|_| {
                let known: Vec<&str> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
                format!("unknown tool {name:?} (known: {})", known.join(", "))
            })?);
        }
        Ok(ToolRegistry::new(tools))
    }

    pub fn policy(&self) -> Policy {
        Policy { level: self.policy.unwrap_or_default(), tools: self.rules.clone() }
    }
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
        config.reasoning_effort = self.reasoning_effort;
        config
    }

    /// What an `AgentSession` is built from; fails on an unknown tool name.
    pub fn agent_config(&self) -> Result<AgentConfig, String> {
        let tools = self.tools.clone().unwrap_or_default();
        Ok(AgentConfig {
            provider: self.provider_config(),
            system_prompt: self.system_prompt.clone(),
            append_system_prompt: self.append_system_prompt.clone(),
            instructions_dir: self.config_dir.clone(),
            home: std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
            templates_dir: self.templates_dir.clone(),
            tools: tools.registry()?,
            policy: tools.policy(),
            max_turns: self.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
            max_todo_reminders: DEFAULT_MAX_TODO_REMINDERS,
            thinking: self.thinking.unwrap_or_default(),
        })
    }
}
