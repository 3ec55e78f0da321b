//! In-process benchmarks (divan): the core's own cost without process start-up, Neovim or pi.
//!
//!     cargo bench --bench inprocess          # full run (bench/run.sh does this too)
//!     cargo test --bench inprocess           # each benchmark once: the smoke run of `cargo test`
//!
//! - `handoff_instant`: `AgentSession::handoff` with the loopback mock answering at once, from
//!   the call to the new session on disk (section 3 of doc/benchmarks.md, minus process start).
//! - `prompt_stream`: a prompt whose reply streams N tokens at full speed through the provider
//!   and the agent loop into the session (the host's side of section 4).
//! - `open_and_build_context`: `SessionManager::open` + `build_session_context` of a generated
//!   session (section 2, minus process start and JSON output).
//! - `cancel_handoff`: `Controller::abort_handoff` while the document streams (first piece in,
//!   the rest ~20 s away) until `handoff()` returns `Cancelled`: the cancel's latency, which the
//!   tests check only against the waits it cuts short (doc/benchmarks.md).
//! - `grep_tree`: the grep tool (`ToolRegistry::execute("grep", …)`) over bench/gen_tree.py's tree,
//!   24,000 files / ~252 MB under `cargo bench` (generated once per run), 300 files under
//!   `cargo test` (section 6b, minus process start and the model round trips).
//! - `decode_chat_completions`, `decode_responses`: one long reply (the same 20,000 words) as
//!   each API streams it, through the SSE parser and the format's decoder, in 1,400-byte chunks
//!   as the network delivers them (no HTTP, no agent).
//! - `read_rules_cached`, `read_rules_made`: what a sandboxed command may read
//!   (`sandbox::read_rules`), as the host works it out before each command: the cached set
//!   checked against the folders it listed (what nearly every command costs), and the set made
//!   anew (the credential list and its folders read, the rules encoded; this user's home).
//!   `read_rules_in_helper`: the helper's side, what the rules add to each command: read them
//!   from the memfd, open each path and add it to a Landlock ruleset (not put in force).
//! - `review_split`: one `write` of a 5,000-line file changing 200 places, split into hunks
//!   against the file before the call (`session::review::split_hunks`, what the host does after
//!   each edit/write; the editor's side is bench/review_bench.lua).
//! - `request_plain`, `request_copilot`: one short reply over HTTP from the mock through
//!   `Provider::stream` (no agent), as a plain Chat Completions provider and as Copilot with its
//!   token and model list cached (exchanged once before sampling): what Copilot adds per request
//!   (its headers, finding the model in the cached list; no extra round trip).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::{AgentConfig, AgentEvent, AgentSession, RunOptions};
use handoff_nvim::core::controller::{Controller, FrontEndTexts, Lifecycle};
use handoff_nvim::core::handoff::HandoffOutcome;
use handoff_nvim::core::provider::fuzzing::decode_body;
use handoff_nvim::core::message::{ContextMessage, Message};
use handoff_nvim::core::provider::{Api, ChatRequest, CopilotConfig, Provider, ProviderConfig};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::{ToolContext, ToolRegistry};

const DOCUMENT: &str = "## Goal\nShip the parser.\n\n## Constraints & Preferences\n- Rust\n\n## Progress\n- lexer done\n\n## Key Decisions\n- hand-written\n\n## Critical Context\n- src/lex.rs\n\n## Next Steps\n1. parse expressions";

fn main() {
    divan::main();
}

struct Env {
    rt: tokio::runtime::Runtime,
    mock: MockServer,
    dir: tempfile::TempDir,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        handoff_nvim::install_crypto_provider();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let mock = rt.block_on(MockServer::start()).unwrap();
        mock.set_default(MockReply::text(DOCUMENT));
        Env { rt, mock, dir: tempfile::tempdir().unwrap() }
    })
}

/// A pi-format session of about `entries` entries (bench/gen_session.py), generated once.
fn session_file(entries: usize) -> PathBuf {
    let path = env().dir.path().join(format!("session-{entries}.jsonl"));
    if !path.exists() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gen_session.py");
        let status = std::process::Command::new("python3")
            .arg(script)
            .arg(entries.to_string())
            .arg(&path)
            .arg("--cwd")
            .arg(env().dir.path())
            .status()
            .expect("python3 bench/gen_session.py");
        assert!(status.success());
    }
    path
}

