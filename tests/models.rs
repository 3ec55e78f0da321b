//! What is known of each model (issue 22): the provider's own list (`/v1/models`, Ollama's API,
//! Copilot's), pi's `models.json`, the user's `model_info` and the built-in table, as the built
//! CLI and the editor use them: the window in force, the reply bound sent, the picker's lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use handoff_mock::{MockCopilot, MockReply, MockServer};
use serde_json::{json, Value};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
const T: Duration = Duration::from_secs(20);

/// The CLI with a clean environment: no key, no pi file but the test's, sessions in `dir`.
fn cli(dir: &Path, args: &[&str]) -> Command {
    let mut c = common::clean_command_async(BIN);
    c.args(["--max-retries", "0"])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("PI_CODING_AGENT_DIR", dir.join("pi"))
        .env("HANDOFF_SESSION_DIR", dir.join("sessions"))
        .env("HANDOFF_LOG_FILE", dir.join("handoff.log"))
        .env("HANDOFF_LOG", "debug")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run(mut c: Command) -> Out {
    let out = tokio::time::timeout(T, c.output()).await.expect("the CLI hung").unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `handoff-nvim models`' lines.
fn lines(out: &Out) -> Vec<Value> {
    out.stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn chats(mock: &MockServer) -> Vec<handoff_mock::RecordedRequest> {
    mock.requests().into_iter().filter(|r| r.path.ends_with("/chat/completions")).collect()
}

#[tokio::test]
async fn a_servers_model_list_gives_the_window_and_the_reply_bound_the_requests_use() {
    let mock = MockServer::start().await.unwrap();
    mock.listing(|l| {
        l.models = vec![
            json!({ "id": "vendor/big", "context_length": 50_000, "top_provider": { "max_completion_tokens": 2_000 },
                "architecture": { "input_modalities": ["text", "image"] }, "supported_parameters": ["reasoning"] }),
            json!({ "id": "plain", "object": "model" }),
        ]
    });
    let dir = tempfile::tempdir().unwrap();
    let base = mock.openai_base_url();

    let out = run(cli(dir.path(), &["--base-url", &base, "--model", "vendor/big", "models"])).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let models = lines(&out);
    assert_eq!(models[0]["current"], json!(true));
    assert_eq!((models[0]["context_window"].clone(), models[0]["source"].clone()), (json!(50_000), json!("listed")));
    assert_eq!(models[1]["id"], json!("vendor/big"));
    assert_eq!((models[1]["images"].clone(), models[1]["reasoning"].clone()), (json!(true), json!(true)));
    assert!(models.iter().any(|m| m["id"] == "plain"), "{models:?}");

    // A prompt asks for the list once, before its first request, and sends the model's bound.
    mock.push(MockReply::text("hi"));
    mock.push(MockReply::text("again"));
    let prompt = ["--base-url", base.as_str(), "--model", "vendor/big", "prompt", "--new", "hello"];
    let out = run(cli(dir.path(), &prompt)).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let sent = chats(&mock);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["max_tokens"], json!(2_000), "min(4096, the model's 2000)");
    let paths: Vec<String> = mock.listing_requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec!["/v1/models", "/v1/models"], "one for `models`, one for the prompt");

    // The user's window wins, and then the list is not asked at all.
    let out = run(cli(dir.path(), &["--base-url", &base, "--model", "vendor/big", "--context-window", "9000", "prompt", "--new", "again"])).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(mock.listing_requests().len(), 2, "not asked with a window set");
}

#[tokio::test]
async fn a_failing_list_leaves_the_table_and_the_default_and_the_request_still_goes() {
    let mock = MockServer::start().await.unwrap();
    mock.listing(|l| l.status = 500);
    mock.push(MockReply::text("hi"));
    let dir = tempfile::tempdir().unwrap();
    let base = mock.openai_base_url();
    let out = run(cli(dir.path(), &["--base-url", &base, "--model", "gpt-4o", "models"])).await;
    assert_eq!(out.code, Some(1), "exit 1: the list did not answer");
    assert!(out.stderr.contains("the model list failed"), "{}", out.stderr);
    let models = lines(&out);
    assert_eq!((models[0]["context_window"].clone(), models[0]["source"].clone()), (json!(128_000), json!("built_in")));
    let out = run(cli(dir.path(), &["--base-url", &base, "--model", "unknown-local", "prompt", "--new", "hello"])).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(chats(&mock).len(), 1);
}

#[tokio::test]
async fn ollama_says_the_window_it_serves_from_its_own_api() {
    let mock = MockServer::start().await.unwrap();
    mock.listing(|l| {
        l.ollama = vec![("llama3.2:latest".into(), 131_072, Some(8_192)), ("qwen3:8b".into(), 40_960, None)];
    });
    let dir = tempfile::tempdir().unwrap();
    let base = mock.openai_base_url();
    let out = run(cli(dir.path(), &["--provider", "ollama", "--base-url", &base, "--model", "llama3.2", "models"])).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let models = lines(&out);
    assert_eq!(models[0]["context_window"], json!(8_192), "the loaded model's window (/api/ps), not its 131072");
    let qwen = models.iter().find(|m| m["id"] == "qwen3:8b").unwrap();
    assert_eq!(qwen["context_window"], json!(40_960), "not loaded: the model's own (/api/show)");
    let served: Vec<String> = mock.listing_requests().into_iter().map(|r| r.path).collect();
    assert!(served.contains(&"/api/tags".to_string()) && served.contains(&"/api/show".to_string()), "{served:?}");
}

#[tokio::test]
async fn a_pi_provider_works_unchanged_with_its_key_headers_and_models() {
    let mock = MockServer::start().await.unwrap();
    mock.push(MockReply::text("hello from qwen"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pi")).unwrap();
    let file = format!(
        r#"{{
  // pi 0.73.1 reads comments and trailing commas
  "providers": {{
    "local": {{
      "baseUrl": "{base}",
      "api": "openai-completions",
      "apiKey": "sk-literal-key-123",
      "headers": {{ "X-Team": "TEAM_HEADER_VAR", }},
      "models": [ {{ "id": "qwen3-coder", "contextWindow": 30000, "maxTokens": 1000, "input": ["text"] }}, ],
    }},
  }},
}}"#,
        base = mock.openai_base_url()
    );
    std::fs::write(dir.path().join("pi/models.json"), file).unwrap();
    let mut c = cli(dir.path(), &["--pi-provider", "local", "prompt", "--new", "hello"]);
    c.env("TEAM_HEADER_VAR", "team-7");
    let out = run(c).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let sent = chats(&mock);
    assert_eq!(sent[0].header("authorization"), Some("Bearer sk-literal-key-123"));
    assert_eq!(sent[0].header("x-team"), Some("team-7"));
    assert_eq!(sent[0].body["model"], json!("qwen3-coder"), "the provider's first model");
    assert_eq!(sent[0].body["max_tokens"], json!(1_000));
    let session = common::session_files(&dir.path().join("sessions")).remove(0);
    let text = std::fs::read_to_string(session).unwrap();
    assert!(text.contains(r#""provider":"local""#), "pi's provider name is recorded: pi resumes with it");
    let log = std::fs::read_to_string(dir.path().join("handoff.log")).unwrap_or_default();
    for (what, text) in [("the session", &text), ("the log", &log), ("stderr", &out.stderr)] {
        assert!(!text.contains("sk-literal-key-123") && !text.contains("team-7"), "a secret is in {what}");
    }

    let out = run(cli(dir.path(), &["--pi-provider", "local", "models"])).await;
    let models = lines(&out);
    assert_eq!((models[0]["context_window"].clone(), models[0]["source"].clone()), (json!(30_000), json!("pi")));

    let out = run(cli(dir.path(), &["--pi-provider", "nope", "models"])).await;
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains(r#"no provider "nope" (it has: local)"#), "{}", out.stderr);
    std::fs::write(dir.path().join("pi/models.json"), "{ not json").unwrap();
    let out = run(cli(dir.path(), &["--pi-provider", "local", "models"])).await;
    assert!(out.stderr.contains("models.json is not valid"), "{}", out.stderr);
    // Without `pi_provider` a broken pi file is left out, not fatal.
    let out = run(cli(dir.path(), &["--base-url", &mock.openai_base_url(), "--model", "gpt-4.1", "models"])).await;
    assert_eq!(lines(&out)[0]["context_window"], json!(1_047_576), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_neovim_the_picker_shows_each_window_and_switching_learns_the_new_ones() {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        ed.mock.listing(|l| {
            l.models = vec![json!({ "id": "mock-model", "context_length": 20_000 }), json!({ "id": "wide", "context_length": 1_500_000 })];
        });
        let setup = json!({ "models": ["my-favourite"], "provider": { "model_info": { "mine": { "context_window": 65_536, "max_tokens": 8_192 } } } });
        ed.lua(
            "local o = vim.tbl_deep_extend('force', require('handoff.config').options, ...) require('handoff').setup(o)",
            json!([setup]),
        )
        .await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("hello", "Hi.").await;
        assert_eq!(ed.status().await["context_window"], json!(20_000), "the meter's window is the list's");

        // The picker of :HandoffModel, as vim.ui.select gets it.
        ed.lua(
            "vim.ui.select = function(items, opts) _G.picked = vim.tbl_map(opts.format_item, items) end vim.cmd('HandoffModel')",
            json!([]),
        )
        .await;
        let lines = ed.wait_until("_G.picked", Duration::from_secs(10)).await;
        let lines: Vec<String> = serde_json::from_value(lines).unwrap();
        assert_eq!(lines[0], "my-favourite", "{lines:?}");
        assert!(lines.contains(&"mock-model  20k window  (in use)".to_string()), "{lines:?}");
        assert!(lines.contains(&"wide  1.5M window".to_string()), "{lines:?}");
        assert!(lines.contains(&"mine  65.5k window · 8.2k out".to_string()), "{lines:?}");
        let completion = ed.eval("vim.fn.getcompletion('HandoffModel w', 'cmdline')").await;
        assert_eq!(completion, json!(["wide"]));

        ed.command("HandoffModel wide").await;
        assert_eq!(ed.status().await["context_window"], json!(1_500_000), "learnt again for the new model");
        ed.command("HandoffModel mine").await;
        assert_eq!(ed.status().await["context_window"], json!(65_536));
        ed.command("HandoffModel nobody-knows").await;
        assert_eq!(ed.status().await["context_window"], json!(128_000), "the wire format's default, not the last model's");

        ed.command("checkhealth handoff").await;
        let health = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
        let health = health.as_str().unwrap();
        assert!(health.contains("the model list answered (2 models); nobody-knows: window 128000 tokens (from a default"), "{health}");
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_neovim_a_copilot_model_not_enabled_is_enabled_after_asking() {
    use common::nvim::{bounded, Editor};
    bounded(async {
        let ed = Editor::start().await;
        let copilot = ed.dir.path().join("config/github-copilot");
        std::fs::create_dir_all(&copilot).unwrap();
        std::fs::write(copilot.join("hosts.json"), json!({ "github.com": { "oauth_token": "gho_fake" } }).to_string()).unwrap();
        ed.mock.copilot(|c| {
            let mut model = MockCopilot::model("claude-opus-4.5", &["/v1/messages"], 200_000, 32_000);
            model["policy"]["state"] = json!("unconfigured");
            c.models.push(model);
        });
        let provider = json!({ "api": "copilot", "model": "claude-opus-4.5", "copilot_token_url": ed.mock.copilot_token_url(), "max_retries": 0, "timeout": 10 });
        ed.lua("require('handoff').setup({ bin = ..., provider = select(2, ...) })", json!([common::nvim::HOST_BIN, provider])).await;
        // The question is answered "Enable" (`confirm()` returns 1).
        ed.lua("vim.fn.confirm = function(msg) _G.asked = msg return 1 end", json!([])).await;
        ed.lua("require('handoff').open_chat() require('handoff').prompt('hello')", json!([])).await;
        ed.wait_until("_G.asked ~= nil", Duration::from_secs(10)).await;
        let asked = ed.eval("_G.asked").await;
        assert!(asked.as_str().unwrap().contains("claude-opus-4.5 is not enabled"), "{asked}");
        let enabled = || ed.mock.requests().into_iter().filter(|r| r.path == "/models/claude-opus-4.5/policy").collect::<Vec<_>>();
        for _ in 0..100 {
            if !enabled().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(enabled().len(), 1, "one POST /models/{{id}}/policy");
        assert_eq!(enabled()[0].body, json!({ "state": "enabled" }));
        assert!(enabled()[0].header("authorization").unwrap().starts_with("Bearer copilot-token-"));
        ed.mock.push(MockReply::text("Now enabled."));
        ed.lua("require('handoff').prompt('hello again')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 2).await;
        let messages = ed.mock.requests().into_iter().filter(|r| r.path.ends_with("/v1/messages")).count();
        assert_eq!(messages, 1, "the second prompt went to the enabled model");
        ed.quit().await;
    })
    .await;
}

/// Each preset against the mock (its base URL overridden): a conversation with thinking and a
/// tool loop, the preset's key variable sent as the key (none for Ollama), pi's provider name
/// recorded, the second request carrying the tool result.
#[tokio::test]
async fn every_preset_holds_a_conversation_with_thinking_and_a_tool_loop() {
    use handoff_mock::MockToolCall;
    use handoff_nvim::core::config::ProviderKind;
    for kind in ProviderKind::ALL {
        let Some(preset) = kind.preset() else { continue };
        let name = serde_json::to_value(kind).unwrap().as_str().unwrap().to_string();
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "the number is 42\n").unwrap();
        let call = MockToolCall::new("read", &json!({ "path": "notes.txt" }), 2).with_id("call_1");
        mock.push(MockReply::Reasoning {
            thinking: vec!["Reading ".into(), "the notes.".into()],
            signature: None,
            redacted: None,
            field: None,
            chunks: Vec::new(),
            calls: vec![call],
        });
        mock.push(MockReply::Reasoning {
            thinking: vec!["It says 42.".into()],
            signature: None,
            redacted: None,
            field: None,
            chunks: vec!["The number is 42.".into()],
            calls: Vec::new(),
        });
        let base = mock.openai_base_url();
        let mut c = cli(dir.path(), &["--provider", &name, "--base-url", &base, "--thinking", "medium", "--yes", "prompt", "--new", "read notes.txt"]);
        if let Some(var) = preset.key_env {
            c.env(var, format!("key-of-{name}"));
        }
        let out = run(c).await;
        assert_eq!(out.code, Some(0), "{name}: {}", out.stderr);
        assert!(out.stdout.contains("The number is 42."), "{name}: {}", out.stdout);
        let sent = chats(&mock);
        assert_eq!(sent.len(), 2, "{name}: the tool loop's two requests");
        let auth = sent[0].header("authorization");
        match preset.key_env {
            Some(_) => assert_eq!(auth, Some(format!("Bearer key-of-{name}").as_str()), "{name}"),
            None => assert_eq!(auth, None, "{name}: no key"),
        }
        assert_eq!(sent[0].body["model"], json!(preset.model), "{name}");
        let second = sent[1].body.to_string();
        assert!(second.contains("the number is 42"), "{name}: the tool result goes back: {second}");
        let file = common::session_files(&dir.path().join("sessions")).remove(0);
        let session = std::fs::read_to_string(file).unwrap();
        assert!(session.contains(&format!(r#""provider":"{}""#, preset.name)), "{name}: pi's provider id");
        assert!(session.contains(r#""type":"thinking""#), "{name}: the thinking is stored");
        assert!(!session.contains(&format!("key-of-{name}")), "{name}: the key is in the session");
    }
}
