//! The command line's side of external agents (`crate::agents`): `prompt --agent NAME|COMMAND`,
//! `prompt --session FILE` on an agent's session, `handoff FILE --to NAME|ours`, `agents`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{consent, current_dir, exit, open_session, say_warnings, sigint};
use handoff_agents::handoff::{self as agent_handoff, Target};
use handoff_agents::{self as agents, AgentSpec, ExternalSession, Services, Shown};
use handoff_core::config::Settings;
use handoff_core::controller::commands::{self, SlashCommand};
use handoff_core::controller::SessionChoice;
use handoff_core::message::Message;
use handoff_core::session::SessionManager;
use handoff_core::tools::{DiskFileAccess, EnvPolicy};
use handoff_frontend_paths as frontend_paths;

/// The reply on stdout as it streams, the agent's tool calls on stderr.
struct Printed;

impl Shown for Printed {
    fn text(&self, _index: usize, delta: &str) {
        let mut out = std::io::stdout();
        let _ = out.write_all(delta.as_bytes());
        let _ = out.flush();
    }

    fn tool(&self, title: &str, status: &str) {
        if !title.is_empty() {
            let status = if status.is_empty() { "pending" } else { status };
            eprintln!("[{status}] {title}");
        }
    }
}

/// How the agent's requests are served from the command line: the policy of the settings
/// (`--yes`), the terminal to ask on, the disk, our environment policy and sandbox.
pub fn services(settings: &Settings, cwd: &Path) -> Arc<Services> {
    let tools = settings.tools.clone().unwrap_or_default();
    let secrets = settings.provider_config().map(|c| c.secret_vars()).unwrap_or_default();
    Arc::new(Services {
        cwd: cwd.to_path_buf(),
        policy: tools.policy(),
        grants: Default::default(),
        consent: consent::for_this_process(),
        files: Arc::new(DiskFileAccess),
        env: EnvPolicy::new(&tools.env.unwrap_or_default()).with_secrets(secrets),
        sandbox: settings.sandbox(),
        terminals: Default::default(),
        edit_originals: Default::default(),
    })
}

/// Cancelled at the first Ctrl-C (the turn then ends as the agent ends it).
fn ctrl_c() -> anyhow::Result<CancellationToken> {
    let token = CancellationToken::new();
    let mut interrupt = sigint()?;
    let cancel = token.clone();
    tokio::spawn(async move {
        if interrupt.recv().await.is_some() {
            cancel.cancel();
        }
    });
    Ok(token)
}

/// `prompt` on an external agent: `agent` (`--agent`), else the one `session` runs on.
/// A new session unless `session` is given; `/handoff [focus]` hands the session off to a new
/// one on the same agent.
pub async fn prompt(settings: &Settings, agent: Option<&str>, choice: SessionChoice, cwd: Option<PathBuf>, text: &str) -> anyhow::Result<u8> {
    let cwd = current_dir(cwd)?;
    let mut record = match choice {
        SessionChoice::Loaded(session) => record_of(*session),
        SessionChoice::File(path) => open_session(&path, settings)?,
        SessionChoice::Newest | SessionChoice::New => SessionManager::create(&frontend_paths::session_dir(settings), &cwd, None)?,
    };
    let recorded = agents::agent_of(&record);
    let spec = match (agent, &recorded) {
        (Some(agent), _) => AgentSpec::resolve(settings, agent)?,
        (None, Some(entry)) => entry.agent.clone(),
        (None, None) => anyhow::bail!("{} does not run on an external agent: name one with --agent", record.path().display()),
    };
    let resume = recorded.filter(|e| e.agent == spec).and_then(|e| e.session_id);
    let cwd = record.cwd().to_path_buf();
    let services = services(settings, &cwd);
    let cancel = ctrl_c()?;
    if let Some((SlashCommand::Handoff, arg)) = commands::parse(text) {
        let commands::HandoffArgs { focus, to } = commands::handoff_args(arg).map_err(anyhow::Error::msg)?;
        let target = match to {
            None => Target::Same,
            Some(to) => Target::named(settings, &to)?,
        };
        if !record.is_written() {
            anyhow::bail!("nothing to hand off: the session is empty");
        }
        if agent.is_some() {
            agents::record_agent_spec(&mut record, &spec)?;
        }
        let focus = Some(focus.trim()).filter(|f| !f.is_empty());
        return hand_off(&std::sync::Mutex::new(record), services, focus, target, &cancel).await;
    }
    eprintln!("{}", record.path().display());
    let (mut external, resumed) = ExternalSession::open(spec, services, resume.as_deref()).await?;
    let mut blocks = if resumed { Vec::new() } else { agent_handoff::context_blocks(&record, 0) };
    blocks.push(serde_json::json!({ "type": "text", "text": text }));
    let record = std::sync::Mutex::new(record);
    let session = || handoff_core::sync::lock(&record);
    let turn = external.prompt(&session, blocks, Some(Message::user(text)), &cancel, &Printed).await;
    external.close().await;
    let turn = turn?;
    writeln!(std::io::stdout())?;
    Ok(match turn.stop.as_str() {
        "end_turn" => exit::OK,
        "cancelled" => {
            eprintln!("interrupted");
            exit::INTERRUPTED
        }
        other => {
            eprintln!("error: the agent stopped: {other}");
            exit::FAILURE
        }
    })
}

