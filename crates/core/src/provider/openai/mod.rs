//! OpenAI Chat Completions: request body and SSE decoding. Spoken by OpenAI itself and by most
//! local servers (llama.cpp, Ollama, vLLM, LM Studio), so the decoder accepts their variations:
//! `reasoning_content` or `reasoning` for thinking, a missing `[DONE]`, usage-only chunks, tool
//! calls without an `index` or with every call numbered 0.
//!
//! Thinking: the level goes out as `reasoning_effort` where the model takes it
//! ([`ProviderConfig::sends_reasoning_effort`]); reasoning streams back in `reasoning_content`,
//! `reasoning` or `reasoning_text` and is stored as pi stores it, the field's name as the
//! block's signature, so that it can go back in that field to the model that wrote it.
//!
//! The format is three jobs, one file each: [`policy`] (what a given model or server takes),
//! [`body`] (the request written from the stored messages) and [`decode`] (the SSE stream).

mod body;
mod decode;
pub(super) mod policy;

use reqwest::header::HeaderMap;

use super::types::{ChatRequest, ProviderConfig, ProviderError};
use super::wire::{self, Decoder, WireFormat};


/// The Chat Completions wire format.
#[derive(Debug)]
pub(super) struct OpenAi;

impl WireFormat for OpenAi {
    fn path(&self) -> &'static str {
        "/chat/completions"
    }

    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ProviderError> {
        wire::bearer_headers(key)
    }

    fn body(&self, config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
        body::request_body(config, request)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<decode::OpenAiDecoder>::default()
    }
}
