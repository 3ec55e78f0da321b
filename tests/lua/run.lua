-- Fast UI tests of the Lua side against a fake host (no binary, no model), run by
-- tests/lua_ui.rs (one Rust test per spec file). By hand, from the checkout:
--   nvim --clean --headless -l tests/lua/run.lua                  -- every tests/lua/*_spec.lua
--   nvim --clean --headless -l tests/lua/run.lua ui_spec          -- one spec file
--   nvim --clean --headless -l tests/lua/run.lua ui_spec "todo"   -- its cases whose name has "todo"
-- Each spec file returns { cases = { { name, fn }, … }, cleanup = fn }; a case fails by raising
-- an error. Every case prints one line, "ok   <spec>: <name>" or "FAIL <spec>: <name>" (then
-- its error, indented); the last line is "N passed, N failed". Notifications are collected in
-- `_G.notes` instead of printed.
local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")
vim.opt.rtp:prepend(root)
package.path = root .. "/tests/lua/?.lua;" .. package.path
vim.cmd("runtime plugin/handoff.lua")
_G.notes = {}
vim.notify = function(msg, level)
  table.insert(_G.notes, { msg = msg, level = level })
end

local args = _G.arg or {}
local only_spec, only_name = args[1], args[2]
local specs = {}
if only_spec and only_spec ~= "" then
  specs = { (only_spec:gsub("%.lua$", "")) }
else
  for _, path in ipairs(vim.fn.glob(root .. "/tests/lua/*_spec.lua", false, true)) do
    table.insert(specs, vim.fn.fnamemodify(path, ":t:r"))
  end
  table.sort(specs)
end

local failed, passed = 0, 0
local function report(ok, spec, name, err)
  if ok then
    passed = passed + 1
    io.stdout:write(("ok   %s: %s\n"):format(spec, name))
  else
    failed = failed + 1
    io.stdout:write(("FAIL %s: %s\n"):format(spec, name))
    io.stdout:write((tostring(err):gsub("[^\n]+", "    %0")) .. "\n")
  end
  io.stdout:flush()
end

for _, spec in ipairs(specs) do
  local loaded, suite = xpcall(require, debug.traceback, spec)
  if not loaded then
    report(false, spec, "(loading the spec file)", suite)
  else
    local ran = 0
    for _, case in ipairs(suite.cases) do
      if not only_name or case[1]:find(only_name, 1, true) then
        ran = ran + 1
        local ok, err = xpcall(case[2], debug.traceback)
        report(ok, spec, case[1], err)
        -- Each case starts from a clean editor state.
        pcall(suite.cleanup)
      end
    end
    if ran == 0 then
      report(false, spec, "(no case ran)", only_name and ("no case name contains " .. only_name) or "the spec has no cases")
    end
  end
end
io.stdout:write(("%d passed, %d failed\n"):format(passed, failed))
os.exit(failed == 0 and 0 or 1)
