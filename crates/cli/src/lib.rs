//! The headless command line: the same core as the Neovim host, for scripts, tests and
//! benchmarks. Here, and only here, stdout carries user output.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use handoff_core::agent::{AgentEvent, AgentSession, AssistantMessageEvent, RunResult};
use handoff_core::config::Settings;
use handoff_core::controller::{self, Controller, FrontEndTexts, Level, InputOutcome, SessionChoice};
use handoff_core::handoff::{AutoHandoff, HandoffOptions, HandoffOutcome};
use handoff_core::mcp::{McpHub, State};
use handoff_core::message::StopReason;
use handoff_core::session::SessionManager;
use handoff_frontend_paths as frontend_paths;

mod agents;
mod consent;
mod settings_args;
pub use settings_args::SettingsArgs;

/// Exit codes shared by the commands.
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILURE: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const REFUSED: u8 = 3;
    pub const INTERRUPTED: u8 = 130;
}

/// `--version`'s lines past the first: the settings' digest the plugin's handshake compares
/// ([`schema::digest`](handoff_core::config::schema::digest)) and the target the binary was built
/// for, which `:HandoffInstall` checks a download against and `:checkhealth` shows (`-V` prints
/// the version alone).
fn long_version() -> String {
    format!(
        "{}\nschema {}\ntarget {}",
        env!("CARGO_PKG_VERSION"),
        handoff_core::config::schema::digest(),
        build_target()
    )
}

/// The target triple this binary was built for, as a release asset names it (e.g.
/// `x86_64-unknown-linux-musl`), from what the compiler knew.
pub fn build_target() -> String {
    let arch = std::env::consts::ARCH;
    let env = if cfg!(target_env = "musl") {
        "musl"
    } else if cfg!(target_env = "msvc") {
        "msvc"
    } else {
        "gnu"
    };
    match std::env::consts::OS {
        "linux" => format!("{arch}-unknown-linux-{env}"),
        "macos" => format!("{arch}-apple-darwin"),
        "windows" => format!("{arch}-pc-windows-{env}"),
        os => format!("{arch}-unknown-{os}"),
    }
}

