--- blink.cmp source: `#buffer`, `#selection`, `#diagnostics` and `@path` in the prompt buffer.
--- Registered by the plugin when blink.cmp is installed; or configure it yourself:
---
---   sources.providers.handoff = { name = "handoff", module = "handoff.completion.blink" }
---   sources.per_filetype["handoff-prompt"] = { "handoff", inherit_defaults = true }
local completion = require("handoff.completion")

local source = {}

-- LSP CompletionItemKind: File, Reference.
local KIND = { file = 17, context = 18 }

function source.new(opts)
  return setmetatable({ opts = opts or {} }, { __index = source })
end

function source:enabled()
  return vim.bo.filetype == "handoff-prompt"
end

function source:get_trigger_characters()
  return { "#", "@" }
end

---@param ctx { line: string, cursor: integer[] } blink.cmp.Context (cursor: 1-based row, 0-based col)
---@param callback fun(response: table)
function source:get_completions(ctx, callback)
  local row, col = ctx.cursor[1], ctx.cursor[2]
  local start, word = completion.token_at(ctx.line, col)
  local items = {}
  if start then
    local range = { start = { line = row - 1, character = start }, ["end"] = { line = row - 1, character = col } }
    -- Once the project's files are known (read in the background, never waited for).
    completion.items_async(word, { all = true }, function(candidates)
      for _, c in ipairs(candidates) do
        table.insert(items, {
          label = c.word,
          filterText = c.word,
          kind = KIND[c.kind],
          textEdit = { newText = c.word, range = range },
          labelDetails = { description = c.menu },
          documentation = c.info,
        })
      end
      callback({ items = items, is_incomplete_forward = false, is_incomplete_backward = false })
    end)
    return function() end
  end
  callback({ items = items, is_incomplete_forward = false, is_incomplete_backward = false })
  return function() end
end

return source
