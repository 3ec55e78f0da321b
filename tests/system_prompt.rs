//! The system prompt (issue 25): our words for the tools enabled, the instruction files of the
//! user-level folder and from the root down to the working directory, the skills, the date and
//! the folder; `system_prompt` and `append_system_prompt`; the same bytes on every request of a
//! session and in its handoff request. Checked on what the mock received.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use handoff_mock::{MockReply, MockServer, RecordedRequest};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::controller::{Controller, FrontEndTexts};
use handoff_nvim::core::handoff::HandoffOutcome;
use handoff_nvim::core::provider::Api;
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::{ToolName, ToolRegistry};
use serde_json::json;

/// A project three folders deep in a temp folder, and a user-level folder beside it:
///
/// ```text
/// config/handoff/AGENTS.md   the user's
/// work/AGENTS.md             two folders above the working directory
/// work/repo/CLAUDE.md        (no AGENTS.md there: CLAUDE.md counts)
/// work/repo/app/AGENTS.md    the working directory's (its CLAUDE.md does not count)
/// work/repo/app/CLAUDE.md
/// ```
struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    user: PathBuf,
    cwd: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let user = root.join("config/handoff");
    let cwd = root.join("work/repo/app");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(root.join("work/repo/.git")).unwrap();
    std::fs::write(user.join("AGENTS.md"), "Answer in English.\n").unwrap();
    std::fs::write(root.join("work/AGENTS.md"), "Run the tests before you say done.\n").unwrap();
    std::fs::write(root.join("work/repo/CLAUDE.md"), "Use tabs in Makefiles.\n").unwrap();
    std::fs::write(cwd.join("AGENTS.md"), "This app is written in Rust.\n").unwrap();
    std::fs::write(cwd.join("CLAUDE.md"), "NOT SENT: an AGENTS.md is beside me.\n").unwrap();
    Tree { _tmp: tmp, root, user, cwd }
}

fn agent(mock: &MockServer, tree: &Tree, api: Api, configure: impl FnOnce(&mut AgentConfig)) -> Arc<AgentSession> {
    let mut provider = common::config(mock);
    provider.api = api;
    if api == Api::Anthropic {
        provider.base_url = mock.anthropic_base_url();
    }
    let mut config = AgentConfig { instructions_dir: Some(tree.user.clone()), ..AgentConfig::new(provider) };
    configure(&mut config);
    let session = SessionManager::create(&tree.root.join("sessions"), &tree.cwd, None).unwrap();
    Arc::new(AgentSession::new(config, session))
}

/// The system prompt of an OpenAI request (its first message).
fn openai_system(request: &RecordedRequest) -> String {
    let first = &request.body["messages"][0];
    assert_eq!(first["role"], "system", "{}", request.body);
    first["content"].as_str().unwrap().to_string()
}

