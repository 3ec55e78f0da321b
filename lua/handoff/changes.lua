--- The agent's changes in the current session, reviewable: `:HandoffChanges` puts every changed
--- hunk of every file the agent changed (successful `edit` and `write` calls) in the quickfix
--- list, and `:HandoffDiff [file]` shows one file against its content before the agent's first
--- change, side by side in diff mode. The host keeps each file's original beside the session
--- (request `changes`); the hunks are computed here, against what the file holds now (its
--- buffer when loaded, unsaved changes included, else the disk). Files changed by bash commands
--- are not known.
local M = {}

local api = vim.api
local files = require("handoff.files")

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = "handoff.nvim" })
end

local diff = (vim.text and vim.text.diff) or vim.diff

---@class handoff.ChangedFile
---@field path string absolute
---@field original_file? string holds the content before the first change; absent: created
---@field created boolean
---@field changes integer successful edit and write calls
---@field first_change_entry_id string
---@field last_changed integer ms

---@class handoff.Changes
---@field session_file string
---@field session_id string
---@field files handoff.ChangedFile[] the most recently changed first

--- The changes of the current session from the host (nil after telling the user why not;
--- while the session loads, `again` runs once it is open).
---@param again? fun()
---@return handoff.Changes?
function M.get(again)
  local host = require("handoff.host")
  local changes, failure = host.request("changes")
  if failure and failure.kind == "not_ready" and again then
    host.when_ready(again)
  end
  return changes
end

--- A file's bytes, or nil when it cannot be read.
---@param path string
---@return string?
function M.read_file(path)
  local f = io.open(path, "rb")
  if not f then
    return nil
  end
  local text = f:read("*a")
  f:close()
  return text
end

