//! The Neovim host: msgpack-RPC over stdio (nvim-rs + tokio).

use crate::config::Settings;

/// Serves one Neovim over stdin/stdout until it goes away.
pub async fn serve(_settings: Settings) -> anyhow::Result<()> {
    anyhow::bail!("the Neovim host is not built yet")
}
