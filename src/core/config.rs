//! Settings every front end fills in its own way (the CLI from flags and `HANDOFF_*` variables,
//! the editor host from its setup table): which provider, model and key, and where sessions live.
//! [`schema`] describes every setting once (names, types, defaults, docs); the front ends derive
//! their flags, defaults and validation from it.

pub mod schema;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::agent::{AgentConfig, Threshold, WallSettings, DEFAULT_MAX_TODO_REMINDERS, DEFAULT_MAX_TURNS};
use crate::core::handoff::AutoHandoff;
use crate::core::tools::consent::{self, Policy};
use crate::core::tools::{ToolName, ToolRegistry};
use crate::core::provider::{Api, ProviderConfig, ThinkingLevel};

/// Provider and storage settings. Every field is optional: defaults come from the provider, and
/// the session folder's default from the front end, which knows its folder layout. What each
/// one means, takes and defaults to is said once, in [`schema::SETTINGS`] (under the field's
/// name as its `host`); a test there checks that the two list the same fields.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    #[serde(alias = "provider")]
    pub api: Option<Api>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key_cmd: Option<String>,
    pub context_window: Option<u64>,
    pub max_tokens: Option<u32>,
    #[serde(alias = "provider_name")]
    pub name: Option<String>,
    pub session_dir: Option<PathBuf>,
    pub templates_dir: Option<PathBuf>,
    pub max_retries: Option<u32>,
    pub timeout: Option<u64>,
    pub system_prompt: Option<String>,
    pub append_system_prompt: Option<String>,
    pub tools: Option<ToolSettings>,
    pub max_turns: Option<u32>,
    pub thinking: Option<ThinkingLevel>,
    pub reasoning_effort: Option<bool>,
    pub handoff: Option<HandoffSettings>,
}

/// The automatic handoff's settings (`setup{ handoff = … }`, `--auto-handoff`): the host's part
/// of `handoff.*` in the schema (`review` and `suggest_at` are the plugin's).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffSettings {
    pub auto: Option<AutoHandoff>,
    /// A share of the window (0 < x ≤ 1) or a count of tokens.
    pub threshold: Option<f64>,
    pub room: Option<u64>,
}

impl HandoffSettings {
    pub fn wall(&self) -> WallSettings {
        let default = WallSettings::default();
        WallSettings {
            threshold: self.threshold.map_or(Threshold::Auto, Threshold::Set),
            room: self.room.unwrap_or(default.room),
        }
    }
}

/// The tools' settings (`setup{ tools = … }`, `--tools`, `--yes`): `tools.*` in the schema.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSettings {
    pub enabled: Option<Vec<String>>,
    pub policy: Option<consent::Level>,
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

/// Settings that cannot be combined (a value that is not text, such as a non-UTF-8 path).
#[derive(Debug, thiserror::Error)]
#[error("cannot combine the settings: {0}")]
pub struct MergeError(#[from] serde_json::Error);

impl Settings {
    /// These settings with every one `over` sets replacing this one's (a table such as `tools`
    /// as a whole). Field by field through serde, so a new setting needs no line here.
    pub fn overridden_by(&self, over: &Settings) -> Result<Settings, MergeError> {
        let mut merged = serde_json::to_value(self)?;
        if let (Some(base), serde_json::Value::Object(over)) = (merged.as_object_mut(), serde_json::to_value(over)?) {
            base.extend(over.into_iter().filter(|(_, v)| !v.is_null()));
        }
        Ok(serde_json::from_value(merged)?)
    }

    pub fn api(&self) -> Api {
        self.api.unwrap_or(Api::Openai)
    }

    pub fn provider_config(&self) -> ProviderConfig {
        let api = self.api();
        let model = self.model.clone().unwrap_or_else(|| {
            match api {
                Api::Openai => "gpt-4.1-mini",
                Api::OpenaiResponses => "gpt-5-mini",
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
            // The front end's folder: it knows where its configuration lives.
            instructions_dir: None,
            home: std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
            templates_dir: self.templates_dir.clone(),
            tools: tools.registry()?,
            policy: tools.policy(),
            max_turns: self.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
            max_todo_reminders: DEFAULT_MAX_TODO_REMINDERS,
            thinking: self.thinking.unwrap_or_default(),
            wall: self.handoff.clone().unwrap_or_default().wall(),
        })
    }

    /// What happens at the wall (`handoff.auto`; default: hand off and continue).
    pub fn auto_handoff(&self) -> AutoHandoff {
        self.handoff.as_ref().and_then(|h| h.auto).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn overriding_keeps_what_over_leaves_unset_and_replaces_the_rest() {
        let base = Settings {
            model: Some("from-cli".into()),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            session_dir: Some("/cli/sessions".into()),
            tools: Some(ToolSettings { enabled: Some(vec!["read".into()]), ..ToolSettings::default() }),
            thinking: Some(ThinkingLevel::Low),
            ..Settings::default()
        };
        let over = Settings {
            model: Some("from-setup".into()),
            tools: Some(ToolSettings { policy: Some(consent::Level::AllowAll), ..ToolSettings::default() }),
            max_turns: Some(3),
            ..Settings::default()
        };
        let merged = base.overridden_by(&over).unwrap();
        assert_eq!(merged.model.as_deref(), Some("from-setup"));
        assert_eq!(merged.base_url.as_deref(), Some("http://127.0.0.1:1/v1"));
        assert_eq!(merged.session_dir, Some(PathBuf::from("/cli/sessions")));
        assert_eq!(merged.thinking, Some(ThinkingLevel::Low));
        assert_eq!(merged.max_turns, Some(3));
        // A table is replaced as a whole, as setup() gives it.
        assert_eq!(merged.tools, over.tools);
    }
}
