//! A user's machine in a temp folder for the sandbox's ways-out tests, and one scripted turn
//! through the real CLI against the mock: the model calls bash with each command, then says
//! "done".

use std::path::{Path, PathBuf};
use std::process::Command;

use handoff_mock::{MockReply, MockServer, MockToolCall};
use serde_json::json;

pub const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");

/// The flags that turn the sandbox off: the controls.
pub const OFF: &[&str] = &["--sandbox", "off"];

/// A home with a key in `~/.ssh`, a project (a git repository with one commit), a folder
/// outside both, and the host's `$TMPDIR`.
pub struct Machine {
    _root: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub outside: PathBuf,
    pub tmp: PathBuf,
}

pub const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUtdGhlLXNlY3JldA\n-----END OPENSSH PRIVATE KEY-----\n";

pub fn machine() -> Machine {
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let [home, project, outside, tmp] = ["home", "home/project", "outside", "tmp"].map(|d| root_path.join(d));
    for d in [&home, &project, &outside, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), KEY).unwrap();
    git(&project, &["init", "-q"]);
    std::fs::write(project.join("README.md"), "# project\n").unwrap();
    git(&project, &["add", "README.md"]);
    git(&project, &["commit", "-q", "-m", "first"]);
    Machine { _root: root, home, project, outside, tmp }
}

/// git as the user's editor runs it: outside any sandbox (gitsigns does so all the time).
pub fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("GIT_DIR")
        .output()
        .unwrap()
}

/// One scripted turn through `handoff-nvim prompt --yes`: the model calls bash with each of
/// `commands`, then says "done". Returns the text of each tool result, and the requests' bodies.
/// The CLI's environment is built from nothing: PATH, HOME, TMPDIR and `env`.
pub async fn turn(m: &Machine, commands: &[&str], flags: &[&str], env: &[(&str, &str)]) -> (Vec<String>, String) {
    turn_in(m, &m.project, commands, flags, env).await
}

/// [`turn`] with the session's folder `cwd`.
pub async fn turn_in(m: &Machine, cwd: &Path, commands: &[&str], flags: &[&str], env: &[(&str, &str)]) -> (Vec<String>, String) {
    let calls: Vec<(&str, serde_json::Value)> = commands.iter().map(|c| ("bash", json!({ "command": c }))).collect();
    turn_calls(m, cwd, &calls, flags, env).await
}

/// One scripted turn whose model calls each `(tool, arguments)` of `calls` (see [`turn`]).
pub async fn turn_calls(m: &Machine, cwd: &Path, calls: &[(&str, serde_json::Value)], flags: &[&str], env: &[(&str, &str)]) -> (Vec<String>, String) {
    turn_wrapped(m, cwd, &[], calls, flags, env).await
}

/// [`turn_calls`] with the CLI started by `wrapper` (a program and its arguments; the CLI's
/// command line follows them), which puts it in a pseudo-terminal, gives it a keyring or a
/// descriptor, as the user's own session would; the wrapper exits with the CLI's status.
pub async fn turn_wrapped(
    m: &Machine,
    cwd: &Path,
    wrapper: &[&std::ffi::OsStr],
    calls: &[(&str, serde_json::Value)],
    flags: &[&str],
    env: &[(&str, &str)],
) -> (Vec<String>, String) {
    turn_through(Path::new(BIN), wrapper, m, cwd, calls, flags, env).await
}

/// [`turn_calls`] through the host binary `bin` (a copy of [`BIN`] elsewhere, as a build in
/// the project's `target/` would be).
pub async fn turn_of(bin: &Path, m: &Machine, cwd: &Path, calls: &[(&str, serde_json::Value)], flags: &[&str], env: &[(&str, &str)]) -> (Vec<String>, String) {
    turn_through(bin, &[], m, cwd, calls, flags, env).await
}

