//! A free-form call ([`MockToolCall::free_form`]) over the Responses API, as OpenAI streams a
//! call of a `custom` tool: a `custom_tool_call` item added empty, its input in
//! `response.custom_tool_call_input.delta` pieces, `.done` with the whole input, the item done
//! with it; the final response lists it. A function call beside it keeps its own events.
#![allow(clippy::unwrap_used)]

use handoff_mock::{MockReply, MockServer, MockToolCall};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The `data:` payloads of the reply to one streamed Responses request.
async fn events(mock: &MockServer) -> Vec<Value> {
    let body = json!({ "model": "m", "stream": true, "input": [{ "role": "user", "content": "patch it" }] }).to_string();
    let mut socket = tokio::net::TcpStream::connect(mock.addr()).await.unwrap();
    let head = format!("POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
    socket.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect()
}

#[tokio::test]
async fn a_free_form_call_streams_as_a_custom_tool_call() {
    let mock = MockServer::start().await.unwrap();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch";
    let calls = vec![
        MockToolCall::free_form("apply_patch", patch, 3).with_id("call_p"),
        MockToolCall::new("read", &json!({ "path": "a.txt" }), 1).with_id("call_r"),
    ];
    mock.push(MockReply::ToolCalls { calls, text_before: Vec::new(), chunk_delay_ms: 0, stop: "tool_calls".into(), interleave: false });
    let events = events(&mock).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let custom = "response.custom_tool_call_input";
    let function = "response.function_call_arguments";
    let tail = ["response.output_item.added", &format!("{custom}.delta"), &format!("{custom}.delta"), &format!("{custom}.delta"),
        &format!("{custom}.done"), "response.output_item.done",
        "response.output_item.added", &format!("{function}.delta"), &format!("{function}.done"), "response.output_item.done",
        "response.completed"];
    assert!(kinds.ends_with(&tail), "{kinds:#?}");

    let added = events.iter().find(|e| e["type"] == "response.output_item.added").unwrap();
    assert_eq!(added["item"]["type"], "custom_tool_call", "{added}");
    assert_eq!((added["item"]["input"].as_str(), added["item"]["call_id"].as_str()), (Some(""), Some("call_p")), "{added}");
    assert!(added["item"].get("arguments").is_none(), "{added}");
    let item_id = added["item"]["id"].as_str().unwrap();
    assert!(item_id.starts_with("ctc_"), "{item_id}");
    let pieces: String = events.iter().filter(|e| e["type"] == format!("{custom}.delta")).map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(pieces, patch);
    let done = events.iter().find(|e| e["type"] == format!("{custom}.done")).unwrap();
    assert_eq!((done["input"].as_str(), done["item_id"].as_str()), (Some(patch), Some(item_id)), "{done}");
    let item = json!({ "id": item_id, "type": "custom_tool_call", "status": "completed", "input": patch, "call_id": "call_p", "name": "apply_patch" });
    assert_eq!(events[kinds.len() - 6]["item"], item);
    let completed = events.last().unwrap();
    assert_eq!(completed["response"]["output"][0], item, "{completed}");
    assert_eq!(completed["response"]["output"][1]["type"], "function_call", "{completed}");
    assert_eq!(completed["response"]["output"][1]["arguments"], r#"{"path":"a.txt"}"#, "{completed}");
}
