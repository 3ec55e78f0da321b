//! pi's history made acceptable to strict servers, on views.

use super::{BlockView, ContentView, MessageView, Str};
use crate::message::{Role, StopReason};
use crate::provider::types::ProviderConfig;

/// Messages as they go on the wire, by pi's rules for replaying history (pi-ai's
/// `transformMessages`), made acceptable to strict servers:
///
/// - an assistant turn that ended in an error or was aborted is not sent (it may hold partial
///   content: a half-written call, reasoning without its answer), nor results for its calls;
/// - thinking written by another model (`config` is the model spoken to) goes as text, its
///   redacted thinking and its calls' thought signatures not at all (they are only valid for
///   the model that wrote them);
/// - a call without its result gets pi's synthetic one, an error "No result provided", before
///   the next user or assistant message (a failed turn skipped in between does not count: a
///   result after it still answers the call, where pi would send both);
/// - a result without its call is dropped (OpenAI and Anthropic reject it).
///
/// The views are changed in place: texts stay borrowed from the stored JSON.
pub(in crate::provider) fn prepare<'a>(messages: Vec<MessageView<'a>>, config: &ProviderConfig) -> Vec<MessageView<'a>> {
    let mut out = Vec::with_capacity(messages.len());
    // Tool calls of the last assistant message still waiting for their result: their ids.
    let mut pending: Vec<Str<'a>> = Vec::new();
    for mut msg in messages {
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
            Role::Assistant if matches!(msg.stop_reason, Some(StopReason::Error) | Some(StopReason::Aborted)) => {}
            Role::User | Role::Assistant => {
                fill_missing_results(&mut out, &mut pending);
                if msg.is_assistant() {
                    if !msg.same_model(config) {
                        foreign_thinking_as_text(&mut msg.content);
                        foreign_signatures_dropped(&mut msg.content);
                    }
                    let calls = msg.content.blocks_of("toolCall");
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

/// Another model's thinking, as pi replays it: blank and redacted blocks dropped, the others
/// text blocks in their place.
fn foreign_thinking_as_text(content: &mut ContentView<'_>) {
    let ContentView::Blocks(blocks) = content else { return };
    if !blocks.iter().any(|b| b.is("thinking")) {
        return;
    }
    blocks.retain(|b| !b.is("thinking") || (b.redacted != Some(true) && b.thinking.as_ref().is_some_and(|t| !t.is_blank())));
    for block in blocks.iter_mut().filter(|b| b.is("thinking")) {
        *block = BlockView::text(block.thinking.take().unwrap_or(Str::plain("")));
    }
}

/// Another model's call signatures, dropped as pi drops them (`transformMessages`).
fn foreign_signatures_dropped(content: &mut ContentView<'_>) {
    let ContentView::Blocks(blocks) = content else { return };
    for block in blocks.iter_mut() {
        block.thought_signature = None;
    }
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
