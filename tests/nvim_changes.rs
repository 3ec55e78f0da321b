//! The agent's changes, reviewable, in real headless Neovim: after two scripted edits to two
//! files and a write creating a third, `:HandoffChanges` lists every changed hunk in the quickfix
//! list (newest change first) and `:HandoffDiff` shows a file against its original side by side
//! in diff mode; both after a host restart too, and a new session starts without changes. The
//! model is the loopback mock; the tools act on real files under the `allow_all` policy.

mod common;

use common::nvim::{bounded, Editor};
use common::tool_call_reply;
use handoff_mock::MockReply;
use serde_json::json;

/// The quickfix list as `[file (relative), line, text]` triples.
const QF_ITEMS: &str = "vim.tbl_map(function(i) return { vim.fn.fnamemodify(vim.fn.bufname(i.bufnr), ':.'), i.lnum, i.text } end, vim.fn.getqflist())";
/// Whether a quickfix window is open.
const QF_OPEN: &str = "vim.fn.getqflist({ winid = 0 }).winid ~= 0";
/// The windows of the current tab: `{ name, lines, diff, modifiable }` each, left to right.
const TAB_WINDOWS: &str = "vim.tbl_map(function(w) local b = vim.api.nvim_win_get_buf(w) return { vim.fn.fnamemodify(vim.api.nvim_buf_get_name(b), ':.'), vim.api.nvim_buf_get_lines(b, 0, -1, false), vim.wo[w].diff, vim.bo[b].modifiable } end, vim.api.nvim_tabpage_list_wins(0))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_fill_the_quickfix_list_and_a_file_diffs_against_its_original() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
        let work = ed.work_dir();
        std::fs::write(work.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(work.join("b.txt"), "alpha\nbeta\ngamma\ndelta\n").unwrap();
        // a.txt is open: its edit goes through the buffer.
        ed.command("edit a.txt").await;
        ed.mock.push(tool_call_reply("edit", json!({ "path": "a.txt", "edits": [{ "oldText": "two", "newText": "TWO" }] }), "call_1"));
        ed.mock.push(tool_call_reply(
            "edit",
            json!({ "path": "b.txt", "edits": [{ "oldText": "alpha", "newText": "ALPHA" }, { "oldText": "delta", "newText": "DELTA\nepsilon" }] }),
            "call_2",
        ));
        ed.mock.push(tool_call_reply("write", json!({ "path": "sub/c.txt", "content": "new\nfile\n" }), "call_3"));
        ed.mock.push(MockReply::text("Done."));
        ed.lua("require('handoff').prompt('change the files')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        assert_eq!(std::fs::read_to_string(work.join("b.txt")).unwrap(), "ALPHA\nbeta\ngamma\nDELTA\nepsilon\n");
        let session_id = ed.status().await["session_id"].as_str().unwrap().to_string();

        // One item per changed hunk, the newest change first (a file's hunks top to bottom).
        let expected = json!([
            ["sub/c.txt", 1, "(new file) new"],
            ["b.txt", 1, "ALPHA"],
            ["b.txt", 4, "DELTA"],
            ["a.txt", 2, "TWO"],
        ]);
        ed.command("HandoffChanges").await;
        assert_eq!(ed.eval(QF_ITEMS).await, expected);
        assert_eq!(ed.eval("vim.fn.getqflist({ title = 0 }).title").await, json!(format!("handoff.nvim: changes of {session_id}")));
        assert_eq!(ed.eval(QF_OPEN).await, json!(true));
        ed.command("cclose").await;

        // The file against its state before the agent's first change, side by side.
        ed.command("HandoffDiff b.txt").await;
        assert_eq!(ed.eval("vim.fn.tabpagenr('$')").await, json!(2));
        assert_eq!(
            ed.eval(TAB_WINDOWS).await,
            json!([
                ["handoff://original/b.txt", ["alpha", "beta", "gamma", "delta"], true, false],
                ["b.txt", ["ALPHA", "beta", "gamma", "DELTA", "epsilon"], true, true],
            ])
        );
        // The cursor is in the file itself; the original is a read-only scratch buffer.
        assert_eq!(ed.eval("vim.fn.expand('%:.')").await, json!("b.txt"));
        assert_eq!(ed.eval("vim.bo[vim.fn.bufnr('handoff://original/b.txt')].buftype").await, json!("nofile"));
        ed.command("tabclose").await;
        assert_eq!(ed.eval("vim.fn.bufexists('handoff://original/b.txt')").await, json!(0), "the scratch buffer is wiped");

        // Without an argument: the current buffer's file. A created file is all added.
        ed.command("edit sub/c.txt").await;
        ed.command("HandoffDiff").await;
        assert_eq!(
            ed.eval(TAB_WINDOWS).await,
            json!([["handoff://original/sub/c.txt", [""], true, false], ["sub/c.txt", ["new", "file"], true, true]])
        );
        ed.command("tabclose").await;

        // Completion offers the changed files; a file the agent did not change is a notice.
        let mut completed: Vec<String> = serde_json::from_value(ed.eval("vim.fn.getcompletion('HandoffDiff ', 'cmdline')").await).unwrap();
        completed.sort();
        assert_eq!(completed, ["a.txt", "b.txt", "sub/c.txt"]);
        std::fs::write(work.join("other.txt"), "x\n").unwrap();
        ed.command("HandoffDiff other.txt").await;
        assert_eq!(ed.eval("vim.fn.tabpagenr('$')").await, json!(1));
        assert!(ed.eval("T.noted('did not change other.txt in this session') ~= nil").await == json!(true), "{}", ed.dump().await);

        // The hunks follow the file as it is now: an unsaved line in a.txt's buffer shows.
        ed.command("buffer a.txt").await;
        ed.lua("vim.api.nvim_buf_set_lines(0, -1, -1, false, { 'four' })", json!([])).await;
        ed.command("HandoffChanges").await;
        let items = ed.eval(QF_ITEMS).await;
        assert_eq!(items.as_array().unwrap()[3..], [json!(["a.txt", 2, "TWO"]), json!(["a.txt", 4, "(added) four"])]);
        ed.command("cclose").await;
        ed.command("buffer a.txt | silent undo").await;
        assert_eq!(ed.eval("vim.bo.modified").await, json!(false));

        // The originals survive a restart of the host (the same session is reopened).
        let pid = ed.host_pid().await;
        ed.lua("require('handoff').stop_host()", json!([])).await;
        let stale = ed.eval("vim.fn.getqflist({ id = 0 }).id").await;
        ed.command("HandoffChanges").await;
        assert_ne!(ed.host_pid().await, pid, "a new host");
        // Asked while the session loads, the list is filled once it is open.
        ed.wait_until(&format!("vim.fn.getqflist({{ id = 0 }}).id ~= {stale}"), std::time::Duration::from_secs(5)).await;
        assert_eq!(ed.eval(QF_ITEMS).await, expected);
        ed.command("cclose").await;

        // A new session starts without changes: an empty list, no window, a notice.
        ed.command("HandoffNew").await;
        ed.command("HandoffChanges").await;
        assert_eq!(ed.eval("#vim.fn.getqflist()").await, json!(0));
        assert_eq!(ed.eval(QF_OPEN).await, json!(false));
        assert!(ed.eval("T.noted('the agent changed no files in this session') ~= nil").await == json!(true), "{}", ed.dump().await);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_shows_its_own_changes() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "tools": { "policy": "allow_all" } })).await;
        let work = ed.work_dir();
        std::fs::write(work.join("a.txt"), "one\n").unwrap();
        ed.mock.push(tool_call_reply("write", json!({ "path": "a.txt", "content": "uno\n" }), "call_1"));
        ed.mock.push(MockReply::text("Done."));
        ed.lua("require('handoff').prompt('translate')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let first = ed.session_file().await;
        ed.command("HandoffNew").await;
        ed.wait_event("HandoffSessionSwitch", 1).await;
        ed.lua("require('handoff').resume(...)", json!([first])).await;
        ed.wait_event("HandoffSessionSwitch", 2).await;
        ed.command("HandoffChanges").await;
        assert_eq!(ed.eval(QF_ITEMS).await, json!([["a.txt", 1, "uno"]]));
        ed.quit().await;
    })
    .await;
}
