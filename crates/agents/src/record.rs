//! Our own record of an external agent's session, in pi's format: the user's prompts as user
//! messages; the agent's text, thoughts and tool calls as assistant messages (provider `acp`,
//! model the agent's name), each round of tool calls followed by their `toolResult`s, as pi
//! writes its own. A custom entry (`acp-agent`, which no model sees) says which agent the
//! session runs on and its id there, so the session can be continued on it.

use serde_json::{json, Map, Value};

use super::client::Shown;
use super::originals::EditOriginals;
use super::{AgentSpec, PROVIDER};
use handoff_core::message::{ContentBlock, Message, StopReason};
use handoff_core::session::review::Review;
use handoff_core::session::{Originals, SessionError, SessionManager};
use handoff_acp_wire as wire;
use handoff_core::tools::{self, Activity, ToolKind, ToolOutput};

/// The custom entry naming the agent a session runs on.
pub const AGENT_ENTRY: &str = "acp-agent";

/// What the `acp-agent` entry holds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEntry {
    pub agent: AgentSpec,
    /// The agent's own id of the session (`None`: no session on the agent yet, as after a
    /// handoff: the next prompt starts one, with the document first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The agent `session` runs on: its current branch's latest `acp-agent` entry.
pub fn agent_of(session: &SessionManager) -> Option<AgentEntry> {
    session.get_branch(None).iter().rev().find_map(|entry| {
        if entry.kind != "custom" || !entry.raw_json().contains(AGENT_ENTRY) {
            return None;
        }
        let fields = entry.fields();
        if fields.get("customType").and_then(Value::as_str) != Some(AGENT_ENTRY) {
            return None;
        }
        serde_json::from_value(fields.get("data")?.clone()).ok()
    })
}

/// Records that `session` runs on `agent` (and its id there), with the model entry pi reads.
pub fn record_agent(session: &mut SessionManager, entry: &AgentEntry) -> Result<(), SessionError> {
    session.append_model_change(PROVIDER, &entry.agent.name)?;
    session.append_custom_entry(AGENT_ENTRY, serde_json::to_value(entry).unwrap_or_default())?;
    Ok(())
}

/// Records that `session` goes on on `agent`, in a session of it not started yet.
pub fn record_agent_spec(session: &mut SessionManager, agent: &AgentSpec) -> Result<(), SessionError> {
    record_agent(session, &AgentEntry { agent: agent.clone(), session_id: None })
}

/// A tool call of the turn: its id, the name and arguments recorded, its result once known.
struct Call {
    id: String,
    name: String,
    /// Its ACP kind, as last said.
    kind: String,
    result: Option<ToolOutput>,
    /// Shown as running (`Shown::tool_start`), shown as ended (`Shown::tool_end`).
    running: bool,
    ended: bool,
}

/// The turn being recorded, and shown as it is: the assistant message being filled, its calls,
/// the messages written so far.
pub struct Recorder<'a> {
    model: String,
    message: Message,
    /// The message was shown as started.
    started: bool,
    calls: Vec<Call>,
    written: Vec<Message>,
    shown: &'a dyn Shown,
    /// What the calls' edits replace: taken as they start, recorded as their results are.
    edit_originals: &'a EditOriginals,
}

/// Our tool for an external agent's call: the name the record, the ledger, the facts and the
/// consent policy know it by, what consent asks by, and what it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OurTool {
    pub name: String,
    pub kind: ToolKind,
    pub activity: Activity,
}

/// Our tool for a call of ACP kind `acp_kind` with input `raw_input`: the one table of it, so
/// that the permission asked (and an "always" given there) and the call recorded name the
/// same tool. Our tools' names where we have one (`read`, `edit`, `write` for an edit that
/// gives the whole `content`, `bash`, `grep` for a search), their kinds from the tools; the
/// other kinds keep ACP's name (`delete`, `move`, `think`, `fetch`, `switch_mode`, `other`),
/// asked about as what they may do (an unknown one as a command: it may do anything).
pub fn our_tool(acp_kind: &str, raw_input: &Value) -> OurTool {
    let wire: wire::ToolKind = serde_json::from_value(Value::String(acp_kind.into())).unwrap_or_default();
    let activity = wire::activity(wire);
    let name = match activity {
        Activity::Read => "read".to_string(),
        Activity::Edit if raw_input.get("content").is_some() => "write".to_string(),
        Activity::Edit => "edit".to_string(),
        Activity::Execute => "bash".to_string(),
        Activity::Search => "grep".to_string(),
        _ => serde_json::to_value(wire).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| "other".into()),
    };
    let kind = tools::kind_of(&name).unwrap_or(match activity {
        Activity::Read | Activity::Search | Activity::Think | Activity::Fetch => ToolKind::ReadOnly,
        Activity::Edit | Activity::Delete | Activity::Move => ToolKind::Edit,
        Activity::Execute | Activity::Other => ToolKind::Execute,
    });
    OurTool { name, kind, activity }
}

