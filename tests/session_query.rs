//! `session_query`: a session asks its ancestors, against real session files and the scripted
//! mock. A parent where a decision is made (SQLite) and later reverted (Postgres): search mode
//! returns both with their ids, in order, without a model call; answer mode sends one request
//! (no tools, the entries and the rules) and stores only the tool's result in the child, which
//! pi 0.73.1 then resumes. The tool is offered only to a session with a parent. `session` names
//! an ancestor by id prefix or by path, a grandparent too; anything else is a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::pi::{pi_bin as pi, pi_env, pi_home};
use common::tool_call_reply;
use handoff_mock::{MockReply, MockServer, RecordedRequest};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::message::{ContentBlock, Message};
use handoff_nvim::core::session::SessionManager;
use handoff_nvim::core::tools::{self, ToolContext, ToolOutput};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(60);
const QUESTION: &str = "Which database does the cache use, SQLite or Postgres?";

struct Env {
    mock: MockServer,
    dir: tempfile::TempDir,
}

/// The entries of the parent that the question is about.
struct Parent {
    path: PathBuf,
    /// The decision ("use SQLite") and its revert ("switch to Postgres"), and the reply that did it.
    decided: String,
    reverted: String,
    switched: String,
    /// An entry about something else, and no neighbour of one that matches.
    unrelated: String,
}

impl Env {
    async fn new() -> Env {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        Env { mock, dir }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    fn sessions(&self) -> PathBuf {
        self.dir.path().join("sessions")
    }

    /// A new session of the project, handed off from `parent` when given.
    fn session(&self, parent: Option<&Path>) -> SessionManager {
        SessionManager::create(&self.sessions(), &self.project(), parent.map(|p| p.to_string_lossy().into_owned())).unwrap()
    }

    /// A session written as the agent writes one: a decision, a tool call acting on it, other
    /// work, then the user reverting the decision and the assistant doing so.
    fn parent(&self, grandparent: Option<&Path>) -> Parent {
        let mut s = self.session(grandparent);
        let say = |s: &mut SessionManager, message: Message| s.append_message(&message).unwrap();
        say(&mut s, Message::user("The cache needs a database. Keep it simple."));
        let decided = say(&mut s, assistant(vec![ContentBlock::text("Decision: use SQLite for the cache, one file and no server.")]));
        say(&mut s, assistant(vec![ContentBlock::tool_call("w1", "write", json!({"path": "src/cache.rs", "content": "sqlite::open(\"cache.db\")"}))]));
        say(&mut s, ToolOutput::text("Successfully wrote 24 bytes to src/cache.rs", Value::Null).into_message("w1", "write"));
        say(&mut s, Message::user("Now add tests for the parser."));
        say(&mut s, assistant(vec![ContentBlock::text("Added three parser tests in tests/parser.rs.")]));
        let unrelated = say(&mut s, Message::user("Rename the lexer module."));
        say(&mut s, assistant(vec![ContentBlock::text("Renamed lexer to tokens.")]));
        let reverted = say(&mut s, Message::user("SQLite locks under concurrent writers: switch the cache to Postgres."));
        let switched = say(&mut s, assistant(vec![ContentBlock::text("Switched the cache from SQLite to Postgres (tokio-postgres).")]));
        s.flush().unwrap();
        Parent { path: s.path().to_path_buf(), decided, reverted, switched, unrelated }
    }

    /// An agent on a new session handed off from `parent` (a handoff document first, as a
    /// handoff starts one), or on a session without a parent.
    fn agent(&self, parent: Option<&Path>) -> Arc<AgentSession> {
        let mut session = self.session(parent);
        if parent.is_some() {
            session.append_custom_message_entry("handoff", "# Handoff\nThe cache has a database.", true).unwrap();
        }
        let agent = Arc::new(AgentSession::new(AgentConfig::new(common::config(&self.mock)), session));
        agent.record_settings(&mut agent.session()).unwrap();
        agent
    }
}

fn assistant(blocks: Vec<ContentBlock>) -> Message {
    let mut m = Message::assistant("openai-completions", "mock", "mock-model");
    m.content = handoff_nvim::core::message::Content::Blocks(blocks);
    m
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(T, f).await.expect("timed out")
}

/// The `toolResult` messages of a session file.
fn results(path: &Path) -> Vec<Value> {
    common::entry_lines(path)
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| e["message"].clone())
        .collect()
}

