//! The command controller, shared by every front end: it opens the session, classifies what the
//! user typed (the one `/handoff` parser), runs the guard, starts the work with its own token,
//! and reports every outcome, refusals included, on the agent's event route. Every message about
//! a command's outcome is written here, once. Texts that name a front end's own keys (how to
//! cancel in the editor) come from that front end ([`FrontEndTexts`]).

pub mod commands;
pub mod lifecycle;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::{AgentConfig, AgentError, AgentEvent, AgentSession, RunResult, Wall, WallReason};
use crate::failure::{Failure, FailureKind};
use crate::handoff::{AutoHandoff, HandoffOptions, HandoffOutcome, Refusal};
pub use commands::SlashCommand;
pub use lifecycle::{Lifecycle, Phase, PhaseGuard};
use crate::provider::ThinkingLevel;
use crate::session::{SessionError, SessionManager};

pub use crate::agent::{Level, Notice};

/// Every text about a command's outcome, written once.
pub mod text {
    pub const SUCCESS: &str = "New session started with handoff context";
    pub const REVIEW: &str = "Review the handoff document: write it to start the new session with it, quit without writing to discard it";
    pub const DISCARDED: &str = "Handoff discarded: no new session";
    pub const CANCELLED: &str = "Handoff cancelled";
    pub const REVIEW_PENDING: &str = "A handoff document is waiting for review: write it or quit it first";
    pub const NO_REVIEW: &str = "No handoff document is waiting for review";
    pub const NOTHING_TO_HAND_OFF: &str = "Nothing to hand off (no messages yet)";
    /// Said when a prompt arrives while a response runs.
    pub const QUEUED: &str = "Queued: sent when the current reply reaches a turn boundary";
    /// Said when a request arrives before a session is open (the editor runs a command again
    /// once it is).
    pub const NOT_READY: &str = "The session is still loading";
    /// Said when input arrives before a session is open: it waits, in order, and runs then.
    pub const WAITING_FOR_SESSION: &str = "The session is still loading: your input is sent when it is open";
    /// Said when the session could not be opened at all: what waited is dropped.
    pub const NEVER_READY: &str = "No session could be opened: the input sent while it loaded was not run";

    /// Said when input arrives during an automatic handoff: it goes to the new session.
    pub const QUEUED_FOR_NEW_SESSION: &str = "Queued: sent in the new session once the automatic handoff is done";
    /// Said when the guard of one prompt stops the automatic handoffs.
    pub const TOO_MANY_AUTO_HANDOFFS: &str = "Stopped after 3 automatic handoffs in one prompt: send a prompt to go on";
    /// Said when a request overflows again right after an automatic handoff.
    pub const OVERFLOW_AGAIN: &str = "The request is still larger than the model's context window after an automatic handoff: shorten the task or raise provider.context_window to the model's real window";
    /// Said when the new session would start at the wall already.
    pub fn document_at_the_wall(texts: &super::FrontEndTexts) -> String {
        format!(
            "The handoff document alone nearly fills the context window: not continuing automatically; review it with {}, or raise handoff.threshold",
            texts.review_handoff
        )
    }

    /// The share of the window `tokens` fill, in percent.
    pub fn percent(tokens: u64, window: u64) -> u64 {
        (tokens * 100).checked_div(window).unwrap_or(0)
    }

    /// How the new session is reached when the handoff was drafted before the wall.
    pub const FROM_PREPARED: &str = "continuing from the prepared handoff";

    /// The banner while an automatic handoff is written (the editor adds how to cancel);
    /// `prepared`: it continues from the draft written before the wall.
    pub fn auto_banner(wall: &super::Wall, prepared: bool) -> String {
        let doing = if prepared { format!("{FROM_PREPARED}…") } else { "handing off to a new session…".to_string() };
        match wall.reason {
            super::WallReason::Threshold => format!("Context {}% full — {doing}", percent(wall.tokens, wall.window)),
            super::WallReason::Overflow => format!("Context overflow — {doing}"),
        }
    }

    /// The draft written before the wall, as the chat and the CLI tell it: what it cost, or
    /// what became of it (`None`: nothing to say, it is being written).
    pub fn draft_status(draft: &crate::agent::events::DraftStatus) -> Option<String> {
        use crate::agent::events::DraftStatus;
        match draft {
            DraftStatus::Writing { .. } => None,
            DraftStatus::Ready { input, cached, output } => Some(format!(
                "Handoff prepared in the background ({input} tokens in, {cached} of them cached; {output} out): the wall will not wait for a document"
            )),
            DraftStatus::Failed { message } => {
                Some(format!("The handoff could not be prepared in the background ({message}): it is written at the wall"))
            }
            DraftStatus::Discarded => Some("The prepared handoff was discarded (the model or the session changed)".into()),
        }
    }

