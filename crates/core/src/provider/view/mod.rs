//! Messages as the wire formats read them, and the JSON writing that copies stored text.
//!
//! A request repeats the whole conversation: for a long session, megabytes of text that the
//! session file already holds as JSON. Parsing it into `Message`s, building value trees and
//! serializing them again was most of what a prompt cost (issue "Performance 2"). A
//! [`MessageView`] borrows from the stored JSON and keeps each string as its JSON token
//! ([`Str::Json`]); the writer copies the token as it is, and re-encodes only a string that is
//! not in the form serde_json writes (`\u00e9`, `\/`, upper-case hex), so the body's bytes are
//! the ones a serializer would produce (tests/wire_bytes.rs). Messages made in memory are
//! viewed through the same type ([`Str::Plain`]), so each format has one writer.
//!
//! [`history::prepare`] is pi's history made acceptable to strict servers, on views; [`json`]
//! writes the body.

mod history;
mod json;

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::types::ProviderConfig;
use crate::message::{tool_result_keys, Content, ContentBlock, ContextMessage, Message, Role, StopReason};

pub(super) use history::prepare;
pub(super) use json::{body_capacity, JsonOut, List, Str};

/// A tool call's arguments as stored: a JSON value (an object, or pi's legacy string).
#[derive(Clone, Debug)]
pub(super) enum Args<'a> {
    Json(&'a RawValue),
    Value(&'a Value),
}

impl Args<'_> {
    /// The arguments as a value (they are small: parsed when needed, so that numbers are
    /// written as serde_json writes them).
    pub(super) fn value(&self) -> Cow<'_, Value> {
        match self {
            Args::Json(raw) => Cow::Owned(serde_json::from_str(raw.get()).unwrap_or(Value::Null)),
            Args::Value(v) => Cow::Borrowed(*v),
        }
    }
}

/// One content block as the wire formats need it. `None` fields are missing or not of the
/// type the field has (as `ContentBlock::extra_str` reads them).
#[derive(Clone, Debug, Default)]
pub(super) struct BlockView<'a> {
    pub(super) kind: Cow<'a, str>,
    pub(super) text: Option<Str<'a>>,
    pub(super) thinking: Option<Str<'a>>,
    pub(super) signature: Option<Str<'a>>,
    /// A text block's `textSignature` (OpenAI Responses: its message item's id and phase).
    pub(super) text_signature: Option<Str<'a>>,
    pub(super) redacted: Option<bool>,
    pub(super) id: Option<Str<'a>>,
    pub(super) name: Option<Str<'a>>,
    pub(super) arguments: Option<Args<'a>>,
    /// A tool call's `thoughtSignature` (Gemini's), for the model that signed it only.
    pub(super) thought_signature: Option<Str<'a>>,
    pub(super) data: Option<Str<'a>>,
    pub(super) mime_type: Option<Str<'a>>,
}

impl<'a> BlockView<'a> {
    pub(super) fn of(block: &'a ContentBlock) -> Self {
        let extra = |k: &str| block.extra_str(k).map(Str::plain);
        BlockView {
            kind: Cow::Borrowed(&block.kind),
            text: block.text.as_deref().map(Str::plain),
            thinking: block.thinking.as_deref().map(Str::plain),
            signature: extra("thinkingSignature"),
            text_signature: extra("textSignature"),
            redacted: block.extra.get("redacted").and_then(Value::as_bool),
            id: extra("id"),
            name: extra("name"),
            arguments: block.extra.get("arguments").map(Args::Value),
            thought_signature: extra("thoughtSignature"),
            data: extra("data"),
            mime_type: extra("mimeType"),
        }
    }

    pub(super) fn text(text: Str<'a>) -> Self {
        BlockView { kind: Cow::Borrowed("text"), text: Some(text), ..BlockView::default() }
    }

    pub(super) fn is(&self, kind: &str) -> bool {
        self.kind == kind
    }

    /// A thinking block's signature when it is not blank.
    pub(super) fn thinking_signature(&self) -> Option<&Str<'a>> {
        self.signature.as_ref().filter(|s| !s.is_blank())
    }
}

#[derive(Clone, Debug)]
pub(super) enum ContentView<'a> {
    Text(Str<'a>),
    Blocks(Vec<BlockView<'a>>),
}

impl<'a> ContentView<'a> {
    /// The texts that `Content::joined_text` joins with `\n`: the text, or every `text`
    /// block's text.
    pub(super) fn text_pieces(&self) -> Vec<&Str<'a>> {
        match self {
            ContentView::Text(s) => vec![s],
            ContentView::Blocks(blocks) => blocks.iter().filter(|b| b.is("text")).filter_map(|b| b.text.as_ref()).collect(),
        }
    }

    pub(super) fn blocks_of(&self, kind: &str) -> Vec<&BlockView<'a>> {
        match self {
            ContentView::Text(_) => Vec::new(),
            ContentView::Blocks(blocks) => blocks.iter().filter(|b| b.is(kind)).collect(),
        }
    }
}

