//! What a model of the Responses API takes: whether it reasons (and so gets the thinking level
//! as `reasoning.effort` and its system prompt as a `developer` message), and the effort's value.

use super::super::openai::policy::reasoning_effort;
use super::super::types::{is_openai_reasoning_model, ProviderConfig, ThinkingLevel};

/// Whether the model reasons (pi's `model.reasoning`): as configured (`reasoning_effort`), else
/// as pi's registry has OpenAI's models (o-series, gpt-5 but its `-chat` variants).
pub(super) fn reasons(config: &ProviderConfig) -> bool {
    config.reasoning_effort.unwrap_or_else(|| is_openai_reasoning_model(&config.model))
}

/// The role of the system prompt: `developer` for a reasoning model, `system` otherwise, as pi
/// sends it.
pub(super) fn system_role(config: &ProviderConfig) -> &'static str {
    if reasons(config) {
        "developer"
    } else {
        "system"
    }
}

/// `reasoning.effort` for the session's level: `None` when thinking is off or the model does
/// not reason. pi leaves the field out at `off` for gpt-5 (its registry maps `off` to nothing);
/// so do we for every model, since the o-series refuse `none`.
pub(super) fn effort(config: &ProviderConfig, level: ThinkingLevel) -> Option<&'static str> {
    (level.is_on() && reasons(config)).then(|| reasoning_effort(&config.model, level))
}

/// The providers whose tool-call ids pi converts as Responses ids (`call_id|item_id`) when they
/// come from another model (`OPENAI_TOOL_CALL_PROVIDERS`); other providers' ids are cleaned
/// whole.
pub(super) fn keeps_item_ids(provider: &str) -> bool {
    matches!(provider, "openai" | "openai-codex" | "opencode")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Api;

    #[test]
    fn reasoning_models_get_the_effort_and_a_developer_prompt() {
        let config = |model: &str, switch: Option<bool>| {
            let mut c = ProviderConfig::new(Api::OpenaiResponses, "http://127.0.0.1:1/v1", model);
            c.reasoning_effort = switch;
            c
        };
        assert_eq!(effort(&config("gpt-5", None), ThinkingLevel::High), Some("high"));
        assert_eq!(effort(&config("gpt-5-codex", None), ThinkingLevel::Minimal), Some("minimal"));
        assert_eq!(effort(&config("o3", None), ThinkingLevel::Minimal), Some("low"));
        assert_eq!(effort(&config("gpt-5", None), ThinkingLevel::Off), None);
        assert_eq!(effort(&config("gpt-4.1", None), ThinkingLevel::High), None);
        assert_eq!(effort(&config("gpt-5", Some(false)), ThinkingLevel::High), None);
        assert_eq!(effort(&config("local", Some(true)), ThinkingLevel::Medium), Some("medium"));
        assert_eq!(system_role(&config("gpt-5", None)), "developer");
        assert_eq!(system_role(&config("gpt-4.1", None)), "system");
        assert_eq!(system_role(&config("gpt-5-chat-latest", None)), "system");
    }
}
