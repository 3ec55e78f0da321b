//! handoff.nvim's core: pi-compatible sessions, streaming providers, the agent loop and the
//! `/handoff` pipeline, plus the two front ends that drive them (headless CLI, Neovim RPC host).

pub mod message;
pub mod provider;
#[doc(hidden)]
pub mod mock;

/// reqwest is built with rustls but no crypto provider compiled in by default: install ring once
/// before the first client is made (without it building a client panics).
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
