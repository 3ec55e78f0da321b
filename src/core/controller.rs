//! The command controller, shared by every front end: it opens the session, classifies what the
//! user typed (the one `/handoff` parser), runs the guard, starts the work with its own token,
//! and reports every outcome, refusals included, on the agent's event route. Every message about
//! a command's outcome is written here, once. Texts that name a front end's own keys (how to
//! cancel in the editor) come from that front end ([`FrontEndTexts`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::core::agent::{AgentConfig, AgentError, AgentEvent, AgentSession, RunOptions};
use crate::core::handoff::{self, text, Handoff, HandoffOutcome};
use crate::core::session::{SessionError, SessionManager};

pub use crate::core::agent::{Level, Notice};

/// Said when a prompt arrives while a response runs.
pub const QUEUED: &str = "Queued: sent when the current reply reaches a turn boundary";

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

/// `handleHandoffCommand`'s messages for an outcome.
pub fn handoff_notices(outcome: &HandoffOutcome) -> Vec<Notice> {
    match outcome {
        HandoffOutcome::Done { missing_sections, .. } | HandoffOutcome::Review { missing_sections, .. } => {
            let first = if matches!(outcome, HandoffOutcome::Done { .. }) { text::SUCCESS } else { text::REVIEW };
            let mut notices = vec![Notice::new(Level::Info, first)];
            if !missing_sections.is_empty() {
                notices.push(Notice::new(
                    Level::Warn,
                    format!("The handoff document is missing sections: {}", missing_sections.join(", ")),
                ));
            }
            notices
        }
        HandoffOutcome::Discarded => vec![Notice::new(Level::Info, text::DISCARDED)],
        HandoffOutcome::Cancelled => vec![Notice::new(Level::Error, text::CANCELLED)],
        HandoffOutcome::Failed { message } => vec![Notice::new(Level::Error, format!("Handoff failed: {message}"))],
        HandoffOutcome::Refused { message } => vec![Notice::new(Level::Warn, message.clone())],
    }
}

/// Texts a front end words itself, because they name its own keys.
#[derive(Clone, Debug)]
pub struct FrontEndTexts {
    /// Said when a prompt arrives while a handoff is generated.
    pub prompt_during_handoff: String,
}

impl Default for FrontEndTexts {
    fn default() -> Self {
        Self { prompt_during_handoff: "A handoff is being generated: wait for it, then send the prompt again".into() }
    }
}

/// Which session to continue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionChoice {
    /// The newest session of the working directory, or a new one when it has none.
    Newest,
    /// This file.
    File(PathBuf),
    /// A new, empty session.
    New,
}

/// An agent on an opened session, with what the load had to say about the file.
pub struct Opened {
    pub agent: Arc<AgentSession>,
    /// Lines skipped or repaired while loading (each names the line and why).
    pub warnings: Vec<String>,
}

/// "Open or create a session", the one way both front ends do it: the chosen session is loaded
/// (or created in `session_dir` for `cwd`); a session created here gets the model and thinking
/// level as its first entries, as pi starts every session.
pub fn open_session(
    config: AgentConfig,
    session_dir: &Path,
    cwd: &Path,
    choice: &SessionChoice,
) -> Result<Opened, SessionError> {
    let newest = match choice {
        SessionChoice::Newest => SessionManager::list_sessions(session_dir, cwd)?.into_iter().next(),
        _ => None,
    };
    let (session, created) = match (choice, newest) {
        (SessionChoice::File(path), _) => (SessionManager::open(path, session_dir)?, false),
        (SessionChoice::Newest, Some(info)) => (SessionManager::open(&info.path, session_dir)?, false),
        (SessionChoice::Newest | SessionChoice::New, _) => (SessionManager::create(session_dir, cwd, None)?, true),
    };
    let warnings = session.warnings().to_vec();
    let agent = Arc::new(AgentSession::new(config, session));
    // Only a session made here: an existing file is never written to just by opening it.
    if created {
        agent.record_settings(&mut agent.session())?;
    }
    Ok(Opened { agent, warnings })
}

/// What `submit` did with the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// A handoff was started (its outcome arrives as events).
    Handoff,
    /// The prompt runs.
    Prompt,
    /// A response is running: the prompt waits for its next turn boundary.
    Steered,
    /// Nothing was sent (empty input, or refused: the reason went out as a notice).
    Nothing,
}

/// One agent session driven by one front end.
pub struct Controller {
    agent: Arc<AgentSession>,
    handoff: Handoff,
    texts: FrontEndTexts,
}

