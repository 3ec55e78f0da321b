//! The handoff drafted before the wall (issue 32, `handoff.prepare`): when the next request's
//! estimate enters a band below the wall's threshold, the document is written by a detached
//! request over the conversation's own prefix (the same system prompt, messages and tool
//! definitions as the work's requests, so the provider's prompt cache hits), then the handoff
//! instruction, while the agent keeps working. The draft lives here, in memory: never a message
//! of the session file, at most one per crossing of the band, and thrown away when the session
//! or the model changes.
//!
//! At the wall the automatic handoff continues from it ([`Drafts::take`]): the pause is the
//! host's own work when the draft is ready, the remainder of the draft when it is not. What the
//! conversation added after the draft is carried verbatim after it (the turns since are few and
//! recent; a model update would cost another reply's time at the wall), so nothing read or
//! decided after the draft is lost; when they are more than [`since_budget`], the draft is not
//! used and the document is written at the wall as without one.

use std::sync::{Arc, Mutex, Weak};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{build_prompt, capture, fallback, HandoffError, RUN_OPTIONS};
use crate::agent::events::DraftStatus;
use crate::agent::{fit, lock, AgentEvent, AgentSession, RunOptions, Wall};
use crate::message::{ContextMessage, Message, Role};
use crate::session::{self, mark_handoff_request, SessionEntry};

/// Whether the handoff is drafted before the wall (`handoff.prepare`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prepare {
    /// Drafted in the band below the wall, while the work goes on.
    Background,
    /// Written at the wall only.
    Off,
}

impl Prepare {
    pub const ALL: [Prepare; 2] = [Prepare::Background, Prepare::Off];

    pub fn as_str(self) -> &'static str {
        match self {
            Prepare::Background => "background",
            Prepare::Off => "off",
        }
    }

    /// The default for a provider (`copilot`: GitHub Copilot's): drafting is cheap where the
    /// provider caches prompts (the draft's prefix is a cache hit); on Copilot every request is
    /// a premium request, so nothing is sent that the user did not cause.
    pub fn default_for(copilot: bool) -> Prepare {
        if copilot {
            Prepare::Off
        } else {
            Prepare::Background
        }
    }
}

impl std::str::FromStr for Prepare {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Prepare::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown handoff.prepare {s:?} (background, off)"))
    }
}

/// The band starts at this share (percent) of the wall's threshold. A draft takes a reply's
/// time (a 500-token document at 100 tokens/s: about 5 s), while the work goes on; 30% of the
/// threshold is room for a dozen turns that each read a thousand tokens (§15c of
/// doc/benchmarks.md: at 80% the wall still waited for the draft's last 0.4 s).
pub const BAND_START: u64 = 70;

/// Characters of one message the turns since a draft quote at most: a whole file read after the
/// draft goes on into the new session as read (a read shows 50 KB at most).
const SINCE_MESSAGE_CHARS: usize = 50 * 1024;

/// The tokens of the turns since a draft that go on verbatim after it: the band (what a draft
/// begun at its start is followed by until the wall) and a tenth of the window for the turn
/// that crosses the wall. The new session starts below its own band.
pub(super) fn since_budget(wall: &Wall) -> usize {
    let band = wall.threshold - wall.threshold * BAND_START / 100;
    usize::try_from(band + wall.window / 10).unwrap_or(usize::MAX)
}

/// Why the draft is written now: the focus of its request.
const DRAFT_FOCUS: &str = "This handoff is prepared ahead: the conversation is nearing the model's context window and the work goes on meanwhile. What happens after this point is carried verbatim after the document, so describe the state as it is now. Never list writing a handoff as a step.";

/// The draft's document, or why there is none.
type Written = Result<Drafted, String>;

/// A draft the model wrote.
#[derive(Clone, Debug)]
pub(super) struct Drafted {
    /// The request (marked as the handoff's) and the reply, as the old session records them
    /// once the draft is used.
    pub request: Message,
    pub reply: Message,
    pub document: String,
}

/// The draft of one session and model: being written, or written.
#[derive(Debug)]
struct PreparedDraft {
    session_id: String,
    model: String,
    /// The last entry of the branch the draft was written over (`None`: an empty session).
    upto: Option<String>,
    cancel: CancellationToken,
    written: watch::Receiver<Option<Written>>,
}

#[derive(Debug, Default)]
struct State {
    /// `None`: the provider's default ([`Prepare::default_for`]).
    mode: Option<Prepare>,
    /// The session whose estimate is in the band (the crossing a draft was considered for).
    in_band: Option<String>,
    draft: Option<PreparedDraft>,
}

