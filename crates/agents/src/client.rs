//! One external agent's session, driven by us: `initialize` (we offer fs and terminals),
//! `session/new` or `session/load`, `session/prompt` with its `session/update`s shown and
//! recorded, `session/cancel`; and the agent's requests served while it works.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::connection::{Connection, FromAgent, Peer};
use super::offers::Handle;
use super::originals::EditOriginals;
use handoff_core::sync::lock;
use super::record::{self, AgentEntry, Recorder};
use super::terminal::{self, Terminals};
use super::{AgentError, AgentSpec};
use handoff_acp_wire::{code, method};
use handoff_core::message::Message;
use handoff_core::session::{Before, SessionManager};
use handoff_core::tools::consent::{self, ApprovalRequest, Consent, Grants, Policy, Verdict};
use handoff_core::tools::{Activity, ConsentKey, EnvPolicy, FileAccess, Preview, ToolKind};

/// What the agent said of itself at `initialize`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AgentInfo {
    /// Its own name and version (`agentInfo`), when it gives them.
    pub name: Option<String>,
    pub version: Option<String>,
    /// The protocol version it speaks.
    pub protocol: u64,
    /// It can load a session it made before (`session/load`).
    pub load_session: bool,
    /// The ways it signs in (`authMethods`), as it gives them.
    #[serde(skip)]
    pub auth_methods: Vec<Value>,
}

/// Where a front end shows what the agent does while a prompt runs.
pub trait Shown: Send + Sync {
    /// A piece of the agent's reply, in its message's block `index`.
    fn text(&self, index: usize, delta: &str);
    /// A tool call started or changed status (its title, its status).
    fn tool(&self, _title: &str, _status: &str) {}
    /// A tool call runs (past its approval), by our tool's `name` for it and the `args`
    /// recorded: a front end shows it as it shows ours.
    fn tool_start(&self, _id: &str, _name: &str, _args: &Value) {}
    /// A tool call ended: `result` is the `toolResult` that will be recorded for it.
    fn tool_end(&self, _id: &str, _name: &str, _args: &Value, _result: &Message) {}
    /// A message of the turn starts (a reply, a tool's result).
    fn message_start(&self, _message: &Message) {}
    /// A message of the turn is complete and recorded.
    fn message_end(&self, _message: &Message) {}
    /// A call's change was recorded as pending hunks (the review, as our own tools' are).
    fn hunks(&self, _call: &handoff_core::session::review::ReviewedCall) {}
}

/// Our session file as the turn reaches it: locked for each entry only (the editor's host
/// reads it meanwhile).
pub type SessionAccess<'s> = dyn Fn() -> std::sync::MutexGuard<'s, SessionManager> + Send + Sync + 's;

/// How we serve the agent's requests: the user's consent and policy, files, commands.
pub struct Services {
    pub cwd: PathBuf,
    pub policy: Policy,
    pub grants: Grants,
    pub consent: Arc<dyn Consent>,
    pub files: Arc<dyn FileAccess>,
    pub env: EnvPolicy,
    pub sandbox: handoff_core::sandbox::SandboxSettings,
    pub terminals: Terminals,
    /// What the agent's edits replace, kept for the session's changes.
    pub edit_originals: EditOriginals,
}

/// How a prompt ended: the agent's stop reason and its last reply's text.
#[derive(Clone, Debug)]
pub struct Turn {
    pub stop: String,
    pub text: String,
    /// Every message recorded, in order.
    pub messages: Vec<Message>,
}

/// A running agent with one session open on it.
pub struct ExternalSession {
    conn: Connection,
    pub spec: AgentSpec,
    pub info: AgentInfo,
    /// The agent's id of the session.
    pub session_id: String,
    services: Arc<Services>,
}

