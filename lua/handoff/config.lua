--- Configuration: the defaults and the validation of `setup()`'s options, both read from the
--- settings schema (`handoff.schema`, generated from the host's `crates/core/src/config/schema.rs`),
--- and the settings table the host takes.
local schema = require("handoff.schema")

local M = {}

--- The setting of each dotted key, and the keys each table holds (`""`: the top level): made
--- once from the schema, never changed.
local by_key, tables = (function()
  local keys, held = {}, { [""] = {} }
  for _, setting in ipairs(schema.settings) do
    keys[setting.key] = setting
    local prefix = ""
    for part in setting.key:gmatch("[^.]+") do
      local path = prefix == "" and part or (prefix .. "." .. part)
      held[prefix][part] = true
      if path ~= setting.key then
        held[path] = held[path] or {}
      end
      prefix = path
    end
  end
  return keys, held
end)()

local function get(t, key)
  for part in key:gmatch("[^.]+") do
    if type(t) ~= "table" then
      return nil
    end
    t = t[part]
  end
  return t
end

local function put(t, key, value)
  local parts = vim.split(key, ".", { plain = true })
  for i = 1, #parts - 1 do
    t[parts[i]] = t[parts[i]] or {}
    t = t[parts[i]]
  end
  t[parts[#parts]] = value
end

local function build_defaults()
  local d = {}
  for path in pairs(tables) do
    if path ~= "" then
      put(d, path, get(d, path) or {})
    end
  end
  for _, setting in ipairs(schema.settings) do
    put(d, setting.key, vim.deepcopy(setting.default))
  end
  return d
end

local defaults = build_defaults()

---@type handoff.Config
M.options = vim.deepcopy(defaults)

--- The thinking levels, lowest first (pi's names).
M.thinking_levels = schema.thinking_levels
M.thinking_names = schema.thinking_names

---@return handoff.Config
function M.defaults()
  return vim.deepcopy(defaults)
end

--- Whether `value` is of the schema type `ty`.
local function conforms(ty, value)
  local kind = ty.kind
  if kind == "bool" then
    return type(value) == "boolean"
  elseif kind == "int" then
    return type(value) == "number" and value == math.floor(value) and value >= ty.min and value <= ty.max
  elseif kind == "fraction" then
    return type(value) == "number" and value > 0 and value <= 1
  elseif kind == "size" then
    return type(value) == "number" and value > 0
  elseif kind == "string" or kind == "path" then
    return type(value) == "string"
  elseif kind == "key" then
    return type(value) == "string" or value == false
  elseif kind == "one_of" then
    return type(value) == "string" and vim.tbl_contains(ty.values, value)
  elseif kind == "list" then
    if type(value) ~= "table" or not vim.islist(value) then
      return false
    end
    for _, item in ipairs(value) do
      if not conforms(ty.item, item) then
        return false
      end
    end
    return true
  elseif kind == "table" then
    if type(value) ~= "table" then
      return false
    end
    for k, v in pairs(value) do
      local known = vim.tbl_contains(ty.keys, k) or (ty.prefix and type(k) == "string" and vim.startswith(k, ty.prefix))
      if not known or not conforms(ty.value, v) then
        return false
      end
    end
    return true
  elseif kind == "object" then
    return type(value) == "table"
  elseif kind == "map" then
    if type(value) ~= "table" then
      return false
    end
    for k, v in pairs(value) do
      if type(k) ~= "string" or not conforms(ty.value, v) then
        return false
      end
    end
    return true
  elseif kind == "record" then
    if type(value) ~= "table" then
      return false
    end
    for k, v in pairs(value) do
      if not ty.fields[k] or not conforms(ty.fields[k], v) then
        return false
      end
    end
    return true
  end
  return false
end

--- Edit distance, to suggest the option a misspelled key meant.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do
    prev[j] = j
  end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

local function nearest(key, known)
  local best, best_d = nil, 3
  for name in pairs(known) do
    local d = distance(key:lower(), name:lower())
    if d < best_d then
      best, best_d = name, d
    end
  end
  return best
end

local function fail(message)
  error("handoff.nvim: " .. message, 0)
end

local function shown(value)
  return vim.inspect(value, { newline = " ", indent = "" })
end

--- Checks `opts` (the user's, before defaults) against the schema under the table `prefix`:
--- unknown keys (with the nearest known spelling), types and ranges.
local function check(opts, prefix)
  local known = tables[prefix]
  for key, value in pairs(opts) do
    local name = prefix == "" and tostring(key) or (prefix .. "." .. tostring(key))
    local setting = by_key[name]
    if setting then
      if not (value == false and setting.or_false) and not conforms(setting.type, value) then
        fail(("%s must be %s, got %s"):format(name, setting.accepts, shown(value)))
      end
    elseif type(key) == "string" and tables[name] then
      if type(value) ~= "table" then
        fail(("%s must be a table, got %s"):format(name, shown(value)))
      end
      check(value, name)
    else
      local guess = type(key) == "string" and nearest(key, known)
      local list = vim.tbl_keys(known)
      table.sort(list)
      local at = prefix == "" and "" or (prefix .. ".")
      fail(("unknown option %s%s (known: %s)"):format(
        name, guess and (", did you mean " .. at .. guess .. "?") or "", table.concat(list, ", ")))
    end
  end
end

--- Validates every option, then applies them all (over the defaults): a bad option raises an
--- error that names it, and the configuration stays as it was.
---@param opts? handoff.Config
---@return handoff.Config
function M.setup(opts)
  opts = opts or {}
  if type(opts) ~= "table" then
    fail(("setup() options must be a table, got %s"):format(shown(opts)))
  end
  check(opts, "")
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts)
  return M.options
end

--- The settings table the host deserializes (`Settings` in crates/core/src/config.rs): every setting
--- the schema gives a host name, paths made absolute.
function M.host_settings()
  local s = {}
  for _, setting in ipairs(schema.settings) do
    local value = setting.host and get(M.options, setting.key)
    if value ~= nil then
      if setting.type.kind == "path" then
        value = vim.fn.fnamemodify(value, ":p")
      elseif (setting.type.kind == "table" or setting.type.kind == "map") and next(value) == nil then
        -- An empty Lua table goes out as an array; the host wants a map.
        value = vim.empty_dict()
      end
      put(s, setting.host, value)
    end
  end
  return s
end

function M.log_file()
  return M.options.log_file or (vim.fn.stdpath("log") .. "/handoff.log")
end

return M
