//! Pins (issue 33): `/pin TEXT`, `/pins`, `/unpin N` run in the host, never as a model request;
//! a pin is kept in the session as pi's `custom` entry, reaches the model once per request (a
//! section of the system prompt) and is carried byte for byte into the new session at every
//! handoff of a chain, automatic ones included; our CLI and pi 0.73.1 resume such sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::pi::{pi_bin as pi, PiAndOurs};
use common::{config, entry_lines, seeded_session, wire_messages, DOCUMENT};
use handoff_mock::{MockReply, MockServer, MockUsage, RecordedRequest};
use handoff_nvim::core::agent::{AgentConfig, AgentSession};
use handoff_nvim::core::controller::{self, Controller, FrontEndTexts, Input, PinCommand, InputOutcome};
use handoff_nvim::core::failure::FailureKind;
use handoff_nvim::core::session::{pins, SessionManager};
use handoff_nvim::core::tools::consent::{Level, Policy};
use serde_json::Value;

const T: Duration = Duration::from_secs(60);
/// A small window, so that a reply reporting a large usage meets the wall.
const WINDOW: u64 = 20_000;

/// Quotes, an em dash, repeated spaces and a line break: what must come through unchanged.
const PIN: &str = "Never touch \"vendor/\" — keep  two  spaces\nand 'this' line";

struct Env {
    mock: MockServer,
    dir: tempfile::TempDir,
    agent: Arc<AgentSession>,
    controller: Arc<Controller>,
}

impl Env {
    async fn new() -> Env {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut provider = config(&mock);
        provider.context_window = WINDOW;
        let agent = Arc::new(AgentSession::new(
            AgentConfig { policy: Policy { level: Level::AllowAll, ..Policy::default() }, ..AgentConfig::new(provider) },
            seeded_session(dir.path(), 2),
        ));
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        Env { mock, dir, agent, controller }
    }

    async fn run(&self, text: &str) -> InputOutcome {
        tokio::time::timeout(T, self.controller.run_input(text)).await.expect("the input hung")
    }

