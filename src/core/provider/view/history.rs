//! pi's history made acceptable to strict servers, on views.

use super::{joined_is_blank, BlockView, ContentView, MessageView, Str};
use crate::core::message::{Role, StopReason};

/// Messages as they go on the wire: what pi would send, fixed up so strict servers accept it.
///
/// pi keeps aborted and failed turns in the session, and a turn can end between a tool call and
/// its result (abort, crash). OpenAI and Anthropic both reject a tool call without its result
/// and a result without its call, so empty failed turns are dropped, missing results are filled
/// with an error result and orphaned results are dropped.
pub(in crate::core::provider) fn prepare<'a>(messages: Vec<MessageView<'a>>) -> Vec<MessageView<'a>> {
    let mut out = Vec::with_capacity(messages.len());
    // Tool calls of the last assistant message still waiting for their result: their ids.
    let mut pending: Vec<Str<'a>> = Vec::new();
    for msg in messages {
        match &msg.role {
            Role::ToolResult => {
                let id = msg.tool_call_id.as_ref().map(Str::text).unwrap_or_default();
                if let Some(pos) = pending.iter().position(|p| p.text() == id) {
                    pending.remove(pos);
                    out.push(msg);
                } else {
                    tracing::debug!(tool_call_id = %id, "dropping a tool result without its call");
                }
            }
            Role::User | Role::Assistant => {
                let calls = msg.content.blocks_of("toolCall");
                let failed = matches!(msg.stop_reason, Some(StopReason::Error) | Some(StopReason::Aborted));
                if msg.is_assistant() && failed && calls.is_empty() && joined_is_blank(&msg.content.text_pieces()) {
                    // A turn that failed before saying anything is as if it never happened.
                    continue;
                }
                fill_missing_results(&mut out, &mut pending);
                if msg.is_assistant() {
                    pending = calls.iter().map(|b| b.id.clone().unwrap_or(Str::plain(""))).collect();
                }
                out.push(msg);
            }
            // bashExecution, custom messages…: pi's own bookkeeping, not model input.
            Role::Other(_) => {}
        }
    }
    fill_missing_results(&mut out, &mut pending);
    out
}

fn fill_missing_results<'a>(out: &mut Vec<MessageView<'a>>, pending: &mut Vec<Str<'a>>) {
    for id in pending.drain(..) {
        out.push(MessageView {
            role: Role::ToolResult,
            content: ContentView::Blocks(vec![BlockView::text(Str::plain("No result provided"))]),
            stop_reason: None,
            tool_call_id: Some(id),
            is_error: Some(true),
            provider: None,
            api: None,
            model: None,
        });
    }
}
