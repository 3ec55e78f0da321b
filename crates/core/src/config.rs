//! Settings every front end fills in its own way (the CLI from flags and `HANDOFF_*` variables,
//! the editor host from its setup table): which provider, model and key, and where sessions live.
//! [`schema`] describes every setting once (names, types, defaults, docs); the front ends derive
//! their flags, defaults and validation from it.

pub mod schema;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::agent::{AgentConfig, Threshold, WallSettings, DEFAULT_MAX_TODO_REMINDERS, DEFAULT_MAX_TURNS};
use crate::handoff::AutoHandoff;
use crate::tools::consent::{self, Policy};
use crate::tools::{ToolName, ToolRegistry};
use crate::provider::{copilot, Api, CopilotConfig, ModelFacts, ModelTable, PiModels, PiProvider, ProviderConfig};
use crate::provider::{names_a_variable, Secret, SetLimits, ThinkingLevel};
use crate::sandbox::{SandboxMode, SandboxSettings};

/// Provider and storage settings. Every field is optional: defaults come from the provider, and
/// the session folder's default from the front end, which knows its folder layout. What each
/// one means, takes and defaults to is said once, in [`schema::SETTINGS`] (under the field's
/// name as its `host`); a test there checks that the two list the same fields.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    #[serde(alias = "provider")]
    pub api: Option<ProviderKind>,
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
    pub copilot_token_url: Option<String>,
    /// What is known of models, by id, over the provider's list and the tables.
    pub model_info: Option<BTreeMap<String, ModelFacts>>,
    /// A provider of pi's `models.json`, by name.
    pub pi_provider: Option<String>,
    /// `Editor-Version` as Copilot hears it: the editor's own (`Neovim/0.11.2`), which the
    /// plugin sends beside its settings; not a setting.
    #[serde(skip)]
    pub editor_version: Option<String>,
    pub handoff: Option<HandoffSettings>,
    pub mcp: Option<crate::mcp::McpSettings>,
    pub sandbox: Option<SandboxMode>,
    pub network: Option<bool>,
    /// External agents (Agent Client Protocol), by name: `--agent NAME`, `:HandoffAgent NAME`.
    pub agents: Option<BTreeMap<String, ExternalAgent>>,
}

/// One external agent of `agents`: the command that starts it (speaking ACP on its stdio) and
/// the variables it gets beside the host's environment.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ExternalAgent {
    pub command: Vec<String>,
    /// An empty Lua table arrives as an empty list (msgpack, `vim.json.encode`).
    #[serde(deserialize_with = "map_or_empty_list")]
    pub env: BTreeMap<String, String>,
}

/// A map, or the empty list an empty Lua table becomes.
fn map_or_empty_list<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum MapOrList {
        Map(BTreeMap<String, String>),
        List(Vec<serde::de::IgnoredAny>),
    }
    match MapOrList::deserialize(deserializer)? {
        MapOrList::Map(map) => Ok(map),
        MapOrList::List(list) if list.is_empty() => Ok(BTreeMap::new()),
        MapOrList::List(_) => Err(serde::de::Error::custom("env must be a table of NAME = value, not a list")),
    }
}

pub use crate::provider::{Preset, ProviderKind};

