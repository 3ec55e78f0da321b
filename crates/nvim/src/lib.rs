//! The Neovim host: msgpack-RPC over stdio (nvim-rs + tokio). The protocol's types are in
//! [`protocol`] (rmp-serde): every call's arguments decode into a [`protocol::Request`] or
//! [`protocol::Notification`]; `lua/handoff/host.lua` is the other side.
//!
//! Every request answers at once with `{ ok = value }` or `{ error = { kind, message } }`
//! ([`Failure`]): none waits for a session being loaded, which is a `not_ready` failure (Lua
//! retries when the session's `transcript` record arrives), nor for the network or a key
//! command: what needs the provider (its model list, enabling a model, the health probes) runs
//! in a task and reports through a record (`models`, `model_enabled`, `health_probes`). Input
//! sent as a notification before the session is open is kept, in order, and runs once it is.
//!
//! | name            | kind         | args                         | result / effect                      |
//! |-----------------|--------------|------------------------------|--------------------------------------|
//! | `ping`          | request      | —                            | `"pong"`                             |
//! | `version`       | request      | —                            | the crate version                    |
//! | `configure`     | request      | [`protocol::ConfigureArgs`]  | `true` at once; the session opens in the background and arrives as a `transcript` record |
//! | `status`        | request      | —                            | [`protocol::Status`]                 |
//! | `transcript`    | request      | `limit?`                     | [`protocol::Transcript`] (the chat)  |
//! | `changes`       | request      | —                            | [`protocol::Changes`]: files the agent changed in this session, with their originals |
//! | `review`        | request      | —                            | [`protocol::ReviewList`]: every call's hunks and review states |
//! | `review_decide` | request      | decisions `{ id, state, reason?, edited? }[]` | the ids not known |
//! | `review_split`  | request      | `{ id, parts }`              | the parts' new ids, or nil |
//! | `templates`     | request      | —                            | `[{name, description}]`              |
//! | `agent_offers`  | request      | —                            | what the session's external agent offers, `{commands, mode?, model?}` (each choice `{current, available}`), or nil (ours, or still starting) |
//! | `agent_choose`  | request      | `what` (`mode`/`model`), `value` | `true` once the agent took it |
//! | `new_session`   | request      | —                            | status (a `session_switch` record follows) |
//! | `set_model`     | request      | `model`                      | status                               |
//! | `set_thinking`  | request      | `level`                      | status (the change is recorded in the session) |
//! | `health`        | request      | —                            | [`protocol::Health`]: the local facts, key presence (never the key), the probes' last result for this model; starts the probes, a `health_probes` record brings them |
//! | `system_prompt` | request      | —                            | [`protocol::SystemPromptInfo`]: the system prompt as sent, its files and skills |
//! | `mcp`           | request      | `action?`, `server?`         | [`protocol::McpList`] after `list` (default), `trust` (its second argument: the `project.digest` of the listing the user confirmed), or `start`/`stop` (which go on in the background, a notice tells how they ended) |
//! | `models`        | request      | `fetch?`                     | [`protocol::ModelList`]: the models known now, with their windows; with `fetch` and the provider's list unread, `pending` and a `models` record brings the list |
//! | `enable_model`  | request      | `model`                      | `true` at once; enables a Copilot model for the account in a task (after the user said yes), a `model_enabled` record says how it ended |
//! | `prompt`        | notification | `text`                       | what the user typed: the controller classifies it (`/handoff …` too) |
//! | `handoff`       | notification | `focus?`, `{review?}`        | runs the handoff in a task (no `review`: the configured default) |
//! | `handoff_commit`| notification | `text`                       | review mode: start the new session with the text as written |
//! | `handoff_discard`| notification | —                           | review mode: discard the document    |
//! | `approve`       | notification | `id`, `decision`, `reason?`  | answers a tool call waiting in the chat |
//! | `approve_reviewed` | notification | `id`, `text`             | allows an edit/write with the file as the user kept its hunks (`changes.review = "before"`) |
//! | `resume`        | notification | `path`                       | loads and switches in the background (`session_switch` + `transcript` follow) |
//! | `view_session`  | notification | `path`, `limit?`             | reads any session file in the background, without switching to it: a `session_view` record follows |
//! | `sessions`      | notification | —                            | lists the cwd's sessions in the background: a `sessions` record follows, in the picker's order (chains of handoffs, [`protocol::SessionListItem`]) |
//! | `abort`         | notification | —                            | stops the running response (and a handoff); drops input waiting for the session |
//! | `abort_handoff` | notification | —                            | cancels the handoff being generated  |
//! | `shutdown`      | notification | —                            | flushes the session and exits        |
//!
//! Long work never runs inside a handler (nvim-rs runs notifications one at a time: an abort would
//! queue behind the work it must stop), and nothing that reads a session file blocks a request:
//! a 100k-entry session takes ~100 ms to load. Results arrive as records (see `bridge`).

mod bridge;
mod memory;
pub mod protocol;
mod editor;
pub mod slash_commands;
mod stdio;
pub mod transcript;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use nvim_rs::{Handler, Neovim};
use rmpv::Value;
use serde::Serialize;
use tokio::sync::watch;

use handoff_core::agent::{lock, AgentSession};
use handoff_core::config::Settings;
use handoff_core::controller::{self, text, Controller, FrontEnd, FrontEndTexts, Level, Notice, SessionChoice};
use handoff_core::failure::{Failure, FailureKind};
use handoff_core::mcp::McpHub;
use handoff_core::handoff::HandoffOptions;
use handoff_core::provider::{Provider, ThinkingLevel};
use handoff_core::session::chain::Chains;
use handoff_core::session::SessionManager;
use handoff_frontend_paths as frontend_paths;
use bridge::Outbox;
use protocol::{ConfigureArgs, Notification, Record, Request, Resume, SessionListItem, TemplateItem};
use stdio::Writer;

