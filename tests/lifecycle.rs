//! The prompt's lifecycle (issue 31, `core::controller::lifecycle`): a panicking task leaves
//! nothing taken and is in the log; a prompt racing a review's commit waits and goes to the new
//! session, with no orphan file; the todo reminder is never carried as the user's words.
//! Against the loopback mock, real session files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{config, entry_lines, seeded_session, session_files, todo_call, wait_until, DOCUMENT};
use handoff_mock::{MockReply, MockServer, MockUsage};
use handoff_nvim::core::agent::{AgentConfig, AgentEvent, AgentSession};
use handoff_nvim::core::controller::{text, Controller, FrontEndTexts, Phase, InputOutcome};
use handoff_nvim::core::handoff::{HandoffOptions, HandoffOutcome};
use handoff_nvim::core::tools::consent::{Level, Policy};
use handoff_nvim::core::tools::{Tool, ToolRegistry, ToolSource};
use serde_json::json;

const T: Duration = Duration::from_secs(20);

struct Env {
    mock: MockServer,
    dir: tempfile::TempDir,
    agent: Arc<AgentSession>,
    controller: Arc<Controller>,
    events: Arc<Mutex<Vec<AgentEvent>>>,
}

impl Env {
    async fn new(window: u64, tools: ToolRegistry) -> Env {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut provider = config(&mock);
        provider.context_window = window;
        let policy = Policy { level: Level::AllowAll, ..Policy::default() };
        let agent = Arc::new(AgentSession::new(AgentConfig { policy, tools, ..AgentConfig::new(provider) }, seeded_session(dir.path(), 2)));
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        let events = Arc::new(Mutex::new(Vec::new()));
        let (mut rx, sink) = (agent.subscribe(), events.clone());
        tokio::spawn(async move {
            while let Ok(e) = rx.recv().await {
                sink.lock().unwrap().push(e);
            }
        });
        Env { mock, dir, agent, controller, events }
    }

    fn sessions(&self) -> Vec<std::path::PathBuf> {
        session_files(&self.dir.path().join("sessions"))
    }

    fn heard(&self, notice: &str) -> bool {
        self.events.lock().unwrap().iter().any(|e| matches!(e, AgentEvent::Notice(n) if n.message == notice))
    }
}

/// A tool source whose start-up panics, once: the first run's future panics inside the agent.
#[derive(Debug, Default)]
struct PanicsOnce(AtomicBool);

#[async_trait]
impl ToolSource for PanicsOnce {
    async fn ready(&self) {
        if !self.0.swap(true, Ordering::SeqCst) {
            panic!("a tool source broke while starting");
        }
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        Vec::new()
    }
}

/// Where the test's log goes (the host's log file stands in).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Bug: the run slot was freed only when `run()` returned, and the prompt's sequence only when
/// it ended: a panic in the spawned prompt left the agent busy forever, and said nothing. Now
/// the guards free both as the panic unwinds, the panic is logged, and the next prompt runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_prompt_task_leaves_the_agent_idle_and_the_panic_is_in_the_log() {
    let log = Log::default();
    let writer = log.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish(),
    )
    .unwrap();
    handoff_nvim::core::task::install_panic_hook();
    let mut tools = ToolRegistry::default();
    tools.add_source(Arc::new(PanicsOnce::default()));
    let env = Env::new(128_000, tools).await;
    env.controller.submit("this prompt's task panics");
    wait_until("the panic in the log", T, || log.text().contains("a task ended by a panic")).await;
    wait_until("the agent idle again", T, || !env.controller.is_busy() && !env.agent.is_busy()).await;
    assert_eq!(env.controller.lifecycle().phase(), Phase::Idle);
    let text = log.text();
    assert!(text.contains("panicked") && text.contains("tests/lifecycle.rs"), "where it panicked: {text}");
    assert!(text.contains("a tool source broke while starting"), "{text}");
    // Nothing stays taken: the next prompt runs.
    env.mock.push(MockReply::text("fine again"));
    let ran = env.controller.run_input("and now?").await;
    assert!(matches!(&ran, InputOutcome::Prompt(Ok(r)) if r.last_assistant().is_some_and(|m| m.text() == "fine again")), "{ran:?}");
}

