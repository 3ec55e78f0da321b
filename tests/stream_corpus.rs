//! A corpus of real-looking provider streams (tests/fixtures/streams/{chat,anthropic,responses}/:
//! each `.sse` the raw bytes a server sends, its `.json` the assistant message as pi stores it
//! and how the reply ends), with the quirks real APIs show (listed in doc/reliability.md,
//! "Real streams").
//!
//! Each stream goes through the mock ([`MockReply::Raw`]) and the real provider and agent, whole
//! and in slices, and the stored message must be the expected one; the decoder alone gets many
//! seeds of slices (cut at `\n\n`, inside `data:`, inside multi-byte characters, one byte at a
//! time) and must decode each the same as whole. A failure prints the seed that reproduces it:
//! `HANDOFF_STREAM_SEED=<seed> cargo test --test stream_corpus`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{entry_lines, new_session, Rng};
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::failure::FailureKind;
use handoff_nvim::core::provider::fuzzing::slicing_keeps_the_verdict;
use handoff_nvim::core::provider::{Api, ProviderConfig};
use serde_json::{json, Value};

/// One stream of the corpus.
struct Case {
    /// `chat/usage_on_the_finish_chunk`, …
    name: String,
    api: Api,
    body: Vec<u8>,
    expected: Value,
}

fn corpus_dir() -> PathBuf {
    common::fixtures_dir().join("streams")
}

/// Every stream of the corpus, in a stable order. Each `.sse` has its `.json`.
fn corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    for (dir, api) in [("chat", Api::Openai), ("anthropic", Api::Anthropic), ("responses", Api::OpenaiResponses)] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sse"))
            .collect();
        files.sort();
        for sse in files {
            let expected_path = sse.with_extension("json");
            let expected: Value = serde_json::from_slice(
                &std::fs::read(&expected_path).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display())),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
            let stem = sse.file_stem().unwrap().to_string_lossy();
            cases.push(Case { name: format!("{dir}/{stem}"), api, body: std::fs::read(&sse).unwrap(), expected });
        }
    }
    assert!(cases.len() >= 20, "the corpus is there: {}", cases.len());
    cases
}

/// The generator of one seed's cuts (neighbouring seeds start far apart).
fn rng_of(seed: u64) -> Rng {
    Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
}

