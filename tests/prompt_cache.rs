//! Cache-friendly requests (issue "Handoff 2"): Anthropic's prompt-cache breakpoints where pi
//! 0.73.1 puts them, a handoff request whose marked prefix is byte for byte the conversation's,
//! and the cached-token counts of both APIs in the message's `usage` and in the chat's records.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Drive as _;

use std::sync::Arc;

use handoff_mock::{MockReply, MockServer, MockToolCall, MockUsage, RecordedRequest};
use handoff_nvim::core::agent::{AgentConfig, AgentSession, RunOptions};
use handoff_nvim::core::controller::{Controller, FrontEndTexts};
use handoff_nvim::core::handoff::{HandoffOptions, HandoffOutcome};
use handoff_nvim::core::message::{Message, Usage};
use handoff_nvim::core::provider::Api;
use handoff_nvim::nvim::protocol::Item;
use handoff_nvim::nvim::transcript;
use serde_json::{json, Value};

const SYSTEM: &str = "You are a careful coding agent.";

/// What the second reply of the conversation reports (pi's terms).
const USAGE: MockUsage = MockUsage { input: 30, output: Some(42), cache_read: 1200, cache_write: 300 };

struct Run {
    /// The conversation's requests, then the handoff's.
    requests: Vec<RecordedRequest>,
    /// The conversation's messages as the session holds them.
    messages: Vec<Message>,
    /// The system prompt of the conversation's session (`SYSTEM` replaces our words).
    system: String,
}

/// A conversation with a tool call (`read`, run without asking), whose second reply reports
/// `USAGE`, then a handoff of it.
async fn converse_then_hand_off(api: Api) -> Run {
    let mock = MockServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut provider = common::config(&mock);
    provider.api = api;
    let config = AgentConfig { system_prompt: Some(SYSTEM.into()), ..AgentConfig::new(provider) };
    let agent = Arc::new(AgentSession::new(config, common::new_session(dir.path())));
    let path = dir.path().join("a.txt").to_string_lossy().into_owned();
    mock.push(MockReply::ToolCalls {
        calls: vec![MockToolCall::new("read", &json!({ "path": path }), 2)],
        text_before: vec!["Reading.".into()],
        chunk_delay_ms: 0,
        stop: "tool_calls".into(),
        interleave: false,
    });
    mock.push(MockReply::text("It says alpha.").with_usage(USAGE));
    let run = agent.prompt("What is in a.txt?", RunOptions::default()).await.unwrap();
    assert_eq!(mock.requests().len(), 2, "{api:?}: the tool call and its answer");
    let messages = run.messages;
    let system = agent.system_prompt().text.clone();
    assert!(system.starts_with(SYSTEM), "{system}");
    let cwd = agent.session().cwd().display().to_string();
    assert!(system.contains(&format!("\nCurrent working directory: {cwd}\n")), "{system}");
    mock.push(MockReply::text(common::DOCUMENT));
    let controller = Controller::new(agent.clone(), FrontEndTexts::default());
    let outcome = controller.handoff(HandoffOptions::default()).await;
    assert!(matches!(outcome, HandoffOutcome::Done { .. }), "{api:?}: {outcome:?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{api:?}");
    Run { requests, messages, system }
}

