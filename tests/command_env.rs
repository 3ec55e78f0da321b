//! The environment of commands (`tools.env`, `core::tools::env`), issue 30 "the sandbox holds":
//! the built CLI runs the model's `env` through bash against the mock model, its own
//! environment cleared and set to ordinary variables plus tokens, keys, a password and the
//! editor's and agents' sockets. None of their values may reach the tool result, the requests
//! the mock receives, the session file or the terminal; the controls (`--env-include-only`
//! naming one, `--sandbox off`) show that the same run does carry a value when the policy lets
//! it through, so the checks can fail. `set` and `inherit = "none"` through the agent, an MCP
//! stdio server's environment through the hub, and in headless Neovim the editor's own `$NVIM`
//! kept from a sandboxed command while `setup{ tools = { env = … } }` applies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use common::sandbox::enforced;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::tool_calls_reply;
use handoff_mock::{MockReply, MockServer, MockToolCall};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::mcp::{McpConfig, McpHub, McpSettings, TrustStore};
use handoff_nvim::core::sandbox::{SandboxMode, SandboxSettings};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::consent::Policy;
use handoff_nvim::core::tools::{EnvPolicy, EnvSettings, Inherit, ToolRegistry};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
const T: Duration = Duration::from_secs(30);

/// What must never reach the model by default: each name with a value found nowhere else.
const SECRETS: [(&str, &str); 4] = [
    ("GH_TOKEN", "canary-gh-token-5150"),
    ("GITHUB_TOKEN", "canary-github-token-5151"),
    ("MY_SERVICE_API_KEY", "canary-service-key-5152"),
    ("SOME_PASSWORD", "canary-password-5153"),
];

/// Ways out of the sandbox: kept from sandboxed commands only.
const SOCKETS: [(&str, &str); 3] = [
    ("NVIM", "/tmp/canary-nvim-5154.sock"),
    ("SSH_AUTH_SOCK", "/tmp/canary-ssh-agent-5155.sock"),
    ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/tmp/canary-dbus-5156"),
];


/// Everything one CLI run left: its output, what the mock received, the session file, and the
/// text of bash's result.
struct Run {
    stdout: String,
    stderr: String,
    requests: String,
    session: String,
    result: String,
}

impl Run {
    /// Every place a value could reach: the result, the requests, the session, the terminal.
    fn places(&self) -> [(&str, &str); 5] {
        [
            ("the tool result", &self.result),
            ("the requests to the model", &self.requests),
            ("the session file", &self.session),
            ("stdout", &self.stdout),
            ("stderr", &self.stderr),
        ]
    }

    fn assert_nowhere(&self, name: &str, value: &str) {
        for (place, text) in self.places() {
            assert!(!text.contains(value), "{name}'s value reached {place}:\n{text}");
        }
    }

    /// The value reached the model (so the check above can fail).
    fn assert_reached(&self, name: &str, value: &str) {
        assert!(self.result.contains(&format!("{name}={value}")), "{name} did not pass:\n{}", self.result);
        assert!(self.requests.contains(value), "{name} is not in the request carrying the result");
        assert!(self.session.contains(value), "{name} is not in the session file");
    }

    /// The names `env` printed.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.result.lines().filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string())).collect();
        names.sort();
        names
    }
}

/// `prompt --yes` with `args`, the model asking for `env` once; the CLI's environment is
/// cleared and holds PATH, HOME, FOO=bar, [`SECRETS`] and [`SOCKETS`].
async fn run_env(args: &[&str]) -> Run {
    run_env_in(tempfile::tempdir().unwrap(), args, &[]).await
}

/// [`run_env`] with `dir` as HOME (prepared by the caller) and `extra` variables besides.
async fn run_env_in(dir: tempfile::TempDir, args: &[&str], extra: &[(&str, &str)]) -> Run {
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(vec![MockToolCall::new("bash", &json!({ "command": "env" }), 2).with_id("call_env")]));
    mock.push(MockReply::text("done"));
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let sessions = dir.path().join("sessions");
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("TMPDIR", dir.path())
        .env("FOO", "bar")
        .envs(SECRETS)
        .envs(SOCKETS)
        .envs(extra.iter().copied())
        .args(["prompt", "--yes", "--new", "--max-retries", "0", "--provider", "openai", "--model", "mock-model"])
        .args(["--base-url", &mock.openai_base_url()])
        .arg("--session-dir")
        .arg(&sessions)
        .arg("--cwd")
        .arg(&project)
        .args(args)
        .arg("print the environment")
        .current_dir(&project)
        .kill_on_drop(true);
    let out = tokio::time::timeout(T, cmd.output()).await.expect("the CLI hung").unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "{args:?}: {stderr}");
    let files = common::session_files(&sessions);
    assert_eq!(files.len(), 1, "{files:?}");
    let session = std::fs::read_to_string(&files[0]).unwrap();
    let result = tool_result(&files[0]);
    let requests = mock.requests().iter().map(|r| r.body.to_string()).collect::<Vec<_>>().join("\n");
    assert!(requests.contains("call_env"), "the result went back to the model");
    Run { stdout, stderr, requests, session, result }
}

