//! handoff.nvim's core: pi-compatible sessions, streaming providers, the agent loop and the
//! `/handoff` pipeline, plus the two front ends that drive them (headless CLI, Neovim RPC host).
//!
//! Layers, bottom up: `message` → `session` and `provider` → `agent` → `handoff` → `controller`
//! → front ends (`cli`, `rpc`). Nothing below the front ends knows about Neovim.

pub mod agent;
pub mod cli;
pub mod config;
pub mod controller;
pub mod handoff;
pub mod message;
#[doc(hidden)]
pub mod mock;
pub mod provider;
pub mod rpc;
pub mod session;

/// reqwest is built with rustls but no crypto provider compiled in by default: install ring once
/// before the first client is made (without it building a client panics).
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
