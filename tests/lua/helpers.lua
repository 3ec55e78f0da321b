-- What the spec files share: assertions that raise with the expected and the actual value (at
-- the caller's line), a buffer's lines, and the list of cases with its `it`.
local M = {}

function M.eq(want, got, what)
  if not vim.deep_equal(want, got) then
    error(("%s: expected %s, got %s"):format(what or "value", vim.inspect(want), vim.inspect(got)), 2)
  end
end

function M.has(haystack, needle, what)
  if not haystack:find(needle, 1, true) then
    error(("%s: %q not in:\n%s"):format(what or "text", needle, haystack), 2)
  end
end

function M.lacks(haystack, needle, what)
  if haystack:find(needle, 1, true) then
    error(("%s: %q should not be in:\n%s"):format(what or "text", needle, haystack), 2)
  end
end

--- Calls `fn`, which must raise an error containing `pattern` (plain text); returns the error.
function M.raises(fn, pattern)
  local ok, err = pcall(fn)
  if ok then
    error("expected an error matching " .. pattern, 2)
  end
  if not tostring(err):find(pattern, 1, true) then
    error(("error %q does not contain %q"):format(tostring(err), pattern), 2)
  end
  return tostring(err)
end

--- All lines of `buf`.
function M.lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

--- A spec's cases (`{ name, fn }` each, in order) and `it(name, fn)`, which adds one.
function M.suite()
  local cases = {}
  return cases, function(name, fn)
    table.insert(cases, { name, fn })
  end
end

return M
