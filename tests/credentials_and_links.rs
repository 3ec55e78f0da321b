//! Issue 39, round two: the credential files the first list missed (pi's `models.json`, git's
//! `credentials` store under `~/.config` and `$XDG_CONFIG_HOME`, other coding agents' logins,
//! the file the user's own `api_key_cmd` reads), and hard links that exist already (a project
//! file that shares its inode with a file outside, as uv's and pnpm's caches do).
//!
//! Each through the real CLI and a scripted model turn with `--yes` (the default sandbox,
//! `workspace-write`, network off), each with its control: `--sandbox off`, or the approval
//! given (through the agent), shows that the same call does reach, so the test can fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use common::sandbox::{enforced, Recorder};

use std::path::PathBuf;
use std::sync::Arc;

use common::tool_calls_reply;
use handoff_mock::{MockReply, MockServer, MockToolCall};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::sandbox::{SandboxMode, SandboxSettings};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::consent::{Decision, Policy};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");

/// A user's machine in a temp folder: a home, `$XDG_CONFIG_HOME` elsewhere, a project, a
/// folder outside (a package cache), sessions.
struct Machine {
    _root: tempfile::TempDir,
    home: PathBuf,
    xdg: PathBuf,
    project: PathBuf,
    outside: PathBuf,
    sessions: PathBuf,
}

fn machine() -> Machine {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let [home, xdg, project, outside, sessions] = ["home", "xdg", "home/project", "cache", "sessions"].map(|d| base.join(d));
    for d in [&home, &xdg, &project, &outside, &sessions] {
        std::fs::create_dir_all(d).unwrap();
    }
    Machine { _root: root, home, xdg, project, outside, sessions }
}

fn call(id: &str, tool: &str, args: Value) -> MockToolCall {
    MockToolCall::new(tool, &args, 2).with_id(id)
}

/// What a turn left: each tool result's text (and whether it failed) by call id, the requests.
struct Turn {
    results: Vec<(String, bool, String)>,
    requests: String,
}

impl Turn {
    fn result(&self, id: &str) -> (bool, &str) {
        let (_, failed, text) = self.results.iter().find(|(i, ..)| i == id).unwrap_or_else(|| panic!("no result for {id}"));
        (*failed, text)
    }
}

/// `handoff-nvim prompt --yes` in the project, no terminal, its environment built from nothing
/// (PATH, HOME, XDG_CONFIG_HOME, TMPDIR), the model calling `calls` then answering; `flags`
/// besides (`--sandbox off`, `--tools …`, `--api-key-cmd …`).
async fn turn(m: &Machine, calls: Vec<MockToolCall>, flags: &[&str]) -> Turn {
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(calls));
    mock.push(MockReply::text("done"));
    let tmp = m.home.parent().unwrap().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["prompt", "--yes", "--new", "--max-retries", "0", "--base-url", &mock.openai_base_url(), "--session-dir"])
        .arg(&m.sessions)
        .arg("--cwd")
        .arg(&m.project)
        .args(flags)
        .arg("go")
        .current_dir(&m.project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &m.home)
        .env("XDG_CONFIG_HOME", &m.xdg)
        .env("TMPDIR", &tmp)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let file = common::session_files(&m.sessions).pop().expect("a session file");
    let results = common::entry_lines(&file)
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| {
            let m = &e["message"];
            let blocks = m["content"].as_array().cloned().unwrap_or_default();
            let text = blocks.iter().filter_map(|b| b["text"].as_str().map(String::from)).collect::<Vec<_>>().join("\n");
            (m["toolCallId"].as_str().unwrap_or_default().to_string(), m["isError"] == true, text)
        })
        .collect();
    let requests = mock.requests().iter().map(|r| r.body.to_string()).collect::<Vec<_>>().join("\n");
    std::fs::remove_dir_all(&m.sessions).unwrap();
    Turn { results, requests }
}

const OFF: &[&str] = &["--sandbox", "off"];

// ---------------------------------------------------------------------------------------------
// Credentials the first list missed

/// Each credential file (relative to the machine's root) and the secret it holds.
fn plant_credentials(m: &Machine) -> Vec<(PathBuf, &'static str)> {
    let files = [
        (m.home.join(".pi/agent/models.json"), "canary-pi-models-8180"),
        (m.home.join(".config/git/credentials"), "canary-git-store-8181"),
        (m.xdg.join("git/credentials"), "canary-xdg-git-store-8182"),
        (m.home.join(".claude/.credentials.json"), "canary-claude-8183"),
        (m.home.join(".codex/auth.json"), "canary-codex-8184"),
        (m.home.join(".gemini/oauth_creds.json"), "canary-gemini-8185"),
        (m.home.join("keys/llm.key"), "canary-key-file-8186"),
    ];
    for (path, secret) in &files {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = if path.ends_with("models.json") {
            // pi's format, so that the CLI reads it as pi's file (and keeps it working).
            json!({ "providers": { "work": { "baseUrl": "http://127.0.0.1:9/v1", "apiKey": secret, "models": [] } } }).to_string()
        } else {
            format!("{secret}\n")
        };
        std::fs::write(path, text).unwrap();
    }
    files.to_vec()
}

