//! The `/handoff` pipeline (`doc/design.md`), in the order of its steps:
//! trigger (`is_handoff_command`), pre-flight guard (`preflight`), prompt (`build_prompt`),
//! capture and cancellation (`capture`), new session and injection (`start_new_session`),
//! context rebuild, and the outcome the controller maps to the UI (`HandoffOutcome`).
//!
//! Every shortcoming of the original pipeline (the table at the end of `doc/design.md`) is
//! closed here; each is marked `Gap:` where it is.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::core::agent::{lock, AgentEvent, AgentSession, PromptOptions, RunClaim, RunResult};
use crate::core::message::StopReason;
use crate::core::session::{file, paths, SessionError, SessionManager};

/// The instruction sent to the model (our wording; the six sections are the contract).
pub const PROMPT: &str = include_str!("prompt.md");

/// The sections the document must have, in order.
pub const SECTIONS: [&str; 6] =
    ["Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Critical Context", "Next Steps"];

/// `customType` of the injected entry.
pub const CUSTOM_TYPE: &str = "handoff";

/// The sentence after the wrapped document.
const CONTEXT_SENTENCE: &str =
    "The above is a handoff document from a previous session. Use this context to continue the work seamlessly.";

/// User-facing texts, written once.
pub mod text {
    pub const NOTHING_TO_HAND_OFF: &str = "Nothing to hand off (no messages yet)";
    pub const BUSY: &str = "Cannot hand off while a response is in progress";
    pub const CANCELLED: &str = "Handoff cancelled";
    pub const NO_TEXT: &str = "the model returned no text";
    pub const SUCCESS: &str = "New session started with handoff context";
}

/// How a handoff ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HandoffOutcome {
    Done {
        document: String,
        session_file: String,
        parent_session: String,
        /// Sections of `SECTIONS` the document lacks (a warning, not a failure).
        missing_sections: Vec<String>,
        /// Where the document was also written as markdown.
        document_file: String,
        /// What had to be left out of the request to fit the context window, if anything.
        elided: Option<String>,
    },
    Cancelled,
    Failed { message: String },
    /// Nothing happened: nothing to hand off, or a response is in progress.
    Refused { message: String },
}

/// Trigger: exactly `/handoff`, or `/handoff ` followed by focus instructions.
/// Returns the focus (possibly empty) when `input` is a handoff command.
pub fn is_handoff_command(input: &str) -> Option<&str> {
    let input = input.trim_start();
    if input.trim_end() == "/handoff" {
        return Some("");
    }
    input.strip_prefix("/handoff ").map(str::trim)
}

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

/// The content of the injected `custom_message`.
pub fn wrap_document(document: &str) -> String {
    format!("<handoff-context>\n{document}\n</handoff-context>\n\n{CONTEXT_SENTENCE}")
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

/// Gap (guard twice, disagreeing): the one rule both layers (controller and `handoff()`) call.
pub fn preflight(agent: &AgentSession) -> Result<(), String> {
    if agent.is_generating_handoff() {
        return Err(text::BUSY.to_string());
    }
    session_rule(agent)
}

/// Gap (no busy check): refuse while a response streams. Then count `message` entries on the
/// current branch, never on all branches.
fn session_rule(agent: &AgentSession) -> Result<(), String> {
    if agent.is_busy() {
        return Err(text::BUSY.to_string());
    }
    if agent.session().count_branch_messages() < 2 {
        return Err(text::NOTHING_TO_HAND_OFF.to_string());
    }
    Ok(())
}

/// Clears the handoff's abort controller when the handoff ends, whatever happened (`finally`).
struct AbortControllerGuard<'a>(&'a AgentSession);

impl Drop for AbortControllerGuard<'_> {
    fn drop(&mut self) {
        *lock(&self.0.handoff_abort) = None;
    }
}

/// Capture: the document, or why there is none.
/// Gap (stale or partial replies): only the assistant message of *this* run counts, and only
/// with a normal stop; an aborted turn is a cancellation, an errored or cut-off one a failure.
fn capture(result: &RunResult) -> Result<String, NoDocument> {
    let Some(reply) = result.last_assistant() else {
        return Err(NoDocument::Failed(text::NO_TEXT.into()));
    };
    let failed = |message: &str| Err(NoDocument::Failed(message.to_string()));
    match reply.stop_reason.unwrap_or_default() {
        StopReason::Aborted => return Err(NoDocument::Cancelled),
        StopReason::Error => return failed(reply.error_message.as_deref().unwrap_or("the model request failed")),
        StopReason::Length => {
            return failed(
                "the document was cut off at the model's output limit (stop reason: length); raise max_tokens or add a focus",
            )
        }
        StopReason::ToolUse => return failed("the model asked to use a tool instead of writing the document"),
        StopReason::Stop => {}
    }
    // Gap (no text = cancelled): no text is a failure with its own message.
    let document = reply.text();
    if !reply.content.has_text_block() || document.trim().is_empty() {
        return failed(text::NO_TEXT);
    }
    Ok(document.trim().to_string())
}

/// Why a run produced no document.
enum NoDocument {
    Cancelled,
    Failed(String),
}

