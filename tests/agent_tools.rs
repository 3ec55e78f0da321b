//! The agent loop running tools, against the scriptable mock over both wire formats: real files
//! in temp folders, real processes. Consent (the default policy and a recording front end),
//! malformed arguments, tool errors, abort mid-command, steering between tools, the turn limit,
//! the tool environment without provider keys, the handoff request's tools, pi 0.73.1
//! resuming a session in which our agent ran tools, and the originals of the files the agent
//! changed (kept once per file and session, beside the session).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::pi::{pi_bin as pi, pi_env, pi_home};
use common::{process_alive, tool_calls_reply, without_cache_control};
use handoff_mock::{MockReply, MockServer, MockToolCall, RecordedRequest};
use handoff_nvim::core::agent::{AgentConfig, AgentEvent, AgentSession, Level, RunOptions, RunResult};
use handoff_nvim::core::controller::Controller;
use handoff_nvim::core::handoff::HandoffOutcome;
use handoff_nvim::core::message::StopReason;
use handoff_nvim::core::provider::Api;
use handoff_nvim::core::session::{ChangedFile, SessionManager};
use handoff_nvim::core::tools::consent::{rejected_text, ApprovalRequest, Consent, Decision, Policy};
use handoff_nvim::core::tools::ToolKind;
use serde_json::{json, Value};
use tokio::sync::broadcast;

const BOTH: [Api; 2] = [Api::Openai, Api::Anthropic];
/// Every test body runs under this.
const T: Duration = Duration::from_secs(60);

// The loop's texts for calls that were not run (crates/core/src/agent/tool_loop.rs).
const SKIPPED_FOR_STEERING: &str = "Skipped due to queued user message.";
const SKIPPED_FOR_ABORT: &str = "Skipped: the user stopped the run before this tool call.";
const CANCELLED: &str = "The user cancelled this tool call and stopped the turn.";

// ---------------------------------------------------------------------------------------------
// Set-up

/// A mock, a project folder with real files, and a session folder, for one API.
struct Env {
    api: Api,
    mock: MockServer,
    dir: tempfile::TempDir,
}

impl Env {
    async fn new(api: Api) -> Env {
        let mock = MockServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        Env { api, mock, dir }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.project().join(name)
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.file(name), text).unwrap();
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.file(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// An agent on a new session of the project (model and thinking level recorded first, as
    /// pi starts a session), with `edit` applied to the defaults.
    fn agent_with(&self, edit: impl FnOnce(&mut AgentConfig)) -> Arc<AgentSession> {
        let mut provider = common::config(&self.mock);
        provider.api = self.api;
        let mut config = AgentConfig::new(provider);
        edit(&mut config);
        let session = SessionManager::create(&self.dir.path().join("sessions"), &self.project(), None).unwrap();
        let agent = Arc::new(AgentSession::new(config, session));
        agent.record_settings(&mut agent.session()).unwrap();
        agent
    }

    /// The agent with everything allowed.
    fn agent_allow_all(&self) -> Arc<AgentSession> {
        self.agent_with(|c| c.policy = Policy::allow_all())
    }
}

fn call(id: &str, name: &str, args: Value) -> MockToolCall {
    MockToolCall::new(name, &args, 3).with_id(id)
}

fn bash(id: &str, command: &str) -> MockToolCall {
    call(id, "bash", json!({ "command": command }))
}

/// Runs `f` under the test timeout.
async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(T, f).await.unwrap_or_else(|_| panic!("{what}: timed out"))
}

/// Everything subscribers were sent so far.
fn drain(rx: &mut broadcast::Receiver<AgentEvent>) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            // The lifecycle's phase changes are the controller's, not the run's.
            Ok(AgentEvent::Lifecycle { .. }) => {}
            Ok(e) => out.push(e),
            Err(broadcast::error::TryRecvError::Lagged(n)) => panic!("lost {n} events"),
            Err(_) => return out,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What ended up on disk and on the wire

/// The `message` entries of the agent's session file, in file order (the file is read, not the
/// session in memory).
fn file_messages(agent: &AgentSession) -> Vec<Value> {
    let path = agent.session().path().to_path_buf();
    file_entries(&path).into_iter().filter(|e| e["type"] == "message").collect()
}

fn file_entries(path: &Path) -> Vec<Value> {
    common::entry_lines(path)
}

/// The `toolResult` messages of the session file.
fn file_results(agent: &AgentSession) -> Vec<Value> {
    file_messages(agent).into_iter().map(|e| e["message"].clone()).filter(|m| m["role"] == "toolResult").collect()
}

fn result_text(message: &Value) -> String {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// One tool result as a request carries it.
#[derive(Debug, Clone, PartialEq)]
struct WireResult {
    id: String,
    text: String,
    /// Anthropic says it; OpenAI has no such field.
    is_error: Option<bool>,
}

/// The tool results a request carries, in order.
fn wire_results(api: Api, request: &RecordedRequest) -> Vec<WireResult> {
    let messages = request.body["messages"].as_array().unwrap();
    match api {
        Api::Openai => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| WireResult {
                id: m["tool_call_id"].as_str().unwrap().into(),
                text: m["content"].as_str().unwrap().into(),
                is_error: None,
            })
            .collect(),
        Api::Anthropic => messages
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| WireResult {
                id: b["tool_use_id"].as_str().unwrap().into(),
                text: match &b["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => {
                        parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
                    }
                    _ => String::new(),
                },
                is_error: b["is_error"].as_bool(),
            })
            .collect(),
        Api::OpenaiResponses => unreachable!("tool loops over Responses: tests/responses.rs"),
    }
}