    /// How an automatic handoff that succeeded is told (`prepared`: from the draft written
    /// before the wall).
    pub fn auto_done(wall: &super::Wall, prepared: bool) -> String {
        let from = if prepared { format!(", {FROM_PREPARED}") } else { String::new() };
        format!("Handed off automatically ({}){from}: {}", auto_why(wall), auto_next(wall))
    }

    /// How an automatic handoff whose document the host wrote is told (the model wrote none).
    pub fn auto_fallback(wall: &super::Wall, reason: &str) -> String {
        format!(
            "Handed off automatically ({}), continuing from a handoff written without the model ({reason}): {}",
            auto_why(wall),
            auto_next(wall)
        )
    }

    fn auto_why(wall: &super::Wall) -> String {
        match wall.reason {
            super::WallReason::Threshold => format!("context {}% full", percent(wall.tokens, wall.window)),
            super::WallReason::Overflow => "context overflow".into(),
        }
    }

    /// After an automatic handoff, as [`super::Wall::after`] says: the work goes on.
    pub const AFTER_WALL_GOES_ON: &str = "the work goes on in the new session";
    /// … the prompt the wall stopped is answered there.
    pub const AFTER_WALL_PROMPT: &str = "your prompt goes to the new session, which answers it";
    /// … nothing runs until the user writes.
    pub const AFTER_WALL_WAITS: &str = "the new session waits for your next prompt";

    fn auto_next(wall: &super::Wall) -> &'static str {
        use crate::agent::AfterWall;
        match wall.after() {
            AfterWall::GoesOn => AFTER_WALL_GOES_ON,
            AfterWall::Answers => AFTER_WALL_PROMPT,
            AfterWall::Waits => AFTER_WALL_WAITS,
        }
    }

    /// How a cancelled automatic handoff is told: what may happen now, and what to do.
    pub fn auto_cancelled(wall: &super::Wall, texts: &super::FrontEndTexts) -> String {
        let what = match wall.reason {
            super::WallReason::Threshold => "the next request may not fit the model's context window",
            super::WallReason::Overflow => "the request did not fit the model's context window",
        };
        format!("Automatic handoff cancelled: {what}; hand off by hand with {}", texts.hand_off)
    }

    /// The one wording of "busy": what could not be done, and why.
    pub fn busy(doing: &str) -> String {
        format!("Cannot {doing} while a response is in progress")
    }

    /// What each command is called in [`busy`].
    /// `/back` in a session that was not handed off from another.
    pub const NO_PARENT: &str = "This session was not handed off from another: there is nothing to go back to.";

    /// `/back` done.
    pub fn back(parent: &std::path::Path) -> String {
        format!("Back in the session this one was handed off from ({}); the next prompt goes there.", parent.display())
    }

    pub mod doing {
        pub const HAND_OFF: &str = "hand off";
        pub const NEW_SESSION: &str = "start a new session";
        pub const RESUME: &str = "resume a session";
        pub const SET_MODEL: &str = "switch the model";
        pub const SET_THINKING: &str = "change the thinking level";
        pub const RECONFIGURE: &str = "reconfigure";
        pub const SEND_PROMPT: &str = "send a prompt";
        pub const PIN: &str = "change the pins";
    }

    /// How the pins are listed (`/pins`, and after a change): numbered as `/unpin` takes them.
    pub fn pins(pins: &[String]) -> String {
        if pins.is_empty() {
            return NO_PINS.into();
        }
        let listed: Vec<String> = pins.iter().enumerate().map(|(n, p)| format!("{}. {p}", n + 1)).collect();
        format!("Pins:\n{}", listed.join("\n"))
    }

    pub const NO_PINS: &str = "No pins (/pin TEXT pins one)";

    /// `/new` done.
    pub const NEW_SESSION: &str = "New session started.";

    /// `/model` without a name: the model in use.
    pub fn model_in_use(model: &str, provider: &str) -> String {
        format!("Model: {model} ({provider})")
    }

    /// `/model NAME` done.
    pub fn model_switched(model: &str) -> String {
        format!("Model switched to {model}.")
    }

    /// `/thinking LEVEL` done (or, without a level, the one in force).
    pub fn thinking(level: &str) -> String {
        format!("Thinking level: {level}")
    }

    /// How many sessions `/sessions` lists at most.
    pub const SESSIONS_LISTED: usize = 20;

    /// `/sessions`: the sessions of this folder, newest first (`current`: the one in use).
    pub fn sessions(listed: &[crate::session::SessionInfo], current: &std::path::Path) -> String {
        if listed.is_empty() {
            return "No sessions in this folder yet".into();
        }
        let mut lines = vec!["Sessions of this folder, newest first:".to_string()];
        for (n, info) in listed.iter().take(SESSIONS_LISTED).enumerate() {
            let said = if info.first_message.is_empty() { "(nothing said yet)" } else { info.first_message.as_str() };
            let here = if info.path == current { " (this session)" } else { "" };
            lines.push(format!("{}. {} {said}{here}: {}", n + 1, info.timestamp, info.path.display()));
        }
        if listed.len() > SESSIONS_LISTED {
            lines.push(format!("…and {} older", listed.len() - SESSIONS_LISTED));
        }
        lines.join("\n")
    }
    pub const NOTHING_TO_PIN: &str = "Nothing to pin: /pin TEXT";
}

