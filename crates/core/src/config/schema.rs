//! Every setting, once: its name in `setup()`, its name in [`Settings`](super::Settings), its
//! command-line flag and `HANDOFF_*` variable, its type and accepted values, its default and its
//! one-line doc. The front ends derive from this table: the CLI's flags
//! (`cli/settings_args.rs`), the plugin's defaults and validation (`lua/handoff/schema.lua`,
//! written by [`lua_file`]) and the help's option list ([`help_block`], in `doc/handoff.txt`).
//! `tests/settings.rs` fails when a generated file is stale; `HANDOFF_BLESS=1` rewrites it.
//!
//! Adding a setting: one entry in [`SETTINGS`]; a field in `Settings` when the engine reads it
//! (the test beside this module checks that the two agree), then the bless run above.

use crate::agent::DEFAULT_MAX_TURNS;
use crate::provider::ThinkingLevel;
use crate::tools::ToolName;

/// The folder under the editor's data folder (`stdpath("data")`) where sessions live.
pub const SESSION_SUBDIR: &str = "handoff/sessions";
/// The folder under the editor's config folder where prompt templates live.
pub const TEMPLATES_SUBDIR: &str = "handoff/prompts";
/// Lines of a tool's output the chat shows (and a transcript carries).
pub const DEFAULT_TOOL_OUTPUT_LINES: u32 = 12;

/// The largest integer a Lua number holds exactly: the bound of the `u64` settings.
const MAX_EXACT: i64 = (1 << 53) - 1;
const MAX_U32: i64 = u32::MAX as i64;

/// What a setting takes. Names are listed by functions so that they come from the engine's own
/// enums where it has the list.
#[derive(Clone, Copy, Debug)]
pub enum Type {
    Bool,
    Int { min: i64, max: i64 },
    /// A number in (0, 1].
    Fraction,
    /// Columns or lines (a number above 1), or a fraction of the editor's (0 < x ≤ 1).
    Size,
    Text,
    /// A file or folder (made absolute before it reaches the host).
    Path,
    OneOf(fn() -> Vec<&'static str>),
    /// A list of values of the inner type.
    List(&'static Type),
    /// A table whose keys are among `keys` or start with `prefix`, and whose values are of the
    /// inner type.
    Table { keys: fn() -> Vec<&'static str>, prefix: Option<&'static str>, values: &'static Type },
    /// Any table (an MCP server's entry: Claude Code's format, read by the host).
    Object,
    /// A table from any name (a model id) to values of the inner type.
    Map(&'static Type),
    /// A table of these fields, each optional.
    Record(&'static [(&'static str, Type)]),
    /// A key sequence (`"<leader>h"`), or `false` for none.
    Key,
}

/// A default, as the plugin spells it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DefaultValue {
    /// None: the host's default applies (or the feature is off).
    Unset,
    Bool(bool),
    Int(i64),
    Number(f64),
    Text(&'static str),
    /// `false`: a key mapping or a threshold turned off.
    Off,
    /// An empty list or table.
    Empty,
    /// A folder under `stdpath("data")`.
    DataDir(&'static str),
    /// A folder under `stdpath("config")`.
    ConfigDir(&'static str),
}

/// A command-line flag (`--long`) and the environment variable that gives its default.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    pub long: &'static str,
    pub env: Option<&'static str>,
    /// Another name of the flag (`--api` for `--provider`: the wire format's own name).
    pub alias: Option<&'static str>,
}

#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The dotted path in `setup()`'s table, e.g. `provider.model`.
    pub key: &'static str,
    /// The dotted path in `Settings` (`None`: the plugin's own, the host never sees it).
    pub host: Option<&'static str>,
    pub cli: Option<Flag>,
    pub ty: Type,
    pub default: DefaultValue,
    /// `false` is accepted too (meaning off).
    pub or_false: bool,
    pub doc: &'static str,
}

impl Setting {
    /// A setting of the plugin only.
    const fn lua(key: &'static str, ty: Type, default: DefaultValue, doc: &'static str) -> Setting {
        Setting { key, host: None, cli: None, ty, default, or_false: false, doc }
    }

    /// A setting the plugin passes on to the host, as `Settings`' field `host`.
    const fn host(key: &'static str, host: &'static str, ty: Type, default: DefaultValue, doc: &'static str) -> Setting {
        Setting { key, host: Some(host), cli: None, ty, default, or_false: false, doc }
    }

    /// The CLI's flag for it (and its variable).
    const fn flag(self, long: &'static str, env: Option<&'static str>) -> Setting {
        Setting { cli: Some(Flag { long, env, alias: None }), ..self }
    }

    /// The flag's other name (after [`Setting::flag`]).
    const fn alias(self, alias: &'static str) -> Setting {
        match self.cli {
            Some(Flag { long, env, .. }) => Setting { cli: Some(Flag { long, env, alias: Some(alias) }), ..self },
            None => self,
        }
    }

    const fn or_false(self) -> Setting {
        Setting { or_false: true, ..self }
    }

    /// What the setting accepts, in words (the help and every error message say this).
    pub fn accepts(&self) -> String {
        let base = self.ty.describe();
        if self.or_false {
            format!("{base}, or false")
        } else {
            base
        }
    }
}

fn quoted(names: &[&str]) -> String {
    let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    names.join(", ")
}

impl Type {
    pub fn describe(&self) -> String {
        match self {
            Type::Bool => "true or false".into(),
            Type::Int { min, max } if *max == MAX_U32 || *max == MAX_EXACT => format!("an integer >= {min}"),
            Type::Int { min, max } => format!("an integer from {min} to {max}"),
            Type::Fraction => "a number in (0, 1]".into(),
            Type::Size => "a number > 0 (<= 1: a fraction of the whole)".into(),
            Type::Text => "a string".into(),
            Type::Path => "a path".into(),
            Type::OneOf(names) => format!("one of {}", quoted(&names())),
            Type::List(inner) => format!("a list, each {}", inner.describe()),
            Type::Table { keys, prefix, values } => {
                let also = prefix.map(|p| format!(" (or names starting with \"{p}\")")).unwrap_or_default();
                format!("a table from {}{also} to {}", quoted(&keys()), values.describe())
            }
            Type::Object => "a table".into(),
            Type::Map(values) => format!("a table from names to {}", values.describe()),
            Type::Record(fields) => {
                let fields: Vec<String> = fields.iter().map(|(name, ty)| format!("{name} ({})", ty.describe())).collect();
                format!("a table of {}", fields.join(", "))
            }
            Type::Key => "a key (a string), or false for none".into(),
        }
    }
}

/// What `provider` takes (`ProviderKind`'s serde names): pi's protocols and Copilot.
pub fn api_names() -> Vec<&'static str> {
    vec!["openai", "openai-responses", "anthropic", "copilot", "openrouter", "ollama", "gemini", "deepseek", "groq", "xai", "mistral"]
}

/// Every thinking level `Settings` takes: pi's five and its `xhigh` (read as `high`).
pub fn thinking_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = ThinkingLevel::ALL.iter().map(|l| l.as_str()).collect();
    names.push("xhigh");
    names
}

