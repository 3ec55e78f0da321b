//! `handoff-nvim acp`: the Agent Client Protocol (v1) on stdin/stdout, a third front end beside
//! the Neovim host and the CLI, so that any ACP client (Zed, codecompanion.nvim, avante.nvim, …)
//! drives the same controller: prompts, `/handoff` and the automatic handoff, consent, the
//! sandbox, sessions pi resumes.
//!
//! The ACP `sessionId` is the id of the session file `session/new` created. A handoff, `/new`
//! or `/back` changes the file behind it (the controller's agent switches), never the id:
//! `session/load` of the id in a later process opens the file the id went on in
//! ([`index::AcpIndex`]), else the newest session of its chain (the `parentSession` links).
//! Nothing but JSON-RPC goes to stdout (`rpc.rs` owns it); logs go to `--log-file`.

//!
//! Split by job: `server` (the JSON-RPC methods, a prompt's turn), `sessions` (opening,
//! loading, closing one), `listing` (`session/list`), `commands` (the slash commands offered),
//! `updates` (agent events to `session/update`s, and the loop that sends them), `client`
//! (consent and files through the client), `rpc` (the line to the client, its bounded output),
//! `index` (the file an id goes on in), `wire` (the protocol's types), `text` (its words).

mod commands;
mod listing;
mod index;
mod rpc;
mod client;
mod server;
mod sessions;
mod text;
mod updates;
pub use handoff_acp_wire as wire;

pub use server::serve;