/// The drafts of an agent session: at most one, for the session and model in force.
#[derive(Debug, Default)]
pub struct Drafts {
    state: Mutex<State>,
}

/// A draft taken at the wall: what it was written over, and its document when written.
pub(super) struct DraftAtWall {
    upto: Option<String>,
    cancel: CancellationToken,
    written: watch::Receiver<Option<Written>>,
    /// The turns since the draft, quoted, and their count: set by [`DraftAtWall::usable`] (the work
    /// has stopped at the wall, so they do not change after).
    pub(super) since: Option<(String, usize)>,
}

impl Drafts {
    pub fn set_mode(&self, mode: Option<Prepare>) {
        lock(&self.state).mode = mode;
    }

    /// The mode in force for the agent's provider.
    pub fn mode(&self, agent: &AgentSession) -> Prepare {
        let set = lock(&self.state).mode;
        set.unwrap_or_else(|| Prepare::default_for(agent.provider_config().copilot.is_some()))
    }

    /// The watcher the agent tells each estimate (`AgentSession::set_estimate_watcher`).
    pub fn watcher(self: &Arc<Self>, agent: &Arc<AgentSession>) -> crate::agent::EstimateWatcher {
        let drafts = Arc::downgrade(self);
        let agent: Weak<AgentSession> = Arc::downgrade(agent);
        Arc::new(move |tokens, threshold| {
            if let (Some(drafts), Some(agent)) = (drafts.upgrade(), agent.upgrade()) {
                drafts.observe(&agent, tokens, threshold);
            }
        })
    }

    /// The next request's estimate is `tokens` below the wall's `threshold`: on entering the
    /// band (once per crossing), a draft starts unless one is there for this session and model.
    pub fn observe(self: &Arc<Self>, agent: &Arc<AgentSession>, tokens: u64, threshold: u64) {
        let session_id = agent.session().session_id().to_string();
        {
            let mut state = lock(&self.state);
            if tokens < threshold * BAND_START / 100 {
                if state.in_band.as_deref() == Some(session_id.as_str()) {
                    state.in_band = None;
                }
                return;
            }
            if state.in_band.as_deref() == Some(session_id.as_str()) {
                return;
            }
            state.in_band = Some(session_id.clone());
        }
        if self.mode(agent) == Prepare::Off {
            return;
        }
        self.start(agent, session_id, tokens);
    }

    /// Writes a draft over the context as it is now, in a task of its own.
    fn start(self: &Arc<Self>, agent: &Arc<AgentSession>, session_id: String, tokens: u64) {
        let model = agent.provider_config().model;
        // The context and where it ends, read together: what comes after is "since the draft".
        let (context, upto) = {
            let context = agent.request_messages();
            (context, agent.session().leaf_id().map(str::to_string))
        };
        let cancel = CancellationToken::new();
        let (tx, written) = watch::channel(None);
        {
            let mut state = lock(&self.state);
            if let Some(old) = state.draft.take() {
                old.cancel.cancel();
            }
            state.draft = Some(PreparedDraft { session_id: session_id.clone(), model: model.clone(), upto, cancel: cancel.clone(), written });
        }
        agent.emit(AgentEvent::HandoffDraft(DraftStatus::Writing { tokens }));
        let drafts = self.clone();
        let agent = agent.clone();
        crate::task::spawn("the handoff's draft", async move {
            let result = write(&agent, context, &cancel).await;
            let status = match &result {
                Ok(drafted) => {
                    let usage = drafted.reply.usage.clone().unwrap_or_default();
                    DraftStatus::Ready { input: usage.input + usage.cache_read + usage.cache_write, cached: usage.cache_read, output: usage.output }
                }
                Err(message) => DraftStatus::Failed { message: message.clone() },
            };
            // Told only while it is still the draft of the session and model in force.
            let current = {
                let state = lock(&drafts.state);
                state.draft.as_ref().is_some_and(|d| d.session_id == session_id && d.model == model && d.cancel == cancel)
            };
            if let Err(reason) = &result {
                tracing::info!(%reason, "the handoff's draft was not written");
            }
            let _ = tx.send(Some(result));
            if current && !cancel.is_cancelled() {
                agent.emit(AgentEvent::HandoffDraft(status));
            }
        });
    }

    /// Throws the draft away (a model or session switch), telling front ends when there was one.
    /// The crossing of the band it was written for stays spent: no other draft is written
    /// before the estimate leaves the band and enters it again.
    pub fn discard(&self, agent: &AgentSession) {
        let draft = lock(&self.state).draft.take();
        if let Some(draft) = draft {
            draft.cancel.cancel();
            agent.emit(AgentEvent::HandoffDraft(DraftStatus::Discarded));
        }
    }

