//! The reference MCP server, `@modelcontextprotocol/server-everything` from npm (scripts/deps.sh
//! installs it), over stdio and over streamable HTTP on loopback: its tools listed and named,
//! `echo`, structured content, and an image as an image block.
//!
//! The server is `$MCP_EVERYTHING_BIN`, else `<repo>/.cache/mcp-everything/node_modules/.bin/
//! mcp-server-everything`. A missing server fails the test; `HANDOFF_SKIP_MCP_EVERYTHING=1`
//! turns that into a loud skip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use handoff_nvim::core::mcp::{McpConfig, McpHub, McpSettings, State, TrustStore};
use handoff_nvim::core::tools::{EnvPolicy, ToolContext, ToolRegistry};
use serde_json::{json, Value};

const DEFAULT_BIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/mcp-everything/node_modules/.bin/mcp-server-everything");

fn server_bin() -> Option<PathBuf> {
    let path = std::env::var_os("MCP_EVERYTHING_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_BIN));
    if path.is_file() {
        return Some(path);
    }
    if std::env::var("HANDOFF_SKIP_MCP_EVERYTHING").as_deref() == Ok("1") {
        eprintln!("\n!!!!!!!! SKIPPED: server-everything is not installed at {} !!!!!!!!\n", path.display());
        return None;
    }
    panic!("server-everything is not installed at {}: run scripts/deps.sh's ensure_mcp_everything (or set MCP_EVERYTHING_BIN, or HANDOFF_SKIP_MCP_EVERYTHING=1)", path.display());
}

fn hub(dir: &Path, entry: Value) -> (Arc<McpHub>, ToolRegistry) {
    let settings = McpSettings {
        servers: Some(json!({ "everything": entry }).as_object().unwrap().clone()),
        project: Some(false),
        startup_timeout: Some(30),
        ..McpSettings::default()
    };
    let trust = TrustStore::none();
    let hub = McpHub::new(McpConfig::load(&settings, dir, &trust), dir, EnvPolicy::default(), trust);
    let mut registry = ToolRegistry::new([]);
    registry.add_source(hub.clone());
    (hub, registry)
}

/// What the reference server does for us, over whichever transport `registry` reaches it by.
async fn exercise(hub: &McpHub, registry: &ToolRegistry, dir: &Path) {
    registry.ready().await;
    let status = &hub.statuses()[0];
    assert_eq!(status.state, State::Running, "{status:?}");
    for name in ["mcp__everything__echo", "mcp__everything__get-structured-content", "mcp__everything__get-tiny-image"] {
        assert!(status.tools.iter().any(|t| t == name), "{name} not in {:?}", status.tools);
    }
    let ctx = ToolContext::new(dir);
    let out = registry.execute("mcp__everything__echo", json!({ "message": "hello over MCP" }), &ctx).await;
    assert!(!out.is_error, "{out:?}");
    assert!(out.joined_text().contains("hello over MCP"), "{}", out.joined_text());

    let out = registry.execute("mcp__everything__get-structured-content", json!({ "location": "Chicago" }), &ctx).await;
    assert!(!out.is_error, "{out:?}");
    // Its text block repeats the structured content: said once, as JSON.
    let weather: Value = serde_json::from_str(&out.joined_text()).unwrap_or_else(|e| panic!("{e}: {}", out.joined_text()));
    assert_eq!(weather["conditions"], "Light rain / drizzle");

    let out = registry.execute("mcp__everything__get-tiny-image", json!({}), &ctx).await;
    assert!(!out.is_error, "{out:?}");
    let image = out.content.iter().find(|b| b.kind == "image").expect("an image block");
    assert_eq!(image.extra["mimeType"], "image/png");
    assert!(image.extra["data"].as_str().unwrap().len() > 100);

    // Arguments the server refuses are an error result.
    let out = registry.execute("mcp__everything__get-structured-content", json!({ "location": "Atlantis" }), &ctx).await;
    assert!(out.is_error, "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_over_stdio() {
    let Some(bin) = server_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (hub, registry) = hub(dir.path(), json!({ "command": bin, "args": ["stdio"] }));
    exercise(&hub, &registry, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_over_streamable_http_on_loopback() {
    let Some(bin) = server_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = tokio::process::Command::new(&bin)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    common::wait_until("the server to listen", Duration::from_secs(20), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (hub, registry) = hub(dir.path(), json!({ "type": "http", "url": "${EVERYTHING_URL:-".to_string() + &url + "}" }));
    exercise(&hub, &registry, dir.path()).await;
    drop(registry);
    drop(hub);
    server.kill().await.unwrap();
}

/// The server's tools reach the model in Anthropic's format too (name, description,
/// `input_schema`), and a call the model makes goes through the agent: consent (here a rule per
/// server), the server, and the result in the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_servers_tools_in_anthropics_format_through_the_agent() {
    use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
    use handoff_nvim::core::provider::{Api, ProviderConfig};
    use handoff_nvim::core::tools::consent::Rule;
    let Some(bin) = server_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mock = handoff_mock::MockServer::start().await.unwrap();
    mock.push(common::tool_call_reply("mcp__everything__echo", json!({ "message": "to anthropic" }), "toolu_1"));
    mock.push(handoff_mock::MockReply::text("Echoed."));
    let mut provider = ProviderConfig::new(Api::Anthropic, mock.anthropic_base_url(), "mock-model");
    provider.max_retries = 0;
    let (hub, _) = hub(dir.path(), json!({ "command": bin, "args": ["stdio"] }));
    let mut config = AgentConfig::new(provider);
    config.tools.add_source(hub);
    config.policy.tools.insert("mcp__everything".into(), Rule::Allow);
    let agent = std::sync::Arc::new(AgentSession::new(config, common::new_session(dir.path())));
    agent.prompt("echo it", RunOptions::default()).await.unwrap();
    let requests = mock.requests();
    let tools = requests[0].body["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "mcp__everything__echo").expect("the server's echo offered");
    assert!(echo["description"].as_str().unwrap().to_lowercase().contains("echo"), "{echo}");
    assert_eq!(echo["input_schema"]["type"], "object");
    assert!(echo["input_schema"]["properties"]["message"].is_object(), "{echo}");
    assert!(tools.iter().any(|t| t["name"] == "read"), "beside our own tools");
    let second = requests[1].body.to_string();
    assert!(second.contains("Echo: to anthropic"), "{second}");
}
