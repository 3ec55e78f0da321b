//! Consent: which tool calls run unasked, which need the user's answer, which are refused.
//! The engine decides with a [`Policy`] and, for "ask", waits on the front end's [`Consent`]
//! (the editor shows the request in the chat; the CLI reads a terminal or applies `--yes`).
//! "Always" answers are remembered for the session in [`Grants`].

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ToolKind;

/// What a policy says about one tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    Allow,
    Ask,
    Deny,
}

/// How much runs without asking (`setup{ tools = { policy = … } }`, `--yes` on the CLI).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Read-only tools run; edits and commands ask (the default).
    #[default]
    Ask,
    /// Read-only tools and edits run; commands ask.
    AllowEdits,
    /// Everything runs unasked.
    AllowAll,
}

/// The consent policy: a level, and rules for single tools that win over it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Policy {
    pub level: Level,
    /// Per tool name: `allow`, `ask` or `deny`.
    pub tools: HashMap<String, Rule>,
}

impl Policy {
    pub fn allow_all() -> Self {
        Self { level: Level::AllowAll, tools: HashMap::new() }
    }

    /// The rule for a call of `tool` (of `kind`).
    pub fn rule(&self, tool: &str, kind: ToolKind) -> Rule {
        if let Some(rule) = self.tools.get(tool) {
            return *rule;
        }
        match (self.level, kind) {
            (_, ToolKind::ReadOnly) | (Level::AllowAll, _) | (Level::AllowEdits, ToolKind::Edit) => Rule::Allow,
            _ => Rule::Ask,
        }
    }
}

/// The user's answer to one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    /// Run it, this once.
    Allow,
    /// Run it, and for the rest of the session do not ask again: for `bash` this exact command,
    /// for the other tools the tool.
    Always,
    /// Do not run it; the model's result says so (with the reason, if given).
    Reject { reason: Option<String> },
    /// Do not run it, and stop the turn.
    Cancel,
}

/// One tool call waiting for the user.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalRequest {
    /// The tool call's id (unique in the session): the answer names it.
    pub id: String,
    pub tool: String,
    pub kind: ToolKind,
    pub args: Value,
    /// For `edit`/`write`: what the change does, as a unified diff of the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// For `edit`/`write`: the file's text before and after, to open side by side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// The front end's seam: ask about one tool call and wait for the answer. An implementation
/// that cannot ask (no terminal, the editor went away) answers `Reject` with a reason.
#[async_trait]
pub trait Consent: Send + Sync {
    async fn ask(&self, request: ApprovalRequest) -> Decision;
}

/// A front end that answers every request the same way (the CLI's `--yes`, tests).
pub struct Always(pub Decision);

#[async_trait]
impl Consent for Always {
    async fn ask(&self, _request: ApprovalRequest) -> Decision {
        self.0.clone()
    }
}

/// "Always" answers of this session.
#[derive(Debug, Default)]
pub struct Grants {
    tools: Mutex<HashSet<String>>,
    commands: Mutex<HashSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Grants {
    /// The exact command of a bash call (its `command` argument).
    fn command_of(args: &Value) -> Option<&str> {
        args.get("command").and_then(Value::as_str)
    }

    pub fn covers(&self, tool: &str, args: &Value) -> bool {
        if tool == "bash" {
            Self::command_of(args).is_some_and(|c| lock(&self.commands).contains(c))
        } else {
            lock(&self.tools).contains(tool)
        }
    }

    pub fn remember(&self, tool: &str, args: &Value) {
        if tool == "bash" {
            if let Some(command) = Self::command_of(args) {
                lock(&self.commands).insert(command.to_string());
            }
        } else {
            lock(&self.tools).insert(tool.to_string());
        }
    }

    /// Forgets everything (a new session starts with no grants).
    pub fn clear(&self) {
        lock(&self.tools).clear();
        lock(&self.commands).clear();
    }
}

/// What the loop does with a call after the policy and (maybe) the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Run,
    /// Not run; the text is the model's result (an error result).
    Refuse(String),
    /// Not run, and the turn stops.
    Cancel,
}