pub fn tool_names() -> Vec<&'static str> {
    ToolName::ALL.iter().map(|t| t.as_str()).collect()
}

/// `consent::Level`'s serde names.
/// When the agent's changes are reviewed hunk by hunk (`changes.review`): after they land, in
/// the approval before they are written, or not at all.
pub fn review_modes() -> Vec<&'static str> {
    vec!["after", "before", "off"]
}

pub fn policy_names() -> Vec<&'static str> {
    vec!["ask", "allow_edits", "allow_sandboxed", "allow_all"]
}

/// `SandboxMode`'s names.
pub fn sandbox_names() -> Vec<&'static str> {
    crate::sandbox::SandboxMode::ALL.iter().map(|m| m.as_str()).collect()
}

/// `tools::Inherit`'s names.
pub fn inherit_names() -> Vec<&'static str> {
    crate::tools::Inherit::ALL.iter().map(|i| i.as_str()).collect()
}

/// `consent::Rule`'s serde names.
pub fn rule_names() -> Vec<&'static str> {
    vec!["allow", "ask", "deny"]
}

/// Where the chat opens.
pub fn position_names() -> Vec<&'static str> {
    vec!["right", "left", "bottom", "top", "tab"]
}

/// What `handoff.auto` takes.
fn auto_handoff_names() -> Vec<&'static str> {
    crate::handoff::AutoHandoff::ALL.iter().map(|m| m.as_str()).collect()
}

/// What `handoff.prepare` takes.
fn prepare_names() -> Vec<&'static str> {
    crate::handoff::Prepare::ALL.iter().map(|m| m.as_str()).collect()
}

/// The actions `keymaps.global` maps (`lua/handoff/keymaps.lua` binds them).
pub fn global_actions() -> Vec<&'static str> {
    vec!["chat", "handoff", "stop", "sessions", "new", "model", "thinking", "todos"]
}

const COUNT: Type = Type::Int { min: 1, max: MAX_U32 };
const BIG_COUNT: Type = Type::Int { min: 1, max: MAX_EXACT };

/// One model's facts in `provider.model_info` (`ModelFacts`).
const MODEL_FACTS: Type = Type::Record(&[
    ("context_window", BIG_COUNT),
    ("max_tokens", COUNT),
    ("reasoning", Type::Bool),
    ("images", Type::Bool),
]);

/// One external agent of `agents` (`ExternalAgent`).
const EXTERNAL_AGENT: Type = Type::Record(&[("command", Type::List(&Type::Text)), ("env", Type::Map(&Type::Text))]);

/// Every setting, in the order the help lists them (the members of a table together).
/// Variables the binary reads outside the settings: its log's filter and file, and where the
/// sandbox keeps its answers across processes.
pub const PROCESS_VARS: [&str; 3] = ["HANDOFF_LOG", "HANDOFF_LOG_FILE", crate::sandbox::kept::DIR_VAR];

/// Every `HANDOFF_*` variable the binary reads: each setting's ([`SETTINGS`]) and
/// [`PROCESS_VARS`]. Tests start the CLI without them, whatever a developer exported.
pub fn variables() -> Vec<&'static str> {
    let settings = SETTINGS.iter().filter_map(|s| s.cli.and_then(|f| f.env));
    settings.chain(PROCESS_VARS).collect()
}