/// The ids and arguments of the tool calls in a request's assistant messages, in order.
fn wire_calls(api: Api, request: &RecordedRequest) -> Vec<(String, String, Value)> {
    let messages = request.body["messages"].as_array().unwrap();
    let assistants = messages.iter().filter(|m| m["role"] == "assistant");
    match api {
        Api::Openai => assistants
            .filter_map(|m| m["tool_calls"].as_array())
            .flatten()
            .map(|c| {
                let args: Value = serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                (c["id"].as_str().unwrap().into(), c["function"]["name"].as_str().unwrap().into(), args)
            })
            .collect(),
        Api::Anthropic => assistants
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| (b["id"].as_str().unwrap().into(), b["name"].as_str().unwrap().into(), b["input"].clone()))
            .collect(),
        Api::OpenaiResponses => unreachable!("tool loops over Responses: tests/responses.rs"),
    }
}

/// The text of the last user-written text in a request (OpenAI: the last `user` message;
/// Anthropic: the last text block of the last user message).
fn last_user_text(api: Api, request: &RecordedRequest) -> String {
    let messages = request.body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match (api, &last["content"]) {
        (_, Value::String(s)) => s.clone(),
        (_, Value::Array(parts)) => parts
            .iter()
            .rev()
            .find(|p| p["type"] == "text")
            .and_then(|p| p["text"].as_str())
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// A front end that answers from a script and records what it was asked

/// Answers requests from a script (then `default`), records each request, and runs a check
/// before answering (it sees the session file as the call waits).
struct Recorder {
    answers: Mutex<VecDeque<Decision>>,
    default: Decision,
    asked: Mutex<Vec<ApprovalRequest>>,
    on_ask: Box<dyn Fn(&ApprovalRequest) + Send + Sync>,
}

impl Recorder {
    fn new(answers: Vec<Decision>, default: Decision) -> Arc<Recorder> {
        Self::with_check(answers, default, |_| {})
    }

    fn with_check(
        answers: Vec<Decision>,
        default: Decision,
        on_ask: impl Fn(&ApprovalRequest) + Send + Sync + 'static,
    ) -> Arc<Recorder> {
        Arc::new(Recorder {
            answers: Mutex::new(answers.into()),
            default,
            asked: Mutex::new(Vec::new()),
            on_ask: Box::new(on_ask),
        })
    }

    fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }

    fn asked_ids(&self) -> Vec<String> {
        self.asked().into_iter().map(|r| r.id).collect()
    }
}

#[async_trait]
impl Consent for Recorder {
    async fn ask(&self, request: ApprovalRequest) -> Decision {
        (self.on_ask)(&request);
        self.asked.lock().unwrap().push(request);
        let next = self.answers.lock().unwrap().pop_front();
        next.unwrap_or_else(|| self.default.clone())
    }
}

// ---------------------------------------------------------------------------------------------
// 1. A turn of four tools

const A_TXT: &str = "hello\nworld\n";

type AskedWithResults = (String, Vec<String>);

/// The four calls of the scripted turn: read, bash, edit, write.
fn four_calls() -> Vec<MockToolCall> {
    vec![
        call("c1", "read", json!({ "path": "a.txt" })),
        bash("c2", "printf 'hi\\n' > b.txt && wc -l < a.txt"),
        call("c3", "edit", json!({ "path": "a.txt", "edits": [{ "oldText": "world", "newText": "there" }] })),
        call("c4", "write", json!({ "path": "sub/c.txt", "content": "new file\n" })),
    ]
}

/// Runs the four-tool turn and the final reply. The default policy asks for bash, edit and
/// write; the front end allows each, and checks, as each call waits, that the results of the
/// calls before it are on disk. With `hold_final`, the final reply is held back by the mock
/// for a while, and the session file is read while the second request waits for it.
async fn four_tool_turn(env: &Env, hold_final: bool) -> (Arc<AgentSession>, RunResult) {
    env.write("a.txt", A_TXT);
    env.mock.push(MockReply::ToolCalls {
        calls: four_calls(),
        text_before: vec!["I'll ".into(), "do it.".into()],
        chunk_delay_ms: 0,
        stop: "tool_calls".into(),
        interleave: true,
    });
    env.mock.push(MockReply::Text {
        chunks: vec!["All ".into(), "done.".into()],
        chunk_delay_ms: 0,
        first_delay_ms: if hold_final { 3000 } else { 0 },
        stop: "stop".into(),
        thinking: Vec::new(),
    });
    let agent = env.agent_with(|_| {});
    let path = agent.session().path().to_path_buf();
    // Per request: the call asked about, and the ids of the results on disk then.
    let seen: Arc<Mutex<Vec<AskedWithResults>>> = Arc::default();
    let consent = {
        let seen = seen.clone();
        Recorder::with_check(Vec::new(), Decision::Allow, move |request| {
            let on_disk: Vec<String> = file_entries(&path)
                .iter()
                .filter(|e| e["message"]["role"] == "toolResult")
                .map(|e| e["message"]["toolCallId"].as_str().unwrap().to_string())
                .collect();
            seen.lock().unwrap().push((request.id.clone(), on_disk));
        })
    };
    agent.set_consent(consent.clone());
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.prompt("Do four things", RunOptions::default()).await })
    };
    if hold_final {
        assert!(env.mock.wait_for_requests(2, T).await, "no second request");
        // The second request is waiting for its reply: every result is on disk already.
        let messages: Vec<Value> = file_messages(&agent).into_iter().map(|e| e["message"].clone()).collect();
        let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            ["user", "assistant", "toolResult", "toolResult", "toolResult", "toolResult"],
            "{:?}: the file while the second request waits",
            env.api
        );
    }
    let run = running.await.unwrap().unwrap();
    // The results of the calls before each one were on disk when it was asked about.
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("c2".to_string(), ids(&["c1"])),
            ("c3".to_string(), ids(&["c1", "c2"])),
            ("c4".to_string(), ids(&["c1", "c2", "c3"])),
        ],
        "{:?}",
        env.api
    );
    (agent, run)
}

