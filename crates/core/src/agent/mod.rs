//! The agent loop and `AgentSession`: the conversation in memory, its session file, the
//! provider, the queues of a running response, and the events every front end listens to.
//!
//! One `AgentSession` is shared (`Arc`) by the front end and the tasks it spawns. Locks are held
//! only for short, non-async work; nothing awaits while holding one.

mod ask;
mod assembler;
pub mod clear;
pub mod events;
mod external;
pub mod fit;
pub mod system_prompt;
pub mod templates;
mod tool_loop;
pub mod wall;

mod run;
mod state;
mod switching;
mod views;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use assembler::{Assembled, MessageAssembler};
pub use events::{AgentEvent, AssistantMessageEvent, Level, Notice, SwitchReason};

use crate::failure::FailureKind;
use crate::message::{ContextMessage, Message, StopReason};
use crate::provider::{
    ChatRequest, Provider, ProviderConfig, ProviderError, StreamEvent, ThinkingLevel, ToolCall, ToolChoice,
};
use crate::session::review::Review;
use crate::session::{Originals, SessionError, SessionManager};
use crate::tools::consent::{Consent, Decision, Grants, Policy};
use crate::tools::{todo, DiskFileAccess, EnvPolicy, FileAccess, Todo, ToolRegistry};

pub use system_prompt::{PromptSources, SystemPrompt};
pub use state::{AgentConfig, Queued, RunClaim, RunOptions, RunResult, SessionSwitched};
pub(crate) use state::AgentState;
pub use tool_loop::{ToolsOutcome, MAX_WATCHED_BYTES};
pub use external::{ExternalRunner, SessionSetting};
pub use views::CONTEXT_WINDOW;
pub use wall::{AfterWall, Boundary, Threshold, Wall, WallReason, WallSettings};

/// Turns of one prompt at most (each tool round is a turn), unless configured otherwise.
pub const DEFAULT_MAX_TURNS: u32 = 50;

/// Todo reminders at most between two resets (a session switch: `/new`, resume, handoff),
/// unless configured otherwise.
pub const DEFAULT_MAX_TODO_REMINDERS: u32 = 3;

/// Failures of the agent layer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("a response is already in progress")]
    Busy,
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Proof that the caller holds the agent: the controller's phase guard
/// (`controller::PhaseGuard`) carries one, and nothing else can make one outside the engine.
/// Starting a run ([`AgentSession::claim_run`]) and switching sessions
/// ([`AgentSession::switch_to`]) take it as an argument, so neither can happen beside the
/// lifecycle that decides what runs: it cannot be called past, only through.
pub struct Hold {
    _made_by_the_engine: (),
}

impl Hold {
    /// Only the engine makes one (the lifecycle, when it takes a phase).
    pub(crate) fn new() -> Self {
        Hold { _made_by_the_engine: () }
    }
}

/// The answer when no front end said how to ask (a library user, a test).
fn no_one_to_ask() -> Arc<dyn Consent> {
    Arc::new(crate::tools::consent::Always(Decision::Reject {
        reason: Some("no one is there to approve it".into()),
    }))
}

pub struct AgentSession {
    provider: Mutex<Provider>,
    session: Mutex<SessionManager>,
    state: Mutex<AgentState>,
    events: broadcast::Sender<AgentEvent>,
    prompt_sources: PromptSources,
    /// The system prompt of the session whose id it holds (see `system_prompt`).
    system_prompt: Mutex<Option<(String, Arc<SystemPrompt>)>>,
    templates_dir: Option<PathBuf>,
    tools: ToolRegistry,
    policy: Policy,
    max_turns: u32,
    max_todo_reminders: u32,
    /// "Always" answers of this session (forgotten on a session switch).
    grants: Grants,
    /// How the front end asks the user (`set_consent`).
    consent: Mutex<Arc<dyn Consent>>,
    /// How tools read and write files (`set_file_access`: the editor goes through its buffers).
    files: Mutex<Arc<dyn FileAccess>>,
    /// The environment policy of bash's commands (no secret, the provider's key never).
    tool_env: EnvPolicy,
    /// Where the wall is.
    wall: WallSettings,
    /// Tool output tokens sent whole, the older results cleared from the request
    /// (`handoff.clear_tool_results`; `None`: every result sent).
    clear_tool_results: Option<u64>,
    /// How bash commands are confined.
    sandbox: crate::sandbox::SandboxSettings,
    /// The sandbox's work ahead waits for the first reply to begin ([`crate::sandbox::PrefetchAt`]).
    prefetch_pending: std::sync::atomic::AtomicBool,
    /// Another model of the same provider for the runs that ask for it
    /// (`RunOptions::document_model`); `None`: the session's.
    document_model: Mutex<Option<String>>,
    /// Told the next request's estimate wherever the run loop looks for the wall and does not
    /// meet it (see [`EstimateWatcher`]).
    estimate_watcher: Mutex<Option<EstimateWatcher>>,
    /// Whoever drives this agent (the controller's lifecycle), kept opaque and weak: one driver
    /// per agent, found again by whoever drives it next (`controller::Lifecycle::of`).
    driver: Mutex<std::sync::Weak<dyn std::any::Any + Send + Sync>>,
    /// Runs the sessions that run on an external agent (`set_external_runner`).
    external: Mutex<Option<Arc<dyn ExternalRunner>>>,
}

/// Called with the next request's estimate and the wall's threshold at each boundary where a
/// run watches the wall and does not stop: whoever prepares for the wall (the handoff's
/// draft) learns it is near without the agent knowing what is prepared. It must return at once.
pub type EstimateWatcher = Arc<dyn Fn(u64, u64) + Send + Sync>;

