//! Shared helpers of the integration tests: fixtures, sessions in temp dirs, agents wired to the
//! loopback mock model server, and readers for what ended up on disk or on the wire. `nvim`
//! drives a real headless Neovim for the end-to-end tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod nvim;
pub mod pi;
pub mod machine;
pub mod sandbox;
pub mod wall;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use handoff_mock::{MockReply, MockServer, MockToolCall, RecordedRequest};
use handoff_nvim::core::agent::{AgentConfig, AgentError, AgentEvent, AgentSession, RunOptions, RunResult};
use handoff_nvim::core::controller::{Controller, FrontEndTexts, Lifecycle};
use handoff_nvim::core::failure::Failure;
use handoff_nvim::core::message::{Content, ContentBlock, Message, Role, StopReason};
use handoff_nvim::core::provider::{
    Api, ChatRequest, Provider, ProviderConfig, ProviderError, StreamEnd, StreamEvent,
};
use tokio_util::sync::CancellationToken;
use handoff_nvim::core::session::SessionManager;
use serde_json::{json, Value};

/// Drives an agent as the front ends do: through its lifecycle, whose phase a run and a session
/// switch must hold (`AgentSession`'s own run and switch are the engine's alone). A test calls
/// `agent.prompt(text, options)` as before; the run takes `Phase::Prompting` of the agent's one
/// lifecycle (a controller's, when the test made one).
#[allow(async_fn_in_trait)]
pub trait Drive {
    async fn prompt(&self, text: &str, options: RunOptions) -> Result<RunResult, AgentError>;
    /// `/new`, through the controller.
    fn new_session(&self) -> Result<(), Failure>;
    /// Continues in `session`, through the controller.
    fn resume(&self, session: SessionManager) -> Result<(), Failure>;
}

impl Drive for Arc<AgentSession> {
    async fn prompt(&self, text: &str, options: RunOptions) -> Result<RunResult, AgentError> {
        Lifecycle::of(self, FrontEndTexts::default()).run(text, options).await
    }

    fn new_session(&self) -> Result<(), Failure> {
        Controller::new(self.clone(), FrontEndTexts::default()).new_session()
    }

    fn resume(&self, session: SessionManager) -> Result<(), Failure> {
        Controller::new(self.clone(), FrontEndTexts::default()).resume(session)
    }
}

/// The cwd recorded in test sessions.
pub const CWD: &str = "/home/dev/project";

/// `tests/fixtures`: real files written by pi 0.73.1 and oh-my-pi (see its pi-sessions/README.md).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"))
}

/// Copies `pi-sessions/<name>` into `dir` and returns the copy's path.
pub fn copy_fixture(name: &str, dir: &Path) -> PathBuf {
    let src = fixtures_dir().join("pi-sessions").join(name);
    let dst = dir.join(name);
    std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("cannot copy fixture {}: {e}", src.display()));
    dst
}

/// Every non-empty line of a JSONL file, parsed.
pub fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// The entries of a session file (everything after its header).
pub fn entry_lines(path: &Path) -> Vec<Value> {
    let all = lines(path);
    let header = all.iter().position(|v| v["type"] == "session").expect("no header");
    all[header + 1..].to_vec()
}

/// A provider config pointing at `server`: no key, no retries, short timeouts.
pub fn config(server: &MockServer) -> ProviderConfig {
    let mut c = ProviderConfig::new(Api::Openai, server.openai_base_url(), "mock-model");
    c.name = "mock".into();
    c.max_retries = 0;
    c.retry_base_delay = Duration::from_millis(5);
    c.max_retry_delay = Duration::from_millis(20);
    c.idle_timeout = Duration::from_secs(10);
    c
}

/// A fresh session under `<dir>/sessions` for `CWD`.
pub fn new_session(dir: &Path) -> SessionManager {
    SessionManager::create(&dir.join("sessions"), Path::new(CWD), None).unwrap()
}

pub fn agent_with(config: ProviderConfig, session: SessionManager, templates: Option<PathBuf>) -> Arc<AgentSession> {
    Arc::new(AgentSession::new(
        AgentConfig { templates_dir: templates, ..AgentConfig::new(config) },
        session,
    ))
}

pub fn agent(server: &MockServer, session: SessionManager) -> Arc<AgentSession> {
    agent_with(config(server), session, None)
}

