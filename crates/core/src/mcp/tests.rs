//! The client against an rmcp server in this process (over `tokio::io::duplex`): listing across
//! pages, calls and their results, errors, long names, truncation, and `tools/list_changed`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, ListToolsResult, PaginatedRequestParams, ServerConfig};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{json, Value};

use super::config::{McpConfig, McpSettings, TrustStore};
use super::{McpHub, State};
use crate::tools::{EnvPolicy, ToolContext, ToolKind, ToolRegistry, ToolSource};

const LONG_TOOL: &str = "a_tool_whose_name_is_far_too_long_for_openai_to_take_as_it_is_given";

/// A server of six tools, listed two to a page; `add_tool` adds a seventh and says so.
#[derive(Clone, Default)]
struct TestServer {
    added: Arc<AtomicBool>,
}

fn tool(name: &str, annotations: Value) -> Value {
    json!({
        "name": name,
        "description": format!("The {name} tool."),
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": annotations,
    })
}

impl TestServer {
    fn tools(&self) -> Vec<Value> {
        let mut tools = vec![
            tool("echo", json!({"readOnlyHint": true})),
            tool("fail", json!({})),
            tool("refuse", json!({})),
            tool("big", json!({})),
            tool(LONG_TOOL, json!({})),
            tool("add_tool", json!({"destructiveHint": false})),
        ];
        if self.added.load(Ordering::SeqCst) {
            tools.push(tool("added", json!({})));
        }
        tools
    }
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        from(json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "test", "version": "1"},
        }))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let start: usize = request.and_then(|r| r.cursor).map_or(0, |c| c.parse().unwrap());
        let tools = self.tools();
        let page: Vec<Value> = tools.iter().skip(start).take(2).cloned().collect();
        let next = (start + 2 < tools.len()).then(|| (start + 2).to_string());
        Ok(from(json!({"tools": page, "nextCursor": next})))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request.arguments.as_ref().and_then(|a| a.get("text")).and_then(Value::as_str).unwrap_or_default().to_string();
        let result: CallToolResult = match request.name.as_ref() {
            "echo" => from(json!({
                "content": [
                    {"type": "text", "text": format!("echo: {text}")},
                    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                ],
                "structuredContent": {"echoed": text},
            })),
            "fail" => from(json!({"content": [{"type": "text", "text": "no such thing"}], "isError": true})),
            "refuse" => return Err(ErrorData::invalid_params("text is required", None)),
            "big" => {
                let lines: Vec<String> = (1..=2500).map(|i| format!("row {i}")).collect();
                from(json!({"content": [{"type": "text", "text": lines.join("\n")}]}))
            }
            "add_tool" => {
                self.added.store(true, Ordering::SeqCst);
                context.peer.notify_tool_list_changed().await.unwrap();
                from(json!({"content": [{"type": "text", "text": "added"}]}))
            }
            other => from(json!({"content": [{"type": "text", "text": format!("called {other}")}]})),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// A hub whose server `t` is `server`, run in this process (a fresh one at each start).
fn hub_with(server: TestServer) -> Arc<McpHub> {
    let settings = McpSettings {
        servers: Some(json!({"t": {"command": "unused"}}).as_object().unwrap().clone()),
        project: Some(false),
        ..McpSettings::default()
    };
    let dir = std::env::temp_dir();
    let config = McpConfig::load_with(&settings, &dir, &TrustStore::none(), &|_| None);
    let hub = McpHub::new(config, &dir, EnvPolicy::default(), TrustStore::none());
    *super::hub::lock_link(hub.server_named("t")) = Some(Box::new(move || {
        let (client, served) = tokio::io::duplex(64 * 1024);
        let server = server.clone();
        tokio::spawn(async move {
            if let Ok(running) = server.serve(served).await {
                let _ = running.waiting().await;
            }
        });
        client
    }));
    hub
}

#[tokio::test]
async fn an_in_process_server_lists_its_tools_and_answers_calls() {
    let hub = hub_with(TestServer::default());
    assert_eq!(hub.statuses()[0].state, State::Idle);
    let mut registry = ToolRegistry::new([]);
    registry.add_source(hub.clone());
    registry.ready().await;
    let status = &hub.statuses()[0];
    assert_eq!(status.state, State::Running, "{status:?}");
    // Every page of the list.
    let names: Vec<String> = registry.definitions().iter().map(|d| d.name.to_string()).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    assert_eq!(&names[..4], ["mcp__t__echo", "mcp__t__fail", "mcp__t__refuse", "mcp__t__big"]);
    let long = &names[4];
    assert!(long.len() <= 64 && long.starts_with("mcp__t__a_tool_whose_name"), "{long}");
    assert!(registry.find(long).is_some());

    let echo = registry.find("mcp__t__echo").unwrap();
    assert_eq!(echo.kind(), ToolKind::Mcp, "a server's readOnlyHint is not trusted");
    let origin = echo.origin().unwrap();
    assert_eq!((origin.server.as_str(), origin.tool.as_str(), origin.read_only_hint), ("t", "echo", Some(true)));
    let def = echo.definition();
    assert_eq!(def.description, "The echo tool.");
    assert_eq!(def.parameters["properties"]["text"]["type"], "string");

    let dir = tempfile::tempdir().unwrap();
    let mut ctx = ToolContext::new(dir.path());
    ctx.spill_dir = Some(dir.path().to_path_buf());
    let out = registry.execute("mcp__t__echo", json!({"text": "hi"}), &ctx).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(out.joined_text(), "echo: hi\n{\n  \"echoed\": \"hi\"\n}");
    assert_eq!(out.content[1].kind, "image");

    let out = registry.execute("mcp__t__fail", json!({}), &ctx).await;
    assert!(out.is_error);
    assert_eq!(out.joined_text(), "no such thing");
    // A JSON-RPC error is an error result naming the server.
    let out = registry.execute("mcp__t__refuse", json!({}), &ctx).await;
    assert!(out.is_error);
    assert!(out.joined_text().starts_with("MCP server t: ") && out.joined_text().contains("text is required"), "{}", out.joined_text());

    let out = registry.execute("mcp__t__big", json!({}), &ctx).await;
    assert!(!out.is_error);
    assert!(out.joined_text().contains("[Showing 2000 of 2500 lines"), "{}", &out.joined_text()[..100]);
    let spilled = out.details["fullOutputPath"].as_str().unwrap();
    assert!(spilled.starts_with(dir.path().to_str().unwrap()));
    assert!(std::fs::read_to_string(spilled).unwrap().ends_with("row 2500"));

    let out = registry.execute("mcp__t__nope", json!({}), &ctx).await;
    assert_eq!(out.joined_text(), "Tool mcp__t__nope not found");
}

#[tokio::test]
async fn tools_list_changed_refreshes_the_list() {
    let hub = hub_with(TestServer::default());
    hub.ready().await;
    assert!(hub.find("mcp__t__added").is_none());
    let ctx = ToolContext::new(std::env::temp_dir());
    let out = hub.find("mcp__t__add_tool").unwrap().run(json!({}), &ctx).await.unwrap();
    assert_eq!(out.joined_text(), "added");
    // Only a hang guard: the list changes within milliseconds, a loaded machine's seconds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while hub.find("mcp__t__added").is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the list never changed: {:?}", hub.statuses());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(hub.statuses()[0].tools.len(), 7);
}

#[tokio::test]
async fn a_stopped_server_offers_nothing_until_started_again() {
    let hub = hub_with(TestServer::default());
    hub.ready().await;
    assert_eq!(hub.tools().len(), 6);
    hub.stop("t").await.unwrap();
    assert_eq!(hub.statuses()[0].state, State::Stopped);
    assert!(hub.tools().is_empty());
    hub.start("t").await.unwrap();
    assert_eq!(hub.statuses()[0].state, State::Running);
    assert_eq!(hub.tools().len(), 6);
    assert!(hub.start("nope").await.unwrap_err().contains("no MCP server"));
}
