-- handoff.nvim: user commands only; everything loads on first use.
if vim.g.loaded_handoff then
  return
end
vim.g.loaded_handoff = true

local function api()
  return require("handoff")
end

--- A completion of the words `words()` gives that start with what is typed.
local function words_from(words)
  return function(arg_lead)
    return vim.tbl_filter(function(w)
      return vim.startswith(w, arg_lead)
    end, words())
  end
end

vim.api.nvim_create_user_command("Handoff", function(o)
  -- `:Handoff!`: review (edit) the document before the new session starts; `--to NAME`: the
  -- new session runs on that agent (|handoff-agents|), or on ours (`--to ours`). The words go
  -- to the host as typed: it reads `--to` as it reads `/handoff` typed in the prompt.
  api().handoff(o.args, { review = o.bang or nil })
end, {
  nargs = "?",
  bang = true,
  desc = "handoff.nvim: hand off to a new session [--to AGENT] [focus instructions]",
  -- Focus instructions often name a file: the word being typed completes as a path; after
  -- `--to`, an agent's name.
  complete = function(arg_lead, cmd_line, cursor_pos)
    return require("handoff.commands").complete_focus(arg_lead, cmd_line, cursor_pos)
  end,
})

vim.api.nvim_create_user_command("HandoffChat", function(o)
  -- `:'<,'>HandoffChat`: the lines go into the prompt (with their path and range).
  if o.range > 0 then
    api().add_selection(o.line1, o.line2)
  else
    api().open_chat()
  end
end, { range = true, desc = "handoff.nvim: open the chat and go to its prompt; with a range, add the lines to the prompt" })

vim.api.nvim_create_user_command("HandoffChatToggle", function()
  api().toggle_chat()
end, { desc = "handoff.nvim: open or close the chat" })

vim.api.nvim_create_user_command("HandoffPrompt", function(o)
  api().prompt(o.args)
end, { nargs = "+", desc = "handoff.nvim: send a prompt" })

vim.api.nvim_create_user_command("HandoffPin", function(o)
  -- `:HandoffPin text` pins the text; without one, the line (a chat line) or the range.
  if o.args ~= "" then
    api().pin(o.args)
  else
    api().pin_lines(o.line1, o.line2)
  end
end, { nargs = "*", range = true, desc = "handoff.nvim: pin the text, the line or the selection for the whole task (kept across handoffs)" })

vim.api.nvim_create_user_command("HandoffStop", function()
  api().abort()
end, { desc = "handoff.nvim: stop the response or cancel the handoff" })

vim.api.nvim_create_user_command("HandoffBack", function()
  -- Through the host's one parser, as `/back` typed in the prompt.
  api().prompt("/back", { expand = false })
end, { desc = "handoff.nvim: go back to the session this one was handed off from" })

vim.api.nvim_create_user_command("HandoffNew", function()
  api().new_session()
end, { desc = "handoff.nvim: start a new session" })

vim.api.nvim_create_user_command("HandoffSessions", function(o)
  -- `:HandoffSessions!`: open the chosen session read-only instead of resuming it.
  api().sessions(o.bang and { view = true } or nil)
end, { bang = true, desc = "handoff.nvim: resume a session of this directory (! opens it read-only)" })

vim.api.nvim_create_user_command("HandoffContext", function()
  require("handoff.system_prompt").show()
end, { desc = "handoff.nvim: show the system prompt as sent (instructions, skills, date, directory)" })

vim.api.nvim_create_user_command("HandoffTodos", function()
  api().toggle_todos()
end, { desc = "handoff.nvim: show or hide the model's todo list" })

vim.api.nvim_create_user_command("HandoffChanges", function()
  api().changes()
end, { desc = "handoff.nvim: the agent's changes in this session, in the quickfix list" })

vim.api.nvim_create_user_command("HandoffReview", function()
  api().review()
end, { desc = "handoff.nvim: every pending hunk of the agent's changes, in the quickfix list" })

