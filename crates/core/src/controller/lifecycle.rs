//! The prompt's life, as one state machine: every [`Phase`] a prompt can be in, each transition
//! one function, and the one definition of "busy" ([`Lifecycle::is_busy`]) that the host refuses
//! by, the chat shows (an `AgentEvent::Lifecycle` at every change) and the CLI waits on.
//!
//! Who holds the agent holds a [`PhaseGuard`]: a guard, taken once, that returns the lifecycle to
//! [`Phase::Idle`] when it is dropped — when its task ends, and also when it panicked or was
//! aborted — so nothing stays busy forever. The run slot (`RunClaim`) and the handoff's abort
//! controller are guards of the same kind one layer down.
//!
//! The automatic handoff and the review are part of the machine: the automatic handoff is a
//! phase of a prompt ([`Phase::AutoHandoff`]), the review is a document waiting beside the phase
//! ([`Review`]), its commit a phase ([`Phase::Committing`]) in which a prompt waits and is sent
//! after the commit, into the new session.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::text;
use super::{FrontEndTexts, Level, Notice, InputOutcome};
use crate::agent::{lock, AgentError, AgentEvent, AgentSession, Hold, RunOptions, RunResult, Wall, WallReason};
use crate::handoff::{self, auto, AutoHandoff, Handoff, HandoffOptions, HandoffOutcome, Refusal};
use crate::message::Message;

/// Every state a prompt can be in. Only `Idle` is not busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Nothing holds the agent: a prompt, a handoff or a session command may start.
    Idle,
    /// A user's prompt is being answered: its runs, the moments between them, and the runs
    /// after an automatic handoff (what was typed meanwhile, the host's continuation). Input
    /// typed now steers the running response, or waits for the next run.
    Prompting,
    /// Within a prompt, the automatic handoff at the wall writes its document. Input typed now
    /// waits and goes first into the new session.
    AutoHandoff,
    /// A handoff the user asked for writes its document: a prompt is refused (the front end
    /// says how to cancel), a command too.
    Handoff,
    /// A reviewed document becomes the new session (written, then switched to). Input typed now
    /// waits and is sent after the commit, into the new session.
    Committing,
    /// A session command (`/new`, resume, a model switch) changes what the agent works on.
    Switching,
}

impl Phase {
    /// The name front ends get (`lifecycle` record).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Prompting => "prompting",
            Phase::AutoHandoff => "auto_handoff",
            Phase::Handoff => "handoff",
            Phase::Committing => "committing",
            Phase::Switching => "switching",
        }
    }
}

/// A handoff document waiting for the user's review (`:Handoff!`, or `handoff.auto = "review"`
/// at the wall). Not a phase: the agent is free meanwhile (a prompt runs in the old session);
/// only another handoff is refused. The draft itself is the pipeline's ([`Handoff`]); this is
/// what the prompt sends once it is written.
#[derive(Debug, Default)]
struct Review {
    /// After an automatic handoff in review: what to send in the new session.
    after: Option<Queued>,
}

/// Input waiting to be run.
#[derive(Clone, Debug)]
enum Queued {
    /// What the user typed: templates and skills expand when it runs.
    Typed(String),
    /// A message as it goes out (one a run did not send, steering, the host's continuation).
    Ready(Box<Message>),
}

/// The machine's state: one lock, so a prompt's arrival and a phase's end never cross.
#[derive(Debug)]
struct State {
    phase: Phase,
    /// Input typed while the phase could not take it, in order.
    waiting: VecDeque<Queued>,
    review: Review,
}

/// What the guards share: the state and where its changes are told.
struct Shared {
    state: Mutex<State>,
    agent: Arc<AgentSession>,
}

impl Shared {
    /// Sets the phase and tells front ends (called with the state locked).
    fn set(&self, state: &mut State, phase: Phase) {
        if state.phase != phase {
            state.phase = phase;
            self.agent.emit(AgentEvent::Lifecycle { phase: phase.name(), busy: phase != Phase::Idle });
        }
    }
}

