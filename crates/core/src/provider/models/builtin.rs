//! The built-in table: the models of the presets' services that a user is likely to name, with
//! the limits pi 0.73.1's registry gives them (DeepSeek's from its own documentation: pi lists
//! only its v4 models). Small on purpose: a provider's own list and the user's `model_info` win,
//! and pi's `models.json` extends it.

use super::{ModelInfo, Source};

/// pi's provider id, model id, window, reply limit, reasoning, images.
type Entry = (&'static str, &'static str, u64, u32, bool, bool);

const TABLE: &[Entry] = &[
    ("openai", "gpt-5.2", 400_000, 128_000, true, true),
    ("openai", "gpt-5.2-codex", 400_000, 128_000, true, true),
    ("openai", "gpt-5.1", 400_000, 128_000, true, true),
    ("openai", "gpt-5.1-codex", 400_000, 128_000, true, true),
    ("openai", "gpt-5", 400_000, 128_000, true, true),
    ("openai", "gpt-5-codex", 400_000, 128_000, true, true),
    ("openai", "gpt-5-mini", 400_000, 128_000, true, true),
    ("openai", "gpt-5-nano", 400_000, 128_000, true, true),
    ("openai", "gpt-4.1", 1_047_576, 32_768, false, true),
    ("openai", "gpt-4.1-mini", 1_047_576, 32_768, false, true),
    ("openai", "gpt-4.1-nano", 1_047_576, 32_768, false, true),
    ("openai", "gpt-4o", 128_000, 16_384, false, true),
    ("openai", "gpt-4o-mini", 128_000, 16_384, false, true),
    ("openai", "o3", 200_000, 100_000, true, true),
    ("openai", "o3-mini", 200_000, 100_000, true, false),
    ("openai", "o4-mini", 200_000, 100_000, true, true),
    ("anthropic", "claude-opus-4-6", 1_000_000, 128_000, true, true),
    ("anthropic", "claude-sonnet-4-6", 1_000_000, 64_000, true, true),
    ("anthropic", "claude-opus-4-5", 200_000, 64_000, true, true),
    ("anthropic", "claude-sonnet-4-5", 200_000, 64_000, true, true),
    ("anthropic", "claude-haiku-4-5", 200_000, 64_000, true, true),
    ("anthropic", "claude-opus-4-1", 200_000, 32_000, true, true),
    ("anthropic", "claude-opus-4-0", 200_000, 32_000, true, true),
    ("anthropic", "claude-opus-4-20250514", 200_000, 32_000, true, true),
    ("anthropic", "claude-sonnet-4-0", 200_000, 64_000, true, true),
    ("anthropic", "claude-3-5-haiku-latest", 200_000, 8_192, false, true),
    ("google", "gemini-3-pro-preview", 1_000_000, 64_000, true, true),
    ("google", "gemini-3-flash-preview", 1_048_576, 65_536, true, true),
    ("google", "gemini-2.5-pro", 1_048_576, 65_536, true, true),
    ("google", "gemini-2.5-flash", 1_048_576, 65_536, true, true),
    ("google", "gemini-2.5-flash-lite", 1_048_576, 65_536, true, true),
    ("google", "gemini-2.0-flash", 1_048_576, 8_192, false, true),
    ("deepseek", "deepseek-chat", 128_000, 8_192, false, false),
    ("deepseek", "deepseek-reasoner", 128_000, 65_536, true, false),
    ("groq", "llama-3.3-70b-versatile", 131_072, 32_768, false, false),
    ("groq", "llama-3.1-8b-instant", 131_072, 131_072, false, false),
    ("groq", "openai/gpt-oss-120b", 131_072, 65_536, true, false),
    ("groq", "openai/gpt-oss-20b", 131_072, 65_536, true, false),
    ("groq", "qwen/qwen3-32b", 131_072, 40_960, true, false),
    ("groq", "moonshotai/kimi-k2-instruct-0905", 262_144, 16_384, false, false),
    ("xai", "grok-4", 256_000, 64_000, true, false),
    ("xai", "grok-4-fast", 2_000_000, 30_000, true, true),
    ("xai", "grok-4-1-fast", 2_000_000, 30_000, true, true),
    ("xai", "grok-code-fast-1", 256_000, 10_000, true, false),
    ("xai", "grok-3", 131_072, 8_192, false, false),
    ("xai", "grok-3-mini", 131_072, 8_192, true, false),
    ("mistral", "mistral-large-latest", 262_144, 262_144, false, true),
    ("mistral", "mistral-medium-latest", 262_144, 262_144, true, true),
    ("mistral", "mistral-small-latest", 256_000, 256_000, true, true),
    ("mistral", "devstral-medium-latest", 262_144, 262_144, false, false),
    ("mistral", "codestral-latest", 256_000, 4_096, false, false),
    ("mistral", "magistral-medium-latest", 128_000, 16_384, true, false),
];

