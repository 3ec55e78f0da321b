-- Fast UI tests of the Lua side against a fake host (no binary, no model): run with
-- `nvim --clean --headless -l tests/lua/run.lua` from the checkout (tests/lua_ui.rs does).
-- Each spec file returns { cases = { { name, fn }, … }, cleanup = fn }; a test fails by raising
-- an error. Notifications are collected in `_G.notes` instead of printed.
local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")
vim.opt.rtp:prepend(root)
package.path = root .. "/tests/lua/?.lua;" .. package.path
vim.cmd("runtime plugin/handoff.lua")
_G.notes = {}
vim.notify = function(msg, level)
  table.insert(_G.notes, { msg = msg, level = level })
end

local failed, passed = 0, 0
for _, spec in ipairs({ "ui_spec", "context_spec", "thinking_spec", "config_spec" }) do
  local suite = require(spec)
  for _, case in ipairs(suite.cases) do
    local ok, err = xpcall(case[2], debug.traceback)
    if ok then
      passed = passed + 1
      io.stdout:write("ok   " .. case[1] .. "\n")
    else
      failed = failed + 1
      io.stdout:write("FAIL " .. case[1] .. "\n" .. tostring(err) .. "\n")
    end
    -- Each test starts from a clean editor state.
    pcall(suite.cleanup)
  end
end
io.stdout:write(("%d passed, %d failed\n"):format(passed, failed))
os.exit(failed == 0 and 0 or 1)