/// The key file is one only because the user's settings say so: `api_key_cmd` reads it.
fn key_cmd(m: &Machine) -> String {
    format!("cat {}", m.home.join("keys/llm.key").display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_cannot_read_the_new_credential_files() {
    if !enforced("a_sandboxed_command_cannot_read_the_new_credential_files") {
        return;
    }
    let m = machine();
    let files = plant_credentials(&m);
    let calls = || files.iter().enumerate().map(|(i, (p, _))| call(&format!("c{i}"), "bash", json!({ "command": format!("cat {}", p.display()) }))).collect();
    let key_cmd = key_cmd(&m);
    let flags = ["--api-key-cmd", key_cmd.as_str()];
    let run = turn(&m, calls(), &flags).await;
    let read: Vec<String> = files
        .iter()
        .enumerate()
        .filter(|(i, (_, secret))| run.result(&format!("c{i}")).1.contains(secret) || run.requests.contains(secret))
        .map(|(_, (path, _))| path.display().to_string())
        .collect();
    assert!(read.is_empty(), "a sandboxed command read these: {read:?}");
    // Control: outside the sandbox the same commands read every one.
    let off: Vec<&str> = flags.iter().copied().chain(OFF.iter().copied()).collect();
    let run = turn(&m, calls(), &off).await;
    for (i, (path, secret)) in files.iter().enumerate() {
        let (_, text) = run.result(&format!("c{i}"));
        assert!(text.contains(secret), "the control did not read {}: {text}", path.display());
    }
}

/// `read` of each asks under every policy: the CLI with `--yes` and no terminal refuses it,
/// naming it as credentials; `--sandbox off` reads it. (Host tools: any kernel.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_asks_for_the_new_credential_files() {
    let m = machine();
    let files = plant_credentials(&m);
    let calls = || files.iter().enumerate().map(|(i, (p, _))| call(&format!("r{i}"), "read", json!({ "path": p }))).collect();
    let key_cmd = key_cmd(&m);
    let flags = ["--tools", "read,grep,edit,write", "--api-key-cmd", key_cmd.as_str()];
    let run = turn(&m, calls(), &flags).await;
    let read: Vec<String> = files
        .iter()
        .enumerate()
        .filter(|(i, (path, secret))| {
            let (failed, text) = run.result(&format!("r{i}"));
            !(failed && text.contains(&format!("{} holds credentials", path.display()))) || run.requests.contains(secret)
        })
        .map(|(_, (path, _))| path.display().to_string())
        .collect();
    assert!(read.is_empty(), "read ran unasked on these: {read:?}");
    let off: Vec<&str> = flags.iter().copied().chain(OFF.iter().copied()).collect();
    let run = turn(&m, calls(), &off).await;
    for (i, (path, secret)) in files.iter().enumerate() {
        let (failed, text) = run.result(&format!("r{i}"));
        assert!(!failed && text.contains(secret), "the control did not read {}: {text}", path.display());
    }
}

// ---------------------------------------------------------------------------------------------
// Hard links that exist already

/// A project whose `.venv/lib/mod.py` is a hard link to a file of a package cache outside it
/// (uv's layout), and a file `notes.txt` with a second name `docs/notes.txt` in the project.
fn linked_project(m: &Machine) -> (PathBuf, PathBuf) {
    let cached = m.outside.join("mod.py");
    std::fs::write(&cached, "VERSION = 1\n").unwrap();
    std::fs::create_dir_all(m.project.join(".venv/lib")).unwrap();
    let linked = m.project.join(".venv/lib/mod.py");
    std::fs::hard_link(&cached, &linked).unwrap();
    std::fs::create_dir_all(m.project.join("docs")).unwrap();
    std::fs::write(m.project.join("notes.txt"), "notes\n").unwrap();
    std::fs::hard_link(m.project.join("notes.txt"), m.project.join("docs/notes.txt")).unwrap();
    (cached, linked)
}

/// `write` and `edit` of a file with another link ask under every policy: `--yes` does not
/// answer it, the CLI without a terminal refuses, naming the links; the cache is unchanged.
/// Control: `--sandbox off` writes through the link, and the cache changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_and_edit_of_a_hard_linked_file_ask_under_yes() {
    let m = machine();
    let (cached, linked) = linked_project(&m);
    let calls = || {
        vec![
            call("e1", "edit", json!({ "path": ".venv/lib/mod.py", "edits": [{ "oldText": "VERSION = 1", "newText": "VERSION = 2" }] })),
            call("w1", "write", json!({ "path": ".venv/lib/mod.py", "content": "import os; os.system('x')\n" })),
            call("w2", "write", json!({ "path": "notes.txt", "content": "changed\n" })),
            call("w3", "write", json!({ "path": "plain.txt", "content": "plain\n" })),
        ]
    };
    let flags = ["--tools", "read,edit,write"];
    let run = turn(&m, calls(), &flags).await;
    assert_eq!(std::fs::read_to_string(&cached).unwrap(), "VERSION = 1\n", "the cache was written through the link");
    for id in ["w1", "e1"] {
        let (failed, text) = run.result(id);
        assert!(failed, "{id}: {text}");
        assert!(text.contains("--yes never allows that"), "{id}: {text}");
        assert!(text.contains(&format!("{} has 2 hard links", linked.display())), "{id}: {text}");
        assert!(text.contains("1 outside the project"), "{id}: {text}");
    }
    let (failed, text) = run.result("w2");
    assert!(failed && text.contains(&format!("in the project: {}", m.project.join("docs/notes.txt").display())), "{text}");
    assert_eq!(std::fs::read_to_string(m.project.join("docs/notes.txt")).unwrap(), "notes\n");
    assert!(!run.result("w3").0, "an ordinary write runs unasked: {:?}", run.result("w3"));
    // Control.
    let off: Vec<&str> = flags.iter().copied().chain(OFF.iter().copied()).collect();
    let run = turn(&m, calls(), &off).await;
    assert!(!run.result("w1").0 && !run.result("e1").0, "{:?} {:?}", run.result("w1"), run.result("e1"));
    assert_eq!(std::fs::read_to_string(&cached).unwrap(), "import os; os.system('x')\n", "the control did not reach the cache");
}

