//! Every input through the controller, from the editor: the commands the help documents
//! (`:HandoffPrompt`, `:HandoffStop`), the review setting through `/handoff` typed in the prompt,
//! the version-mismatch warning, and requests that never wait for a session being loaded.
//! Real headless Neovim, the built host, the loopback mock model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::nvim::{bounded, endless, user_texts, Editor, DOC};
use handoff_mock::MockReply;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_prompt_command_sends_the_prompt() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.mock.push(MockReply::text("An answer to the command."));
        ed.command("HandoffPrompt what does this file do").await;
        let end = ed.wait_event("HandoffAgentEnd", 1).await;
        assert_eq!(end["stop_reason"], "stop");
        assert_eq!(user_texts(&ed.mock), ["what does this file do"]);
        let chat = ed.eval("table.concat(T.chat(), '\\n')").await;
        let chat = chat.as_str().unwrap();
        assert!(chat.contains("what does this file do") && chat.contains("An answer to the command."), "{chat}");
        ed.quit().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_stop_stops_a_running_reply() {
    bounded(async {
        let ed = Editor::start().await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.mock.push(endless()); // minutes if nothing stops it
        ed.lua("require('handoff').prompt('a long story please')", json!([])).await;
        ed.wait_until("require('handoff').status().busy and require('handoff.state').tokens > 0", Duration::from_secs(5)).await;
        ed.command("HandoffStop").await;
        // An end within the wait's hang guard, `aborted`, is the stop's doing: the reply itself
        // streams for minutes.
        let end = ed.wait_event("HandoffAgentEnd", 1).await;
        assert_eq!(end["stop_reason"], "aborted", "{end}");
        assert_eq!(ed.status().await["busy"], json!(false));
        // The session keeps the prompt and what was streamed, marked as aborted.
        let lines = common::nvim::jsonl(std::path::Path::new(&ed.session_file().await));
        let reply = lines.iter().rev().find(|l| l["message"]["role"] == "assistant").expect("the partial reply");
        assert_eq!(reply["message"]["stopReason"], "aborted");
        assert!(reply["message"]["content"][0]["text"].as_str().unwrap().starts_with("part0 "), "{reply}");
        ed.quit().await;
    })
    .await;
}

/// A failed model request reaches Lua with its kind beside its text, for a user's autocmd (or
/// the plugin) to branch on: a 401 is `auth`, a 429 `rate_limit`, a window overflow `overflow`.
/// Automatic handoffs are off here: an overflow would otherwise start one (tests/nvim_auto_handoff.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reply_carries_its_kind_to_lua() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "handoff": { "auto": "off" } })).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        let cases = [
            (401, r#"{"error":{"message":"invalid api key"}}"#, "auth"),
            (429, r#"{"error":{"message":"slow down"}}"#, "rate_limit"),
            (400, r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#, "overflow"),
        ];
        for (n, (status, body, kind)) in cases.into_iter().enumerate() {
            ed.mock.push(MockReply::Status { status, body: body.into(), retry_after: None });
            ed.lua("require('handoff').prompt(...)", json!([format!("question {n}")])).await;
            let end = ed.wait_event("HandoffAgentEnd", n + 1).await;
            assert_eq!(end["stop_reason"], "error", "{end}");
            assert_eq!(end["error_kind"], kind, "{end}");
            assert!(end["error_message"].as_str().unwrap().contains(&status.to_string()), "{end}");
        }
        ed.quit().await;
    })
    .await;
}