pub const SETTINGS: &[Setting] = &[
    Setting::lua("bin", Type::Path, DefaultValue::Unset,
        "Path of the `handoff-nvim` binary, used as it is (so is $HANDOFF_BIN); nil: the binary :HandoffInstall installed when it fits the plugin, else the plugin's target/release, then target/debug, then $PATH. See |handoff-install|."),
    Setting::lua("install.url", Type::Text, DefaultValue::Unset,
        "Where :HandoffInstall downloads the release's binary from: a folder URL, `{version}` replaced by the release's version, the asset's name appended (default: the release page lua/handoff/release.lua names). A mirror or a local server; the checksum is still the one the plugin pins. See |handoff-install|."),
    Setting::lua("install.curl_args", Type::List(&Type::Text), DefaultValue::Empty,
        "More arguments for curl, e.g. { \"--proxy\", \"http://proxy:3128\" } or { \"--cacert\", \"/etc/ssl/corp.pem\" } (curl reads $https_proxy, $HTTPS_PROXY and $ALL_PROXY itself). See |handoff-install|."),
    Setting::host("provider.api", "api", Type::OneOf(api_names), DefaultValue::Unset,
        "Wire protocol: \"openai\" (the default; any Chat Completions server), \"openai-responses\" (OpenAI's Responses API: its reasoning and codex models), \"anthropic\", \"copilot\" (GitHub Copilot: the login of copilot.vim/copilot.lua, each model's protocol from Copilot's model list; see |handoff-copilot|), or a preset: \"openrouter\", \"ollama\", \"gemini\", \"deepseek\", \"groq\", \"xai\", \"mistral\" (its base URL, key variable and a default model; see |handoff-presets|).")
        .flag("provider", Some("HANDOFF_PROVIDER"))
        .alias("api"),
    Setting::host("provider.base_url", "base_url", Type::Text, DefaultValue::Unset,
        "Base URL of the API, e.g. \"http://127.0.0.1:8080/v1\" (default: the provider's public API).")
        .flag("base-url", Some("HANDOFF_BASE_URL")),
    Setting::host("provider.model", "model", Type::Text, DefaultValue::Unset,
        "Model id (default: \"gpt-4.1-mini\" / \"claude-sonnet-4-5\").")
        .flag("model", Some("HANDOFF_MODEL")),
    Setting::host("provider.api_key_env", "api_key_env", Type::Text, DefaultValue::Unset,
        "Environment variable that holds the API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY when set).")
        .flag("api-key-env", None),
    Setting::host("provider.api_key_cmd", "api_key_cmd", Type::Text, DefaultValue::Unset,
        "Shell command that prints the API key (wins over api_key_env), e.g. \"pass show openai\"; run for each request that needs the key, never while the editor waits (at most 120 s).")
        .flag("api-key-cmd", None),
    Setting::host("provider.context_window", "context_window", BIG_COUNT, DefaultValue::Unset,
        "The model's context window in tokens (the handoff request is fitted to it).")
        .flag("context-window", Some("HANDOFF_CONTEXT_WINDOW")),
    Setting::host("provider.max_tokens", "max_tokens", COUNT, DefaultValue::Unset,
        "Upper bound of reply tokens (max_completion_tokens for api.openai.com and Azure).")
        .flag("max-tokens", None),
    Setting::host("provider.provider_name", "name", Type::Text, DefaultValue::Unset,
        "Provider name recorded in sessions (pi's provider id).")
        .flag("provider-name", None),
    Setting::host("provider.max_retries", "max_retries", Type::Int { min: 0, max: MAX_U32 }, DefaultValue::Unset,
        "Retries on 429/5xx/connection errors.")
        .flag("max-retries", None),
    Setting::host("provider.timeout", "timeout", BIG_COUNT, DefaultValue::Unset,
        "Seconds without data before a request is given up.")
        .flag("timeout", None),
    Setting::host("provider.copilot_token_url", "copilot_token_url", Type::Text, DefaultValue::Unset,
        "Copilot only: where the GitHub token is exchanged for a Copilot token (default: https://api.github.com/copilot_internal/v2/token).")
        .flag("copilot-token-url", Some("HANDOFF_COPILOT_TOKEN_URL")),
    Setting::host("provider.model_info", "model_info", Type::Map(&MODEL_FACTS), DefaultValue::Empty,
        "What is known of models, by id, e.g. { [\"qwen3-coder\"] = { context_window = 65536, max_tokens = 8192 } }: it wins over the provider's model list, pi's models.json and the built-in table (see |handoff-models|); the models named here are offered by :HandoffModel."),
    Setting::host("provider.pi_provider", "pi_provider", Type::Text, DefaultValue::Unset,
        "A provider of pi's models.json (~/.pi/agent/models.json) by name: its baseUrl, api, apiKey, headers and models; what you set here wins (see |handoff-models|).")
        .flag("pi-provider", Some("HANDOFF_PI_PROVIDER")),
    Setting::host("provider.thinking", "thinking", Type::OneOf(thinking_names), DefaultValue::Unset,
        "Thinking level of new sessions (default \"off\"; \"xhigh\" is pi's name for \"high\"); a continued session keeps its own. See |handoff-thinking|.")
        .flag("thinking", Some("HANDOFF_THINKING")),
    Setting::host("provider.reasoning_effort", "reasoning_effort", Type::Bool, DefaultValue::Unset,
        "Whether the model takes `reasoning_effort` (OpenAI-compatible servers; over openai-responses: whether the model reasons); default: on for OpenAI's o-series and gpt-5, off elsewhere.")
        .flag("reasoning-effort", None),
    Setting::host("session_dir", "session_dir", Type::Path, DefaultValue::DataDir(SESSION_SUBDIR),
        "Folder of session files (pi's layout: one sub-folder per working directory); the CLI's default is the same folder.")
        .flag("session-dir", Some("HANDOFF_SESSION_DIR")),
    Setting::host("templates_dir", "templates_dir", Type::Path, DefaultValue::ConfigDir(TEMPLATES_SUBDIR),
        "Folder of prompt templates: `NAME.md` is used as `/NAME args` in the prompt.")
        .flag("templates-dir", Some("HANDOFF_TEMPLATES_DIR")),
    Setting::host("system_prompt", "system_prompt", Type::Text, DefaultValue::Unset,
        "Replaces handoff.nvim's words in the system prompt; the instruction files (AGENTS.md), skills, date and working directory still follow. See |handoff-system-prompt|.")
        .flag("system-prompt", None),
    Setting::host("append_system_prompt", "append_system_prompt", Type::Text, DefaultValue::Unset,
        "Added after the system prompt's words (default: nothing). See |handoff-system-prompt|.")
        .flag("append-system-prompt", None),
    Setting::lua("log_file", Type::Path, DefaultValue::Unset,
        "The host's log file (nil: stdpath(\"log\") .. \"/handoff.log\")."),
    Setting::lua("changes.review", Type::OneOf(review_modes), DefaultValue::Text("after"),
        "\"after\": the agent's changes land and stay pending, hunk by hunk, until kept or rejected (|handoff-hunks|); \"before\": an edit's or write's approval is reviewed hunk by hunk and only the kept lines are written (|handoff-hunks-before|); \"off\": not shown for review."),
    Setting::lua("resume_last", Type::Bool, DefaultValue::Bool(false),
        "Continue the newest session of the working directory instead of starting a new one."),
    Setting::lua("models", Type::List(&Type::Text), DefaultValue::Empty,
        "Models offered by `/model` and :HandoffModel (any other name can be typed)."),
    Setting::lua("layout.position", Type::OneOf(position_names), DefaultValue::Text("right"),
        "Where the chat opens."),
    Setting::lua("layout.width", Type::Size, DefaultValue::Number(0.4),
        "Width of a left/right chat: columns, or a fraction of the editor."),
    Setting::lua("layout.height", Type::Size, DefaultValue::Number(0.4),
        "Height of a top/bottom chat: lines, or a fraction of the editor."),
    Setting::lua("layout.prompt_height", Type::Size, DefaultValue::Int(5),
        "Lines of the prompt window under the chat."),
    Setting::lua("layout.document_height", COUNT, DefaultValue::Int(15),
        "Height of the split that shows a handoff document."),
    Setting::lua("keymaps.global", Type::Table { keys: global_actions, prefix: None, values: &Type::Text }, DefaultValue::Empty,
        "Global Normal-mode mappings, none by default, e.g. { chat = \"<leader>hc\", handoff = \"<leader>hh\" }."),
    Setting::lua("keymaps.add_selection", Type::Key, DefaultValue::Off,
        "Visual mode, global: put the selection into the prompt (as :'<,'>HandoffChat), e.g. \"<leader>ha\"."),
    Setting::lua("keymaps.submit_normal", Type::Key, DefaultValue::Text("<CR>"), "Prompt buffer, Normal mode: send."),
    Setting::lua("keymaps.submit_insert", Type::Key, DefaultValue::Text("<C-s>"), "Prompt buffer, Insert mode: send."),
    Setting::lua("keymaps.stop", Type::Key, DefaultValue::Text("<C-c>"), "Chat and prompt buffers: stop the response."),
    Setting::lua("keymaps.close", Type::Key, DefaultValue::Text("q"), "Chat buffer and todo list window: close."),
    Setting::lua("keymaps.earlier", Type::Key, DefaultValue::Text("<CR>"),
        "Chat buffer: on the \"earlier items\" line a page more; on a reply's thinking, open or close it."),
    Setting::lua("keymaps.parent", Type::Key, DefaultValue::Text("gp"),
        "Chat buffer and read-only sessions, on the \"Handed off from\" line: open that session read-only (|handoff-lineage|)."),
    Setting::lua("keymaps.review.next", Type::Key, DefaultValue::Text("]h"),
        "Buffers with the agent's hunks: the next pending hunk, on to the next file's (|handoff-hunks|)."),
    Setting::lua("keymaps.review.prev", Type::Key, DefaultValue::Text("[h"),
        "Buffers with the agent's hunks: the previous pending hunk, back to the previous file's."),
    Setting::lua("keymaps.review.keep", Type::Key, DefaultValue::Text("<Leader>ak"),
        "Buffers with the agent's hunks: keep the hunk under the cursor (Visual: only the selected lines of it)."),
    Setting::lua("keymaps.review.reject", Type::Key, DefaultValue::Text("<Leader>ar"),
        "Buffers with the agent's hunks: reject the hunk under the cursor (Visual: only the selected lines of it)."),
    Setting::lua("keymaps.review.keep_all", Type::Key, DefaultValue::Text("<Leader>aK"),
        "Buffers with the agent's hunks: keep every pending hunk of the session."),
    Setting::lua("keymaps.review.reject_all", Type::Key, DefaultValue::Text("<Leader>aR"),
        "Buffers with the agent's hunks: reject every pending hunk of the session."),
    Setting::lua("keymaps.approval.allow", Type::Key, DefaultValue::Text("a"),
        "Chat buffer: allow the tool call the cursor is in (else the oldest waiting)."),
    Setting::lua("keymaps.approval.always", Type::Key, DefaultValue::Text("A"),
        "Chat buffer: allow it and the same calls for the rest of the session."),
    Setting::lua("keymaps.approval.reject", Type::Key, DefaultValue::Text("r"),
        "Chat buffer: reject it, with a reason the model reads."),
    Setting::lua("keymaps.approval.cancel", Type::Key, DefaultValue::Text("c"), "Chat buffer: reject it and end the turn."),
    Setting::lua("keymaps.approval.diff", Type::Key, DefaultValue::Text("d"),
        "Chat buffer: show the proposed change side by side."),
    Setting::host("tools.enabled", "tools.enabled", Type::List(&Type::OneOf(tool_names)), DefaultValue::Unset,
        "The tools the model may call (pi's names); default: read, bash, edit, write, todo_write, session_query (offered only to a session handed off from another; a list without it turns it off).")
        .flag("tools", None),
    Setting::host("tools.policy", "tools.policy", Type::OneOf(policy_names), DefaultValue::Text("ask"),
        "\"ask\": edits and commands ask; \"allow_edits\": commands ask; \"allow_sandboxed\": commands that run in the sandbox run unasked, edits and unsandboxed commands ask; \"allow_all\": nothing asks (the CLI's --yes; it never lifts the sandbox, nor lets read, edit or write reach a protected path: |handoff-sandbox|)."),
    Setting::host("tools.rules", "tools.rules", Type::Table { keys: tool_names, prefix: Some(crate::tools::MCP_PREFIX), values: &Type::OneOf(rule_names) }, DefaultValue::Empty,
        "Per tool, over the policy, e.g. { bash = \"deny\" }; an MCP server's tools by server or by tool, e.g. { mcp__github = \"allow\", mcp__github__delete_repo = \"deny\" }. See |handoff-mcp|."),
    Setting::host("tools.env.inherit", "tools.env.inherit", Type::OneOf(inherit_names), DefaultValue::Text(crate::tools::Inherit::DEFAULT.as_str()),
        "What environment bash commands and MCP stdio servers start from: \"all\" (the editor's), \"core\" (PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TERM, TMPDIR, TZ and the like), \"none\" (only tools.env.set). Either way no variable named like *KEY*, *TOKEN*, *SECRET* or *PASSWORD* or shaped like a secret's (*_PAT, *_PWD, *AUTH*, *CREDENTIAL*…), none whose value is a URL with a password, no provider's key nor any variable your provider settings name, and for sandboxed commands no NVIM, SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS and the like. See |handoff-env|.")
        .flag("env-inherit", None),
    Setting::host("tools.env.exclude", "tools.env.exclude", Type::List(&Type::Text), DefaultValue::Empty,
        "More variables commands do not get: names or globs (* and ?, any case), e.g. { \"AWS_*\" }.")
        .flag("env-exclude", None),
    Setting::host("tools.env.include_only", "tools.env.include_only", Type::List(&Type::Text), DefaultValue::Empty,
        "When given, only these variables (names or globs) pass. A name written out here passes even the default exclusions, so its value reaches the model's tools and whatever they print reaches the provider.")
        .flag("env-include-only", None),
    Setting::host("tools.env.set", "tools.env.set", Type::Map(&Type::Text), DefaultValue::Empty,
        "Variables every command gets with these values, e.g. { GH_TOKEN = \"…\" }, whatever the rest says (the value then reaches the model's tools)."),
    Setting::host("mcp.servers", "mcp.servers", Type::Map(&Type::Object), DefaultValue::Empty,
        "MCP servers by name, each as Claude Code's .mcp.json writes one: { command = \"npx\", args = { … }, env = { … } } or { type = \"http\", url = \"…\", headers = { … } }; ${VAR} and ${VAR:-default} are expanded. See |handoff-mcp|."),
    Setting::host("mcp.user_file", "mcp.user_file", Type::Path, DefaultValue::ConfigDir(crate::mcp::config::USER_FILE),
        "The user's MCP servers (Claude Code's format; its servers need no trust)."),
    Setting::host("mcp.config_files", "mcp.config_files", Type::List(&Type::Path), DefaultValue::Unset,
        "More files of MCP servers (Claude Code's format).")
        .flag("mcp-config", None),
    Setting::host("mcp.project", "mcp.project", Type::Bool, DefaultValue::Bool(true),
        "Read the project's .mcp.json (its servers start only once you trust the file's content: :HandoffMcp trust)."),
    Setting::host("mcp.startup_timeout", "mcp.startup_timeout", COUNT, DefaultValue::Int(crate::mcp::config::DEFAULT_STARTUP_TIMEOUT as i64),
        "Seconds an MCP server has to start and list its tools (the first prompt waits for them at most this long)."),
    Setting::host("sandbox", "sandbox", Type::OneOf(sandbox_names), DefaultValue::Text("workspace-write"),
        "Where bash commands may write: \"workspace-write\" (the project folder, a temp folder of their own and /dev/null), \"read-only\" (only that temp folder), \"off\" (anywhere the user can). A command that looks blocked is offered a re-run outside. See |handoff-sandbox|.")
        .flag("sandbox", Some("HANDOFF_SANDBOX")),
    Setting::host("network", "network", Type::Bool, DefaultValue::Bool(false),
        "Whether sandboxed bash commands may use the network (sockets other than AF_UNIX). See |handoff-sandbox|.")
        .flag("network", Some("HANDOFF_NETWORK")),
    Setting::host("agents", "agents", Type::Map(&EXTERNAL_AGENT), DefaultValue::Empty,
        "External agents speaking the Agent Client Protocol, by name: { claude = { command = { \"npx\", \"-y\", \"@zed-industries/claude-agent-acp\" }, env = { … } } }. Used by :HandoffAgent NAME and the CLI's --agent NAME (on the command line as JSON); :checkhealth handoff lists them. See |handoff-agents|.")
        .flag("agents", Some("HANDOFF_AGENTS")),
    Setting::host("max_turns", "max_turns", COUNT, DefaultValue::Int(DEFAULT_MAX_TURNS as i64),
        "Turns of one prompt at most (each round of tool calls is a turn).")
        .flag("max-turns", None),
    Setting::lua("handoff.review", Type::Bool, DefaultValue::Bool(false),
        "Open the document for editing before the new session starts (as :Handoff! does)."),
    Setting::lua("handoff.suggest_at", Type::Fraction, DefaultValue::Number(0.8),
        "Suggest :Handoff (once per session) when a reply leaves the conversation above this share of the context window; false: never.")
        .or_false(),
    Setting::host("handoff.auto", "handoff.auto", Type::OneOf(auto_handoff_names), DefaultValue::Text("continue"),
        "At the wall (the next request would leave no room for a handoff, or the provider refused one as too large): \"continue\" hands off by itself and goes on in the new session, \"review\" opens the document first, \"off\" does nothing. See |handoff-auto|.")
        .flag("auto-handoff", Some("HANDOFF_AUTO")),
    Setting::host("handoff.threshold", "handoff.threshold", Type::Size, DefaultValue::Unset,
        "Where the wall is: a share of the context window, or a count of tokens (default: the window minus max(16384, 15%) minus handoff.room, at most 90%).")
        .flag("handoff-threshold", None),
    Setting::host("handoff.room", "handoff.room", COUNT, DefaultValue::Int(crate::agent::wall::DEFAULT_HANDOFF_ROOM as i64),
        "Tokens the handoff document is given room for (at most a quarter of the window).")
        .flag("handoff-room", None),
    Setting::host("handoff.prepare", "handoff.prepare", Type::OneOf(prepare_names), DefaultValue::Unset,
        "Draft the handoff document before the wall: \"background\" writes it with a detached request once the conversation nears the wall (the same prefix as the work's requests, so a provider that caches prompts reads it from its cache), while the work goes on; at the wall the new session starts from it and the turns since, without waiting for a document; \"off\" writes it at the wall. Default: \"background\", but \"off\" for GitHub Copilot, where every request, this one too, is a premium request. See |handoff-auto|.")
        .flag("handoff-prepare", Some("HANDOFF_PREPARE")),
    Setting::host("handoff.model", "handoff.model", Type::Text, DefaultValue::Unset,
        "Another model of the same provider that writes the handoff documents (the draft, the document at the wall, :Handoff), e.g. a faster or cheaper one; its window and limits come from the model catalogue (|handoff-models|). The work keeps the session's model. The prompt cache is per model: its requests do not read the work's cache. Default: the session's model.")
        .flag("handoff-model", Some("HANDOFF_HANDOFF_MODEL")),
    Setting::host("handoff.clear_tool_results", "handoff.clear_tool_results", BIG_COUNT, DefaultValue::Unset,
        "Send only the newest this many tokens of tool output whole: older tool results reach the model as a one-line placeholder naming the tool (the session file keeps them; session_query, the handoff's facts and a resume still read them), which pushes the wall back. Cleared in batches of half of it, so the provider's prompt cache misses once a batch: where prompts are cached it costs more than it saves (1.44× weighted in doc/benchmarks.md §15b), so it is for a local model or a provider without a cache. Default: off (every result sent). See |handoff-prepare|.")
        .flag("handoff-clear-tool-results", None),
    Setting::lua("tool_output_lines", COUNT, DefaultValue::Int(DEFAULT_TOOL_OUTPUT_LINES as i64),
        "Lines of a tool's output shown in the chat (the rest is in the session)."),
    Setting::lua("context.max_bytes", BIG_COUNT, DefaultValue::Int(256 * 1024),
        "Bytes of one attachment at most (a larger file or buffer is named, not attached)."),
    Setting::lua("context.max_files", BIG_COUNT, DefaultValue::Int(5000),
        "Files `@path` completion lists at most outside a git repository (a folder walk)."),
];

