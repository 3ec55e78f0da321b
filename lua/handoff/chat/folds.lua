--- A reply's thinking is a quote, folded: the chat's windows fold exactly the rows it takes
--- (`ui.thinking`, kept by the chat's writers as the buffer changes), closed to "▸ Thinking (N
--- lines)" as it streams; `za` (or `<CR>`) opens and closes it. The folds are manual ones made
--- from those rows: a 'foldexpr' is evaluated for every changed line, which took 20 ms of
--- drawing a 7,000-line transcript, while making the folds costs a few microseconds each.
local state = require("handoff.state")

local M = {}

local api = vim.api
local ui = state.ui

--- The rows of `ui.thinking` shifted by `offset`, appended.
function M.add_thinking(range, offset)
  if range then
    table.insert(ui.thinking, { range[1] + offset, range[2] + offset })
  end
end

--- The windows showing the chat that fold it (`setup_window`: manual folds).
function M.fold_windows()
  return vim.tbl_filter(function(win)
    return vim.wo[win].foldmethod == "manual"
  end, vim.fn.win_findbuf(ui.chat_buf))
end

--- `:fold` commands closing each of `ranges` (0-based rows), as one script.
local function fold_script(ranges)
  local cmds = {}
  for i, r in ipairs(ranges) do
    cmds[i] = ("%d,%dfold"):format(r[1] + 1, r[2] + 1)
  end
  return table.concat(cmds, "\n")
end

--- Folds every reply's thinking in `win`, closed, in place of the folds it had.
function M.fold_all(win)
  api.nvim_win_call(win, function()
    vim.cmd("normal! zE")
    if #ui.thinking > 0 then
      vim.cmd(fold_script(ui.thinking))
    end
  end)
end

--- Whether each fold window shows `range` open (the user opened it), read before the edit that
--- changes its rows: the fold is made again after it.
function M.open_states(range)
  local open = {}
  for _, win in ipairs(M.fold_windows()) do
    open[win] = api.nvim_win_call(win, function()
      return vim.fn.foldlevel(range[1] + 1) > 0 and vim.fn.foldclosed(range[1] + 1) == -1
    end)
  end
  return open
end

--- Folds `range` (0-based rows) in the chat's windows, closed unless `open[win]`; a fold of its
--- first rows (the thinking streamed so far) is replaced.
function M.fold_range(range, open)
  local first, last = range[1] + 1, range[2] + 1
  for _, win in ipairs(M.fold_windows()) do
    api.nvim_win_call(win, function()
      if vim.fn.foldlevel(first) > 0 then
        local view = vim.fn.winsaveview()
        vim.cmd(("keepjumps %dnormal! zD"):format(first))
        vim.fn.winrestview(view)
      end
      vim.cmd(("%d,%dfold"):format(first, last))
      if open and open[win] then
        vim.cmd(("%d,%dfoldopen"):format(first, last))
      end
    end)
  end
end

--- 'foldtext' of the chat's windows: the folded thinking as one line.
function M.foldtext()
  -- A fold that opens with its own summary (a handoff's ledger) shows that line.
  local first = vim.fn.getline(vim.v.foldstart)
  if first:sub(1, 4) == "▸ " then
    return first
  end
  local n = vim.v.foldend - vim.v.foldstart + 1
  return ("▸ Thinking (%d line%s)"):format(n, n == 1 and "" or "s")
end

--- Makes `win` fold the thinking of the replies it shows, closed at first. Local to the chat
--- buffer in that window (`:setlocal`): another buffer shown there later keeps its own folding.
function M.setup_window(win)
  local wo = vim.wo[win][0]
  wo.foldtext = "v:lua.require'handoff.chat.folds'.foldtext()"
  wo.foldminlines = 0
  wo.foldlevel = 0
  wo.foldcolumn = "0"
  wo.foldenable = true
  wo.foldmethod = "manual"
  M.fold_all(win)
end

return M