/// Starts the agent and says hello: what it is and speaks.
async fn start(spec: &AgentSpec, services: &Arc<Services>) -> Result<(Connection, AgentInfo), AgentError> {
    let mut conn = Connection::spawn(spec, &services.cwd)?;
    let params = json!({
        "protocolVersion": 1,
        "clientCapabilities": { "fs": { "readTextFile": true, "writeTextFile": true }, "terminal": true },
        "clientInfo": { "name": "handoff-nvim", "version": env!("CARGO_PKG_VERSION") },
    });
    let answer = exchange(&mut conn, services, method::INITIALIZE, params, &CancellationToken::new(), &mut |_| {}).await?;
    let info = AgentInfo {
        name: answer["agentInfo"]["name"].as_str().map(str::to_string),
        version: answer["agentInfo"]["version"].as_str().map(str::to_string),
        protocol: answer["protocolVersion"].as_u64().unwrap_or_default(),
        load_session: answer["agentCapabilities"]["loadSession"].as_bool().unwrap_or(false),
        auth_methods: answer["authMethods"].as_array().cloned().unwrap_or_default(),
    };
    Ok((conn, info))
}

/// What `:checkhealth` and `handoff-nvim agents` show of an agent: started, asked, ended.
pub async fn probe(spec: &AgentSpec, cwd: &Path) -> Result<AgentInfo, AgentError> {
    let services = Arc::new(Services::refusing(cwd));
    let (conn, info) = start(spec, &services).await?;
    conn.close().await;
    Ok(info)
}

impl Services {
    /// Serves nothing that needs the user (`probe`).
    fn refusing(cwd: &Path) -> Services {
        Services {
            cwd: cwd.to_path_buf(),
            policy: Policy::default(),
            grants: Grants::default(),
            consent: Arc::new(consent::Always(consent::Decision::Reject { reason: Some("nobody to ask".into()) })),
            files: Arc::new(handoff_core::tools::DiskFileAccess),
            env: EnvPolicy::new(&Default::default()),
            sandbox: Default::default(),
            terminals: Terminals::default(),
            edit_originals: EditOriginals::default(),
        }
    }
}

impl ExternalSession {
    /// Starts `spec` and opens a session on it: `resume`'s when the agent can load it, else a
    /// new one (`resumed` in the answer says which).
    pub async fn open(spec: AgentSpec, services: Arc<Services>, resume: Option<&str>) -> Result<(ExternalSession, bool), AgentError> {
        let (mut conn, info) = start(&spec, &services).await?;
        let cwd = services.cwd.to_string_lossy().into_owned();
        if let Some(id) = resume.filter(|_| info.load_session) {
            let params = json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] });
            // The replayed conversation is ours already: it is not shown or recorded again.
            let mut replayed = false;
            match exchange(&mut conn, &services, method::SESSION_LOAD, params, &CancellationToken::new(), &mut |_| replayed = true).await {
                Ok(answer) => {
                    lock(&conn.offers).take_answer(&answer);
                    if replayed {
                        let_the_replay_end(&mut conn, &services).await;
                    }
                    return Ok((ExternalSession { conn, spec, info, session_id: id.to_string(), services }, true));
                }
                Err(e) => tracing::warn!(agent = %spec.name, "session/load of {id} failed, a new session starts: {e}"),
            }
        }
        let params = json!({ "cwd": cwd, "mcpServers": [] });
        let never = CancellationToken::new();
        let answer = match exchange(&mut conn, &services, method::SESSION_NEW, params.clone(), &never, &mut |_| {}).await {
            Err(AgentError::Answered { code: AUTH_REQUIRED, .. }) => {
                authenticate(&mut conn, &services, &spec, &info).await?;
                exchange(&mut conn, &services, method::SESSION_NEW, params, &never, &mut |_| {}).await?
            }
            answer => answer?,
        };
        let session_id = answer["sessionId"].as_str().ok_or_else(|| AgentError::Protocol("session/new answered no sessionId".into()))?.to_string();
        lock(&conn.offers).take_answer(&answer);
        Ok((ExternalSession { conn, spec, info, session_id, services }, false))
    }

    /// What the agent offers this session (commands, modes, models), to read and set while
    /// a prompt runs too.
    pub fn handle(&self) -> Handle {
        Handle { peer: self.conn.peer.clone(), session_id: self.session_id.clone(), offers: self.conn.offers.clone() }
    }

    /// The entry that records this session in ours.
    pub fn entry(&self) -> AgentEntry {
        AgentEntry { agent: self.spec.clone(), session_id: Some(self.session_id.clone()) }
    }

    /// Records in `session` that it runs on this agent session (when it does not say so yet).
    pub fn record_in(&self, session: &mut SessionManager) -> Result<(), AgentError> {
        if record::agent_of(session).as_ref() != Some(&self.entry()) {
            record::record_agent(session, &self.entry())?;
        }
        Ok(())
    }

    /// One prompt: `blocks` sent, `user` (what the user typed, as recorded) written first, the
    /// updates shown and recorded as they come; `cancel` sends `session/cancel` (the agent then
    /// ends the turn as cancelled).
    pub async fn prompt(
        &mut self,
        session: &SessionAccess<'_>,
        blocks: Vec<Value>,
        user: Option<Message>,
        cancel: &CancellationToken,
        shown: &dyn Shown,
    ) -> Result<Turn, AgentError> {
        {
            let mut session = session();
            if let Some(user) = &user {
                session.append_message(user)?;
            }
            self.record_in(&mut session)?;
        }
        let mut recorder = Recorder::new(&self.spec.name, shown, &self.services.edit_originals);
        let mut failed = None;
        let session_id = self.session_id.clone();
        let params = json!({ "sessionId": session_id, "prompt": blocks });
        let answer = {
            let mut each = |update: &Value| {
                if let Err(e) = recorder.update(&mut session(), update) {
                    failed.get_or_insert(e);
                }
            };
            exchange(&mut self.conn, &self.services, method::SESSION_PROMPT, params, cancel, &mut each).await
        };
        let stop = match &answer {
            Ok(answer) => answer["stopReason"].as_str().unwrap_or("end_turn").to_string(),
            Err(_) => "refusal".to_string(),
        };
        let (text, messages) = {
            let mut session = session();
            let finished = recorder.finish(&mut session, &stop)?;
            session.flush()?;
            finished
        };
        if let Some(e) = failed {
            return Err(e.into());
        }
        answer?;
        Ok(Turn { stop, text, messages })
    }

    /// Ends the agent (its process group with it).
    pub async fn close(self) {
        self.conn.close().await;
    }
}

