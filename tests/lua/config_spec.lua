-- setup()'s validation, read from the settings schema (lua/handoff/schema.lua): it checks every
-- option before it applies any, and refuses values out of range as well as wrong types.
local h = require("helpers")
local eq, raises = h.eq, h.raises

local cases, it = h.suite()

local function cleanup()
  require("handoff").setup({})
end

it("a bad option leaves the configuration as it was, whatever else the call sets", function()
  local handoff, config = require("handoff"), require("handoff.config")
  handoff.setup({ layout = { position = "left" }, max_turns = 7, keymaps = { global = {} } })
  local before = vim.deepcopy(config.options)
  -- Each is wrong in a way only the host noticed before (or not at all); the good options
  -- beside it must not be applied either.
  for _, bad in ipairs({
    { layout = { position = "top" }, tools = { enabled = { "read", "nope" } } },
    { layout = { position = "top" }, max_turns = -1 },
    { layout = { position = "top" }, keymaps = { global = { nothing = "<leader>x" } } },
    { layout = { position = "top" }, tools = { rules = { bash = "maybe" } } },
  }) do
    local ok = pcall(handoff.setup, bad)
    assert(not ok, "accepted: " .. vim.inspect(bad))
    eq(before, config.options, "options after setup(" .. vim.inspect(bad) .. ")")
  end
end)

it("values out of range are refused with the option, the value and what is accepted", function()
  local handoff = require("handoff")
  local function refused(opts, text)
    return raises(function()
      handoff.setup(opts)
    end, text)
  end
  refused({ max_turns = 0 }, "max_turns must be an integer >= 1, got 0")
  refused({ max_turns = 2.5 }, "max_turns must be an integer >= 1, got 2.5")
  refused({ provider = { timeout = 0 } }, "provider.timeout must be an integer >= 1, got 0")
  refused({ provider = { max_retries = -1 } }, "provider.max_retries must be an integer >= 0, got -1")
  refused({ provider = { context_window = -5 } }, "provider.context_window must be an integer >= 1, got -5")
  refused({ layout = { width = 0 } }, "layout.width must be a number > 0")
  refused({ layout = { prompt_height = -2 } }, "layout.prompt_height must be a number > 0")
  refused({ tool_output_lines = 0 }, "tool_output_lines must be an integer >= 1, got 0")
  refused({ handoff = { suggest_at = 1.5 } }, "handoff.suggest_at must be a number in (0, 1], or false, got 1.5")
  refused({ context = { max_bytes = 0 } }, "context.max_bytes must be an integer >= 1, got 0")
  refused({ provider = { api = "bedrock" } }, 'provider.api must be one of "openai", "openai-responses", "anthropic", "copilot", "openrouter", "ollama", "gemini", "deepseek", "groq", "xai", "mistral", got "bedrock"')
  refused({ tools = { policy = "sometimes" } }, 'tools.policy must be one of "ask", "allow_edits", "allow_sandboxed", "allow_all", got "sometimes"')
  refused({ tools = { enabled = { "read", "nope" } } }, 'tools.enabled must be a list, each one of "read", "bash"')
  refused({ tools = { rules = { bahs = "deny" } } }, "tools.rules must be a table from")
  refused({ keymaps = { global = { nothing = "x" } } }, 'keymaps.global must be a table from "chat", "handoff"')
  refused({ layout = "left" }, 'layout must be a table, got "left"')
  -- The bounds themselves are fine, and false turns off what takes it.
  handoff.setup({
    max_turns = 1,
    provider = { max_retries = 0, thinking = "xhigh" },
    layout = { width = 1, height = 30 },
    handoff = { suggest_at = false },
    keymaps = { stop = false, global = { chat = "<leader>hc" } },
    tools = { enabled = { "read", "grep" }, rules = { bash = "deny" } },
  })
  local o = require("handoff.config").options
  eq(false, o.handoff.suggest_at, "handoff.suggest_at")
  eq({ "read", "grep" }, o.tools.enabled, "tools.enabled")
end)

it("every action the schema lets keymaps.global name is one the plugin maps", function()
  local schema = require("handoff.schema")
  local actions
  for _, setting in ipairs(schema.settings) do
    if setting.key == "keymaps.global" then
      actions = setting.type.keys
    end
  end
  assert(actions and #actions > 0, "keymaps.global's actions")
  local global = {}
  for i, action in ipairs(actions) do
    global[action] = "<leader>z" .. i
  end
  -- setup() maps them (keymaps.global() raises on an action it does not know).
  require("handoff").setup({ keymaps = { global = global } })
  for i, action in ipairs(actions) do
    eq("handoff.nvim: " .. action, vim.fn.maparg("<leader>z" .. i, "n", false, true).desc, action)
    vim.keymap.del("n", "<leader>z" .. i)
  end
end)

it("the defaults are the schema's, and the host gets every host setting under its own name", function()
  local config = require("handoff.config")
  local d = config.defaults()
  eq(50, d.max_turns, "max_turns")
  eq(12, d.tool_output_lines, "tool_output_lines")
  eq(vim.fn.stdpath("data") .. "/handoff/sessions", d.session_dir, "session_dir")
  eq("a", d.keymaps.approval.allow, "keymaps.approval.allow")
  require("handoff").setup({ provider = { provider_name = "local", model = "m" }, templates_dir = "." })
  local s = config.host_settings()
  eq("local", s.name, "provider_name goes as name")
  eq("m", s.model, "model")
  eq(vim.fn.fnamemodify(".", ":p"), s.templates_dir, "templates_dir made absolute")
  eq(50, s.max_turns, "max_turns")
  eq("ask", s.tools.policy, "tools.policy")
  eq(nil, s.layout, "no plugin-only setting goes to the host")
end)

return { cases = cases, cleanup = cleanup }