/// The editor's own wording of texts that name its keys.
pub(crate) fn editor_texts() -> FrontEndTexts {
    FrontEndTexts {
        prompt_during_handoff:
            "A handoff is being generated: wait for it, or press <Esc> to cancel it, then send the prompt again".into(),
        hand_off: "/handoff (:Handoff)".into(),
        review_handoff: ":Handoff! or /handoff".into(),
    }
}

struct Inner {
    base_settings: Settings,
    settings: Mutex<Settings>,
    cwd: Mutex<PathBuf>,
    /// `setup{ handoff = { review } }`, given to every controller.
    handoff_review: Mutex<bool>,
    /// The controller of the open session; `None` until the first one is open.
    controller: watch::Sender<Option<Arc<Controller>>>,
    /// Input that arrived while no session could take it (before the first one was open, or
    /// while `configure` reloads), in order, and the reload in flight: taken with the same lock
    /// as the controller is set, so none slips between.
    waiting: Mutex<Waiting>,
    collector: Mutex<Option<tokio::task::JoinHandle<()>>>,
    outbox: Arc<Outbox>,
    shutdown: tokio::sync::Notify,
    /// Tool calls waiting for the user's answer in the chat.
    approvals: Arc<editor::Approvals>,
    /// The connection to Neovim, for tools that write through its buffers.
    nvim: Arc<OnceLock<Neovim<Writer>>>,
    /// The MCP servers of the configured sessions (`None`: none configured).
    mcp: Mutex<Option<Arc<McpHub>>>,
    /// The health check's last probes and the one running (see [`Host::health`]).
    probes: Mutex<ProbeCache>,
}

/// What waits for a session (see [`Inner::waiting`]).
#[derive(Default)]
struct Waiting {
    inputs: Vec<Notification>,
    /// The reload in flight holds the old session in `Switching` (dropped when it ends).
    reload: Option<controller::PhaseGuard>,
    /// Each `configure` counts one: only the latest installs its session.
    generation: u64,
}

/// Which provider and model a health probe was for: a probe of another is never shown.
type ProbeKey = (String, String, String);

/// The health check's network half: the last result and whether a refresh runs.
#[derive(Default)]
struct ProbeCache {
    last: Option<(ProbeKey, std::time::Instant, protocol::HealthProbes)>,
    running: Option<ProbeKey>,
}

/// The `Handler` nvim-rs calls; clones share one host.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

type Reply = Result<Value, Failure>;

/// An answer to a request, encoded; a value that cannot be encoded is an error the user sees.
fn reply<T: Serialize>(what: &'static str, value: &T) -> Reply {
    protocol::encode(what, value).map_err(|e| Failure::invalid(e.to_string()))
}

/// A blocking task that did not finish (it panicked or the runtime is going away).
fn stopped(e: tokio::task::JoinError) -> Failure {
    Failure::new(FailureKind::Io, format!("the loader stopped: {e}"))
}

