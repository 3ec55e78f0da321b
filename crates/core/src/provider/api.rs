//! The wire formats a provider may speak: the provider layer's leaf, which every other part of
//! it (the model catalogue, the request's types, the presets) names.

/// Which wire protocol a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI Chat Completions (`/chat/completions`): OpenAI, Ollama, llama.cpp, vLLM, LM Studio, OpenRouter.
    Openai,
    /// Anthropic Messages (`/messages`).
    Anthropic,
    /// OpenAI Responses (`/responses`): OpenAI's reasoning and codex models, Copilot's gpt-5.
    #[serde(rename = "openai-responses")]
    OpenaiResponses,
}

impl Api {
    /// The `api` value pi records on assistant messages.
    pub fn pi_name(self) -> &'static str {
        match self {
            Api::Openai => "openai-completions",
            Api::Anthropic => "anthropic-messages",
            Api::OpenaiResponses => "openai-responses",
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            Api::Openai | Api::OpenaiResponses => "https://api.openai.com/v1",
            Api::Anthropic => "https://api.anthropic.com/v1",
        }
    }

    pub fn default_key_env(self) -> &'static str {
        match self {
            Api::Openai | Api::OpenaiResponses => "OPENAI_API_KEY",
            Api::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

}
