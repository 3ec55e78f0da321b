//! The sandbox for bash, with real commands through the real helper (`handoff-nvim
//! sandbox-exec`): writes inside and outside the project, `/dev/null`, TCP and UDP to loopback
//! listeners this test starts (which must see nothing), an AF_UNIX socketpair, a grandchild,
//! `NoNewPrivs`, the network let through; an unenforceable sandbox refused (simulated); the
//! agent's escalation after a denial and the re-run outside; `allow_sandboxed`.
//!
//! Where this kernel cannot enforce the sandbox, a test prints `SKIPPED <name>: <why>` and
//! passes; with `HANDOFF_REQUIRE_SANDBOX=1` (CI) that is a failure instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use common::sandbox::Recorder;

use common::sandbox::enforced;

use std::io::{ErrorKind, Read};
use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::tool_calls_reply;
use handoff_mock::{MockReply, MockServer, MockToolCall};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::sandbox::{Sandboxed, SandboxMode, SandboxSettings, SIMULATED_ABI_VAR};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::consent::{Decision, Level, Policy};
use handoff_nvim::core::tools::{ToolContext, ToolOutput};
use serde_json::{json, Value};

/// Runs a tool of the host's own, every one enabled (as the agent runs them: the registry).
async fn execute(name: &str, args: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
    handoff_nvim::core::tools::ToolRegistry::all().execute(name, args, ctx).await
}

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
/// The helper the host runs commands through (`handoff-nvim sandbox-exec` is the same).
const HELPER: &str = env!("CARGO_BIN_EXE_handoff-sandbox");