impl Host {
    fn new(settings: Settings) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let (controller, _) = watch::channel(None);
        Host {
            inner: Arc::new(Inner {
                settings: Mutex::new(settings.clone()),
                base_settings: settings,
                cwd: Mutex::new(cwd),
                handoff_review: Mutex::new(false),
                controller,
                waiting: Mutex::new(Waiting::default()),
                collector: Mutex::new(None),
                outbox: Arc::new(Outbox::default()),
                shutdown: tokio::sync::Notify::new(),
                approvals: Arc::new(editor::Approvals::default()),
                nvim: Arc::new(OnceLock::new()),
                mcp: Mutex::new(None),
                probes: Mutex::new(ProbeCache::default()),
            }),
        }
    }

    fn controller(&self) -> Option<Arc<Controller>> {
        self.inner.controller.borrow().clone()
    }

    fn agent(&self) -> Option<Arc<AgentSession>> {
        self.controller().map(|c| c.agent().clone())
    }

    /// The controller of the open session, or at once `not_ready` while the first one loads.
    fn ready(&self) -> Result<Arc<Controller>, Failure> {
        self.controller().ok_or_else(|| Failure::new(FailureKind::NotReady, text::NOT_READY))
    }

    fn notice(&self, level: Level, message: impl Into<String>) {
        self.inner.outbox.push(Record::Notice(Notice::new(level, message)));
    }

    /// `configure`: settings now, the session in the background. The answer is immediate; the
    /// chat gets the session as a `transcript` record when it is loaded.
    fn configure(&self, parsed: ConfigureArgs) -> Reply {
        // The session in use is held in `Switching` from here until the new one is in place
        // (or could not be opened): a prompt typed meanwhile waits for the new session instead
        // of running on the old configuration. Refused while something runs (nothing changed);
        // a reload in flight holds it already.
        let hold = match self.controller() {
            Some(c) if lock(&self.inner.waiting).reload.is_none() => Some(c.switching(text::doing::RECONFIGURE)?),
            _ => None,
        };
        if let Some(lines) = parsed.tool_output_lines {
            transcript::set_tool_output_lines(lines);
        }
        // The CLI/environment settings, overridden by the ones `setup()` gave.
        let mut settings = self.inner.base_settings.overridden_by(&parsed.settings).map_err(|e| Failure::invalid(e.to_string()))?;
        settings.editor_version = parsed.editor_version.clone();
        handoff_core::config::schema::check(&settings).map_err(|e| Failure::invalid(format!("handoff.nvim: {e}")))?;
        let front_end = FrontEnd {
            // `stdpath("config")/handoff`, as the plugin says (else the CLI's folder).
            instructions_dir: parsed.config_dir.clone().unwrap_or_else(frontend_paths::default_instructions_dir),
            // The plugin passes its MCP file in the settings.
            mcp_user_file: None,
            // `thinking` is a new session's level here; `set_thinking` switches one.
            thinking_switches: false,
            sandbox_prefetch: handoff_core::sandbox::PrefetchAt::SessionStart,
            ..frontend_paths::front_end(&settings)
        };
        let cwd = parsed.cwd.unwrap_or_else(|| lock(&self.inner.cwd).clone());
        // Now, so a mistake in setup() is an error of this call; the servers of this
        // configuration are listed at once (the old ones end with the session they served).
        let prepared = controller::prepare_for(&front_end, &settings, &cwd)?;
        *lock(&self.inner.mcp) = prepared.mcp.clone();
        let choice = match (parsed.session_file, parsed.resume) {
            (Some(path), _) if path.exists() => SessionChoice::File(path),
            (_, Resume::Newest) => SessionChoice::Newest,
            (_, Resume::New) => SessionChoice::New,
        };
        let generation = {
            let mut waiting = lock(&self.inner.waiting);
            if hold.is_some() {
                waiting.reload = hold;
            }
            waiting.generation += 1;
            waiting.generation
        };
        *lock(&self.inner.settings) = settings.clone();
        *lock(&self.inner.cwd) = cwd.clone();
        *lock(&self.inner.handoff_review) = parsed.handoff_review.unwrap_or(false);
        let host = self.clone();
        handoff_core::task::spawn("opening the session", async move {
            host.open(settings, front_end, prepared, cwd, choice, generation).await
        });
        Ok(Value::Boolean(true))
    }

    /// A reload (`generation`) that installs no session ends: the old session is released and
    /// what waited is returned (to run on the old session, or to be dropped). A later reload's
    /// hold stays.
    fn end_reload(&self, generation: u64) -> Vec<Notification> {
        let mut waiting = lock(&self.inner.waiting);
        if waiting.generation != generation {
            return Vec::new();
        }
        drop(waiting.reload.take());
        std::mem::take(&mut waiting.inputs)
    }

    /// Opens (or creates) the session on a blocking thread and makes it the current one. A file
    /// that cannot be opened is reported, and a new session takes its place so the editor stays
    /// usable (the file itself is left as it is). Input that waited for it runs then.
    async fn open(&self, settings: Settings, front_end: FrontEnd, prepared: controller::Prepared, cwd: PathBuf, choice: SessionChoice, generation: u64) {
        // On a blocking thread: it reads files (`open_for`'s second half: every front end opens
        // this one way).
        let open = |choice: SessionChoice| {
            let (settings, front_end, prepared, cwd) = (settings.clone(), front_end.clone(), prepared.clone(), cwd.clone());
            async move {
                tokio::task::spawn_blocking(move || prepared.open(&front_end, &settings, &cwd, choice))
                    .await
                    .unwrap_or_else(|e| Err(stopped(e)))
            }
        };
        let opened = match open(choice).await {
            Ok(opened) => opened,
            Err(failure) => {
                tracing::error!("cannot open the session: {}", failure.message);
                self.notice(Level::Error, format!("handoff.nvim: cannot open the session: {}. A new session is started instead.", failure.message));
                match open(SessionChoice::New).await {
                    Ok(opened) => opened,
                    Err(failure) => {
                        self.notice(
                            Level::Error,
                            format!("handoff.nvim: cannot create a session in {}: {}", front_end.session_dir.display(), failure.message),
                        );
                        // What waited runs on the session still open, if there is one.
                        let waited = self.end_reload(generation);
                        match self.controller() {
                            Some(old) => self.run_waiting(old, waited),
                            None if !waited.is_empty() => self.notice(Level::Error, text::NEVER_READY),
                            None => {}
                        }
                        return;
                    }
                }
            }
        };
        for warning in opened.warnings {
            self.notice(Level::Warn, warning);
        }
        opened.agent.set_consent(Arc::new(editor::EditorConsent {
            approvals: self.inner.approvals.clone(),
            outbox: self.inner.outbox.clone(),
        }));
        opened.agent.set_file_access(Arc::new(editor::EditorFiles { nvim: self.inner.nvim.clone() }));
        // A session that runs on an external agent (|handoff-agents|) goes to it.
        opened.agent.set_external_runner(Some(Arc::new(handoff_agents::Runner::new(settings.clone()))));
        // The model list is read now, off the first prompt's path (a Copilot token with it).
        let provider = opened.agent.provider();
        handoff_core::task::spawn("reading the model list", async move { drop(provider.catalogue(true).await) });
        let controller = Controller::new(opened.agent, editor_texts());
        controller.set_review_by_default(*lock(&self.inner.handoff_review));
        controller.apply_handoff_settings(&settings);
        let transcript = transcript::opened(&controller).await;
        // The controller is in place before Lua hears of the session: a command it retries on
        // the transcript finds it.
        let (old, waiting) = {
            let mut waiting = lock(&self.inner.waiting);
            if waiting.generation != generation {
                // A later `configure` replaced this one while it loaded: its session is the one.
                tracing::info!("a reload replaced by a later one was dropped");
                return;
            }
            // Nothing runs on the new controller yet: its events are all heard.
            let collector = bridge::spawn_collector(controller.clone(), self.inner.outbox.clone());
            if let Some(old) = lock(&self.inner.collector).replace(collector) {
                old.abort();
            }
            // The reload's hold on the old controller ends with it: input waits no more.
            drop(waiting.reload.take());
            (self.inner.controller.send_replace(Some(controller.clone())), std::mem::take(&mut waiting.inputs))
        };
        self.inner.outbox.push(Record::Transcript(Box::new(transcript)));
        tracing::info!(session = %controller.agent().session().path().display(), "configured");
        bridge::start_external_agent(&controller);
        if let Some(old) = old {
            let flushed = old.agent().session().flush();
            if let Err(e) = flushed {
                tracing::error!("cannot flush the previous session: {e}");
                self.notice(Level::Warn, format!("handoff.nvim: the previous session could not be saved completely: {e}"));
            }
        }
        self.run_waiting(controller, waiting);
    }

    /// Input that waited for a session, run on `controller` in the order it was sent, each to
    /// its end: a prompt typed twice while the session loaded is two prompts, one after the
    /// other.
    fn run_waiting(&self, controller: Arc<Controller>, waiting: Vec<Notification>) {
        if waiting.is_empty() {
            return;
        }
        let host = self.clone();
        handoff_core::task::spawn("input that waited for the session", async move {
            for input in waiting {
                match input {
                    Notification::Prompt { text } => controller.input(&text).await,
                    other => host.run_notification(&controller, other),
                }
            }
        });
    }

    /// `sessions`: the working directory's sessions, listed on a blocking thread (each file
    /// summarized once per version, `SessionManager::list_sessions`), placed in their chains
    /// and sent as a `sessions` record: the editor never waits for the folder.
    fn sessions(&self) {
        let host = self.clone();
        handoff_core::task::spawn("listing the sessions", async move {
            let settings = lock(&host.inner.settings).clone();
            let cwd = lock(&host.inner.cwd).clone();
            let current = host.agent().map(|a| a.session().path().to_path_buf());
            let dir = frontend_paths::session_dir(&settings);
            let listed = tokio::task::spawn_blocking(move || SessionManager::list_sessions(&dir, &cwd)).await;
            let record = match listed {
                Ok(Ok(mut list)) => {
                    // Every start of the editor opens a session: the picker hides the ones never used.
                    list.retain(|s| !s.empty || Some(&s.path) == current.as_ref());
                    let sessions = Chains::of(&list)
                        .placed()
                        .into_iter()
                        .map(|p| SessionListItem::new(p.session, p.depth, Some(&p.session.path) == current.as_ref()))
                        .collect();
                    Record::Sessions { sessions, error: None }
                }
                Ok(Err(e)) => Record::Sessions { sessions: Vec::new(), error: Some(e.to_string()) },
                Err(e) => Record::Sessions { sessions: Vec::new(), error: Some(format!("the listing stopped: {e}")) },
            };
            host.inner.outbox.push(record);
        });
    }

    /// `changes`: the files the agent changed in the current session, the most recently changed
    /// first, each with the file holding its original (read on a blocking thread).
    async fn changes(&self) -> Reply {
        let controller = self.ready()?;
        let (session_file, session_id, originals) = {
            let agent = controller.agent();
            let originals = agent.originals();
            let session = agent.session();
            (session.path().to_string_lossy().into_owned(), session.session_id().to_string(), originals)
        };
        let listed = tokio::task::spawn_blocking(move || {
            originals.list().map(|files| {
                files
                    .into_iter()
                    .map(|f| protocol::ChangedFileItem {
                        original_file: originals.original_path(&f).map(|p| p.to_string_lossy().into_owned()),
                        path: f.path.to_string_lossy().into_owned(),
                        created: f.created,
                        changes: f.changes,
                        first_change_entry_id: f.first_change_entry_id,
                        last_changed: f.last_changed,
                    })
                    .collect::<Vec<_>>()
            })
        })
        .await;
        let files = match listed {
            Ok(Ok(files)) => files,
            Ok(Err(e)) => return Err(controller::session_failure(e)),
            Err(e) => return Err(stopped(e)),
        };
        reply("the changes", &protocol::Changes { session_file, session_id, files })
    }

    /// `review`: every call the review knows, oldest first, with its hunks (read on a blocking
    /// thread).
    async fn review(&self) -> Reply {
        let controller = self.ready()?;
        // Two statements: each takes the session's lock in turn (a tuple would hold the first).
        let review = controller.agent().review();
        let session_file = controller.agent().session().path().to_string_lossy().into_owned();
        let listed = tokio::task::spawn_blocking(move || {
            review.calls().map(|calls| calls.into_iter().map(protocol::ReviewCallItem::of).collect::<Vec<_>>())
        })
        .await;
        let calls = listed.map_err(stopped)?.map_err(controller::session_failure)?;
        reply("the review", &protocol::ReviewList { session_file, calls })
    }

    /// `review_decide`: keeps the editor's decisions beside the session; answers the ids it did
    /// not know.
    async fn review_decide(&self, decisions: Vec<handoff_core::session::review::Decision>) -> Reply {
        let review = self.ready()?.agent().review();
        let unknown = tokio::task::spawn_blocking(move || review.decide(&decisions)).await;
        let unknown = unknown.map_err(stopped)?.map_err(controller::session_failure)?;
        reply("the unknown hunks", &unknown)
    }

    /// `review_split`: cuts a hunk in parts; answers their ids (nil: not cut).
    async fn review_split(&self, split: handoff_core::session::review::Split) -> Reply {
        let review = self.ready()?.agent().review();
        let ids = tokio::task::spawn_blocking(move || review.split(&split)).await;
        let ids = ids.map_err(stopped)?.map_err(controller::session_failure)?;
        reply("the parts", &ids)
    }

    fn templates(&self) -> Reply {
        let list = lock(&self.inner.settings)
            .templates_dir
            .as_deref()
            .map(handoff_core::agent::templates::list)
            .unwrap_or_default();
        let list: Vec<TemplateItem> =
            list.into_iter().map(|t| TemplateItem { name: t.name, description: t.description }).collect();
        reply("the template list", &list)
    }

    /// `resume`: loads the file on a blocking thread, then switches; the chat hears of it as a
    /// `session_switch` and a `transcript` record.
    fn resume(&self, controller: Arc<Controller>, path: PathBuf) {
        let host = self.clone();
        handoff_core::task::spawn("resuming a session", async move {
            if let Err(failure) = controller.ensure_idle(text::doing::RESUME) {
                return host.notice(Level::Warn, failure.message);
            }
            let session_dir = frontend_paths::session_dir(&lock(&host.inner.settings));
            let loaded = tokio::task::spawn_blocking(move || SessionManager::open(&path, &session_dir)).await;
            let session = match loaded {
                Ok(Ok(session)) => session,
                Ok(Err(e)) => return host.notice(Level::Error, format!("handoff.nvim: cannot resume: {e}")),
                Err(e) => return host.notice(Level::Error, format!("handoff.nvim: cannot resume: the loader stopped: {e}")),
            };
            let warnings = session.warnings().to_vec();
            match controller.resume(session) {
                Ok(()) => warnings.into_iter().for_each(|w| host.notice(Level::Warn, w)),
                Err(failure) => host.notice(Level::Warn, failure.message),
            }
        });
    }

    /// `agent NAME`: a new session that runs on the external agent `NAME` of the settings (or a
    /// command line), or on ours (`ours`: `/new`). The agent starts as the session opens.
    fn start_on_agent(&self, controller: Arc<Controller>, name: String) {
        let host = self.clone();
        handoff_core::task::spawn("starting a session on an external agent", async move {
            if let Err(failure) = controller.ensure_idle(text::doing::RESUME) {
                return host.notice(Level::Warn, failure.message);
            }
            if name.trim() == handoff_agents::OURS {
                return controller.submit(&format!("/{}", handoff_core::controller::commands::SlashCommand::New.name()));
            }
            let settings = lock(&host.inner.settings).clone();
            let spec = match handoff_agents::AgentSpec::resolve(&settings, &name) {
                Ok(spec) => spec,
                Err(e) => return host.notice(Level::Error, format!("handoff.nvim: {e}")),
            };
            if let Some(missing) = spec.missing() {
                return host.notice(Level::Error, format!("handoff.nvim: {missing}"));
            }
            let cwd = controller.agent().session().cwd().to_path_buf();
            let made = SessionManager::create(&frontend_paths::session_dir(&settings), &cwd, None)
                .and_then(|mut session| handoff_agents::record_agent_spec(&mut session, &spec).map(|()| session));
            match made {
                Ok(session) => {
                    if let Err(failure) = controller.resume(session) {
                        host.notice(Level::Warn, failure.message);
                    }
                }
                Err(e) => host.notice(Level::Error, format!("handoff.nvim: cannot start a session on {}: {e}", spec.name)),
            }
        });
    }

    /// `view_session`: reads a session file on a blocking thread and sends its transcript as a
    /// `session_view` record. The agent's session stays as it is, whatever runs.
    fn view_session(&self, file: PathBuf, limit: usize) {
        let host = self.clone();
        handoff_core::task::spawn("viewing a session", async move {
            let session_dir = frontend_paths::session_dir(&lock(&host.inner.settings));
            let path = file.to_string_lossy().into_owned();
            let view = tokio::task::spawn_blocking(move || transcript::view(&file, &session_dir, limit)).await;
            let view = view.unwrap_or_else(|e| protocol::SessionView {
                path,
                session_id: None,
                parent_session: None,
                items: Vec::new(),
                earlier: 0,
                error: Some(format!("the loader stopped: {e}")),
            });
            host.inner.outbox.push(Record::SessionView(view));
        });
    }

    fn set_model(&self, model: &str) -> Reply {
        let controller = self.ready()?;
        controller.set_model(model)?;
        lock(&self.inner.settings).model = Some(model.trim().to_string());
        reply("the status", &transcript::status(&controller))
    }

    /// `set_thinking(level)`: the session's thinking level from the next prompt on (a reply
    /// that runs goes on with its own); recorded as pi records a change.
    fn set_thinking(&self, name: &str) -> Reply {
        let level: ThinkingLevel = name.parse().map_err(Failure::invalid)?;
        let controller = self.ready()?;
        controller.set_thinking(level)?;
        reply("the status", &transcript::status(&controller))
    }

    /// `:HandoffMcp`: the servers after the action; a start or stop goes on in a task and a
    /// notice says how it ended.
    fn mcp(&self, action: Option<&str>, server: Option<String>) -> Reply {
        let hub = lock(&self.inner.mcp).clone();
        let list = |hub: Option<&McpHub>| protocol::McpList {
            servers: hub.map(McpHub::statuses).unwrap_or_default(),
            errors: hub.map(|h| h.errors().to_vec()).unwrap_or_default(),
            project_file: hub.and_then(McpHub::project).map(|p| p.path.display().to_string()),
            project: hub.and_then(McpHub::project).map(|p| protocol::McpProject {
                file: p.path.display().to_string(),
                digest: p.digest.clone(),
                lines: p.listing(),
            }),
        };
        match (action.unwrap_or("list"), hub) {
            ("list", _) => {}
            ("trust", Some(hub)) => {
                // The digest of the listing the user confirmed (`project.digest` of a list).
                let shown = server.ok_or_else(|| {
                    Failure::invalid("handoff.nvim: trusting needs the digest of the listing you were shown (:HandoffMcp trust shows it)")
                })?;
                let file = hub.trust_project(&shown).map_err(|e| Failure::invalid(format!("handoff.nvim: {e}")))?;
                self.notice(Level::Info, format!("handoff.nvim: {} is trusted; its servers start with the next prompt", file.display()));
            }
            (action @ ("start" | "stop"), Some(hub)) => {
                let name = server.ok_or_else(|| Failure::invalid(format!(":HandoffMcp {action} needs a server's name")))?;
                let (host, action) = (self.clone(), action.to_string());
                handoff_core::task::spawn("an MCP command", async move {
                    let done = if action == "start" { hub.start(&name).await } else { hub.stop(&name).await };
                    match done {
                        Ok(()) => host.notice(Level::Info, format!("handoff.nvim: MCP server {name}: {action} done")),
                        Err(e) => host.notice(Level::Error, format!("handoff.nvim: MCP server {name}: {e}")),
                    }
                });
            }
            ("trust" | "start" | "stop", None) => return Err(Failure::invalid("handoff.nvim: no MCP servers are configured")),
            (other, _) => return Err(Failure::invalid(format!("unknown :HandoffMcp action {other:?} (list, start, stop, trust)"))),
        }
        reply("the MCP servers", &list(lock(&self.inner.mcp).as_deref()))
    }

    /// The provider in use, or the configured one before a session is open.
    fn provider(&self) -> Result<Provider, Failure> {
        if let Some(agent) = self.agent() {
            return Ok(agent.provider());
        }
        let settings = lock(&self.inner.settings).clone();
        Ok(Provider::new(settings.provider_config().map_err(Failure::invalid)?))
    }

    /// `models(fetch)`: what is known at once. With `fetch` and the provider's list not read
    /// yet, the answer says `pending` and the list comes as a `models` record: a provider that
    /// takes seconds to list its models (or an `api_key_cmd` that waits for a passphrase) never
    /// holds the editor.
    async fn models(&self, fetch: bool) -> Reply {
        let provider = self.provider()?;
        let pending = fetch && !provider.list_read();
        if pending {
            let (host, provider) = (self.clone(), provider.clone());
            tokio::spawn(async move {
                let catalogue = provider.catalogue(true).await;
                host.inner.outbox.push(Record::Models(Box::new(model_list(&provider, catalogue, false))));
            });
        }
        reply("the model list", &model_list(&provider, provider.catalogue(false).await, pending))
    }

    /// `enable_model`: accepted at once, enabled in a task; a `model_enabled` record says how
    /// it ended.
    fn enable_model(&self, model: &str) -> Reply {
        let model = model.trim().to_string();
        if model.is_empty() {
            return Err(Failure::invalid("a model name is required"));
        }
        let (host, provider) = (self.clone(), self.provider()?);
        tokio::spawn(async move {
            let (error, error_kind) = match provider.enable_model(&model).await {
                Ok(()) => (None, None),
                Err(e) => (Some(e.to_string()), Some(e.kind())),
            };
            host.inner.outbox.push(Record::ModelEnabled { model, error, error_kind });
        });
        Ok(Value::Boolean(true))
    }

    /// `health`: the local facts at once, with the probes' last result for this provider and
    /// model (`probes`, absent before the first). Every request starts the probes again in a
    /// task (unless they run), whose result comes as a `health_probes` record: `:checkhealth`
    /// waits a bounded time for it with the editor's loop running (`lua/handoff/health.lua`).
    async fn health(&self) -> Reply {
        let settings = lock(&self.inner.settings).clone();
        let config = match self.agent().map(|a| a.provider_config()) {
            Some(config) => config,
            None => settings.provider_config().map_err(Failure::invalid)?,
        };
        let key = if config.copilot.is_some() {
            match handoff_core::provider::github_token_from_env() {
                Ok((_, source)) => protocol::KeyHealth { source: "copilot", detail: format!("GitHub token from {source}"), present: Some(true) },
                Err(e) => protocol::KeyHealth { source: "copilot", detail: e.to_string(), present: Some(false) },
            }
        } else if let Some(cmd) = config.api_key_cmd.as_deref().filter(|c| !c.trim().is_empty()) {
            // Only the program: the rest of the command line may be the key itself.
            let cmd = handoff_core::provider::describe_cmd(cmd);
            protocol::KeyHealth { source: "api_key_cmd", detail: format!("command `{cmd}` (not run by the health check)"), present: None }
        } else if let Some(var) = &config.api_key_env {
            let present = std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
            protocol::KeyHealth { source: "env", detail: format!("${var}"), present: Some(present) }
        } else {
            protocol::KeyHealth { source: "none", detail: "no key configured (fine for a local server)".into(), present: None }
        };
        let probe_key: ProbeKey = (config.name.clone(), config.base_url.clone(), config.model.clone());
        let probes = {
            let mut cache = lock(&self.inner.probes);
            if cache.running.as_ref() != Some(&probe_key) {
                cache.running = Some(probe_key.clone());
                let (host, config, probe_key) = (self.clone(), config.clone(), probe_key.clone());
                tokio::spawn(async move { host.probe(config, probe_key).await });
            }
            cache.last.as_ref().filter(|(k, _, _)| *k == probe_key).map(|(_, at, p)| protocol::HealthProbes {
                age_secs: at.elapsed().as_secs(),
                ..p.clone()
            })
        };
        let session_dir = frontend_paths::session_dir(&settings);
        let sandbox_settings = settings.sandbox();
        // A file written and the sandbox's probe (a process, once): a blocking thread's work.
        let local = {
            let session_dir = session_dir.clone();
            tokio::task::spawn_blocking(move || {
                let writable = std::fs::create_dir_all(&session_dir)
                    .and_then(|()| tempfile_probe(&session_dir))
                    .map_err(|e| e.to_string());
                (writable, sandbox_health(sandbox_settings))
            })
        };
        let (writable, sandbox) = local.await.map_err(stopped)?;
        reply(
            "the health report",
            &protocol::Health {
                version: env!("CARGO_PKG_VERSION"),
                api: config.api,
                provider: config.name,
                base_url: handoff_core::provider::display_url(&config.base_url),
                model: config.model,
                key,
                probes,
                session_dir,
                session_dir_writable: writable.is_ok(),
                session_dir_error: writable.err(),
                sandbox,
            },
        )
    }

    /// The health check's network half: is the provider reachable, did its model list answer.
    /// Kept for the next `health` request and sent as a `health_probes` record.
    async fn probe(&self, config: handoff_core::provider::ProviderConfig, probe_key: ProbeKey) {
        // The two at once: the check's wait is the slower of them, not their sum.
        let reachable = async {
            if config.copilot.is_some() {
                match handoff_core::provider::copilot_check(&config).await {
                    Ok(detail) => protocol::Reachable { ok: true, detail },
                    Err(e) => protocol::Reachable { ok: false, detail: format!("Copilot's model list: {e}") },
                }
            } else {
                let probe = handoff_core::provider::probe(&config).await;
                protocol::Reachable { ok: probe.ok(), detail: probe.detail() }
            }
        };
        let models = async {
            match self.provider() {
                Ok(provider) => {
                    let catalogue = provider.catalogue(true).await;
                    let info = provider.model_info();
                    let window = provider.current_config().context_window;
                    let said = format!("{}: window {window} tokens (from {})", info.id, info.source.describe());
                    match catalogue.error {
                        None => protocol::Reachable { ok: true, detail: format!("the model list answered ({} models); {said}", catalogue.listed) },
                        Some(e) => protocol::Reachable { ok: false, detail: format!("no model list ({e}); {said}") },
                    }
                }
                Err(e) => protocol::Reachable { ok: false, detail: e.message },
            }
        };
        let (reachable, models) = tokio::join!(reachable, models);
        let probes = protocol::HealthProbes { reachable, models, age_secs: 0 };
        {
            let mut cache = lock(&self.inner.probes);
            cache.last = Some((probe_key.clone(), std::time::Instant::now(), probes.clone()));
            if cache.running.as_ref() == Some(&probe_key) {
                cache.running = None;
            }
        }
        self.inner.outbox.push(Record::HealthProbes(probes));
    }

    /// `system_prompt`: the text the session's requests send (built now if no request has yet),
    /// its instruction files and skills.
    async fn system_prompt(&self) -> Reply {
        let controller = self.ready()?;
        let agent = controller.agent().clone();
        let prompt = tokio::task::spawn_blocking(move || agent.system_prompt())
            .await
            .map_err(stopped)?;
        let info = protocol::SystemPromptInfo {
            text: prompt.text.clone(),
            instruction_files: prompt.instruction_files.iter().map(|p| p.display().to_string()).collect(),
            skills: prompt
                .skills
                .iter()
                .map(|s| protocol::SkillItem {
                    name: s.name.clone(),
                    description: s.description.clone(),
                    path: s.path.display().to_string(),
                })
                .collect(),
            date: prompt.environment.date.clone(),
            cwd: prompt.environment.cwd.display().to_string(),
        };
        reply("the system prompt", &info)
    }

    fn new_session(&self) -> Reply {
        let controller = self.ready()?;
        controller.new_session()?;
        reply("the status", &transcript::status(&controller))
    }

    /// Stops what runs, waits briefly for it to be recorded, and flushes the session.
    async fn finish(&self) {
        let Some(controller) = self.controller() else { return };
        controller.abort();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        while controller.is_busy() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let flushed = controller.agent().session().flush();
        if let Err(e) = flushed {
            tracing::error!("cannot flush the session at exit: {e}");
        }
    }

    async fn answer(&self, request: Request) -> Reply {
        match request {
            Request::Ping => Ok(Value::from("pong")),
            Request::Version => Ok(Value::from(env!("CARGO_PKG_VERSION"))),
            Request::SchemaDigest => Ok(Value::from(handoff_core::config::schema::digest())),
            Request::Configure(args) => self.configure(*args),
            Request::Status => reply("the status", &transcript::status(&*self.ready()?)),
            Request::Transcript { limit } => {
                reply("the transcript", &transcript::transcript(&*self.ready()?, limit.unwrap_or(transcript::PAGE)))
            }
            Request::Changes => self.changes().await,
            Request::Review => self.review().await,
            Request::ReviewDecide { decisions } => self.review_decide(decisions).await,
            Request::ReviewSplit { split } => self.review_split(split).await,
            Request::Templates => self.templates(),
            Request::AgentOffers => reply("the agent's offers", &self.agent().and_then(|a| a.external_offers())),
            Request::AgentChoose { what, value } => {
                let agent = self.ready()?.agent().clone();
                agent.external_choose(&what, &value).await.map_err(Failure::invalid)?;
                Ok(Value::from(true))
            }
            Request::Pins => reply("the pins", &self.agent().map(|a| a.session().pins()).unwrap_or_default()),
            Request::NewSession => self.new_session(),
            Request::SetModel { model } => self.set_model(&model),
            Request::SetThinking { level } => self.set_thinking(&level),
            Request::Health => self.health().await,
            Request::SystemPrompt => self.system_prompt().await,
            Request::Mcp { action, server } => self.mcp(action.as_deref(), server),
            Request::Models { fetch } => self.models(fetch).await,
            Request::EnableModel { model } => self.enable_model(&model),
        }
    }

    /// A notification: what needs no session runs now; input for the session runs on it, or,
    /// while the first one loads, waits for it (in order).
    fn notified(&self, notification: Notification) {
        match notification {
            Notification::ViewSession { path, limit } => self.view_session(path, limit.unwrap_or(transcript::PAGE)),
            Notification::Sessions => self.sessions(),
            // `approve(id, decision, reason?)`: the answer to a tool call waiting in the chat.
            Notification::Approve { id, decision, reason } => {
                let decision = decision.decision(reason);
                if !self.inner.approvals.answer(&id, decision) {
                    tracing::info!(%id, "an answer for no waiting request (answered before, or withdrawn)");
                }
            }
            Notification::ApproveReviewed { id, text } => {
                if !self.inner.approvals.answer(&id, handoff_core::tools::consent::Decision::AllowReviewed { text }) {
                    tracing::info!(%id, "a reviewed answer for no waiting request (answered before, or withdrawn)");
                }
            }
            Notification::Abort => {
                let dropped = std::mem::take(&mut lock(&self.inner.waiting).inputs);
                if !dropped.is_empty() {
                    self.notice(Level::Info, format!("Stopped: {} input(s) waiting for the session were dropped", dropped.len()));
                }
                if let Some(c) = self.controller() {
                    c.abort();
                }
            }
            Notification::AbortHandoff => {
                if let Some(c) = self.controller() {
                    c.abort_handoff();
                }
            }
            Notification::Shutdown => self.inner.shutdown.notify_one(),
            input => {
                let mut waiting = lock(&self.inner.waiting);
                // While `configure` reloads, input waits for the new session (the old one is
                // held in `Switching` meanwhile).
                match self.controller().filter(|_| waiting.reload.is_none()) {
                    Some(controller) => {
                        drop(waiting);
                        self.run_notification(&controller, input);
                    }
                    None => {
                        if waiting.inputs.is_empty() {
                            self.notice(Level::Info, text::WAITING_FOR_SESSION);
                        }
                        waiting.inputs.push(input);
                    }
                }
            }
        }
    }

    /// Input for the open session (long work goes to a task).
    fn run_notification(&self, controller: &Arc<Controller>, input: Notification) {
        match input {
            // What the user typed: the controller's one parser decides (`/handoff …` included).
            Notification::Prompt { text } => controller.submit(&text),
            // `:Handoff`'s words as typed: `--to NAME` in them is read by the command table's
            // grammar, as `/handoff` typed in the prompt is (a `to` flag comes first).
            Notification::Handoff { focus, flags } => match (flags.to, focus) {
                (None, Some(words)) => controller.start_handoff_typed(&words, flags.review),
                (to, focus) => controller.start_handoff(HandoffOptions { focus, review: flags.review, to }),
            },
            // Review mode: the document as the user wrote it, or quit.
            // Under way now (a prompt sent after it waits for the new session); its file
            // work is never the handler's: nvim-rs handles notifications one at a time.
            Notification::HandoffCommit { text } => {
                let commit = controller.commit_review(&text);
                handoff_core::task::spawn("committing the reviewed handoff", async move {
                    commit.await;
                });
            }
            Notification::HandoffDiscard => {
                controller.discard_review();
            }
            Notification::Resume { path } => self.resume(controller.clone(), path),
            Notification::Agent { name } => self.start_on_agent(controller.clone(), name),
            other => self.notified(other),
        }
    }
}