/// Bug: `Handoff::commit` checked "busy" and then wrote the new session: a prompt arriving in
/// between ran in the old session, the switch was then refused, the new file was left behind as
/// an orphan and the draft lost. Now the commit holds its phase: the prompt waits, and is sent
/// after the commit, into the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_racing_a_review_commit_is_sent_in_the_new_session_and_no_orphan_file_appears() {
    let env = Env::new(128_000, ToolRegistry::default()).await;
    let old = env.agent.session().path().to_path_buf();
    env.mock.push(MockReply::text(DOCUMENT));
    let review = env.controller.handoff(HandoffOptions { review: Some(true), ..Default::default() }).await;
    let HandoffOutcome::Review { text, .. } = review else { panic!("{review:?}") };
    // The commit is held inside, where it writes the new session: a thread of the test holds the
    // session's lock until told to let go.
    let (locked, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let holder = {
        let (agent, locked, release) = (env.agent.clone(), locked.0, release.1);
        std::thread::spawn(move || {
            let _held = agent.session();
            locked.send(()).unwrap();
            let _ = release.recv();
        })
    };
    locked.1.recv().unwrap();
    let committing = tokio::spawn(env.controller.commit_review(&text));
    wait_until("the commit under way", T, || env.controller.lifecycle().phase() == Phase::Committing).await;
    env.mock.push(MockReply::text("answered in the new session"));
    env.controller.submit("typed during the commit");
    wait_until("the prompt queued", T, || env.heard(text::QUEUED_FOR_NEW_SESSION)).await;
    release.0.send(()).unwrap();
    holder.join().unwrap();
    let done = committing.await.unwrap();
    let HandoffOutcome::Done { session_file, .. } = done else { panic!("{done:?}") };
    wait_until("the queued prompt answered", T, || !env.controller.is_busy() && env.mock.requests().len() == 2).await;
    let new: Vec<_> = entry_lines(std::path::Path::new(&session_file));
    let said = |lines: &[serde_json::Value], text: &str| lines.iter().any(|l| l["message"]["content"].to_string().contains(text));
    assert!(said(&new, "typed during the commit") && said(&new, "answered in the new session"), "{new:#?}");
    assert!(!said(&entry_lines(&old), "typed during the commit"), "the prompt went to the old session");
    assert_eq!(env.sessions().len(), 2, "an orphan session file: {:?}", env.sessions());
}

/// Bug: the todo reminder was written as a plain user message, so an automatic handoff right
/// after it carried the reminder to the next session as the user's latest words. Now it is
/// marked as the host's, and the words carried are the user's own last message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automatic_handoff_right_after_a_todo_reminder_carries_the_user_s_last_message() {
    let env = Env::new(20_000, ToolRegistry::default()).await;
    let todos = json!([{ "content": "write the parser", "status": "in_progress", "activeForm": "Writing the parser" }]);
    env.mock.push(todo_call(todos, "call_1"));
    // It stops with an open item: reminded. Its answer to the reminder reports a usage past the
    // wall, so the automatic handoff comes right after the reminder.
    env.mock.push(MockReply::text("I will stop here."));
    env.mock.push(MockReply::text("Still on it.").with_usage(MockUsage { input: 15_000, output: Some(100), ..MockUsage::default() }));
    env.mock.push(MockReply::text(DOCUMENT));
    env.mock.set_default(MockReply::text("Going on in the new session."));
    env.controller.run_input("build the parser please").await;
    wait_until("the automatic handoff", T, || env.sessions().len() == 2).await;
    let old = env.sessions().into_iter().find(|p| !p.to_string_lossy().contains(&*env.agent.session().session_id().to_string())).unwrap();
    let reminder = entry_lines(&old).into_iter().find(|l| l["message"]["handoffAuthor"] == "todo_reminder");
    let reminder = reminder.expect("the reminder was sent and marked as the host's");
    let reminder = reminder["message"]["content"][0]["text"].as_str().or(reminder["message"]["content"].as_str()).unwrap().to_string();
    let new = env.agent.session().path().to_path_buf();
    let handoff = entry_lines(&new).into_iter().find(|l| l["customType"] == "handoff").expect("the handoff entry");
    let words = &handoff["details"]["userWords"];
    assert_eq!(words["latest"], "build the parser please", "{words}");
    assert_eq!(words["task"], "question 0", "{words}");
    let first_line = reminder.lines().next().unwrap();
    assert!(!handoff["content"].to_string().contains(first_line), "the reminder carried: {}", handoff["content"]);
}
