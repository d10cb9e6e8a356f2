-- mx.core.opargs — MXNet's positional params for the op functions under their MXNet names
-- (mx.sym.Dropout(data, 0.5), mx.nd.FullyConnected(x, w, b, 10)): MXNet 1.9.1's generated
-- functions take inputs then params in one order (lua/mx/core/mxnet_op_args.lua, written by
-- tools/fixtures/make_op_args.py). wrap(op, mxnet_name, f, is_input) gives f taking them:
-- a value (not an input: is_input(v) false) at a param's position moves into the options
-- table, where a param given both ways, or a value past the last param, is an error.
-- Values keep luamx's meaning (1-based axes), as everywhere in mx.nd and mx.sym. A
-- trailing table with string keys (or empty) is the options table; a list of numbers or
-- strings is a param value (kernel = (5, 5)).
local ARGS = require("mx.core.mxnet_op_args")

local type, error, select, pairs, unpack = type, error, select, pairs, unpack

local M = {}

local function is_list_value(t)
  if type(t) ~= "table" or getmetatable(t) ~= nil or next(t) == nil then return false end
  for k, v in pairs(t) do
    if type(k) ~= "number" or (type(v) ~= "number" and type(v) ~= "string" and type(v) ~= "boolean") then
      return false
    end
  end
  return true
end

function M.wrap(op, mname, f, is_input)
  local names = ARGS[mname]
  if names == nil then return f end
  local is_param = {}
  for _, p in ipairs(op.params or {}) do is_param[p[1]] = true end
  local first = nil
  for i, n in ipairs(names) do
    if is_param[n] then first = first or i end
  end
  if first == nil then return f end
  return function(...)
    local n = select("#", ...)
    local last = n > 0 and select(n, ...) or nil
    local opts
    if n > 0 and type(last) == "table" and not is_input(last) and not is_list_value(last) then
      opts, n = last, n - 1
    end
    if n < first then return f(...) end
    local args = { ... }
    local extra = {}
    for i = first, n do
      local v = args[i]
      local name = names[i]
      if name == nil then
        error(string.format("%s: takes at most %d arguments (%s), got %d", mname, #names,
          table.concat(names, ", "), n), 2)
      end
      if is_input(v) then
        if is_param[name] then
          error(string.format("%s: argument %d (%s) is a param, got an input", mname, i, name), 2)
        end
      elseif v ~= nil then
        if not is_param[name] then return f(...) end -- (an input's place: f names the error)
        if opts and opts[name] ~= nil then
          error(string.format("%s: %s given twice (as argument %d and as an option)", mname, name, i), 2)
        end
        extra[name] = v
      end
    end
    local merged = {}
    for k, v in pairs(opts or {}) do merged[k] = v end
    for k, v in pairs(extra) do merged[k] = v end
    -- the inputs before the first param position; later inputs are kept in place
    local keep, m = {}, 0
    for i = 1, n do
      local v = args[i]
      if i < first or is_input(v) then
        m = i
        keep[i] = v
      end
    end
    keep[m + 1] = merged
    return f(unpack(keep, 1, m + 1))
  end
end

M.ARGS = ARGS
return M
