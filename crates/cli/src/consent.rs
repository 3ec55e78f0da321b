//! The command line's way of asking about a tool call: on a terminal, a question on stderr
//! answered on the terminal; off one (a script, a pipe), a refusal that names `--yes`.

use std::io::{BufRead, IsTerminal, Write};

use async_trait::async_trait;

use handoff_core::tools::consent::{Answer, ApprovalRequest, Consent, Decision};
use handoff_core::tools::ToolKind;

/// The result text when nobody can be asked.
pub const NO_TERMINAL: &str =
    "handoff-nvim was run without --yes and without a terminal to ask on: pass --yes to allow edits and commands";

/// The result text of a request to run outside the sandbox when nobody can be asked.
pub const NO_TERMINAL_TO_LIFT: &str =
    "handoff-nvim has no terminal to ask on whether to run this outside the sandbox (--yes never lifts it): pass --sandbox off to run commands outside it";

/// The result text of a command whose sandbox has holes here when nobody can be asked.
pub const NO_TERMINAL_FOR_HOLES: &str =
    "handoff-nvim has no terminal to ask on whether to run this in a sandbox that cannot protect everything here (--yes never answers that): pass --sandbox off to run commands without the sandbox";

/// The start of the result text of a call that reaches a protected path when nobody can be
/// asked; what the path is and why follows.
pub const NO_TERMINAL_FOR_PROTECTED: &str =
    "handoff-nvim has no terminal to ask on whether to let this call reach a protected path (--yes never allows that; --sandbox off leaves it to consent)";

/// Nobody to ask (no terminal): a refusal, naming the flag that would have allowed the call.
struct NoTerminal;

#[async_trait]
impl Consent for NoTerminal {
    async fn ask(&self, request: ApprovalRequest) -> Decision {
        let reason = match (&request.protected, &request.unsandboxed, &request.holes) {
            (Some(why), _, _) => format!("{NO_TERMINAL_FOR_PROTECTED}: {why}"),
            (None, Some(_), _) => NO_TERMINAL_TO_LIFT.into(),
            (None, None, Some(_)) => NO_TERMINAL_FOR_HOLES.into(),
            (None, None, None) => NO_TERMINAL.into(),
        };
        Decision::Reject { reason: Some(reason) }
    }
}

/// Asks on the controlling terminal (`/dev/tty`), whatever stdin and stdout are.
pub struct TerminalConsent;

/// The consent for this process: the terminal when there is one, else a refusal naming --yes.
pub fn for_this_process() -> std::sync::Arc<dyn Consent> {
    let tty = std::io::stdin().is_terminal() || std::io::stderr().is_terminal();
    if tty && std::fs::File::open("/dev/tty").is_ok() {
        std::sync::Arc::new(TerminalConsent)
    } else {
        std::sync::Arc::new(NoTerminal)
    }
}

/// What the question shows of a call, as the tool said it: the command, or the file and the
/// diff of the change, or the arguments.
fn describe(request: &ApprovalRequest) -> String {
    if let Some(why) = &request.protected {
        let diff = request.preview.as_ref().map(|p| format!("\n{}", p.diff)).unwrap_or_default();
        return format!("{}: {}{diff}\nProtected path: {why}", request.tool, request.summary);
    }
    if let Some(why) = &request.unsandboxed {
        return format!("$ {}\nOutside the sandbox: {why}", request.summary);
    }
    if let Some(holes) = &request.holes {
        return format!("$ {}\nIn the sandbox, but {holes}", request.summary);
    }
    if let Some(sandbox) = &request.sandbox {
        let by = request.confined_by.as_ref().map(|b| format!("; confined by {b}")).unwrap_or_default();
        return format!("$ {}\n(in the sandbox: {sandbox}{by})", request.summary);
    }
    match (request.preview.as_ref().map(|p| &p.diff), request.kind) {
        (_, ToolKind::Execute) => format!("$ {}", request.summary),
        (Some(diff), _) => format!("{}\n{diff}", request.summary),
        (None, _) if !request.summary.is_empty() => format!("{}: {}", request.tool, request.summary),
        (None, _) => request.args.to_string(),
    }
}

fn ask_blocking(request: &ApprovalRequest) -> std::io::Result<Decision> {
    let tty = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty")?;
    let mut out = tty.try_clone()?;
    let mut input = std::io::BufReader::new(tty);
    let what = match (&request.path, &request.protected, &request.unsandboxed) {
        (Some(path), Some(_), _) => format!("{} on {path}", request.tool),
        (_, _, Some(_)) => format!("{} outside the sandbox", request.tool),
        _ => request.tool.clone(),
    };
    // The answers the request offers (no "always" where it would count this once only).
    let answers = if request.answers().contains(&Answer::Always) { "[y]es / [a]lways" } else { "[y]es this once" };
    write!(out, "\n{}\nAllow {what}? {answers} / [n]o / [c]ancel the turn: ", describe(request))?;
    out.flush()?;
    let mut line = String::new();
    input.read_line(&mut line)?;
    Ok(match line.trim().to_lowercase().as_str() {
        "y" | "yes" => Decision::Allow,
        "a" | "always" => Decision::Always,
        "c" | "cancel" => Decision::Cancel,
        "" | "n" | "no" => {
            write!(out, "Reason (optional): ")?;
            out.flush()?;
            let mut reason = String::new();
            input.read_line(&mut reason)?;
            let reason = reason.trim();
            Decision::Reject { reason: (!reason.is_empty()).then(|| reason.to_string()) }
        }
        other => Decision::Reject { reason: Some(format!("unclear answer {other:?}")) },
    })
}

#[async_trait]
impl Consent for TerminalConsent {
    async fn ask(&self, request: ApprovalRequest) -> Decision {
        let asked = tokio::task::spawn_blocking(move || ask_blocking(&request)).await;
        match asked {
            Ok(Ok(decision)) => decision,
            Ok(Err(e)) => Decision::Reject { reason: Some(format!("cannot ask on the terminal: {e}")) },
            Err(e) => Decision::Reject { reason: Some(format!("cannot ask on the terminal: {e}")) },
        }
    }
}
