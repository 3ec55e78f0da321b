//! What is known of each model — its context window, its reply limit, whether it reasons and
//! whether it takes images — and where that was learnt. Four sources, the first that knows a fact
//! wins, fact by fact: the user's `model_info`, the provider's own model list (`GET /models`:
//! Copilot, OpenRouter, Ollama, Groq, Mistral, vLLM…), pi's `models.json`, and a small built-in
//! table (then what is assumed of the wire format: [`assumed_window`], [`assumed_max_output`]).
//! The meter, the request fitting, the wall and the reply limits of every request (Anthropic's
//! thinking cap too) read them from here, through
//! [`ProviderConfig::apply_limits`](super::ProviderConfig::apply_limits): no other table of
//! model limits exists.

mod builtin;
pub mod pi;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::api::Api;

pub use pi::{PiProvider, PiModels};

/// The window assumed of a model no source knows, by wire format.
pub fn assumed_window(api: Api) -> u64 {
    match api {
        Api::Openai | Api::OpenaiResponses => 128_000,
        Api::Anthropic => 200_000,
    }
}

/// The reply cap assumed of a model no source knows: Anthropic's 64k (its current models'),
/// under which a thinking budget is added to `max_tokens`; none elsewhere (no budget is added
/// there).
pub fn assumed_max_output(api: Api) -> Option<u32> {
    match api {
        Api::Anthropic => Some(64_000),
        Api::Openai | Api::OpenaiResponses => None,
    }
}

/// What one source says of one model. Every fact is optional: a source says what it knows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    pub id: String,
    /// Input and output together, in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The longest reply the model writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<bool>,
    /// The wire format the model needs, where its list says (Copilot's endpoints).
    #[serde(skip)]
    pub api: Option<Api>,
    /// The account must enable the model first (Copilot's `policy.state`, when not `enabled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<String>,
    /// Where the window came from (else the first fact).
    pub source: Source,
}

/// Where a fact was learnt, most trusted first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The user's `model_info`.
    Settings,
    /// The provider's `GET /models`.
    Listed,
    /// pi's `~/.pi/agent/models.json`.
    Pi,
    /// handoff.nvim's own table.
    #[default]
    BuiltIn,
    /// The provider's own overflow error, which named the window.
    Refused,
    /// Nobody said: the wire format's default.
    Default,
}

impl Source {
    /// The source as a sentence ends: "window 200000 tokens (from …)".
    pub fn describe(self) -> &'static str {
        match self {
            Source::Settings => "your model_info",
            Source::Listed => "the provider's model list",
            Source::Pi => "pi's models.json",
            Source::BuiltIn => "handoff.nvim's table",
            Source::Refused => "the provider's overflow error",
            Source::Default => "a default: set provider.context_window",
        }
    }
}

impl ModelInfo {
    /// `self` with each fact it lacks taken from `other`; the source is the window's.
    pub fn or(mut self, other: &ModelInfo) -> ModelInfo {
        if self.context_window.is_none() && other.context_window.is_some() {
            self.context_window = other.context_window;
            self.source = other.source;
        }
        self.max_output = self.max_output.or(other.max_output);
        self.reasoning = self.reasoning.or(other.reasoning);
        self.images = self.images.or(other.images);
        self.api = self.api.or(other.api);
        self.disabled = self.disabled.take().or_else(|| other.disabled.clone());
        self
    }
}

/// The facts a user gives of one model (`provider.model_info`), as settings take them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelFacts {
    pub context_window: Option<u64>,
    pub max_tokens: Option<u32>,
    pub reasoning: Option<bool>,
    pub images: Option<bool>,
}

impl ModelFacts {
    fn info(&self, id: &str) -> ModelInfo {
        ModelInfo {
            id: id.to_owned(),
            context_window: self.context_window,
            max_output: self.max_tokens,
            reasoning: self.reasoning,
            images: self.images,
            source: Source::Settings,
            ..ModelInfo::default()
        }
    }
}