/// Bug: `/handoff` typed in the prompt ignored `setup{ handoff = { review = true } }` (only
/// `:Handoff` honoured it). The controller knows the front end's default now: both review.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_setting_applies_to_slash_handoff_typed_in_the_prompt() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "handoff": { "review": true } })).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.converse("first question", "first answer").await;
        let old = ed.session_file().await;
        ed.mock.push(MockReply::text(DOC));
        ed.input("i/handoff the parser").await;
        ed.wait_until(
            "vim.api.nvim_buf_get_lines(require('handoff.chat').prompt_buf, 0, 1, false)[1] == '/handoff the parser'",
            Duration::from_secs(5),
        )
        .await;
        ed.input("<C-s>").await;
        let review = ed.wait_event("HandoffReview", 1).await;
        assert!(review["text"].as_str().unwrap().starts_with("## Goal"), "{review}");
        assert_eq!(ed.eval("T.count('HandoffDone')").await, json!(0));
        assert_eq!(ed.session_files().len(), 1, "nothing is created before the review is written");
        assert_eq!(ed.status().await["session_file"], old.as_str());
        // Quit without writing: discarded. `:Handoff` honours the setting the same way, and
        // `{ review = false }` asked for explicitly wins over it.
        ed.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(vim.fn.bufnr('handoff://review.md'))[1])", json!([])).await;
        ed.command("bwipeout!").await;
        ed.wait_event("HandoffDiscarded", 1).await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff").await;
        ed.wait_event("HandoffReview", 2).await;
        ed.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(vim.fn.bufnr('handoff://review.md'))[1])", json!([])).await;
        ed.command("bwipeout!").await;
        ed.wait_event("HandoffDiscarded", 2).await;
        ed.mock.push(MockReply::text(DOC));
        ed.lua("require('handoff').handoff('now', { review = false })", json!([])).await;
        let done = ed.wait_event("HandoffDone", 1).await;
        assert_eq!(done["parent_session"], old.as_str());
        ed.quit().await;
    })
    .await;
}

/// The plugin refuses a host binary built from other sources than the checkout's (another
/// `version` in its Cargo.toml): here a checkout whose Cargo.toml says 9.9.9. The host is
/// stopped before `configure` (no settings, no prompt reach it) and one line says what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_of_another_version_than_the_sources_is_refused() {
    bounded(async {
        let ed = Editor::start_bare().await;
        let checkout = ed.dir.path().join("other-checkout");
        std::fs::create_dir_all(&checkout).unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for dir in ["lua", "plugin"] {
            std::os::unix::fs::symlink(root.join(dir), checkout.join(dir)).unwrap();
        }
        std::fs::write(checkout.join("Cargo.toml"), "[package]\nname = \"handoff-nvim\"\nversion = \"9.9.9\"\n").unwrap();
        ed.lua("vim.opt.rtp:prepend(...) vim.cmd('runtime! plugin/handoff.lua')", json!([checkout])).await;
        ed.lua("require('handoff').setup(...)", json!([ed.default_setup()])).await;
        assert_eq!(ed.eval("require('handoff.host').source_version()").await, json!("9.9.9"));
        assert_eq!(ed.eval("require('handoff.host').ensure()").await, serde_json::Value::Null, "refused");
        let note = ed.wait_until("T.noted('run :HandoffInstall')", Duration::from_secs(5)).await;
        let msg = note["msg"].as_str().unwrap();
        let built = env!("CARGO_PKG_VERSION");
        assert!(msg.contains(&format!("is version {built} but the plugin is 9.9.9")), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
        assert_eq!(note["level"], json!(4), "an error: {note}"); // vim.log.levels.ERROR
        assert_eq!(ed.eval("require('handoff.state').chan").await, serde_json::Value::Null, "the host was stopped");
        // The checkout's own sources match the binary: it runs.
        let ed2 = Editor::start().await;
        ed2.lua("require('handoff.host').ensure()", json!([])).await;
        ed2.wait_until("require('handoff').status().session_file ~= nil", Duration::from_secs(5)).await;
        assert_eq!(ed2.eval("T.noted('run :HandoffInstall') == nil").await, json!(true));
        ed2.quit().await;
        ed.quit().await;
    })
    .await;
}