/// The automatic handoff's settings (`setup{ handoff = … }`, `--auto-handoff`): the host's part
/// of `handoff.*` in the schema (`review` and `suggest_at` are the plugin's).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffSettings {
    pub auto: Option<AutoHandoff>,
    /// A share of the window (0 < x ≤ 1) or a count of tokens.
    pub threshold: Option<f64>,
    pub room: Option<u64>,
    /// Draft the document before the wall (`None`: the provider's default).
    pub prepare: Option<crate::handoff::Prepare>,
    /// The model that writes handoff documents (`None`: the session's).
    pub model: Option<String>,
    /// Tool output tokens sent whole, older results cleared from requests (`None`: off).
    pub clear_tool_results: Option<u64>,
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
    /// The environment of commands (`tools.env.*`).
    pub env: Option<crate::tools::EnvSettings>,
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

    /// The wire format: as set, for Copilot the model's likely one (its model list decides),
    /// for a pi provider its `api`.
    pub fn api(&self) -> Api {
        match self.api {
            None | Some(ProviderKind::Openai) => Api::Openai,
            Some(ProviderKind::Anthropic) => Api::Anthropic,
            Some(ProviderKind::OpenaiResponses) => Api::OpenaiResponses,
            Some(ProviderKind::Copilot) => copilot::guess_api(&self.model()),
            Some(_) => Api::Openai,
        }
    }

    fn model(&self) -> String {
        self.model.clone().unwrap_or_else(|| {
            if let Some(preset) = self.api.and_then(ProviderKind::preset) {
                return preset.model.to_string();
            }
            match self.api {
                None | Some(ProviderKind::Openai) => "gpt-4.1-mini",
                Some(ProviderKind::OpenaiResponses) => "gpt-5-mini",
                Some(ProviderKind::Anthropic) => "claude-sonnet-4-5",
                Some(ProviderKind::Copilot) => "gpt-4.1",
                Some(_) => "gpt-4.1-mini",
            }
            .to_string()
        })
    }

    /// pi's `models.json` (`$PI_CODING_AGENT_DIR` or `~/.pi/agent`), when there is one. A
    /// broken file is an error only for the provider taken from it (`pi_provider`); otherwise it
    /// is logged and left out, as pi keeps its built-in models then.
    fn pi_models(&self) -> Result<Option<PiModels>, String> {
        let Some(path) = PiModels::default_path(&|var| std::env::var(var).ok()) else { return Ok(None) };
        match PiModels::load(&path) {
            Ok(models) => Ok(models),
            Err(e) if self.pi_provider.is_some() => Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "pi's models.json is left out");
                Ok(None)
            }
        }
    }

    /// Everything a provider needs: the preset, Copilot's or pi's provider filled in, what the
    /// user set over them, and what is known of the model's limits. Fails on a `pi_provider`
    /// that pi's file does not have or speaks a format handoff.nvim does not.
    pub fn provider_config(&self) -> Result<ProviderConfig, String> {
        let pi_models = self.pi_models()?;
        let pi = match &self.pi_provider {
            Some(name) => Some(pi_provider(pi_models.as_ref(), name)?),
            None => None,
        };
        let api = match (&self.api, pi) {
            (None, Some(pi)) => pi_api(pi)?,
            _ => self.api(),
        };
        let model = match (&self.model, pi) {
            (None, Some(pi)) => pi.models.first().map_or_else(|| self.model(), |m| m.id.clone()),
            _ => self.model(),
        };
        let is_copilot = self.api == Some(ProviderKind::Copilot);
        let preset = self.api.and_then(ProviderKind::preset);
        let base_url = match (&self.base_url, pi.and_then(|p| p.base_url.clone()), preset) {
            (Some(url), _, _) => url.clone(),
            (None, Some(url), _) => url,
            (None, None, Some(preset)) => preset.base_url.to_string(),
            (None, None, None) if is_copilot => copilot::DEFAULT_CHAT_BASE.to_string(),
            (None, None, None) => api.default_base_url().to_string(),
        };
        let mut config = ProviderConfig::new(api, base_url.trim_end_matches('/'), model);
        if let Some(preset) = preset {
            config.name = preset.name.into();
        }
        if let Some(pi) = pi {
            config.name = pi.name.clone();
        }
        if is_copilot {
            config.name = copilot::PROVIDER_NAME.into();
            let token_url = self.copilot_token_url.clone().filter(|u| !u.trim().is_empty());
            let default = CopilotConfig::default();
            config.copilot = Some(CopilotConfig {
                token_url: token_url.unwrap_or(default.token_url),
                editor_version: self.editor_version.clone().unwrap_or(default.editor_version),
            });
        }
        if let Some(name) = &self.name {
            config.name = name.clone();
        }
        // An explicit variable is required; the provider's usual one is used when it is set
        // (Copilot's token is its own: see `provider::copilot`).
        config.api_key_env = self.api_key_env.clone().or_else(|| {
            // A preset names its service's variable, which it needs set (a local Ollama needs none).
            if let Some(preset) = preset {
                return preset.key_env.map(str::to_string);
            }
            let default = api.default_key_env();
            let set = pi.is_none() && !is_copilot && std::env::var_os(default).is_some_and(|v| !v.is_empty());
            set.then(|| default.to_string())
        });
        config.api_key_cmd = self.api_key_cmd.clone();
        if let Some(pi) = pi {
            apply_pi_auth(&mut config, pi, self.api_key_env.is_none() && self.api_key_cmd.is_none())?;
        }
        // Every provider of pi's file is the user's own: the variables and files their keys and
        // headers come from are secrets, whichever provider this session talks to.
        if let Some(models) = &pi_models {
            let home = crate::sandbox::paths::home();
            for provider in &models.providers {
                let values = provider.api_key.iter().chain(provider.headers.iter().map(|(_, v)| v));
                for value in values {
                    match value.strip_prefix('!') {
                        Some(cmd) => {
                            let found = crate::provider::key_sources(cmd, home.as_deref());
                            config.secret_env.extend(found.vars);
                            config.secret_files.extend(found.files);
                        }
                        None if names_a_variable(value) => config.secret_env.push(value.clone()),
                        None => {}
                    }
                }
            }
        }
        config.limits = SetLimits { context_window: self.context_window, max_tokens: self.max_tokens };
        let pi_table = pi_models.as_ref().map(|m| m.models_of(&config.name)).unwrap_or_default();
        config.table = ModelTable::new(&config.name, &self.model_info.clone().unwrap_or_default(), pi_table);
        let facts = config.table.facts(&config.model, None);
        config.apply_limits(facts.as_ref());
        if let Some(r) = self.max_retries {
            config.max_retries = r;
        }
        if let Some(t) = self.timeout {
            config.idle_timeout = Duration::from_secs(t.max(1));
        }
        config.reasoning_effort = self.reasoning_effort;
        Ok(config)
    }

    /// What an `AgentSession` is built from; fails on an unknown tool name.
    pub fn agent_config(&self) -> Result<AgentConfig, String> {
        let tools = self.tools.clone().unwrap_or_default();
        Ok(AgentConfig {
            provider: self.provider_config()?,
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
            clear_tool_results: self.handoff.as_ref().and_then(|h| h.clear_tool_results),
            sandbox: self.sandbox(),
            env: tools.env.clone().unwrap_or_default(),
            sandbox_prefetch: crate::sandbox::PrefetchAt::default(),
        })
    }

    /// The sandbox for bash (default: `workspace-write` without network).
    pub fn sandbox(&self) -> SandboxSettings {
        SandboxSettings { mode: self.sandbox.unwrap_or_default(), network: self.network.unwrap_or(false) }
    }

    /// What happens at the wall (`handoff.auto`; default: hand off and continue).
    pub fn auto_handoff(&self) -> AutoHandoff {
        self.handoff.as_ref().and_then(|h| h.auto).unwrap_or_default()
    }

    /// Whether the document is drafted before the wall (`handoff.prepare`; `None`: the
    /// provider's default, `Prepare::default_for`).
    pub fn handoff_prepare(&self) -> Option<crate::handoff::Prepare> {
        self.handoff.as_ref().and_then(|h| h.prepare)
    }

    /// The model that writes handoff documents (`handoff.model`; `None`: the session's).
    pub fn handoff_model(&self) -> Option<String> {
        self.handoff.as_ref().and_then(|h| h.model.clone())
    }
}

