//! Consent: which tool calls run unasked, which need the user's answer, which are refused.
//! The engine decides with a [`Policy`] and, for "ask", waits on the front end's [`Consent`]
//! (the editor shows the request in the chat; the CLI reads a terminal or applies `--yes`).
//! "Always" answers, to allow and to reject, are remembered for the session in [`Grants`]: the
//! engine is their one owner, whatever front end gave them.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Activity, ConsentKey, Preview, ToolKind, ToolOrigin};

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
    /// Read-only tools run, and so do commands that run in the sandbox; edits, and commands
    /// that would run outside it, ask.
    AllowSandboxed,
    /// Everything runs unasked.
    AllowAll,
}

/// The consent policy: a level, and rules for single tools that win over it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Policy {
    pub level: Level,
    /// Per tool name: `allow`, `ask` or `deny`. An MCP tool's rule may name the tool
    /// (`mcp__server__tool`) or its server (`mcp__server`).
    pub tools: HashMap<String, Rule>,
}

impl Policy {
    pub fn allow_all() -> Self {
        Self { level: Level::AllowAll, tools: HashMap::new() }
    }

    /// The rule for a call of `tool` (of `kind`) that runs outside the sandbox.
    pub fn rule(&self, tool: &str, kind: ToolKind) -> Rule {
        self.rule_for(tool, kind, false)
    }

    /// The rule for a call of `tool` (of `kind`); `sandboxed`: it runs in the sandbox.
    pub fn rule_for(&self, tool: &str, kind: ToolKind, sandboxed: bool) -> Rule {
        if let Some(rule) = rule_names(tool).find_map(|name| self.tools.get(name)) {
            return *rule;
        }
        match (self.level, kind) {
            (Level::AllowSandboxed, ToolKind::Execute) if sandboxed => Rule::Allow,
            (_, ToolKind::ReadOnly) | (Level::AllowAll, _) | (Level::AllowEdits, ToolKind::Edit) => Rule::Allow,
            _ => Rule::Ask,
        }
    }
}

/// The names a rule for `tool` may be under, the closest first: the tool's, then for an MCP
/// tool (`mcp__server__tool`) each shorter `mcp__…` prefix that ends before a `__`, down to
/// `mcp__server`.
fn rule_names(tool: &str) -> impl Iterator<Item = &str> {
    let mcp = tool.starts_with(super::MCP_PREFIX);
    let cuts = tool.match_indices("__").map(|(at, _)| at).filter(move |&at| mcp && at > "mcp".len());
    let mut prefixes: Vec<&str> = cuts.map(|at| &tool[..at]).collect();
    prefixes.reverse();
    std::iter::once(tool).chain(prefixes)
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
    /// Do not run it, and for the rest of the session refuse unasked what an "always" would
    /// cover (for `bash` this exact command, for the other tools the tool).
    Never { reason: Option<String> },
    /// Do not run it, and stop the turn.
    Cancel,
    /// For an `edit` or `write` reviewed hunk by hunk before it is written
    /// (`changes.review = "before"`): write `text`, the file as the user kept the change.
    #[serde(rename = "allow_reviewed")]
    AllowReviewed { text: String },
}

/// An answer a user can give to a request, by the one name every front end uses for it (the
/// editor's `approve` notification and its chat's hint, the CLI's prompt): the list is here only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Allow,
    Always,
    Reject,
    Cancel,
}

impl Answer {
    pub const ALL: [Answer; 4] = [Answer::Allow, Answer::Always, Answer::Reject, Answer::Cancel];

    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Allow => "allow",
            Answer::Always => "always",
            Answer::Reject => "reject",
            Answer::Cancel => "cancel",
        }
    }

    /// The decision this answer makes; `reason` says why a call is rejected (the model reads it).
    pub fn decision(self, reason: Option<String>) -> Decision {
        match self {
            Answer::Allow => Decision::Allow,
            Answer::Always => Decision::Always,
            Answer::Reject => Decision::Reject { reason },
            Answer::Cancel => Decision::Cancel,
        }
    }
}

