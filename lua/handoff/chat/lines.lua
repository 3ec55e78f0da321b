--- The chat's text of each thing it shows, as lines, without touching a buffer: transcript
--- items, tool calls and their output, token counts, the header. Used to draw a whole transcript
--- (`chat.render`), the streamed reply (`chat.stream`) and read-only sessions.
local config = require("handoff.config")

local M = {}

local find, sub = string.find, string.sub

--- Appends the lines of `text` to `out` (each after `prefix`, when given); returns `out`.
--- Drawing a transcript splits every item's text: a plain find loop is several times faster
--- than `vim.split`.
local function push_lines(out, text, prefix)
  text = text or ""
  local n, init = #out, 1
  while true do
    local at = find(text, "\n", init, true)
    if not at then
      break
    end
    n = n + 1
    out[n] = prefix and (prefix .. sub(text, init, at - 1)) or sub(text, init, at - 1)
    init = at + 1
  end
  out[n + 1] = prefix and (prefix .. sub(text, init)) or sub(text, init)
  return out
end

local function split(text)
  return push_lines({}, text)
end

--- Appends the lines of one transcript item to `out`; returns whether the item shows, and the
--- rows its thinking takes among the lines added (0-based from the item's first line,
--- inclusive `{ first, last }`; nil without thinking).
local function push_item(out, item)
  local base = #out
  local thinking
  local k = item.kind
  if k == "user" then
    out[base + 1], out[base + 2] = "## You", ""
    -- Attached files and selections show as one line each; the session holds their text.
    local text = item.text or ""
    if find(text, "```", 1, true) then
      vim.list_extend(out, require("handoff.context").compact(split(text)))
    else
      push_lines(out, text)
    end
  elseif k == "continuation" then
    -- The host's own message after an automatic handoff: not the user's words.
    out[base + 1], out[base + 2] = "## handoff.nvim · continuing after the handoff", ""
    push_lines(out, item.text, "> ")
  elseif k == "reminder" then
    -- The host's reminder of open todo items: not the user's words.
    out[base + 1], out[base + 2] = "## handoff.nvim · todo reminder", ""
    push_lines(out, item.text, "> ")
  elseif k == "handoff_request" then
    out[base + 1], out[base + 2] = "## You", ""
    out[base + 3] = "*Handoff requested*" .. ((item.focus and item.focus ~= "") and (" — focus: " .. item.focus) or "")
  elseif k == "assistant" then
    out[base + 1], out[base + 2] = "## Assistant" .. (item.model and (" · " .. item.model) or ""), ""
    if item.thinking then
      push_lines(out, item.thinking, "> ")
      thinking = { 2, #out - base - 1 }
      out[#out + 1] = ""
    end
    push_lines(out, item.text)
    for _, call in ipairs(item.tool_calls or {}) do
      out[#out + 1] = M.call_line(call.tool, call.summary)
    end
    if item.stop_reason == "error" then
      out[#out + 1] = ""
      out[#out + 1] = "**Error:** " .. (item.error_message or "the request failed")
    elseif item.stop_reason == "aborted" then
      out[#out + 1] = ""
      out[#out + 1] = "*(stopped)*"
    end
  elseif k == "tool" then
    vim.list_extend(out, M.result_lines(item.tool, item.text, item.is_error, false, item.earlier, item.earlier_lines))
  elseif k == "handoff" or k == "compaction" or k == "branch_summary" or k == "custom" then
    local title = k == "handoff" and "Handoff context"
      or k == "compaction" and "Compaction summary"
      or k == "branch_summary" and "Branch summary"
      or (item.custom_type or "custom")
    out[base + 1], out[base + 2] = "## " .. title, ""
    push_lines(out, item.text)
    if item.ledger then
      -- What the handoff carried and dropped, folded to its one line like a reply's thinking.
      out[#out + 1] = ""
      local first = #out - base
      vim.list_extend(out, M.ledger_lines(item.ledger))
      thinking = { first, #out - base - 1 }
    end
  else
    return false
  end
  out[#out + 1] = ""
  return true, thinking
end

--- Lines for one transcript item, and the rows its thinking takes among them (0-based,
--- inclusive `{ first, last }`; nil without thinking).
local function item_lines(item)
  local lines = {}
  local shows, thinking = push_item(lines, item)
  if not shows then
    return nil
  end
  return lines, thinking
end

M.item_lines = item_lines
M.push_item = push_item
M.split = split

--- A handoff's ledger (the host's words): its one line, then its parts indented.
function M.ledger_lines(ledger)
  local lines = { "▸ " .. ledger.summary }
  for _, line in ipairs(ledger.lines or {}) do
    lines[#lines + 1] = "  " .. line
  end
  return lines
end

--- A token count as the chat shows it: 420, 9.8k, 12.3k, 1.2M.
function M.tokens(n)
  if n < 1000 then
    return tostring(n)
  elseif n < 999950 then
    return (("%.1fk"):format(n / 1000):gsub("%.0k$", "k"))
  end
  return (("%.1fM"):format(n / 1e6):gsub("%.0M$", "M"))
end

--- The usage line under an assistant message: "· 12.3k in (9.8k cached) · 420 out" (the whole
--- prompt, the part of it read from the provider's prompt cache and the part written to it, the
--- reply), or nil when the provider reported nothing.
function M.usage_text(item)
  local parts = {}
  if item.input_tokens then
    local cache = {}
    if item.cached_tokens then
      table.insert(cache, M.tokens(item.cached_tokens) .. " cached")
    end
    if item.cache_write_tokens then
      table.insert(cache, M.tokens(item.cache_write_tokens) .. " written to cache")
    end
    table.insert(parts, M.tokens(item.input_tokens) .. " in"
      .. (#cache > 0 and (" (" .. table.concat(cache, ", ") .. ")") or ""))
  end
  if item.output_tokens then
    table.insert(parts, M.tokens(item.output_tokens) .. " out")
  end
  if #parts == 0 then
    return nil
  end
  return "· " .. table.concat(parts, " · ")
end


--- The first lines of a transcript: the session, and the one it was handed off from (with the
--- key that opens it). Returns the lines and the 0-based row naming the parent, if any.
function M.header_lines(info, title)
  local lines = { title or ("# Session " .. (info and info.session_id or "")) }
  local parent_row = nil
  if info and info.parent_session then
    parent_row = #lines
    local key = config.options.keymaps.parent
    table.insert(lines, ("*Handed off from %s%s*"):format(
      vim.fn.fnamemodify(info.parent_session, ":t"),
      key and (" — " .. key .. " on this line opens it read-only") or ""
    ))
  end
  -- The instruction files the model is given (`:HandoffContext` shows the whole prompt).
  local files = info and info.instruction_files
  if type(files) == "table" and #files > 0 then
    local names = vim.tbl_map(function(f)
      return vim.fn.fnamemodify(f, ":~:.")
    end, files)
    table.insert(lines, "*Instructions: " .. table.concat(names, ", ") .. "*")
  end
  table.insert(lines, "")
  return lines, parent_row
end

--- The line naming a tool call.
function M.call_line(tool, summary)
  summary = (summary or ""):gsub("\n", " ")
  if #summary > 120 then
    summary = summary:sub(1, 117) .. "…"
  end
  return ("**▸ %s**%s"):format(tool or "tool", summary ~= "" and (" `" .. summary .. "`") or "")
end

--- A tool's output as the chat shows it: the last lines, in a fence. `earlier`: lines of the
--- output before `text` that the result itself does not hold (a running command's update carries
--- only its end; bash past its limits keeps the rest in the file its last line names). `cut`:
--- lines of the result the host left out of a transcript (the session holds them).
function M.result_lines(tool, text, is_error, live, earlier, cut)
  local max = config.options.tool_output_lines
  local all = split(text or "")
  local n = #all
  while n > 0 and all[n] == "" do
    n = n - 1
  end
  local lines = {}
  if is_error then
    lines[1] = ("*%s failed:*"):format(tool or "tool")
  end
  local from = math.max(1, n - max + 1)
  local hidden = (from - 1) + (earlier or 0) + (cut or 0)
  if hidden > 0 then
    local whole = not live and (earlier or 0) == 0
    lines[#lines + 1] = ("*… %d earlier lines%s*"):format(hidden, whole and " (all of it is in the session)" or "")
  end
  lines[#lines + 1] = "```"
  for i = from, n do
    lines[#lines + 1] = all[i]
  end
  lines[#lines + 1] = "```"
  return lines
end

return M
