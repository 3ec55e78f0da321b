//! The `/handoff` pipeline (`doc/design.md`), in the order of its steps:
//! trigger (the controller's command table, `controller::commands`), pre-flight guard (`preflight`), prompt (`build_prompt`),
//! capture and cancellation (`capture`), new session and injection (`start_new_session`),
//! context rebuild, and the outcome the controller maps to the UI (`HandoffOutcome`).
//!
//! [`Handoff`] owns the pipeline's abort token and drives the agent only through its public run
//! API (the run slot, [`RunOptions`], [`AgentSession::switch_to`]): the agent knows nothing of
//! handoffs.
//!
//! Every shortcoming of the original pipeline (the table at the end of `doc/design.md`) is
//! closed here; each is marked `Gap:` where it is.

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use crate::agent::{
    lock, AgentError, AgentEvent, AgentSession, Hold, RunClaim, RunOptions, RunResult, SessionSetting, SwitchReason, Wall,
    WallReason,
};
use crate::failure::FailureKind;
/// How a handoff ended, and why one did nothing: event payloads, so they live with the events
/// (the agent layer imports nothing from here).
pub use crate::agent::events::{HandoffOutcome, Refusal};
use crate::message::{Message, StopReason};
use crate::session::review::{Review, Unreviewed};
use crate::session::{self, file, mark_handoff_request, paths, SessionError, SessionManager};

/// The instruction sent to the model (our wording; the six sections are the contract).
pub const PROMPT: &str = include_str!("prompt.md");

/// The sections the document must have, in order.
pub const SECTIONS: [&str; 6] =
    ["Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Critical Context", "Next Steps"];

/// `customType` of the injected entry (the session reads the todo list it carries over).
pub const CUSTOM_TYPE: &str = crate::session::todos::HANDOFF_CUSTOM_TYPE;

/// The sentence after the wrapped document.
const CONTEXT_SENTENCE: &str =
    "The above is a handoff document from a previous session. Use this context to continue the work seamlessly.";

/// What comes before and after the document (and the facts) in the injected entry.
const WRAPPER_OPEN: &str = "<handoff-context>\n";
const WRAPPER_CLOSE: &str = "\n</handoff-context>\n\n";

pub mod auto;
pub mod draft;
pub mod facts;
pub mod fallback;
pub mod ledger;

pub use auto::{AutoHandoff, UserWords};
pub use draft::{Drafts, Prepare};
pub use facts::Facts;

/// What the user asked of a handoff: the one options value of every entry point (`:Handoff`,
/// `/handoff` typed in a prompt, the CLI).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandoffOptions {
    /// Focus instructions appended to the prompt (blank: none).
    pub focus: Option<String>,
    /// Open the document for review before a new session starts. `None`: the front end's
    /// configured default (`setup{ handoff = { review } }`; the CLI never reviews).
    pub review: Option<bool>,
    /// Where the new session goes on (`--to NAME`: an external agent's name, or `ours`), as
    /// the agent's [`ExternalRunner`](crate::agent::ExternalRunner) reads it. `None`: where
    /// this one runs.
    pub to: Option<String>,
}

impl HandoffOptions {
    pub fn focus(focus: impl Into<String>) -> Self {
        Self { focus: Some(focus.into()), ..Self::default() }
    }
}

/// How the handoff's run goes: one turn, the instruction never expanded as a template,
/// (gap: request too large) fitted to the model's window, and no tool calls (the definitions
/// still go along with tool choice "none", so a provider's prompt cache hits), written by the
/// document model (`handoff.model`) when one is set. Public so that
/// tests can check the expansion setting, which a handoff alone cannot show (its prompt never
/// starts with `/name`).
pub const RUN_OPTIONS: RunOptions = RunOptions {
    expand_prompt_templates: false,
    fit_to_window: true,
    single_turn: true,
    use_tools: false,
    watch_wall: false,
    send_first: true,
    record: true,
    fit_limit: None,
    document_model: true,
};

/// The instruction with the optional focus appended. Sent with template expansion off, so
/// nothing in it (or in the focus) is ever expanded.
pub fn build_prompt(focus: Option<&str>) -> String {
    let mut prompt = PROMPT.trim_end().to_string();
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        prompt.push_str("\n\nAdditional focus: ");
        prompt.push_str(focus);
    }
    prompt
}

/// What the host hands over beside the document: the facts and, after an automatic handoff,
/// the user's own words and why it happened.
#[derive(Clone, Debug, Default)]
pub struct Carried {
    pub facts: Facts,
    pub words: UserWords,
    pub auto: Option<Wall>,
    /// Why the document is the host's (`fallback`): the model wrote none.
    pub fallback: Option<String>,
    /// The document was drafted before the wall: how many messages came after it (carried
    /// verbatim after the draft).
    pub prepared: Option<usize>,
    /// The branch's messages as the ledger reads them, parsed with the facts (each message once),
    /// and the leaf they were read at.
    pub parts: Vec<ledger::Part>,
    pub parts_leaf: Option<String>,
}

