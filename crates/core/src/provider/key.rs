//! API key resolution. The key is looked up for every request and never stored, logged or put
//! into an error: a config struct, a log file or an error shown in the editor must be safe to share.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::types::{ProviderConfig, ProviderError};

/// Upper bound for `api_key_cmd`: long enough for a pinentry prompt, short enough that a
/// command waiting on a terminal it will never get does not hang the request forever.
const KEY_CMD_TIMEOUT: Duration = Duration::from_secs(120);

/// The key to send, or `None` when the provider needs none (a local llama.cpp or Ollama).
/// `api_key_cmd` wins over `api_key_env` so that a user can override a stale environment.
pub(super) async fn resolve(config: &ProviderConfig) -> Result<Option<String>, ProviderError> {
    if let Some(cmd) = config.api_key_cmd.as_deref().filter(|c| !c.trim().is_empty()) {
        return run_key_cmd(cmd).await.map(Some);
    }
    if let Some(var) = config.api_key_env.as_deref().filter(|v| !v.is_empty()) {
        return match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().to_owned())),
            _ => Err(ProviderError::MissingKey(format!(
                "set ${var} or configure api_key_cmd for provider {}",
                config.name
            ))),
        };
    }
    Ok(config.api_key_value.as_ref().map(|v| v.expose().to_owned()))
}

/// How errors and the health check name a key command: its program only. The rest of the line
/// may be the secret itself (`printf %s sk-…`), and an error ends up in the session file.
pub fn describe_cmd(cmd: &str) -> String {
    let mut words = cmd.split_whitespace();
    let program = words.next().unwrap_or_default();
    if words.next().is_some() {
        format!("{program} …")
    } else {
        program.to_owned()
    }
}

/// What a key command (`api_key_cmd`, a pi provider's `!command`) names that may hold the key,
/// as far as its words say: no tool and no command may reach these (`tools::env`,
/// `sandbox::protected`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeySources {
    /// Variables it reads: `$MY_LLM`, `${MY_LLM}`, or a word that names one (`printenv MY_LLM`);
    /// not the environment's own (`HOME`, `PATH`, `LANG`…: `env_vars::is_core_var`).
    pub vars: Vec<String>,
    /// Files it names (`cat ~/.config/llm/key`, `gpg -d "$HOME/keys/llm.gpg"`, `< /run/secrets/llm`),
    /// absolute after `~` and `$HOME` are expanded, that are regular files and not programs
    /// (so `/usr/bin/cat` is not one), outside the system's folders.
    pub files: Vec<PathBuf>,
}

/// Folders whose files are the system's, never a user's key file.
const SYSTEM_FOLDERS: [&str; 11] = ["/usr", "/etc", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/opt", "/nix", "/proc", "/sys"];

/// Whether `word` reads as an environment variable's name (`MY_KEY`), as pi tries a provider's
/// `apiKey` first.
pub fn names_a_variable(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// [`KeySources`] of `cmd`, read as words (not run, not parsed as a shell would: a name built
/// at run time is not seen); `home` expands `~/`, `$HOME/` and `${HOME}/`.
pub fn key_sources(cmd: &str, home: Option<&Path>) -> KeySources {
    let mut found = KeySources::default();
    let add_var = |name: &str, found: &mut KeySources| {
        if names_a_variable(name) && !crate::env_vars::is_core_var(name) && !found.vars.iter().any(|v| v == name) {
            found.vars.push(name.to_string());
        }
    };
    // Variables referenced anywhere, quoted or not.
    let mut rest = cmd;
    while let Some(at) = rest.find('$') {
        let after = rest[at + 1..].trim_start_matches('{');
        let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
        add_var(&after[..end], &mut found);
        rest = &after[end..];
    }
    let words = cmd.split(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '<' | '>' | '=' | '\'' | '"' | '`'));
    for word in words.filter(|w| !w.is_empty()) {
        add_var(word, &mut found);
        let expanded = match (word.strip_prefix("~/").or_else(|| word.strip_prefix("$HOME/")).or_else(|| word.strip_prefix("${HOME}/")), home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(word),
        };
        if !expanded.is_absolute() || SYSTEM_FOLDERS.iter().any(|s| expanded.starts_with(s)) {
            continue;
        }
        let is_key_file = std::fs::metadata(&expanded).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 == 0
        });
        if is_key_file && !found.files.contains(&expanded) {
            found.files.push(expanded);
        }
    }
    found
}

