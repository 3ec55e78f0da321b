//! The agent's `terminal/*` requests, served by our bash tool: the command asks through our
//! consent as a bash call of ours does (the policy, the session's "always"), runs in our
//! sandbox when it is on, with our environment policy (no secret variable, no provider key),
//! and its output and exit status are kept until the agent releases the terminal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::client::Services;
use handoff_core::sync::lock;
use handoff_core::tools::consent::{self, ApprovalRequest, Verdict};
use handoff_core::tools::{Activity, ConsentKey, ToolContext, ToolKind, ToolName, ToolOutput, ToolRegistry};

/// The terminal methods, by their wire names.
pub mod method {
    pub const CREATE: &str = "terminal/create";
    pub const OUTPUT: &str = "terminal/output";
    pub const WAIT_FOR_EXIT: &str = "terminal/wait_for_exit";
    pub const KILL: &str = "terminal/kill";
    pub const RELEASE: &str = "terminal/release";
}

/// A command started for the agent.
struct Run {
    /// Its result once it ended.
    ended: watch::Receiver<Option<ToolOutput>>,
    cancel: CancellationToken,
}

/// The agent's terminals, by id.
#[derive(Default)]
pub struct Terminals {
    runs: Mutex<HashMap<String, Arc<Run>>>,
    next: AtomicU64,
}

/// A JSON-RPC error to answer with.
pub type RpcFailure = (i32, String);

fn invalid(message: impl Into<String>) -> RpcFailure {
    (-32602, message.into())
}

/// `command` and `args` as one line for `sh` (each argument single-quoted).
fn command_line(params: &Value) -> Result<String, RpcFailure> {
    let command = params["command"].as_str().ok_or_else(|| invalid("terminal/create needs a command"))?;
    let mut line = command.to_string();
    for arg in params["args"].as_array().into_iter().flatten() {
        let arg = arg.as_str().ok_or_else(|| invalid("terminal/create: every argument is a string"))?;
        line.push(' ');
        line.push_str(&single_quoted(arg));
    }
    Ok(line)
}

/// `s` as one word for `sh`: single-quoted, a `'` inside as `'\''`.
fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The exit code our bash result says (`Command exited with code N`; none: 0 unless it failed).
fn exit_code(output: &ToolOutput) -> Option<i64> {
    let message = output.clone().into_message("terminal", ToolName::Bash.as_str());
    match handoff_core::tools::call_fact(ToolName::Bash.as_str(), &json!({}), &message) {
        Some(handoff_core::tools::CallFact::Command { exit_code, .. }) => exit_code.map(i64::from),
        _ => None,
    }
}

impl Terminals {
    fn get(&self, params: &Value) -> Result<Arc<Run>, RpcFailure> {
        let id = params["terminalId"].as_str().unwrap_or_default();
        lock(&self.runs).get(id).cloned().ok_or_else(|| (-32002, format!("no terminal {id:?}")))
    }

    /// Serves one `terminal/*` request.
    pub async fn serve(&self, services: &Services, method: &str, params: &Value) -> Result<Value, RpcFailure> {
        match method {
            method::CREATE => self.create(services, params).await,
            method::OUTPUT => {
                let run = self.get(params)?;
                let ended = run.ended.borrow().clone();
                Ok(match ended {
                    Some(output) => json!({
                        "output": output_text(&output),
                        "truncated": false,
                        "exitStatus": { "exitCode": exit_code(&output), "signal": Value::Null },
                    }),
                    None => json!({ "output": "", "truncated": false }),
                })
            }
            method::WAIT_FOR_EXIT => {
                let run = self.get(params)?;
                let mut ended = run.ended.clone();
                let output = match ended.wait_for(Option::is_some).await {
                    Ok(output) => output.clone(),
                    Err(_) => None,
                };
                Ok(json!({ "exitCode": output.as_ref().and_then(exit_code), "signal": Value::Null }))
            }
            method::KILL => {
                self.get(params)?.cancel.cancel();
                Ok(Value::Null)
            }
            method::RELEASE => {
                let id = params["terminalId"].as_str().unwrap_or_default();
                if let Some(run) = lock(&self.runs).remove(id) {
                    run.cancel.cancel();
                }
                Ok(Value::Null)
            }
            _ => Err((-32601, format!("method not found: {method}"))),
        }
    }

