//! Where the front ends keep things by default. The engine takes the session folder as a
//! parameter; the default is the Neovim plugin's folder, shared by the CLI so that both see the
//! same sessions.

use std::path::PathBuf;

use handoff_core::config::schema::SESSION_SUBDIR;
use handoff_core::config::Settings;

/// Neovim's `stdpath("data")` as Neovim computes it from the environment: the XDG data folder
/// (`$XDG_DATA_HOME`, else `~/.local/share`; on Windows `%LOCALAPPDATA%`) and the application's
/// name, `$NVIM_APPNAME` or `nvim` (`nvim-data` on Windows).
pub fn nvim_data_dir() -> PathBuf {
    nvim_dir("XDG_DATA_HOME", ".local/share", "-data")
}

/// The plugin's default session folder (`stdpath("data")/handoff/sessions`).
pub fn default_session_dir() -> PathBuf {
    nvim_data_dir().join(SESSION_SUBDIR)
}

/// Neovim's `stdpath("config")` as Neovim computes it: `$XDG_CONFIG_HOME` (else `~/.config`;
/// on Windows `%LOCALAPPDATA%`) and the application's name, `$NVIM_APPNAME` or `nvim`.
pub fn nvim_config_dir() -> PathBuf {
    nvim_dir("XDG_CONFIG_HOME", ".config", "")
}

/// One of Neovim's standard folders: `$<xdg_var>/<app>` when the variable holds an absolute
/// path, on Windows `%LOCALAPPDATA%/<app><windows_suffix>`, else `~/<home_default>/<app>`.
fn nvim_dir(xdg_var: &str, home_default: &str, windows_suffix: &str) -> PathBuf {
    let app = std::env::var("NVIM_APPNAME").ok().filter(|a| !a.is_empty()).unwrap_or_else(|| "nvim".into());
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(dir) = absolute(xdg_var) {
        return dir.join(app);
    }
    if cfg!(windows) {
        if let Some(local) = absolute("LOCALAPPDATA") {
            return local.join(format!("{app}{windows_suffix}"));
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    home.join(home_default).join(app)
}

/// Neovim's `stdpath("state")`: `$XDG_STATE_HOME` (else `~/.local/state`) and the application's
/// name.
pub fn nvim_state_dir() -> PathBuf {
    nvim_dir("XDG_STATE_HOME", ".local/state", "-data")
}

/// Where the trust of projects' `.mcp.json` files is kept (`stdpath("state")/handoff/…`).
pub fn mcp_trust_store() -> handoff_core::mcp::TrustStore {
    handoff_core::mcp::TrustStore::new(nvim_state_dir().join(handoff_core::mcp::config::TRUST_FILE))
}

/// The user's MCP file, `stdpath("config")/handoff/mcp.json` (the CLI's default; the plugin
/// passes its own).
pub fn default_mcp_user_file() -> PathBuf {
    nvim_config_dir().join(handoff_core::mcp::config::USER_FILE)
}

/// The plugin's user-level folder, `stdpath("config")/handoff`: its `AGENTS.md` (else
/// `CLAUDE.md`) is the user's instructions, first in the system prompt.
pub fn default_instructions_dir() -> PathBuf {
    nvim_config_dir().join("handoff")
}

/// The session folder `settings` name, else the default.
pub fn session_dir(settings: &Settings) -> PathBuf {
    settings.session_dir.clone().unwrap_or_else(default_session_dir)
}

/// What every front end brings to [`open_for`](handoff_core::controller::open_for) by default:
/// the plugin's folders (so the CLI and ACP read the editor's `AGENTS.md` and MCP file), the
/// session folder `settings` name, and `--thinking` as pi takes it. A front end changes what
/// is its own (the editor's folder, an ACP client's servers).
pub fn front_end(settings: &Settings) -> handoff_core::controller::FrontEnd {
    handoff_core::controller::FrontEnd {
        instructions_dir: default_instructions_dir(),
        session_dir: session_dir(settings),
        mcp_user_file: Some(default_mcp_user_file()),
        mcp_trust: mcp_trust_store(),
        mcp_servers: Vec::new(),
        thinking_switches: true,
        sandbox_prefetch: handoff_core::sandbox::PrefetchAt::SessionStart,
    }
}