/// The `models` answer or record for `catalogue`.
fn model_list(provider: &Provider, catalogue: handoff_core::provider::Catalogue, pending: bool) -> protocol::ModelList {
    let config = provider.current_config();
    protocol::ModelList {
        pending,
        provider: config.name.clone(),
        current: provider.model_info(),
        context_window: config.context_window,
        models: catalogue.models,
        // Without the list yet, its absence is no error: it is on its way.
        error: catalogue.error.filter(|_| !pending).map(|e| e.to_string()),
    }
}

/// Whether the session folder takes a new file.
fn tempfile_probe(dir: &std::path::Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".handoff-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

#[async_trait]
impl Handler for Host {
    type Writer = Writer;

    async fn handle_request(&self, name: String, args: Vec<Value>, _nvim: Neovim<Writer>) -> Result<Value, Value> {
        tracing::debug!(%name, "request");
        let answer = match Request::decode(&name, &args) {
            Ok(request) => self.answer(request).await,
            Err(failure) => Err(failure),
        };
        Ok(protocol::answer(answer))
    }

    async fn handle_notify(&self, name: String, args: Vec<Value>, _nvim: Neovim<Writer>) {
        tracing::debug!(%name, "notification");
        match Notification::decode(&name, &args) {
            Ok(notification) => self.notified(notification),
            // A notification has no answer: the user hears what was wrong.
            Err(failure) => self.notice(Level::Error, format!("handoff.nvim: {}", failure.message)),
        }
    }
}

/// Serves one Neovim over stdin/stdout until it goes away, then exits the process (after
/// flushing the session): tokio's stdin reader would otherwise keep the runtime alive.
pub async fn serve(settings: Settings) -> anyhow::Result<()> {
    memory::tune_allocator();
    let host = Host::new(settings);
    let (reader, writer) = stdio::channel()?;
    let (nvim, io) = Neovim::new(reader, writer, host.clone());
    let _ = host.inner.nvim.set(nvim.clone());
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
    handoff_core::process_groups::end_all();
    handoff_core::sandbox::remove_private_tmpdir();
    std::process::exit(0)
}

/// The sandbox's part of the health report: the mode, and what this kernel enforces.
fn sandbox_health(settings: handoff_core::sandbox::SandboxSettings) -> protocol::SandboxHealth {
    let support = handoff_core::sandbox::Support::probe();
    let helper = handoff_core::sandbox::helper_binary();
    protocol::SandboxHealth {
        mode: if settings.is_on() { settings.describe() } else { "off".into() },
        on: settings.is_on(),
        abi: support.abi,
        enforceable: support.enforceable().is_ok(),
        detail: support.summary(),
        mounts_error: handoff_core::sandbox::mount_namespaces().clone().err(),
        helper: helper.as_ref().ok().map(handoff_core::sandbox::HelperBinary::describe),
        helper_error: helper.err().map(|e| e.to_string()),
    }
}