/// Whether pieces joined with `\n` make an empty text.
pub(super) fn joined_is_empty(pieces: &[&Str<'_>]) -> bool {
    pieces.len() <= 1 && pieces.iter().all(|p| p.is_empty())
}

/// Whether pieces joined with `\n` (whitespace) make a blank text.
pub(super) fn joined_is_blank(pieces: &[&Str<'_>]) -> bool {
    pieces.iter().all(|p| p.is_blank())
}

/// One message as the wire formats need it.
#[derive(Clone, Debug)]
pub(super) struct MessageView<'a> {
    pub(super) role: Role,
    pub(super) content: ContentView<'a>,
    pub(super) stop_reason: Option<StopReason>,
    pub(super) tool_call_id: Option<Str<'a>>,
    pub(super) is_error: Option<bool>,
    pub(super) provider: Option<Str<'a>>,
    pub(super) api: Option<Str<'a>>,
    pub(super) model: Option<Str<'a>>,
}

impl<'a> MessageView<'a> {
    fn of(message: &'a Message) -> Self {
        let extra = |k: &str| message.extra_str(k).map(Str::plain);
        MessageView {
            role: message.role.clone(),
            content: match &message.content {
                Content::Text(s) => ContentView::Text(Str::plain(s)),
                Content::Blocks(blocks) => ContentView::Blocks(blocks.iter().map(BlockView::of).collect()),
            },
            stop_reason: message.stop_reason,
            tool_call_id: extra(tool_result_keys::CALL_ID),
            is_error: message.extra.get(tool_result_keys::IS_ERROR).and_then(Value::as_bool),
            provider: extra("provider"),
            api: extra("api"),
            model: extra("model"),
        }
    }

    /// The view of a message of the context; `None` for a stored message that does not read
    /// as one (as `Message` would refuse it: such a message is left out of the request).
    pub(super) fn read(message: &'a ContextMessage) -> Option<Self> {
        match message {
            ContextMessage::Made(m) => Some(Self::of(m)),
            ContextMessage::Stored(stored) => match serde_json::from_str(stored.json()) {
                Ok(view) => Some(view),
                Err(e) => {
                    tracing::debug!(error = %e, "leaving an unreadable stored message out of the request");
                    None
                }
            },
        }
    }

    pub(super) fn is_assistant(&self) -> bool {
        self.role == Role::Assistant
    }

    /// Whether the model `config` talks to wrote this message (pi's `isSameModel`).
    pub(super) fn same_model(&self, config: &ProviderConfig) -> bool {
        let is = |field: &Option<Str<'_>>, value: &str| field.as_ref().is_some_and(|s| s.eq_str(value));
        is(&self.provider, &config.name) && is(&self.api, config.api.pi_name()) && is(&self.model, &config.model)
    }
}

/// The views of a request's messages, in order, without the unreadable ones. Many stored
/// messages are read on all cores.
pub(super) fn read_all(messages: &[ContextMessage]) -> Vec<MessageView<'_>> {
    const PARALLEL_MIN: usize = 512;
    crate::parallel::map_in_parallel(messages, messages.len() >= PARALLEL_MIN, MessageView::read)
        .into_iter()
        .flatten()
        .collect()
}

// Reading a stored message into a view: the same fields, with the same types, as `Message`'s
// own `Deserialize` reads (a message it would refuse is refused here too), strings kept as
// their tokens, everything else skipped without being built.

/// A key or name, borrowed when it has no escapes.
struct Name<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(s.to_owned())))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// An optional string field kept as its token: `null` is `None`, another type an error (as
/// `Option<String>` reads it).
fn string_token<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Str<'de>>, A::Error> {
    match map.next_value::<Option<&'de RawValue>>()? {
        None => Ok(None),
        Some(raw) if raw.get().starts_with('"') => Ok(Some(Str::Json(raw.get()))),
        Some(raw) => Err(de::Error::invalid_type(de::Unexpected::Other(raw.get()), &"a string")),
    }
}

/// A field `Message` keeps in `extra`: any JSON value; read as a string or a bool where it is
/// one.
fn extra_value<'de, A: MapAccess<'de>>(map: &mut A) -> Result<&'de RawValue, A::Error> {
    map.next_value::<&'de RawValue>()
}