/// The result text of a rejected call.
pub fn rejected_text(reason: Option<&str>) -> String {
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(reason) => format!("The user rejected this tool call. Reason: {reason}"),
        None => "The user rejected this tool call.".to_string(),
    }
}

/// Decides about one call: the policy, the session's grants, then the user. `request` (which
/// may read the file and diff it) is only worked out when the user is asked.
pub async fn decide(
    policy: &Policy,
    grants: &Grants,
    consent: &dyn Consent,
    request: impl std::future::Future<Output = ApprovalRequest>,
    tool: &str,
    kind: ToolKind,
    args: &Value,
) -> Verdict {
    match policy.rule(tool, kind) {
        Rule::Allow => return Verdict::Run,
        Rule::Deny => return Verdict::Refuse(format!("The tool {tool} is not allowed by the user's settings.")),
        Rule::Ask if grants.covers(tool, args) => return Verdict::Run,
        Rule::Ask => {}
    }
    match consent.ask(request.await).await {
        Decision::Allow => Verdict::Run,
        Decision::Always => {
            grants.remember(tool, args);
            Verdict::Run
        }
        Decision::Reject { reason } => Verdict::Refuse(rejected_text(reason.as_deref())),
        Decision::Cancel => Verdict::Cancel,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn default_policy_runs_read_only_tools_and_asks_for_the_rest() {
        let p = Policy::default();
        assert_eq!(p.rule("read", ToolKind::ReadOnly), Rule::Allow);
        assert_eq!(p.rule("edit", ToolKind::Edit), Rule::Ask);
        assert_eq!(p.rule("bash", ToolKind::Execute), Rule::Ask);
        let edits = Policy { level: Level::AllowEdits, ..Policy::default() };
        assert_eq!(edits.rule("write", ToolKind::Edit), Rule::Allow);
        assert_eq!(edits.rule("bash", ToolKind::Execute), Rule::Ask);
        let mut custom = Policy::allow_all();
        custom.tools.insert("bash".into(), Rule::Deny);
        custom.tools.insert("read".into(), Rule::Ask);
        assert_eq!(custom.rule("bash", ToolKind::Execute), Rule::Deny);
        assert_eq!(custom.rule("read", ToolKind::ReadOnly), Rule::Ask);
        assert_eq!(custom.rule("edit", ToolKind::Edit), Rule::Allow);
    }

    #[tokio::test]
    async fn always_remembers_the_tool_or_the_exact_command() {
        let grants = Grants::default();
        let policy = Policy::default();
        let req = |tool: &str, args: &Value| ApprovalRequest {
            id: "1".into(),
            tool: tool.into(),
            kind: ToolKind::Execute,
            args: args.clone(),
            diff: None,
            before: None,
            after: None,
        };
        let ls = json!({ "command": "ls" });
        let rm = json!({ "command": "rm -rf build" });
        let v = decide(&policy, &grants, &Always(Decision::Always), async { req("bash", &ls) }, "bash", ToolKind::Execute, &ls).await;
        assert_eq!(v, Verdict::Run);
        assert!(grants.covers("bash", &ls));
        assert!(!grants.covers("bash", &rm), "always for one command must not cover another");
        let v = decide(&policy, &grants, &Always(Decision::Cancel), async { req("bash", &ls) }, "bash", ToolKind::Execute, &ls).await;
        assert_eq!(v, Verdict::Run, "a granted command is not asked again");
        let v = decide(&policy, &grants, &Always(Decision::Reject { reason: Some(" too risky ".into()) }), async { req("bash", &rm) }, "bash", ToolKind::Execute, &rm).await;
        assert_eq!(v, Verdict::Refuse("The user rejected this tool call. Reason: too risky".into()));
        let edit = json!({ "path": "a.rs" });
        decide(&policy, &grants, &Always(Decision::Always), async { req("edit", &edit) }, "edit", ToolKind::Edit, &edit).await;
        assert!(grants.covers("edit", &json!({ "path": "other.rs" })));
        grants.clear();
        assert!(!grants.covers("edit", &edit) && !grants.covers("bash", &ls));
    }
}
