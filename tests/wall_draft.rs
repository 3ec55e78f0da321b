//! The wall without a wait (issue 32, `:help handoff-prepare`): the handoff drafted before the
//! wall by a detached request over the conversation's own prefix, while the work goes on; at the
//! wall the new session starts from the draft and the turns since, verbatim; `handoff.prepare =
//! "off"` as before; a model switch discards the draft; `handoff.model` writes the documents and
//! not the work; Copilot drafts nothing by default. Against the loopback mock, whose replies for
//! the draft are kept for the request that asks for a handoff (`push_for`), so the draft and the
//! work's requests may race. pi 0.73.1 resumes the new session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::Path;
use std::time::Duration;

use common::wall::{WallEnv, T};
use common::{entry_lines, session_files, tool_call_reply, wait_until, wire_messages, DOCUMENT};
use handoff_mock::{MockReply, MockUsage};
use handoff_nvim::core::agent::events::DraftStatus;
use handoff_nvim::core::agent::AgentEvent;
use handoff_nvim::core::config::Settings;
use handoff_nvim::core::controller::{text, InputOutcome};
use handoff_nvim::core::handoff::{self, HandoffOptions, HandoffOutcome, Prepare};
use handoff_nvim::core::provider::ProviderConfig;
use serde_json::{json, Value};

// The window is `common::wall`'s 20k: the wall at half of it (10k), the band from 70% of that (7k).
const TASK: &str = "read the three notes and add their numbers";
/// The draft the mock writes: a document that names what the conversation held when it was
/// asked (the first note's number).
const DRAFTED: &str = "## Goal\nAdd the notes' numbers.\n\n## Constraints & Preferences\n- none\n\n## Progress\n- first note: 41\n\n## Key Decisions\n- read each note\n\n## Critical Context\n- notes in the project\n\n## Next Steps\n1. Read the next note";

type Env = WallEnv;

/// An environment whose controller drafts as `prepare` says (`None`: the provider's default).
async fn env(prepare: Option<Prepare>) -> Env {
    env_with(prepare, |_| {}).await
}

async fn env_with(prepare: Option<Prepare>, adjust: impl FnOnce(&mut ProviderConfig)) -> Env {
    let env = WallEnv::new(adjust).await;
    env.controller.lifecycle().set_prepare(prepare);
    env
}

/// What the tests of the draft read off an environment.
trait Drafting {
    fn note(&self, name: &str, number: u32) -> String;
    fn drafts(&self) -> Vec<DraftStatus>;
    fn prepared_starts(&self) -> Vec<bool>;
    fn handoff_requests(&self) -> Vec<handoff_mock::RecordedRequest>;
    async fn three_reads(&self, draft: Option<MockReply>, at_wall: Option<MockReply>) -> InputOutcome;
}

impl Drafting for Env {
    fn note(&self, name: &str, number: u32) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("the number in {name} is {number}\n")).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn drafts(&self) -> Vec<DraftStatus> {
        self.heard(|e| match e {
            AgentEvent::HandoffDraft(d) => Some(d.clone()),
            _ => None,
        })
    }

    fn prepared_starts(&self) -> Vec<bool> {
        self.heard(|e| match e {
            AgentEvent::HandoffStart { auto: Some(_), prepared, .. } => Some(*prepared),
            _ => None,
        })
    }

    /// The handoff requests the mock was sent (the draft's and the wall's alike).
    fn handoff_requests(&self) -> Vec<handoff_mock::RecordedRequest> {
        self.mock.requests().into_iter().filter(is_handoff_request).collect()
    }

    /// A task of three reads: the first reply's usage puts the next request in the band, the
    /// second stays in it, the third passes the wall; the task ends in the new session.
    /// `draft`: the reply the draft gets (`None`: nothing is scripted for one).
    async fn three_reads(&self, draft: Option<MockReply>, at_wall: Option<MockReply>) -> InputOutcome {
        let (a, b, c) = (self.note("a.txt", 41), self.note("b.txt", 42), self.note("c.txt", 43));
        let usage = |input| MockUsage { input, output: Some(50), ..MockUsage::default() };
        if let Some(draft) = draft {
            self.mock.push_for(first_line(handoff::PROMPT), draft);
        }
        self.mock.push(tool_call_reply("read", json!({ "path": a }), "call_a").with_usage(usage(8500)));
        self.mock.push(tool_call_reply("read", json!({ "path": b }), "call_b").with_usage(usage(9000)));
        self.mock.push(tool_call_reply("read", json!({ "path": c }), "call_c").with_usage(usage(15_000)));
        if let Some(document) = at_wall {
            self.mock.push(document);
        }
        self.mock.push(MockReply::text("41 + 42 + 43 = 126: finished."));
        tokio::time::timeout(T, self.controller.run_input(TASK)).await.expect("the prompt hung")
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap()
}

