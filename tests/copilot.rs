//! GitHub Copilot (`--provider copilot`): the built CLI against the loopback mock's Copilot side
//! (token exchange, model list, the three chat formats), with a fake copilot.lua `hosts.json` in a
//! temporary `XDG_CONFIG_HOME`. Each run is its own process, so its token cache starts empty.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::entry_lines;
use handoff_mock::{MockCopilot, MockReply, MockServer, MockToolCall, RecordedRequest};
use serde_json::{json, Value};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
const T: Duration = Duration::from_secs(20);
const GITHUB_TOKEN: &str = "gho_fake_github_token_4242";
const TOKEN_PATH: &str = "/copilot_internal/v2/token";

struct Env {
    mock: MockServer,
    dir: tempfile::TempDir,
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Env {
    /// The mock, and a config folder holding copilot.lua's `hosts.json`.
    async fn new() -> Env {
        let env = Env::bare().await;
        let copilot = env.dir.path().join("config/github-copilot");
        std::fs::create_dir_all(&copilot).unwrap();
        let hosts = json!({ "github.com": { "user": "someone", "oauth_token": GITHUB_TOKEN } });
        std::fs::write(copilot.join("hosts.json"), hosts.to_string()).unwrap();
        env
    }

    /// No GitHub token anywhere.
    async fn bare() -> Env {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        Env { mock, dir }
    }

    fn log_file(&self) -> PathBuf {
        self.dir.path().join("handoff.log")
    }

    fn command(&self, model: &str, args: &[&str]) -> Command {
        let mut c = common::clean_command_async(BIN);
        c.args(["--provider", "copilot", "--model", model, "--max-retries", "0"])
            .args(args)
            .current_dir(self.dir.path().join("project"))
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("HANDOFF_COPILOT_TOKEN_URL", self.mock.copilot_token_url())
            .env("HANDOFF_SESSION_DIR", self.dir.path().join("sessions"))
            .env("HANDOFF_LOG", "debug")
            .env("HANDOFF_LOG_FILE", self.log_file())
            .env_remove("RUST_LOG")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("COPILOT_GITHUB_TOKEN")
            .env_remove("GH_TOKEN")
            .env_remove("GITHUB_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    async fn run_with(&self, mut command: Command) -> Run {
        let out = tokio::time::timeout(T, command.output()).await.expect("CLI hung").unwrap();
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn run(&self, model: &str, args: &[&str]) -> Run {
        self.run_with(self.command(model, args)).await
    }

    fn exchanges(&self) -> Vec<RecordedRequest> {
        self.mock.requests().into_iter().filter(|r| r.path == TOKEN_PATH).collect()
    }

    fn chats(&self) -> Vec<RecordedRequest> {
        self.mock.requests().into_iter().filter(|r| r.method == "POST").collect()
    }
}

impl Run {
    fn session_file(&self) -> PathBuf {
        let line = self.stderr.lines().map(str::trim).find(|l| l.ends_with(".jsonl")).unwrap_or_else(|| panic!("no session path in {}", self.stderr));
        PathBuf::from(line)
    }
}

/// A tool call the CLI runs without asking (`read`), then the answer: two chat requests.
fn tool_loop(mock: &MockServer) {
    mock.push(MockReply::ToolCalls {
        calls: vec![MockToolCall::new("read", &json!({ "path": "notes.txt" }), 2).with_id("call_1")],
        text_before: Vec::new(),
        chunk_delay_ms: 0,
        stop: "tool_calls".into(),
        interleave: false,
    });
    mock.push(MockReply::text("The notes say hello."));
}

fn assert_no_token_in(text: &str, what: &str) {
    assert!(!text.contains(GITHUB_TOKEN), "the GitHub token is in {what}");
    assert!(!text.contains("copilot-token-"), "a Copilot token is in {what}");
}

fn assistant_messages(path: &Path) -> Vec<Value> {
    entry_lines(path).into_iter().filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant").map(|e| e["message"].clone()).collect()
}

#[tokio::test]
async fn a_tool_loop_exchanges_the_token_once_and_sends_copilots_headers() {
    let env = Env::new().await;
    std::fs::write(env.dir.path().join("project/notes.txt"), "hello\n").unwrap();
    tool_loop(&env.mock);
    let r = env.run("gpt-4.1", &["prompt", "--new", "read notes.txt"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "The notes say hello.");

    // One exchange, one model list, two chat requests.
    let paths: Vec<(String, String)> = env.mock.requests().iter().map(|r| (r.method.clone(), r.path.clone())).collect();
    let expected = [("GET", TOKEN_PATH), ("GET", "/models"), ("POST", "/chat/completions"), ("POST", "/chat/completions")];
    assert_eq!(paths, expected.map(|(m, p)| (m.to_string(), p.to_string())));

    let exchange = &env.exchanges()[0];
    assert_eq!(exchange.header("authorization"), Some(format!("token {GITHUB_TOKEN}").as_str()));
    let chats = env.chats();
    for chat in &chats {
        assert_eq!(chat.header("authorization"), Some("Bearer copilot-token-1"));
        assert_eq!(chat.header("editor-version"), Some(concat!("handoff-nvim/", env!("CARGO_PKG_VERSION"))));
        assert_eq!(chat.header("editor-plugin-version"), Some(concat!("handoff.nvim/", env!("CARGO_PKG_VERSION"))));
        assert_eq!(chat.header("copilot-integration-id"), Some("vscode-chat"));
        // The GitHub token goes to the exchange only.
        assert!(!format!("{:?}{}", chat.headers, chat.body).contains(GITHUB_TOKEN));
    }
    // The first request is the user's, the one after the tool result the agent's.
    assert_eq!(chats[0].header("x-initiator"), Some("user"));
    assert_eq!(chats[1].header("x-initiator"), Some("agent"));
    assert_eq!(env.mock.requests()[1].header("authorization"), Some("Bearer copilot-token-1"));

    // Neither token in the session file or the log; the session names pi's provider and api.
    let session = r.session_file();
    assert_no_token_in(&std::fs::read_to_string(&session).unwrap(), "the session file");
    let log = std::fs::read_to_string(env.log_file()).unwrap();
    assert!(log.contains("exchanged the GitHub token"), "the log is not at debug level: {log}");
    assert_no_token_in(&log, "the log");
    assert_no_token_in(&r.stderr, "stderr");
    for message in assistant_messages(&session) {
        assert_eq!((message["provider"].as_str(), message["api"].as_str()), (Some("github-copilot"), Some("openai-completions")));
    }
}

#[tokio::test]
async fn each_model_is_sent_to_the_endpoint_the_model_list_names() {
    for (model, path, api) in [
        ("claude-sonnet-4.5", "/v1/messages", "anthropic-messages"),
        ("gpt-5-mini", "/responses", "openai-responses"),
        ("gpt-4.1", "/chat/completions", "openai-completions"),
        // A name that says nothing: the list decides.
        ("house-model", "/responses", "openai-responses"),
    ] {
        let env = Env::new().await;
        env.mock.copilot(|c| c.models.push(MockCopilot::model("house-model", &["/chat/completions", "/responses"], 32_000, 4_000)));
        env.mock.push(MockReply::text("Hi."));
        let r = env.run(model, &["prompt", "--new", "hello"]).await;
        assert_eq!(r.code, Some(0), "{model}: {}", r.stderr);
        let chats = env.chats();
        assert_eq!(chats.len(), 1, "{model}");
        assert_eq!(chats[0].path, path, "{model}");
        assert_eq!(chats[0].body["model"], model);
        // Anthropic's format carries the Copilot token as a bearer, never as x-api-key.
        assert_eq!(chats[0].header("authorization"), Some("Bearer copilot-token-1"), "{model}");
        assert_eq!(chats[0].header("x-api-key"), None, "{model}");
        let messages = assistant_messages(&r.session_file());
        assert_eq!(messages[0]["api"], api, "{model}");
        assert_eq!(messages[0]["provider"], "github-copilot");
        assert_eq!(messages[0]["model"], model);
    }
}

#[tokio::test]
async fn a_401_from_the_chat_endpoint_exchanges_the_token_again_once() {
    let env = Env::new().await;
    env.mock.push(MockReply::Status { status: 401, body: r#"{"error":{"message":"unauthorized: token expired"}}"#.into(), retry_after: None });
    env.mock.push(MockReply::text("Fine now."));
    let r = env.run("gpt-4.1", &["prompt", "--new", "hello"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "Fine now.");
    assert_eq!(env.exchanges().len(), 2);
    let auth: Vec<_> = env.chats().iter().map(|c| c.header("authorization").unwrap().to_owned()).collect();
    assert_eq!(auth, ["Bearer copilot-token-1", "Bearer copilot-token-2"]);

    // Refused again after the new exchange: the error, not a loop.
    let env = Env::new().await;
    let refused = || MockReply::Status { status: 401, body: r#"{"error":{"message":"unauthorized"}}"#.into(), retry_after: None };
    env.mock.push(refused());
    env.mock.push(refused());
    env.mock.push(refused());
    let r = env.run("gpt-4.1", &["prompt", "--new", "hello"]).await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!((env.exchanges().len(), env.chats().len()), (2, 2));
    assert_no_token_in(&r.stderr, "stderr");
}

#[tokio::test]
async fn a_token_near_its_expiry_is_exchanged_again_before_the_next_request() {
    let env = Env::new().await;
    std::fs::write(env.dir.path().join("project/notes.txt"), "hello\n").unwrap();
    // Within the two minutes' margin one second after the exchange; the first reply takes longer.
    env.mock.copilot(|c| {
        c.expires_in = 121;
        c.refresh_in = None;
    });
    env.mock.push(MockReply::ToolCalls {
        calls: vec![MockToolCall::new("read", &json!({ "path": "notes.txt" }), 3).with_id("call_1")],
        text_before: Vec::new(),
        chunk_delay_ms: 600,
        stop: "tool_calls".into(),
        interleave: false,
    });
    env.mock.push(MockReply::text("The notes say hello."));
    let r = env.run("gpt-4.1", &["prompt", "--new", "read notes.txt"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env.exchanges().len(), 2);
    let auth: Vec<_> = env.chats().iter().map(|c| c.header("authorization").unwrap().to_owned()).collect();
    assert_eq!(auth, ["Bearer copilot-token-1", "Bearer copilot-token-2"]);
    // The model list is read once all the same.
    assert_eq!(env.mock.requests().iter().filter(|r| r.path == "/models").count(), 1);
}

#[tokio::test]
async fn without_a_github_token_the_error_says_how_to_sign_in() {
    let env = Env::bare().await;
    let r = env.run("gpt-4.1", &["prompt", "--new", "hello"]).await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains(":Copilot auth"), "{}", r.stderr);
    assert!(env.mock.requests().is_empty());
}

#[tokio::test]
async fn copilot_vims_apps_json_and_the_environment_are_read_too() {
    let env = Env::bare().await;
    let copilot = env.dir.path().join("config/github-copilot");
    std::fs::create_dir_all(&copilot).unwrap();
    let apps = json!({ "github.com:Iv1.b507a08c87ecfe98": { "user": "someone", "oauth_token": GITHUB_TOKEN } });
    std::fs::write(copilot.join("apps.json"), apps.to_string()).unwrap();
    let r = env.run("gpt-4.1", &["prompt", "--new", "hello"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env.exchanges()[0].header("authorization"), Some(format!("token {GITHUB_TOKEN}").as_str()));

    let env = Env::bare().await;
    let mut command = env.command("gpt-4.1", &["prompt", "--new", "hello"]);
    command.env("GH_TOKEN", "gho_from_the_environment");
    let r = env.run_with(command).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(env.exchanges()[0].header("authorization"), Some("token gho_from_the_environment"));
}

#[tokio::test]
async fn a_tool_never_sees_the_github_token() {
    let env = Env::bare().await;
    env.mock.push(MockReply::ToolCalls {
        calls: vec![MockToolCall::new("bash", &json!({ "command": "echo \"[${GH_TOKEN:-unset}]\"" }), 1).with_id("call_1")],
        text_before: Vec::new(),
        chunk_delay_ms: 0,
        stop: "tool_calls".into(),
        interleave: false,
    });
    env.mock.push(MockReply::text("Done."));
    let mut command = env.command("gpt-4.1", &["--yes", "prompt", "--new", "print it"]);
    command.env("GH_TOKEN", GITHUB_TOKEN);
    let r = env.run_with(command).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let session = std::fs::read_to_string(r.session_file()).unwrap();
    assert!(session.contains("[unset]"), "{session}");
    assert_no_token_in(&session, "the session file");
}

#[tokio::test]
async fn a_model_not_enabled_is_named_and_a_quota_error_is_one_sentence() {
    let env = Env::new().await;
    env.mock.copilot(|c| {
        let mut model = MockCopilot::model("claude-opus-4.5", &["/v1/messages"], 200_000, 32_000);
        model["policy"]["state"] = json!("unconfigured");
        c.models.push(model);
    });
    let r = env.run("claude-opus-4.5", &["prompt", "--new", "hello"]).await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("claude-opus-4.5 is not enabled"), "{}", r.stderr);
    assert!(env.chats().is_empty());

    let env = Env::new().await;
    env.mock.push(MockReply::Status {
        status: 402,
        body: r#"{"error":{"message":"You have exceeded your premium request allowance. quota exceeded; visit https://github.com/settings/copilot","code":"quota_exceeded"}}"#.into(),
        retry_after: None,
    });
    let r = env.run("gpt-4.1", &["prompt", "--new", "hello"]).await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("your Copilot quota for this model is used up"), "{}", r.stderr);
    assert!(!r.stderr.contains("visit https://github.com"), "{}", r.stderr);
}

/// The `:checkhealth handoff` buffer's text.
async fn checkhealth(ed: &common::nvim::Editor) -> String {
    ed.command("checkhealth handoff").await;
    let text = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
    ed.command("bwipeout!").await;
    text.as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_neovim_requests_name_the_editor_and_checkhealth_says_where_the_token_was_found() {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let provider = json!({ "api": "copilot", "model": "gpt-4.1", "copilot_token_url": ed.mock.copilot_token_url(), "max_retries": 0, "timeout": 10 });
        ed.lua("require('handoff').setup(...)", json!([{ "bin": common::nvim::HOST_BIN, "provider": provider }])).await;
        // The login is read when the first request needs it.
        let copilot = ed.dir.path().join("config/github-copilot");
        std::fs::create_dir_all(&copilot).unwrap();
        let hosts = json!({ "github.com": { "user": "someone", "oauth_token": GITHUB_TOKEN } });
        std::fs::write(copilot.join("hosts.json"), hosts.to_string()).unwrap();
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("hello", "Hi from Copilot.").await;

        let version = ed.eval("tostring(vim.version())").await;
        let chat = ed.mock.requests().into_iter().find(|r| r.method == "POST").unwrap();
        assert_eq!(chat.header("editor-version"), Some(format!("Neovim/{}", version.as_str().unwrap()).as_str()));
        assert_eq!(chat.header("authorization"), Some("Bearer copilot-token-1"));
        // The meter's window is the model list's (64000 for the mock's gpt-4.1).
        assert_eq!(ed.status().await["context_window"], json!(64_000));

        let health = checkhealth(&ed).await;
        assert!(health.contains(&format!("GitHub token from {}", copilot.join("hosts.json").display())), "{health}");
        assert!(health.contains("/models answered: gpt-4.1 speaks openai-completions"), "{health}");
        assert_no_token_in(&health, ":checkhealth");
        let log = std::fs::read_to_string(ed.dir.path().join("state/nvim/handoff.log")).unwrap_or_default();
        assert_no_token_in(&log, "the host log");
        for f in ed.session_files() {
            assert_no_token_in(&std::fs::read_to_string(&f).unwrap(), "a session file");
        }
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_we_wrote_with_copilot() {
    let Some(pi) = common::pi::pi_bin() else { return };
    let env = Env::new().await;
    std::fs::write(env.dir.path().join("project/notes.txt"), "hello\n").unwrap();
    tool_loop(&env.mock);
    let r = env.run("claude-sonnet-4.5", &["prompt", "--new", "read notes.txt"]).await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let file = r.session_file();
    let ours = std::fs::read(&file).unwrap();

    // pi, with its own provider config for the mock (Anthropic Messages), goes on from our file.
    common::pi::pi_home(env.dir.path(), "anthropic-messages", &format!("http://{}", env.mock.addr()));
    env.mock.push(MockReply::text("Pi continues here."));
    let mut c = Command::new(&pi);
    common::pi::pi_env(&mut c, env.dir.path())
        .current_dir(env.dir.path().join("project"))
        .arg("--session")
        .arg(&file)
        .args(["--provider", "mock", "--model", "mock-model"])
        .args(["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes"])
        .args(["--offline", "-p", "and now?"])
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .env_remove("COPILOT_GITHUB_TOKEN")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), c.output()).await.expect("pi hung").unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "pi failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Pi continues here."), "{stdout}");

    // pi sent our conversation: the prompt, the tool call, its result, the answer, then its own.
    let last = env.mock.requests().last().cloned().unwrap();
    assert_eq!(last.path, "/v1/messages");
    let kinds: Vec<String> = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            let role = m["role"].as_str().unwrap().to_owned();
            let blocks = match &m["content"] {
                Value::String(_) => vec!["text".to_owned()],
                Value::Array(b) => b.iter().map(|b| b["type"].as_str().unwrap_or("?").to_owned()).collect(),
                _ => Vec::new(),
            };
            blocks.into_iter().map(move |b| format!("{role}:{b}"))
        })
        .collect();
    assert_eq!(kinds, ["user:text", "assistant:tool_use", "user:tool_result", "assistant:text", "user:text"]);
    let after = std::fs::read(&file).unwrap();
    assert!(after.starts_with(&ours), "pi rewrote our lines");
}