    async fn pins_after(&self, text: &str) -> Vec<String> {
        match self.run(text).await {
            InputOutcome::Pins(Ok(pins)) => pins,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn path(&self) -> PathBuf {
        self.agent.session().path().to_path_buf()
    }
}

/// The lists of the pins entries of a session file, in order (each `custom` entry pi keeps).
fn pin_entries(path: &Path) -> Vec<Vec<String>> {
    entry_lines(path)
        .into_iter()
        .filter(|e| e["customType"] == pins::CUSTOM_TYPE)
        .map(|e| {
            assert_eq!(e["type"], "custom", "{e}");
            serde_json::from_value(e["data"]["pins"].clone()).unwrap()
        })
        .collect()
}

/// Every string of a request body, recursively.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// How often `needle` is in what a request sends (system prompt and messages).
fn times_sent(request: &RecordedRequest, needle: &str) -> usize {
    let mut all = Vec::new();
    strings(&request.body, &mut all);
    all.iter().map(|s| s.matches(needle).count()).sum()
}

fn big_usage() -> MockUsage {
    MockUsage { input: 15_000, output: Some(100), ..MockUsage::default() }
}

#[test]
fn the_controller_recognises_the_pin_commands_and_nothing_else() {
    let pin = |t: &str| controller::classify_input(t);
    assert_eq!(pin("/pin  a  b "), Input::Pin(PinCommand::Add("a  b".into())));
    assert_eq!(pin("/pin\nline one\nline two"), Input::Pin(PinCommand::Add("line one\nline two".into())));
    assert_eq!(pin("/pin"), Input::Pin(PinCommand::Add(String::new())));
    assert_eq!(pin("/pins"), Input::Pin(PinCommand::List));
    assert_eq!(pin("/unpin 2"), Input::Pin(PinCommand::Remove("2".into())));
    for prompt in ["/pinned x", "/pins x", "please /pin x", "/unpinall"] {
        assert_eq!(pin(prompt), Input::Prompt(prompt.into()), "{prompt}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pin_commands_never_reach_the_model_and_are_kept_as_a_custom_entry() {
    let env = Env::new().await;
    assert_eq!(env.pins_after(&format!("/pin {PIN}")).await, [PIN]);
    assert_eq!(env.pins_after("/pin second").await, [PIN, "second"]);
    assert_eq!(env.pins_after("/pins").await, [PIN, "second"]);
    let InputOutcome::Pins(Err(f)) = env.run("/unpin 3").await else { panic!() };
    assert_eq!(f.kind, FailureKind::Invalid);
    let InputOutcome::Pins(Err(f)) = env.run("/pin   ").await else { panic!() };
    assert_eq!(f.message, controller::text::NOTHING_TO_PIN);
    assert!(env.mock.requests().is_empty(), "a pin command was sent to the model");
    let entries = entry_lines(&env.path());
    assert!(!entries.iter().any(|e| e["type"] == "message" && e.to_string().contains("/pin")), "a pin command became a message");
    assert_eq!(pin_entries(&env.path()), [vec![PIN.to_string()], vec![PIN.to_string(), "second".to_string()]]);
    // Read back from the file as written.
    let session = SessionManager::open(&env.path(), &env.dir.path().join("sessions")).unwrap();
    assert_eq!(session.pins(), [PIN, "second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pin_survives_three_chained_handoffs_byte_identical_and_reaches_the_model_once() {
    let env = Env::new().await;
    env.pins_after(&format!("/pin {PIN}")).await;
    let first = env.path();
    // 1: `/handoff` typed.
    env.mock.push(MockReply::text(DOCUMENT));
    assert!(matches!(env.run("/handoff").await, InputOutcome::Handoff(_)));
    let second = env.path();
    // 2: `/handoff` after a prompt in the new session.
    env.mock.push(MockReply::text("ok"));
    env.run("go on").await;
    env.mock.push(MockReply::text(DOCUMENT));
    env.run("/handoff the tests").await;
    let third = env.path();
    // 3: automatic, at the wall after a reply.
    env.mock.push(MockReply::text("done").with_usage(big_usage()));
    env.mock.push(MockReply::text(DOCUMENT));
    env.run("finish it").await;
    let fourth = env.path();
    let chain = [&first, &second, &third, &fourth];
    for (i, a) in chain.iter().enumerate() {
        for b in &chain[i + 1..] {
            assert_ne!(a, b, "a handoff did not happen");
        }
    }
    for path in &chain[1..] {
        assert_eq!(pin_entries(path), [vec![PIN.to_string()]], "{}", path.display());
        assert!(std::fs::read_to_string(path).unwrap().contains(&serde_json::to_string(PIN).unwrap()));
    }
    // Every request carried the pin once, the handoffs' too; the newest session's as well.
    env.mock.push(MockReply::text("fine"));
    env.run("and now?").await;
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 6, "three handoffs, three prompts");
    for (n, request) in requests.iter().enumerate() {
        assert_eq!(times_sent(request, PIN), 1, "request {n}");
    }
    assert!(wire_messages(requests.last().unwrap()).iter().all(|(_, text)| !text.contains(PIN)), "the pin went as a message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpin_removes_it_from_the_next_request_and_the_next_handoff() {
    let env = Env::new().await;
    env.pins_after("/pin first pin").await;
    env.pins_after("/pin second pin").await;
    assert_eq!(env.pins_after("/unpin 1").await, ["second pin"]);
    env.mock.push(MockReply::text(DOCUMENT));
    env.run("/handoff").await;
    assert_eq!(pin_entries(&env.path()), [vec!["second pin".to_string()]]);
    let handoff = env.mock.requests().pop().unwrap();
    assert_eq!((times_sent(&handoff, "first pin"), times_sent(&handoff, "second pin")), (0, 1));
    // The last one gone: the next session starts with none.
    assert!(env.pins_after("/unpin 1").await.is_empty());
    env.mock.push(MockReply::text("ok"));
    env.run("go on").await;
    env.mock.push(MockReply::text(DOCUMENT));
    env.run("/handoff").await;
    assert!(pin_entries(&env.path()).is_empty());
    assert_eq!(times_sent(&env.mock.requests().pop().unwrap(), "second pin"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_s_prompt_pins_without_a_model_request_and_pi_resumes_the_handed_off_session() {
    let cli = PiAndOurs::new().await;
    cli.mock.push(MockReply::text("Sure."));
    let (_, stderr) = cli.ours(&["prompt", "--new", "Plan the parser"]).await;
    let old = PathBuf::from(stderr.lines().next().unwrap());
    let (stdout, _) = cli.ours(&["prompt", "--session", old.to_str().unwrap(), &format!("/pin {PIN}")]).await;
    assert_eq!(stdout, format!("{}\n", controller::text::pins(&[PIN.to_string()])));
    assert_eq!(cli.mock.requests().len(), 1, "/pin was sent to the model");
    cli.mock.push(MockReply::text(DOCUMENT));
    let (stdout, _) = cli.ours(&["handoff", old.to_str().unwrap()]).await;
    let new = PathBuf::from(stdout.trim());
    assert_eq!(pin_entries(&new), [vec![PIN.to_string()]]);
    assert_eq!(times_sent(&cli.mock.requests()[1], PIN), 1, "the handoff's request");

    let Some(pi) = pi() else { return };
    let bytes = std::fs::read(&new).unwrap();
    cli.mock.push(MockReply::text("Pi goes on."));
    cli.pi(&pi, &new, "go on").await;
    // pi sent the document and its prompt (a custom entry is no message), and kept our lines.
    let sent = wire_messages(&cli.mock.requests()[2]);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[1].1, "go on");
    let after = std::fs::read(&new).unwrap();
    assert!(after.starts_with(&bytes), "pi rewrote our lines");
    // And we go on from the file pi appended to, the pin still in force.
    cli.mock.push(MockReply::text("Back here."));
    cli.ours(&["prompt", "--session", new.to_str().unwrap(), "and then?"]).await;
    let ours = cli.mock.requests().pop().unwrap();
    assert_eq!(times_sent(&ours, PIN), 1);
    assert_eq!(wire_messages(&ours).len(), 4);
}