/// The same version built from other sources (a stale release build: the settings it knows
/// differ from the plugin's generated schema) is refused too, before `configure` could refuse
/// a setting it does not know: here a checkout whose schema has another digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_built_from_other_sources_of_the_same_version_is_refused() {
    bounded(async {
        let ed = Editor::start_bare().await;
        let checkout = ed.dir.path().join("stale-checkout");
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        std::fs::create_dir_all(&checkout).unwrap();
        let copied = std::process::Command::new("cp").arg("-r").arg(root.join("lua")).arg(checkout.join("lua")).status().unwrap();
        assert!(copied.success());
        std::os::unix::fs::symlink(root.join("plugin"), checkout.join("plugin")).unwrap();
        let version = env!("CARGO_PKG_VERSION");
        std::fs::write(checkout.join("Cargo.toml"), format!("[package]\nname = \"handoff-nvim\"\nversion = \"{version}\"\n")).unwrap();
        let schema = checkout.join("lua/handoff/schema.lua");
        let text = std::fs::read_to_string(&schema).unwrap();
        let digest = handoff_nvim::core::config::schema::digest();
        assert!(text.contains(&digest));
        std::fs::write(&schema, text.replace(&digest, "0000000000000000")).unwrap();
        ed.lua("vim.opt.rtp:prepend(...) vim.cmd('runtime! plugin/handoff.lua')", json!([checkout])).await;
        ed.lua("require('handoff').setup(...)", json!([ed.default_setup()])).await;
        assert_eq!(ed.eval("require('handoff.schema').digest").await, json!("0000000000000000"));
        assert_eq!(ed.eval("require('handoff.host').ensure()").await, serde_json::Value::Null, "refused");
        let note = ed.wait_until("T.noted('run :HandoffInstall')", Duration::from_secs(5)).await;
        let msg = note["msg"].as_str().unwrap();
        assert!(msg.contains("was built from other sources than the plugin"), "{msg}");
        ed.quit().await;
    })
    .await;
}

/// A session file that takes the host a while to load (`n` entries that are no part of the
/// model's context) and ends with one exchange.
fn write_slow_session(path: &std::path::Path, n: usize) {
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"slow-1","timestamp":"2026-11-29T20:00:00.000Z","cwd":"/p"}"#,
    );
    let mut parent = "null".to_string();
    for i in 0..n {
        text.push_str(&format!(
            "\n{{\"type\":\"custom\",\"customType\":\"padding\",\"data\":{{\"n\":{i},\"pad\":\"{}\"}},\"id\":\"{i:08x}\",\"parentId\":{parent},\"timestamp\":\"2026-11-29T20:00:00.000Z\"}}",
            "x".repeat(200)
        ));
        parent = format!("\"{i:08x}\"");
    }
    for (i, (role, said)) in [("user", "the question before"), ("assistant", "the answer before")].iter().enumerate() {
        let id = format!("m{i:07x}");
        text.push_str(&format!(
            "\n{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-11-29T20:00:00.000Z\",\"message\":{{\"role\":\"{role}\",\"content\":\"{said}\",\"timestamp\":{i}}}}}"
        ));
        parent = format!("\"{id}\"");
    }
    std::fs::write(path, text + "\n").unwrap();
}

/// Bug: a request from Lua waited (up to 30 s, `vim.rpcrequest` blocking the editor) while the
/// session loaded. Now it answers at once that the session is not ready; the command runs once
/// it is open, and what the user typed meanwhile waits (in the host before Lua heard "not ready",
/// behind the command after) and is sent in the order it was typed: nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_while_the_session_loads_answers_at_once_and_nothing_typed_is_lost() {
    bounded(async {
        let ed = Editor::start().await;
        let path = ed.dir.path().join("slow.jsonl");
        write_slow_session(&path, 150_000);
        ed.mock.push(MockReply::text("answer A"));
        ed.mock.push(MockReply::text("answer B"));
        let early = ed
            .lua(
                "local path = ... \
                 require('handoff.state').session_file = path \
                 local host = require('handoff.host') \
                 assert(host.ensure()) \
                 require('handoff').prompt('typed A') \
                 local set = require('handoff').set_thinking('high') \
                 local ok, _, failure = host.try_request('status') \
                 require('handoff').prompt('typed B') \
                 return { set = set, ok = ok, kind = failure and failure.kind, \
                   loaded = require('handoff.state').session_id ~= nil }",
                json!([path]),
            )
            .await;
        assert_eq!(early["loaded"], json!(false), "the load was too quick to test anything: {early}");
        assert_eq!(early["ok"], json!(false), "{early}");
        assert_eq!(early["kind"], "not_ready", "{early}");
        assert_eq!(early["set"], json!(false), "{early}");
        // Both requests were answered while the session was still loading (`loaded` above is
        // read after them): neither waited for the load, whatever the machine's speed.
        ed.wait_until("T.noted('The session is still loading: your input is sent when it is open')", Duration::from_secs(5))
            .await;
        // Once open: A (which waited in the host), the level, then B.
        ed.wait_until("require('handoff').status().session_id == 'slow-1'", Duration::from_secs(30)).await;
        ed.wait_until("require('handoff').status().thinking == 'high'", Duration::from_secs(5)).await;
        ed.wait_until(
            "(function() local c = table.concat(T.chat(), '\\n') return c:find('answer B', 1, true) and not require('handoff').status().busy end)()",
            Duration::from_secs(10),
        )
        .await;
        let texts = user_texts(&ed.mock);
        assert!(texts.iter().any(|t| t == "typed A") && texts.iter().any(|t| t == "typed B"), "{texts:?}");
        let lines = common::nvim::jsonl(&path);
        let said = |text: &str| {
            lines
                .iter()
                .position(|l| l["message"]["content"] == text || l["message"]["content"][0]["text"] == text)
                .unwrap_or_else(|| panic!("{text} not in the session"))
        };
        let level = lines
            .iter()
            .position(|l| l["type"] == "thinking_level_change" && l["thinkingLevel"] == "high")
            .expect("the level recorded");
        // A was sent before the level and B after it. Where A's own line falls against the level's
        // is not fixed: A's run starts in a task while Lua retries the level on the transcript
        // (a known race, noted in issue 20's closing note); B always comes after both.
        assert!(said("typed A") < said("typed B") && level < said("typed B"), "out of order: A {}, level {level}, B {}", said("typed A"), said("typed B"));
        ed.quit().await;
    })
    .await;
}

