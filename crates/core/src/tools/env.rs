//! The environment a command gets: bash's (sandboxed or not) and an MCP stdio server's. Built
//! from a policy, as Codex builds its `shell_environment_policy`, and handed to the process
//! whole (`env_clear` and then this set), so that nothing the policy did not let through slips
//! into it. Whatever a command can print reaches the model's provider, and a sandboxed
//! command must not find the editor's RPC socket or the user's agents in its environment.
//!
//! The steps, for each variable of the host's environment:
//! 1. `inherit`: `all` takes it, `core` only [`CORE_VARS`](crate::env_vars::CORE_VARS) (PATH, HOME, USER, LANG, LC_*, …),
//!    `none` nothing;
//! 2. `include_only` (when given): only names matching one of its globs go on;
//! 3. the default exclusions: names matching [`DEFAULT_EXCLUDES`] (`*KEY*`, `*TOKEN*`,
//!    `*SECRET*`, `*PASSWORD*`) or shaped like a secret's ([`secret_name`]: a `_`-separated
//!    word of [`SECRET_WORDS`] such as `MYSQL_PWD` or `GITLAB_PAT`, or a part of
//!    [`SECRET_PARTS`] such as `X_AUTH_HEADER`), values that are URLs carrying a password
//!    ([`has_url_password`]: `postgres://u:pw@h/db`), every provider's and preset's key variable
//!    ([`crate::provider::ProviderKind::key_vars`]) and the configured provider's own
//!    ([`ProviderConfig::secret_vars`](crate::provider::ProviderConfig::secret_vars)), and
//!    for a sandboxed command [`SANDBOX_EXCLUDES`] (`NVIM`, `SSH_AUTH_SOCK`, …). A name written
//!    out in `include_only` (no wildcard) is the user's escape hatch: it passes them;
//! 4. the user's `exclude` globs;
//! 5. `set`: these names get these values, whatever came before.
//!
//! Globs take `*` and `?` and ignore case.

use std::collections::BTreeMap;
use std::ffi::OsString;

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

/// What a command starts from (`tools.env.inherit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Inherit {
    /// The host's whole environment (before the exclusions).
    All,
    /// Only [`CORE_VARS`](crate::env_vars::CORE_VARS).
    Core,
    /// Nothing: only what `set` gives.
    None,
}

impl Default for Inherit {
    fn default() -> Self {
        Inherit::DEFAULT
    }
}

impl Inherit {
    pub const ALL: [Inherit; 3] = [Inherit::All, Inherit::Core, Inherit::None];
    /// The default, which the schema states (a const, so that it has one owner).
    pub const DEFAULT: Inherit = Inherit::All;

    pub const fn as_str(self) -> &'static str {
        match self {
            Inherit::All => "all",
            Inherit::Core => "core",
            Inherit::None => "none",
        }
    }
}

/// Names no command gets unless the user names them (Codex's three, and passwords).
pub const DEFAULT_EXCLUDES: [&str; 4] = ["*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*"];

/// Words that make a name a secret's when one of its `_`-separated words is one of them
/// (`GITLAB_PAT`, `PAT`, `MYSQL_PWD`, `SMTP_PASS`): as words, since `PATH`, `OLDPWD` or
/// `PASSTHROUGH` are not secrets. `PWD` alone is the shell's folder, never dropped.
pub const SECRET_WORDS: [&str; 4] = ["PAT", "PWD", "PASS", "PASSWD"];

/// Parts that make a name a secret's wherever they are in it (`X_AUTH_HEADER`, `OAUTH_CLIENT`,
/// `GOOGLE_APPLICATION_CREDENTIALS`; also `XAUTHORITY`, the X11 cookie's file, another way to
/// the user's display) — but not in a word of [`NOT_SECRET_WORDS`] (`GIT_AUTHOR_NAME`).
pub const SECRET_PARTS: [&str; 2] = ["CREDENTIAL", "AUTH"];

/// Words that hold a part of [`SECRET_PARTS`] without being one: git's author variables.
const NOT_SECRET_WORDS: [&str; 2] = ["AUTHOR", "AUTHORS"];

/// Whether `name` (any case) is shaped like a secret's besides [`DEFAULT_EXCLUDES`]: one of its
/// `_`-separated words is in [`SECRET_WORDS`] (the name `PWD` itself aside), or one of its
/// words holds a part of [`SECRET_PARTS`] and is not in [`NOT_SECRET_WORDS`].
pub fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper == "PWD" {
        return false;
    }
    upper.split('_').any(|word| {
        SECRET_WORDS.contains(&word)
            || (!NOT_SECRET_WORDS.contains(&word) && SECRET_PARTS.iter().any(|part| word.contains(part)))
    })
}

