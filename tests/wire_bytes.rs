//! The request body, byte for byte. Bodies are written straight from the session file's JSON
//! (issue "Performance 2"); these tests hold them to the bytes the earlier builder (JSON value
//! trees, serialized) sent for the same sessions, kept in `tests/fixtures/wire/*.json`.
//!
//! The sessions: `corpus.jsonl` (every shape a body must handle: escapes a serializer would not
//! write, images, signed, redacted and foreign thinking, tool calls with odd ids and arguments,
//! orphaned and missing results, failed turns, extension messages, summaries, a broken line),
//! `compacted.jsonl`, a generated bench session and pi 0.73.1's own files. Each is sent as the
//! next prompt's request over both APIs, and as a handoff's request.
//!
//! The system prompt ends with the machine's facts: the date, the operating system and the shell
//! are written as `<date>`, `<os>` and `<shell>` in the expected files (the working directory is
//! the session file's, the same everywhere).
//!
//! `HANDOFF_BLESS_WIRE=1 cargo test --test wire_bytes` rewrites the expected files: only ever
//! from a build whose bodies are known to be right.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::agent::system_prompt::Environment;
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::controller::{Controller, FrontEndTexts};
use handoff_nvim::core::handoff::HandoffOutcome;
use handoff_nvim::core::provider::{Api, ProviderConfig};
use handoff_nvim::core::session::SessionManager;

const SYSTEM: &str = "You are a careful coding agent.";

fn wire_dir() -> PathBuf {
    common::fixtures_dir().join("wire")
}

/// The three provider set-ups: OpenAI-compatible with `reasoning_effort` (same model as the
/// corpus's `mock` messages), Anthropic (same model as its `anthropic` messages).
fn provider(variant: &str, server: &MockServer) -> ProviderConfig {
    let mut config = common::config(server);
    match variant {
        "openai" => config.reasoning_effort = Some(true),
        "anthropic" => {
            config.api = Api::Anthropic;
            config.name = "anthropic".into();
            config.model = "claude-sonnet-4-5".into();
            config.base_url = server.anthropic_base_url();
        }
        other => panic!("no variant {other}"),
    }
    config
}

/// The bodies a session's next prompt and its handoff send.
async fn bodies(session_file: &Path, variant: &str) -> (Vec<u8>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(session_file.file_name().unwrap());
    std::fs::copy(session_file, &path).unwrap();
    let session = SessionManager::open(&path, &dir.path().join("sessions")).unwrap();
    let server = MockServer::start().await.unwrap();
    let config = AgentConfig { system_prompt: Some(SYSTEM.into()), ..AgentConfig::new(provider(variant, &server)) };
    let agent = Arc::new(AgentSession::new(config, session));
    agent.prompt("Go on.", RunOptions::default()).await.unwrap();
    let env = agent.system_prompt().environment.clone();
    server.push(MockReply::text(common::DOCUMENT));
    let controller = Controller::new(agent.clone(), FrontEndTexts::default());
    let outcome = controller.handoff(handoff_nvim::core::handoff::HandoffOptions::focus("the wire")).await;
    assert!(matches!(outcome, HandoffOutcome::Done { .. }), "{outcome:?}");
    let mut requests = server.requests();
    assert_eq!(requests.len(), 2, "the prompt's request and the handoff's");
    let handoff = machine_facts_out(&std::mem::take(&mut requests[1].raw), &env);
    (machine_facts_out(&std::mem::take(&mut requests[0].raw), &env), handoff)
}

/// The body with this machine's facts of the system prompt as placeholders.
fn machine_facts_out(body: &[u8], env: &Environment) -> Vec<u8> {
    let text = String::from_utf8(body.to_vec()).unwrap();
    let facts = format!("Current date: {}\\n", env.date);
    assert_eq!(text.matches(&facts).count(), 1, "the date once, in the system prompt");
    let machine = format!("\\nOperating system: {}\\nShell: {}", env.os, env.shell);
    assert_eq!(text.matches(&machine).count(), 1, "the OS and shell once, in the system prompt");
    text.replace(&facts, "Current date: <date>\\n").replace(&machine, "\\nOperating system: <os>\\nShell: <shell>").into_bytes()
}

fn check(name: &str, got: &[u8]) {
    let expected_path = wire_dir().join(name);
    if std::env::var_os("HANDOFF_BLESS_WIRE").is_some() {
        std::fs::write(&expected_path, got).unwrap();
        return;
    }
    let expected = std::fs::read(&expected_path)
        .unwrap_or_else(|e| panic!("{}: {e} (HANDOFF_BLESS_WIRE=1 writes it)", expected_path.display()));
    if expected != got {
        let at = expected.iter().zip(got).position(|(a, b)| a != b).unwrap_or(expected.len().min(got.len()));
        let around = |b: &[u8]| String::from_utf8_lossy(&b[at.saturating_sub(120)..(at + 120).min(b.len())]).into_owned();
        panic!(
            "{name}: the body differs from the expected bytes at byte {at} (lengths {} / {})\nexpected: …{}…\n     got: …{}…",
            expected.len(),
            got.len(),
            around(&expected),
            around(got)
        );
    }
}

async fn same_bytes(session_file: PathBuf) {
    let stem = session_file.file_stem().unwrap().to_string_lossy().into_owned();
    for variant in ["openai", "anthropic"] {
        let (prompt, handoff) = bodies(&session_file, variant).await;
        check(&format!("{stem}.{variant}.json"), &prompt);
        check(&format!("{stem}.{variant}.handoff.json"), &handoff);
    }
}

#[tokio::test]
async fn the_corpus_goes_out_as_before() {
    same_bytes(wire_dir().join("corpus.jsonl")).await;
}

#[tokio::test]
async fn a_compacted_session_goes_out_as_before() {
    same_bytes(wire_dir().join("compacted.jsonl")).await;
}

#[tokio::test]
async fn a_generated_session_goes_out_as_before() {
    same_bytes(wire_dir().join("generated.jsonl")).await;
}

#[tokio::test]
async fn pis_sessions_go_out_as_before() {
    for name in ["pimono-0.73.1-tool-calls-openai.jsonl", "pimono-0.73.1-tool-calls-anthropic.jsonl", "omp-18.2.3-print-session.jsonl"] {
        same_bytes(common::fixtures_dir().join("pi-sessions").join(name)).await;
    }
}