/// ACP's "authentication required" error.
const AUTH_REQUIRED: i64 = -32000;

/// The agent asked to sign in: each way it offers that takes a key from its environment
/// (`type: env_var`) is tried in turn, the first it accepts kept. A login of another kind (a
/// browser's) is the user's to do with the agent's own CLI: the error names them all.
async fn authenticate(conn: &mut Connection, services: &Arc<Services>, spec: &AgentSpec, info: &AgentInfo) -> Result<(), AgentError> {
    for way in info.auth_methods.iter().filter(|m| m["type"] == "env_var") {
        let Some(id) = way["id"].as_str() else { continue };
        let params = json!({ "methodId": id });
        match exchange(conn, services, method::AUTHENTICATE, params, &CancellationToken::new(), &mut |_| {}).await {
            Ok(_) => {
                tracing::info!(agent = %spec.name, "signed in with {id}");
                return Ok(());
            }
            Err(e) => tracing::info!(agent = %spec.name, "{id} did not sign in: {e}"),
        }
    }
    let ways: Vec<String> = info
        .auth_methods
        .iter()
        .map(|m| {
            let name = m["name"].as_str().or(m["id"].as_str()).unwrap_or("?").to_string();
            let vars: Vec<&str> = m["vars"].as_array().into_iter().flatten().filter_map(|v| v["name"].as_str()).collect();
            if vars.is_empty() { name } else { format!("{name} ({})", vars.join(", ")) }
        })
        .collect();
    Err(AgentError::SignIn { name: spec.name.clone(), ways: ways.join("; ") })
}

/// After a `session/load` whose history came as updates: the rest of that history, which an
/// agent may send after its answer (Gemini CLI 0.61 answers while it still streams it, where
/// ACP has the history first), read and dropped until the agent has been quiet for
/// [`REPLAY_QUIET`] (at most [`REPLAY_LONGEST`]), so that none of it is taken for the next
/// prompt's reply. An agent that sends it all first costs one quiet spell.
async fn let_the_replay_end(conn: &mut Connection, services: &Arc<Services>) {
    let deadline = tokio::time::Instant::now() + REPLAY_LONGEST;
    loop {
        let quiet = tokio::time::sleep(REPLAY_QUIET);
        tokio::select! {
            incoming = conn.incoming.recv() => match incoming {
                Some(message) => handle(&conn.peer, services, message, &mut |_| {}),
                None => return,
            },
            () = quiet => return,
            () = tokio::time::sleep_until(deadline) => return,
        }
    }
}