/// `setup()` again (the host's `configure`) holds the session in use in `Switching` until the
/// new one is open: a prompt typed meanwhile waits for it and runs on the new configuration,
/// never on the old one. The new session is a large file (seconds to load), so the prompt is
/// typed while it loads (checked); the order is the host's, not a race the test wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_typed_while_setup_reloads_runs_on_the_new_configuration() {
    bounded(async {
        let ed = Editor::start().await;
        // The host runs with its first session open: the reload is a second `configure`.
        ed.lua("assert(require('handoff.host').ensure())", json!([])).await;
        ed.wait_until("require('handoff').status().session_id ~= nil", Duration::from_secs(10)).await;
        let first = ed.lua("return require('handoff').status().session_id", json!([])).await;
        let path = ed.dir.path().join("slow.jsonl");
        write_slow_session(&path, 150_000);
        ed.mock.push(MockReply::text("answered after the reload"));
        let mut setup = ed.default_setup();
        setup["provider"]["model"] = json!("model-b");
        let early = ed
            .lua(
                "local path, opts = ... \
                 require('handoff.state').session_file = path \
                 require('handoff').setup(opts) \
                 require('handoff').prompt('typed during the reload') \
                 return { loaded = require('handoff').status().session_id == 'slow-1', chan = require('handoff.state').chan ~= nil }",
                json!([path, setup]),
            )
            .await;
        assert_eq!(early["chan"], json!(true), "{early}");
        assert_ne!(first, json!("slow-1"));
        assert_eq!(early["loaded"], json!(false), "the reload was too quick to test anything: {early}");
        ed.wait_until("require('handoff').status().session_id == 'slow-1'", Duration::from_secs(30)).await;
        assert!(ed.mock.wait_for_requests(1, Duration::from_secs(10)).await, "the prompt was never sent");
        let requests = ed.mock.requests();
        assert_eq!(requests[0].body["model"], "model-b", "the prompt ran on the configuration it was typed after");
        ed.wait_until(
            "(function() local c = table.concat(T.chat(), '\\n') return c:find('answered after the reload', 1, true) and not require('handoff').status().busy end)()",
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(ed.mock.requests().len(), 1, "one prompt, one request");
        let lines = common::nvim::jsonl(&path);
        assert!(
            lines.iter().any(|l| l["message"]["content"] == "typed during the reload" || l["message"]["content"][0]["text"] == "typed during the reload"),
            "the prompt went to the session the reload opened"
        );
        ed.quit().await;
    })
    .await;
}

/// Starts a 10 ms `vim.uv` timer whose callback runs on the editor's main loop (as any
/// plugin's or the UI's work does) and keeps the longest gap between two runs in `_G.gap.max`
/// (ms): a request the editor waits for shows as a gap as long as the wait.
const GAP_TIMER: &str = "\
    _G.gap = { max = 0, last = vim.uv.hrtime(), timer = vim.uv.new_timer() } \
    _G.gap.timer:start(10, 10, vim.schedule_wrap(function() \
      local now = vim.uv.hrtime() \
      _G.gap.max = math.max(_G.gap.max, (now - _G.gap.last) / 1e6) \
      _G.gap.last = now \
    end))";

