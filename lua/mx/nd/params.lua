-- mx.nd.params — op params from Lua values to the op's C struct: dtype names and
-- codes, the 1-based -> 0-based axis and slice-bound conversions, the per-op
-- param machinery (`prepare`, once per op at load) and `fill_params` (per call).
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local context = require("mx.context")
local H = require("mx.nd.handles")

local ffi, C = lib.ffi, lib.C
local ffi_string = ffi.string
local type, tostring, pairs, setmetatable, getmetatable =
  type, tostring, pairs, setmetatable, getmetatable
local is_tensor = H.is_tensor

local nd = {} -- this module's table; mx.nd re-exports its names

local DTYPE_NAME = {}
for _, code in ipairs { 0, 1, 2, 3, 4, 5, 6, 7, 8, 12 } do
  DTYPE_NAME[code] = ffi_string(C.mx_dtype_name(code))
end
nd.dtype_name = DTYPE_NAME

-- dtype given as a name ("float32", "f32", "int64"...) or a code; nil if invalid
local function dtype_code(v)
  if type(v) == "number" then return DTYPE_NAME[v] and v or nil end
  if type(v) == "string" then
    local c = C.mx_dtype_from_name(v)
    return c >= 0 and c or nil
  end
  return nil
end
nd.dtype_code = dtype_code
-- the classes' `dtype` option (mx.core.class.check_opts) is a dtype name
require("mx.core.class").register_option_check(function(k) return k == "dtype" end,
  function(_, v)
    if type(v) ~= "string" or not dtype_code(v) then
      return "dtype must be a dtype name ('float32', 'float16', ...), got " .. tostring(v)
    end
  end)

-- An integer an int64_t param can hold: |v| < 2^63 (1e30 would convert to INT64_MIN,
-- which index params read as "not given"; -2^63 is that marker itself).
local function is_int(v) return type(v) == "number" and v % 1 == 0 and v < 2 ^ 63 and v > -2 ^ 63 end

-- 1-based Lua axis -> 0-based C axis (negatives count from the end, unchanged)
local function axis0(v)
  if not is_int(v) or v == 0 then return nil end
  return v > 0 and v - 1 or v
end
nd._axis0 = axis0

-- mx_tuple's capacity (mx.h): int lists (pad_width: two per dim); shapes and axes hold
-- one entry per dim, at most 8
local TUPLE_CAP, DIM_CAP = 16, 8
-- the param types held in a tuple struct (n = -1: not given), not a has_<name> flag
local TUPLE_T = { axes = true, shape = true, ints = true, floats = true }
local function set_tuple(t, v, conv, cap)
  if type(v) == "number" then v = { v } end
  if type(v) ~= "table" then return false end
  local n = #v
  if n > (cap or DIM_CAP) then return false end
  t.n = n
  for i = 1, n do
    local x = v[i]
    if conv then x = conv(x) elseif not is_int(x) then x = nil end
    if x == nil then return false end
    t.v[i - 1] = x
  end
  return true
end

-- a list of at most 16 numbers into an mx_ftuple (anchor sizes, ratios, variances)
local function set_ftuple(t, v)
  if type(v) == "number" then v = { v } end
  if type(v) ~= "table" then return false end
  local n = #v
  if n > TUPLE_CAP or table.maxn(v) ~= n then return false end
  t.n = n
  for i = 1, n do
    local x = v[i]
    if type(x) ~= "number" then return false end
    t.v[i - 1] = x
  end
  return true
end

local CONV = {
  int = function(P, k, v) if not is_int(v) then return false end P[k] = v return true end,
  float = function(P, k, v) if type(v) ~= "number" then return false end P[k] = v return true end,
  bool = function(P, k, v) if type(v) ~= "boolean" then return false end P[k] = v return true end,
  dtype = function(P, k, v)
    local c = dtype_code(v)
    if not c then return false end
    P[k] = c
    return true
  end,
  axis = function(P, k, v)
    local a = axis0(v)
    if not a then return false end
    P[k] = a
    return true
  end,
  axes = function(P, k, v) return set_tuple(P[k], v, axis0) end,
  shape = function(P, k, v) return set_tuple(P[k], v) end,
  ints = function(P, k, v) return set_tuple(P[k], v, nil, TUPLE_CAP) end,
  floats = function(P, k, v) return set_ftuple(P[k], v) end,
}
-- Slice bounds (op-table params with `index = "begin"|"end"|"step"`): 1-based
-- inclusive in Lua, negatives from the end; C takes Python's 0-based [begin, end)
-- with INDEX_NONE for a bound left out. No shape is needed: begin b>0 -> b-1 (a
-- negative begin means the same in both); an inclusive end e is the exclusive
-- 0-based end e (step > 0) or e-2 (step < 0), and the ends that would need the
-- axis length (-1 going up, 1 going down) become "none". false/nil: none.
local INDEX_NONE = -2 ^ 63
nd._INDEX_NONE = INDEX_NONE
local function begin0(b)
  if b == nil or b == false then return INDEX_NONE end
  if not is_int(b) or b == 0 then return nil end
  return b > 0 and b - 1 or b