/// A session with a model change and `pairs` user/assistant exchanges, as pi writes them.
pub fn seeded_session(dir: &Path, pairs: usize) -> SessionManager {
    let mut s = new_session(dir);
    s.append_model_change("mock", "mock-model").unwrap();
    s.append_thinking_level_change("off").unwrap();
    for i in 0..pairs {
        s.append_message(&Message::user(format!("question {i}"))).unwrap();
        s.append_message(&assistant(&format!("answer {i}"))).unwrap();
    }
    s.flush().unwrap();
    s
}

/// A completed assistant message with `text`.
pub fn assistant(text: &str) -> Message {
    let mut m = Message::assistant("openai-completions", "mock", "mock-model");
    m.push_text(text);
    m
}

/// An assistant message calling `name` with `args`.
pub fn call_message(id: &str, name: &str, args: Value) -> Message {
    let mut m = Message::assistant("openai-completions", "mock", "mock-model");
    m.content = Content::Blocks(vec![ContentBlock::tool_call(id, name, args)]);
    m.stop_reason = Some(StopReason::ToolUse);
    m
}

/// pi's `toolResult` message answering call `id` of `name` (`details` left out when null).
pub fn result_message(id: &str, name: &str, text: &str, is_error: bool, details: Value) -> Message {
    let mut m = Message::user(text);
    m.role = Role::ToolResult;
    m.extra.insert("toolCallId".into(), json!(id));
    m.extra.insert("toolName".into(), json!(name));
    m.extra.insert("isError".into(), json!(is_error));
    if !details.is_null() {
        m.extra.insert("details".into(), details);
    }
    m
}

/// An assistant message asking for one bash call.
pub fn tool_call(id: &str, command: &str) -> Message {
    call_message(id, "bash", json!({ "command": command }))
}

/// A pi `toolResult` message answering bash call `id`.
pub fn tool_result(id: &str, output: &str) -> Message {
    result_message(id, "bash", output, false, Value::Null)
}

/// A mock reply asking for `calls` (no text before them, stop `tool_calls`).
pub fn tool_calls_reply(calls: Vec<MockToolCall>) -> MockReply {
    MockReply::ToolCalls { calls, text_before: Vec::new(), chunk_delay_ms: 0, stop: "tool_calls".into(), interleave: false }
}

/// A mock reply asking for one call of `name` with `args` (streamed in two pieces), as `id`.
pub fn tool_call_reply(name: &str, args: Value, id: &str) -> MockReply {
    tool_calls_reply(vec![MockToolCall::new(name, &args, 2).with_id(id)])
}

/// A mock reply calling `todo_write` with `todos`, as `id`.
pub fn todo_call(todos: Value, id: &str) -> MockReply {
    tool_call_reply("todo_write", json!({ "todos": todos }), id)
}

/// Streams `request` through a provider for `config`: the events, and how the stream ended.
pub async fn provider_run(
    config: ProviderConfig,
    request: &ChatRequest,
) -> (Vec<StreamEvent>, Result<StreamEnd, ProviderError>) {
    let provider = Provider::new(config);
    let cancel = CancellationToken::new();
    let mut events = Vec::new();
    let result = provider.stream(request, &cancel, &mut |e| events.push(e)).await;
    (events, result)
}

/// `request` as a fresh mock received it, sent by a provider `config` makes for that mock (the
/// reply is the mock's default text).
pub async fn recorded(config: impl FnOnce(&MockServer) -> ProviderConfig, request: &ChatRequest) -> RecordedRequest {
    let server = MockServer::start().await.unwrap();
    let (_, result) = provider_run(config(&server), request).await;
    result.unwrap();
    server.requests().remove(0)
}

/// `v` with every `cache_control` (Anthropic's prompt-cache marker) taken out, keys in order.
pub fn without_cache_control(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(k, _)| *k != "cache_control").map(|(k, v)| (k.clone(), without_cache_control(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_control).collect()),
        other => other.clone(),
    }
}

/// The live processes of this machine's `/proc` whose command line is exactly `argv`.
pub fn processes_running(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .filter(|pid| process_alive(*pid))
        .collect()
}

/// Whether process `pid` runs (a zombie waiting to be reaped, or a dead one, has ended).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            // `pid (comm) S …`: the state follows the last `)`.
            let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
    }
}

/// The pids, as this process sees them, of the live processes whose command line holds
/// `marker`. A sandboxed command runs in a pid namespace of its own: the `$$` it prints is a pid
/// of that namespace, so tests find its processes by what they run.
pub fn pids_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id() && process_alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
        })
        .collect()
}

