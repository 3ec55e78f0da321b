//! What a tool is to the rest of the host: its definition and kind, how it runs, and what one of
//! its calls means — the chat's line for it, the file it changes, what an "always" answer
//! covers, its preview for an approval, and its part of a handoff's facts. Each tool's module
//! implements [`Tool`] (codex's per-tool handler is the model); [`super::ToolName::tool`] is the
//! registry's table. Adding a tool is its own file and one line there. Tools that come and go
//! while the host runs (an MCP server's) implement it too and reach the registry through a
//! [`super::ToolSource`].

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::Value;

use super::{Activity, Preview, ToolContext, ToolDefinition, ToolError, ToolKind, ToolOutput};
use crate::message::Message;
use crate::sandbox::paths::real_path;
use crate::sandbox::protected::{self, Protected};

/// What an "always" answer to a call covers for the rest of the session.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConsentKey {
    /// Every call of the tool.
    Tool,
    /// Calls with exactly this key (bash: the exact command).
    Exact(String),
}

/// A call's part of a handoff's facts (see `handoff::facts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallFact {
    /// A file read, as the call named it.
    Read(String),
    /// A file changed (edited, written), as the call named it.
    Modified(String),
    /// A command run and how it ended: its exit code, or else how it stopped ("aborted", the
    /// last line of a failure).
    Command { command: String, exit_code: Option<i32>, ended: Option<String> },
}

/// The file or folder a call reaches and how, resolved as the tool resolves it: what the
/// sandbox's rules for host tools check (`sandbox::protected`) when the sandbox is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// It reads there (`read`; `grep` searches there).
    Read(PathBuf),
    /// It writes there (`edit`, `write`).
    Write(PathBuf),
}

impl Reach {
    /// Where the call really lands (links resolved), and why it must ask first under every
    /// policy, if it must; `project`: the session's folder. The call then acts on that real
    /// path (`ToolContext::checked`), so what was checked is what it touches.
    pub fn check(&self, project: &Path) -> (PathBuf, Option<Protected>) {
        match self {
            Reach::Read(path) => {
                let real = real_path(path);
                (real.clone(), protected::read_protection(real))
            }
            Reach::Write(path) => {
                let real = real_path(path);
                (real.clone(), protected::write_protection(real, project))
            }
        }
    }
}

/// The file a call reads or changes, for an editor to follow (ACP's `locations`): resolved as
/// the tool resolves it, with the line it starts at when the call says (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub line: Option<u32>,
}

/// Where a tool comes from when it is not the host's own: an MCP server's tool, for its
/// approval (the server's hints are shown, never trusted).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOrigin {
    pub server: String,
    /// The tool's name on its server.
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
}

#[async_trait]
pub trait Tool: Send + Sync {
    /// What it may do: the basis of the consent policy.
    fn kind(&self) -> ToolKind;

    /// What a call does, as a front end shows it (ACP's tool kind): the tool's own word, an MCP
    /// server's tool's from its server's hints.
    fn activity(&self) -> Activity;

    /// The name, description and JSON Schema parameters the model sees.
    fn definition(&self) -> ToolDefinition;