fn last_user_text(request: &handoff_mock::RecordedRequest) -> String {
    wire_messages(request).into_iter().rev().find(|(role, _)| role == "user").map(|(_, t)| t).unwrap_or_default()
}

fn is_handoff_request(request: &handoff_mock::RecordedRequest) -> bool {
    last_user_text(request).starts_with(first_line(handoff::PROMPT))
}

fn handoff_entry(path: &Path) -> Value {
    entry_lines(path).into_iter().find(|e| e["customType"] == "handoff").expect("no handoff entry")
}

fn finished(ran: &InputOutcome) {
    let InputOutcome::Prompt(Ok(result)) = ran else { panic!("{ran:?}") };
    assert_eq!(result.last_assistant().unwrap().text(), "41 + 42 + 43 = 126: finished.", "the task went on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_draft_is_written_once_in_the_band_and_the_wall_continues_from_it_losing_nothing() {
    let env = env(Some(Prepare::Background)).await;
    let old = env.session_path();
    let ran = env.three_reads(Some(MockReply::text(DRAFTED)), None).await;
    finished(&ran);
    let requests = env.mock.requests();
    // The work's four requests and one draft, nothing written at the wall.
    assert_eq!(requests.len(), 5, "{:?}", requests.iter().map(last_user_text).collect::<Vec<_>>());
    let drafts = env.handoff_requests();
    assert_eq!(drafts.len(), 1, "one draft for one crossing of the band");
    let draft = &drafts[0];
    // The draft's request is the work's prefix (the same system prompt and tools, the same
    // messages) with the instruction after it: the first note read, the later ones not yet.
    let work = requests.iter().find(|r| wire_messages(r).iter().any(|(_, t)| t.contains("the number in b.txt"))).unwrap();
    assert_eq!(draft.body["messages"][0], work.body["messages"][0], "the same system prompt");
    assert_eq!(draft.body["tools"], work.body["tools"], "the same tool definitions");
    assert_eq!(draft.body["tool_choice"], "none");
    let sent = wire_messages(draft);
    assert!(sent.iter().any(|(_, t)| t.contains("the number in a.txt is 41")), "{sent:?}");
    assert!(!sent.iter().any(|(_, t)| t.contains("b.txt is 42")), "{sent:?}");
    let prefix = &wire_messages(work)[..sent.len() - 1];
    assert_eq!(&sent[..sent.len() - 1], prefix, "the draft's messages are a prefix of the work's");
    // At the wall: from the draft, said so, and the new session's first request holds the draft
    // (the first note), the turns since (the notes read after it) and the user's task.
    assert_eq!(env.prepared_starts(), vec![true]);
    let new = env.session_path();
    assert_ne!(new, old);
    let first_in_new = &requests[4];
    let context = &wire_messages(first_in_new)[0].1;
    assert!(context.starts_with("<handoff-context>") && context.contains("- first note: 41"), "{context}");
    assert!(context.contains("## Since this document was written"), "{context}");
    assert!(context.contains("the number in b.txt is 42") && context.contains("the number in c.txt is 43"), "{context}");
    assert!(context.contains(&format!("<user-latest-message>\n{TASK}")), "{context}");
    let entry = handoff_entry(&new);
    assert!(entry["details"]["prepared"]["turnsSince"].as_u64().unwrap() >= 4, "{entry}");
    assert_eq!(entry["details"]["auto"]["boundary"], "after_tools");
    // The old session shows the handoff as before: the draft's request and document last.
    let old_lines = entry_lines(&old);
    let last = &old_lines[old_lines.len() - 1]["message"];
    assert_eq!(last["role"], "assistant");
    assert!(last["content"][0]["text"].as_str().unwrap().contains("- first note: 41"));
    // Told: written, then used.
    let told = env.drafts();
    assert!(matches!(told[0], DraftStatus::Writing { tokens } if (8000..=10_000).contains(&tokens)), "{told:?}");
    assert!(told.iter().any(|d| matches!(d, DraftStatus::Ready { .. })), "{told:?}");
    let (outcome, wall) = env.auto_end().await;
    let told = handoff_nvim::core::controller::auto_handoff_notices(&outcome, &wall, &handoff_nvim::core::controller::FrontEndTexts::default());
    assert!(told[0].message.contains(text::FROM_PREPARED), "{told:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_crossing_of_the_band_drafts_again_in_the_new_session() {
    let env = env(None).await;
    let first = env.note("a.txt", 41);
    env.mock.push_for(first_line(handoff::PROMPT), MockReply::text(DRAFTED));
    let usage = |input| MockUsage { input, output: Some(50), ..MockUsage::default() };
    env.mock.push(tool_call_reply("read", json!({ "path": first }), "call_a").with_usage(usage(8500)));
    env.mock.push(MockReply::text("41.").with_usage(usage(9000)));
    let ran = tokio::time::timeout(T, env.controller.run_input(TASK)).await.unwrap();
    assert!(matches!(ran, InputOutcome::Prompt(Ok(_))));
    wait_until("the draft written", T, || env.drafts().iter().any(|d| matches!(d, DraftStatus::Ready { .. }))).await;
    assert_eq!(env.handoff_requests().len(), 1, "in the band twice, one draft");
    // Below the band (a reply that reports less), then in it again: a second draft.
    env.mock.push(MockReply::text("ok").with_usage(usage(2000)));
    tokio::time::timeout(T, env.controller.run_input("and?")).await.unwrap();
    env.mock.push_for(first_line(handoff::PROMPT), MockReply::text(DRAFTED));
    env.mock.push(MockReply::text("ok").with_usage(usage(8800)));
    tokio::time::timeout(T, env.controller.run_input("more?")).await.unwrap();
    wait_until("a second draft", T, || env.handoff_requests().len() == 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_not_written_yet_at_the_wall_is_waited_for_not_started_over() {
    let env = env(Some(Prepare::Background)).await;
    // The draft streams slowly: the work reaches the wall before it ends.
    let slow = common::slow(&[&DRAFTED[..40], &DRAFTED[40..]], 300, 300);
    let ran = env.three_reads(Some(slow), None).await;
    finished(&ran);
    assert_eq!(env.handoff_requests().len(), 1, "the draft only: nothing written again at the wall");
    assert_eq!(env.prepared_starts(), vec![true]);
    let context = &wire_messages(&env.mock.requests()[4])[0].1;
    assert!(context.contains("- first note: 41") && context.contains("b.txt is 42") && context.contains("c.txt is 43"), "{context}");
}

/// Two reads: the first puts the next request in the band (the draft starts), the second reads
/// `lines` lines (`MIDDLE` halfway down) and passes the wall; `at_wall`: the document written
/// there, if the draft is not used.
async fn a_long_read_after_the_draft(env: &Env, lines: usize, at_wall: Option<MockReply>) -> InputOutcome {
    let a = env.note("a.txt", 41);
    let b = env.dir.path().join("long.txt");
    let text: Vec<String> = (0..lines).map(|i| if i == lines / 2 { "MIDDLE".into() } else { format!("filler line {i}") }).collect();
    std::fs::write(&b, format!("the number in long.txt is 42\n{}\n", text.join("\n"))).unwrap();
    let usage = |input| MockUsage { input, output: Some(50), ..MockUsage::default() };
    env.mock.push_for(first_line(handoff::PROMPT), MockReply::text(DRAFTED));
    env.mock.push(tool_call_reply("read", json!({ "path": a }), "call_a").with_usage(usage(8500)));
    env.mock.push(tool_call_reply("read", json!({ "path": b }), "call_b").with_usage(usage(9000)));
    if let Some(document) = at_wall {
        env.mock.push(document);
    }
    env.mock.push(MockReply::text("41 + 42 = 83: finished."));
    tokio::time::timeout(T, env.controller.run_input(TASK)).await.expect("the prompt hung")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_read_after_the_draft_goes_on_whole_and_turns_since_past_the_budget_are_written_at_the_wall() {
    let done = |ran: &InputOutcome| matches!(ran, InputOutcome::Prompt(Ok(r)) if r.last_assistant().unwrap().text() == "41 + 42 = 83: finished.");
    // 400 lines (~6,000 characters, ~1,500 tokens) read after the draft: under the budget (the
    // band, 3k, and a tenth of the 20k window), carried whole (the host's own document clips a
    // message to 2,000 characters).
    let env = env(Some(Prepare::Background)).await;
    let ran = a_long_read_after_the_draft(&env, 400, None).await;
    assert!(done(&ran), "{ran:?}");
    assert_eq!(env.handoff_requests().len(), 1, "the draft only");
    assert_eq!(env.prepared_starts(), vec![true]);
    let requests = env.mock.requests();
    let context = &wire_messages(&requests[requests.len() - 1])[0].1;
    assert!(context.contains("## Since this document was written") && context.contains("- first note: 41"), "{context}");
    assert!(context.contains("MIDDLE") && context.contains("filler line 399"), "the read whole: {context}");

    // 1,600 lines (~6,800 tokens): past the budget (5,000), so the document is written at the wall.
    let env = self::env(Some(Prepare::Background)).await;
    let ran = a_long_read_after_the_draft(&env, 1600, Some(MockReply::text(DOCUMENT))).await;
    assert!(done(&ran), "{ran:?}");
    assert_eq!(env.handoff_requests().len(), 2, "the draft, then the document at the wall");
    assert_eq!(env.prepared_starts(), vec![false], "the banner does not say it goes on from the draft");
    let requests = env.mock.requests();
    let context = &wire_messages(&requests[requests.len() - 1])[0].1;
    assert!(!context.contains("## Since this document was written") && context.contains("Ship the parser"), "{context}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_wall_while_the_draft_is_written_cancels_both_and_leaves_the_session() {
    let env = env(Some(Prepare::Background)).await;
    let old = env.session_path();
    let before = std::fs::read_to_string(&old).unwrap();
    // The draft never ends: at the wall the handoff waits for it until cancelled.
    let stall = MockReply::Stall { chunks: vec!["## Goal\n".into()] };
    let controller = env.controller.clone();
    let events = env.events.clone();
    let canceller = tokio::spawn(async move {
        loop {
            let started = events.lock().unwrap().iter().any(|e| matches!(e, AgentEvent::HandoffStart { prepared: true, .. }));
            if started {
                controller.abort_handoff();
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let ran = env.three_reads(Some(stall), None).await;
    canceller.await.unwrap();
    assert!(matches!(ran, InputOutcome::Prompt(Ok(_))), "{ran:?}");
    assert_eq!(env.auto_end().await.0, HandoffOutcome::Cancelled);
    assert_eq!(env.session_path(), old, "no new session");
    assert_eq!(session_files(&env.dir.path().join("sessions")).len(), 1);
    // The old session has the work's messages and nothing of the handoff.
    let after = std::fs::read_to_string(&old).unwrap();
    assert!(after.starts_with(&before));
    assert!(!after.contains(first_line(handoff::PROMPT)), "nothing of the draft in the file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_prepare_off_the_document_is_written_at_the_wall_as_before() {
    let env = env(Some(Prepare::Off)).await;
    let ran = env.three_reads(None, Some(MockReply::text(DOCUMENT))).await;
    finished(&ran);
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 5, "three reads, the handoff, the task's end");
    assert!(requests[..3].iter().all(|r| !is_handoff_request(r)), "no request before the wall");
    assert!(is_handoff_request(&requests[3]), "the document written at the wall");
    assert!(env.drafts().is_empty());
    assert_eq!(env.prepared_starts(), vec![false]);
    let entry = handoff_entry(&env.session_path());
    assert!(entry["details"].get("prepared").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_switch_discards_the_draft() {
    let env = env(Some(Prepare::Background)).await;
    // The draft never ends by itself: it is there (being written) when the model changes.
    env.mock.push_for(first_line(handoff::PROMPT), MockReply::Stall { chunks: Vec::new() });
    env.mock.push(MockReply::text("noted").with_usage(MockUsage { input: 8500, output: Some(50), ..MockUsage::default() }));
    tokio::time::timeout(T, env.controller.run_input("remember 41")).await.unwrap();
    wait_until("the draft's request", T, || env.handoff_requests().len() == 1).await;
    assert!(env.controller.lifecycle().has_draft());
    env.controller.set_model("mock-model-2").unwrap();
    assert!(!env.controller.lifecycle().has_draft());
    wait_until("the discard told", T, || env.drafts().contains(&DraftStatus::Discarded)).await;
    // At the wall the document is written there, by the new model (whose window is the
    // catalogue's: the usage passes its wall).
    let window = env.agent.provider_config().context_window;
    env.mock.push(MockReply::text("done").with_usage(MockUsage { input: window * 95 / 100, output: Some(50), ..MockUsage::default() }));
    env.mock.push(MockReply::text(DOCUMENT));
    tokio::time::timeout(T, env.controller.run_input("go on")).await.unwrap();
    wait_until("the automatic handoff", T, || !env.prepared_starts().is_empty()).await;
    assert_eq!(env.prepared_starts(), vec![false]);
    let handoffs = env.handoff_requests();
    assert_eq!(handoffs.len(), 2, "the discarded draft's and the wall's");
    assert_eq!(handoffs[1].body["model"], "mock-model-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handoff_model_writes_the_documents_and_the_work_keeps_the_sessions_model() {
    let env = env(Some(Prepare::Background)).await;
    env.agent.set_document_model(Some("mock-writer".into()));
    let ran = env.three_reads(Some(MockReply::text(DRAFTED)), None).await;
    finished(&ran);
    for request in env.mock.requests() {
        let want = if is_handoff_request(&request) { "mock-writer" } else { "mock-model" };
        assert_eq!(request.body["model"], want, "{}", last_user_text(&request));
    }
    assert_eq!(env.handoff_requests().len(), 1);
    // `:Handoff` too.
    env.mock.push(MockReply::text(DOCUMENT));
    let outcome = tokio::time::timeout(T, env.controller.handoff(HandoffOptions::default())).await.unwrap();
    assert!(matches!(outcome, HandoffOutcome::Done { .. }), "{outcome:?}");
    assert_eq!(env.mock.requests().last().unwrap().body["model"], "mock-writer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_drafts_nothing_by_default_and_every_other_provider_does() {
    // The settings as the front ends read them: `provider = "copilot"`, no handoff.prepare.
    let settings: Settings = serde_json::from_value(json!({ "api": "copilot", "model": "gpt-4.1" })).unwrap();
    assert_eq!(settings.handoff_prepare(), None);
    let copilot = settings.agent_config().expect("a Copilot config").provider;
    assert!(copilot.copilot.is_some());
    assert_eq!(Prepare::default_for(copilot.copilot.is_some()), Prepare::Off);
    // Every other provider drafts by default, and the lifecycle goes by the provider's default.
    let env = env(None).await;
    assert_eq!(Prepare::default_for(env.agent.provider_config().copilot.is_some()), Prepare::Background);
    let copilot_env = env_with(None, |c| c.copilot = copilot.copilot.clone()).await;
    assert_eq!(copilot_env.controller.lifecycle().prepare(), Prepare::Off);
    assert_eq!(env.controller.lifecycle().prepare(), Prepare::Background);
}

/// pi resumes the session started from the draft, and its request holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_started_from_the_draft() {
    let env = env(Some(Prepare::Background)).await;
    finished(&env.three_reads(Some(MockReply::text(DRAFTED)), None).await);
    let Some(sent) = env.pi_resumes().await else { return };
    assert!(sent[0].1.starts_with("<handoff-context>") && sent[0].1.contains("## Since this document was written"), "{sent:?}");
}

/// The CLI: `--handoff-prepare background --handoff-model NAME` drafts with that model in the
/// band and continues from the draft at the wall, saying so on stderr; `--handoff-prepare off`
/// sends no request before the wall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_takes_handoff_prepare_and_handoff_model() {
    for prepare in ["background", "off"] {
        let mock = handoff_mock::MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
        std::fs::write(&a, "the number in a.txt is 41\n").unwrap();
        std::fs::write(&b, "the number in b.txt is 42\n").unwrap();
        let usage = |input| MockUsage { input, output: Some(50), ..MockUsage::default() };
        mock.push_for(first_line(handoff::PROMPT), MockReply::text(DRAFTED));
        // The first read puts the next request in the band, the second passes the wall.
        mock.push(tool_call_reply("read", json!({ "path": a }), "call_a").with_usage(usage(8500)));
        mock.push(tool_call_reply("read", json!({ "path": b }), "call_b").with_usage(usage(15_000)));
        mock.push(MockReply::text("41: finished."));
        let out = common::clean_command_async(env!("CARGO_BIN_EXE_handoff-nvim"))
            .args(["prompt", "--new", "--yes", "--context-window", "20000", "--handoff-prepare", prepare])
            .args(["--handoff-model", "mock-writer", "read a.txt and b.txt"])
            .env("HOME", dir.path())
            .env("HANDOFF_BASE_URL", mock.openai_base_url())
            .env("HANDOFF_PROVIDER", "openai")
            .env("HANDOFF_MODEL", "mock-model")
            .env("HANDOFF_SESSION_DIR", dir.path().join("sessions"))
            .env_remove("OPENAI_API_KEY")
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(T, out).await.expect("the CLI hung").unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{prepare}: {stderr}");
        assert!(stdout.contains("41: finished."), "{prepare}: {stdout}");
        let requests = mock.requests();
        let handoffs: Vec<_> = requests.iter().filter(|r| is_handoff_request(r)).collect();
        assert_eq!(handoffs.len(), 1, "{prepare}");
        assert_eq!(handoffs[0].body["model"], "mock-writer", "{prepare}: the handoff model writes the document");
        assert!(requests.iter().filter(|r| !is_handoff_request(r)).all(|r| r.body["model"] == "mock-model"));
        // The draft was written before the second read; at the wall, after it.
        let saw_b = wire_messages(handoffs[0]).iter().any(|(_, t)| t.contains("b.txt is 42"));
        assert_eq!(saw_b, prepare == "off", "{prepare}");
        assert_eq!(stderr.contains(text::FROM_PREPARED), prepare == "background", "{prepare}: {stderr}");
    }
}

/// `handoff.clear_tool_results`: the oldest tool results reach the model as a placeholder, the
/// newest whole; the session file keeps every one, and the wall's estimate counts the request as
/// sent (it stays below the wall that the whole outputs would pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_tool_results_are_cleared_from_the_request_and_kept_in_the_file() {
    use handoff_nvim::core::agent::{AgentConfig, AgentSession};
    use handoff_nvim::core::tools::consent::{Level, Policy};
    let mock = handoff_mock::MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut provider = common::config(&mock);
    provider.context_window = 20_000;
    let config = AgentConfig {
        policy: Policy { level: Level::AllowAll, ..Policy::default() },
        clear_tool_results: Some(2000),
        ..AgentConfig::new(provider)
    };
    let agent = std::sync::Arc::new(AgentSession::new(config, common::wall::seeded(dir.path())));
    // Twelve reads of ~1,000 tokens each: 12k tokens of output, past the wall of 10k whole.
    for i in 0..12 {
        let path = dir.path().join(format!("f{i}.txt"));
        std::fs::write(&path, format!("file {i} says {}\n", format!("{i}").repeat(4000))).unwrap();
        mock.push(tool_call_reply("read", json!({ "path": path }), &format!("call_{i}")));
    }
    mock.push(MockReply::text("read them all"));
    let options = handoff_nvim::core::agent::RunOptions { watch_wall: true, ..Default::default() };
    let result = tokio::time::timeout(T, agent.prompt("read the twelve files", options)).await.unwrap().unwrap();
    assert!(result.wall.is_none(), "the cleared requests stay below the wall");
    let last = mock.requests().pop().unwrap();
    let sent = wire_messages(&last);
    let results: Vec<&String> = sent.iter().filter(|(role, _)| role == "tool").map(|(_, t)| t).collect();
    assert_eq!(results.len(), 12);
    assert!(results[0].starts_with("[Cleared from this request") && results[0].contains("read output"), "{}", results[0]);
    assert!(results[11].contains("file 11 says"), "the newest whole");
    let cleared = results.iter().filter(|t| t.starts_with("[Cleared")).count();
    assert!((8..=11).contains(&cleared), "{cleared} cleared");
    // The file keeps every output.
    let file = std::fs::read_to_string(agent.session().path()).unwrap();
    for i in 0..12 {
        assert!(file.contains(&format!("file {i} says")), "result {i} is in the file");
    }
}
