--- nvim-cmp source: `#buffer`, `#selection`, `#diagnostics` and `@path` in the prompt buffer.
--- The plugin registers it (as "handoff") when nvim-cmp is installed; enable it with
---
---   require("cmp").setup.filetype("handoff-prompt", { sources = { { name = "handoff" }, { name = "buffer" } } })
local completion = require("handoff.completion")

local source = {}

-- LSP CompletionItemKind: File, Reference.
local KIND = { file = 17, context = 18 }

function source.new()
  return setmetatable({}, { __index = source })
end

function source:is_available()
  return vim.bo.filetype == "handoff-prompt"
end

function source:get_trigger_characters()
  return { "#", "@" }
end

--- The word cmp replaces: the sigil and what follows it.
function source:get_keyword_pattern()
  return [=[[#@]\S*]=]
end

---@param params { context: { cursor_before_line: string } }
---@param callback fun(response: table)
function source:complete(params, callback)
  local before = params.context.cursor_before_line
  local _, word = completion.token_at(before, #before)
  if not word then
    return callback({ items = {}, isIncomplete = false })
  end
  -- Once the project's files are known (read in the background, never waited for).
  completion.items_async(word, { all = true }, function(candidates)
    local items = {}
    for _, c in ipairs(candidates) do
      table.insert(items, {
        label = c.word,
        insertText = c.word,
        filterText = c.word,
        kind = KIND[c.kind],
        labelDetails = { description = c.menu },
        documentation = c.info,
      })
    end
    callback({ items = items, isIncomplete = false })
  end)
end

return source