/// The text of the session's one bash result.
fn tool_result(session: &Path) -> String {
    let results: Vec<Value> = common::entry_lines(session)
        .into_iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    results[0]["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_gets_no_secret_and_no_socket_out_but_the_ordinary_variables() {
    if !enforced("a_sandboxed_command_gets_no_secret_and_no_socket_out_but_the_ordinary_variables") {
        return;
    }
    let run = run_env(&[]).await;
    for (name, value) in SECRETS.iter().chain(&SOCKETS) {
        run.assert_nowhere(name, value);
        assert!(!run.names().contains(&name.to_string()), "{name} is set: {}", run.result);
    }
    assert!(run.result.contains("FOO=bar"), "{}", run.result);
    let names = run.names();
    for name in ["PATH", "HOME", "TMPDIR"] {
        assert!(names.contains(&name.to_string()), "{name} is missing: {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_written_out_in_include_only_passes_and_nothing_else_does() {
    if !enforced("a_name_written_out_in_include_only_passes_and_nothing_else_does") {
        return;
    }
    // The control of the test above: the same run carries the token once it is named.
    let run = run_env(&["--env-include-only", "PATH,FOO,GH_TOKEN,NVIM,*_API_KEY"]).await;
    run.assert_reached("GH_TOKEN", "canary-gh-token-5150");
    run.assert_reached("NVIM", "/tmp/canary-nvim-5154.sock");
    run.assert_reached("FOO", "bar");
    // A glob selects; it does not lift the default exclusions.
    run.assert_nowhere("MY_SERVICE_API_KEY", "canary-service-key-5152");
    run.assert_nowhere("GITHUB_TOKEN", "canary-github-token-5151");
    run.assert_nowhere("SSH_AUTH_SOCK", "/tmp/canary-ssh-agent-5155.sock");
    assert!(!run.names().contains(&"HOME".to_string()), "include_only lets only its names through: {:?}", run.names());
}

/// Secrets whose names the globs miss, by shape (issue 39, round two): a URL with a password,
/// `*_PWD`, `*_PAT`, `*AUTH*`; and the variables the user's own provider settings name
/// whatever their names: the key variable (`--api-key-env`), what `--api-key-cmd` reads, and
/// the key variable of a provider of pi's `models.json` that this session does not use.
const SHAPED: [(&str, &str, &str); 8] = [
    ("DATABASE_URL", "postgres://app:canary-db-pw-7170@db:5432/app", "canary-db-pw-7170"),
    ("HTTPS_PROXY", "http://me:canary-proxy-pw-7171@proxy:3128", "canary-proxy-pw-7171"),
    ("MYSQL_PWD", "canary-mysql-pwd-7172", "canary-mysql-pwd-7172"),
    ("GITLAB_PAT", "canary-gitlab-pat-7173", "canary-gitlab-pat-7173"),
    ("X_AUTH_HEADER", "canary-auth-header-7174", "canary-auth-header-7174"),
    ("MY_LLM", "canary-my-llm-7175", "canary-my-llm-7175"),
    ("LLM_FROM_CMD", "canary-llm-from-cmd-7176", "canary-llm-from-cmd-7176"),
    ("WORK_LLM", "canary-work-llm-7177", "canary-work-llm-7177"),
];

/// A home folder whose pi `models.json` has a provider "work" keyed by `$WORK_LLM`.
fn home_with_pi_provider() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let pi = dir.path().join(".pi/agent");
    std::fs::create_dir_all(&pi).unwrap();
    let models = json!({ "providers": { "work": { "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "WORK_LLM", "models": [{ "id": "w" }] } } });
    std::fs::write(pi.join("models.json"), models.to_string()).unwrap();
    dir
}

const PROVIDER_FLAGS: [&str; 4] = ["--api-key-env", "MY_LLM", "--api-key-cmd", "printf %s \"$LLM_FROM_CMD\""];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_by_shape_and_the_providers_own_key_variables_stay_out() {
    if !enforced("secrets_by_shape_and_the_providers_own_key_variables_stay_out") {
        return;
    }
    let extra: Vec<(&str, &str)> = SHAPED.iter().map(|(n, v, _)| (*n, *v)).collect();
    let run = run_env_in(home_with_pi_provider(), &PROVIDER_FLAGS, &extra).await;
    // Every one that got through, named at once.
    let leaked: Vec<&str> = SHAPED
        .iter()
        .filter(|(name, _, secret)| run.names().contains(&name.to_string()) || run.places().iter().any(|(_, text)| text.contains(secret)))
        .map(|(name, ..)| *name)
        .collect();
    assert!(leaked.is_empty(), "these reached the command: {leaked:?}\n{}", run.result);
    let names = run.names();
    for name in ["PATH", "PWD", "HOME", "FOO"] {
        assert!(names.contains(&name.to_string()), "{name} is missing: {names:?}");
    }
    // Control: the user's hatch (a name written out in include_only) passes each one, the
    // password and the provider's key included; so the same run can carry them.
    let include = "PATH,DATABASE_URL,MYSQL_PWD,X_AUTH_HEADER,LLM_FROM_CMD,WORK_LLM";
    let args: Vec<&str> = PROVIDER_FLAGS.iter().copied().chain(["--env-include-only", include]).collect();
    let run = run_env_in(home_with_pi_provider(), &args, &extra).await;
    for (name, value, _) in SHAPED.iter().filter(|(n, ..)| include.split(',').any(|i| i == *n)) {
        run.assert_reached(name, value);
    }
    run.assert_nowhere("GITLAB_PAT", "canary-gitlab-pat-7173");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsandboxed_commands_keep_the_sockets_but_never_the_secrets() {
    let run = run_env(&["--sandbox", "off"]).await;
    for (name, value) in SOCKETS {
        run.assert_reached(name, value);
    }
    for (name, value) in SECRETS {
        run.assert_nowhere(name, value);
    }
    assert!(run.result.contains("FOO=bar"), "{}", run.result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inherit_none_leaves_only_what_the_shell_sets_itself() {
    let run = run_env(&["--sandbox", "off", "--env-inherit", "none"]).await;
    let names = run.names();
    let own = ["OLDPWD", "PWD", "SHLVL", "_"];
    assert!(names.iter().all(|n| own.contains(&n.as_str())), "inherited: {names:?}");
    assert!(names.contains(&"PWD".to_string()), "env ran: {}", run.result);
    // And `core` keeps PATH and HOME but not FOO.
    let run = run_env(&["--sandbox", "off", "--env-inherit", "core"]).await;
    let names = run.names();
    assert!(names.contains(&"PATH".to_string()) && names.contains(&"HOME".to_string()), "{names:?}");
    assert!(!names.contains(&"FOO".to_string()), "{names:?}");
}

/// `set` through the agent (it is a table: `setup()` gives it, the CLI has no flag for it):
/// under `inherit = "none"` the command gets what is set and nothing else, a token included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_gives_its_values_whatever_the_rest_says() {
    let mock = MockServer::start().await.unwrap();
    mock.push(tool_calls_reply(vec![MockToolCall::new("bash", &json!({ "command": "env" }), 2).with_id("call_env")]));
    mock.push(MockReply::text("done"));
    let dir = tempfile::tempdir().unwrap();
    let set = BTreeMap::from([("GH_TOKEN".to_string(), "set-by-the-user".to_string()), ("ONLY".to_string(), "1".to_string())]);
    let config = AgentConfig {
        policy: Policy::allow_all(),
        sandbox: SandboxSettings { mode: SandboxMode::Off, network: false },
        env: EnvSettings { inherit: Some(Inherit::None), set: Some(set), ..EnvSettings::default() },
        ..AgentConfig::new(common::config(&mock))
    };
    let session = SessionManager::create(&dir.path().join("sessions"), dir.path(), None).unwrap();
    let agent = std::sync::Arc::new(AgentSession::new(config, session));
    agent.prompt("print the environment", RunOptions::default()).await.unwrap();
    let result = tool_result(agent.session().path());
    assert!(result.contains("GH_TOKEN=set-by-the-user") && result.contains("ONLY=1"), "{result}");
    assert!(!result.contains("PATH=") && !result.contains("HOME="), "inherit none: {result}");
}

fn server_script() -> PathBuf {
    common::fixtures_dir().join("mcp/stdio_server.py")
}

/// The environment an MCP stdio server started with, given `entry_env` in its entry and the
/// host's `policy`.
async fn server_env(entry_env: Value, policy: EnvPolicy) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("server-env.json");
    let mut env = entry_env;
    env["MCP_TEST_ENV_FILE"] = json!(env_file);
    let servers = json!({ "py": { "command": "python3", "args": [server_script()], "env": env } });
    let settings = McpSettings { servers: Some(servers.as_object().unwrap().clone()), startup_timeout: Some(20), ..McpSettings::default() };
    let trust = TrustStore::new(dir.path().join("state/trust.json"));
    let hub = McpHub::new(McpConfig::load(&settings, dir.path(), &trust), dir.path(), policy, trust);
    let mut registry = ToolRegistry::new([]);
    registry.add_source(hub.clone());
    registry.ready().await;
    assert_eq!(hub.statuses()[0].state, handoff_nvim::core::mcp::State::Running, "{:?}", hub.statuses());
    drop(registry);
    drop(hub);
    serde_json::from_slice(&std::fs::read(&env_file).unwrap()).unwrap()
}

/// The host's own environment gets the secrets here (their names and values are this test's
/// own; the CLI runs above clear their environment, and the agent's runs inherit nothing).
/// Servers are not sandboxed: they keep `NVIM`, which a sandboxed bash loses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_stdio_server_gets_no_secret_but_what_its_entry_names() {
    let secrets = [("MCP_CANARY_TOKEN", "canary-mcp-token-6160"), ("MCP_CANARY_PASSWORD", "canary-mcp-pw-6161")];
    let socket = ("NVIM", "/tmp/canary-mcp-nvim-6162.sock");
    for (name, value) in secrets.iter().chain([&socket]) {
        std::env::set_var(name, value);
    }
    let provider_var = ("MCP_CANARY_PROVIDER_CRED", "canary-provider-6163");
    std::env::set_var(provider_var.0, provider_var.1);

    let policy = EnvPolicy::default().with_secrets([provider_var.0]);
    let env = server_env(json!({ "GIVEN_TOKEN": "given-by-the-entry" }), policy).await;
    for (name, value) in secrets.iter().chain([&provider_var]) {
        assert!(!env.contains_key(*name) && !env.values().any(|v| v == value), "{name} reached the server: {env:?}");
    }
    assert_eq!(env.get(socket.0).map(String::as_str), Some(socket.1), "an unsandboxed server keeps NVIM");
    assert!(env.contains_key("PATH"));
    // The entry's own `env` is explicit and wins (the control: a token can reach the server).
    assert_eq!(env.get("GIVEN_TOKEN").map(String::as_str), Some("given-by-the-entry"));
    let env = server_env(json!({ "MCP_CANARY_TOKEN": "${MCP_CANARY_TOKEN}" }), EnvPolicy::default()).await;
    assert_eq!(env.get("MCP_CANARY_TOKEN").map(String::as_str), Some("canary-mcp-token-6160"), "{env:?}");
}

/// In the editor: Neovim hands its RPC socket to the host (`$NVIM`), the host's sandboxed bash
/// does not pass it on; `setup{ tools = { env = … } }` reaches the host through the plugin's
/// schema (`set` given, `exclude` applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_editor_a_sandboxed_command_gets_no_nvim_socket_and_setups_env_applies() {
    if !enforced("in_the_editor_a_sandboxed_command_gets_no_nvim_socket_and_setups_env_applies") {
        return;
    }
    common::nvim::bounded(async {
        let setup = json!({ "tools": { "policy": "allow_all", "env": { "set": { "FROM_SETUP": "yes" }, "exclude": ["FOO_*"] } } });
        let ed = common::nvim::Editor::start_with_setup(setup).await;
        // Before the host starts, so that it inherits them.
        ed.lua("vim.env.GH_TOKEN = 'canary-editor-gh-9190' vim.env.FOO_HIDDEN = 'hidden-9191' vim.env.BAR_SHOWN = 'shown-9192'", json!([])).await;
        ed.mock.push(tool_calls_reply(vec![MockToolCall::new("bash", &json!({ "command": "env" }), 2).with_id("call_env")]));
        ed.mock.push(MockReply::text("done"));
        ed.lua("require('handoff').prompt('print the environment')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let host_env = std::fs::read(format!("/proc/{}/environ", ed.host_pid().await)).unwrap();
        let host_env = String::from_utf8_lossy(&host_env);
        assert!(host_env.split('\0').any(|v| v.starts_with("NVIM=")), "the host has the editor's socket (the control)");
        assert!(host_env.contains("canary-editor-gh-9190"));
        let file = ed.session_file().await;
        let result = tool_result(Path::new(&file));
        assert!(!result.lines().any(|l| l.starts_with("NVIM=")), "{result}");
        assert!(!std::fs::read_to_string(&file).unwrap().contains("canary-editor-gh-9190"));
        assert!(!ed.mock.requests().iter().any(|r| r.body.to_string().contains("canary-editor-gh-9190")));
        assert!(result.contains("FROM_SETUP=yes") && result.contains("BAR_SHOWN=shown-9192"), "{result}");
        assert!(!result.contains("hidden-9191"), "{result}");
        ed.quit().await;
    })
    .await;
}
