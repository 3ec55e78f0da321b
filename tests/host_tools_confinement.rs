//! Host tools obey the sandbox's confinement: with the sandbox on, `read`, `grep`, `edit` and
//! `write` reach a protected path (outside the project once links are resolved, code other
//! programs run, the user's credentials) only through an explicit approval per call that names
//! the real path; no policy answers it (`--yes` included), and the CLI without a terminal
//! refuses. With `--sandbox off` only consent applies: each test runs that control too, which
//! shows the way out is real (the test can fail).
//!
//! The CLI runs with `--tools read,grep,edit,write` (no bash): the host tools' rules hold on any
//! kernel, whether Landlock can be enforced here or not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use common::sandbox::Recorder;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::tool_calls_reply;
use handoff_mock::{MockReply, MockServer, MockToolCall};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::sandbox::{SandboxMode, SandboxSettings};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::consent::{ApprovalRequest, Consent, Decision, Policy, Rule};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");

/// A project, a folder outside it, a fake home folder (with a key in `.ssh`), sessions.
struct Dirs {
    _root: tempfile::TempDir,
    project: PathBuf,
    outside: PathBuf,
    home: PathBuf,
    sessions: PathBuf,
}

const KEY_TEXT: &str = "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA-not-a-real-key";

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    // Real locations: what the results and approvals name.
    let base = std::fs::canonicalize(root.path()).unwrap();
    let [project, outside, home, sessions] = ["project", "outside", "home", "sessions"].map(|d| base.join(d));
    for d in [&project, &outside, &home, &sessions] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), format!("{KEY_TEXT}\n")).unwrap();
    std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
    std::fs::write(project.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    Dirs { _root: root, project, outside, home, sessions }
}

fn call(id: &str, tool: &str, args: Value) -> MockToolCall {
    MockToolCall::new(tool, &args, 2).with_id(id)
}

/// What a CLI run left: its output, the bodies the mock received, the session file's text.
struct Run {
    requests: Vec<String>,
    session: String,
}

impl Run {
    /// The text of the tool result for call `id`, as the model got it (the last request).
    fn result(&self, id: &str) -> (bool, String) {
        let body: Value = serde_json::from_str(self.requests.last().unwrap()).unwrap();
        let message = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("no result for {id} in {body}"));
        let text = match &message["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        // The session file says whether it failed.
        let failed = self
            .session
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["message"]["toolCallId"] == id)
            .map(|e| e["message"]["isError"] == true)
            .unwrap_or_else(|| panic!("no stored result for {id}"));
        (failed, text)
    }
}

/// `handoff-nvim prompt --yes` in the project, no terminal (stdin and stderr are not one), HOME
/// the fake home, the model calling `calls` then answering; `sandbox_off`: `--sandbox off`.
async fn cli(d: &Dirs, sandbox_off: bool, calls: Vec<MockToolCall>) -> Run {
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(calls));
    mock.push(MockReply::text("done"));
    let mut cmd = common::clean_command_async(BIN);
    cmd.args(["prompt", "--yes", "--new", "--max-retries", "0", "--tools", "read,grep,edit,write"])
        .args(["--base-url", &mock.openai_base_url()])
        .arg("--session-dir")
        .arg(&d.sessions)
        .arg("--cwd")
        .arg(&d.project);
    if sandbox_off {
        cmd.args(["--sandbox", "off"]);
    }
    let out = cmd
        .arg("go")
        .current_dir(&d.project)
        .env("HOME", &d.home)
        .env("XDG_CONFIG_HOME", d.home.join(".config"))
        .env_remove("OPENAI_API_KEY")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let requests = mock.requests().iter().map(|r| r.body.to_string()).collect();
    let files = common::session_files(&d.sessions);
    let session = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect::<Vec<_>>().join("\n");
    for f in files {
        std::fs::remove_file(f).unwrap();
    }
    Run { requests, session }
}

// ---------------------------------------------------------------------------------------------
// The CLI: --yes and no terminal