/// `handoff FILE` of an external agent's session (`--to`: where it goes on).
pub async fn handoff(settings: &Settings, choice: SessionChoice, focus: Option<&str>, to: Option<&str>) -> anyhow::Result<u8> {
    let record = match choice {
        SessionChoice::Loaded(session) => record_of(*session),
        SessionChoice::File(path) => open_session(&path, settings)?,
        SessionChoice::Newest | SessionChoice::New => anyhow::bail!("a handoff needs a session file"),
    };
    let target = match to {
        None => Target::Same,
        Some(to) => Target::named(settings, to)?,
    };
    let services = services(settings, record.cwd());
    let cancel = ctrl_c()?;
    hand_off(&std::sync::Mutex::new(record), services, focus, target, &cancel).await
}

/// A session the command read already, as `open_session` gives one: its load's warnings said.
fn record_of(session: SessionManager) -> SessionManager {
    say_warnings(&session);
    session
}

async fn hand_off(record: &std::sync::Mutex<SessionManager>, services: Arc<Services>, focus: Option<&str>, target: Target, cancel: &CancellationToken) -> anyhow::Result<u8> {
    /// The document is not streamed: the outcome is the new session's path.
    struct Quiet;
    impl Shown for Quiet {
        fn text(&self, _index: usize, _delta: &str) {}
    }
    match agent_handoff::hand_off(record, services, focus, target, cancel, &Quiet).await {
        Ok(done) => {
            eprintln!("the document: {}", done.document_file.display());
            writeln!(std::io::stdout(), "{}", done.session_file.display())?;
            Ok(exit::OK)
        }
        Err(agent_handoff::ExternalHandoffError::NoDocument { stop }) if stop == "cancelled" => {
            eprintln!("handoff cancelled");
            Ok(exit::INTERRUPTED)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(exit::FAILURE)
        }
    }
}

/// `agents`: each configured agent, found (`program`: where) and, when `start`, started and
/// asked what it is (JSON lines: name, command, found, program, version, protocol, error). Exit
/// 1 when one is missing or does not answer.
pub async fn list(settings: &Settings, start: bool) -> anyhow::Result<u8> {
    let cwd = current_dir(None)?;
    let mut code = exit::OK;
    for spec in AgentSpec::configured(settings) {
        let program = spec.program();
        let mut line = serde_json::json!({ "name": spec.name, "command": spec.command, "found": program.is_some() });
        if let Some(program) = program {
            line["program"] = program.display().to_string().into();
        }
        let probed = match spec.missing() {
            Some(missing) => Err(missing),
            None if !start => {
                writeln!(std::io::stdout(), "{line}")?;
                continue;
            }
            None => match tokio::time::timeout(std::time::Duration::from_secs(30), agents::probe(&spec, &cwd)).await {
                Ok(Ok(info)) => Ok(info),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("no answer to initialize within 30 s".to_string()),
            },
        };
        match probed {
            Ok(info) => {
                line["version"] = info.version.into();
                line["agent"] = info.name.into();
                line["protocol"] = info.protocol.into();
                line["loadSession"] = info.load_session.into();
            }
            Err(e) => {
                line["error"] = e.into();
                code = exit::FAILURE;
            }
        }
        writeln!(std::io::stdout(), "{line}")?;
    }
    Ok(code)
}
