//! The automatic handoff at the wall (`doc/design.md`, "At the wall"): the same pipeline as
//! `:Handoff` — prompt, facts, new session, lineage — started by the host when a run stopped at
//! the wall, with a focus that names the step in flight, a request fitted below the window and
//! trimmed again when the provider still refuses it, and a new session that also carries the
//! user's own words and why it happened. Nothing is written to the old session unless it
//! succeeds: cancelling leaves it as it was.
//!
//! What comes after (the continuation, the queued input, the guards of one prompt) is the
//! controller's.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::agent::{AfterWall, Wall, WallReason};
use crate::message::{Message, Role};
use crate::session::{self, todos, SessionEntry};

/// What happens at the wall (`handoff.auto`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoHandoff {
    /// Hand off and go on with the task in the new session.
    #[default]
    Continue,
    /// Hand off, but open the document for review first (as `:Handoff!`); nothing is sent
    /// until it is written.
    Review,
    /// Do nothing (the request may then fail as too large).
    Off,
}

impl AutoHandoff {
    pub const ALL: [AutoHandoff; 3] = [AutoHandoff::Continue, AutoHandoff::Review, AutoHandoff::Off];

    pub fn as_str(self) -> &'static str {
        match self {
            AutoHandoff::Continue => "continue",
            AutoHandoff::Review => "review",
            AutoHandoff::Off => "off",
        }
    }
}

impl std::str::FromStr for AutoHandoff {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AutoHandoff::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown automatic handoff mode {s:?} (continue, review, off)"))
    }
}

/// Automatic handoffs of one user prompt at most (each new session may fill up again).
pub const MAX_PER_PROMPT: u32 = 3;

/// Attempts of the handoff request at most: when the provider still refuses the fitted request
/// (its tokenizer counts more than ours), it is trimmed and sent again.
pub(super) const FIT_ATTEMPTS: u32 = 3;

/// Each attempt after a refusal is fitted to this share (percent) of the request refused.
pub(super) const FIT_SHRINK: u64 = 70;

/// What the continuation says. Written by the host, and it says so: the model must not take it
/// for a new request of the user's.
pub const CONTINUATION_TEXT: &str = "[Written by handoff.nvim, not by the user.] The previous session was handed off automatically because its context window was full; the handoff document above says where the work stood. Resume the user's latest request from where it stopped. If nothing remains to be done, say so briefly.";

/// The host's continuation message, marked as the host's.
pub fn continuation() -> Message {
    let mut message = Message::user(CONTINUATION_TEXT);
    session::mark_host(&mut message, session::HostMessage::Continuation);
    message
}

/// Characters of a user's message quoted at most (the middle of a longer one is left out).
const MAX_QUOTED: usize = 4000;

/// The user's own words, carried verbatim: the task as first given and the latest message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserWords {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest: Option<String>,
}

/// A user message the user typed ([`session::author`]: not a message the host wrote).
fn typed_by_user(entry: &SessionEntry) -> Option<String> {
    if entry.message_role() != Some(Role::User) {
        return None;
    }
    let message = entry.message()?;
    if !session::author(&message).is_user() {
        return None;
    }
    let text = message.text();
    (!text.trim().is_empty()).then_some(text)
}

/// `text` with its middle left out when longer than `max` characters (its start and end are
/// what a reader needs: the ask and the last lines of an output).
pub(super) fn clip_middle(text: &str, max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return text.to_string();
    }
    let head: String = chars[..max / 2].iter().collect();
    let tail: String = chars[chars.len() - max / 2..].iter().collect();
    format!("{head}\n[… {} characters left out …]\n{tail}", chars.len() - max)
}

impl UserWords {
    /// The words of a branch: the first and the last message the user typed (only those two
    /// are read in full). The task of a session that a handoff started is the one its handoff
    /// carried, so a chain keeps the first task.
    pub fn of_branch(branch: &[&SessionEntry]) -> UserWords {
        let carried = branch.iter().find_map(|e| {
            todos::handoff_details(e)?.get("userWords")?.get("task")?.as_str().map(str::to_string)
        });
        let task = carried.or_else(|| branch.iter().find_map(|e| typed_by_user(e)));
        let latest = branch.iter().rev().find_map(|e| typed_by_user(e));
        let latest = latest.filter(|l| Some(l) != task.as_ref());
        UserWords { task: task.map(|t| clip_middle(&t, MAX_QUOTED)), latest: latest.map(|l| clip_middle(&l, MAX_QUOTED)) }
    }

