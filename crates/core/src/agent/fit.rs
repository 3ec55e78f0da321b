//! Fitting a conversation into a model's context window.
//!
//! Tokens are estimated as characters / 4 (plus a small overhead per message): no tokenizer
//! matches every provider, and the estimate errs on the generous side for English and code.
//! When the conversation is too large, the largest tool outputs are shortened first, then the
//! oldest turns after the original task are left out; a note saying what was elided opens the
//! fitted conversation.

use std::ops::Range;

use crate::message::{Content, ContentBlock, ContextMessage, Message, Role};

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

/// Shortens every text and thinking block of `content` to `keep` characters; whether any was.
fn shorten_blocks(content: &mut Content, keep: usize) -> bool {
    let mut changed = false;
    let blocks: Vec<ContentBlock> = content
        .blocks()
        .into_iter()
        .map(|mut b| {
            if let Some(t) = b.text.as_mut() {
                let shortened = elide_middle(t, keep);
                changed |= shortened != *t;
                *t = shortened;
            }
            if let Some(t) = b.thinking.as_mut() {
                let shortened = elide_middle(t, keep);
                if shortened != *t {
                    // The signature vouches for the whole text: a cut block is sent as unsigned
                    // thinking is (not at all).
                    b.extra.remove("thinkingSignature");
                    *t = shortened;
                    changed = true;
                }
            }
            b
        })
        .collect();
    *content = Content::Blocks(blocks);
    changed
}

/// Room for the note that opens a fitted conversation.
const NOTE_TOKENS: usize = 80;
/// What an elision mark (`[… elided N characters …]`) adds to a shortened text, in characters.
const MARK_CHARS: usize = 40;

fn is_user(message: &ContextMessage) -> bool {
    message.role() == Some(Role::User)
}

fn is_tool_result(message: &ContextMessage) -> bool {
    message.role() == Some(Role::ToolResult)
}

/// The conversation being fitted: the messages and each one's estimate, kept in step.
struct Fitting {
    messages: Vec<ContextMessage>,
    tokens: Vec<usize>,
    budget: usize,
    elisions: Elisions,
}

impl Fitting {
    fn total(&self) -> usize {
        self.tokens.iter().sum()
    }

    fn over(&self) -> usize {
        self.total().saturating_sub(self.budget)
    }

    /// Shortens message `i` to `keep` characters a block (`keep` given its content's length in
    /// characters), parsing it first when it is stored. Whether it got shorter.
    fn shorten(&mut self, i: usize, keep: impl FnOnce(usize) -> usize) -> bool {
        let Some(mut message) = self.messages[i].to_message() else { return false };
        let keep = keep(message.content.char_len());
        if !shorten_blocks(&mut message.content, keep) {
            return false;
        }
        self.tokens[i] = estimate_tokens(&message);
        self.messages[i] = message.into();
        true
    }

    /// Step 2 of [`fit_request`] on the messages as they are now.
    fn drop_oldest(&mut self) {
        let dropped = oldest_to_drop(&self.messages, self.budget, |i| self.tokens[i]);
        self.messages.drain(dropped.clone());
        self.tokens.drain(dropped.clone());
        self.elisions.dropped_messages += dropped.len();
    }
}

/// Oldest turns: the messages to leave out, after the first user message (the original task,
/// always kept), for the rest to fit `budget` counted by `tokens` (of the message at an index),
/// and on past any tool results that follow, so that no tool result loses its call: the kept
/// stretch starts at a user or an assistant message, the latest tool turns of a long tool loop
/// included. The last message (the request) is always kept. Without a user message before the
/// last, from the front.
fn oldest_to_drop(messages: &[ContextMessage], budget: usize, tokens: impl Fn(usize) -> usize) -> Range<usize> {
    let last = messages.len().saturating_sub(1);
    let start = messages[..last].iter().position(is_user).map_or(0, |first| first + 1);
    let mut total: usize = (0..messages.len()).map(&tokens).sum();
    let mut end = start;
    while end < last && (total > budget || (end > start && is_tool_result(&messages[end]))) {
        total -= tokens(end);
        end += 1;
    }
    start..end
}

