--- Configuration: the annotated defaults and their validation.
local M = {}

---@class handoff.ProviderConfig
---@field api? "openai"|"anthropic"  Wire protocol (default: the host's, i.e. "openai").
---@field base_url? string  e.g. "http://127.0.0.1:8080/v1" (default: the provider's public API).
---@field model? string  Model id (default: "gpt-4.1-mini" / "claude-sonnet-4-5").
---@field api_key_env? string  Variable holding the key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY when set).
---@field api_key_cmd? string  Shell command printing the key (wins over api_key_env), e.g. "pass show openai".
---@field context_window? integer  The model's window in tokens (the handoff request is fitted to it).
---@field max_tokens? integer  Upper bound of reply tokens.
---@field provider_name? string  Provider id recorded in sessions (pi's provider name).
---@field max_retries? integer  Retries on 429/5xx/connection errors.
---@field timeout? integer  Seconds without data before a request is given up.

---@class handoff.Config
local defaults = {
  --- Path of the `handoff-nvim` binary. nil: the plugin's target/release, then target/debug,
  --- then $PATH.
  ---@type string?
  bin = nil,
  --- The model to talk to. Keys are never stored: name a variable or a command.
  ---@type handoff.ProviderConfig
  provider = {},
  --- Where session files live (pi's layout: one folder per working directory).
  ---@type string
  session_dir = vim.fn.stdpath("data") .. "/handoff/sessions",
  --- Prompt templates: `<dir>/name.md` is used as `/name args` in the prompt buffer.
  ---@type string
  templates_dir = vim.fn.stdpath("config") .. "/handoff/prompts",
  --- System prompt sent with every request (nil: none).
  ---@type string?
  system_prompt = nil,
  --- The host's log file (nil: stdpath("log") .. "/handoff.log").
  ---@type string?
  log_file = nil,
  --- Continue the newest session of the working directory instead of starting a new one.
  ---@type boolean
  resume_last = false,
  --- Models offered by `/model` and :HandoffModel (any other name can be typed).
  ---@type string[]
  models = {},
  layout = {
    --- "right" | "left" | "bottom" | "top" | "tab": where the chat opens.
    position = "right",
    --- Width (columns, or a fraction of the editor) of a left/right chat.
    width = 0.4,
    --- Height (lines, or a fraction) of a top/bottom chat.
    height = 0.4,
    --- Lines of the prompt window under the chat.
    prompt_height = 5,
    --- Height of the split that shows a handoff document.
    document_height = 15,
  },
  keymaps = {
    --- Global mappings: none by default. Example: { chat = "<leader>hc", handoff = "<leader>hh" }.
    ---@type table<string, string>
    global = {},
    --- Buffer-local mappings of the chat and prompt buffers (false disables one).
    submit_normal = "<CR>",
    submit_insert = "<C-s>",
    stop = "<C-c>",
    close = "q",
    --- Chat buffer, on the "earlier items" line of a long session: show a page more.
    earlier = "<CR>",
  },
}

---@type handoff.Config
M.options = vim.deepcopy(defaults)

function M.defaults()
  return vim.deepcopy(defaults)
end

local provider_keys = {
  api = "string", base_url = "string", model = "string", api_key_env = "string",
  api_key_cmd = "string", context_window = "number", max_tokens = "number",
  provider_name = "string", max_retries = "number", timeout = "number",
  -- `name` is the host's spelling of provider_name.
  name = "string",
}

local function check(name, value, want, optional)
  if value == nil and optional then
    return
  end
  if type(value) ~= want then
    error(("handoff.nvim: %s must be a %s, got %s"):format(name, want, type(value)), 0)
  end
end

---@param opts? table
---@return handoff.Config
function M.setup(opts)
  opts = opts or {}
  check("setup() options", opts, "table")
  local merged = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts)
  check("provider", merged.provider, "table")
  for k, v in pairs(merged.provider) do
    local want = provider_keys[k]
    if not want then
      error(("handoff.nvim: unknown provider option %q (known: %s)"):format(
        k, table.concat(vim.tbl_keys(provider_keys), ", ")), 0)
    end
    if type(v) ~= want then
      error(("handoff.nvim: provider.%s must be a %s, got %s"):format(k, want, type(v)), 0)
    end
  end
  if merged.provider.api and merged.provider.api ~= "openai" and merged.provider.api ~= "anthropic" then
    error(('handoff.nvim: provider.api must be "openai" or "anthropic", got %q'):format(merged.provider.api), 0)
  end
  check("session_dir", merged.session_dir, "string")
  check("bin", merged.bin, "string", true)
  check("layout", merged.layout, "table")
  check("keymaps", merged.keymaps, "table")
  check("models", merged.models, "table")
  M.options = merged
  return merged
end

--- The settings table the host deserializes (`Settings` in src/core/config.rs).
function M.host_settings()
  local o = M.options
  local s = {}
  for k, v in pairs(o.provider) do
    if k == "provider_name" then
      s.name = v
    else
      s[k] = v
    end
  end
  s.session_dir = vim.fn.fnamemodify(o.session_dir, ":p")
  s.templates_dir = o.templates_dir and vim.fn.fnamemodify(o.templates_dir, ":p") or nil
  s.system_prompt = o.system_prompt
  return s
end

function M.log_file()
  return M.options.log_file or (vim.fn.stdpath("log") .. "/handoff.log")
end

return M