/// Whether `value` holds a URL with a password (`scheme://user:password@host…`, anywhere in
/// it: `postgres://u:pw@h/db`, `http://u:p@proxy:3128`, `jdbc:mysql://u:p@h`). Such a
/// variable is dropped whole, not masked: a masked URL is one a program still uses and fails
/// with as if the password were wrong (a proxy answering 407, a database refusing the login),
/// where a missing variable is an error every program names; the user who wants it passed
/// names it (`include_only`) or sets it (`set`).
pub fn has_url_password(value: &[u8]) -> bool {
    let mut rest = value;
    while let Some(at) = memchr::memmem::find(rest, b"://") {
        let after = &rest[at + 3..];
        // The authority: up to the path, query, fragment or a blank.
        let end = after.iter().position(|b| matches!(b, b'/' | b'?' | b'#') || b.is_ascii_whitespace()).unwrap_or(after.len());
        let authority = &after[..end];
        if let Some(userinfo_end) = memchr::memrchr(b'@', authority) {
            let userinfo = &authority[..userinfo_end];
            if let Some(colon) = memchr::memchr(b':', userinfo) {
                if colon + 1 < userinfo.len() {
                    return true;
                }
            }
        }
        rest = after;
    }
    false
}

/// What a sandboxed command does not get besides: ways out of the sandbox through a process
/// that is not in it (the editor's RPC socket, the user's SSH and GPG agents, the session bus).
/// MCP servers run unsandboxed with the user's rights, so they keep these.
pub const SANDBOX_EXCLUDES: [&str; 5] = ["NVIM", "NVIM_LISTEN_ADDRESS", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS"];

/// `tools.env` as the user set it (the schema owns the defaults and the docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvSettings {
    pub inherit: Option<Inherit>,
    pub exclude: Option<Vec<String>>,
    pub include_only: Option<Vec<String>>,
    pub set: Option<BTreeMap<String, String>>,
}

/// A glob over variable names, in any case.
#[derive(Clone, Debug)]
struct Pattern {
    text: String,
    matcher: Option<GlobMatcher>,
}

impl Pattern {
    fn new(text: &str) -> Pattern {
        let matcher = GlobBuilder::new(text)
            .case_insensitive(true)
            .literal_separator(false)
            .backslash_escape(false)
            .build()
            .ok()
            .map(|g| g.compile_matcher());
        Pattern { text: text.to_string(), matcher }
    }

    fn matches(&self, name: &str) -> bool {
        match &self.matcher {
            Some(m) => m.is_match(name),
            // A pattern globset refuses (`[` unclosed) is taken as a plain name.
            None => self.text.eq_ignore_ascii_case(name),
        }
    }

    /// Whether it names one variable, without wildcards.
    fn names(&self, name: &str) -> bool {
        !self.text.contains(['*', '?', '[']) && self.text.eq_ignore_ascii_case(name)
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

fn patterns<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<Pattern> {
    texts.into_iter().map(Pattern::new).collect()
}

/// The policy in force: the user's settings and the secrets' names, ready to build an
/// environment from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvPolicy {
    inherit: Inherit,
    exclude: Vec<Pattern>,
    include_only: Vec<Pattern>,
    set: BTreeMap<String, String>,
    /// Variables holding a provider's key or token, by name.
    secrets: Vec<String>,
}

impl Default for EnvPolicy {
    /// The default settings, every known provider's key variable excluded.
    fn default() -> Self {
        EnvPolicy::new(&EnvSettings::default())
    }
}

impl EnvPolicy {
    pub fn new(settings: &EnvSettings) -> Self {
        EnvPolicy {
            inherit: settings.inherit.unwrap_or_default(),
            exclude: patterns(settings.exclude.iter().flatten().map(String::as_str)),
            include_only: patterns(settings.include_only.iter().flatten().map(String::as_str)),
            set: settings.set.clone().unwrap_or_default(),
            secrets: crate::provider::ProviderKind::key_vars().into_iter().map(str::to_string).collect(),
        }
    }

    /// Also excludes these variables (the configured provider's: its `api_key_env`, a pi
    /// provider's header variables).
    pub fn with_secrets<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        for name in names {
            let name = name.into();
            if !self.secrets.contains(&name) {
                self.secrets.push(name);
            }
        }
        self
    }

    /// The environment of a command started now, from the host's.
    pub fn command_env(&self, sandboxed: bool) -> Vec<(OsString, OsString)> {
        self.build(std::env::vars_os(), sandboxed)
    }