fn agent(session: SessionManager) -> Arc<AgentSession> {
    let mut provider = ProviderConfig::new(Api::Openai, env().mock.openai_base_url(), "mock-model");
    provider.name = "mock".into();
    provider.max_retries = 0;
    provider.idle_timeout = Duration::from_secs(30);
    Arc::new(AgentSession::new(AgentConfig::new(provider), session))
}

fn sessions_dir() -> PathBuf {
    env().dir.path().join("sessions")
}

/// A fresh copy of a small (12-entry) session, opened.
fn small_session() -> SessionManager {
    let src = session_file(12);
    let copy = env().dir.path().join(format!("copy-{}.jsonl", uuid_like()));
    std::fs::copy(src, &copy).unwrap();
    SessionManager::open(&copy, &sessions_dir()).unwrap()
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

#[divan::bench(sample_count = 30)]
fn handoff_instant(bencher: divan::Bencher) {
    let e = env();
    bencher.with_inputs(|| agent(small_session())).bench_local_values(|agent| {
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        let outcome = e.rt.block_on(controller.handoff(Default::default()));
        assert!(matches!(outcome, HandoffOutcome::Done { .. }), "{outcome:?}");
        agent
    });
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn cancel_handoff(bencher: divan::Bencher) {
    let e = env();
    bencher
        .with_inputs(|| {
            let agent = agent(small_session());
            let controller = Arc::new(Controller::new(agent.clone(), FrontEndTexts::default()));
            e.mock.push(MockReply::Text {
                chunks: (0..200).map(|i| format!("part{i} ")).collect(),
                chunk_delay_ms: 100,
                first_delay_ms: 0,
                stop: "stop".into(),
                thinking: Vec::new(),
            });
            let mut rx = agent.subscribe();
            let run = {
                let controller = controller.clone();
                e.rt.spawn(async move { controller.handoff(Default::default()).await })
            };
            e.rt.block_on(async {
                while !matches!(rx.recv().await, Ok(AgentEvent::MessageUpdate { .. })) {}
            });
            (controller, run)
        })
        .bench_local_values(|(controller, run)| {
            controller.abort_handoff();
            let outcome = e.rt.block_on(run).unwrap();
            assert!(matches!(outcome, HandoffOutcome::Cancelled), "{outcome:?}");
            controller
        });
}

#[divan::bench(args = [1_000, 10_000], sample_count = 10)]
fn prompt_stream(bencher: divan::Bencher, tokens: usize) {
    let e = env();
    bencher
        .counter(divan::counter::ItemsCount::new(tokens))
        .with_inputs(|| {
            let session = SessionManager::create(&sessions_dir(), e.dir.path(), None).unwrap();
            e.mock.push(MockReply::long(tokens));
            agent(session)
        })
        .bench_local_values(|agent| {
            e.rt.block_on(Lifecycle::of(&agent, FrontEndTexts::default()).run("stream", RunOptions::default())).unwrap();
            agent
        });
}

#[divan::bench(args = [1_000, 10_000], sample_count = 10)]
fn open_and_build_context(bencher: divan::Bencher, entries: usize) {
    let path = session_file(entries);
    let dir = sessions_dir();
    bencher.counter(divan::counter::ItemsCount::new(entries)).bench_local(|| {
        let session = SessionManager::open(&path, &dir).unwrap();
        divan::black_box(session.build_session_context());
        session
    });
}

/// bench/gen_tree.py's pattern: 61 matching lines in the full tree, so the whole tree is read.
const NEEDLE_RE: &str = "handoff_needle_[0-9a-f]{4}";

/// bench/gen_tree.py's tree, generated once: the full size when divan measures (`cargo bench`
/// passes `--bench`), small when it only runs each benchmark once (`cargo test`).
/// `HANDOFF_BENCH_TREE=DIR` searches an existing tree instead (to time rg on the same files).
fn grep_tree_dir() -> &'static Path {
    static TREE: OnceLock<PathBuf> = OnceLock::new();
    TREE.get_or_init(|| {
        if let Some(dir) = std::env::var_os("HANDOFF_BENCH_TREE") {
            return PathBuf::from(dir);
        }
        let args: Vec<String> = std::env::args().collect();
        let measuring = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test");
        let files = if measuring { 24_000 } else { 300 };
        let dir = env().dir.path().join(format!("tree-{files}"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gen_tree.py");
        let status = std::process::Command::new("python3")
            .arg(script)
            .arg(&dir)
            .arg("--files")
            .arg(files.to_string())
            .stdout(std::process::Stdio::null())
            .status()
            .expect("python3 bench/gen_tree.py");
        assert!(status.success());
        dir
    })
}

#[divan::bench(sample_count = 10)]
fn grep_tree(bencher: divan::Bencher) {
    let e = env();
    let ctx = ToolContext::new(grep_tree_dir());
    let tools = ToolRegistry::all();
    // Once outside the samples: the page cache, as for rg in bench.py.
    let warm = e.rt.block_on(tools.execute("grep", serde_json::json!({"pattern": NEEDLE_RE}), &ctx));
    assert!(!warm.is_error && warm.joined_text().contains("handoff_needle_"), "{}", warm.joined_text());
    bencher.bench_local(|| e.rt.block_on(tools.execute("grep", serde_json::json!({"pattern": NEEDLE_RE}), &ctx)));
}

/// Words of the long reply the decoding benchmarks stream.
const DECODE_WORDS: usize = 20_000;

fn reply_words() -> impl Iterator<Item = String> {
    (0..DECODE_WORDS).map(|i| format!("word{} ", i % 97))
}

/// The long reply as Chat Completions streams it: a chunk per word, the finish, the usage.
fn chat_completions_stream() -> Vec<u8> {
    let mut out = String::new();
    for w in reply_words() {
        let chunk = serde_json::json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
            "choices": [{ "index": 0, "delta": { "content": w }, "finish_reason": null }] });
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    out.push_str("data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":20000}}\n\ndata: [DONE]\n\n");
    out.into_bytes()
}

/// The same reply as the Responses API streams it: named events, a delta per word, then the
/// text repeated whole in the `done` events and the final response, as the real API sends it.
fn responses_stream() -> Vec<u8> {
    let mut out = String::new();
    let mut seq = 0;
    let mut event = |out: &mut String, v: serde_json::Value| {
        let mut v = v;
        v["sequence_number"] = seq.into();
        seq += 1;
        out.push_str(&format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or_default()));
    };
    let text: String = reply_words().collect();
    let message = serde_json::json!({ "id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
        "content": [{ "type": "output_text", "annotations": [], "text": text }] });
    event(&mut out, serde_json::json!({ "type": "response.created", "response": { "id": "resp_1", "status": "in_progress", "output": [] } }));
    event(&mut out, serde_json::json!({ "type": "response.output_item.added", "output_index": 0,
        "item": { "id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": [] } }));
    event(&mut out, serde_json::json!({ "type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
        "part": { "type": "output_text", "annotations": [], "text": "" } }));
    for w in reply_words() {
        event(&mut out, serde_json::json!({ "type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": w, "logprobs": [] }));
    }
    event(&mut out, serde_json::json!({ "type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": text }));
    event(&mut out, serde_json::json!({ "type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
        "part": { "type": "output_text", "annotations": [], "text": text } }));
    event(&mut out, serde_json::json!({ "type": "response.output_item.done", "output_index": 0, "item": message }));
    event(&mut out, serde_json::json!({ "type": "response.completed", "response": { "id": "resp_1", "status": "completed", "output": [message],
        "usage": { "input_tokens": 10, "output_tokens": 20000, "total_tokens": 20010 } } }));
    out.into_bytes()
}

