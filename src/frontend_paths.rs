//! Where the front ends keep things by default. The engine takes the session folder as a
//! parameter; the default is the Neovim plugin's folder, shared by the CLI so that both see the
//! same sessions.

use std::path::PathBuf;

use crate::core::config::Settings;

/// The plugin's default session folder (`stdpath("data")/handoff/sessions`, i.e.
/// `$XDG_DATA_HOME/nvim/handoff/sessions`).
pub fn default_session_dir() -> PathBuf {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir);
    data.join("nvim/handoff/sessions")
}

/// The plugin's user-level folder (`stdpath("config")/handoff`, i.e.
/// `$XDG_CONFIG_HOME/nvim/handoff`): its `AGENTS.md` is the user's instructions.
pub fn default_config_dir() -> PathBuf {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(std::env::temp_dir);
    config.join("nvim/handoff")
}

/// The session folder `settings` name, else the default.
pub fn session_dir(settings: &Settings) -> PathBuf {
    settings.session_dir.clone().unwrap_or_else(default_session_dir)
}
