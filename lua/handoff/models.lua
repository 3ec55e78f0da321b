--- The model picker of :HandoffModel: the provider's own model list (Copilot, OpenRouter, Ollama,
--- any server with `/models`), the models of `provider.model_info` and pi's models.json, the
--- built-in table and `models`, each shown with its window. The host owns every fact (what
--- the list says, where the window came from); this module only formats and asks.
local config = require("handoff.config")
local host = require("handoff.host")
local state = require("handoff.state")

local M = {}

--- A token count as people say it: 200k, 1.05M.
---@param n? integer
---@return string?
function M.tokens(n)
  if not n then
    return nil
  end
  if n >= 1e6 then
    return ("%.3gM"):format(n / 1e6)
  elseif n >= 1e3 then
    return ("%.3gk"):format(n / 1e3)
  end
  return tostring(n)
end

--- One line of the picker: `gpt-4.1  1.05M window · 32.8k out · images`.
---@param m table a `ModelInfo` of the host
---@return string
function M.describe(m)
  local facts = {}
  if m.context_window then
    table.insert(facts, M.tokens(m.context_window) .. " window")
  end
  if m.max_output then
    table.insert(facts, M.tokens(m.max_output) .. " out")
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

--- The host's list (`fetch`: read the provider's list if it was not; else what is known at
--- once), with the names of `models` it does not know added as they are.
---@param fetch boolean
---@return table[] models, string? error
function M.list(fetch)
  local reply = host.request("models", fetch)
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

--- Completion of :HandoffModel: what is known now, without asking the provider.
---@param arg_lead string
---@return string[]
function M.complete(arg_lead)
  local names = {}
  for _, m in ipairs(M.list(false)) do
    if vim.startswith(m.id, arg_lead) then
      table.insert(names, m.id)
    end
  end
  return names
end

--- Enables a Copilot model for the account (it accepts the model's terms), after asking.
---@param id string
---@param ask boolean
---@return boolean enabled
function M.enable(id, ask)
  if ask then
    local answer = vim.fn.confirm(
      ("The Copilot model %s is not enabled for your account. Enable it? (this accepts its terms, as Copilot Chat's picker does)"):format(id),
      "&Enable\n&Cancel", 2)
    if answer ~= 1 then
      return false
    end
  end
  local ok = host.request("enable_model", id)
  if ok then
    vim.notify("Enabled the Copilot model " .. id, vim.log.levels.INFO, { title = "handoff.nvim" })
  end
  return ok == true
end

--- Picks a model (vim.ui.select, each with its window), or takes `name`; `enable`: enable it
--- first (:HandoffModel!). `apply` switches to the chosen one.
---@param name? string
---@param opts { enable?: boolean, apply: fun(name: string) }
function M.pick(name, opts)
  if name then
    if opts.enable and not M.enable(name, false) then
      return
    end
    return opts.apply(name)
  end
  vim.api.nvim_echo({ { "handoff.nvim: reading the model list…", "Comment" } }, false, {})
  local models, err = M.list(true)
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
    if m.disabled and not M.enable(m.id, true) then
      return
    end
    opts.apply(m.id)
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
    if M.enable(id, true) then
      vim.notify("Send the prompt again to use " .. id, vim.log.levels.INFO, { title = "handoff.nvim" })
    elseif message then
      vim.notify(message, vim.log.levels.WARN, { title = "handoff.nvim" })
    end
  end)
end

return M
