//! What an external agent offers its session beside prompts: its commands
//! (`available_commands_update`: completed in our prompt, sent as the prompt's text, as ACP
//! says), its modes and its models, each set the way the agent offers it (a config option of
//! that category, `session/set_config_option`; else `session/set_mode` or the unstable
//! `session/set_model`). Read from `session/new`'s (or `session/load`'s) answer and kept up to
//! date by the agent's updates as they arrive, between prompts too.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::connection::Peer;
use super::AgentError;
use handoff_core::sync::lock;

/// A command the agent offers (typed `/name args`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Command {
    pub name: String,
    pub description: String,
    /// What its argument is, when it takes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// One value a choice takes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Offered {
    pub id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// How the agent takes a choice.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Via {
    /// `session/set_config_option` with this config id.
    ConfigOption(String),
    /// `session/set_mode` / `session/set_model`.
    Method,
}

/// A mode or a model: the one in force and those offered.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Choice {
    pub current: String,
    pub available: Vec<Offered>,
    #[serde(skip)]
    via: Via,
}

/// What the agent offers now.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Offers {
    pub commands: Vec<Command>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Choice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Choice>,
}

/// Which choice: the agent's mode or its model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Mode,
    Model,
}

impl Kind {
    /// `mode` or `model` (what the front ends name it).
    pub fn parse(what: &str) -> Option<Kind> {
        match what {
            "mode" => Some(Kind::Mode),
            "model" => Some(Kind::Model),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Mode => "mode",
            Kind::Model => "model",
        }
    }
}

fn str_of(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

impl Offers {
    /// What a session's answer (`session/new`, `session/load`) offers: config options of the
    /// categories `mode` and `model` first (the current protocol), else `modes` and `models`.
    pub fn take_answer(&mut self, answer: &Value) {
        self.take_config_options(&answer["configOptions"]);
        if self.mode.is_none() {
            let modes = &answer["modes"];
            self.mode = choice(modes, "currentModeId", "availableModes", "id");
        }
        if self.model.is_none() {
            self.model = choice(&answer["models"], "currentModelId", "availableModels", "modelId");
        }
    }

    fn take_config_options(&mut self, options: &Value) {
        for option in options.as_array().into_iter().flatten() {
            let (Some(id), Some(current)) = (str_of(option, "id"), str_of(option, "currentValue")) else { continue };
            let available = option["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| Some(Offered { id: str_of(o, "value")?, name: str_of(o, "name").unwrap_or_default(), description: str_of(o, "description") }))
                .collect();
            let choice = Some(Choice { current, available, via: Via::ConfigOption(id) });
            match option["category"].as_str() {
                Some("mode") => self.mode = choice,
                Some("model") => self.model = choice,
                _ => {}
            }
        }
    }

    /// Takes one `session/update` that changes what is offered (others are left alone).
    pub fn take_update(&mut self, update: &Value) {
        match update["sessionUpdate"].as_str() {
            Some("available_commands_update") => {
                self.commands = update["availableCommands"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| {
                        Some(Command {
                            name: str_of(c, "name")?,
                            description: str_of(c, "description").unwrap_or_default(),
                            hint: c["input"].get("hint").and_then(Value::as_str).map(str::to_string),
                        })
                    })
                    .collect();
            }
            Some("current_mode_update") => {
                if let (Some(mode), Some(id)) = (self.mode.as_mut(), str_of(update, "currentModeId").or_else(|| str_of(update, "modeId"))) {
                    mode.current = id;
                }
            }
            Some("config_option_update") => self.take_config_options(&update["configOptions"]),
            _ => {}
        }
    }

    fn choice(&self, kind: Kind) -> Option<&Choice> {
        match kind {
            Kind::Mode => self.mode.as_ref(),
            Kind::Model => self.model.as_ref(),
        }
    }

    fn choice_mut(&mut self, kind: Kind) -> Option<&mut Choice> {
        match kind {
            Kind::Mode => self.mode.as_mut(),
            Kind::Model => self.model.as_mut(),
        }
    }
}

fn choice(state: &Value, current: &str, available: &str, id: &str) -> Option<Choice> {
    let current = str_of(state, current)?;
    let available = state[available]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| Some(Offered { id: str_of(m, id)?, name: str_of(m, "name").unwrap_or_default(), description: str_of(m, "description") }))
        .collect();
    Some(Choice { current, available, via: Via::Method })
}

/// The offers of one running agent session, shared by its connection (which keeps them up to
/// date) and the front ends (which read and set them, during a prompt too).
#[derive(Clone)]
pub struct Handle {
    pub(super) peer: Peer,
    pub(super) session_id: String,
    pub(super) offers: Arc<Mutex<Offers>>,
}

impl Handle {
    pub fn offers(&self) -> Offers {
        lock(&self.offers).clone()
    }

    /// Sets the agent's `kind` to `value`, the way the agent offers it; the offers say so once
    /// it answered.
    pub async fn choose(&self, kind: Kind, value: &str) -> Result<(), AgentError> {
        let via = {
            let offers = lock(&self.offers);
            let choice = offers.choice(kind).ok_or_else(|| AgentError::NotOffered(format!("the agent offers no {}", kind.name())))?;
            if !choice.available.iter().any(|v| v.id == value) {
                let known: Vec<&str> = choice.available.iter().map(|v| v.id.as_str()).collect();
                return Err(AgentError::NotOffered(format!("the agent offers no {} {value:?} (it offers: {})", kind.name(), known.join(", "))));
            }
            choice.via.clone()
        };
        let id = &self.session_id;
        let answer = match (&via, kind) {
            (Via::ConfigOption(config), _) => {
                self.peer.request("session/set_config_option", json!({ "sessionId": id, "configId": config, "value": value })).await?
            }
            (Via::Method, Kind::Mode) => self.peer.request("session/set_mode", json!({ "sessionId": id, "modeId": value })).await?,
            (Via::Method, Kind::Model) => self.peer.request("session/set_model", json!({ "sessionId": id, "modelId": value })).await?,
        };
        let mut offers = lock(&self.offers);
        offers.take_config_options(&answer["configOptions"]);
        if let Some(choice) = offers.choice_mut(kind) {
            choice.current = value.to_string();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_options_win_over_modes_and_updates_change_them() {
        let mut offers = Offers::default();
        offers.take_answer(&json!({
            "modes": { "currentModeId": "default", "availableModes": [{ "id": "default", "name": "Default" }, { "id": "plan", "name": "Plan" }] },
            "models": { "currentModelId": "a", "availableModels": [{ "modelId": "a", "name": "A" }] },
            "configOptions": [{ "id": "mode", "category": "mode", "type": "select", "currentValue": "default", "options": [{ "value": "default", "name": "Default" }, { "value": "plan", "name": "Plan" }] }],
        }));
        assert_eq!(offers.mode.as_ref().unwrap().via, Via::ConfigOption("mode".into()));
        assert_eq!(offers.model.as_ref().unwrap().via, Via::Method);
        offers.take_update(&json!({ "sessionUpdate": "current_mode_update", "currentModeId": "plan" }));
        assert_eq!(offers.mode.as_ref().unwrap().current, "plan");
        offers.take_update(&json!({ "sessionUpdate": "available_commands_update", "availableCommands": [{ "name": "review", "description": "Review", "input": { "hint": "what" } }, { "name": "init", "description": "Init", "input": null }] }));
        let hints: Vec<Option<&str>> = offers.commands.iter().map(|c| c.hint.as_deref()).collect();
        assert_eq!(hints, [Some("what"), None]);
    }
}