    async fn run(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;

    /// Whether it is offered only to a session that has a parent (`session_query`: without one
    /// there is nothing to ask). See [`super::ToolRegistry::offered`].
    fn needs_parent(&self) -> bool {
        false
    }

    /// The chat's line for a call: the argument that says what it does (by default its path).
    fn summary(&self, args: &Value) -> String {
        argument_summary(args, "path")
    }

    /// What an "always" answer covers; `None`: it cannot be granted (a call without the
    /// argument the key is made of).
    fn consent_key(&self, _args: &Value) -> Option<ConsentKey> {
        Some(ConsentKey::Tool)
    }

    /// The file a call changes (absolute, resolved as the tool resolves it), if it changes one.
    fn changed_path(&self, _args: &Value, _cwd: &Path) -> Option<PathBuf> {
        None
    }

    /// The one file a call reads or changes (by default the changed path); `None`: no one
    /// file (bash, grep, find, ls, MCP tools).
    fn location(&self, args: &Value, cwd: &Path) -> Option<Location> {
        self.changed_path(args, cwd).map(|path| Location { path, line: None })
    }

    /// The path a call reads or writes, resolved as the call will resolve it (by default the
    /// changed path, written); `None`: it reaches no one path (bash, find, ls, MCP tools).
    fn reach(&self, args: &Value, cwd: &Path) -> Option<Reach> {
        self.changed_path(args, cwd).map(Reach::Write)
    }

    /// What the call would change, for its approval (`None`: nothing to show, or the call
    /// would fail, which it does when run).
    async fn preview(&self, _args: &Value, _ctx: &ToolContext) -> Option<Preview> {
        None
    }

    /// The call's part of a handoff's facts, from its arguments and its stored result.
    fn fact(&self, _args: &Value, _result: &Message) -> Option<CallFact> {
        None
    }

    /// The server a tool comes from (`None`: the host's own).
    fn origin(&self) -> Option<ToolOrigin> {
        None
    }

    /// Lines of the call's output before those its stored result holds (a result that kept
    /// only the last lines says how many there were): the chat counts them as earlier.
    fn lines_not_kept(&self, _result: &Message) -> u64 {
        0
    }
}

/// The `key` argument of a call as its summary; for a call without it, nothing when it has no
/// arguments, else the arguments as JSON. Also the line of a tool this host does not know (a
/// session written elsewhere).
pub fn argument_summary(args: &Value, key: &str) -> String {
    match args.get(key).and_then(Value::as_str) {
        Some(s) => s.to_string(),
        None if args.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        None => args.to_string(),
    }
}

/// The file a call's `path` argument names, resolved from `cwd` as the tools resolve it (the
/// changed path of `edit` and `write`).
pub fn path_argument(args: &Value, cwd: &Path) -> Option<PathBuf> {
    Some(super::paths::resolve_to_cwd(args.get("path")?.as_str()?, cwd))
}

/// The `path` argument of a call, when the call succeeded (the fact of `read`, `edit`, `write`).
pub(crate) fn path_if_done(args: &Value, result: &Message) -> Option<String> {
    if result.tool_result().is_some_and(|r| r.is_error()) {
        return None;
    }
    args.get("path").and_then(Value::as_str).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::ToolName;
    use crate::tools::{call_fact, call_summary, changed_path, consent_key, kind_of, preview, ToolContext};

    /// A stored result of a call of `tool`: `text`, failed or not.
    fn result(tool: &str, text: &str, is_error: bool) -> Message {
        let output = if is_error { ToolOutput::error(text) } else { ToolOutput::text(text, Value::Null) };
        output.into_message("c1", tool)
    }

    #[test]
    fn the_registry_table_names_each_tool_by_its_own_name() {
        for name in ToolName::ALL {
            assert_eq!(name.tool().definition().name, name.as_str());
        }
    }

    #[test]
    fn each_tool_says_what_a_call_does() {
        let cwd = Path::new("/work");
        let path = json!({"path": "src/a.rs", "content": "x", "edits": []});
        type Case<'a> = (&'a str, Value, ToolKind, &'a str, Option<ConsentKey>, Option<&'a str>);
        let cases: [Case; 9] = [
            ("read", json!({"path": "src/a.rs"}), ToolKind::ReadOnly, "src/a.rs", Some(ConsentKey::Tool), None),
            ("bash", json!({"command": "cargo test"}), ToolKind::Execute, "cargo test", Some(ConsentKey::Exact("cargo test".into())), None),
            ("edit", path.clone(), ToolKind::Edit, "src/a.rs", Some(ConsentKey::Tool), Some("/work/src/a.rs")),
            ("write", path, ToolKind::Edit, "src/a.rs", Some(ConsentKey::Tool), Some("/work/src/a.rs")),
            ("grep", json!({"pattern": "fn main", "path": "src"}), ToolKind::ReadOnly, "fn main", Some(ConsentKey::Tool), None),
            ("find", json!({"pattern": "*.rs"}), ToolKind::ReadOnly, "*.rs", Some(ConsentKey::Tool), None),
            ("ls", json!({"path": "src"}), ToolKind::ReadOnly, "src", Some(ConsentKey::Tool), None),
            ("todo_write", json!({}), ToolKind::ReadOnly, "", Some(ConsentKey::Tool), None),
            ("session_query", json!({"question": "Why Postgres?"}), ToolKind::ReadOnly, "Why Postgres?", Some(ConsentKey::Tool), None),
        ];
        for (tool, args, kind, summary, key, changed) in cases {
            assert_eq!(kind_of(tool), Some(kind), "{tool}");
            assert_eq!(call_summary(tool, &args), summary, "{tool}");
            assert_eq!(consent_key(tool, &args), key, "{tool}");
            assert_eq!(changed_path(tool, &args, cwd), changed.map(PathBuf::from), "{tool}");
        }
        // A command without its command cannot be granted "always"; an unknown tool shows its
        // path argument or its arguments.
        assert_eq!(consent_key("bash", &json!({})), None);
        assert_eq!(call_summary("mcp_thing", &json!({"path": "x"})), "x");
        assert_eq!(call_summary("mcp_thing", &json!({"q": 1})), r#"{"q":1}"#);
        assert_eq!(kind_of("mcp_thing"), None);
    }

    #[test]
    fn each_host_tool_says_the_path_it_reaches_as_it_resolves_it() {
        use crate::tools::lookup;
        let cwd = Path::new("/work");
        let reach = |tool: &str, args: Value| lookup(tool).unwrap().reach(&args, cwd);
        let read = |p: &str| Some(Reach::Read(PathBuf::from(p)));
        assert_eq!(reach("read", json!({"path": "src/a.rs"})), read("/work/src/a.rs"));
        assert_eq!(reach("grep", json!({"pattern": "x", "path": "../up"})), read("/up"));
        assert_eq!(reach("grep", json!({"pattern": "x"})), read("/work"), "no path: the cwd");
        assert_eq!(reach("edit", json!({"path": "a/../.git/config"})), Some(Reach::Write("/work/.git/config".into())));
        assert_eq!(reach("write", json!({"path": "/etc/x"})), Some(Reach::Write("/etc/x".into())));
        for tool in ["bash", "find", "ls", "todo_write", "session_query"] {
            assert_eq!(reach(tool, json!({"path": "x", "command": "cat x"})), None, "{tool}");
        }
        assert_eq!(reach("read", json!({})), None);
    }

    #[test]
    fn each_tool_says_its_part_of_the_facts() {
        let read = json!({"path": "src/a.rs"});
        assert_eq!(call_fact("read", &read, &result("read", "fn a", false)), Some(CallFact::Read("src/a.rs".into())));
        assert_eq!(call_fact("read", &read, &result("read", "ENOENT", true)), None, "a failed read read nothing");
        for tool in ["edit", "write"] {
            assert_eq!(call_fact(tool, &read, &result(tool, "ok", false)), Some(CallFact::Modified("src/a.rs".into())));
            assert_eq!(call_fact(tool, &read, &result(tool, "no match", true)), None, "{tool}");
        }
        let bash = json!({"command": "cargo test"});
        let ran = |text: &str, is_error: bool| call_fact("bash", &bash, &result("bash", text, is_error));
        let command = |exit_code: Option<i32>, ended: Option<&str>| {
            Some(CallFact::Command { command: "cargo test".into(), exit_code, ended: ended.map(str::to_string) })
        };
        assert_eq!(ran("ok", false), command(Some(0), None));
        assert_eq!(ran("boom\n\nCommand exited with code 101", true), command(Some(101), None));
        assert_eq!(ran("partial\nCommand timed out after 5 seconds\n", true), command(None, Some("Command timed out after 5 seconds")));
        for tool in ["grep", "find", "ls", "todo_write", "session_query", "mcp_thing"] {
            assert_eq!(call_fact(tool, &read, &result(tool, "x", false)), None, "{tool}");
        }
    }

    #[test]
    fn bash_says_how_many_lines_its_result_left_out() {
        use crate::tools::lines_not_kept;
        let truncated = json!({"truncation": {"truncated": true, "totalLines": 500, "outputLines": 120}});
        let bash = ToolOutput::text("tail", truncated.clone()).into_message("c1", "bash");
        assert_eq!(lines_not_kept(&bash), 380);
        let whole = ToolOutput::text("all", json!({"truncation": {"truncated": false, "totalLines": 5, "outputLines": 5}}));
        assert_eq!(lines_not_kept(&whole.into_message("c2", "bash")), 0);
        // read keeps the first lines: none are earlier.
        assert_eq!(lines_not_kept(&ToolOutput::text("head", truncated).into_message("c3", "read")), 0);
    }

    #[tokio::test]
    async fn edit_and_write_preview_their_change_the_others_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
        let ctx = ToolContext::new(dir.path());
        let edit = json!({"path": "a.txt", "edits": [{"oldText": "two", "newText": "three"}]});
        let p = preview("edit", &edit, &ctx).await.unwrap();
        assert_eq!((p.before.as_str(), p.after.as_str()), ("one\ntwo\n", "one\nthree\n"));
        assert!(p.diff.contains("-2 two") && p.diff.contains("+2 three"), "{}", p.diff);
        let write = json!({"path": "new.txt", "content": "hello\n"});
        let p = preview("write", &write, &ctx).await.unwrap();
        assert_eq!((p.before.as_str(), p.after.as_str()), ("", "hello\n"));
        assert!(preview("edit", &json!({"path": "a.txt", "edits": [{"oldText": "nope", "newText": "x"}]}), &ctx).await.is_none());
        assert!(preview("bash", &json!({"command": "ls"}), &ctx).await.is_none());
        assert!(preview("read", &json!({"path": "a.txt"}), &ctx).await.is_none());
    }
}