    async fn create(&self, services: &Services, params: &Value) -> Result<Value, RpcFailure> {
        let line = command_line(params)?;
        let cwd = folder_in_project(services, params)?;
        let args = json!({ "command": line });
        let confined = match services.sandbox.is_on() {
            true => Some(handoff_core::sandbox::confine(services.sandbox, None)),
            false => None,
        };
        let sandboxed = matches!(confined, Some(Ok(_)));
        let request = async {
            ApprovalRequest {
                id: format!("terminal-{}", self.next.load(Ordering::Relaxed)),
                tool: ToolName::Bash.as_str().into(),
                kind: ToolKind::Execute,
                activity: Activity::Execute,
                args: args.clone(),
                summary: line.clone(),
                path: None,
                preview: None,
                origin: None,
                sandbox: sandboxed.then(|| services.sandbox.describe()),
                confined_by: match &confined {
                    Some(Ok(s)) => Some(s.helper.describe()),
                    _ => None,
                },
                unsandboxed: match &confined {
                    Some(Err(why)) => Some(why.clone()),
                    _ => None,
                },
                holes: None,
                protected: None,
            }
        };
        let key = Some(ConsentKey::Exact(line.clone()));
        let tool = ToolName::Bash.as_str();
        // A command the sandbox should confine and cannot is always asked about.
        let verdict = match &confined {
            Some(Err(_)) => consent::decide_asking(&services.policy, &services.grants, services.consent.as_ref(), request, tool, ToolKind::Execute, key, consent::MustAsk::Unconfinable).await,
            _ => consent::decide(&services.policy, &services.grants, services.consent.as_ref(), request, tool, ToolKind::Execute, key, sandboxed).await,
        };
        match verdict {
            // A command has no text to review: a reviewed answer is a yes.
            Verdict::Run | Verdict::RunReviewed(_) => {}
            Verdict::Refuse(text) => return Err((-32000, text)),
            Verdict::Cancel => return Err((-32000, "cancelled by the user".into())),
        }
        let mut extra = Vec::new();
        for var in params["env"].as_array().into_iter().flatten() {
            if let (Some(name), Some(value)) = (var["name"].as_str(), var["value"].as_str()) {
                extra.push((name.into(), value.into()));
            }
        }
        let cancel = CancellationToken::new();
        let mut ctx = ToolContext::new(cwd).with_cancel(cancel.clone()).with_env(services.env.clone());
        if let Some(Ok(sandboxed)) = confined {
            ctx = ctx.with_sandbox(Some(sandboxed));
        }
        let (done, ended) = watch::channel(None);
        let id = format!("term-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        lock(&self.runs).insert(id.clone(), Arc::new(Run { ended, cancel }));
        tracing::info!(terminal = %id, sandboxed, "the agent runs `{line}`");
        let command = if extra.is_empty() { line } else { with_env(&extra, &line) };
        handoff_core::task::spawn("agent terminal", async move {
            let registry = ToolRegistry::new([ToolName::Bash]);
            let output = registry.execute(ToolName::Bash.as_str(), json!({ "command": command }), &ctx).await;
            let _ = done.send(Some(output));
        });
        Ok(json!({ "terminalId": id }))
    }
}

/// The folder `terminal/create` names (`cwd`; none: the project), which must be the project or
/// inside it. The sandbox makes a command's own folder writable, and the approval shows only the
/// command line: a folder the agent names elsewhere (the user's home) would widen the one and
/// mislead the other (`echo … >> .bashrc`).
fn folder_in_project(services: &Services, params: &Value) -> Result<std::path::PathBuf, RpcFailure> {
    use handoff_core::sandbox::paths::real_path;
    let Some(cwd) = params["cwd"].as_str() else { return Ok(services.cwd.clone()) };
    let cwd = services.cwd.join(cwd);
    match real_path(&cwd).starts_with(real_path(&services.cwd)) {
        true => Ok(cwd),
        false => Err(invalid(format!("the terminal's folder {} is outside the project {}", cwd.display(), services.cwd.display()))),
    }
}

/// `line` run with the agent's variables set (`env NAME=value … sh -c line`): what the agent
/// asks for is its own business, our policy still decides the rest of the environment.
fn with_env(vars: &[(String, String)], line: &str) -> String {
    let mut out = String::from("env");
    for (name, value) in vars {
        out.push(' ');
        out.push_str(&single_quoted(&format!("{name}={value}")));
    }
    out.push_str(" sh -c ");
    out.push_str(&single_quoted(line));
    out
}

/// The command's output as the agent reads it: the result's text.
fn output_text(output: &ToolOutput) -> String {
    output.content.iter().filter_map(|b| b.text.clone()).collect::<Vec<_>>().join("")
}