/// One tool call waiting for the user.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalRequest {
    /// The tool call's id (unique in the session): the answer names it.
    pub id: String,
    pub tool: String,
    pub kind: ToolKind,
    /// What the call does, as the tool says (a front end's icon or ACP kind).
    #[serde(skip)]
    pub activity: Activity,
    pub args: Value,
    /// What the call does, as the tool says it (the command, the path, the pattern): the
    /// front ends show this rather than reading the arguments themselves.
    pub summary: String,
    /// The file the call changes (absolute), when it changes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What the call would change, as the tool previews it (`edit`/`write`): the file's text
    /// before and after, to open side by side, and the diff; sent as `before`, `after`, `diff`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub preview: Option<Box<Preview>>,
    /// The MCP server the tool comes from, its name there and its hints (shown, not trusted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<ToolOrigin>,
    /// The command runs in the sandbox, as this says (`workspace-write, no network`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// With `sandbox`: the binary that confines the command, and why no command can change it
    /// (`sandbox::HelperBinary::describe`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confined_by: Option<String>,
    /// The command would run outside the sandbox, for this reason (it cannot be enforced here,
    /// or the sandboxed run looks blocked by it): answering allows that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsandboxed: Option<String>,
    /// The command runs in a sandbox that cannot protect everything here (no mount namespace),
    /// as this says: asked whatever the policy, answered for this call only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holes: Option<String>,
    /// The call reaches a protected path (the sandbox is on), as this says: where it really
    /// lands and why (`path` is that real path). No policy answers it, and "always" counts
    /// this once (`sandbox::protected`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protected: Option<String>,
}

/// The end of the id of the question to run a call again outside the sandbox (the call's own
/// question, if any, was answered already: this one is named apart).
const ESCALATION: &str = "/unsandboxed";

impl ApprovalRequest {
    /// The id of the question to run the call `call_id` again outside the sandbox.
    pub fn escalation_id(call_id: &str) -> String {
        format!("{call_id}{ESCALATION}")
    }

    /// The id of the tool call this asks about (an escalation's is its call's: a client
    /// knows the call by that id).
    pub fn call_id(&self) -> &str {
        self.id.strip_suffix(ESCALATION).filter(|_| self.unsandboxed.is_some()).unwrap_or(&self.id)
    }

    /// "Always" would count for this call only: it reaches a protected path, or runs in a
    /// sandbox with holes. It is then not offered.
    pub fn always_counts_once(&self) -> bool {
        self.protected.is_some() || self.holes.is_some()
    }

    /// The answers offered for this request, in the order the front ends show them.
    pub fn answers(&self) -> Vec<Answer> {
        Answer::ALL.into_iter().filter(|a| *a != Answer::Always || !self.always_counts_once()).collect()
    }
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

/// "Always" answers of this session, both ways: per tool, the keys its calls were granted or
/// refused under (see [`ConsentKey`]: the tool says what an answer covers).
#[derive(Debug, Default)]
pub struct Grants {
    granted: Mutex<HashSet<(String, ConsentKey)>>,
    refused: Mutex<HashSet<(String, ConsentKey)>>,
}

/// The result the model gets for a call the user rejected "always" before.
pub const REJECTED_BEFORE: &str = "The user rejected calls like this one for the rest of the session.";

use crate::sync::lock;

impl Grants {
    /// Whether an earlier "always" covers a call of `tool` with `key` (none: it cannot be).
    pub fn covers(&self, tool: &str, key: Option<&ConsentKey>) -> bool {
        key.is_some_and(|key| lock(&self.granted).contains(&(tool.to_string(), key.clone())))
    }

    pub fn remember(&self, tool: &str, key: Option<ConsentKey>) {
        if let Some(key) = key {
            lock(&self.granted).insert((tool.to_string(), key));
        }
    }

    /// Whether an earlier "reject always" covers a call of `tool` with `key`.
    pub fn refuses(&self, tool: &str, key: Option<&ConsentKey>) -> bool {
        key.is_some_and(|key| lock(&self.refused).contains(&(tool.to_string(), key.clone())))
    }

    pub fn refuse(&self, tool: &str, key: Option<ConsentKey>) {
        if let Some(key) = key {
            lock(&self.refused).insert((tool.to_string(), key));
        }
    }