impl Carried {
    /// The facts of the session's current branch; with `auto`, the user's words too.
    /// Each message of the branch is parsed once, for the facts and the ledger alike.
    pub fn gather(agent: &AgentSession, auto: Option<Wall>) -> Carried {
        Self::of_session(&agent.session(), auto)
    }

    /// [`Carried::gather`] of a session read without an agent (an external agent's record).
    pub fn of_session(session: &SessionManager, auto: Option<Wall>) -> Carried {
        let branch = session.get_branch(None);
        let words = if auto.is_some() { UserWords::of_branch(&branch) } else { UserWords::default() };
        let mut parts = Vec::new();
        let facts = Facts::gather_reading_all(&branch, |message| parts.push(ledger::Part::of(message)));
        let parts_leaf = session.leaf_id().map(str::to_string);
        Carried { facts, words, auto, fallback: None, prepared: None, parts, parts_leaf }
    }

    pub fn is_empty(&self) -> bool {
        self.facts.is_empty() && self.words.is_empty()
    }

    /// The text after the document, as the new session reads it.
    pub fn render(&self) -> String {
        [self.facts.render(), self.words.render()].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n\n")
    }

    /// The new session's entry's details: the facts (pi's readFiles/modifiedFiles and ours),
    /// the user's words, and why an automatic handoff happened.
    pub fn details(&self) -> serde_json::Value {
        let mut details = self.facts.details();
        if let Some(map) = details.as_object_mut() {
            if !self.words.is_empty() {
                map.insert("userWords".into(), serde_json::to_value(&self.words).unwrap_or_default());
            }
            if let Some(wall) = &self.auto {
                map.insert("auto".into(), auto::details(wall));
            }
            if let Some(reason) = &self.fallback {
                map.insert("fallback".into(), fallback::details(reason));
            }
            if let Some(since) = self.prepared {
                map.insert("prepared".into(), serde_json::json!({ "turnsSince": since }));
            }
        }
        details
    }
}

/// The document with what the host carries after it: what the new session is handed.
pub fn with_facts(document: &str, carried: &Carried) -> String {
    if carried.is_empty() {
        document.to_string()
    } else {
        format!("{document}\n\n{}", carried.render())
    }
}

/// The content of the injected `custom_message`: what the model reads.
pub fn wrap_document(document: &str) -> String {
    format!("{WRAPPER_OPEN}{document}{WRAPPER_CLOSE}{CONTEXT_SENTENCE}")
}

/// The document a handoff's injected entry holds as the handoff showed it (`None` for any
/// other entry): inside [`wrap_document`]'s wrapper, without what [`with_facts`] appended (the
/// facts and the user's words, rendered again from the entry's details). A text the user
/// edited in review is shown as written; an entry wrapped otherwise (pi's, by hand) whole.
pub fn shown_document(entry: &session::SessionEntry) -> Option<String> {
    let details = session::todos::handoff_details(entry)?;
    let content = entry.custom_message()?.content.joined_text();
    let inner = content.strip_prefix(WRAPPER_OPEN).and_then(|rest| rest.strip_suffix(&format!("{WRAPPER_CLOSE}{CONTEXT_SENTENCE}")));
    let Some(inner) = inner else { return Some(content) };
    let carried = Carried {
        facts: serde_json::from_value(details.clone()).unwrap_or_default(),
        words: details.get("userWords").and_then(|w| serde_json::from_value(w.clone()).ok()).unwrap_or_default(),
        ..Carried::default()
    };
    let document = match carried.is_empty() {
        true => inner,
        false => inner.strip_suffix(&format!("\n\n{}", carried.render())).unwrap_or(inner),
    };
    Some(document.to_string())
}

/// Gap (section check): which of the six `##` sections the document lacks.
pub fn missing_sections(document: &str) -> Vec<String> {
    let headings: Vec<String> = document
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let stripped = l.trim_start_matches('#');
            (stripped.len() < l.len()).then(|| stripped.trim().trim_end_matches(':').to_lowercase())
        })
        .collect();
    SECTIONS
        .iter()
        .filter(|s| {
            let want = s.to_lowercase();
            let alt = want.replace('&', "and");
            !headings.iter().any(|h| *h == want || *h == alt)
        })
        .map(|s| s.to_string())
        .collect()
}

