//! End-to-end: real headless Neovim 0.11, the plugin from this checkout, the built host, and a
//! loopback mock model. Needs `NVIM_BIN` (scripts/test.sh sets it) or the checkout's `.venv`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use handoff_mock::MockReply;
use serde_json::{json, Value};
use common::nvim::{bounded, endless, jsonl, user_texts, wait_gone, Editor, DOC};
use common::HANG_GUARD;




#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_streams_the_reply_into_the_chat() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.mock.push(MockReply::Text {
            chunks: vec!["Hel".into(), "lo wor".into(), "ld\nsecond ".into(), "line".into()],
            // ~2.4 s in all: time for a busy machine to see it mid-stream.
            chunk_delay_ms: 400,
            first_delay_ms: 0,
            stop: "stop".into(),
            thinking: vec!["Pondering ".into(), "deeply\nstill".into()],
        });
        ed.lua("require('handoff').prompt('hello there')", json!([])).await;
        ed.wait_event("HandoffAgentStart", 1).await;
        // The indicator runs while the reply streams, with elapsed time and tokens (both read in
        // one evaluation: a second request could come after the reply on a busy machine).
        let seen = ed
            .wait_until(
                "(require('handoff.chat').indicator_text() or ''):match('^Generating….* tokens$') \
                 and { indicator = require('handoff.chat').indicator_text(), busy = require('handoff').status().busy }",
                Duration::from_secs(5),
            )
            .await;
        assert!(seen["indicator"].as_str().unwrap().contains('s'), "{seen}");
        assert_eq!(seen["busy"], json!(true));
        let end = ed.wait_event("HandoffAgentEnd", 1).await;
        assert_eq!(end["stop_reason"], "stop");
        let chat: Vec<String> = serde_json::from_value(ed.eval("T.chat()").await).unwrap();
        let text = chat.join("\n");
        assert!(text.contains("## You\n\nhello there"), "{text}");
        assert!(text.contains("Hello world\nsecond line"), "{text}");
        // Thinking is shown as a quote before the answer.
        assert!(text.contains("> Pondering deeply\n> still\n\nHello world"), "{text}");
        // Idle once the host's lifecycle record says so (it follows the run's end record).
        ed.wait_until("require('handoff').status().busy == false", std::time::Duration::from_secs(5)).await;
        let status = ed.status().await;
        assert_eq!(status["busy"], json!(false));
        assert_eq!(ed.eval("require('handoff.chat').indicator_text()").await, Value::Null);
        assert_eq!(end["session_file"], status["session_file"]);
        assert!(user_texts(&ed.mock).iter().any(|t| t == "hello there"));
        // The prompt and the reply are in the session file.
        let lines = jsonl(std::path::Path::new(status["session_file"].as_str().unwrap()));
        assert_eq!(lines[0]["type"], "session");
        assert!(lines.iter().any(|l| l["message"]["role"] == "assistant"
            && l["message"]["content"][0]["thinking"] == "Pondering deeply\nstill"
            && l["message"]["content"][1]["text"] == "Hello world\nsecond line"));
        // Reopening the chat from the session renders the same text as the stream did.
        let streamed = ed.eval("table.concat(T.chat(), '\\n')").await;
        let reply = ed.eval("require('handoff.host').request('transcript')").await;
        ed.lua("require('handoff.host').apply_transcript(...)", json!([reply])).await;
        assert_eq!(ed.eval("table.concat(T.chat(), '\\n')").await, streamed);
        ed.quit().await;
    })
    .await;
}

