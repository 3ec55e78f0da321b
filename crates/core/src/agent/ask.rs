//! One question to the session's model outside the conversation ([`ModelOnce`]): the tools'
//! seam for `session_query`'s answer. The request carries its own system prompt and one user
//! message, no tools, at the session's thinking level; neither it nor the reply is recorded in
//! any session (the tool's result, which holds the answer, is).

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::assembler::MessageAssembler;
use super::fit;
use crate::message::{ContextMessage, Message};
use crate::provider::{ChatRequest, Provider, ThinkingLevel, ToolChoice};
use crate::tools::ModelOnce;

/// The session's provider and thinking level, as they were when the tool call started.
pub(super) struct SessionModel {
    provider: Provider,
    thinking: ThinkingLevel,
}

impl SessionModel {
    pub(super) fn new(provider: Provider, thinking: ThinkingLevel) -> Self {
        Self { provider, thinking }
    }
}

#[async_trait]
impl ModelOnce for SessionModel {
    async fn ask(&self, system: &str, prompt: &str, cancel: &CancellationToken) -> Result<String, String> {
        let request = ChatRequest {
            system: Some(system.to_string()),
            messages: vec![ContextMessage::from(Message::user(prompt))],
            tools: Vec::new(),
            tool_choice: ToolChoice::None,
            thinking: self.thinking,
            cache_key: None,
        };
        self.provider.prepare(cancel).await;
        let config = &self.provider.current_config();
        // The reply assembled as the run loop assembles one; only its text is kept.
        let mut assembler = MessageAssembler::new(Message::assistant(config.api.pi_name(), &config.name, &config.model));
        let mut on_event = |event| {
            assembler.push(event);
        };
        let end = self.provider.stream(&request, cancel, &mut on_event).await.map_err(|e| e.to_string())?;
        let text = assembler.finish().0.text();
        if text.trim().is_empty() {
            return Err(format!("the model's reply has no text (it stopped with {})", end.stop_reason.as_str()));
        }
        Ok(text)
    }

    fn prompt_room(&self) -> usize {
        let config = &self.provider.current_config();
        let reply = fit::reply_room(config.max_tokens as u64, config.context_window);
        // Less a little for what the wire format adds around the two messages.
        let tokens = config.context_window.saturating_sub(reply).saturating_sub(256);
        fit::chars_of_tokens(usize::try_from(tokens).unwrap_or(usize::MAX))
    }
}
