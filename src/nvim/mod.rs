//! The Neovim host: msgpack-RPC over stdio (nvim-rs + tokio).
//!
//! Methods (`lua/handoff/host.lua` is the other side):
//!
//! | name            | kind         | args                         | result / effect                      |
//! |-----------------|--------------|------------------------------|--------------------------------------|
//! | `ping`          | request      | —                            | `"pong"`                             |
//! | `version`       | request      | —                            | the crate version                    |
//! | `configure`     | request      | `{settings, cwd, session_file?}` | status + transcript (session opened or created) |
//! | `status`        | request      | —                            | `{session_file, session_id, busy, generating_handoff, …}` |
//! | `transcript`    | request      | —                            | status + `items` (the chat)          |
//! | `sessions`      | request      | —                            | sessions of the cwd, newest first    |
//! | `templates`     | request      | —                            | `[{name, description}]`              |
//! | `new_session`   | request      | —                            | status (a `session_switch` event follows) |
//! | `resume`        | request      | `path`                       | status (a `session_switch` event follows) |
//! | `set_model`     | request      | `model`                      | status                               |
//! | `health`        | request      | —                            | provider reachability, key presence (never the key) |
//! | `prompt`        | notification | `text`                       | runs the prompt (or `/handoff`) in a task |
//! | `handoff`       | notification | `focus?`                     | runs the handoff in a task           |
//! | `abort`         | notification | —                            | stops the running response           |
//! | `abort_handoff` | notification | —                            | cancels the handoff being generated  |
//! | `shutdown`      | notification | —                            | flushes the session and exits        |
//!
//! Long work never runs inside a handler (nvim-rs runs notifications one at a time: an abort would
//! queue behind the work it must stop). Results of long work arrive as events (see `bridge`).

mod bridge;
mod stdio;
pub mod transcript;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use nvim_rs::{Handler, Neovim};
use rmpv::Value;
use serde_json::json;

use crate::core::agent::{lock, AgentError, AgentSession, PromptOptions};
use crate::core::config::Settings;
use crate::core::controller::{self, Input, Level, Notice};
use crate::core::handoff::HandoffOutcome;
use crate::core::session::SessionManager;
use crate::frontend_paths;
use bridge::Outbox;
use stdio::Writer;

/// Overrides the CLI/environment settings with the ones `setup()` gave.
fn merge(base: &Settings, over: Settings) -> Settings {
    Settings {
        api: over.api.or(base.api),
        base_url: over.base_url.or_else(|| base.base_url.clone()),
        model: over.model.or_else(|| base.model.clone()),
        api_key_env: over.api_key_env.or_else(|| base.api_key_env.clone()),
        api_key_cmd: over.api_key_cmd.or_else(|| base.api_key_cmd.clone()),
        context_window: over.context_window.or(base.context_window),
        max_tokens: over.max_tokens.or(base.max_tokens),
        name: over.name.or_else(|| base.name.clone()),
        session_dir: over.session_dir.or_else(|| base.session_dir.clone()),
        templates_dir: over.templates_dir.or_else(|| base.templates_dir.clone()),
        max_retries: over.max_retries.or(base.max_retries),
        timeout: over.timeout.or(base.timeout),
        system_prompt: over.system_prompt.or_else(|| base.system_prompt.clone()),
    }
}

/// A prompt typed while a handoff is generated is refused (it would be dropped with the old
/// session's queues on success). The way out names the chat buffer's key, so the text is the
/// editor's, not the controller's.
fn prompt_during_handoff() -> Notice {
    Notice {
        level: Level::Warn,
        message: "A handoff is being generated: wait for it, or press <Esc> in the chat to cancel it, then send the prompt again"
            .into(),
    }
}

/// `configure`'s argument.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct ConfigureArgs {
    settings: Option<rmpv::Value>,
    cwd: Option<PathBuf>,
    session_file: Option<PathBuf>,
}

struct Inner {
    base_settings: Settings,
    settings: Mutex<Settings>,
    cwd: Mutex<PathBuf>,
    agent: Mutex<Option<Arc<AgentSession>>>,
    collector: Mutex<Option<tokio::task::JoinHandle<()>>>,
    outbox: Arc<Outbox>,
    shutdown: tokio::sync::Notify,
}

/// The `Handler` nvim-rs calls; clones share one host.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

type Reply = Result<Value, Value>;

fn to_rmpv(v: serde_json::Value) -> Value {
    rmpv::ext::to_value(v).unwrap_or(Value::Nil)
}