    /// Applies the policy to `cmd`: its environment is cleared and set to [`Self::command_env`].
    pub fn apply(&self, cmd: &mut tokio::process::Command, sandboxed: bool) {
        cmd.env_clear();
        cmd.envs(self.command_env(sandboxed));
    }

    /// The environment built from `vars` (see the module's doc for the steps).
    pub fn build(&self, vars: impl IntoIterator<Item = (OsString, OsString)>, sandboxed: bool) -> Vec<(OsString, OsString)> {
        let defaults = patterns(DEFAULT_EXCLUDES);
        let mut out: BTreeMap<OsString, OsString> = BTreeMap::new();
        for (name, value) in vars {
            // A name that is not text cannot be matched against the rules: left out.
            let Some(text) = name.to_str() else { continue };
            let secret_value = has_url_password(std::os::unix::ffi::OsStrExt::as_bytes(value.as_os_str()));
            if self.set.contains_key(text) || !self.passes(text, secret_value, sandboxed, &defaults) {
                continue;
            }
            out.insert(name, value);
        }
        out.extend(self.set.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
        out.into_iter().collect()
    }

    /// Whether the variable `name` goes on; `secret_value`: its value holds a password.
    fn passes(&self, name: &str, secret_value: bool, sandboxed: bool, defaults: &[Pattern]) -> bool {
        let inherited = match self.inherit {
            Inherit::All => true,
            Inherit::Core => crate::env_vars::in_core_vars(name),
            Inherit::None => false,
        };
        if !inherited {
            return false;
        }
        if !self.include_only.is_empty() && !self.include_only.iter().any(|p| p.matches(name)) {
            return false;
        }
        let named_by_user = self.include_only.iter().any(|p| p.names(name));
        // The agents' and the bus's sockets are ways out, not secrets: the sandbox's rule
        // decides about them (an unsandboxed `git push` keeps its SSH agent).
        let way_out = SANDBOX_EXCLUDES.iter().any(|s| s.eq_ignore_ascii_case(name));
        let excluded_by_default = self.secrets.iter().any(|s| s.eq_ignore_ascii_case(name))
            || defaults.iter().any(|p| p.matches(name))
            || (!way_out && secret_name(name))
            || secret_value
            || (sandboxed && way_out);
        if excluded_by_default && !named_by_user {
            return false;
        }
        !self.exclude.iter().any(|p| p.matches(name))
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        env.iter().map(|(k, _)| k.to_string_lossy().into_owned()).collect()
    }

    const HOST: &[(&str, &str)] = &[
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("LC_ALL", "C"),
        ("FOO", "bar"),
        ("GH_TOKEN", "gh"),
        ("GITHUB_TOKEN", "ghub"),
        ("GROQ_API_KEY", "groq"),
        ("OPENROUTER_API_KEY", "or"),
        ("my_service_api_key", "lower"),
        ("SOME_PASSWORD", "pw"),
        ("AWS_SECRET_ACCESS_KEY", "aws"),
        ("NVIM", "/run/nvim.sock"),
        ("SSH_AUTH_SOCK", "/run/ssh"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/bus"),
        ("CUSTOM_CRED", "c"),
    ];

    fn policy(settings: EnvSettings) -> EnvPolicy {
        EnvPolicy::new(&settings).with_secrets(["CUSTOM_CRED"])
    }

    #[test]
    fn secrets_never_pass_by_default_and_the_sandbox_loses_its_ways_out() {
        let p = policy(EnvSettings::default());
        assert_eq!(names(&p.build(vars(HOST), true)), ["FOO", "HOME", "LC_ALL", "PATH"]);
        let unsandboxed = names(&p.build(vars(HOST), false));
        assert_eq!(unsandboxed, ["DBUS_SESSION_BUS_ADDRESS", "FOO", "HOME", "LC_ALL", "NVIM", "PATH", "SSH_AUTH_SOCK"]);
    }

    #[test]
    fn every_presets_and_wire_formats_key_is_a_secret_even_without_a_pattern_match() {
        let p = EnvPolicy::default();
        for name in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "COPILOT_GITHUB_TOKEN", "GH_TOKEN"] {
            assert!(p.secrets.iter().any(|s| s == name), "{name} is not among {:?}", p.secrets);
        }
    }

    #[test]
    fn core_keeps_the_core_and_none_keeps_only_what_is_set() {
        let core = policy(EnvSettings { inherit: Some(Inherit::Core), ..EnvSettings::default() });
        assert_eq!(names(&core.build(vars(HOST), false)), ["HOME", "LC_ALL", "PATH"]);
        let set = BTreeMap::from([("ONLY".to_string(), "1".to_string())]);
        let none = policy(EnvSettings { inherit: Some(Inherit::None), set: Some(set), ..EnvSettings::default() });
        assert_eq!(none.build(vars(HOST), false), vars(&[("ONLY", "1")]));
    }

    #[test]
    fn a_name_written_out_in_include_only_or_set_passes_the_default_exclusions() {
        let include = vec!["PATH".to_string(), "GH_TOKEN".to_string(), "NVIM".to_string(), "*_API_KEY".to_string()];
        let p = policy(EnvSettings { include_only: Some(include), ..EnvSettings::default() });
        // A glob selects, it does not lift the default exclusions: the API keys stay out.
        assert_eq!(names(&p.build(vars(HOST), true)), ["GH_TOKEN", "NVIM", "PATH"]);
        let set = BTreeMap::from([("GITHUB_TOKEN".to_string(), "given".to_string())]);
        let p = policy(EnvSettings { set: Some(set), ..EnvSettings::default() });
        let env = p.build(vars(HOST), true);
        assert!(env.contains(&(OsString::from("GITHUB_TOKEN"), OsString::from("given"))), "{env:?}");
        assert!(!env.iter().any(|(_, v)| v == "ghub"), "{env:?}");
    }

    #[test]
    fn the_users_exclude_takes_globs_in_any_case() {
        let p = policy(EnvSettings { exclude: Some(vec!["f?o".into(), "lc_*".into()]), ..EnvSettings::default() });
        assert_eq!(names(&p.build(vars(HOST), true)), ["HOME", "PATH"]);
    }

    #[test]
    fn secrets_by_shape_are_dropped_and_the_shells_own_names_kept() {
        let host = vars(&[
            ("PATH", "/usr/bin"),
            ("PWD", "/work"),
            ("OLDPWD", "/"),
            ("CLASSPATH", "/lib"),
            ("GIT_AUTHOR_NAME", "Ann"),
            ("PASSTHROUGH", "1"),
            ("MYSQL_PWD", "pw"),
            ("GITLAB_PAT", "glpat"),
            ("PAT", "p"),
            ("SMTP_PASS", "s"),
            ("X_AUTH_HEADER", "h"),
            ("XAUTHORITY", "/run/x"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
            ("DATABASE_URL", "postgres://u:pw@h/db"),
            ("HTTPS_PROXY", "http://u:p@proxy:3128"),
            ("REDIS_URL", "redis://:secret@h:6379"),
            ("REPO_URL", "https://user@example.com/x"),
            ("MIRROR_URL", "https://user:@example.com/x"),
            ("HOMEPAGE", "https://example.com/a:b@c"),
            ("SSH_AUTH_SOCK", "/run/ssh"),
        ]);
        let p = EnvPolicy::default();
        let kept = ["CLASSPATH", "GIT_AUTHOR_NAME", "HOMEPAGE", "MIRROR_URL", "OLDPWD", "PASSTHROUGH", "PATH", "PWD", "REPO_URL"];
        assert_eq!(names(&p.build(host.clone(), true)), kept);
        // Unsandboxed, the SSH agent's socket is no secret: it stays.
        let unsandboxed = names(&p.build(host.clone(), false));
        assert!(unsandboxed.contains(&"SSH_AUTH_SOCK".to_string()) && !unsandboxed.contains(&"XAUTHORITY".to_string()), "{unsandboxed:?}");
        // The hatch: a name written out passes, a set value is set.
        let include = ["PATH", "DATABASE_URL", "MYSQL_PWD"].map(String::from).to_vec();
        let p = EnvPolicy::new(&EnvSettings { include_only: Some(include), ..EnvSettings::default() });
        assert_eq!(p.build(host, true), vars(&[("DATABASE_URL", "postgres://u:pw@h/db"), ("MYSQL_PWD", "pw"), ("PATH", "/usr/bin")]));
    }

    #[test]
    fn a_url_password_is_found_anywhere_in_a_value() {
        for yes in ["jdbc:mysql://u:p@h:3306/db", "--db=postgres://a:b@h --x", "x http://u:p%40q@h"] {
            assert!(has_url_password(yes.as_bytes()), "{yes}");
        }
        for no in ["", "https://h/p?a=b:c@d", "ssh://git@github.com/x", "mailto:a:b@c", "://:@"] {
            assert!(!has_url_password(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn a_name_that_is_not_text_is_left_out() {
        use std::os::unix::ffi::OsStringExt;
        let odd = (OsString::from_vec(vec![b'X', 0xff]), OsString::from("v"));
        assert!(EnvPolicy::default().build([odd], false).is_empty());
    }
}