/// How long an agent that replayed a loaded session must be quiet before the replay counts as over.
const REPLAY_QUIET: std::time::Duration = std::time::Duration::from_millis(150);
/// The longest a replay after `session/load`'s answer is waited out.
const REPLAY_LONGEST: std::time::Duration = std::time::Duration::from_secs(5);

/// Sends request `method` and waits for its answer, meanwhile serving what the agent sends:
/// its `session/update`s to `each` (in order), its requests each in a task of its own (a
/// permission waiting for the user holds nothing else). `cancel` sends `session/cancel` once.
async fn exchange(
    conn: &mut Connection,
    services: &Arc<Services>,
    name: &str,
    params: Value,
    cancel: &CancellationToken,
    each: &mut (dyn FnMut(&Value) + Send),
) -> Result<Value, AgentError> {
    let session_id = params.get("sessionId").cloned();
    let peer = conn.peer.clone();
    let answer = peer.request(name, params);
    tokio::pin!(answer);
    let mut cancelled = false;
    let result = loop {
        tokio::select! {
            biased;
            incoming = conn.incoming.recv() => match incoming {
                Some(message) => handle(&conn.peer, services, message, each),
                None => break answer.await,
            },
            result = &mut answer => break result,
            () = cancel.cancelled(), if !cancelled => {
                cancelled = true;
                if let Some(id) = &session_id {
                    let _ = conn.peer.notify(method::SESSION_CANCEL, json!({ "sessionId": id }));
                }
            }
        }
    };
    // Updates sent before the answer were read before it: they are in the queue.
    while let Ok(message) = conn.incoming.try_recv() {
        handle(&conn.peer, services, message, each);
    }
    result
}

fn handle(peer: &Peer, services: &Arc<Services>, message: FromAgent, each: &mut (dyn FnMut(&Value) + Send)) {
    match message {
        FromAgent::Notification { method, params } if method == method::SESSION_UPDATE => each(&params["update"]),
        FromAgent::Notification { method, .. } => tracing::debug!("a notification we do not use: {method}"),
        FromAgent::Request { id, method, params } => {
            let (peer, services) = (peer.clone(), services.clone());
            handoff_core::task::spawn("agent request", async move {
                let result = serve(&services, &method, &params).await;
                peer.respond(id, result);
            });
        }
    }
}