/// Stops the timer of [`GAP_TIMER`] and returns its worst gap in ms.
async fn worst_gap(ed: &Editor) -> f64 {
    ed.eval("(function() _G.gap.timer:stop() return _G.gap.max end)()").await.as_f64().unwrap()
}

/// Fails when the editor stood still for the slow operation: a request the editor waits for
/// shows as a gap as long as the operation. `took` is the operation's own time, measured in the
/// test from the command to its result (seconds here: the mock or the command is held back),
/// so a busy machine, which stretches both, does not decide the verdict. The bound is half of
/// it, not a figure of the editor's responsiveness: on a loaded 2-core machine the scheduler
/// alone makes gaps of 100+ ms (127 ms was seen in CI); how short the gaps are is a benchmark's.
fn assert_not_frozen(gap: f64, took: std::time::Duration, what: &str) {
    let took = took.as_secs_f64() * 1000.0;
    eprintln!("the editor's longest stall: {gap:.0} ms while {what} (it took {took:.0} ms)");
    assert!(gap < took / 2.0, "the editor stood still for {gap:.0} ms while {what} (it took {took:.0} ms)");
}

/// Starts the host and waits for its session, outside the span the gap timer watches: starting
/// it is the editor's own work (a few requests it waits for), longer on a busy machine, and not
/// what these tests guard.
async fn host_started(ed: &Editor) {
    ed.lua("require('handoff.host').ensure()", json!([])).await;
    ed.wait_until("require('handoff').status().session_file ~= nil", Duration::from_secs(10)).await;
}

/// `vim.ui.select` as a test sees it: the items as the picker formats them, in `_G.picked`.
const CAPTURE_PICKER: &str =
    "vim.ui.select = function(items, opts) _G.picked = vim.tbl_map(opts.format_item, items) end";

/// Issue 31: `:HandoffModel` right after start-up, with a provider whose model list takes 3 s,
/// froze the editor for those 3 s (the `models` request waited for the list). Now the host
/// answers at once and the picker opens when the list arrives, the editor answering meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_model_with_a_slow_model_list_never_freezes_the_editor() {
    bounded(async {
        let ed = Editor::start().await;
        ed.mock.listing(|l| {
            l.models = vec![json!({ "id": "mock-model", "context_length": 20_000 }), json!({ "id": "wide", "context_length": 1_500_000 })];
            l.delay_ms = 3000;
        });
        host_started(&ed).await;
        ed.lua(&format!("{GAP_TIMER} {CAPTURE_PICKER}"), json!([])).await;
        let t0 = Instant::now();
        ed.command("HandoffModel").await;
        let picked = ed.wait_until("_G.picked", Duration::from_secs(15)).await;
        let took = t0.elapsed();
        let gap = worst_gap(&ed).await;
        assert_not_frozen(gap, took, "the model list was read");
        let picked: Vec<String> = serde_json::from_value(picked).unwrap();
        assert!(picked.contains(&"wide  1.5M window".to_string()), "the provider's list: {picked:?}");
        ed.quit().await;
    })
    .await;
}

/// Issue 31: enabling a Copilot model (`:HandoffModel! id`) waited for Copilot's answer inside
/// a request. Now it is accepted at once; the model is switched to once Copilot said yes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabling_a_slow_copilot_model_never_freezes_the_editor() {
    bounded(async {
        let ed = Editor::start().await;
        let copilot = ed.dir.path().join("config/github-copilot");
        std::fs::create_dir_all(&copilot).unwrap();
        std::fs::write(copilot.join("hosts.json"), json!({ "github.com": { "oauth_token": "gho_fake" } }).to_string()).unwrap();
        ed.mock.copilot(|c| {
            let mut model = handoff_mock::MockCopilot::model("claude-opus-4.5", &["/v1/messages"], 200_000, 32_000);
            model["policy"]["state"] = json!("unconfigured");
            c.models.push(model);
            c.policy_delay_ms = 3000;
        });
        let provider = json!({ "api": "copilot", "model": "gpt-4.1", "copilot_token_url": ed.mock.copilot_token_url(), "max_retries": 0, "timeout": 10 });
        ed.lua("require('handoff').setup({ bin = ..., provider = select(2, ...) })", json!([common::nvim::HOST_BIN, provider])).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.wait_until("require('handoff').status().session_file ~= nil", Duration::from_secs(10)).await;
        ed.lua(GAP_TIMER, json!([])).await;
        let t0 = Instant::now();
        ed.command("HandoffModel! claude-opus-4.5").await;
        ed.wait_until("require('handoff').status().model == 'claude-opus-4.5'", Duration::from_secs(15)).await;
        let took = t0.elapsed();
        let gap = worst_gap(&ed).await;
        assert_not_frozen(gap, took, "Copilot enabled the model");
        assert!(ed.eval("T.noted('Enabled the Copilot model claude-opus-4.5') ~= nil").await == json!(true), "{}", ed.dump().await);
        let posts = ed.mock.requests().into_iter().filter(|r| r.path == "/models/claude-opus-4.5/policy").count();
        assert_eq!(posts, 1);
        ed.quit().await;
    })
    .await;
}

