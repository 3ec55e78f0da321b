--- The plugin's highlight groups: `default` links (a colorscheme or the user may override them),
--- defined by `setup()` and again after every `:colorscheme`, which clears them.
local M = {}

local groups = {
  HandoffIndicator = "Comment",
  HandoffHandoffContext = "DiffAdd",
  HandoffNotice = "Special",
  HandoffError = "ErrorMsg",
  HandoffDocumentHeader = "Title",
  HandoffDocumentFailed = "ErrorMsg",
  HandoffApproval = "DiffChange",
  HandoffFacts = "Comment",
  HandoffTodoInProgress = "DiffText",
  HandoffTodoDone = "Comment",
  HandoffUsage = "Comment",
  HandoffHunkAdd = "Added",
  HandoffHunkChange = "Changed",
  HandoffHunkDelete = "Removed",
  HandoffHunkConflict = "DiagnosticError",
  HandoffHunkAddLine = "DiffAdd",
  HandoffHunkChangeLine = "DiffChange",
  HandoffHunkConflictLine = "DiffText",
}

function M.define()
  for name, link in pairs(groups) do
    vim.api.nvim_set_hl(0, name, { default = true, link = link })
  end
end

--- Defines the groups now and after each colorscheme change.
function M.setup()
  M.define()
  vim.api.nvim_create_autocmd("ColorScheme", {
    group = vim.api.nvim_create_augroup("handoff_highlights", { clear = true }),
    callback = M.define,
    desc = "handoff.nvim: define the highlight groups again",
  })
end

return M