    /// Forgets everything (a new session starts with no grants and no refusals).
    pub fn clear(&self) {
        lock(&self.granted).clear();
        lock(&self.refused).clear();
    }
}

/// What the loop does with a call after the policy and (maybe) the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Run,
    /// Run as the user reviewed it: the file written with this text (see
    /// [`Decision::AllowReviewed`]).
    RunReviewed(String),
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

/// Decides about one call of `tool` (an "always" covers what `key` says; `sandboxed`: it runs in
/// the sandbox): the policy, the session's grants, then the user. `request` (which may read the
/// file and diff it) is only worked out when the user is asked.
#[allow(clippy::too_many_arguments)]
pub async fn decide(
    policy: &Policy,
    grants: &Grants,
    consent: &dyn Consent,
    request: impl std::future::Future<Output = ApprovalRequest>,
    tool: &str,
    kind: ToolKind,
    key: Option<ConsentKey>,
    sandboxed: bool,
) -> Verdict {
    match policy.rule_for(tool, kind, sandboxed) {
        Rule::Allow => return Verdict::Run,
        Rule::Deny => return Verdict::Refuse(format!("The tool {tool} is not allowed by the user's settings.")),
        Rule::Ask if grants.refuses(tool, key.as_ref()) => return Verdict::Refuse(REJECTED_BEFORE.into()),
        Rule::Ask if grants.covers(tool, key.as_ref()) => return Verdict::Run,
        Rule::Ask => {}
    }
    answered(consent.ask(request.await).await, grants, key, Some(tool), Some(tool))
}

/// The user's answer as a verdict. `always` / `never`: the tool under which an "always" or a
/// "never" is remembered for `key` (`None`: it counts for this call only).
fn answered(decision: Decision, grants: &Grants, key: Option<ConsentKey>, always: Option<&str>, never: Option<&str>) -> Verdict {
    match decision {
        Decision::Allow => Verdict::Run,
        Decision::Always => {
            if let Some(tool) = always {
                grants.remember(tool, key);
            }
            Verdict::Run
        }
        Decision::Reject { reason } => Verdict::Refuse(rejected_text(reason.as_deref())),
        Decision::Never { reason } => {
            if let Some(tool) = never {
                grants.refuse(tool, key);
            }
            Verdict::Refuse(rejected_text(reason.as_deref()))
        }
        Decision::Cancel => Verdict::Cancel,
        Decision::AllowReviewed { text } => Verdict::RunReviewed(text),
    }
}

/// The grant key under which "always" lets bash run outside the sandbox where the sandbox
/// cannot be enforced (the user's answer to [`MustAsk::Unconfinable`]).
pub const OUTSIDE_THE_SANDBOX: &str = "bash outside the sandbox";

/// Why a call is asked about whatever the policy and the session's grants say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MustAsk {
    /// It reaches a protected path (`sandbox::protected`) or a command's sandbox has holes
    /// here: asked each time, "always" and "never" counting for this call only.
    Protected,
    /// A command the sandbox should confine and cannot: "always" and "never" are remembered
    /// for it ([`OUTSIDE_THE_SANDBOX`], the tool).
    Unconfinable,
}

/// [`decide`], for a call that `must` be asked about: a tool the user's policy denies stays
/// denied, and nothing else lets it run unasked. Every caller that has such a call (the agent's
/// tool loop, an external agent's terminal and file requests) decides it here.
#[allow(clippy::too_many_arguments)]
pub async fn decide_asking(
    policy: &Policy,
    grants: &Grants,
    consent: &dyn Consent,
    request: impl std::future::Future<Output = ApprovalRequest>,
    tool: &str,
    kind: ToolKind,
    key: Option<ConsentKey>,
    must: MustAsk,
) -> Verdict {
    if policy.rule(tool, kind) == Rule::Deny {
        return decide(policy, grants, consent, request, tool, kind, key, false).await;
    }
    let protected = must == MustAsk::Protected;
    if !protected && grants.refuses(tool, key.as_ref()) {
        return Verdict::Refuse(REJECTED_BEFORE.into());
    }
    let (always, never) = if protected { (None, None) } else { (Some(OUTSIDE_THE_SANDBOX), Some(tool)) };
    answered(consent.ask(request.await).await, grants, key, always, never)
}

