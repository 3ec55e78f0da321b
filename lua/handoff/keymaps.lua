--- Buffer-local mappings of the chat and prompt buffers, the optional global ones, and the
--- temporary `<Esc>` that cancels a handoff (whatever was mapped before comes back afterwards).
local config = require("handoff.config")

local M = {}

local api = vim.api

local function map(buf, modes, lhs, rhs, desc)
  if lhs and lhs ~= "" then
    vim.keymap.set(modes, lhs, rhs, { buffer = buf, nowait = true, silent = true, desc = "handoff.nvim: " .. desc })
  end
end

function M.chat_buffer(buf)
  local k = config.options.keymaps
  map(buf, "n", k.stop, function()
    require("handoff").abort()
  end, "stop the response")
  map(buf, "n", k.close, function()
    require("handoff.chat").close()
  end, "close the chat")
  -- Only on the "earlier items" line of a long chat; elsewhere the key does what it did.
  map(buf, "n", k.earlier, function()
    if not require("handoff.chat").show_earlier_at_cursor() then
      vim.cmd("normal! " .. vim.v.count1 .. "+")
    end
  end, "show earlier items (on the line that offers them)")
end

function M.prompt_buffer(buf)
  local k = config.options.keymaps
  local submit = function()
    require("handoff.chat").submit()
  end
  map(buf, "n", k.submit_normal, submit, "send the prompt")
  map(buf, "i", k.submit_insert, function()
    vim.cmd.stopinsert()
    submit()
  end, "send the prompt")
  map(buf, { "n", "i" }, k.stop, function()
    require("handoff").abort()
  end, "stop the response")
end

local global_actions = {
  chat = "toggle_chat",
  handoff = "handoff",
  stop = "abort",
  sessions = "sessions",
  new = "new_session",
  model = "select_model",
}

--- Global mappings named in `keymaps.global` (none by default).
function M.global()
  for action, lhs in pairs(config.options.keymaps.global or {}) do
    local fn = global_actions[action]
    if not fn then
      error(("handoff.nvim: keymaps.global.%s is not an action (known: %s)"):format(
        action, table.concat(vim.tbl_keys(global_actions), ", ")), 0)
    end
    vim.keymap.set("n", lhs, function()
      require("handoff")[fn]()
    end, { desc = "handoff.nvim: " .. action })
  end
end

-- <Esc> during handoff generation ----------------------------------------------------------

local MODES = { "n", "i" }
--- saved[buf][mode] = the earlier buffer-local mapping (a `maparg()` dict) or false.
local saved = {}

--- The buffers that get the cancel key: chat, prompt and any handoff document.
local function target_buffers()
  local chat = require("handoff.chat")
  local bufs = {}
  for _, b in ipairs({ chat.chat_buf, chat.prompt_buf }) do
    if b and api.nvim_buf_is_valid(b) then
      table.insert(bufs, b)
    end
  end
  vim.list_extend(bufs, require("handoff.handoff_view").buffers())
  return bufs
end

local function cancel_normal()
  require("handoff").abort_handoff()
end

local function cancel_insert()
  require("handoff").abort_handoff()
  vim.cmd.stopinsert()
end

--- Maps `<Esc>` to cancel the handoff, remembering what each buffer had mapped.
function M.install_esc()
  for _, buf in ipairs(target_buffers()) do
    if not saved[buf] then
      saved[buf] = {}
      api.nvim_buf_call(buf, function()
        for _, mode in ipairs(MODES) do
          local m = vim.fn.maparg("<Esc>", mode, false, true)
          saved[buf][mode] = (m and m.buffer == 1) and m or false
        end
      end)
      vim.keymap.set("n", "<Esc>", cancel_normal, { buffer = buf, nowait = true, desc = "handoff.nvim: cancel the handoff" })
      vim.keymap.set("i", "<Esc>", cancel_insert, { buffer = buf, nowait = true, desc = "handoff.nvim: cancel the handoff" })
    end
  end
end

--- Puts back what `install_esc` replaced, in every buffer it touched.
function M.restore_esc()
  for buf, modes in pairs(saved) do
    if api.nvim_buf_is_valid(buf) then
      api.nvim_buf_call(buf, function()
        for _, mode in ipairs(MODES) do
          pcall(vim.keymap.del, mode, "<Esc>", { buffer = buf })
          if modes[mode] then
            vim.fn.mapset(mode, false, modes[mode])
          end
        end
      end)
    end
  end
  saved = {}
end

--- Whether the cancel key is installed (for tests and statuslines).
function M.esc_installed()
  return next(saved) ~= nil
end

return M
