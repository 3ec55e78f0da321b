//! Every sentence the ACP front end says itself, once. Outcomes of commands are the
//! controller's (`controller::text`); these are what only an ACP client is told.

use handoff_core::agent::Wall;
use handoff_core::controller;

/// The permission answers as a client shows them.
pub const ALLOW_ONCE: &str = "Allow";
pub const ALLOW_ALWAYS: &str = "Always allow";
pub const REJECT_ONCE: &str = "Reject";
pub const REJECT_ALWAYS: &str = "Always reject";

/// Why a call is asked, shown with it (each followed by the sandbox's own words).
pub const PROTECTED: &str = "Protected path (answered for this call only): ";
pub const OUTSIDE_SANDBOX: &str = "Runs outside the sandbox: ";
pub const SANDBOX_HOLES: &str = "In the sandbox, but it cannot protect everything here (answered for this call only): ";
pub const IN_SANDBOX: &str = "In the sandbox: ";

/// The result of a call asked about when the client went away.
pub const CLIENT_GONE: &str = "The editor went away before answering.";
/// The client's answer to a permission request could not be read.
pub const UNREADABLE_ANSWER: &str = "The editor's answer could not be read";

/// The heading before a handoff's document, for a client that does not report compactions
/// (`prepared`: an automatic one continues from the draft written before the wall).
pub fn handoff_heading(auto: Option<&Wall>, prepared: bool) -> String {
    match auto {
        Some(wall) => format!("\n\n---\n**{}**\n\n", controller::text::auto_banner(wall, prepared)),
        None => "\n\n---\n**Handoff: writing the document the new session starts from…**\n\n".into(),
    }
}

/// The heading of a handoff's document replayed from a session (`session/load`).
pub const HANDED_OFF_HEADING: &str = "**Handed off: this session starts from the document below.**\n\n";

/// A line for the user that is no part of a reply (a notice, a command's outcome), set apart.
pub fn notice_block(message: &str) -> String {
    format!("\n\n> {}\n\n", message.replace('\n', "\n> "))
}

/// Said when updates were lost because the agent ran ahead of the channel (the editor did not
/// read them, or the machine stalled).
pub const EVENTS_LOST: &str = "Some updates of this turn were lost on the way (the editor did not read them in time, or the machine stalled): the session file has all of them; load the session again to see them.";

/// `authMethods`' one entry: where keys come from.
pub const AUTH_NAME: &str = "API key from the environment";
pub const AUTH_DESCRIPTION: &str = "handoff-nvim reads the provider's key from its usual variable ($ANTHROPIC_API_KEY, $OPENAI_API_KEY, …) or from api_key_cmd (--api-key-cmd, HANDOFF_API_KEY_CMD): set one in the environment the editor starts the agent with; nothing is asked here.";

/// A prompt's model request failed.
pub fn prompt_failed(why: &str) -> String {
    format!("The model request failed: {why}")
}

/// No session of that id in this process or in the working folder's sessions.
pub fn unknown_session(id: &str) -> String {
    format!("Unknown session {id:?}")
}
