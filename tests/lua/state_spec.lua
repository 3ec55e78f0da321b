-- Where the Lua side keeps its state (mini.nvim's way): in `handoff.state` or a module's private
-- `H` table, never on a module's public table; autocmds are made by `setup()`, never by a
-- `require`.
local fake = require("fake_host")
local h = require("helpers")
local eq = h.eq
local api = vim.api

fake.install()

local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")

--- Every module of lua/handoff, by its `require` name.
local function modules()
  local names = {}
  for _, path in ipairs(vim.fn.glob(root .. "/lua/handoff/**/*.lua", false, true)) do
    local name = path:sub(#root + #"/lua/" + 1):gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
    table.insert(names, name)
  end
  table.sort(names)
  return names
end

local function cleanup()
  vim.cmd("silent! only | enew!")
  fake.reset()
  require("handoff.review").reset()
  require("handoff").setup({})
end

local cases, it = h.suite()

--- The table-valued fields of each module's public table (`handoff.state` is the state's home,
--- `handoff.config`'s `options` what `setup()` sets), each as the field's table and a copy.
local function public_tables()
  local seen = {}
  for _, name in ipairs(modules()) do
    if name ~= "handoff.state" then
      local m = require(name)
      if type(m) == "table" then
        for key, value in pairs(m) do
          if type(value) == "table" and not (name == "handoff.config" and key == "options") then
            seen[name .. "." .. tostring(key)] = { ref = value, copy = vim.deepcopy(value) }
          end
        end
      end
    end
  end
  return seen
end

it("no module keeps state on its public table: a session's records change none of them", function()
  local before = public_tables()
  -- A session with a review, a conflict, a todo list, pins, the health probes' record.
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir, "p")
  local path = dir .. "/f.txt"
  vim.fn.writefile({ "a", "b", "c" }, path .. ".before")
  vim.fn.writefile({ "a", "B", "c" }, path .. ".after")
  vim.fn.writefile({ "a", "B", "c" }, path)
  fake.replies.review = {
    calls = { { call_id = "c1", tool = "write", path = path, before_file = path .. ".before", after_file = path .. ".after",
      hunks = { { id = 1, before = { start = 1, ["end"] = 2 }, after = { start = 1, ["end"] = 2 }, state = "pending" } } } },
  }
  fake.replies.review_decide = true
  require("handoff").open_chat()
  fake.emit({
    { type = "transcript", session_id = "s1", session_file = "/tmp/s1.jsonl", items = { { kind = "user", text = "hi" } },
      todos = { { content = "x", status = "pending", activeForm = "x" } }, pins = { "a pin" } },
    { type = "pins", pins = { "a pin", "another" } },
    { type = "health_probes", reachable = { ok = true, detail = "up" }, models = { ok = true, detail = "listed" } },
  })
  require("handoff.review").refresh({ quiet = true })
  vim.cmd("edit " .. vim.fn.fnameescape(path))
  api.nvim_buf_set_lines(0, 1, 2, false, { "mine" })
  pcall(require("handoff.review").reject, 1)
  eq(1, #require("handoff.review").hunks(), "the review has the session's hunk")
  local after = public_tables()
  local changed = {}
  for key, was in pairs(before) do
    local now = after[key]
    if not now or now.ref ~= was.ref or not vim.deep_equal(was.copy, now.copy) then
      table.insert(changed, key)
    end
  end
  for key in pairs(after) do
    if not before[key] then
      table.insert(changed, key .. " (new)")
    end
  end
  table.sort(changed)
  eq({}, changed, "public tables that changed")
  vim.cmd("silent! %bwipeout!")
end)

--- The top-level locals of a module's source that its code changes after they are made:
--- assigned (`x =`, `x[k] =`, `x.k =`) or filled (`table.insert(x, …)`) on an indented line
--- (a table constructor's `key = value,` is no assignment). The module's table `M`, its `H`,
--- and what is `require`d or taken from `handoff.state` are not loose state.
local function state_locals(path)
  local lines = vim.fn.readfile(path)
  local found = {}
  for _, line in ipairs(lines) do
    local names, value = line:match("^local ([%w_, ]+)=%s*(.*)$")
    names = names or line:match("^local ([%w_, ]+)$")
    if names and not (value and (value:find("^require%(") or value:find("^state[%.%s]") or value == "state")) then
      for name in names:gmatch("[%w_]+") do
        if name ~= "M" and name ~= "H" then
          for _, l in ipairs(lines) do
            local indented = l:match("^%s+(.-)%s*$")
            if indented and not indented:find(",$") and not indented:find("^%-%-")
              and (indented:find("^" .. name .. "%s*=[^=]") or indented:find("^" .. name .. "%s*%[.-%]%s*=[^=]")
                or indented:find("^" .. name .. "%.[%w_.]+%s*=[^=]") or indented:find("table%.insert%(" .. name .. "[,%[]")) then
              table.insert(found, name)
              break
            end
          end
        end
      end
    end
  end
  return found
end

it("a module's own state is in its private H table (or handoff.state), not in loose locals", function()
  local loose = {}
  for _, path in ipairs(vim.fn.glob(root .. "/lua/handoff/**/*.lua", false, true)) do
    for _, name in ipairs(state_locals(path)) do
      table.insert(loose, path:sub(#root + 2) .. ": " .. name)
    end
  end
  eq({}, loose, "top-level locals that functions change")
end)

--- Autocmds of the plugin's groups (`handoff_*`) in a fresh Neovim after `code`.
local function groups_after(code)
  local script = vim.fn.tempname() .. ".lua"
  vim.fn.writefile(vim.split(([[
vim.opt.rtp:prepend(%q)
%s
local names = {}
for _, a in ipairs(vim.api.nvim_get_autocmds({})) do
  local g = a.group_name or ""
  if g:find("^handoff") and not vim.tbl_contains(names, g) then
    table.insert(names, g)
  end
end
table.sort(names)
io.stdout:write(table.concat(names, " "))
]]):format(root, code), "\n"), script)
  local done = vim.system({ vim.v.progpath, "--clean", "--headless", "-l", script }, { text = true }):wait(20000)
  assert(done.code == 0, "the child Neovim failed: " .. tostring(done.stderr))
  return done.stdout
end

it("a require makes no autocmd; setup() makes the plugin's groups", function()
  local all = vim.tbl_map(function(name)
    return ("require(%q)"):format(name)
  end, modules())
  eq("", groups_after(table.concat(all, "\n")), "autocmd groups after requiring every module")
  eq("handoff_context handoff_highlights handoff_lifecycle handoff_review",
    groups_after('require("handoff").setup({})'), "autocmd groups after setup()")
end)

return { cases = cases, cleanup = cleanup }
