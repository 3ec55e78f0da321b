//! handoff.nvim's executable, over the workspace's crates: the engine (`handoff-core`, here
//! `core`) and the three front ends that drive it, the Neovim msgpack-RPC host (`nvim`), the
//! headless command line (`cli`) and the Agent Client Protocol agent (`acp`), plus the sandbox
//! helper's entry (`sandbox`).
//!
//! The crates keep the module names they had when they were modules of this one, so that the
//! tests in tests/, the benches and fuzz/ name them as before. The layering is Cargo's: the
//! engine's crate depends on no front end's, and no front end on another (tests/core_layering.rs).

pub use handoff_acp as acp;
pub use handoff_agents as agents;
pub use handoff_cli as cli;
pub use handoff_core as core;
pub use handoff_core::install_crypto_provider;
pub use handoff_frontend_paths as frontend_paths;
pub use handoff_nvim_host as nvim;
pub use handoff_sandbox as sandbox;