/// What is known of a provider's models without asking it: the user's entries, pi's entries for
/// this provider, and the built-in table. Shared by the clones of a config.
#[derive(Clone, Default, PartialEq)]
pub struct ModelTable {
    /// pi's provider id this table is for (`openai`, `anthropic`, `google`, `ollama`…).
    provider: String,
    user: Vec<ModelInfo>,
    pi: Vec<ModelInfo>,
}

impl std::fmt::Debug for ModelTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelTable")
            .field("provider", &self.provider)
            .field("user", &self.user.len())
            .field("pi", &self.pi.len())
            .finish()
    }
}

impl ModelTable {
    pub fn new(provider: &str, user: &BTreeMap<String, ModelFacts>, pi: Vec<ModelInfo>) -> Arc<ModelTable> {
        let user = user.iter().map(|(id, facts)| facts.info(id)).collect();
        Arc::new(ModelTable { provider: provider.to_owned(), user, pi })
    }

    /// Everything known of `id`: the user's facts, then `listed` (the provider's list), then
    /// pi's, then the built-in table's. `None` when no source names it.
    pub fn facts(&self, id: &str, listed: Option<&ModelInfo>) -> Option<ModelInfo> {
        let user = self.user.iter().find(|m| m.id == id);
        let pi = self.pi.iter().find(|m| m.id == id);
        let built_in = builtin::lookup(id);
        let mut sources = [user, listed, pi, built_in.as_ref()].into_iter().flatten();
        let first = sources.next()?.clone();
        Some(sources.fold(ModelInfo { id: id.to_owned(), ..first }, |info, next| info.or(next)))
    }

    /// The models this table names for its provider, the user's first: what a picker offers
    /// beside the provider's own list.
    pub fn models(&self) -> Vec<ModelInfo> {
        let mut out: Vec<ModelInfo> = Vec::new();
        let built_in = builtin::of_provider(&self.provider);
        for info in self.user.iter().chain(&self.pi).chain(&built_in) {
            if !out.iter().any(|m| m.id == info.id) {
                out.push(self.facts(&info.id, None).unwrap_or_else(|| info.clone()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fact_comes_from_the_first_source_that_knows_it() {
        let user = BTreeMap::from([("gpt-4.1".to_string(), ModelFacts { max_tokens: Some(1000), ..ModelFacts::default() })]);
        let pi = vec![ModelInfo { id: "gpt-4.1".into(), context_window: Some(500_000), source: Source::Pi, ..ModelInfo::default() }];
        let table = ModelTable::new("openai", &user, pi);
        let info = table.facts("gpt-4.1", None).unwrap();
        assert_eq!((info.context_window, info.max_output, info.source), (Some(500_000), Some(1000), Source::Pi));
        assert_eq!(info.images, Some(true), "from the built-in table");
        let listed = ModelInfo { id: "gpt-4.1".into(), context_window: Some(64_000), source: Source::Listed, ..ModelInfo::default() };
        let info = table.facts("gpt-4.1", Some(&listed)).unwrap();
        assert_eq!((info.context_window, info.source), (Some(64_000), Source::Listed), "the provider's list beats pi's");
        assert!(table.facts("nobody-knows", None).is_none());
    }

    #[test]
    fn a_table_lists_the_users_models_then_pis_then_the_providers_built_in_ones() {
        let user = BTreeMap::from([("mine".to_string(), ModelFacts { context_window: Some(32_768), ..ModelFacts::default() })]);
        let table = ModelTable::new("anthropic", &user, Vec::new());
        let ids: Vec<String> = table.models().into_iter().map(|m| m.id).collect();
        assert_eq!(ids[0], "mine");
        assert!(ids.contains(&"claude-sonnet-4-5".to_string()), "{ids:?}");
        assert!(!ids.iter().any(|id| id.starts_with("gpt")), "only this provider's built-in models: {ids:?}");
    }
}
