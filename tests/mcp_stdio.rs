//! MCP servers as real processes: a small stdio server of our own (tests/fixtures/mcp/
//! stdio_server.py) started by the hub — its tools, its stderr in the log, a start-up that takes
//! too long, a crash in the middle of a call, a cancelled call, the process group ended with the
//! hub, and a project file that starts nothing until it is trusted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::HANG_GUARD;
use futures::FutureExt;
use handoff_nvim::core::mcp::{McpConfig, McpHub, McpSettings, State, TrustStore};
use handoff_nvim::core::tools::{EnvPolicy, ToolContext, ToolRegistry, ToolSource};
use serde_json::{json, Value};

fn server_script() -> PathBuf {
    common::fixtures_dir().join("mcp/stdio_server.py")
}

/// The entry of the test server with these variables.
fn entry(env: Value) -> Value {
    json!({"command": "python3", "args": [server_script()], "env": env})
}

fn hub(dir: &Path, servers: Value, startup_timeout: u64) -> (Arc<McpHub>, ToolRegistry) {
    let settings = McpSettings {
        servers: Some(servers.as_object().unwrap().clone()),
        startup_timeout: Some(startup_timeout),
        ..McpSettings::default()
    };
    let trust = TrustStore::new(dir.join("state/trust.json"));
    let config = McpConfig::load(&settings, dir, &trust);
    let hub = McpHub::new(config, dir, EnvPolicy::default(), trust);
    let mut registry = ToolRegistry::new([]);
    registry.add_source(hub.clone());
    (hub, registry)
}

/// The log lines written while the guard lives (this thread's: the tests run on one).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        common::keep_scoped_subscribers_reliable();
        let log = self.clone();
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || log.clone()).finish();
        tracing::subscriber::set_default(subscriber)
    }
}

/// A log line of its own callsite, for the test below.
fn log_a_line_once_reached_elsewhere() {
    tracing::info!("a line another thread reached first");
}

/// The log this file's tests wait in sees a line whose callsite another thread, one with no
/// subscriber (a parallel test's), reached first. Without `keep_scoped_subscribers_reliable`,
/// tracing cached "never" for it then and dropped it here (tokio-rs/tracing#3611): the server's
/// stderr never reached the log of the first test below, once in a while.
#[test]
fn the_log_sees_a_line_another_thread_reached_first() {
    let log = Log::default();
    let _guard = log.install();
    std::thread::spawn(log_a_line_once_reached_elsewhere).join().unwrap();
    log_a_line_once_reached_elsewhere();
    assert!(log.text().contains("a line another thread reached first"), "the line was dropped: {:?}", log.text());
}

fn pids(out: &str) -> (u32, u32) {
    let v: Value = serde_json::from_str(out).unwrap();
    (v["pid"].as_u64().unwrap() as u32, v["child"].as_u64().unwrap() as u32)
}

#[tokio::test]
async fn a_stdio_server_runs_its_tools_logs_its_stderr_and_ends_with_its_hub() {
    let log = Log::default();
    let _guard = log.install();
    let dir = tempfile::tempdir().unwrap();
    let (hub, registry) = hub(dir.path(), json!({"py": entry(json!({}))}), 20);
    registry.ready().await;
    let status = &hub.statuses()[0];
    assert_eq!(status.state, State::Running, "{status:?}");
    assert_eq!(status.tools, ["mcp__py__echo", "mcp__py__pids", "mcp__py__sleep", "mcp__py__crash", "mcp__py__write"]);
    let ctx = ToolContext::new(dir.path());
    let out = registry.execute("mcp__py__echo", json!({"text": "over stdio"}), &ctx).await;
    assert_eq!(out.joined_text(), "echo: over stdio");
    let (pid, child) = pids(&registry.execute("mcp__py__pids", json!({}), &ctx).await.joined_text());
    assert!(common::process_alive(pid) && common::process_alive(child));
    common::wait_until("the server's stderr in the log", HANG_GUARD, || log.text().contains("test server starting")).await;
    assert!(log.text().contains("server=py"), "{}", log.text());

    // The hub (and the registry holding it) gone, the server and its child are gone.
    drop(registry);
    drop(hub);
    common::wait_until("the server's process group to end", HANG_GUARD, || {
        !common::process_alive(pid) && !common::process_alive(child)
    })
    .await;
}

