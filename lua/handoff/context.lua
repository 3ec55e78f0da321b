--- Editor context in prompts. Before a prompt is sent, `#buffer`, `#selection` and
--- `#diagnostics` (of the buffer you were in before the chat) and `@path` (a file) expand to
--- fenced blocks headed by the path, and line range where there is one:
---
---     ```lua src/x.lua:10-14
---     …
---     ```
---
--- `:'<,'>HandoffChat` puts a selection into the prompt buffer the same way. The session stores
--- the full text; the chat shows each such block as one "📎" line (`M.compact`).
local config = require("handoff.config")

local M = {}

local api = vim.api

--- The `#` tokens, in the order completion offers them.
M.tokens = {
  { name = "buffer", description = "The whole buffer you were in before the chat" },
  { name = "selection", description = "The last visual selection in that buffer" },
  { name = "diagnostics", description = "The diagnostics of that buffer: path:line:col severity message" },
}

--- The tokens' names (a set), never changed.
local token_names = (function()
  local names = {}
  for _, t in ipairs(M.tokens) do
    names[t.name] = true
  end
  return names
end)()

-- The buffer `#buffer` and friends read ----------------------------------------------------

--- The module's state, private (mini.nvim's `H`): `last_buf`, the buffer the user was in last.
local H = {}

--- A buffer context can come from: a normal buffer that is none of the plugin's own.
local function eligible(buf)
  return buf ~= nil
    and api.nvim_buf_is_valid(buf)
    and vim.bo[buf].buftype == ""
    and not api.nvim_buf_get_name(buf):find("^handoff://")
end