// Checking -------------------------------------------------------------------------------

impl Type {
    /// Whether a JSON value is of this type (the plugin's `conforms` is the same in Lua).
    fn admits(&self, value: &serde_json::Value) -> bool {
        use serde_json::Value as V;
        match (self, value) {
            (Type::Bool, V::Bool(_)) => true,
            (Type::Int { min, max }, V::Number(n)) => n.as_i64().is_some_and(|n| (*min..=*max).contains(&n)),
            (Type::Fraction, V::Number(n)) => n.as_f64().is_some_and(|n| n > 0.0 && n <= 1.0),
            (Type::Size, V::Number(n)) => n.as_f64().is_some_and(|n| n > 0.0),
            (Type::Text | Type::Path | Type::Key, V::String(_)) => true,
            (Type::Key, V::Bool(false)) => true,
            (Type::OneOf(names), V::String(s)) => names().contains(&s.as_str()),
            (Type::List(inner), V::Array(items)) => items.iter().all(|i| inner.admits(i)),
            (Type::Table { keys, prefix, values }, V::Object(map)) => {
                let keys = keys();
                let known = |k: &str| keys.contains(&k) || prefix.is_some_and(|p| k.starts_with(p));
                map.iter().all(|(k, v)| known(k) && values.admits(v))
            }
            (Type::Object, V::Object(_)) => true,
            (Type::Map(values), V::Object(map)) => map.values().all(|v| values.admits(v)),
            (Type::Record(fields), V::Object(map)) => map.iter().all(|(k, v)| {
                v.is_null() || fields.iter().any(|(name, ty)| name == k && ty.admits(v))
            }),
            _ => false,
        }
    }
}