fn text_of(message: &Value) -> String {
    message["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
}

/// Where `needle` is in `haystack`, or a failure naming both.
fn at(haystack: &str, needle: &str) -> usize {
    haystack.find(needle).unwrap_or_else(|| panic!("{needle:?} not in:\n{haystack}"))
}

/// The names of the tools a request offers.
fn offered(request: &RecordedRequest) -> Vec<String> {
    let tools = request.body["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
}

fn system_text(request: &RecordedRequest) -> String {
    let messages = request.body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    messages[0]["content"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_mode_returns_the_decision_and_its_revert_in_order_without_a_model_call() {
    within(async {
        let env = Env::new().await;
        let parent = env.parent(None);
        let before = std::fs::read(&parent.path).unwrap();
        let agent = env.agent(Some(&parent.path));
        env.mock.push(tool_call_reply("session_query", json!({"question": QUESTION, "mode": "search"}), "q1"));
        env.mock.push(MockReply::text("Postgres."));
        agent.prompt("Which database again?", RunOptions::default()).await.unwrap();
        assert_eq!(env.mock.requests().len(), 2, "search mode asks no model");

        let child = agent.session().path().to_path_buf();
        let results = results(&child);
        assert_eq!(results.len(), 1);
        assert_eq!(results[0]["isError"], false, "{}", results[0]);
        let text = text_of(&results[0]);
        // Both entries, with their ids, the decision before its revert; the answer to it too.
        let decided = at(&text, &format!("[{}]", parent.decided));
        let decision = at(&text, "Decision: use SQLite for the cache");
        let reverted = at(&text, &format!("[{}]", parent.reverted));
        let switched = at(&text, &format!("[{}]", parent.switched));
        assert!(decided < decision && decision < reverted && reverted < switched, "{text}");
        assert!(text.contains("user (matches cache, sqlite, postgres)"), "{text}");
        assert!(text.contains("\n…\n"), "a gap between entries that are not neighbours: {text}");
        let call = at(&text, "→ write {");
        assert!(text[call..].starts_with("→ write {") && text[call..].contains("sqlite::open"), "tool-call arguments are searched and shown: {text}");
        assert!(!text.contains(&parent.unrelated), "an entry that matches nothing and neighbours no match: {text}");
        let details = &results[0]["details"];
        assert_eq!(details["mode"], "search");
        assert_eq!(details["sessionId"], SessionManager::open(&parent.path, &env.sessions()).unwrap().session_id());
        assert_eq!(details["terms"], json!(["database", "cache", "sqlite", "postgres"]));
        let matches: Vec<&str> = details["matches"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let (d, r) = (matches.iter().position(|m| *m == parent.decided), matches.iter().position(|m| *m == parent.reverted));
        assert!(d.unwrap() < r.unwrap(), "{matches:?}");
        // The chat's line for the call is the question.
        assert_eq!(tools::call_summary("session_query", &json!({"question": QUESTION})), QUESTION);
        assert_eq!(std::fs::read(&parent.path).unwrap(), before, "the parent is only read");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_mode_sends_one_request_with_the_entries_and_the_rules_and_pi_resumes_the_child() {
    let Some(pi) = pi() else { return };
    within(async {
        let env = Env::new().await;
        let parent = env.parent(None);
        let agent = env.agent(Some(&parent.path));
        let answer = format!("Postgres: SQLite was chosen first [{}], then replaced [{}].", parent.decided, parent.switched);
        env.mock.push(tool_call_reply("session_query", json!({"question": QUESTION}), "q1"));
        env.mock.push(MockReply::text(&answer));
        env.mock.push(MockReply::text("The cache uses Postgres."));
        agent.prompt("Which database again?", RunOptions::default()).await.unwrap();

        let requests = env.mock.requests();
        assert_eq!(requests.len(), 3, "the conversation's two requests and the question's one");
        let asked = &requests[1];
        assert!(asked.body.get("tools").is_none() && asked.body.get("tool_choice").is_none(), "{}", asked.body);
        let messages = asked.body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "the rules and one question: {}", asked.body);
        let rules = system_text(asked);
        for rule in ["a later entry may revise or revert an earlier one", "A tool call", "is an attempt", "Summaries", "the original entries decide", "Cite the entries", "do not answer the question, say so"] {
            assert!(rules.contains(rule), "{rule:?} not in the rules: {rules}");
        }
        let prompt = messages[1]["content"].as_str().map(str::to_string).unwrap_or_else(|| messages[1]["content"][0]["text"].as_str().unwrap().to_string());
        assert!(prompt.starts_with(&format!("Question: {QUESTION}")), "{prompt}");
        let (decided, reverted) = (at(&prompt, &format!("[{}]", parent.decided)), at(&prompt, &format!("[{}]", parent.reverted)));
        assert!(decided < reverted, "{prompt}");
        at(&prompt, "Decision: use SQLite for the cache");
        at(&prompt, "switch the cache to Postgres");
        assert!(!prompt.contains("# Handoff"), "the child's own entries are not the parent's");

        // Only the tool's result is stored: the answer, none of the request.
        let child = agent.session().path().to_path_buf();
        let results = results(&child);
        assert_eq!(results.len(), 1);
        let text = text_of(&results[0]);
        assert!(text.starts_with(&answer), "{text}");
        assert_eq!(results[0]["details"]["mode"], "answer");
        let file = std::fs::read_to_string(&child).unwrap();
        assert!(!file.contains("a later entry may revise"), "the question's request was recorded in the child");
        // The conversation's next request carries the result as any tool result.
        assert!(requests[2].body.to_string().contains("then replaced"), "{}", requests[2].body);

        // pi 0.73.1 resumes the child: the answer reaches its request as our result did.
        let root = env.dir.path();
        pi_home(root, "openai-completions", &env.mock.openai_base_url());
        env.mock.push(MockReply::text("Pi continues."));
        let mut c = tokio::process::Command::new(&pi);
        pi_env(&mut c, root)
            .current_dir(env.project())
            .arg("--session")
            .arg(&child)
            .args(["--provider", "mock", "--model", "mock-model"])
            .args(["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes"])
            .args(["--offline", "-p", "go on"])
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = c.output().await.unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "pi failed:\nstdout: {stdout}\nstderr: {stderr}");
        assert!(stdout.contains("Pi continues."), "{stdout}");
        let sent = env.mock.requests().last().cloned().unwrap();
        let tool_messages: Vec<&Value> = sent.body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
        assert_eq!(tool_messages.len(), 1, "{}", sent.body);
        assert!(tool_messages[0]["content"].to_string().contains("then replaced"), "{}", sent.body);
        let session = SessionManager::open(&child, &env.sessions()).unwrap();
        assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_fits_a_small_window_with_room_for_the_answer() {
    within(async {
        let env = Env::new().await;
        let parent = {
            let mut s = env.session(None);
            for i in 0..8 {
                let text = format!("Postgres note {i}: {}", "the pool size and the timeouts. ".repeat(100));
                s.append_message(&Message::user(text)).unwrap();
            }
            s.flush().unwrap();
            s.path().to_path_buf()
        };
        let mut config = AgentConfig::new(common::config(&env.mock));
        config.provider.context_window = 4096;
        let agent = Arc::new(AgentSession::new(config, env.session(Some(&parent))));
        env.mock.push(tool_call_reply("session_query", json!({"question": "How is the Postgres pool configured?"}), "q1"));
        env.mock.push(MockReply::text("A pool with timeouts [00000000]."));
        env.mock.push(MockReply::text("Done."));
        agent.prompt("Postgres?", RunOptions::default()).await.unwrap();
        let asked = &env.mock.requests()[1];
        let messages = asked.body["messages"].as_array().unwrap();
        let prompt = messages[1]["content"].as_str().unwrap();
        let chars = system_text(asked).chars().count() + prompt.chars().count();
        // 4096 tokens less a quarter for the answer, less 256, at 4 characters a token.
        assert!(chars <= (4096 - 1024 - 256) * 4, "{chars} characters: {prompt}");
        assert_eq!(prompt.matches("Postgres note").count(), 8, "every entry is there, clipped: {prompt}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_session_with_a_parent_is_offered_the_tool() {
    within(async {
        let env = Env::new().await;
        let alone = env.agent(None);
        env.mock.push(MockReply::text("Hello."));
        alone.prompt("hi", RunOptions::default()).await.unwrap();
        let parent = alone.session().path().to_path_buf();
        let handed_off = env.agent(Some(&parent));
        env.mock.push(MockReply::text("Hello again."));
        handed_off.prompt("hi", RunOptions::default()).await.unwrap();

        let requests = env.mock.requests();
        let (without, with) = (&requests[0], &requests[1]);
        assert_eq!(offered(without), ["read", "bash", "edit", "write", "todo_write"]);
        assert_eq!(offered(with), ["read", "bash", "edit", "write", "todo_write", "session_query"]);
        assert!(!system_text(without).contains("session_query"), "{}", system_text(without));
        assert!(system_text(with).contains("- session_query: Ask the session this one was handed off from"), "{}", system_text(with));
        assert!(system_text(with).contains("ask that session with session_query instead of guessing"), "{}", system_text(with));
        // Turned off by a list of tools without it.
        let mut config = AgentConfig::new(common::config(&env.mock));
        config.tools = tools::ToolRegistry::new([tools::ToolName::Read]);
        let listed = AgentSession::new(config, env.session(Some(&parent)));
        assert_eq!(listed.offered_tools().tools(), [tools::ToolName::Read]);
    })
    .await;
}

/// Runs the tool as a session handed off from `parent` would.
async fn query(env: &Env, parent: Option<&Path>, args: Value) -> ToolOutput {
    let ctx = ToolContext::new(env.project()).with_parent_session(parent.map(Path::to_path_buf));
    within(tools::ToolRegistry::all().execute("session_query", args, &ctx)).await
}

fn search(session: &str) -> Value {
    json!({"question": QUESTION, "mode": "search", "session": session})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ancestor_is_named_by_id_prefix_or_path_and_anything_else_is_refused() {
    let env = Env::new().await;
    let grandparent = env.parent(None);
    // The parent, handed off from the grandparent, says nothing about databases.
    let parent = {
        let mut s = env.session(Some(&grandparent.path));
        s.append_message(&Message::user("Refactor the parser.")).unwrap();
        s.flush().unwrap();
        s.path().to_path_buf()
    };
    let id_of = |path: &Path| SessionManager::open(path, &env.sessions()).unwrap().session_id().to_string();
    let (grandparent_id, parent_id) = (id_of(&grandparent.path), id_of(&parent));
    let found = |out: &ToolOutput| out.details["sessionId"].as_str().map(str::to_string);

    // Default: the parent, which has no match.
    let out = query(&env, Some(&parent), json!({"question": QUESTION, "mode": "search"})).await;
    assert!(!out.is_error, "{}", out.joined_text());
    assert_eq!(found(&out).as_deref(), Some(parent_id.as_str()));
    assert!(out.joined_text().starts_with("No entry of session"), "{}", out.joined_text());

    // The grandparent by a unique id prefix, by its path, by a path relative to the cwd.
    let prefix = &grandparent_id[..grandparent_id.len() - 4];
    let relative = format!("../sessions/{}", grandparent.path.strip_prefix(env.sessions()).unwrap().display());
    for session in [prefix.to_string(), grandparent.path.display().to_string(), relative] {
        let out = query(&env, Some(&parent), search(&session)).await;
        assert!(!out.is_error, "{session}: {}", out.joined_text());
        assert_eq!(found(&out).as_deref(), Some(grandparent_id.as_str()), "{session}");
        assert!(out.joined_text().contains(&format!("[{}]", grandparent.reverted)), "{session}: {}", out.joined_text());
        assert!(out.joined_text().contains("this session's grandparent"), "{}", out.joined_text());
    }
    // A prefix both ids start with names neither.
    let common = grandparent_id.chars().zip(parent_id.chars()).take_while(|(a, b)| a == b).count();
    if common > 0 {
        let out = query(&env, Some(&parent), search(&grandparent_id[..common])).await;
        assert!(out.is_error && out.joined_text().contains("starts the ids of several ancestors"), "{}", out.joined_text());
    }

    // Not an ancestor: another session, by path or id; a file that is not there.
    let other = {
        let mut s = env.session(None);
        s.append_message(&Message::user("Use SQLite everywhere.")).unwrap();
        s.flush().unwrap();
        s.path().to_path_buf()
    };
    let out = query(&env, Some(&parent), search(&other.display().to_string())).await;
    assert!(out.is_error, "{}", out.joined_text());
    assert!(out.joined_text().contains("is not an ancestor of this session"), "{}", out.joined_text());
    assert!(out.joined_text().contains(&format!("parent {parent_id}")) && out.joined_text().contains(&format!("grandparent {grandparent_id}")), "the error lists what can be asked: {}", out.joined_text());
    let out = query(&env, Some(&parent), search(&id_of(&other))).await;
    assert!(out.is_error && out.joined_text().contains("No ancestor of this session has an id starting with"), "{}", out.joined_text());
    let missing = env.sessions().join("gone.jsonl");
    let out = query(&env, Some(&parent), search(&missing.display().to_string())).await;
    assert_eq!((out.is_error, out.joined_text()), (true, format!("No session file at {}.", missing.display())));

    // A parent whose file is gone, and a session without a parent.
    let out = query(&env, Some(&missing), json!({"question": QUESTION})).await;
    assert!(out.is_error && out.joined_text().contains("is missing (moved or deleted)"), "{}", out.joined_text());
    let out = query(&env, None, json!({"question": QUESTION})).await;
    assert!(out.is_error && out.joined_text().contains("has no parent session"), "{}", out.joined_text());
    // A question of stop words only.
    let out = query(&env, Some(&parent), json!({"question": "what was it?"})).await;
    assert!(out.is_error && out.joined_text().contains("no words to search for"), "{}", out.joined_text());
}