/// The least `message` can be brought down to by steps 1 and 1b, from its size alone: what no
/// shortening makes fit is left out before any message is parsed.
fn floor_tokens(message: &ContextMessage, budget: usize) -> usize {
    let tokens = estimate_context_tokens(message);
    let mut floor = tokens;
    if size_chars(message) > MIN_TOOL_OUTPUT_CHARS * 2 && message.role() == Some(Role::ToolResult) {
        floor = floor.min((MIN_TOOL_OUTPUT_CHARS + MARK_CHARS).div_ceil(CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS);
    }
    if tokens > budget / 2 {
        floor = floor.min(budget / 4 + MARK_CHARS.div_ceil(CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS);
    }
    floor
}

/// A message's size in characters, at most: its JSON text's length when it is stored (the
/// content is a part of it), its content's otherwise.
fn size_chars(message: &ContextMessage) -> usize {
    match message {
        ContextMessage::Stored(stored) => stored.json().len(),
        ContextMessage::Made(message) => message.content.char_len(),
    }
}

/// Returns `messages` reduced to at most `budget` estimated tokens, and what was elided.
///
/// In order: the largest tool outputs are shortened (never below a minimum), then single
/// messages larger than half the budget are cut in the middle, then the oldest turns are left
/// out (after the first user message, which is the original task and always kept; never between
/// a tool call and its result; the last message, the request, is always kept), then whatever is
/// still too large is cut in the middle, the largest first; a note saying what was elided opens the
/// result. Messages are counted by [`estimate_context_tokens`] (a stored one by its JSON's
/// length) and only those shortened are parsed; the turns no shortening could make fit are
/// left out first, so that a session far larger than the window is not parsed to be dropped.
pub fn fit_request(mut messages: Vec<ContextMessage>, budget: usize) -> (Vec<ContextMessage>, Elisions) {
    let budget = budget.saturating_sub(NOTE_TOKENS);
    if messages.iter().map(estimate_context_tokens).sum::<usize>() <= budget {
        return (messages, Elisions::default());
    }
    // 0. What would not fit with every output shortened as far as steps 1 and 1b go.
    let dropped = oldest_to_drop(&messages, budget, |i| floor_tokens(&messages[i], budget));
    messages.drain(dropped.clone());
    // What is left of a large session is small: its list of every message goes now.
    messages.shrink_to_fit();
    let tokens = messages.iter().map(estimate_context_tokens).collect();
    let elisions = Elisions { dropped_messages: dropped.len(), ..Elisions::default() };
    let mut f = Fitting { messages, tokens, budget, elisions };
    // 1. Largest tool outputs first, each cut once to what is needed (never below the minimum).
    let mut tool_results: Vec<(usize, usize)> = (0..f.messages.len())
        .filter(|&i| f.messages[i].role() == Some(Role::ToolResult))
        .map(|i| (i, size_chars(&f.messages[i])))
        .filter(|&(_, size)| size > MIN_TOOL_OUTPUT_CHARS * 2)
        .collect();
    tool_results.sort_by_key(|&(_, size)| std::cmp::Reverse(size));
    for (i, _) in tool_results {
        let over = f.over();
        if over == 0 {
            break;
        }
        let keep = |len: usize| len.saturating_sub(over * CHARS_PER_TOKEN + 100).max(MIN_TOOL_OUTPUT_CHARS);
        let long = |len: usize| if len > MIN_TOOL_OUTPUT_CHARS * 2 { keep(len) } else { len };
        if f.shorten(i, long) {
            f.elisions.shortened_tool_outputs += 1;
        }
    }
    // 1b. A single message larger than half the budget (a pasted log, say) would make step 2
    // drop the whole transcript to get rid of it: cut such messages in the middle first.
    let last = f.messages.len() - 1;
    let half = f.budget / 2;
    let quarter_chars = (f.budget / 4) * CHARS_PER_TOKEN;
    for i in 0..last {
        if f.over() == 0 {
            break;
        }
        if f.tokens[i] > half && f.shorten(i, |_| quarter_chars) {
            f.elisions.truncated_messages += 1;
        }
    }
    // 2. Oldest turns.
    f.drop_oldest();
    // 3. Whatever is still too long (the task and the latest messages) is cut in the middle,
    // the largest first.
    let mut cut = vec![false; f.messages.len()];
    while f.over() > 0 {
        let Some(i) = (0..f.messages.len()).filter(|&i| !cut[i]).max_by_key(|&i| f.tokens[i]) else { break };
        cut[i] = true;
        let over = f.over();
        let keep = |len: usize| len.saturating_sub(over * CHARS_PER_TOKEN + 200).max(MIN_TOOL_OUTPUT_CHARS);
        if f.shorten(i, keep) {
            f.elisions.truncated_messages += 1;
        }
    }
    let Fitting { mut messages, elisions, .. } = f;
    if !elisions.is_empty() {
        messages.insert(0, Message::user(elisions.note()).into());
    }
    (messages, elisions)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::message::StoredMessage;

    fn tool_result(len: usize) -> Message {
        let mut m = Message::user("x".repeat(len));
        m.role = Role::ToolResult;
        m
    }

    /// `message` as a session file stores it: JSON text, unparsed.
    fn stored(message: &Message) -> ContextMessage {
        let json = serde_json::to_string(message).unwrap();
        let len = json.len();
        ContextMessage::Stored(StoredMessage::new(Arc::new(json), 0..len))
    }

    fn made(messages: Vec<Message>) -> Vec<ContextMessage> {
        messages.into_iter().map(ContextMessage::from).collect()
    }

    fn total(messages: &[ContextMessage]) -> usize {
        messages.iter().map(estimate_context_tokens).sum()
    }

    fn text(message: &ContextMessage) -> String {
        message.to_message().unwrap().text()
    }

    /// One turn of stored messages: the user's step, a call, its result of `output` characters,
    /// the answer.
    fn turn(n: usize, output: usize) -> Vec<Message> {
        let mut call = Message::assistant("openai-completions", "mock", "m");
        call.content = Content::Blocks(vec![ContentBlock::tool_call(format!("call_{n}"), "bash", serde_json::json!({"command": "ls"}))]);
        let mut result = tool_result(output);
        result.extra.insert("toolCallId".into(), format!("call_{n}").into());
        let mut answer = Message::assistant("openai-completions", "mock", "m");
        answer.push_text(&format!("answer {n}"));
        vec![Message::user(format!("step {n}")), call, result, answer]
    }

    #[test]
    fn fitting_shortens_tool_outputs_before_dropping_turns() {
        let msgs = made(vec![Message::user("q1"), tool_result(40_000), Message::user("q2")]);
        let (out, el) = fit_request(msgs, 2_000);
        assert!(total(&out) <= 2_000);
        assert_eq!(el.dropped_messages, 0);
        assert!(el.shortened_tool_outputs >= 1);
        assert!(text(&out[0]).contains("too long"));
        assert_eq!(out.last().map(text), Some("q2".to_string()));
    }

    #[test]
    fn one_huge_message_is_cut_rather_than_dropping_the_transcript() {
        let msgs = made(vec![Message::user("first question"), Message::user("y".repeat(200_000)), Message::user("q2")]);
        let (out, el) = fit_request(msgs, 4_000);
        assert!(total(&out) <= 4_000);
        assert_eq!(el.dropped_messages, 0, "{el:?}");
        assert!(out.iter().any(|m| text(m) == "first question"));
    }

    #[test]
    fn conversation_within_budget_is_untouched() {
        let msgs = vec![stored(&Message::user("hello")), stored(&Message::user("again"))];
        let (out, el) = fit_request(msgs.clone(), 1_000);
        assert!(el.is_empty());
        let json = |v: &[ContextMessage]| v.iter().map(|m| match m {
            ContextMessage::Stored(s) => s.json().to_string(),
            ContextMessage::Made(_) => panic!("parsed: {m:?}"),
        }).collect::<Vec<_>>();
        assert_eq!(json(&out), json(&msgs));
    }

    /// The rule of the automatic handoff: the original task and the latest turns stay, the turns
    /// between go, whole (no tool result without its call), and what is not shortened stays the
    /// stored text, unparsed.
    #[test]
    fn the_first_user_message_and_the_latest_turns_are_kept() {
        let mut messages: Vec<Message> = Vec::new();
        for n in 0..200 {
            messages.extend(turn(n, 300));
        }
        messages.push(Message::user("write the handoff"));
        let msgs: Vec<ContextMessage> = messages.iter().map(stored).collect();
        let budget = total(&msgs) / 10;
        let (out, el) = fit_request(msgs, budget);
        assert!(total(&out) <= budget, "{} > {budget}", total(&out));
        assert!(el.dropped_messages > 0, "{el:?}");
        assert_eq!(el.shortened_tool_outputs, 0, "outputs at the minimum are not shortened");
        let texts: Vec<String> = out.iter().map(text).collect();
        assert!(texts[0].contains("oldest messages were left out"), "{texts:?}");
        assert_eq!(texts[1], "step 0", "the original task");
        // Then the latest messages, none of them a result without its call.
        assert_eq!(out.len() + el.dropped_messages, 801 + 1);
        assert_eq!(texts[out.len() - 2], "answer 199");
        assert_eq!(texts.last().map(String::as_str), Some("write the handoff"));
        assert_every_result_has_its_call(&out);
        // Nothing was changed but the note: every kept message is still its stored text.
        assert!(out[1..].iter().all(|m| matches!(m, ContextMessage::Stored(_))));
    }

    fn assert_every_result_has_its_call(out: &[ContextMessage]) {
        let parsed: Vec<Message> = out.iter().filter_map(ContextMessage::to_message).collect();
        assert!(parsed[1].role != Role::ToolResult || parsed.len() < 2);
        for (i, result) in parsed.iter().enumerate().filter(|(_, m)| m.role == Role::ToolResult) {
            let id = result.extra_str("toolCallId").unwrap();
            let called = parsed[..i].iter().any(|m| m.content.blocks().iter().any(|b| b.extra_str("id") == Some(id)));
            assert!(called, "{id} lost its call");
        }
    }

    /// One prompt that ran a long tool loop (the automatic handoff's case mid-loop): its latest
    /// calls and results stay, the oldest go, and no result loses its call.
    #[test]
    fn a_long_tool_loop_keeps_its_latest_calls_and_results() {
        let mut messages = vec![Message::user("fix the build")];
        for n in 0..300 {
            let mut turn = turn(n, 1_000);
            messages.extend(turn.drain(1..3));
        }
        messages.push(Message::user("write the handoff"));
        let msgs: Vec<ContextMessage> = messages.iter().map(stored).collect();
        let (out, el) = fit_request(msgs, 20_000);
        assert!(total(&out) <= 20_000, "{}", total(&out));
        assert_eq!(text(&out[1]), "fix the build");
        assert!(out.len() > 20, "only {} messages kept: {el:?}", out.len());
        let last_result = out[out.len() - 2].to_message().unwrap();
        assert_eq!(last_result.extra_str("toolCallId"), Some("call_299"));
        assert_every_result_has_its_call(&out);
    }

    /// A session far larger than the budget: what no shortening makes fit is left out before
    /// any message is parsed, so only the kept turns' outputs are shortened (parsed).
    #[test]
    fn a_session_far_over_the_budget_parses_only_what_it_keeps() {
        let mut messages: Vec<Message> = Vec::new();
        for n in 0..2_000 {
            messages.extend(turn(n, 5_000));
        }
        messages.push(Message::user("write the handoff"));
        let msgs: Vec<ContextMessage> = messages.iter().map(stored).collect();
        let (out, el) = fit_request(msgs, 20_000);
        assert!(total(&out) <= 20_000, "{}", total(&out));
        assert_eq!(text(&out[1]), "step 0");
        let made = out.iter().filter(|m| matches!(m, ContextMessage::Made(_))).count();
        // The note and the shortened outputs, all of them kept.
        assert_eq!(made, 1 + el.shortened_tool_outputs, "{el:?}");
        assert!(el.shortened_tool_outputs > 10 && el.shortened_tool_outputs < 200, "{el:?}");
        // The outputs kept are shortened to what is needed: the turns kept are nearly as many as
        // the minimum outputs allow.
        assert!(out.len() > 4 * 50, "{} messages kept", out.len());
    }

    #[test]
    fn without_a_user_message_before_the_request_it_drops_from_the_front() {
        let msgs = made(vec![tool_result(4_000), tool_result(4_000), Message::user("q")]);
        let (out, el) = fit_request(msgs, 150);
        assert!(total(&out) <= 150, "{}", total(&out));
        assert_eq!(out.last().map(text), Some("q".to_string()));
        assert!(el.dropped_messages >= 1, "{el:?}");
    }
}