/// Checks the settings a front end filled in against the schema's types and ranges (serde has
/// checked the shapes): the first one out of range, named as `setup()` names it.
pub fn check(settings: &super::Settings) -> Result<(), String> {
    let all = serde_json::to_value(settings).map_err(|e| e.to_string())?;
    for s in SETTINGS {
        let Some(host) = s.host else { continue };
        let value = host.split('.').try_fold(&all, |v, part| v.get(part));
        let Some(value) = value.filter(|v| !v.is_null()) else { continue };
        let false_allowed = s.or_false && value == &serde_json::Value::Bool(false);
        if !false_allowed && !s.ty.admits(value) {
            return Err(format!("{} must be {}, got {value}", s.key, s.accepts()));
        }
    }
    Ok(())
}

// The plugin's schema file -----------------------------------------------------------------

/// `s` as a Lua string literal (every file generated for the plugin writes strings with it).
pub fn lua_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn lua_list(names: &[&str]) -> String {
    let items: Vec<String> = names.iter().map(|n| lua_string(n)).collect();
    format!("{{ {} }}", items.join(", "))
}

/// A Lua number literal: integers without a fraction.
fn lua_number(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

impl DefaultValue {
    /// The default as a Lua expression (`nil` when unset).
    pub fn lua(&self) -> String {
        match self {
            DefaultValue::Unset => "nil".into(),
            DefaultValue::Bool(b) => b.to_string(),
            DefaultValue::Int(n) => n.to_string(),
            DefaultValue::Number(n) => lua_number(*n),
            DefaultValue::Text(s) => lua_string(s),
            DefaultValue::Off => "false".into(),
            DefaultValue::Empty => "{}".into(),
            DefaultValue::DataDir(sub) => format!("vim.fn.stdpath(\"data\") .. {}", lua_string(&format!("/{sub}"))),
            DefaultValue::ConfigDir(sub) => format!("vim.fn.stdpath(\"config\") .. {}", lua_string(&format!("/{sub}"))),
        }
    }
}

impl Type {
    /// The type as the plugin's validator reads it (`lua/handoff/config.lua`).
    fn lua(&self) -> String {
        match self {
            Type::Bool => "{ kind = \"bool\" }".into(),
            Type::Int { min, max } => format!("{{ kind = \"int\", min = {min}, max = {max} }}"),
            Type::Fraction => "{ kind = \"fraction\" }".into(),
            Type::Size => "{ kind = \"size\" }".into(),
            Type::Text => "{ kind = \"string\" }".into(),
            Type::Path => "{ kind = \"path\" }".into(),
            Type::OneOf(names) => format!("{{ kind = \"one_of\", values = {} }}", lua_list(&names())),
            Type::List(inner) => format!("{{ kind = \"list\", item = {} }}", inner.lua()),
            Type::Table { keys, prefix, values } => {
                let prefix = prefix.map(|p| format!(", prefix = {}", lua_string(p))).unwrap_or_default();
                format!("{{ kind = \"table\", keys = {}{prefix}, value = {} }}", lua_list(&keys()), values.lua())
            }
            Type::Map(values) => format!("{{ kind = \"map\", value = {} }}", values.lua()),
            Type::Record(fields) => {
                let fields: Vec<String> = fields.iter().map(|(name, ty)| format!("{name} = {}", ty.lua())).collect();
                format!("{{ kind = \"record\", fields = {{ {} }} }}", fields.join(", "))
            }
            Type::Object => "{ kind = \"object\" }".into(),
            Type::Key => "{ kind = \"key\" }".into(),
        }
    }
}

impl Type {
    /// The type in LuaCATS annotations.
    fn annotation(&self) -> String {
        match self {
            Type::Bool => "boolean".into(),
            Type::Int { .. } => "integer".into(),
            Type::Fraction | Type::Size => "number".into(),
            Type::Text | Type::Path => "string".into(),
            Type::OneOf(names) => names().iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join("|"),
            Type::List(inner) => match inner {
                Type::OneOf(_) => format!("({})[]", inner.annotation()),
                _ => format!("{}[]", inner.annotation()),
            },
            Type::Object => "table".into(),
            Type::Table { values, .. } | Type::Map(values) => format!("table<string, {}>", values.annotation()),
            Type::Record(fields) => {
                let fields: Vec<String> = fields.iter().map(|(name, ty)| format!("{name}?: {}", ty.annotation())).collect();
                format!("{{ {} }}", fields.join(", "))
            }
            Type::Key => "string|false".into(),
        }
    }
}

/// The tables of `setup()`'s options, outermost first (`""`: the top level).
fn tables() -> Vec<&'static str> {
    let mut out = vec![""];
    for s in SETTINGS {
        let mut end = 0;
        while let Some(dot) = s.key[end..].find('.') {
            end += dot;
            let table = &s.key[..end];
            if !out.contains(&table) {
                out.push(table);
            }
            end += 1;
        }
    }
    out
}

