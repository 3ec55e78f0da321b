//! `handoff-nvim acp` (issue 34): the built binary driven over the Agent Client Protocol by a
//! small JSON-RPC client of ours, against the loopback mock model server. Every line the agent
//! writes to stdout must be a JSON-RPC 2.0 message ([`Agent::finish`] checks each).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::DOCUMENT;
use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::controller::SlashCommand;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const T: Duration = Duration::from_secs(20);

use common::BinaryEnv as Env;

/// The ACP agent of an [`Env`].
trait AcpAgent {
    fn log(&self) -> PathBuf;
    fn spawn(&self, args: &[&str]) -> Agent {
        self.spawn_logging(true, args)
    }
    fn spawn_logging(&self, to_file: bool, args: &[&str]) -> Agent;
}

impl AcpAgent for Env {
    fn log(&self) -> PathBuf {
        self.dir.path().join("acp.log")
    }

    /// `handoff-nvim acp` with a clean environment pointing at the mock, plus `args`; its
    /// debug log in [`AcpAgent::log`], or (`to_file` false) nowhere it was told.
    fn spawn_logging(&self, to_file: bool, args: &[&str]) -> Agent {
        let log = self.log();
        let mut c = match to_file {
            true => self.command(&["acp", "--log-file", log.to_str().unwrap()]),
            false => self.command(&["acp"]),
        };
        c.args(args)
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("HANDOFF_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let raw = raw.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    raw.lock().unwrap().push(line.clone());
                    if let Ok(value) = serde_json::from_str::<Value>(&line) {
                        let _ = tx.send(value);
                    }
                }
            })
        };
        Agent { child, stdin, rx, raw, next_id: 100, log: self.log(), seen: Vec::new(), reader }
    }
}

/// The agent process, seen from the client's side.
struct Agent {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    rx: mpsc::UnboundedReceiver<Value>,
    /// Every line of stdout, as written.
    raw: Arc<Mutex<Vec<String>>>,
    next_id: i64,
    log: PathBuf,
    /// Every message received so far, in order.
    seen: Vec<Value>,
    reader: tokio::task::JoinHandle<()>,
}

/// How the client answers the agent's requests (`session/request_permission`, `fs/*`); `None`
/// leaves a request unanswered.
type OnRequest<'a> = &'a mut dyn FnMut(&Value) -> Option<Value>;

impl Agent {
    async fn send_line(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    /// Sends a request; returns its id.
    async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })).await;
        id
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params })).await;
    }

    /// The next message from the agent.
    async fn next(&mut self) -> Value {
        let message = match tokio::time::timeout(T, self.rx.recv()).await {
            Ok(Some(message)) => message,
            Ok(None) => panic!("the agent closed stdout; log:\n{}", self.log_tail()),
            Err(_) => panic!("no message from the agent in {T:?}; seen: {:#?}\nlog:\n{}", self.seen, self.log_tail()),
        };
        self.seen.push(message.clone());
        message
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Receives until `id`'s answer, answering the agent's requests with `on_request`; returns
    /// the answer and the `session/update`s received meanwhile.
    async fn until_answer(&mut self, id: i64, on_request: OnRequest<'_>) -> (Value, Vec<Value>) {
        let mut updates = Vec::new();
        loop {
            let message = self.next().await;
            if message.get("method").is_some() && message.get("id").is_some() {
                if let Some(result) = on_request(&message) {
                    let answer = json!({ "jsonrpc": "2.0", "id": message["id"], "result": result });
                    self.send(answer).await;
                }
            } else if message["method"] == "session/update" {
                updates.push(message["params"].clone());
            } else if message["id"] == json!(id) {
                return (message, updates);
            } else {
                panic!("unexpected message {message}");
            }
        }
    }

    /// A request answered, the agent's requests refused (none expected).
    async fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.request(method, params).await;
        self.until_answer(id, &mut |r| panic!("unexpected request from the agent: {r}")).await
    }

    async fn initialize(&mut self, capabilities: Value) -> Value {
        let (answer, _) = self
            .call("initialize", json!({ "protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": { "name": "test", "version": "1" } }))
            .await;
        answer["result"].clone()
    }

    /// `session/new` in `cwd`; returns the id and the command list that follows it.
    async fn new_session(&mut self, cwd: &Path) -> (String, Value) {
        let (answer, _) = self.call("session/new", json!({ "cwd": cwd, "mcpServers": [] })).await;
        let id = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_string();
        let commands = self.until_update("available_commands_update").await;
        (id, commands)
    }

    /// Receives until an update of `kind`.
    async fn until_update(&mut self, kind: &str) -> Value {
        loop {
            let message = self.next().await;
            if message["method"] == "session/update" && message["params"]["update"]["sessionUpdate"] == kind {
                return message["params"].clone();
            }
        }
    }

    /// `session/prompt` with `text`, the agent's requests answered by `on_request`.
    async fn prompt_with(&mut self, session: &str, text: &str, on_request: OnRequest<'_>) -> (Value, Vec<Value>) {
        let id = self.request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] })).await;
        self.until_answer(id, on_request).await
    }

    /// Runs a prompt answering every permission question with `option`; how many were asked.
    async fn asked_answering(&mut self, session: &str, text: &str, option: &str) -> usize {
        let mut asked = 0;
        self.prompt_with(session, text, &mut |_| {
            asked += 1;
            Some(choose(option))
        })
        .await;
        asked
    }

    async fn prompt(&mut self, session: &str, text: &str) -> (Value, Vec<Value>) {
        self.prompt_with(session, text, &mut |r| panic!("unexpected request from the agent: {r}")).await
    }

    /// Closes stdin, waits for the agent to exit, and checks that every line it wrote to stdout
    /// was JSON-RPC 2.0.
    async fn finish(mut self) {
        drop(self.stdin);
        let status = tokio::time::timeout(T, self.child.wait()).await.expect("the agent did not exit when stdin closed").unwrap();
        assert!(status.success(), "exit {status:?}; log:\n{}", std::fs::read_to_string(&self.log).unwrap_or_default());
        let _ = tokio::time::timeout(T, &mut self.reader).await;
        for line in self.raw.lock().unwrap().iter() {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON on stdout: {line:?}: {e}"));
            assert_eq!(value["jsonrpc"], "2.0", "not JSON-RPC 2.0 on stdout: {line}");
        }
    }
}

/// The agent started with `args`, initialized with `capabilities`, and a new session of the
/// project (its command list received).
async fn opened(env: &Env, args: &[&str], capabilities: Value) -> (Agent, String) {
    let mut agent = env.spawn(args);
    agent.initialize(capabilities).await;
    let (session, _) = agent.new_session(&env.project()).await;
    (agent, session)
}

/// The concatenated text of the `kind` chunks among `updates`.
fn chunks(updates: &[Value], kind: &str) -> String {
    updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == kind)
        .filter_map(|u| u["update"]["content"]["text"].as_str())
        .collect()
}

fn of_kind<'a>(updates: &'a [Value], kind: &str) -> Vec<&'a Value> {
    updates.iter().filter(|u| u["update"]["sessionUpdate"] == kind).map(|u| &u["update"]).collect()
}

fn stop_reason(answer: &Value) -> &str {
    answer["result"]["stopReason"].as_str().unwrap_or_else(|| panic!("no stop reason: {answer}"))
}

/// A permission answer choosing `option`.
fn choose(option: &str) -> Value {
    json!({ "outcome": { "outcome": "selected", "optionId": option } })
}

