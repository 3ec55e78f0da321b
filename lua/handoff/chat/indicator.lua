--- The "generating" indicator: a spinner line under the chat's last line and the header of the
--- handoff document, refreshed every 100 ms while a reply or a handoff runs.
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

local api = vim.api
local ns = api.nvim_create_namespace("handoff_indicator")
local spinner = { "⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏" }

H.mark = nil
H.timer = nil

--- The indicator's text, or nil when nothing runs.
function M.text()
  local started = state.handoff_started or state.run_started
  if not (state.busy or state.generating_handoff) or not started then
    return nil
  end
  local elapsed = (vim.uv.now() - started) / 1000
  local stop = config.options.keymaps.stop
  local what
  if state.generating_handoff and state.auto_banner then
    what = state.auto_banner .. " <Esc> to cancel ·"
  elseif state.generating_handoff then
    what = "Generating handoff… <Esc> to cancel ·"
  else
    what = "Generating…" .. (stop and (" (" .. stop .. " to stop)") or "")
  end
  return ("%s %.1fs · %d tokens"):format(what, elapsed, state.tokens or 0)
    .. ((state.context_tokens or 0) > 0 and (" · " .. require("handoff.meter").text()) or "")
end

local function draw()
  local text = M.text()
  if state.generating_handoff then
    require("handoff.handoff_view").header(text)
  end
  local buf = state.ui.chat_buf
  if not (buf and api.nvim_buf_is_valid(buf)) then
    return
  end
  if H.mark then
    pcall(api.nvim_buf_del_extmark, buf, ns, H.mark)
    H.mark = nil
  end
  if text then
    local frame = spinner[math.floor(vim.uv.now() / 100) % #spinner + 1]
    local last = api.nvim_buf_line_count(buf) - 1
    H.mark = api.nvim_buf_set_extmark(buf, ns, last, 0, {
      virt_lines = { { { frame .. " " .. text, "HandoffIndicator" } } },
    })
  end
end

--- Starts, refreshes or stops the indicator to match the state.
function M.update()
  local running = state.busy or state.generating_handoff
  if running and not H.timer then
    H.timer = vim.uv.new_timer()
    H.timer:start(100, 100, vim.schedule_wrap(draw))
  elseif not running and H.timer then
    H.timer:stop()
    H.timer:close()
    H.timer = nil
  end
  draw()
end

return M
