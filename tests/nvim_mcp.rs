//! MCP in real headless Neovim: a server from `setup{ mcp = … }` (our small stdio server), a
//! scripted turn whose MCP call is approved in the chat (it shows the server, the tool and its
//! arguments), a per-tool rule that lets another call run unasked, `:HandoffMcp`, the health
//! check's lines, and no server process left after `:qa`. `:HandoffMcp trust` of a project's
//! `.mcp.json`: the confirmation lists each server as the file writes it (never an expanded
//! `${VAR}`), a "no" trusts nothing, a file swapped while the confirmation is open is refused,
//! and a "yes" trusts what was shown.

mod common;

use std::path::Path;
use std::time::Duration;

use common::nvim::{bounded, jsonl, wait_gone, Editor};
use common::tool_call_reply;
use handoff_mock::MockReply;
use serde_json::{json, Value};


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
        // The server's hint is shown as it said it (never trusted: it is still asked).
        assert_eq!(req["origin"], json!({ "server": "py", "tool": "echo", "readOnlyHint": true }));
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
        assert_eq!(list["servers"][0]["tools"].as_array().unwrap().len(), 5);
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
        assert!(health[1].starts_with("ok py: running, 5 tools (stdio: python3 "), "{health:?}");
        assert_eq!(std::fs::read_to_string(&marker).unwrap().trim(), pid.to_string());

        drop(ed.quit().await);
        // The server waits for its input and its child sleeps 300 s: gone within the hang
        // guard is the quit ending them.
        wait_gone(pid, ":qa").await;
        wait_gone(child, ":qa").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusting_the_project_file_confirms_what_it_runs_and_refuses_a_swapped_file() {
    bounded(async {
        let script = common::fixtures_dir().join("mcp/stdio_server.py");
        let ed = Editor::start_bare().await;
        let project_file = ed.work_dir().join(".mcp.json");
        let marker = ed.dir.path().join("server-started");
        let file = json!({ "mcpServers": { "proj": {
            "command": "python3",
            "args": [script, "--token=${MCP_NVIM_CANARY}"],
            "env": { "MCP_TEST_MARKER": marker, "SERVICE_TOKEN": "${MCP_NVIM_CANARY}" },
        } } });
        std::fs::write(&project_file, file.to_string()).unwrap();
        // The variable is the editor's, so the host (its job) expands it.
        ed.lua(
            "vim.env.MCP_NVIM_CANARY = 'canary-nvim-mcp-7170'
             vim.opt.rtp:prepend(select(1, ...)) vim.cmd('runtime plugin/handoff.lua')
             require('handoff').setup(select(2, ...))",
            json!([env!("CARGO_MANIFEST_DIR"), ed.default_setup()]),
        )
        .await;
        let stub = "T.asked = {} vim.fn.confirm = function(msg, choices, default, kind)
                      table.insert(T.asked, { msg = msg, choices = choices, default = default, kind = kind })
                      if T.during_confirm then T.during_confirm() end
                      return T.answer
                    end";
        ed.lua(stub, json!([])).await;

        // "Cancel": nothing is trusted.
        ed.lua("T.answer = 2 return require('handoff.mcp').run('trust')", json!([])).await;
        let asked = ed.eval("T.asked[1]").await;
        let msg = asked["msg"].as_str().unwrap();
        assert!(msg.contains(&format!("{} starts these MCP servers:", project_file.display())), "{msg}");
        assert!(msg.contains(&format!("proj: stdio: python3 {} --token=${{MCP_NVIM_CANARY}} (env MCP_TEST_MARKER, SERVICE_TOKEN)", script.display())), "{msg}");
        assert!(msg.contains("A trusted server runs the project's files unsandboxed, with your rights."), "{msg}");
        assert!(!msg.contains("canary-nvim-mcp-7170"), "an expanded value is shown: {msg}");
        assert_eq!(asked["default"], json!(2), "the default answer is no");
        let list = ed.lua("return require('handoff.mcp').run('list')", json!([])).await;
        assert_eq!(list["servers"][0]["state"], "untrusted");
        let transport = list["servers"][0]["transport"].as_str().unwrap();
        assert!(transport.contains("--token=${MCP_NVIM_CANARY}") && !transport.contains("canary-nvim-mcp-7170"), "{transport}");

        // The file is swapped while the confirmation is open: "yes" to what was shown is refused.
        let swapped = json!({ "mcpServers": { "proj": { "command": "sh", "args": ["-c", "touch owned"] } } });
        ed.lua(
            "T.answer = 1 local path, text = ...
             T.during_confirm = function() local f = io.open(path, 'w') f:write(text) f:close() end
             return require('handoff.mcp').run('trust')",
            json!([project_file, swapped.to_string()]),
        )
        .await;
        let refused = ed.eval("T.noted('changed since it was read') ~= nil").await;
        assert_eq!(refused, json!(true), "notes: {}", ed.eval("vim.inspect(T.notes)").await);
        let list = ed.lua("return require('handoff.mcp').run('list')", json!([])).await;
        assert_eq!(list["servers"][0]["state"], "untrusted", "{list}");
        let store = ed.dir.path().join("state/nvim/handoff/mcp-trust.json");
        assert!(!store.exists() || !std::fs::read_to_string(&store).unwrap().contains(".mcp.json"), "something was trusted");

        // Put back: the same "yes" trusts what was shown, and the server may start.
        std::fs::write(&project_file, file.to_string()).unwrap();
        ed.lua("T.during_confirm = nil return require('handoff.mcp').run('trust')", json!([])).await;
        let list = ed.lua("return require('handoff.mcp').run('list')", json!([])).await;
        assert_eq!(list["servers"][0]["state"], "idle", "{list}");
        assert!(std::fs::read_to_string(&store).unwrap().contains(".mcp.json"));
        assert_eq!(ed.eval("#T.asked").await, json!(3));
        ed.quit().await;
    })
    .await;
}


/// An MCP server's tool may change files a buffer shows, as a command may: after it the editor
/// reloads them (the tool's end carries the kind `mcp`, which the chat reloads after).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_an_mcp_tool_changed_is_reloaded_in_its_buffer() {
    bounded(async {
        let script = common::fixtures_dir().join("mcp/stdio_server.py");
        let ed = Editor::start_with_setup(json!({
            "mcp": { "servers": { "py": { "command": "python3", "args": [script] } } },
            "tools": { "rules": { "mcp__py__write": "allow" } },
        }))
        .await;
        let file = ed.work_dir().join("notes.txt");
        std::fs::write(&file, "old\n").unwrap();
        ed.command("edit notes.txt").await;
        let buf = ed.eval("vim.api.nvim_get_current_buf()").await;
        ed.mock.push(tool_call_reply("mcp__py__write", json!({ "path": file, "text": "new\n" }), "call_w1"));
        ed.mock.push(MockReply::text("Written."));
        ed.lua("require('handoff').prompt('write it through the server')", json!([])).await;
        let end = ed.wait_event_for("HandoffToolEnd", 1, Duration::from_secs(20)).await;
        assert_eq!(end["kind"], "mcp", "{end}");
        ed.wait_event_for("HandoffAgentEnd", 1, Duration::from_secs(20)).await;
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
        ed.wait_until(&format!("vim.api.nvim_buf_get_lines({buf}, 0, -1, false)[1] == 'new'"), Duration::from_secs(5)).await;
        ed.quit().await;
    })
    .await;
}