fn raw_bool(raw: &RawValue) -> Option<bool> {
    match raw.get() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for BlockView<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BlockView<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BlockView<'de>, A::Error> {
                let mut b = BlockView { kind: Cow::Borrowed(""), ..BlockView::default() };
                while let Some(Name(key)) = map.next_key::<Name<'de>>()? {
                    match key.as_ref() {
                        "type" => b.kind = map.next_value::<Name<'de>>()?.0,
                        "text" => b.text = string_token(&mut map)?,
                        "thinking" => b.thinking = string_token(&mut map)?,
                        "thinkingSignature" => b.signature = Str::from_raw(extra_value(&mut map)?),
                        "textSignature" => b.text_signature = Str::from_raw(extra_value(&mut map)?),
                        "redacted" => b.redacted = raw_bool(extra_value(&mut map)?),
                        "id" => b.id = Str::from_raw(extra_value(&mut map)?),
                        "name" => b.name = Str::from_raw(extra_value(&mut map)?),
                        "arguments" => b.arguments = Some(Args::Json(extra_value(&mut map)?)),
                        "thoughtSignature" => b.thought_signature = Str::from_raw(extra_value(&mut map)?),
                        "data" => b.data = Str::from_raw(extra_value(&mut map)?),
                        "mimeType" => b.mime_type = Str::from_raw(extra_value(&mut map)?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(b)
            }
        }
        deserializer.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for ContentView<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ContentView<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list of content blocks")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<ContentView<'de>, E> {
                Ok(ContentView::Text(Str::Plain(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ContentView<'de>, E> {
                Ok(ContentView::Text(Str::Plain(Cow::Owned(s.to_owned()))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<ContentView<'de>, E> {
                Ok(ContentView::Blocks(Vec::new()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ContentView<'de>, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(2));
                while let Some(block) = seq.next_element()? {
                    blocks.push(block);
                }
                Ok(ContentView::Blocks(blocks))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// `usage` checked as `Message` reads it (its counts are unsigned integers), and skipped.
struct UsageShape;

impl<'de> Deserialize<'de> for UsageShape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = UsageShape;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("token usage")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UsageShape, A::Error> {
                while let Some(Name(key)) = map.next_key::<Name<'de>>()? {
                    match key.as_ref() {
                        "input" | "output" | "cacheRead" | "cacheWrite" | "totalTokens" => {
                            map.next_value::<u64>()?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(UsageShape)
            }
        }
        deserializer.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for MessageView<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MessageView<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MessageView<'de>, A::Error> {
                let mut m = MessageView {
                    role: Role::Other(String::new()),
                    content: ContentView::Blocks(Vec::new()),
                    stop_reason: None,
                    tool_call_id: None,
                    is_error: None,
                    provider: None,
                    api: None,
                    model: None,
                };
                while let Some(Name(key)) = map.next_key::<Name<'de>>()? {
                    match key.as_ref() {
                        "role" => m.role = Role::from_name(&map.next_value::<Name<'de>>()?.0),
                        "content" => m.content = map.next_value()?,
                        "stopReason" => m.stop_reason = map.next_value()?,
                        "errorMessage" => {
                            map.next_value::<Option<Name<'de>>>()?;
                        }
                        "usage" => {
                            map.next_value::<Option<UsageShape>>()?;
                        }
                        "timestamp" => {
                            map.next_value::<Option<i64>>()?;
                        }
                        tool_result_keys::CALL_ID => m.tool_call_id = Str::from_raw(extra_value(&mut map)?),
                        tool_result_keys::IS_ERROR => m.is_error = raw_bool(extra_value(&mut map)?),
                        "provider" => m.provider = Str::from_raw(extra_value(&mut map)?),
                        "api" => m.api = Str::from_raw(extra_value(&mut map)?),
                        "model" => m.model = Str::from_raw(extra_value(&mut map)?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(m)
            }
        }
        deserializer.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_refuses_what_message_refuses() {
        for json in [
            r#"{"role":"user","content":5}"#,
            r#"{"role":"assistant","content":[{"type":"text","text":7}]}"#,
            r#"{"role":"assistant","content":[],"stopReason":"weird"}"#,
            r#"{"role":"assistant","content":[],"timestamp":1.5}"#,
            r#"{"role":"assistant","content":[],"usage":{"input":-1}}"#,
            r#"{"role":"assistant","content":[],"errorMessage":3}"#,
            r#"{"role":7}"#,
        ] {
            assert!(serde_json::from_str::<Message>(json).is_err(), "Message refuses {json}");
            assert!(serde_json::from_str::<MessageView<'_>>(json).is_err(), "the view refuses {json}");
        }
        let ok = r#"{"role":"assistant","content":[{"type":"text","text":null,"x":{"y":[1]}}],"usage":null,"timestamp":null,"isError":"no","provider":1}"#;
        assert!(serde_json::from_str::<Message>(ok).is_ok());
        let view: MessageView<'_> = serde_json::from_str(ok).unwrap();
        assert!(view.is_error.is_none() && view.provider.is_none(), "extra fields of another type read as absent");
    }
}