/// `program` (our binary, or Neovim or pi starting it) without any variable the binary reads
/// as a setting or for its log (`schema::variables()`) nor the sandbox's test switches: what a
/// developer exported cannot change a test's result. The test sets what it needs after.
pub fn clean_command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    for var in handoff_variables() {
        c.env_remove(var);
    }
    c
}

/// [`clean_command`] for tokio.
pub fn clean_command_async(program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(program);
    for var in handoff_variables() {
        c.env_remove(var);
    }
    c
}

/// The README's lazy.nvim spec, as a Lua expression (the first ```lua block after "lazy.nvim").
/// lazy.nvim for the tests that run the README's spec under it: `HANDOFF_LAZY_NVIM` when set,
/// else the copy in `tests/vendor/lazy.nvim` (v11.17.5's `lua/` and licence: no registry the
/// tests may use ships lazy.nvim, so the repository carries it).
pub fn lazy_nvim() -> PathBuf {
    match std::env::var_os("HANDOFF_LAZY_NVIM").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vendor/lazy.nvim"),
    }
}

pub fn readme_lazy_spec() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let after = &readme[readme.find("With lazy.nvim").expect("the README's lazy.nvim section")..];
    let start = after.find("```lua\n").expect("a lua block") + "```lua\n".len();
    after[start..][..after[start..].find("```").unwrap()].to_string()
}

fn handoff_variables() -> Vec<&'static str> {
    use handoff_nvim::core::sandbox::{SIMULATED_ABI_VAR, SIMULATED_NO_MOUNTS_VAR};
    let mut vars = handoff_nvim::core::config::schema::variables();
    // The plugin's own: a binary a developer named would win over the one a test sets up.
    vars.extend([SIMULATED_ABI_VAR, SIMULATED_NO_MOUNTS_VAR, "HANDOFF_BIN"]);
    vars
}

/// A streamed reply with delays (ms) before the first chunk and between chunks.
pub fn slow(chunks: &[&str], first_delay_ms: u64, chunk_delay_ms: u64) -> MockReply {
    MockReply::Text {
        chunks: chunks.iter().map(|s| s.to_string()).collect(),
        chunk_delay_ms,
        first_delay_ms,
        stop: "stop".into(),
        thinking: Vec::new(),
    }
}

/// A reply ending with `stop` (`stop`, `length`, `tool_calls`).
pub fn with_stop(text: &str, stop: &str) -> MockReply {
    MockReply::Text {
        chunks: vec![text.to_string()],
        chunk_delay_ms: 0,
        first_delay_ms: 0,
        stop: stop.into(),
        thinking: Vec::new(),
    }
}

/// `(role, text)` of the chat messages of an OpenAI request body (system left out).
pub fn wire_messages(request: &RecordedRequest) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .expect("request without messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => {
                    parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
                }
                _ => String::new(),
            };
            (m["role"].as_str().unwrap_or_default().to_string(), text)
        })
        .collect()
}

/// A complete handoff document with the six sections.
pub const DOCUMENT: &str = "## Goal\nShip the parser.\n\n## Constraints & Preferences\n- Rust\n\n## Progress\n### Done\n- [x] Lexer\n\n## Key Decisions\n- **Hand-written**: speed\n\n## Critical Context\n- src/parse.rs\n\n## Next Steps\n1. Write the tests";