/// A project folder, a folder outside it, and the sandbox's temp folder.
struct Dirs {
    _root: tempfile::TempDir,
    project: PathBuf,
    outside: PathBuf,
    tmp: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let [project, outside, tmp] = ["project", "outside", "tmp"].map(|d| root.path().join(d));
    for d in [&project, &outside, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    Dirs { _root: root, project, outside, tmp }
}

fn sandboxed(d: &Dirs, mode: SandboxMode, network: bool) -> Sandboxed {
    Sandboxed { helper: HELPER.into(), settings: SandboxSettings { mode, network }, tmpdir: d.tmp.clone(), mounts: true, scope: None }
}

/// `command` through the bash tool, in the project, in `sandbox`.
async fn bash_in(d: &Dirs, sandbox: Option<Sandboxed>, command: &str) -> ToolOutput {
    let ctx = ToolContext::new(&d.project).with_sandbox(sandbox);
    execute("bash", json!({ "command": command }), &ctx).await
}

#[tokio::test]
async fn writes_go_to_the_project_its_temp_folder_and_dev_null_only() {
    if !enforced("writes_go_to_the_project_its_temp_folder_and_dev_null_only") {
        return;
    }
    let d = dirs();
    let command = format!(
        "echo in > inside.txt && echo t > \"$TMPDIR/t\" && echo n > /dev/null && echo e > /dev/stderr && echo $TMPDIR; echo out > {}/x",
        d.outside.display()
    );
    let out = bash_in(&d, Some(sandboxed(&d, SandboxMode::WorkspaceWrite, false)), &command).await;
    let text = out.joined_text();
    assert!(out.is_error, "{text}");
    assert!(text.contains(&format!("{}/x: Read-only file system", d.outside.display())), "{text}");
    assert!(text.contains(&format!("e\n{}\n", d.tmp.display())), "stderr through the pipe, TMPDIR set: {text}");
    assert_eq!(std::fs::read_to_string(d.project.join("inside.txt")).unwrap(), "in\n");
    assert_eq!(std::fs::read_to_string(d.tmp.join("t")).unwrap(), "t\n");
    assert!(!d.outside.join("x").exists(), "the write outside the project went through");

    // Unsandboxed, the same command writes outside (the denial is the sandbox's).
    let out = bash_in(&d, None, &format!("echo out > {}/x", d.outside.display())).await;
    assert!(!out.is_error, "{}", out.joined_text());
    assert!(d.outside.join("x").exists());
}

#[tokio::test]
async fn read_only_writes_nowhere_but_its_temp_folder() {
    if !enforced("read_only_writes_nowhere_but_its_temp_folder") {
        return;
    }
    let d = dirs();
    std::fs::write(d.project.join("kept.txt"), "kept\n").unwrap();
    let command = "cat kept.txt; echo t > \"$TMPDIR/t\" && echo x > kept.txt";
    let out = bash_in(&d, Some(sandboxed(&d, SandboxMode::ReadOnly, false)), command).await;
    let text = out.joined_text();
    assert!(out.is_error && text.starts_with("kept\n"), "reads work: {text}");
    assert!(text.contains("kept.txt: Read-only file system"), "{text}");
    assert_eq!(std::fs::read_to_string(d.project.join("kept.txt")).unwrap(), "kept\n");
    assert!(d.tmp.join("t").exists());
}

/// A TCP and a UDP listener on 127.0.0.1, non-blocking: what reached them.
struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Listeners {
    fn start() -> Listeners {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        udp.set_nonblocking(true).unwrap();
        Listeners { tcp, udp }
    }

    fn ports(&self) -> (u16, u16) {
        (self.tcp.local_addr().unwrap().port(), self.udp.local_addr().unwrap().port())
    }

    /// Whether a connection is waiting (its first bytes, if any) and a datagram arrived.
    fn seen(&self) -> (Option<String>, Option<String>) {
        let tcp = match self.tcp.accept() {
            Ok((mut stream, _)) => {
                stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut text = String::new();
                let _ = stream.read_to_string(&mut text);
                Some(text)
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => panic!("accept: {e}"),
        };
        let mut buf = [0u8; 64];
        let udp = match self.udp.recv(&mut buf) {
            Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => panic!("recv: {e}"),
        };
        (tcp, udp)
    }
}

/// A TCP connect (`/dev/tcp`, bash's own connect(2)), a UDP send (`/dev/udp`), and Python's
/// socket calls for both when Python is there.
fn network_command(tcp: u16, udp: u16) -> String {
    format!(
        "echo tcp-hello > /dev/tcp/127.0.0.1/{tcp}; echo udp-hello > /dev/udp/127.0.0.1/{udp}; \
         if command -v python3 >/dev/null; then python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b\"py-udp\", (\"127.0.0.1\", {udp}))' || echo python-udp-refused; fi"
    )
}

#[tokio::test]
async fn tcp_and_udp_to_loopback_listeners_are_refused_and_they_see_nothing() {
    if !enforced("tcp_and_udp_to_loopback_listeners_are_refused_and_they_see_nothing") {
        return;
    }
    let d = dirs();
    let listeners = Listeners::start();
    let (tcp, udp) = listeners.ports();
    let out = bash_in(&d, Some(sandboxed(&d, SandboxMode::WorkspaceWrite, false)), &network_command(tcp, udp)).await;
    let text = out.joined_text();
    assert!(text.contains(&format!("/dev/tcp/127.0.0.1/{tcp}: Operation not permitted")), "{text}");
    assert!(text.contains(&format!("/dev/udp/127.0.0.1/{udp}: Operation not permitted")), "{text}");
    if text.contains("python") || which("python3") {
        assert!(text.contains("PermissionError") && text.contains("python-udp-refused"), "{text}");
    }
    assert_eq!(listeners.seen(), (None, None), "the listeners heard from the sandbox: {text}");
}

#[tokio::test]
async fn network_true_lets_the_connect_and_the_send_through() {
    if !enforced("network_true_lets_the_connect_and_the_send_through") {
        return;
    }
    let d = dirs();
    let listeners = Listeners::start();
    let (tcp, udp) = listeners.ports();
    let out = bash_in(&d, Some(sandboxed(&d, SandboxMode::WorkspaceWrite, true)), &network_command(tcp, udp)).await;
    let text = out.joined_text();
    assert!(!out.is_error, "{text}");
    let (tcp_seen, udp_seen) = listeners.seen();
    assert_eq!(tcp_seen.as_deref(), Some("tcp-hello\n"), "{text}");
    assert_eq!(udp_seen.as_deref(), Some("udp-hello\n"), "{text}");
    // Writes are still limited with the network on.
    let out = bash_in(&d, Some(sandboxed(&d, SandboxMode::WorkspaceWrite, true)), &format!("echo x > {}/x", d.outside.display())).await;
    assert!(out.is_error && !d.outside.join("x").exists(), "{}", out.joined_text());
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

#[tokio::test]
async fn an_af_unix_socketpair_and_git_still_work() {
    if !enforced("an_af_unix_socketpair_and_git_still_work") {
        return;
    }
    let d = dirs();
    let mut command = String::from(
        "git init -q repo && git -C repo -c user.name=t -c user.email=t@t commit -q --allow-empty -m first && git -C repo log --format=%s",
    );
    if which("python3") {
        command.push_str(" && python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"over-unix\"); print(b.recv(16).decode())'");
    }
    let out = bash_in(&d, Some(sandboxed(&d, SandboxMode::WorkspaceWrite, false)), &command).await;
    let text = out.joined_text();
    assert!(!out.is_error, "{text}");
    assert!(text.starts_with("first\n"), "{text}");
    if which("python3") {
        assert!(text.contains("over-unix"), "{text}");
    } else {
        eprintln!("an_af_unix_socketpair_and_git_still_work: no python3, the socketpair is git's only");
    }
}

#[tokio::test]
async fn a_grandchild_inherits_the_limits_and_no_new_privs() {
    if !enforced("a_grandchild_inherits_the_limits_and_no_new_privs") {
        return;
    }
    let d = dirs();
    let command = format!(
        "grep NoNewPrivs /proc/self/status; bash -c '(echo g > {}/g; grep NoNewPrivs /proc/self/status) & wait'",
        d.outside.display()
    );
    // Through either helper: handoff-sandbox (the host's) and handoff-nvim sandbox-exec.
    for helper in [HELPER, BIN] {
        let sandbox = Sandboxed { helper: helper.into(), ..sandboxed(&d, SandboxMode::WorkspaceWrite, false) };
        let out = bash_in(&d, Some(sandbox), &command).await;
        let text = out.joined_text();
        assert_eq!(text.matches("NoNewPrivs:\t1").count(), 2, "{helper}: {text}");
        assert!(text.contains("/g: Read-only file system"), "{helper}: {text}");
        assert!(!d.outside.join("g").exists());
    }
}

#[test]
fn an_unenforceable_sandbox_is_refused_by_the_helper_and_the_cli() {
    let d = dirs();
    let marker = d.project.join("ran");
    // Either helper, told (as a kernel without Landlock would) that the ABI is 0: nothing runs.
    for helper in [HELPER, BIN] {
        let out = std::process::Command::new(helper)
            .args(["sandbox-exec", "--sandbox", "workspace-write", "--network", "false", "--tmpdir"])
            .arg(&d.tmp)
            .args(["--", "touch"])
            .arg(&marker)
            .env(SIMULATED_ABI_VAR, "0")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{helper}: {stderr}");
        assert!(stderr.contains("the sandbox cannot be enforced: this kernel has no Landlock"), "{helper}: {stderr}");
        assert!(stderr.contains("--sandbox off"), "{helper}: {stderr}");
        assert!(!marker.exists(), "{helper}: the command ran unsandboxed");
    }

    // The CLI refuses the prompt before any request, naming the flag; `--yes` does not change it.
    let out = common::clean_command(BIN)
        .args(["prompt", "--yes", "--new", "--base-url", "http://127.0.0.1:9/v1", "--session-dir"])
        .arg(d.tmp.join("sessions"))
        .arg("--cwd")
        .arg(&d.project)
        .arg("hello")
        .env(SIMULATED_ABI_VAR, "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the sandbox (--sandbox workspace-write) cannot be enforced"), "{stderr}");
    assert!(stderr.contains("pass --sandbox off"), "{stderr}");
    // Off, it goes on to the request (which fails here: nothing listens on port 9).
    let out = common::clean_command(BIN)
        .args(["prompt", "--yes", "--new", "--sandbox", "off", "--max-retries", "0", "--base-url", "http://127.0.0.1:9/v1", "--session-dir"])
        .arg(d.tmp.join("sessions"))
        .arg("--cwd")
        .arg(&d.project)
        .arg("hello")
        .env(SIMULATED_ABI_VAR, "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("cannot be enforced"), "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// The agent: the escalation, allow_sandboxed




fn agent(mock: &MockServer, d: &Dirs, policy: Policy) -> Arc<AgentSession> {
    let config = AgentConfig { policy, ..AgentConfig::new(common::config(mock)) };
    assert_eq!(config.sandbox, SandboxSettings { mode: SandboxMode::WorkspaceWrite, network: false }, "the default");
    let session = SessionManager::create(&d.tmp.join("sessions"), &d.project, None).unwrap();
    Arc::new(AgentSession::new(config, session))
}

fn bash_call(id: &str, command: &str) -> MockToolCall {
    MockToolCall::new("bash", &json!({ "command": command }), 2).with_id(id)
}

/// The tool results of the agent's session file.
fn results(agent: &AgentSession) -> Vec<Value> {
    common::entry_lines(agent.session().path())
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| e["message"].clone())
        .collect()
}

fn text_of(result: &Value) -> String {
    result["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_command_is_offered_a_rerun_outside_and_allow_all_does_not_lift_the_sandbox() {
    if !enforced("a_blocked_command_is_offered_a_rerun_outside_and_allow_all_does_not_lift_the_sandbox") {
        return;
    }
    let d = dirs();
    let mock = MockServer::start().await.unwrap();
    let target = d.outside.join("out.txt");
    let command = format!("echo done > {}", target.display());
    // Allowed once: the re-run writes; the same command later is sandboxed (and blocked) again,
    // and rejected; then "always": the third run goes outside unasked.
    for id in ["b1", "b2", "b3", "b4"] {
        mock.push(tool_calls_reply(vec![bash_call(id, &command)]));
    }
    mock.push(MockReply::text("ok"));
    let consent = Recorder::new(vec![
        Decision::Allow,
        Decision::Reject { reason: None },
        Decision::Always,
    ]);
    let agent = agent(&mock, &d, Policy::allow_all());
    agent.set_consent(consent.clone());
    agent.prompt("write it", RunOptions::default()).await.unwrap();

    let asked = consent.asked();
    assert_eq!(asked.len(), 3, "allow_all asks nothing but the escalations: {asked:#?}");
    for (request, id) in asked.iter().zip(["b1", "b2", "b3"]) {
        assert_eq!(request.id, format!("{id}/unsandboxed"));
        let why = request.unsandboxed.as_deref().unwrap();
        assert!(why.contains("looks blocked") && why.contains("out.txt: Read-only file system"), "{why}");
        assert_eq!(request.summary, command);
    }
    let results = results(&agent);
    assert_eq!(results.len(), 4);
    // b1: re-run outside after the approval.
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    assert!(results[0]["details"]["unsandboxed"].as_str().unwrap().contains("Read-only file system"));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "done\n");
    // b2: rejected, the sandboxed result stands.
    assert_eq!(results[1]["isError"], true);
    assert!(text_of(&results[1]).contains("Read-only file system"), "{}", results[1]);
    assert_eq!(results[1]["details"]["sandbox"], "workspace-write, no network");
    // b3: always; b4 runs outside without asking.
    assert_eq!(results[2]["isError"], false);
    assert_eq!(results[3]["isError"], false, "{}", results[3]);
    assert!(results[3]["details"].get("sandbox").is_none(), "{}", results[3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_sandboxed_runs_sandboxed_commands_unasked_and_still_asks_for_edits() {
    if !enforced("allow_sandboxed_runs_sandboxed_commands_unasked_and_still_asks_for_edits") {
        return;
    }
    let d = dirs();
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(vec![
        bash_call("s1", "echo hi > made.txt"),
        MockToolCall::new("write", &json!({ "path": "w.txt", "content": "w\n" }), 2).with_id("s2"),
    ]));
    mock.push(MockReply::text("ok"));
    let consent = Recorder::new(vec![Decision::Allow]);
    let agent = agent(&mock, &d, Policy { level: Level::AllowSandboxed, ..Policy::default() });
    agent.set_consent(consent.clone());
    agent.prompt("go", RunOptions::default()).await.unwrap();
    let asked = consent.asked();
    assert_eq!(asked.iter().map(|r| r.tool.as_str()).collect::<Vec<_>>(), ["write"], "{asked:#?}");
    assert_eq!(std::fs::read_to_string(d.project.join("made.txt")).unwrap(), "hi\n");
    assert!(d.project.join("w.txt").exists());
    assert_eq!(results(&agent)[0]["details"]["sandbox"], "workspace-write, no network");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_default_policy_the_approval_says_the_command_runs_sandboxed() {
    if !enforced("under_the_default_policy_the_approval_says_the_command_runs_sandboxed") {
        return;
    }
    let d = dirs();
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(vec![bash_call("a1", "true")]));
    mock.push(MockReply::text("ok"));
    let consent = Recorder::new(vec![Decision::Allow]);
    let agent = agent(&mock, &d, Policy::default());
    agent.set_consent(consent.clone());
    agent.prompt("go", RunOptions::default()).await.unwrap();
    let asked = consent.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].sandbox.as_deref(), Some("workspace-write, no network"));
    assert_eq!(asked[0].unsandboxed, None);
    // Which binary confines it: the helper the build made, run from a sealed copy.
    let by = asked[0].confined_by.clone().unwrap_or_default();
    assert!(by.starts_with(HELPER) && by.contains("sealed in-memory copy") && by.contains("a command cannot change it"), "{by}");
    let wire = serde_json::to_value(&asked[0]).unwrap();
    assert_eq!(wire["sandbox"], "workspace-write, no network", "the front ends receive it");
    assert_eq!(wire["confined_by"], by.as_str(), "the front ends receive it");
}

// ---------------------------------------------------------------------------------------------
// In headless Neovim

mod in_neovim {
    use super::*;
    use common::nvim::{bounded, Editor};

    async fn chat(ed: &Editor) -> String {
        ed.eval("table.concat(T.chat(), '\\n')").await.as_str().unwrap().to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scripted_turn_shows_the_sandboxed_run_and_the_escalation() {
        if !enforced("a_scripted_turn_shows_the_sandboxed_run_and_the_escalation") {
            return;
        }
        bounded(async {
            let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_sandboxed" } })).await;
            let outside = ed.dir.path().join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            let target = outside.join("out.txt");
            ed.lua("require('handoff').open_chat()", json!([])).await;
            ed.mock.push(tool_calls_reply(vec![
                bash_call("n1", "echo in > inside.txt"),
                bash_call("n2", &format!("echo out > {}", target.display())),
            ]));
            ed.mock.push(MockReply::text("Both written."));
            ed.lua("require('handoff').prompt('write both')", json!([])).await;
            // n1 ran unasked in the sandbox; n2 was blocked by it and asks to run outside.
            let req = ed.wait_event("HandoffToolApproval", 1).await;
            assert_eq!(req["id"], "n2/unsandboxed", "{req}");
            assert!(req["unsandboxed"].as_str().unwrap().contains("out.txt: Read-only file system"), "{req}");
            assert!(ed.work_dir().join("inside.txt").exists());
            assert!(!target.exists());
            let text = chat(&ed).await;
            assert!(text.contains("*sandboxed: workspace-write, no network*"), "{text}");
            assert!(text.contains("### Run `bash` outside the sandbox?"), "{text}");
            assert!(text.contains("*Why:* the sandboxed run looks blocked by the sandbox: "), "{text}");
            ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
            ed.wait_event("HandoffAgentEnd", 1).await;
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "out\n");
            let text = chat(&ed).await;
            assert!(text.contains("*re-run outside the sandbox (it looked blocked: "), "{text}");
            ed.quit().await;
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unenforceable_sandbox_asks_before_each_command_and_says_why() {
        bounded(async {
            let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
            // Before the host starts: it reports the Landlock ABI as 0, as a kernel without it.
            ed.lua("vim.env[...] = '0'", json!([SIMULATED_ABI_VAR])).await;
            ed.lua("require('handoff').open_chat()", json!([])).await;
            ed.mock.push(tool_calls_reply(vec![bash_call("u1", "echo ran > ran.txt")]));
            ed.mock.push(MockReply::text("ok"));
            ed.lua("require('handoff').prompt('run it')", json!([])).await;
            let req = ed.wait_event("HandoffToolApproval", 1).await;
            assert_eq!(req["id"], "u1", "allow_all still asks: {req}");
            assert!(req["unsandboxed"].as_str().unwrap().contains("cannot be enforced: this kernel has no Landlock"), "{req}");
            let text = chat(&ed).await;
            assert!(text.contains("### Run `bash` outside the sandbox?"), "{text}");
            ed.lua("require('handoff').approve(...)", json!([req["id"], "reject", "not without the sandbox"])).await;
            ed.wait_event("HandoffAgentEnd", 1).await;
            assert!(!ed.work_dir().join("ran.txt").exists());
            ed.quit().await;
        })
        .await;
    }

    /// Without a mount namespace (simulated), `allow_all` still asks before a command in a git
    /// project, saying what stays open; "always" is this once only; approved, the command runs
    /// sandboxed (Landlock and seccomp hold).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_a_mount_namespace_each_command_asks_in_the_chat() {
        if !enforced("without_a_mount_namespace_each_command_asks_in_the_chat") {
            return;
        }
        bounded(async {
            let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
            std::fs::create_dir_all(ed.work_dir().join(".git/hooks")).unwrap();
            std::fs::write(ed.work_dir().join(".git/config"), "[core]\n").unwrap();
            ed.lua("vim.env[...] = '1'", json!([handoff_nvim::core::sandbox::SIMULATED_NO_MOUNTS_VAR])).await;
            ed.lua("require('handoff').open_chat()", json!([])).await;
            let outside = ed.dir.path().join("outside-h");
            std::fs::create_dir_all(&outside).unwrap();
            let command = format!("echo in > in.txt; echo out > {}/x", outside.display());
            ed.mock.push(tool_calls_reply(vec![bash_call("h1", &command), bash_call("h2", "echo again > again.txt")]));
            ed.mock.push(MockReply::text("ok"));
            ed.lua("require('handoff').prompt('run it')", json!([])).await;
            let req = ed.wait_event("HandoffToolApproval", 1).await;
            assert_eq!(req["id"], "h1", "{req}");
            let holes = req["holes"].as_str().unwrap();
            assert!(holes.contains("git's folders (.git) stay writable whole") && holes.contains("simulated") && holes.contains("simulated"), "{holes}");
            assert!(chat(&ed).await.contains("*Runs in the sandbox, but the sandbox cannot fully protect this command"), "{}", chat(&ed).await);
            // The read rules keep credentials unreadable without the namespace (only the names in
            // their folders stay listable): what stays readable is other processes' environments.
            assert_eq!(holes.matches("stay readable").count(), 1, "{holes}");
            assert!(holes.contains("environments (/proc/PID/environ: the editor's may hold keys) stay readable"), "{holes}");
            ed.lua("require('handoff').approve(...)", json!([req["id"], "always"])).await;
            // Sandboxed, the write outside was refused: the re-run outside is offered, and refused.
            let req = ed.wait_event("HandoffToolApproval", 2).await;
            assert_eq!(req["id"], "h1/unsandboxed", "{req}");
            ed.lua("require('handoff').approve(...)", json!([req["id"], "reject"])).await;
            let req = ed.wait_event("HandoffToolApproval", 3).await;
            assert_eq!(req["id"], "h2", "always was this once: {req}");
            ed.lua("require('handoff').approve(...)", json!([req["id"], "reject"])).await;
            ed.wait_event("HandoffAgentEnd", 1).await;
            assert!(ed.work_dir().join("in.txt").exists());
            assert!(!outside.join("x").exists(), "approved, it still ran sandboxed");
            ed.quit().await;
        })
        .await;
    }

    /// The approval of a sandboxed command names the binary that confines it, in the chat and
    /// in the event.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_approval_names_the_binary_that_confines_the_command() {
        if !enforced("the_approval_names_the_binary_that_confines_the_command") {
            return;
        }
        bounded(async {
            let ed = Editor::start().await;
            ed.lua("require('handoff').open_chat()", json!([])).await;
            ed.mock.push(tool_calls_reply(vec![bash_call("c1", "true")]));
            ed.mock.push(MockReply::text("ok"));
            ed.lua("require('handoff').prompt('run it')", json!([])).await;
            let req = ed.wait_event("HandoffToolApproval", 1).await;
            let by = req["confined_by"].as_str().unwrap_or_default().to_string();
            assert!(by.contains("handoff-sandbox, run from a sealed in-memory copy"), "{req}");
            let text = chat(&ed).await;
            assert!(text.contains("*Runs in the sandbox: workspace-write, no network*"), "{text}");
            assert!(text.contains(&format!("*Confined by {by}*")), "{text}");
            ed.lua("require('handoff').approve(...)", json!([req["id"], "reject"])).await;
            ed.wait_event("HandoffAgentEnd", 1).await;
            ed.quit().await;
        })
        .await;
    }

    /// `:checkhealth handoff` says what the sandbox protects here: with the mount namespace, the
    /// read-only planted code and hidden credentials; without one (simulated), a warning that
    /// says so and that each command asks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkhealth_says_whether_the_mount_namespace_holds() {
        if !enforced("checkhealth_says_whether_the_mount_namespace_holds") {
            return;
        }
        bounded(async {
            for simulate in [false, true] {
                let ed = Editor::start().await;
                if simulate {
                    ed.lua("vim.env[...] = '1'", json!([handoff_nvim::core::sandbox::SIMULATED_NO_MOUNTS_VAR])).await;
                }
                // The check only reports (it starts nothing): what the sandbox does here is the
                // running host's answer.
                ed.lua("require('handoff.host').ensure()", json!([])).await;
                ed.wait_until("require('handoff').status().session_file ~= nil", std::time::Duration::from_secs(30)).await;
                ed.command("checkhealth handoff").await;
                let text = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
                let text = text.as_str().unwrap().to_string();
                if simulate {
                    assert!(text.contains("but no mount namespace: ") && text.contains("simulated: no user namespaces"), "{text}");
                    assert!(text.contains("each command asks before it runs, whatever the policy"), "{text}");
                } else {
                    assert!(text.contains("mount namespace: .git hooks and config read-only, credentials and the editor's socket hidden"), "{text}");
                }
                // Which binary confines commands, and that a command cannot change it.
                let helper = format!("helper: {}", std::path::Path::new(BIN).with_file_name("handoff-sandbox").display());
                assert!(text.contains(&helper) && text.contains("sealed in-memory copy"), "{text}");
                ed.quit().await;
            }
        })
        .await;
    }

    /// The editor's host makes its sandbox temp folder fresh (an unpredictable name, 0700) and
    /// removes it, with what commands left there, when Neovim quits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_temp_folder_is_fresh_and_goes_when_neovim_quits() {
        use std::os::unix::fs::PermissionsExt;
        if !enforced("the_temp_folder_is_fresh_and_goes_when_neovim_quits") {
            return;
        }
        bounded(async {
            let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_sandboxed" } })).await;
            let tmp = ed.dir.path().join("host-tmp");
            std::fs::create_dir_all(&tmp).unwrap();
            // Before the host starts: its temp folder goes there.
            ed.lua("vim.env.TMPDIR = ...", json!([tmp])).await;
            ed.lua("require('handoff').open_chat()", json!([])).await;
            ed.mock.push(tool_calls_reply(vec![bash_call("t1", "echo left > \"$TMPDIR/left\" && echo \"$TMPDIR\"")]));
            ed.mock.push(MockReply::text("ok"));
            ed.lua("require('handoff').prompt('use the temp folder')", json!([])).await;
            ed.wait_event("HandoffAgentEnd", 1).await;
            // The commands' temp folder, and the host's own folder for git's views (commands
            // cannot write there), made ahead with the session.
            let made: Vec<PathBuf> = std::fs::read_dir(&tmp).unwrap().flatten().map(|e| e.path()).collect();
            let name_of = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
            let (ours, others): (Vec<&PathBuf>, Vec<&PathBuf>) = made.iter().partition(|p| name_of(p).starts_with("handoff-sandbox-"));
            assert_eq!(ours.len(), 1, "{made:?}");
            assert!(others.iter().all(|p| name_of(p).starts_with("handoff-git-")) && others.len() <= 1, "{made:?}");
            let name = name_of(ours[0]);
            let suffix = name.strip_prefix("handoff-sandbox-").unwrap_or_else(|| panic!("{name}"));
            assert!(suffix.parse::<u32>().is_err() && suffix.len() >= 6, "a predictable name: {name}");
            for folder in &made {
                assert_eq!(std::fs::metadata(folder).unwrap().permissions().mode() & 0o777, 0o700, "{}", folder.display());
            }
            assert!(ours[0].join("left").exists());
            let _dir = ed.quit().await;
            common::wait_until("the host's folders to go", Duration::from_secs(10), || made.iter().all(|f| !f.exists())).await;
        })
        .await;
    }
}

/// The host's sandbox temp folder (`$TMPDIR/handoff-sandbox-<pid>`) goes with the host: a CLI
/// prompt whose command wrote into it leaves nothing in `$TMPDIR`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandboxs_temp_folder_goes_when_the_host_exits() {
    if !enforced("the_sandboxs_temp_folder_goes_when_the_host_exits") {
        return;
    }
    let d = dirs();
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(vec![bash_call("call_1", "echo kept > \"$TMPDIR/left\" && ls \"$TMPDIR\"")]));
    mock.push(MockReply::text("done"));
    let tmp = d.tmp.join("host-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = common::clean_command_async(BIN)
        .args(["prompt", "--yes", "--new", "--max-retries", "0", "--base-url", &mock.openai_base_url(), "--session-dir"])
        .arg(d.tmp.join("sessions"))
        .arg("--cwd")
        .arg(&d.project)
        .arg("write a temp file")
        .current_dir(&d.project)
        .env("TMPDIR", &tmp)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result = mock.requests().last().unwrap().body.to_string();
    assert!(result.contains("left"), "the command wrote into its temp folder: {result}");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "left in $TMPDIR after the host exited: {left:?}");
}
