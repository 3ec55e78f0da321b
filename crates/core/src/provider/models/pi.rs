//! pi's own file of custom providers and models, `~/.pi/agent/models.json` (or
//! `$PI_CODING_AGENT_DIR/models.json`): JSON with `//` comments and trailing commas since pi
//! 0.73.1. Read so that a pi user's providers work unchanged: `provider.pi_provider = "name"`
//! takes one's `baseUrl`, `api`, `apiKey` and `headers`, and every provider's `models` (and
//! `modelOverrides`) say what is known of its models.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{ModelInfo, Source};

/// One provider of the file, as far as handoff.nvim uses it.
#[derive(Clone, PartialEq)]
pub struct PiProvider {
    pub name: String,
    pub base_url: Option<String>,
    /// pi's wire format name (`openai-completions`, `openai-responses`, `anthropic-messages`…).
    pub api: Option<String>,
    /// As pi reads it: `!command`, an environment variable's name, or the key itself.
    pub api_key: Option<String>,
    /// Names and values (each read as `api_key` is).
    pub headers: Vec<(String, String)>,
    pub models: Vec<ModelInfo>,
}

impl std::fmt::Debug for PiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `api_key` and the header values may be secrets themselves.
        f.debug_struct("PiProvider")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api", &self.api)
            .field("headers", &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("models", &self.models.len())
            .finish_non_exhaustive()
    }
}

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PiModels {
    pub path: PathBuf,
    pub providers: Vec<PiProvider>,
}

#[derive(Deserialize)]
struct File {
    providers: serde_json::Map<String, Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ProviderEntry {
    base_url: Option<String>,
    api: Option<String>,
    api_key: Option<String>,
    headers: serde_json::Map<String, Value>,
    models: Vec<ModelEntry>,
    model_overrides: serde_json::Map<String, Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ModelEntry {
    id: String,
    context_window: Option<f64>,
    max_tokens: Option<f64>,
    reasoning: Option<bool>,
    input: Option<Vec<String>>,
}

impl ModelEntry {
    fn info(self) -> ModelInfo {
        let count = |n: Option<f64>| n.filter(|n| *n > 0.0).map(|n| n as u64);
        ModelInfo {
            images: self.input.as_ref().map(|i| i.iter().any(|k| k == "image")),
            context_window: count(self.context_window),
            max_output: count(self.max_tokens).map(|n| n.min(u32::MAX as u64) as u32),
            reasoning: self.reasoning,
            id: self.id,
            source: Source::Pi,
            ..ModelInfo::default()
        }
    }
}

impl PiModels {
    /// Where pi keeps the file: `$PI_CODING_AGENT_DIR/models.json`, else `~/.pi/agent/models.json`.
    pub fn default_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
        crate::session::paths::pi_agent_dir(env).map(|dir| dir.join("models.json"))
    }

    /// The file at `path`; `Ok(None)` when there is none. A file that is not pi's format is an
    /// error naming the file and what is wrong, as pi reports it.
    pub fn load(path: &Path) -> Result<Option<PiModels>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read pi's {}: {e}", path.display())),
        };
        Self::parse(&text).map(|mut m| {
            m.path = path.to_owned();
            Some(m)
        })
        .map_err(|e| format!("pi's {} is not valid: {e}", path.display()))
    }

    /// The file's text (JSONC) as pi reads it.
    pub fn parse(text: &str) -> Result<PiModels, String> {
        let file: File = serde_json::from_str(&strip_jsonc(text)).map_err(|e| e.to_string())?;
        let mut providers = Vec::new();
        for (name, entry) in file.providers {
            let entry: ProviderEntry =
                serde_json::from_value(entry).map_err(|e| format!("providers.{name}: {e}"))?;
            let mut models: Vec<ModelInfo> = Vec::new();
            for model in entry.models.into_iter().filter(|m| !m.id.is_empty()) {
                models.push(model.info());
            }
            for (id, over) in entry.model_overrides {
                let mut over: ModelEntry =
                    serde_json::from_value(over).map_err(|e| format!("providers.{name}.modelOverrides.{id}: {e}"))?;
                over.id = id;
                if !models.iter().any(|m| m.id == over.id) {
                    models.push(over.info());
                }
            }
            let headers = entry
                .headers
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.as_str()?.to_owned())))
                .collect();
            providers.push(PiProvider {
                name,
                base_url: entry.base_url,
                api: entry.api,
                api_key: entry.api_key,
                headers,
                models,
            });
        }
        Ok(PiModels { path: PathBuf::new(), providers })
    }

    pub fn provider(&self, name: &str) -> Option<&PiProvider> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// The models the file names under `provider`.
    pub fn models_of(&self, provider: &str) -> Vec<ModelInfo> {
        self.provider(provider).map(|p| p.models.clone()).unwrap_or_default()
    }
}

