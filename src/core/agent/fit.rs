//! Fitting a conversation into a model's context window.
//!
//! Tokens are estimated as characters / 4 (plus a small overhead per message): no tokenizer
//! matches every provider, and the estimate errs on the generous side for English and code.
//! When the conversation is too large, the largest tool outputs are shortened first, then the
//! oldest turns are left out; a note saying what was elided opens the fitted conversation.

use crate::core::message::{Content, ContentBlock, ContextMessage, Message, Role};

const CHARS_PER_TOKEN: usize = 4;
const MESSAGE_OVERHEAD_TOKENS: usize = 8;
/// Tool outputs are never shortened below this many characters.
const MIN_TOOL_OUTPUT_CHARS: usize = 400;

pub fn estimate_tokens(message: &Message) -> usize {
    message.content.char_len().div_ceil(CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS
}

pub fn estimate_text_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(CHARS_PER_TOKEN)
}

/// The characters of text that make `tokens` estimated tokens.
pub fn chars_of_tokens(tokens: usize) -> usize {
    tokens * CHARS_PER_TOKEN
}

/// Tokens a request leaves for the reply: `max_tokens`, but at most a quarter of the window. A
/// small local model configured with its window only keeps the default max_tokens, which alone
/// would fill the window and leave the request nothing but a truncated instruction.
pub fn reply_room(max_tokens: u64, window: u64) -> u64 {
    max_tokens.min(window / 4)
}

/// The estimate of `len` bytes of text (JSON counted unparsed).
pub fn estimate_text_tokens_of_len(len: usize) -> usize {
    len.div_ceil(CHARS_PER_TOKEN)
}

/// The estimate of a message on its way to the model. A stored message is counted from its JSON
/// text without parsing it (bytes / 4: the keys and escapes make it err on the generous side),
/// so estimating a large session's context costs a sum of lengths.
pub fn estimate_context_tokens(message: &ContextMessage) -> usize {
    match message {
        ContextMessage::Stored(stored) => estimate_text_tokens_of_len(stored.json().len()) + MESSAGE_OVERHEAD_TOKENS,
        ContextMessage::Made(message) => estimate_tokens(message),
    }
}

/// What `fit` removed, for the note in the request and for logs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Elisions {
    pub shortened_tool_outputs: usize,
    pub dropped_messages: usize,
    pub truncated_messages: usize,
}

impl Elisions {
    pub fn is_empty(&self) -> bool {
        *self == Elisions::default()
    }

    pub fn note(&self) -> String {
        let mut parts = Vec::new();
        if self.dropped_messages > 0 {
            parts.push(format!("the {} oldest messages were left out", self.dropped_messages));
        }
        if self.shortened_tool_outputs > 0 {
            parts.push(format!("{} long tool outputs were shortened", self.shortened_tool_outputs));
        }
        if self.truncated_messages > 0 {
            parts.push(format!("{} very long messages were cut in the middle", self.truncated_messages));
        }
        format!(
            "[Note: this conversation was too long for the model's context window, so {}. \
             Elided parts are marked with [… elided …].]",
            parts.join(" and ")
        )
    }
}

/// Keeps the head and tail of `text`, `keep` characters in all.
fn elide_middle(text: &str, keep: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= keep {
        return text.to_string();
    }
    let head = keep * 2 / 3;
    let tail = keep - head;
    let removed = chars.len() - keep;
    let mut out: String = chars[..head].iter().collect();
    out.push_str(&format!("\n[… elided {removed} characters …]\n"));
    out.extend(&chars[chars.len() - tail..]);
    out
}

fn shorten_blocks(content: &mut Content, keep: usize) {
    let blocks: Vec<ContentBlock> = content
        .blocks()
        .into_iter()
        .map(|mut b| {
            if let Some(t) = b.text.as_mut() {
                *t = elide_middle(t, keep);
            }
            if let Some(t) = b.thinking.as_mut() {
                let shortened = elide_middle(t, keep);
                if shortened != *t {
                    // The signature vouches for the whole text: a cut block is sent as unsigned
                    // thinking is (not at all).
                    b.extra.remove("thinkingSignature");
                    *t = shortened;
                }
            }
            b
        })
        .collect();
    *content = Content::Blocks(blocks);
}