/// What the prompt input means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// `/handoff [--to AGENT] [focus]`: intercepted, never sent to the model (`Err`: why its
    /// argument is refused).
    Handoff(Result<commands::HandoffArgs, &'static str>),
    /// `/pin TEXT`, `/pins`, `/unpin N`: intercepted, never sent to the model.
    Pin(PinCommand),
    /// `/back`: back to the session this one was handed off from.
    Back,
    /// `/new`: a new, empty session.
    New,
    /// `/sessions`: the sessions of this folder, listed.
    Sessions,
    /// `/model [name]`: switch the model, or (no name) say which is in use.
    Model(Option<String>),
    /// `/thinking [level]`: set the thinking level, or (none) say which is in force.
    Thinking(Option<String>),
    /// Anything else is a prompt (templates expand later, in the agent).
    Prompt(String),
}

/// What a pin command asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinCommand {
    /// `/pin TEXT`: the text as typed, only the whitespace around it dropped.
    Add(String),
    /// `/pins`.
    List,
    /// `/unpin N`: the argument as typed (checked when it runs).
    Remove(String),
}

/// The input controller's interception, before normal prompt submission: the one parser of
/// the commands the host runs (the table in [`commands`]), for every front end alike.
pub fn classify_input(text: &str) -> Input {
    let Some((command, arg)) = commands::parse(text) else {
        return Input::Prompt(text.to_string());
    };
    let given = || (!arg.is_empty()).then(|| arg.to_string());
    match command {
        SlashCommand::Handoff => Input::Handoff(commands::handoff_args(arg)),
        SlashCommand::Pin => Input::Pin(PinCommand::Add(arg.to_string())),
        SlashCommand::Pins => Input::Pin(PinCommand::List),
        SlashCommand::Unpin => Input::Pin(PinCommand::Remove(arg.to_string())),
        SlashCommand::Back => Input::Back,
        SlashCommand::New => Input::New,
        SlashCommand::Sessions => Input::Sessions,
        SlashCommand::Model => Input::Model(given()),
        SlashCommand::Thinking => Input::Thinking(given()),
    }
}

/// The words of a refusal (`doing`: what was refused, for the busy case).
pub fn refusal_text(reason: Refusal, doing: &str) -> String {
    match reason {
        Refusal::Busy => text::busy(doing),
        Refusal::ReviewPending => text::REVIEW_PENDING.into(),
        Refusal::NoReview => text::NO_REVIEW.into(),
        Refusal::NothingToHandOff => text::NOTHING_TO_HAND_OFF.into(),
    }
}

/// The kind a front end branches on, for a refusal.
pub fn refusal_kind(reason: Refusal) -> FailureKind {
    match reason {
        Refusal::Busy | Refusal::ReviewPending => FailureKind::Busy,
        Refusal::NoReview | Refusal::NothingToHandOff => FailureKind::Invalid,
    }
}

/// An agent failure as the user hears of it (`doing`: what failed, for the busy case).
pub fn failure_of(e: AgentError, doing: &str) -> Failure {
    match e {
        AgentError::Busy => Failure::new(FailureKind::Busy, text::busy(doing)),
        AgentError::Session(e) => session_failure(e),
    }
}

/// A session failure: a file that is no session (or names no entry) is the caller's mistake,
/// the rest is the disk's.
pub fn session_failure(e: SessionError) -> Failure {
    let kind = match &e {
        SessionError::Io { .. } | SessionError::Encode(_) => FailureKind::Io,
        SessionError::Empty { .. }
        | SessionError::NoHeader { .. }
        | SessionError::BadHeader { .. }
        | SessionError::NotAFile { .. }
        | SessionError::TooManyEntries { .. }
        | SessionError::UnknownEntry(_) => FailureKind::Invalid,
    };
    Failure::new(kind, e.to_string())
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
        HandoffOutcome::Refused { reason } => {
            vec![Notice::new(Level::Warn, refusal_text(*reason, text::doing::HAND_OFF))]
        }
    }
}

