--- Completion of the prompt's context tokens (`#buffer`, `#selection`, `#diagnostics`) and of
--- `@path` (the project's files), shared by the prompt buffer's 'omnifunc' (`handoff.commands`)
--- and the blink.cmp and nvim-cmp sources beside this module.
local config = require("handoff.config")

local M = {}

---@class handoff.CompletionItem
---@field word string  what is inserted: "#buffer", "@src/x.lua"
---@field kind "context"|"file"
---@field menu string
---@field info string

--- The token being typed at byte `col` (0-based, the cursor) of `line`: its start (0-based) and
--- text, when it is a `#`/`@` word that starts the line or follows whitespace.
---@param line string
---@param col integer
---@return integer? start, string? word
function M.token_at(line, col)
  local before = line:sub(1, col)
  local start = before:find("[#@][^%s]*$")
  if not start or (start > 1 and not before:sub(start - 1, start - 1):match("%s")) then
    return nil
  end
  return start - 1, before:sub(start)
end

-- Project files ----------------------------------------------------------------------------

--- The module's state, private (mini.nvim's `H`). `listing`: the listing running (its folder)
--- and `waiting`: who waits for it. The editor never waits for `git`: the list comes in the
--- background and completion shows what is known meanwhile. `cache`: the last list.
local H = { listing = nil, waiting = {}, cache = { at = -math.huge, cwd = nil, list = {} } }

--- How long `git ls-files` may take before the folder is walked instead.
local GIT_TIMEOUT_MS = 3000

local function now_ms()
  return vim.uv.hrtime() / 1e6
end

--- Files under `dir` (relative paths), hidden folders skipped, `max` at most.
local function walk(dir, max)
  local out = {}
  for name, type in vim.fs.dir(dir, {
    depth = 20,
    skip = function(d)
      local base = vim.fs.basename(d)
      return not (base:sub(1, 1) == "." or base == "node_modules")
    end,
  }) do
    if type == "file" then
      table.insert(out, name)
      if #out >= max then
        break
      end
    end
  end
  return out
end