impl Controller {
    pub fn new(agent: Arc<AgentSession>, texts: FrontEndTexts) -> Arc<Self> {
        Arc::new(Self { agent, handoff: Handoff::new(), texts })
    }

    pub fn agent(&self) -> &Arc<AgentSession> {
        &self.agent
    }

    pub fn is_generating_handoff(&self) -> bool {
        self.handoff.is_generating()
    }

    /// A response or a handoff runs.
    pub fn is_busy(&self) -> bool {
        self.agent.is_busy() || self.handoff.is_generating()
    }

    /// Cancels the handoff being generated, if any.
    pub fn abort_handoff(&self) {
        self.handoff.abort();
    }

    /// Stops what runs: the handoff being generated and the response.
    pub fn abort(&self) {
        self.handoff.abort();
        self.agent.abort();
    }

    fn notice(&self, level: Level, message: impl Into<String>) {
        self.agent.emit(AgentEvent::Notice(Notice::new(level, message)));
    }

    /// The pre-flight guard at the UI layer (the pipeline applies the same rule again).
    pub fn preflight(&self) -> Result<(), Notice> {
        if self.handoff.is_reviewing() {
            return Err(Notice::new(Level::Warn, text::REVIEW_PENDING));
        }
        handoff::preflight(&self.agent, self.handoff.is_generating()).map_err(|m| Notice::new(Level::Warn, m))
    }

    /// Review mode: the user wrote the document; the new session starts with the text as is.
    pub fn commit_review(&self, text: &str) -> HandoffOutcome {
        let outcome = self.handoff.commit(&self.agent, text);
        if let HandoffOutcome::Refused { message } = &outcome {
            self.notice(Level::Warn, message.clone());
        }
        outcome
    }

    /// Review mode: the user quit without writing; nothing is created.
    pub fn discard_review(&self) -> bool {
        self.handoff.discard(&self.agent)
    }

    /// Runs the handoff and returns its outcome. Every outcome reaches the event route: the
    /// pipeline announces its start and end, and a refusal goes out as a notice here.
    pub async fn handoff(&self, focus: Option<&str>) -> HandoffOutcome {
        self.handoff_with(focus, false).await
    }

    /// Like `handoff`; with `review`, the document waits for the user (`commit_review` or
    /// `discard_review`) before a new session starts.
    pub async fn handoff_with(&self, focus: Option<&str>, review: bool) -> HandoffOutcome {
        let outcome = match self.preflight() {
            Err(notice) => HandoffOutcome::Refused { message: notice.message },
            Ok(()) => self.handoff.run_with(&self.agent, focus, review).await,
        };
        if let HandoffOutcome::Refused { message } = &outcome {
            self.notice(Level::Warn, message.clone());
        }
        outcome
    }

    /// What the user typed in a prompt: `/handoff [focus]` starts the handoff, anything else is
    /// a prompt (or steering when a response runs). Long work runs in a task; its outcome, and
    /// any refusal, arrive as events. Call from within a tokio runtime.
    pub fn submit(self: &Arc<Self>, text: &str) -> Submitted {
        match classify_input(text) {
            Input::Handoff { focus } => {
                self.start_handoff(Some(focus));
                Submitted::Handoff
            }
            Input::Prompt(text) if text.trim().is_empty() => Submitted::Nothing,
            Input::Prompt(_) if self.handoff.is_generating() => {
                self.notice(Level::Warn, self.texts.prompt_during_handoff.clone());
                Submitted::Nothing
            }
            Input::Prompt(text) if self.agent.is_busy() => {
                self.agent.steer(&text);
                self.notice(Level::Info, QUEUED);
                Submitted::Steered
            }
            Input::Prompt(text) => {
                let controller = self.clone();
                tokio::spawn(async move {
                    match controller.agent.prompt(&text, RunOptions::default()).await {
                        Ok(_) => {}
                        // Another prompt won the race: this one waits behind it.
                        Err(AgentError::Busy) => controller.agent.steer(&text),
                        Err(e) => controller.notice(Level::Error, format!("The prompt failed: {e}")),
                    }
                });
                Submitted::Prompt
            }
        }
    }

    /// Starts the handoff in a task (its outcome arrives as events).
    pub fn start_handoff(self: &Arc<Self>, focus: Option<String>) {
        self.start_handoff_with(focus, false);
    }

    /// Starts the handoff in a task, for review or not.
    pub fn start_handoff_with(self: &Arc<Self>, focus: Option<String>, review: bool) {
        let controller = self.clone();
        tokio::spawn(async move {
            controller.handoff_with(focus.as_deref(), review).await;
        });
    }
}
