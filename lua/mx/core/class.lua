-- mx.core.class — the small class helper shared by the table-based classes of mx
-- (optimizers, lr schedulers, initializers, metrics, gluon.Parameter). A class is a
-- table that is the metatable of its instances: methods are looked up in the class,
-- then its parents.
--
--   local class = require("mx.core.class")
--   local Base = class.base("Base")              -- Base.__index = Base
--   local Sub = class.extend(Base, "Sub")         -- inherits Base's methods and metamethods
--   local obj = setmetatable({ ... }, Sub)
--
-- gluon.Block has its own Block:extend (instances route field assignment through
-- __newindex to register children and parameters); it does not use this module.
-- check_opts validates a constructor's options table against the names it accepts (these
-- classes, gluon layers and losses, Parameter, Trainer, Block:load_parameters).
local type, error, tostring, pairs, setmetatable = type, error, tostring, pairs, setmetatable

local M = {}

-- Lua reads metamethods from the metatable itself (no __index lookup), so a subclass
-- copies its parent's.
local METAMETHODS = { "__call", "__tostring", "__eq", "__lt", "__le", "__len", "__concat",
  "__unm", "__add", "__sub", "__mul", "__div", "__mod", "__pow" }

-- base(name[, cls]): cls (a new table by default) as a root class named name.
function M.base(name, cls)
  cls = cls or {}
  cls.__index = cls
  cls.__name = name
  return cls
end

-- extend(parent, name): a subclass of parent named name.
function M.extend(parent, name)
  local cls = setmetatable({}, { __index = parent })
  cls.__index = cls
  cls.__name = name
  for _, k in ipairs(METAMETHODS) do cls[k] = parent[k] end
  return cls
end

-- check_opts(name, opts, valid, level[, extra]): opts ({} when nil) after checking that
-- it is a table whose every key is in the set valid (or the set extra); the error,
-- raised at `level` as the caller counts it, lists the valid names.
-- Options whose values every layer takes the same way are checked here, once, for every
-- class: `dtype` (a dtype name), `*_initializer` (nil, an initializer's name or an
-- Initializer: what mx.init.create takes) and the input sizes `in_units`, `in_channels`,
-- `input_size` (whole numbers >= 0; 0: inferred from the first input).
local SIZES = { in_units = true, in_channels = true, input_size = true }
local function check_common(name, k, v, level)
  if v == nil then return end
  if SIZES[k] then
    if type(v) ~= "number" or v < 0 or v % 1 ~= 0 or v >= 2 ^ 53 then
      error(string.format("%s: %s must be a whole number >= 0 (0: inferred), got %s", name, k,
        tostring(v)), level + 1)
    end
  elseif k == "dtype" then
    local Pm = require("mx.nd.params")
    if type(v) ~= "string" or not Pm.dtype_code(v) then
      error(string.format("%s: dtype must be a dtype name ('float32', 'float16', ...), got %s", name,
        tostring(v)), level + 1)
    end
  elseif type(k) == "string" and k:find("_initializer$") then
    local ok, err = pcall(require("mx.initializer").create, v)
    if not ok then
      error(string.format("%s: %s: %s", name, k, tostring(err):gsub("^[^\n]-:%d+: ", "")), level + 1)
    end
  end
end

function M.check_opts(name, opts, valid, level, extra)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(name .. ": options must be a table, got " .. type(opts), level + 1)
  end
  for k, v in pairs(opts) do
    if valid[k] or (extra and extra[k]) then check_common(name, k, v, level + 1) end
    if not valid[k] and not (extra and extra[k]) then
      local names = {}
      for n in pairs(valid) do names[#names + 1] = n end
      for n in pairs(extra or {}) do
        if not valid[n] then names[#names + 1] = n end
      end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (valid: %s)", name, tostring(k),
        table.concat(names, ", ")), level + 1)
    end
  end
  return opts
end

return M