/// Checks everything a successful handoff must leave behind; returns the new session file.
async fn assert_handoff_done(ed: &Editor, old_file: &str, focus: &str) -> String {
    let done = ed.wait_event("HandoffDone", 1).await;
    assert_eq!(done["document"], DOC);
    assert_eq!(done["parent_session"], old_file);
    assert_eq!(done["missing_sections"], json!([]));
    let new_file = done["session_file"].as_str().unwrap().to_string();
    assert_ne!(new_file, old_file);
    // The new session on disk: header with parent, model and thinking level, the handoff entry.
    let lines = jsonl(std::path::Path::new(&new_file));
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["parentSession"], old_file);
    let kinds: Vec<&str> = lines[1..].iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change", "custom_message"], "{lines:?}");
    assert_eq!(lines[1]["modelId"], "mock-model");
    assert_eq!(lines[3]["customType"], "handoff");
    assert_eq!(lines[3]["display"], true);
    let content = serde_json::to_string(&lines[3]["content"]).unwrap();
    assert!(content.contains("<handoff-context>") && content.contains("Ship the parser."), "{content}");
    // The session switch was announced with both files.
    let switch = ed.wait_event("HandoffSessionSwitch", 1).await;
    assert_eq!(switch["old"], old_file);
    assert_eq!(switch["new"], new_file.as_str());
    // The document in a split: markdown, named after the new session.
    let stem = std::path::Path::new(&new_file).file_stem().unwrap().to_str().unwrap().to_string();
    let view = ed
        .lua(
            "local name = ... for _, w in ipairs(vim.api.nvim_list_wins()) do local b = vim.api.nvim_win_get_buf(w) \
             if vim.api.nvim_buf_get_name(b) == name then return { ft = vim.bo[b].filetype, lines = vim.api.nvim_buf_get_lines(b, 0, -1, false) } end end",
            json!([format!("handoff://{stem}.md")]),
        )
        .await;
    assert_eq!(view["ft"], "markdown", "no window shows handoff://{stem}.md\n{}", ed.dump().await);
    assert_eq!(view["lines"], json!(DOC.split('\n').collect::<Vec<_>>()));
    // The chat was rebuilt from the new session: the handoff context, not the old transcript.
    let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
    let chat = chat.as_str().unwrap();
    assert!(chat.contains("## Handoff context"), "{chat}");
    assert!(chat.contains("Ship the parser."), "{chat}");
    assert!(!chat.contains("first question"), "old transcript still shown:\n{chat}");
    assert!(chat.contains("New session started with handoff context"), "{chat}");
    assert!(ed.eval("T.noted('New session started with handoff context') ~= nil").await == json!(true));
    let status = ed.status().await;
    assert_eq!(status["session_file"], new_file.as_str());
    assert_eq!(status["generating_handoff"], false);
    // The model was asked with the focus, and the old session kept the attempt.
    let texts = user_texts(&ed.mock);
    assert!(texts.last().unwrap().ends_with(&format!("Additional focus: {focus}")), "{:?}", texts.last());
    new_file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_command_starts_a_new_session_with_the_document() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("first question", "first answer").await;
        let old = ed.session_file().await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff focus on the parser").await;
        let start = ed.wait_event("HandoffStart", 1).await;
        assert_eq!(start["focus"], "focus on the parser");
        assert_handoff_done(&ed, &old, "focus on the parser").await;
        // The old session holds the internal prompt and the document as ordinary messages.
        let old_lines = jsonl(std::path::Path::new(&old));
        assert!(old_lines.iter().any(|l| l["message"]["role"] == "assistant"
            && l["message"]["content"][0]["text"] == DOC));
        assert_eq!(ed.session_files().len(), 2);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_handoff_typed_in_the_prompt_buffer_is_intercepted() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("first question", "first answer").await;
        let old = ed.session_file().await;
        ed.mock.push(MockReply::text(DOC));
        // Typed for real: insert mode, the text, then the submit key.
        let in_prompt = ed.eval("vim.api.nvim_get_current_buf() == require('handoff.chat').prompt_buf").await;
        assert_eq!(in_prompt, json!(true), "open_chat() must focus the prompt");
        ed.input("i/handoff keep it short").await;
        ed.wait_until("vim.api.nvim_buf_get_lines(require('handoff.chat').prompt_buf, 0, 1, false)[1] == '/handoff keep it short'", Duration::from_secs(5)).await;
        ed.input("<C-s>").await;
        assert_handoff_done(&ed, &old, "keep it short").await;
        assert_eq!(ed.eval("vim.api.nvim_buf_get_lines(require('handoff.chat').prompt_buf, 0, -1, false)").await, json!([""]));
        // The model never saw the command as a prompt.
        for text in user_texts(&ed.mock) {
            assert!(!text.trim_start().starts_with("/handoff"), "the mock saw {text:?}");
        }
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_cancels_the_handoff_and_restores_the_earlier_mapping() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("first question", "first answer").await;
        let old = ed.session_file().await;
        let before = std::fs::read_to_string(&old).unwrap();
        // A mapping of the user's own in the prompt buffer, which must survive.
        ed.lua(
            "vim.keymap.set('n', '<Esc>', '<Cmd>let g:user_esc = 1<CR>', { buffer = require('handoff.chat').prompt_buf })",
            json!([]),
        )
        .await;
        ed.input("<Esc>").await; // normal mode in the prompt window
        ed.wait_until("vim.g.user_esc == 1 and vim.fn.mode() == 'n'", Duration::from_secs(5)).await;
        ed.lua("vim.g.user_esc = 0", json!([])).await;
        ed.mock.push(endless()); // minutes if nobody cancels
        ed.command("Handoff").await;
        ed.wait_event("HandoffStart", 1).await;
        ed.wait_until("require('handoff').status().generating_handoff and require('handoff.state').tokens > 0", Duration::from_secs(5)).await;
        let indicator = ed.eval("require('handoff.chat').indicator_text()").await;
        assert!(indicator.as_str().unwrap().starts_with("Generating handoff… <Esc> to cancel"), "{indicator}");
        // A second :Handoff and a prompt meanwhile are refused; nothing reaches the model.
        ed.command("Handoff").await;
        ed.wait_until("T.noted('Cannot hand off while a response is in progress')", Duration::from_secs(5)).await;
        ed.lua("require('handoff').prompt('typed meanwhile')", json!([])).await;
        ed.wait_until("T.noted('A handoff is being generated')", Duration::from_secs(5)).await;
        // Cancelled (not Done, which the document would have given minutes later).
        ed.input("<Esc>").await;
        ed.wait_event("HandoffCancelled", 1).await;
        assert_eq!(ed.eval("vim.g.user_esc").await, json!(0), "the user's mapping ran instead of the cancel");
        assert!(!user_texts(&ed.mock).iter().any(|t| t == "typed meanwhile"));
        assert_eq!(ed.eval("T.count('HandoffStart')").await, json!(1));
        assert_eq!(ed.eval("T.count('HandoffDone')").await, json!(0));
        let note = ed.eval("T.noted('Handoff cancelled')").await;
        assert_eq!(note["level"], json!(4), "{note}"); // vim.log.levels.ERROR
        // No new session; the old file intact, plus the messages of the attempt.
        assert_eq!(ed.session_files().len(), 1, "{:?}", ed.session_files());
        let after = std::fs::read_to_string(&old).unwrap();
        assert!(after.starts_with(&before), "the old session was rewritten");
        let status = ed.status().await;
        assert_eq!(status["session_file"], old.as_str());
        assert_eq!(status["generating_handoff"], false);
        // The user's mapping is back in the prompt buffer; the chat buffer has none left.
        let maps = ed
            .eval("{ prompt = vim.api.nvim_buf_call(require('handoff.chat').prompt_buf, function() return vim.fn.maparg('<Esc>', 'n') end), \
                     chat = vim.api.nvim_buf_call(require('handoff.chat').chat_buf, function() return vim.fn.maparg('<Esc>', 'n') end) }")
            .await;
        assert_eq!(maps["prompt"], "<Cmd>let g:user_esc = 1<CR>", "{maps}");
        assert_eq!(maps["chat"], "", "{maps}");
        ed.input("<Esc>").await;
        ed.wait_until("vim.g.user_esc == 1", Duration::from_secs(5)).await;
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failure_reports_handoff_failed() {
    bounded(async {
        let ed = Editor::start().await;
        ed.converse("first question", "first answer").await;
        let old = ed.session_file().await;
        ed.mock.push(MockReply::Status {
            status: 401,
            body: r#"{"error":{"message":"Incorrect API key provided"}}"#.into(),
            retry_after: None,
        });
        ed.command("Handoff").await;
        let failed = ed.wait_event("HandoffFailed", 1).await;
        let message = failed["message"].as_str().unwrap();
        assert!(message.contains("401") && message.contains("Incorrect API key"), "{message}");
        let note = ed.eval("T.noted('Handoff failed: ')").await;
        assert_eq!(note["level"], json!(4), "{note}");
        assert!(note["msg"].as_str().unwrap().contains("401"));
        assert_eq!(ed.eval("T.count('HandoffDone') + T.count('HandoffCancelled')").await, json!(0));
        assert_eq!(ed.session_files().len(), 1);
        assert_eq!(ed.status().await["session_file"], old.as_str());
        assert_eq!(ed.eval("require('handoff.keymaps').esc_installed()").await, json!(false));
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_is_refused_with_the_controllers_messages() {
    bounded(async {
        let ed = Editor::start().await;
        ed.command("Handoff").await;
        let note = ed.wait_until("T.noted('Nothing to hand off (no messages yet)')", Duration::from_secs(5)).await;
        assert_eq!(note["level"], json!(3)); // WARN
        ed.converse("first question", "first answer").await;
        ed.mock.push(endless());
        ed.lua("require('handoff').prompt('a long one')", json!([])).await;
        ed.wait_until("require('handoff').status().busy", Duration::from_secs(5)).await;
        ed.command("Handoff").await;
        let note = ed.wait_until("T.noted('Cannot hand off while a response is in progress')", Duration::from_secs(5)).await;
        assert_eq!(note["level"], json!(3));
        assert_eq!(ed.eval("T.count('HandoffStart')").await, json!(0));
        // The stop key's action stops the response.
        ed.lua("require('handoff').abort()", json!([])).await;
        let end = ed.wait_event("HandoffAgentEnd", 2).await;
        assert_eq!(end["stop_reason"], "aborted");
        assert_eq!(ed.session_files().len(), 1);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_host_is_reported_and_restarted_with_the_same_session() {
    bounded(async {
        let ed = Editor::start().await;
        ed.converse("first question", "first answer").await;
        let session = ed.session_file().await;
        let pid = ed.host_pid().await;
        ed.second_prompt_streaming().await;
        let killed = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
        assert!(killed.success());
        let note = ed.wait_until("T.noted('the host exited unexpectedly')", Duration::from_secs(5)).await;
        assert_eq!(note["level"], json!(4));
        let end = ed.wait_event("HandoffAgentEnd", 2).await;
        assert_eq!(end["stop_reason"], "error");
        let status = ed.status().await;
        assert_eq!(status["busy"], false);
        assert_eq!(status["running"], false);
        // Next use restarts the host on the same session.
        ed.converse("third question", "third answer").await;
        let new_pid = ed.host_pid().await;
        assert_ne!(new_pid, pid);
        assert_eq!(ed.status().await["session_file"], session.as_str());
        let texts: Vec<String> = jsonl(std::path::Path::new(&session))
            .iter()
            .filter_map(|l| l["message"]["content"][0]["text"].as_str().map(str::to_string))
            .collect();
        for want in ["first question", "first answer", "second question", "third question", "third answer"] {
            assert!(texts.iter().any(|t| t == want), "{want:?} missing from {texts:?}");
        }
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("third answer"));
        assert_eq!(ed.session_files().len(), 1);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_stays_responsive_while_the_model_streams_at_full_speed() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        // Count the batches the host sends, and how late a 10 ms timer fires at worst.
        ed.lua(
            r#"
            local events = require('handoff.events')
            local dispatch = events.dispatch
            T.batches = 0
            events.dispatch = function(batch) T.batches = T.batches + 1; return dispatch(batch) end
            T.worst = 0
            T.t0 = vim.uv.hrtime()
            local last = T.t0
            T.timer = vim.uv.new_timer()
            T.timer:start(10, 10, function()
              local now = vim.uv.hrtime()
              T.worst = math.max(T.worst, (now - last) / 1e6 - 10)
              last = now
            end)
            "#,
            json!([]),
        )
        .await;
        // Long enough (2–3 s) that the scheduler's own hiccups on a loaded 2-core machine (275 ms
        // was seen in a full run against a 1 s stream) stay well under the bound below.
        let n = 50_000;
        ed.mock.push(MockReply::long(n));
        ed.lua("require('handoff').prompt('stream a lot')", json!([])).await;
        // 2–3 s on a quiet machine, over 8 s on a busy one: the wait only stops a hang.
        ed.wait_event_for("HandoffAgentEnd", 1, HANG_GUARD).await;
        let stream_ms = ed.eval("(function() T.timer:stop() return (vim.uv.hrtime() - T.t0) / 1e6 end)()").await.as_f64().unwrap();
        let worst = ed.eval("T.worst").await.as_f64().unwrap();
        let batches = ed.eval("T.batches").await.as_u64().unwrap();
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        let chat = chat.as_str().unwrap();
        assert!(chat.contains(&format!("w{} ", n - 1)), "the reply is incomplete");
        assert!(chat.contains("w0 w1 w2 "), "the reply is out of order");
        eprintln!("worst timer lateness {worst:.1} ms of a {stream_ms:.0} ms stream, {batches} batches for {n} chunks");
        // Against the stream's own time, so a busy machine (slowing both) does not decide the
        // verdict; the absolute figures are doc/benchmarks.md §4's.
        assert!(worst < (stream_ms / 4.0).max(100.0), "the main loop stalled for {worst:.1} ms of a {stream_ms:.0} ms stream");
        assert!(batches < (n as u64) / 10, "deltas were not coalesced: {batches} batches for {n} chunks");
        ed.quit().await;
    })
    .await;
}


/// The local SmolLM2 server (`scripts/local-model.sh start`), killed when dropped.
struct LocalModel(String);

impl LocalModel {
    /// Starts it; returns it and its base URL. A model that cannot start fails the test.
    fn start() -> (LocalModel, String) {
        let root = env!("CARGO_MANIFEST_DIR");
        let portfile = tempfile::NamedTempFile::new().unwrap();
        let started = std::process::Command::new(format!("{root}/scripts/local-model.sh"))
            .arg("start")
            .arg(portfile.path())
            .status()
            .unwrap();
        assert!(started.success(), "scripts/local-model.sh start failed");
        let line = std::fs::read_to_string(portfile.path()).unwrap();
        let (pid, url) = line.trim().split_once(' ').unwrap();
        (LocalModel(pid.to_string()), url.to_string())
    }
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill").arg(&self.0).status();
    }
}

/// The whole `:Handoff` flow against the real local SmolLM2 server (`scripts/local-model.sh`);
/// checks structure, never wording: the 135M model is far too small to write a good document.
/// Ignored by a plain `cargo test`, so that it is either run or reported as ignored, never
/// passed without a model: scripts/test.sh installs the model and runs it on its own
/// (`cargo test --test nvim_e2e -- --ignored --exact handoff_flow_against_the_local_model`)
/// unless HANDOFF_SKIP_LOCAL_MODEL=1. Run that way, a model that cannot start fails the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local SmolLM2 server: scripts/test.sh runs it (--ignored) unless HANDOFF_SKIP_LOCAL_MODEL=1"]
async fn handoff_flow_against_the_local_model() {
    let (_server, url) = LocalModel::start();
    let url = url.as_str();
    tokio::time::timeout(Duration::from_secs(240), async {
        // Room for a whole document (a reply cut at max_tokens is a failed handoff).
        let ed = Editor::start_with(Some(json!({
            "api": "openai", "base_url": url, "model": "smollm2-135m", "provider_name": "local",
            "context_window": 8192, "max_tokens": 3000, "timeout": 60,
        })))
        .await;
        ed.lua("require('handoff').prompt('We are writing a JSON parser in Rust. The lexer is done. Say OK.')", json!([]))
            .await;
        let end = ed.wait_event_for("HandoffAgentEnd", 1, Duration::from_secs(60)).await;
        assert_ne!(end["stop_reason"], "error", "{}", ed.dump().await);
        let old = ed.session_file().await;
        ed.command("Handoff keep it short").await;
        ed.wait_until("T.count('HandoffDone') + T.count('HandoffFailed') + T.count('HandoffCancelled') > 0", Duration::from_secs(180))
            .await;
        // Structure only: a document, a new session with its parent and the handoff entry. Any
        // other outcome fails the test, saying which (a failure or a cancel is never a pass).
        let failed = ed.eval("T.last('HandoffFailed')").await;
        assert!(failed.is_null(), "the handoff failed against the local model: {failed}\n{}", ed.dump().await);
        assert_eq!(ed.eval("T.count('HandoffCancelled')").await, json!(0), "the handoff was cancelled\n{}", ed.dump().await);
        let done = ed.wait_event("HandoffDone", 1).await;
        assert!(!done["document"].as_str().unwrap().trim().is_empty());
        assert_eq!(done["parent_session"], old.as_str());
        assert_ne!(ed.status().await["session_file"], old.as_str(), "no switch to the new session");
        let lines = jsonl(std::path::Path::new(done["session_file"].as_str().unwrap()));
        assert_eq!(lines[0]["parentSession"], old.as_str());
        assert!(lines.iter().any(|l| l["type"] == "custom_message" && l["customType"] == "handoff"));
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("## Handoff context"));
        ed.quit().await;
    })
    .await
    .expect("the local-model handoff took longer than 240 s");
}

/// The real local model (llama.cpp's server, 8192 tokens of context) refuses a request larger
/// than its window: the overflow is recognised from the server's own error, the session hands
/// off by itself (the handoff request trimmed until the server takes it) and the work goes on in
/// the new session. The configured window is larger than the server's, as a user's guess may
/// be, so the wall's estimate lets the request go out and the server is the one to refuse it.
/// Run by scripts/test.sh with the test above (`-- --ignored local_model`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local SmolLM2 server: scripts/test.sh runs it (--ignored) unless HANDOFF_SKIP_LOCAL_MODEL=1"]
async fn automatic_handoff_at_a_real_overflow_of_the_local_model() {
    let (_server, url) = LocalModel::start();
    let url = url.as_str();
    // Each reply of the model takes up to two minutes on a busy 2-core machine, and the turn
    // after the handoff up to three of them (a CI run at load 7–10 took over 240 s for it): the
    // limits below only stop a hung test, none is a verdict on speed.
    tokio::time::timeout(Duration::from_secs(1500), async {
        let ed = Editor::start_with(Some(json!({
            "api": "openai", "base_url": url, "model": "smollm2-135m", "provider_name": "local",
            "context_window": 12000, "max_tokens": 1500, "timeout": 120,
        })))
        .await;
        ed.lua(
            "require('handoff').setup({ bin = require('handoff.config').options.bin, provider = require('handoff.config').options.provider, handoff = { threshold = 0.9 } })",
            json!([]),
        )
        .await;
        ed.lua("require('handoff').prompt('We are counting numbers for a report. Say OK.')", json!([])).await;
        let end = ed.wait_event_for("HandoffAgentEnd", 1, Duration::from_secs(90)).await;
        assert_ne!(end["stop_reason"], "error", "{}", ed.dump().await);
        let old = ed.session_file().await;
        // Digits and spaces: about a token per character for the model, a quarter of that for
        // our estimate, so the request goes out and the server refuses it.
        let numbers = "7 3 ".repeat(5_000);
        ed.lua("require('handoff').prompt('Add up these numbers: ' .. ...)", json!([numbers])).await;
        let start = ed.wait_event_for("HandoffAutoStart", 1, Duration::from_secs(90)).await;
        assert_eq!(start["reason"], "overflow", "{start}\n{}", ed.dump().await);
        let done = ed.wait_event_for("HandoffAutoEnd", 1, Duration::from_secs(600)).await;
        assert_eq!(done["result"], "done", "{done}\n{}", ed.dump().await);
        assert_eq!(done["parent_session"], old.as_str());
        // The continuation ran in the new session and the model answered there.
        ed.wait_until("T.count('HandoffAgentEnd') >= 3 and not require('handoff').status().busy", Duration::from_secs(600)).await;
        let new = ed.session_file().await;
        assert_ne!(new, old);
        let lines = jsonl(std::path::Path::new(&new));
        assert_eq!(lines[0]["parentSession"], old.as_str());
        let handoff = lines.iter().find(|l| l["customType"] == "handoff").expect("no handoff entry");
        assert_eq!(handoff["details"]["auto"]["reason"], "overflow");
        assert!(lines.iter().any(|l| l["message"]["handoffAuthor"] == "continuation"), "no continuation");
        let last = lines.iter().rev().find(|l| l["message"]["role"] == "assistant").expect("no reply in the new session");
        assert_ne!(last["message"]["stopReason"], "error", "{last}");
        ed.quit().await;
    })
    .await
    .expect("the local-model overflow took longer than 540 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_buffer_slash_commands_complete_and_run() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        // Typing `/` at the start opens the completion menu with the builtin commands.
        ed.input("i/").await;
        let words = ed
            .wait_until(
                "(function() local i = vim.fn.complete_info({ 'items' }).items; \
                 if #i == 0 then return nil end; return vim.tbl_map(function(x) return x.word .. ' ' .. x.menu end, i) end)()",
                Duration::from_secs(5),
            )
            .await;
        let words: Vec<String> = serde_json::from_value(words).unwrap();
        assert!(words.contains(&"/handoff [--to AGENT] [focus instructions]".to_string()), "{words:?}");
        for w in ["/new ", "/sessions ", "/model [name]"] {
            assert!(words.contains(&w.to_string()), "{w:?} not in {words:?}");
        }
        // The argument hint shows once the command is typed.
        ed.input("<C-e><C-u>/handoff ").await;
        let hint = ed
            .wait_until(
                "(function() local m = vim.api.nvim_buf_get_extmarks(require('handoff.chat').prompt_buf, -1, 0, -1, { details = true }); \
                 for _, x in ipairs(m) do if x[4].virt_text then return x[4].virt_text[1][1] end end end)()",
                Duration::from_secs(5),
            )
            .await;
        assert!(hint.as_str().unwrap().contains("[focus instructions]"), "{hint}");
        ed.input("<Esc>").await;
        ed.lua("vim.api.nvim_buf_set_lines(require('handoff.chat').prompt_buf, 0, -1, false, {})", json!([])).await;
        ed.converse("first question", "first answer").await;
        let first = ed.session_file().await;
        // /model switches the model: recorded in the session, used by the next request.
        ed.lua("require('handoff.commands').run('/model other-model')", json!([])).await;
        assert_eq!(ed.status().await["model"], "other-model");
        ed.converse("second question", "second answer").await;
        assert_eq!(ed.mock.requests().last().unwrap().body["model"], "other-model");
        let lines = jsonl(std::path::Path::new(&first));
        assert!(lines.iter().any(|l| l["type"] == "model_change" && l["modelId"] == "other-model"));
        // /new starts an empty session and says so.
        ed.lua("require('handoff.commands').run('/new')", json!([])).await;
        let switch = ed.wait_event("HandoffSessionSwitch", 1).await;
        assert_eq!(switch["reason"], "new");
        assert_eq!(switch["old"], first.as_str());
        assert_ne!(ed.status().await["session_file"], first.as_str());
        ed.wait_until("not table.concat(T.chat(), '\\n'):find('first question')", Duration::from_secs(5)).await;
        // /sessions resumes through vim.ui.select.
        ed.lua(
            "local want = ... vim.ui.select = function(items, opts, cb) T.choices = vim.tbl_map(opts.format_item, items) \
             for _, it in ipairs(items) do if it.path == want then return cb(it) end end end",
            json!([first]),
        )
        .await;
        ed.lua("require('handoff.commands').run('/sessions')", json!([])).await;
        let switch = ed.wait_event("HandoffSessionSwitch", 2).await;
        assert_eq!(switch["reason"], "resume");
        assert_eq!(ed.status().await["session_file"], first.as_str());
        ed.wait_until("table.concat(T.chat(), '\\n'):find('second answer')", Duration::from_secs(5)).await;
        // None of the commands reached the model.
        for text in user_texts(&ed.mock) {
            assert!(!text.starts_with('/'), "the mock saw {text:?}");
        }
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quitting_during_a_reply_stops_the_host_promptly_and_keeps_the_session_whole() {
    bounded(async {
        let ed = Editor::start().await;
        ed.converse("first question", "first answer").await;
        let session = ed.session_file().await;
        let pid = ed.host_pid().await;
        ed.second_prompt_streaming().await;
        let _dir = ed.quit().await;
        // The reply streams for minutes more: the host gone within the hang guard is the quit
        // stopping it.
        wait_gone(pid as u32, ":qa").await;
        // Every line parses; the prompt and the stopped reply are recorded.
        let lines = jsonl(std::path::Path::new(&session));
        assert!(lines.iter().any(|l| l["message"]["content"][0]["text"] == "second question"));
        let last = lines.last().unwrap();
        assert_eq!(last["message"]["role"], "assistant", "{last}");
        assert_eq!(last["message"]["stopReason"], "aborted", "{last}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_opens_on_its_latest_page_and_cr_shows_earlier_ones_in_place() {
    bounded(async {
        let ed = Editor::start().await;
        // 500 messages: the chat shows the last 200 (a page) and offers the rest a page at a time.
        let path = ed.dir.path().join("long.jsonl");
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"long-1","timestamp":"2026-11-29T20:00:00.000Z","cwd":"/p"}"#,
        );
        let mut parent = "null".to_string();
        for i in 0..500 {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            text.push_str(&format!(
                "\n{{\"type\":\"message\",\"id\":\"{i:08x}\",\"parentId\":{parent},\"timestamp\":\"2026-11-29T20:00:00.000Z\",\"message\":{{\"role\":\"{role}\",\"content\":\"message number {i}\",\"timestamp\":{i}}}}}"
            ));
            parent = format!("\"{i:08x}\"");
        }
        std::fs::write(&path, text + "\n").unwrap();
        ed.lua("require('handoff').open_chat()", json!([])).await;
        assert_eq!(ed.lua("return require('handoff').resume(...)", json!([path])).await, json!(true));
        let chat = "table.concat(T.chat(), '\\n')";
        ed.wait_until(&format!("{chat}:find('message number 499', 1, true) ~= nil"), Duration::from_secs(10)).await;
        let shown = ed.eval(chat).await.as_str().unwrap().to_string();
        assert!(shown.contains("300 earlier items not shown"), "{shown}");
        assert!(shown.contains("message number 300\n") && !shown.contains("message number 299\n"));
        // <CR> on that line: 200 more, and the view stays on what was the first item.
        let row = ed.eval("require('handoff.chat').earlier_row").await.as_u64().unwrap();
        ed.lua(
            "vim.api.nvim_set_current_win(vim.fn.bufwinid(require('handoff.chat').chat_buf)) \
             vim.api.nvim_win_set_cursor(0, { ... + 1, 0 })",
            json!([row]),
        )
        .await;
        ed.input("<CR>").await;
        ed.wait_until(&format!("{chat}:find('100 earlier items not shown', 1, true) ~= nil"), Duration::from_secs(10))
            .await;
        let cursor_line = ed.eval("vim.api.nvim_get_current_line()").await;
        assert_eq!(cursor_line, json!("## You"), "the view moved");
        let below = ed.eval("vim.fn.getline(vim.fn.line('.') + 2)").await;
        assert_eq!(below, json!("message number 300"));
        // Elsewhere <CR> only moves the cursor; on the line again, the rest.
        ed.input("gg<CR>").await;
        assert_eq!(ed.eval("vim.fn.line('.')").await, json!(2));
        let row = ed.eval("require('handoff.chat').earlier_row").await.as_u64().unwrap();
        ed.lua("vim.api.nvim_win_set_cursor(0, { ... + 1, 0 })", json!([row])).await;
        ed.input("<CR>").await;
        ed.wait_until(&format!("{chat}:find('message number 0\\n', 1, true) ~= nil"), Duration::from_secs(10)).await;
        let all = ed.eval(chat).await.as_str().unwrap().to_string();
        assert!(!all.contains("earlier items"), "{all}");
        assert_eq!(all.matches("message number ").count(), 500);
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_and_global_keymaps_from_setup_are_honoured() {
    bounded(async {
        let ed = Editor::start().await;
        let extra = json!({
            "layout": { "position": "left", "width": 30, "prompt_height": 4 },
            "keymaps": { "global": { "chat": "<Space>hc" } },
        });
        ed.lua(
            "require('handoff').setup(vim.tbl_deep_extend('force', require('handoff.config').options, ...))",
            json!([extra]),
        )
        .await;
        // The global mapping opens the chat where the layout says, and closes it again.
        ed.input("<Space>hc").await;
        ed.wait_until("require('handoff.chat').is_open()", Duration::from_secs(5)).await;
        let chat_win = "vim.fn.bufwinid(require('handoff.chat').chat_buf)";
        assert_eq!(ed.eval(&format!("vim.fn.win_screenpos({chat_win})[2]")).await, json!(1), "not on the left");
        assert_eq!(ed.eval(&format!("vim.api.nvim_win_get_width({chat_win})")).await, json!(30));
        let prompt_win = "vim.fn.bufwinid(require('handoff.chat').prompt_buf)";
        assert_eq!(ed.eval(&format!("vim.api.nvim_win_get_height({prompt_win})")).await, json!(4));
        assert_eq!(ed.eval("vim.fn.maparg('<Space>hc', 'n', false, true).desc").await, json!("handoff.nvim: chat"));
        ed.input("<Space>hc").await;
        ed.wait_until("not require('handoff.chat').is_open()", Duration::from_secs(5)).await;
        // An action that does not exist is refused with a message naming it.
        let err = ed.eval("select(2, pcall(require('handoff').setup, { keymaps = { global = { nope = 'x' } } }))").await;
        let err = err.as_str().unwrap_or_default().to_string();
        assert!(err.contains(r#"keymaps.global must be a table from "chat", "handoff""#) && err.contains("nope"), "{err}");
        ed.quit().await;
    })
    .await;
}

// Issue 10: <Esc> cancels from wherever the cursor is; the document is written live in its split.

/// The user's own `<Esc>`: a global one (the common `nohlsearch` kind) counting in `g:global_esc`
/// and a buffer-local one in the current buffer counting in `g:local_esc`.
const USER_ESC: &str = r#"
vim.g.global_esc, vim.g.local_esc = 0, 0
vim.keymap.set('n', '<Esc>', '<Cmd>nohlsearch<Bar>let g:global_esc += 1<CR>')
vim.keymap.set('n', '<Esc>', function() vim.g.local_esc = vim.g.local_esc + 1 end, { buffer = 0, desc = 'mine' })
"#;

/// What `<Esc>` is mapped to, globally and in `buf` (a Lua expression), as the user would check.
async fn esc_maps(ed: &Editor, buf: &str) -> Value {
    ed.eval(&format!(
        "(function() local function esc(maps) for _, m in ipairs(maps) do if m.lhs == '<Esc>' then \
           return {{ rhs = m.rhs or '', desc = m.desc or '', callback = m.callback ~= nil }} end end return false end \
         return {{ global = esc(vim.api.nvim_get_keymap('n')), buf = esc(vim.api.nvim_buf_get_keymap({buf}, 'n')) }} end)()"
    ))
    .await
}

/// No mapping of ours anywhere, and the user's two mappings back and working.
async fn assert_user_esc_restored(ed: &Editor, code_buf: u64) {
    let ours = ed
        .eval(
            "(function() local n = 0 for _, b in ipairs(vim.list_extend({ 0 }, vim.api.nvim_list_bufs())) do \
               for _, m in ipairs(b == 0 and vim.api.nvim_get_keymap('n') or vim.api.nvim_buf_get_keymap(b, 'n')) do \
                 if (m.desc or ''):find('handoff', 1, true) and m.lhs == '<Esc>' then n = n + 1 end end end return n end)()",
        )
        .await;
    assert_eq!(ours, json!(0), "an <Esc> of ours was left behind\n{}", ed.dump().await);
    let maps = esc_maps(ed, &code_buf.to_string()).await;
    assert_eq!(maps["global"]["rhs"], "<Cmd>nohlsearch|let g:global_esc += 1<CR>", "{maps}");
    assert_eq!(maps["global"]["desc"], "", "{maps}");
    assert_eq!(maps["buf"], json!({ "rhs": "", "desc": "mine", "callback": true }), "{maps}");
    // Typed through typeahead, mappings applied: the buffer-local one in its buffer, the global
    // one elsewhere.
    let (global, local) = (ed.eval("vim.g.global_esc").await, ed.eval("vim.g.local_esc").await);
    ed.lua("vim.cmd('wincmd t') vim.api.nvim_set_current_buf(...)", json!([code_buf])).await;
    ed.input("<Esc>").await;
    ed.wait_until(&format!("vim.g.local_esc == {}", local.as_u64().unwrap() + 1), Duration::from_secs(5)).await;
    ed.command("enew").await;
    ed.input("<Esc>").await;
    ed.wait_until(&format!("vim.g.global_esc == {}", global.as_u64().unwrap() + 1), Duration::from_secs(5)).await;
    ed.lua("vim.api.nvim_set_current_buf(...)", json!([code_buf])).await;
}

/// Windows that show a markdown buffer other than the chat: `{ win, name, lines, winbar }`.
const DOCUMENT_WINDOWS: &str = "(function() local out = {} for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do \
    local b = vim.api.nvim_win_get_buf(w) \
    if vim.bo[b].filetype == 'markdown' and b ~= require('handoff.chat').chat_buf then \
      table.insert(out, { win = w, name = vim.api.nvim_buf_get_name(b), lines = vim.api.nvim_buf_get_lines(b, 0, -1, false), winbar = vim.wo[w].winbar }) end end \
  return out end)()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_cancels_the_handoff_from_wherever_the_cursor_is_and_restores_the_users_mappings() {
    bounded(async {
        let ed = Editor::start().await;
        // A code buffer with the user's mappings, the cursor in it.
        ed.command("edit code.rs").await;
        let code_buf = ed.eval("vim.api.nvim_get_current_buf()").await.as_u64().unwrap();
        ed.lua(USER_ESC, json!([])).await;
        ed.converse("first question", "first answer").await;
        let old = ed.session_file().await;
        let before = std::fs::read_to_string(&old).unwrap();
        // Where the cursor is when <Esc> is pressed: the window :Handoff ran from (chat closed,
        // then open beside), the chat, the prompt, the document split, a buffer opened since.
        let places = [
            ("origin, chat closed", ""),
            ("origin, chat open", "require('handoff').open_chat() vim.cmd('wincmd t')"),
            ("chat", "vim.api.nvim_set_current_win(vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1])"),
            ("prompt", "vim.api.nvim_set_current_win(vim.fn.win_findbuf(require('handoff.chat').prompt_buf)[1])"),
            ("document", "vim.api.nvim_set_current_win(vim.fn.win_findbuf(require('handoff.handoff_view').live_buffer())[1])"),
            ("a buffer opened since", "vim.cmd('wincmd t') vim.cmd('enew')"),
        ];
        for (n, (place, go)) in places.iter().enumerate() {
            let n = n + 1;
            // :Handoff runs from the code window.
            ed.lua("vim.cmd('wincmd t') vim.api.nvim_set_current_buf(...)", json!([code_buf])).await;
            if n == 2 {
                ed.lua(go, json!([])).await;
            }
            ed.mock.push(endless()); // minutes if nobody cancels
            ed.command("Handoff").await;
            ed.wait_until(
                "require('handoff').status().generating_handoff and require('handoff.state').tokens > 0",
                Duration::from_secs(5),
            )
            .await;
            if n > 2 {
                ed.lua(go, json!([])).await;
            }
            // Insert-mode <Esc> keeps its meaning: it leaves insert mode and cancels nothing.
            if *place == "origin, chat closed" {
                ed.input("i").await;
                ed.wait_until("vim.fn.mode() == 'i'", Duration::from_secs(5)).await;
                ed.input("<Esc>").await;
                ed.wait_until("vim.fn.mode() == 'n'", Duration::from_secs(5)).await;
                assert_eq!(ed.status().await["generating_handoff"], true, "insert-mode <Esc> cancelled the handoff");
            }
            let (global, local) = (ed.eval("vim.g.global_esc").await, ed.eval("vim.g.local_esc").await);
            ed.input("<Esc>").await;
            ed.wait_event_for("HandoffCancelled", n, Duration::from_secs(5)).await;
            assert_eq!(ed.eval("vim.g.global_esc").await, global, "{place}: the user's global <Esc> ran instead");
            assert_eq!(ed.eval("vim.g.local_esc").await, local, "{place}: the user's buffer <Esc> ran instead");
            assert_eq!(ed.eval("T.count('HandoffDone') + T.count('HandoffFailed')").await, json!(0), "{place}");
            // No new session; the old one as it was plus the attempt; the document split closed.
            assert_eq!(ed.session_files().len(), 1, "{place}: {:?}", ed.session_files());
            assert!(std::fs::read_to_string(&old).unwrap().starts_with(&before), "{place}: the old session was rewritten");
            assert_eq!(ed.status().await["session_file"], old.as_str());
            assert_eq!(ed.eval(DOCUMENT_WINDOWS).await, json!([]), "{place}: the document split stayed open");
            assert_user_esc_restored(&ed, code_buf).await;
        }
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_written_live_in_its_split_and_success_and_failure_restore_esc() {
    bounded(async {
        let ed = Editor::start().await;
        ed.command("edit code.rs").await;
        let code_buf = ed.eval("vim.api.nvim_get_current_buf()").await.as_u64().unwrap();
        ed.lua(USER_ESC, json!([])).await;
        ed.lua("require('handoff').open_chat() vim.cmd('wincmd t')", json!([])).await;
        ed.converse("first question", "first answer").await;
        // The document, a line every 250 ms.
        let chunks: Vec<String> = DOC.split_inclusive('\n').map(str::to_string).collect();
        let n_chunks = chunks.len();
        ed.mock.push(MockReply::Text {
            chunks,
            chunk_delay_ms: 250,
            first_delay_ms: 0,
            stop: "stop".into(),
            thinking: Vec::new(),
        });
        ed.command("Handoff").await;
        // Before it ends, a visible markdown window other than the chat shows the first lines,
        // under a header with the cancel key, the elapsed time and the tokens. All read in one
        // evaluation, with whether it ended: separate requests could come after the end on a
        // busy machine.
        let shown = ed
            .wait_until(
                &format!("(function() local d = {DOCUMENT_WINDOWS} \
                   if #d == 1 and d[1].lines[1] == '## Goal' and d[1].lines[2] == 'Ship the parser.' and d[1].winbar:find('tokens') then \
                     return vim.tbl_extend('force', d[1], {{ done = T.count('HandoffDone'), \
                       live_lines = #vim.api.nvim_buf_get_lines(require('handoff.handoff_view').live_buffer(), 0, -1, false) }}) end end)()"),
                Duration::from_secs(5),
            )
            .await;
        assert_eq!(shown["done"], json!(0), "the document only showed at the end");
        assert!(shown["live_lines"].as_u64().unwrap() < n_chunks as u64, "{shown}");
        let winbar = shown["winbar"].as_str().unwrap();
        assert!(winbar.contains("Generating handoff… <Esc> to cancel ·") && winbar.contains("s · "), "{winbar}");
        // The cursor stayed where :Handoff ran; the chat keeps its own rendering of the reply.
        assert_eq!(ed.eval("vim.api.nvim_get_current_buf()").await, json!(code_buf));
        // On success the same window holds the final document, named after the new session.
        let done = ed.wait_event("HandoffDone", 1).await;
        let docs = ed.eval(DOCUMENT_WINDOWS).await;
        assert_eq!(docs.as_array().unwrap().len(), 1, "{docs}");
        assert_eq!(docs[0]["win"], shown["win"], "the document moved to another window");
        assert_eq!(docs[0]["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect::<Vec<_>>().join("\n"), DOC);
        assert_eq!(docs[0]["winbar"], "");
        let new_name = std::path::Path::new(done["session_file"].as_str().unwrap()).file_stem().unwrap().to_string_lossy().to_string();
        assert!(docs[0]["name"].as_str().unwrap().ends_with(&format!("{new_name}.md")), "{docs}");
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        assert!(chat.as_str().unwrap().contains("## Handoff context"), "{chat}");
        assert_user_esc_restored(&ed, code_buf).await;

        // A failure: the split says why, and the mappings come back just the same.
        ed.converse("second question", "second answer").await;
        ed.mock.push(MockReply::Status { status: 500, body: r#"{"error":{"message":"boom"}}"#.into(), retry_after: None });
        ed.lua("vim.cmd('wincmd t') vim.api.nvim_set_current_buf(...)", json!([code_buf])).await;
        ed.command("Handoff").await;
        let failed = ed.wait_event("HandoffFailed", 1).await;
        assert!(failed["message"].as_str().unwrap().contains("500"), "{failed}");
        let docs = ed.eval(DOCUMENT_WINDOWS).await;
        let failed_bar = docs.as_array().unwrap().iter().filter_map(|d| d["winbar"].as_str()).find(|w| w.contains("Handoff failed: "));
        assert!(failed_bar.is_some_and(|w| w.contains("500")), "{docs}");
        assert_user_esc_restored(&ed, code_buf).await;
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_bang_opens_the_document_for_review_write_starts_the_session_quit_discards() {
    bounded(async {
        let ed = Editor::start().await;
        ed.converse("first question", "first answer").await;
        let old = ed.session_file().await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff! the parser").await;
        ed.wait_event("HandoffReview", 1).await;
        // The split holds the draft, editable; nothing exists yet.
        let review = "vim.fn.bufnr('handoff://review.md')";
        let info = ed
            .eval(&format!("{{ buftype = vim.bo[{review}].buftype, lines = vim.api.nvim_buf_get_lines({review}, 0, -1, false), shown = #vim.fn.win_findbuf({review}) }}"))
            .await;
        assert_eq!(info["buftype"], "acwrite", "{info}");
        assert_eq!(info["lines"][0], "## Goal");
        assert_eq!(info["shown"], 1);
        assert_eq!(ed.session_files().len(), 1);
        assert_eq!(ed.status().await["session_file"], old.as_str());
        // The user edits it and writes it: the new session starts with the text as written.
        ed.lua(
            &format!("vim.api.nvim_set_current_win(vim.fn.win_findbuf({review})[1]) vim.api.nvim_buf_set_lines(0, 1, 2, false, {{ 'Ship the parser, as edited.' }})"),
            json!([]),
        )
        .await;
        ed.command("write").await;
        let done = ed.wait_event("HandoffDone", 1).await;
        assert!(done["document"].as_str().unwrap().contains("Ship the parser, as edited."), "{done}");
        let new_file = done["session_file"].as_str().unwrap().to_string();
        let lines = jsonl(std::path::Path::new(&new_file));
        let content = lines.iter().find(|l| l["type"] == "custom_message").unwrap()["content"].as_str().unwrap().to_string();
        assert!(content.contains("Ship the parser, as edited."), "{content}");
        assert_eq!(ed.status().await["session_file"], new_file.as_str());
        // Quitting a second review without writing discards it: nothing new is created.
        ed.converse("second question", "second answer").await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff!").await;
        ed.wait_event("HandoffReview", 2).await;
        ed.lua(&format!("vim.api.nvim_set_current_win(vim.fn.win_findbuf({review})[1])"), json!([])).await;
        ed.command("bwipeout!").await;
        ed.wait_event("HandoffDiscarded", 1).await;
        assert_eq!(ed.session_files().len(), 2);
        assert_eq!(ed.status().await["session_file"], new_file.as_str());
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_meter_shows_the_providers_count_and_a_full_window_suggests_a_handoff_once() {
    bounded(async {
        let mut provider = json!({ "api": "openai", "model": "mock-model", "max_retries": 0, "timeout": 10, "context_window": 100000 });
        let ed = Editor::start_with(Some(provider.clone())).await;
        // The provider table above has no base_url: point it at this test's mock.
        provider["base_url"] = json!(ed.mock.openai_base_url());
        ed.lua("require('handoff').setup({ bin = ..., provider = select(2, ...), handoff = { auto = 'off' } })", json!([support_bin(), provider.clone()])).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("first question", "one two three").await;
        // The mock counts a request's body bytes / 4 as its input tokens, and a chunk per word.
        let input = ed.mock.requests()[0].raw_len as u64 / 4;
        let used = input + 3;
        let status = ed.status().await;
        assert_eq!(status["context_tokens"], json!(used), "{status}");
        assert_eq!(status["context_window"], json!(100000));
        let line = ed.eval("require('handoff').statusline()").await;
        let want_pct = ((used as f64) / 1000.0).round() as u64;
        assert!(line.as_str().unwrap().starts_with("mock-model · ") && line.as_str().unwrap().ends_with(&format!("/100k ({want_pct}%)")), "{line}");
        let winbar = ed.eval("vim.api.nvim_eval_statusline(vim.wo[vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1]].winbar, { winid = vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1] }).str").await;
        assert_eq!(winbar, line);
        assert_eq!(ed.eval("T.count('HandoffSuggested')").await, json!(0));
        // A window this small is over 80% full after the next reply: one suggestion, not two. It is
        // past the wall too: automatic handoffs are off, or one would start a new session (and its
        // own suggestion) while the test converses.
        provider["context_window"] = json!(used + 200);
        ed.lua("require('handoff').setup({ bin = ..., provider = select(2, ...), handoff = { auto = 'off' } })", json!([support_bin(), provider])).await;
        ed.wait_until("require('handoff').status().context_window < 100000", Duration::from_secs(5)).await;
        ed.converse("second", "four five").await;
        let note = ed.wait_until("T.noted(':Handoff continues in a fresh session')", Duration::from_secs(5)).await;
        assert!(note["msg"].as_str().unwrap().contains("of mock-model's context window"), "{note}");
        assert_eq!(ed.eval("T.count('HandoffSuggested')").await, json!(1));
        ed.converse("third", "six").await;
        assert_eq!(ed.eval("T.count('HandoffSuggested')").await, json!(1), "suggested twice in one session");
        ed.quit().await;
    })
    .await;
}

/// The lines of the read-only view of `file` (`handoff://session/<stem>.md`), or nil.
fn view_lines(file: &str) -> String {
    let stem = std::path::Path::new(file).file_stem().unwrap().to_str().unwrap();
    format!(
        "(function() local b = vim.fn.bufnr('handoff://session/{stem}.md') \
         if b == -1 then return nil end return vim.api.nvim_buf_get_lines(b, 0, -1, false) end)()"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lineage_a_chain_of_two_handoffs_in_the_picker_and_ancestors_read_only() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        // first ⇠ second ⇠ third: two handoffs.
        ed.converse("first question", "first answer").await;
        let first = ed.session_file().await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff").await;
        let second = ed.wait_event("HandoffDone", 1).await["session_file"].as_str().unwrap().to_string();
        ed.converse("second question", "second answer").await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff").await;
        let third = ed.wait_event("HandoffDone", 2).await["session_file"].as_str().unwrap().to_string();
        assert_eq!(ed.session_file().await, third);
        let chat_before = ed.eval("T.chat()").await;
        let first_bytes = std::fs::read(&first).unwrap();

        // The picker shows the chain, each session under the one it was handed off from. It
        // opens when the host's list arrives (the command returns at once).
        let picked = r#"
            local pick, bang = ...
            _G.seen = nil
            local select = vim.ui.select
            vim.ui.select = function(items, opts, on_choice)
              vim.ui.select = select
              local seen = {}
              seen.prompt = opts.prompt
              seen.items = vim.tbl_map(opts.format_item, items)
              seen.paths = vim.tbl_map(function(i) return i.path end, items)
              on_choice(pick and items[pick] or nil)
              _G.seen = seen
            end
            local ok, err = pcall(vim.cmd, bang and 'HandoffSessions!' or 'HandoffSessions')
            assert(ok, err)
        "#;
        ed.lua(picked, json!([Value::Null, false])).await;
        let seen = ed.wait_until("_G.seen", std::time::Duration::from_secs(30)).await;
        assert_eq!(seen["paths"], json!([first, second, third]), "{seen}");
        let items: Vec<&str> = seen["items"].as_array().unwrap().iter().map(|i| i.as_str().unwrap()).collect();
        assert!(!items[0].starts_with(['⇠', ' ']) && items[0].contains("first question"), "{items:?}");
        assert!(items[1].starts_with("⇠ ") && items[1].contains("second question"), "{items:?}");
        assert!(items[2].starts_with("  ⇠ ") && items[2].ends_with("(current)"), "{items:?}");
        assert_eq!(seen["prompt"], "Resume session");

        // `:HandoffSessions!` opens the first session read-only: its messages, the agent stays.
        ed.lua(picked, json!([1, true])).await;
        let seen = ed.wait_until("_G.seen", std::time::Duration::from_secs(30)).await;
        assert_eq!(seen["prompt"], "View session (read-only)");
        let view = ed.wait_event("HandoffSessionView", 1).await;
        assert_eq!(view["path"], first.as_str());
        let lines = ed.eval(&view_lines(&first)).await;
        let text = lines.as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect::<Vec<_>>().join("\n");
        assert!(text.contains("## You\n\nfirst question") && text.contains("first answer"), "{text}");
        assert!(text.contains("*Handoff requested*") && text.contains("Ship the parser."), "{text}");
        assert!(!text.contains("Handed off from"), "the first session has no parent:\n{text}");
        let focused = ed.eval("{ name = vim.api.nvim_buf_get_name(0), modifiable = vim.bo.modifiable, ft = vim.bo.filetype }").await;
        let stem = std::path::Path::new(&first).file_stem().unwrap().to_str().unwrap();
        assert_eq!(focused, json!({ "name": format!("handoff://session/{stem}.md"), "modifiable": false, "ft": "markdown" }));
        // Nothing switched: not the editor's idea of the session, not the host's, not the chat,
        // and the file read was not touched.
        assert_eq!(ed.session_file().await, third);
        let host = ed.eval("require('handoff.host').request('status')").await;
        assert_eq!(host["session_file"], third.as_str());
        assert_eq!(ed.eval("T.chat()").await, chat_before);
        assert_eq!(ed.eval("T.count('HandoffSessionSwitch')").await, json!(2), "only the two handoffs switched");
        assert_eq!(std::fs::read(&first).unwrap(), first_bytes);

        // `gp` on the chat's "Handed off from" line opens the parent (second) read-only.
        ed.lua(
            "local w = vim.fn.win_findbuf(require('handoff.chat').chat_buf)[1] vim.api.nvim_set_current_win(w) \
             local l = vim.api.nvim_buf_get_lines(0, 0, -1, false) \
             for i, line in ipairs(l) do if line:find('Handed off from', 1, true) then vim.api.nvim_win_set_cursor(w, { i, 0 }) break end end",
            json!([]),
        )
        .await;
        let header = ed.eval("vim.api.nvim_get_current_line()").await;
        let second_name = std::path::Path::new(&second).file_name().unwrap().to_str().unwrap();
        assert!(header.as_str().unwrap().contains(second_name) && header.as_str().unwrap().contains("gp"), "{header}");
        ed.input("gp").await;
        let view = ed.wait_event("HandoffSessionView", 2).await;
        assert_eq!(view["path"], second.as_str());
        assert_eq!(view["parent_session"], first.as_str());
        let text = ed.eval(&format!("table.concat({}, '\\n')", view_lines(&second))).await;
        let text = text.as_str().unwrap();
        assert!(text.contains("## Handoff context") && text.contains("second question") && text.contains("second answer"), "{text}");
        // And there, `gp` on its own "Handed off from" line walks on to the first.
        ed.lua(
            "for i, line in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do \
             if line:find('Handed off from', 1, true) then vim.api.nvim_win_set_cursor(0, { i, 0 }) break end end",
            json!([]),
        )
        .await;
        ed.input("gp").await;
        let view = ed.wait_event("HandoffSessionView", 3).await;
        assert_eq!(view["path"], first.as_str());
        assert_eq!(ed.eval("vim.api.nvim_buf_get_name(0)").await, json!(format!("handoff://session/{stem}.md")));
        assert_eq!(ed.session_file().await, third);
        assert_eq!(ed.eval("require('handoff.host').request('status')").await["session_file"], third.as_str());
        ed.quit().await;
    })
    .await;
}

fn support_bin() -> &'static str {
    common::nvim::HOST_BIN
}