    pub fn is_empty(&self) -> bool {
        self.task.is_none() && self.latest.is_none()
    }

    /// The words as they follow the facts, in the facts' style.
    pub fn render(&self) -> String {
        let mut sections = Vec::new();
        if let Some(task) = &self.task {
            sections.push(format!("<user-task>\n{task}\n</user-task>"));
        }
        if let Some(latest) = &self.latest {
            sections.push(format!("<user-latest-message>\n{latest}\n</user-latest-message>"));
        }
        sections.join("\n\n")
    }
}

/// The focus of an automatic handoff: why it happens, and the step in flight, so the document's
/// Next Steps name the task's very next action.
pub fn focus(wall: &Wall, last_tools: &[String]) -> String {
    let why = why(wall);
    let step = match wall.after() {
        AfterWall::GoesOn => {
            let tools = if last_tools.is_empty() {
                String::new()
            } else {
                format!(" The last tool results in the conversation are from: {}.", last_tools.join(", "))
            };
            format!(
                "Work was in flight and continues in the new session at once.{tools} Say exactly which step was being done, what its last results showed, and make the very next action of the task the first of the Next Steps."
            )
        }
        AfterWall::Answers => {
            "The user's newest message was not sent yet: the new session answers it right after this document, so the Next Steps lead up to it.".to_string()
        }
        AfterWall::Waits => "The last reply answered the user: the new session waits for the user's next request.".to_string(),
    };
    format!("{why} {step} Never list writing a handoff as a step.")
}

/// Why an automatic handoff happens, in one sentence (the focus and the fallback document).
pub fn why(wall: &Wall) -> String {
    match wall.reason {
        WallReason::Threshold => format!(
            "This handoff is automatic: the conversation reached about {} of the model's {} tokens.",
            wall.tokens, wall.window
        ),
        WallReason::Overflow => "This handoff is automatic: the model refused the last request as larger than its context window.".to_string(),
    }
}

/// The tools of the last turn that ran any, newest call last (for the focus).
pub fn last_tools(branch: &[&SessionEntry]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for entry in branch.iter().rev() {
        match entry.message_role() {
            Some(Role::ToolResult) => {
                if let Some(name) = entry.message().and_then(|m| m.tool_result()?.tool_name().map(str::to_string)) {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            Some(Role::Assistant) if !names.is_empty() => break,
            Some(Role::User) => break,
            _ => {}
        }
    }
    names.reverse();
    names
}

/// Why it happened, for the new session's entry (`details.auto`).
pub fn details(wall: &Wall) -> Value {
    json!({
        "reason": wall.reason,
        "boundary": wall.boundary,
        "tokens": wall.tokens,
        "window": wall.window,
        "threshold": wall.threshold,
        "inFlight": wall.in_flight,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Boundary;

    fn wall(in_flight: bool) -> Wall {
        Wall { reason: WallReason::Threshold, boundary: Boundary::AfterTools, tokens: 9000, window: 10_000, threshold: 5000, in_flight }
    }

    #[test]
    fn the_focus_names_the_step_in_flight_and_never_a_handoff_as_next_step() {
        let f = focus(&wall(true), &["bash".into(), "read".into()]);
        assert!(f.contains("9000") && f.contains("10000"), "{f}");
        assert!(f.contains("bash, read") && f.contains("very next action"), "{f}");
        assert!(f.contains("Never list writing a handoff"), "{f}");
        assert!(focus(&wall(false), &[]).contains("waits for the user's next request"));
    }

    #[test]
    fn the_continuation_is_marked_as_the_hosts() {
        let c = continuation();
        assert_eq!(session::author(&c), session::Author::Continuation);
        assert!(session::author(&Message::user(CONTINUATION_TEXT)).is_user());
        assert!(c.text().starts_with("[Written by handoff.nvim, not by the user.]"));
    }

    #[test]
    fn a_long_message_is_quoted_with_its_middle_left_out() {
        let long = format!("{}{}", "a".repeat(5000), "z");
        let clipped = clip_middle(&long, MAX_QUOTED);
        assert!(clipped.starts_with("aaa") && clipped.ends_with('z') && clipped.contains("left out"));
        assert_eq!(clip_middle("short", MAX_QUOTED), "short");
    }
}
