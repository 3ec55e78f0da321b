//! An agent and its controller at the automatic handoff's wall, against the loopback mock: a
//! 20k window (the wall at half of it), tools allowed, a session of two exchanges whose working
//! directory exists (so pi can resume what is written), and every event collected. Shared by
//! the tests of issue 32 (the fallback document, the draft before the wall).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use handoff_mock::MockServer;
use handoff_nvim::core::agent::{AgentConfig, AgentEvent, AgentSession, Wall, WallSettings};
use handoff_nvim::core::controller::{Controller, FrontEndTexts};
use handoff_nvim::core::handoff::HandoffOutcome;
use handoff_nvim::core::message::Message;
use handoff_nvim::core::provider::ProviderConfig;
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::consent::{Level, Policy};

/// The window of these tests: the wall at half of it (the reserve and the room leave less).
pub const WINDOW: u64 = 20_000;
pub const T: Duration = Duration::from_secs(20);

pub struct WallEnv {
    pub mock: MockServer,
    pub dir: tempfile::TempDir,
    pub agent: Arc<AgentSession>,
    pub controller: Arc<Controller>,
    pub events: Arc<Mutex<Vec<AgentEvent>>>,
}

impl WallEnv {
    /// The environment, the provider's config changed by `adjust` first.
    pub async fn new(adjust: impl FnOnce(&mut ProviderConfig)) -> WallEnv {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut provider = super::config(&mock);
        provider.context_window = WINDOW;
        adjust(&mut provider);
        let agent = Arc::new(AgentSession::new(
            AgentConfig {
                policy: Policy { level: Level::AllowAll, ..Policy::default() },
                wall: WallSettings::default(),
                ..AgentConfig::new(provider)
            },
            seeded(dir.path()),
        ));
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut rx = agent.subscribe();
        let sink = events.clone();
        tokio::spawn(async move {
            while let Ok(e) = rx.recv().await {
                sink.lock().unwrap().push(e);
            }
        });
        WallEnv { mock, dir, agent, controller, events }
    }

    pub fn session_path(&self) -> PathBuf {
        self.agent.session().path().to_path_buf()
    }

    pub fn sessions(&self) -> Vec<PathBuf> {
        super::session_files(&self.dir.path().join("sessions"))
    }

    /// What `pick` takes of the events heard so far, in order.
    pub fn heard<T>(&self, pick: impl Fn(&AgentEvent) -> Option<T>) -> Vec<T> {
        self.events.lock().unwrap().iter().filter_map(pick).collect()
    }

    /// The automatic handoffs' ends heard so far.
    pub fn auto_ends(&self) -> Vec<(HandoffOutcome, Wall)> {
        self.heard(|e| match e {
            AgentEvent::HandoffEnd { outcome, auto: Some(wall), .. } => Some((outcome.clone(), *wall)),
            _ => None,
        })
    }

    /// pi 0.73.1 resumes the session in force with "go on": it answers, and the messages of its
    /// request are returned (`None`: pi is not installed and HANDOFF_SKIP_PI=1).
    pub async fn pi_resumes(&self) -> Option<Vec<(String, String)>> {
        use super::pi::{pi_bin, pi_home, pi_resume};
        let session = self.session_path();
        let pi = pi_bin()?;
        let root = self.dir.path();
        pi_home(root, "openai-completions", &self.mock.openai_base_url());
        self.mock.push(handoff_mock::MockReply::text("pi goes on"));
        let out = tokio::time::timeout(T * 3, pi_resume(&pi, root, &session, "mock", "mock-model", "go on").output())
            .await
            .expect("pi hung")
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "pi failed: {stdout} {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("pi goes on"), "{stdout}");
        let sent = super::wire_messages(self.mock.requests().last().unwrap());
        assert_eq!(sent.last().unwrap().1, "go on");
        Some(sent)
    }

    /// The last automatic handoff's end, once one was heard.
    pub async fn auto_end(&self) -> (HandoffOutcome, Wall) {
        super::wait_until("an automatic handoff's end", T, || !self.auto_ends().is_empty()).await;
        self.auto_ends().pop().unwrap()
    }
}

/// [`super::seeded_session`]'s two exchanges, in a session whose working directory exists
/// (`<dir>/project`), so pi can resume it.
pub fn seeded(dir: &Path) -> SessionManager {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut s = SessionManager::create(&dir.join("sessions"), &project, None).unwrap();
    s.append_model_change("mock", "mock-model").unwrap();
    s.append_thinking_level_change("off").unwrap();
    for i in 0..2 {
        s.append_message(&Message::user(format!("question {i}"))).unwrap();
        s.append_message(&super::assistant(&format!("answer {i}"))).unwrap();
    }
    s.flush().unwrap();
    s
}