fn info(entry: &Entry, id: &str) -> ModelInfo {
    let &(_, _, window, output, reasoning, images) = entry;
    ModelInfo {
        id: id.to_owned(),
        context_window: Some(window),
        max_output: Some(output),
        reasoning: Some(reasoning),
        images: Some(images),
        source: Source::BuiltIn,
        ..ModelInfo::default()
    }
}

/// `id`'s entry: the same id, else the id without a `vendor/` prefix (OpenRouter's
/// `openai/gpt-4.1`) and without a date or `-latest` suffix (`claude-sonnet-4-5-20250929`).
pub(super) fn lookup(id: &str) -> Option<ModelInfo> {
    let exact = |name: &str| TABLE.iter().find(|e| e.1.eq_ignore_ascii_case(name));
    if let Some(entry) = exact(id) {
        return Some(info(entry, id));
    }
    let bare = id.rsplit_once('/').map_or(id, |(_, name)| name);
    if let Some(entry) = exact(bare) {
        return Some(info(entry, id));
    }
    // The longest entry `bare` continues with a dated or `-latest` suffix.
    let dated = |rest: &str| {
        rest.strip_prefix('-')
            .is_some_and(|s| s == "latest" || (!s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '-')))
    };
    TABLE
        .iter()
        .filter(|e| bare.len() > e.1.len() && bare[..e.1.len()].eq_ignore_ascii_case(e.1) && dated(&bare[e.1.len()..]))
        .max_by_key(|e| e.1.len())
        .map(|entry| info(entry, id))
}

/// The entries of one provider (pi's id), in the table's order.
pub(super) fn of_provider(provider: &str) -> Vec<ModelInfo> {
    TABLE.iter().filter(|e| e.0 == provider).map(|e| info(e, e.1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_found_by_its_id_a_vendor_prefix_or_a_dated_name() {
        assert_eq!(lookup("gpt-4.1").unwrap().context_window, Some(1_047_576));
        assert_eq!(lookup("openai/gpt-4.1").unwrap().context_window, Some(1_047_576));
        let dated = lookup("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!((dated.id.as_str(), dated.context_window), ("claude-sonnet-4-5-20250929", Some(200_000)));
        assert_eq!(lookup("gpt-4.1-mini").unwrap().max_output, Some(32_768), "not gpt-4.1's entry by prefix");
        assert!(lookup("gpt-4.1-turbo").is_none(), "a suffix that is no date is another model");
        assert!(lookup("llama3.2").is_none());
    }

    #[test]
    fn every_preset_service_has_entries_and_no_id_is_listed_twice() {
        for provider in ["openai", "anthropic", "google", "deepseek", "groq", "xai", "mistral"] {
            assert!(!of_provider(provider).is_empty(), "{provider}");
        }
        for (i, a) in TABLE.iter().enumerate() {
            assert!(!TABLE[i + 1..].iter().any(|b| b.1 == a.1), "{} twice", a.1);
        }
    }
}