#[derive(Parser, Debug)]
#[command(name = "handoff-nvim", version, long_version = long_version(), about = "LLM agent sessions with structured handoffs (Neovim host and CLI)")]
pub struct Cli {
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Write logs to this file (default: none for the CLI, warnings on stderr).
    #[arg(long, env = "HANDOFF_LOG_FILE", global = true)]
    pub log_file: Option<PathBuf>,
    /// Trust the project's .mcp.json as it is read now (its servers are listed on stderr;
    /// remembered for this content of it): its servers may start, unsandboxed.
    #[arg(long, global = true)]
    pub trust_project_mcp: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve Neovim over msgpack-RPC on stdin/stdout (the default).
    Rpc,
    /// Serve the Agent Client Protocol (v1) on stdin/stdout: this agent, /handoff included, in
    /// Zed, codecompanion.nvim, avante.nvim and any other ACP client. Takes every settings
    /// flag; stdout carries JSON-RPC only, logs go to --log-file (`:help handoff-acp`).
    Acp,
    /// Send one prompt; the reply streams to stdout, the session path goes to stderr.
    /// A slash command runs instead, as in the editor, and never reaches the model:
    /// `/handoff [focus]` hands the session off (the new session's path goes to stdout, with
    /// the exit codes of `handoff`); `/new`, `/sessions`, `/model`, `/thinking`, `/pin`,
    /// `/pins`, `/unpin`, `/back` print what they did.
    Prompt {
        /// Continue this session file (default: the newest session of the working directory).
        #[arg(long, conflicts_with = "new")]
        session: Option<PathBuf>,
        /// Start a new session.
        #[arg(long)]
        new: bool,
        /// Working directory recorded in a new session (default: the current one).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Run the prompt on an external agent (Agent Client Protocol): a name of the `agents`
        /// setting, or a command line (`--agent 'handoff-nvim acp'`). Without --session, a new
        /// session; a session that runs on an agent goes on on it without this flag.
        #[arg(long)]
        agent: Option<String>,
        /// The prompt; `/name args` expands a template.
        #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
        text: Vec<String>,
    },
    /// Print the LLM context of a session's leaf as a JSON array of messages.
    Context { file: PathBuf },
    /// Print the todo list of a session's current branch as a JSON array of
    /// `{content, status, activeForm}` (`[]` when there is none).
    Todos { file: PathBuf },
    /// Print a session's pending hunks (the agent's changes not kept or rejected yet): one line
    /// each, `path:line: tool call_id (lines as the call wrote them)`; with --json, JSON lines
    /// `{id, path, call_id, tool, before, after, state}` (0-based, end-excluded line ranges of
    /// the call's versions).
    Changes {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// List the sessions of a working directory, newest first (JSON lines: id, path, cwd,
    /// timestamp, parentSession, first_message, message_count, empty).
    Sessions {
        #[arg(long)]
        cwd: Option<PathBuf>,
    },
    /// Hand a session off: write the document, start the new session, print its path.
    /// Exit 0 done, 1 failed, 3 refused, 130 cancelled.
    Handoff {
        file: PathBuf,
        #[arg(long)]
        focus: Option<String>,
        /// Go on on this external agent (a name of `agents`, or a command line), or `ours`;
        /// default: where the session ran (an external agent's session: the same agent).
        #[arg(long)]
        to: Option<String>,
    },
    /// Start each configured external agent (`agents` setting) and ask what it is: JSON lines
    /// `{name, command, found, agent, version, protocol, loadSession}` or `{…, error}`.
    /// Exit 1 when one is missing or does not answer.
    Agents {
        /// Only say whether each agent's program is found (and where): none is started
        /// (`:checkhealth handoff` asks this first).
        #[arg(long)]
        no_start: bool,
    },
    /// List the provider's models with what is known of each (JSON lines: id, context_window,
    /// max_output, reasoning, images, source); the first line is the configured model, with
    /// the window in force. Exit 1 when the provider's own list did not answer (the tables'
    /// models are still printed).
    Models,
}

/// `models`: the configured model first (`"current": true`, with the window in force), then
/// the catalogue.
async fn print_models(settings: &Settings) -> anyhow::Result<u8> {
    let provider = handoff_core::provider::Provider::new(settings.provider_config().map_err(anyhow::Error::msg)?);
    let handoff_core::provider::Catalogue { models, error, .. } = provider.catalogue(true).await;
    let config = provider.current_config();
    let mut out = std::io::stdout().lock();
    let mut current = serde_json::to_value(provider.model_info())?;
    current["current"] = serde_json::Value::Bool(true);
    current["context_window"] = config.context_window.into();
    current["provider"] = config.name.clone().into();
    writeln!(out, "{current}")?;
    for model in models {
        writeln!(out, "{}", serde_json::to_string(&model)?)?;
    }
    match error {
        Some(e) => {
            eprintln!("the provider's model list: {e}");
            Ok(exit::FAILURE)
        }
        None => Ok(exit::OK),
    }
}

fn current_dir(cwd: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = match cwd {
        Some(d) => d,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    Ok(std::path::absolute(&dir).unwrap_or(dir))
}

/// Opens the chosen session for a command (the one way, `controller::open_for`), saying on
/// stderr what the load had to repair and what of the MCP servers will not start.
fn open_agent(settings: &Settings, cwd: &Path, choice: SessionChoice) -> anyhow::Result<Arc<AgentSession>> {
    let mut front_end = frontend_paths::front_end(settings);
    // A prompt is sent at once: what the first command needs is made in the model's time.
    front_end.sandbox_prefetch = handoff_core::sandbox::PrefetchAt::FirstReply;
    let opened = controller::open_for(&front_end, settings, cwd, choice)
        .map_err(|failure| anyhow::anyhow!(failure.message))?;
    if let Some(hub) = &opened.mcp {
        if settings.mcp.as_ref().is_some_and(|m| m.trust_project) {
            trust_project_mcp(hub)?;
        }
        for status in hub.statuses().iter().filter(|s| s.state == State::Untrusted) {
            eprintln!("warning: MCP server {} of {} does not start: the file is not trusted (--trust-project-mcp)", status.name, status.origin);
        }
        for error in hub.errors() {
            eprintln!("warning: MCP configuration: {error}");
        }
    }
    for warning in &opened.warnings {
        eprintln!("warning: {warning}");
    }
    opened.agent.set_consent(consent::for_this_process());
    // `--to NAME` (`handoff`, `/handoff` in a prompt): the new session may go on on an
    // external agent, started as the editor starts it.
    opened.agent.set_external_runner(Some(Arc::new(handoff_agents::Runner::new(settings.clone()))));
    Ok(opened.agent)
}

/// `--trust-project-mcp`: says on stderr what is trusted (each server of the project's file as
/// it was read, and that they run unsandboxed), then trusts those bytes.
fn trust_project_mcp(hub: &McpHub) -> anyhow::Result<()> {
    let Some(project) = hub.project() else {
        eprintln!("warning: --trust-project-mcp: this project has no .mcp.json");
        return Ok(());
    };
    for line in project.listing() {
        eprintln!("{line}");
    }
    let file = hub.trust_project(&project.digest).map_err(anyhow::Error::msg)?;
    eprintln!("{} is trusted", file.display());
    Ok(())
}

fn open_session(path: &Path, settings: &Settings) -> anyhow::Result<SessionManager> {
    let session = SessionManager::open(path, &frontend_paths::session_dir(settings))?;
    say_warnings(&session);
    Ok(session)
}

/// What the load of `session` had to say about its file, on stderr.
fn say_warnings(session: &SessionManager) {
    for warning in session.warnings() {
        eprintln!("warning: {warning}");
    }
}

/// A session file a command names, read once (a large one is read once on the way to the
/// answer): whether it runs on an external agent decides which path takes it. `None`: it
/// cannot be read (the path that takes the file says why).
fn read_named_session(path: &Path, settings: &Settings) -> Option<(SessionManager, bool)> {
    let session = SessionManager::open(path, &frontend_paths::session_dir(settings)).ok()?;
    let on_agent = handoff_agents::agent_of(&session).is_some();
    Some((session, on_agent))
}

/// Listens for SIGINT from now on: registered before the work starts, so that even an early
/// Ctrl-C stops the work cleanly instead of killing the process.
fn sigint() -> anyhow::Result<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{signal, SignalKind};
    signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C")
}

/// Streams text deltas to stdout while the agent runs; warnings and errors reported on the side
/// (a refused command, a refused request field, the turn limit) go to stderr. A handoff's
/// document is not streamed: its outcome is the new session's path. Stops at the end of the
/// reply, or once `done` is cancelled and what was sent before is printed.
/// Returns the sessions the work switched to, in order (`prompt` names them on stderr once the
/// work is done, the one it ends in last).
fn spawn_stdout_printer(agent: &AgentSession, done: CancellationToken) -> tokio::task::JoinHandle<Vec<String>> {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    let mut events = agent.subscribe();
    tokio::spawn(async move {
        let mut out = std::io::stdout();
        let mut in_handoff = false;
        let mut sessions = Vec::new();
        // Bytes of the current reply's text already printed.
        let mut printed = 0usize;
        loop {
            let event = tokio::select! {
                biased;
                event = events.recv() => event,
                () = done.cancelled() => match events.try_recv() {
                    Ok(event) => Ok(event),
                    Err(TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
                    Err(_) => break,
                },
            };
            match event {
                Ok(AgentEvent::HandoffStart { auto, prepared, .. }) => {
                    in_handoff = true;
                    if let Some(wall) = auto {
                        eprintln!("{}", controller::text::auto_banner(&wall, prepared));
                    }
                }
                Ok(AgentEvent::HandoffDraft(draft)) => {
                    if let Some(text) = controller::text::draft_status(&draft) {
                        eprintln!("{text}");
                    }
                }
                Ok(AgentEvent::HandoffEnd { outcome, auto: Some(wall), .. }) => {
                    in_handoff = false;
                    for notice in controller::auto_handoff_notices(&outcome, &wall, &cli_texts()) {
                        eprintln!("{}", notice.message);
                    }
                    if let HandoffOutcome::Done { ledger, .. } = &outcome {
                        eprintln!("{}", ledger.summary());
                    }
                }
                Ok(AgentEvent::HandoffEnd { .. }) => in_handoff = false,
                // Each session file the work writes is named, the one it ends in last.
                Ok(AgentEvent::SessionSwitch { new, .. }) => sessions.push(new),
                Ok(AgentEvent::MessageStart { message }) if message.is_assistant() => printed = 0,
                Ok(AgentEvent::MessageUpdate {
                    assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. },
                }) if !in_handoff => {
                    let _ = out.write_all(delta.as_bytes());
                    let _ = out.flush();
                    printed += delta.len();
                }
                // The events channel drops what a slow reader missed (a loaded machine, a slow
                // pipe): the reply's end carries its whole text, so what was missed is printed
                // from it, never lost.
                Ok(AgentEvent::MessageEnd { message }) if message.is_assistant() && !in_handoff => {
                    // As streamed: the text blocks one after the other, no separator between.
                    let text: String = message.content.blocks().iter().filter(|b| b.is_text()).filter_map(|b| b.text.clone()).collect();
                    if let Some(missed) = text.get(printed..).filter(|m| !m.is_empty()) {
                        let _ = out.write_all(missed.as_bytes());
                        let _ = out.flush();
                    }
                    printed = 0;
                }
                Ok(AgentEvent::Notice(notice)) if notice.level != Level::Info => {
                    eprintln!("warning: {}", notice.message);
                }
                Ok(AgentEvent::AgentEnd { .. }) if !in_handoff => {
                    let _ = out.write_all(b"\n");
                    let _ = out.flush();
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            }
        }
        sessions
    })
}

/// Runs `work` on the controller, SIGINT stopping what runs (the pipeline then leaves a
/// consistent state) instead of killing the process. Registered before the work starts, so
/// that even an early Ctrl-C stops it cleanly.
async fn interruptible<T: Send + 'static>(
    controller: &Arc<Controller>,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> anyhow::Result<T> {
    let mut interrupt = sigint()?;
    let run = tokio::spawn(work);
    let interrupted = {
        let controller = controller.clone();
        tokio::spawn(async move {
            if interrupt.recv().await.is_some() {
                controller.abort();
            }
        })
    };
    let result = run.await.context("the command's task failed");
    interrupted.abort();
    result
}

/// `prompt`: what was typed goes through the controller, as in the editor, so
/// `prompt "/handoff focus"` hands off.
async fn prompt(settings: &Settings, choice: SessionChoice, cwd: Option<PathBuf>, text: &str) -> anyhow::Result<u8> {
    let cwd = current_dir(cwd)?;
    let auto = settings.auto_handoff();
    if auto == AutoHandoff::Review {
        anyhow::bail!("--auto-handoff review needs an editor to review the document in: use continue or off");
    }
    let confined = refuse_unenforceable_sandbox(settings)?;
    let agent = open_agent(settings, &cwd, choice)?;
    // Said only once the prompt will run: a start that failed says why and nothing else.
    let warning = confined.then(warn_without_mount_namespace).flatten();
    eprintln!("{}", agent.session().path().display());
    let controller = Controller::new(agent.clone(), cli_texts());
    controller.apply_handoff_settings(settings);
    let done = CancellationToken::new();
    let printer = spawn_stdout_printer(&agent, done.clone());
    let ran = {
        let (controller, text) = (controller.clone(), text.to_string());
        interruptible(&controller.clone(), async move { controller.run_input(&text).await }).await
    };
    // Everything the work sent is printed before its outcome.
    done.cancel();
    if let Some(warning) = warning {
        let _ = warning.join();
    }
    // Each session file the work wrote is named, the one it ends in last.
    for session in printer.await.unwrap_or_default() {
        eprintln!("{session}");
    }
    agent.session().flush()?;
    Ok(match ran? {
        InputOutcome::Prompt(result) => prompt_exit_code(&result?),
        InputOutcome::Handoff(outcome) => handoff_exit_code(outcome)?,
        InputOutcome::Steered | InputOutcome::Nothing => exit::REFUSED,
        // The list after the command, on stdout; a refusal was told on stderr (its notice).
        InputOutcome::Pins(Ok(pins)) => {
            writeln!(std::io::stdout(), "{}", controller::text::pins(&pins))?;
            exit::OK
        }
        InputOutcome::Pins(Err(_)) => exit::FAILURE,
        // The parent's file, now the current session, on stdout (as a handoff names its new one).
        InputOutcome::Back(Ok(parent)) => {
            writeln!(std::io::stdout(), "{}", parent.display())?;
            exit::OK
        }
        InputOutcome::Back(Err(_)) => exit::FAILURE,
        // What another session command said, on stdout; a refusal was told on stderr.
        InputOutcome::Said(Ok(said)) => {
            writeln!(std::io::stdout(), "{said}")?;
            exit::OK
        }
        InputOutcome::Said(Err(_)) => exit::FAILURE,
    })
}

/// Whether the task finished: the last reply ended normally, and the work did not stop at the
/// wall (an automatic handoff cancelled, failed or stopped by its guard).
fn prompt_exit_code(result: &RunResult) -> u8 {
    if let Some(wall) = &result.wall {
        eprintln!(
            "error: stopped at the context wall ({} of {} tokens) without a new session to go on in",
            wall.tokens, wall.window
        );
        return exit::FAILURE;
    }
    let Some(reply) = result.last_assistant() else { return exit::FAILURE };
    match reply.stop_reason.unwrap_or_default() {
        StopReason::Aborted => {
            eprintln!("interrupted");
            exit::INTERRUPTED
        }
        StopReason::Error => {
            eprintln!("error: {}", reply.error_message.as_deref().unwrap_or("the model request failed"));
            exit::FAILURE
        }
        _ => exit::OK,
    }
}

async fn handoff(settings: &Settings, choice: SessionChoice, focus: Option<&str>, to: Option<&str>) -> anyhow::Result<u8> {
    let cwd = current_dir(None)?;
    let agent = open_agent(settings, &cwd, choice)?;
    let controller = Controller::new(agent.clone(), cli_texts());
    let options = HandoffOptions { focus: focus.map(str::to_string), review: None, to: to.map(str::to_string) };
    let done = CancellationToken::new();
    let printer = spawn_stdout_printer(&agent, done.clone());
    let outcome = {
        let controller = controller.clone();
        interruptible(&controller.clone(), async move { controller.handoff(options).await }).await
    };
    done.cancel();
    let _ = printer.await;
    handoff_exit_code(outcome?)
}

/// The command line's wording of texts that name a front end's commands.
fn cli_texts() -> FrontEndTexts {
    let hand_off = "`handoff-nvim handoff SESSION_FILE`".to_string();
    FrontEndTexts { review_handoff: hand_off.clone(), hand_off, ..FrontEndTexts::default() }
}

/// A handoff's outcome on stderr (the controller's words) and its exit code; the new session's
/// path on stdout. A refusal was said on the event route already (see the printer).
fn handoff_exit_code(outcome: HandoffOutcome) -> anyhow::Result<u8> {
    let notices = match outcome {
        HandoffOutcome::Refused { .. } => Vec::new(),
        _ => controller::handoff_notices(&outcome),
    };
    for notice in notices {
        match notice.level {
            Level::Info => {}
            Level::Warn => eprintln!("warning: {}", notice.message),
            Level::Error => eprintln!("{}", notice.message),
        }
    }
    Ok(match outcome {
        HandoffOutcome::Done { session_file, ledger, .. } => {
            eprintln!("{}", ledger.summary());
            writeln!(std::io::stdout(), "{session_file}")?;
            exit::OK
        }
        HandoffOutcome::Failed { .. } => exit::FAILURE,
        HandoffOutcome::Refused { .. } => exit::REFUSED,
        HandoffOutcome::Cancelled => exit::INTERRUPTED,
        // The CLI never asks for a review.
        HandoffOutcome::Review { .. } | HandoffOutcome::Discarded => exit::FAILURE,
    })
}

/// Runs a command that needs no async runtime (no network, no signals), or `None` for the
/// others: starting the runtime's threads would cost more than `context` of a small session.
pub fn run_local(command: &Command, settings: &Settings) -> Option<anyhow::Result<ExitCode>> {
    match command {
        Command::Context { file } => Some(print_context(file, settings)),
        Command::Todos { file } => Some(print_todos(file, settings)),
        Command::Sessions { cwd } => Some(print_sessions(cwd.clone(), settings)),
        Command::Changes { file, json } => Some(print_changes(file, *json)),
        Command::Rpc | Command::Acp | Command::Prompt { .. } | Command::Handoff { .. } | Command::Models | Command::Agents { .. } => None,
    }
}

/// The CLI refuses to start a prompt whose commands would have to run outside a sandbox that was
/// asked for (no one is asked: `--yes` never lifts it); the error names the flag. `true`: bash
/// runs sandboxed, so whether it gets its mount namespace is worth saying
/// ([`warn_without_mount_namespace`]).
fn refuse_unenforceable_sandbox(settings: &Settings) -> anyhow::Result<bool> {
    let sandbox = settings.sandbox();
    let bash = settings.tools.clone().unwrap_or_default().registry().ok().and_then(|r| r.get("bash"));
    if !sandbox.is_on() || bash.is_none() {
        return Ok(false);
    }
    if let Err(why) = handoff_core::sandbox::Support::probe().enforceable() {
        anyhow::bail!(
            "the sandbox (--sandbox {}) cannot be enforced: {why}; bash commands would run outside it: pass --sandbox off to allow that",
            sandbox.mode.as_str()
        );
    }
    Ok(true)
}

/// Says on stderr, when the probe answers, that commands get no mount namespace here (the
/// prompt goes on meanwhile; a command waits for that answer). The returned thread is joined
/// before exiting.
fn warn_without_mount_namespace() -> Option<std::thread::JoinHandle<()>> {
    let warn = || {
        if let Err(why) = handoff_core::sandbox::mount_namespaces() {
            eprintln!(
                "warning: the sandbox has no mount namespace here ({why}): the project's .git hooks and config stay writable to commands and the names in credential folders listable, so each command asks (--yes does not answer that)"
            );
        }
    };
    match std::thread::Builder::new().name("sandbox-warning".into()).spawn(warn) {
        Ok(thread) => Some(thread),
        Err(_) => {
            warn();
            None
        }
    }
}

fn print_context(file: &Path, settings: &Settings) -> anyhow::Result<ExitCode> {
    let session = open_session(file, settings)?;
    // Block-buffered: stdout's line buffering scans every write for a newline.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    session.write_context_json(&mut out)?;
    writeln!(out)?;
    out.flush()?;
    // The process ends here: freeing a large session entry by entry would cost a good part of
    // what loading it did.
    std::mem::forget(session);
    Ok(ExitCode::from(exit::OK))
}

fn print_todos(file: &Path, settings: &Settings) -> anyhow::Result<ExitCode> {
    let session = open_session(file, settings)?;
    let todos = session.todos();
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &todos)?;
    writeln!(out)?;
    out.flush()?;
    Ok(ExitCode::from(exit::OK))
}

fn print_sessions(cwd: Option<PathBuf>, settings: &Settings) -> anyhow::Result<ExitCode> {
    let cwd = current_dir(cwd)?;
    let mut out = std::io::stdout().lock();
    for info in SessionManager::list_sessions(&frontend_paths::session_dir(settings), &cwd)? {
        serde_json::to_writer(&mut out, &info)?;
        writeln!(out)?;
    }
    Ok(ExitCode::from(exit::OK))
}

/// `changes`: the session's pending hunks, from the review kept beside it.
fn print_changes(file: &Path, json: bool) -> anyhow::Result<ExitCode> {
    use handoff_core::session::review::{line_span, Review};
    if !file.is_file() {
        anyhow::bail!("{}: no such session file", file.display());
    }
    let mut out = std::io::stdout().lock();
    for call in Review::of_session(file).unreviewed()? {
        for hunk in &call.hunks {
            if json {
                let line = serde_json::json!({
                    "id": hunk.id, "path": call.path, "call_id": call.call_id, "tool": call.tool,
                    "before": hunk.before, "after": hunk.after, "state": hunk.state,
                });
                writeln!(out, "{line}")?;
            } else {
                let lnum = hunk.after.start + u32::from(!hunk.after.is_empty());
                writeln!(out, "{}:{}: {} {} ({} as the call wrote them)", call.path.display(), lnum.max(1), call.tool, call.call_id, line_span(hunk.after))?;
            }
        }
    }
    Ok(ExitCode::from(exit::OK))
}

/// Runs a headless command (not `rpc` nor `acp`: `handoff-nvim` serves those); returns the
/// process exit code.
pub async fn run(command: Command, settings: Settings) -> anyhow::Result<ExitCode> {
    let code = match command {
        // The front ends do not depend on each other: the executable serves these itself.
        Command::Rpc | Command::Acp => anyhow::bail!("the Neovim host and the ACP agent are served by the executable, not the CLI"),
        Command::Prompt { session, new, cwd, agent, text } => {
            let text = text.join(" ");
            let named = session.as_deref().and_then(|path| read_named_session(path, &settings));
            let on_agent = agent.is_some() || named.as_ref().is_some_and(|(_, on_agent)| *on_agent);
            let choice = match (named, session, new) {
                (Some((session, _)), _, _) => SessionChoice::Loaded(Box::new(session)),
                (None, Some(path), _) => SessionChoice::File(path),
                (None, None, false) => SessionChoice::Newest,
                (None, None, true) => SessionChoice::New,
            };
            match on_agent {
                true => agents::prompt(&settings, agent.as_deref(), choice, cwd, &text).await?,
                false => prompt(&settings, choice, cwd, &text).await?,
            }
        }
        Command::Context { file } => return print_context(&file, &settings),
        Command::Todos { file } => return print_todos(&file, &settings),
        Command::Sessions { cwd } => return print_sessions(cwd, &settings),
        Command::Changes { file, json } => return print_changes(&file, json),
        Command::Handoff { file, focus, to } => {
            let (choice, on_agent) = match read_named_session(&file, &settings) {
                Some((session, on_agent)) => (SessionChoice::Loaded(Box::new(session)), on_agent),
                None => (SessionChoice::File(file), false),
            };
            match on_agent {
                true => agents::handoff(&settings, choice, focus.as_deref(), to.as_deref()).await?,
                false => handoff(&settings, choice, focus.as_deref(), to.as_deref()).await?,
            }
        }
        Command::Agents { no_start } => agents::list(&settings, !no_start).await?,
        Command::Models => print_models(&settings).await?,
    };
    Ok(ExitCode::from(code))
}