/// Issue 31: an `api_key_cmd` that takes seconds (a passphrase prompt, a slow vault) held the
/// editor as long through every request that needed the key. Now the editor answers meanwhile:
/// `:HandoffModel`'s picker opens once the key and the list are there, the prompt goes out
/// with the key, and a command that fails says so clearly in the reply's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_api_key_cmd_never_freezes_the_editor() {
    bounded(async {
        let ed = Editor::start().await;
        let provider = json!({ "api": "openai", "base_url": ed.mock.openai_base_url(), "model": "mock-model",
            "api_key_cmd": "sleep 2; echo key-from-cmd", "max_retries": 0, "timeout": 10 });
        ed.lua("require('handoff').setup({ bin = ..., provider = select(2, ...) })", json!([common::nvim::HOST_BIN, provider])).await;
        ed.mock.listing(|l| l.models = vec![json!({ "id": "mock-model", "context_length": 20_000 }), json!({ "id": "wide", "context_length": 1_500_000 })]);
        host_started(&ed).await;
        ed.lua(&format!("{GAP_TIMER} {CAPTURE_PICKER}"), json!([])).await;
        let t0 = Instant::now();
        ed.command("HandoffModel").await;
        let picked = ed.wait_until("_G.picked", Duration::from_secs(15)).await;
        let took = t0.elapsed();
        let gap = worst_gap(&ed).await;
        assert_not_frozen(gap, took, "the key command ran");
        assert!(picked.to_string().contains("wide  1.5M window"), "{picked}");
        ed.lua("require('handoff').open_chat()", json!([])).await;
        ed.mock.push(MockReply::text("Keyed answer."));
        ed.lua("require('handoff').prompt('hello with a key')", json!([])).await;
        let end = ed.wait_event_for("HandoffAgentEnd", 1, Duration::from_secs(20)).await;
        assert_eq!(end["stop_reason"], "stop", "{end}");
        let chat = ed.mock.requests().into_iter().find(|r| r.path.ends_with("/chat/completions")).expect("the prompt went out");
        assert_eq!(chat.header("authorization"), Some("Bearer key-from-cmd"));
        assert!(ed.mock.listing_requests().iter().all(|r| r.header("authorization") == Some("Bearer key-from-cmd")));
        ed.quit().await;

        // A command that fails: the reply fails with its program named, never its arguments.
        let ed = Editor::start().await;
        let provider = json!({ "api": "openai", "base_url": ed.mock.openai_base_url(), "model": "mock-model",
            "api_key_cmd": "sleep 2; exit 3", "max_retries": 0, "timeout": 10 });
        ed.lua("require('handoff').setup({ bin = ..., provider = select(2, ...) })", json!([common::nvim::HOST_BIN, provider])).await;
        ed.lua("require('handoff').open_chat()", json!([])).await;
        host_started(&ed).await;
        ed.lua(GAP_TIMER, json!([])).await;
        let t0 = Instant::now();
        ed.lua("require('handoff').prompt('hello without a key')", json!([])).await;
        let end = ed.wait_event_for("HandoffAgentEnd", 1, Duration::from_secs(20)).await;
        let took = t0.elapsed();
        let gap = worst_gap(&ed).await;
        assert_not_frozen(gap, took, "the failing key command ran");
        assert_eq!(end["stop_reason"], "error", "{end}");
        let message = end["error_message"].as_str().unwrap();
        assert!(message.contains("api_key_cmd `sleep …` failed"), "{message}");
        assert!(!ed.mock.requests().iter().any(|r| r.path.ends_with("/chat/completions")), "no request without a key");
        ed.quit().await;
    })
    .await;
}