/// Decodes through JSON: rmpv's own decoder wants enums as maps, Lua sends them as strings.
fn from_rmpv<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
    let json: serde_json::Value = rmpv::ext::from_value(v).map_err(|e| e.to_string())?;
    serde_json::from_value(json).map_err(|e| e.to_string())
}

fn err(message: impl std::fmt::Display) -> Value {
    Value::from(message.to_string())
}

fn arg_str(args: &[Value], i: usize) -> Option<String> {
    args.get(i).and_then(|v| v.as_str()).map(str::to_string)
}

impl Host {
    fn new(settings: Settings) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Host {
            inner: Arc::new(Inner {
                settings: Mutex::new(settings.clone()),
                base_settings: settings,
                cwd: Mutex::new(cwd),
                agent: Mutex::new(None),
                collector: Mutex::new(None),
                outbox: Arc::new(Outbox::default()),
                shutdown: tokio::sync::Notify::new(),
            }),
        }
    }

    fn agent(&self) -> Option<Arc<AgentSession>> {
        lock(&self.inner.agent).clone()
    }

    fn agent_or_err(&self) -> Result<Arc<AgentSession>, Value> {
        self.agent().ok_or_else(|| err("the host is not configured yet (call configure first)"))
    }

    fn notice(&self, level: Level, message: impl Into<String>) {
        self.inner.outbox.push(transcript::notice(&Notice { level, message: message.into() }));
    }

    fn configure(&self, args: &[Value]) -> Reply {
        let parsed: ConfigureArgs = match args.first() {
            Some(v @ Value::Map(_)) => rmpv::ext::from_value(v.clone()).map_err(|e| err(format!("configure: {e}")))?,
            _ => ConfigureArgs::default(),
        };
        let over: Settings = match parsed.settings {
            // Lua sends an empty table as an empty array.
            None | Some(Value::Array(_)) | Some(Value::Nil) => Settings::default(),
            Some(v) => from_rmpv(v).map_err(|e| err(format!("invalid provider settings: {e}")))?,
        };
        let settings = merge(&self.inner.base_settings, over);
        let cwd = match parsed.cwd {
            Some(c) => c,
            None => lock(&self.inner.cwd).clone(),
        };
        if let Some(agent) = self.agent() {
            if agent.is_busy() || agent.is_generating_handoff() {
                return Err(err("cannot reconfigure while a response is in progress"));
            }
        }
        let session_dir = frontend_paths::session_dir(&settings);
        let session = match &parsed.session_file {
            Some(path) if path.exists() => SessionManager::open(path, &session_dir),
            _ => SessionManager::create(&session_dir, &cwd, None),
        }
        .map_err(|e| err(format!("cannot open the session: {e}")))?;
        for w in session.warnings() {
            self.notice(Level::Warn, w.clone());
        }
        let fresh = session.get_entries().is_empty();
        let agent = Arc::new(AgentSession::new(settings.agent_config(), session));
        if fresh {
            let recorded = agent.record_settings(&mut agent.session());
            if let Err(e) = recorded {
                return Err(err(format!("cannot write the session: {e}")));
            }
        }
        if let Some(old) = lock(&self.inner.collector).replace(bridge::spawn_collector(agent.clone(), self.inner.outbox.clone())) {
            old.abort();
        }
        if let Some(old) = lock(&self.inner.agent).replace(agent.clone()) {
            let _ = old.session().flush();
        }
        *lock(&self.inner.settings) = settings;
        *lock(&self.inner.cwd) = cwd;
        tracing::info!(session = %agent.session().path().display(), "configured");
        Ok(to_rmpv(transcript::transcript(&agent, transcript::PAGE)))
    }

    fn sessions(&self) -> Reply {
        let settings = lock(&self.inner.settings).clone();
        let cwd = lock(&self.inner.cwd).clone();
        let current = self.agent_or_err().ok().map(|a| a.session().path().to_path_buf());
        let mut list = SessionManager::list_sessions(&frontend_paths::session_dir(&settings), &cwd).map_err(err)?;
        // Every start of the editor opens a session: the picker hides the ones never used.
        list.retain(|s| !s.empty || Some(&s.path) == current.as_ref());
        serde_json::to_value(list).map(|v| to_rmpv(transcript::strip_nulls(v))).map_err(err)
    }

    fn templates(&self) -> Reply {
        let list = lock(&self.inner.settings)
            .templates_dir
            .as_deref()
            .map(crate::core::agent::templates::list)
            .unwrap_or_default();
        let list: Vec<_> = list.into_iter().map(|t| json!({ "name": t.name, "description": t.description })).collect();
        Ok(to_rmpv(serde_json::Value::Array(list)))
    }

    fn resume(&self, args: &[Value]) -> Reply {
        let agent = self.agent_or_err()?;
        let path = arg_str(args, 0).ok_or_else(|| err("resume: a session file path is required"))?;
        let session_dir = frontend_paths::session_dir(&lock(&self.inner.settings));
        let session = SessionManager::open(std::path::Path::new(&path), &session_dir).map_err(err)?;
        let warnings = session.warnings().to_vec();
        agent.switch_session(session).map_err(busy_message)?;
        for w in warnings {
            self.notice(Level::Warn, w);
        }
        Ok(to_rmpv(transcript::status(&agent)))
    }

    fn set_model(&self, args: &[Value]) -> Reply {
        let agent = self.agent_or_err()?;
        let model = arg_str(args, 0).filter(|m| !m.trim().is_empty()).ok_or_else(|| err("set_model: a model name is required"))?;
        if agent.is_busy() {
            return Err(busy_message(AgentError::Busy));
        }
        let mut config = agent.provider_config();
        config.model = model.trim().to_string();
        agent.set_model(config).map_err(err)?;
        lock(&self.inner.settings).model = Some(model.trim().to_string());
        Ok(to_rmpv(transcript::status(&agent)))
    }

    async fn health(&self) -> Reply {
        let settings = lock(&self.inner.settings).clone();
        let config = self.agent().map(|a| a.provider_config()).unwrap_or_else(|| settings.provider_config());
        let key = if let Some(cmd) = config.api_key_cmd.as_deref().filter(|c| !c.trim().is_empty()) {
            // Only the program: the rest of the command line may be the key itself.
            let cmd = crate::core::provider::describe_cmd(cmd);
            json!({ "source": "api_key_cmd", "detail": format!("command `{cmd}` (not run by the health check)"), "present": serde_json::Value::Null })
        } else if let Some(var) = &config.api_key_env {
            let present = std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
            json!({ "source": "env", "detail": format!("${var}"), "present": present })
        } else {
            json!({ "source": "none", "detail": "no key configured (fine for a local server)", "present": serde_json::Value::Null })
        };
        let probe = crate::core::provider::probe(&config).await;
        let reachable = json!({ "ok": probe.ok(), "detail": probe.detail() });
        let session_dir = frontend_paths::session_dir(&settings);
        let writable = std::fs::create_dir_all(&session_dir)
            .and_then(|()| tempfile_probe(&session_dir))
            .map_err(|e| e.to_string());
        Ok(to_rmpv(transcript::strip_nulls(json!({
            "version": env!("CARGO_PKG_VERSION"),
            "api": config.api,
            "provider": config.name,
            "base_url": crate::core::provider::display_url(&config.base_url),
            "model": config.model,
            "key": key,
            "reachable": reachable,
            "session_dir": session_dir,
            "session_dir_writable": writable.as_ref().is_ok(),
            "session_dir_error": writable.err(),
        }))))
    }

    fn new_session(&self) -> Reply {
        let agent = self.agent_or_err()?;
        agent.new_session().map_err(busy_message)?;
        Ok(to_rmpv(transcript::status(&agent)))
    }

    /// `prompt`: the input controller's interception, then a task.
    fn prompt(&self, text: String) {
        let Some(agent) = self.agent() else {
            self.notice(Level::Error, "handoff.nvim: the host is not configured yet");
            return;
        };
        match controller::classify_input(&text) {
            Input::Handoff { focus } => self.handoff(Some(focus)),
            Input::Prompt(text) if text.trim().is_empty() => {}
            Input::Prompt(_) if agent.is_generating_handoff() => {
                self.inner.outbox.push(transcript::notice(&prompt_during_handoff()));
            }
            Input::Prompt(text) => {
                if agent.is_busy() {
                    agent.steer(&text);
                    self.notice(Level::Info, "Queued: sent when the current reply reaches a turn boundary");
                    return;
                }
                let outbox = self.inner.outbox.clone();
                tokio::spawn(async move {
                    match agent.prompt(&text, PromptOptions::default()).await {
                        Ok(_) => {}
                        Err(AgentError::Busy) => {
                            // Another prompt won the race: queue this one behind it.
                            agent.steer(&text);
                        }
                        Err(e) => outbox.push(transcript::notice(&Notice {
                            level: Level::Error,
                            message: format!("The prompt failed: {e}"),
                        })),
                    }
                });
            }
        }
    }

    /// `handoff`: the controller's pre-flight guard, then the pipeline in a task.
    fn handoff(&self, focus: Option<String>) {
        let Some(agent) = self.agent() else {
            self.notice(Level::Error, "handoff.nvim: the host is not configured yet");
            return;
        };
        if let Err(notice) = controller::handoff_preflight(&agent) {
            self.inner.outbox.push(transcript::notice(&notice));
            return;
        }
        let outbox = self.inner.outbox.clone();
        tokio::spawn(async move {
            let outcome = agent.handoff(focus.as_deref()).await;
            // A refusal ends before `handoff_start`: no `handoff_end` event carries it.
            if let HandoffOutcome::Refused { .. } = outcome {
                for notice in controller::handoff_notices(&outcome) {
                    outbox.push(transcript::notice(&notice));
                }
            }
        });
    }

    /// Stops what runs, waits briefly for it to be recorded, and flushes the session.
    async fn finish(&self) {
        let Some(agent) = self.agent() else { return };
        agent.abort_handoff();
        agent.abort();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        while (agent.is_busy() || agent.is_generating_handoff()) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let flushed = agent.session().flush();
        if let Err(e) = flushed {
            tracing::error!("cannot flush the session at exit: {e}");
        }
    }
}

