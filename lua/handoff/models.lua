--- The model picker of :HandoffModel: the provider's own model list (Copilot, OpenRouter, Ollama,
--- any server with `/models`), the models of `provider.model_info` and pi's models.json, the
--- built-in table and `models`, each shown with its window. The host owns every fact (what
--- the list says, where the window came from); this module only formats and asks.
local config = require("handoff.config")
local host = require("handoff.host")
local state = require("handoff.state")

local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

--- Token counts as the chat writes them (the one formatter: `handoff.chat.lines`).
local tokens = require("handoff.chat.lines").tokens

--- One line of the picker: `gpt-4.1  1M window · 32.8k out · images`.
---@param m table a `ModelInfo` of the host
---@return string
function M.describe(m)
  local facts = {}
  if m.context_window then
    table.insert(facts, tokens(m.context_window) .. " window")
  end
  if m.max_output then
    table.insert(facts, tokens(m.max_output) .. " out")
  end
  if m.reasoning then
    table.insert(facts, "reasoning")
  end
  if m.images then
    table.insert(facts, "images")
  end
  if m.disabled then
    table.insert(facts, "not enabled")
  end
  local line = m.id .. (#facts > 0 and ("  " .. table.concat(facts, " · ")) or "")
  if m.id == state.model then
    line = line .. "  (in use)"
  end
  return line
end

--- Callbacks waiting for the provider's list (a `models` record), and for an `enable_model`
--- to end (a `model_enabled` record), by model id.
H.waiting_list, H.waiting_enable = {}, {}

--- `reply` (a `ModelList` of the host, or nil) with the names of `models` it does not know
--- added as they are, those first.
---@return table[] models, string? error
local function merged(reply)
  local out, seen = {}, {}
  for _, name in ipairs(config.options.models or {}) do
    seen[name] = true
    table.insert(out, { id = name })
  end
  if not reply then
    return out, nil
  end
  for _, m in ipairs(reply.models or {}) do
    if seen[m.id] then
      for i, o in ipairs(out) do
        if o.id == m.id then
          out[i] = m
        end
      end
    else
      seen[m.id] = true
      table.insert(out, m)
    end
  end
  return out, reply.error
end

--- What is known now, without asking the provider (completion).
---@return table[] models, string? error
function M.list()
  return merged((host.request("models", false)))
end

--- The list with the provider's own: `done(models, error)` at once when the host has read it,
--- else when it arrives (the host reads it in a task: the editor never waits for it).
---@param done fun(models: table[], err?: string)
function M.fetch(done)
  local reply = host.request("models", true)
  if reply and reply.pending then
    table.insert(H.waiting_list, done)
    return
  end
  done(merged(reply))
end

--- The `models` record: the provider's list for the callers of `fetch` waiting for it.
function M.on_list(r)
  local run = H.waiting_list
  H.waiting_list = {}
  vim.schedule(function()
    for _, done in ipairs(run) do
      done(merged(r))
    end
  end)
end

--- Completion of :HandoffModel: what is known now, without asking the provider.
---@param arg_lead string
---@return string[]
function M.complete(arg_lead)
  local names = {}
  for _, m in ipairs(M.list()) do
    if vim.startswith(m.id, arg_lead) then
      table.insert(names, m.id)
    end
  end
  return names
end

--- Enables a Copilot model for the account (it accepts the model's terms), after asking;
--- `done(enabled)` once the host says how it went (it enables it in a task).
---@param id string
---@param ask boolean
---@param done? fun(enabled: boolean)
function M.enable(id, ask, done)
  done = done or function() end
  if ask then
    local answer = vim.fn.confirm(
      ("The Copilot model %s is not enabled for your account. Enable it? (this accepts its terms, as Copilot Chat's picker does)"):format(id),
      "&Enable\n&Cancel", 2)
    if answer ~= 1 then
      return done(false)
    end
  end
  if not host.request("enable_model", id) then
    return done(false)
  end
  H.waiting_enable[id] = H.waiting_enable[id] or {}
  table.insert(H.waiting_enable[id], done)
  vim.api.nvim_echo({ { ("handoff.nvim: enabling %s…"):format(id), "Comment" } }, false, {})
end

--- The `model_enabled` record: says how it went, then runs what waited for it.
function M.on_enabled(r)
  local run = H.waiting_enable[r.model] or {}
  H.waiting_enable[r.model] = nil
  vim.schedule(function()
    if r.error then
      vim.notify(("handoff.nvim: cannot enable the Copilot model %s: %s"):format(r.model, r.error), vim.log.levels.ERROR,
        { title = "handoff.nvim" })
    else
      vim.notify("Enabled the Copilot model " .. r.model, vim.log.levels.INFO, { title = "handoff.nvim" })
    end
    for _, done in ipairs(run) do
      done(r.error == nil)
    end
  end)
end

--- Picks a model (vim.ui.select, each with its window), or takes `name`; `enable`: enable it
--- first (:HandoffModel!). `apply` switches to the chosen one. Returns at once: the picker
--- opens when the provider's list is there.
---@param name? string
---@param opts { enable?: boolean, apply: fun(name: string) }
function M.pick(name, opts)
  if name then
    if opts.enable then
      return M.enable(name, false, function(ok)
        if ok then
          opts.apply(name)
        end
      end)
    end
    return opts.apply(name)
  end
  vim.api.nvim_echo({ { "handoff.nvim: reading the model list…", "Comment" } }, false, {})
  M.fetch(function(models, err)
    vim.api.nvim_echo({ { "" } }, false, {})
    if err then
      vim.notify("handoff.nvim: the provider's model list: " .. err, vim.log.levels.WARN, { title = "handoff.nvim" })
    end
    if #models == 0 then
      return vim.ui.input({ prompt = "Model: ", default = state.model }, function(typed)
        if typed and vim.trim(typed) ~= "" then
          opts.apply(vim.trim(typed))
        end
      end)
    end
    vim.ui.select(models, { prompt = "Model", format_item = M.describe, kind = "handoff.model" }, function(m)
      if not m then
        return
      end
      if m.disabled then
        return M.enable(m.id, true, function(ok)
          if ok then
            opts.apply(m.id)
          end
        end)
      end
      opts.apply(m.id)
    end)
  end)
end

--- After a reply failed because the model is not enabled (Copilot): offer to enable it. The
--- prompt is not sent again by itself: the user sends it once the model is on.
---@param message? string
function M.offer_enable(message)
  local id = state.model
  if not id then
    return
  end
  vim.schedule(function()
    M.enable(id, true, function(ok)
      if ok then
        vim.notify("Send the prompt again to use " .. id, vim.log.levels.INFO, { title = "handoff.nvim" })
      elseif message then
        vim.notify(message, vim.log.levels.WARN, { title = "handoff.nvim" })
      end
    end)
  end)
end

return M