    /// Whether a draft of the session and model in force exists (written or being written).
    pub fn exists(&self, agent: &AgentSession) -> bool {
        let (session_id, model) = (agent.session().session_id().to_string(), agent.provider_config().model);
        lock(&self.state).draft.as_ref().is_some_and(|d| d.session_id == session_id && d.model == model)
    }

    /// The draft of the session and model in force, taken for the wall (another is dropped).
    pub(super) fn take(&self, agent: &AgentSession) -> Option<DraftAtWall> {
        let (session_id, model) = (agent.session().session_id().to_string(), agent.provider_config().model);
        let draft = lock(&self.state).draft.take()?;
        if draft.session_id != session_id || draft.model != model {
            draft.cancel.cancel();
            return None;
        }
        Some(DraftAtWall { upto: draft.upto, cancel: draft.cancel, written: draft.written, since: None })
    }
}

impl DraftAtWall {
    /// The draft's document once written (the remainder is waited for), `None` when it failed;
    /// `cancel` (the handoff's) stops the draft too.
    pub(super) async fn document(&mut self, cancel: &CancellationToken) -> Result<Option<Drafted>, HandoffError> {
        let written = tokio::select! {
            written = self.written.wait_for(Option::is_some) => written.ok().and_then(|w| w.clone()),
            () = cancel.cancelled() => {
                self.cancel.cancel();
                return Err(HandoffError::Cancelled);
            }
        };
        Ok(written.and_then(Result::ok))
    }

    /// Whether the draft can start the new session at `wall`: it has not failed, and the turns
    /// since it fit the budget now (they only grow, and the work has stopped at the wall). A
    /// draft that cannot is stopped, and the wall neither waits for it nor says it goes on from it.
    pub(super) fn usable(&mut self, agent: &AgentSession, wall: &Wall) -> bool {
        let failed = matches!(self.written.borrow().as_ref(), Some(Err(_)));
        if !failed {
            let session = agent.session();
            self.since = self.quote_since(&session.get_branch(None), since_budget(wall));
        }
        if self.since.is_none() {
            tracing::info!(failed, "the handoff's draft is not used (it failed, or the turns since are more than the verbatim budget): the document is written at the wall");
            self.cancel.cancel();
        }
        self.since.is_some()
    }

    /// The turns after the draft's point, quoted verbatim, oldest first: `None` when they are
    /// more than `budget` tokens (the draft is then too old to carry them).
    fn quote_since(&self, branch: &[&SessionEntry], budget: usize) -> Option<(String, usize)> {
        let start = match &self.upto {
            Some(id) => branch.iter().position(|e| e.id.as_str() == id)? + 1,
            None => 0,
        };
        let quoted: Vec<String> = branch[start..]
            .iter()
            .filter(|e| matches!(e.message_role(), Some(Role::User | Role::Assistant | Role::ToolResult)))
            .filter_map(|e| e.message())
            .filter(|m| m.role != Role::User || session::author(m).is_user())
            .map(|m| fallback::quote(&m, SINCE_MESSAGE_CHARS))
            .collect();
        let tokens: usize = quoted.iter().map(|q| fit::estimate_text_tokens(q)).sum();
        (tokens <= budget).then(|| (quoted.join("\n\n"), quoted.len()))
    }
}

/// The draft's text and what follows it: the turns since, verbatim.
pub(super) fn with_turns_since(document: &str, since: &str, count: usize) -> String {
    if count == 0 {
        return document.to_string();
    }
    format!(
        "{document}\n\n## Since this document was written\nThe conversation went on after the document above was written; its {count} messages since, verbatim, oldest first (they supersede the document where they differ):\n\n<turns-since-document>\n{since}\n</turns-since-document>"
    )
}

/// The draft's request and reply: detached, over `context`, fitted below the wall's room.
async fn write(agent: &AgentSession, context: Vec<ContextMessage>, cancel: &CancellationToken) -> Written {
    let mut request = Message::user(build_prompt(Some(DRAFT_FOCUS)));
    mark_handoff_request(&mut request, Some(DRAFT_FOCUS));
    let window = agent.document_provider().current_config().context_window;
    let room = window.saturating_sub(agent.wall_settings().room_in(window));
    let options = RunOptions { record: false, fit_limit: Some(room), ..RUN_OPTIONS };
    let result = agent.reply_detached(context, request.clone(), options, cancel).await;
    let reply = result.last_assistant().cloned().ok_or_else(|| "no reply".to_string())?;
    let document = capture(&result, false).map_err(|e| e.to_string())?;
    Ok(Drafted { request, reply, document })
}
