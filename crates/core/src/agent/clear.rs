//! Old tool results cleared from the request (`handoff.clear_tool_results`, issue 32's cheapest
//! stage first): the newest `keep` tokens of tool output go to the model as they are, the older
//! results as a one-line placeholder that names the tool and what it held. Only the request
//! changes: the session file keeps every result (session_query, the facts and a resume read it
//! there), and the wall's estimate counts the request as it is sent, so the wall moves back.
//!
//! Clearing changes the request's prefix, which a provider's prompt cache keys on, so it happens
//! in batches: what is cleared is a function of the total tool output rounded down to a multiple
//! of half of `keep`, and stays the same from one request to the next until the output grows by
//! another half of `keep` (a cache miss once per batch, not once per request).

use serde_json::Value;

use super::fit;
use crate::message::{Content, ContextMessage, Role};

/// Tool output tokens kept whole: the newest `keep`, cleared in batches of half of it.
pub fn clear_old_tool_results(messages: Vec<ContextMessage>, keep: u64) -> Vec<ContextMessage> {
    let keep = keep.max(1);
    let tokens: Vec<u64> = messages
        .iter()
        .map(|m| if m.role() == Some(Role::ToolResult) { fit::estimate_context_tokens(m) as u64 } else { 0 })
        .collect();
    let total: u64 = tokens.iter().sum();
    let batch = (keep / 2).max(1);
    // What is cleared: the oldest results that make up this many tokens, a step function of
    // the total output.
    let target = total.saturating_sub(keep) / batch * batch;
    if target == 0 {
        return messages;
    }
    let mut cleared = 0u64;
    messages
        .into_iter()
        .zip(tokens)
        .map(|(message, tokens)| {
            if tokens == 0 || cleared >= target {
                return message;
            }
            cleared += tokens;
            placeholder(&message, tokens).map_or(message, ContextMessage::from)
        })
        .collect()
}

/// A tool result's one-line stand-in: the same call id and tool, its output named, not sent.
fn placeholder(message: &ContextMessage, tokens: u64) -> Option<crate::message::Message> {
    let mut result = message.to_message()?;
    let tool = result.extra_str("toolName").unwrap_or("tool").to_string();
    result.content = Content::Text(format!(
        "[Cleared from this request to save context: about {tokens} tokens of {tool} output. The session keeps it; call the tool again if it is needed.]"
    ));
    result.extra.remove("details");
    result.extra.insert("isError".into(), Value::Bool(false));
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use serde_json::json;

    fn result(id: &str, text: &str) -> ContextMessage {
        let mut m = Message::user(text);
        m.role = Role::ToolResult;
        m.extra.insert("toolCallId".into(), json!(id));
        m.extra.insert("toolName".into(), json!("read"));
        ContextMessage::from(m)
    }

    fn texts(messages: &[ContextMessage]) -> Vec<String> {
        messages.iter().map(|m| m.to_message().map(|m| m.text()).unwrap_or_default()).collect()
    }

    #[test]
    fn the_oldest_results_are_cleared_in_batches_and_the_newest_kept_whole() {
        // Each result ~258 tokens (1000 characters + overhead).
        let conversation = |n: usize| -> Vec<ContextMessage> {
            let mut out = vec![ContextMessage::from(Message::user("task"))];
            out.extend((0..n).map(|i| result(&format!("c{i}"), &format!("{i:02}").repeat(500))));
            out
        };
        // Within the kept output: nothing changes.
        let small = texts(&clear_old_tool_results(conversation(3), 1000));
        assert!(small.iter().all(|t| !t.starts_with("[Cleared")), "{small:?}");
        // Past it: the oldest cleared, named; the newest whole; the task untouched.
        let big = texts(&clear_old_tool_results(conversation(10), 1000));
        assert_eq!(big[0], "task");
        assert!(big[1].starts_with("[Cleared from this request") && big[1].contains("of read output"), "{}", big[1]);
        assert!(big.last().unwrap().starts_with("0909"));
        let kept: usize = big.iter().filter(|t| !t.starts_with("[Cleared")).count() - 1;
        assert!((3..=6).contains(&kept), "{kept} results kept of 10");
        // As results keep coming, what is cleared changes once per batch (two results here),
        // and what was cleared before stays cleared, the same bytes: the prefix is stable.
        let cleared = |t: &[String]| t.iter().filter(|t| t.starts_with("[Cleared")).count();
        let runs: Vec<Vec<String>> = (10..=20).map(|n| texts(&clear_old_tool_results(conversation(n), 1000))).collect();
        let changes = runs.windows(2).filter(|w| cleared(&w[0]) != cleared(&w[1])).count();
        assert!((3..=6).contains(&changes), "{changes} changes over 10 requests");
        for w in runs.windows(2) {
            let before = cleared(&w[0]);
            assert_eq!(&w[1][..=before], &w[0][..=before]);
        }
    }
}