/// The text of the user and tool messages of the mock's `n`th request.
fn request_text(mock: &MockServer, n: usize) -> String {
    mock.requests()[n].body["messages"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_says_version_1_what_is_built_and_where_keys_come_from() {
    let env = Env::new().await;
    let mut agent = env.spawn(&[]);
    let result = agent.initialize(json!({})).await;
    assert_eq!(result["protocolVersion"], 1, "{result}");
    let caps = &result["agentCapabilities"];
    assert_eq!(caps["loadSession"], true, "{result}");
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true, "{result}");
    assert!(caps["sessionCapabilities"]["list"].is_object(), "session/list is built: {result}");
    assert!(caps["sessionCapabilities"]["resume"].is_object() && caps["sessionCapabilities"]["close"].is_object(), "{result}");
    assert_eq!(caps["promptCapabilities"]["image"], false, "images are not taken: {result}");
    let auth = result["authMethods"].as_array().unwrap();
    assert!(!auth.is_empty() && auth[0]["description"].as_str().unwrap().contains("api_key_cmd"), "{result}");
    assert_eq!(result["agentInfo"]["name"], "handoff-nvim");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_lists_the_commands_and_streams_a_reply_with_its_thinking() {
    let env = Env::new().await;
    let templates = env.dir.path().join("templates");
    std::fs::create_dir_all(&templates).unwrap();
    std::fs::write(templates.join("review.md"), "---\ndescription: Review the change\n---\nReview $1").unwrap();
    let mut agent = env.spawn(&["--templates-dir", templates.to_str().unwrap()]);
    agent.initialize(json!({})).await;
    let (session, commands) = agent.new_session(&env.project()).await;
    assert_eq!(commands["sessionId"], session.as_str());
    // The controller's command table, each with its help and argument, then the templates.
    let advertised: Vec<(String, String, Option<String>)> = commands["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().into(), c["description"].as_str().unwrap().into(), c["input"]["hint"].as_str().map(Into::into)))
        .collect();
    let mut table: Vec<(String, String, Option<String>)> =
        SlashCommand::ALL.iter().map(|c| (c.name().into(), c.help().into(), c.args().map(Into::into))).collect();
    table.push(("review".into(), "Review the change".into(), None));
    assert_eq!(advertised, table);
    env.mock.push(MockReply::Text {
        chunks: vec!["Hello ".into(), "there.".into()],
        chunk_delay_ms: 0,
        first_delay_ms: 0,
        stop: "stop".into(),
        thinking: vec!["Let me think.".into()],
    });
    let (answer, updates) = agent.prompt(&session, "Say hello").await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    assert_eq!(chunks(&updates, "agent_message_chunk"), "Hello there.");
    assert_eq!(chunks(&updates, "agent_thought_chunk"), "Let me think.");
    assert!(request_text(&env.mock, 0).contains("Say hello"));
    agent.finish().await;
}

/// One `write` call the model asks for, then a closing text.
fn write_turn(mock: &MockServer, id: &str, path: &str, content: &str, closing: &str) {
    mock.push(common::tool_call_reply("write", json!({ "path": path, "content": content }), id));
    mock.push(MockReply::text(closing));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_allow_once_reject_with_the_model_told_and_always_not_asked_again() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &[], json!({})).await;

    // Allow once: asked with the four kinds and the diff, then the file is written.
    write_turn(&env.mock, "w1", "a.txt", "one\n", "Wrote a.");
    let mut asked = Vec::new();
    let (answer, updates) = agent
        .prompt_with(&session, "write a", &mut |r| {
            asked.push(r.clone());
            Some(choose("allow_once"))
        })
        .await;
    assert_eq!(stop_reason(&answer), "end_turn");
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let request = &asked[0];
    assert_eq!(request["method"], "session/request_permission");
    let kinds: Vec<&str> = request["params"]["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once", "reject_always"]);
    let call = &request["params"]["toolCall"];
    assert_eq!(call["toolCallId"], "w1");
    assert_eq!(call["kind"], "edit");
    let diff = call["content"].as_array().unwrap().iter().find(|c| c["type"] == "diff").expect("a diff");
    assert_eq!(diff["newText"], "one\n");
    assert_eq!(std::fs::read_to_string(env.project().join("a.txt")).unwrap(), "one\n");
    let announced = of_kind(&updates, "tool_call");
    assert_eq!(announced.len(), 1, "{updates:#?}");
    assert_eq!((&announced[0]["toolCallId"], &announced[0]["kind"]), (&json!("w1"), &json!("edit")));
    // The approval's preview comes with the call's start (carried on the engine's event).
    let started = of_kind(&updates, "tool_call_update").into_iter().find(|u| u["status"] == "in_progress").expect("the call's start");
    let started_diff = started["content"].as_array().unwrap().iter().find(|c| c["type"] == "diff").expect("a diff at the start");
    assert_eq!(started_diff, diff);
    let ends: Vec<&Value> = of_kind(&updates, "tool_call_update").into_iter().filter(|u| u["status"] == "completed").collect();
    assert_eq!(ends.len(), 1, "{updates:#?}");

    // Reject: nothing written, the model is told.
    write_turn(&env.mock, "w2", "b.txt", "two\n", "Not written.");
    let (answer, updates) = agent.prompt_with(&session, "write b", &mut |_| Some(choose("reject_once"))).await;
    assert_eq!(stop_reason(&answer), "end_turn");
    assert!(!env.project().join("b.txt").exists());
    let failed: Vec<&Value> = of_kind(&updates, "tool_call_update").into_iter().filter(|u| u["status"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{updates:#?}");
    let n = env.mock.requests().len();
    assert!(request_text(&env.mock, n - 1).contains("The user rejected this tool call."), "{}", request_text(&env.mock, n - 1));

    // Always: asked once, then not again for the tool.
    write_turn(&env.mock, "w3", "c.txt", "three\n", "Wrote c.");
    let mut asked = agent.asked_answering(&session, "write c", "allow_always").await;
    write_turn(&env.mock, "w4", "d.txt", "four\n", "Wrote d.");
    asked += agent.asked_answering(&session, "write d", "reject_once").await;
    assert_eq!(asked, 1, "always is remembered for the session");
    assert_eq!(std::fs::read_to_string(env.project().join("d.txt")).unwrap(), "four\n");

    // Reject always: the next call of the tool is refused unasked.
    env.mock.push(common::tool_call_reply("bash", json!({ "command": "echo hi" }), "b1"));
    env.mock.push(MockReply::text("ok"));
    let mut asked = agent.asked_answering(&session, "run", "reject_always").await;
    env.mock.push(common::tool_call_reply("bash", json!({ "command": "echo hi" }), "b2"));
    env.mock.push(MockReply::text("ok"));
    asked += agent.asked_answering(&session, "run again", "allow_once").await;
    assert_eq!(asked, 1, "reject always is remembered for the session");
    let n = env.mock.requests().len();
    assert!(request_text(&env.mock, n - 1).contains("rejected calls like this one"), "{}", request_text(&env.mock, n - 1));
    agent.finish().await;
}

/// A way out tried as a prompt injection would, through a client that approves everything with
/// the widest allow it is offered: the model writes outside the project, then again. With the
/// sandbox on, a path outside the project is asked about per call ("always" is not offered, and
/// the second write is asked too). The control (`--sandbox off`: no protected path) offers
/// "always", takes it, and is asked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_approving_everything_is_asked_per_write_outside_the_project_with_the_sandbox_on() {
    async fn asked_for_two_writes_outside(args: &[&str]) -> usize {
        let env = Env::new().await;
        let outside = env.dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let (mut agent, session) = opened(&env, args, json!({})).await;
        let mut asked = 0;
        let mut approve_all = |r: &Value| {
            asked += 1;
            let offered: Vec<&str> = r["params"]["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
            Some(choose(if offered.contains(&"allow_always") { "allow_always" } else { "allow_once" }))
        };
        let (first, second) = (outside.join("first.sh"), outside.join("second.sh"));
        write_turn(&env.mock, "o1", first.to_str().unwrap(), "echo one\n", "Wrote it.");
        agent.prompt_with(&session, "set things up", &mut approve_all).await;
        write_turn(&env.mock, "o2", second.to_str().unwrap(), "echo two\n", "Wrote it too.");
        agent.prompt_with(&session, "and the other one", &mut approve_all).await;
        assert_eq!(std::fs::read_to_string(&first).unwrap(), "echo one\n");
        assert_eq!(std::fs::read_to_string(&second).unwrap(), "echo two\n");
        agent.finish().await;
        asked
    }
    assert_eq!(asked_for_two_writes_outside(&[]).await, 2, "an approval of a write outside the project held for the next one");
    assert_eq!(asked_for_two_writes_outside(&["--sandbox", "off"]).await, 1, "control: without the sandbox 'always' covers the tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_read_and_write_through_the_client_when_it_says_it_can() {
    let env = Env::new().await;
    let file = env.project().join("notes.txt");
    std::fs::write(&file, "on disk\n").unwrap();
    let (mut agent, session) = opened(&env, &["--yes"], json!({ "fs": { "readTextFile": true, "writeTextFile": true } })).await;
    // The editor's buffer holds unsaved text the disk does not: the edit must find it.
    env.mock.push(common::tool_call_reply("edit", json!({ "path": "notes.txt", "edits": [{ "oldText": "in the buffer", "newText": "edited" }] }), "e1"));
    env.mock.push(MockReply::text("Edited."));
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    let (answer, updates) = agent
        .prompt_with(&session, "edit the notes", &mut |r| match r["method"].as_str().unwrap() {
            "fs/read_text_file" => {
                reads.push(r["params"].clone());
                Some(json!({ "content": "in the buffer\n" }))
            }
            "fs/write_text_file" => {
                writes.push(r["params"].clone());
                Some(Value::Null)
            }
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(stop_reason(&answer), "end_turn");
    assert!(!reads.is_empty(), "the file was read through the client");
    assert_eq!(reads[0]["path"], file.to_str().unwrap());
    assert_eq!(writes.len(), 1, "{writes:#?}");
    assert_eq!((&writes[0]["path"], &writes[0]["content"]), (&json!(file.to_str().unwrap()), &json!("edited\n")));
    assert_eq!(writes[0]["sessionId"], session.as_str());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "on disk\n", "the client writes, not the agent");
    let done = of_kind(&updates, "tool_call_update").into_iter().find(|u| u["status"] == "completed").cloned();
    assert!(done.is_some(), "{updates:#?}");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_read_back_from_the_client_and_a_format_on_save_is_what_the_model_is_told() {
    let env = Env::new().await;
    let file = env.project().join("conf.py");
    std::fs::write(&file, "x = 0\n").unwrap();
    let (mut agent, session) = opened(&env, &["--yes"], json!({ "fs": { "readTextFile": true, "writeTextFile": true } })).await;
    env.mock.push(common::tool_call_reply("write", json!({ "path": "conf.py", "content": "x=1\ny=2\n" }), "w1"));
    env.mock.push(MockReply::text("Written."));
    // The client's buffer, formatted on save as an editor with a formatter does.
    let mut buffer = String::from("x = 0\n");
    let mut order = Vec::new();
    let (answer, updates) = agent
        .prompt_with(&session, "write the config", &mut |r| match r["method"].as_str().unwrap() {
            "fs/read_text_file" => {
                order.push("read");
                Some(json!({ "content": buffer }))
            }
            "fs/write_text_file" => {
                order.push("write");
                buffer = r["params"]["content"].as_str().unwrap().replace('=', " = ");
                Some(Value::Null)
            }
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(stop_reason(&answer), "end_turn");
    assert_eq!(order.last(), Some(&"read"), "the file is read back after the write: {order:?}");
    assert!(order.contains(&"write"), "{order:?}");
    let told = request_text(&env.mock, 1);
    assert!(told.contains("The file changed as the editor saved it") && told.contains("+1 x = 1"), "{told}");
    let done = of_kind(&updates, "tool_call_update").into_iter().find(|u| u["status"] == "completed").cloned().unwrap();
    assert!(done.to_string().contains("The file changed as the editor saved it"), "the client sees it too: {done}");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_the_disk_is_not_read_back_from_a_client_that_only_reads() {
    let env = Env::new().await;
    let file = env.project().join("conf.py");
    std::fs::write(&file, "x = 0\n").unwrap();
    let (mut agent, session) = opened(&env, &["--yes"], json!({ "fs": { "readTextFile": true } })).await;
    env.mock.push(common::tool_call_reply("write", json!({ "path": "conf.py", "content": "x = 1\n" }), "w1"));
    env.mock.push(MockReply::text("Written."));
    // The client's buffer still holds the old text: it never saw the write.
    let (answer, _) = agent
        .prompt_with(&session, "write the config", &mut |r| match r["method"].as_str().unwrap() {
            "fs/read_text_file" => Some(json!({ "content": "x = 0\n" })),
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(stop_reason(&answer), "end_turn");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x = 1\n");
    let told = request_text(&env.mock, 1);
    assert!(told.contains("Successfully wrote") && !told.contains("The file changed as the editor saved it"), "{told}");
    agent.finish().await;
}

/// A session with one exchange, over ACP; returns the process, the session id.
async fn one_exchange(env: &Env, capabilities: Value) -> (Agent, String) {
    let (mut agent, session) = opened(env, &[], capabilities).await;
    env.mock.push(MockReply::text("First answer."));
    let (answer, _) = agent.prompt(&session, "First question").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    (agent, session)
}

fn session_files(env: &Env) -> Vec<PathBuf> {
    common::session_files(&env.session_dir())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_is_reported_as_a_compaction_the_id_stays_and_the_next_prompt_starts_from_the_document() {
    let env = Env::new().await;
    let (mut agent, session) = one_exchange(&env, json!({ "session": { "compaction": {} } })).await;
    env.mock.push(MockReply::text(DOCUMENT));
    let (answer, updates) = agent.prompt(&session, "/handoff the parser").await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    let compactions = of_kind(&updates, "compaction_update");
    let statuses: Vec<&str> = compactions.iter().map(|c| c["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["in_progress", "completed"], "{updates:#?}");
    assert_eq!(compactions[0]["compactionId"], compactions[1]["compactionId"]);
    let summary: String = of_kind(&updates, "compaction_summary_chunk").iter().filter_map(|c| c["content"]["text"].as_str()).collect();
    assert_eq!(summary, DOCUMENT);
    assert!(chunks(&updates, "agent_message_chunk").contains("New session started with handoff context"), "{updates:#?}");
    assert!(updates.iter().all(|u| u["sessionId"] == session.as_str()));
    assert!(request_text(&env.mock, 1).contains("Additional focus: the parser"), "{}", request_text(&env.mock, 1));
    assert_eq!(session_files(&env).len(), 2, "a new file behind the same id");

    env.mock.push(MockReply::text("Going on."));
    let (answer, updates) = agent.prompt(&session, "Next step").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    assert_eq!(chunks(&updates, "agent_message_chunk"), "Going on.");
    let next = request_text(&env.mock, 2);
    assert!(next.contains("Ship the parser") && next.contains("Next step"), "{next}");
    assert!(!next.contains("First question"), "the old transcript is not sent: {next}");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_compaction_the_handoff_is_a_headed_agent_message() {
    let env = Env::new().await;
    let (mut agent, session) = one_exchange(&env, json!({})).await;
    env.mock.push(MockReply::text(DOCUMENT));
    let (answer, updates) = agent.prompt(&session, "/handoff").await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    assert!(of_kind(&updates, "compaction_update").is_empty(), "not advertised: {updates:#?}");
    let text = chunks(&updates, "agent_message_chunk");
    let heading = text.find("**Handoff").unwrap_or_else(|| panic!("{text}"));
    let document = text.find("## Goal").unwrap_or_else(|| panic!("{text}"));
    assert!(heading < document, "{text}");
    assert!(text.contains("New session started with handoff context"), "{text}");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_mid_stream_answers_cancelled() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &[], json!({})).await;
    let words: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    env.mock.push(common::slow(&words, 0, 50));
    let id = agent.request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "talk" }] })).await;
    agent.until_update("agent_message_chunk").await;
    agent.notify("session/cancel", json!({ "sessionId": session })).await;
    let (answer, updates) = agent.until_answer(id, &mut |r| panic!("unexpected {r}")).await;
    assert_eq!(stop_reason(&answer), "cancelled", "{answer}");
    assert!(!chunks(&updates, "agent_message_chunk").contains("word199"), "stopped before the end");
    // The session goes on.
    env.mock.push(MockReply::text("Still here."));
    let (answer, updates) = agent.prompt(&session, "again").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    assert_eq!(chunks(&updates, "agent_message_chunk"), "Still here.");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_a_permission_is_asked_answers_cancelled_and_runs_nothing() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &[], json!({})).await;
    write_turn(&env.mock, "w1", "never.txt", "no\n", "unreachable");
    let id = agent.request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "write" }] })).await;
    // The question arrives; the client cancels the turn and never answers it.
    loop {
        let message = agent.next().await;
        if message["method"] == "session/request_permission" {
            break;
        }
    }
    agent.notify("session/cancel", json!({ "sessionId": session })).await;
    let (answer, _) = agent.until_answer(id, &mut |r| panic!("unexpected {r}")).await;
    assert_eq!(stop_reason(&answer), "cancelled", "{answer}");
    assert!(!env.project().join("never.txt").exists());
    assert_eq!(env.mock.requests().len(), 1, "nothing went to the model after the cancel");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_in_a_new_process_replays_the_conversation_and_after_a_handoff_opens_the_newest_of_the_chain() {
    let env = Env::new().await;
    let (agent, session) = one_exchange(&env, json!({})).await;
    agent.finish().await;

    let mut agent = env.spawn(&[]);
    agent.initialize(json!({})).await;
    let (answer, updates) = agent.call("session/load", json!({ "sessionId": session, "cwd": env.project(), "mcpServers": [] })).await;
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(chunks(&updates, "user_message_chunk"), "First question");
    assert_eq!(chunks(&updates, "agent_message_chunk"), "First answer.");
    // It goes on: a handoff in this process, the id staying.
    env.mock.push(MockReply::text(DOCUMENT));
    let (answer, _) = agent.prompt(&session, "/handoff").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    let list = agent.call("session/list", json!({ "cwd": env.project() })).await.0;
    let listed = list["result"]["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "one chain: {list}");
    assert_eq!(listed[0]["sessionId"], session.as_str());
    agent.finish().await;

    let mut agent = env.spawn(&[]);
    agent.initialize(json!({})).await;
    let (answer, updates) = agent.call("session/load", json!({ "sessionId": session, "cwd": env.project(), "mcpServers": [] })).await;
    assert!(answer.get("error").is_none(), "{answer}");
    let text = chunks(&updates, "agent_message_chunk");
    assert!(text.contains("Handed off") && text.contains("Ship the parser"), "the newest of the chain: {text}");
    assert!(chunks(&updates, "user_message_chunk").is_empty(), "{updates:#?}");
    env.mock.push(MockReply::text("Continued."));
    let (answer, _) = agent.prompt(&session, "Continue").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    let last = request_text(&env.mock, env.mock.requests().len() - 1);
    assert!(last.contains("Ship the parser") && last.contains("Continue"), "{last}");
    agent.finish().await;
}

/// `session/load` of `session` in a new process: the text of its replayed agent messages, and
/// the process.
async fn loaded(env: &Env, session: &str, method: &str) -> (Agent, String) {
    let mut agent = env.spawn(&[]);
    agent.initialize(json!({})).await;
    let (answer, updates) = agent.call(method, json!({ "sessionId": session, "cwd": env.project(), "mcpServers": [] })).await;
    assert!(answer.get("error").is_none(), "{answer}");
    (agent, chunks(&updates, "user_message_chunk") + "|" + &chunks(&updates, "agent_message_chunk"))
}

/// The `session/list` entries of the project: (id, title).
async fn listed(agent: &mut Agent, env: &Env) -> Vec<(String, String)> {
    let list = agent.call("session/list", json!({ "cwd": env.project() })).await.0;
    let entries = list["result"]["sessions"].as_array().unwrap_or_else(|| panic!("{list}"));
    entries.iter().map(|e| (e["sessionId"].as_str().unwrap().to_string(), e["title"].as_str().unwrap_or("").to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_new_the_id_loads_the_new_session_and_the_one_left_keeps_an_id_of_its_own() {
    let env = Env::new().await;
    let (mut agent, session) = one_exchange(&env, json!({})).await;
    agent.prompt(&session, "/new").await;
    env.mock.push(MockReply::text("Second answer."));
    agent.prompt(&session, "Second question").await;
    agent.finish().await;

    let (mut agent, replayed) = loaded(&env, &session, "session/load").await;
    assert_eq!(replayed, "Second question|Second answer.", "the id goes on where /new left it");
    let list = listed(&mut agent, &env).await;
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(list.contains(&(session.clone(), "Second question".into())), "{list:?}");
    let (left, _) = list.iter().find(|(id, _)| *id != session).unwrap_or_else(|| panic!("{list:?}"));
    assert_eq!(list.iter().find(|(id, _)| id == left).unwrap().1, "First question");
    agent.finish().await;

    let (agent, replayed) = loaded(&env, left, "session/load").await;
    assert_eq!(replayed, "First question|First answer.", "the session left by /new is loadable under its listed id");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_back_the_id_loads_the_session_gone_back_to() {
    let env = Env::new().await;
    let (mut agent, session) = one_exchange(&env, json!({})).await;
    env.mock.push(MockReply::text(DOCUMENT));
    agent.prompt(&session, "/handoff").await;
    let (answer, _) = agent.prompt(&session, "/back").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    agent.finish().await;
    assert_eq!(session_files(&env).len(), 2);

    let (mut agent, replayed) = loaded(&env, &session, "session/load").await;
    // The parent holds the first exchange (and the document it wrote); the newest of the
    // chain would start from the handoff, with no user message.
    assert!(replayed.starts_with("First question|First answer."), "the parent, not the newest of the chain: {replayed}");
    assert!(!replayed.contains("Handed off"), "{replayed}");
    assert_eq!(listed(&mut agent, &env).await.len(), 1, "one chain");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_goes_on_without_a_replay_and_close_forgets_the_id_until_it_is_loaded() {
    let env = Env::new().await;
    let (agent, session) = one_exchange(&env, json!({})).await;
    agent.finish().await;

    let (mut agent, replayed) = loaded(&env, &session, "session/resume").await;
    assert_eq!(replayed, "|", "resume replays nothing");
    env.mock.push(MockReply::text("Resumed."));
    let (answer, _) = agent.prompt(&session, "Go on").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    let sent = request_text(&env.mock, 1);
    assert!(sent.contains("First question") && sent.contains("Go on"), "the conversation goes on: {sent}");

    let (answer, _) = agent.call("session/close", json!({ "sessionId": session })).await;
    assert!(answer.get("error").is_none(), "{answer}");
    let id = agent.request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "x" }] })).await;
    let (answer, _) = agent.until_answer(id, &mut |r| panic!("unexpected {r}")).await;
    assert_eq!(answer["error"]["code"], -32002, "a closed id is unknown: {answer}");
    let (answer, _) = agent.call("session/close", json!({ "sessionId": session })).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    let (answer, updates) = agent.call("session/load", json!({ "sessionId": session, "cwd": env.project(), "mcpServers": [] })).await;
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(chunks(&updates, "agent_message_chunk").contains("Resumed."), "the files stay: {updates:#?}");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_unknown_methods_and_unknown_sessions_are_errors_never_a_crash() {
    let env = Env::new().await;
    let mut agent = env.spawn(&[]);
    agent.send_line("{ this is not json").await;
    let error = agent.next().await;
    assert_eq!((&error["id"], &error["error"]["code"]), (&Value::Null, &json!(-32700)), "{error}");
    let (answer, _) = agent.call("no/such_method", json!({})).await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let (answer, _) = agent.call("session/prompt", json!({ "sessionId": "nope", "prompt": [] })).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("nope"), "{answer}");
    let (answer, _) = agent.call("session/load", json!({ "sessionId": "nope", "cwd": env.project(), "mcpServers": [] })).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    let (answer, _) = agent.call("session/new", json!({ "cwd": 42 })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let (answer, _) = agent.call("session/new", json!({ "cwd": "relative/path", "mcpServers": [] })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    agent.notify("session/cancel", json!({ "sessionId": "nope" })).await;
    agent.notify("some/notification", json!({})).await;
    // Still alive and answering.
    let result = agent.initialize(json!({})).await;
    assert_eq!(result["protocolVersion"], 1);
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_written_over_acp() {
    let Some(pi) = common::pi::pi_bin() else { return };
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &["--yes"], json!({})).await;
    write_turn(&env.mock, "w1", "a.txt", "one\n", "Wrote it.");
    let (answer, _) = agent.prompt(&session, "write a").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    env.mock.push(MockReply::text(DOCUMENT));
    agent.prompt(&session, "/handoff").await;
    agent.finish().await;

    let root = env.dir.path();
    common::pi::pi_home(root, "openai-completions", &env.mock.openai_base_url());
    for file in session_files(&env) {
        env.mock.push(MockReply::text("Pi continues here."));
        let out = common::pi::pi_resume(&pi, root, &file, "mock", "mock-model", "next").output().await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "pi failed on {}: {stdout}\n{}", file.display(), String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("Pi continues here."), "{stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_automatic_handoff_mid_tool_loop_is_a_compaction_and_the_task_finishes_behind_the_same_id() {
    let env = Env::new().await;
    std::fs::write(env.project().join("notes.txt"), "the secret number is 42\n").unwrap();
    let (mut agent, session) = opened(&env, &["--context-window", "20000"], json!({ "session": { "compaction": {} } })).await;
    let usage = handoff_mock::MockUsage { input: 15_000, output: Some(100), ..Default::default() };
    env.mock.push(common::tool_call_reply("read", json!({ "path": "notes.txt" }), "r1").with_usage(usage));
    env.mock.push(MockReply::text(DOCUMENT));
    env.mock.push(MockReply::text("The number is 42: finished."));
    let (answer, updates) = agent.prompt(&session, "read notes.txt and tell me the number").await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    let kinds: Vec<&str> = updates.iter().map(|u| u["update"]["sessionUpdate"].as_str().unwrap()).collect();
    let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap_or_else(|| panic!("no {kind} in {kinds:?}"));
    assert!(at("tool_call") < at("compaction_update"), "{kinds:?}");
    let read_done = updates.iter().position(|u| u["update"]["toolCallId"] == "r1" && u["update"]["status"] == "completed").unwrap();
    assert!(read_done < at("compaction_update"), "the batch completes first: {kinds:?}");
    let statuses: Vec<&str> = of_kind(&updates, "compaction_update").iter().map(|c| c["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["in_progress", "completed"]);
    let usage = of_kind(&updates, "usage_update")[0];
    assert_eq!((usage["used"].as_u64(), usage["size"].as_u64()), (Some(15_100), Some(20_000)), "{usage}");
    let text = chunks(&updates, "agent_message_chunk");
    assert!(text.contains("Handed off automatically") && text.ends_with("The number is 42: finished."), "{text}");
    assert!(updates.iter().all(|u| u["sessionId"] == session.as_str()));
    assert_eq!(session_files(&env).len(), 2);
    assert_eq!(env.mock.requests().len(), 3);
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_mcp_servers_are_added_to_ours() {
    let env = Env::new().await;
    let script = common::fixtures_dir().join("mcp/stdio_server.py");
    let marker = env.dir.path().join("server-started");
    let mut agent = env.spawn(&["--yes"]);
    agent.initialize(json!({})).await;
    let server = json!({ "name": "fx", "command": "python3", "args": [script], "env": [{ "name": "MCP_TEST_MARKER", "value": marker }] });
    let (answer, _) = agent.call("session/new", json!({ "cwd": env.project(), "mcpServers": [server] })).await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_string();
    env.mock.push(common::tool_call_reply("mcp__fx__echo", json!({ "text": "echoed by the client's server" }), "m1"));
    env.mock.push(MockReply::text("Echoed."));
    let (answer, updates) = agent.prompt(&session, "echo it").await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    assert!(marker.exists(), "the client's server did not start");
    let tools = env.mock.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__fx__echo"), "{tools}");
    assert!(request_text(&env.mock, 1).contains("echoed by the client's server"), "{}", request_text(&env.mock, 1));
    let done = of_kind(&updates, "tool_call_update").into_iter().any(|u| u["toolCallId"] == "m1" && u["status"] == "completed");
    assert!(done, "{updates:#?}");
    // Its kind is the tool's own, from the server's read-only hint (not "other").
    let announced = of_kind(&updates, "tool_call").into_iter().find(|u| u["toolCallId"] == "m1").unwrap_or_else(|| panic!("{updates:#?}"));
    assert_eq!(announced["kind"], "read", "{announced}");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_model_request_is_a_json_rpc_error_that_says_why() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &["--max-retries", "0"], json!({})).await;
    env.mock.push(MockReply::Status { status: 500, body: "the mock is down".into(), retry_after: None });
    let (answer, _) = agent.prompt(&session, "hello").await;
    let message = answer["error"]["message"].as_str().unwrap_or_else(|| panic!("{answer}"));
    assert!(message.contains("The model request failed") && message.contains("500"), "{message}");
    env.mock.push(MockReply::text("Back."));
    let (answer, _) = agent.prompt(&session, "again").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_limit_is_max_turn_requests_and_a_question_answered_cancelled_is_cancelled() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &["--max-turns", "1", "--yes"], json!({})).await;
    env.mock.push(common::tool_call_reply("read", json!({ "path": "missing.txt" }), "r1"));
    let (answer, updates) = agent.prompt(&session, "read").await;
    assert_eq!(stop_reason(&answer), "max_turn_requests", "{answer}");
    assert!(chunks(&updates, "agent_message_chunk").contains("turn limit"), "{updates:#?}");
    agent.finish().await;

    let (mut agent, session) = opened(&env, &[], json!({})).await;
    write_turn(&env.mock, "w1", "never.txt", "no\n", "unreachable");
    let (answer, _) = agent.prompt_with(&session, "write", &mut |_| Some(json!({ "outcome": { "outcome": "cancelled" } }))).await;
    assert_eq!(stop_reason(&answer), "cancelled", "{answer}");
    assert!(!env.project().join("never.txt").exists());
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_commands_run_in_the_host_and_never_reach_the_model() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &[], json!({})).await;
    let said = |updates: &[Value]| chunks(updates, "agent_message_chunk");
    let (answer, updates) = agent.prompt(&session, "/model").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    assert!(said(&updates).contains("mock-model"), "{updates:#?}");
    let (_, updates) = agent.prompt(&session, "/thinking high").await;
    assert!(said(&updates).contains("Thinking level: high"), "{updates:#?}");
    let (_, updates) = agent.prompt(&session, "/thinking loud").await;
    assert!(said(&updates).contains("unknown thinking level"), "{updates:#?}");
    let (_, updates) = agent.prompt(&session, "/pin keep the tests green").await;
    assert!(said(&updates).contains("1. keep the tests green"), "{updates:#?}");
    // codecompanion types commands with a backslash.
    let (_, updates) = agent.prompt(&session, "\\pins").await;
    assert!(said(&updates).contains("1. keep the tests green"), "{updates:#?}");
    let (_, updates) = agent.prompt(&session, "/new").await;
    assert!(said(&updates).contains("New session started."), "{updates:#?}");
    assert_eq!(env.mock.requests().len(), 0, "a command reached the model");
    env.mock.push(MockReply::text("Fresh."));
    let (answer, _) = agent.prompt(&session, "hello").await;
    assert_eq!(stop_reason(&answer), "end_turn");
    let sent = request_text(&env.mock, 0);
    assert!(!sent.contains("keep the tests green"), "the new session has no pins: {sent}");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_a_handoff_leaves_the_session_as_it_was() {
    let env = Env::new().await;
    let (mut agent, session) = one_exchange(&env, json!({ "session": { "compaction": {} } })).await;
    let words: Vec<String> = DOCUMENT.split_inclusive(' ').map(str::to_string).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    env.mock.push(common::slow(&words, 0, 100));
    let id = agent.request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "/handoff" }] })).await;
    agent.until_update("compaction_summary_chunk").await;
    agent.notify("session/cancel", json!({ "sessionId": session })).await;
    let (answer, updates) = agent.until_answer(id, &mut |r| panic!("unexpected {r}")).await;
    assert_eq!(stop_reason(&answer), "cancelled", "{answer}");
    let last = of_kind(&updates, "compaction_update").last().map(|u| u["status"].clone());
    assert_eq!(last, Some(json!("cancelled")), "{updates:#?}");
    assert_eq!(session_files(&env).len(), 1, "no new session");
    env.mock.push(MockReply::text("Same session."));
    agent.prompt(&session, "go on").await;
    assert!(request_text(&env.mock, 2).contains("First question"), "the old transcript goes on");
    agent.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_log_file_debug_logging_still_leaves_stdout_to_json_rpc() {
    let env = Env::new().await;
    // The sandbox off: this test is about stdout, not about whether this kernel sandboxes.
    let mut agent = env.spawn_logging(false, &["--yes", "--sandbox", "off"]);
    agent.initialize(json!({})).await;
    let (session, _) = agent.new_session(&env.project()).await;
    env.mock.push(common::tool_call_reply("bash", json!({ "command": "echo printed-by-a-command" }), "b1"));
    env.mock.push(MockReply::text("Done."));
    let (answer, _) = agent.prompt(&session, "run it").await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    assert!(request_text(&env.mock, 1).contains("printed-by-a-command"), "the command ran: {}", request_text(&env.mock, 1));
    // `finish` fails on any line of stdout that is not JSON-RPC 2.0.
    agent.finish().await;
}

/// The host's peak resident memory (`VmHWM`), in bytes.
fn peak_memory(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// A client that stops reading while a long reply streams: the agent's output waits in a
/// bounded queue (the updates stop, the reply goes on into the session file), so the host's
/// memory grows by far less than the lines it would have queued. The reply is 300,000 small
/// deltas (a line of some 190 bytes each: 55 MB of JSON-RPC if all were kept). The control is
/// a host whose client reads as the reply streams (what the reply itself costs: its text, the
/// message, the session's entry); a host whose client does not read may grow by less than a
/// quarter of those lines more. The client then reads again, and gets the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_keeps_the_hosts_memory_bounded() {
    const DELTAS: usize = 300_000;
    const LINE: u64 = 190;
    let env = Env::new().await;
    let control = long_reply_growth(&env, DELTAS, true, 1).await;
    let stalled = long_reply_growth(&env, DELTAS, false, 2).await;
    let unbounded = DELTAS as u64 * LINE;
    eprintln!(
        "peak memory grew by {} KiB for a reply read as it streamed, by {} KiB for it unread ({} KiB of lines if all were queued)",
        control / 1024,
        stalled / 1024,
        unbounded / 1024
    );
    assert!(
        stalled < control + unbounded / 4,
        "the host's memory grew by {stalled} bytes while the client did not read ({control} while it read)"
    );
}

/// A new ACP host, a session, a reply of `deltas` deltas; how much the host's peak memory grew
/// over the reply. `read`: the client reads as it streams; else not until the reply is whole
/// in the session file (`nth`: how many sessions of `env` hold it then).
async fn long_reply_growth(env: &Env, deltas: usize, read: bool, nth: usize) -> u64 {
    use tokio::io::AsyncReadExt;
    async fn send(stdin: &mut tokio::process::ChildStdin, message: Value) {
        stdin.write_all(format!("{message}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }
    async fn until_id(stdout: &mut tokio::io::BufReader<tokio::process::ChildStdout>, id: i64) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            let n = tokio::time::timeout(Duration::from_secs(300), stdout.read_line(&mut line)).await.unwrap().unwrap();
            assert!(n > 0, "the agent closed stdout");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) && message.get("method").is_none() {
                return message;
            }
        }
    }
    let mut child = env.command(&["acp"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    send(&mut stdin, json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": 1, "clientCapabilities": {} } })).await;
    until_id(&mut stdout, 1).await;
    send(&mut stdin, json!({ "jsonrpc": "2.0", "id": 2, "method": "session/new", "params": { "cwd": env.project(), "mcpServers": [] } })).await;
    let session = until_id(&mut stdout, 2).await["result"]["sessionId"].as_str().unwrap().to_string();
    env.mock.push(MockReply::long(deltas));
    let before = peak_memory(pid);
    let prompt = json!({ "jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": { "sessionId": session, "prompt": [{ "type": "text", "text": "a long story" }] } });
    send(&mut stdin, prompt).await;
    if !read {
        let last = format!("w{} ", deltas - 1);
        common::wait_until("the whole reply in the session file", Duration::from_secs(300), || {
            let holding = common::session_files(&env.session_dir()).iter().filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(&last))).count();
            holding >= nth
        })
        .await;
    }
    let grown_unread = peak_memory(pid).saturating_sub(before);
    // Read (again): the answer comes, after what was kept of the updates.
    let answer = until_id(&mut stdout, 3).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let grown = if read { peak_memory(pid).saturating_sub(before) } else { grown_unread };
    drop(stdin);
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), stdout.read_to_end(&mut rest)).await;
    let _ = child.wait().await;
    grown
}

// Issue 42, part 1: what five real clients found in the agent. Each test names its fault.

/// Position of the first message among `seen` that `is` says is the one.
fn position(seen: &[Value], is: impl Fn(&Value) -> bool) -> Option<usize> {
    seen.iter().position(is)
}

fn is_update(message: &Value, kind: &str) -> bool {
    message["method"] == "session/update" && message["params"]["update"]["sessionUpdate"] == kind
}

/// Fault 1: `session/request_permission` overtook its own `tool_call` (and the text before
/// it): clients showed "Approval required" for a call that did not exist yet. Every update
/// emitted before a question now goes out before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_comes_after_its_tool_call_and_everything_said_before_it() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &[], json!({})).await;
    let calls = [
        ("b1", "bash", json!({ "command": "echo one" })),
        ("w1", "write", json!({ "path": "a.txt", "content": "a\n" })),
        ("b2", "bash", json!({ "command": "echo two" })),
        ("w2", "write", json!({ "path": "b.txt", "content": "b\n" })),
        ("b3", "bash", json!({ "command": "echo three" })),
    ];
    for (id, tool, args) in calls {
        env.mock.push(MockReply::ToolCalls {
            calls: vec![handoff_mock::MockToolCall::new(tool, &args, 2).with_id(id)],
            text_before: vec!["Let me ".into(), format!("do {id}.")],
            chunk_delay_ms: 0,
            stop: "tool_calls".into(),
            interleave: false,
        });
        env.mock.push(MockReply::text("Done."));
        let start = agent.seen.len();
        let mut asked = 0;
        agent
            .prompt_with(&session, "go", &mut |_| {
                asked += 1;
                Some(choose("allow_once"))
            })
            .await;
        assert_eq!(asked, 1, "{id}");
        let seen = &agent.seen[start..];
        let question = position(seen, |m| m["method"] == "session/request_permission").unwrap();
        assert_eq!(seen[question]["params"]["toolCall"]["toolCallId"], id);
        let announced = position(seen, |m| is_update(m, "tool_call") && m["params"]["update"]["toolCallId"] == id)
            .unwrap_or_else(|| panic!("{id} never announced: {seen:#?}"));
        assert!(announced < question, "{id}: the question (message {question}) came before its tool_call (message {announced})");
        let said_before: Vec<Value> = seen[..question].iter().filter(|m| m["method"] == "session/update").map(|m| m["params"].clone()).collect();
        assert_eq!(chunks(&said_before, "agent_message_chunk"), format!("Let me do {id}."), "{id}: the text before the call");
    }
    agent.finish().await;
}

/// The escalation of a command the sandbox blocked ("run it outside?") asked about a call the
/// client was never told of (`{id}/unsandboxed`): it now asks about the call itself, which was
/// announced, and that call ends with the outside run's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_escalation_out_of_the_sandbox_asks_about_an_announced_call() {
    if !common::sandbox::enforced("the_escalation_out_of_the_sandbox_asks_about_an_announced_call") {
        return;
    }
    let env = Env::new().await;
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("out.txt");
    let (mut agent, session) = opened(&env, &["--yes"], json!({})).await;
    let args = json!({ "command": format!("echo out > {}", target.display()) });
    env.mock.push(MockReply::ToolCalls {
        calls: vec![handoff_mock::MockToolCall::new("bash", &args, 2).with_id("x1")],
        text_before: Vec::new(),
        chunk_delay_ms: 0,
        stop: "tool_calls".into(),
        interleave: false,
    });
    env.mock.push(MockReply::text("Done."));
    let mut questions = Vec::new();
    let (answer, _) = agent
        .prompt_with(&session, "write outside", &mut |request| {
            questions.push(request.clone());
            Some(choose("allow_once"))
        })
        .await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    assert_eq!(questions.len(), 1, "--yes asks nothing but the escalation: {questions:#?}");
    let asked = &questions[0]["params"]["toolCall"];
    assert!(asked["content"].to_string().contains("looks blocked by the sandbox"), "{asked}");
    let id = asked["toolCallId"].as_str().unwrap();
    let seen = &agent.seen;
    let question = position(seen, |m| m["method"] == "session/request_permission").unwrap();
    let announced = position(seen, |m| is_update(m, "tool_call") && m["params"]["update"]["toolCallId"] == id);
    assert!(announced.is_some_and(|at| at < question), "the question is about {id}, never announced before it: {seen:#?}");
    let ended = seen.iter().rev().find(|m| is_update(m, "tool_call_update") && m["params"]["update"]["toolCallId"] == id).unwrap();
    assert_eq!(ended["params"]["update"]["status"], "completed", "{ended}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "out\n");
    agent.finish().await;
}

/// Fault 2: a session made by `session/new` and never prompted could not be loaded or resumed
/// by another process (-32002): acpx's `sessions new` then `prompt` hit it every time. It stays
/// out of `session/list` (nothing was said in it) but its id opens, and goes on where it is
/// prompted first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_never_prompted_loads_and_resumes_in_another_process() {
    let env = Env::new().await;
    let (agent, never) = opened(&env, &[], json!({})).await;
    agent.finish().await;
    let (agent, session) = opened(&env, &[], json!({})).await;
    agent.finish().await;
    assert!(session_files(&env).is_empty(), "like pi, an unused session leaves no session file");

    let mut agent = env.spawn(&[]);
    agent.initialize(json!({})).await;
    assert!(listed(&mut agent, &env).await.is_empty(), "nothing was said: not listed");
    let (answer, updates) = agent.call("session/load", json!({ "sessionId": session, "cwd": env.project(), "mcpServers": [] })).await;
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(chunks(&updates, "user_message_chunk").is_empty() && chunks(&updates, "agent_message_chunk").is_empty(), "{updates:#?}");
    env.mock.push(MockReply::text("First answer."));
    let (answer, _) = agent.prompt(&session, "First question").await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    assert_eq!(listed(&mut agent, &env).await, [(session.clone(), "First question".to_string())]);
    agent.finish().await;

    let (agent, replayed) = loaded(&env, &session, "session/load").await;
    assert_eq!(replayed, "First question|First answer.", "the id goes on where it was first prompted");
    agent.finish().await;
    // The other one was kept while the record changed for this one.
    let (mut agent, replayed) = loaded(&env, &never, "session/resume").await;
    assert_eq!(replayed, "|");
    env.mock.push(MockReply::text("Resumed."));
    let (answer, _) = agent.prompt(&never, "Hello").await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    agent.finish().await;
    // An id nobody made stays unknown.
    let mut agent = env.spawn(&[]);
    agent.initialize(json!({})).await;
    let (answer, _) = agent.call("session/load", json!({ "sessionId": "0190aaaa-0000-7000-8000-000000000000", "cwd": env.project(), "mcpServers": [] })).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    agent.finish().await;
}

/// Fault 3: `session/load` replayed the model-facing wrapper of a handoff's document
/// (`<handoff-context>`, the facts' tags, "The above is a handoff document…") where the live
/// `/handoff` showed the document; a client that reports compactions got it as a plain
/// message. The replay shows what the live session showed, each way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_after_a_handoff_replays_the_document_as_the_live_handoff_showed_it() {
    for compaction in [false, true] {
        let env = Env::new().await;
        let capabilities = if compaction { json!({ "session": { "compaction": {} } }) } else { json!({}) };
        let (mut agent, session) = opened(&env, &["--yes"], capabilities.clone()).await;
        write_turn(&env.mock, "w1", "a.txt", "one\n", "Wrote it.");
        agent.prompt(&session, "write a").await;
        env.mock.push(MockReply::text(DOCUMENT));
        let (answer, live) = agent.prompt(&session, "/handoff").await;
        assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
        agent.finish().await;
        let wrapped = std::fs::read_to_string(session_files(&env).into_iter().find(|f| std::fs::read_to_string(f).unwrap().contains("\"customType\":\"handoff\"")).unwrap()).unwrap();
        assert!(wrapped.contains("<modified-files>"), "the model's context holds the facts: {wrapped}");

        let mut agent = env.spawn(&[]);
        agent.initialize(capabilities).await;
        let (answer, replayed) = agent.call("session/load", json!({ "sessionId": session, "cwd": env.project(), "mcpServers": [] })).await;
        assert!(answer.get("error").is_none(), "{answer}");
        let text = chunks(&replayed, "agent_message_chunk");
        for wrapper in ["<handoff-context>", "</handoff-context>", "<modified-files>", "The above is a handoff document"] {
            assert!(!text.contains(wrapper), "compaction {compaction}: {wrapper} replayed: {text}");
        }
        let summary = |updates: &[Value]| -> String {
            of_kind(updates, "compaction_summary_chunk").iter().filter_map(|c| c["content"]["text"].as_str()).collect()
        };
        if compaction {
            let statuses: Vec<&str> = of_kind(&replayed, "compaction_update").iter().map(|c| c["status"].as_str().unwrap()).collect();
            assert_eq!(statuses, ["in_progress", "completed"], "{replayed:#?}");
            assert_eq!(summary(&replayed), summary(&live), "the summary the live handoff showed");
            assert!(!text.contains("## Goal"), "the document is the summary, not a message: {text}");
        } else {
            assert!(of_kind(&replayed, "compaction_update").is_empty(), "{replayed:#?}");
            assert!(text.contains(DOCUMENT), "the document as the live handoff showed it: {text}");
        }
        agent.finish().await;
    }
}

/// Fault 4: titles lost what and where (codecompanion keeps a title's part before a colon:
/// "read: src/main.rs" was shown "Read: read", "bash: cargo test" "Execute: bash"). A title is
/// the tool's summary said as a client shows it, and reads and edits carry `locations`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_titles_say_what_and_where_and_reads_and_edits_have_locations() {
    let env = Env::new().await;
    let src = env.project().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let lines: String = (1..=60).map(|n| format!("line {n}\n")).collect();
    std::fs::write(src.join("main.rs"), &lines).unwrap();
    let (mut agent, session) = opened(&env, &["--sandbox", "off"], json!({})).await;
    env.mock.push(common::tool_calls_reply(vec![
        handoff_mock::MockToolCall::new("read", &json!({ "path": "src/main.rs", "offset": 10, "limit": 31 }), 1).with_id("r1"),
        handoff_mock::MockToolCall::new("bash", &json!({ "command": "echo tested" }), 1).with_id("b1"),
        handoff_mock::MockToolCall::new("edit", &json!({ "path": "src/main.rs", "edits": [{ "oldText": "line 42\n", "newText": "line forty-two\n" }] }), 1).with_id("e1"),
    ]));
    env.mock.push(MockReply::text("Done."));
    let mut asked = Vec::new();
    let (answer, updates) = agent
        .prompt_with(&session, "go", &mut |r| {
            asked.push(r["params"]["toolCall"].clone());
            Some(choose("allow_once"))
        })
        .await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    let announced = |id: &str| of_kind(&updates, "tool_call").into_iter().find(|u| u["toolCallId"] == id).cloned().unwrap_or_else(|| panic!("{updates:#?}"));
    let main = src.join("main.rs");
    let read = announced("r1");
    assert_eq!(read["title"], "Read src/main.rs:10-40", "{read}");
    assert_eq!(read["locations"], json!([{ "path": main, "line": 10 }]), "{read}");
    let bash = announced("b1");
    assert_eq!(bash["title"], "`echo tested`", "{bash}");
    let edit = announced("e1");
    assert_eq!(edit["title"], "Edit src/main.rs", "{edit}");
    assert_eq!(edit["locations"][0]["path"], json!(main), "{edit}");
    // Where the edit lands, once the file is read for its diff: the changed line.
    let located = of_kind(&updates, "tool_call_update").into_iter().find(|u| u["toolCallId"] == "e1" && u["locations"].is_array()).cloned();
    assert_eq!(located.map(|u| u["locations"].clone()), Some(json!([{ "path": main, "line": 42 }])), "{updates:#?}");
    // The questions show the same titles.
    for question in &asked {
        let id = question["toolCallId"].as_str().unwrap();
        assert_eq!(question["title"], announced(id)["title"], "{question}");
    }
    assert!(!asked.is_empty());
    agent.finish().await;
}

/// Fault 5: `usage_update` said `used: 0` after tool steps and cancels (clients reset their
/// meters). A reply that reports no usage sends none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_never_reported_as_zero_after_tool_steps_or_a_cancel() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &["--yes"], json!({})).await;
    env.mock.push(common::tool_call_reply("bash", json!({ "command": "echo hi" }), "b1"));
    env.mock.push(common::tool_call_reply("read", json!({ "path": "missing.txt" }), "r1"));
    env.mock.push(MockReply::text("Done."));
    let (_, mut updates) = agent.prompt(&session, "go").await;
    let words: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    env.mock.push(common::slow(&words, 0, 50));
    let id = agent.request("session/prompt", json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "talk" }] })).await;
    agent.until_update("agent_message_chunk").await;
    agent.notify("session/cancel", json!({ "sessionId": session })).await;
    let (answer, cancelled) = agent.until_answer(id, &mut |r| panic!("unexpected {r}")).await;
    assert_eq!(stop_reason(&answer), "cancelled");
    updates.extend(cancelled);
    let used: Vec<u64> = of_kind(&updates, "usage_update").iter().map(|u| u["used"].as_u64().unwrap()).collect();
    assert!(used.len() >= 3, "a usage after each reply that reported one: {used:?}");
    assert!(used.iter().all(|&n| n > 0), "{used:?}");
    agent.finish().await;
}