impl From<NoDocument> for HandoffOutcome {
    fn from(reason: NoDocument) -> Self {
        match reason {
            NoDocument::Cancelled => HandoffOutcome::Cancelled,
            NoDocument::Failed(message) => HandoffOutcome::Failed { message },
        }
    }
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

impl AgentSession {
    /// `isGeneratingHandoff`: true while the handoff's abort controller exists.
    pub fn is_generating_handoff(&self) -> bool {
        lock(&self.handoff_abort).is_some()
    }

    /// `abortHandoff()`: cancels the handoff being generated, if any.
    pub fn abort_handoff(&self) {
        if let Some(token) = lock(&self.handoff_abort).as_ref() {
            token.cancel();
        }
    }

    /// `AgentSession.handoff(focus)`: generates the document, and on success continues in a new
    /// session that starts with it.
    pub async fn handoff(&self, focus: Option<&str>) -> HandoffOutcome {
        // 1. Start: guard, abort controller, prompt.
        let token = CancellationToken::new();
        let claim = {
            let mut slot = lock(&self.handoff_abort);
            let allowed = if slot.is_some() { Err(text::BUSY.to_string()) } else { session_rule(self) };
            if let Err(message) = allowed {
                return HandoffOutcome::Refused { message };
            }
            // The run slot is taken before `handoff_start`: a prompt that got there first
            // refuses the handoff here, not after the front end was told it started.
            let Ok(claim) = self.claim_run(&token) else {
                return HandoffOutcome::Refused { message: text::BUSY.into() };
            };
            *slot = Some(token.clone());
            claim
        };
        let _clear = AbortControllerGuard(self);
        let focus = focus.map(str::trim).filter(|f| !f.is_empty()).map(str::to_string);
        self.emit(AgentEvent::HandoffStart { focus: focus.clone() });
        let outcome = self.generate_and_switch(focus.as_deref(), &token, claim).await;
        self.emit(AgentEvent::HandoffEnd { outcome: outcome.clone() });
        outcome
    }

    async fn generate_and_switch(
        &self,
        focus: Option<&str>,
        token: &CancellationToken,
        claim: RunClaim,
    ) -> HandoffOutcome {
        let prompt = build_prompt(focus);
        // Gap (request too large): the request is fitted to the model's window.
        let options = PromptOptions { expand_prompt_templates: false, fit_to_window: true };
        // 2. Capture: the run's own messages are the payload of `agent_end`.
        let result = match self.run_claimed(claim, &prompt, options).await {
            Ok(result) => result,
            Err(e) => return HandoffOutcome::Failed { message: e.to_string() },
        };
        // 3. Cancellation check.
        if token.is_cancelled() {
            return HandoffOutcome::Cancelled;
        }
        let document = match capture(&result) {
            Ok(d) => d,
            Err(reason) => return reason.into(),
        };
        // 4–6. New session, injection, context rebuild.
        match self.start_new_session(&document) {
            Ok((session_file, parent_session, document_file)) => HandoffOutcome::Done {
                missing_sections: missing_sections(&document),
                document,
                session_file,
                parent_session,
                document_file,
                elided: result.elisions.map(|e| e.note()),
            },
            Err(e) => HandoffOutcome::Failed { message: format!("could not write the new session: {e}") },
        }
    }

    /// Steps 4–6: flush the old session, start a new one that records its parent and the current
    /// model, inject the document, make it durable, then reset the agent onto it.
    /// The new session is built beside the old one and swapped in only once it is complete on
    /// disk, so a write error (full disk, read-only folder) leaves the agent on the old session.
    fn start_new_session(&self, document: &str) -> Result<(String, String, String), SessionError> {
        let (old, new, session_id, document_file) = {
            let mut session = self.session();
            session.flush()?;
            // Gap (no lineage): the header names the parent session file.
            let old = std::path::absolute(session.path())
                .unwrap_or_else(|_| session.path().to_path_buf())
                .to_string_lossy()
                .into_owned();
            let mut next = SessionManager::create(session.session_dir(), session.cwd(), Some(old.clone()))?;
            let written = (|| {
                // Gap (no model entries): carry the model and thinking level over.
                self.record_settings(&mut next)?;
                next.append_custom_message_entry(CUSTOM_TYPE, &wrap_document(document), true)?;
                // Gap (new session not on disk): fsync before success is announced.
                next.flush()?;
                // Gap (document only inside sessions): also a markdown file beside the new session.
                write_document_file(next.path(), document)
            })();
            let document_file = match written {
                Ok(file) => file,
                Err(e) => {
                    let _ = std::fs::remove_file(next.path());
                    let _ = std::fs::remove_dir_all(paths::session_side_dir(next.path()));
                    return Err(e);
                }
            };
            let new = next.path().to_string_lossy().into_owned();
            let session_id = next.session_id().to_string();
            *session = next;
            (old, new, session_id, document_file)
        };
        self.start_over(session_id);
        // Gap (nobody told): announce the switch.
        self.emit(AgentEvent::SessionSwitch { old: Some(old.clone()), new: new.clone(), reason: "handoff".into() });
        Ok((new, old, document_file.to_string_lossy().into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_matches_only_the_command() {
        assert_eq!(is_handoff_command("/handoff"), Some(""));
        assert_eq!(is_handoff_command("/handoff  focus on tests "), Some("focus on tests"));
        assert_eq!(is_handoff_command("/handoffs"), None);
        assert_eq!(is_handoff_command("please /handoff"), None);
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