/// Files with `.jsonl` under `dir`, recursively.
pub fn session_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(read) = std::fs::read_dir(dir) else { return out };
    for entry in read.flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(session_files(&p));
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The limit of a wait that only stops a hung test: what it waits for takes a second or less,
/// a few on a loaded machine, and never comes at all when the code is wrong. A wait whose end
/// decides the verdict waits for something far longer than this (a sleep of ten minutes, a
/// reply that streams for minutes), so the machine's speed never does.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// Waits (polling) until `cond` holds; panics after `timeout`.
pub async fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Makes a scoped subscriber (`tracing::subscriber::set_default`, `with_default`,
/// `WithSubscriber::with_subscriber`) see every event of its thread or future, whatever the
/// other tests of the binary do in parallel. Call it before making the subscriber's `Dispatch`.
///
/// While one `Dispatch` is registered, tracing-core decides whether a callsite is ever enabled
/// from the default of the thread that reaches it first (tokio-rs/tracing#3611), and caches it:
/// a parallel test's thread, with no subscriber, caches "never" for a log line the scoped
/// subscriber waits for, and the line is dropped (tests/mcp_stdio.rs waited 5 s for the server's
/// stderr in the log and failed). Two more dispatches that live as long as the process (no-op
/// ones, that never enable anything) keep tracing on its general path, which asks every live
/// dispatch, so a callsite is enabled whenever some subscriber wants it.
pub fn keep_scoped_subscribers_reliable() {
    static KEPT: std::sync::OnceLock<[tracing::Dispatch; 2]> = std::sync::OnceLock::new();
    KEPT.get_or_init(|| {
        let none = || tracing::Dispatch::new(tracing::subscriber::NoSubscriber::new());
        [none(), none()]
    });
}

/// Counts the provider's "request failed, retrying" warnings, which it logs just before it
/// waits to retry: a test that waits for one knows the provider is in that wait, not before it.
/// Wrap the future that runs the provider with `tracing::instrument::WithSubscriber::
/// with_subscriber(watch.dispatch())` (it follows the future across threads).
#[derive(Clone, Default)]
pub struct RetryWaits(Arc<std::sync::atomic::AtomicUsize>);

impl RetryWaits {
    pub fn count(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn dispatch(&self) -> tracing::Dispatch {
        use tracing_subscriber::layer::SubscriberExt;
        keep_scoped_subscribers_reliable();
        tracing::Dispatch::new(tracing_subscriber::registry().with(RetryCounter(self.0.clone())))
    }
}

struct RetryCounter(Arc<std::sync::atomic::AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RetryCounter {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if meta.target().starts_with("handoff_core::provider") && *meta.level() == tracing::Level::WARN {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Waits until the clock reads a later millisecond than `timestamp` (an ISO-8601 UTC string as
/// `now_iso` writes them), so that what is created next sorts after it.
pub fn wait_past(timestamp: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while handoff_nvim::core::message::now_iso().as_str() <= timestamp {
        assert!(std::time::Instant::now() < deadline, "the clock did not pass {timestamp}");
        std::thread::yield_now();
    }
}

/// Waits (10 s at most) for the first streamed text delta.
pub async fn first_delta(rx: &mut tokio::sync::broadcast::Receiver<AgentEvent>) {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(AgentEvent::MessageUpdate { .. }) = rx.recv().await {
                return;
            }
        }
    })
    .await
    .expect("no delta streamed");
}

/// The `mock-model-server` binary beside this build's `handoff-nvim` (`target/<profile>/`), for
/// tests that need the mock as a process. It belongs to the `handoff-mock` workspace member,
/// whose binaries `cargo test --workspace` builds but a run of this package alone does not: then
/// it is built here, once, with the cargo running the tests.
pub fn mock_server_bin() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let bin_dir = Path::new(env!("CARGO_BIN_EXE_handoff-nvim")).parent().unwrap();
            let bin = bin_dir.join("mock-model-server");
            if bin.is_file() {
                return bin;
            }
            // target/debug is the `dev` profile's folder; every other profile's is its name.
            let profile = match bin_dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") | None => "dev",
                Some(name) => name,
            };
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args(["build", "--locked", "-p", "handoff-mock", "--bin", "mock-model-server", "--profile", profile])
                .arg("--target-dir")
                .arg(bin_dir.parent().unwrap())
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cannot run cargo to build mock-model-server");
            assert!(status.success() && bin.is_file(), "`cargo build -p handoff-mock` did not make {}", bin.display());
            bin
        })
        .clone()
}

/// xorshift64: a small seeded PRNG for the tests that explore (the stable fuzzing, random
/// slices of streams), so that a printed seed replays a failure.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Our built binary run against the loopback mock in a temp folder: `project/` is its working
/// directory, `sessions/` its session folder, the folder itself its `$HOME`. The CLI's tests and
/// the ACP agent's use it.
pub struct BinaryEnv {
    pub mock: MockServer,
    pub dir: tempfile::TempDir,
}

impl BinaryEnv {
    pub async fn new() -> BinaryEnv {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        BinaryEnv { mock, dir }
    }

    pub fn session_dir(&self) -> PathBuf {
        self.dir.path().join("sessions")
    }

    pub fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// `handoff-nvim args…` with a clean environment pointing at the mock (model `mock-model`
    /// over the OpenAI format), no key in its environment; stdio is the caller's to set.
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = clean_command_async(env!("CARGO_BIN_EXE_handoff-nvim"));
        c.args(args)
            .current_dir(self.project())
            .env("HOME", self.dir.path())
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("HANDOFF_PROVIDER", "openai")
            .env("HANDOFF_BASE_URL", self.mock.openai_base_url())
            .env("HANDOFF_MODEL", "mock-model")
            .env("HANDOFF_SESSION_DIR", self.session_dir())
            .env_remove("RUST_LOG")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .kill_on_drop(true);
        c
    }
}