/// `name`'s entry of pi's file, or an error that lists the file's providers.
fn pi_provider<'a>(file: Option<&'a PiModels>, name: &str) -> Result<&'a PiProvider, String> {
    let Some(file) = file else {
        return Err(format!("provider.pi_provider = {name:?}, but there is no pi models.json (~/.pi/agent/models.json, or $PI_CODING_AGENT_DIR/models.json)"));
    };
    file.provider(name).ok_or_else(|| {
        let names: Vec<&str> = file.providers.iter().map(|p| p.name.as_str()).collect();
        format!("pi's {} has no provider {name:?} (it has: {})", file.path.display(), names.join(", "))
    })
}

/// The wire format of a pi provider's `api` (its models' first `api` otherwise).
fn pi_api(pi: &PiProvider) -> Result<Api, String> {
    let name = pi.api.as_deref().unwrap_or("openai-completions");
    match name {
        "openai-completions" => Ok(Api::Openai),
        "openai-responses" => Ok(Api::OpenaiResponses),
        "anthropic-messages" => Ok(Api::Anthropic),
        other => Err(format!(
            "pi's provider {:?} speaks {other:?}, which handoff.nvim does not speak (it speaks openai-completions, openai-responses and anthropic-messages)",
            pi.name
        )),
    }
}

/// A pi provider's `apiKey` (unless the user set a key of their own: `key`) and `headers`, read
/// as pi reads them: `!command`, a variable's name, or the value itself.
fn apply_pi_auth(config: &mut ProviderConfig, pi: &PiProvider, key: bool) -> Result<(), String> {
    if let Some(value) = pi.api_key.as_deref().filter(|_| key) {
        match value.strip_prefix('!') {
            Some(cmd) => config.api_key_cmd = Some(cmd.to_owned()),
            None if names_a_variable(value) => config.api_key_env = Some(value.to_owned()),
            None => config.api_key_value = Some(Secret::new(value)),
        }
    }
    for (header, value) in &pi.headers {
        let value = if value.starts_with('!') {
            return Err(format!(
                "pi's provider {:?}: the header {header} is a command, which handoff.nvim does not run for headers: put its value in a variable",
                pi.name
            ));
        } else if names_a_variable(value) && std::env::var_os(value).is_some() {
            config.secret_env.push(value.clone());
            std::env::var(value).map_err(|_| format!("${value} (header {header}) is not UTF-8"))?
        } else {
            value.clone()
        };
        config.headers.push((header.clone(), Secret::new(value)));
    }
    config.extra_headers().map(drop).map_err(|e| format!("pi's provider {:?}: {e}", pi.name))
}

#[cfg(test)]
mod tests {

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