vim.api.nvim_create_user_command("HandoffKeep", function(o)
  local review = require("handoff.review")
  if o.bang then
    review.keep_all()
  else
    review.keep(nil, o.range > 0 and { o.line1, o.line2 } or nil)
  end
end, { range = true, bang = true, desc = "handoff.nvim: keep the hunk under the cursor (a range: its lines; ! every pending hunk)" })

vim.api.nvim_create_user_command("HandoffReject", function(o)
  local review = require("handoff.review")
  local reason = o.args ~= "" and o.args or nil
  if o.bang then
    review.reject_all(reason)
  else
    review.reject(nil, reason, o.range > 0 and { o.line1, o.line2 } or nil)
  end
end, {
  range = true,
  bang = true,
  nargs = "?",
  desc = "handoff.nvim: reject the hunk under the cursor (a range: its lines; ! every pending hunk), with an optional reason",
})

vim.api.nvim_create_user_command("HandoffDiff", function(o)
  api().diff(o.args ~= "" and o.args or nil)
end, {
  nargs = "?",
  desc = "handoff.nvim: a file (default: this buffer's) against its state before the agent's first change",
  complete = function(arg_lead)
    return require("handoff.changes").complete(arg_lead)
  end,
})

vim.api.nvim_create_user_command("HandoffModel", function(o)
  api().select_model(o.args ~= "" and o.args or nil, { enable = o.bang })
end, {
  nargs = "?",
  bang = true,
  desc = "handoff.nvim: switch the model (each listed with its window); ! enables a Copilot model first",
  complete = function(arg_lead)
    return require("handoff.models").complete(arg_lead)
  end,
})

vim.api.nvim_create_user_command("HandoffAgent", function(o)
  api().agent(o.args ~= "" and o.args or nil)
end, {
  nargs = "?",
  desc = "handoff.nvim: a new session on an external ACP agent of `agents` (or ours)",
  complete = function(arg_lead)
    return vim.tbl_filter(function(n)
      return vim.startswith(n, arg_lead)
    end, require("handoff.commands").agent_names())
  end,
})

--- `:HandoffAgentMode` and `:HandoffAgentModel`: the external agent's `what`.
local function agent_choice(what)
  return function(o)
    api().agent_choose(what, o.args ~= "" and o.args or nil)
  end, {
    nargs = "?",
    desc = "handoff.nvim: set the external agent's " .. what .. " (no argument: pick one of those it offers)",
    complete = function(arg_lead)
      return vim.tbl_filter(function(id)
        return vim.startswith(id, arg_lead)
      end, api().agent_choices(what))
    end,
  }
end
vim.api.nvim_create_user_command("HandoffAgentMode", agent_choice("mode"))
vim.api.nvim_create_user_command("HandoffAgentModel", agent_choice("model"))

vim.api.nvim_create_user_command("HandoffMcp", function(o)
  require("handoff.mcp").run(o.fargs[1], o.fargs[2])
end, {
  nargs = "*",
  desc = "handoff.nvim: MCP servers [list|start|stop|trust] [server]",
  complete = function(arg_lead, cmd_line)
    return require("handoff.mcp").complete(arg_lead, cmd_line)
  end,
})

vim.api.nvim_create_user_command("HandoffThinking", function(o)
  api().select_thinking(o.args ~= "" and o.args or nil)
end, {
  nargs = "?",
  desc = "handoff.nvim: set the thinking level [off|minimal|low|medium|high]",
  complete = words_from(function()
    return require("handoff.config").thinking_levels
  end),
})

vim.api.nvim_create_user_command("HandoffInstall", function(o)
  require("handoff.install").command(o.args)
end, {
  nargs = "?",
  desc = "handoff.nvim: install the host binary (the release's, checksum pinned by the plugin; else a cargo build) [rollback|build]",
  complete = words_from(function()
    return { "rollback", "build" }
  end),
})