--- The listing of `cwd` ended (`res`: git's result, nil when it could not run): the list is
--- kept and whoever waited gets it.
local function listed(cwd, res)
  local list
  if res and res.code == 0 then
    list = vim.split(res.stdout or "", "\0", { plain = true, trimempty = true })
  else
    list = walk(cwd, config.options.context.max_files)
  end
  table.sort(list)
  H.cache = { at = now_ms(), cwd = cwd, list = list }
  H.listing = nil
  local waiting = H.waiting
  H.waiting = {}
  for _, on_listed in ipairs(waiting) do
    pcall(on_listed, list)
  end
end

--- Lists `cwd` in the background: `git ls-files` (tracked and untracked, .gitignore
--- respected), else (no repository, no git, git slower than `GIT_TIMEOUT_MS`) a walk of at most
--- `context.max_files` files.
local function start_listing(cwd)
  if H.listing == cwd then
    return
  end
  H.listing = cwd
  local ok = pcall(
    vim.system,
    { "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard" },
    { cwd = cwd, text = true, timeout = GIT_TIMEOUT_MS },
    function(res)
      vim.schedule(function()
        if H.listing == cwd then
          listed(cwd, res)
        end
      end)
    end
  )
  if not ok then
    vim.schedule(function()
      listed(cwd, nil)
    end)
  end
end

--- The project's files, relative to the working directory, as known now: a list a few seconds
--- old at most, else the one before (empty before the first) while a new one is read in the
--- background. `on_listed(list)` is called with the fresh list: at once when it is there,
--- else when the listing ends.
---@param on_listed? fun(list: string[])
---@return string[]
function M.files(on_listed)
  local cwd = vim.fn.getcwd()
  if H.cache.cwd == cwd and now_ms() - H.cache.at < 5000 then
    if on_listed then
      on_listed(H.cache.list)
    end
    return H.cache.list
  end
  if on_listed then
    table.insert(H.waiting, on_listed)
  end
  start_listing(cwd)
  return H.cache.cwd == cwd and H.cache.list or {}
end

--- Forgets the file list (the next completion lists the files again).
function M.invalidate()
  H.cache.at = -math.huge
end

-- Candidates -------------------------------------------------------------------------------

local function context_items(prefix)
  local context = require("handoff.context")
  local buf = context.origin()
  local of = buf and context.display_path(vim.api.nvim_buf_get_name(buf)) or "(no buffer yet)"
  local items = {}
  for _, t in ipairs(context.tokens) do
    local word = "#" .. t.name
    if vim.startswith(word, prefix) then
      table.insert(items, { word = word, kind = "context", menu = "[" .. of .. "]", info = t.description .. " (" .. of .. ")" })
    end
  end
  return items
end

local function file_item(path)
  return { word = "@" .. path, kind = "file", menu = "[file]", info = "Attach " .. path }
end

--- Candidates for `word` (a `#…` or `@…` being typed), from the files known now ([`M.files`]).
--- Files match by prefix, then by substring; `opts.all` lists every file (for completion plugins
--- that filter themselves), else `opts.max` (default 200) at most. `opts.when_listed` is called
--- once a listing that was not there yet ends (to show the candidates again).
---@param word string
---@param opts? { all?: boolean, max?: integer, when_listed?: fun() }
---@return handoff.CompletionItem[]
function M.items(word, opts)
  opts = opts or {}
  if word:sub(1, 1) == "#" then
    return context_items(word)
  elseif word:sub(1, 1) ~= "@" then
    return {}
  end
  local sync = true
  local files = M.files(opts.when_listed and function()
    if not sync then
      opts.when_listed()
    end
  end)
  sync = false
  local items = {}
  if opts.all then
    for _, f in ipairs(files) do
      table.insert(items, file_item(f))
    end
    return items
  end
  local max = opts.max or 200
  local prefix = word:sub(2):lower()
  local later = {}
  for _, f in ipairs(files) do
    local lf = f:lower()
    if vim.startswith(lf, prefix) then
      table.insert(items, file_item(f))
    elseif prefix ~= "" and lf:find(prefix, 1, true) then
      table.insert(later, file_item(f))
    end
    if #items >= max then
      break
    end
  end
  for _, item in ipairs(later) do
    if #items >= max then
      break
    end
    table.insert(items, item)
  end
  return items
end

--- The candidates for `word` given to `callback` once the files are known (completion plugins
--- take them so: nothing waits for the listing).
---@param word string
---@param opts? { all?: boolean, max?: integer }
---@param callback fun(items: handoff.CompletionItem[])
function M.items_async(word, opts, callback)
  if word:sub(1, 1) ~= "@" then
    return callback(M.items(word, opts))
  end
  M.files(function()
    callback(M.items(word, opts))
  end)
end

--- The prompt buffer's omni completion shows the candidates again once the listing it started
--- ends, when the cursor is still in the same buffer, in Insert mode.
function M.reopen_omni()
  local buf = vim.api.nvim_get_current_buf()
  return function()
    if vim.api.nvim_get_current_buf() == buf and vim.fn.mode() == "i" then
      vim.api.nvim_feedkeys(vim.keycode("<C-x><C-o>"), "n", false)
    end
  end
end

-- Completion plugins -----------------------------------------------------------------------

H.registered = {}

--- Registers the sources with nvim-cmp and blink.cmp when they are installed (each once;
--- nothing happens without them).
function M.register()
  -- The file list is read now, in the background: the first `@` finds it there.
  M.files()
  if not H.registered.cmp then
    local ok, cmp = pcall(require, "cmp")
    if ok and type(cmp) == "table" and type(cmp.register_source) == "function" then
      H.registered.cmp = pcall(cmp.register_source, "handoff", require("handoff.completion.cmp").new())
    end
  end
  if not H.registered.blink then
    local ok, blink = pcall(require, "blink.cmp")
    if ok and type(blink) == "table" and type(blink.add_source_provider) == "function" then
      -- A provider the user configured under this id stays theirs.
      if pcall(blink.add_source_provider, "handoff", { name = "handoff", module = "handoff.completion.blink" }) then
        pcall(blink.add_filetype_source, "handoff-prompt", "handoff")
      end
      H.registered.blink = true
    end
  end
end

--- Whether a completion plugin shows the candidates (then the omnifunc is not triggered by
--- typing `#` or `@`).
function M.plugin_active()
  return H.registered.cmp or H.registered.blink or false
end

return M
