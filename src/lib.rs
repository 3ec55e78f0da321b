//! handoff.nvim's host crate: the engine (`core`) and the three front ends that drive it, the
//! Neovim msgpack-RPC host (`nvim`), the headless command line (`cli`) and the Agent Client
//! Protocol agent (`acp`).
//!
//! `core` imports nothing of a front end (a test walks `src/core` to keep it so).

pub mod acp;
pub mod agents;
pub mod cli;
pub mod core;
pub mod frontend_paths;
pub mod nvim;

/// reqwest is built with rustls but no crypto provider compiled in by default: install ring once
/// before the first client is made (without it building a client panics).
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
