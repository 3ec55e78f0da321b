//! The environment's own variables, which are never a secret: what the tools' environment
//! keeps under `inherit = "core"` (`tools::env`) and what a key command's words may name without
//! naming a key (`provider::key`). A leaf, so that both layers read it.

/// What `inherit = "core"` keeps: Codex's core variables (`HOME`, `LOGNAME`, `PATH`, `SHELL`,
/// `USER`, `USERNAME`, `TMPDIR`, `TEMP`, `TMP`), plus the locale, the terminal and the time zone,
/// which programs print differently without.
pub const CORE_VARS: [&str; 14] =
    ["HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ"];

/// Whether `name` is one of [`CORE_VARS`], case aside (`LC_*`: any name that begins so): what
/// `inherit = "core"` keeps.
pub fn in_core_vars(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CORE_VARS.iter().any(|core| match core.strip_suffix('*') {
        Some(prefix) => upper.starts_with(prefix),
        None => upper == *core,
    })
}

/// Whether `name` is one of [`CORE_VARS`] or the shell's own folder variables (`PWD`,
/// `OLDPWD`), or an XDG folder: the environment's own, never a secret.
pub fn is_core_var(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper == "PWD" || upper == "OLDPWD" || upper.starts_with("XDG_") || in_core_vars(name)
}