/// A phase held by whoever drives the agent now. Dropping it returns the lifecycle to `Idle`,
/// whatever ended the holder (a return, a panic, an abort). It carries the agent's [`Hold`]:
/// a run or a session switch takes that as an argument, so none happens without a phase held.
pub struct PhaseGuard {
    shared: Arc<Shared>,
    ended: bool,
    hold: Hold,
}

impl PhaseGuard {
    fn new(shared: &Arc<Shared>) -> Self {
        PhaseGuard { shared: shared.clone(), ended: false, hold: Hold::new() }
    }

    /// What a run or a session switch takes as its proof.
    pub(crate) fn hold(&self) -> &Hold {
        &self.hold
    }

    /// The holder moves on to `phase` (a prompt's automatic handoff and back).
    fn enter(&self, phase: Phase) {
        let mut state = lock(&self.shared.state);
        self.shared.set(&mut state, phase);
    }

    /// The end of a prompt's run: what waits first, or the end of the phase (under one lock, so
    /// input queued now is either taken here or finds the lifecycle idle).
    fn next_or_end(&mut self) -> Option<Queued> {
        let mut state = lock(&self.shared.state);
        if let Some(next) = state.waiting.pop_front() {
            self.shared.set(&mut state, Phase::Prompting);
            return Some(next);
        }
        // Queued as steering after the last run looked for it (the run has ended: no other
        // run can hold the agent while this guard does).
        if let Some(next) = self.shared.agent.state().steering.pop_front() {
            return Some(Queued::Ready(Box::new(next)));
        }
        self.shared.set(&mut state, Phase::Idle);
        self.ended = true;
        None
    }
}

impl Drop for PhaseGuard {
    fn drop(&mut self) {
        if !self.ended {
            let mut state = lock(&self.shared.state);
            self.shared.set(&mut state, Phase::Idle);
        }
    }
}

/// What a prompt's arrival leads to.
enum Admitted {
    /// It starts a prompt: the caller holds the phase.
    Start(PhaseGuard),
    /// It waits (steering, or the queue): told as a notice already.
    Queued,
    /// It is refused: told as a notice already.
    Refused,
}

/// What follows a run that stopped at the wall.
enum AfterWall {
    /// Run this in the session now in force.
    Run(Queued, RunOptions),
    /// Nothing more: the prompt ends here, at the wall.
    Stop,
    /// Nothing more: the handoff is done (after a final answer) or waits for review.
    HandedOff,
}

/// The guards of one prompt's automatic handoffs.
#[derive(Default)]
struct AutoBudget {
    handoffs: u32,
    overflow_recovered: bool,
    /// The user cancelled one, or one failed: no more for this prompt.
    given_up: bool,
}

/// The prompt's lifecycle of one agent session.
pub struct Lifecycle {
    shared: Arc<Shared>,
    handoff: Handoff,
    texts: FrontEndTexts,
    /// The front end's configured review default, for a handoff that does not say.
    review_by_default: AtomicBool,
    /// What happens at the wall (`handoff.auto`).
    auto: Mutex<AutoHandoff>,
}

impl Lifecycle {
    /// The lifecycle that drives `agent`: the one already driving it (its texts stay), else a
    /// new one with `texts`. One per agent, so that one phase says what the agent does: every
    /// controller of an agent shares it.
    pub fn of(agent: &Arc<AgentSession>, texts: FrontEndTexts) -> Arc<Self> {
        let driver = agent.driver_or_else(|| Arc::new(Self::new(agent.clone(), texts.clone())));
        match driver.downcast::<Lifecycle>() {
            Ok(lifecycle) => lifecycle,
            // The engine has no other driver: unreachable, but not worth a panic.
            Err(_) => Arc::new(Self::new(agent.clone(), texts)),
        }
    }