fn class_name(table: &str) -> String {
    if table.is_empty() {
        "handoff.Config".into()
    } else {
        format!("handoff.Config.{table}")
    }
}

/// LuaCATS classes of `setup()`'s options, for the language server.
fn annotations() -> String {
    let mut out = String::new();
    for table in tables() {
        out.push_str(&format!("---@class {}\n", class_name(table)));
        let prefix = if table.is_empty() { String::new() } else { format!("{table}.") };
        let mut listed: Vec<&str> = Vec::new();
        for s in SETTINGS {
            let Some(rest) = s.key.strip_prefix(prefix.as_str()) else { continue };
            match rest.split_once('.') {
                None => {
                    let ty = if s.or_false { format!("{}|false", s.ty.annotation()) } else { s.ty.annotation() };
                    out.push_str(&format!("---@field {rest}? {ty} {}\n", s.doc));
                }
                Some((sub, _)) if !listed.contains(&sub) => {
                    listed.push(sub);
                    out.push_str(&format!("---@field {sub}? {}\n", class_name(&format!("{prefix}{sub}"))));
                }
                Some(_) => {}
            }
        }
        out.push('\n');
    }
    out
}

/// `lua/handoff/schema.lua`: the settings as data for the plugin (defaults and validation).
pub fn lua_file() -> String {
    let mut out = String::new();
    out.push_str("-- Generated from crates/core/src/config/schema.rs: do not edit. `HANDOFF_BLESS=1 cargo test --test\n");
    out.push_str("-- settings` rewrites it (tests/settings.rs fails while it is stale).\n");
    out.push_str("-- Each setting: `key` (its dotted path in setup()), `host` (its name in the host's settings;\n");
    out.push_str("-- nil: the plugin's own), `type`, `default` (nil: unset), `or_false` (false is accepted),\n");
    out.push_str("-- `accepts` (what the type takes, in words) and `doc`.\n\n");
    out.push_str(&annotations());
    out.push_str("return {\n");
    out.push_str(&format!(
        "  --- The settings' digest: a host built from other sources answers `schema_digest` with another.\n  digest = {},\n",
        lua_string(&digest())
    ));
    out.push_str(&format!("  --- The thinking levels, lowest first (the ones offered).\n  thinking_levels = {},\n",
        lua_list(&ThinkingLevel::ALL.iter().map(|l| l.as_str()).collect::<Vec<_>>())));
    out.push_str(&format!("  --- Every name a thinking level is taken by (pi's `xhigh` is `high`).\n  thinking_names = {},\n",
        lua_list(&thinking_names())));
    out.push_str("  settings = {\n");
    for s in SETTINGS {
        out.push_str("    {\n");
        out.push_str(&format!("      key = {},\n", lua_string(s.key)));
        if let Some(host) = s.host {
            out.push_str(&format!("      host = {},\n", lua_string(host)));
        }
        out.push_str(&format!("      type = {},\n", s.ty.lua()));
        if s.default != DefaultValue::Unset {
            out.push_str(&format!("      default = {},\n", s.default.lua()));
        }
        if s.or_false {
            out.push_str("      or_false = true,\n");
        }
        out.push_str(&format!("      accepts = {},\n", lua_string(&s.accepts())));
        out.push_str(&format!("      doc = {},\n", lua_string(s.doc)));
        out.push_str("    },\n");
    }
    out.push_str("  },\n}\n");
    out
}