#[tokio::test]
async fn a_server_that_does_not_start_in_time_fails_with_the_timeout_and_the_prompt_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    // The slow server takes ten minutes to start: ready() ending inside the hang guard is the
    // start-up timeout's doing, however slow the machine. The timeout is the fast server's too:
    // long enough for Python to start on a busy machine (over 1 s was seen beside two busy
    // loops; ~0.3 s quiet).
    let slow = entry(json!({"MCP_TEST_STARTUP_DELAY": "600", "MCP_TEST_MARKER": marker}));
    let (hub, registry) = hub(dir.path(), json!({"slow": slow, "fast": entry(json!({}))}), 15);
    tokio::time::timeout(HANG_GUARD, registry.ready()).await.expect("ready() waited for the server that does not start");
    let statuses = hub.statuses();
    assert_eq!(statuses[0].state, State::Failed);
    assert_eq!(statuses[0].error.as_deref(), Some("did not start within 15 s"));
    assert_eq!(statuses[1].state, State::Running, "the other server started beside it");
    let pid: u32 = std::fs::read_to_string(&marker).unwrap().parse().unwrap();
    common::wait_until("the timed-out server to be killed", HANG_GUARD, || !common::process_alive(pid)).await;
    // Ready once: a later prompt does not wait again (ready at the first poll).
    assert!(registry.ready().now_or_never().is_some(), "a second ready() waited");
}

#[tokio::test]
async fn a_crash_in_the_middle_of_a_call_is_an_error_result_and_the_next_call_starts_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let (hub, registry) = hub(dir.path(), json!({"py": entry(json!({}))}), 20);
    registry.ready().await;
    let ctx = ToolContext::new(dir.path());
    let (first, _) = pids(&registry.execute("mcp__py__pids", json!({}), &ctx).await.joined_text());
    // A call has no time limit of its own: without the crash noticed, it waits forever.
    let out = tokio::time::timeout(HANG_GUARD, registry.execute("mcp__py__crash", json!({}), &ctx))
        .await
        .expect("the pending call still waits for the crashed server");
    assert!(out.is_error);
    assert!(out.joined_text().starts_with("MCP server py: "), "{}", out.joined_text());
    assert_eq!(hub.statuses()[0].state, State::Failed);
    // Its tools stay offered; the next call starts it again.
    let out = registry.execute("mcp__py__pids", json!({}), &ctx).await;
    assert!(!out.is_error, "{}", out.joined_text());
    let (second, _) = pids(&out.joined_text());
    assert_ne!(first, second);
    assert_eq!(hub.statuses()[0].state, State::Running);
}

#[tokio::test]
async fn a_cancelled_call_ends_at_once_and_the_server_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let (_hub, registry) = hub(dir.path(), json!({"py": entry(json!({}))}), 20);
    registry.ready().await;
    let ctx = ToolContext::new(dir.path());
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let out = registry.execute("mcp__py__sleep", json!({"seconds": 4}), &ctx).await;
    let aborted_after = started.elapsed();
    assert!(out.is_error);
    assert_eq!(out.joined_text(), "Operation aborted");
    // The server answers the next call once its sleep is over: that answer is the control, the
    // time the cancelled call would have taken, measured on this machine now.
    let ctx = ToolContext::new(dir.path());
    let out = registry.execute("mcp__py__echo", json!({"text": "still here"}), &ctx).await;
    let slept_after = started.elapsed();
    assert_eq!(out.joined_text(), "echo: still here");
    assert!(aborted_after < slept_after / 2, "the cancelled call ended after {aborted_after:?}, the server's sleep after {slept_after:?}");
}

#[tokio::test]
async fn an_untrusted_project_file_starts_nothing_until_the_user_trusts_it() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("repo");
    std::fs::create_dir(&project).unwrap();
    let marker = dir.path().join("started");
    // Its command line names this test's folder: its process is told from every other test's.
    let mut server = entry(json!({"MCP_TEST_MARKER": marker}));
    server["args"].as_array_mut().unwrap().push(json!(format!("--test-dir={}", dir.path().display())));
    let file = json!({"mcpServers": {"proj": server}});
    std::fs::write(project.join(".mcp.json"), file.to_string()).unwrap();
    let trust = TrustStore::new(dir.path().join("state/trust.json"));
    let load = |trust: &TrustStore| McpConfig::load(&McpSettings::default(), &project, trust);
    let hub = McpHub::new(load(&trust), &project, EnvPolicy::default(), trust.clone());
    hub.ready().await;
    assert_eq!(hub.statuses()[0].state, State::Untrusted);
    assert!(hub.tools().is_empty());
    assert!(hub.start("proj").await.unwrap_err().contains("not trusted"));
    // A started server would be running now (it waits on its stdin), whatever it wrote yet.
    let ours = format!("--test-dir={}", dir.path().display());
    assert!(common::pids_with(&ours).is_empty(), "an untrusted server ran");
    assert!(!marker.exists(), "an untrusted server ran");

    let shown = hub.project().unwrap().digest.clone();
    assert!(hub.trust_project("not what was shown").unwrap_err().contains("changed since it was read"));
    hub.trust_project(&shown).unwrap();
    hub.start("proj").await.unwrap();
    assert!(marker.exists());
    assert_eq!(hub.statuses()[0].state, State::Running);
    // The control: this one is seen as running, and it is the only one that ever started.
    let running = common::pids_with(&ours);
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), running[0].to_string());
    // Remembered: a new session's hub may start it.
    let again = McpHub::new(load(&trust), &project, EnvPolicy::default(), trust.clone());
    assert_eq!(again.statuses()[0].state, State::Idle);
}