    fn new(agent: Arc<AgentSession>, texts: FrontEndTexts) -> Self {
        let state = State { phase: Phase::Idle, waiting: VecDeque::new(), review: Review::default() };
        let handoff = Handoff::new();
        // The agent tells the drafts how near the wall each request is (`handoff.prepare`).
        agent.set_estimate_watcher(Some(handoff.drafts().watcher(&agent)));
        Self {
            shared: Arc::new(Shared { state: Mutex::new(state), agent }),
            handoff,
            texts,
            review_by_default: AtomicBool::new(false),
            auto: Mutex::new(AutoHandoff::default()),
        }
    }

    pub fn agent(&self) -> &Arc<AgentSession> {
        &self.shared.agent
    }

    pub fn set_review_by_default(&self, review: bool) {
        self.review_by_default.store(review, Ordering::Relaxed);
    }

    pub fn set_auto_handoff(&self, mode: AutoHandoff) {
        *lock(&self.auto) = mode;
    }

    /// Whether the handoff is drafted before the wall (`None`: the provider's default).
    pub fn set_prepare(&self, mode: Option<handoff::Prepare>) {
        self.handoff.drafts().set_mode(mode);
    }

    /// Whether the handoff is drafted before the wall, for the provider in force.
    pub fn prepare(&self) -> handoff::Prepare {
        self.handoff.drafts().mode(&self.shared.agent)
    }

    /// Throws the draft written before the wall away (the model or the session changed).
    pub fn discard_draft(&self) {
        self.handoff.drafts().discard(&self.shared.agent);
    }

    /// Whether a draft of the session and model in force exists (written or being written).
    pub fn has_draft(&self) -> bool {
        self.handoff.drafts().exists(&self.shared.agent)
    }

    fn auto_handoff(&self) -> AutoHandoff {
        *lock(&self.auto)
    }

    /// The phase now.
    pub fn phase(&self) -> Phase {
        lock(&self.shared.state).phase
    }

    /// The one "busy": anything but [`Phase::Idle`].
    pub fn is_busy(&self) -> bool {
        self.phase() != Phase::Idle
    }

    pub fn is_generating_handoff(&self) -> bool {
        self.handoff.is_generating()
    }

    pub fn is_reviewing(&self) -> bool {
        self.handoff.is_reviewing()
    }

    fn notice(&self, level: Level, message: impl Into<String>) {
        self.shared.agent.emit(AgentEvent::Notice(Notice::new(level, message)));
    }

    /// Idle → `phase`: the guard, or the phase in the way.
    pub fn take(&self, phase: Phase) -> Result<PhaseGuard, Phase> {
        let mut state = lock(&self.shared.state);
        if state.phase != Phase::Idle {
            return Err(state.phase);
        }
        self.shared.set(&mut state, phase);
        Ok(PhaseGuard::new(&self.shared))
    }

    /// Cancels the handoff being generated, if any.
    pub fn abort_handoff(&self) {
        self.handoff.abort();
    }

    /// Stops what runs: the handoff being generated and the response.
    pub fn abort(&self) {
        self.handoff.abort();
        self.shared.agent.abort();
    }

    /// The pre-flight guard of a handoff the user asks for (the pipeline applies its own part,
    /// the message count, again).
    pub fn preflight(&self) -> Result<(), Refusal> {
        if self.handoff.is_reviewing() {
            return Err(Refusal::ReviewPending);
        }
        handoff::preflight(&self.shared.agent, self.is_busy())
    }

    /// Idle → [`Phase::Handoff`] → Idle: the handoff the user asked for. With `review` (or, when
    /// it does not say, the front end's default) the document then waits for the user.
    pub async fn handoff(&self, options: HandoffOptions) -> HandoffOutcome {
        let review = options.review.unwrap_or_else(|| self.review_by_default.load(Ordering::Relaxed));
        if let Err(reason) = self.preflight() {
            return HandoffOutcome::Refused { reason };
        }
        let Ok(held) = self.take(Phase::Handoff) else {
            return HandoffOutcome::Refused { reason: Refusal::Busy };
        };
        self.handoff.run(held.hold(), &self.shared.agent, options.focus.as_deref(), review, options.to.as_deref()).await
    }

