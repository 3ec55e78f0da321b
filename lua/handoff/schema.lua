-- Generated from crates/core/src/config/schema.rs: do not edit. `HANDOFF_BLESS=1 cargo test --test
-- settings` rewrites it (tests/settings.rs fails while it is stale).
-- Each setting: `key` (its dotted path in setup()), `host` (its name in the host's settings;
-- nil: the plugin's own), `type`, `default` (nil: unset), `or_false` (false is accepted),
-- `accepts` (what the type takes, in words) and `doc`.

---@class handoff.Config
---@field bin? string Path of the `handoff-nvim` binary, used as it is (so is $HANDOFF_BIN); nil: the binary :HandoffInstall installed when it fits the plugin, else the plugin's target/release, then target/debug, then $PATH. See |handoff-install|.
---@field install? handoff.Config.install
---@field provider? handoff.Config.provider
---@field session_dir? string Folder of session files (pi's layout: one sub-folder per working directory); the CLI's default is the same folder.
---@field templates_dir? string Folder of prompt templates: `NAME.md` is used as `/NAME args` in the prompt.
---@field system_prompt? string Replaces handoff.nvim's words in the system prompt; the instruction files (AGENTS.md), skills, date and working directory still follow. See |handoff-system-prompt|.
---@field append_system_prompt? string Added after the system prompt's words (default: nothing). See |handoff-system-prompt|.
---@field log_file? string The host's log file (nil: stdpath("log") .. "/handoff.log").
---@field changes? handoff.Config.changes
---@field resume_last? boolean Continue the newest session of the working directory instead of starting a new one.
---@field models? string[] Models offered by `/model` and :HandoffModel (any other name can be typed).
---@field layout? handoff.Config.layout
---@field keymaps? handoff.Config.keymaps
---@field tools? handoff.Config.tools
---@field mcp? handoff.Config.mcp
---@field sandbox? "workspace-write"|"read-only"|"off" Where bash commands may write: "workspace-write" (the project folder, a temp folder of their own and /dev/null), "read-only" (only that temp folder), "off" (anywhere the user can). A command that looks blocked is offered a re-run outside. See |handoff-sandbox|.
---@field network? boolean Whether sandboxed bash commands may use the network (sockets other than AF_UNIX). See |handoff-sandbox|.
---@field agents? table<string, { command?: string[], env?: table<string, string> }> External agents speaking the Agent Client Protocol, by name: { claude = { command = { "npx", "-y", "@zed-industries/claude-agent-acp" }, env = { … } } }. Used by :HandoffAgent NAME and the CLI's --agent NAME (on the command line as JSON); :checkhealth handoff lists them. See |handoff-agents|.
---@field max_turns? integer Turns of one prompt at most (each round of tool calls is a turn).
---@field handoff? handoff.Config.handoff
---@field tool_output_lines? integer Lines of a tool's output shown in the chat (the rest is in the session).
---@field context? handoff.Config.context

---@class handoff.Config.install
---@field url? string Where :HandoffInstall downloads the release's binary from: a folder URL, `{version}` replaced by the release's version, the asset's name appended (default: the release page lua/handoff/release.lua names). A mirror or a local server; the checksum is still the one the plugin pins. See |handoff-install|.
---@field curl_args? string[] More arguments for curl, e.g. { "--proxy", "http://proxy:3128" } or { "--cacert", "/etc/ssl/corp.pem" } (curl reads $https_proxy, $HTTPS_PROXY and $ALL_PROXY itself). See |handoff-install|.

---@class handoff.Config.provider
---@field api? "openai"|"openai-responses"|"anthropic"|"copilot"|"openrouter"|"ollama"|"gemini"|"deepseek"|"groq"|"xai"|"mistral" Wire protocol: "openai" (the default; any Chat Completions server), "openai-responses" (OpenAI's Responses API: its reasoning and codex models), "anthropic", "copilot" (GitHub Copilot: the login of copilot.vim/copilot.lua, each model's protocol from Copilot's model list; see |handoff-copilot|), or a preset: "openrouter", "ollama", "gemini", "deepseek", "groq", "xai", "mistral" (its base URL, key variable and a default model; see |handoff-presets|).
---@field base_url? string Base URL of the API, e.g. "http://127.0.0.1:8080/v1" (default: the provider's public API).
---@field model? string Model id (default: "gpt-4.1-mini" / "claude-sonnet-4-5").
---@field api_key_env? string Environment variable that holds the API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY when set).
---@field api_key_cmd? string Shell command that prints the API key (wins over api_key_env), e.g. "pass show openai"; run for each request that needs the key, never while the editor waits (at most 120 s).
---@field context_window? integer The model's context window in tokens (the handoff request is fitted to it).
---@field max_tokens? integer Upper bound of reply tokens (max_completion_tokens for api.openai.com and Azure).
---@field provider_name? string Provider name recorded in sessions (pi's provider id).
---@field max_retries? integer Retries on 429/5xx/connection errors.
---@field timeout? integer Seconds without data before a request is given up.
---@field copilot_token_url? string Copilot only: where the GitHub token is exchanged for a Copilot token (default: https://api.github.com/copilot_internal/v2/token).
---@field model_info? table<string, { context_window?: integer, max_tokens?: integer, reasoning?: boolean, images?: boolean }> What is known of models, by id, e.g. { ["qwen3-coder"] = { context_window = 65536, max_tokens = 8192 } }: it wins over the provider's model list, pi's models.json and the built-in table (see |handoff-models|); the models named here are offered by :HandoffModel.
---@field pi_provider? string A provider of pi's models.json (~/.pi/agent/models.json) by name: its baseUrl, api, apiKey, headers and models; what you set here wins (see |handoff-models|).
---@field thinking? "off"|"minimal"|"low"|"medium"|"high"|"xhigh" Thinking level of new sessions (default "off"; "xhigh" is pi's name for "high"); a continued session keeps its own. See |handoff-thinking|.
---@field reasoning_effort? boolean Whether the model takes `reasoning_effort` (OpenAI-compatible servers; over openai-responses: whether the model reasons); default: on for OpenAI's o-series and gpt-5, off elsewhere.

---@class handoff.Config.changes
---@field review? "after"|"before"|"off" "after": the agent's changes land and stay pending, hunk by hunk, until kept or rejected (|handoff-hunks|); "before": an edit's or write's approval is reviewed hunk by hunk and only the kept lines are written (|handoff-hunks-before|); "off": not shown for review.

---@class handoff.Config.layout
---@field position? "right"|"left"|"bottom"|"top"|"tab" Where the chat opens.
---@field width? number Width of a left/right chat: columns, or a fraction of the editor.
---@field height? number Height of a top/bottom chat: lines, or a fraction of the editor.
---@field prompt_height? number Lines of the prompt window under the chat.
---@field document_height? integer Height of the split that shows a handoff document.

---@class handoff.Config.keymaps
---@field global? table<string, string> Global Normal-mode mappings, none by default, e.g. { chat = "<leader>hc", handoff = "<leader>hh" }.
---@field add_selection? string|false Visual mode, global: put the selection into the prompt (as :'<,'>HandoffChat), e.g. "<leader>ha".
---@field submit_normal? string|false Prompt buffer, Normal mode: send.
---@field submit_insert? string|false Prompt buffer, Insert mode: send.
---@field stop? string|false Chat and prompt buffers: stop the response.
---@field close? string|false Chat buffer and todo list window: close.
---@field earlier? string|false Chat buffer: on the "earlier items" line a page more; on a reply's thinking, open or close it.
---@field parent? string|false Chat buffer and read-only sessions, on the "Handed off from" line: open that session read-only (|handoff-lineage|).
---@field review? handoff.Config.keymaps.review
---@field approval? handoff.Config.keymaps.approval

---@class handoff.Config.keymaps.review
---@field next? string|false Buffers with the agent's hunks: the next pending hunk, on to the next file's (|handoff-hunks|).
---@field prev? string|false Buffers with the agent's hunks: the previous pending hunk, back to the previous file's.
---@field keep? string|false Buffers with the agent's hunks: keep the hunk under the cursor (Visual: only the selected lines of it).
---@field reject? string|false Buffers with the agent's hunks: reject the hunk under the cursor (Visual: only the selected lines of it).
---@field keep_all? string|false Buffers with the agent's hunks: keep every pending hunk of the session.
---@field reject_all? string|false Buffers with the agent's hunks: reject every pending hunk of the session.

---@class handoff.Config.keymaps.approval
---@field allow? string|false Chat buffer: allow the tool call the cursor is in (else the oldest waiting).
---@field always? string|false Chat buffer: allow it and the same calls for the rest of the session.
---@field reject? string|false Chat buffer: reject it, with a reason the model reads.
---@field cancel? string|false Chat buffer: reject it and end the turn.
---@field diff? string|false Chat buffer: show the proposed change side by side.

---@class handoff.Config.tools
---@field enabled? ("read"|"bash"|"edit"|"write"|"grep"|"find"|"ls"|"todo_write"|"session_query")[] The tools the model may call (pi's names); default: read, bash, edit, write, todo_write, session_query (offered only to a session handed off from another; a list without it turns it off).
---@field policy? "ask"|"allow_edits"|"allow_sandboxed"|"allow_all" "ask": edits and commands ask; "allow_edits": commands ask; "allow_sandboxed": commands that run in the sandbox run unasked, edits and unsandboxed commands ask; "allow_all": nothing asks (the CLI's --yes; it never lifts the sandbox, nor lets read, edit or write reach a protected path: |handoff-sandbox|).
---@field rules? table<string, "allow"|"ask"|"deny"> Per tool, over the policy, e.g. { bash = "deny" }; an MCP server's tools by server or by tool, e.g. { mcp__github = "allow", mcp__github__delete_repo = "deny" }. See |handoff-mcp|.
---@field env? handoff.Config.tools.env

---@class handoff.Config.tools.env
---@field inherit? "all"|"core"|"none" What environment bash commands and MCP stdio servers start from: "all" (the editor's), "core" (PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TERM, TMPDIR, TZ and the like), "none" (only tools.env.set). Either way no variable named like *KEY*, *TOKEN*, *SECRET* or *PASSWORD* or shaped like a secret's (*_PAT, *_PWD, *AUTH*, *CREDENTIAL*…), none whose value is a URL with a password, no provider's key nor any variable your provider settings name, and for sandboxed commands no NVIM, SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS and the like. See |handoff-env|.
---@field exclude? string[] More variables commands do not get: names or globs (* and ?, any case), e.g. { "AWS_*" }.
---@field include_only? string[] When given, only these variables (names or globs) pass. A name written out here passes even the default exclusions, so its value reaches the model's tools and whatever they print reaches the provider.
---@field set? table<string, string> Variables every command gets with these values, e.g. { GH_TOKEN = "…" }, whatever the rest says (the value then reaches the model's tools).

---@class handoff.Config.mcp
---@field servers? table<string, table> MCP servers by name, each as Claude Code's .mcp.json writes one: { command = "npx", args = { … }, env = { … } } or { type = "http", url = "…", headers = { … } }; ${VAR} and ${VAR:-default} are expanded. See |handoff-mcp|.
---@field user_file? string The user's MCP servers (Claude Code's format; its servers need no trust).
---@field config_files? string[] More files of MCP servers (Claude Code's format).
---@field project? boolean Read the project's .mcp.json (its servers start only once you trust the file's content: :HandoffMcp trust).
---@field startup_timeout? integer Seconds an MCP server has to start and list its tools (the first prompt waits for them at most this long).

---@class handoff.Config.handoff
---@field review? boolean Open the document for editing before the new session starts (as :Handoff! does).
---@field suggest_at? number|false Suggest :Handoff (once per session) when a reply leaves the conversation above this share of the context window; false: never.
---@field auto? "continue"|"review"|"off" At the wall (the next request would leave no room for a handoff, or the provider refused one as too large): "continue" hands off by itself and goes on in the new session, "review" opens the document first, "off" does nothing. See |handoff-auto|.
---@field threshold? number Where the wall is: a share of the context window, or a count of tokens (default: the window minus max(16384, 15%) minus handoff.room, at most 90%).
---@field room? integer Tokens the handoff document is given room for (at most a quarter of the window).
---@field prepare? "background"|"off" Draft the handoff document before the wall: "background" writes it with a detached request once the conversation nears the wall (the same prefix as the work's requests, so a provider that caches prompts reads it from its cache), while the work goes on; at the wall the new session starts from it and the turns since, without waiting for a document; "off" writes it at the wall. Default: "background", but "off" for GitHub Copilot, where every request, this one too, is a premium request. See |handoff-auto|.
---@field model? string Another model of the same provider that writes the handoff documents (the draft, the document at the wall, :Handoff), e.g. a faster or cheaper one; its window and limits come from the model catalogue (|handoff-models|). The work keeps the session's model. The prompt cache is per model: its requests do not read the work's cache. Default: the session's model.
---@field clear_tool_results? integer Send only the newest this many tokens of tool output whole: older tool results reach the model as a one-line placeholder naming the tool (the session file keeps them; session_query, the handoff's facts and a resume still read them), which pushes the wall back. Cleared in batches of half of it, so the provider's prompt cache misses once a batch: where prompts are cached it costs more than it saves (1.44× weighted in doc/benchmarks.md §15b), so it is for a local model or a provider without a cache. Default: off (every result sent). See |handoff-prepare|.

---@class handoff.Config.context
---@field max_bytes? integer Bytes of one attachment at most (a larger file or buffer is named, not attached).
---@field max_files? integer Files `@path` completion lists at most outside a git repository (a folder walk).

return {
  --- The settings' digest: a host built from other sources answers `schema_digest` with another.
  digest = "7ce2d1d01bee2988",
  --- The thinking levels, lowest first (the ones offered).
  thinking_levels = { "off", "minimal", "low", "medium", "high" },
  --- Every name a thinking level is taken by (pi's `xhigh` is `high`).
  thinking_names = { "off", "minimal", "low", "medium", "high", "xhigh" },
  settings = {
    {
      key = "bin",
      type = { kind = "path" },
      accepts = "a path",
      doc = "Path of the `handoff-nvim` binary, used as it is (so is $HANDOFF_BIN); nil: the binary :HandoffInstall installed when it fits the plugin, else the plugin's target/release, then target/debug, then $PATH. See |handoff-install|.",
    },
    {
      key = "install.url",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Where :HandoffInstall downloads the release's binary from: a folder URL, `{version}` replaced by the release's version, the asset's name appended (default: the release page lua/handoff/release.lua names). A mirror or a local server; the checksum is still the one the plugin pins. See |handoff-install|.",
    },
    {
      key = "install.curl_args",
      type = { kind = "list", item = { kind = "string" } },
      default = {},
      accepts = "a list, each a string",
      doc = "More arguments for curl, e.g. { \"--proxy\", \"http://proxy:3128\" } or { \"--cacert\", \"/etc/ssl/corp.pem\" } (curl reads $https_proxy, $HTTPS_PROXY and $ALL_PROXY itself). See |handoff-install|.",
    },
    {
      key = "provider.api",
      host = "api",
      type = { kind = "one_of", values = { "openai", "openai-responses", "anthropic", "copilot", "openrouter", "ollama", "gemini", "deepseek", "groq", "xai", "mistral" } },
      accepts = "one of \"openai\", \"openai-responses\", \"anthropic\", \"copilot\", \"openrouter\", \"ollama\", \"gemini\", \"deepseek\", \"groq\", \"xai\", \"mistral\"",
      doc = "Wire protocol: \"openai\" (the default; any Chat Completions server), \"openai-responses\" (OpenAI's Responses API: its reasoning and codex models), \"anthropic\", \"copilot\" (GitHub Copilot: the login of copilot.vim/copilot.lua, each model's protocol from Copilot's model list; see |handoff-copilot|), or a preset: \"openrouter\", \"ollama\", \"gemini\", \"deepseek\", \"groq\", \"xai\", \"mistral\" (its base URL, key variable and a default model; see |handoff-presets|).",
    },
    {
      key = "provider.base_url",
      host = "base_url",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Base URL of the API, e.g. \"http://127.0.0.1:8080/v1\" (default: the provider's public API).",
    },
    {
      key = "provider.model",
      host = "model",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Model id (default: \"gpt-4.1-mini\" / \"claude-sonnet-4-5\").",
    },
    {
      key = "provider.api_key_env",
      host = "api_key_env",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Environment variable that holds the API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY when set).",
    },
    {
      key = "provider.api_key_cmd",
      host = "api_key_cmd",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Shell command that prints the API key (wins over api_key_env), e.g. \"pass show openai\"; run for each request that needs the key, never while the editor waits (at most 120 s).",
    },
    {
      key = "provider.context_window",
      host = "context_window",
      type = { kind = "int", min = 1, max = 9007199254740991 },
      accepts = "an integer >= 1",
      doc = "The model's context window in tokens (the handoff request is fitted to it).",
    },
    {
      key = "provider.max_tokens",
      host = "max_tokens",
      type = { kind = "int", min = 1, max = 4294967295 },
      accepts = "an integer >= 1",
      doc = "Upper bound of reply tokens (max_completion_tokens for api.openai.com and Azure).",
    },
    {
      key = "provider.provider_name",
      host = "name",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Provider name recorded in sessions (pi's provider id).",
    },
    {
      key = "provider.max_retries",
      host = "max_retries",
      type = { kind = "int", min = 0, max = 4294967295 },
      accepts = "an integer >= 0",
      doc = "Retries on 429/5xx/connection errors.",
    },
    {
      key = "provider.timeout",
      host = "timeout",
      type = { kind = "int", min = 1, max = 9007199254740991 },
      accepts = "an integer >= 1",
      doc = "Seconds without data before a request is given up.",
    },
    {
      key = "provider.copilot_token_url",
      host = "copilot_token_url",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Copilot only: where the GitHub token is exchanged for a Copilot token (default: https://api.github.com/copilot_internal/v2/token).",
    },
    {
      key = "provider.model_info",
      host = "model_info",
      type = { kind = "map", value = { kind = "record", fields = { context_window = { kind = "int", min = 1, max = 9007199254740991 }, max_tokens = { kind = "int", min = 1, max = 4294967295 }, reasoning = { kind = "bool" }, images = { kind = "bool" } } } },
      default = {},
      accepts = "a table from names to a table of context_window (an integer >= 1), max_tokens (an integer >= 1), reasoning (true or false), images (true or false)",
      doc = "What is known of models, by id, e.g. { [\"qwen3-coder\"] = { context_window = 65536, max_tokens = 8192 } }: it wins over the provider's model list, pi's models.json and the built-in table (see |handoff-models|); the models named here are offered by :HandoffModel.",
    },
    {
      key = "provider.pi_provider",
      host = "pi_provider",
      type = { kind = "string" },
      accepts = "a string",
      doc = "A provider of pi's models.json (~/.pi/agent/models.json) by name: its baseUrl, api, apiKey, headers and models; what you set here wins (see |handoff-models|).",
    },
    {
      key = "provider.thinking",
      host = "thinking",
      type = { kind = "one_of", values = { "off", "minimal", "low", "medium", "high", "xhigh" } },
      accepts = "one of \"off\", \"minimal\", \"low\", \"medium\", \"high\", \"xhigh\"",
      doc = "Thinking level of new sessions (default \"off\"; \"xhigh\" is pi's name for \"high\"); a continued session keeps its own. See |handoff-thinking|.",
    },
    {
      key = "provider.reasoning_effort",
      host = "reasoning_effort",
      type = { kind = "bool" },
      accepts = "true or false",
      doc = "Whether the model takes `reasoning_effort` (OpenAI-compatible servers; over openai-responses: whether the model reasons); default: on for OpenAI's o-series and gpt-5, off elsewhere.",
    },
    {
      key = "session_dir",
      host = "session_dir",
      type = { kind = "path" },
      default = vim.fn.stdpath("data") .. "/handoff/sessions",
      accepts = "a path",
      doc = "Folder of session files (pi's layout: one sub-folder per working directory); the CLI's default is the same folder.",
    },
    {
      key = "templates_dir",
      host = "templates_dir",
      type = { kind = "path" },
      default = vim.fn.stdpath("config") .. "/handoff/prompts",
      accepts = "a path",
      doc = "Folder of prompt templates: `NAME.md` is used as `/NAME args` in the prompt.",
    },
    {
      key = "system_prompt",
      host = "system_prompt",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Replaces handoff.nvim's words in the system prompt; the instruction files (AGENTS.md), skills, date and working directory still follow. See |handoff-system-prompt|.",
    },
    {
      key = "append_system_prompt",
      host = "append_system_prompt",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Added after the system prompt's words (default: nothing). See |handoff-system-prompt|.",
    },
    {
      key = "log_file",
      type = { kind = "path" },
      accepts = "a path",
      doc = "The host's log file (nil: stdpath(\"log\") .. \"/handoff.log\").",
    },
    {
      key = "changes.review",
      type = { kind = "one_of", values = { "after", "before", "off" } },
      default = "after",
      accepts = "one of \"after\", \"before\", \"off\"",
      doc = "\"after\": the agent's changes land and stay pending, hunk by hunk, until kept or rejected (|handoff-hunks|); \"before\": an edit's or write's approval is reviewed hunk by hunk and only the kept lines are written (|handoff-hunks-before|); \"off\": not shown for review.",
    },
    {
      key = "resume_last",
      type = { kind = "bool" },
      default = false,
      accepts = "true or false",
      doc = "Continue the newest session of the working directory instead of starting a new one.",
    },
    {
      key = "models",
      type = { kind = "list", item = { kind = "string" } },
      default = {},
      accepts = "a list, each a string",
      doc = "Models offered by `/model` and :HandoffModel (any other name can be typed).",
    },
    {
      key = "layout.position",
      type = { kind = "one_of", values = { "right", "left", "bottom", "top", "tab" } },
      default = "right",
      accepts = "one of \"right\", \"left\", \"bottom\", \"top\", \"tab\"",
      doc = "Where the chat opens.",
    },
    {
      key = "layout.width",
      type = { kind = "size" },
      default = 0.4,
      accepts = "a number > 0 (<= 1: a fraction of the whole)",
      doc = "Width of a left/right chat: columns, or a fraction of the editor.",
    },
    {
      key = "layout.height",
      type = { kind = "size" },
      default = 0.4,
      accepts = "a number > 0 (<= 1: a fraction of the whole)",
      doc = "Height of a top/bottom chat: lines, or a fraction of the editor.",
    },
    {
      key = "layout.prompt_height",
      type = { kind = "size" },
      default = 5,
      accepts = "a number > 0 (<= 1: a fraction of the whole)",
      doc = "Lines of the prompt window under the chat.",
    },
    {
      key = "layout.document_height",
      type = { kind = "int", min = 1, max = 4294967295 },
      default = 15,
      accepts = "an integer >= 1",
      doc = "Height of the split that shows a handoff document.",
    },
    {
      key = "keymaps.global",
      type = { kind = "table", keys = { "chat", "handoff", "stop", "sessions", "new", "model", "thinking", "todos" }, value = { kind = "string" } },
      default = {},
      accepts = "a table from \"chat\", \"handoff\", \"stop\", \"sessions\", \"new\", \"model\", \"thinking\", \"todos\" to a string",
      doc = "Global Normal-mode mappings, none by default, e.g. { chat = \"<leader>hc\", handoff = \"<leader>hh\" }.",
    },
    {
      key = "keymaps.add_selection",
      type = { kind = "key" },
      default = false,
      accepts = "a key (a string), or false for none",
      doc = "Visual mode, global: put the selection into the prompt (as :'<,'>HandoffChat), e.g. \"<leader>ha\".",
    },
    {
      key = "keymaps.submit_normal",
      type = { kind = "key" },
      default = "<CR>",
      accepts = "a key (a string), or false for none",
      doc = "Prompt buffer, Normal mode: send.",
    },
    {
      key = "keymaps.submit_insert",
      type = { kind = "key" },
      default = "<C-s>",
      accepts = "a key (a string), or false for none",
      doc = "Prompt buffer, Insert mode: send.",
    },
    {
      key = "keymaps.stop",
      type = { kind = "key" },
      default = "<C-c>",
      accepts = "a key (a string), or false for none",
      doc = "Chat and prompt buffers: stop the response.",
    },
    {
      key = "keymaps.close",
      type = { kind = "key" },
      default = "q",
      accepts = "a key (a string), or false for none",
      doc = "Chat buffer and todo list window: close.",
    },
    {
      key = "keymaps.earlier",
      type = { kind = "key" },
      default = "<CR>",
      accepts = "a key (a string), or false for none",
      doc = "Chat buffer: on the \"earlier items\" line a page more; on a reply's thinking, open or close it.",
    },
    {
      key = "keymaps.parent",
      type = { kind = "key" },
      default = "gp",
      accepts = "a key (a string), or false for none",
      doc = "Chat buffer and read-only sessions, on the \"Handed off from\" line: open that session read-only (|handoff-lineage|).",
    },
    {
      key = "keymaps.review.next",
      type = { kind = "key" },
      default = "]h",
      accepts = "a key (a string), or false for none",
      doc = "Buffers with the agent's hunks: the next pending hunk, on to the next file's (|handoff-hunks|).",
    },
    {
      key = "keymaps.review.prev",
      type = { kind = "key" },
      default = "[h",
      accepts = "a key (a string), or false for none",
      doc = "Buffers with the agent's hunks: the previous pending hunk, back to the previous file's.",
    },
    {
      key = "keymaps.review.keep",
      type = { kind = "key" },
      default = "<Leader>ak",
      accepts = "a key (a string), or false for none",
      doc = "Buffers with the agent's hunks: keep the hunk under the cursor (Visual: only the selected lines of it).",
    },
    {
      key = "keymaps.review.reject",
      type = { kind = "key" },
      default = "<Leader>ar",
      accepts = "a key (a string), or false for none",
      doc = "Buffers with the agent's hunks: reject the hunk under the cursor (Visual: only the selected lines of it).",
    },
    {
      key = "keymaps.review.keep_all",
      type = { kind = "key" },
      default = "<Leader>aK",
      accepts = "a key (a string), or false for none",
      doc = "Buffers with the agent's hunks: keep every pending hunk of the session.",
    },
    {
      key = "keymaps.review.reject_all",
      type = { kind = "key" },
      default = "<Leader>aR",
      accepts = "a key (a string), or false for none",
      doc = "Buffers with the agent's hunks: reject every pending hunk of the session.",
    },
    {
      key = "keymaps.approval.allow",
      type = { kind = "key" },
      default = "a",
      accepts = "a key (a string), or false for none",
      doc = "Chat buffer: allow the tool call the cursor is in (else the oldest waiting).",
    },
    {
      key = "keymaps.approval.always",
      type = { kind = "key" },
      default = "A",
      accepts = "a key (a string), or false for none",
      doc = "Chat buffer: allow it and the same calls for the rest of the session.",
    },
    {
      key = "keymaps.approval.reject",
      type = { kind = "key" },
      default = "r",
      accepts = "a key (a string), or false for none",
      doc = "Chat buffer: reject it, with a reason the model reads.",
    },
    {
      key = "keymaps.approval.cancel",
      type = { kind = "key" },
      default = "c",
      accepts = "a key (a string), or false for none",
      doc = "Chat buffer: reject it and end the turn.",
    },
    {
      key = "keymaps.approval.diff",
      type = { kind = "key" },
      default = "d",
      accepts = "a key (a string), or false for none",
      doc = "Chat buffer: show the proposed change side by side.",
    },
    {
      key = "tools.enabled",
      host = "tools.enabled",
      type = { kind = "list", item = { kind = "one_of", values = { "read", "bash", "edit", "write", "grep", "find", "ls", "todo_write", "session_query" } } },
      accepts = "a list, each one of \"read\", \"bash\", \"edit\", \"write\", \"grep\", \"find\", \"ls\", \"todo_write\", \"session_query\"",
      doc = "The tools the model may call (pi's names); default: read, bash, edit, write, todo_write, session_query (offered only to a session handed off from another; a list without it turns it off).",
    },
    {
      key = "tools.policy",
      host = "tools.policy",
      type = { kind = "one_of", values = { "ask", "allow_edits", "allow_sandboxed", "allow_all" } },
      default = "ask",
      accepts = "one of \"ask\", \"allow_edits\", \"allow_sandboxed\", \"allow_all\"",
      doc = "\"ask\": edits and commands ask; \"allow_edits\": commands ask; \"allow_sandboxed\": commands that run in the sandbox run unasked, edits and unsandboxed commands ask; \"allow_all\": nothing asks (the CLI's --yes; it never lifts the sandbox, nor lets read, edit or write reach a protected path: |handoff-sandbox|).",
    },
    {
      key = "tools.rules",
      host = "tools.rules",
      type = { kind = "table", keys = { "read", "bash", "edit", "write", "grep", "find", "ls", "todo_write", "session_query" }, prefix = "mcp__", value = { kind = "one_of", values = { "allow", "ask", "deny" } } },
      default = {},
      accepts = "a table from \"read\", \"bash\", \"edit\", \"write\", \"grep\", \"find\", \"ls\", \"todo_write\", \"session_query\" (or names starting with \"mcp__\") to one of \"allow\", \"ask\", \"deny\"",
      doc = "Per tool, over the policy, e.g. { bash = \"deny\" }; an MCP server's tools by server or by tool, e.g. { mcp__github = \"allow\", mcp__github__delete_repo = \"deny\" }. See |handoff-mcp|.",
    },
    {
      key = "tools.env.inherit",
      host = "tools.env.inherit",
      type = { kind = "one_of", values = { "all", "core", "none" } },
      default = "all",
      accepts = "one of \"all\", \"core\", \"none\"",
      doc = "What environment bash commands and MCP stdio servers start from: \"all\" (the editor's), \"core\" (PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TERM, TMPDIR, TZ and the like), \"none\" (only tools.env.set). Either way no variable named like *KEY*, *TOKEN*, *SECRET* or *PASSWORD* or shaped like a secret's (*_PAT, *_PWD, *AUTH*, *CREDENTIAL*…), none whose value is a URL with a password, no provider's key nor any variable your provider settings name, and for sandboxed commands no NVIM, SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS and the like. See |handoff-env|.",
    },
    {
      key = "tools.env.exclude",
      host = "tools.env.exclude",
      type = { kind = "list", item = { kind = "string" } },
      default = {},
      accepts = "a list, each a string",
      doc = "More variables commands do not get: names or globs (* and ?, any case), e.g. { \"AWS_*\" }.",
    },
    {
      key = "tools.env.include_only",
      host = "tools.env.include_only",
      type = { kind = "list", item = { kind = "string" } },
      default = {},
      accepts = "a list, each a string",
      doc = "When given, only these variables (names or globs) pass. A name written out here passes even the default exclusions, so its value reaches the model's tools and whatever they print reaches the provider.",
    },
    {
      key = "tools.env.set",
      host = "tools.env.set",
      type = { kind = "map", value = { kind = "string" } },
      default = {},
      accepts = "a table from names to a string",
      doc = "Variables every command gets with these values, e.g. { GH_TOKEN = \"…\" }, whatever the rest says (the value then reaches the model's tools).",
    },
    {
      key = "mcp.servers",
      host = "mcp.servers",
      type = { kind = "map", value = { kind = "object" } },
      default = {},
      accepts = "a table from names to a table",
      doc = "MCP servers by name, each as Claude Code's .mcp.json writes one: { command = \"npx\", args = { … }, env = { … } } or { type = \"http\", url = \"…\", headers = { … } }; ${VAR} and ${VAR:-default} are expanded. See |handoff-mcp|.",
    },
    {
      key = "mcp.user_file",
      host = "mcp.user_file",
      type = { kind = "path" },
      default = vim.fn.stdpath("config") .. "/handoff/mcp.json",
      accepts = "a path",
      doc = "The user's MCP servers (Claude Code's format; its servers need no trust).",
    },
    {
      key = "mcp.config_files",
      host = "mcp.config_files",
      type = { kind = "list", item = { kind = "path" } },
      accepts = "a list, each a path",
      doc = "More files of MCP servers (Claude Code's format).",
    },
    {
      key = "mcp.project",
      host = "mcp.project",
      type = { kind = "bool" },
      default = true,
      accepts = "true or false",
      doc = "Read the project's .mcp.json (its servers start only once you trust the file's content: :HandoffMcp trust).",
    },
    {
      key = "mcp.startup_timeout",
      host = "mcp.startup_timeout",
      type = { kind = "int", min = 1, max = 4294967295 },
      default = 30,
      accepts = "an integer >= 1",
      doc = "Seconds an MCP server has to start and list its tools (the first prompt waits for them at most this long).",
    },
    {
      key = "sandbox",
      host = "sandbox",
      type = { kind = "one_of", values = { "workspace-write", "read-only", "off" } },
      default = "workspace-write",
      accepts = "one of \"workspace-write\", \"read-only\", \"off\"",
      doc = "Where bash commands may write: \"workspace-write\" (the project folder, a temp folder of their own and /dev/null), \"read-only\" (only that temp folder), \"off\" (anywhere the user can). A command that looks blocked is offered a re-run outside. See |handoff-sandbox|.",
    },
    {
      key = "network",
      host = "network",
      type = { kind = "bool" },
      default = false,
      accepts = "true or false",
      doc = "Whether sandboxed bash commands may use the network (sockets other than AF_UNIX). See |handoff-sandbox|.",
    },
    {
      key = "agents",
      host = "agents",
      type = { kind = "map", value = { kind = "record", fields = { command = { kind = "list", item = { kind = "string" } }, env = { kind = "map", value = { kind = "string" } } } } },
      default = {},
      accepts = "a table from names to a table of command (a list, each a string), env (a table from names to a string)",
      doc = "External agents speaking the Agent Client Protocol, by name: { claude = { command = { \"npx\", \"-y\", \"@zed-industries/claude-agent-acp\" }, env = { … } } }. Used by :HandoffAgent NAME and the CLI's --agent NAME (on the command line as JSON); :checkhealth handoff lists them. See |handoff-agents|.",
    },
    {
      key = "max_turns",
      host = "max_turns",
      type = { kind = "int", min = 1, max = 4294967295 },
      default = 50,
      accepts = "an integer >= 1",
      doc = "Turns of one prompt at most (each round of tool calls is a turn).",
    },
    {
      key = "handoff.review",
      type = { kind = "bool" },
      default = false,
      accepts = "true or false",
      doc = "Open the document for editing before the new session starts (as :Handoff! does).",
    },
    {
      key = "handoff.suggest_at",
      type = { kind = "fraction" },
      default = 0.8,
      or_false = true,
      accepts = "a number in (0, 1], or false",
      doc = "Suggest :Handoff (once per session) when a reply leaves the conversation above this share of the context window; false: never.",
    },
    {
      key = "handoff.auto",
      host = "handoff.auto",
      type = { kind = "one_of", values = { "continue", "review", "off" } },
      default = "continue",
      accepts = "one of \"continue\", \"review\", \"off\"",
      doc = "At the wall (the next request would leave no room for a handoff, or the provider refused one as too large): \"continue\" hands off by itself and goes on in the new session, \"review\" opens the document first, \"off\" does nothing. See |handoff-auto|.",
    },
    {
      key = "handoff.threshold",
      host = "handoff.threshold",
      type = { kind = "size" },
      accepts = "a number > 0 (<= 1: a fraction of the whole)",
      doc = "Where the wall is: a share of the context window, or a count of tokens (default: the window minus max(16384, 15%) minus handoff.room, at most 90%).",
    },
    {
      key = "handoff.room",
      host = "handoff.room",
      type = { kind = "int", min = 1, max = 4294967295 },
      default = 8192,
      accepts = "an integer >= 1",
      doc = "Tokens the handoff document is given room for (at most a quarter of the window).",
    },
    {
      key = "handoff.prepare",
      host = "handoff.prepare",
      type = { kind = "one_of", values = { "background", "off" } },
      accepts = "one of \"background\", \"off\"",
      doc = "Draft the handoff document before the wall: \"background\" writes it with a detached request once the conversation nears the wall (the same prefix as the work's requests, so a provider that caches prompts reads it from its cache), while the work goes on; at the wall the new session starts from it and the turns since, without waiting for a document; \"off\" writes it at the wall. Default: \"background\", but \"off\" for GitHub Copilot, where every request, this one too, is a premium request. See |handoff-auto|.",
    },
    {
      key = "handoff.model",
      host = "handoff.model",
      type = { kind = "string" },
      accepts = "a string",
      doc = "Another model of the same provider that writes the handoff documents (the draft, the document at the wall, :Handoff), e.g. a faster or cheaper one; its window and limits come from the model catalogue (|handoff-models|). The work keeps the session's model. The prompt cache is per model: its requests do not read the work's cache. Default: the session's model.",
    },
    {
      key = "handoff.clear_tool_results",
      host = "handoff.clear_tool_results",
      type = { kind = "int", min = 1, max = 9007199254740991 },
      accepts = "an integer >= 1",
      doc = "Send only the newest this many tokens of tool output whole: older tool results reach the model as a one-line placeholder naming the tool (the session file keeps them; session_query, the handoff's facts and a resume still read them), which pushes the wall back. Cleared in batches of half of it, so the provider's prompt cache misses once a batch: where prompts are cached it costs more than it saves (1.44× weighted in doc/benchmarks.md §15b), so it is for a local model or a provider without a cache. Default: off (every result sent). See |handoff-prepare|.",
    },
    {
      key = "tool_output_lines",
      type = { kind = "int", min = 1, max = 4294967295 },
      default = 12,
      accepts = "an integer >= 1",
      doc = "Lines of a tool's output shown in the chat (the rest is in the session).",
    },
    {
      key = "context.max_bytes",
      type = { kind = "int", min = 1, max = 9007199254740991 },
      default = 262144,
      accepts = "an integer >= 1",
      doc = "Bytes of one attachment at most (a larger file or buffer is named, not attached).",
    },
    {
      key = "context.max_files",
      type = { kind = "int", min = 1, max = 9007199254740991 },
      default = 5000,
      accepts = "an integer >= 1",
      doc = "Files `@path` completion lists at most outside a git repository (a folder walk).",
    },
  },
}
