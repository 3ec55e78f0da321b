//! What one Anthropic model takes: thinking as a budget or adaptive. Its output limit is the
//! catalogue's (`ProviderConfig::reply_cap`, `provider/models`). Kept apart from the body writer so that
//! a new model's rule is one function here.

use serde_json::{json, Value};

use super::super::types::{ProviderConfig, ThinkingLevel};

/// What thinking at a level adds to a request: the reply limit it needs and its fields.
pub(super) struct Thinking {
    pub(super) max_tokens: u32,
    pub(super) fields: Vec<(&'static str, Value)>,
}

/// Anthropic's fields for `level`, as pi 0.73.1 sends them. Off: nothing (the API's default).
/// Models with adaptive thinking (Opus 4.6 and 4.7, Sonnet 4.6) get `thinking: {type:
/// "adaptive"}` and an effort; the others budget-based thinking, `thinking: {type: "enabled",
/// budget_tokens}` with pi's budgets (minimal 1024, low 2048, medium 8192, high 16384). The
/// budget is added to `max_tokens` (the room for the answer), capped at the model's output
/// limit as the catalogue gives it (the user's `model_info` first); what does not fit comes off the budget, keeping 1024 tokens for the answer. A budget
/// under the API's minimum of 1024 sends no thinking at all.
pub(super) fn thinking(config: &ProviderConfig, level: ThinkingLevel) -> Thinking {
    let off = Thinking { max_tokens: config.max_tokens, fields: Vec::new() };
    if !level.is_on() {
        return off;
    }
    if adaptive_thinking(&config.model) {
        let effort = match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        };
        return Thinking {
            max_tokens: config.max_tokens,
            fields: vec![
                ("thinking", json!({ "type": "adaptive", "display": "summarized" })),
                ("output_config", json!({ "effort": effort })),
            ],
        };
    }
    const MIN_BUDGET: u32 = 1024;
    let mut budget = level.anthropic_budget();
    let cap = config.reply_cap().unwrap_or(config.max_tokens).max(config.max_tokens);
    let max_tokens = config.max_tokens.saturating_add(budget).min(cap);
    if max_tokens <= budget {
        budget = max_tokens.saturating_sub(1024);
    }
    if budget < MIN_BUDGET {
        return off;
    }
    Thinking { max_tokens, fields: vec![("thinking", json!({ "type": "enabled", "budget_tokens": budget }))] }
}

/// pi's `supportsAdaptiveThinking`: the models that decide themselves how long to think.
fn adaptive_thinking(model: &str) -> bool {
    ["opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7", "sonnet-4-6", "sonnet-4.6"].iter().any(|m| model.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_budgets_are_pis_and_added_to_max_tokens() {
        use crate::provider::Api;
        let mut config = ProviderConfig::new(Api::Anthropic, "http://127.0.0.1:9/v1", "claude-sonnet-4-5");
        config.max_tokens = 4096;
        let off = thinking(&config, ThinkingLevel::Off);
        assert_eq!((off.max_tokens, off.fields.len()), (4096, 0));
        for (level, budget) in [
            (ThinkingLevel::Minimal, 1024),
            (ThinkingLevel::Low, 2048),
            (ThinkingLevel::Medium, 8192),
            (ThinkingLevel::High, 16384),
        ] {
            let t = thinking(&config, level);
            assert_eq!(t.max_tokens, 4096 + budget, "{level}");
            assert_eq!(t.fields, vec![("thinking", json!({"type": "enabled", "budget_tokens": budget}))], "{level}");
        }
        // Capped at the model's output limit (the catalogue's): the budget still fits below it.
        config.model = "claude-opus-4-1-20250805".into();
        config.max_tokens = 30_000;
        config.max_output = Some(32_000);
        let t = thinking(&config, ThinkingLevel::High);
        assert_eq!(t.max_tokens, 32_000);
        assert_eq!(t.fields[0].1["budget_tokens"], 16384);
        // Adaptive models choose their budget: an effort instead.
        config.model = "claude-opus-4-6".into();
        let t = thinking(&config, ThinkingLevel::Minimal);
        assert_eq!(t.max_tokens, 30_000);
        assert_eq!(
            t.fields,
            vec![
                ("thinking", json!({"type": "adaptive", "display": "summarized"})),
                ("output_config", json!({"effort": "low"})),
            ]
        );
    }
}
