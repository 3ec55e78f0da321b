//! The engine: pi-compatible sessions, streaming providers, the agent loop and the `/handoff`
//! pipeline. It knows no front end: no Neovim, no msgpack, no command line; the front ends
//! (`crate::cli`, `crate::nvim`) pass in what is theirs (the session folder, user-facing texts).
//!
//! Layers, bottom up: `message` → `session` and `provider` → `agent` → `handoff` → `controller`.

pub mod agent;
pub mod config;
pub mod controller;
pub mod handoff;
pub mod message;
pub mod provider;
pub mod session;
pub mod tools;