fn decode(bencher: divan::Bencher, api: Api, body: Vec<u8>) {
    let chunks: Vec<bytes::Bytes> = body.chunks(1400).map(bytes::Bytes::copy_from_slice).collect();
    let (events, _) = decode_body(api, chunks.clone()).unwrap();
    assert_eq!(events.iter().filter(|e| matches!(e, handoff_nvim::core::provider::StreamEvent::TextDelta(_))).count(), DECODE_WORDS);
    bencher
        .counter(divan::counter::BytesCount::new(body.len()))
        .with_inputs(|| chunks.clone())
        .bench_local_values(|chunks| decode_body(api, chunks).unwrap());
}

#[divan::bench(sample_count = 20)]
fn decode_chat_completions(bencher: divan::Bencher) {
    decode(bencher, Api::Openai, chat_completions_stream());
}

#[divan::bench(sample_count = 20)]
fn decode_responses(bencher: divan::Bencher) {
    decode(bencher, Api::OpenaiResponses, responses_stream());
}

fn one_request(provider: &Provider) {
    let request = ChatRequest { messages: vec![ContextMessage::from(Message::user("hello"))], ..ChatRequest::default() };
    let cancel = tokio_util::sync::CancellationToken::new();
    env().rt.block_on(provider.stream(&request, &cancel, &mut |_| {})).unwrap();
}