/// `//` line comments and trailing commas taken out, string literals left as they are: pi's
/// `stripJsonComments`.
fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                let mut escaped = false;
                for (_, c) in chars.by_ref() {
                    out.push(c);
                    match c {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => break,
                        _ => escaped = false,
                    }
                }
            }
            '/' if text[i + 1..].starts_with('/') => {
                while chars.peek().is_some_and(|(_, c)| *c != '\n') {
                    chars.next();
                }
            }
            ',' => {
                // A comma followed only by blanks (and comments) up to `}` or `]` goes.
                let rest = strip_leading_blanks(&text[i + 1..]);
                if !(rest.starts_with('}') || rest.starts_with(']')) {
                    out.push(c);
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// `text` after its leading whitespace and `//` comments.
fn strip_leading_blanks(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        match text.strip_prefix("//") {
            Some(rest) => text = rest.split_once('\n').map_or("", |(_, after)| after),
            None => return text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{
      // my local server
      "providers": {
        "llama": {
          "baseUrl": "http://127.0.0.1:8080/v1", // llama-server
          "api": "openai-completions",
          "apiKey": "none",
          "headers": { "X-Team": "a//b", },
          "models": [
            { "id": "qwen3-coder", "contextWindow": 65536, "maxTokens": 8192, "reasoning": false, "input": ["text"], },
          ],
        },
        "openai": { "modelOverrides": { "gpt-4.1": { "contextWindow": 300000 } } },
      },
    }"#;

    #[test]
    fn pis_jsonc_file_is_read_with_its_comments_and_trailing_commas() {
        let models = PiModels::parse(FILE).unwrap();
        let llama = models.provider("llama").unwrap();
        assert_eq!(llama.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(llama.api.as_deref(), Some("openai-completions"));
        assert_eq!(llama.headers, vec![("X-Team".to_string(), "a//b".to_string())], "a `//` inside a string stays");
        let qwen = &llama.models[0];
        assert_eq!((qwen.context_window, qwen.max_output, qwen.images), (Some(65_536), Some(8_192), Some(false)));
        assert_eq!(models.models_of("openai")[0].context_window, Some(300_000), "modelOverrides count too");
        assert!(!format!("{llama:?}").contains("none"), "the key is not in Debug output");
    }

    #[test]
    fn a_broken_file_is_an_error_that_names_it_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("models.json");
        assert_eq!(PiModels::load(&path).unwrap(), None);
        std::fs::write(&path, r#"{ "providers": { "x": { "models": [ { "id": 3 } ] } } }"#).unwrap();
        let error = PiModels::load(&path).unwrap_err();
        assert!(error.contains("models.json") && error.contains("providers.x"), "{error}");
        let env = |v: &str| (v == "HOME").then(|| "/home/u".to_string());
        assert_eq!(PiModels::default_path(&env).unwrap(), PathBuf::from("/home/u/.pi/agent/models.json"));
        let env = |v: &str| match v {
            "HOME" => Some("/home/u".to_string()),
            "PI_CODING_AGENT_DIR" => Some("~/pi".to_string()),
            _ => None,
        };
        assert_eq!(PiModels::default_path(&env).unwrap(), PathBuf::from("/home/u/pi/models.json"));
    }
}