/// (a) A link planted in the project (as a sandboxed command may plant one) leads `write`
/// outside: refused, naming where it really lands; `--sandbox off` writes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_through_a_planted_link_is_refused_and_names_the_real_path() {
    let d = dirs();
    let target = d.outside.join("bashrc");
    std::fs::write(&target, "original\n").unwrap();
    std::os::unix::fs::symlink(&target, d.project.join("notes.txt")).unwrap();
    // A link to a folder outside, and a file that does not exist yet behind it.
    std::os::unix::fs::symlink(&d.outside, d.project.join("out")).unwrap();
    let calls = || {
        vec![
            call("w1", "write", json!({ "path": "notes.txt", "content": "planted\n" })),
            call("w2", "write", json!({ "path": "out/new.sh", "content": "planted\n" })),
        ]
    };
    let run = cli(&d, false, calls()).await;
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original\n", "written through the link");
    assert!(!d.outside.join("new.sh").exists(), "created through the link");
    for (id, real) in [("w1", target.clone()), ("w2", d.outside.join("new.sh"))] {
        let (failed, text) = run.result(id);
        assert!(failed, "{id}: {text}");
        assert!(text.contains(&format!("{} is outside the project", real.display())), "{id}: {text}");
        assert!(text.contains("--yes never allows that"), "{id}: {text}");
    }
    // Control: with the sandbox off, --yes lets it through.
    let run = cli(&d, true, calls()).await;
    assert!(!run.result("w1").0, "{:?}", run.result("w1"));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "planted\n");
    assert!(d.outside.join("new.sh").exists());
}

/// (b) `.git/hooks/post-checkout` and `.git/config` run code outside the sandbox (git runs them
/// later, unsandboxed): refused under --yes; `--sandbox off` writes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_code_in_git_is_refused_under_yes() {
    let d = dirs();
    let hook = d.project.join(".git/hooks/post-checkout");
    let config = d.project.join(".git/config");
    let calls = || {
        vec![
            call("h1", "write", json!({ "path": ".git/hooks/post-checkout", "content": "#!/bin/sh\ntouch /tmp/pwned\n" })),
            call(
                "c1",
                "edit",
                json!({ "path": ".git/config", "edits": [{ "oldText": "bare = false", "newText": "bare = false\n\tfsmonitor = touch /tmp/pwned" }] }),
            ),
            call("n1", "write", json!({ "path": ".nvim.lua", "content": "os.execute('touch /tmp/pwned')\n" })),
        ]
    };
    let run = cli(&d, false, calls()).await;
    assert!(!hook.exists(), "the hook was written");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "[core]\n\tbare = false\n");
    assert!(!d.project.join(".nvim.lua").exists());
    for (id, real) in [("h1", hook.clone()), ("c1", config.clone()), ("n1", d.project.join(".nvim.lua"))] {
        let (failed, text) = run.result(id);
        assert!(failed, "{id}: {text}");
        assert!(text.contains(&format!("{} runs code outside the sandbox", real.display())), "{id}: {text}");
    }
    // Control.
    let run = cli(&d, true, calls()).await;
    assert!(!run.result("h1").0 && !run.result("c1").0, "{:?} {:?}", run.result("h1"), run.result("c1"));
    assert!(hook.exists());
    assert!(std::fs::read_to_string(&config).unwrap().contains("fsmonitor"));
}

/// (c) `read` of a key in `~/.ssh`, `grep` in `~/.ssh`, and `grep` over the whole home folder:
/// the key's text reaches neither the model nor the session file. `--sandbox off` reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_not_read_under_yes() {
    let d = dirs();
    let key = d.home.join(".ssh/id_ed25519");
    // A link in the project to the key: the real path is what counts.
    std::os::unix::fs::symlink(&key, d.project.join("key.txt")).unwrap();
    let calls = || {
        vec![
            call("r1", "read", json!({ "path": "~/.ssh/id_ed25519" })),
            call("r2", "read", json!({ "path": "key.txt" })),
            call("g1", "grep", json!({ "pattern": "PRIVATE", "path": "~/.ssh" })),
            // Home itself is no credential: it runs, and leaves .ssh out.
            call("g2", "grep", json!({ "pattern": "PRIVATE", "path": d.home.to_str().unwrap() })),
        ]
    };
    let run = cli(&d, false, calls()).await;
    for body in &run.requests {
        assert!(!body.contains("b3BlbnNzaC1rZXktdjEAAAAA"), "the key went to the model: {body}");
    }
    assert!(!run.session.contains("b3BlbnNzaC1rZXktdjEAAAAA"), "the key is in the session file");
    for id in ["r1", "r2", "g1"] {
        let (failed, text) = run.result(id);
        assert!(failed, "{id}: {text}");
        let named = if id == "g1" { key.parent().unwrap().to_path_buf() } else { key.clone() };
        assert!(text.contains(&format!("{} holds credentials", named.display())), "{id}: {text}");
    }
    let (failed, text) = run.result("g2");
    assert!(!failed, "{text}");
    assert!(text.contains("No matches found"), "{text}");
    // Control: with the sandbox off the key is read and sent.
    let run = cli(&d, true, calls()).await;
    for id in ["r1", "r2", "g1", "g2"] {
        let (failed, text) = run.result(id);
        assert!(!failed && text.contains("b3BlbnNzaC1rZXktdjEAAAAA"), "{id}: {text}");
    }
}

