//! OpenAI Responses (`POST {base}/responses`): request items and SSE decoding, as pi 0.73.1's
//! `openai-responses` provider speaks it (OpenAI sends every current model through it; Copilot
//! refuses its gpt-5 and codex models elsewhere).
//!
//! Reasoning is stateless (`store: false`): the server sends each reasoning item whole, its
//! `encrypted_content` included, and wants it back unchanged in the next request to the same
//! model. It is stored as pi stores it, so that pi resumes our sessions and we resume pi's: a
//! `thinking` block whose `thinkingSignature` is the whole item as JSON; a text block whose
//! `textSignature` is `{"v":1,"id":…,"phase":…}` (its message item); a tool call whose id is
//! `call_id|item_id`.
//!
//! Three jobs, one file each: [`policy`] (what a model takes: reasoning, the system prompt's
//! role), [`body`] (the request written from the stored messages) and [`decode`] (the SSE
//! stream).

mod body;
mod decode;
mod policy;

use reqwest::header::HeaderMap;

use super::types::{ChatRequest, ProviderConfig, ProviderError};
use super::wire::{self, Decoder, WireFormat};

/// The Responses wire format.
#[derive(Debug)]
pub(super) struct Responses;

impl WireFormat for Responses {
    fn path(&self) -> &'static str {
        "/responses"
    }

    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ProviderError> {
        wire::bearer_headers(key)
    }

    fn body(&self, config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
        body::request_body(config, request)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<decode::ResponsesDecoder>::default()
    }

    /// `max_output_tokens` 16: the least the API takes.
    fn probe_body(&self, body: &[u8]) -> Option<Vec<u8>> {
        wire::unstreamed(body, &[("max_output_tokens", 16)], &[])
    }
}