/// Runs the command through `sh -c`. Errors name the command's program but never include its
/// arguments or its output: a command that half-works may well print the secret to stdout or
/// stderr, and its arguments may hold it.
async fn run_key_cmd(cmd: &str) -> Result<String, ProviderError> {
    let name = describe_cmd(cmd);
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ProviderError::MissingKey(format!("cannot run api_key_cmd `{name}`: {e}")))?;
    let output = match tokio::time::timeout(KEY_CMD_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => {
            return Err(ProviderError::MissingKey(format!("api_key_cmd `{name}` failed: {e}")))
        }
        Err(_) => {
            return Err(ProviderError::MissingKey(format!(
                "api_key_cmd `{name}` did not finish within {} s",
                KEY_CMD_TIMEOUT.as_secs()
            )))
        }
    };
    if !output.status.success() {
        return Err(ProviderError::MissingKey(format!(
            "api_key_cmd `{name}` failed ({})",
            output.status
        )));
    }
    let key = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if key.is_empty() {
        return Err(ProviderError::MissingKey(format!("api_key_cmd `{name}` printed nothing")));
    }
    Ok(key)
}

/// `text` with every occurrence of the key replaced, for logs.
pub(super) fn redact_str(text: &str, key: Option<&str>) -> String {
    match key.filter(|k| k.len() >= 4) {
        Some(key) if text.contains(key) => text.replace(key, "[redacted]"),
        _ => text.to_owned(),
    }
}

/// Replaces every occurrence of the key in the error's text. Servers sometimes quote the key
/// they rejected and transport errors can echo headers; this is the last line of defence.
pub(super) fn redact_error(error: ProviderError, key: Option<&str>) -> ProviderError {
    let scrub = |s: String| redact_str(&s, key);
    match error {
        ProviderError::Http { provider, status, code, message } => {
            ProviderError::Http { provider, status, code, message: scrub(message) }
        }
        ProviderError::Connect { provider, url, message } => {
            ProviderError::Connect { provider, url: scrub(url), message: scrub(message) }
        }
        ProviderError::Stream { provider, message } => {
            ProviderError::Stream { provider, message: scrub(message) }
        }
        ProviderError::Reported { provider, code, message } => {
            ProviderError::Reported { provider, code, message: scrub(message) }
        }
        ProviderError::MissingKey(message) => ProviderError::MissingKey(scrub(message)),
        other @ (ProviderError::Timeout { .. } | ProviderError::Client(_) | ProviderError::Aborted) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_commands_variables_and_files_are_found_by_their_words() {
        let dir = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(home.join("keys")).unwrap();
        std::fs::write(home.join("keys/llm.key"), "k").unwrap();
        std::fs::write(home.join("keys/other.gpg"), "k").unwrap();
        let cmd = format!("gpg -d \"$HOME/keys/other.gpg\" 2>/dev/null || cat ~/keys/llm.key | tr -d '\\n'; printenv MY_LLM; echo ${{OTHER_LLM}} $PATH {} /usr/bin/cat", home.join("missing").display());
        let found = key_sources(&cmd, Some(&home));
        assert_eq!(found.vars, ["OTHER_LLM", "MY_LLM"]);
        assert_eq!(found.files, [home.join("keys/other.gpg"), home.join("keys/llm.key")]);
        assert_eq!(key_sources("pass show openai", Some(&home)), KeySources::default());
    }

    #[test]
    fn a_key_command_is_named_by_its_program_only() {
        assert_eq!(describe_cmd("pass show openai"), "pass …");
        assert_eq!(describe_cmd("  printf %s sk-secret "), "printf …");
        assert_eq!(describe_cmd("get-key"), "get-key");
    }

    #[test]
    fn redaction_removes_the_key_everywhere() {
        let e = ProviderError::Http {
            provider: "p".into(),
            status: 401,
            code: Some("invalid_api_key".into()),
            message: "Incorrect API key provided: sk-secret-1234".into(),
        };
        let text = redact_error(e, Some("sk-secret-1234")).to_string();
        assert!(!text.contains("sk-secret-1234"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
    }
}