/// reqwest errors can carry the URL with credentials in it: say what kind of failure it was.
fn tempfile_probe(dir: &std::path::Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".handoff-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

fn busy_message(e: AgentError) -> Value {
    match e {
        AgentError::Busy => err("A response is in progress: stop it first"),
        other => err(other),
    }
}

#[async_trait]
impl Handler for Host {
    type Writer = Writer;

    async fn handle_request(&self, name: String, args: Vec<Value>, _nvim: Neovim<Writer>) -> Reply {
        tracing::debug!(%name, "request");
        match name.as_str() {
            "ping" => Ok(Value::from("pong")),
            "version" => Ok(Value::from(env!("CARGO_PKG_VERSION"))),
            "configure" => self.configure(&args),
            "status" => Ok(to_rmpv(transcript::status(&*self.agent_or_err()?))),
            // `transcript(limit?)`: the last `limit` items (a page by default).
            "transcript" => {
                let limit = args.first().and_then(Value::as_u64).map_or(transcript::PAGE, |n| n as usize);
                Ok(to_rmpv(transcript::transcript(&*self.agent_or_err()?, limit)))
            }
            "sessions" => self.sessions(),
            "templates" => self.templates(),
            "new_session" => self.new_session(),
            "resume" => self.resume(&args),
            "set_model" => self.set_model(&args),
            "health" => self.health().await,
            other => Err(err(format!("unknown request {other}"))),
        }
    }

    async fn handle_notify(&self, name: String, args: Vec<Value>, _nvim: Neovim<Writer>) {
        tracing::debug!(%name, "notification");
        match name.as_str() {
            "prompt" => match arg_str(&args, 0) {
                Some(text) => self.prompt(text),
                None => self.notice(Level::Error, "prompt: the text is missing"),
            },
            "handoff" => self.handoff(arg_str(&args, 0)),
            "abort" => {
                if let Some(agent) = self.agent() {
                    agent.abort();
                }
            }
            "abort_handoff" => {
                if let Some(agent) = self.agent() {
                    agent.abort_handoff();
                }
            }
            "shutdown" => self.inner.shutdown.notify_one(),
            other => tracing::warn!("unknown notification {other}"),
        }
    }
}

/// Serves one Neovim over stdin/stdout until it goes away, then exits the process (after
/// flushing the session): tokio's stdin reader would otherwise keep the runtime alive.
pub async fn serve(settings: Settings) -> anyhow::Result<()> {
    let host = Host::new(settings);
    let (reader, writer) = stdio::channel()?;
    let (nvim, io) = Neovim::new(reader, writer, host.clone());
    let io = tokio::spawn(io);
    let _flusher = bridge::spawn_flusher(nvim, host.inner.outbox.clone());
    tracing::info!(pid = std::process::id(), "host started");
    #[cfg(unix)]
    let terminated = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminated = std::future::pending::<()>();
    tokio::select! {
        result = io => match result {
            Ok(Ok(())) => tracing::info!("Neovim closed the channel"),
            Ok(Err(e)) if e.is_channel_closed() => tracing::info!("Neovim closed the channel"),
            Ok(Err(e)) => tracing::warn!("RPC loop ended: {e}"),
            Err(e) => tracing::error!("RPC loop panicked: {e}"),
        },
        () = terminated => tracing::info!("SIGTERM"),
        () = host.inner.shutdown.notified() => tracing::info!("shutdown requested"),
    }
    host.finish().await;
    tracing::info!("host exits");
    std::process::exit(0)
}
