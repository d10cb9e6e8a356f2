-- mx.module.checks — the argument checks of mx.mod's methods: each raises
-- "<who>: <what> must be ..., got <kind>" at the caller's level, so a wrong argument is
-- named where the user passed it, never as a raw Lua error deep in fit's loop.
local nd = require("mx.nd")

local type, error, tostring, pairs, ipairs, getmetatable, pcall, string =
  type, error, tostring, pairs, ipairs, getmetatable, pcall, string

local M = {}

function M.kind(v)
  if nd.is_tensor(v) then return "an NDArray" end
  if type(v) == "number" then return "the number " .. tostring(v) end
  if type(v) == "string" then return "the string '" .. v .. "'" end
  return type(v)
end

local function bad(who, what, want, v, level)
  error(string.format("%s: %s must be %s, got %s", who, what, want, M.kind(v)), level + 1)
end

local function callable(v)
  if type(v) == "function" then return true end
  local mt = type(v) == "table" and getmetatable(v)
  return mt and mt.__call ~= nil or false
end

function M.iterator(who, what, v, level)
  if type(v) ~= "table" or type(v.next) ~= "function" or type(v.reset) ~= "function" then
    bad(who, what, "a data iterator (mx.io)", v, level + 1)
  end
end

-- nil, or a table of name -> NDArray (arg_params, aux_params)
function M.params(who, what, v, level)
  if v == nil then return end
  if type(v) ~= "table" or nd.is_tensor(v) or getmetatable(v) ~= nil then
    bad(who, what, "a table of name -> NDArray", v, level + 1)
  end
  for k, x in pairs(v) do
    if type(k) ~= "string" then bad(who, what .. " key " .. tostring(k), "a name", k, level + 1) end
    if not nd.is_tensor(x) then bad(who, what .. "['" .. k .. "']", "an NDArray", x, level + 1) end
  end
end

-- nil, or a plain table of options (optimizer_params)
function M.options(who, what, v, level)
  if v ~= nil and (type(v) ~= "table" or nd.is_tensor(v) or rawget(v, 1) ~= nil) then
    bad(who, what, "a table of options", v, level + 1)
  end
end

-- nil, a function (or callable), or a list of them
function M.callbacks(who, what, v, level)
  if v == nil or callable(v) then return end
  if type(v) ~= "table" or nd.is_tensor(v) then
    bad(who, what, "a function or a list of functions", v, level + 1)
  end
  for i, f in ipairs(v) do
    if not callable(f) then bad(who, what .. "[" .. i .. "]", "a function", f, level + 1) end
  end
end

-- nil (when may_be_nil) or a whole number >= lo
function M.count(who, what, v, level, may_be_nil, lo)
  if v == nil and may_be_nil then return end
  lo = lo or 0
  if type(v) ~= "number" or v ~= v or v % 1 ~= 0 or v < lo or v >= 2 ^ 53 then
    bad(who, what, "a whole number >= " .. lo, v, level + 1)
  end
end

function M.string(who, what, v, level)
  if type(v) ~= "string" or v == "" then bad(who, what, "a non-empty string", v, level + 1) end
end

-- an mx.mod module (anything with the module protocol)
function M.module(who, what, v, level)
  if type(v) ~= "table" or type(v.bind) ~= "function" or type(v.init_params) ~= "function" then
    bad(who, what, "a Module", v, level + 1)
  end
end

-- an EvalMetric (what update_metric updates)
function M.metric(who, what, v, level)
  if type(v) ~= "table" or nd.is_tensor(v) or type(v.update) ~= "function" then
    bad(who, what, "an EvalMetric (mx.metric.create)", v, level + 1)
  end
end

-- nil, an NDArray or a list of NDArrays (out_grads, labels)
function M.tensors(who, what, v, level, may_be_nil)
  if v == nil and may_be_nil then return end
  if nd.is_tensor(v) then return end
  if type(v) ~= "table" then bad(who, what, "an NDArray or a list of NDArrays", v, level + 1) end
  for i, x in ipairs(v) do
    if not nd.is_tensor(x) and not (type(x) == "table" and nd.is_tensor(x[1])) then
      bad(who, what .. "[" .. i .. "]", "an NDArray", x, level + 1)
    end
  end
end

-- f(...) with its error raised again at level, its position dropped (the caller's line
-- instead of the module's), named by who unless it names a module method already
function M.relay(who, level, f, ...)
  local r = { pcall(f, ...) }
  if r[1] then return unpack(r, 2, table.maxn(r)) end
  local msg = tostring(r[2]):gsub("^[^\n]-%.lua:%d+: ", "")
  if not (msg:find("^Module") or msg:find("^" .. who:gsub("%p", "%%%0"))) then msg = who .. ": " .. msg end
  error(msg, level + 1)
end

return M