/// (d) What must keep working: an ordinary write and edit inside the project, and a read
/// outside it (reading is what a sandboxed command may do too), run unasked under --yes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_calls_inside_the_project_run_unasked() {
    let d = dirs();
    std::fs::write(d.outside.join("readme.txt"), "outside text\n").unwrap();
    // A link inside the project to a file inside it is no way out.
    std::fs::write(d.project.join("real.txt"), "one\n").unwrap();
    std::os::unix::fs::symlink(d.project.join("real.txt"), d.project.join("alias.txt")).unwrap();
    let run = cli(
        &d,
        false,
        vec![
            call("w1", "write", json!({ "path": "src/new.rs", "content": "fn main() {}\n" })),
            call("e1", "edit", json!({ "path": "alias.txt", "edits": [{ "oldText": "one", "newText": "two" }] })),
            call("r1", "read", json!({ "path": d.outside.join("readme.txt").to_str().unwrap() })),
            call("w2", "write", json!({ "path": ".github/workflows/ci.yml", "content": "on: push\n" })),
        ],
    )
    .await;
    for id in ["w1", "e1", "r1", "w2"] {
        let (failed, text) = run.result(id);
        assert!(!failed, "{id}: {text}");
    }
    assert_eq!(std::fs::read_to_string(d.project.join("src/new.rs")).unwrap(), "fn main() {}\n");
    assert_eq!(std::fs::read_to_string(d.project.join("real.txt")).unwrap(), "two\n");
    assert!(d.project.join("alias.txt").is_symlink(), "the link was replaced, not written through");
    assert!(run.result("r1").1.contains("outside text"));
}

// ---------------------------------------------------------------------------------------------
// The agent: what the approval says, "always" once, a deny rule first




fn agent(mock: &MockServer, d: &Dirs, policy: Policy, mode: SandboxMode) -> Arc<AgentSession> {
    let config = AgentConfig {
        policy,
        sandbox: SandboxSettings { mode, network: false },
        ..AgentConfig::new(common::config(mock))
    };
    let session = SessionManager::create(&d.sessions, &d.project, None).unwrap();
    Arc::new(AgentSession::new(config, session))
}

fn stored_results(agent: &AgentSession) -> Vec<Value> {
    common::entry_lines(agent.session().path())
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| e["message"].clone())
        .collect()
}

/// Under `allow_all` a protected write asks, naming the real path and why; "always" counts as
/// this once (the next protected call asks again), and the approved write lands where the
/// approval said. An ordinary write is not asked about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_all_asks_for_a_protected_path_and_always_counts_once() {
    let d = dirs();
    let target = d.outside.join("profile");
    std::fs::write(&target, "original\n").unwrap();
    std::os::unix::fs::symlink(&target, d.project.join("link")).unwrap();
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(vec![
        call("p1", "write", json!({ "path": "link", "content": "first\n" })),
        call("p2", "write", json!({ "path": "link", "content": "second\n" })),
        call("o1", "write", json!({ "path": "plain.txt", "content": "plain\n" })),
    ]));
    mock.push(MockReply::text("ok"));
    let consent = Recorder::new(vec![Decision::Always, Decision::Reject { reason: None }]);
    let agent = agent(&mock, &d, Policy::allow_all(), SandboxMode::WorkspaceWrite);
    agent.set_consent(consent.clone());
    agent.prompt("go", RunOptions::default()).await.unwrap();
    let asked = consent.asked();
    assert_eq!(asked.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["p1", "p2"], "{asked:#?}");
    for request in &asked {
        assert_eq!(request.path.as_deref(), Some(target.to_str().unwrap()), "the real path");
        assert_eq!(request.protected.as_deref(), Some(format!("{} is outside the project", target.display()).as_str()));
        let wire = serde_json::to_value(request).unwrap();
        assert_eq!(wire["protected"], request.protected.as_deref().unwrap(), "the front ends receive it");
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "first\n", "p1 ran, p2 was rejected");
    assert!(d.project.join("link").is_symlink());
    assert_eq!(std::fs::read_to_string(d.project.join("plain.txt")).unwrap(), "plain\n");
    let results = stored_results(&agent);
    assert_eq!(results.iter().map(|r| r["isError"] == true).collect::<Vec<_>>(), [false, true, false]);
}