/// Issue 31: `:checkhealth handoff` probed the provider inside the `health` request. The host
/// now answers at once and probes in a task; the check waits for the probes (at most
/// `health.wait_ms`) with the editor's loop running, and shows what they found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkhealth_with_a_slow_provider_keeps_the_editor_running() {
    bounded(async {
        let ed = Editor::start().await;
        ed.mock.listing(|l| {
            l.models = vec![json!({ "id": "mock-model", "context_length": 20_000 })];
            l.delay_ms = 2000;
        });
        ed.lua("require('handoff.host').ensure()", json!([])).await;
        ed.wait_until("require('handoff').status().session_file ~= nil", Duration::from_secs(10)).await;
        ed.lua(GAP_TIMER, json!([])).await;
        let t0 = Instant::now();
        ed.command("checkhealth handoff").await;
        let took = t0.elapsed();
        let gap = worst_gap(&ed).await;
        let health = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
        let health = health.as_str().unwrap();
        assert_not_frozen(gap, took, ":checkhealth probed the provider");
        assert!(health.contains("answered HTTP 200"), "{health}");
        assert!(health.contains("the model list answered (1 models); mock-model: window 20000 tokens"), "{health}");
        ed.quit().await;
    })
    .await;
}

/// Writes `count` sessions of about `bytes` each into the editor's session folder for its work
/// folder: a chain of handoffs every few, each a conversation whose messages carry long text.
fn write_session_folder(ed: &Editor, count: usize, bytes: usize) -> std::path::PathBuf {
    let folder = ed.session_dir.join(handoff_nvim::core::session::paths::cwd_folder_name(&ed.work_dir()));
    std::fs::create_dir_all(&folder).unwrap();
    let filler = "the quick brown fox jumps over the lazy dog while the tests compile ".repeat(40);
    let mut previous: Option<std::path::PathBuf> = None;
    for n in 0..count {
        let id = format!("00000000-0000-7000-8000-{n:012}");
        let stamp = format!("2026-11-{:02}T10:{:02}:{:02}.000Z", 1 + n / 3600, (n / 60) % 60, n % 60);
        let path = folder.join(format!("{}_{id}.jsonl", stamp.replace([':', '.'], "-")));
        let mut header = json!({ "type": "session", "version": 3, "id": id, "timestamp": stamp, "cwd": ed.work_dir() });
        if let Some(parent) = previous.as_ref().filter(|_| n % 4 != 0) {
            header["parentSession"] = json!(parent);
        }
        let mut text = header.to_string();
        let mut parent = serde_json::Value::Null;
        let mut i = 0;
        while text.len() < bytes {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            let entry_id = format!("{i:08x}");
            let line = json!({ "type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp,
                "message": { "role": role, "content": [{ "type": "text", "text": format!("turn {i} of session {n}: {filler}") }] } });
            text.push('\n');
            text.push_str(&line.to_string());
            parent = json!(entry_id);
            i += 1;
        }
        std::fs::write(&path, text + "\n").unwrap();
        previous = Some(path);
    }
    folder
}

/// Issue 40: `:HandoffSessions` read every session file of the folder whole inside a request,
/// the editor waiting (seconds for a folder of hundreds of large sessions). Now the host lists
/// them in a task and the picker opens when its `sessions` record arrives, in the chains'
/// order; the editor answers meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_sessions_with_a_large_folder_never_freezes_the_editor() {
    bounded(async {
        let ed = Editor::start().await;
        write_session_folder(&ed, 200, 300_000);
        host_started(&ed).await;
        ed.lua(&format!("{GAP_TIMER} {CAPTURE_PICKER}"), json!([])).await;
        let t0 = Instant::now();
        ed.command("HandoffSessions").await;
        let picked = ed.wait_until("_G.picked", Duration::from_secs(60)).await;
        let took = t0.elapsed();
        let gap = worst_gap(&ed).await;
        assert_not_frozen(gap, took, "the session folder was listed");
        let picked: Vec<String> = serde_json::from_value(picked).unwrap();
        assert_eq!(picked.len(), 200, "{picked:?}");
        // The chains as the host placed them: the newest chain first, its first session, then
        // each one handed off from the one above it.
        assert!(picked[0].starts_with("2026-11-01T10:03:16.000Z  turn 0 of session 196"), "{}", picked[0]);
        assert!(picked[1].starts_with("⇠ 2026-11-01T10:03:17.000Z  turn 0 of session 197"), "{}", picked[1]);
        ed.quit().await;
    })
    .await;
}

