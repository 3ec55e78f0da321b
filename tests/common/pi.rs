//! pi 0.73.1 as a real client of our sessions: where it is, and a home for it in a temp folder
//! whose provider `mock` is the loopback mock model server.
//!
//! pi is `$PI_BIN`, or else `<repo>/.cache/pi/node_modules/.bin/pi` (`scripts/deps.sh` installs
//! it). A missing pi fails the test; `HANDOFF_SKIP_PI=1` turns that into a loud skip.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use handoff_mock::MockServer;

use tokio::process::Command;

const PI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/pi/node_modules/.bin/pi");

/// pi's path, or `None` (after saying so loudly) when the run asked to skip it.
pub fn pi_bin() -> Option<PathBuf> {
    // `scripts/deps.sh` exports where it installed pi; the repository's cache is the default.
    let path = std::env::var_os("PI_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(PI));
    if path.is_file() {
        return Some(path);
    }
    if std::env::var("HANDOFF_SKIP_PI").as_deref() == Ok("1") {
        eprintln!("\n!!!!!!!! SKIPPED: pi 0.73.1 is not installed at {} and HANDOFF_SKIP_PI=1 !!!!!!!!\n", path.display());
        return None;
    }
    panic!(
        "pi 0.73.1 is not installed at {}: run `npm install --prefix {}/.cache/pi @mariozechner/pi-coding-agent@0.73.1` (or set PI_BIN, or HANDOFF_SKIP_PI=1 to skip)",
        path.display(),
        env!("CARGO_MANIFEST_DIR")
    );
}

/// Makes `home` and `pi-agent` under `root`, with pi's provider config (as in
/// tests/fixtures/pi-sessions/README.md): provider `mock` at `base_url` speaking pi's `api`
/// (`openai-completions`, `anthropic-messages`), model `mock-model`.
pub fn pi_home(root: &Path, api: &str, base_url: &str) {
    let mock = serde_json::json!({ "baseUrl": base_url, "api": api, "apiKey": "x",
        "models": [{ "id": "mock-model", "contextWindow": 32000, "maxTokens": 4096 }] });
    pi_home_with(root, serde_json::json!({ "mock": mock }));
}

/// [`pi_home`] with these `providers` in pi's models.json (a built-in provider's name
/// redefines its models and base URL).
pub fn pi_home_with(root: &Path, providers: serde_json::Value) {
    for d in ["home", "pi-agent"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let models = serde_json::json!({ "providers": providers });
    std::fs::write(root.join("pi-agent/models.json"), models.to_string()).unwrap();
}

/// pi resuming `session` in `<root>/project` (the home [`pi_home`] made) with `provider` and
/// `model`, printing its answer to `prompt`: offline, nothing of the machine's loaded.
pub fn pi_resume(pi: &Path, root: &Path, session: &Path, provider: &str, model: &str, prompt: &str) -> Command {
    let mut c = Command::new(pi);
    pi_env(&mut c, root)
        .current_dir(root.join("project"))
        .arg("--session")
        .arg(session)
        .args(["--provider", provider, "--model", model])
        .args(["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes"])
        .args(["--offline", "-p", prompt])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    c
}

/// `c` in the home [`pi_home`] made under `root`: offline, without the provider keys of the
/// machine running the tests.
pub fn pi_env<'a>(c: &'a mut Command, root: &Path) -> &'a mut Command {
    c.env("HOME", root.join("home"))
        .env("XDG_DATA_HOME", root.join("home/.local/share"))
        .env("PI_CODING_AGENT_DIR", root.join("pi-agent"))
        .env("PI_OFFLINE", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
}

const BIN: &str = env!("CARGO_BIN_EXE_handoff-nvim");
const T: Duration = Duration::from_secs(60);

/// A temp home for pi (its provider `mock` the loopback mock) and our CLI beside it, each run as a
/// user runs it: the tests that hand a session from one to the other.
pub struct PiAndOurs {
    pub mock: MockServer,
    pub dir: tempfile::TempDir,
}

impl PiAndOurs {
    pub async fn new() -> PiAndOurs {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        pi_home(dir.path(), "openai-completions", &mock.openai_base_url());
        PiAndOurs { mock, dir }
    }

    pub fn base(&self, program: &Path) -> Command {
        let mut c = super::clean_command_async(program);
        pi_env(&mut c, self.dir.path())
            .current_dir(self.dir.path().join("project"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Our CLI, recording the provider under pi's name for it (`mock`).
    pub async fn ours(&self, args: &[&str]) -> (String, String) {
        let mut c = self.base(Path::new(BIN));
        c.args(["--provider", "openai", "--provider-name", "mock", "--model", "mock-model"])
            .arg("--base-url")
            .arg(self.mock.openai_base_url())
            .arg("--session-dir")
            .arg(self.dir.path().join("sessions"))
            .args(args);
        let out = tokio::time::timeout(T, c.output()).await.expect("our CLI hung").unwrap();
        let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
        assert_eq!(out.status.code(), Some(0), "our CLI {args:?} failed: {stderr}");
        (stdout, stderr)
    }

    /// `pi --session FILE -p TEXT` against the mock.
    pub async fn pi(&self, pi: &Path, session: &Path, text: &str) -> String {
        let mut c = self.base(pi);
        c.arg("--session")
            .arg(session)
            .args(["--provider", "mock", "--model", "mock-model"])
            .args(["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes"])
            .args(["--offline", "-p", text]);
        let out = tokio::time::timeout(T, c.output()).await.expect("pi hung").unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(0), "pi failed:\nstdout: {stdout}\nstderr: {stderr}");
        stdout
    }
}