/// A `deny` rule still denies first: nobody is asked. With the sandbox off, a protected path is
/// only a matter of consent (allow_all: nobody is asked, it runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_rule_denies_first_and_sandbox_off_asks_nothing_extra() {
    let d = dirs();
    let calls = || vec![call("d1", "write", json!({ "path": ".git/hooks/pre-commit", "content": "x\n" }))];
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(calls()));
    mock.push(MockReply::text("ok"));
    let mut policy = Policy::allow_all();
    policy.tools.insert("write".into(), Rule::Deny);
    let consent = Recorder::new(vec![Decision::Allow]);
    let denied = agent(&mock, &d, policy, SandboxMode::WorkspaceWrite);
    denied.set_consent(consent.clone());
    denied.prompt("go", RunOptions::default()).await.unwrap();
    assert!(consent.asked().is_empty(), "{:#?}", consent.asked());
    assert!(!d.project.join(".git/hooks/pre-commit").exists());
    assert!(stored_results(&denied)[0]["content"][0]["text"].as_str().unwrap().contains("not allowed by the user's settings"));

    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(calls()));
    mock.push(MockReply::text("ok"));
    let consent = Recorder::new(vec![]);
    let off = agent(&mock, &d, Policy::allow_all(), SandboxMode::Off);
    off.set_consent(consent.clone());
    off.prompt("go", RunOptions::default()).await.unwrap();
    assert!(consent.asked().is_empty(), "{:#?}", consent.asked());
    assert!(d.project.join(".git/hooks/pre-commit").exists());
}

/// The approved write acts on the real path that was checked: a link swapped in after the
/// approval (while the user reads it) is not followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_lands_where_the_approval_said() {
    struct Swapper {
        link: PathBuf,
        elsewhere: PathBuf,
        asked: Mutex<Vec<ApprovalRequest>>,
    }
    #[async_trait]
    impl Consent for Swapper {
        async fn ask(&self, request: ApprovalRequest) -> Decision {
            self.asked.lock().unwrap().push(request);
            std::fs::remove_file(&self.link).unwrap();
            std::os::unix::fs::symlink(&self.elsewhere, &self.link).unwrap();
            Decision::Allow
        }
    }
    let d = dirs();
    let approved = d.outside.join("approved.txt");
    let elsewhere = d.outside.join("elsewhere.txt");
    std::fs::write(&approved, "a\n").unwrap();
    std::fs::write(&elsewhere, "e\n").unwrap();
    let link = d.project.join("link");
    std::os::unix::fs::symlink(&approved, &link).unwrap();
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(vec![call("s1", "write", json!({ "path": "link", "content": "new\n" }))]));
    mock.push(MockReply::text("ok"));
    let agent = agent(&mock, &d, Policy::allow_all(), SandboxMode::WorkspaceWrite);
    let swapper = Arc::new(Swapper { link: link.clone(), elsewhere: elsewhere.clone(), asked: Mutex::new(Vec::new()) });
    agent.set_consent(swapper.clone());
    agent.prompt("go", RunOptions::default()).await.unwrap();
    let asked = swapper.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].path.as_deref(), Some(approved.to_str().unwrap()));
    assert_eq!(std::fs::read_to_string(&approved).unwrap(), "new\n");
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "e\n", "the swapped-in link was followed");
}

// ---------------------------------------------------------------------------------------------
// In headless Neovim

mod in_neovim {
    use super::*;
    use common::nvim::{bounded, Editor};

