--- The review's editor-side cost (issue 41), in a real headless Neovim 0.11, without the host:
---
---   nvim --clean -n --headless --cmd 'set rtp^=.' -c 'luafile bench/review_bench.lua'
---
--- A 5,000-line file whose agent version changes 200 places (every 25th line), loaded in a
--- buffer: finding the 200 hunks in its text (the call's result diffed against the buffer),
--- drawing them, one keep and one reject (each one undo block, the buffer written). Then 50
--- files of 200 lines with 10 hunks each, all loaded: what the editor does when the host says a
--- 50-file change landed (find and draw everything), the longest the editor is held by us.
--- The host's split of the same change is `cargo bench --bench inprocess -- review_split`.
--- Prints JSON: per step the median and the worst of `runs` samples, in ms.
local hr = vim.uv.hrtime
local runs = tonumber(vim.env.RUNS or "") or 15

-- No host: the review's requests answer at once (the bench times the editor's work).
package.loaded["handoff.host"] = {
  try_request = function(method)
    if method == "review_split" then
      return true, {}
    end
    return true, {}
  end,
  request = function()
    return {}
  end,
  when_ready = function() end,
  ensure = function() end,
}

local review = require("handoff.review")
local dir = vim.fn.tempname()
vim.fn.mkdir(dir, "p")

local function write(path, lines)
  local f = assert(io.open(path, "wb"))
  f:write(table.concat(lines, "\n") .. "\n")
  f:close()
end

--- A call as the host lists it: `n` lines, every `every`-th changed.
local function make_call(name, n, every)
  local base, agent = {}, {}
  for i = 1, n do
    base[i] = ("line %d of the file, some text to diff"):format(i)
    agent[i] = i % every == 0 and ("LINE %d changed by the agent"):format(i) or base[i]
  end
  local path = dir .. "/" .. name
  write(path, agent)
  write(path .. ".before", base)
  write(path .. ".after", agent)
  local hunks = {}
  for _, h in ipairs(((vim.text and vim.text.diff) or vim.diff)(table.concat(base, "\n") .. "\n", table.concat(agent, "\n") .. "\n", { result_type = "indices" })) do
    hunks[#hunks + 1] = {
      id = #hunks + 1 + (#review.calls * 100000),
      before = { start = h[1] - 1, ["end"] = h[1] - 1 + h[2] },
      after = { start = h[3] - 1, ["end"] = h[3] - 1 + h[4] },
      state = "pending",
    }
  end
  return { call_id = "call_" .. name, tool = "write", entry_id = "e", path = path, before_file = path .. ".before", after_file = path .. ".after", hunks = hunks }
end

local function stats(samples)
  table.sort(samples)
  return { median_ms = samples[math.ceil(#samples / 2)], worst_ms = samples[#samples] }
end

local function time(fn)
  local t0 = hr()
  fn()
  return (hr() - t0) / 1e6
end

local out = {}
local function main()

-- One 5,000-line file, 200 hunks.
local big = make_call("big.txt", 5000, 25)
assert(#big.hunks == 200, "expected 200 hunks, got " .. #big.hunks)
vim.cmd("edit " .. vim.fn.fnameescape(big.path))
review.calls = { big }
local locate, draw, keep, reject = {}, {}, {}, {}
for i = 1, runs do
  review.calls = { vim.deepcopy(big) }
  -- A cold find: the cache is per buffer change, so a changed buffer costs this.
  vim.api.nvim_buf_set_lines(0, 0, 1, false, vim.api.nvim_buf_get_lines(0, 0, 1, false))
  locate[i] = time(function()
    assert(#review.located() == 200)
  end)
  draw[i] = time(review.draw)
  local ids = vim.tbl_map(function(h)
    return h.id
  end, review.calls[1].hunks)
  keep[i] = time(function()
    assert(#review.keep(ids[100]) == 1)
  end)
  reject[i] = time(function()
    assert(#review.reject(ids[101]) == 1)
  end)
  vim.cmd("silent undo")
end
out.file_5000_lines_200_hunks = { find = stats(locate), draw = stats(draw), keep_one = stats(keep), reject_one = stats(reject) }

-- A 50-file change lands: every file loaded, found and drawn at once.
vim.cmd("silent %bwipeout!")
review.reset()
local calls = {}
for i = 1, 50 do
  review.calls = calls
  calls[#calls + 1] = make_call(("f%02d.txt"):format(i), 200, 20)
  vim.cmd("badd " .. vim.fn.fnameescape(calls[#calls].path))
  vim.fn.bufload(vim.fn.bufnr(calls[#calls].path))
end
local land = {}
for i = 1, runs do
  review.calls = vim.deepcopy(calls)
  land[i] = time(function()
    review.draw()
  end)
  review.reset()
end
out.change_of_50_files_lands = { find_and_draw_all = stats(land), files = 50, hunks = 50 * 10 }
out.runs = runs
end
local ok, err = pcall(main)
io.stdout:write((ok and vim.json.encode(out) or ("failed: " .. tostring(err))) .. "\n")
vim.cmd("qa!")
