--- The context meter: the model, its thinking level (when thinking is on), the tokens the
--- conversation fills and the share of the model's window (the provider's own count from the
--- last reply). Shown in the chat's winbar, in the
--- indicator while a reply runs, and by `require("handoff").statusline()`. When a reply leaves
--- the conversation above `handoff.suggest_at` of the window, a notice suggests `:Handoff`
--- (once per session).
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

---@type table<string, boolean> sessions the suggestion was made for
H.suggested = {}

local function short(n)
  return require("handoff.chat.lines").tokens(n)
end

--- The share of the window used (0..1), or nil when unknown.
function M.ratio()
  local used, window = state.context_tokens or 0, state.context_window or 0
  if window <= 0 then
    return nil
  end
  return used / window
end

--- The handoff drafted before the wall, as the meter shows it: being written, or written and
--- what it cost (the document's tokens).
local function draft_text()
  local draft = state.handoff_draft
  if not draft then
    return ""
  elseif draft.state == "ready" then
    return (" · handoff prepared (%s out)"):format(short(draft.output or 0))
  end
  return " · preparing handoff…"
end

--- "model · high · 12.3k/128k (9%)": the level only when thinking is on, the figures only
--- after the first reply; the percentage is the host's (it truncates: 9.6% is 9%); then the
--- handoff drafted before the wall, when there is one.
function M.text()
  local model = state.model or "?"
  if state.thinking and state.thinking ~= "off" then
    model = model .. " · " .. state.thinking
  end
  if not M.ratio() or (state.context_tokens or 0) == 0 then
    return model .. draft_text()
  end
  local percent = state.context_percent and (" (%d%%)"):format(state.context_percent) or ""
  return ("%s · %s/%s%s%s"):format(model, short(state.context_tokens), short(state.context_window), percent, draft_text())
end

--- The chat window's winbar expression.
function M.winbar()
  return (M.text():gsub("%%", "%%%%"))
end

--- New figures from the host (a transcript or the end of a reply).
function M.update(r)
  if r.context_window then
    state.context_window = r.context_window
  end
  if r.context_tokens then
    state.context_tokens = r.context_tokens
  end
  -- The host's figure (`controller::text::percent`), so the meter and the host's texts (the
  -- automatic handoff's banner) never say two percentages for one state.
  state.context_percent = r.context_percent
  vim.cmd("redrawstatus")
end

--- After a reply: suggests a handoff when the conversation fills most of the window.
function M.maybe_suggest()
  local at = config.options.handoff.suggest_at
  local ratio = M.ratio()
  local session = state.session_id or state.session_file
  if not at or not ratio or ratio < at or not session or H.suggested[session] then
    return
  end
  H.suggested[session] = true
  local text = ("The conversation fills %d%% of %s's context window: :Handoff continues in a fresh session with a summary of this one"):format(
    state.context_percent or 0, state.model or "the model")
  vim.notify(text, vim.log.levels.INFO, { title = "handoff.nvim" })
  require("handoff.events").fire("HandoffSuggested", { ratio = ratio, session_file = state.session_file })
end

return M