end
local function end0(e, s)
  if e == nil or e == false then return INDEX_NONE end
  if not is_int(e) or e == 0 then return nil end
  if s > 0 then
    if e > 0 then return e end
    return e == -1 and INDEX_NONE or e + 1
  end
  if e > 1 then return e - 2 end
  return e == 1 and INDEX_NONE or e - 1
end
local function step_at(opts, i)
  local s = opts and opts.step
  if type(s) == "table" then s = s[i] end
  return is_int(s) and s ~= 0 and s or 1
end
-- Converts one index param v (a number or a list) into P[k]; false if malformed.
local function index_conv(P, k, v, p, opts)
  if p.type == "int" then
    local c = p.index == "begin" and begin0(v) or end0(v, 1)
    if c == nil or (c == INDEX_NONE and p.index == "begin") then return false end
    if p.optional then P["has_" .. k] = c ~= INDEX_NONE end
    if c ~= INDEX_NONE then P[k] = c end
    return true
  end
  if type(v) == "number" or type(v) == "boolean" then v = { v } end
  if type(v) ~= "table" then return false end
  local n = table.maxn(v)
  if n > TUPLE_CAP then return false end
  local t = P[k]
  t.n = n
  for i = 1, n do
    local c
    if p.index == "begin" then c = begin0(v[i])
    elseif p.index == "end" then c = end0(v[i], step_at(opts, i))
    elseif v[i] == nil or v[i] == false then c = INDEX_NONE
    elseif is_int(v[i]) and v[i] ~= 0 then c = v[i] end
    if not c then return false end
    t.v[i - 1] = c
  end
  return true
end
nd._index_conv = index_conv

-- A value for an error message: lists shown as {a, b}.
local function show(v)
  if type(v) ~= "table" then return tostring(v) end
  local t = {}
  local n = table.maxn(v)
  for i = 1, math.min(n, 9) do t[i] = tostring(v[i]) end
  if n > 9 then t[10] = "... (" .. n .. " entries)" end
  return "{" .. table.concat(t, ", ") .. "}"
end

local EXPECT = {
  int = "an integer (|v| < 2^63)", float = "a number", bool = "a boolean", dtype = "a dtype name",
  axis = "a 1-based axis (non-zero integer)",
  shape = "a list of at most 8 dims", ints = "a list of at most 16 integers (|v| < 2^63)",
  floats = "a number or a list of at most 16 numbers",
  axes = "an axis or a list of at most 8 axes", enum = "one of ",
}
-- slice bounds (index params): 1-based, so 0 is no index
local INDEX_EXPECT = "a 1-based index (a non-zero integer, negative from the end)"
local INDEX_EXPECT_LIST = "a 1-based index or a list of at most 16 (non-zero integers)"

