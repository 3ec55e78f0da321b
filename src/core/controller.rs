//! The command controller: what the user is told about a command's outcome. Every message a
//! front end shows for a handoff's outcome is written here, once, for all front ends. Texts that
//! name a front end's own keys (how to cancel in the editor) belong to that front end.

use serde::Serialize;

use crate::core::agent::AgentSession;
use crate::core::handoff::{self, text, HandoffOutcome};

/// How loudly to say it (maps to `vim.log.levels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// One line for the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Notice {
    pub level: Level,
    pub message: String,
}

impl Notice {
    fn new(level: Level, message: impl Into<String>) -> Self {
        Self { level, message: message.into() }
    }
}

/// What the prompt input means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// `/handoff [focus]`: intercepted, never sent to the model.
    Handoff { focus: String },
    /// Anything else is a prompt (templates expand later, in the agent).
    Prompt(String),
}

/// The input controller's interception, before normal prompt submission.
pub fn classify_input(text: &str) -> Input {
    match handoff::is_handoff_command(text) {
        Some(focus) => Input::Handoff { focus: focus.to_string() },
        None => Input::Prompt(text.to_string()),
    }
}

/// The pre-flight guard at the UI layer (the same rule `AgentSession::handoff` applies).
pub fn handoff_preflight(agent: &AgentSession) -> Result<(), Notice> {
    handoff::preflight(agent).map_err(|m| Notice::new(Level::Warn, m))
}

/// `handleHandoffCommand`'s messages for an outcome.
pub fn handoff_notices(outcome: &HandoffOutcome) -> Vec<Notice> {
    match outcome {
        HandoffOutcome::Done { missing_sections, .. } => {
            let mut notices = vec![Notice::new(Level::Info, text::SUCCESS)];
            if !missing_sections.is_empty() {
                notices.push(Notice::new(
                    Level::Warn,
                    format!("The handoff document is missing sections: {}", missing_sections.join(", ")),
                ));
            }
            notices
        }
        HandoffOutcome::Cancelled => vec![Notice::new(Level::Error, text::CANCELLED)],
        HandoffOutcome::Failed { message } => vec![Notice::new(Level::Error, format!("Handoff failed: {message}"))],
        HandoffOutcome::Refused { message } => vec![Notice::new(Level::Warn, message.clone())],
    }
}
