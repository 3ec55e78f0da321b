//! The wall: the point where the next request would leave no room to write a handoff. The run
//! loop checks it at three boundaries (before a prompt is sent, after each complete tool batch,
//! after the final reply) and stops there with a [`Wall`]; an overflow error is a wall too. What
//! happens next (an automatic handoff) is the caller's: the agent only says where it stopped.
//!
//! The rule (`doc/design.md`, "At the wall"): the next request is estimated as the larger of the
//! last reply's reported usage plus everything appended since, and the whole context's estimate;
//! it hits the wall above `W − max(16384, 15% of W) − H` (`H`: the room the document needs),
//! never above 90% of `W`.

use serde::{Deserialize, Serialize};

use super::*;
use crate::session::SessionEntry;

/// Room the handoff document needs, in tokens, unless configured.
pub const DEFAULT_HANDOFF_ROOM: u64 = 8192;
/// Tokens kept free below the window whatever its size (15% of it when that is more).
const MIN_RESERVE: u64 = 16384;

/// Where the wall is: computed from the window (the default), or set as a share of it or a
/// token count (`handoff.threshold`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Threshold {
    #[default]
    #[serde(skip)]
    Auto,
    /// A share of the window (0 < x ≤ 1) or, above 1, a count of tokens.
    Set(f64),
}

/// How the wall is placed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WallSettings {
    pub threshold: Threshold,
    /// `H`: the room the handoff document needs.
    pub room: u64,
}

impl Default for WallSettings {
    fn default() -> Self {
        Self { threshold: Threshold::Auto, room: DEFAULT_HANDOFF_ROOM }
    }
}

impl WallSettings {
    /// The room the document is given in a window of `window` tokens: `H`, but at most a quarter
    /// of a small window (a local model with 8k tokens cannot keep 8k free).
    pub fn room_in(&self, window: u64) -> u64 {
        self.room.min(window / 4)
    }

    /// `T` for a window of `window` tokens. For a small window, where the reserve and the room
    /// leave less than half of it, half of it; never above 90% of it.
    pub fn threshold(&self, window: u64) -> u64 {
        let cap = window * 9 / 10;
        let set = match self.threshold {
            Threshold::Set(share) if share > 0.0 && share <= 1.0 => Some((window as f64 * share) as u64),
            Threshold::Set(tokens) if tokens > 1.0 => Some(tokens as u64),
            _ => None,
        };
        let t = set.unwrap_or_else(|| {
            let reserve = MIN_RESERVE.max(window * 15 / 100);
            window.saturating_sub(reserve).saturating_sub(self.room).max(window / 2)
        });
        t.min(cap)
    }
}

/// Why a run stopped at the wall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WallReason {
    /// The estimate of the next request passed the threshold.
    Threshold,
    /// The provider refused a request as larger than the window (or reported more input than
    /// the window holds).
    Overflow,
}

/// The boundary a run stopped at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Boundary {
    /// Before a prompt (the user's, a follow-up, a reminder) went out: it was not sent.
    BeforePrompt,
    /// After a complete tool batch, before the next request.
    AfterTools,
    /// After the final reply: nothing is in flight.
    AfterReply,
    /// A request failed as too large.
    Overflow,
}

/// Where a run stopped, and the figures of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Wall {
    pub reason: WallReason,
    pub boundary: Boundary,
    /// The estimate of the next request (for an overflow: what the provider was sent).
    pub tokens: u64,
    pub window: u64,
    pub threshold: u64,
    /// Work was in flight (a tool loop, an overflowed request, open todos after the reply):
    /// the task goes on in the new session.
    pub in_flight: bool,
}

/// What the new session does first after a handoff at the wall: the one answer the notices,
/// the handoff's focus and the host's document give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterWall {
    /// Work was in flight: it goes on (the host's continuation, or a reminder the run left).
    GoesOn,
    /// The run stopped before a prompt went out (the user's, a follow-up): the new session
    /// answers it first.
    Answers,
    /// The last reply answered the user: the new session waits for the next prompt.
    Waits,
}

impl Wall {
    /// What comes first in the new session after a handoff at this wall.
    pub fn after(&self) -> AfterWall {
        if self.in_flight {
            AfterWall::GoesOn
        } else if self.boundary == Boundary::BeforePrompt {
            // What was not sent waits first for the next session (`RunResult::unsent`).
            AfterWall::Answers
        } else {
            AfterWall::Waits
        }
    }
}

/// Tokens of the usage an assistant message reports (input, cache and output: what the context
/// holds after it), when it reports any (a reply cut off by a cancel, or from a provider that
/// counts nothing, reports none: its zeros are no measure). The wall and ACP's `usage_update`
/// read it.
pub fn reported(message: &Message) -> Option<u64> {
    let u = message.usage.as_ref()?;
    let total = u.input + u.cache_read + u.cache_write + u.output;
    (total > 0).then_some(total)
}

/// The estimate of an entry's part of the context (its raw line: no parse).
fn entry_tokens(entry: &SessionEntry) -> u64 {
    if entry.is_message() || entry.custom_message().is_some() || entry.branch_summary().is_some() {
        fit::estimate_text_tokens_of_len(entry.raw_json().len()) as u64
    } else {
        0
    }
}