/// The messages for the end of a handoff, automatic (at the wall it says) or not.
pub fn handoff_end_notices(outcome: &HandoffOutcome, auto: Option<&Wall>, texts: &FrontEndTexts) -> Vec<Notice> {
    match auto {
        Some(wall) => auto_handoff_notices(outcome, wall, texts),
        None => handoff_notices(outcome),
    }
}

/// The messages for an automatic handoff's outcome (at `wall`).
pub fn auto_handoff_notices(outcome: &HandoffOutcome, wall: &Wall, texts: &FrontEndTexts) -> Vec<Notice> {
    match outcome {
        HandoffOutcome::Done { missing_sections, document_file, fallback, prepared, .. } => {
            let first = match fallback {
                Some(reason) => Notice::new(Level::Warn, text::auto_fallback(wall, reason)),
                None => Notice::new(Level::Info, text::auto_done(wall, *prepared)),
            };
            let mut notices = vec![
                first,
                Notice::new(Level::Info, format!("The handoff document is in {document_file}")),
            ];
            if !missing_sections.is_empty() {
                notices.push(Notice::new(
                    Level::Warn,
                    format!("The handoff document is missing sections: {}", missing_sections.join(", ")),
                ));
            }
            notices
        }
        HandoffOutcome::Cancelled => vec![Notice::new(Level::Warn, text::auto_cancelled(wall, texts))],
        HandoffOutcome::Failed { message } => {
            vec![Notice::new(Level::Error, format!("Automatic handoff failed: {message}"))]
        }
        other => handoff_notices(other),
    }
}

/// Texts a front end words itself, because they name its own keys and commands: the core's
/// sentences name none of the editor's.
#[derive(Clone, Debug)]
pub struct FrontEndTexts {
    /// Said when a prompt arrives while a handoff is generated.
    pub prompt_during_handoff: String,
    /// How the user hands off by hand here (the editor's `/handoff (:Handoff)`).
    pub hand_off: String,
    /// How the user hands off reviewing the document first (the editor's `:Handoff!`).
    pub review_handoff: String,
}

impl Default for FrontEndTexts {
    /// The prompt's own words, which every front end that takes prompts understands.
    fn default() -> Self {
        Self {
            prompt_during_handoff: "A handoff is being generated: wait for it, then send the prompt again".into(),
            hand_off: "/handoff".into(),
            review_handoff: "/handoff".into(),
        }
    }
}

/// Which session to continue.
pub enum SessionChoice {
    /// The newest session of the working directory, or a new one when it has none.
    Newest,
    /// This file.
    File(PathBuf),
    /// A session file the front end has read already (the CLI reads it to see whether it
    /// runs on an external agent): not read again — a large session is read once.
    Loaded(Box<SessionManager>),
    /// A new, empty session.
    New,
}

/// An agent on an opened session, with what the load had to say about the file.
struct Opened {
    pub agent: Arc<AgentSession>,
    /// Lines skipped or repaired while loading (each names the line and why).
    pub warnings: Vec<String>,
}