/// Piece lengths that cut `body` at `cuts` (positions, any order; out of range ones ignored).
fn lengths_at(body: &[u8], mut cuts: Vec<usize>) -> Vec<usize> {
    cuts.retain(|&c| c > 0 && c < body.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut lengths = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for cut in cuts {
        lengths.push(cut - at);
        at = cut;
    }
    lengths.push(body.len() - at);
    lengths
}

/// Where `needle` starts in `body`, every time.
fn positions(body: &[u8], needle: &[u8]) -> Vec<usize> {
    body.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

/// The cuts of one seed: random pieces, or cuts near every `\n\n`, inside every `data:`, or
/// between the bytes of multi-byte characters (each kind by turns, with random picks).
fn slicing(body: &[u8], seed: u64) -> Vec<usize> {
    let mut rng = rng_of(seed);
    match seed % 5 {
        0 => {
            let mut lengths = Vec::new();
            let mut total = 0;
            while total < body.len() {
                let len = 1 + rng.below(64);
                lengths.push(len);
                total += len;
            }
            lengths
        }
        1 => {
            // At, just before or just after each blank line ending an event (LF or CRLF).
            let ends = positions(body, b"\n\n").into_iter().chain(positions(body, b"\n\r\n"));
            let cuts = ends.map(|p| (p + rng.below(4)).saturating_sub(1)).collect();
            lengths_at(body, cuts)
        }
        2 => {
            let cuts = positions(body, b"data:").into_iter().map(|p| p + 1 + rng.below(5)).collect();
            lengths_at(body, cuts)
        }
        3 => {
            // Inside each character of more than one byte (after its first byte, or its second).
            let cuts = body
                .iter()
                .enumerate()
                .filter(|(_, b)| **b >= 0xC0)
                .map(|(i, b)| i + 1 + if *b >= 0xE0 { rng.below(2) } else { 0 })
                .collect();
            lengths_at(body, cuts)
        }
        _ => (0..body.len()).map(|_| 1 + rng.below(3)).collect(),
    }
}

fn base_seed() -> u64 {
    std::env::var("HANDOFF_STREAM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    })
}

/// The corpus covers the quirks it is for: multi-byte characters to cut, and each API's
/// streams.
#[test]
fn the_corpus_has_multi_byte_text_to_cut_in_every_api() {
    let cases = corpus();
    for dir in ["chat/", "anthropic/", "responses/"] {
        let of_api: Vec<&Case> = cases.iter().filter(|c| c.name.starts_with(dir)).collect();
        assert!(of_api.len() >= 6, "{dir}: {}", of_api.len());
        assert!(of_api.iter().any(|c| c.body.iter().any(|b| *b >= 0xE0)), "{dir} has a character of 3+ bytes");
    }
}

#[test]
fn every_stream_decodes_the_same_in_any_slices() {
    const SEEDS: u64 = 300;
    let base = base_seed();
    eprintln!("HANDOFF_STREAM_SEED={base}");
    for case in corpus() {
        let one_byte = vec![1; case.body.len()];
        slicing_keeps_the_verdict(case.api, &case.body, &one_byte)
            .unwrap_or_else(|e| panic!("{}: one byte at a time: {e}", case.name));
        for i in 0..SEEDS {
            let seed = base.wrapping_add(i);
            let lengths = slicing(&case.body, seed);
            if let Err(e) = slicing_keeps_the_verdict(case.api, &case.body, &lengths) {
                panic!("{}: HANDOFF_STREAM_SEED={seed} reproduces it (pieces {lengths:?}): {e}", case.name);
            }
        }
    }
}

/// A provider for the mock speaking `api`.
fn provider(mock: &MockServer, api: Api) -> ProviderConfig {
    let mut config = common::config(mock);
    config.api = api;
    if api == Api::Anthropic {
        config.base_url = mock.anthropic_base_url();
    }
    config
}

/// One prompt answered by `body` in pieces of `lengths`, through the mock, the provider and
/// the agent (tools off: the stored reply is what is checked here): the stored assistant
/// message and the failure's kind.
async fn stored_reply(mock: &MockServer, api: Api, dir: &Path, body: &[u8], lengths: Vec<usize>) -> (Value, Option<FailureKind>) {
    mock.push(MockReply::Raw { bytes: body.to_vec(), slices: lengths });
    let session = new_session(dir);
    let path = session.path().to_path_buf();
    let agent = Arc::new(AgentSession::new(AgentConfig::new(provider(mock, api)), session));
    let result = agent.prompt("Go on.", RunOptions { use_tools: false, ..RunOptions::default() }).await.unwrap();
    let reply = entry_lines(&path)
        .into_iter()
        .rev()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .map(|e| e["message"].clone())
        .expect("an assistant message was stored");
    (reply, result.failure)
}

/// What of a stored message the corpus states: the content exactly, the stop reason, the usage
/// counts and response id when it gives them, and the error message containing its words.
fn check(name: &str, how: &str, stored: &Value, failure: Option<FailureKind>, expected: &Value) {
    let at = format!("{name} ({how})");
    assert_eq!(stored["content"], expected["content"], "{at}: content");
    assert_eq!(stored["stopReason"], expected["stopReason"], "{at}: stop reason");
    assert_eq!(stored["api"], json!(api_of(name).pi_name()), "{at}");
    if let Some(usage) = expected.get("usage") {
        for k in ["input", "output", "cacheRead", "cacheWrite", "totalTokens"] {
            assert_eq!(stored["usage"][k], usage[k], "{at}: usage {k}");
        }
    }
    match expected.get("responseId") {
        Some(id) => assert_eq!(&stored["responseId"], id, "{at}: response id"),
        None => assert!(stored.get("responseId").is_none() || expected["stopReason"] == "error", "{at}: {stored}"),
    }
    match expected.get("errorMessage").and_then(Value::as_str) {
        Some(words) => {
            let message = stored["errorMessage"].as_str().unwrap_or_default();
            assert!(message.contains(words), "{at}: error message {message:?} lacks {words:?}");
        }
        None => assert!(stored.get("errorMessage").is_none(), "{at}: {stored}"),
    }
    let kind = failure.map(|k| serde_json::to_value(k).unwrap());
    assert_eq!(kind.as_ref(), expected.get("failure"), "{at}: failure kind");
}

fn api_of(name: &str) -> Api {
    match name.split('/').next() {
        Some("chat") => Api::Openai,
        Some("anthropic") => Api::Anthropic,
        _ => Api::OpenaiResponses,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stream_is_stored_as_pi_stores_it_whatever_the_slices() {
    let base = base_seed();
    eprintln!("HANDOFF_STREAM_SEED={base}");
    let dir = tempfile::tempdir().unwrap();
    let mock = MockServer::start().await.unwrap();
    for (n, case) in corpus().into_iter().enumerate() {
        let seeds = (0..5).map(|i| base.wrapping_add(i));
        let mut slicings = vec![("whole".to_owned(), Vec::new()), ("one byte at a time".to_owned(), vec![1; case.body.len()])];
        slicings.extend(seeds.map(|seed| (format!("HANDOFF_STREAM_SEED={seed}"), slicing(&case.body, seed))));
        for (i, (how, lengths)) in slicings.into_iter().enumerate() {
            let run_dir = dir.path().join(format!("{n}-{i}"));
            let (stored, failure) = stored_reply(&mock, case.api, &run_dir, &case.body, lengths).await;
            check(&case.name, &how, &stored, failure, &case.expected);
        }
    }
}

/// A call cut mid-JSON by the output limit is never run as if whole, end to end: the agent
/// answers it with an error result that says nothing was run (the file it would have written
/// is not there), and the model gets that answer on the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_by_the_output_limit_is_answered_and_never_run() {
    for name in ["chat/tool_call_cut_by_length", "anthropic/tool_call_cut_by_max_tokens"] {
        let case = corpus().into_iter().find(|c| c.name == name).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let mock = MockServer::start().await.unwrap();
        mock.push(MockReply::Raw { bytes: case.body.clone(), slices: Vec::new() });
        mock.push(MockReply::text("I will write it in smaller pieces."));
        let session = handoff_nvim::core::session::SessionManager::create(&dir.path().join("sessions"), &project, None).unwrap();
        let path = session.path().to_path_buf();
        let agent = Arc::new(AgentSession::new(AgentConfig::new(provider(&mock, case.api)), session));
        agent.prompt("Write the notes.", RunOptions::default()).await.unwrap();

        assert!(!project.join("notes.md").exists(), "{name}: the cut write ran");
        let messages: Vec<Value> =
            entry_lines(&path).into_iter().filter(|e| e["type"] == "message").map(|e| e["message"].clone()).collect();
        let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"], "{name}");
        assert_eq!(messages[1]["stopReason"], "length", "{name}");
        let result = &messages[2];
        assert_eq!(result["isError"], true, "{name}");
        assert_eq!(result["toolName"], "write", "{name}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("nothing was run") && text.contains("First li"), "{name}: {text}");
        // The model is told why: the limit, not just broken JSON.
        assert!(text.contains("the reply reached its output limit (max_tokens) before the call was complete"), "{name}: {text}");
        // The model reads the answer on the next request.
        let second = mock.requests().into_iter().filter(|r| r.method == "POST").nth(1).unwrap();
        assert!(second.body.to_string().contains("nothing was run"), "{name}: {}", second.body);
    }
}
