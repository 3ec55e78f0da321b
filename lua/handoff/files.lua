--- Tool writes through the editor's buffers (the host calls `write` for every file an `edit`
--- or `write` tool changes): a file loaded in a buffer changes there, at once and visibly, is
--- written, and `u` undoes the agent's change as one step. A buffer with unsaved changes is never
--- overwritten: the tool fails and says so.
local M = {}

local api = vim.api

--- `path` made absolute and normalized: the form buffers' names and the host's paths are
--- compared in.
---@param path string
---@return string
function M.normalize(path)
  return vim.fs.normalize(vim.fn.fnamemodify(path, ":p"))
end

--- A lookup of the loaded file buffers by path, made in one pass over the buffers: each is
--- found by its name and by its real path (links resolved), so a buffer named by another path
--- to the same file counts (the host writes to the real path it checked; `:e` keeps a link's
--- name). Make one for many lookups at once (a redraw of every file's hunks).
---@return fun(path: string): integer?
function M.buffer_index()
  local idx = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
      local name = api.nvim_buf_get_name(buf)
      if name ~= "" then
        local full = M.normalize(name)
        idx[full] = idx[full] or buf
        local real = vim.uv.fs_realpath(full)
        if real then
          idx[real] = idx[real] or buf
        end
      end
    end
  end
  return function(path)
    local full = M.normalize(path)
    return idx[full] or idx[vim.uv.fs_realpath(full) or full]
  end
end

--- The files of the loaded file buffers (absolute, normalized): the host reads them before a
--- command, so that what the command changes in them is reviewed (`:help handoff-hunks`).
---@return string[]
function M.loaded()
  local out = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
      local name = api.nvim_buf_get_name(buf)
      if name ~= "" then
        out[#out + 1] = M.normalize(name)
      end
    end
  end
  return out
end

--- The loaded buffer of `path`, if any (see `buffer_index`).
---@param path string
---@return integer?
function M.buffer_of(path)
  return M.buffer_index()(path)
end

--- Puts `text` (the file's new content) into the buffer of `path` and writes it.
---@return { through_buffer: boolean, error?: string }
function M.write(path, text)
  local buf = M.buffer_of(path)
  if not buf then
    return { through_buffer = false }
  end
  if vim.bo[buf].modified then
    return {
      through_buffer = false,
      error = ("%s has unsaved changes in Neovim: save or undo them, then ask again"):format(vim.fn.fnamemodify(path, ":~:.")),
    }
  end
  -- The buffer keeps its own fileformat and BOM on write; its lines carry neither.
  text = text:gsub("^\239\187\191", "")
  local lines = vim.split(text, "\n", { plain = true })
  local eol = lines[#lines] == ""
  if eol then
    table.remove(lines)
  end
  if vim.bo[buf].fileformat == "dos" then
    lines = vim.tbl_map(function(l)
      return (l:gsub("\r$", ""))
    end, lines)
  end
  local ok, err = pcall(function()
    vim.bo[buf].modifiable = true
    -- One call: one undo step.
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].eol = eol
    if not eol then
      -- Keep the file as the tool wrote it: no final newline added on write.
      vim.bo[buf].fixeol = false
    end
    api.nvim_buf_call(buf, function()
      vim.cmd("silent keepalt write")
    end)
  end)
  if not ok then
    return { through_buffer = true, error = ("could not write %s through its buffer: %s"):format(path, tostring(err)) }
  end
  return { through_buffer = true }
end

return M