/// Fault 6: `session/list`'s `updatedAt` was the session file's creation (its header's time),
/// not its last activity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_list_dates_a_session_by_its_last_activity() {
    let env = Env::new().await;
    let (mut agent, session) = one_exchange(&env, json!({})).await;
    // Entries are stamped to the millisecond: the next ones are later than the header.
    tokio::time::sleep(Duration::from_millis(20)).await;
    env.mock.push(MockReply::text("Later answer."));
    agent.prompt(&session, "Later question").await;
    let list = agent.call("session/list", json!({ "cwd": env.project() })).await.0;
    let listed = &list["result"]["sessions"][0];
    let file = std::fs::read_to_string(&session_files(&env)[0]).unwrap();
    let lines: Vec<Value> = file.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (created, last) = (&lines[0]["timestamp"], &lines[lines.len() - 1]["timestamp"]);
    assert_ne!(created, last);
    assert_eq!(&listed["updatedAt"], last, "{list}");
    agent.finish().await;
}

/// `session/list` orders by the last activity, newest first (clients show the list as it
/// comes): a session made first and prompted last is listed first. Was ordered by creation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_list_puts_the_session_with_the_newest_activity_first() {
    let env = Env::new().await;
    let (mut agent, older) = one_exchange(&env, json!({})).await;
    // Headers are stamped to the millisecond: the second session is made later.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (newer, _) = agent.new_session(&env.project()).await;
    env.mock.push(MockReply::text("Second answer."));
    agent.prompt(&newer, "Second question").await;
    let ids = |listed: Vec<(String, String)>| listed.into_iter().map(|(id, _)| id).collect::<Vec<_>>();
    assert_eq!(ids(listed(&mut agent, &env).await), [newer.clone(), older.clone()], "the newest made and spoken in first");
    tokio::time::sleep(Duration::from_millis(20)).await;
    env.mock.push(MockReply::text("Back again."));
    agent.prompt(&older, "Back to the first").await;
    let list = agent.call("session/list", json!({ "cwd": env.project() })).await.0;
    let dates: Vec<&str> = list["result"]["sessions"].as_array().unwrap().iter().map(|s| s["updatedAt"].as_str().unwrap()).collect();
    assert!(dates[0] > dates[1], "{list}");
    assert_eq!(ids(listed(&mut agent, &env).await), [older, newer], "the session spoken in last comes first");
    agent.finish().await;
}

