//! MCP in real headless Neovim: a server from `setup{ mcp = … }` (our small stdio server), a
//! scripted turn whose MCP call is approved in the chat (it shows the server, the tool and its
//! arguments), a per-tool rule that lets another call run unasked, `:HandoffMcp`, the health
//! check's lines, and no server process left after `:qa`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::nvim::{bounded, jsonl, Editor};
use common::{process_alive, tool_call_reply};
use handoff_mock::MockReply;
use serde_json::{json, Value};

async fn wait_gone(pid: u32, within: Duration) {
    let deadline = Instant::now() + within;
    while process_alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_is_approved_in_the_chat_and_no_server_is_left_after_qa() {
    bounded(async {
        let script = common::fixtures_dir().join("mcp/stdio_server.py");
        let pid_dir = tempfile::tempdir().unwrap();
        let marker = pid_dir.path().join("server-pid");
        let ed = Editor::start_with_setup(json!({
            "mcp": { "servers": { "py": { "command": "python3", "args": [script], "env": { "MCP_TEST_MARKER": marker } } } },
            "tools": { "rules": { "mcp__py__pids": "allow" } },
        }))
        .await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.mock.push(tool_call_reply("mcp__py__echo", json!({ "text": "from nvim" }), "call_m1"));
        ed.mock.push(tool_call_reply("mcp__py__pids", json!({}), "call_m2"));
        ed.mock.push(MockReply::text("Done."));
        ed.lua("require('handoff').prompt('use the server')", json!([])).await;
        let req = ed.wait_event_for("HandoffToolApproval", 1, Duration::from_secs(20)).await;
        assert_eq!(req["tool"], "mcp__py__echo");
        assert_eq!(req["kind"], "mcp");
        assert_eq!(req["origin"], json!({ "server": "py", "tool": "echo" }));
        assert_eq!(req["args"], json!({ "text": "from nvim" }));
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        let chat = chat.as_str().unwrap();
        assert!(chat.contains("### Allow `mcp__py__echo`?"), "{chat}");
        assert!(chat.contains("MCP server `py`, tool `echo`"), "{chat}");
        assert!(chat.contains("\"from nvim\""), "{chat}");
        // The first request offered the server's tools beside ours.
        let first = &ed.mock.requests()[0].body;
        let offered: Vec<&str> = first["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
        assert!(offered.contains(&"mcp__py__echo") && offered.contains(&"read"), "{offered:?}");

        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event_for("HandoffAgentEnd", 1, Duration::from_secs(20)).await;
        assert_eq!(ed.eval("T.count('HandoffToolApproval')").await, json!(1), "the rule let pids run unasked");
        // Stored as pi stores tool results; the model read them.
        let file = ed.session_file().await;
        let results: Vec<Value> = jsonl(Path::new(&file))
            .into_iter()
            .filter(|l| l["message"]["role"] == "toolResult")
            .map(|l| l["message"].clone())
            .collect();
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!(results[0]["toolName"], "mcp__py__echo");
        assert_eq!(results[0]["content"][0]["text"], "echo: from nvim");
        assert_eq!(results[0]["isError"], false);
        let pids: Value = serde_json::from_str(results[1]["content"][0]["text"].as_str().unwrap()).unwrap();
        let (pid, child) = (pids["pid"].as_u64().unwrap() as u32, pids["child"].as_u64().unwrap() as u32);
        assert!(ed.mock.requests()[1].body.to_string().contains("echo: from nvim"));

        // :HandoffMcp lists the server; the health check reports it.
        let list = ed.lua("return require('handoff.mcp').run('list')", json!([])).await;
        assert_eq!(list["servers"][0]["name"], "py");
        assert_eq!(list["servers"][0]["state"], "running");
        assert_eq!(list["servers"][0]["tools"].as_array().unwrap().len(), 4);
        let health = ed
            .lua(
                "local out = {} local function add(kind) return function(s) table.insert(out, kind .. ' ' .. s) end end
                 require('handoff.mcp').check({ start = add('start'), ok = add('ok'), info = add('info'), warn = add('warn'), error = add('error') })
                 return out",
                json!([]),
            )
            .await;
        let health: Vec<&str> = health.as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
        assert_eq!(health[0], "start MCP servers");
        assert!(health[1].starts_with("ok py: running, 4 tools (stdio: python3 "), "{health:?}");
        assert_eq!(std::fs::read_to_string(&marker).unwrap().trim(), pid.to_string());

        drop(ed.quit().await);
        wait_gone(pid, Duration::from_secs(5)).await;
        wait_gone(child, Duration::from_secs(5)).await;
    })
    .await;
}