-- A copy of an option value for the tape: tables (lists, nested lists) copied all the
-- way down, keeping their metatable; everything else as is.
local function copy_value(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = copy_value(x) end
  return setmetatable(t, getmetatable(v))
end

-- op.freeze(opts): a frozen copy of the op's options, what autograd's tape and the
-- tracer keep (the caller may reuse or change its table afterwards). Generated per op
-- as a straight line over its param names (plus ctx for creation ops): no pairs, no
-- loop over the options; out= and unknown keys are left out.
local function make_freeze(op)
  local src = { "local type, copy = ...", "return function(o)", "  local t, v = {}" }
  for _, p in ipairs(op.params) do
    src[#src + 1] = string.format("  v = o[%q] if type(v) == 'table' then v = copy(v) end t[%q] = v",
      p.name, p.name)
  end
  if op.ctx then src[#src + 1] = "  t.ctx = o.ctx" end
  src[#src + 1] = "  return t\nend"
  local chunk = assert(loadstring(table.concat(src, "\n"), "=mx.nd.freeze(" .. op.name .. ")"))
  return chunk(type, copy_value)
end

-- Prepare per-op param machinery: a reusable struct, a struct of defaults, and the
-- name -> param map. Called once per op at load.
local function prepare(op)
  op.pindex = {}
  -- train_flag = true (param `training`) or the name of the bool param to fill
  op.train_param = op.train_flag == true and "training" or op.train_flag or nil
  for _, p in ipairs(op.params) do op.pindex[p.name] = p end
  op.freeze = make_freeze(op)
  if not op.ctype then return end
  local D = ffi.new(op.ctype)
  if op.ctx then D.dev_type, D.dev_id = 1, 0 end
  for _, p in ipairs(op.params) do
    if p.optional then
      if TUPLE_T[p.type] then D[p.name].n = -1 end
    elseif p.type == "enum" then
      for i, name in ipairs(p.values) do if name == p.default then D[p.name] = i - 1 end end
    elseif p.index then
      assert(index_conv(D, p.name, p.default, p), "bad default for " .. op.name .. "." .. p.name)
    else
      assert(CONV[p.type](D, p.name, p.default), "bad default for " .. op.name .. "." .. p.name)
    end
  end
  op.defaults = D
  op.P = ffi.new(op.ctype)
  op.size = ffi.sizeof(op.ctype)
end

-- Fill op.P from defaults then opts. Returns P (nil for ops without params), out
-- (the out= tensor or nil) and an error message (nil when fine). Unknown option
-- names are an error, and so are array-part (numeric) keys.
local function fill_params(op, opts)
  local P = op.P
  if P then
    ffi.copy(P, op.defaults, op.size)
    local tp = op.train_param -- train mode flag (op table `train_flag`), unless opts say
    if tp then P[tp] = S.training end
  end
  if opts == nil then return P, nil end
  if type(opts) ~= "table" or is_tensor(opts) then
    return nil, nil, op.name .. ": options must be a table, got "
      .. (is_tensor(opts) and "a tensor (too many tensor inputs?)" or type(opts))
  end
  local out
  for k, v in pairs(opts) do
    if k == "out" then
      if not is_tensor(v) and not (type(v) == "table" and (op.outputs[2] or op.nout_param)) then
        return nil, nil, op.name .. ": out= must be a tensor, got " .. type(v)
      end
      out = v
    elseif k == "ctx" and op.ctx then
      local ok, dt, di = pcall(context.parse, v)
      if not ok then return nil, nil, op.name .. ": " .. tostring(dt) end
      P.dev_type, P.dev_id = dt, di
    elseif type(k) == "number" then
      -- a list where options go (x:transpose({2, 1})): its values would be dropped
      -- silently (creation ops take their shape list before this)
      local names = {}
      for _, q in ipairs(op.params) do names[#names + 1] = q.name end
      return nil, nil, string.format("%s: the options table has positional entries (%s at [%d]): "
        .. "options go by name%s", op.name, show(v), k,
        #names > 0 and " (" .. table.concat(names, ", ") .. ")" or "")
    else
      local p = op.pindex[k]
      if not p then
        local names = {}
        for _, q in ipairs(op.params) do names[#names + 1] = q.name end
        if op.ctx then names[#names + 1] = "ctx" end
        names[#names + 1] = "out"
        return nil, nil, string.format("%s: unknown option '%s' (valid: %s)", op.name, tostring(k),
          table.concat(names, ", "))
      end
      local ok
      if p.type == "enum" then
        for i, name in ipairs(p.values) do
          if v == name then P[k] = i - 1 ok = true end
        end
      elseif p.index then
        ok = index_conv(P, k, v, p, opts)
      else
        ok = CONV[p.type](P, k, v)
      end
      if not ok then
        local want = p.index and (p.type == "int" and INDEX_EXPECT or INDEX_EXPECT_LIST)
          or EXPECT[p.type]
        return nil, nil, string.format("%s: option %s must be %s%s, got %s", op.name, k,
          want, p.values and table.concat(p.values, "/") or "", show(v))
      end
      -- optional scalars have a has_<name> flag; tuples use n = -1 instead (and the
      -- FFI raises on a missing field, so test the type first)
      if p.optional and not p.index and not TUPLE_T[p.type] then
        P["has_" .. k] = true
      end
    end
  end
  return P, out
end
nd._fill_params = fill_params
nd._prepare = prepare
nd._CONV = CONV
nd._is_int = is_int

return nd