/// Returns `messages` reduced to at most `budget` estimated tokens, and what was elided.
/// The last message (the request itself) is always kept.
pub fn fit(messages: &[Message], budget: usize) -> (Vec<Message>, Elisions) {
    let mut out = messages.to_vec();
    let mut elisions = Elisions::default();
    let total = |v: &[Message]| v.iter().map(estimate_tokens).sum::<usize>();
    // Room for the note itself.
    let budget = budget.saturating_sub(80);
    if total(&out) <= budget {
        return (out, elisions);
    }
    // 1. Largest tool outputs first, each cut once to what is needed (never below the minimum).
    let mut tool_results: Vec<(usize, usize)> = out
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::ToolResult)
        .map(|(i, m)| (i, m.content.char_len()))
        .filter(|(_, len)| *len > MIN_TOOL_OUTPUT_CHARS * 2)
        .collect();
    tool_results.sort_by_key(|&(_, len)| std::cmp::Reverse(len));
    for (i, len) in tool_results {
        let over = total(&out).saturating_sub(budget);
        if over == 0 {
            break;
        }
        let keep = len.saturating_sub(over * CHARS_PER_TOKEN + 100).max(MIN_TOOL_OUTPUT_CHARS);
        shorten_blocks(&mut out[i].content, keep);
        elisions.shortened_tool_outputs += 1;
    }
    // 1b. A single message larger than half the window (a pasted log, say) would make step 2
    // drop the whole transcript to get rid of it: cut such messages in the middle first.
    let last = out.len().saturating_sub(1);
    for i in 0..last {
        if total(&out) <= budget {
            break;
        }
        if estimate_tokens(&out[i]) > budget / 2 {
            shorten_blocks(&mut out[i].content, (budget / 4) * CHARS_PER_TOKEN);
            elisions.truncated_messages += 1;
        }
    }
    // 2. Oldest turns: drop from the front, then up to the next user message so that no
    // tool result loses its call and the conversation still starts with the user.
    while total(&out) > budget && out.len() > 1 {
        out.remove(0);
        elisions.dropped_messages += 1;
        while out.len() > 1 && out[0].role != Role::User {
            out.remove(0);
            elisions.dropped_messages += 1;
        }
    }
    // 3. Whatever is still too long (a single huge message) is cut in the middle.
    let over = total(&out).saturating_sub(budget);
    if over > 0 {
        if let Some((i, len)) = out.iter().enumerate().map(|(i, m)| (i, m.content.char_len())).max_by_key(|(_, l)| *l) {
            let keep = len.saturating_sub(over * CHARS_PER_TOKEN + 200).max(MIN_TOOL_OUTPUT_CHARS);
            shorten_blocks(&mut out[i].content, keep);
            elisions.truncated_messages += 1;
        }
    }
    if !elisions.is_empty() {
        out.insert(0, Message::user(elisions.note()));
    }
    (out, elisions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_result(len: usize) -> Message {
        let mut m = Message::user("x".repeat(len));
        m.role = Role::ToolResult;
        m
    }

    #[test]
    fn fitting_shortens_tool_outputs_before_dropping_turns() {
        let msgs = vec![Message::user("q1"), tool_result(40_000), Message::user("q2")];
        let (out, el) = fit(&msgs, 2_000);
        assert!(out.iter().map(estimate_tokens).sum::<usize>() <= 2_000);
        assert_eq!(el.dropped_messages, 0);
        assert!(el.shortened_tool_outputs >= 1);
        assert!(out[0].text().contains("too long"));
        assert_eq!(out.last().map(Message::text), Some("q2".to_string()));
    }

    #[test]
    fn one_huge_message_is_cut_rather_than_dropping_the_transcript() {
        let msgs = vec![Message::user("first question"), Message::user("y".repeat(200_000)), Message::user("q2")];
        let (out, el) = fit(&msgs, 4_000);
        assert!(out.iter().map(estimate_tokens).sum::<usize>() <= 4_000);
        assert_eq!(el.dropped_messages, 0, "{el:?}");
        assert!(out.iter().any(|m| m.text() == "first question"));
    }

    #[test]
    fn conversation_within_budget_is_untouched() {
        let msgs = vec![Message::user("hello"), Message::user("again")];
        let (out, el) = fit(&msgs, 1_000);
        assert_eq!(out, msgs);
        assert!(el.is_empty());
    }
}