    /// The chat's approval for a write through a planted link names the real path and the
    /// reason, offers no "always", and allowing once performs the write there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_chat_names_the_real_path_and_allow_once_writes_it() {
        bounded(async {
            let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
            let outside = std::fs::canonicalize(ed.dir.path()).unwrap().join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            let target = outside.join("init.lua");
            std::fs::write(&target, "-- mine\n").unwrap();
            std::os::unix::fs::symlink(&target, ed.work_dir().join("config.lua")).unwrap();
            ed.lua("require('handoff').open_chat()", json!([])).await;
            ed.mock.push(tool_calls_reply(vec![call("v1", "write", json!({ "path": "config.lua", "content": "-- theirs\n" }))]));
            ed.mock.push(MockReply::text("ok"));
            ed.lua("require('handoff').prompt('write it')", json!([])).await;
            let req = ed.wait_event("HandoffToolApproval", 1).await;
            assert_eq!(req["id"], "v1", "allow_all still asks: {req}");
            assert_eq!(req["path"], target.to_str().unwrap(), "{req}");
            let why = format!("{} is outside the project", target.display());
            assert_eq!(req["protected"], why.as_str(), "{req}");
            let chat = ed.eval("table.concat(T.chat(), '\\n')").await.as_str().unwrap().to_string();
            assert!(chat.contains("### Allow `write` on a protected path?"), "{chat}");
            assert!(chat.contains(&format!("*Protected:* {why}")), "{chat}");
            assert!(chat.contains(&format!("*Real path:* `{}`", target.display())), "{chat}");
            assert!(!chat.contains("` always"), "always is not offered: {chat}");
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "-- mine\n");
            ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
            ed.wait_event("HandoffAgentEnd", 1).await;
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "-- theirs\n");
            assert!(ed.work_dir().join("config.lua").is_symlink());
            ed.quit().await;
        })
        .await;
    }

    /// The host writes to the real path it checked; a buffer opened by a link's name is still the
    /// file's buffer: the change goes through it (shown at once, written, one undo step).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_buffer_opened_through_a_link_gets_the_write() {
        bounded(async {
            let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
            let real = ed.work_dir().join("real.txt");
            std::fs::write(&real, "one\n").unwrap();
            std::os::unix::fs::symlink(&real, ed.work_dir().join("alias.txt")).unwrap();
            ed.command("edit alias.txt").await;
            let buf = ed.eval("vim.api.nvim_get_current_buf()").await;
            ed.mock.push(tool_calls_reply(vec![call("b1", "write", json!({ "path": "alias.txt", "content": "two\n" }))]));
            ed.mock.push(MockReply::text("ok"));
            ed.lua("require('handoff').prompt('change it')", json!([])).await;
            ed.wait_event("HandoffAgentEnd", 1).await;
            assert_eq!(std::fs::read_to_string(&real).unwrap(), "two\n");
            let lines = ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf])).await;
            assert_eq!(lines, json!(["two"]), "the buffer did not get the write");
            assert_eq!(ed.lua("return vim.bo[...].modified", json!([buf])).await, json!(false));
            ed.lua("vim.api.nvim_buf_call(..., function() vim.cmd('silent undo') end)", json!([buf])).await;
            let lines = ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf])).await;
            assert_eq!(lines, json!(["one"]), "one undo step");
            ed.quit().await;
        })
        .await;
    }
}

/// In the `read-only` sandbox, where commands cannot write the project, no write of a host
/// tool runs unasked either (allow_all included); in `workspace-write` the same write does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_only_sandbox_asks_for_every_write() {
    for (mode, asks) in [(SandboxMode::ReadOnly, true), (SandboxMode::WorkspaceWrite, false)] {
        let d = dirs();
        let mock = MockServer::start().await.unwrap();
        mock.push(tool_calls_reply(vec![call("w1", "write", json!({ "path": "notes.txt", "content": "x\n" }))]));
        mock.push(MockReply::text("ok"));
        let consent = Recorder::new(vec![Decision::Reject { reason: None }]);
        let agent = agent(&mock, &d, Policy::allow_all(), mode);
        agent.set_consent(consent.clone());
        agent.prompt("go", RunOptions::default()).await.unwrap();
        let asked = consent.asked();
        assert_eq!(asked.len(), usize::from(asks), "{mode:?}: {asked:#?}");
        assert_eq!(d.project.join("notes.txt").exists(), !asks, "{mode:?}");
        if asks {
            assert!(asked[0].protected.as_deref().unwrap().contains("the sandbox is read-only"), "{asked:#?}");
        }
    }
}