/// Gap (guard twice, disagreeing): the one rule both layers (the controller before it starts
/// the work, and [`Handoff::run`]) call. Gap (no busy check): refuse while a response or another
/// handoff runs. Then count `message` entries on the current branch, never on all branches.
pub fn preflight(agent: &AgentSession, generating: bool) -> Result<(), Refusal> {
    if generating || agent.is_busy() {
        return Err(Refusal::Busy);
    }
    if agent.session().count_branch_messages() < 2 {
        return Err(Refusal::NothingToHandOff);
    }
    Ok(())
}

/// Clears the handoff's abort controller when the handoff ends, whatever happened (`finally`).
struct AbortControllerGuard<'a>(&'a Handoff);

impl Drop for AbortControllerGuard<'_> {
    fn drop(&mut self) {
        *lock(&self.0.abort) = None;
    }
}

/// What ends a document the model wrote up to its output limit, at the wall.
pub const CUT_OFF_MARK: &str = "[The document was cut off here at the model's output limit.]";

/// Capture: the document, or why there is none.
/// Gap (stale or partial replies): only the assistant message of *this* run counts, and only
/// with a normal stop; an aborted turn is a cancellation, an errored one a failure. A document
/// cut off at the output limit fails `:Handoff` (the user can add a focus and run it again);
/// at the wall (`at_wall`) it is kept, marked where it stops: the session cannot go on where
/// it is, and the facts and the user's words follow the document whole.
fn capture(result: &RunResult, at_wall: bool) -> Result<String, HandoffError> {
    let Some(reply) = result.last_assistant() else {
        return Err(HandoffError::NoText);
    };
    match reply.stop_reason.unwrap_or_default() {
        StopReason::Aborted => return Err(HandoffError::Cancelled),
        StopReason::Error => {
            let message = reply.error_message.as_deref().unwrap_or("the model request failed");
            return Err(HandoffError::ModelError(message.to_string()));
        }
        StopReason::Length if !at_wall => return Err(HandoffError::CutOff),
        StopReason::ToolUse => return Err(HandoffError::ToolUse),
        StopReason::Length | StopReason::Stop => {}
    }
    // Gap (no text = cancelled): no text is a failure with its own message.
    let document = reply.text();
    if !reply.content.has_text_block() || document.trim().is_empty() {
        return Err(HandoffError::NoText);
    }
    if reply.stop_reason == Some(StopReason::Length) {
        tracing::warn!("the automatic handoff's document was cut off at the output limit: kept as written");
        return Ok(format!("{}\n\n{CUT_OFF_MARK}", document.trim()));
    }
    Ok(document.trim().to_string())
}

/// Why a handoff produced no new session.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// Never shown: it becomes [`HandoffOutcome::Cancelled`], which the controller words.
    #[error("cancelled")]
    Cancelled,
    #[error("the model returned no text")]
    NoText,
    #[error("{0}")]
    ModelError(String),
    #[error("the document was cut off at the model's output limit (stop reason: length); raise max_tokens or add a focus")]
    CutOff,
    #[error("the model asked to use a tool instead of writing the document")]
    ToolUse,
    #[error(transparent)]
    Run(#[from] AgentError),
    #[error("could not write the new session: {0}")]
    Write(#[from] SessionError),
    /// Where the user said the new session goes on (`--to`) is nowhere it can.
    #[error("{0}")]
    Target(String),
}

impl From<HandoffError> for HandoffOutcome {
    fn from(reason: HandoffError) -> Self {
        match reason {
            HandoffError::Cancelled => HandoffOutcome::Cancelled,
            other => HandoffOutcome::Failed { message: other.to_string() },
        }
    }
}

/// The session a successful handoff continues in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSession {
    pub session_file: PathBuf,
    /// The session handed off (recorded as `parentSession` in the new one's header).
    pub parent_session: PathBuf,
    /// The document as markdown beside the new session.
    pub document_file: PathBuf,
    /// What it holds and what it left behind (also its handoff entry's `details.ledger`).
    pub ledger: Box<session::ledger::Ledger>,
}

/// The ledger of handing `session` (its current branch and pins) over as `text`, with the
/// host's `carried`: the review's and the new session's alike. The branch's messages are the
/// ones read with the facts, unless the branch moved on since (a prompt during a review).
fn ledger_of(session: &SessionManager, text: &str, carried: &Carried) -> session::ledger::Ledger {
    let pins = session.pins().len();
    let mut ledger = if carried.parts_leaf.as_deref() == session.leaf_id() {
        ledger::of_handoff(&carried.parts, text, carried, pins)
    } else {
        ledger::of_handoff(&ledger::Part::of_branch(&session.get_branch(None)), text, carried, pins)
    };
    // The hunks not reviewed yet, which the new session is handed (`Review::hand_over`).
    match Review::of_session(session.path()).unreviewed() {
        Ok(calls) => {
            let counted = Unreviewed::of(&calls);
            ledger.carried.unreviewed = session::ledger::UnreviewedShare { hunks: counted.hunks, files: counted.files };
        }
        Err(e) => tracing::warn!("cannot read the review for the handoff's ledger: {e}"),
    }
    ledger
}