/// `bin prompt --yes --new "do it"` in `cwd` (started by `wrapper`, if any) against `mock`,
/// its sessions in `m.tmp/sessions`, with an environment built from nothing: PATH, HOME,
/// TMPDIR, a key, then `env`.
pub fn prompt_command(
    bin: &Path,
    wrapper: &[&std::ffi::OsStr],
    m: &Machine,
    cwd: &Path,
    mock: &MockServer,
    flags: &[&str],
    env: &[(&str, &str)],
) -> tokio::process::Command {
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args).arg(bin);
            cmd
        }
        None => tokio::process::Command::new(bin),
    };
    cmd.args(["prompt", "--yes", "--new", "--max-retries", "0", "--base-url", &mock.openai_base_url(), "--session-dir"])
        .arg(m.tmp.join("sessions"))
        .arg("--cwd")
        .arg(cwd)
        .args(flags)
        .arg("do it")
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &m.home)
        .env("TMPDIR", &m.tmp)
        .env("OPENAI_API_KEY", "sk-test");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

async fn turn_through(
    bin: &Path,
    wrapper: &[&std::ffi::OsStr],
    m: &Machine,
    cwd: &Path,
    calls: &[(&str, serde_json::Value)],
    flags: &[&str],
    env: &[(&str, &str)],
) -> (Vec<String>, String) {
    let mock = MockServer::start().await.unwrap();
    let calls: Vec<MockToolCall> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, args))| MockToolCall::new(tool, args, 2).with_id(&format!("call_{i}")))
        .collect();
    mock.push(super::tool_calls_reply(calls));
    mock.push(MockReply::text("done"));
    let sessions = m.tmp.join("sessions");
    let out = prompt_command(bin, wrapper, m, cwd, &mock, flags, env).output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let file = super::session_files(&sessions).pop().expect("a session file");
    let results = super::entry_lines(&file)
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| {
            let blocks = e["message"]["content"].as_array().cloned().unwrap_or_default();
            blocks.iter().filter_map(|b| b["text"].as_str().map(String::from)).collect::<Vec<_>>().join("\n")
        })
        .collect();
    let bodies = mock.requests().iter().map(|r| r.body.to_string()).collect::<Vec<_>>().join("\n");
    std::fs::remove_dir_all(&sessions).unwrap();
    (results, bodies)
}

/// Whether the whole sandbox, mount namespace included, holds here; if not, says the test is
/// skipped (or fails, when CI requires the sandbox).
pub fn enforced(test: &str) -> bool {
    use handoff_nvim::core::sandbox::{mount_namespaces, Support};
    match (Support::probe().enforceable(), mount_namespaces()) {
        (Ok(()), Ok(())) => true,
        (Err(why), _) => super::sandbox::skipped(test, &why),
        (_, Err(why)) => super::sandbox::skipped(test, &format!("no mount namespace for sandboxed commands: {why}")),
    }
}

/// A script at `path` that touches `marker` when run (a planted hook or fsmonitor).
pub fn marker_script(marker: &Path) -> String {
    format!("#!/bin/sh\ntouch {}\n", marker.display())
}

/// `program` found on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|d| d.join(program)).find(|p| p.is_file())
}

/// A [`machine`] for `test`, and `program` (python3, gcc: what the test speaks through) found on
/// `PATH`, where the whole sandbox holds ([`enforced`]) and the program is there ([`needs`]);
/// else `None`: the test is skipped (or fails, when CI requires it).
pub fn machine_with(test: &str, program: &str) -> Option<(Machine, PathBuf)> {
    if !enforced(test) {
        return None;
    }
    let found = needs(test, program)?;
    Some((machine(), found))
}

/// A program `test` speaks through (python3, gcc); without it the test is skipped, or fails
/// when CI requires every sandbox test to run (CI has them).
pub fn needs(test: &str, program: &str) -> Option<PathBuf> {
    let found = which(program);
    if found.is_none() {
        assert!(!super::sandbox::required(), "{test}: {program} is needed");
        eprintln!("SKIPPED {test}: no {program}");
    }
    found
}