impl AgentSession {
    /// Where the wall is placed (the handoff fits its request to the room it keeps).
    pub fn wall_settings(&self) -> WallSettings {
        self.wall
    }

    /// The wall's threshold for the current model.
    pub fn wall_threshold(&self) -> u64 {
        self.wall.threshold(self.provider_config().context_window)
    }

    /// The estimate of the next request with `extra` (messages not sent yet) added: the larger
    /// of the last reported usage plus what was appended since, and the whole context's
    /// estimate (system prompt and tool definitions included).
    pub fn next_request_tokens(&self, extra: &[Message]) -> u64 {
        let extra: u64 = extra.iter().map(|m| fit::estimate_tokens(m) as u64).sum();
        let replaced = self.state().messages.clone();
        let (since_usage, whole) = match replaced {
            Some(messages) => {
                let at = messages.iter().rposition(|m| m.is_assistant() && reported(m).is_some());
                let since = at.map(|i| {
                    let after: u64 = messages[i + 1..].iter().map(|m| fit::estimate_tokens(m) as u64).sum();
                    reported(&messages[i]).unwrap_or(0) + after
                });
                (since, messages.iter().map(|m| fit::estimate_tokens(m) as u64).sum::<u64>())
            }
            None => {
                let session = self.session();
                let branch = session.get_branch(None);
                let mut appended = 0u64;
                let mut since = None;
                for entry in branch.iter().rev() {
                    if entry.message_role() == Some(crate::message::Role::Assistant) {
                        if let Some(tokens) = entry.message().as_ref().and_then(reported) {
                            since = Some(tokens + appended);
                            break;
                        }
                    }
                    appended += entry_tokens(entry);
                }
                let messages = session.request_messages();
                drop(session);
                // As the request is sent: old tool results cleared, when they are.
                let whole: u64 = self.cleared(messages).iter().map(|m| fit::estimate_context_tokens(m) as u64).sum();
                (since, whole)
            }
        };
        let fixed = self.fixed_request_tokens();
        since_usage.unwrap_or(0).max(whole + fixed) + extra
    }

    /// What every request carries besides the messages: the system prompt and the tool
    /// definitions.
    pub fn fixed_request_tokens(&self) -> u64 {
        let system = fit::estimate_text_tokens(&self.system_prompt().text) as u64;
        let tools = serde_json::to_string(&self.offered_tools().definitions()).map_or(0, |t| fit::estimate_text_tokens_of_len(t.len()) as u64);
        system + tools
    }

    /// The wall at `boundary` when the next request (with `extra`, not sent yet) passes the
    /// threshold; `None` otherwise or when the run does not watch for it.
    pub(super) fn wall_at(&self, boundary: Boundary, in_flight: bool, extra: &[Message], options: RunOptions) -> Option<Wall> {
        if !options.watch_wall {
            return None;
        }
        let window = self.provider_config().context_window;
        let threshold = self.wall.threshold(window);
        let tokens = self.next_request_tokens(extra);
        if tokens > threshold {
            return Some(Wall { reason: WallReason::Threshold, boundary, tokens, window, threshold, in_flight });
        }
        let watcher = lock(&self.estimate_watcher).clone();
        if let Some(watcher) = watcher {
            watcher(tokens, threshold);
        }
        None
    }

    /// The wall of a reply that failed as too large, or that reported more input than the
    /// window holds.
    pub(super) fn overflow_wall(
        &self,
        reply: &Message,
        failure: Option<FailureKind>,
        in_flight: bool,
        options: RunOptions,
    ) -> Option<Wall> {
        if !options.watch_wall {
            return None;
        }
        let window = self.provider_config().context_window;
        let input = reply.usage.as_ref().map_or(0, |u| u.input + u.cache_read + u.cache_write);
        let overflowed = failure == Some(FailureKind::Overflow) || input > window;
        overflowed.then(|| Wall {
            reason: WallReason::Overflow,
            boundary: Boundary::Overflow,
            tokens: input.max(self.next_request_tokens(&[])),
            window,
            threshold: self.wall.threshold(window),
            in_flight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_keeps_the_reserve_and_the_room_below_the_window() {
        let s = WallSettings::default();
        // 200k: 15% (30k) is more than 16k; minus 8k of room.
        assert_eq!(s.threshold(200_000), 200_000 - 30_000 - 8192);
        // 128k: 16384 is more than 15% (19200)? No: 19200.
        assert_eq!(s.threshold(128_000), 128_000 - 19_200 - 8192);
        // 32k: the 16k reserve and the room leave less than half: half.
        assert_eq!(s.threshold(32_000), 16_000);
        // Never above 90%, also when set.
        let set = WallSettings { threshold: Threshold::Set(0.95), ..s };
        assert_eq!(set.threshold(100_000), 90_000);
        let tokens = WallSettings { threshold: Threshold::Set(5000.0), ..s };
        assert_eq!(tokens.threshold(100_000), 5000);
        assert_eq!(WallSettings { threshold: Threshold::Set(0.5), ..s }.threshold(10_000), 5000);
    }

    #[test]
    fn a_small_window_gives_the_document_a_quarter_at_most() {
        assert_eq!(WallSettings::default().room_in(8192), 2048);
        assert_eq!(WallSettings::default().room_in(200_000), 8192);
    }
}
