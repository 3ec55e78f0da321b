//! Issue 42, part 2: our ACP *client* (`crates/agents`), driving a real external agent — our own
//! `handoff-nvim acp`, a second process of the built binary whose model is the loopback mock —
//! from the CLI: the prompt streams and is recorded in our session file (pi's format, provider
//! `acp`), the agent's permission requests go through our consent, its writes land through our
//! `fs/*`, its terminals run in our sandbox, its sessions hand off to the same agent and to
//! ours, pi resumes what we recorded, and an agent that does not exit on EOF is ended with its
//! process group.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use common::{entry_lines, BinaryEnv as Env, DOCUMENT};
use handoff_mock::{MockReply, MockToolCall};
use handoff_nvim::agents::{self, Services};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::consent::{self, Decision, Policy};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
const T: Duration = Duration::from_secs(60);

/// The external agent: our binary's ACP agent, keeping its own sessions apart from ours.
fn inner_agent(env: &Env) -> String {
    format!("env HANDOFF_SESSION_DIR={} {BIN} acp", env.dir.path().join("inner").display())
}

/// Our CLI with `args`: (exit code, stdout, stderr).
async fn ours(env: &Env, args: &[&str]) -> (i32, String, String) {
    let mut c = env.command(args);
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = tokio::time::timeout(T, c.output()).await.expect("our CLI hung").unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// The session file a `prompt` named first on stderr.
fn session_of(stderr: &str) -> PathBuf {
    PathBuf::from(stderr.lines().find(|l| l.ends_with(".jsonl")).unwrap_or_else(|| panic!("no session on stderr: {stderr}")))
}

fn messages(file: &Path) -> Vec<Value> {
    entry_lines(file).into_iter().filter(|e| e["type"] == "message").map(|e| e["message"].clone()).collect()
}

/// The text of the last user message the mock was sent.
fn last_user_text(env: &Env) -> String {
    let request = env.mock.requests().last().cloned().unwrap();
    let messages = request.body["messages"].as_array().unwrap().clone();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &user["content"] {
        Value::String(s) => s.clone(),
        other => other.as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_streams_from_the_agent_and_is_recorded_in_pi_format() {
    let env = Env::new().await;
    env.mock.push(MockReply::text("Hello from the agent."));
    let agent = inner_agent(&env);
    let (code, stdout, stderr) = ours(&env, &["prompt", "--agent", &agent, "Say hello"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Hello from the agent.");
    assert!(last_user_text(&env).contains("Say hello"));
    let file = session_of(&stderr);
    let recorded = messages(&file);
    assert_eq!(recorded.len(), 2, "{recorded:#?}");
    assert_eq!(recorded[0]["role"], "user");
    assert_eq!(recorded[0]["content"][0]["text"], "Say hello");
    assert_eq!(recorded[1]["role"], "assistant");
    assert_eq!(recorded[1]["provider"], "acp");
    assert_eq!(recorded[1]["model"], "handoff-nvim");
    assert_eq!(recorded[1]["content"][0]["text"], "Hello from the agent.");
    // Our reader takes the file, and the agent it runs on is recorded with its session id.
    let session = SessionManager::open(&file, &env.session_dir()).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    let entry = agents::agent_of(&session).unwrap();
    assert!(entry.session_id.is_some());

    // The session goes on on the same agent session (loaded there) without --agent.
    env.mock.push(MockReply::text("Still here."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--session", file.to_str().unwrap(), "Again"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Still here.");
    // The agent had the conversation: it loaded its own session (our record is not resent).
    let sent = env.mock.requests().last().cloned().unwrap();
    let texts: Vec<String> = common::wire_messages(&sent).into_iter().map(|(_, t)| t).collect();
    assert!(texts.iter().any(|t| t.contains("Say hello")), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("conversation-so-far")), "{texts:?}");
    assert_eq!(messages(&file).len(), 4);
}

/// The agent's `write` asks us: without `--yes` (no terminal to ask on) our consent refuses and
/// nothing is written; with `--yes` the file lands, written through our `fs/write_text_file`,
/// and the call and its result are in our record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_asks_through_our_consent_and_the_write_lands() {
    let env = Env::new().await;
    let agent = inner_agent(&env);
    let target = env.project().join("a.txt");

    env.mock.push(common::tool_call_reply("write", json!({ "path": "a.txt", "content": "one\n" }), "w1"));
    env.mock.push(MockReply::text("Refused, fine."));
    let (code, _, stderr) = ours(&env, &["prompt", "--agent", &agent, "write a"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!target.exists(), "written although our consent refused");
    let refused = messages(&session_of(&stderr));
    let result = refused.iter().find(|m| m["role"] == "toolResult").unwrap_or_else(|| panic!("{refused:#?}"));
    assert_eq!(result["isError"], true, "{result}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("rejected"), "{result}");
    // The title our agent gives a write (`acp::updates::title`: the tool and its summary).
    assert!(stderr.contains("Write a.txt"), "the call was not shown: {stderr}");

    env.mock.push(common::tool_call_reply("write", json!({ "path": "a.txt", "content": "one\n" }), "w2"));
    env.mock.push(MockReply::text("Wrote a."));
    let (code, stdout, stderr) = ours(&env, &["--yes", "prompt", "--agent", &agent, "write a"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Wrote a."));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "one\n");
    let recorded = messages(&session_of(&stderr));
    let call = recorded.iter().find(|m| m["role"] == "assistant" && m["stopReason"] == "toolUse").unwrap_or_else(|| panic!("{recorded:#?}"));
    assert_eq!(call["content"].as_array().unwrap().last().unwrap()["name"], "write");
    let result = recorded.iter().find(|m| m["role"] == "toolResult").unwrap();
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(recorded.last().unwrap()["content"][0]["text"], "Wrote a.");
}

fn services(cwd: &Path, sandbox: &str, decision: Decision) -> Arc<Services> {
    let settings: handoff_nvim::core::config::Settings = serde_json::from_value(json!({ "sandbox": sandbox })).unwrap();
    Arc::new(Services {
        cwd: cwd.to_path_buf(),
        policy: Policy::default(),
        grants: Default::default(),
        consent: Arc::new(consent::Always(decision)),
        files: Arc::new(handoff_nvim::core::tools::DiskFileAccess),
        env: handoff_nvim::core::tools::EnvPolicy::new(&Default::default()),
        sandbox: settings.sandbox(),
        terminals: Default::default(),
        edit_originals: Default::default(),
    })
}

/// `terminal/create` … `terminal/output` as an agent asks them: the command, asked about
/// through our consent, runs in our sandbox (it cannot write outside the project); the control
/// with the sandbox off writes there; a command the user refuses never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_command_runs_in_our_sandbox_through_our_consent() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let outside = dir.path().join("outside.txt");
    let command = format!("echo inside > in.txt; echo escaped > {}", outside.display());

    async fn run(services: &Services, command: &str) -> Result<Value, (i32, String)> {
        let created = agents::serve(services, "terminal/create", &json!({ "sessionId": "s", "command": "sh", "args": ["-c", command] })).await?;
        let id = created["terminalId"].clone();
        let exit = agents::serve(services, "terminal/wait_for_exit", &json!({ "sessionId": "s", "terminalId": id })).await?;
        let output = agents::serve(services, "terminal/output", &json!({ "sessionId": "s", "terminalId": id })).await?;
        agents::serve(services, "terminal/release", &json!({ "sessionId": "s", "terminalId": id })).await?;
        Ok(json!({ "exit": exit, "output": output }))
    }

    // Refused: nothing runs.
    let refused = run(&services(&project, "workspace-write", Decision::Reject { reason: Some("no".into()) }), &command).await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(!project.join("in.txt").exists());

    // Sandboxed: the project is written, outside it is not.
    let ran = run(&services(&project, "workspace-write", Decision::Allow), &command).await.unwrap();
    assert!(project.join("in.txt").exists(), "{ran}");
    assert!(!outside.exists(), "the sandboxed terminal wrote outside the project: {ran}");
    assert_ne!(ran["exit"]["exitCode"], 0, "{ran}");

    // Control: the same command with the sandbox off does reach outside.
    let ran = run(&services(&project, "off", Decision::Allow), &command).await.unwrap();
    assert!(outside.exists(), "the control did not write outside: {ran}");
    assert_eq!(ran["exit"]["exitCode"], 0, "{ran}");
}

/// A way out through `fs/*`, as an injected agent would try it: its own Read and Write tools go
/// through our `fs/read_text_file` and `fs/write_text_file`, after asking us or not (an adapter
/// in an "accept edits" mode does not). What they reach is checked as our own tools' calls are
/// (`sandbox::protected`): a credential to read, a file outside the project or code git runs to
/// write, each asked about whatever the policy — refused here, where the user says no; a file
/// of the project is written unasked. The controls: the user's yes lets the same writes land,
/// and with the sandbox off only consent applies, as for our own tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_an_agent_reaches_through_us_are_guarded_as_our_tools_are() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
    let outside = dir.path().join("outside.txt");
    let hook = project.join(".git/hooks/pre-commit");
    let key = PathBuf::from(std::env::var("HOME").unwrap()).join(".ssh/id_ed25519");
    let write = |path: &Path| json!({ "sessionId": "s", "path": path, "content": "planted\n" });

    let no = services(&project, "workspace-write", Decision::Reject { reason: None });
    for path in [&outside, &hook] {
        let refused = agents::serve(&no, "fs/write_text_file", &write(path)).await;
        assert!(refused.is_err(), "{}: {refused:?}", path.display());
        assert!(!path.exists(), "{} was written", path.display());
    }
    let read = agents::serve(&no, "fs/read_text_file", &json!({ "sessionId": "s", "path": key })).await;
    assert!(read.is_err(), "a credential was read unasked: {read:?}");
    agents::serve(&no, "fs/write_text_file", &write(&project.join("a.txt"))).await.unwrap();
    assert_eq!(std::fs::read_to_string(project.join("a.txt")).unwrap(), "planted\n");

    let yes = services(&project, "workspace-write", Decision::Allow);
    agents::serve(&yes, "fs/write_text_file", &write(&hook)).await.unwrap();
    assert!(hook.exists(), "the user's yes did not let the write land");
    let off = services(&project, "off", Decision::Reject { reason: None });
    agents::serve(&off, "fs/write_text_file", &write(&outside)).await.unwrap();
    assert!(outside.exists(), "with the sandbox off only consent applies");
}

/// A way out through `terminal/create`'s `cwd`, as an injected agent would try it: the sandbox's
/// writable folder is the command's folder, so a `cwd` the agent names outside the project
/// (the user's home here) would make that folder writable, and the approval, which shows only
/// the command line, would not say where `> .bashrc` lands. The terminal runs only in the
/// project; the control, the same command in the project, writes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_folder_outside_the_project_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::symlink(&home, project.join("up")).unwrap();
    let create = |cwd: &Path| json!({ "sessionId": "s", "command": "sh", "args": ["-c", "echo planted >> .bashrc"], "cwd": cwd });
    for mode in ["workspace-write", "off"] {
        let services = services(&project, mode, Decision::Allow);
        // Named outright, through `..`, or through a link planted in the project.
        for cwd in [home.clone(), project.join("../home"), project.join("up")] {
            let refused = agents::serve(&services, "terminal/create", &create(&cwd)).await;
            assert!(refused.as_ref().is_err_and(|(_, m)| m.contains("outside the project")), "{mode} {}: {refused:?}", cwd.display());
        }
        // Control: in the project the same command runs and writes.
        let created = agents::serve(&services, "terminal/create", &create(&project)).await.unwrap();
        let exit = agents::serve(&services, "terminal/wait_for_exit", &json!({ "sessionId": "s", "terminalId": created["terminalId"] })).await.unwrap();
        assert_eq!(exit["exitCode"], 0, "{mode}: {exit}");
    }
    assert!(!home.join(".bashrc").exists(), "the agent's command wrote in a folder outside the project");
    assert_eq!(std::fs::read_to_string(project.join(".bashrc")).unwrap(), "planted\nplanted\n");
}

/// `handoff FILE` on the agent's session: the agent writes the document with our instruction,
/// the new session starts on the same agent with the document first; `--to ours` starts one
/// on our own engine, whose first request carries the document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_goes_on_on_the_same_agent_and_on_ours_with_the_document() {
    let env = Env::new().await;
    let agent = inner_agent(&env);
    env.mock.push(MockReply::text("Sure, planning the parser."));
    let (code, _, stderr) = ours(&env, &["prompt", "--agent", &agent, "Plan the parser"]).await;
    assert_eq!(code, 0, "{stderr}");
    let old = session_of(&stderr);

    env.mock.push(MockReply::text(DOCUMENT));
    let (code, stdout, stderr) = ours(&env, &["handoff", old.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(last_user_text(&env).contains("handoff document"), "our instruction was not sent: {}", last_user_text(&env));
    let same = PathBuf::from(stdout.trim());
    let session = SessionManager::open(&same, &env.session_dir()).unwrap();
    assert_eq!(session.header().parent_session.as_deref(), Some(old.to_str().unwrap()));
    let entry = agents::agent_of(&session).unwrap();
    assert_eq!(entry.agent.name, "handoff-nvim");
    assert_eq!(entry.session_id, None);

    env.mock.push(MockReply::text("Continuing."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--session", same.to_str().unwrap(), "go on"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Continuing.");
    let sent = last_user_text(&env);
    assert!(sent.contains("<handoff-context>") && sent.contains("Ship the parser.") && sent.contains("go on"), "{sent}");

    // To ours: our engine's first request starts with the document.
    env.mock.push(MockReply::text(DOCUMENT));
    let (code, stdout, stderr) = ours(&env, &["handoff", old.to_str().unwrap(), "--to", "ours"]).await;
    assert_eq!(code, 0, "{stderr}");
    let to_ours = PathBuf::from(stdout.trim());
    assert!(agents::agent_of(&SessionManager::open(&to_ours, &env.session_dir()).unwrap()).is_none());
    env.mock.push(MockReply::text("Ours continues."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--session", to_ours.to_str().unwrap(), "go on"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Ours continues.");
    let sent = common::wire_messages(&env.mock.requests().last().cloned().unwrap());
    let users: Vec<&(String, String)> = sent.iter().filter(|(role, _)| role == "user").collect();
    assert!(users[0].1.starts_with("<handoff-context>\n## Goal\nShip the parser."), "{sent:?}");
    assert_eq!(users.last().unwrap().1, "go on");

    // From ours to an agent, the way the editor's `:Handoff --to` goes: a name that is no
    // agent is said before any document is asked for; the agent's new session is sent the
    // document first.
    let asked = env.mock.requests().len();
    let (code, _, stderr) = ours(&env, &["handoff", to_ours.to_str().unwrap(), "--to", "nobody-here"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no agent named \"nobody-here\""), "{stderr}");
    assert_eq!(env.mock.requests().len(), asked, "no document was asked for");
    env.mock.push(MockReply::text(DOCUMENT));
    let (code, stdout, stderr) = ours(&env, &["handoff", to_ours.to_str().unwrap(), "--to", &agent]).await;
    assert_eq!(code, 0, "{stderr}");
    let to_agent = PathBuf::from(stdout.trim());
    let entry = agents::agent_of(&SessionManager::open(&to_agent, &env.session_dir()).unwrap()).unwrap();
    assert_eq!((entry.agent.name.as_str(), entry.session_id), ("handoff-nvim", None));
    env.mock.push(MockReply::text("The agent continues."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--session", to_agent.to_str().unwrap(), "and on"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "The agent continues.");
    let sent = last_user_text(&env);
    assert!(sent.contains("<handoff-context>") && sent.contains("Ship the parser.") && sent.ends_with("and on"), "{sent}");
}

/// `/handoff --to NAME` typed in a prompt, as `:Handoff --to` and `handoff --to`: the command
/// table reads `--to` (anywhere in the words) for our sessions and an agent's alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_typed_with_to_goes_on_where_it_names() {
    let env = Env::new().await;
    // A configured agent (a typed name is one word): our binary's ACP agent.
    let inner = env.dir.path().join("inner").display().to_string();
    let agents = serde_json::json!({ "inner": { "command": [BIN, "acp"], "env": { "HANDOFF_SESSION_DIR": inner } } }).to_string();
    let ours = |env, args: &[&str]| {
        let mut all = vec!["--agents", agents.as_str()];
        all.extend_from_slice(args);
        let all: Vec<String> = all.into_iter().map(str::to_string).collect();
        async move { ours(env, &all.iter().map(String::as_str).collect::<Vec<_>>()).await }
    };
    let agent = "inner";
    env.mock.push(MockReply::text("Ours first."));
    let (code, _, stderr) = ours(&env, &["prompt", "--new", "Plan the parser"]).await;
    assert_eq!(code, 0, "{stderr}");
    let mine = session_of(&stderr);

    // Ours → the agent, typed: the focus without `--to NAME`.
    env.mock.push(MockReply::text(DOCUMENT));
    let typed = format!("/handoff keep it short --to {agent}");
    let (code, _, stderr) = ours(&env, &["prompt", "--session", mine.to_str().unwrap(), &typed]).await;
    assert_eq!(code, 0, "{stderr}");
    let asked = last_user_text(&env);
    assert!(asked.contains("keep it short") && !asked.contains("--to"), "the focus sent: {asked}");
    let on_agent = common::session_files(&env.session_dir()).into_iter().find(|f| {
        SessionManager::open(f, &env.session_dir()).is_ok_and(|s| s.header().parent_session.as_deref() == Some(mine.to_str().unwrap()))
    });
    let on_agent = on_agent.expect("a new session handed off from ours");
    let entry = agents::agent_of(&SessionManager::open(&on_agent, &env.session_dir()).unwrap()).expect("it runs on the agent");
    assert_eq!(entry.agent.name, "inner");

    // The agent's session → ours, typed; `--to` without a name is refused before anything.
    env.mock.push(MockReply::text("The agent answers."));
    let (code, _, stderr) = ours(&env, &["prompt", "--session", on_agent.to_str().unwrap(), "and on"]).await;
    assert_eq!(code, 0, "{stderr}");
    let asked = env.mock.requests().len();
    let (code, _, stderr) = ours(&env, &["prompt", "--session", on_agent.to_str().unwrap(), "/handoff --to"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--to needs an agent's name"), "{stderr}");
    assert_eq!(env.mock.requests().len(), asked, "nothing was asked");
    env.mock.push(MockReply::text(DOCUMENT));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--session", on_agent.to_str().unwrap(), "/handoff --to ours"]).await;
    assert_eq!(code, 0, "{stderr}");
    let back_to_ours = PathBuf::from(stdout.trim());
    assert!(agents::agent_of(&SessionManager::open(&back_to_ours, &env.session_dir()).unwrap()).is_none(), "{stdout}");
}

/// pi resumes the session we recorded of the agent: the mock sees our record's messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_the_recorded_session_of_an_external_agent() {
    let Some(pi) = common::pi::pi_bin() else { return };
    let env = Env::new().await;
    common::pi::pi_home(env.dir.path(), "openai-completions", &env.mock.openai_base_url());
    let agent = inner_agent(&env);
    env.mock.push(MockReply::text("The answer is four."));
    let (code, _, stderr) = ours(&env, &["prompt", "--agent", &agent, "What is 2+2?"]).await;
    assert_eq!(code, 0, "{stderr}");
    let file = session_of(&stderr);

    env.mock.push(MockReply::text("Pi continues here."));
    let mut c = common::pi::pi_resume(&pi, env.dir.path(), &file, "mock", "mock-model", "next question");
    let out = tokio::time::timeout(T, c.output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Pi continues here."), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let sent = common::wire_messages(&env.mock.requests().last().cloned().unwrap());
    let sent: Vec<(&str, &str)> = sent.iter().map(|(r, t)| (r.as_str(), t.as_str())).collect();
    assert_eq!(sent, [("user", "What is 2+2?"), ("assistant", "The answer is four."), ("user", "next question")]);
}

fn alive(pid: i32) -> bool {
    // A zombie is not alive: its processes ended.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

async fn pid_in(file: &Path) -> i32 {
    for _ in 0..600 {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} was never written", file.display());
}

/// Waits (a hang guard, not a clock) until `gone` holds.
async fn until(what: &str, mut gone: impl FnMut() -> bool) {
    common::wait_until(what, T, &mut gone).await;
}

/// An agent that does not exit when its input ends (it leaves a `sleep` behind) is ended with
/// its process group when our CLI is done. Control: the same command, started beside it with
/// its input closed but not by us, is still running after ours is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_does_not_exit_on_eof_is_ended_with_its_process_group() {
    let env = Env::new().await;
    let pidfile = env.dir.path().join("sleep.pid");
    let stubborn = |pidfile: &Path| format!("sh -c '{}; sleep 600 & echo $! > {}; wait'", inner_agent(&env), pidfile.display());

    let control = env.dir.path().join("control.pid");
    let mut c = tokio::process::Command::new("/bin/sh");
    c.args(["-c", &stubborn(&control)]).current_dir(env.project()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
    let child = c.spawn().unwrap();
    let control_pid = pid_in(&control).await;

    env.mock.push(MockReply::text("Hi."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--agent", &stubborn(&pidfile), "hi"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Hi.");
    let pid = pid_in(&pidfile).await;
    until("the agent's process group to end", || !alive(pid)).await;
    assert!(alive(control_pid), "the control's sleep ended too: closed input alone ends it, the test proves nothing");
    // SAFETY: ends the control's own process group.
    unsafe { libc::kill(-(child.id().unwrap() as i32), libc::SIGKILL) };
}

/// A name of the `agents` setting (given as JSON on the command line) is started by name;
/// `agents` says what each is, and a missing command is an error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_agents_by_name_and_a_missing_one_named() {
    let env = Env::new().await;
    let inner = env.dir.path().join("inner");
    let config = json!({
        "mine": { "command": [BIN, "acp"], "env": { "HANDOFF_SESSION_DIR": inner } },
        "gone": { "command": ["no-such-agent-binary", "--acp"] },
    })
    .to_string();
    env.mock.push(MockReply::text("By name."));
    let (code, stdout, stderr) = ours(&env, &["--agents", &config, "prompt", "--agent", "mine", "hi"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "By name.");
    assert_eq!(messages(&session_of(&stderr))[1]["model"], "mine");

    let (code, stdout, _) = ours(&env, &["--agents", &config, "agents"]).await;
    assert_eq!(code, 1, "{stdout}");
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mine = lines.iter().find(|l| l["name"] == "mine").unwrap();
    assert_eq!(mine["found"], true);
    assert_eq!(mine["agent"], "handoff-nvim");
    assert_eq!(mine["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(mine["protocol"], 1);
    let gone = lines.iter().find(|l| l["name"] == "gone").unwrap();
    assert_eq!(gone["found"], false);
    assert!(gone["error"].as_str().unwrap().contains("no-such-agent-binary"), "{gone}");

    let (code, _, stderr) = ours(&env, &["--agents", &config, "prompt", "--agent", "gone", "hi"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("no-such-agent-binary"), "{stderr}");
}

/// `agents --no-start` says which agents are found, and where, without starting any
/// (`:checkhealth handoff` asks it first); a missing one is an error naming its command. The
/// control: `agents` without it starts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_no_start_finds_each_agent_without_starting_it() {
    let env = Env::new().await;
    let marker = env.dir.path().join("started");
    let config = json!({
        "marks": { "command": ["/bin/sh", "-c", format!("touch {}; exec {BIN} acp", marker.display())] },
        "gone": { "command": ["no-such-agent-binary", "--acp"] },
    })
    .to_string();
    let (code, stdout, stderr) = ours(&env, &["--agents", &config, "agents", "--no-start"]).await;
    assert_eq!(code, 1, "a missing agent fails the command: {stdout}{stderr}");
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let marks = lines.iter().find(|l| l["name"] == "marks").unwrap();
    assert_eq!((&marks["found"], &marks["program"]), (&json!(true), &json!("/bin/sh")), "{marks}");
    assert!(marks.get("version").is_none() && marks.get("error").is_none(), "not asked: {marks}");
    let gone = lines.iter().find(|l| l["name"] == "gone").unwrap();
    assert_eq!(gone["found"], false);
    assert!(gone["error"].as_str().unwrap().contains("\"no-such-agent-binary\""), "{gone}");
    assert!(!marker.exists(), "--no-start started the agent");

    let (_, stdout, _) = ours(&env, &["--agents", &config, "agents"]).await;
    assert!(marker.exists(), "the control: `agents` starts it\n{stdout}");
    assert!(stdout.contains(&format!("\"version\":\"{}\"", env!("CARGO_PKG_VERSION"))), "{stdout}");
}

/// `:checkhealth handoff` lists each configured agent: ours started and asked (its name,
/// version, protocol), a missing command an error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkhealth_lists_each_configured_agent() {
    common::nvim::bounded(async {
        let agents = json!({
            "mine": { "command": [BIN, "acp"] },
            "gone": { "command": ["no-such-agent-binary", "--acp"] },
        });
        let ed = common::nvim::Editor::start_with_setup(json!({ "agents": agents })).await;
        ed.command("checkhealth handoff").await;
        let health = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
        let health = health.as_str().unwrap();
        let version = env!("CARGO_PKG_VERSION");
        assert!(health.contains(&format!("mine: handoff-nvim {version}, ACP protocol 1, loads sessions")), "{health}");
        assert!(health.contains("gone: the command \"no-such-agent-binary\" of agent \"gone\" is not found"), "{health}");
        ed.quit().await;
    })
    .await;
}

/// `:checkhealth handoff` only reports (issue 40, conform.nvim's way): it starts no host and says
/// none runs; an agent that never answers `initialize` is reported within the check's bound and
/// ended with its process group; a missing one is named by its command as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkhealth_starts_nothing_and_ends_an_agent_that_never_answers() {
    common::nvim::bounded(async {
        const MUTE: [&str; 2] = ["sleep", "987654"];
        let agents = json!({
            "mute": { "command": ["/bin/sh", "-c", "exec sleep 987654"] },
            "gone": { "command": ["no-such-agent-binary", "--acp"] },
        });
        let ed = common::nvim::Editor::start_with_setup(json!({ "agents": agents })).await;
        ed.lua("require('handoff.health').agents_wait_ms = 2000", json!([])).await;
        let t0 = std::time::Instant::now();
        ed.command("checkhealth handoff").await;
        let took = t0.elapsed();
        let health = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
        let health = health.as_str().unwrap();
        assert_eq!(ed.eval("require('handoff').status().running").await, json!(false), "checkhealth started the host:\n{health}");
        assert!(health.contains("not running: it starts on first use"), "{health}");
        assert!(health.contains("mute: found at /"), "{health}");
        assert!(health.contains(": /bin/sh -c exec sleep 987654; no answer to `initialize` within 2 s (ended)"), "{health}");
        assert!(health.contains("gone: the command \"no-such-agent-binary\" of agent \"gone\" is not found"), "{health}");
        assert!(took < Duration::from_secs(15), "the check took {took:?}");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !common::processes_running(&MUTE).is_empty() {
            assert!(std::time::Instant::now() < deadline, "the agent outlived the check: {:?}", common::processes_running(&MUTE));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Once the host runs, the check reports it (and what it reports).
        ed.lua("require('handoff.host').ensure()", json!([])).await;
        ed.wait_until("require('handoff').status().session_file ~= nil", T).await;
        ed.command("bwipeout!").await;
        ed.command("checkhealth handoff").await;
        let health = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
        let health = health.as_str().unwrap();
        let running = format!("running: pid {}, version {}, session {}", ed.host_pid().await, env!("CARGO_PKG_VERSION"), ed.session_file().await);
        assert!(health.contains(&running), "{running}\n{health}");
        assert!(health.contains("session dir writable"), "{health}");
        ed.quit().await;
    })
    .await;
}

/// Ctrl-C while the agent streams: `session/cancel` goes to the agent, which ends the turn as
/// cancelled; the CLI exits 130 and the record keeps what came, marked aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_agents_turn_and_the_record_says_aborted() {
    use tokio::io::AsyncReadExt;
    let env = Env::new().await;
    let chunks: Vec<String> = (0..400).map(|i| format!("w{i} ")).collect();
    env.mock.push(MockReply::Text { chunks, chunk_delay_ms: 20, first_delay_ms: 0, stop: "stop".into(), thinking: Vec::new() });
    let agent = inner_agent(&env);
    let mut c = env.command(&["prompt", "--agent", &agent, "talk"]);
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("w3 ") {
        let n = tokio::time::timeout(T, stdout.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "the stream ended before the interrupt");
        seen.extend_from_slice(&buf[..n]);
    }
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGINT) };
    let out = tokio::time::timeout(T, child.wait_with_output()).await.expect("did not stop on Ctrl-C").unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let recorded = messages(&session_of(&stderr));
    let reply = recorded.last().unwrap();
    assert_eq!(reply["stopReason"], "aborted", "{reply}");
    assert!(reply["content"][0]["text"].as_str().unwrap().starts_with("w0 w1 w2 w3 "), "{reply}");
    assert!(!reply["content"][0]["text"].as_str().unwrap().contains("w399"), "the whole reply came: not cancelled");
}

/// The quickfix list as `{ file (relative), line, text }` items.
const QF_ITEMS: &str = "vim.tbl_map(function(i) return { vim.fn.fnamemodify(vim.fn.bufname(i.bufnr), ':.'), i.lnum, i.text } end, vim.fn.getqflist())";

const CODEX_ACP: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/codex-acp/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp");

/// codex-acp's native binary (`$CODEX_ACP_BIN`, else the checkout's cache that
/// `scripts/deps.sh`'s `ensure_codex_acp` fills), or `None` after saying so loudly when
/// `HANDOFF_SKIP_CODEX_ACP=1`; missing otherwise fails.
fn codex_acp() -> Option<PathBuf> {
    let path = std::env::var_os("CODEX_ACP_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(CODEX_ACP));
    if path.is_file() {
        return Some(path);
    }
    if std::env::var("HANDOFF_SKIP_CODEX_ACP").as_deref() == Ok("1") {
        eprintln!("\n!!!!!!!! SKIPPED: codex-acp is not installed at {} !!!!!!!!\n", path.display());
        return None;
    }
    panic!("codex-acp is not installed at {}: run scripts/deps.sh's ensure_codex_acp (or set CODEX_ACP_BIN, or HANDOFF_SKIP_CODEX_ACP=1)", path.display());
}

/// Processes still running `program` with `marker` in their environment.
fn running(program: &Path, marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let exe = std::fs::read_link(entry.path().join("exe")).ok();
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if exe.as_deref() == Some(program) && String::from_utf8_lossy(&environ).contains(marker) && alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// Processes still alive whose environment names `marker` (a folder of the test's own, set
/// in the agent's environment): what an agent left behind.
fn left_running(marker: &Path) -> Vec<i32> {
    let marker = marker.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if String::from_utf8_lossy(&environ).contains(&marker) && alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// pi resumes `file`, our record of a real agent's session (its calls and results in pi's
/// format): the mock gets the recorded conversation, `first` first, then pi's prompt.
async fn pi_resumes(env: &Env, file: &Path, first: &str) {
    let Some(pi) = common::pi::pi_bin() else { return };
    common::pi::pi_home(env.dir.path(), "openai-completions", &env.mock.openai_base_url());
    env.mock.push_for("next question", MockReply::text("Pi continues here."));
    let mut c = common::pi::pi_resume(&pi, env.dir.path(), file, "mock", "mock-model", "next question");
    let out = tokio::time::timeout(T, c.output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Pi continues here."), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let sent = common::wire_messages(&env.mock.requests().last().cloned().unwrap());
    let users: Vec<&str> = sent.iter().filter(|(role, _)| role == "user").map(|(_, t)| t.as_str()).collect();
    assert_eq!((users.first().copied(), users.last().copied()), (Some(first), Some("next question")), "{sent:?}");
}

/// `handoff FILE` without `--to`: the agent writes the document, the next session runs on the
/// same agent, and its first prompt carries the document (`the_words` routes the reply).
async fn handoff_to_the_same_agent(env: &Env, file: &Path, name: &str) {
    env.mock.push_for("handoff document", MockReply::text(DOCUMENT));
    let (code, stdout, stderr) = ours(env, &["handoff", file.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    let same = PathBuf::from(stdout.trim());
    let entry = agents::agent_of(&SessionManager::open(&same, &env.session_dir()).unwrap()).unwrap();
    assert_eq!((entry.agent.name.as_str(), entry.session_id), (name, None));
    env.mock.push_for("go on here", MockReply::text("Same agent continues."));
    let (code, stdout, stderr) = ours(env, &["prompt", "--session", same.to_str().unwrap(), "go on here"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Same agent continues.");
    let sent = env.mock.requests().iter().rev().find(|r| r.body.to_string().contains("go on here")).cloned().unwrap();
    assert!(sent.body.to_string().contains("Ship the parser."), "the document did not reach the agent: {}", sent.body);
}

/// A real agent offline: Codex (`@zed-industries/codex-acp` 0.16.0) with the mock as its model
/// over the Responses API. A prompt streams and is recorded; it does not exit on EOF and is
/// ended with its group; `handoff --to ours` goes on on our engine with its document; `agents`
/// says what it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_acp_offline_prompt_record_and_handoff_to_ours() {
    let Some(codex) = codex_acp() else { return };
    let env = Env::new().await;
    let home = env.dir.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    // Codex's own sandbox needs bubblewrap: off here, every command asks (`untrusted`).
    let config = format!(
        "model = \"gpt-5.4\"\nmodel_provider = \"mock\"\napproval_policy = \"untrusted\"\nsandbox_mode = \"danger-full-access\"\n\n[model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nenv_key = \"MOCK_KEY\"\nwire_api = \"responses\"\n",
        env.mock.openai_base_url()
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    let agent = format!("env CODEX_HOME={} MOCK_KEY=x {}", home.display(), codex.display());

    env.mock.push(MockReply::text("Hello from codex."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--agent", &agent, "Plan the parser"]).await;
    assert_eq!(code, 0, "{stderr}");
    // A model codex knows: no warning of its own before the reply.
    assert_eq!(stdout.trim(), "Hello from codex.");
    let request = env.mock.requests().last().cloned().unwrap();
    assert!(request.path.ends_with("/responses"), "{}", request.path);
    assert!(request.body.to_string().contains("Plan the parser"));
    let file = session_of(&stderr);
    let recorded = messages(&file);
    assert_eq!(recorded.last().unwrap()["model"], "codex-acp");
    assert!(recorded.last().unwrap()["content"][0]["text"].as_str().unwrap().contains("Hello from codex."));
    // It does not exit on EOF (the spec's trap): ended with its group, none left.
    until("codex to end with its group", || running(&codex, &home.display().to_string()).is_empty()).await;

    env.mock.push(MockReply::text(DOCUMENT));
    let (code, stdout, stderr) = ours(&env, &["handoff", file.to_str().unwrap(), "--to", "ours"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(env.mock.requests().last().unwrap().body.to_string().contains("handoff document"));
    let to_ours = PathBuf::from(stdout.trim());
    env.mock.push(MockReply::text("Ours continues."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--session", to_ours.to_str().unwrap(), "go on"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Ours continues.");
    let sent = common::wire_messages(&env.mock.requests().last().cloned().unwrap());
    let first_user = sent.iter().find(|(role, _)| role == "user").unwrap();
    assert!(first_user.1.starts_with("<handoff-context>\n## Goal\nShip the parser."), "{sent:?}");

    pi_resumes(&env, &file, "Plan the parser").await;

    let config = json!({ "codex": { "command": [codex], "env": { "CODEX_HOME": home, "MOCK_KEY": "x" } } }).to_string();
    let (code, stdout, stderr) = ours(&env, &["--agents", &config, "agents"]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let line: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!((line["agent"].as_str(), line["version"].as_str(), line["protocol"].as_u64()), (Some("codex-acp"), Some("0.16.0"), Some(1)));
}

/// Our own `handoff-nvim acp` as an agent of the editor's setup: its model the mock, `more` on
/// its command line, its own sessions in the folder returned.
fn our_agent(ed: &common::nvim::Editor, more: &[&str]) -> (Value, PathBuf) {
    let inner = ed.dir.path().join("inner");
    let mut command = vec![BIN.to_string(), "acp".into(), "--provider".into(), "openai".into(), "--base-url".into(), ed.mock.openai_base_url()];
    command.extend(["--model", "mock-model"].iter().chain(more).map(|s| s.to_string()));
    (json!({ "command": command, "env": { "HANDOFF_SESSION_DIR": inner } }), inner)
}

/// Sets the editor up with `agent` (its `agents` entry) as agent `name`.
async fn set_up_agent(ed: &common::nvim::Editor, name: &str, agent: Value) {
    let setup = json!({ "bin": BIN, "provider": ed.default_setup()["provider"], "agents": { name: agent } });
    ed.lua("require('handoff').setup(...)", json!([setup])).await;
}

/// The editor set up with `agent` as agent `name`, `notes.txt` (holding `text`) open in a buffer,
/// the chat open on a new session of the agent: the file and its buffer.
async fn chat_on_agent(ed: &common::nvim::Editor, name: &str, agent: Value, text: &str) -> (PathBuf, Value) {
    set_up_agent(ed, name, agent).await;
    let file = ed.work_dir().join("notes.txt");
    std::fs::write(&file, text).unwrap();
    ed.command("edit notes.txt").await;
    let buf = ed.eval("vim.api.nvim_get_current_buf()").await;
    ed.lua("require('handoff').open_chat()", json!([])).await;
    ed.command(&format!("HandoffAgent {name}")).await;
    ed.wait_event("HandoffSessionSwitch", 1).await;
    (file, buf)
}

/// `command` (a `:Handoff`) in the editor, from the session `from`: the document is written,
/// the new session (the `counts.0`th switch) runs on agent `name` with no session there yet; a
/// prompt `text` there (the `counts.1`th run's end) goes to the agent after the document.
/// Returns the new session.
async fn handed_off_onto_agent(ed: &common::nvim::Editor, command: &str, counts: (usize, usize), from: &Path, name: &str, text: &str) -> PathBuf {
    ed.mock.push(MockReply::text(DOCUMENT));
    ed.command(command).await;
    ed.wait_event("HandoffSessionSwitch", counts.0).await;
    let next = PathBuf::from(ed.session_file().await);
    assert_ne!(next, from);
    let entry = agents::agent_of(&SessionManager::open(&next, &ed.session_dir).unwrap()).unwrap();
    assert_eq!((entry.agent.name.as_str(), entry.session_id), (name, None));
    ed.mock.push(MockReply::text("Going on."));
    ed.lua("require('handoff').prompt(...)", json!([text])).await;
    ed.wait_event("HandoffAgentEnd", counts.1).await;
    let sent = common::wire_messages(&ed.mock.requests().last().cloned().unwrap());
    let last_user = &sent.iter().rev().find(|(role, _)| role == "user").unwrap().1;
    assert!(last_user.contains("<handoff-context>\n## Goal\nShip the parser.") && last_user.ends_with(text), "{sent:?}");
    next
}

/// `:HandoffAgent NAME` in the editor: a new session on the agent; a prompt from the chat
/// streams its reply into the chat and the session file (provider `acp`); its `write` asks in
/// our approval UI and lands through the open buffer, which `u` undoes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_agent_in_the_editor_chat_approval_and_the_buffer() {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let (agent, inner) = our_agent(&ed, &[]);
        let (file, buf) = chat_on_agent(&ed, "mine", agent, "hello\n").await;
        ed.mock.push(MockReply::text("Hello from the agent in the chat."));
        ed.lua("require('handoff').prompt('hi')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("Hello from the agent in the chat."), "{chat}");
        let session = PathBuf::from(ed.session_file().await);
        let recorded = messages(&session);
        assert_eq!(recorded.last().unwrap()["provider"], "acp");
        assert_eq!(recorded.last().unwrap()["model"], "mine");

        // Its write: asked in our approval UI, written through the buffer.
        ed.mock.push(common::tool_call_reply("write", json!({ "path": "notes.txt", "content": "hello\nthere\n" }), "w1"));
        ed.mock.push(MockReply::text("Wrote it."));
        ed.lua("require('handoff').prompt('write it')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        // The agent's diff, shown as our own edits' previews are: the change, and both texts
        // for the side-by-side view.
        assert_eq!((req["tool"].as_str(), req["path"].as_str()), (Some("write"), file.to_str()), "{req}");
        let diff = req["diff"].as_str().unwrap_or_else(|| panic!("no preview: {req}"));
        assert!(diff.lines().any(|l| l.starts_with('+') && l.ends_with("there")), "{diff}");
        let pending = ed.lua("local r = require('handoff.approvals').pending()[1]; return { r.before, r.after }", json!([])).await;
        assert_eq!(pending, json!(["hello\n", "hello\nthere\n"]));
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 2).await;
        let lines = ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf])).await;
        assert_eq!(lines, json!(["hello", "there"]));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nthere\n");
        // The agent's change is pending hunks of its call, as our own tools' changes are.
        ed.wait_until("#require('handoff').hunks() == 1", T).await;
        let hunk = ed.eval("(function() local h = require('handoff').hunks()[1]; return { h.file, h.lnum, h.state, h.tool } end)()").await;
        assert_eq!(hunk, json!([file.to_str().unwrap(), 2, "pending", "write"]), "{hunk}");
        ed.lua("vim.api.nvim_set_current_buf(...)", json!([buf])).await;
        ed.input("u").await;
        let lines = ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf])).await;
        assert_eq!(lines, json!(["hello"]));

        // Stopping a reply: `session/cancel` to the agent, the turn ends aborted.
        ed.mock.push(common::nvim::endless());
        ed.lua("require('handoff').prompt('talk on')", json!([])).await;
        common::wait_until("the agent's model request", T, || {
            ed.mock.requests().last().is_some_and(|r| r.body.to_string().contains("talk on"))
        })
        .await;
        ed.lua("require('handoff').abort()", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        let last = messages(&session).last().cloned().unwrap();
        assert_eq!(last["stopReason"], "aborted", "{last}");

        // `:Handoff` on the agent's session: the agent writes the document, the new session
        // runs on the same agent with the document first.
        handed_off_onto_agent(&ed, "Handoff", (2, 5), &session, "mine", "go on").await;

        assert!(!left_running(&inner).is_empty(), "control: the agent runs with its folder in its environment");

        // A missing agent is a clear error naming its command.
        ed.lua("require('handoff').setup(vim.tbl_deep_extend('force', require('handoff.config').options, { agents = { gone = { command = { 'no-such-agent-binary' } } } }))", json!([])).await;
        ed.command("HandoffAgent gone").await;
        let said = ed
            .wait_until("(function() for _, n in ipairs(T.notes) do if n.msg:find('no%-such%-agent%-binary') then return n.msg end end end)()", Duration::from_secs(10))
            .await;
        assert!(said.as_str().unwrap().contains("the command \"no-such-agent-binary\" of agent \"gone\" is not found"), "{said}");
        // None of it outlives the editor.
        let _dir = ed.quit().await;
        until("our agent to end with the editor", || left_running(&inner).is_empty()).await;
    })
    .await;
}

/// `:Handoff --to NAME` in the editor: an external agent's session (ours, through `handoff-nvim
/// acp`) handed off `--to ours` goes on on our own model with the document as its first
/// context; that one handed off `--to mine` goes on on the agent, which is sent the document
/// first. A name that is no agent is said, and nothing is handed off. After `--to` the
/// command completes the agents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_to_another_agent_in_the_editor() {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let (agent, _inner) = our_agent(&ed, &[]);
        chat_on_agent(&ed, "mine", agent, "hello\n").await;
        let completed = ed.lua("return { vim.fn.getcompletion('Handoff --to ', 'cmdline'), vim.fn.getcompletion('Handoff the parser --to m', 'cmdline') }", json!([])).await;
        assert_eq!(completed, json!([["mine", "ours"], ["mine"]]));

        ed.mock.push(MockReply::text("Hello from the agent."));
        ed.lua("require('handoff').prompt('hi')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let on_agent = PathBuf::from(ed.session_file().await);
        assert_eq!(messages(&on_agent).last().unwrap()["provider"], "acp");

        // A name that is no agent: said before any document is asked for.
        let asked = ed.mock.requests().len();
        ed.command("Handoff --to nobody-here").await;
        let failed = ed.wait_event("HandoffFailed", 1).await;
        assert!(failed["message"].as_str().unwrap().contains("no agent named \"nobody-here\""), "{failed}");
        assert_eq!((ed.mock.requests().len(), PathBuf::from(ed.session_file().await)), (asked, on_agent.clone()));

        // `--to ours`: the agent writes the document, the new session runs on our model.
        ed.mock.push(MockReply::text(DOCUMENT));
        ed.command("Handoff --to ours").await;
        ed.wait_event("HandoffSessionSwitch", 2).await;
        let on_ours = PathBuf::from(ed.session_file().await);
        assert_ne!(on_ours, on_agent);
        assert_eq!(agents::agent_of(&SessionManager::open(&on_ours, &ed.session_dir).unwrap()), None);
        ed.mock.push(MockReply::text("Going on, on ours."));
        ed.lua("require('handoff').prompt('go on')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        let reply = messages(&on_ours).last().cloned().unwrap();
        assert_eq!((reply["provider"].as_str(), reply["model"].as_str()), (Some("openai"), Some("mock-model")), "{reply}");
        let sent = common::wire_messages(&ed.mock.requests().last().cloned().unwrap());
        assert_eq!(sent.first().map(|(role, _)| role.as_str()), Some("user"), "{sent:?}");
        assert!(sent[0].1.contains("<handoff-context>\n## Goal\nShip the parser."), "the document first: {sent:?}");
        assert!(sent.last().unwrap().1.ends_with("go on"), "{sent:?}");

        // `--to mine` from ours: the new session runs on the agent, sent the document first.
        let back_on_agent = handed_off_onto_agent(&ed, "Handoff --to mine", (3, 5), &on_ours, "mine", "and on").await;
        assert_eq!(messages(&back_on_agent).last().unwrap()["provider"], "acp");
        let _dir = ed.quit().await;
    })
    .await;
}

/// An external agent's tool calls show in the chat as ours do, from the same records
/// (`tool_start`, `tool_end`): the call's line once it runs (after its approval), its result's
/// text, a failed call marked; `HandoffToolStart`/`HandoffToolEnd` fire for each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_agents_tool_calls_show_in_the_chat_as_ours() {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        chat_on_agent(&ed, "mine", our_agent(&ed, &[]).0, "hello\n").await;

        // A command, asked about first: its line after the approval, then its output.
        ed.mock.push(common::tool_call_reply("bash", json!({ "command": "echo from-the-agent" }), "b1"));
        ed.mock.push(MockReply::text("Ran it."));
        ed.lua("require('handoff').prompt('run it')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let started = ed.wait_event("HandoffToolStart", 1).await;
        assert_eq!((started["tool"].as_str(), started["args"]["command"].as_str()), (Some("bash"), Some("echo from-the-agent")), "{started}");
        let ended = ed.wait_event("HandoffToolEnd", 1).await;
        assert_eq!((ended["tool"].as_str(), ended["kind"].as_str(), ended["is_error"].as_bool()), (Some("bash"), Some("execute"), Some(false)), "{ended}");
        let chat: Vec<String> = serde_json::from_value(ed.eval("T.chat()").await).unwrap();
        let call = chat.iter().position(|l| l == "**▸ bash** `echo from-the-agent`").unwrap_or_else(|| panic!("no call line: {chat:#?}"));
        let output = chat.iter().position(|l| l == "from-the-agent").unwrap_or_else(|| panic!("no output: {chat:#?}"));
        let reply = chat.iter().position(|l| l.contains("Ran it.")).unwrap_or_else(|| panic!("no reply: {chat:#?}"));
        assert!(call < output && output < reply, "the call, its output, then the reply: {chat:#?}");
        let approval = chat.iter().position(|l| l.contains("echo from-the-agent")).unwrap();
        assert!(approval < call, "the approval shows before the call runs, and stays: {chat:#?}");

        // A call that fails shows its error.
        ed.mock.push(common::tool_call_reply("read", json!({ "path": "no-such-file.txt" }), "r1"));
        ed.mock.push(MockReply::text("It is not there."));
        ed.lua("require('handoff').prompt('read it')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 2).await;
        let ended = ed.wait_event("HandoffToolEnd", 2).await;
        assert_eq!((ended["tool"].as_str(), ended["is_error"].as_bool()), (Some("read"), Some(true)), "{ended}");
        let chat: Vec<String> = serde_json::from_value(ed.eval("T.chat()").await).unwrap();
        assert!(chat.iter().any(|l| l.starts_with("**▸ read**") && l.contains("no-such-file.txt")), "{chat:#?}");
        assert!(chat.iter().any(|l| l.contains("no-such-file.txt") && !l.starts_with("**▸")), "the error's text: {chat:#?}");
        let _dir = ed.quit().await;
    })
    .await;
}

/// An agent that edits with its own IO (not through our `fs/write_text_file`), as some do: one
/// prompt's turn is an `edit` call on `notes.txt`, written to disk by the agent itself.
const SELF_WRITING_AGENT: &str = r#"
import json, os, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line); name = m.get("method"); id = m.get("id")
    if name == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif name == "session/new":
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
    elif name == "session/prompt":
        sid = m["params"]["sessionId"]; path = os.path.join(os.getcwd(), "notes.txt")
        def update(u):
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}})
        update({"sessionUpdate": "tool_call", "toolCallId": "e1", "title": "Edit notes.txt", "kind": "edit", "status": "pending",
                "locations": [{"path": path}], "rawInput": {"path": path, "old_string": "as it was", "new_string": "edited by the agent"}})
        update({"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "in_progress"})
        with open(path, "w") as f:
            f.write("edited by the agent\n")
        update({"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": "Edited notes.txt"}}]})
        update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Edited."}})
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
    elif id is not None and name:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not here"}})
"#;

/// A file an external agent changed with its own IO is reloaded in its buffer when the call
/// ends, as after a command of ours (the same `checktime`); its call shows in the chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_an_external_agent_edited_itself_is_reloaded_in_its_buffer() {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let script = ed.dir.path().join("self_writing_agent.py");
        std::fs::write(&script, SELF_WRITING_AGENT).unwrap();
        let (file, buf) = chat_on_agent(&ed, "writer", json!({ "command": ["python3", script] }), "as it was\n").await;
        ed.lua("require('handoff').prompt('edit it')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "edited by the agent\n");
        let ended = ed.wait_event("HandoffToolEnd", 1).await;
        assert_eq!((ended["tool"].as_str(), ended["is_error"].as_bool()), (Some("edit"), Some(false)), "{ended}");
        let lines = ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf])).await;
        assert_eq!(lines, json!(["edited by the agent"]), "{}", ed.dump().await);
        assert_eq!(ed.lua("return vim.bo[...].modified", json!([buf])).await, json!(false));
        let chat: Vec<String> = serde_json::from_value(ed.eval("T.chat()").await).unwrap();
        assert!(chat.iter().any(|l| l.starts_with("**▸ edit**")) && chat.iter().any(|l| l == "Edited notes.txt"), "{chat:#?}");
        let _dir = ed.quit().await;
    })
    .await;
}

const CLAUDE_AGENT_ACP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/claude-agent-acp/node_modules/.bin/claude-agent-acp");
const CLAUDE_CODE_ACP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/claude-code-acp/node_modules/.bin/claude-code-acp");

/// An npm agent's binary (`$var`, else `default`, the checkout's cache that `scripts/deps.sh`
/// fills), or `None` after saying so loudly when `HANDOFF_SKIP_<var>=1`; missing otherwise
/// fails.
fn npm_agent(var: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(default));
    if path.is_file() {
        return Some(path);
    }
    if std::env::var(format!("HANDOFF_SKIP_{var}")).as_deref() == Ok("1") {
        eprintln!("\n!!!!!!!! SKIPPED: {} is not installed !!!!!!!!\n", path.display());
        return None;
    }
    panic!("{} is not installed: run scripts/deps.sh (ensure_*), or set {var}, or HANDOFF_SKIP_{var}=1", path.display());
}

/// The command line of Claude Code's adapter `claude` with the mock as its model, offline: no
/// traffic of its own; as root it needs IS_SANDBOX to open a session.
fn claude_command(env: &Env, claude: &Path) -> String {
    let home = env.dir.path().join("claude-home");
    std::fs::create_dir_all(&home).unwrap();
    format!(
        "env HOME={} ANTHROPIC_BASE_URL={} ANTHROPIC_API_KEY=x CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 IS_SANDBOX=1 {}",
        home.display(),
        env.mock.anthropic_base_url(),
        claude.display()
    )
}

/// Claude Code through an ACP adapter (`claude`, named `name`) with the mock as its model over
/// Anthropic's Messages API, offline. A prompt streams and is recorded; its `Write` asks
/// through our consent (refused without `--yes`: no file; with it the file lands); `handoff
/// --to ours` goes on on our engine. Returns the mock's requests' paths of the last write.
/// `through_fs`: its write comes to our `fs/write_text_file` (our log says so), else it is its own.
async fn claude_offline(claude: &Path, name: &str, write_tool: &str, through_fs: bool) -> Env {
    let env = Env::new().await;
    let agent = claude_command(&env, claude);

    // Its side requests (token counts, a small model's "count") take the default reply; each
    // step's reply is routed to the request that carries the step's words.
    env.mock.set_default(MockReply::text("(default)"));
    env.mock.push_for("Plan the parser", MockReply::text("Hello from Claude."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--agent", &agent, "Plan the parser"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Hello from Claude.");
    assert!(env.mock.requests().iter().any(|r| r.path.contains("/v1/messages")));
    let file = session_of(&stderr);
    assert_eq!(messages(&file).last().unwrap()["model"], name);

    let target = env.project().join("c.txt");
    let write = json!({ "file_path": target, "content": "from claude\n" });
    env.mock.push_for("write c", common::tool_call_reply(write_tool, write.clone(), "toolu_w1"));
    env.mock.set_default(MockReply::text("Not written."));
    let (code, _, stderr) = ours(&env, &["prompt", "--agent", &agent, "write c"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!target.exists(), "written although our consent refused: {stderr}");

    env.mock.push_for("write c", common::tool_call_reply(write_tool, write, "toolu_w2"));
    env.mock.set_default(MockReply::text("Written."));
    let log = env.dir.path().join("client.log");
    let (code, stdout, stderr) = ours(&env, &["--log-file", log.to_str().unwrap(), "--yes", "prompt", "--agent", &agent, "write c"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Written."), "{stdout}");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(logged.contains("the agent writes through fs/write_text_file"), through_fs, "{logged}");
    assert!(target.exists(), "not written: {stderr}\n{:#?}", messages(&session_of(&stderr)));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "from claude\n");
    let recorded = messages(&session_of(&stderr));
    assert!(recorded.iter().any(|m| m["role"] == "toolResult" && m["isError"] == false), "{recorded:#?}");
    // The call as recorded: our tool's name and its input, given after the call started.
    let call = recorded.iter().flat_map(|m| m["content"].as_array().cloned().unwrap_or_default()).find(|b| b["type"] == "toolCall").unwrap();
    assert_eq!((call["name"].as_str(), call["arguments"]["content"].as_str()), (Some("write"), Some("from claude\n")), "{call}");

    env.mock.push_for("handoff document", MockReply::text(DOCUMENT));
    let (code, stdout, stderr) = ours(&env, &["handoff", file.to_str().unwrap(), "--to", "ours"]).await;
    assert_eq!(code, 0, "{stderr}");
    env.mock.push_for("go on", MockReply::text("Ours continues."));
    let (code, stdout2, stderr) = ours(&env, &["prompt", "--session", stdout.trim(), "go on"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout2.trim(), "Ours continues.");
    let sent = common::wire_messages(&env.mock.requests().last().cloned().unwrap());
    let first_user = sent.iter().find(|(role, _)| role == "user").unwrap();
    assert!(first_user.1.starts_with("<handoff-context>\n## Goal\nShip the parser."), "{sent:?}");

    handoff_to_the_same_agent(&env, &file, name).await;
    pi_resumes(&env, &file, "Plan the parser").await;
    // It does not exit on EOF: ended with its group, none of it left.
    until("Claude to end with its group", || left_running(&env.dir.path().join("claude-home")).is_empty()).await;
    env
}

/// `@zed-industries/claude-agent-acp` 0.23.1: it writes with its own file IO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_agent_acp_offline_prompt_consent_and_handoff_to_ours() {
    let Some(claude) = npm_agent("CLAUDE_AGENT_ACP_BIN", CLAUDE_AGENT_ACP) else { return };
    claude_offline(&claude, "claude-agent-acp", "Write", false).await;
}

/// `@zed-industries/claude-code-acp` 0.16.2: the same, its file tools through our `fs/*`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_acp_offline_prompt_consent_and_handoff_to_ours() {
    let Some(claude) = npm_agent("CLAUDE_CODE_ACP_BIN", CLAUDE_CODE_ACP) else { return };
    // Its file tools are an MCP server of its own that calls our `fs/*`.
    claude_offline(&claude, "claude-code-acp", "mcp__acp__Write", true).await;
}

const GEMINI_CLI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/gemini-cli/node_modules/.bin/gemini");

/// A real agent offline: Gemini CLI (`@google/gemini-cli` 0.61.0, `--acp`) with the mock as its
/// model over Gemini's own API. A prompt streams and is recorded; its `write_file` asks through
/// our consent (refused without `--yes`: no file) and, allowed, lands through our
/// `fs/write_text_file` (a new file read first: answered empty); `handoff --to ours` goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_offline_prompt_consent_fs_and_handoff_to_ours() {
    let Some(gemini) = npm_agent("GEMINI_CLI_BIN", GEMINI_CLI) else { return };
    let env = Env::new().await;
    let home = env.dir.path().join("gemini-home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    // Folder trust off (else "always" fails), no statistics, no update checks.
    let settings = json!({
        "security": { "folderTrust": { "enabled": false }, "auth": { "selectedType": "gemini-api-key" } },
        "privacy": { "usageStatisticsEnabled": false },
        "general": { "disableAutoUpdate": true, "disableUpdateNag": true },
    });
    std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();
    let agent = format!("env HOME={} GOOGLE_GEMINI_BASE_URL={} GEMINI_API_KEY=x {} --acp", home.display(), env.mock.gemini_base_url(), gemini.display());

    // Its routing call before each prompt (structured output, not streamed) is answered by
    // the mock from its schema; the conversation streams the scripted replies.
    env.mock.set_default(MockReply::text("(default)"));
    env.mock.push(MockReply::text("Hello from Gemini."));
    let (code, stdout, stderr) = ours(&env, &["prompt", "--agent", &agent, "Plan the parser"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Hello from Gemini.");
    assert!(env.mock.requests().iter().any(|r| r.path.contains(":streamGenerateContent")));
    let file = session_of(&stderr);
    assert_eq!(messages(&file).last().unwrap()["model"], "gemini");

    let target = env.project().join("g.txt");
    let write = json!({ "file_path": target, "content": "from gemini\n" });
    env.mock.push(common::tool_call_reply("write_file", write.clone(), "g1"));
    env.mock.push(MockReply::text("Not written."));
    let (code, _, stderr) = ours(&env, &["prompt", "--agent", &agent, "write g"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!target.exists(), "written although our consent refused: {stderr}");

    env.mock.push(common::tool_call_reply("write_file", write, "g2"));
    env.mock.push(MockReply::text("Written."));
    let log = env.dir.path().join("client.log");
    let (code, stdout, stderr) = ours(&env, &["--log-file", log.to_str().unwrap(), "--yes", "prompt", "--agent", &agent, "write g"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Written."), "{stdout}");
    assert_eq!(std::fs::read_to_string(&target).unwrap_or_default(), "from gemini\n", "{stderr}\n{:#?}", messages(&session_of(&stderr)));
    assert!(std::fs::read_to_string(&log).unwrap().contains("the agent writes through fs/write_text_file"));

    env.mock.push(MockReply::text(DOCUMENT));
    let (code, stdout, stderr) = ours(&env, &["handoff", file.to_str().unwrap(), "--to", "ours"]).await;
    assert_eq!(code, 0, "{stderr}");
    env.mock.push(MockReply::text("Ours continues."));
    let (code, stdout2, stderr) = ours(&env, &["prompt", "--session", stdout.trim(), "go on"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout2.trim(), "Ours continues.");
    let sent = common::wire_messages(&env.mock.requests().last().cloned().unwrap());
    let first_user = sent.iter().find(|(role, _)| role == "user").unwrap();
    assert!(first_user.1.starts_with("<handoff-context>\n## Goal\nShip the parser."), "{sent:?}");

    handoff_to_the_same_agent(&env, &file, "gemini").await;
    pi_resumes(&env, &file, "Plan the parser").await;
    until("Gemini to end with its group", || left_running(&home).is_empty()).await;
}

/// The meter after a stopped reply: the count of the last reply that reported one stands (a
/// reply cut off reports none; its zeros are no measure). Ours, and an external agent's, whose
/// `usage_update` (used, its own window) is recorded on its reply. Was 0 after a stop on ours,
/// and always 0 on an external agent (its usage was not recorded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_meter_keeps_its_count_after_a_stop_on_ours_and_on_an_external_agent() {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        set_up_agent(&ed, "mine", our_agent(&ed, &["--context-window", "54321"]).0).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        let meter = || async { let s = ed.status().await; (s["context_tokens"].as_u64().unwrap(), s["context_window"].as_u64().unwrap()) };
        let stop = |ends: usize, said: &'static str| {
            let ed = &ed;
            async move {
                ed.mock.push(common::nvim::endless());
                ed.lua("require('handoff').prompt(...)", json!([said])).await;
                common::wait_until("the model request", T, || ed.mock.requests().last().is_some_and(|r| r.body.to_string().contains(said))).await;
                ed.lua("require('handoff').abort()", json!([])).await;
                ed.wait_event("HandoffAgentEnd", ends).await;
            }
        };

        // Ours.
        ed.converse("first question", "one two three").await;
        let (used, window) = meter().await;
        assert!(used > 0, "{used}");
        stop(2, "talk on").await;
        assert_eq!(meter().await, (used, window), "ours: the meter after a stop");

        // An external agent: its own count and window.
        ed.command("HandoffAgent mine").await;
        ed.wait_event("HandoffSessionSwitch", 1).await;
        ed.mock.push(MockReply::text("Hello from the agent."));
        ed.lua("require('handoff').prompt('hi')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        let (used, window) = meter().await;
        assert!(used > 0, "the agent's usage_update was not recorded");
        assert_eq!(window, 54321, "the agent's window");
        stop(4, "talk more").await;
        assert_eq!(meter().await, (used, window), "external: the meter after a stop");
        ed.quit().await;
    })
    .await;
}

/// Codex's home for a test: the mock as its model over the Responses API (see
/// `codex_acp_offline_prompt_record_and_handoff_to_ours`).
fn codex_home(dir: &Path, mock: &handoff_mock::MockServer) -> PathBuf {
    let home = dir.join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    let config = format!(
        "model = \"gpt-5.4\"\nmodel_provider = \"mock\"\napproval_policy = \"untrusted\"\nsandbox_mode = \"danger-full-access\"\n\n[model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nenv_key = \"MOCK_KEY\"\nwire_api = \"responses\"\n",
        mock.openai_base_url()
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    home
}

/// Codex in the editor: a prompt streams into the chat and the session file; the commands it
/// advertises (`available_commands_update`) are completed in our prompt beside ours, and one
/// typed goes to it as the prompt's text; its model, offered as a config option, is set by
/// `:HandoffAgentModel` (the next request asks for it); its `exec_command` asks in our approval
/// UI before it runs (Codex runs it itself, not in a terminal of ours); `:Handoff` goes on on
/// Codex with the document first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_acp_in_the_editor_commands_model_and_handoff() {
    let Some(codex) = codex_acp() else { return };
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let home = codex_home(ed.dir.path(), &ed.mock);
        let agents = json!({ "codex": { "command": [codex], "env": { "CODEX_HOME": home, "MOCK_KEY": "x" } } });
        let setup = json!({ "bin": BIN, "provider": ed.default_setup()["provider"], "agents": agents });
        ed.lua("require('handoff').setup(...)", json!([setup])).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.command("HandoffAgent codex").await;
        ed.wait_event("HandoffSessionSwitch", 1).await;
        // Before its first prompt the agent does not run: nothing offered.
        assert_eq!(ed.lua("return require('handoff.commands').agent_commands()", json!([])).await, json!([]));

        ed.mock.push(MockReply::text("Hello from codex in the chat."));
        ed.lua("require('handoff').prompt('Plan the parser')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("Hello from codex in the chat."), "{chat}");
        let session = PathBuf::from(ed.session_file().await);
        let recorded = messages(&session);
        assert_eq!((recorded.last().unwrap()["provider"].as_str(), recorded.last().unwrap()["model"].as_str()), (Some("acp"), Some("codex")));
        assert_eq!(ed.mock.requests().last().unwrap().body["model"], "gpt-5.4");

        // Its commands in our completion, after ours; the agent's are marked.
        // It sends them when it has them (after its session starts, not with it).
        ed.wait_until("#require('handoff.commands').agent_commands() > 0", Duration::from_secs(30)).await;
        let items = ed.lua("return require('handoff.commands').omnifunc(0, '/rev')", json!([])).await;
        let words: Vec<&str> = items.as_array().unwrap().iter().map(|i| i["word"].as_str().unwrap()).collect();
        assert_eq!(words, ["/review", "/review-branch", "/review-commit"], "{items}");
        assert_eq!(items[1]["menu"], "[agent] branch name", "{items}");
        let ours = ed.lua("return require('handoff.commands').omnifunc(0, '/')", json!([])).await;
        let ours: Vec<&str> = ours.as_array().unwrap().iter().map(|i| i["word"].as_str().unwrap()).collect();
        assert_eq!(&ours[..2], ["/handoff", "/pin"], "ours first: {ours:?}");
        assert!(ours.contains(&"/compact"), "{ours:?}");

        // Its model: offered as a config option, set, and the next request asks for it.
        let offers = ed.lua("return require('handoff.host').request('agent_offers')", json!([])).await;
        assert_eq!(offers["model"]["current"], "gpt-5.4", "{offers}");
        ed.command("HandoffAgentModel gpt-5.5").await;
        let offers = ed.lua("return require('handoff.host').request('agent_offers')", json!([])).await;
        assert_eq!(offers["model"]["current"], "gpt-5.5", "{offers}");
        assert!(offers.get("mode").is_none(), "codex offers no mode here: {offers}");
        ed.mock.push(MockReply::text("On the new model."));
        ed.lua("require('handoff').prompt('again')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 2).await;
        assert_eq!(ed.mock.requests().last().unwrap().body["model"], "gpt-5.5");
        // A model it does not offer is refused, naming those it does.
        ed.command("HandoffAgentModel no-such-model").await;
        let said = ed.wait_until("T.noted('no-such-model')", Duration::from_secs(10)).await;
        assert!(said["msg"].as_str().unwrap().contains("gpt-5.4-mini"), "{said}");

        // Its command (`approval_policy = "untrusted"`): asked in our approval UI, then run.
        ed.mock.push(common::tool_call_reply("exec_command", json!({ "cmd": "echo made > made.txt" }), "call_x1"));
        ed.mock.push(MockReply::text("Ran it."));
        ed.lua("require('handoff').prompt('run it')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        assert!(req.to_string().contains("echo made > made.txt"), "{req}");
        assert!(!ed.work_dir().join("made.txt").exists(), "ran before it was allowed");
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        assert_eq!(std::fs::read_to_string(ed.work_dir().join("made.txt")).unwrap_or_default(), "made\n");

        // `:Handoff`: Codex writes the document; the next session runs on Codex with it first.
        ed.mock.push(MockReply::text(DOCUMENT));
        ed.command("Handoff").await;
        ed.wait_event("HandoffSessionSwitch", 2).await;
        let next = PathBuf::from(ed.session_file().await);
        assert_ne!(next, session);
        let entry = agents::agent_of(&SessionManager::open(&next, &ed.session_dir).unwrap()).unwrap();
        assert_eq!(entry.agent.name, "codex");
        ed.mock.push(MockReply::text("Going on in codex."));
        ed.lua("require('handoff').prompt('go on')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 5).await;
        let sent = ed.mock.requests().last().unwrap().body.to_string();
        assert!(sent.contains("Ship the parser.") && sent.contains("go on"), "{sent}");
        // It does not exit on EOF: none of it outlives the editor.
        assert!(!left_running(&home).is_empty(), "control: the agent runs with its folder in its environment");
        let _dir = ed.quit().await;
        until("codex to end with the editor", || left_running(&home).is_empty()).await;
    })
    .await;
}

/// Codex edits with `apply_patch`, a free-form tool (its request offers it as `custom`, a lark
/// grammar): the mock's model sends the patch as a `custom_tool_call`. Codex asks in our
/// approval UI (`approval_policy = "untrusted"`), then applies the patch with its own file IO:
/// codex-acp 0.16.0 serves no `fs/*` (our log never says it wrote through us). So the file
/// changes on disk, the open buffer is reloaded when the call ends (unmodified), and `u` there
/// undoes the reload (Neovim keeps the text before a reload for undo, 'undoreload'): the buffer
/// shows the old text, modified, the disk keeps codex's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_acp_in_the_editor_apply_patch_reloads_the_buffer_and_u_undoes_it() {
    let Some(codex) = codex_acp() else { return };
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let home = codex_home(ed.dir.path(), &ed.mock);
        let agent = json!({ "command": [codex], "env": { "CODEX_HOME": home, "MOCK_KEY": "x" } });
        let (file, buf) = chat_on_agent(&ed, "codex", agent, "hello-5531\n").await;
        let patch = "*** Begin Patch\n*** Update File: notes.txt\n@@\n hello-5531\n+there\n*** End Patch\n";
        let call = MockToolCall::free_form("apply_patch", patch, 3).with_id("call_p1");
        ed.mock.push(MockReply::ToolCalls { calls: vec![call], text_before: Vec::new(), chunk_delay_ms: 0, stop: "tool_calls".into(), interleave: false });
        ed.mock.push(MockReply::text("Patched it."));
        ed.lua("require('handoff').prompt('patch it')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        let offered = &ed.mock.requests()[0].body["tools"];
        let apply_patch = offered.as_array().unwrap().iter().find(|t| t["name"] == "apply_patch").unwrap();
        assert_eq!((apply_patch["type"].as_str(), apply_patch["format"]["type"].as_str()), (Some("custom"), Some("grammar")), "{apply_patch}");
        assert_eq!((req["tool"].as_str(), req["path"].as_str()), (Some("edit"), file.to_str()), "{req}");
        assert!(req["args"].to_string().contains("+there"), "the approval shows the change: {req}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello-5531\n", "written before it was allowed");
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let sent = ed.mock.requests().last().unwrap().body["input"].to_string();
        assert!(sent.contains("custom_tool_call_output") && sent.contains("Success. Updated the following files"), "{sent}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello-5531\nthere\n");
        let ended = ed.wait_event("HandoffToolEnd", 1).await;
        assert_eq!((ended["tool"].as_str(), ended["is_error"].as_bool()), (Some("edit"), Some(false)), "{ended}");
        let log = std::fs::read_to_string(ed.dir.path().join("state/nvim/handoff.log")).unwrap();
        assert!(log.contains("host started") && !log.contains("the agent writes through fs/write_text_file"), "{log}");

        // The buffer was reloaded; `u` undoes the reload in the buffer, not on disk.
        let lines = || ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf]));
        let modified = || ed.lua("return vim.bo[...].modified", json!([buf]));
        assert_eq!(lines().await, json!(["hello-5531", "there"]), "{}", ed.dump().await);
        assert_eq!(modified().await, json!(false));
        // Its change is the session's, as ours are: taken when it asked, kept when it ended.
        ed.command("HandoffChanges").await;
        assert_eq!(ed.eval(QF_ITEMS).await, json!([["notes.txt", 2, "(added) there"]]));
        ed.command("cclose").await;
        ed.lua("vim.api.nvim_set_current_buf(...)", json!([buf])).await;
        ed.input("u").await;
        assert_eq!(lines().await, json!(["hello-5531"]));
        assert_eq!(modified().await, json!(true));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello-5531\nthere\n");
        assert!(!left_running(&home).is_empty(), "control: the agent runs with its folder in its environment");
        let _dir = ed.quit().await;
        until("codex to end with the editor", || left_running(&home).is_empty()).await;
    })
    .await;
}

/// Gemini CLI in the editor: a prompt streams into the chat; its `write_file` asks in our
/// approval UI and lands through the open buffer (its `fs/*` are the editor's), which `u`
/// undoes; its modes and models (offered as `modes`/`models`) are set by `:HandoffAgentMode`
/// (`session/set_mode`: in `yolo` it writes without asking) and `:HandoffAgentModel`
/// (`session/set_model`: the next request goes to that model).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_in_the_editor_approval_buffer_undo_mode_and_model() {
    let Some(gemini) = npm_agent("GEMINI_CLI_BIN", GEMINI_CLI) else { return };
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let home = ed.dir.path().join("gemini-home");
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        let settings = json!({
            "security": { "folderTrust": { "enabled": false }, "auth": { "selectedType": "gemini-api-key" } },
            "privacy": { "usageStatisticsEnabled": false },
            "general": { "disableAutoUpdate": true, "disableUpdateNag": true },
        });
        std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();
        let env = json!({ "HOME": home, "GOOGLE_GEMINI_BASE_URL": ed.mock.gemini_base_url(), "GEMINI_API_KEY": "x" });
        let (file, buf) = chat_on_agent(&ed, "gem", json!({ "command": [gemini, "--acp"], "env": env }), "hello\n").await;

        // Its modes and models are offered as its session starts, before any prompt (read
        // from `session/new`'s answer), and a mode can be set then.
        let offered = "(function() local o = require('handoff.host').request('agent_offers'); if type(o) == 'table' and o.mode then return o end end)()";
        let offers = ed.wait_until(offered, T).await;
        assert_eq!((offers["mode"]["current"].as_str(), offers["model"]["current"].as_str()), (Some("default"), Some("auto")), "{offers}");
        assert!(offers["mode"]["available"].as_array().unwrap().iter().any(|m| m["id"] == "yolo"), "{offers}");
        assert!(ed.mock.requests().is_empty(), "no prompt was sent: {:?}", ed.mock.requests().len());
        ed.command("HandoffAgentMode autoEdit").await;
        let offers = ed.lua("return require('handoff.host').request('agent_offers')", json!([])).await;
        assert_eq!(offers["mode"]["current"], "autoEdit", "{offers}");
        ed.command("HandoffAgentMode default").await;

        ed.mock.set_default(MockReply::text("(default)"));
        ed.mock.push(MockReply::text("Hello from Gemini in the chat."));
        ed.lua("require('handoff').prompt('hi')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("Hello from Gemini in the chat."), "{chat}");
        assert_eq!(messages(&PathBuf::from(ed.session_file().await)).last().unwrap()["model"], "gem");

        // Its write: asked in our approval UI, written through the buffer, undone with `u`.
        ed.mock.push(common::tool_call_reply("write_file", json!({ "file_path": file, "content": "hello\nthere\n" }), "g1"));
        ed.mock.push(MockReply::text("Wrote it."));
        ed.lua("require('handoff').prompt('write it')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 2).await;
        let lines = || ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf]));
        assert_eq!(lines().await, json!(["hello", "there"]));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nthere\n");
        // Its write through us is the session's change, as ours are: one, though the file was
        // taken twice (when it asked, and at our write).
        ed.command("HandoffChanges").await;
        assert_eq!(ed.eval(QF_ITEMS).await, json!([["notes.txt", 2, "(added) there"]]));
        ed.command("cclose").await;
        let changes = ed.lua("return require('handoff.host').request('changes')", json!([])).await;
        assert_eq!(changes["files"][0]["changes"], 1, "{changes}");
        ed.lua("vim.api.nvim_set_current_buf(...)", json!([buf])).await;
        ed.input("u").await;
        assert_eq!(lines().await, json!(["hello"]));

        // Its modes: `yolo` approves its own tools; nothing is asked, the file is written.
        let offers = ed.lua("return require('handoff.host').request('agent_offers')", json!([])).await;
        assert_eq!((offers["mode"]["current"].as_str(), offers["model"]["current"].as_str()), (Some("default"), Some("auto")), "{offers}");
        ed.command("HandoffAgentMode yolo").await;
        let offers = ed.lua("return require('handoff.host').request('agent_offers')", json!([])).await;
        assert_eq!(offers["mode"]["current"], "yolo", "{offers}");
        let other = ed.work_dir().join("other.txt");
        ed.mock.push(common::tool_call_reply("write_file", json!({ "file_path": other, "content": "unasked\n" }), "g2"));
        ed.mock.push(MockReply::text("Wrote the other."));
        ed.lua("require('handoff').prompt('write the other')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        assert_eq!(std::fs::read_to_string(&other).unwrap_or_default(), "unasked\n");
        assert_eq!(ed.eval("T.count('HandoffToolApproval')").await, json!(1), "asked in yolo mode");

        // Its model: the next request goes to it.
        ed.command("HandoffAgentModel gemini-2.5-pro").await;
        ed.mock.push(MockReply::text("From the pro model."));
        ed.lua("require('handoff').prompt('and now')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 4).await;
        let paths: Vec<String> = ed.mock.requests().iter().map(|r| r.path.clone()).collect();
        assert!(paths.last().unwrap().contains("gemini-2.5-pro:streamGenerateContent"), "{paths:#?}");
        assert!(!left_running(&home).is_empty(), "control: the agent runs with its folder in its environment");
        let _dir = ed.quit().await;
        until("Gemini to end with the editor", || left_running(&home).is_empty()).await;
    })
    .await;
}

/// claude-code-acp runs its Bash in a terminal of ours (`mcp__acp__Bash` → `terminal/create`):
/// the command runs in our sandbox, writing in the project and not outside it. Control: with
/// `--sandbox off` the same command writes outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_acp_runs_its_bash_in_our_sandbox() {
    if !common::sandbox::enforced("claude_code_acp_runs_its_bash_in_our_sandbox") {
        return;
    }
    let Some(claude) = npm_agent("CLAUDE_CODE_ACP_BIN", CLAUDE_CODE_ACP) else { return };
    let env = Env::new().await;
    let agent = claude_command(&env, &claude);
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let command = format!("echo inside > in.txt; echo escaped > {}/out.txt", outside.display());
    let bash = json!({ "command": command, "timeout": 60000, "description": "write two files" });
    for (sandbox, escaped) in [("workspace-write", false), ("off", true)] {
        env.mock.set_default(MockReply::text("Ran it."));
        env.mock.push_for("run it", common::tool_call_reply("mcp__acp__Bash", bash.clone(), &format!("toolu_{sandbox}")));
        let log = env.dir.path().join(format!("{sandbox}.log"));
        let (code, stdout, stderr) =
            ours(&env, &["--log-file", log.to_str().unwrap(), "--yes", "prompt", "--sandbox", sandbox, "--agent", &agent, "run it"]).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("Ran it."), "{stdout}");
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(env.project().join("in.txt").exists(), "{sandbox}: the command did not run in our terminal: {stderr}\n{logged}\n{:#?}", messages(&session_of(&stderr)));
        assert_eq!(outside.join("out.txt").exists(), escaped, "{sandbox}: {stderr}\n{:#?}", messages(&session_of(&stderr)));
        std::fs::remove_file(env.project().join("in.txt")).unwrap();
    }
}

/// Claude Code's adapter `claude` (named `name`, writing with `write_tool`) in the editor: a
/// prompt streams into the chat; its write asks in our approval UI. `through_fs`: the write
/// comes through our `fs/write_text_file`, so the open buffer has it and `u` undoes it; else
/// (its own file IO) the file changes on disk behind the buffer. Its modes (a config option)
/// are set by `:HandoffAgentMode`: in `acceptEdits` it writes without asking.
async fn claude_in_the_editor(claude: &Path, write_tool: &str, through_fs: bool) {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let home = ed.dir.path().join("claude-home");
        std::fs::create_dir_all(&home).unwrap();
        let env = json!({
            "HOME": home, "ANTHROPIC_BASE_URL": ed.mock.anthropic_base_url(), "ANTHROPIC_API_KEY": "x",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "IS_SANDBOX": "1",
        });
        let (file, buf) = chat_on_agent(&ed, "claude", json!({ "command": [claude], "env": env }), "hello-7731\n").await;

        ed.mock.set_default(MockReply::text("(default)"));
        ed.mock.push_for("Plan the parser", MockReply::text("Hello from Claude in the chat."));
        ed.lua("require('handoff').prompt('Plan the parser')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("Hello from Claude in the chat."), "{chat}");

        // Its write, asked in our approval UI. Through our `fs/*`: into the open buffer, and
        // `u` undoes it. With its own IO: a new file (its Write would first read an existing one).
        let target = if through_fs { file.clone() } else { ed.work_dir().join("new.txt") };
        let write = common::tool_call_reply(write_tool, json!({ "file_path": target, "content": "hello-7731\nthere\n" }), "toolu_e1");
        ed.mock.push_for("write it", write);
        ed.mock.set_default(MockReply::text("Wrote it."));
        ed.lua("require('handoff').prompt('write it')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 2).await;
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello-7731\nthere\n");
        // Through us or with its own IO, the write is pending hunks of its call.
        ed.wait_until("#require('handoff').hunks() == 1", T).await;
        let hunk = ed.eval("(function() local h = require('handoff').hunks()[1]; return { h.file, h.state, h.tool } end)()").await;
        assert_eq!(hunk, json!([target.to_str().unwrap(), "pending", "write"]), "{hunk}");
        if through_fs {
            let lines = || ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf]));
            assert_eq!(lines().await, json!(["hello-7731", "there"]));
            ed.lua("vim.api.nvim_set_current_buf(...)", json!([buf])).await;
            ed.input("u").await;
            assert_eq!(lines().await, json!(["hello-7731"]));
        }

        // Its modes: `acceptEdits` writes without asking.
        let offers = ed.lua("return require('handoff.host').request('agent_offers')", json!([])).await;
        assert_eq!(offers["mode"]["current"], "default", "{offers}");
        ed.command("HandoffAgentMode acceptEdits").await;
        let other = ed.work_dir().join("other.txt");
        ed.mock.push_for("write the other", common::tool_call_reply(write_tool, json!({ "file_path": other, "content": "unasked\n" }), "toolu_e2"));
        ed.lua("require('handoff').prompt('write the other')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        assert_eq!(std::fs::read_to_string(&other).unwrap_or_default(), "unasked\n");
        assert_eq!(ed.eval("T.count('HandoffToolApproval')").await, json!(1), "asked in acceptEdits mode");
        // It does not exit on EOF: none of it outlives the editor.
        assert!(!left_running(&home).is_empty(), "control: the agent runs with its folder in its environment");
        let _dir = ed.quit().await;
        until("Claude to end with the editor", || left_running(&home).is_empty()).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_agent_acp_in_the_editor_chat_approval_and_mode() {
    let Some(claude) = npm_agent("CLAUDE_AGENT_ACP_BIN", CLAUDE_AGENT_ACP) else { return };
    claude_in_the_editor(&claude, "Write", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_acp_in_the_editor_chat_approval_buffer_undo_and_mode() {
    let Some(claude) = npm_agent("CLAUDE_CODE_ACP_BIN", CLAUDE_CODE_ACP) else { return };
    claude_in_the_editor(&claude, "mcp__acp__Write", true).await;
}

/// Codex with OpenAI's own provider (the mock at its `openai_base_url`) and no login answers
/// `session/new` with "authentication required": we sign it in with the way it offers that
/// reads a key from its environment (`openai-api-key`, `OPENAI_API_KEY` set), and the prompt
/// goes on. Without the key, the error names its ways to sign in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_acp_asks_to_sign_in_and_a_key_of_its_environment_does() {
    let Some(codex) = codex_acp() else { return };
    let env = Env::new().await;
    // A CODEX_HOME of its own for each run: a sign-in is kept there.
    let agents = |run: &str, key: Option<&str>| {
        let home = env.dir.path().join(run);
        std::fs::create_dir_all(&home).unwrap();
        let config = format!("model = \"gpt-5.4\"\nopenai_base_url = \"{}\"\n", env.mock.openai_base_url());
        std::fs::write(home.join("config.toml"), config).unwrap();
        let mut vars = json!({ "CODEX_HOME": home });
        if let Some(key) = key {
            vars["OPENAI_API_KEY"] = json!(key);
        }
        json!({ "codex": { "command": [codex], "env": vars } }).to_string()
    };

    // Routed by the prompt's words: its WebSocket attempt (no body) is not the request.
    env.mock.push_for("sign me in", MockReply::text("Signed in and answering."));
    let (code, stdout, stderr) = ours(&env, &["--agents", &agents("with-key", Some("x")), "prompt", "--agent", "codex", "sign me in"]).await;
    assert_eq!(code, 0, "{stderr}");
    // Its own notice may come first (its WebSocket transport falls back to HTTPS here).
    assert!(stdout.trim().ends_with("Signed in and answering."), "{stdout}");

    let (code, _, stderr) = ours(&env, &["--agents", &agents("without", None), "prompt", "--agent", "codex", "hi"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("asks to sign in") && stderr.contains("Login with ChatGPT") && stderr.contains("OPENAI_API_KEY"), "{stderr}");
}
