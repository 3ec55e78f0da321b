//! The headless CLI (issue 2 "Headless CLI", issue 3 "Headless"): the built binary run against the
//! in-process mock model server. Exit codes: 0 ok, 1 failure (one clear line), 2 usage,
//! 3 refused, 130 interrupted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{copy_fixture, entry_lines, lines, DOCUMENT};
use handoff_mock::MockReply;
use serde_json::Value;
use tokio::process::Command;

const T: Duration = Duration::from_secs(10);

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| !l.trim().is_empty()).collect()
    }
}

/// The binary against the mock (`common::BinaryEnv`), each run's output collected.
struct Env(common::BinaryEnv);

impl std::ops::Deref for Env {
    type Target = common::BinaryEnv;
    fn deref(&self) -> &common::BinaryEnv {
        &self.0
    }
}

impl Env {
    async fn new() -> Env {
        Env(common::BinaryEnv::new().await)
    }

    /// The binary with a clean environment pointing at the mock, its output collected.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.0.command(args);
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    async fn run(&self, args: &[&str]) -> Run {
        let out = tokio::time::timeout(T, self.command(args).output()).await.expect("CLI hung").unwrap();
        Run {
            code: out.status.code(),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    /// Runs `args`, interrupts it with SIGINT once `printed` is on its stdout (the reply is
    /// streaming), and collects it.
    async fn run_interrupted(&self, args: &[&str], printed: &str) -> Run {
        use tokio::io::AsyncReadExt;
        let mut child = self.command(args).spawn().unwrap();
        let stdout = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let reader = {
            let (mut pipe, stdout) = (child.stdout.take().unwrap(), stdout.clone());
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut buf).await {
                    stdout.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        common::wait_until(&format!("{printed:?} on stdout"), T, || {
            String::from_utf8_lossy(&stdout.lock().unwrap()).contains(printed)
        })
        .await;
        let pid = child.id().unwrap().to_string();
        let status = std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(status.success());
        let out = tokio::time::timeout(T, child.wait_with_output()).await.expect("did not stop on SIGINT").unwrap();
        reader.await.unwrap();
        let stdout = std::mem::take(&mut *stdout.lock().unwrap());
        Run {
            code: out.status.code(),
            stdout: String::from_utf8(stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    /// A session with one exchange, made by the CLI itself; returns its path.
    async fn session_with_one_exchange(&self) -> PathBuf {
        self.mock.push(MockReply::text("First answer."));
        let r = self.run(&["prompt", "--new", "First question"]).await;
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        PathBuf::from(r.stderr_lines()[0])
    }
}

fn messages(path: &Path) -> Vec<(String, String)> {
    entry_lines(path)
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| {
            let m: handoff_nvim::core::message::Message = serde_json::from_value(e["message"].clone()).unwrap();
            (e["message"]["role"].as_str().unwrap().to_string(), m.text())
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// prompt

#[tokio::test]
async fn prompt_streams_the_reply_to_stdout_and_the_session_path_to_stderr_exit_0() {
    let env = Env::new().await;
    env.mock.push(MockReply::text("Hello from the mock server."));
    let r = env.run(&["prompt", "--new", "Say", "hello"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "Hello from the mock server.\n");
    let stderr = r.stderr_lines();
    assert_eq!(stderr.len(), 1, "{stderr:?}");
    let path = PathBuf::from(stderr[0]);
    assert!(path.is_file(), "{path:?}");
    let project = std::fs::canonicalize(env.project()).unwrap();
    let folder = handoff_nvim::core::session::paths::cwd_folder_name(&project);
    assert_eq!(path.parent().unwrap(), env.session_dir().join(folder));
    // A fresh session: model and thinking level, then the exchange.
    let entries = entry_lines(&path);
    let kinds: Vec<&str> = entries.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change", "message", "message"]);
    assert_eq!(entries[0]["modelId"], "mock-model");
    assert_eq!(
        messages(&path),
        [("user".to_string(), "Say hello".to_string()), ("assistant".to_string(), "Hello from the mock server.".to_string())]
    );
    assert_eq!(common::wire_messages(&env.mock.requests()[0]), [("user".to_string(), "Say hello".to_string())]);
}

#[tokio::test]
async fn thinking_starts_a_new_session_at_its_level_and_switches_a_continued_one() {
    let env = Env::new().await;
    env.mock.push(MockReply::text("One."));
    let r = env.run(&["--provider", "anthropic", "--thinking", "medium", "prompt", "--new", "first"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let path = PathBuf::from(r.stderr_lines()[0]);
    assert_eq!(env.mock.requests()[0].body["thinking"], serde_json::json!({ "type": "enabled", "budget_tokens": 8192 }));
    // Continued with another level: the change is recorded as pi records it, and used.
    env.mock.push(MockReply::text("Two."));
    let r = env.run(&["--provider", "anthropic", "--thinking", "high", "prompt", "--session", path.to_str().unwrap(), "second"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env.mock.requests()[1].body["thinking"]["budget_tokens"], 16384);
    // Without the flag (HANDOFF_THINKING unset): the session's own level.
    env.mock.push(MockReply::text("Three."));
    let r = env.run(&["--provider", "anthropic", "prompt", "--session", path.to_str().unwrap(), "third"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env.mock.requests()[2].body["thinking"]["budget_tokens"], 16384);
    let levels: Vec<Value> = entry_lines(&path)
        .into_iter()
        .filter(|e| e["type"] == "thinking_level_change")
        .map(|e| e["thinkingLevel"].clone())
        .collect();
    assert_eq!(levels, [Value::from("medium"), Value::from("high")]);
    // OpenAI-compatible: reasoning_effort only when the server is said to take it.
    env.mock.push(MockReply::text("Four."));
    env.mock.push(MockReply::text("Five."));
    assert_eq!(env.run(&["--thinking", "low", "prompt", "--new", "x"]).await.code, Some(0));
    assert!(env.mock.requests()[3].body.get("reasoning_effort").is_none());
    assert_eq!(env.run(&["--thinking", "low", "--reasoning-effort", "true", "prompt", "--new", "y"]).await.code, Some(0));
    assert_eq!(env.mock.requests()[4].body["reasoning_effort"], "low");
    // A server refusing the field: asked again without it, and the user is told on stderr.
    env.mock.push(MockReply::Status {
        status: 400,
        body: r#"{"error":{"message":"Unrecognized request argument supplied: reasoning_effort"}}"#.into(),
        retry_after: None,
    });
    env.mock.push(MockReply::text("Six."));
    let r = env.run(&["--thinking", "low", "--reasoning-effort", "true", "prompt", "--new", "w"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "Six.\n");
    assert!(env.mock.requests()[6].body.get("reasoning_effort").is_none());
    assert!(r.stderr.contains("warning: openai (mock-model) does not take reasoning_effort"), "{}", r.stderr);
    // An unknown level is a usage error naming the known ones.
    let r = env.run(&["--thinking", "lots", "prompt", "--new", "z"]).await;
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("off, minimal, low, medium, high"), "{}", r.stderr);
}

#[tokio::test]
async fn prompt_continues_the_newest_session_or_the_one_given_with_session() {
    let env = Env::new().await;
    let first = env.session_with_one_exchange().await;
    // Without --new or --session: the newest session of the working directory.
    let r = env.run(&["prompt", "Second question"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(PathBuf::from(r.stderr_lines()[0]), first);
    assert_eq!(messages(&first).len(), 4);
    let request = env.mock.requests().last().cloned().unwrap();
    assert_eq!(common::wire_messages(&request)[0].1, "First question");
    // --session FILE continues a pi file too (provider options after the subcommand).
    let pi = copy_fixture("pimono-0.73.1-print-session.jsonl", env.dir.path());
    let r = env.run(&["prompt", "--session", pi.to_str().unwrap(), "--model", "other-model", "More"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env.mock.requests().last().unwrap().body["model"], "other-model");
    let m = messages(&pi);
    assert_eq!(m.len(), 4);
    assert_eq!(m[2].1, "More");
}

/// Every slash command of the controller's table runs in the CLI's `prompt` as in the editor:
/// none reaches the model (the mock sees no request after the first exchange).
#[tokio::test]
async fn prompt_runs_the_slash_commands_and_none_reaches_the_model() {
    let env = Env::new().await;
    let first = env.session_with_one_exchange().await;
    let session = first.to_str().unwrap();
    let r = env.run(&["prompt", "--session", session, "/new"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), handoff_nvim::core::controller::text::NEW_SESSION);
    // The session it opened, then the new one it switched to.
    let stderr = r.stderr_lines();
    assert_eq!(stderr.len(), 2, "{stderr:?}");
    assert_eq!(stderr[0], session);
    assert_ne!(stderr[1], session);
    for (command, said) in [
        ("/model", "Model: mock-model"),
        ("/thinking high", "Thinking level: high"),
        ("/pin keep it short", "1. keep it short"),
        ("/pins", "1. keep it short"),
        ("/sessions", "First question"),
    ] {
        let r = env.run(&["prompt", "--session", session, command]).await;
        assert_eq!(r.code, Some(0), "{command}: {}", r.stderr);
        assert!(r.stdout.contains(said), "{command}: {:?}", r.stdout);
    }
    let r = env.run(&["prompt", "--session", session, "/thinking loud"]).await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("unknown thinking level"), "{}", r.stderr);
    assert_eq!(env.mock.requests().len(), 1, "a slash command reached the model");
    assert_eq!(messages(&first).len(), 2, "a slash command became a message");
}

#[tokio::test]
async fn prompt_provider_401_exits_1_with_one_clear_line_and_no_key() {
    let env = Env::new().await;
    env.mock.push(MockReply::Status {
        status: 401,
        body: r#"{"error":{"message":"Incorrect API key provided"}}"#.into(),
        retry_after: None,
    });
    let mut c = env.command(&["prompt", "--new", "--api-key-env", "CLI_TEST_KEY", "hi"]);
    c.env("CLI_TEST_KEY", "sk-canary-cli-4242");
    let out = tokio::time::timeout(T, c.output()).await.unwrap().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    // The session path, then the one line that says what failed.
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].ends_with(".jsonl"));
    assert!(lines[1].starts_with("error: "), "{}", lines[1]);
    assert!(lines[1].contains("401") && lines[1].contains("Incorrect API key provided"), "{}", lines[1]);
    assert!(!stderr.contains("sk-canary") && !stdout.contains("sk-canary"));
    // The key did go to the server.
    let auth = env.mock.requests()[0].header("authorization").unwrap_or_default().to_string();
    assert!(auth.contains("sk-canary-cli-4242"));
    // What was written stays: the prompt and the failed reply.
    let path = PathBuf::from(lines[0]);
    let entries = entry_lines(&path);
    assert_eq!(entries.last().unwrap()["message"]["stopReason"], "error");
    assert!(!std::fs::read_to_string(&path).unwrap().contains("sk-canary"));
}

#[tokio::test]
async fn prompt_sigint_during_a_slow_prompt_exits_130_and_the_session_keeps_the_user_message() {
    let env = Env::new().await;
    env.mock.push(common::slow(&["partial ", "reply ", "that ", "is ", "slow"], 0, 1_000));
    let r = env.run_interrupted(&["prompt", "--new", "please keep me"], "partial").await;
    assert_eq!(r.code, Some(130), "stderr: {}", r.stderr);
    let path = PathBuf::from(r.stderr_lines()[0]);
    let m = messages(&path);
    assert_eq!(m[0], ("user".to_string(), "please keep me".to_string()));
    let last = entry_lines(&path).last().cloned().unwrap();
    assert_eq!(last["message"]["stopReason"], "aborted");
    assert!(r.stdout.starts_with("partial"), "{:?}", r.stdout);
}

// ---------------------------------------------------------------------------------------------
// usage

#[tokio::test]
async fn usage_errors_exit_2() {
    let env = Env::new().await;
    for args in [
        &["prompt"][..],
        &["frobnicate"],
        &["context"],
        &["--provider", "bogus", "sessions"],
        &["prompt", "--new", "--session", "x.jsonl", "hi"],
        &["handoff"],
        &["todos"],
    ] {
        let r = env.run(args).await;
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(!r.stderr.is_empty());
        assert!(r.stdout.is_empty(), "{args:?} printed on stdout: {}", r.stdout);
    }
    assert_eq!(env.mock.requests().len(), 0);
}

// ---------------------------------------------------------------------------------------------
// context, sessions

#[tokio::test]
async fn context_prints_the_leaf_context_as_a_json_array() {
    let env = Env::new().await;
    let path = copy_fixture("omp-18.2.3-print-session.jsonl", env.dir.path());
    let r = env.run(&["context", path.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[0]["role"], "user");
    assert_eq!(arr[0]["content"][0]["text"], "Say hello");
    assert_eq!(arr[1]["role"], "assistant");
    assert_eq!(arr[1]["content"][0]["text"], "Hello from the mock server.");
    assert_eq!(env.mock.requests().len(), 0);
}

#[tokio::test]
async fn context_of_a_file_that_is_not_a_session_exits_1_with_one_line() {
    let env = Env::new().await;
    let path = env.dir.path().join("empty.jsonl");
    std::fs::write(&path, "").unwrap();
    let r = env.run(&["context", path.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(1));
    let lines = r.stderr_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("empty.jsonl") && lines[0].contains("not a session file"), "{}", lines[0]);
    assert!(r.stdout.is_empty());
}

#[tokio::test]
async fn todos_prints_the_current_list_as_a_json_array_with_pis_field_names() {
    let env = Env::new().await;
    // A session without a list prints `[]`.
    let plain = env.session_with_one_exchange().await;
    let r = env.run(&["todos", plain.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "[]\n");
    // The model writes a list through the CLI (todo_write runs unasked); the latest one wins.
    let list = |second: &str| {
        serde_json::json!({ "todos": [
            { "content": "Read the code", "status": "completed", "activeForm": "Reading the code" },
            { "content": "Fix the bug", "status": second, "activeForm": "Fixing the bug" },
        ]})
    };
    for (id, status) in [("call_1", "pending"), ("call_2", "in_progress")] {
        env.mock.push(MockReply::ToolCalls {
            calls: vec![handoff_mock::MockToolCall::new("todo_write", &list(status), 1).with_id(id)],
            text_before: Vec::new(),
            chunk_delay_ms: 0,
            stop: "tool_calls".into(),
            interleave: false,
        });
    }
    env.mock.set_default(MockReply::text("On it."));
    let r = env.run(&["prompt", "--session", plain.to_str().unwrap(), "fix it"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = env.run(&["todos", plain.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v, list("in_progress")["todos"]);
    // A file that is not a session: exit 1 with one line.
    let bad = env.dir.path().join("empty.jsonl");
    std::fs::write(&bad, "").unwrap();
    let r = env.run(&["todos", bad.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(1));
    assert_eq!(r.stderr_lines().len(), 1, "{}", r.stderr);
    assert!(r.stdout.is_empty());
}

#[tokio::test]
async fn sessions_lists_newest_first_with_id_path_first_message_and_parent() {
    let env = Env::new().await;
    let first = env.session_with_one_exchange().await;
    // Sessions are listed by their headers' millisecond timestamps: the child's is later.
    common::wait_past(lines(&first)[0]["timestamp"].as_str().unwrap());
    env.mock.push(MockReply::text(DOCUMENT));
    let r = env.run(&["handoff", first.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let child = PathBuf::from(r.stdout.trim());
    // An exchange in the child, then a second handoff from it: a chain of three.
    env.mock.push(MockReply::text("Second answer."));
    let r = env.run(&["prompt", "--session", child.to_str().unwrap(), "Second question"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    common::wait_past(lines(&child)[0]["timestamp"].as_str().unwrap());
    env.mock.push(MockReply::text(DOCUMENT));
    let r = env.run(&["handoff", child.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let grandchild = PathBuf::from(r.stdout.trim());
    let r = env.run(&["sessions"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let list: Vec<Value> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(list.len(), 3, "{}", r.stdout);
    // Each line names its parent under pi's field name, `null` for the root.
    let path = |i: usize| PathBuf::from(list[i]["path"].as_str().unwrap());
    assert_eq!((path(0), path(1), path(2)), (grandchild, child.clone(), first.clone()));
    assert_eq!(list[0]["parentSession"], child.to_str().unwrap());
    assert_eq!(list[1]["parentSession"], first.to_str().unwrap());
    assert_eq!(list[2]["parentSession"], Value::Null);
    assert!(list.iter().all(|l| l.get("parentSession").is_some() && l.get("parent_session").is_none()), "{}", r.stdout);
    assert_eq!(list[2]["first_message"], "First question");
    assert_eq!(list[2]["id"], lines(&first)[0]["id"]);
    // --cwd picks another project: none there.
    let r = env.run(&["sessions", "--cwd", "/no/such/project"]).await;
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""));
}

// ---------------------------------------------------------------------------------------------
// handoff: exit 0 done (path on stdout), 1 failed, 3 refused, 130 cancelled

#[tokio::test]
async fn handoff_exit_0_prints_the_new_session_path() {
    let env = Env::new().await;
    let old = env.session_with_one_exchange().await;
    env.mock.push(MockReply::text(DOCUMENT));
    let r = env.run(&["handoff", old.to_str().unwrap(), "--focus", "the tests"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let new = PathBuf::from(r.stdout.trim_end());
    assert_eq!(r.stdout.lines().count(), 1);
    assert!(new.is_file());
    let header = &lines(&new)[0];
    assert_eq!(header["parentSession"], old.to_str().unwrap());
    assert_eq!(entry_lines(&new)[2]["customType"], "handoff");
    assert!(new.with_extension("").join("handoff.md").is_file());
    let sent = common::wire_messages(env.mock.requests().last().unwrap());
    assert!(sent.last().unwrap().1.ends_with("Additional focus: the tests"));
    // stderr holds one line: the handoff's ledger (what it carried and dropped), nothing else.
    let ledger = handoff_nvim::core::session::ledger::Ledger::of_details(&entry_lines(&new)[2]["details"]).unwrap();
    assert_eq!(r.stderr_lines(), [ledger.summary()], "{}", r.stderr);
}

/// Bug: `prompt "/handoff x"` sent the text to the model: the CLI's `prompt` skipped the
/// controller both front ends go through. It hands off, as typed in the editor's prompt.
#[tokio::test]
async fn prompt_slash_handoff_hands_off_through_the_controller_like_the_editor() {
    let env = Env::new().await;
    let old = env.session_with_one_exchange().await;
    env.mock.push(MockReply::text(DOCUMENT));
    let r = env.run(&["prompt", "--session", old.to_str().unwrap(), "/handoff", "the", "tests"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // stdout: the new session's path only (the document is not streamed); stderr: the session.
    let new = PathBuf::from(r.stdout.trim_end());
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    assert_eq!(lines(&new)[0]["parentSession"], old.to_str().unwrap());
    assert_eq!(entry_lines(&new)[2]["customType"], "handoff");
    let sent = common::wire_messages(env.mock.requests().last().unwrap());
    assert!(sent.last().unwrap().1.ends_with("Additional focus: the tests"), "{sent:?}");
    for request in env.mock.requests() {
        for (_, text) in common::wire_messages(&request) {
            assert!(!text.starts_with("/handoff"), "the model saw {text:?}");
        }
    }
    // Refused as `handoff` refuses, said once: a session with one message has nothing to hand off.
    let r = env.run(&["prompt", "--new", "/handoff"]).await;
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert_eq!(r.stderr.matches("Nothing to hand off (no messages yet)").count(), 1, "{}", r.stderr);
}

#[tokio::test]
async fn handoff_failed_exits_1_naming_the_failure() {
    let env = Env::new().await;
    let old = env.session_with_one_exchange().await;
    env.mock.push(MockReply::Status { status: 500, body: "upstream exploded".into(), retry_after: None });
    let r = env.run(&["handoff", "--max-retries", "0", old.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stdout.is_empty());
    let lines = r.stderr_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("Handoff failed: ") && lines[0].contains("500"), "{}", lines[0]);
    assert_eq!(common::session_files(&env.session_dir()), [old]);
}

#[tokio::test]
async fn handoff_refused_exits_3() {
    let env = Env::new().await;
    let path = env.dir.path().join("one.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}\n\
         {\"type\":\"message\",\"id\":\"aaaaaaaa\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
    )
    .unwrap();
    let before = std::fs::read(&path).unwrap();
    let r = env.run(&["handoff", path.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(r.stdout.is_empty());
    assert!(r.stderr.contains("Nothing to hand off (no messages yet)"), "{}", r.stderr);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(env.mock.requests().len(), 0);
}

#[tokio::test]
async fn handoff_sigint_during_generation_exits_130_and_creates_no_session() {
    let env = Env::new().await;
    let old = env.session_with_one_exchange().await;
    let before = std::fs::read(&old).unwrap();
    env.mock.push(common::slow(&["## Goal\n", "never ", "finished"], 0, 2_000));
    let requests_before = env.mock.requests().len();
    // The helper waits for the first request: the setup's one is already there, so wait for ours.
    let child = env.command(&["handoff", old.to_str().unwrap()]).spawn().unwrap();
    // The CLI listens for SIGINT before it sends anything: once the request is here, the
    // generation runs and the signal is handled (the reply's next chunk is 2 s away).
    assert!(env.mock.wait_for_requests(requests_before + 1, T).await);
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let out = tokio::time::timeout(T, child.wait_with_output()).await.unwrap().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("Handoff cancelled"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(common::session_files(&env.session_dir()), std::slice::from_ref(&old));
    // The old session: as it was, plus the attempt (prompt and the aborted reply).
    let after = std::fs::read(&old).unwrap();
    assert!(after.starts_with(&before));
    let entries = entry_lines(&old);
    assert_eq!(entries.len(), 6);
    assert_eq!(entries[5]["message"]["stopReason"], "aborted");
}

#[tokio::test]
async fn prompt_with_a_missing_session_file_exits_1_with_one_line() {
    let env = Env::new().await;
    let r = env.run(&["prompt", "--session", "/no/such/session.jsonl", "hi"]).await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let lines = r.stderr_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("error: ") && lines[0].contains("/no/such/session.jsonl"), "{}", lines[0]);
    assert_eq!(env.mock.requests().len(), 0);
}

// ---------------------------------------------------------------------------------------------
// MCP

/// `--trust-project-mcp` says what it trusts: each server of the project's `.mcp.json` as the
/// file writes it (a `${VAR}` unexpanded), and that trusted servers run unsandboxed; then the
/// server starts. Without the flag the file stays untrusted and nothing is listed.
#[tokio::test]
async fn trust_project_mcp_lists_each_server_as_written_on_stderr_then_trusts_it() {
    let env = Env::new().await;
    let script = common::fixtures_dir().join("mcp/stdio_server.py");
    let marker = env.dir.path().join("server-started");
    let file = serde_json::json!({ "mcpServers": { "proj": {
        "command": "python3",
        "args": [script, "--token=${CLI_MCP_CANARY}"],
        "env": { "MCP_TEST_MARKER": marker },
    } } });
    std::fs::write(env.project().join(".mcp.json"), file.to_string()).unwrap();
    let run = |trust: bool| {
        let mut args = vec!["prompt", "--new", "hi"];
        if trust {
            args.insert(0, "--trust-project-mcp");
        }
        let mut c = env.command(&args);
        c.env("CLI_MCP_CANARY", "canary-cli-mcp-8180").env("XDG_STATE_HOME", env.dir.path().join("state"));
        c
    };
    env.mock.push(MockReply::text("untrusted"));
    let out = tokio::time::timeout(T, run(false).output()).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("does not start: the file is not trusted (--trust-project-mcp)"), "{stderr}");
    assert!(!marker.exists(), "an untrusted server ran");

    env.mock.push(MockReply::text("trusted"));
    let out = tokio::time::timeout(T, run(true).output()).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let file_path = env.project().join(".mcp.json");
    let listing = [
        format!("{} starts these MCP servers:", file_path.display()),
        format!("  proj: stdio: python3 {} --token=${{CLI_MCP_CANARY}} (env MCP_TEST_MARKER)", script.display()),
        "A trusted server runs the project's files unsandboxed, with your rights.".to_string(),
        format!("{} is trusted", file_path.display()),
    ];
    assert!(stderr.contains(&listing.join("\n")), "{stderr}");
    assert!(!stderr.contains("canary-cli-mcp-8180"), "an expanded value is shown: {stderr}");
    assert!(!stderr.contains("not trusted"), "{stderr}");
    assert!(marker.exists(), "the trusted server did not start");
}

/// How many times the host read `file` whole, from its debug log.
fn reads_of(log: &Path, file: &Path) -> usize {
    let log = std::fs::read_to_string(log).unwrap_or_default();
    let file = file.display().to_string();
    log.lines().filter(|l| l.contains("read the session file") && l.contains(&file)).count()
}

/// Issue 40: a large session is read once on the way from `--session FILE` to the answer —
/// the CLI asks whether its record runs on an external agent, and the answer's path takes the
/// session it read (it read it twice: once to ask, once to answer). The handoff at the wall,
/// `handoff FILE`, and a session of an external agent included.
#[tokio::test]
async fn a_session_named_is_read_once_on_the_way_to_the_answer() {
    let env = Env::new().await;
    // A long first answer (~10k tokens), so that a window of 8k is past the wall but holds the
    // new session with the document far from its own wall (no draft prepared in the background
    // to take the mock's next reply).
    env.mock.push(MockReply::text(&"many words here ".repeat(2400)));
    let r = env.run(&["prompt", "--new", "First question"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let file = PathBuf::from(r.stderr_lines()[0]);
    let log = env.dir.path().join("host.log");
    let run = |args: Vec<String>, window: Option<&str>| {
        let mut c = env.command(&args.iter().map(String::as_str).collect::<Vec<_>>());
        c.env("HANDOFF_LOG", "handoff_core::session=debug").env("HANDOFF_LOG_FILE", &log);
        if let Some(window) = window {
            c.env("HANDOFF_CONTEXT_WINDOW", window);
        }
        async move { tokio::time::timeout(T, c.output()).await.expect("CLI hung").unwrap() }
    };
    let path = file.display().to_string();
    env.mock.push(MockReply::text("Second answer."));
    let out = run(vec!["prompt".into(), "--session".into(), path.clone(), "Second question".into()], None).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(reads_of(&log, &file), 1, "prompt --session");

    // At the wall: handed off first, then answered in the new session.
    std::fs::remove_file(&log).unwrap();
    env.mock.push(MockReply::text(DOCUMENT));
    env.mock.push(MockReply::text("Answered after the handoff."));
    let out = run(vec!["prompt".into(), "--session".into(), path.clone(), "next step?".into()], Some("8000")).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Answered after the handoff."), "{stderr}");
    assert_eq!(reads_of(&log, &file), 1, "prompt --session at the wall");

    std::fs::remove_file(&log).unwrap();
    env.mock.push(MockReply::text(DOCUMENT));
    let out = run(vec!["handoff".into(), path.clone()], None).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(reads_of(&log, &file), 1, "handoff FILE");
}
