//! The agent's tools: `read`, `bash`, `edit`, `write`, `grep`, `find`, `ls` (names, parameters
//! and result texts as pi 0.73.1's), `todo_write`, and `session_query` (asks an ancestor
//! session; offered only to a session that has a parent).
//!
//! Each tool is a [`Tool`] in its own module (`tool.rs`): what it is and what one of its calls
//! means to the front ends and the handoff. This layer only runs tools. It knows no agent loop,
//! no wire format, no consent and no Neovim:
//! the agent loop asks the [`ToolRegistry`] for its [`ToolDefinition`]s (JSON Schema, turned into
//! OpenAI or Anthropic `tools` by the provider layer), decides about consent from
//! [`ToolKind`], and calls [`ToolRegistry::execute`] with the model's arguments and a
//! [`ToolContext`]. Whatever happens — unknown tool, arguments that do not fit, a missing file, a
//! failing command, an abort — comes back as a [`ToolOutput`] (`is_error` set, a text the model
//! can act on), never as a panic.
//!
//! Two seams belong to the front ends: [`FileAccess`] (the Neovim host reads and writes through
//! loaded buffers; [`DiskFileAccess`] is the plain disk) and the progress callback that streams
//! bash's partial output. One belongs to the agent: [`ModelOnce`], one question to the session's
//! model (`session_query`'s answer).

mod args;
mod context;
mod output;
mod registry;
mod table;
pub mod consent;
pub mod bash;
pub mod edit;
pub mod env;
pub mod find;
pub mod grep;
pub mod ls;
pub mod paths;
pub mod read;
pub mod session_query;
pub mod todo;
mod tool;
pub mod truncate;
pub(crate) mod walk;
pub mod write;

pub use context::{DiskFileAccess, FileAccess, ModelOnce, ProgressFn, ToolContext};
pub(crate) use output::image_block;
pub use output::{ToolDefinition, ToolError, ToolOutput};
#[cfg(test)]
pub(crate) use registry::execute;
pub use registry::{ToolRef, ToolRegistry, ToolSource};
pub use table::{call_fact, call_location, call_summary, changed_path, consent_key, kind_of, lines_not_kept, lookup, preview};
pub use table::{Activity, Preview, ToolKind, ToolName, MCP_PREFIX};
pub use env::{EnvPolicy, EnvSettings, Inherit};
pub use todo::{current_todos, Todo, TodoStatus};
pub use tool::{argument_summary, CallFact, ConsentKey, Location, Reach, Tool, ToolOrigin};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn defaults_and_kinds() {
        let names: Vec<&str> = ToolRegistry::default().tools().iter().map(|t| t.as_str()).collect();
        assert_eq!(names, ["read", "bash", "edit", "write", "todo_write", "session_query"]);
        let offered = |has_parent| -> Vec<&str> {
            ToolRegistry::default().offered(has_parent).tools().iter().map(|t| t.as_str()).collect()
        };
        assert_eq!(offered(false), ["read", "bash", "edit", "write", "todo_write"]);
        assert_eq!(offered(true), names);
        assert_eq!(kind_of("bash"), Some(ToolKind::Execute));
        assert_eq!(kind_of("write"), Some(ToolKind::Edit));
        assert_eq!(kind_of("grep"), Some(ToolKind::ReadOnly));
        assert_eq!(kind_of("todo_write"), Some(ToolKind::ReadOnly));
        assert_eq!(kind_of("session_query"), Some(ToolKind::ReadOnly));
        assert_eq!(kind_of("nope"), None);
        assert_eq!(kind_of("mcp__docs__search"), Some(ToolKind::Mcp), "an MCP tool by its name");
    }

    #[test]
    fn definitions_are_json_schema_objects() {
        for def in ToolRegistry::all().definitions() {
            assert_eq!(def.parameters["type"], "object", "{}", def.name);
            assert!(def.parameters["properties"].is_object(), "{}", def.name);
            assert!(!def.description.is_empty());
            let wire = serde_json::to_value(&def).unwrap();
            assert_eq!(wire.as_object().unwrap().len(), 3, "name, description, parameters");
        }
    }

    #[tokio::test]
    async fn unknown_and_disabled_tools_are_not_found() {
        let ctx = ToolContext::new(std::env::temp_dir());
        let out = execute("frobnicate", json!({}), &ctx).await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "Tool frobnicate not found");
        let out = ToolRegistry::default().execute("grep", json!({"pattern": "x"}), &ctx).await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "Tool grep not found");
    }

    #[tokio::test]
    async fn a_cancelled_context_runs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        ctx.cancel.cancel();
        let out = execute("write", json!({"path": "a.txt", "content": "x"}), &ctx).await;
        assert!(out.is_error);
        assert_eq!(out.joined_text(), "Operation aborted");
        assert!(!dir.path().join("a.txt").exists());
    }

    #[test]
    fn results_become_pi_tool_result_messages() {
        let msg = ToolOutput::text("ok", json!({"a": 1})).into_message("call_1", "read");
        let v = serde_json::to_value(&msg).unwrap();
        assert_eq!(v["role"], "toolResult");
        assert_eq!(v["toolCallId"], "call_1");
        assert_eq!(v["toolName"], "read");
        assert_eq!(v["isError"], false);
        assert_eq!(v["details"]["a"], 1);
        assert_eq!(v["content"][0]["text"], "ok");
        let v = serde_json::to_value(ToolOutput::text("x", Value::Null).into_message("c", "ls"))
            .unwrap();
        assert!(v.get("details").is_none());
    }
}
