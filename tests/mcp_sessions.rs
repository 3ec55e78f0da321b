//! Sessions with MCP calls written elsewhere: oh-my-pi spells a server's tool `mcp__<server>_<tool>`;
//! such a session loads without a warning, and our agent continues it, sending the calls and
//! results of a tool it does not have as history.

mod common;
use common::Drive as _;

use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::RunOptions;
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::call_summary;
use serde_json::json;

#[tokio::test]
async fn a_session_with_omp_mcp_names_loads_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = common::new_session(dir.path());
    session.append_message(&handoff_nvim::core::message::Message::user("look it up")).unwrap();
    session.append_message(&common::call_message("c1", "mcp__a_b", json!({"q": "rust"}))).unwrap();
    session.append_message(&common::result_message("c1", "mcp__a_b", "found 3", false, serde_json::Value::Null)).unwrap();
    session.append_message(&common::assistant("It found 3.")).unwrap();
    let path = session.path().to_path_buf();
    drop(session);

    let session = SessionManager::open(&path, dir.path()).unwrap();
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    assert_eq!(session.build_session_context().messages.len(), 4);
    assert_eq!(call_summary("mcp__a_b", &json!({"q": "rust"})), r#"{"q":"rust"}"#);

    let mock = MockServer::start().await.unwrap();
    mock.push(MockReply::text("Going on."));
    let agent = common::agent(&mock, session);
    agent.prompt("and then?", RunOptions::default()).await.unwrap();
    let body = mock.requests()[0].body.clone();
    let messages = body["messages"].as_array().unwrap();
    let call = messages.iter().find(|m| m["role"] == "assistant" && m["tool_calls"].is_array()).unwrap();
    assert_eq!(call["tool_calls"][0]["function"]["name"], "mcp__a_b");
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], "c1");
    assert!(result.to_string().contains("found 3"));
    // The tool is not offered: only the history names it.
    let offered: Vec<&str> = body["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert!(!offered.contains(&"mcp__a_b"));
}
