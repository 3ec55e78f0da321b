//! The engine: pi-compatible sessions, streaming providers, the agent loop and the `/handoff`
//! pipeline. It knows no front end (no editor RPC, no msgpack, no command-line parser): the front
//! ends pass in what is theirs, such as the session folder, and word their own key hints.
//!
//! Layers, bottom up: `message` → `session` and `provider` (with `failure`, the kinds a front
//! end branches on) → `agent` → `handoff` → `controller` (its `lifecycle`: the prompt's states). `task` spawns
//! tasks whose panics are logged and release what they hold; `process_groups` ends the children's
//! process groups with the host, even a host killed outright.

pub mod agent;
pub mod config;
pub mod controller;
pub mod env_vars;
pub mod failure;
pub mod handoff;
pub mod mcp;
pub mod message;
mod parallel;
pub mod process_groups;
pub mod provider;
pub mod sandbox;
pub mod session;
pub mod sync;
pub mod task;
pub mod tools;

/// reqwest is built with rustls but no crypto provider compiled in by default: install ring once
/// before the first client is made (without it building a client panics).
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
