//! Anthropic Messages: request body and SSE decoding.
//!
//! The API is stricter than Chat Completions: roles must alternate, tool results travel inside
//! user messages, empty text blocks are rejected and tool ids must match `[a-zA-Z0-9_-]+`. The
//! conversion below makes pi's history fit those rules.
//!
//! Three jobs, one file each: [`policy`] (what a given model takes: thinking budgets or
//! adaptive thinking, output limits), [`body`] (the request written from the stored messages)
//! and [`decode`] (the SSE stream).

mod body;
mod decode;
mod policy;

use reqwest::header::{HeaderMap, HeaderValue};

use super::types::{ChatRequest, ProviderConfig, ProviderError};
use super::wire::{self, Decoder, WireFormat};

/// The Messages wire format.
#[derive(Debug)]
pub(super) struct Anthropic;

impl WireFormat for Anthropic {
    fn path(&self) -> &'static str {
        "/messages"
    }

    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            headers.insert("x-api-key", wire::secret_header(key.to_owned())?);
        }
        headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        Ok(headers)
    }

    fn body(&self, config: &ProviderConfig, request: &ChatRequest) -> Vec<u8> {
        body::request_body(config, request)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<decode::AnthropicDecoder>::default()
    }

    /// `max_tokens` 1, without thinking: a thinking budget must stay below `max_tokens`, and
    /// the API would refuse the probe for that instead of answering whether the prompt fits.
    fn probe_body(&self, body: &[u8]) -> Option<Vec<u8>> {
        wire::unstreamed(body, &[("max_tokens", 1)], &["thinking", "output_config"])
    }
}