/// Writes the document as `handoff.md` beside the new session file (0600 in a 0700 folder, synced
/// to the disk, like the session file itself).
fn write_document_file(session_file: &Path, document: &str) -> Result<PathBuf, SessionError> {
    let dir = paths::session_side_dir(session_file);
    file::create_private_dir(&dir)?;
    let document_file = dir.join("handoff.md");
    file::write_private_file(&document_file, format!("{document}\n").as_bytes())?;
    Ok(document_file)
}

/// A document waiting for the user's review.
struct PendingReview {
    carried: Carried,
    /// What the new session records of where it goes on.
    successor: Option<SessionSetting>,
}

impl std::fmt::Debug for PendingReview {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingReview").field("carried", &self.carried).field("successor", &self.successor.is_some()).finish()
    }
}

/// The handoff of one agent session: at most one runs at a time, and it can be cancelled.
#[derive(Debug, Default)]
pub struct Handoff {
    /// The abort controller: `Some` while a handoff is generating.
    abort: std::sync::Mutex<Option<CancellationToken>>,
    /// Review mode: the document generated and not yet written or discarded.
    draft: std::sync::Mutex<Option<PendingReview>>,
    /// The document drafted before the wall (`handoff.prepare`), if any.
    drafts: std::sync::Arc<Drafts>,
}

impl Handoff {
    pub fn new() -> Self {
        Self::default()
    }

    /// The drafts written before the wall (the lifecycle gives the agent their watcher).
    pub fn drafts(&self) -> &std::sync::Arc<Drafts> {
        &self.drafts
    }

    /// `isGeneratingHandoff`: true while the abort controller exists.
    pub fn is_generating(&self) -> bool {
        lock(&self.abort).is_some()
    }

    /// `abortHandoff()`: cancels the handoff being generated, if any.
    pub fn abort(&self) {
        if let Some(token) = lock(&self.abort).as_ref() {
            token.cancel();
        }
    }

    /// A reviewed document is waiting to be written or discarded.
    pub fn is_reviewing(&self) -> bool {
        lock(&self.draft).is_some()
    }

    /// `AgentSession.handoff(focus)`: generates the document, and on success continues `agent`
    /// in a new session that starts with it. Announces itself with `handoff_start` and
    /// `handoff_end` (a refusal announces nothing: it is the caller's to report). With
    /// `review`, the document is not used at once: the outcome is `Review`, and the new session
    /// starts when the user writes the text ([`Handoff::commit`]).
    /// `hold`: the caller's phase guard's (a handoff runs and switches sessions).
    /// `to`: where the new session goes on (`--to`, [`HandoffOptions::to`]).
    pub(crate) async fn run(&self, hold: &Hold, agent: &AgentSession, focus: Option<&str>, review: bool, to: Option<&str>) -> HandoffOutcome {
        let focus = focus.map(str::trim).filter(|f| !f.is_empty()).map(str::to_string);
        self.run_with(hold, agent, focus, review, None, to).await
    }

    /// The automatic handoff of a run that stopped at `wall` (`auto`): the same pipeline, with
    /// a focus naming the step in flight; nothing reaches the old session unless it succeeds.
    pub(crate) async fn run_auto(&self, hold: &Hold, agent: &AgentSession, wall: Wall, review: bool) -> HandoffOutcome {
        let focus = auto::focus(&wall, &auto::last_tools(&agent.session().get_branch(None)));
        self.run_with(hold, agent, Some(focus), review, Some(wall), None).await
    }