/// Answers one request of the agent (what an agent may ask of us: permissions, files,
/// terminals), as the loop of a prompt does.
pub async fn serve(services: &Services, name: &str, params: &Value) -> Result<Value, (i32, String)> {
    match name {
        method::REQUEST_PERMISSION => Ok(permission(services, params).await),
        method::READ_TEXT_FILE => read_text_file(services, params).await,
        method::WRITE_TEXT_FILE => {
            let path = absolute(services, params)?;
            let content = params["content"].as_str().ok_or((code::INVALID_PARAMS, "fs/write_text_file needs content".into()))?;
            guard_files(services, &path, true).await?;
            match services.files.read(&path).await {
                Ok(bytes) => services.edit_originals.take(None, &path, Before::Content(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => services.edit_originals.take(None, &path, Before::Missing),
                Err(e) => tracing::warn!(path = %path.display(), "cannot read what the agent's write replaces: {e}"),
            }
            tracing::info!(path = %path.display(), "the agent writes through fs/write_text_file");
            services.files.write(&path, content.as_bytes()).await.map_err(|e| (code::INTERNAL_ERROR, format!("{}: {e}", path.display())))?;
            Ok(Value::Null)
        }
        terminal::method::CREATE | terminal::method::OUTPUT | terminal::method::WAIT_FOR_EXIT | terminal::method::KILL | terminal::method::RELEASE => {
            services.terminals.serve(services, name, params).await
        }
        other => Err((code::METHOD_NOT_FOUND, format!("method not found: {other}"))),
    }
}

fn absolute(services: &Services, params: &Value) -> Result<PathBuf, (i32, String)> {
    let path = params["path"].as_str().ok_or((code::INVALID_PARAMS, "a path is needed".to_string()))?;
    Ok(services.cwd.join(path))
}

/// What an agent reaches through our `fs/*`, checked as our own tools' calls are (with the
/// sandbox on, `sandbox::protected`: a credential to read; outside the project, code git or
/// another program runs, a credential or a hard-linked file to write): such a request is asked
/// about whatever the policy ([`consent::MustAsk::Protected`]) and refused without a yes. The
/// agent may have asked through its own permission first, or not (an adapter in an "accept
/// edits" mode): what it reaches through us is ours to guard.
async fn guard_files(services: &Services, path: &Path, write: bool) -> Result<(), (i32, String)> {
    use handoff_core::sandbox::protected;
    if !services.sandbox.is_on() {
        return Ok(());
    }
    let reached = match write {
        true => protected::check_write(path, &services.cwd),
        false => protected::check_read(path),
    };
    let Some(reached) = reached else { return Ok(()) };
    let (tool, kind, activity) = match write {
        true => ("write", ToolKind::Edit, Activity::Edit),
        false => ("read", ToolKind::ReadOnly, Activity::Read),
    };
    let shown = path.display().to_string();
    let request = async {
        ApprovalRequest {
            id: format!("fs-{tool}-{shown}"),
            tool: tool.to_string(),
            kind,
            activity,
            args: json!({ "path": shown }),
            summary: shown.clone(),
            path: Some(shown.clone()),
            preview: None,
            origin: None,
            sandbox: None,
            confined_by: None,
            unsandboxed: None,
            holes: None,
            protected: Some(reached.describe()),
        }
    };
    let verdict = consent::decide_asking(&services.policy, &services.grants, services.consent.as_ref(), request, tool, kind, None, consent::MustAsk::Protected).await;
    match verdict {
        Verdict::Run | Verdict::RunReviewed(_) => Ok(()),
        Verdict::Refuse(text) => Err((code::INTERNAL_ERROR, format!("{}: {text} ({})", path.display(), reached.describe()))),
        Verdict::Cancel => Err((code::INTERNAL_ERROR, format!("{}: cancelled by the user", path.display()))),
    }
}

/// `fs/read_text_file`: the file's text, from `line` (1-based) for `limit` lines; a missing
/// file reads as empty (an agent writes a new file after reading it: Gemini's write fails on
/// "not found").
async fn read_text_file(services: &Services, params: &Value) -> Result<Value, (i32, String)> {
    let path = absolute(services, params)?;
    guard_files(services, &path, false).await?;
    let text = match services.files.read(&path).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err((code::INTERNAL_ERROR, format!("{}: {e}", path.display()))),
    };
    let from = params["line"].as_u64().map_or(0, |l| l.saturating_sub(1) as usize);
    let content = match (from, params["limit"].as_u64()) {
        (0, None) => text,
        (from, limit) => {
            let lines = text.split_inclusive('\n').skip(from);
            match limit {
                Some(limit) => lines.take(limit as usize).collect(),
                None => lines.collect(),
            }
        }
    };
    Ok(json!({ "content": content }))
}

/// `session/request_permission` through our consent: the user's policy and "always" answers
/// first, the user when they say to ask. We pick the agent's "allow once" or "reject once"
/// (our own grants remember an "always"), or answer `cancelled`.
async fn permission(services: &Services, params: &Value) -> Value {
    let call = &params["toolCall"];
    // Asked before it runs: what an edit will replace is still on disk.
    services.edit_originals.take_call(call, &services.cwd);
    let raw = call.get("rawInput").cloned().unwrap_or(Value::Null);
    let acp_kind = call["kind"].as_str().unwrap_or("other");
    let record::OurTool { name: tool, kind, activity } = record::our_tool(acp_kind, &raw);
    let tool = tool.as_str();
    let title = call["title"].as_str().unwrap_or(acp_kind).to_string();
    let diff = diff_preview(call);
    let path = match &diff {
        Some((path, _)) => Some(path.clone()),
        None => raw.get("path").or_else(|| call["locations"].get(0).and_then(|l| l.get("path"))).and_then(Value::as_str).map(str::to_string),
    };
    let preview = diff.map(|(_, preview)| preview);
    let after = preview.as_ref().map(|p| p.after.clone());
    let summary = raw.get("command").and_then(Value::as_str).map_or_else(|| title.clone(), str::to_string);
    let key = Some(ConsentKey::Exact(format!("{title}\n{raw}")));
    let request = async {
        ApprovalRequest {
            id: call["toolCallId"].as_str().unwrap_or_default().to_string(),
            tool: tool.to_string(),
            kind,
            activity,
            args: raw.clone(),
            summary,
            path,
            preview: preview.map(Box::new),
            origin: None,
            sandbox: None,
            confined_by: None,
            unsandboxed: None,
            holes: None,
            protected: None,
        }
    };
    // The agent runs the call itself, outside our sandbox: never counted as sandboxed.
    let verdict = consent::decide(&services.policy, &services.grants, services.consent.as_ref(), request, tool, kind, key, false).await;
    let options = params["options"].as_array().cloned().unwrap_or_default();
    let pick = |kinds: &[&str]| {
        kinds.iter().find_map(|k| options.iter().find(|o| o["kind"] == *k)).and_then(|o| o["optionId"].as_str()).map(str::to_string)
    };
    let chosen = match verdict {
        Verdict::Run => pick(&["allow_once", "allow_always"]),
        Verdict::Refuse(reason) => {
            tracing::info!("refused the agent's {title}: {reason}");
            pick(&["reject_once", "reject_always"])
        }
        // The user reviewed the change hunk by hunk and kept all of it.
        Verdict::RunReviewed(kept) if after.as_deref() == Some(kept.as_str()) => pick(&["allow_once", "allow_always"]),
        // The user kept only part of the change: the agent would write all of it, so it is
        // refused (its write through our `fs/write_text_file` is reviewed as ours are).
        Verdict::RunReviewed(_) => {
            tracing::info!("refused the agent's {title}: the user kept only part of it");
            pick(&["reject_once", "reject_always"])
        }
        Verdict::Cancel => None,
    };
    match chosen {
        Some(option) => json!({ "outcome": { "outcome": "selected", "optionId": option } }),
        None => json!({ "outcome": { "outcome": "cancelled" } }),
    }
}

/// The change an agent's call carries (ACP's `diff` content: `{type: "diff", path, oldText,
/// newText}`, `oldText` absent for a new file), previewed as our own edits are: its path and
/// the [`Preview`] our approvals show.
fn diff_preview(call: &Value) -> Option<(String, Preview)> {
    let diff = call["content"].as_array()?.iter().find(|c| c["type"] == "diff")?;
    let path = diff["path"].as_str()?.to_string();
    let after = diff["newText"].as_str()?.to_string();
    let before = diff["oldText"].as_str().unwrap_or_default().to_string();
    Some((path, Preview::of(before, after)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::tools::consent::{Decision, Rule};
    use std::sync::Mutex;

    /// The user: says "always" to every request, and keeps the tool each named.
    #[derive(Default)]
    struct SaysAlways(Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl Consent for SaysAlways {
        async fn ask(&self, request: ApprovalRequest) -> Decision {
            lock(&self.0).push(request.tool);
            Decision::Always
        }
    }

    /// The user: answers each request with `answer`, and keeps the requests.
    struct Answers(Decision, Mutex<Vec<ApprovalRequest>>);

    #[async_trait::async_trait]
    impl Consent for Answers {
        async fn ask(&self, request: ApprovalRequest) -> Decision {
            lock(&self.1).push(request);
            self.0.clone()
        }
    }

    /// An agent's edit that carries ACP's `diff` content is asked about with the preview our
    /// own edits show (both texts and their diff), at the diff's path; a new file's (no
    /// `oldText`) from nothing. The whole change kept in a hunk-by-hunk review allows it, part
    /// of it refuses it.
    #[tokio::test]
    async fn an_agents_diff_is_asked_about_with_our_edit_preview() {
        let cwd = tempfile::tempdir().unwrap();
        let path = cwd.path().join("notes.txt").display().to_string();
        let edit = |old: Value| {
            json!({
                "sessionId": "s1",
                "toolCall": { "toolCallId": "e1", "title": "Edit notes.txt", "kind": "edit", "status": "pending",
                    "rawInput": { "path": "notes.txt", "old_string": "hello", "new_string": "hello\nthere" },
                    "content": [{ "type": "diff", "path": path, "oldText": old, "newText": "hello\nthere\n" }] },
                "options": [{ "optionId": "yes", "name": "Yes", "kind": "allow_once" }, { "optionId": "no", "name": "No", "kind": "reject_once" }],
            })
        };
        for (old, before) in [(json!("hello\n"), "hello\n"), (Value::Null, "")] {
            for (kept, chosen) in [("hello\nthere\n", "yes"), ("hello\n", "no")] {
                let consent = Arc::new(Answers(Decision::AllowReviewed { text: kept.into() }, Mutex::default()));
                let mut services = Services::refusing(cwd.path());
                services.consent = consent.clone();
                let answer = permission(&services, &edit(old.clone())).await;
                assert_eq!(answer["outcome"]["optionId"], chosen, "kept {kept:?}");
                let asked = lock(&consent.1).pop().unwrap();
                assert_eq!(asked.path.as_deref(), Some(path.as_str()));
                let want = Preview::of(before.into(), "hello\nthere\n".into());
                assert_eq!(asked.preview.as_deref(), Some(&want));
                assert!(want.diff.lines().any(|l| l.starts_with('+') && l.ends_with("there")), "{}", want.diff);
            }
        }
    }

    struct NotShown;
    impl Shown for NotShown {
        fn text(&self, _index: usize, _delta: &str) {}
    }

    /// The tool our record names for an agent's call of ACP kind `kind` with input `raw`.
    fn recorded(kind: &str, raw: &Value) -> String {
        let dir = tempfile::tempdir().unwrap();
        let mut session = SessionManager::create(dir.path(), dir.path(), None).unwrap();
        let originals = EditOriginals::default();
        let mut recorder = record::Recorder::new("agent", &NotShown, &originals);
        let call = json!({ "sessionUpdate": "tool_call", "toolCallId": "c1", "title": "a call", "kind": kind, "status": "pending", "rawInput": raw });
        recorder.update(&mut session, &call).unwrap();
        let (_, written) = recorder.finish(&mut session, "end_turn").unwrap();
        let blocks = written[0].content.blocks();
        blocks.iter().find(|b| b.kind == "toolCall").and_then(|b| b.extra_str("name")).unwrap().to_string()
    }

    /// For every ACP kind, the permission the agent asks is asked as the tool the record names:
    /// a rule of the user's policy for that name governs it, and its "always" is remembered
    /// under it (the ledger, the facts and the approval say one name).
    #[tokio::test]
    async fn the_permission_asked_and_the_call_recorded_name_one_tool() {
        let cwd = tempfile::tempdir().unwrap();
        let kinds = ["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"];
        let inputs = [json!({ "path": "a.txt" }), json!({ "path": "a.txt", "content": "whole\n" })];
        for kind in kinds {
            for raw in &inputs {
                let tool = recorded(kind, raw);
                let consent = Arc::new(SaysAlways::default());
                let mut services = Services::refusing(cwd.path());
                // Asked whatever the level: the rule under the recorded name.
                services.policy.tools.insert(tool.clone(), Rule::Ask);
                services.consent = consent.clone();
                let params = json!({
                    "sessionId": "s1",
                    "toolCall": { "toolCallId": "c1", "title": "a call", "kind": kind, "status": "pending", "rawInput": raw },
                    "options": [{ "optionId": "yes", "name": "Yes", "kind": "allow_once" }, { "optionId": "no", "name": "No", "kind": "reject_once" }],
                });
                let answer = permission(&services, &params).await;
                assert_eq!(lock(&consent.0).as_slice(), std::slice::from_ref(&tool), "{kind} {raw}: asked as the recorded tool");
                assert_eq!(answer["outcome"]["optionId"], "yes", "{kind} {raw}");
                let key = ConsentKey::Exact(format!("a call\n{raw}"));
                assert!(services.grants.covers(&tool, Some(&key)), "{kind} {raw}: the \"always\" is kept under {tool}");
            }
        }
    }
}