--- Remembers `buf` as the one the user works in (ignored for the chat's own buffers).
---@param buf integer
function M.remember(buf)
  if eligible(buf) then
    H.last_buf = buf
  end
end

--- The buffer the user was in before the chat (else the current one, when it is eligible).
---@return integer?
function M.origin()
  if eligible(H.last_buf) then
    return H.last_buf
  end
  local cur = api.nvim_get_current_buf()
  if eligible(cur) then
    return cur
  end
end

--- Remembers the buffer the user is in from now on (`setup()` calls it: from the start, not
--- only once a prompt has loaded this module).
function M.setup()
  api.nvim_create_autocmd("BufEnter", {
    group = api.nvim_create_augroup("handoff_context", { clear = true }),
    desc = "handoff.nvim: remember the last buffer for #buffer, #selection, #diagnostics",
    callback = function(ev)
      M.remember(ev.buf)
    end,
  })
  M.remember(api.nvim_get_current_buf())
end

-- Blocks -----------------------------------------------------------------------------------

--- `path` as the blocks show it: relative to the working directory when under it.
---@param path string
function M.display_path(path)
  if path == "" then
    return "[No Name]"
  end
  return vim.fn.fnamemodify(path, ":.")
end

local function buf_path(buf)
  return M.display_path(api.nvim_buf_get_name(buf))
end

local function lang_of(buf)
  local ft = vim.bo[buf].filetype
  return ft ~= "" and ft or "text"
end

--- A fence longer than any backtick run that starts a line of `lines`.
local function fence_for(lines)
  local n = 3
  for _, l in ipairs(lines) do
    local ticks = l:match("^%s*(`+)")
    if ticks and #ticks >= n then
      n = #ticks + 1
    end
  end
  return ("`"):rep(n)
end

--- A fenced block: "```<lang> <label>", `lines`, "```".
---@param lang string
---@param label string
---@param lines string[]
---@return string[]
function M.block(lang, label, lines)
  local fence = fence_for(lines)
  local out = { fence .. lang .. " " .. label }
  vim.list_extend(out, lines)
  table.insert(out, fence)
  return out
end

local function human(bytes)
  if bytes >= 1024 * 1024 then
    return ("%.1f MB"):format(bytes / 1024 / 1024)
  end
  return ("%d KB"):format(math.ceil(bytes / 1024))
end

local function too_big(bytes)
  local max = config.options.context.max_bytes
  if bytes > max then
    return ("%s, over the %s limit (context.max_bytes)"):format(human(bytes), human(max))
  end
end

local function size_of(lines)
  local n = 0
  for _, l in ipairs(lines) do
    n = n + #l + 1
  end
  return n
end

--- The range label of lines `l1`..`l2`: "path:10-14" (one line: "path:10").
local function range_label(path, l1, l2)
  return l1 == l2 and ("%s:%d"):format(path, l1) or ("%s:%d-%d"):format(path, l1, l2)
end

---@class handoff.Attachment
---@field label string  what the prompt's text says instead of the token
---@field block? string[]  the fenced block (nil: nothing attached)
---@field note? string  why nothing was attached (the token stays, with the note)
---@field keep? boolean  leave the token as typed (and notify `note`)

--- `lines` of `buf` as a block headed "```<filetype> <label>", or only a note when they are too
--- big to attach.
---@return handoff.Attachment
local function lines_of(buf, label, lines)
  local big = too_big(size_of(lines))
  if big then
    return { label = label, note = big }
  end
  return { label = label, block = M.block(lang_of(buf), label, lines) }
end

--- Lines `l1`..`l2` of `buf` as a block headed "```<filetype> path:l1-l2".
---@param buf integer
---@param l1 integer 1-based, inclusive
---@param l2 integer
---@return handoff.Attachment
function M.selection(buf, l1, l2)
  local count = api.nvim_buf_line_count(buf)
  l1, l2 = math.max(1, math.min(l1, l2)), math.min(count, math.max(l1, l2))
  local label = range_label(buf_path(buf), l1, l2)
  return lines_of(buf, label, api.nvim_buf_get_lines(buf, l1 - 1, l2, false))
end

--- The whole of `buf`.
---@return handoff.Attachment
function M.buffer(buf)
  return lines_of(buf, buf_path(buf), api.nvim_buf_get_lines(buf, 0, -1, false))
end

--- The diagnostics of `buf`, one "path:line:col severity message" line each.
---@return handoff.Attachment
function M.diagnostics(buf)
  local path = buf_path(buf)
  local list = vim.diagnostic.get(buf)
  table.sort(list, function(a, b)
    if a.lnum ~= b.lnum then
      return a.lnum < b.lnum
    end
    return a.col < b.col
  end)
  local lines = {}
  for _, d in ipairs(list) do
    local severity = (vim.diagnostic.severity[d.severity] or "info"):lower()
    local message = d.message:gsub("%s*\n%s*", " ")
    table.insert(lines, ("%s:%d:%d %s %s%s"):format(
      path, d.lnum + 1, d.col + 1, severity, message, d.source and (" [" .. d.source .. "]") or ""))
  end
  if #lines == 0 then
    lines = { "(none)" }
  end
  return { label = "the diagnostics of `" .. path .. "`", block = M.block("diagnostics", path, lines) }
end

--- The file at `path` (a loaded buffer's text when it has one: what the user sees).
---@param path string as typed
---@return handoff.Attachment
function M.file(path)
  local abs = vim.fn.fnamemodify(vim.fs.normalize(path), ":p")
  local label = M.display_path(abs)
  local stat = vim.uv.fs_stat(abs)
  if not stat then
    return { label = path, keep = true, note = ("@%s: no such file, sent as typed"):format(path) }
  elseif stat.type ~= "file" then
    return { label = path, keep = true, note = ("@%s: not a file, sent as typed"):format(path) }
  end
  local buf = require("handoff.files").buffer_of(abs)
  if buf then
    local a = M.buffer(buf)
    a.label = label
    return a
  end
  local big = too_big(stat.size)
  if big then
    return { label = label, note = big }
  end
  local fd = io.open(abs, "rb")
  local data = fd and fd:read("*a")
  if fd then
    fd:close()
  end
  if not data then
    return { label = path, keep = true, note = ("@%s: cannot be read, sent as typed"):format(path) }
  end
  if data:find("\0", 1, true) then
    return { label = label, note = "binary file" }
  end
  local lines = vim.split(data, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  for i, l in ipairs(lines) do
    lines[i] = l:gsub("\r$", "")
  end
  local lang = vim.filetype.match({ filename = abs }) or "text"
  return { label = label, block = M.block(lang, label, lines) }
end

-- Expansion --------------------------------------------------------------------------------

local function warn(message)
  vim.notify("handoff.nvim: " .. message, vim.log.levels.WARN, { title = "handoff.nvim" })
end

--- What `#name` attaches.
---@return handoff.Attachment?
local function resolve_token(name)
  local buf = M.origin()
  if not buf then
    return { label = "#" .. name, keep = true, note = ("#%s: no buffer to take it from, sent as typed"):format(name) }
  end
  if name == "buffer" then
    return M.buffer(buf)
  elseif name == "selection" then
    local from, to = api.nvim_buf_get_mark(buf, "<")[1], api.nvim_buf_get_mark(buf, ">")[1]
    if from == 0 or to == 0 then
      return {
        label = "#selection",
        keep = true,
        note = ("#selection: no visual selection in %s yet, sent as typed"):format(buf_path(buf)),
      }
    end
    return M.selection(buf, from, to)
  elseif name == "diagnostics" then
    return M.diagnostics(buf)
  end
end

--- What `@path` attaches: the path as typed, else without trailing punctuation ("see @a.lua.").
---@return handoff.Attachment, string trailing the punctuation left after the path
local function resolve_path(word)
  local a = M.file(word)
  if a.keep then
    local bare, trailing = word:match("^(.-)([%.,;:!%?%)%]}'\"]+)$")
    if bare and bare ~= "" then
      local b = M.file(bare)
      if not b.keep then
        return b, trailing
      end
    end
  end
  return a, ""
end

--- Whether `text` is a slash command (`/handoff …`, `/new`, a template): never expanded.
local function is_command(text)
  return text:match("^/%S") ~= nil
end

--- Expands the context tokens of `text` (outside fenced blocks; a token starts the text or
--- follows whitespace). A token alone on its line becomes its block there; elsewhere it
--- becomes a reference to the block, which follows the text. Tokens that cannot be resolved
--- stay as typed, with a notification.
---@param text string
---@return string
function M.expand(text)
  if is_command(text) or not text:find("[#@]") then
    return text
  end
  local out, tail, seen = {}, {}, {}
  -- `inline`: the token is alone on its line, so its block takes the line's place.
  local function attach(a, inline)
    if a.keep then
      warn(a.note)
      return nil
    end
    if a.note then
      warn(("%s not attached: %s"):format(a.label, a.note))
      return ("`%s` (not attached: %s)"):format(a.label, a.note)
    end
    local key = table.concat(a.block, "\n")
    if inline and not seen[key] then
      seen[key] = true
      return nil, a.block
    end
    if not seen[key] then
      seen[key] = true
      table.insert(tail, a.block)
    end
    local ref = a.label:find("`", 1, true) and a.label or ("`" .. a.label .. "`")
    return ref
  end
  local fence
  for _, line in ipairs(vim.split(text, "\n", { plain = true })) do
    if fence then
      local close = line:match("^%s*(`+)%s*$")
      if close and #close >= #fence then
        fence = nil
      end
      table.insert(out, line)
    elseif line:match("^%s*(```+)") then
      fence = line:match("^%s*(```+)")
      table.insert(out, line)
    else
      local alone = vim.trim(line)
      local block
      line = line:gsub("()([#@])(%S+)", function(pos, sigil, word)
        if pos > 1 and not line:sub(pos - 1, pos - 1):match("%s") then
          return nil
        end
        local a, trailing
        if sigil == "#" then
          local name, rest = word:match("^(%a+)(.*)$")
          if not (name and token_names[name] and not rest:match("^[%w_%-/]")) then
            return nil
          end
          a, trailing = resolve_token(name), rest
        else
          a, trailing = resolve_path(word)
        end
        local ref, b = attach(a, alone == sigil .. word and trailing == "")
        if b then
          block = b
          return ""
        end
        return ref and (ref .. trailing) or nil
      end)
      if block then
        vim.list_extend(out, block)
      else
        table.insert(out, line)
      end
    end
  end
  local result = table.concat(out, "\n")
  if #tail > 0 then
    result = vim.trim(result)
    for _, b in ipairs(tail) do
      result = result .. "\n\n" .. table.concat(b, "\n")
    end
  end
  return result
end

-- The chat's compact view ------------------------------------------------------------------

local function plural(n, word)
  return ("%d %s%s"):format(n, word, n == 1 and "" or "s")
end

--- The "📎" line of a block this module made, from its header and line count (nil: not one).
---@param lang string
---@param label string
---@param lines string[] the block's content
function M.attachment_line(lang, label, lines)
  if label == "" or label:find("%s") and not label:find("^%[No Name%]") then
    return nil
  end
  if lang == "diagnostics" then
    local n = (#lines == 1 and lines[1] == "(none)") and 0 or #lines
    return ("📎 #diagnostics of %s (%d)"):format(label, n)
  end
  return ("📎 %s (%s)"):format(label, plural(#lines, "line"))
end

--- A user message's lines as the chat shows them: each attachment block (a fence opened by
--- "```<lang> <path>[:range]" and closed) becomes one "📎" line; the rest stays.
---@param lines string[]
---@return string[]
function M.compact(lines)
  local out = {}
  local i = 1
  while i <= #lines do
    local line = lines[i]
    local fence, lang, label = line:match("^(```+)(%S+) (.+)$")
    local close
    if fence then
      for j = i + 1, #lines do
        if lines[j] == fence then
          close = j
          break
        end
      end
    end
    local compact = close and M.attachment_line(lang, label, vim.list_slice(lines, i + 1, close - 1))
    if compact then
      -- Attachments one after the other are listed without blank lines between them.
      if out[#out] == "" and (out[#out - 1] or ""):find("^📎 ") then
        table.remove(out)
      end
      table.insert(out, compact)
      i = close + 1
    else
      table.insert(out, line)
      i = i + 1
    end
  end
  return out
end

return M