    /// `to`: where the new session goes on (`None`: where this one runs).
    async fn run_with(
        &self,
        hold: &Hold,
        agent: &AgentSession,
        focus: Option<String>,
        review: bool,
        auto: Option<Wall>,
        to: Option<&str>,
    ) -> HandoffOutcome {
        // 1. Start: guard, abort controller, prompt.
        let token = CancellationToken::new();
        let claim = {
            let mut slot = lock(&self.abort);
            if self.is_reviewing() {
                return HandoffOutcome::Refused { reason: Refusal::ReviewPending };
            }
            if let Err(reason) = preflight(agent, slot.is_some()) {
                return HandoffOutcome::Refused { reason };
            }
            // The run slot is taken before `handoff_start`: a prompt that got there first
            // refuses the handoff here, not after the front end was told it started.
            let Ok(claim) = agent.claim_run(hold, &token) else {
                return HandoffOutcome::Refused { reason: Refusal::Busy };
            };
            *slot = Some(token.clone());
            claim
        };
        let _clear = AbortControllerGuard(self);
        // At the wall, the draft written before it (if any) is continued from, when it can be.
        let prepared = auto.and_then(|wall| self.drafts.take(agent).and_then(|mut taken| taken.usable(agent, &wall).then_some(taken)));
        agent.emit(AgentEvent::HandoffStart { focus: focus.clone(), auto, prepared: prepared.is_some() });
        // Where the new session goes on: a name that goes nowhere fails before the document
        // is asked for.
        let successor = match to {
            None => Ok(agent.external_successor()),
            Some(to) => agent.successor_to(to).map_err(HandoffError::Target),
        };
        let drafted = match (successor.is_ok(), prepared, auto) {
            (true, Some(taken), Some(wall)) => from_draft(agent, taken, &token, wall).await,
            _ => Ok(None),
        };
        let from_the_draft = matches!(drafted, Ok(Some(_)));
        let (successor, generated) = match (successor, drafted) {
            (Err(reason), _) => (None, Err(reason)),
            (Ok(successor), Ok(Some(generated))) => {
                drop(claim);
                (successor, Ok(generated))
            }
            (Ok(successor), Ok(None)) => (successor, generate(hold, agent, focus.as_deref(), &token, claim, auto).await),
            (Ok(successor), Err(reason)) => (successor, Err(reason)),
        };
        let generated = match (generated, auto) {
            // At the wall the work must go on: the host writes the document the model did not.
            (Err(reason), Some(wall)) if fallback::applies(&reason) && !token.is_cancelled() => {
                Ok(host_document(agent, wall, &reason))
            }
            (generated, _) => generated,
        };
        let outcome = match generated {
            Err(reason) => reason.into(),
            Ok((document, carried, elided)) if review => {
                let text = with_facts(&document, &carried);
                let facts_at = (!carried.is_empty()).then_some(document.len() + 2);
                let ledger = ledger_of(&agent.session(), &text, &carried);
                *lock(&self.draft) = Some(PendingReview { carried, successor });
                HandoffOutcome::Review { missing_sections: missing_sections(&document), text, facts_at, elided, ledger: Box::new(ledger) }
            }
            // The new session's file work (writing, fsyncing) holds no runtime worker: the
            // host's other tasks (the editor's requests) go on meanwhile.
            Ok((document, carried, elided)) => match crate::task::blocking(|| start_new_session(hold, agent, &with_facts(&document, &carried), &carried, successor)) {
                Ok(new) => done(document, &carried, new, elided, from_the_draft),
                Err(reason) => reason.into(),
            },
        };
        // Nothing of a detached run that created nothing is in the session: it is drawn again.
        let created = matches!(outcome, HandoffOutcome::Done { .. } | HandoffOutcome::Review { .. });
        if created {
            // A draft of the session handed off is of no use any more.
            self.drafts.discard(agent);
        }
        let redraw_upto = if auto.is_some() && !created { agent.session().leaf_id().map(str::to_string) } else { None };
        agent.emit(AgentEvent::HandoffEnd { outcome: outcome.clone(), auto, redraw_upto });
        outcome
    }

    /// Review mode: the user wrote the text (the document and facts as edited). The new session
    /// starts with it, exactly as written (`hold`: the committing phase's).
    pub(crate) fn commit(&self, hold: &Hold, agent: &AgentSession, text: &str) -> HandoffOutcome {
        let Some(draft) = lock(&self.draft).take() else {
            return HandoffOutcome::Refused { reason: Refusal::NoReview };
        };
        let draft_auto = draft.carried.auto;
        let text = text.trim();
        let outcome = if text.is_empty() {
            HandoffOutcome::Failed { message: "the reviewed document is empty; nothing was created".into() }
        } else {
            // The text already holds the facts as the user left them; the entry's details keep
            // what the host knows, for the handoffs after this one.
            match start_new_session(hold, agent, text, &draft.carried, draft.successor) {
                Ok(new) => {
                    let fallback = Carried { fallback: draft.carried.fallback.clone(), ..Carried::default() };
                    done(text.to_string(), &fallback, new, None, false)
                }
                Err(reason) => reason.into(),
            }
        };
        agent.emit(AgentEvent::HandoffEnd { outcome: outcome.clone(), auto: draft_auto, redraw_upto: None });
        outcome
    }

    /// Review mode: the user quit without writing. Nothing is created.
    pub fn discard(&self, agent: &AgentSession) -> bool {
        let Some(draft) = lock(&self.draft).take() else { return false };
        agent.emit(AgentEvent::HandoffEnd { outcome: HandoffOutcome::Discarded, auto: draft.carried.auto, redraw_upto: None });
        true
    }
}