#[cfg(test)]
mod tests {
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
        let sandboxed = Policy { level: Level::AllowSandboxed, ..Policy::default() };
        assert_eq!(sandboxed.rule_for("bash", ToolKind::Execute, true), Rule::Allow);
        assert_eq!(sandboxed.rule_for("bash", ToolKind::Execute, false), Rule::Ask, "outside the sandbox it asks");
        assert_eq!(sandboxed.rule_for("edit", ToolKind::Edit, true), Rule::Ask, "edits still ask");
    }

    #[test]
    fn mcp_tools_ask_by_default_and_take_rules_per_server_and_tool() {
        let p = Policy::default();
        assert_eq!(p.rule("mcp__docs__search", ToolKind::Mcp), Rule::Ask);
        assert_eq!(Policy { level: Level::AllowEdits, ..Policy::default() }.rule("mcp__docs__search", ToolKind::Mcp), Rule::Ask);
        assert_eq!(Policy::allow_all().rule("mcp__docs__search", ToolKind::Mcp), Rule::Allow);
        let mut rules = Policy::default();
        rules.tools.insert("mcp__docs".into(), Rule::Allow);
        rules.tools.insert("mcp__docs__delete".into(), Rule::Deny);
        rules.tools.insert("mcp__a__b".into(), Rule::Deny);
        assert_eq!(rules.rule("mcp__docs__search", ToolKind::Mcp), Rule::Allow, "the server's rule");
        assert_eq!(rules.rule("mcp__docs__delete", ToolKind::Mcp), Rule::Deny, "the tool's rule wins");
        assert_eq!(rules.rule("mcp__docsx__search", ToolKind::Mcp), Rule::Ask, "another server");
        // A server whose name holds `__`: its longest prefix rule counts.
        assert_eq!(rules.rule("mcp__a__b__c", ToolKind::Mcp), Rule::Deny);
        assert_eq!(rules.rule("mcp__a__c", ToolKind::Mcp), Rule::Ask);
        let names: Vec<&str> = rule_names("mcp__a__b__c").collect();
        assert_eq!(names, ["mcp__a__b__c", "mcp__a__b", "mcp__a"]);
        assert_eq!(rule_names("bash").collect::<Vec<_>>(), ["bash"]);
        assert_eq!(rule_names("my__tool").collect::<Vec<_>>(), ["my__tool"], "only MCP names have prefixes");
    }

    #[tokio::test]
    async fn always_remembers_what_the_tool_says_it_covers() {
        use crate::tools::consent_key;
        let grants = Grants::default();
        let policy = Policy::default();
        let req = |tool: &str, args: &Value| ApprovalRequest {
            id: "1".into(),
            tool: tool.into(),
            kind: ToolKind::Execute,
            activity: Activity::Execute,
            args: args.clone(),
            summary: String::new(),
            path: None,
            preview: None,
            origin: None,
            sandbox: None,
            unsandboxed: None,
            confined_by: None,
            holes: None,
            protected: None,
        };
        let ls = json!({ "command": "ls" });
        let rm = json!({ "command": "rm -rf build" });
        let key = |tool: &str, args: &Value| consent_key(tool, args);
        let covers = |tool: &str, args: &Value| grants.covers(tool, key(tool, args).as_ref());
        let v = decide(&policy, &grants, &Always(Decision::Always), async { req("bash", &ls) }, "bash", ToolKind::Execute, key("bash", &ls), false).await;
        assert_eq!(v, Verdict::Run);
        assert!(covers("bash", &ls));
        assert!(!covers("bash", &rm), "always for one command must not cover another");
        let v = decide(&policy, &grants, &Always(Decision::Cancel), async { req("bash", &ls) }, "bash", ToolKind::Execute, key("bash", &ls), false).await;
        assert_eq!(v, Verdict::Run, "a granted command is not asked again");
        let v = decide(&policy, &grants, &Always(Decision::Reject { reason: Some(" too risky ".into()) }), async { req("bash", &rm) }, "bash", ToolKind::Execute, key("bash", &rm), false).await;
        assert_eq!(v, Verdict::Refuse("The user rejected this tool call. Reason: too risky".into()));
        // A call without the argument its key is made of cannot be granted.
        let none = json!({});
        decide(&policy, &grants, &Always(Decision::Always), async { req("bash", &none) }, "bash", ToolKind::Execute, key("bash", &none), false).await;
        assert!(!covers("bash", &none));
        let edit = json!({ "path": "a.rs" });
        decide(&policy, &grants, &Always(Decision::Always), async { req("edit", &edit) }, "edit", ToolKind::Edit, key("edit", &edit), false).await;
        assert!(covers("edit", &json!({ "path": "other.rs" })), "for edit, the tool");
        assert!(!covers("write", &edit));
        // "Reject always": refused unasked from then on, for what the key covers only.
        let v = decide(&policy, &grants, &Always(Decision::Never { reason: None }), async { req("bash", &rm) }, "bash", ToolKind::Execute, key("bash", &rm), false).await;
        assert_eq!(v, Verdict::Refuse(rejected_text(None)));
        let v = decide(&policy, &grants, &Always(Decision::Allow), async { req("bash", &rm) }, "bash", ToolKind::Execute, key("bash", &rm), false).await;
        assert_eq!(v, Verdict::Refuse(REJECTED_BEFORE.into()), "refused again, unasked");
        let other = json!({ "command": "make" });
        let v = decide(&policy, &grants, &Always(Decision::Allow), async { req("bash", &other) }, "bash", ToolKind::Execute, key("bash", &other), false).await;
        assert_eq!(v, Verdict::Run, "another command is asked");
        grants.clear();
        assert!(!covers("edit", &edit) && !covers("bash", &ls));
        assert!(!grants.refuses("bash", key("bash", &rm).as_ref()), "a new session forgets the refusals too");
    }
}