pub use crate::sync::lock;

impl AgentSession {
    pub fn new(config: AgentConfig, session: SessionManager) -> Self {
        let (events, _) = broadcast::channel(4096);
        let state = AgentState { unrecorded_thinking: config.thinking, ..AgentState::default() };
        let tool_env = config.command_env();
        // The files the provider's settings read its key from are credentials from now on.
        crate::sandbox::protected::remember_credential_files(config.provider.key_files());
        // The probe, the project's index of folders, git's answer and the read rules, made
        // before the first command needs them (`sandbox::prefetch`): now, or as the first reply
        // begins ([`AgentSession::stream_request`]).
        let prefetch_pending = config.sandbox_prefetch == crate::sandbox::PrefetchAt::FirstReply && config.sandbox.is_on();
        if config.sandbox_prefetch == crate::sandbox::PrefetchAt::SessionStart {
            crate::sandbox::prefetch(session.cwd(), config.sandbox);
        }
        Self {
            provider: Mutex::new(Provider::new(config.provider)),
            session: Mutex::new(session),
            state: Mutex::new(state),
            events,
            prompt_sources: PromptSources {
                replace: config.system_prompt,
                append: config.append_system_prompt,
                user_dir: config.instructions_dir,
                home: config.home,
            },
            system_prompt: Mutex::new(None),
            templates_dir: config.templates_dir,
            tools: config.tools,
            policy: config.policy,
            max_turns: config.max_turns.max(1),
            max_todo_reminders: config.max_todo_reminders,
            grants: Grants::default(),
            consent: Mutex::new(no_one_to_ask()),
            files: Mutex::new(Arc::new(DiskFileAccess)),
            tool_env,
            wall: config.wall,
            clear_tool_results: config.clear_tool_results,
            sandbox: config.sandbox,
            prefetch_pending: std::sync::atomic::AtomicBool::new(prefetch_pending),
            document_model: Mutex::new(None),
            estimate_watcher: Mutex::new(None),
            driver: Mutex::new(std::sync::Weak::<()>::new()),
            external: Mutex::new(None),
        }
    }

    /// How the front end asks the user about tool calls.
    pub fn set_consent(&self, consent: Arc<dyn Consent>) {
        *lock(&self.consent) = consent;
    }

    /// How tools read and write files (the editor's goes through loaded buffers).
    pub fn set_file_access(&self, files: Arc<dyn FileAccess>) {
        *lock(&self.files) = files;
    }

    /// Who hears the next request's estimate at each boundary (see [`EstimateWatcher`]).
    pub fn set_estimate_watcher(&self, watcher: Option<EstimateWatcher>) {
        *lock(&self.estimate_watcher) = watcher;
    }

    /// The model of the runs that ask for the document model (`None` or the session's own
    /// model: the session's).
    pub fn set_document_model(&self, model: Option<String>) {
        *lock(&self.document_model) = model.map(|m| m.trim().to_string()).filter(|m| !m.is_empty());
    }

    /// The provider of the document model: the session's, switched to that model (its window
    /// and limits from the model catalogue, its client, token and model list shared), or the
    /// session's own when none is set.
    pub fn document_provider(&self) -> Provider {
        let provider = lock(&self.provider).clone();
        match lock(&self.document_model).clone() {
            Some(model) if model != provider.config().model => {
                let config = provider.config().for_model(&model);
                provider.switched(config)
            }
            _ => provider,
        }
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.events.subscribe()
    }

    /// Sends an event to every subscriber (the controller reports its outcomes here too).
    pub fn emit(&self, event: AgentEvent) {
        let _ = self.events.send(event);
    }

    pub fn session(&self) -> MutexGuard<'_, SessionManager> {
        lock(&self.session)
    }

    /// The in-memory state, for the engine only: what runs and what waits is the lifecycle's
    /// to change (front ends read it through the views: [`AgentSession::queued`], …).
    pub(crate) fn state(&self) -> MutexGuard<'_, AgentState> {
        lock(&self.state)
    }

    /// The driver of this agent if one is alive, else the one `make` makes, now its driver
    /// (under one lock: two callers at once get the same).
    pub(crate) fn driver_or_else(
        &self,
        make: impl FnOnce() -> Arc<dyn std::any::Any + Send + Sync>,
    ) -> Arc<dyn std::any::Any + Send + Sync> {
        let mut driver = lock(&self.driver);
        if let Some(alive) = driver.upgrade() {
            return alive;
        }
        let made = make();
        *driver = Arc::downgrade(&made);
        made
    }

    pub fn provider_config(&self) -> ProviderConfig {
        lock(&self.provider).current_config()
    }

    /// The provider in use (a clone shares its client, token and model list).
    pub fn provider(&self) -> crate::provider::Provider {
        lock(&self.provider).clone()
    }

    pub fn templates_dir(&self) -> Option<&std::path::Path> {
        self.templates_dir.as_deref()
    }

    pub fn is_busy(&self) -> bool {
        self.state().run.is_some()
    }

    /// Stops the running response, if any (pi's `agent.abort()`).
    pub fn abort(&self) {
        if let Some(run) = self.state().run.as_ref() {
            run.cancel();
        }
    }
}

/// The thinking level a session recorded last, else `default` (also for a level we do not know).
fn level_of(session: &SessionManager, default: ThinkingLevel) -> ThinkingLevel {
    session.context_settings().1.as_deref().and_then(ThinkingLevel::parse).unwrap_or(default)
}
