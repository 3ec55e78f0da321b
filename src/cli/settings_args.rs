//! The command-line face of `Settings`: flags and `HANDOFF_*` variables. The engine's settings
//! struct stays plain; clap lives here, in the front end that parses a command line.

use std::path::PathBuf;

use crate::core::config::{Settings, ToolSettings};
use crate::core::tools::consent;
use crate::core::provider::{Api, ThinkingLevel};

/// `--provider`'s values: the wire protocols of `Api`, spelled as on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiArg {
    /// OpenAI Chat Completions (`/chat/completions`): OpenAI, Ollama, llama.cpp, vLLM, LM Studio, OpenRouter.
    Openai,
    /// Anthropic Messages (`/messages`).
    Anthropic,
}

impl From<ApiArg> for Api {
    fn from(arg: ApiArg) -> Self {
        match arg {
            ApiArg::Openai => Api::Openai,
            ApiArg::Anthropic => Api::Anthropic,
        }
    }
}

/// Provider and storage flags, accepted by every command. Every one is optional: defaults come
/// from the provider (and the session folder's from `crate::frontend_paths`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SettingsArgs {
    /// Wire protocol: openai (any Chat Completions server) or anthropic.
    #[arg(long = "provider", env = "HANDOFF_PROVIDER", value_enum, global = true)]
    pub api: Option<ApiArg>,
    /// Base URL of the API, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, env = "HANDOFF_BASE_URL", global = true)]
    pub base_url: Option<String>,
    #[arg(long, env = "HANDOFF_MODEL", global = true)]
    pub model: Option<String>,
    /// Environment variable that holds the API key.
    #[arg(long, global = true)]
    pub api_key_env: Option<String>,
    /// Shell command that prints the API key.
    #[arg(long, global = true)]
    pub api_key_cmd: Option<String>,
    /// The model's context window in tokens (the handoff request is fitted to it).
    #[arg(long, env = "HANDOFF_CONTEXT_WINDOW", global = true)]
    pub context_window: Option<u64>,
    /// Upper bound of reply tokens.
    #[arg(long, global = true)]
    pub max_tokens: Option<u32>,
    /// Provider name recorded in sessions (pi's provider id).
    #[arg(long = "provider-name", global = true)]
    pub name: Option<String>,
    /// Folder of session files (pi's layout: one sub-folder per working directory).
    #[arg(long, env = "HANDOFF_SESSION_DIR", global = true)]
    pub session_dir: Option<PathBuf>,
    /// Folder of prompt templates (`name.md`, used as `/name args`).
    #[arg(long, env = "HANDOFF_TEMPLATES_DIR", global = true)]
    pub templates_dir: Option<PathBuf>,
    /// Retries on 429/5xx/connection errors.
    #[arg(long, global = true)]
    pub max_retries: Option<u32>,
    /// Seconds without data before a request is given up.
    #[arg(long, global = true)]
    pub timeout: Option<u64>,
    /// Replaces the system prompt's words (instruction files, skills, the date and the working
    /// directory still follow).
    #[arg(long, global = true)]
    pub system_prompt: Option<String>,
    /// Added after the system prompt's words.
    #[arg(long, global = true)]
    pub append_system_prompt: Option<String>,
    /// The tools the model may call, comma-separated (pi's names: read, bash, edit, write, grep,
    /// find, ls, todo_write); default read, bash, edit, write, todo_write.
    #[arg(long, value_delimiter = ',', global = true)]
    pub tools: Option<Vec<String>>,
    /// Run every tool call without asking (edits and commands included).
    #[arg(long, global = true)]
    pub yes: bool,
    /// Turns of one prompt at most (each round of tool calls is a turn).
    #[arg(long, global = true)]
    pub max_turns: Option<u32>,
    /// Thinking level: off, minimal, low, medium, high. A new session starts with it; a session
    /// continued with `--session` switches to it (recorded as pi records a change).
    #[arg(long, env = "HANDOFF_THINKING", global = true, value_parser = parse_thinking)]
    pub thinking: Option<ThinkingLevel>,
    /// Whether the model takes `reasoning_effort` (OpenAI-compatible servers: true or false).
    /// Default: on for OpenAI's reasoning models (o-series, gpt-5), off elsewhere.
    #[arg(long, global = true, action = clap::ArgAction::Set)]
    pub reasoning_effort: Option<bool>,
}

fn parse_thinking(s: &str) -> Result<ThinkingLevel, String> {
    s.parse()
}

impl From<SettingsArgs> for Settings {
    fn from(args: SettingsArgs) -> Self {
        Settings {
            api: args.api.map(Api::from),
            base_url: args.base_url,
            model: args.model,
            api_key_env: args.api_key_env,
            api_key_cmd: args.api_key_cmd,
            context_window: args.context_window,
            max_tokens: args.max_tokens,
            name: args.name,
            session_dir: args.session_dir,
            templates_dir: args.templates_dir,
            max_retries: args.max_retries,
            timeout: args.timeout,
            system_prompt: args.system_prompt,
            append_system_prompt: args.append_system_prompt,
            // The plugin's folder: the CLI reads the same AGENTS.md.
            config_dir: Some(crate::frontend_paths::default_config_dir()),
            tools: (args.tools.is_some() || args.yes).then(|| ToolSettings {
                enabled: args.tools,
                policy: args.yes.then_some(consent::Level::AllowAll),
                rules: Default::default(),
            }),
            max_turns: args.max_turns,
            thinking: args.thinking,
            reasoning_effort: args.reasoning_effort,
        }
    }
}