/// Fault 7: a client that sends the cancelled text again before a command
/// (`[{"text":"…"},{"text":"/model x"}]`) had the command sent to the model as text. A
/// command in the last text block runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_in_the_last_text_block_runs() {
    let env = Env::new().await;
    let (mut agent, session) = opened(&env, &[], json!({})).await;
    let said = |updates: &[Value]| chunks(updates, "agent_message_chunk");
    let prompt = |blocks: &[&str]| json!({ "sessionId": session, "prompt": blocks.iter().map(|t| json!({ "type": "text", "text": t })).collect::<Vec<_>>() });
    let id = agent.request("session/prompt", prompt(&["tell me about the parser", "/model"])).await;
    let (answer, updates) = agent.until_answer(id, &mut |r| panic!("unexpected {r}")).await;
    assert_eq!(stop_reason(&answer), "end_turn", "{answer}");
    assert!(said(&updates).contains("mock-model"), "{updates:#?}");
    let id = agent.request("session/prompt", prompt(&["tell me about the parser", "\\pin keep the tests green"])).await;
    let (_, updates) = agent.until_answer(id, &mut |r| panic!("unexpected {r}")).await;
    assert!(said(&updates).contains("1. keep the tests green"), "{updates:#?}");
    assert_eq!(env.mock.requests().len(), 0, "a command reached the model");
    // The control: a last block that only names a command is a prompt, sent whole.
    env.mock.push(MockReply::text("Answered."));
    let id = agent.request("session/prompt", prompt(&["tell me about the parser", "and what does /model do?"])).await;
    let (answer, _) = agent.until_answer(id, &mut |r| panic!("unexpected {r}")).await;
    assert_eq!(stop_reason(&answer), "end_turn");
    let sent = request_text(&env.mock, 0);
    assert!(sent.contains("tell me about the parser") && sent.contains("and what does /model do?"), "{sent}");
    agent.finish().await;
}