fn today() -> String {
    let out = std::process::Command::new("date").arg("+%Y-%m-%d").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Where each of `needles` is in `text`, asserting each is there.
fn positions(text: &str, needles: &[&str]) -> Vec<usize> {
    needles.iter().map(|n| text.find(n).unwrap_or_else(|| panic!("{n:?} is not in:\n{text}"))).collect()
}

#[tokio::test]
async fn the_prompt_names_the_tools_enabled_the_instruction_files_in_order_the_date_and_the_folder() {
    let mock = MockServer::start().await.unwrap();
    let tree = tree();
    let agent = agent(&mock, &tree, Api::Openai, |c| c.tools = ToolRegistry::new([ToolName::Read, ToolName::Grep]));
    mock.push(MockReply::text("Hello."));
    agent.prompt("Hi", RunOptions::default()).await.unwrap();
    let system = openai_system(&mock.requests()[0]);
    assert_eq!(system, agent.system_prompt().text);

    // Our words, for the tools of this session only.
    assert!(system.starts_with("You are a coding agent"), "{system}");
    assert!(system.contains("\n- read: Read the contents of a file."), "{system}");
    assert!(system.contains("\n- grep: Search file contents for a pattern."), "{system}");
    for absent in ["- bash:", "- edit:", "- write:", "todo_write", "consent"] {
        assert!(!system.contains(absent), "{absent:?} is in:\n{system}");
    }
    // The instruction files, each under its path: the user's first, then from the root down.
    let files = [
        tree.user.join("AGENTS.md"),
        tree.root.join("work/AGENTS.md"),
        tree.root.join("work/repo/CLAUDE.md"),
        tree.cwd.join("AGENTS.md"),
    ];
    let headings: Vec<String> = files.iter().map(|f| format!("\n## {}\n\n", f.display())).collect();
    let at = positions(
        &system,
        &[
            &headings[0],
            "Answer in English.",
            &headings[1],
            "Run the tests before you say done.",
            &headings[2],
            "Use tabs in Makefiles.",
            &headings[3],
            "This app is written in Rust.",
        ],
    );
    assert!(at.windows(2).all(|w| w[0] < w[1]), "in order: {at:?}\n{system}");
    assert!(!system.contains("NOT SENT"), "CLAUDE.md beside an AGENTS.md is not read");
    assert_eq!(agent.system_prompt().instruction_files, files);
    // Where and when, last.
    let tail = format!(
        "\n\nCurrent date: {}\nCurrent working directory: {}\nOperating system: {}\nShell: ",
        today(),
        tree.cwd.display(),
        std::env::consts::OS
    );
    assert!(system.contains(&tail), "{tail:?} is not in:\n{system}");
    assert!(at[7] < system.find(&tail).unwrap());
}

#[tokio::test]
async fn system_prompt_replaces_our_words_and_append_system_prompt_follows_them() {
    let mock = MockServer::start().await.unwrap();
    let tree = tree();
    let replaced = agent(&mock, &tree, Api::Openai, |c| {
        c.system_prompt = Some("You review code only.".into());
        c.append_system_prompt = Some("Be brief.".into());
    });
    mock.push(MockReply::text("ok"));
    replaced.prompt("Hi", RunOptions::default()).await.unwrap();
    let system = openai_system(&mock.requests()[0]);
    assert!(system.starts_with("You review code only.\n\nBe brief.\n\n# Instructions\n"), "{system}");
    assert!(!system.contains("You are a coding agent"), "{system}");
    assert!(system.contains("This app is written in Rust.") && system.contains("\nCurrent working directory: "));

    let appended = agent(&mock, &tree, Api::Openai, |c| c.append_system_prompt = Some("Be brief.".into()));
    mock.push(MockReply::text("ok"));
    appended.prompt("Hi", RunOptions::default()).await.unwrap();
    let system = openai_system(&mock.requests()[1]);
    let at = positions(&system, &["You are a coding agent", "\n\nBe brief.\n\n# Instructions\n", "This app is written in Rust."]);
    assert!(at[0] == 0 && at[1] < at[2], "{system}");
}

fn write_skill(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("SKILL.md");
    std::fs::write(
        &path,
        "---\nname: release-notes\ndescription: Write release notes from the git log & the changelog.\n---\n# Release notes\nRun `git log --oneline` since the last tag.\n",
    )
    .unwrap();
    path
}

#[tokio::test]
async fn a_project_skill_is_listed_read_by_the_model_and_forced_with_skill_name() {
    let mock = MockServer::start().await.unwrap();
    let tree = tree();
    let skill = write_skill(&tree.root.join("work/repo/.agents/skills/release-notes"));
    let agent = agent(&mock, &tree, Api::Openai, |c| c.policy.level = handoff_nvim::core::tools::consent::Level::AllowAll);
    mock.push(common::tool_call_reply("read", json!({ "path": skill.to_str().unwrap() }), "call_skill"));
    mock.push(MockReply::text("Notes written."));
    agent.prompt("Write the release notes.", RunOptions::default()).await.unwrap();
    let requests = mock.requests();
    let system = openai_system(&requests[0]);
    let listed = format!(
        "<available_skills>\n  <skill>\n    <name>release-notes</name>\n    <description>Write release notes from the git log &amp; the changelog.</description>\n    <location>{}</location>\n  </skill>\n</available_skills>",
        skill.display()
    );
    assert!(system.contains(&listed), "{system}");
    assert!(system.contains("read its file with the read tool"), "{system}");
    // The model read it: its instructions are the call's result.
    let result = requests[1].body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap().clone();
    assert_eq!(result["tool_call_id"], "call_skill");
    assert!(result["content"].as_str().unwrap().contains("Run `git log --oneline` since the last tag."), "{result}");

    // `/skill:name args` sends the skill's body along with the arguments.
    mock.push(MockReply::text("Done."));
    agent.prompt("/skill:release-notes for 1.2", RunOptions::default()).await.unwrap();
    let (_, sent) = common::wire_messages(&mock.requests()[2]).last().cloned().unwrap();
    let dir = skill.parent().unwrap();
    assert_eq!(
        sent,
        format!(
            "<skill name=\"release-notes\" location=\"{}\">\nReferences are relative to {}.\n\n# Release notes\nRun `git log --oneline` since the last tag.\n</skill>\n\nfor 1.2",
            skill.display(),
            dir.display()
        )
    );
    // Without the read tool the model could not load one: none is listed.
    let no_read = self::agent(&mock, &tree, Api::Openai, |c| c.tools = ToolRegistry::new([ToolName::Bash]));
    assert!(no_read.system_prompt().skills.is_empty() && !no_read.system_prompt().text.contains("<available_skills>"));
}

/// The system prompt as a body carries it, as JSON text.
fn system_bytes(api: Api, text: &str) -> String {
    let encoded = serde_json::to_string(text).unwrap();
    match api {
        // Responses: a model that does not reason (the mock's) takes it as a `system` message.
        Api::Openai | Api::OpenaiResponses => format!(r#"{{"role":"system","content":{encoded}}}"#),
        Api::Anthropic => format!(r#""system":[{{"type":"text","text":{encoded},"cache_control":{{"type":"ephemeral"}}}}]"#),
    }
}

#[tokio::test]
async fn every_request_of_a_session_and_its_handoff_send_the_same_system_prompt_bytes() {
    for api in [Api::Openai, Api::OpenaiResponses, Api::Anthropic] {
        let mock = MockServer::start().await.unwrap();
        let tree = tree();
        let agent = agent(&mock, &tree, api, |_| {});
        let first = agent.system_prompt();
        for (i, prompt) in ["One", "Two", "Three"].into_iter().enumerate() {
            mock.push(MockReply::text(&format!("Reply {i}.")));
            agent.prompt(prompt, RunOptions::default()).await.unwrap();
        }
        // Kept, not read again: the same prompt, not another one built alike.
        assert!(Arc::ptr_eq(&first, &agent.system_prompt()), "{api:?}");
        mock.push(MockReply::text(common::DOCUMENT));
        let controller = Controller::new(agent.clone(), FrontEndTexts::default());
        assert!(matches!(controller.handoff(handoff_nvim::core::handoff::HandoffOptions::default()).await, HandoffOutcome::Done { .. }), "{api:?}");
        let requests = mock.requests();
        assert_eq!(requests.len(), 4, "{api:?}: three prompts and the handoff");
        let expected = system_bytes(api, &first.text);
        for (i, request) in requests.iter().enumerate() {
            let raw = String::from_utf8(request.raw.clone()).unwrap();
            assert_eq!(raw.matches(&expected).count(), 1, "{api:?}: request {i} carries the session's system prompt as it is");
        }
    }
}

#[tokio::test]
async fn a_changed_instruction_file_is_read_again_and_the_date_stays() {
    let mock = MockServer::start().await.unwrap();
    let tree = tree();
    let agent = agent(&mock, &tree, Api::Openai, |_| {});
    mock.push(MockReply::text("One."));
    agent.prompt("One", RunOptions::default()).await.unwrap();
    let before = agent.system_prompt();
    std::fs::write(tree.cwd.join("AGENTS.md"), "This app is written in Rust 2024, and has no unsafe code.\n").unwrap();
    std::fs::write(tree.root.join("work/repo/AGENTS.md"), "New beside CLAUDE.md.\n").unwrap();
    mock.push(MockReply::text("Two."));
    agent.prompt("Two", RunOptions::default()).await.unwrap();
    let system = openai_system(&mock.requests()[1]);
    assert!(system.contains("Rust 2024, and has no unsafe code."), "{system}");
    assert!(system.contains("New beside CLAUDE.md.") && !system.contains("Use tabs in Makefiles."), "{system}");
    let after = agent.system_prompt();
    assert!(!Arc::ptr_eq(&before, &after));
    assert_eq!(before.environment, after.environment, "the session's date and folder stay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reads_the_plugins_user_folder_and_takes_both_flags() {
    let mock = MockServer::start().await.unwrap();
    let tree = tree();
    // The plugin's folder is $XDG_CONFIG_HOME/nvim/handoff: the CLI reads its AGENTS.md too.
    let config_home = tree.root.join("xdg");
    std::fs::create_dir_all(config_home.join("nvim/handoff")).unwrap();
    std::fs::write(config_home.join("nvim/handoff/AGENTS.md"), "From the plugin's folder.\n").unwrap();
    mock.push(MockReply::text("ok"));
    let out = common::clean_command_async(env!("CARGO_BIN_EXE_handoff-nvim"))
        .current_dir(&tree.cwd)
        .env("XDG_CONFIG_HOME", &config_home)
        .env("HOME", tree.root.join("home"))
        .args(["--provider", "openai", "--model", "mock-model", "--base-url", &mock.openai_base_url()])
        .arg("--session-dir")
        .arg(tree.root.join("sessions"))
        .args(["--system-prompt", "You answer questions.", "--append-system-prompt", "Never guess."])
        .args(["prompt", "--new", "Hi"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let system = openai_system(&mock.requests()[0]);
    let user_file = config_home.join("nvim/handoff/AGENTS.md");
    let at = positions(
        &system,
        &["You answer questions.\n\nNever guess.\n\n# Instructions", &format!("## {}\n\nFrom the plugin's folder.", user_file.display()), "This app is written in Rust."],
    );
    assert!(at[0] == 0 && at[1] < at[2], "{system}");
}