/// Whether an external agent's call recorded as `tool` (see [`our_tool`]) may have changed
/// files with the agent's own IO (ACP kinds `edit`, `delete`, `move`, `execute`): the editor
/// then checks the buffers it shows, as after a command of ours.
pub fn changes_files(tool: &str) -> bool {
    matches!(tool, "edit" | "write" | "delete" | "move" | "bash")
}

/// A tool call's text content (`content: [{type: "content", content: {type: "text", text}}]`,
/// diffs as their new text).
fn content_text(content: &Value) -> String {
    let mut text = String::new();
    for item in content.as_array().into_iter().flatten() {
        let piece = match item["type"].as_str() {
            Some("content") => item["content"]["text"].as_str().map(str::to_string),
            Some("diff") => Some(format!("{}:\n{}", item["path"].as_str().unwrap_or_default(), item["newText"].as_str().unwrap_or_default())),
            Some("terminal") => Some(format!("(terminal {})", item["terminalId"].as_str().unwrap_or_default())),
            _ => None,
        };
        if let Some(piece) = piece {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&piece);
        }
    }
    text
}

impl<'a> Recorder<'a> {
    pub fn new(model: &str, shown: &'a dyn Shown, edit_originals: &'a EditOriginals) -> Recorder<'a> {
        Recorder {
            model: model.to_string(),
            message: Message::assistant(PROVIDER, PROVIDER, model),
            started: false,
            calls: Vec::new(),
            written: Vec::new(),
            shown,
            edit_originals,
        }
    }

    fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.shown.message_start(&self.message);
        }
    }

    /// Takes one `session/update` into the record (writing a finished round of calls) and
    /// shows it.
    pub fn update(&mut self, session: &mut SessionManager, update: &Value) -> Result<(), SessionError> {
        match update["sessionUpdate"].as_str().unwrap_or_default() {
            "agent_message_chunk" => {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.round_done(session)?;
                    self.start();
                    self.message.push_text(text);
                    self.shown.text(self.message.content.blocks().len().saturating_sub(1), text);
                }
            }
            "agent_thought_chunk" => {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.round_done(session)?;
                    self.start();
                    self.message.push_thinking(text);
                }
            }
            // The agent's count of its context and its window: on the reply being recorded,
            // as a reply of ours carries its usage (pi and our meter read it there). The agent
            // gives no split: the count is recorded as input.
            "usage_update" => {
                if let Some(used) = update["used"].as_u64() {
                    let mut usage = handoff_core::message::Usage { input: used, total_tokens: used, ..Default::default() };
                    if let Some(size) = update["size"].as_u64() {
                        usage.extra.insert(handoff_core::agent::CONTEXT_WINDOW.into(), size.into());
                    }
                    self.message.usage = Some(usage);
                }
            }
            "tool_call" | "tool_call_update" => {
                self.edit_originals.take_call(update, session.cwd());
                self.show_tool(update);
                let id = update["toolCallId"].as_str().unwrap_or_default().to_string();
                if !self.calls.iter().any(|c| c.id == id) {
                    self.start();
                    self.calls.push(Call { id: id.clone(), name: String::new(), kind: String::new(), result: None, running: false, ended: false });
                }
                self.call_changed(&id, update);
                self.show_run(&id, update["status"].as_str().unwrap_or_default());
            }
            _ => {}
        }
        Ok(())
    }

    /// What an update of call `id` says (its kind, input, title, place, result), written
    /// into the call's `toolCall` block: an agent may give its input only after the call
    /// started (Claude Code's adapters do).
    fn call_changed(&mut self, id: &str, update: &Value) {
        let Some(call) = self.calls.iter_mut().find(|c| c.id == id) else { return };
        if let Some(result) = result_of(update) {
            call.result = Some(result);
        }
        if let Some(kind) = update["kind"].as_str() {
            call.kind = kind.to_string();
        }
        let mut blocks = self.message.content.blocks();
        let at = blocks.iter().position(|b| b.kind == "toolCall" && b.extra_str("id") == Some(id));
        let mut arguments = match at.and_then(|at| blocks[at].extra.get("arguments")) {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        if let Some(Value::Object(raw)) = update.get("rawInput") {
            for (key, value) in raw {
                arguments.insert(key.clone(), value.clone());
            }
        }
        if let Some(title) = update["title"].as_str() {
            arguments.insert("title".into(), Value::String(title.into()));
        }
        if let Some(path) = update["locations"][0]["path"].as_str() {
            arguments.entry("path").or_insert_with(|| Value::String(path.into()));
        }
        call.name = our_tool(&call.kind, &Value::Object(arguments.clone())).name;
        let block = ContentBlock::tool_call(id, &call.name, Value::Object(arguments));
        match at {
            Some(at) => blocks[at] = block,
            None => blocks.push(block),
        }
        self.message.content = handoff_core::message::Content::Blocks(blocks);
    }

    /// Call `id` is shown running once it runs (`in_progress`; after its approval, which
    /// shows before it as ours does) or has ended, and ended once with its result.
    fn show_run(&mut self, id: &str, status: &str) {
        if !matches!(status, "in_progress" | "completed" | "failed") {
            return;
        }
        let args = self.arguments(id);
        let Some(call) = self.calls.iter_mut().find(|c| c.id == id) else { return };
        if !call.running {
            call.running = true;
            self.shown.tool_start(id, &call.name, &args);
        }
        if let (Some(result), false) = (&call.result, call.ended) {
            call.ended = true;
            self.shown.tool_end(id, &call.name, &args, &result.clone().into_message(id, &call.name));
        }
    }

    /// The arguments recorded for call `id`.
    fn arguments(&self, id: &str) -> Value {
        let blocks = self.message.content.blocks();
        let block = blocks.into_iter().find(|b| b.kind == "toolCall" && b.extra_str("id") == Some(id));
        block.and_then(|mut b| b.extra.remove("arguments")).unwrap_or(Value::Null)
    }

    fn show_tool(&self, update: &Value) {
        let title = update["title"].as_str().unwrap_or_default();
        let status = update["status"].as_str().unwrap_or_default();
        if !title.is_empty() || !status.is_empty() {
            self.shown.tool(title, status);
        }
    }

    /// Text after a round of tool calls opens the next assistant message: the round (the
    /// message with its calls, then their results) is written first.
    fn round_done(&mut self, session: &mut SessionManager) -> Result<(), SessionError> {
        if self.calls.is_empty() {
            return Ok(());
        }
        self.message.stop_reason = Some(StopReason::ToolUse);
        self.write_round(session)?;
        self.message = Message::assistant(PROVIDER, PROVIDER, &self.model);
        self.started = false;
        Ok(())
    }

    /// Writes `message`: its entry's id.
    fn write(&mut self, session: &mut SessionManager, message: Message) -> Result<String, SessionError> {
        let entry_id = session.append_message(&message)?;
        self.shown.message_end(&message);
        self.written.push(message);
        Ok(entry_id)
    }

    fn write_round(&mut self, session: &mut SessionManager) -> Result<(), SessionError> {
        self.start();
        self.write(session, self.message.clone())?;
        for call in std::mem::take(&mut self.calls) {
            let output = call.result.unwrap_or_else(|| ToolOutput::error("The agent reported no result for this call."));
            let result = output.into_message(&call.id, &call.name);
            if !call.ended {
                // Shown ended as recorded: the chat shows no call running past its turn.
                let args = self.arguments(&call.id);
                if !call.running {
                    self.shown.tool_start(&call.id, &call.name, &args);
                }
                self.shown.tool_end(&call.id, &call.name, &args, &result);
            }
            self.shown.message_start(&result);
            let succeeded = !result.tool_result().is_some_and(|r| r.is_error());
            let entry_id = self.write(session, result)?;
            let (originals, review) = (Originals::of_session(session.path()), Review::of_session(session.path()));
            for reviewed in self.edit_originals.ended(&call.id, &call.name, succeeded, &originals, &review, &entry_id) {
                self.shown.hunks(&reviewed);
            }
        }
        Ok(())
    }

    /// The turn ended with `stop` (the agent's stop reason): what is left is written.
    /// Returns the last reply's text and every message written.
    pub fn finish(mut self, session: &mut SessionManager, stop: &str) -> Result<(String, Vec<Message>), SessionError> {
        let text = self.message.text();
        self.message.stop_reason = Some(match stop {
            _ if !self.calls.is_empty() => StopReason::ToolUse,
            "cancelled" => StopReason::Aborted,
            "max_tokens" => StopReason::Length,
            "refusal" => StopReason::Error,
            _ => StopReason::Stop,
        });
        if stop == "refusal" {
            self.message.error_message = Some("the agent refused".into());
        }
        self.write_round(session)?;
        Ok((text, self.written))
    }
}

/// The result a tool call's update carries, once it has ended (`completed` or `failed`).
fn result_of(update: &Value) -> Option<ToolOutput> {
    let status = update["status"].as_str()?;
    if status != "completed" && status != "failed" {
        return None;
    }
    let mut text = content_text(&update["content"]);
    if text.is_empty() {
        if let Some(raw) = update.get("rawOutput").filter(|v| !v.is_null()) {
            text = match raw {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
        }
    }
    Some(match status {
        "failed" => ToolOutput::error(if text.is_empty() { "failed".to_string() } else { text }),
        _ => ToolOutput::text(text, json!({})),
    })
}