#[tokio::test]
async fn a_turn_of_four_tools_changes_the_files_and_sends_every_result_in_order() {
    within("four tools", async {
        for api in BOTH {
            let env = Env::new(api).await;
            let (agent, run) = four_tool_turn(&env, true).await;

            // The files.
            assert_eq!(env.read("a.txt"), "hello\nthere\n", "{api:?}");
            assert_eq!(env.read("b.txt"), "hi\n", "{api:?}");
            assert_eq!(env.read("sub/c.txt"), "new file\n", "{api:?}");

            // The final reply ended the run: two requests, the last message says so.
            assert_eq!(env.mock.requests().len(), 2, "{api:?}");
            let last = run.last_assistant().unwrap();
            assert_eq!(last.text(), "All done.", "{api:?}");
            assert_eq!(last.stop_reason, Some(StopReason::Stop));
            assert!(!agent.is_busy());

            // The session file: the call, then each result right after it, then the reply.
            let entries = file_messages(&agent);
            let messages: Vec<&Value> = entries.iter().map(|e| &e["message"]).collect();
            let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
            assert_eq!(roles, ["user", "assistant", "toolResult", "toolResult", "toolResult", "toolResult", "assistant"]);
            assert_eq!(messages[1]["stopReason"], "toolUse");
            let call_ids: Vec<&str> = messages[1]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "toolCall")
                .map(|b| b["id"].as_str().unwrap())
                .collect();
            assert_eq!(call_ids, ["c1", "c2", "c3", "c4"]);
            for (k, (id, name)) in [("c1", "read"), ("c2", "bash"), ("c3", "edit"), ("c4", "write")].iter().enumerate() {
                let entry = &entries[2 + k];
                assert_eq!(entry["parentId"], entries[1 + k]["id"], "{api:?}: a linear chain");
                assert_eq!(entry["message"]["toolCallId"], *id);
                assert_eq!(entry["message"]["toolName"], *name);
                assert_eq!(entry["message"]["isError"], false, "{api:?}: {}", entry["message"]);
            }
            let results: Vec<String> = messages[2..6].iter().map(|m| result_text(m)).collect();
            assert!(results[0].contains("hello\nworld"), "{api:?}: {}", results[0]);
            assert_eq!(results[1].trim(), "2", "{api:?}");
            assert_eq!(results[2], "Successfully replaced 1 block(s) in a.txt.");
            assert_eq!(results[3], "Successfully wrote 9 bytes to sub/c.txt");
            assert!(messages[4]["details"]["diff"].as_str().unwrap().contains("there"), "edit details");

            // The second request carries the calls and every result, in order, in the API's shape.
            let second = &env.mock.requests()[1];
            let sent_calls = wire_calls(api, second);
            let expected_calls: Vec<(String, String, Value)> = four_calls()
                .into_iter()
                .map(|c| (c.id.unwrap(), c.name, serde_json::from_str(&c.arguments).unwrap()))
                .collect();
            assert_eq!(sent_calls, expected_calls, "{api:?}");
            let sent = wire_results(api, second);
            let expected: Vec<WireResult> = ["c1", "c2", "c3", "c4"]
                .iter()
                .zip(&results)
                .map(|(id, text)| WireResult {
                    id: id.to_string(),
                    text: text.clone(),
                    is_error: (api == Api::Anthropic).then_some(false),
                })
                .collect();
            assert_eq!(sent, expected, "{api:?}");
            let body = &second.body["messages"];
            match api {
                Api::Openai => {
                    let roles: Vec<&str> = body.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
                    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "tool", "tool"]);
                    let body = &Value::Array(body.as_array().unwrap()[1..].to_vec());
                    assert_eq!(body[1]["content"], "I'll do it.");
                }
                Api::Anthropic => {
                    // One user message holds all four results, after the assistant's tool_use blocks.
                    assert_eq!(body.as_array().unwrap().len(), 3);
                    assert_eq!(body[2]["role"], "user");
                    assert_eq!(body[2]["content"].as_array().unwrap().len(), 4);
                    assert_eq!(body[1]["content"][0], json!({ "type": "text", "text": "I'll do it." }));
                }
                Api::OpenaiResponses => unreachable!("tool loops over Responses: tests/responses.rs"),
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 2. Consent

#[tokio::test]
async fn consent_allow_always_reject_and_cancel_as_the_model_sees_them() {
    within("consent", async {
        for api in BOTH {
            let env = Env::new(api).await;
            env.write("a.txt", A_TXT);
            env.mock.push(tool_calls_reply(vec![
                call("c1", "read", json!({ "path": "a.txt" })),
                call("c2", "edit", json!({ "path": "a.txt", "edits": [{ "oldText": "world", "newText": "there" }] })),
                bash("c3", "echo one >> log.txt"),
                bash("c4", "echo one >> log.txt"),
                bash("c5", "echo two >> log.txt"),
                call("c6", "write", json!({ "path": "x.txt", "content": "x" })),
            ]));
            env.mock.push(tool_calls_reply(vec![
                bash("d1", "echo one >> log.txt"),
                call("d2", "write", json!({ "path": "y.txt", "content": "y" })),
                call("d3", "read", json!({ "path": "a.txt" })),
            ]));
            let agent = env.agent_with(|_| {});
            let consent = Recorder::new(
                vec![
                    Decision::Allow,
                    Decision::Always,
                    Decision::Reject { reason: Some("not now".into()) },
                    Decision::Reject { reason: None },
                    Decision::Cancel,
                ],
                Decision::Reject { reason: Some("asked once too often".into()) },
            );
            agent.set_consent(consent.clone());
            let run = agent.prompt("go", RunOptions::default()).await.unwrap();

            // read ran unasked; "always" for `echo one` covered the same command (c4, and d1 in
            // the next turn) but not `echo two`.
            assert_eq!(consent.asked_ids(), ["c2", "c3", "c5", "c6", "d2"], "{api:?}");
            let asked = consent.asked();
            let edit = &asked[0];
            assert_eq!((edit.tool.as_str(), edit.kind), ("edit", ToolKind::Edit));
            let preview = edit.preview.as_deref().unwrap();
            assert_eq!((preview.before.as_str(), preview.after.as_str()), (A_TXT, "hello\nthere\n"));
            assert_eq!(edit.summary, "a.txt", "what the tool says the call does");
            assert!(edit.path.as_deref().is_some_and(|p| p.ends_with("/a.txt")), "{:?}", edit.path);
            let diff = preview.diff.as_str();
            assert!(diff.contains("world") && diff.contains("there"), "{diff}");
            let bash_request = &asked[1];
            assert_eq!((bash_request.tool.as_str(), bash_request.kind), ("bash", ToolKind::Execute));
            assert_eq!(bash_request.args, json!({ "command": "echo one >> log.txt" }));
            assert_eq!((&bash_request.preview, &bash_request.path), (&None, &None));
            assert_eq!(bash_request.summary, "echo one >> log.txt");
            assert_eq!(asked[2].args["command"], "echo two >> log.txt");
            let write = &asked[3];
            let preview = write.preview.as_deref().unwrap();
            assert_eq!((preview.before.as_str(), preview.after.as_str()), ("", "x"));

            // What ran.
            assert_eq!(env.read("a.txt"), "hello\nthere\n");
            assert_eq!(env.read("log.txt"), "one\none\none\n", "{api:?}: c3, c4 and d1 ran; c5 did not");
            assert!(!env.file("x.txt").exists() && !env.file("y.txt").exists());

            // Cancel stopped the turn: no third request; every call has its result.
            assert_eq!(env.mock.requests().len(), 2, "{api:?}");
            assert_eq!(run.last_assistant().unwrap().stop_reason, Some(StopReason::ToolUse));
            let results = file_results(&agent);
            let got: Vec<(String, String, bool)> = results
                .iter()
                .map(|m| (m["toolCallId"].as_str().unwrap().into(), result_text(m), m["isError"].as_bool().unwrap()))
                .collect();
            let rejected_reason = rejected_text(Some("not now"));
            let rejected_plain = rejected_text(None);
            assert_eq!(
                got.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(),
                ["c1", "c2", "c3", "c4", "c5", "c6", "d1", "d2", "d3"],
                "{api:?}"
            );
            assert!(got[..4].iter().all(|g| !g.2), "{api:?}: {got:?}");
            assert_eq!((got[4].1.as_str(), got[4].2), (rejected_reason.as_str(), true), "{api:?}");
            assert_eq!((got[5].1.as_str(), got[5].2), (rejected_plain.as_str(), true), "{api:?}");
            assert_eq!(rejected_reason, "The user rejected this tool call. Reason: not now");
            assert_eq!((got[6].1.as_str(), got[6].2), ("(no output)", false), "{api:?}");
            assert_eq!((got[7].1.as_str(), got[7].2), (CANCELLED, true), "{api:?}");
            assert_eq!((got[8].1.as_str(), got[8].2), (SKIPPED_FOR_ABORT, true), "{api:?}: not run, answered");

            // The model saw the refusals in the second request.
            let sent = wire_results(api, &env.mock.requests()[1]);
            let ids: Vec<&str> = sent.iter().map(|r| r.id.as_str()).collect();
            assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5", "c6"]);
            assert_eq!(sent[4].text, rejected_reason);
            assert_eq!(sent[5].text, rejected_plain);
            if api == Api::Anthropic {
                let errors: Vec<Option<bool>> = sent.iter().map(|r| r.is_error).collect();
                assert_eq!(errors, [Some(false), Some(false), Some(false), Some(false), Some(true), Some(true)]);
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 3. Malformed arguments, 4. a failing tool

#[tokio::test]
async fn malformed_arguments_are_an_error_result_and_nothing_runs() {
    within("malformed", async {
        let cut = r##"{"path": "notes.md", "content": "# Title\nSome te"##;
        for api in BOTH {
            let env = Env::new(api).await;
            env.mock.push(MockReply::ToolCalls {
                calls: vec![MockToolCall::raw("write", cut, 4).with_id("m1"), bash("m2", "echo after")],
                text_before: Vec::new(),
                chunk_delay_ms: 0,
                stop: "tool_calls".into(),
                interleave: false,
            });
            env.mock.push(MockReply::text("Sorry, retrying later."));
            let agent = env.agent_with(|_| {});
            // Asked only about the well-formed call.
            let consent = Recorder::new(Vec::new(), Decision::Allow);
            agent.set_consent(consent.clone());
            let mut rx = agent.subscribe();
            let run = agent.prompt("write notes", RunOptions::default()).await.unwrap();

            assert!(!env.file("notes.md").exists(), "{api:?}: the cut-off write ran");
            assert_eq!(consent.asked_ids(), ["m2"], "{api:?}");
            let started: Vec<String> = drain(&mut rx)
                .into_iter()
                .filter_map(|e| match e {
                    AgentEvent::ToolExecutionStart { tool_call_id, .. } => Some(tool_call_id),
                    _ => None,
                })
                .collect();
            assert_eq!(started, ["m2"], "{api:?}: the malformed call never started");

            let results = file_results(&agent);
            assert_eq!(results.len(), 2);
            let text = result_text(&results[0]);
            assert_eq!(results[0]["isError"], true);
            assert!(text.contains("write") && text.contains("not valid JSON"), "{api:?}: {text}");
            assert!(text.contains(cut), "{api:?}: names what was received: {text}");
            assert_eq!(result_text(&results[1]).trim(), "after", "{api:?}: the next call ran");
            assert_eq!(run.last_assistant().unwrap().text(), "Sorry, retrying later.");
            let sent = wire_results(api, &env.mock.requests()[1]);
            assert_eq!(sent[0].text, text, "{api:?}: the model reads the problem");
            if api == Api::Anthropic {
                assert_eq!(sent[0].is_error, Some(true));
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_failing_tool_is_an_error_result_and_the_loop_goes_on() {
    within("tool error", async {
        for api in BOTH {
            let env = Env::new(api).await;
            env.mock.push(tool_calls_reply(vec![call("r1", "read", json!({ "path": "missing.txt" })), bash("r2", "echo still here")]));
            env.mock.push(MockReply::text("The file is missing."));
            let agent = env.agent_allow_all();
            let run = agent.prompt("read it", RunOptions::default()).await.unwrap();

            let results = file_results(&agent);
            assert_eq!(results.len(), 2, "{api:?}");
            assert_eq!(results[0]["isError"], true);
            let text = result_text(&results[0]);
            assert!(text.contains("missing.txt") && text.contains("No such file"), "{api:?}: {text}");
            assert_eq!(results[1]["isError"], false, "{api:?}: the call after the failure ran");
            assert_eq!(result_text(&results[1]).trim(), "still here");
            // The model got the error and answered.
            assert_eq!(env.mock.requests().len(), 2);
            let sent = wire_results(api, &env.mock.requests()[1]);
            assert_eq!(sent[0].text, text);
            if api == Api::Anthropic {
                assert_eq!((sent[0].is_error, sent[1].is_error), (Some(true), Some(false)));
            }
            assert_eq!(run.last_assistant().unwrap().text(), "The file is missing.");
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 5. Abort while a command runs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_mid_command_kills_it_and_its_child_and_skips_the_rest() {
    within("abort", async {
        for api in BOTH {
            let env = Env::new(api).await;
            // The shell writes its pid and its background child's, then waits for the child.
            // `sleep 600.0642` marks the child: the pids the shell prints are its pid namespace's
            // in the sandbox, so the processes are found by what they run.
            let script = "echo $$ > shell.tmp && mv shell.tmp shell.pid; sleep 600.0642 & echo $! > child.tmp && mv child.tmp child.pid; wait";
            env.mock.push(tool_calls_reply(vec![bash("b1", script), call("b2", "write", json!({ "path": "after.txt", "content": "x" }))]));
            let agent = env.agent_allow_all();
            let mut rx = agent.subscribe();
            let run = {
                let agent = agent.clone();
                tokio::spawn(async move { agent.prompt("run it", RunOptions::default()).await })
            };
            common::wait_until("the command's pids", T, || env.file("child.pid").exists() && env.file("shell.pid").exists()).await;
            let running = common::pids_with("600.0642");
            // The sleep, the shell (its script holds the marker), and in the sandbox its helper
            // and pid 1.
            assert!(running.len() >= 2, "{api:?}: the command runs: {running:?}");

            agent.abort();
            // The command runs ten minutes by itself: ending inside the hang guard is the abort.
            let result = tokio::time::timeout(T / 2, run)
                .await
                .unwrap_or_else(|_| panic!("{api:?}: the run did not end within {:?} of the abort", T / 2))
                .unwrap()
                .unwrap();
            common::wait_until("the command's processes to end", T / 2, || running.iter().all(|p| !process_alive(*p))).await;

            assert_eq!(env.mock.requests().len(), 1, "{api:?}: no request after the abort");
            assert!(!env.file("after.txt").exists(), "{api:?}: the call after the abort ran");
            let results = file_results(&agent);
            assert_eq!(results.len(), 2, "{api:?}");
            assert_eq!(results[0]["isError"], true);
            assert!(result_text(&results[0]).contains("Command aborted"), "{api:?}: {}", results[0]);
            assert_eq!((result_text(&results[1]), &results[1]["isError"]), (SKIPPED_FOR_ABORT.to_string(), &json!(true)));
            assert_eq!(result.messages.len(), 4, "{api:?}: prompt, reply, two results");
            let events = drain(&mut rx);
            assert!(events.iter().any(|e| matches!(e, AgentEvent::AgentEnd { .. })));
            assert!(
                !events.iter().any(|e| matches!(e, AgentEvent::ToolExecutionStart { tool_call_id, .. } if tool_call_id == "b2")),
                "{api:?}: the skipped call started"
            );
            assert!(!agent.is_busy());
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 6. Steering between tools

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_while_a_tool_runs_skips_the_rest_and_goes_after_the_results() {
    within("steering", async {
        for api in BOTH {
            let env = Env::new(api).await;
            // The first command runs until the test lets it go (after steering).
            env.mock.push(tool_calls_reply(vec![
                bash("s1", "while [ ! -e go ]; do sleep 0.01; done; echo first"),
                bash("s2", "touch second.ran"),
            ]));
            env.mock.push(MockReply::text("New plan then."));
            let agent = env.agent_allow_all();
            let mut rx = agent.subscribe();
            let run = {
                let agent = agent.clone();
                tokio::spawn(async move { agent.prompt("two commands", RunOptions::default()).await })
            };
            loop {
                match rx.recv().await.unwrap() {
                    AgentEvent::ToolExecutionStart { tool_call_id, .. } if tool_call_id == "s1" => break,
                    AgentEvent::ToolExecutionStart { tool_call_id, .. } => panic!("{tool_call_id} started first"),
                    _ => {}
                }
            }
            agent.steer("change of plan");
            env.write("go", "");
            let run = run.await.unwrap().unwrap();

            assert!(!env.file("second.ran").exists(), "{api:?}: the second command ran");
            let results = file_results(&agent);
            assert_eq!(result_text(&results[0]).trim(), "first");
            assert_eq!(results[0]["isError"], false);
            assert_eq!(result_text(&results[1]), SKIPPED_FOR_STEERING, "{api:?}");
            assert_eq!(results[1]["isError"], true);
            // The session: the results, then the steering message, then the reply.
            let roles: Vec<String> = file_messages(&agent)
                .iter()
                .map(|e| e["message"]["role"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(roles, ["user", "assistant", "toolResult", "toolResult", "user", "assistant"], "{api:?}");
            assert_eq!(run.last_assistant().unwrap().text(), "New plan then.");

            // The next request: the results, then the steering message.
            assert_eq!(env.mock.requests().len(), 2);
            let second = &env.mock.requests()[1];
            let sent = wire_results(api, second);
            assert_eq!(sent.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["s1", "s2"]);
            assert_eq!(sent[1].text, SKIPPED_FOR_STEERING);
            assert_eq!(last_user_text(api, second), "change of plan");
            let messages = second.body["messages"].as_array().unwrap();
            match api {
                Api::Openai => {
                    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
                    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "user"]);
                }
                Api::Anthropic => {
                    // One user message: both results, then the text.
                    let last = messages.last().unwrap();
                    let kinds: Vec<&str> =
                        last["content"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect();
                    assert_eq!(kinds, ["tool_result", "tool_result", "text"], "{last}");
                }
                Api::OpenaiResponses => unreachable!("tool loops over Responses: tests/responses.rs"),
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 7. The turn limit

#[tokio::test]
async fn the_turn_limit_stops_a_model_that_keeps_calling_tools() {
    within("turn limit", async {
        for api in BOTH {
            let env = Env::new(api).await;
            // Every reply asks for another command (the mock makes up a new id each time).
            env.mock.set_default(tool_calls_reply(vec![MockToolCall::new("bash", &json!({ "command": "true" }), 1)]));
            let agent = env.agent_with(|c| {
                c.policy = Policy::allow_all();
                c.max_turns = 2;
            });
            let mut rx = agent.subscribe();
            agent.prompt("loop forever", RunOptions::default()).await.unwrap();

            assert_eq!(env.mock.requests().len(), 2, "{api:?}");
            let events = drain(&mut rx);
            let notices: Vec<String> = events
                .iter()
                .filter_map(|e| match e {
                    AgentEvent::Notice(n) => Some(n),
                    _ => None,
                })
                .map(|n| {
                    assert_eq!(n.level, Level::Warn);
                    n.message.clone()
                })
                .collect();
            assert_eq!(notices.len(), 1, "{api:?}: {notices:?}");
            assert!(notices[0].contains("turn limit") && notices[0].contains('2'), "{}", notices[0]);
            assert!(matches!(events.last(), Some(AgentEvent::AgentEnd { .. })), "{api:?}: the run ended");
            let roles: Vec<String> = file_messages(&agent)
                .iter()
                .map(|e| e["message"]["role"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(roles, ["user", "assistant", "toolResult", "assistant", "toolResult"], "{api:?}");
            assert!(!agent.is_busy());
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 8. The provider's key never reaches a command

/// Set (to 1) in the process `bash_never_sees_the_provider_keys` starts.
const ENV_CHILD: &str = "HANDOFF_AGENT_TOOLS_ENV_CHILD";
const KEY_VAR: &str = "HANDOFF_AGENT_TOOLS_PROVIDER_KEY_5d1c";
const CONTROL_VAR: &str = "HANDOFF_AGENT_TOOLS_CONTROL_5d1c";
const SECRETS: [(&str, &str); 3] = [
    (KEY_VAR, "secret-provider-key-5d1c"),
    ("OPENAI_API_KEY", "sk-openai-secret-5d1c"),
    ("ANTHROPIC_API_KEY", "sk-ant-secret-5d1c"),
];

/// The keys must be in the agent's own environment for this to mean anything, and changing the
/// environment of this multi-threaded test process is not safe: this test runs
/// `bash_env_of_a_process_with_keys` in a process of its own, started with the keys set.
#[test]
fn bash_never_sees_the_provider_keys() {
    if std::env::var_os(ENV_CHILD).is_some() {
        return;
    }
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command.args(["--exact", "bash_env_of_a_process_with_keys", "--nocapture", "--test-threads=1"]);
    command.env(ENV_CHILD, "1").env(CONTROL_VAR, "visible");
    for (name, value) in SECRETS {
        command.env(name, value);
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("1 passed"), "the test did not run:\n{stdout}");
}

#[tokio::test]
async fn bash_env_of_a_process_with_keys() {
    if std::env::var(ENV_CHILD).as_deref() != Ok("1") {
        eprintln!("bash_env_of_a_process_with_keys runs in the process bash_never_sees_the_provider_keys starts");
        return;
    }
    within("env", async {
        for (name, value) in SECRETS {
            assert_eq!(std::env::var(name).as_deref(), Ok(value), "the agent's process has {name}");
        }
        for api in BOTH {
            let env = Env::new(api).await;
            env.mock.push(tool_calls_reply(vec![bash("e1", "env")]));
            env.mock.push(MockReply::text("Seen."));
            let agent = env.agent_with(|c| {
                c.policy = Policy::allow_all();
                c.provider.api_key_env = Some(KEY_VAR.into());
            });
            agent.prompt("show the environment", RunOptions::default()).await.unwrap();
            // The provider did use the key.
            let first = &env.mock.requests()[0];
            assert!(
                first.headers.values().any(|v| v.contains(SECRETS[0].1)),
                "{api:?}: the key was not sent: {:?}",
                first.headers
            );
            let results = file_results(&agent);
            let output = result_text(&results[0]);
            assert_eq!(results[0]["isError"], false, "{output}");
            assert!(output.contains(&format!("{CONTROL_VAR}=visible")), "{api:?}: env printed the environment: {output}");
            for (name, value) in SECRETS {
                assert!(!output.contains(name) && !output.contains(value), "{api:?}: bash saw {name}:\n{output}");
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 9. The handoff request

#[tokio::test]
async fn the_handoff_request_carries_the_conversation_tools_with_tool_choice_none() {
    within("handoff", async {
        for api in BOTH {
            let env = Env::new(api).await;
            let (agent, _) = four_tool_turn(&env, false).await;
            env.mock.push(MockReply::text(common::DOCUMENT));
            let outcome = Controller::new(agent.clone(), Default::default()).handoff(Default::default()).await;
            assert!(matches!(outcome, HandoffOutcome::Done { .. }), "{api:?}: {outcome:?}");

            let requests = env.mock.requests();
            assert_eq!(requests.len(), 3);
            let (normal, handoff) = (&requests[1].body, &requests[2].body);
            assert!(normal["tools"].as_array().is_some_and(|t| !t.is_empty()));
            assert_eq!(handoff["tools"], normal["tools"], "{api:?}: the same definitions");
            match api {
                Api::Openai => {
                    assert_eq!(normal["tool_choice"], "auto");
                    assert_eq!(handoff["tool_choice"], "none");
                }
                Api::Anthropic => {
                    assert_eq!(normal["tool_choice"], json!({ "type": "auto" }));
                    assert_eq!(handoff["tool_choice"], json!({ "type": "none" }));
                }
                Api::OpenaiResponses => unreachable!("tool loops over Responses: tests/responses.rs"),
            }
            // The conversation with its calls and results goes first, unchanged (a cache hit).
            // (Anthropic's cache marker sits on each request's last user block: compared without it.)
            let (normal_messages, handoff_messages) =
                (without_cache_control(&normal["messages"]), without_cache_control(&handoff["messages"]));
            let (normal_messages, handoff_messages) = (normal_messages.as_array().unwrap(), handoff_messages.as_array().unwrap());
            assert_eq!(&handoff_messages[..normal_messages.len()], &normal_messages[..], "{api:?}");
            assert_eq!(handoff["system"], normal["system"]);
            assert_eq!(handoff["model"], normal["model"]);
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 10. pi 0.73.1 resumes a session in which our agent ran tools

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_resumes_a_session_in_which_our_agent_ran_tools() {
    let Some(pi) = pi() else { return };
    within("pi", async {
        for api in BOTH {
            let env = Env::new(api).await;
            let (agent, _) = four_tool_turn(&env, false).await;
            agent.session().flush().unwrap();
            let file = agent.session().path().to_path_buf();
            let ours_bytes = std::fs::read(&file).unwrap();
            let ours = env.mock.requests()[1].body.clone();

            // pi's provider config for the mock (the Anthropic SDK appends /v1/messages itself).
            let root = env.dir.path();
            let (pi_api, base) = match api {
                Api::Openai => ("openai-completions", env.mock.openai_base_url()),
                Api::Anthropic => ("anthropic-messages", format!("http://{}", env.mock.addr())),
                Api::OpenaiResponses => unreachable!("tool loops over Responses: tests/responses.rs"),
            };
            pi_home(root, pi_api, &base);
            let pi_command = |mode: &str| {
                let mut c = tokio::process::Command::new(&pi);
                pi_env(&mut c, root)
                    .current_dir(env.project())
                    .arg("--session")
                    .arg(&file)
                    .args(["--mode", mode, "--provider", "mock", "--model", "mock-model"])
                    .args(["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes"])
                    .arg("--offline")
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .kill_on_drop(true);
                c
            };

            // pi's session statistics (its footer and `get_session_stats`) read every assistant
            // message of our file, usage and cost included.
            let mut rpc = pi_command("rpc");
            rpc.stdin(std::process::Stdio::piped());
            let mut child = rpc.spawn().unwrap();
            {
                use tokio::io::AsyncWriteExt;
                let mut stdin = child.stdin.take().unwrap();
                stdin.write_all(b"{\"id\":\"s\",\"type\":\"get_session_stats\"}\n").await.unwrap();
            }
            let out = child.wait_with_output().await.unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let response: Value = stdout
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["id"] == "s")
                .unwrap_or_else(|| panic!("{api:?}: no answer from pi --mode rpc: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
            assert_eq!(response["success"], true, "{api:?}: pi cannot compute the stats of our session: {response}");
            assert_eq!((&response["data"]["toolCalls"], &response["data"]["toolResults"]), (&json!(4), &json!(4)), "{response}");

            env.mock.push(MockReply::text("Pi continues here."));
            let out = pi_command("json").args(["-p", "next"]).stdin(std::process::Stdio::null()).output().await.unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{api:?}: pi failed:\nstdout: {stdout}\nstderr: {stderr}");
            for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
                serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{api:?}: pi printed {line:?}: {e}"));
            }
            assert!(stdout.contains("Pi continues here."), "{api:?}: {stdout}");

            // pi sent our calls and results as the API requires: as we sent them.
            let requests = env.mock.requests();
            assert_eq!(requests.len(), 3, "{api:?}");
            let sent = &requests[2];
            assert_eq!(wire_calls(api, sent), wire_calls(api, &requests[1]), "{api:?}");
            assert_eq!(wire_results(api, sent), wire_results(api, &requests[1]), "{api:?}");
            let (pi_messages, our_messages) = (sent.body["messages"].as_array().unwrap(), ours["messages"].as_array().unwrap());
            match api {
                Api::Openai => {
                    // Both send a system prompt first; pi's user prompt in the array form.
                    assert_eq!(pi_messages[0]["role"], "system");
                    assert_eq!(our_messages[0]["role"], "system");
                    assert_eq!(pi_messages[1]["content"][0]["text"], our_messages[1]["content"]);
                    assert_eq!(&pi_messages[2..7], &our_messages[2..], "{api:?}: assistant and tool messages");
                    let roles: Vec<&str> = pi_messages[7..].iter().map(|m| m["role"].as_str().unwrap()).collect();
                    assert_eq!(roles, ["assistant", "user"]);
                }
                Api::Anthropic => {
                    let pi_messages = without_cache_control(&Value::Array(pi_messages.clone()));
                    let our_messages = without_cache_control(&Value::Array(our_messages.to_vec()));
                    assert_eq!(&pi_messages.as_array().unwrap()[..3], &our_messages.as_array().unwrap()[..], "{api:?}");
                    assert_eq!(pi_messages.as_array().unwrap().len(), 5);
                }
                Api::OpenaiResponses => unreachable!("tool loops over Responses: tests/responses.rs"),
            }
            assert_eq!(last_user_text(api, sent), "next");

            // pi appended to our file without touching our lines, and we read its lines back.
            let after = std::fs::read(&file).unwrap();
            assert!(after.starts_with(&ours_bytes), "{api:?}: pi rewrote our lines");
            let session = SessionManager::open(&file, &root.join("sessions")).unwrap();
            assert!(session.warnings().is_empty(), "{:?}", session.warnings());
            let last = session.build_session_context().messages.last().unwrap().text();
            assert_eq!(last, "Pi continues here.");
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 11. The originals of the files the agent changed

/// The id of the entry holding the result of tool call `call_id`.
fn result_entry_id(agent: &AgentSession, call_id: &str) -> String {
    file_messages(agent)
        .into_iter()
        .find(|e| e["message"]["toolCallId"] == call_id)
        .unwrap_or_else(|| panic!("no result of {call_id}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn edit(id: &str, path: &str, old: &str, new: &str) -> MockToolCall {
    call(id, "edit", json!({ "path": path, "edits": [{ "oldText": old, "newText": new }] }))
}

fn names(files: &[ChangedFile]) -> Vec<String> {
    files.iter().map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned()).collect()
}

#[tokio::test]
async fn the_original_of_each_changed_file_is_kept_once_per_session_and_survives_a_reopen() {
    within("originals", async {
        let env = Env::new(Api::Openai).await;
        env.write("a.txt", "one\ntwo\n");
        env.write("b.txt", "alpha\r\nbeta\r\n");
        env.mock.push(tool_calls_reply(vec![
            edit("e1", "a.txt", "one", "ONE"),
            edit("e2", "b.txt", "beta", "BETA"),
            edit("e3", "a.txt", "two", "TWO"),
            call("w1", "write", json!({ "path": "sub/new.md", "content": "# new\n" })),
            // Failed calls and commands change nothing the session keeps.
            edit("x1", "a.txt", "absent", "x"),
            edit("x2", "missing.txt", "a", "b"),
            bash("b1", "echo hi > c.txt"),
        ]));
        env.mock.push(MockReply::text("done"));
        let agent = env.agent_allow_all();
        agent.prompt("change things", RunOptions::default()).await.unwrap();
        assert_eq!(env.read("a.txt"), "ONE\nTWO\n");
        assert_eq!(env.read("c.txt"), "hi\n");

        // The most recently changed first; each file once; its bytes before the first change.
        let originals = agent.originals();
        let files = originals.list().unwrap();
        assert_eq!(names(&files), ["new.md", "a.txt", "b.txt"]);
        let (new, a, b) = (&files[0], &files[1], &files[2]);
        assert_eq!(a.path, env.file("a.txt"));
        assert_eq!(new.path, env.project().join("sub/new.md"));
        assert_eq!(originals.original_bytes(a).unwrap(), b"one\ntwo\n");
        assert_eq!(originals.original_bytes(b).unwrap(), b"alpha\r\nbeta\r\n", "the bytes as they were (CRLF)");
        assert!(!a.created && !b.created);
        assert!(new.created && new.original.is_none(), "a created file has no original: {new:?}");
        assert_eq!((a.changes, b.changes, new.changes), (2, 1, 1));
        assert_eq!(a.first_change_entry_id, result_entry_id(&agent, "e1"));
        assert_eq!(a.last_change_entry_id, result_entry_id(&agent, "e3"));
        assert_eq!(new.first_change_entry_id, result_entry_id(&agent, "w1"));

        // On disk beside the session: `<session without .jsonl>/originals/`, private files.
        let session_file = agent.session().path().to_path_buf();
        let dir = session_file.with_extension("").join("originals");
        assert_eq!(originals.dir(), dir);
        let mut on_disk: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        on_disk.sort();
        assert_eq!(on_disk, ["0001-a.txt", "0002-b.txt", "index.json"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for name in &on_disk {
                let mode = std::fs::metadata(dir.join(name)).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{name}");
            }
        }
        let index: Value = serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
        assert_eq!(index["files"].as_array().unwrap().len(), 3, "{index}");

        // Reopened (a restart, a resume): the same set; a further change keeps the original.
        agent.session().flush().unwrap();
        drop(agent);
        let reopened = SessionManager::open(&session_file, &env.dir.path().join("sessions")).unwrap();
        let agent = Arc::new(AgentSession::new(
            AgentConfig { policy: Policy::allow_all(), ..AgentConfig::new(common::config(&env.mock)) },
            reopened,
        ));
        assert_eq!(agent.originals().list().unwrap(), files);
        env.mock.push(tool_calls_reply(vec![edit("e4", "b.txt", "alpha", "ALPHA")]));
        env.mock.push(MockReply::text("done again"));
        agent.prompt("once more", RunOptions::default()).await.unwrap();
        let files = agent.originals().list().unwrap();
        assert_eq!(names(&files), ["b.txt", "new.md", "a.txt"]);
        assert_eq!(agent.originals().original_bytes(&files[0]).unwrap(), b"alpha\r\nbeta\r\n");
        assert_eq!(files[0].changes, 2);
        assert_eq!(files[0].last_change_entry_id, result_entry_id(&agent, "e4"));

        // A handoff's new session starts a set of its own: its originals are the files as the
        // previous session left them.
        env.mock.push(MockReply::text(common::DOCUMENT));
        let outcome = Controller::new(agent.clone(), Default::default()).handoff(Default::default()).await;
        assert!(matches!(outcome, HandoffOutcome::Done { .. }), "{outcome:?}");
        assert_ne!(agent.session().path(), session_file);
        assert!(agent.originals().list().unwrap().is_empty());
        env.mock.push(tool_calls_reply(vec![edit("e5", "a.txt", "ONE", "uno")]));
        env.mock.push(MockReply::text("ok"));
        agent.prompt("in the new session", RunOptions::default()).await.unwrap();
        let files = agent.originals().list().unwrap();
        assert_eq!(names(&files), ["a.txt"]);
        assert_eq!(agent.originals().original_bytes(&files[0]).unwrap(), b"ONE\nTWO\n");
        // The session handed off keeps its own.
        let old = handoff_nvim::core::session::Originals::of_session(&session_file).list().unwrap();
        assert_eq!(names(&old), ["b.txt", "new.md", "a.txt"]);
    })
    .await;
}