fn done(document: String, carried: &Carried, new: NewSession, elided: Option<String>, prepared: bool) -> HandoffOutcome {
    HandoffOutcome::Done {
        ledger: new.ledger,
        missing_sections: missing_sections(&document),
        document,
        session_file: new.session_file.to_string_lossy().into_owned(),
        parent_session: new.parent_session.to_string_lossy().into_owned(),
        document_file: new.document_file.to_string_lossy().into_owned(),
        elided,
        facts: (!carried.is_empty()).then(|| carried.render()),
        fallback: carried.fallback.clone(),
        prepared,
    }
}

/// The automatic handoff continued from the draft written before the wall (found usable:
/// [`draft::DraftAtWall::usable`]): its document (the remainder waited for; `token` cancels both),
/// then the turns since, verbatim. `None`: the draft failed while it was waited for; the
/// document is then written at the wall. The old session records the draft's request and reply
/// as it records the handoff's own.
async fn from_draft(
    agent: &AgentSession,
    mut taken: draft::DraftAtWall,
    token: &CancellationToken,
    wall: Wall,
) -> Result<Option<(String, Carried, Option<String>)>, HandoffError> {
    let Some(drafted) = taken.document(token).await? else { return Ok(None) };
    let Some((since, count)) = taken.since.take() else { return Ok(None) };
    agent.record_messages(&[drafted.request, drafted.reply])?;
    let carried = Carried { prepared: Some(count), ..Carried::gather(agent, Some(wall)) };
    Ok(Some((draft::with_turns_since(&drafted.document, &since, count), carried, None)))
}

/// The host's document for an automatic handoff at `wall` the model could not write
/// ([`fallback`]), with what is carried after it and why, in the entry's details. Nothing of the
/// failed attempts reaches the old session (they ran detached).
fn host_document(agent: &AgentSession, wall: Wall, reason: &HandoffError) -> (String, Carried, Option<String>) {
    let why = fallback::reason_text(reason);
    tracing::warn!(reason = %why, "the automatic handoff's document could not be written: the host writes it");
    let mut carried = Carried::gather(agent, Some(wall));
    let budget = fallback::turns_budget(agent.provider_config().context_window);
    let document = {
        let session = agent.session();
        fallback::document(&session.get_branch(None), &carried, &wall, &why, budget)
    };
    carried.fallback = Some(why);
    (document, carried, None)
}

/// Steps 1–3 after the start: the run and the capture. Returns the document, what the host
/// carries over, and what had to be left out of the request.
async fn generate(
    hold: &Hold,
    agent: &AgentSession,
    focus: Option<&str>,
    token: &CancellationToken,
    claim: RunClaim<'_>,
    auto: Option<Wall>,
) -> Result<(String, Carried, Option<String>), HandoffError> {
    // The request is marked as one where it is written: the chat shows it as the handoff's
    // request from the mark, whatever the instruction's text is now.
    let mut prompt = Message::user(build_prompt(focus));
    mark_handoff_request(&mut prompt, focus);
    // 2. Capture: the run's own messages are the payload of `agent_end`.
    let result = match auto {
        None => agent.run_claimed_message(claim, prompt, RUN_OPTIONS).await?,
        Some(wall) => run_fitted(hold, agent, prompt, token, claim, &wall).await?,
    };
    // 3. Cancellation check.
    if token.is_cancelled() {
        return Err(HandoffError::Cancelled);
    }
    let document = capture(&result, auto.is_some())?;
    if auto.is_some() {
        // Kept now that it succeeded: the old session shows the handoff as `:Handoff` does.
        agent.record_messages(&result.messages)?;
    }
    // What the host knows for certain, whatever the document says.
    let carried = Carried::gather(agent, auto);
    Ok((document, carried, result.elisions.map(|e| e.note())))
}

/// The automatic handoff's run: detached (nothing reaches the old session until it succeeds),
/// its request fitted to `W − H`, and trimmed further and sent again while the provider still
/// refuses it as too large, a bounded number of times.
async fn run_fitted(
    hold: &Hold,
    agent: &AgentSession,
    prompt: Message,
    token: &CancellationToken,
    claim: RunClaim<'_>,
    wall: &Wall,
) -> Result<RunResult, AgentError> {
    let window = agent.document_provider().current_config().context_window;
    let room = window.saturating_sub(agent.wall_settings().room_in(window));
    // After an overflow the request just refused was too large, whatever the window says:
    // the first attempt is already below it.
    let mut limit = match wall.reason {
        WallReason::Overflow => room.min(wall.tokens * auto::FIT_SHRINK / 100),
        WallReason::Threshold => room,
    };
    let mut claim = Some(claim);
    let mut result = RunResult::default();
    for attempt in 0..auto::FIT_ATTEMPTS {
        let claim = match claim.take() {
            Some(claim) => claim,
            None => agent.claim_run(hold, token)?,
        };
        let options = RunOptions { record: false, fit_limit: Some(limit), ..RUN_OPTIONS };
        result = agent.run_claimed_message(claim, prompt.clone(), options).await?;
        if result.failure != Some(FailureKind::Overflow) || token.is_cancelled() {
            break;
        }
        // Below what was refused (a request that fitted whole was smaller than its limit).
        let sent = result.request_tokens.unwrap_or(limit).min(limit);
        tracing::info!(attempt, sent, "the handoff request was refused as too large: trimming it");
        limit = sent * auto::FIT_SHRINK / 100;
    }
    Ok(result)
}

