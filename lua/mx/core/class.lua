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
-- classes, gluon layers and losses, Parameter, Trainer, Block:load_parameters);
-- signature builds MXNet's calling convention on top of it (positional parameters in
-- MXNet's order, or the same by name in a trailing options table).
local type, error, tostring, pairs, setmetatable, getmetatable, select, rawget =
  type, error, tostring, pairs, setmetatable, getmetatable, select, rawget

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
-- `input_size` (whole numbers >= 0; 0: inferred from the first input). The first two
-- are checked by the modules that know them (mx.nd.params, mx.initializer), which
-- register their check here: this module requires nothing above it.
local SIZES = { in_units = true, in_channels = true, input_size = true }
local VALUE_CHECKS = {} -- { matches(key), check(key, value) -> message or nil }

-- register_option_check(matches, check): check(key, value) returns the message (without
-- the class's name) for a bad value of every option whose key matches(key).
function M.register_option_check(matches, check)
  VALUE_CHECKS[#VALUE_CHECKS + 1] = { matches, check }
end

local function check_common(name, k, v, level)
  if v == nil then return end
  if SIZES[k] then
    if type(v) ~= "number" or v < 0 or v % 1 ~= 0 or v >= 2 ^ 53 then
      error(string.format("%s: %s must be a whole number >= 0 (0: inferred), got %s", name, k,
        tostring(v)), level + 1)
    end
    return
  end
  for i = 1, #VALUE_CHECKS do
    local c = VALUE_CHECKS[i]
    if c[1](k) then
      local msg = c[2](k, v)
      if msg then error(name .. ": " .. msg, level + 1) end
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


---------------------------------------------------------------- MXNet's calling convention
-- signature(name, params[, named]) -> sig, the one rule for every function and constructor
-- that follows an MXNet signature: MXNet's parameters positionally in MXNet's order, or the
-- same by their MXNet names in one trailing options table, or a mix of both.
--   params  MXNet's parameters in its order; an entry is a name or a table:
--             {name, map = true}   the parameter itself takes a table of names (Trainer's
--                                  optimizer_params): a trailing table at its position is
--                                  the options table only when every key is a valid name
--             {name, list = true}  the parameter takes a Lua list: an empty table at its
--                                  position is that list, not an empty options table
--             {name, rest = true}  the last entry: the remaining positional arguments, as
--                                  a list (with .n) under name (ArrayDataset's *args)
--             {name, unsupported = why, default = v}  MXNet's, not luamx's: a value other
--                                  than MXNet's default v is an error saying why
--   named   names accepted by name only (luamx's own options), a list or a set
-- sig(level, ...) -> o: the call's arguments as one new table of names. The last argument
-- is the options table when it is a plain table (no metatable) that is not a list (no
-- [1]); a name given both ways, an unknown name or too many positional arguments is an
-- error raised at `level` as the caller counts it, naming the function and listing the
-- valid names. nil positional arguments count as not given.
-- sig.name, sig.params (the names in order), sig.valid (every accepted name -> true).
local Signature = {}
Signature.__index = Signature

local function same_value(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function valid_list(sig)
  local names = {}
  for n in pairs(sig.valid) do names[#names + 1] = n end
  table.sort(names)
  return table.concat(names, ", ")
end

local function is_options(sig, t, pos)
  if type(t) ~= "table" or getmetatable(t) ~= nil or rawget(t, 1) ~= nil then return false end
  local p = sig.entries[pos]
  if p ~= nil and p.list and next(t) == nil then return false end
  if p == nil or not p.map then return true end
  -- at a parameter that takes a table: options only when every key is ours
  for k in pairs(t) do
    if not sig.valid[k] then return false end
  end
  return next(t) ~= nil
end

-- (level: as Signature.__call's caller counts it)
local function bad(sig, level, fmt, ...)
  error(sig.name .. ": " .. string.format(fmt, ...), level + 2)
end

function Signature.__call(sig, level, ...)
  local n = select("#", ...)
  while n > 0 and select(n, ...) == nil do n = n - 1 end -- f(a, nil): as f(a)
  local opts
  if n > 0 then
    local last = select(n, ...)
    if is_options(sig, last, n) then opts, n = last, n - 1 end
  end
  local o, entries = {}, sig.entries
  local np = #entries
  for i = 1, n do
    local v = select(i, ...)
    local e = entries[i]
    if e == nil then
      bad(sig, level, "takes at most %d positional argument%s (%s), got %d", np,
        np == 1 and "" or "s", table.concat(sig.params, ", "), n)
    end
    if e.rest then
      local r = { n = n - i + 1 }
      for j = i, n do r[j - i + 1] = (select(j, ...)) end
      o[e[1]] = r
      break
    end
    if v ~= nil then o[e[1]] = v end
  end
  if opts ~= nil then
    for k, v in pairs(opts) do
      if not sig.valid[k] then
        bad(sig, level, "unknown option '%s' (valid: %s)", tostring(k), valid_list(sig))
      end
      if o[k] ~= nil then
        bad(sig, level, "%s given twice (as argument %d and as an option)", tostring(k),
          sig.pos[k])
      end
      o[k] = v
    end
  end
  for i = 1, np do
    local e = entries[i]
    local v = o[e[1]]
    if e.unsupported and v ~= nil and not same_value(v, e.default) then
      bad(sig, level, "%s is not supported (%s)", e[1], e.unsupported)
    end
  end
  -- the values every layer takes the same way (check_opts's): dtype, *_initializer, sizes
  for k, v in pairs(o) do check_common(sig.name, k, v, level + 1) end
  return o
end

function M.signature(name, params, named)
  local sig = setmetatable({ name = name, params = {}, entries = {}, valid = {}, pos = {} },
    Signature)
  for i, p in ipairs(params) do
    local e = type(p) == "table" and p or { p }
    if e.rest and i ~= #params then
      error("signature " .. name .. ": only the last parameter can collect the rest", 2)
    end
    sig.entries[i], sig.params[i] = e, e[1]
    sig.valid[e[1]], sig.pos[e[1]] = true, i
  end
  for k, v in pairs(named or {}) do
    sig.valid[type(k) == "number" and v or k] = true
  end
  return sig
end

-- Every constructor and function that follows an MXNet signature, for the spec that checks
-- them against MXNet's (spec/calling_convention_spec.lua): target -> sig.
M.signatures = setmetatable({}, { __mode = "k" })
-- declare(target, sig): records target's signature; returns sig.
function M.declare(target, sig)
  M.signatures[target] = sig
  return sig
end

return M