/// Issue 40: writing a reviewed document (`handoff_commit`) wrote and fsynced the new session
/// inside the notification's handler; nvim-rs dispatches nothing else meanwhile, so a request
/// the editor sent then (here `status`) waited for the commit, the editor with it. Now the
/// commit's file work runs on a blocking thread: the request answers at once, and
/// `HandoffDone` still comes only once the new session is on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committing_a_large_reviewed_document_never_holds_the_editors_requests() {
    bounded(async {
        let ed = Editor::start_with_setup(json!({ "handoff": { "review": true } })).await;
        ed.converse("first question", "first answer").await;
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff the parser").await;
        ed.wait_event("HandoffReview", 1).await;
        // A document of 23 MB (a reviewer pasted logs in): writing and syncing it takes a while.
        let timed = ed
            .lua(
                "local text = '## Goal\\n' .. string.rep('a line of a long pasted log, with \"quotes\" and \\\\ escapes\\n', 400000) \
                 _G.commit_t0 = vim.uv.hrtime() \
                 require('handoff.host').notify_running('handoff_commit', text) \
                 local t0 = vim.uv.hrtime() \
                 local ok = require('handoff.host').try_request('status') \
                 return { ok = ok, ms = (vim.uv.hrtime() - t0) / 1e6 }",
                json!([]),
            )
            .await;
        assert_eq!(timed["ok"], json!(true), "{timed}");
        let done = ed.wait_event("HandoffDone", 1).await;
        let took = ed.eval("(vim.uv.hrtime() - _G.commit_t0) / 1e6").await.as_f64().unwrap();
        let stall = timed["ms"].as_f64().unwrap();
        assert_not_frozen(stall, std::time::Duration::from_secs_f64(took / 1000.0), "a reviewed document was committed");
        let new_file = done["session_file"].as_str().unwrap();
        let lines = common::nvim::jsonl(std::path::Path::new(new_file));
        let content = lines.iter().find(|l| l["type"] == "custom_message").unwrap()["content"].as_str().unwrap().len();
        assert!(content > 22_000_000, "the document is in the new session when HandoffDone comes: {content} bytes");
        ed.quit().await;
    })
    .await;
}

/// Issue 40: completing `@path` ran `git ls-files` and waited for it (up to 3 s) on the editor's
/// main loop. Now the list is read in the background: completion shows what is known at once
/// and the candidates come when git answers. A `git` that takes 2 s stands in for a large
/// repository or a slow disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completing_a_path_with_a_slow_git_never_freezes_the_editor() {
    bounded(async {
        use std::os::unix::fs::PermissionsExt;
        let ed = Editor::start().await;
        let bin = ed.dir.path().join("slow-bin");
        std::fs::create_dir_all(&bin).unwrap();
        let git = bin.join("git");
        std::fs::write(&git, "#!/bin/sh\nsleep 2\nprintf 'src/slow.rs\\0README.md\\0'\n").unwrap();
        std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
        ed.lua("vim.env.PATH = ... .. ':' .. vim.env.PATH", json!([bin])).await;
        ed.lua(GAP_TIMER, json!([])).await;
        let t0 = Instant::now();
        // As the prompt buffer's 'omnifunc' asks, for `@s` typed.
        ed.lua("_G.first = require('handoff.commands').omnifunc(0, '@s')", json!([])).await;
        ed.wait_until("vim.tbl_contains(require('handoff.completion').files(), 'src/slow.rs')", Duration::from_secs(20)).await;
        let took = t0.elapsed();
        let gap = worst_gap(&ed).await;
        assert_not_frozen(gap, took, "git listed the project's files");
        let now = ed.eval("vim.tbl_map(function(i) return i.word end, require('handoff.commands').omnifunc(0, '@s'))").await;
        assert_eq!(now, json!(["@src/slow.rs"]), "the candidates once git answered");
        ed.quit().await;
    })
    .await;
}
