//! The agent's tools in real headless Neovim (issue 12): approvals answered in the chat (each
//! answer), an edit through a loaded buffer and its one-step undo, the unsaved-buffer refusal,
//! bash output streaming into the chat, the stop key killing a running command, and no process
//! left after `:qa`. The model is the loopback mock; the tools act on real files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::nvim::{bounded, jsonl, wait_gone, Editor};
use common::{process_alive, tool_call_reply};
use handoff_mock::MockReply;
use serde_json::{json, Value};

/// The tool results stored in the current session, in order.
async fn tool_results(ed: &Editor) -> Vec<Value> {
    let file = ed.session_file().await;
    jsonl(Path::new(&file))
        .into_iter()
        .filter(|l| l["message"]["role"] == "toolResult")
        .map(|l| l["message"].clone())
        .collect()
}

/// Waits for a file holding a pid, and returns the pid (the limit only stops a hang).
async fn wait_pid(path: &Path) -> u32 {
    let deadline = Instant::now() + common::HANG_GUARD;
    loop {
        if let Some(pid) = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}


#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_edit_goes_through_the_buffer_and_u_undoes_it_in_one_step() {
    bounded(async {
        let ed = Editor::start().await;
        let file = ed.work_dir().join("notes.txt");
        std::fs::write(&file, "hello\nworld\n").unwrap();
        ed.command("edit notes.txt").await;
        let buf = ed.eval("vim.api.nvim_get_current_buf()").await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.mock.push(tool_call_reply("edit", json!({ "path": "notes.txt", "edits": [{ "oldText": "world", "newText": "there" }] }), "call_e1"));
        ed.mock.push(MockReply::text("Changed it."));
        ed.lua("require('handoff').prompt('change world to there')", json!([])).await;
        // The request waits in the chat, with the diff; the editor is not blocked meanwhile.
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        assert_eq!(req["tool"], "edit");
        assert_eq!(req["id"], "call_e1");
        assert!(req["diff"].as_str().unwrap().contains("there"), "{req}");
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("### Allow `edit`?"), "{chat}");
        // The hint shows the answers the host offers (all four here), then the diff.
        assert!(chat.as_str().unwrap().contains("`a` allow · `A` always · `r` reject · `c` cancel · `d` diff"), "{chat}");
        assert_eq!(ed.eval("1 + 1").await, json!(2));
        // `d` opens the change side by side as a real diff.
        ed.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1])", json!([])).await;
        ed.input("d").await;
        ed.wait_until("vim.fn.tabpagenr('$') == 2 and vim.wo.diff", Duration::from_secs(5)).await;
        let sides = ed.eval("vim.tbl_map(function(w) return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false) end, vim.api.nvim_tabpage_list_wins(0))").await;
        assert_eq!(sides, json!([["hello", "world"], ["hello", "there"]]));
        ed.command("tabclose").await;
        // `a` in the chat allows it (the request the cursor is in, else the oldest).
        ed.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1])", json!([])).await;
        ed.input("a").await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        // The buffer shows it at once, written, not modified; the disk has it.
        let lines = ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", json!([buf])).await;
        assert_eq!(lines, json!(["hello", "there"]));
        assert_eq!(ed.lua("return vim.bo[...].modified", json!([buf])).await, json!(false));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nthere\n");
        let results = tool_results(&ed).await;
        assert_eq!(results.len(), 1);
        assert_eq!(results[0]["isError"], false, "{results:?}");
        // The model read the result in its next request.
        let second = &ed.mock.requests()[1].body;
        assert!(second.to_string().contains("Successfully replaced 1 block(s) in notes.txt."), "{second}");
        // `u` in the buffer undoes the agent's change as one step.
        ed.lua("vim.cmd('wincmd t') vim.api.nvim_set_current_buf(...)", json!([buf])).await;
        ed.input("u").await;
        ed.wait_until(&format!("vim.api.nvim_buf_get_lines({buf}, 0, -1, false)[2] == 'world'"), Duration::from_secs(5)).await;
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffer_with_unsaved_changes_is_never_overwritten() {
    bounded(async {
        let ed = Editor::start().await;
        let file = ed.work_dir().join("draft.txt");
        std::fs::write(&file, "one\ntwo\n").unwrap();
        ed.command("edit draft.txt").await;
        ed.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, { 'ONE (unsaved)' })", json!([])).await;
        ed.mock.push(tool_call_reply("write", json!({ "path": "draft.txt", "content": "replaced\n" }), "call_w1"));
        ed.mock.push(MockReply::text("ok"));
        ed.lua("require('handoff').prompt('replace it')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let results = tool_results(&ed).await;
        assert_eq!(results[0]["isError"], true, "{results:?}");
        let text = results[0]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("unsaved changes"), "{text}");
        assert_eq!(ed.eval("vim.api.nvim_buf_get_lines(0, 0, -1, false)").await, json!(["ONE (unsaved)", "two"]));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\ntwo\n");
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_a_formatter_changes_on_save_is_read_back_and_the_model_is_told() {
    bounded(async {
        let ed = Editor::start().await;
        let file = ed.work_dir().join("conf.py");
        std::fs::write(&file, "x = 0\ny = 0\n").unwrap();
        ed.command("edit conf.py").await;
        // A format-on-save, as conform.nvim's: `a=b` becomes `a = b` as the buffer is written.
        ed.command("autocmd BufWritePre conf.py silent! keepjumps %s/\\(\\S\\)=\\(\\S\\)/\\1 = \\2/g").await;
        ed.mock.push(tool_call_reply("edit", json!({ "path": "conf.py", "edits": [{ "oldText": "y = 0", "newText": "y=2" }] }), "call_e1"));
        ed.mock.push(MockReply::text("ok"));
        ed.lua("require('handoff').prompt('set y to 2')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x = 0\ny = 2\n", "the formatter ran on the agent's write");
        let results = tool_results(&ed).await;
        let text = results[0]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("The file changed as the editor saved it") && text.contains("+2 y = 2"), "{text}");
        assert!(results[0]["details"]["diff"].as_str().unwrap().contains("+2 y = 2"), "{results:?}");
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_with_a_reason_always_for_one_command_and_cancel() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        // Reject with a reason: the model reads it; nothing ran.
        let marker = ed.work_dir().join("ran");
        let touch = format!("touch {}", marker.display());
        ed.mock.push(tool_call_reply("bash", json!({ "command": touch }), "call_b1"));
        ed.mock.push(MockReply::text("understood"));
        ed.lua("require('handoff').prompt('touch it')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 1).await;
        assert_eq!(req["args"]["command"], touch.as_str());
        ed.lua("require('handoff').approve(...)", json!([req["id"], "reject", "not in this folder"])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        assert!(!marker.exists(), "a rejected command ran");
        let second = ed.mock.requests()[1].body.to_string();
        assert!(second.contains("The user rejected this tool call. Reason: not in this folder"), "{second}");
        // A second answer to the same request is ignored.
        assert_eq!(ed.lua("return require('handoff').approve(...)", json!([req["id"], "allow"])).await, json!(false));
        // Always for `echo one`: the same command is not asked again, another one is.
        ed.mock.push(tool_call_reply("bash", json!({ "command": "echo one" }), "call_b2"));
        ed.mock.push(tool_call_reply("bash", json!({ "command": "echo one" }), "call_b3"));
        ed.mock.push(tool_call_reply("bash", json!({ "command": "echo two" }), "call_b4"));
        ed.mock.push(MockReply::text("done"));
        ed.lua("require('handoff').prompt('echo')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 2).await;
        assert_eq!(req["id"], "call_b2");
        ed.lua("require('handoff').approve(...)", json!([req["id"], "always"])).await;
        let req = ed.wait_event("HandoffToolApproval", 3).await;
        assert_eq!(req["id"], "call_b4", "the same command was asked again");
        ed.lua("require('handoff').approve(...)", json!([req["id"], "allow"])).await;
        ed.wait_event("HandoffAgentEnd", 2).await;
        let outputs: Vec<String> =
            tool_results(&ed).await.iter().map(|r| r["content"][0]["text"].as_str().unwrap_or("").trim().to_string()).collect();
        assert_eq!(outputs[1..], ["one", "one", "two"], "{outputs:?}");
        // Cancel: the turn stops; no further request reaches the model.
        let before = ed.mock.requests().len();
        ed.mock.push(tool_call_reply("bash", json!({ "command": "echo three" }), "call_b5"));
        ed.mock.set_default(MockReply::text("SHOULD NOT BE ASKED"));
        ed.lua("require('handoff').prompt('again')", json!([])).await;
        let req = ed.wait_event("HandoffToolApproval", 4).await;
        ed.lua("require('handoff').approve(...)", json!([req["id"], "cancel"])).await;
        ed.wait_event("HandoffAgentEnd", 3).await;
        assert_eq!(ed.mock.requests().len(), before + 1);
        let last = tool_results(&ed).await.pop().unwrap();
        assert_eq!(last["isError"], true);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_output_streams_into_the_chat_and_the_stop_key_kills_the_command() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        let pidfile = ed.work_dir().join("pid");
        let command = format!(
            "echo $$ > {}; for i in 1 2 3 4 5 6; do echo line$i; sleep 0.1; done; sleep 600",
            pidfile.display()
        );
        ed.mock.push(tool_call_reply("bash", json!({ "command": command }), "call_s1"));
        ed.mock.set_default(MockReply::text("after the stop"));
        ed.lua("require('handoff').prompt('run it')", json!([])).await;
        wait_pid(&pidfile).await;
        // The command's processes (the sandbox's helper, its pid 1, the shell), found by what
        // they run: the shell's `$$` is a pid of its own namespace.
        let marker = pidfile.display().to_string();
        let pids = common::pids_with(&marker);
        assert!(!pids.is_empty(), "no process runs {marker}");
        // The output shows while the command still runs.
        ed.wait_until("table.concat(T.chat(), '\\n'):find('line5', 1, true) ~= nil", Duration::from_secs(10)).await;
        // (A child bash forked for `sleep 0.1` holds the marker until its exec: it may be gone.)
        assert!(pids.iter().any(|p| process_alive(*p)), "the command runs");
        // The stop key (<C-c> in the chat) stops the run and the command's process group.
        ed.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1])", json!([])).await;
        // The command sleeps ten minutes: the run ending and the shell gone within the hang
        // guards is the stop.
        ed.input("<C-c>").await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        for pid in pids {
            wait_gone(pid, "the stop key").await;
        }
        let results = tool_results(&ed).await;
        assert_eq!(results.len(), 1);
        assert_eq!(results[0]["isError"], true);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quitting_during_a_command_leaves_no_process_behind() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
        let pidfile = ed.work_dir().join("pid");
        let command = format!("echo $$ > {}; sleep 600", pidfile.display());
        ed.mock.push(tool_call_reply("bash", json!({ "command": command }), "call_q1"));
        ed.lua("require('handoff').prompt('run it')", json!([])).await;
        wait_pid(&pidfile).await;
        let pids = common::pids_with(&pidfile.display().to_string());
        assert!(!pids.is_empty());
        let dir = ed.quit().await;
        // The command sleeps ten minutes: gone within the hang guard is the quit ending it.
        for pid in pids {
            wait_gone(pid, ":qa").await;
        }
        drop(dir);
    })
    .await;
}

/// A process's memory figure from /proc (`VmHWM`, `VmRSS`), in KiB.
fn proc_kib(pid: u64, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_printing_100_mb_keeps_the_host_small_and_the_chat_shows_its_end() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
        // The full output's file goes into the test's folder (the host inherits TMPDIR).
        let tmp = ed.dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        ed.lua("vim.env.TMPDIR = ...", json!([tmp])).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        let go = ed.work_dir().join("go");
        // 6,000,000 lines (102 MB), a marker, then it waits for the test before its last line
        // (the markers are spelled so that the command's line in the chat does not contain them).
        let command = format!(
            "yes 'loud output line' | head -n 6000000; printf 'last-%s\\n' before-wait; while [ ! -e {} ]; do sleep 0.02; done; printf 'the-%s\\n' end",
            go.display()
        );
        ed.mock.push(tool_call_reply("bash", json!({ "command": command }), "call_l1"));
        ed.mock.push(MockReply::text("done"));
        ed.lua("require('handoff').prompt('print a lot')", json!([])).await;
        // While it runs, the chat shows the output's last lines and counts all before them.
        ed.wait_until("table.concat(T.chat(), '\\n'):find('last-before-wait', 1, true) ~= nil", Duration::from_secs(40))
            .await;
        assert_eq!(ed.eval("T.count('HandoffToolEnd')").await, json!(0));
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        let chat = chat.as_str().unwrap();
        assert!(chat.ends_with("loud output line\nlast-before-wait\n```"), "{chat}");
        assert!(chat.contains("*… 5999989 earlier lines*"), "{chat}");
        // All of it went through the host, which kept only a tail: far below the output's size.
        let hwm = proc_kib(ed.host_pid().await, "VmHWM");
        assert!(hwm < 40 * 1024, "the host's peak RSS was {hwm} KiB for 102 MB of output");
        std::fs::write(&go, "").unwrap();
        ed.wait_event_for("HandoffAgentEnd", 1, Duration::from_secs(20)).await;
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        // The result's last lines, the lines before them counted whole (most are only in the file).
        let chat = chat.as_str().unwrap();
        assert!(chat.contains("*… 5999993 earlier lines*\n```\nloud output line\n"), "{chat}");
        assert!(chat.contains("last-before-wait\nthe-end\n\n\n[Showing lines 5998004-6000003 of 6000003. Full output: "), "{chat}");
        // The result is the bounded tail with the whole output in a file, as before.
        let results = tool_results(&ed).await;
        let details = &results[0]["details"];
        let total = 6_000_000 * 17 + "last-before-wait\nthe-end\n".len() as u64;
        assert_eq!(details["truncation"]["totalBytes"], json!(total), "{details}");
        let full = Path::new(details["fullOutputPath"].as_str().unwrap());
        assert!(full.starts_with(&tmp), "{}", full.display());
        assert_eq!(std::fs::metadata(full).unwrap().len(), total);
        ed.quit().await;
    })
    .await;
}