/// The file is swapped between the listing the user saw and the trust: nothing is trusted, and
/// neither the servers read nor the swapped file's start.
#[tokio::test]
async fn a_project_file_swapped_after_it_was_shown_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("repo");
    std::fs::create_dir(&project).unwrap();
    let marker = dir.path().join("started");
    let file = json!({"mcpServers": {"proj": entry(json!({"MCP_TEST_MARKER": marker}))}});
    std::fs::write(project.join(".mcp.json"), file.to_string()).unwrap();
    let trust = TrustStore::new(dir.path().join("state/trust.json"));
    let load = |trust: &TrustStore| McpConfig::load(&McpSettings::default(), &project, trust);
    let hub = McpHub::new(load(&trust), &project, EnvPolicy::default(), trust.clone());
    let shown = hub.project().unwrap().clone();
    assert!(shown.listing().iter().any(|l| l.starts_with("  proj: stdio: python3 ")), "{:?}", shown.listing());

    let swapped = dir.path().join("swapped");
    let evil = json!({"mcpServers": {"proj": entry(json!({"MCP_TEST_MARKER": swapped}))}});
    std::fs::write(project.join(".mcp.json"), evil.to_string()).unwrap();
    let refused = hub.trust_project(&shown.digest).unwrap_err();
    assert!(refused.contains("changed since it was read"), "{refused}");
    assert!(hub.start("proj").await.unwrap_err().contains("not trusted"));
    let again = McpHub::new(load(&trust), &project, EnvPolicy::default(), trust.clone());
    assert_eq!(again.statuses()[0].state, State::Untrusted, "the swapped file is not trusted either");
    assert!(!marker.exists() && !swapped.exists(), "a server ran");

    // The control: looked at again (read anew), the same steps trust it and it starts.
    let shown = again.project().unwrap().digest.clone();
    again.trust_project(&shown).unwrap();
    again.start("proj").await.unwrap();
    assert!(swapped.exists());
}

/// A host killed outright (SIGKILL: no exit of its own, nothing of it runs) leaves nothing of
/// its stdio server: the keeper of the host's process groups (`core::process_groups`) kills the
/// server's group when the host's end of its pipe closes. The server would end at the end of its
/// input, but its child sleeps 300 s: gone within the hang guard is the keeper's doing (before
/// it, the child outlived a killed CLI, an ACP agent or an editor's host).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_outright_leaves_nothing_of_its_servers_running() {
    use std::process::Stdio;
    let env = common::BinaryEnv::new().await;
    let config = env.dir.path().join("mcp.json");
    std::fs::write(&config, json!({ "mcpServers": { "py": entry(json!({})) } }).to_string()).unwrap();
    // The model asks the server for its pids, then holds the reply open: the host is mid-reply.
    env.mock.push(common::tool_call_reply("mcp__py__pids", json!({}), "call_pids"));
    env.mock.push(handoff_mock::MockReply::Stall { chunks: vec!["still ".into(), "working".into()] });
    let mut host = env
        .command(&["--yes", "--mcp-config", config.to_str().unwrap(), "prompt", "--new", "which pids?"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let result = std::sync::Mutex::new(String::new());
    common::wait_until("the pids in the session", HANG_GUARD, || {
        let found = common::session_files(&env.session_dir()).iter().flat_map(|f| std::fs::read_to_string(f).ok()).find_map(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|l| l["message"]["role"] == "toolResult")
                .map(|l| l["message"]["content"][0]["text"].as_str().unwrap_or_default().to_string())
        });
        found.map(|text| *result.lock().unwrap() = text).is_some()
    })
    .await;
    let (pid, child) = pids(&result.lock().unwrap());
    assert!(common::process_alive(pid) && common::process_alive(child));
    host.start_kill().unwrap();
    host.wait().await.unwrap();
    common::nvim::wait_gone(pid, "the host was killed").await;
    common::nvim::wait_gone(child, "the host was killed").await;
}