/// Steps 4–6: flush the old session, start a new one that records its parent, the current
/// model and the pins, inject `text` (the document and the facts), make it durable, then switch the agent
/// onto it. `facts` go into the entry's details.
/// The new session is built beside the old one and switched to only once it is complete on
/// disk, so a write error (full disk, read-only folder) leaves the agent on the old session.
/// `external`: what the new session records of the external agent it goes on on (none: ours).
fn start_new_session(hold: &Hold, agent: &AgentSession, text: &str, carried: &Carried, external: Option<SessionSetting>) -> Result<NewSession, HandoffError> {
    let carry = agent.settings_carrier();
    // The old session is locked only while what the new one takes of it is read: the new
    // session's writing and fsync (a reviewed document can be megabytes) leave the agent free
    // for the front end's other requests.
    let begun = {
        let mut session = agent.session();
        SeededSession::begin(&mut session, text, carried)?
    };
    let (next, parent_session, document_file, ledger) = begun.write(text, carried, |next| {
        carry(next)?;
        external.map_or(Ok(()), |external| external(next))
    })?;
    // Gap (nobody told): the switch is announced with its reason.
    let switched = agent.switch_to(hold, next, SwitchReason::Handoff)?;
    Ok(NewSession { session_file: switched.new, parent_session, document_file, ledger: Box::new(ledger) })
}

/// The new session a handoff of `session` continues in, on disk: its header names `session`,
/// it carries the pins, and starts with `text` (the document and what is carried) as its first
/// context, also written as `handoff.md` beside it. `settings` records what the new session
/// runs on (the model and thinking level carried over; an external agent's name). Every front
/// end and every kind of agent hands off through here. Returns the new session, the parent's
/// path, the document's file and the ledger.
pub fn seed_new_session(
    session: &mut SessionManager,
    text: &str,
    carried: &Carried,
    settings: impl FnOnce(&mut SessionManager) -> Result<(), SessionError>,
) -> Result<(SessionManager, PathBuf, PathBuf, session::ledger::Ledger), HandoffError> {
    SeededSession::begin(session, text, carried)?.write(text, carried, settings)
}

/// [`seed_new_session`] in its two steps: what it reads of the old session (under the caller's
/// lock), then the new session's writing (without it).
struct SeededSession {
    next: SessionManager,
    parent_session: PathBuf,
    pins: Vec<String>,
    ledger: session::ledger::Ledger,
}

impl SeededSession {
    /// The old session flushed, its pins and ledger read, the new session's file created
    /// beside it.
    fn begin(session: &mut SessionManager, text: &str, carried: &Carried) -> Result<SeededSession, HandoffError> {
        session.flush()?;
        let pins = session.pins();
        let ledger = ledger_of(session, text, carried);
        // Gap (no lineage): the header names the parent session file.
        let old = std::path::absolute(session.path()).unwrap_or_else(|_| session.path().to_path_buf());
        let next = SessionManager::create(session.session_dir(), session.cwd(), Some(old.to_string_lossy().into_owned()))?;
        Ok(SeededSession { next, parent_session: old, pins, ledger })
    }

