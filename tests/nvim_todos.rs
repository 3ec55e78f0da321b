//! The model's todo list in real headless Neovim: `:HandoffTodos` shows it and follows it live
//! while the agent runs, `User HandoffTodos` fires on each change, the chat says what changed,
//! `require("handoff").todos()` returns it, and a resumed session shows its own list. The model
//! is the loopback mock; `todo_write` runs unasked under the default policy.

mod common;

use std::time::Duration;

use common::nvim::{bounded, Editor};
use common::todo_call;
use handoff_mock::MockReply;
use serde_json::{json, Value};

fn item(content: &str, active: &str, status: &str) -> Value {
    json!({ "content": content, "status": status, "activeForm": active })
}

/// The lines of the todo window's buffer.
const WINDOW_LINES: &str = "vim.api.nvim_buf_get_lines(require('handoff.state').ui.todos_buf, 0, -1, false)";
/// Windows showing the todo list.
const WINDOWS: &str = "#vim.fn.win_findbuf(require('handoff.state').ui.todos_buf or -1)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_todo_window_follows_the_list_live_and_a_resume_shows_the_sessions_list() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        let windows = ed.eval("#vim.api.nvim_list_wins()").await.as_u64().unwrap();
        ed.command("HandoffTodos").await;
        ed.wait_until(&format!("{WINDOWS} == 1"), Duration::from_secs(5)).await;
        assert_eq!(ed.eval("#vim.api.nvim_list_wins()").await.as_u64().unwrap(), windows + 1);
        assert_eq!(ed.eval(WINDOW_LINES).await, json!(["_No todos._"]));

        let first = json!([
            item("Read the code", "Reading the code", "completed"),
            item("Fix the bug", "Fixing the bug", "in_progress"),
            item("Run the tests", "Running the tests", "pending"),
        ]);
        let done = json!([
            item("Read the code", "Reading the code", "completed"),
            item("Fix the bug", "Fixing the bug", "completed"),
            item("Run the tests", "Running the tests", "completed"),
        ]);
        ed.mock.push(todo_call(first.clone(), "call_t1"));
        // A slow reply while the first list is current: the window shows it during the run.
        ed.mock.push(MockReply::Text {
            chunks: vec!["Fixed ".into(), "it.".into()],
            chunk_delay_ms: 100,
            first_delay_ms: 1_000,
            stop: "stop".into(),
            thinking: Vec::new(),
        });
        // It stopped with open items: reminded, the model completes the list.
        ed.mock.push(todo_call(done.clone(), "call_t2"));
        ed.mock.push(MockReply::text("All done."));
        ed.mock.set_default(MockReply::text("SHOULD NOT BE ASKED"));
        ed.lua("require('handoff').prompt('fix the bug')", json!([])).await;

        let data = ed.wait_event("HandoffTodos", 1).await;
        assert_eq!(data["open"], 2);
        assert_eq!(data["total"], 3);
        assert_eq!(data["todos"], first);
        // The window and the run's state read at once, in one evaluation: a second request for
        // the state could come after the run on a busy machine.
        let shown = ed
            .wait_until(
                &format!(
                    "vim.deep_equal({WINDOW_LINES}, {{ '- [x] Read the code', '- [~] Fixing the bug', '- [ ] Run the tests' }}) \
                     and {{ busy = require('handoff').status().busy }}"
                ),
                Duration::from_secs(5),
            )
            .await;
        assert_eq!(shown["busy"], true, "the window showed the list only after the run");
        // The item in progress is highlighted.
        let marked = ed
            .eval(
                "vim.tbl_map(function(m) return m[2] end, vim.tbl_filter(function(m) return m[4].line_hl_group == 'HandoffTodoInProgress' end, \
                 vim.api.nvim_buf_get_extmarks(require('handoff.state').ui.todos_buf, -1, 0, -1, { details = true })))",
            )
            .await;
        assert_eq!(marked, json!([1]));
        assert_eq!(ed.eval("require('handoff').todos()").await, first);

        ed.wait_event("HandoffAgentEnd", 1).await;
        ed.wait_until(
            &format!("vim.deep_equal({WINDOW_LINES}, {{ '- [x] Read the code', '- [x] Fix the bug', '- [x] Run the tests' }})"),
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(ed.eval("T.count('HandoffTodos')").await, json!(2));
        let data = ed.eval("T.last('HandoffTodos')").await;
        assert_eq!((data["open"].clone(), data["total"].clone()), (json!(0), json!(3)));
        assert_eq!(ed.eval("require('handoff').todos()").await, done);
        // The chat says what changed, and shows the reminder as the user message it is.
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        let chat = chat.as_str().unwrap();
        assert!(chat.contains("*Todos: 2 open of 3*"), "{chat}");
        assert!(chat.contains("*Todos: all 3 done*"), "{chat}");
        assert!(chat.contains("Your todo list still has 2 open items:"), "{chat}");
        assert_eq!(ed.mock.requests().len(), 4);

        // A new session has no list; resuming the old one brings its list back.
        let old = ed.session_file().await;
        ed.command("HandoffNew").await;
        ed.wait_event("HandoffTodos", 3).await;
        assert_eq!(ed.eval(WINDOW_LINES).await, json!(["_No todos._"]));
        assert_eq!(ed.eval("require('handoff').todos()").await, json!([]));
        ed.lua("require('handoff').resume(...)", json!([old])).await;
        let data = ed.wait_event("HandoffTodos", 4).await;
        assert_eq!(data["todos"], done);
        assert_eq!(ed.eval(WINDOW_LINES).await, json!(["- [x] Read the code", "- [x] Fix the bug", "- [x] Run the tests"]));

        // `q` in the window closes it.
        ed.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(require('handoff.state').ui.todos_buf)[1])", json!([])).await;
        ed.input("q").await;
        ed.wait_until(&format!("{WINDOWS} == 0"), Duration::from_secs(5)).await;
        assert_eq!(ed.eval("#vim.api.nvim_list_wins()").await.as_u64().unwrap(), windows);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_with_a_list_shows_it_at_once() {
    bounded(async {
        // A list left open in this session; then the host restarts on the same file.
        let ed = Editor::start().await;
        let list = json!([item("Plan", "Planning", "in_progress"), item("Ship", "Shipping", "pending")]);
        ed.mock.push(todo_call(list.clone(), "call_p1"));
        // Stops cut off (no reminder for that), leaving the list open.
        ed.mock.push(MockReply::Text {
            chunks: vec!["cut".into()],
            chunk_delay_ms: 0,
            first_delay_ms: 0,
            stop: "length".into(),
            thinking: Vec::new(),
        });
        ed.lua("require('handoff').prompt('plan it')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        let file = ed.session_file().await;
        ed.lua("require('handoff').stop_host()", json!([])).await;
        ed.wait_until("require('handoff.state').chan == nil", Duration::from_secs(5)).await;
        // The host starts again on the same file: its transcript carries the list.
        ed.lua("require('handoff.state').todos = {}", json!([])).await;
        ed.command("HandoffTodos").await;
        ed.wait_until(
            "vim.deep_equal(require('handoff').todos(), { { content = 'Plan', status = 'in_progress', activeForm = 'Planning' }, { content = 'Ship', status = 'pending', activeForm = 'Shipping' } })",
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(ed.session_file().await, file);
        ed.wait_until(
            &format!("vim.deep_equal({WINDOW_LINES}, {{ '- [~] Planning', '- [ ] Ship' }})"),
            Duration::from_secs(5),
        )
        .await;
        ed.quit().await;
    })
    .await;
}