/// A digest of the settings as the host reads them (names, types, defaults): the plugin's
/// generated `schema.lua` holds it, and a host binary built from other sources (a stale release
/// build of the same version) answers another, so the plugin can say "rebuild" instead of
/// failing on a setting the old host does not know. Only the settings the host takes count: a
/// setting of the plugin alone (`bin`, `install.*`, the layout) never reaches the host, so a
/// release's binary still fits a checkout that changed only those.
pub fn digest() -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for s in SETTINGS.iter().filter(|s| s.host.is_some()) {
        let line = format!("{}|{}|{}|{}|{}\n", s.key, s.host.unwrap_or(""), s.ty.lua(), s.default.lua(), s.or_false);
        hash.update(line.as_bytes());
    }
    hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

// The help's option list -------------------------------------------------------------------

/// Words of `text` in lines of at most `width` characters (a longer word keeps its own line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The body of `doc/handoff.txt`'s "All options" example: a `setup()` call with every setting at
/// its default, each under a comment with its doc and what it accepts.
pub fn help_block() -> String {
    const WIDTH: usize = 78;
    let mut out = String::from("    require(\"handoff\").setup({\n");
    let mut open: Vec<&str> = Vec::new();
    for s in SETTINGS {
        let mut parts: Vec<&str> = s.key.split('.').collect();
        let Some(name) = parts.pop() else { continue };
        // Close the tables this key is not in, open the ones it is.
        let common = open.iter().zip(&parts).take_while(|(a, b)| a == b).count();
        while open.len() > common {
            open.pop();
            out.push_str(&format!("{}}},\n", "  ".repeat(open.len() + 3)));
        }
        for table in &parts[common..] {
            out.push_str(&format!("{}{table} = {{\n", "  ".repeat(open.len() + 3)));
            open.push(table);
        }
        let indent = "  ".repeat(open.len() + 3);
        let text = match s.ty {
            // Said by the doc or the default already.
            Type::Text | Type::Path | Type::Bool | Type::Key if !s.or_false => s.doc.to_string(),
            _ => format!("{} Accepts {}.", s.doc, s.accepts()),
        };
        for line in wrap(&text, WIDTH - indent.len() - 3) {
            out.push_str(&format!("{indent}-- {line}\n"));
        }
        out.push_str(&format!("{indent}{name} = {},\n", s.default.lua()));
    }
    while !open.is_empty() {
        open.pop();
        out.push_str(&format!("{}}},\n", "  ".repeat(open.len() + 3)));
    }
    out.push_str("    })\n");
    out
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::config::{HandoffSettings, Settings, ToolSettings};
    use crate::provider::Api;
    use crate::tools::consent::{Level, Rule};

    fn names_of<T: serde::Serialize>(values: &[T]) -> Vec<String> {
        values.iter().map(|v| serde_json::to_value(v).unwrap().as_str().unwrap().to_string()).collect()
    }

    #[test]
    fn the_listed_names_are_the_enums_own() {
        // A match per enum: a new variant fails to compile here until it is listed.
        use crate::config::ProviderKind as K;
        for kind in K::ALL {
            match kind {
                K::Openai | K::OpenaiResponses | K::Anthropic | K::Copilot => {}
                K::Openrouter | K::Ollama | K::Gemini | K::Deepseek | K::Groq | K::Xai | K::Mistral => {}
            }
        }
        assert_eq!(names_of(&K::ALL), api_names());
        // Every wire format is a provider kind of the same name.
        for api in [Api::Openai, Api::OpenaiResponses, Api::Anthropic] {
            assert_eq!(names_of(&[api]), names_of(&[K::from(api)]));
        }
        let levels = [Level::Ask, Level::AllowEdits, Level::AllowSandboxed, Level::AllowAll];
        for level in levels {
            match level {
                Level::Ask | Level::AllowEdits | Level::AllowSandboxed | Level::AllowAll => {}
            }
        }
        assert_eq!(names_of(&levels), policy_names());
        assert_eq!(names_of(&crate::sandbox::SandboxMode::ALL), sandbox_names());
        assert_eq!(names_of(&crate::tools::Inherit::ALL), inherit_names());
        for rule in [Rule::Allow, Rule::Ask, Rule::Deny] {
            match rule {
                Rule::Allow | Rule::Ask | Rule::Deny => {}
            }
        }
        assert_eq!(names_of(&[Rule::Allow, Rule::Ask, Rule::Deny]), rule_names());
        for name in thinking_names() {
            let level: ThinkingLevel = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(name.parse::<ThinkingLevel>().unwrap(), level, "{name}");
        }
    }

    /// Every leaf of `value` as a dotted path.
    fn leaves(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
        for (k, v) in value.as_object().unwrap() {
            let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            if k == "tools" || k == "handoff" || k == "mcp" || (k == "env" && prefix == "tools") {
                leaves(&path, v, out);
            } else {
                out.push(path);
            }
        }
    }

    #[test]
    fn the_host_settings_are_the_fields_of_settings() {
        let all = Settings {
            tools: Some(ToolSettings { env: Some(crate::tools::EnvSettings::default()), ..ToolSettings::default() }),
            handoff: Some(HandoffSettings::default()),
            mcp: Some(crate::mcp::McpSettings::default()),
            ..Settings::default()
        };
        let mut fields = Vec::new();
        leaves("", &serde_json::to_value(&all).unwrap(), &mut fields);
        let mut host: Vec<String> = SETTINGS.iter().filter_map(|s| s.host.map(str::to_string)).collect();
        fields.sort();
        host.sort();
        assert_eq!(host, fields);
    }

    #[test]
    fn check_refuses_values_out_of_range_naming_the_option() {
        let ok = Settings { max_turns: Some(1), max_retries: Some(0), ..Settings::default() };
        assert_eq!(check(&ok), Ok(()));
        let zero = Settings { max_turns: Some(0), ..Settings::default() };
        assert_eq!(check(&zero), Err("max_turns must be an integer >= 1, got 0".to_string()));
        let window = Settings { context_window: Some(0), ..Settings::default() };
        assert!(check(&window).unwrap_err().starts_with("provider.context_window must be"));
        let mut rules = std::collections::HashMap::new();
        rules.insert("bahs".to_string(), Rule::Deny);
        let rules = Settings { tools: Some(ToolSettings { rules, ..ToolSettings::default() }), ..Settings::default() };
        assert!(check(&rules).unwrap_err().starts_with("tools.rules must be a table from \"read\""));
        let tools = ToolSettings { enabled: Some(vec!["read".into(), "nope".into()]), ..ToolSettings::default() };
        let tools = Settings { tools: Some(tools), ..Settings::default() };
        assert!(check(&tools).unwrap_err().contains("got [\"read\",\"nope\"]"));
    }

    #[test]
    fn keys_are_unique_and_tables_listed_together() {
        let mut seen = std::collections::HashSet::new();
        let mut closed = std::collections::HashSet::new();
        let mut current: Option<&str> = None;
        for s in SETTINGS {
            assert!(seen.insert(s.key), "{} twice", s.key);
            let table = s.key.rsplit_once('.').map(|(t, _)| t.split('.').next().unwrap_or(t));
            if table != current {
                if let Some(t) = current {
                    closed.insert(t);
                }
                assert!(table.is_none_or(|t| !closed.contains(t)), "{} is apart from its table", s.key);
                current = table;
            }
        }
    }
}