--- A file's text as lines, as a buffer shows them: no BOM, no CR of CRLF endings, no final
--- newline.
---@param text string
---@return string[]
function M.lines_of(text)
  text = text:gsub("^\239\187\191", ""):gsub("\r\n", "\n")
  if text == "" then
    return {}
  end
  local lines = vim.split(text, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  return lines
end

--- What `path` holds now: its loaded buffer's lines (unsaved changes too), else the disk's
--- (none when the file is gone).
---@return string[]
function M.current_lines(path)
  local buf = files.buffer_of(path)
  if buf then
    return api.nvim_buf_get_lines(buf, 0, -1, false)
  end
  return M.lines_of(M.read_file(path) or "")
end

--- The lines of `file` before the agent's first change (none for a file it created). Errors
--- when the kept original cannot be read.
---@param file handoff.ChangedFile
---@return string[]
function M.original_lines(file)
  if not file.original_file then
    return {}
  end
  local text = M.read_file(file.original_file)
  if not text then
    error(("the original of %s is missing (%s)"):format(file.path, file.original_file), 0)
  end
  return M.lines_of(text)
end

local function text_of(lines)
  if #lines == 0 then
    return ""
  end
  return table.concat(lines, "\n") .. "\n"
end

--- The changed hunks between two versions of a file: `{ start_a, count_a, start_b, count_b }`
--- each, top to bottom (`count_b` 0: lines deleted after line `start_b`).
---@param before string[]
---@param after string[]
---@return integer[][]
function M.hunks(before, after)
  return diff(text_of(before), text_of(after), { result_type = "indices" }) or {}
end

--- A hunk's quickfix text: the first of its new lines that is not blank, marked "(new file)"
--- or "(added)" where it replaced nothing, or a summary ("N lines deleted", "N blank lines").
--- `:HandoffChanges` and `:HandoffReview` both say it so.
---@param n_before integer the lines it replaced
---@param new string[] its lines now
---@param created? boolean the file did not exist before
---@return string
function M.hunk_text(n_before, new, created)
  if #new == 0 then
    return ("%d line%s deleted"):format(n_before, n_before == 1 and "" or "s")
  end
  local text
  for _, line in ipairs(new) do
    if vim.trim(line) ~= "" then
      text = vim.trim(line)
      break
    end
  end
  text = text or ("%d blank line%s"):format(#new, #new == 1 and "" or "s")
  if created then
    return "(new file) " .. text
  elseif n_before == 0 then
    return "(added) " .. text
  end
  return text
end

--- A quickfix item for a hunk of `file`: its first changed line, with `hunk_text`.
local function item(file, hunk, after)
  local start_a, count_a, start_b, count_b = hunk[1], hunk[2], hunk[3], hunk[4]
  return {
    filename = file.path,
    lnum = math.max(start_b, 1),
    col = 1,
    text = M.hunk_text(count_a, vim.list_slice(after, start_b, start_b + count_b - 1), file.created),
    user_data = { handoff = { start_a = start_a, count_a = count_a, start_b = start_b, count_b = count_b } },
  }
end

--- The quickfix items of `changes`: one per changed hunk, files in the order given (the most
--- recently changed first), each file's hunks top to bottom. Files whose original cannot be
--- read are named in the second result.
---@param changes handoff.Changes
---@return table[] items, string[] problems
function M.items(changes)
  local items, problems = {}, {}
  for _, file in ipairs(changes.files or {}) do
    local ok, before = pcall(M.original_lines, file)
    if ok then
      local after = M.current_lines(file.path)
      for _, hunk in ipairs(M.hunks(before, after)) do
        table.insert(items, item(file, hunk, after))
      end
    else
      table.insert(problems, tostring(before))
    end
  end
  return items, problems
end

local function session_name(changes)
  if changes.session_id and changes.session_id ~= "" then
    return changes.session_id
  end
  return vim.fn.fnamemodify(changes.session_file or "", ":t:r")
end

--- `:HandoffChanges`: the quickfix list of the session's changes, opened (or a notice when
--- there are none).
---@return table[]? items
function M.quickfix()
  local changes = M.get(M.quickfix)
  if not changes then
    return nil
  end
  local items, problems = M.items(changes)
  for _, p in ipairs(problems) do
    notify("handoff.nvim: " .. p, vim.log.levels.WARN)
  end
  vim.fn.setqflist({}, " ", { title = "handoff.nvim: changes of " .. session_name(changes), items = items })
  if #items == 0 then
    if #(changes.files or {}) == 0 then
      notify("handoff.nvim: the agent changed no files in this session")
    else
      notify(("handoff.nvim: the %d file%s the agent changed in this session hold%s no changes now"):format(
        #changes.files, #changes.files == 1 and "" or "s", #changes.files == 1 and "s" or ""))
    end
    return items
  end
  vim.cmd("botright copen")
  return items
end

--- The changed files, relative to the working directory where they are inside it (for
--- completion).
---@param arg_lead? string
---@return string[]
function M.complete(arg_lead)
  local ok, changes = require("handoff.host").try_request("changes")
  if not ok or type(changes) ~= "table" then
    return {}
  end
  local out = {}
  for _, file in ipairs(changes.files or {}) do
    local name = vim.fn.fnamemodify(file.path, ":~:.")
    if vim.startswith(name, arg_lead or "") then
      table.insert(out, name)
    end
  end
  return out
end

--- Names the scratch buffer, adding a number when a buffer has the name already.
local function set_name(buf, name)
  local try, n = name, 1
  while not pcall(api.nvim_buf_set_name, buf, try) do
    n = n + 1
    try = ("%s (%d)"):format(name, n)
  end
end

--- `:HandoffDiff [file]`: `file` (default: the current buffer's) against its content before the
--- agent's first change in this session, in a new tab: the original (a read-only scratch
--- buffer) left, the file itself right, both with `:diffthis`.
---@param file? string
---@return boolean shown
function M.diff(file)
  local target = (file and file ~= "") and vim.fn.expand(file) or api.nvim_buf_get_name(0)
  if target == "" then
    notify("handoff.nvim: :HandoffDiff needs a file (the current buffer has none)", vim.log.levels.WARN)
    return false
  end
  local path = files.normalize(target)
  local changes = M.get(function()
    M.diff(file)
  end)
  if not changes then
    return false
  end
  local entry
  for _, f in ipairs(changes.files or {}) do
    if files.normalize(f.path) == path then
      entry = f
      break
    end
  end
  local shown = vim.fn.fnamemodify(path, ":~:.")
  if not entry then
    notify(("handoff.nvim: the agent did not change %s in this session"):format(shown))
    return false
  end
  local ok, original = pcall(M.original_lines, entry)
  if not ok then
    notify("handoff.nvim: " .. tostring(original), vim.log.levels.ERROR)
    return false
  end
  vim.cmd("tabnew " .. vim.fn.fnameescape(entry.path))
  local file_win = api.nvim_get_current_win()
  local ft = vim.bo.filetype
  vim.cmd("diffthis")
  vim.cmd("leftabove vnew")
  local buf = api.nvim_get_current_buf()
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  api.nvim_buf_set_lines(buf, 0, -1, false, original)
  vim.bo[buf].modifiable = false
  vim.bo[buf].readonly = true
  vim.bo[buf].modified = false
  set_name(buf, ("handoff://original/%s"):format(shown))
  if ft ~= "" then
    vim.bo[buf].filetype = ft
  end
  vim.cmd("diffthis")
  api.nvim_set_current_win(file_win)
  return true
end

return M
