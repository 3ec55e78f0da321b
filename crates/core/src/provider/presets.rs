//! The providers a user names (`provider = "…"`, `--provider`): pi's wire formats, GitHub
//! Copilot, and presets of services that speak one of them (a base URL, a key variable, a
//! default model). Here, in the provider layer, so that whoever needs the providers' key
//! variables (the tools' environment) reads them without the settings.

use serde::{Deserialize, Serialize};

use super::{copilot, Api};

/// What `provider` (`api`) names: one of pi's wire formats, or GitHub Copilot, whose wire
/// format depends on the model (see `provider::copilot`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Openai,
    Anthropic,
    #[serde(rename = "openai-responses")]
    OpenaiResponses,
    Copilot,
    // Presets: a service's base URL, key variable, wire format and a default model.
    Openrouter,
    Ollama,
    Gemini,
    Deepseek,
    Groq,
    Xai,
    Mistral,
}

/// What a preset fills in when the user does not: all speak Chat Completions (Gemini through
/// Google's OpenAI-compatible endpoint, Mistral and DeepSeek through theirs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    pub base_url: &'static str,
    /// The variable holding the key (`None`: the service takes none, as a local Ollama).
    pub key_env: Option<&'static str>,
    pub model: &'static str,
    /// The provider's name in sessions: pi's id for it, so pi resumes with its own provider.
    pub name: &'static str,
}

impl ProviderKind {
    /// Every kind, in the order the help lists them.
    pub const ALL: [ProviderKind; 11] = [
        ProviderKind::Openai,
        ProviderKind::OpenaiResponses,
        ProviderKind::Anthropic,
        ProviderKind::Copilot,
        ProviderKind::Openrouter,
        ProviderKind::Ollama,
        ProviderKind::Gemini,
        ProviderKind::Deepseek,
        ProviderKind::Groq,
        ProviderKind::Xai,
        ProviderKind::Mistral,
    ];

    /// The preset of a service (`None`: a wire format, or Copilot).
    pub fn preset(self) -> Option<Preset> {
        let (base_url, key_env, model, name) = match self {
            ProviderKind::Openai | ProviderKind::OpenaiResponses | ProviderKind::Anthropic | ProviderKind::Copilot => {
                return None
            }
            ProviderKind::Openrouter => ("https://openrouter.ai/api/v1", Some("OPENROUTER_API_KEY"), "openai/gpt-4.1-mini", "openrouter"),
            ProviderKind::Ollama => ("http://127.0.0.1:11434/v1", None, "llama3.2", "ollama"),
            ProviderKind::Gemini => (
                "https://generativelanguage.googleapis.com/v1beta/openai",
                Some("GEMINI_API_KEY"),
                "gemini-2.5-flash",
                "google",
            ),
            ProviderKind::Deepseek => ("https://api.deepseek.com/v1", Some("DEEPSEEK_API_KEY"), "deepseek-chat", "deepseek"),
            ProviderKind::Groq => ("https://api.groq.com/openai/v1", Some("GROQ_API_KEY"), "llama-3.3-70b-versatile", "groq"),
            ProviderKind::Xai => ("https://api.x.ai/v1", Some("XAI_API_KEY"), "grok-4", "xai"),
            ProviderKind::Mistral => ("https://api.mistral.ai/v1", Some("MISTRAL_API_KEY"), "mistral-large-latest", "mistral"),
        };
        Some(Preset { base_url, key_env, model, name })
    }
}

impl ProviderKind {
    /// Every variable a provider of ours takes a key or token from unless told otherwise: each
    /// wire format's, each preset's, Copilot's GitHub token's. No command's environment gets
    /// them (`tools::env`), whichever provider is configured.
    pub fn key_vars() -> Vec<&'static str> {
        let mut vars = Vec::new();
        for kind in ProviderKind::ALL {
            let found: Vec<&'static str> = match kind {
                ProviderKind::Openai => vec![Api::Openai.default_key_env()],
                ProviderKind::OpenaiResponses => vec![Api::OpenaiResponses.default_key_env()],
                ProviderKind::Anthropic => vec![Api::Anthropic.default_key_env()],
                ProviderKind::Copilot => copilot::TOKEN_VARS.to_vec(),
                preset => preset.preset().and_then(|p| p.key_env).into_iter().collect(),
            };
            for var in found {
                if !vars.contains(&var) {
                    vars.push(var);
                }
            }
        }
        vars
    }
}

impl From<Api> for ProviderKind {
    fn from(api: Api) -> Self {
        match api {
            Api::Openai => ProviderKind::Openai,
            Api::Anthropic => ProviderKind::Anthropic,
            Api::OpenaiResponses => ProviderKind::OpenaiResponses,
        }
    }
}