    fn write(
        self,
        text: &str,
        carried: &Carried,
        settings: impl FnOnce(&mut SessionManager) -> Result<(), SessionError>,
    ) -> Result<(SessionManager, PathBuf, PathBuf, session::ledger::Ledger), HandoffError> {
        let SeededSession { mut next, parent_session, pins, ledger } = self;
        let written = (|| {
            // Gap (no model entries): carry the model and thinking level over.
            settings(&mut next)?;
            // The hunks not reviewed yet stay offered: the new session's review names them, their
            // states stay where they were recorded.
            Review::of_session(&parent_session).hand_over(&Review::of_session(next.path()))?;
            // The user's pins, as they are: every handoff of the chain carries them whole, the
            // document never has to.
            if !pins.is_empty() {
                next.set_pins(&pins)?;
            }
            // The facts are kept as the entry's details too (pi's readFiles/modifiedFiles), for the
            // handoffs after this one.
            let mut details = carried.details();
            if let Some(map) = details.as_object_mut() {
                map.insert(session::ledger::DETAILS_KEY.into(), serde_json::to_value(&ledger).unwrap_or_default());
            }
            next.append_custom_message_with_details(CUSTOM_TYPE, &wrap_document(text), true, Some(details))?;
            // Gap (new session not on disk): fsync before success is announced.
            next.flush()?;
            // Gap (document only inside sessions): also a markdown file beside the new session.
            write_document_file(next.path(), text)
        })();
        match written {
            Ok(document_file) => Ok((next, parent_session, document_file, ledger)),
            Err(e) => {
                let _ = std::fs::remove_file(next.path());
                let _ = std::fs::remove_dir_all(paths::session_side_dir(next.path()));
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42: `session/load` replayed the wrapper the model reads; the display form drops it
    /// and the facts after the document, and keeps a reviewed text as the user wrote it.
    #[test]
    fn the_shown_document_is_the_one_inside_the_wrapper_without_the_facts() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = SessionManager::create(dir.path(), Path::new("/p"), None).unwrap();
        let carried = Carried {
            facts: Facts { modified_files: vec!["src/a.rs".into()], ..Facts::default() },
            words: UserWords { task: Some("fix the parser".into()), latest: None },
            ..Carried::default()
        };
        let document = "## Goal\nShip it.";
        let shown = |session: &mut SessionManager, text: &str, carried: &Carried| {
            session.append_custom_message_with_details(CUSTOM_TYPE, text, true, Some(carried.details())).unwrap();
            let entries = session.get_entries();
            shown_document(&entries[entries.len() - 1])
        };
        let wrapped = wrap_document(&with_facts(document, &carried));
        assert!(wrapped.contains("<modified-files>") && wrapped.contains("<user-task>"), "{wrapped}");
        assert_eq!(shown(&mut session, &wrapped, &carried).as_deref(), Some(document));
        assert_eq!(shown(&mut session, &wrap_document(document), &Carried::default()).as_deref(), Some(document));
        // Edited in review: the facts as the user left them are part of what was shown.
        let edited = format!("{document}\n\n<modified-files>\nsrc/b.rs\n</modified-files>");
        assert_eq!(shown(&mut session, &wrap_document(&edited), &carried), Some(edited));
        // Not our wrapper: shown whole.
        assert_eq!(shown(&mut session, "a document of pi's", &carried).as_deref(), Some("a document of pi's"));
        session.append_message(&Message::user("hello")).unwrap();
        assert_eq!(shown_document(&session.get_entries()[session.get_entries().len() - 1]), None);
    }

    /// Issue 40: a handoff parsed each message of a large session twice (the facts, then the
    /// ledger): over half of the time at the wall. The facts and the ledger now read one parse.
    #[test]
    fn a_handoff_parses_each_message_of_the_branch_once() {
        use crate::session::entry::MESSAGE_PARSES;
        let dir = tempfile::tempdir().unwrap();
        let mut session = SessionManager::create(dir.path(), Path::new("/p"), None).unwrap();
        let call = serde_json::json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.rs"}}]});
        let result = serde_json::json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"type": "text", "text": "fn a() {}"}]});
        for _ in 0..10 {
            session.append_message(&Message::user("read a.rs")).unwrap();
            session.append_message(&serde_json::from_value(call.clone()).unwrap()).unwrap();
            session.append_message(&serde_json::from_value(result.clone()).unwrap()).unwrap();
        }
        let config = crate::agent::AgentConfig::new(crate::provider::ProviderConfig::new(
            crate::provider::Api::Openai,
            "http://127.0.0.1:9",
            "m",
        ));
        let agent = AgentSession::new(config, session);
        MESSAGE_PARSES.with(|n| n.set(0));
        let carried = Carried::gather(&agent, None);
        let ledger = ledger_of(&agent.session(), "## Goal\nfn a() {}", &carried);
        assert_eq!(MESSAGE_PARSES.with(std::cell::Cell::get), 30, "each of the 30 messages parsed once");
        assert_eq!(carried.facts.read_files, ["a.rs"]);
        assert_eq!(ledger.dropped.messages, 10, "the user's ten messages; the calls say nothing");
        assert_eq!(ledger.dropped.tool_results.count, 0, "the output is quoted");
    }

    #[test]
    fn section_check_reports_missing_ones() {
        let doc = "## Goal\nx\n## Constraints and Preferences\n## Progress\n### Done\n## Next Steps\n1.";
        assert_eq!(missing_sections(doc), vec!["Key Decisions", "Critical Context"]);
    }

    #[test]
    fn prompt_appends_trimmed_focus_only() {
        assert!(build_prompt(Some("  /review $1 ")).ends_with("\n\nAdditional focus: /review $1"));
        assert!(!build_prompt(Some("   ")).contains("Additional focus"));
        for s in SECTIONS {
            assert!(PROMPT.contains(&format!("## {s}\n")), "{s}");
        }
    }
}