/// "Open or create a session" ([`open_for`]'s last step): the chosen session is loaded
/// (or created in `session_dir` for `cwd`); a session created here gets the model and thinking
/// level as its first entries, as pi starts every session.
fn open_session(
    config: AgentConfig,
    session_dir: &Path,
    cwd: &Path,
    choice: SessionChoice,
) -> Result<Opened, SessionError> {
    // The newest by the files' headers alone: a start-up never loads the folder's other sessions.
    let newest = match choice {
        SessionChoice::Newest => SessionManager::newest_session(session_dir, cwd)?,
        _ => None,
    };
    let (session, created) = match (choice, newest) {
        (SessionChoice::File(path), _) => (SessionManager::open(&path, session_dir)?, false),
        (SessionChoice::Loaded(session), _) => (*session, false),
        (SessionChoice::Newest, Some(path)) => (SessionManager::open(&path, session_dir)?, false),
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

/// What a front end brings to opening its session: where its files are, and what it adds.
/// Everything else (the settings, the MCP files, the session) is opened the one way,
/// [`open_for`].
#[derive(Clone, Debug)]
pub struct FrontEnd {
    /// The user-level folder of instruction files (`AGENTS.md`), first in the system prompt.
    pub instructions_dir: PathBuf,
    /// Where sessions are kept.
    pub session_dir: PathBuf,
    /// The user's MCP file when the settings name none (`None`: none).
    pub mcp_user_file: Option<PathBuf>,
    /// Where the trust of projects' `.mcp.json` files is kept.
    pub mcp_trust: crate::mcp::TrustStore,
    /// MCP servers the front end adds to the configured ones, by name, in Claude Code's format
    /// (an ACP client's `mcpServers`).
    pub mcp_servers: Vec<(String, serde_json::Value)>,
    /// `settings.thinking` is a choice for this run, as pi's `--thinking`: a continued session
    /// switches to it (the CLI, ACP). Otherwise it is only a new session's level (the editor,
    /// which switches by `set_thinking`).
    pub thinking_switches: bool,
    /// When the sandbox's work for the first command starts ([`crate::sandbox::PrefetchAt`]).
    pub sandbox_prefetch: crate::sandbox::PrefetchAt,
}

/// A session opened for a front end: the agent, what the load had to say, and the MCP
/// servers it was given (`None`: none configured).
pub struct OpenedFor {
    pub agent: Arc<AgentSession>,
    /// Lines skipped or repaired while loading (each names the line and why).
    pub warnings: Vec<String>,
    pub mcp: Option<Arc<crate::mcp::McpHub>>,
}

/// Opens `choice` for `cwd` as `front_end` does: [`prepare_for`] then [`Prepared::open`].
/// Reads files: call it off the runtime's threads. The front end then sets how it asks and
/// reaches files.
pub fn open_for(front_end: &FrontEnd, settings: &crate::config::Settings, cwd: &Path, choice: SessionChoice) -> Result<OpenedFor, Failure> {
    prepare_for(front_end, settings, cwd)?.open(front_end, settings, cwd, choice)
}

/// The agent's configuration for `front_end`, before a session: from `settings` (an invalid
/// one is refused), with the front end's instruction folder and the MCP servers of the
/// settings, of the user's file and of the front end (their files are read, no server starts).
pub fn prepare_for(front_end: &FrontEnd, settings: &crate::config::Settings, cwd: &Path) -> Result<Prepared, Failure> {
    let mut config = settings.agent_config().map_err(|e| Failure::invalid(format!("invalid tools settings: {e}")))?;
    config.instructions_dir = Some(front_end.instructions_dir.clone());
    config.sandbox_prefetch = front_end.sandbox_prefetch;
    let mut mcp = settings.mcp.clone();
    if front_end.mcp_user_file.is_some() || !front_end.mcp_servers.is_empty() {
        let mcp = mcp.get_or_insert_with(Default::default);
        if let Some(file) = &front_end.mcp_user_file {
            mcp.user_file.get_or_insert_with(|| file.clone());
        }
        let servers = mcp.servers.get_or_insert_with(serde_json::Map::new);
        for (name, entry) in &front_end.mcp_servers {
            servers.insert(name.clone(), entry.clone());
        }
    }
    let hub = crate::mcp::McpHub::attach(mcp.as_ref(), &mut config, cwd, front_end.mcp_trust.clone());
    Ok(Prepared { config, mcp: hub })
}

/// A front end's agent configuration, ready for a session ([`prepare_for`]): the editor
/// prepares it as `setup()` is called (its MCP servers are listed at once) and opens the
/// session in the background.
#[derive(Clone)]
pub struct Prepared {
    config: AgentConfig,
    pub mcp: Option<Arc<crate::mcp::McpHub>>,
}

impl Prepared {
    /// The session ([`open_session`]) on this configuration, and `--thinking` when the front
    /// end takes it as pi does. Reads the session: off the runtime's threads.
    pub fn open(self, front_end: &FrontEnd, settings: &crate::config::Settings, cwd: &Path, choice: SessionChoice) -> Result<OpenedFor, Failure> {
        let opened = open_session(self.config, &front_end.session_dir, cwd, choice).map_err(session_failure)?;
        if let (true, Some(level)) = (front_end.thinking_switches, settings.thinking) {
            opened.agent.set_thinking_level(level).map_err(|e| failure_of(e, text::doing::SET_THINKING))?;
        }
        Ok(OpenedFor { agent: opened.agent, warnings: opened.warnings, mcp: self.mcp })
    }
}

/// What running an input did.
#[derive(Debug)]
pub enum InputOutcome {
    /// `/handoff`: its outcome (a refusal went out as a notice too).
    Handoff(HandoffOutcome),
    /// The prompt ran to its end, or failed to start.
    Prompt(Result<RunResult, AgentError>),
    /// A response is running: the prompt waits for its next turn boundary.
    Steered,
    /// Nothing was sent (empty input, or refused: the reason went out as a notice).
    Nothing,
    /// A pin command: the pins after it, or why it did nothing (told as a notice too).
    Pins(Result<Vec<String>, Failure>),
    /// `/back`: the parent session's file, now the current one, or why not (told as a notice too).
    Back(Result<std::path::PathBuf, Failure>),
    /// Another session command (`/new`, `/sessions`, `/model`, `/thinking`): what it said, or
    /// why it did nothing (told as a notice too).
    Said(Result<String, Failure>),
}

/// One agent session driven by one front end: input classification and the session commands;
/// the prompt's life (runs, handoffs, reviews, what waits) is its [`Lifecycle`]'s.
pub struct Controller {
    lifecycle: Arc<Lifecycle>,
}

impl Controller {
    /// The controller of `agent`: every controller of one agent shares its lifecycle
    /// ([`Lifecycle::of`]; `texts` are those of the first).
    pub fn new(agent: Arc<AgentSession>, texts: FrontEndTexts) -> Arc<Self> {
        Arc::new(Self { lifecycle: Lifecycle::of(&agent, texts) })
    }

    pub fn agent(&self) -> &Arc<AgentSession> {
        self.lifecycle.agent()
    }

    /// The prompt's lifecycle (its phase, the one "busy").
    pub fn lifecycle(&self) -> &Arc<Lifecycle> {
        &self.lifecycle
    }

    /// Whether a handoff that does not say reviews its document (`setup{ handoff = { review } }`):
    /// `:Handoff` and `/handoff` typed in a prompt then behave the same.
    pub fn set_review_by_default(&self, review: bool) {
        self.lifecycle.set_review_by_default(review);
    }

    /// What happens at the wall (`handoff.auto`).
    pub fn set_auto_handoff(&self, mode: AutoHandoff) {
        self.lifecycle.set_auto_handoff(mode);
    }

    /// What happens before and at the wall: `handoff.auto`, `handoff.prepare` and
    /// `handoff.model` (the model that writes the documents).
    pub fn apply_handoff_settings(&self, settings: &crate::config::Settings) {
        self.lifecycle.set_auto_handoff(settings.auto_handoff());
        self.lifecycle.set_prepare(settings.handoff_prepare());
        self.agent().set_document_model(settings.handoff_model());
    }

    pub fn is_generating_handoff(&self) -> bool {
        self.lifecycle.is_generating_handoff()
    }

    /// The one "busy" ([`Lifecycle::is_busy`]).
    pub fn is_busy(&self) -> bool {
        self.lifecycle.is_busy()
    }

    /// `Ok` when nothing runs; else the busy failure for `doing`.
    pub fn ensure_idle(&self, doing: &str) -> Result<(), Failure> {
        if self.is_busy() {
            return Err(Failure::new(FailureKind::Busy, text::busy(doing)));
        }
        Ok(())
    }

    /// Takes [`Phase::Switching`] for a session command (or a front end's reload of the
    /// session, held until the new one is in place), or the busy failure for `doing`.
    pub fn switching(&self, doing: &str) -> Result<PhaseGuard, Failure> {
        self.lifecycle.take(Phase::Switching).map_err(|_| Failure::new(FailureKind::Busy, text::busy(doing)))
    }

    /// Cancels the handoff being generated, if any.
    pub fn abort_handoff(&self) {
        self.lifecycle.abort_handoff();
    }

    /// Stops what runs: the handoff being generated and the response.
    pub fn abort(&self) {
        self.lifecycle.abort();
    }

    fn notice(&self, level: Level, message: impl Into<String>) {
        self.agent().emit(AgentEvent::Notice(Notice::new(level, message)));
    }

    /// The pre-flight guard at the UI layer (the pipeline applies the same rule again).
    pub fn preflight(&self) -> Result<(), Refusal> {
        self.lifecycle.preflight()
    }

    /// Review mode: the user wrote the document; the new session starts with the text as is.
    /// After an automatic handoff in review, or with a prompt typed during the commit, the
    /// work then goes on there (in a task).
    ///
    /// The commit is under way from the call on (input sent after it goes to the new session);
    /// the file work runs off the caller's thread ([`Lifecycle::commit_review`]).
    pub fn commit_review(self: &Arc<Self>, text: &str) -> impl std::future::Future<Output = HandoffOutcome> + Send + 'static {
        let commit = self.lifecycle.commit_review(text);
        let controller = self.clone();
        async move {
            let outcome = commit.await;
            controller.report_refusal(&outcome);
            outcome
        }
    }

    /// Review mode: the user quit without writing; nothing is created (after an automatic
    /// handoff, nothing is sent either).
    pub fn discard_review(&self) -> bool {
        self.lifecycle.discard_review()
    }

    fn report_refusal(&self, outcome: &HandoffOutcome) {
        if let HandoffOutcome::Refused { reason } = outcome {
            self.notice(Level::Warn, refusal_text(*reason, text::doing::HAND_OFF));
        }
    }

    /// Runs the handoff and returns its outcome. Every outcome reaches the event route: the
    /// pipeline announces its start and end, and a refusal goes out as a notice here. With
    /// `review` (or, when it does not say, the front end's default) the document waits for the
    /// user (`commit_review` or `discard_review`) before a new session starts.
    pub async fn handoff(&self, options: HandoffOptions) -> HandoffOutcome {
        let outcome = self.lifecycle.handoff(options).await;
        self.report_refusal(&outcome);
        outcome
    }

    /// Starts the handoff in a task (its outcome arrives as events).
    pub fn start_handoff(self: &Arc<Self>, options: HandoffOptions) {
        let controller = self.clone();
        crate::task::spawn("a handoff", async move {
            controller.handoff(options).await;
        });
    }

    /// Starts the handoff `words` ask for, as typed after `/handoff` or `:Handoff` (`--to NAME`
    /// read by the command table's grammar); a refused argument goes out as a notice.
    pub fn start_handoff_typed(self: &Arc<Self>, words: &str, review: Option<bool>) {
        match commands::handoff_args(words) {
            Ok(commands::HandoffArgs { focus, to }) => self.start_handoff(HandoffOptions { focus: Some(focus), review, to }),
            Err(why) => self.notice(Level::Warn, why.to_string()),
        }
    }

    /// What the user typed in a prompt, run to its end: `/handoff [focus]` hands off (with the
    /// front end's review default), anything else is a prompt, or steering when a response
    /// runs (input typed during an automatic handoff or a commit waits for the new session).
    /// Refusals also go out as notices; a prompt that could not start is returned.
    pub async fn run_input(&self, text: &str) -> InputOutcome {
        match classify_input(text) {
            Input::Handoff(Ok(commands::HandoffArgs { focus, to })) => {
                InputOutcome::Handoff(self.handoff(HandoffOptions { focus: Some(focus), review: None, to }).await)
            }
            Input::Handoff(Err(why)) => {
                self.notice(Level::Warn, why.to_string());
                InputOutcome::Nothing
            }
            Input::Pin(command) => {
                let result = self.pin(command);
                match &result {
                    Ok(pins) => self.notice(Level::Info, text::pins(pins)),
                    Err(failure) => self.notice(Level::Warn, failure.message.clone()),
                }
                InputOutcome::Pins(result)
            }
            Input::Back => {
                let result = self.back().await;
                match &result {
                    Ok(parent) => self.notice(Level::Info, text::back(parent)),
                    Err(failure) => self.notice(Level::Warn, failure.message.clone()),
                }
                InputOutcome::Back(result)
            }
            Input::New => self.told(self.new_session().map(|()| text::NEW_SESSION.to_string())),
            Input::Sessions => self.told(self.sessions().await),
            Input::Model(None) => {
                let config = self.agent().provider_config();
                self.told(Ok(text::model_in_use(&config.model, &config.name)))
            }
            Input::Model(Some(model)) => self.told(self.set_model(&model).map(|()| text::model_switched(model.trim()))),
            Input::Thinking(None) => self.told(Ok(text::thinking(self.agent().thinking_level().as_str()))),
            Input::Thinking(Some(name)) => {
                let set = name.parse::<ThinkingLevel>().map_err(Failure::invalid).and_then(|level| {
                    self.set_thinking(level)?;
                    Ok(text::thinking(level.as_str()))
                });
                self.told(set)
            }
            Input::Prompt(text) if text.trim().is_empty() => InputOutcome::Nothing,
            Input::Prompt(text) => self.lifecycle.prompt(&text).await,
        }
    }

    /// A session command's outcome told as a notice (a failure as a warning), and returned.
    fn told(&self, said: Result<String, Failure>) -> InputOutcome {
        match &said {
            Ok(message) => self.notice(Level::Info, message.clone()),
            Err(failure) => self.notice(Level::Warn, failure.message.clone()),
        }
        InputOutcome::Said(said)
    }

    /// `/sessions`: the sessions of this session's folder, newest first (read off the
    /// runtime's threads).
    pub async fn sessions(&self) -> Result<String, Failure> {
        let (dir, cwd, current) = {
            let session = self.agent().session();
            (session.session_dir().to_path_buf(), session.cwd().to_path_buf(), session.path().to_path_buf())
        };
        let listed = tokio::task::spawn_blocking(move || SessionManager::list_sessions(&dir, &cwd))
            .await
            .map_err(|e| Failure::new(FailureKind::Io, format!("the session list stopped: {e}")))?
            .map_err(session_failure)?;
        Ok(text::sessions(&listed, &current))
    }

    /// [`Controller::run_input`] in a task, for a front end that hears the outcome as events
    /// (a prompt that could not start too). Call from within a tokio runtime.
    pub fn submit(self: &Arc<Self>, text: &str) {
        let (controller, text) = (self.clone(), text.to_string());
        crate::task::spawn("a prompt", async move { controller.input(&text).await });
    }

    /// [`Controller::run_input`], every outcome told as events (a prompt that could not start
    /// too).
    pub async fn input(&self, text: &str) {
        if let InputOutcome::Prompt(Err(e)) = self.run_input(text).await {
            self.notice(Level::Error, format!("The prompt failed: {e}"));
        }
    }

    /// Runs a pin command on the session's current branch and returns the pins after it. A
    /// change waits for no reply: it is refused while one runs (its entry would land among the
    /// reply's), and reaches the model from the next request on.
    pub fn pin(&self, command: PinCommand) -> Result<Vec<String>, Failure> {
        let mut pins = self.agent().session().pins();
        match command {
            PinCommand::List => return Ok(pins),
            PinCommand::Add(pin) if pin.is_empty() => return Err(Failure::invalid(text::NOTHING_TO_PIN)),
            PinCommand::Add(pin) => pins.push(pin),
            PinCommand::Remove(n) => {
                let at = n.parse::<usize>().ok().filter(|n| (1..=pins.len()).contains(n)).ok_or_else(|| {
                    Failure::invalid(format!("/unpin takes the number of a pin (1 to {}), not {n:?}", pins.len()))
                })?;
                pins.remove(at - 1);
            }
        }
        let _held = self.switching(text::doing::PIN)?;
        self.agent().session().set_pins(&pins).map_err(session_failure)?;
        self.agent().emit(crate::agent::AgentEvent::PinsChanged { pins: pins.clone() });
        Ok(pins)
    }

    /// `/new`: a new, empty session.
    pub fn new_session(&self) -> Result<(), Failure> {
        let held = self.switching(text::doing::NEW_SESSION)?;
        self.lifecycle.discard_draft();
        self.agent().new_session(held.hold()).map(drop).map_err(|e| failure_of(e, text::doing::NEW_SESSION))
    }

    /// Continues in `session` (loaded by the caller, off the runtime's threads).
    pub fn resume(&self, session: SessionManager) -> Result<(), Failure> {
        let held = self.switching(text::doing::RESUME)?;
        self.lifecycle.discard_draft();
        self.agent()
            .switch_to(held.hold(), session, crate::agent::SwitchReason::Resume)
            .map(drop)
            .map_err(|e| failure_of(e, text::doing::RESUME))
    }

    /// `/back`: continues in the session this one was handed off (or forked) from, as that file
    /// holds it; this one stays in the session list. Refused in a session without a parent.
    pub async fn back(&self) -> Result<std::path::PathBuf, Failure> {
        let (parent, dir) = {
            let session = self.agent().session();
            (session.header().parent_session.clone(), session.session_dir().to_path_buf())
        };
        let Some(parent) = parent.map(std::path::PathBuf::from) else {
            return Err(Failure::invalid(text::NO_PARENT));
        };
        let file = parent.clone();
        let loaded = tokio::task::spawn_blocking(move || SessionManager::open(&file, &dir))
            .await
            .map_err(|e| Failure::invalid(format!("cannot open the parent session: {e}")))?;
        self.resume(loaded.map_err(session_failure)?)?;
        Ok(parent)
    }

    /// Switches the model of this session (recorded as pi records it).
    pub fn set_model(&self, model: &str) -> Result<(), Failure> {
        let model = model.trim();
        if model.is_empty() {
            return Err(Failure::invalid("a model name is required"));
        }
        let _held = self.switching(text::doing::SET_MODEL)?;
        let config = self.agent().provider_config().for_model(model);
        self.lifecycle.discard_draft();
        self.agent().set_model(config).map_err(|e| failure_of(e, text::doing::SET_MODEL))
    }

    /// The thinking level from the next prompt on (a reply that runs goes on with its own; a
    /// handoff being generated is not changed under it).
    pub fn set_thinking(&self, level: ThinkingLevel) -> Result<(), Failure> {
        if self.is_generating_handoff() {
            return Err(Failure::new(FailureKind::Busy, text::busy(text::doing::SET_THINKING)));
        }
        self.agent().set_thinking_level(level).map(drop).map_err(|e| failure_of(e, text::doing::SET_THINKING))
    }
}