    /// Idle → [`Phase::Committing`] → Prompting or Idle: the user wrote the reviewed document.
    /// The new session starts with the text as written; then what the review kept (after an
    /// automatic handoff) and what was typed during the commit run in it, in a task.
    ///
    /// The phase is taken at the call, so input that comes after it waits for the new session
    /// whenever the returned future runs; the commit's file work (writing, fsyncing, the
    /// document beside it) runs on a blocking thread, never on the caller's (a front end's
    /// handler) nor a runtime worker. The outcome, and its `handoff_end`, come after the fsync.
    pub fn commit_review(self: &Arc<Self>, text: &str) -> impl std::future::Future<Output = HandoffOutcome> + Send + 'static {
        let taken = if !self.handoff.is_reviewing() {
            Err(Refusal::NoReview)
        } else {
            // The draft is kept for another try.
            self.take(Phase::Committing).map_err(|_| Refusal::Busy)
        };
        let (lifecycle, text) = (self.clone(), text.to_string());
        async move {
            let held = match taken {
                Ok(held) => held,
                Err(reason) => return HandoffOutcome::Refused { reason },
            };
            let committing = lifecycle.clone();
            // The guard goes with the file work and comes back with its outcome; a panic there
            // drops it, which returns the lifecycle to Idle.
            let done = tokio::task::spawn_blocking(move || {
                let outcome = committing.handoff.commit(held.hold(), &committing.shared.agent, &text);
                (held, outcome)
            })
            .await;
            match done {
                Ok((held, outcome)) => lifecycle.after_commit(held, outcome),
                Err(e) => HandoffOutcome::Failed { message: format!("the commit stopped: {e}") },
            }
        }
    }

    /// After a commit: Idle, or Prompting with what runs first in the new session.
    fn after_commit(self: &Arc<Self>, mut held: PhaseGuard, outcome: HandoffOutcome) -> HandoffOutcome {
        let first = {
            let mut state = lock(&self.shared.state);
            let after = match outcome {
                HandoffOutcome::Done { .. } => state.review.after.take(),
                _ => None,
            };
            if after.is_none() && state.waiting.is_empty() {
                self.shared.set(&mut state, Phase::Idle);
                held.ended = true;
                return outcome;
            }
            self.shared.set(&mut state, Phase::Prompting);
            match after {
                Some(after) => after,
                None => state.waiting.pop_front().unwrap_or(Queued::Ready(Box::new(auto::continuation()))),
            }
        };
        let lifecycle = self.clone();
        crate::task::spawn("the prompt after a review", async move {
            let options = lifecycle.prompt_options();
            if let InputOutcome::Prompt(Err(e)) = lifecycle.run_sequence(held, first, options).await {
                lifecycle.notice(Level::Error, format!("The prompt failed: {e}"));
            }
        });
        outcome
    }

    /// The user quit the review without writing: nothing is created (after an automatic
    /// handoff, nothing is sent either).
    pub fn discard_review(&self) -> bool {
        lock(&self.shared.state).review.after = None;
        self.handoff.discard(&self.shared.agent)
    }

    /// A user prompt's run options: it watches the wall unless automatic handoffs are off.
    fn prompt_options(&self) -> RunOptions {
        RunOptions { watch_wall: self.auto_handoff() != AutoHandoff::Off, ..RunOptions::default() }
    }

    /// A prompt arrives: Idle → [`Phase::Prompting`] (the caller runs it), or it steers the
    /// running response, or waits for the phase to take it, or is refused.
    fn admit(&self, text: &str) -> Admitted {
        let mut state = lock(&self.shared.state);
        let agent = &self.shared.agent;
        match state.phase {
            Phase::Idle => {
                self.shared.set(&mut state, Phase::Prompting);
                Admitted::Start(PhaseGuard::new(&self.shared))
            }
            Phase::Prompting if agent.is_busy() => {
                agent.steer(text);
                self.notice(Level::Info, text::QUEUED);
                Admitted::Queued
            }
            Phase::Prompting | Phase::AutoHandoff | Phase::Committing => {
                let new_session = state.phase != Phase::Prompting;
                state.waiting.push_back(Queued::Typed(text.to_string()));
                self.notice(Level::Info, if new_session { text::QUEUED_FOR_NEW_SESSION } else { text::QUEUED });
                Admitted::Queued
            }
            Phase::Handoff => {
                self.notice(Level::Warn, self.texts.prompt_during_handoff.clone());
                Admitted::Refused
            }
            Phase::Switching => {
                self.notice(Level::Warn, text::busy(text::doing::SEND_PROMPT));
                Admitted::Refused
            }
        }
    }

    /// Idle → [`Phase::Prompting`] → Idle: one run of `text` with the caller's options, and
    /// nothing after it (no handoff at the wall, nothing queued is sent): for a caller that
    /// drives the agent itself (a benchmark, a test), through the phase all the same. `Busy`
    /// when the lifecycle is not idle.
    pub async fn run(&self, text: &str, options: RunOptions) -> Result<RunResult, AgentError> {
        let held = self.take(Phase::Prompting).map_err(|_| AgentError::Busy)?;
        self.shared.agent.prompt(held.hold(), text, options).await
    }

    /// A prompt the user typed, run to its end (with what follows it), or queued, or refused.
    pub async fn prompt(&self, text: &str) -> InputOutcome {
        match self.admit(text) {
            Admitted::Start(held) => self.run_sequence(held, Queued::Typed(text.to_string()), self.prompt_options()).await,
            Admitted::Queued => InputOutcome::Steered,
            Admitted::Refused => InputOutcome::Nothing,
        }
    }

    /// [`Phase::Prompting`] until nothing is left: `first` and what follows it (the runs after
    /// each automatic handoff, and what was typed meanwhile). `held` ends with it.
    async fn run_sequence(&self, mut held: PhaseGuard, first: Queued, options: RunOptions) -> InputOutcome {
        let mut next = Some((first, options));
        let mut budget = AutoBudget::default();
        let mut last = None;
        while let Some((queued, options)) = next.take() {
            // No run starts but through a phase guard, and this one is held here: the agent is
            // free (a handoff's run ends before its phase does).
            let mut result = match self.run_queued(&held, &queued, options).await {
                Ok(result) => result,
                Err(e) => return InputOutcome::Prompt(Err(e)),
            };
            if let Some(wall) = result.wall {
                match self.at_wall(&held, wall, &result, &mut budget).await {
                    AfterWall::Run(queued, options) => {
                        last = Some(result);
                        next = Some((queued, options));
                        continue;
                    }
                    AfterWall::HandedOff => result.wall = None,
                    AfterWall::Stop => {}
                }
            }
            let options = if budget.given_up { RunOptions::default() } else { self.prompt_options() };
            last = Some(result);
            next = held.next_or_end().map(|m| (m, options));
        }
        match last {
            Some(result) => InputOutcome::Prompt(Ok(result)),
            None => InputOutcome::Nothing,
        }
    }

    /// One run of the prompt: typed input goes through template expansion.
    async fn run_queued(&self, held: &PhaseGuard, queued: &Queued, options: RunOptions) -> Result<RunResult, AgentError> {
        match queued {
            Queued::Typed(text) => self.shared.agent.prompt(held.hold(), text, options).await,
            Queued::Ready(message) => self.shared.agent.prompt_message(held.hold(), Message::clone(message), options).await,
        }
    }

    /// Prompting → [`Phase::AutoHandoff`] → Prompting: a run stopped at the wall hands off
    /// (within the prompt's guards); returns what runs next — what was queued, else the host's
    /// continuation when work was in flight.
    async fn at_wall(&self, held: &PhaseGuard, wall: Wall, result: &RunResult, budget: &mut AutoBudget) -> AfterWall {
        let agent = &self.shared.agent;
        // What the run did not send waits first (it was typed before anything queued now);
        // steering and follow-ups the run left too: a session switch would forget them.
        {
            let mut state = lock(&self.shared.state);
            let mut unsent: Vec<Message> = result.unsent.clone();
            {
                let mut agent_state = agent.state();
                unsent.extend(agent_state.steering.drain(..));
                unsent.extend(agent_state.follow_up.drain(..));
            }
            for message in unsent.into_iter().rev() {
                state.waiting.push_front(Queued::Ready(Box::new(message)));
            }
        }
        let send_anyway = RunOptions { send_first: true, ..self.prompt_options() };
        if budget.given_up {
            return self.resume_without_handoff(send_anyway);
        }
        if wall.reason == WallReason::Overflow && budget.overflow_recovered {
            self.notice(Level::Error, text::OVERFLOW_AGAIN);
            return self.resume_without_handoff(RunOptions::default());
        }
        if budget.handoffs >= auto::MAX_PER_PROMPT {
            self.notice(Level::Warn, text::TOO_MANY_AUTO_HANDOFFS);
            return AfterWall::Stop;
        }
        let review = self.auto_handoff() == AutoHandoff::Review;
        held.enter(Phase::AutoHandoff);
        let outcome = self.handoff.run_auto(held.hold(), agent, wall, review).await;
        held.enter(Phase::Prompting);
        let continuation = || wall.in_flight.then(|| Queued::Ready(Box::new(auto::continuation())));
        match outcome {
            HandoffOutcome::Done { .. } => {
                budget.handoffs += 1;
                budget.overflow_recovered |= wall.reason == WallReason::Overflow;
                let queued = lock(&self.shared.state).waiting.pop_front();
                let typed = queued.is_some();
                let Some(next) = queued.or_else(continuation) else { return AfterWall::HandedOff };
                // A new session that starts at the wall would hand off again at once: the host
                // does not go on (what the user typed is still sent, as they asked).
                let probe = match &next {
                    Queued::Typed(text) => Message::user(text.as_str()),
                    Queued::Ready(message) => Message::clone(message),
                };
                let tokens = agent.next_request_tokens(std::slice::from_ref(&probe));
                if tokens > agent.wall_threshold() {
                    if typed {
                        lock(&self.shared.state).waiting.push_front(next);
                    }
                    self.notice(Level::Warn, text::document_at_the_wall(&self.texts));
                    budget.given_up = true;
                    return self.resume_without_handoff(send_anyway);
                }
                AfterWall::Run(next, self.prompt_options())
            }
            HandoffOutcome::Review { .. } => {
                let mut state = lock(&self.shared.state);
                // What else waits is sent after it.
                state.review.after = state.waiting.pop_front().or_else(continuation);
                AfterWall::HandedOff
            }
            HandoffOutcome::Refused { reason: Refusal::NothingToHandOff } => {
                // Nothing to hand off (a first prompt that alone passes the wall): it is sent.
                budget.given_up = true;
                self.resume_without_handoff(send_anyway)
            }
            _ => {
                // Cancelled or failed (its end was told): the old session goes on as it was;
                // what waits is sent there, without another handoff for this prompt.
                budget.given_up = true;
                self.resume_without_handoff(RunOptions { watch_wall: false, ..RunOptions::default() })
            }
        }
    }

    /// After the wall without a (new) handoff: what waits is sent in the session in force.
    fn resume_without_handoff(&self, options: RunOptions) -> AfterWall {
        match lock(&self.shared.state).waiting.pop_front() {
            Some(next) => AfterWall::Run(next, options),
            None => AfterWall::Stop,
        }
    }
}