/// Through the agent under `allow_all`: the approval names the real path and the links, and
/// offers no "always"; approved, the write changes the cache's file too (the control);
/// rejected, nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_write_to_a_hard_linked_file_changes_the_other_link() {
    for (answer, changes) in [(Decision::Reject { reason: None }, false), (Decision::Allow, true)] {
        let m = machine();
        let (cached, linked) = linked_project(&m);
        let mock = MockServer::start().await.unwrap();
        mock.push(tool_calls_reply(vec![call("w1", "write", json!({ "path": ".venv/lib/mod.py", "content": "VERSION = 3\n" }))]));
        mock.push(MockReply::text("ok"));
        let config = AgentConfig {
            policy: Policy::allow_all(),
            sandbox: SandboxSettings { mode: SandboxMode::WorkspaceWrite, network: false },
            ..AgentConfig::new(common::config(&mock))
        };
        let session = SessionManager::create(&m.sessions, &m.project, None).unwrap();
        let agent = Arc::new(AgentSession::new(config, session));
        let consent = Recorder::new(vec![answer.clone()]);
        agent.set_consent(consent.clone());
        agent.prompt("go", RunOptions::default()).await.unwrap();
        let asked = consent.asked();
        assert_eq!(asked.len(), 1, "{asked:#?}");
        assert_eq!(asked[0].path.as_deref(), Some(linked.to_str().unwrap()));
        let why = asked[0].protected.as_deref().unwrap();
        assert!(why.contains("has 2 hard links") && why.contains("1 outside the project"), "{why}");
        assert!(!asked[0].answers().contains(&handoff_nvim::core::tools::consent::Answer::Always), "always counts once");
        let now = std::fs::read_to_string(&cached).unwrap();
        assert_eq!(now == "VERSION = 3\n", changes, "{answer:?}: {now}");
    }
}

/// A sandboxed command that appends to the hard-linked file changes the cache's file too (the
/// sandbox lets it write the project): its result says so, naming the file and its links. A
/// command that writes a plain file gets no such note (the control).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_writing_through_a_hard_link_is_reported() {
    if !enforced("a_command_writing_through_a_hard_link_is_reported") {
        return;
    }
    let m = machine();
    let (cached, _) = linked_project(&m);
    let calls = vec![
        call("b1", "bash", json!({ "command": "echo x >> plain.txt" })),
        call("b2", "bash", json!({ "command": "echo 'import os' >> .venv/lib/mod.py" })),
        call("b3", "bash", json!({ "command": "echo more >> docs/notes.txt" })),
    ];
    let run = turn(&m, calls, &[]).await;
    let (_, plain) = run.result("b1");
    assert!(!plain.contains("hard links"), "{plain}");
    let (_, text) = run.result("b2");
    assert!(
        text.contains("This command changed .venv/lib/mod.py, which has 2 hard links: the change reached the other links too (1 outside the project"),
        "{text}"
    );
    let (_, text) = run.result("b3");
    assert!(text.contains("This command changed docs/notes.txt, which has 2 hard links: the change reached the other links too (in the project: notes.txt)"), "{text}");
    // What was reported is what happened: the cache's file changed.
    assert_eq!(std::fs::read_to_string(&cached).unwrap(), "VERSION = 1\nimport os\n");
    assert!(run.requests.contains("This command changed .venv/lib/mod.py"), "the model was told");
}