#[divan::bench(sample_count = 50)]
fn request_plain(bencher: divan::Bencher) {
    let mut config = ProviderConfig::new(Api::Openai, env().mock.openai_base_url(), "gpt-4.1");
    config.max_retries = 0;
    let provider = Provider::new(config);
    one_request(&provider);
    bencher.bench_local(|| one_request(&provider));
}

#[divan::bench(sample_count = 50)]
fn request_copilot(bencher: divan::Bencher) {
    // The GitHub token the exchange reads (the bench's process only).
    std::env::set_var("COPILOT_GITHUB_TOKEN", "gho_bench");
    let mut config = ProviderConfig::new(Api::Openai, "http://127.0.0.1:9", "gpt-4.1");
    config.name = "github-copilot".into();
    config.max_retries = 0;
    config.copilot = Some(CopilotConfig { token_url: env().mock.copilot_token_url(), ..CopilotConfig::default() });
    let provider = Provider::new(config);
    // The exchange and the model list, once: every sample after reuses them.
    one_request(&provider);
    bencher.bench_local(|| one_request(&provider));
}

#[divan::bench(sample_count = 50)]
fn read_rules_cached(bencher: divan::Bencher) {
    use handoff_nvim::core::sandbox::read_rules;
    read_rules::current().unwrap();
    bencher.bench_local(|| read_rules::current().unwrap());
}

#[divan::bench(sample_count = 50)]
fn read_rules_made(bencher: divan::Bencher) {
    use handoff_nvim::core::sandbox::{protected, read_rules};
    bencher.bench_local(|| {
        let (rules, _) = read_rules::rules_for(&protected::credential_locations());
        read_rules::encode(&rules)
    });
}

#[cfg(target_os = "linux")]
#[divan::bench(sample_count = 50)]
fn read_rules_in_helper(bencher: divan::Bencher) {
    use handoff_nvim::core::sandbox::{linux, read_rules};
    use landlock::{Access, AccessFs, Ruleset, RulesetAttr, ABI};
    use std::os::fd::AsRawFd;
    let rules = read_rules::current().unwrap();
    bencher.bench_local(|| {
        // SAFETY: a copy of the memfd's descriptor, which `load` reads and closes.
        let fd = unsafe { libc::dup(rules.fd().as_raw_fd()) };
        let read = read_rules::load(fd).unwrap();
        let mut created = Ruleset::default().handle_access(AccessFs::from_all(ABI::V3)).unwrap().create().unwrap();
        linux::add_read_rules(&mut created, &read);
        created
    });
}

/// A 5,000-line file and the agent's version of it with every 25th line changed (200 hunks).
pub fn review_versions() -> (Vec<u8>, Vec<u8>) {
    let base: String = (1..=5000).map(|i| format!("line {i} of the file, some text to diff\n")).collect();
    let agent: String = (1..=5000)
        .map(|i| if i % 25 == 0 { format!("LINE {i} changed by the agent\n") } else { format!("line {i} of the file, some text to diff\n") })
        .collect();
    (base.into_bytes(), agent.into_bytes())
}

#[divan::bench(sample_count = 30)]
fn review_split(bencher: divan::Bencher) {
    let (base, agent) = review_versions();
    bencher.bench_local(|| {
        let hunks = handoff_nvim::core::session::review::split_hunks(&base, &agent);
        assert_eq!(hunks.len(), 200);
        hunks
    });
}