/// The JSON paths of the `cache_control` markers of a body.
fn markers(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "cache_control" {
                    assert_eq!(v, &json!({ "type": "ephemeral" }), "{at}");
                    out.push(at.to_string());
                } else {
                    markers(v, &format!("{at}/{k}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                markers(v, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn marker_paths(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    markers(body, "", &mut out);
    out.sort();
    out
}

fn bytes(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

#[tokio::test]
async fn anthropic_marks_system_last_tool_and_last_user_block_and_the_handoff_shares_the_prefix() {
    let run = converse_then_hand_off(Api::Anthropic).await;
    let (talk, handoff) = (&run.requests[1].body, &run.requests[2].body);
    let (n_talk, n_handoff) = (talk["messages"].as_array().unwrap().len(), handoff["messages"].as_array().unwrap().len());
    let last_tool = talk["tools"].as_array().unwrap().len() - 1;
    // pi's three breakpoints: the system prompt (a text block), the last tool, the last block of
    // the last user message (here the tool result the model reads).
    assert_eq!(
        marker_paths(talk),
        [
            format!("/messages/{}/content/0", n_talk - 1),
            "/system/0".to_string(),
            format!("/tools/{last_tool}"),
        ]
    );
    assert_eq!(talk["system"], json!([{ "type": "text", "text": run.system, "cache_control": { "type": "ephemeral" } }]));
    assert_eq!(talk["messages"][n_talk - 1]["content"][0]["type"], "tool_result");
    // The handoff marks the same places: its own last user message is the instruction.
    assert_eq!(
        marker_paths(handoff),
        [
            format!("/messages/{}/content/0", n_handoff - 1),
            "/system/0".to_string(),
            format!("/tools/{last_tool}"),
        ]
    );
    assert_eq!(handoff["tool_choice"], json!({ "type": "none" }));
    assert_eq!(talk["tool_choice"], json!({ "type": "auto" }));
    // The prefix the conversation's request marked (tools → system → messages up to its last
    // marker) is byte for byte the start of the handoff request: Anthropic leaves the markers out
    // of the cache key, so the handoff reads it from the cache.
    assert_eq!(bytes(&talk["tools"]), bytes(&handoff["tools"]));
    assert_eq!(bytes(&talk["system"]), bytes(&handoff["system"]));
    assert_eq!(bytes(&run.requests[0].body["system"]), bytes(&talk["system"]), "the same system prompt every request");
    let prefix = |body: &Value, n: usize| bytes(&common::without_cache_control(&Value::Array(body["messages"].as_array().unwrap()[..n].to_vec())));
    assert_eq!(prefix(talk, n_talk), prefix(handoff, n_talk));
    // After it: the reply, then the instruction.
    assert_eq!(n_handoff, n_talk + 2);
    assert_eq!(handoff["messages"][n_talk]["content"], json!([{ "type": "text", "text": "It says alpha." }]));
    // The first request of the conversation was marked the same way, on the prompt.
    let first = &run.requests[0].body;
    assert_eq!(first["messages"][0]["content"][0]["cache_control"], json!({ "type": "ephemeral" }));
    assert_eq!(prefix(first, 1), prefix(talk, 1));
}

#[tokio::test]
async fn openai_the_handoff_request_starts_with_the_conversation_request() {
    let run = converse_then_hand_off(Api::Openai).await;
    let (talk, handoff) = (&run.requests[1].body, &run.requests[2].body);
    // OpenAI caches prompt prefixes without markers: nothing is marked, the tools and the
    // conversation so far are the handoff request's first bytes.
    assert!(marker_paths(handoff).is_empty() && marker_paths(talk).is_empty());
    assert_eq!(bytes(&talk["tools"]), bytes(&handoff["tools"]));
    let talk_messages = talk["messages"].as_array().unwrap();
    let handoff_messages = handoff["messages"].as_array().unwrap();
    assert_eq!(talk_messages[0], json!({ "role": "system", "content": run.system }));
    assert_eq!(run.requests[0].body["messages"][0], talk_messages[0], "the same system prompt every request");
    assert_eq!(bytes(&Value::Array(talk_messages.clone())), bytes(&Value::Array(handoff_messages[..talk_messages.len()].to_vec())));
    assert_eq!(handoff_messages.len(), talk_messages.len() + 2);
    // `prompt_cache_key` goes to api.openai.com only (pi's rule), not to this local server.
    assert!(handoff.get("prompt_cache_key").is_none());
}

#[tokio::test]
async fn cached_token_counts_of_both_apis_land_in_the_usage_and_the_chat_records() {
    for api in [Api::Anthropic, Api::Openai] {
        let run = converse_then_hand_off(api).await;
        // The mock reported USAGE in the API's own shape; the message holds it in pi's terms.
        let reply = run.messages.iter().rev().find(|m| m.is_assistant()).unwrap();
        assert_eq!(reply.text(), "It says alpha.");
        let usage = reply.usage.clone().unwrap();
        assert_eq!(
            (usage.input, usage.cache_read, usage.cache_write, usage.output, usage.total_tokens),
            (30, 1200, 300, 42, 1572),
            "{api:?}"
        );
        let stored = serde_json::to_value(&usage).unwrap();
        assert_eq!(stored["cacheRead"], 1200, "{api:?}: {stored}");
        assert_eq!(stored["cacheWrite"], 300, "{api:?}: {stored}");
        // What Neovim gets (`message_end`, the transcript): the whole prompt and its cached part.
        match transcript::message_item(reply) {
            Item::Assistant { input_tokens, cached_tokens, cache_write_tokens, output_tokens, .. } => {
                assert_eq!(
                    (input_tokens, cached_tokens, cache_write_tokens, output_tokens),
                    (Some(1530), Some(1200), Some(300), Some(42)),
                    "{api:?}"
                );
            }
            other => panic!("{other:?}"),
        }
        // A reply without cache counts has none in its record.
        let first = run.messages.iter().find(|m| m.is_assistant()).unwrap();
        let Item::Assistant { cached_tokens, cache_write_tokens, input_tokens, .. } = transcript::message_item(first) else {
            panic!()
        };
        assert_eq!((cached_tokens, cache_write_tokens), (None, None), "{api:?}");
        assert!(input_tokens.is_some_and(|n| n > 0), "{api:?}");
    }
}

#[test]
fn a_usage_without_counts_gives_no_token_fields() {
    let mut m = common::assistant("hi");
    m.usage = Some(Usage::default());
    let Item::Assistant { input_tokens, cached_tokens, output_tokens, .. } = transcript::message_item(&m) else { panic!() };
    assert_eq!((input_tokens, cached_tokens, output_tokens), (None, None, None));
}
