-- spec/helpers/sweep_cases.lua — the reliability sweep's case list and the values it is
-- built from (the running and judging side: spec/helpers/sweep.lua, which returns this
-- module extended). Deterministic: every child rebuilds the same list.
local ffi = require("ffi")

local M = {}

local CHUNK = "sweep_case"
M.chunk = CHUNK

---------------------------------------------------------------- the call chunks
-- One chunk per arity, so that select("#", ...) in the callee sees exactly the arguments
-- the case gives (a trailing nil is an argument). The call is on line 2 of its chunk.
local callers = {}
local function caller(n)
  if not callers[n] then
    local a = {}
    for i = 1, n do a[i] = "a" .. i end
    local list = table.concat(a, ", ")
    local src = "local f" .. (n > 0 and ", " .. list or "") .. " = ...\n"
      .. "local r1, r2, r3, r4 = f(" .. list .. ")\n"
      .. "return r1, r2, r3, r4\n"
    callers[n] = assert(loadstring(src, "=" .. CHUNK))
  end
  return callers[n]
end

-- Call f with args[1..n] from the case chunk; returns ok, err or results (table).
local function call_from_chunk(f, args, n)
  local ok, r1, r2, r3, r4 = pcall(caller(n), f, unpack(args, 1, n))
  if not ok then return false, r1 end
  return true, { r1, r2, r3, r4 }
end

---------------------------------------------------------------- values
local DTYPES = { 0, 1, 2, 3, 4, 5, 6, 7, 12 }
M.dtypes = DTYPES
local FLOAT = { [0] = true, [1] = true, [2] = true, [12] = true }

local u16p, u32p, u64p = ffi.typeof("uint16_t*"), ffi.typeof("uint32_t*"), ffi.typeof("uint64_t*")
local f32p, f64p = ffi.typeof("float*"), ffi.typeof("double*")
local i8p, u8p, i32p, i64p = ffi.typeof("int8_t*"), ffi.typeof("uint8_t*"), ffi.typeof("int32_t*"),
  ffi.typeof("int64_t*")

local function half_to_number(h)
  local s = bit.band(bit.rshift(h, 15), 1) == 1 and -1 or 1
  local e = bit.band(bit.rshift(h, 10), 0x1f)
  local m = bit.band(h, 0x3ff)
  if e == 0x1f then return m == 0 and s * math.huge or "nan" end
  if e == 0 then return s * m * 2 ^ -24 end
  return s * (1 + m / 1024) * 2 ^ (e - 15)
end

local function bf16_to_number(h)
  local s = bit.band(bit.rshift(h, 15), 1) == 1 and -1 or 1
  local e = bit.band(bit.rshift(h, 7), 0xff)
  local m = bit.band(h, 0x7f)
  if e == 0xff then return m == 0 and s * math.huge or "nan" end
  if e == 0 then return s * m * 2 ^ -133 end
  return s * (1 + m / 128) * 2 ^ (e - 127)
end

-- The values of a CPU tensor as a flat list, decoded from the raw bits so that a NaN of
-- any payload becomes the string "nan" (never a Lua number: LuaJIT does not canonicalise
-- NaNs read through the FFI) and int64 stays exact (a decimal string).
local function decode(t)
  t:wait_to_read()
  local n, dt = t:size(), t:dtype()
  if n > 2 ^ 24 then return { "(" .. n .. " values)" } end
  local p = ffi.cast("void*", t:data_ptr())
  local v = {}
  if dt == "float32" then
    local b, f = ffi.cast(u32p, p), ffi.cast(f32p, p)
    for i = 0, n - 1 do
      local x = b[i]
      if bit.band(x, 0x7f800000) == 0x7f800000 and bit.band(x, 0x7fffff) ~= 0 then v[i + 1] = "nan"
      else v[i + 1] = f[i] end
    end
  elseif dt == "float64" then
    local b, f = ffi.cast(u64p, p), ffi.cast(f64p, p)
    for i = 0, n - 1 do
      local x = b[i]
      if bit.band(x, 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL
        and bit.band(x, 0xfffffffffffffULL) ~= 0 then v[i + 1] = "nan"
      else v[i + 1] = f[i] end
    end
  elseif dt == "float16" then
    local b = ffi.cast(u16p, p)
    for i = 0, n - 1 do v[i + 1] = half_to_number(b[i]) end
  elseif dt == "bfloat16" then
    -- decoded from the bits arithmetically: storing the bits through a uint32_t* and
    -- reading them back through a float* of the same cell is type punning, which the
    -- JIT's alias analysis does not see (it forwarded a stale float once the loop was
    -- compiled: the "flaky bfloat16" silent cases, about 1 run in 3)
    local b = ffi.cast(u16p, p)
    for i = 0, n - 1 do v[i + 1] = bf16_to_number(b[i]) end
  elseif dt == "int64" then
    local q = ffi.cast(i64p, p)
    for i = 0, n - 1 do v[i + 1] = tostring(q[i]):gsub("LL$", "") end
  else
    local q = ffi.cast(dt == "int8" and i8p or dt == "int32" and i32p or u8p, p)
    for i = 0, n - 1 do v[i + 1] = tonumber(q[i]) end
  end
  return v
end
M.decode = decode

local TOL = { float64 = 1e-9, float32 = 2e-4, float16 = 2e-2, bfloat16 = 2e-2 }

-- The largest finite magnitude of a decoded list (the scale of a normwise comparison).
local function max_abs(l)
  local m = 0
  for i = 1, #l do
    local v = l[i]
    if type(v) == "number" and v == v and math.abs(v) < math.huge and math.abs(v) > m then m = math.abs(v) end
  end
  return m
end

-- nil when a and b agree (lists from decode), else a description of the first difference.
-- Elementwise relative by default; with `scale` (normwise: a solve or a product, whose
-- rounding error in an element that cancels to ~0 is proportional to the size of the
-- terms that cancelled, not to the element) an element's error is measured against
-- max(|element|, scale).
local function compare(got, want, dtype, scale)
  if #got ~= #want then return string.format("%d values, expected %d", #got, #want) end
  local tol = TOL[dtype] or 0
  scale = scale or 1
  for i = 1, #want do
    local g, w = got[i], want[i]
    local same
    if type(g) == "number" and type(w) == "number" then
      if g == w then same = true
      elseif g ~= g or w ~= w then same = false
      else same = math.abs(g - w) <= tol * math.max(1, scale, math.abs(g), math.abs(w)) end
    else
      same = g == w
    end
    if not same then
      return string.format("element %d: %s, reference %s", i, tostring(g), tostring(w))
    end
  end
end

---------------------------------------------------------------- the environment of a child
local mx, nd, NDArray, lib
local function load_mx()
  if mx then return end
  mx = require("mx")
  nd, NDArray, lib = mx.nd, mx.nd.NDArray, require("mx.core.lib")
end

local function dtype_name(code) return nd.dtype_name[code] end

-- Deterministic values: small positive numbers, distinct (no randomness in the sweep).
local function value(i) return ((i * 37) % 17 + 1) / 8 end

-- A tensor of `shape` and dtype code with values vals(i) (i = 0-based index), through
-- float64 and the reference cast (so every dtype gets the same values).
local function make_tensor(shape, code, vals)
  local t = nd.empty(shape, { dtype = "float64" })
  local n = t:size()
  local p = t:data_ptr()
  for i = 0, n - 1 do p[i] = (vals or value)(i) end
  if code == 1 then return t end
  return nd._ref.cast(t, { dtype = dtype_name(code) })
end

-- Special bit patterns by dtype: every pattern is a list of raw element values.
local SPECIAL = {
  nan = { [0] = { 0x7fc00000 }, [1] = { 0x7ff8000000000000ULL }, [2] = { 0x7e00 }, [12] = { 0x7fc0 } },
  inf = { [0] = { 0x7f800000, 0xff800000 }, [1] = { 0x7ff0000000000000ULL, 0xfff0000000000000ULL },
    [2] = { 0x7c00, 0xfc00 }, [12] = { 0x7f80, 0xff80 } },
  denormal = { [0] = { 0x00000001, 0x80000001 }, [1] = { 1ULL, 0x8000000000000001ULL },
    [2] = { 0x0001, 0x8001 }, [12] = { 0x0001, 0x8001 } },
  ncnan = { [0] = { 0xFFEC0001 }, [1] = { 0x7FF0000000000001ULL }, [2] = { 0xfe01 }, [12] = { 0xffec } },
  mix = { [0] = { 0x3f800000, 0x7fc00000, 0xff800000, 0x80000000, 0x00000001, 0xFFEC0001 },
    [1] = { 0x3ff0000000000000ULL, 0x7ff8000000000000ULL, 0xfff0000000000000ULL,
      0x8000000000000000ULL, 1ULL, 0x7FF0000000000001ULL },
    [2] = { 0x3c00, 0x7e00, 0xfc00, 0x8000, 0x0001, 0xfe01 },
    [12] = { 0x3f80, 0x7fc0, 0xff80, 0x8000, 0x0001, 0xffec } },
}
local SPECIAL_ORDER = { "nan", "inf", "denormal", "ncnan", "mix" }
M.special = SPECIAL_ORDER
local BITS_T = { [0] = u32p, [1] = u64p, [2] = u16p, [12] = u16p }

local function special_tensor(shape, code, pattern)
  local t = nd.empty(shape, { dtype = dtype_name(code) })
  local pat = SPECIAL[pattern][code]
  local p = ffi.cast(BITS_T[code], ffi.cast("void*", t:data_ptr()))
  for i = 0, t:size() - 1 do p[i] = pat[i % #pat + 1] end
  return t
end

-- int64 values that double cannot hold: 2^53 + 1, + 3, + 5, ...
local BIG = 9007199254740993LL
local function big_tensor(shape)
  local t = nd.empty(shape, { dtype = "int64" })
  local p = t:data_ptr()
  for i = 0, t:size() - 1 do p[i] = BIG + 2 * (i % 3) end
  return t
end

local function clone(x)
  if NDArray and ffi.istype("struct mx_nd", x) then return nd._ref.copy(x) end
  if type(x) == "table" then
    local t = {}
    for k, v in pairs(x) do t[k] = clone(v) end
    return t
  end
  return x
end

local function is_nd(x) return type(x) == "cdata" and ffi.istype("struct mx_nd", x) end

---------------------------------------------------------------- baselines
-- A working call of each op (inputs and options), from spec/helpers/gradcases.lua where
-- the op has a gradient case, else found by trying common shapes; nil: none found (the op
-- still gets every case that needs no working call).
local gradcases
local function input_from_spec(s, code)
  if type(s) == "function" then
    local t = s(mx)
    return code and nd._ref.cast(t, { dtype = dtype_name(code) }) or t
  end
  local shape = {}
  for i = 1, #s do shape[i] = s[i] end
  local dt = s.dtype and nd.dtype_code(s.dtype) or code or 1
  if s.int then
    local lo, hi = s.domain[1], s.domain[2]
    return make_tensor(shape, dt, function(i) return lo + (i * 7) % (hi - lo + 1) end)
  end
  local lo, hi = 0.25, 2.25
  if s.domain then lo, hi = s.domain[1], s.domain[2] end
  return make_tensor(shape, dt, function(i) return lo + (hi - lo) * ((i * 37) % 17 + 1) / 18 end)
end

local CANDIDATES = { { 2, 3 }, { 3, 3 }, { 4 }, { 2, 3, 4 }, { 1, 3, 4, 4 }, { 4, 4, 3 }, {} }

local baselines = {}
-- { inputs = {spec...}, opts = {...}, code = dtype code } for op; the inputs are rebuilt
-- (fresh tensors) by build_inputs every time a case needs them.
local function baseline(op)
  if baselines[op.name] ~= nil then return baselines[op.name] or nil end
  load_mx()
  gradcases = gradcases or require("helpers.gradcases")
  local tries = {}
  local gc = gradcases[op.name]
  if gc then
    if gc.inputs then gc = { gc } end
    for _, c in ipairs(gc) do
      if not c.call then tries[#tries + 1] = { inputs = c.inputs, opts = c.opts or {} } end
    end
  end
  local code = op.dtype_list[1]
  for _, d in ipairs(op.dtype_list) do if d == 0 then code = 0 end end
  local nin = op.variadic and 2 or #op.inputs
  for _, shape in ipairs(CANDIDATES) do
    for _, int in ipairs({ false, true }) do
      local ins = {}
      for i = 1, nin do
        local s = { unpack(shape) }
        if int then s.int, s.domain = true, { 1, 2 } end
        ins[i] = s
      end
      tries[#tries + 1] = { inputs = ins, opts = {} }
    end
  end
  for _, t in ipairs(tries) do
    t.code = (t.inputs[1] and type(t.inputs[1]) == "table" and t.inputs[1].dtype) and nil or code
    local ok = pcall(function()
      local ins = {}
      for i, s in ipairs(t.inputs) do ins[i] = input_from_spec(s, t.code) end
      local args = op.variadic and { ins, clone(t.opts) } or ins
      if not op.variadic then args[#ins + 1] = clone(t.opts) end
      local r = nd._ref[op.name](unpack(args, 1, op.variadic and 2 or #ins + 1))
      assert(is_nd(r))
      r:wait_to_read()
    end)
    if ok then
      baselines[op.name] = t
      return t
    end
  end
  baselines[op.name] = false
  return nil
end

-- For out=<input i>: a working call whose output has input i's shape and dtype (so the
-- aliasing is legal and the result must be right), else the baseline.
local alias_bases = {}
local function alias_baseline(op, i, b)
  local key = op.name .. "/" .. i
  if alias_bases[key] ~= nil then return alias_bases[key] end
  local nin = op.variadic and 2 or #op.inputs
  local tries = { b }
  local shapes = { { 3, 3 }, { 3, 3, 3 }, { 3 }, { 2, 3 }, { 1, 3 }, { 3, 1 }, { 2, 3, 4 } }
  local function spec_like(k, shape)
    local s = { unpack(shape) }
    local bs = b.inputs[k]
    if type(bs) == "table" and bs.int then s.int, s.domain = true, { 1, 2 } end
    return s
  end
  for _, opts in ipairs({ b.opts, {} }) do
    for _, sh in ipairs(shapes) do
      for _, sh2 in ipairs(nin == 2 and shapes or { sh }) do
        local ins = {}
        for k = 1, nin do ins[k] = spec_like(k, (k == 2 and nin == 2) and sh2 or sh) end
        tries[#tries + 1] = { inputs = ins, opts = opts, code = b.code }
      end
    end
  end
  for _, t in ipairs(tries) do
    local ok, fits = pcall(function()
      local ins = {}
      for k, s in ipairs(t.inputs) do ins[k] = input_from_spec(s, t.code) end
      local args = op.variadic and { ins } or ins
      args[#args + 1] = clone(t.opts)
      local r = nd._ref[op.name](unpack(args))
      return table.concat(r:shape(), "x") == table.concat(ins[i]:shape(), "x") and r:dtype() == ins[i]:dtype()
    end)
    if ok and fits then
      alias_bases[key] = t
      return t
    end
  end
  alias_bases[key] = b
  return b
end

local function build_inputs(b, code_override, which)
  local ins = {}
  for i, s in ipairs(b.inputs) do
    local c = b.code
    if code_override and (which == nil or which == i) then c = code_override end
    ins[i] = input_from_spec(s, c)
  end
  return ins
end

---------------------------------------------------------------- bad values by kind
local function cdata_struct() return ffi.new("struct { int a; }") end
-- Each entry: { label, value or function returning it }.
local NON_TENSOR = {
  { "nil", nil }, { "number", 1.5 }, { "string", "x" }, { "table", {} }, { "table{1,2}", { 1, 2 } },
  { "boolean", true }, { "cdata_struct", cdata_struct }, { "cdata_int64", function() return 3LL end },
  { "cdata_ptr", function() return ffi.new("double[64]") end }, { "function", print },
}
M.non_tensor = NON_TENSOR

local HUGE = { { "2^63", 2 ^ 63 }, { "2^64", 2 ^ 64 }, { "1e30", 1e30 }, { "-2^63*2", -2 ^ 64 } }
local NUM_BAD = {
  { "nan", 0 / 0 }, { "inf", math.huge }, { "-inf", -math.huge }, { "2.5", 2.5 }, { "-1", -1 },
  { "0", 0 }, { "2^40", 2 ^ 40 }, { "2^62", 2 ^ 62 },
}
for _, h in ipairs(HUGE) do NUM_BAD[#NUM_BAD + 1] = h end
local TYPE_BAD = {
  { "string", "x" }, { "numstring", "2" }, { "table", {} }, { "boolean", true },
  { "cdata_struct", cdata_struct }, { "cdata_int64", function() return 2LL end },
}

local NINE = { 1, 1, 1, 1, 1, 1, 1, 1, 1 }
local EIGHT = { 1, 1, 1, 1, 1, 1, 1, 2 }
local SHAPES_BAD = {
  { "{}", {} }, { "{0}", { 0 } }, { "{2,0,3}", { 2, 0, 3 } }, { "8dim", EIGHT }, { "9dim", NINE },
  { "{2^40}", { 2 ^ 40 } }, { "{2^62}", { 2 ^ 62 } }, { "{2^31,2^31}", { 2 ^ 31, 2 ^ 31 } },
  { "{2^32,2^32}", { 2 ^ 32, 2 ^ 32 } }, { "{-1}", { -1 } }, { "{-5}", { -5 } },
  { "{-2^62}", { -2 ^ 62 } }, { "{2.5}", { 2.5 } }, { "{nan}", { 0 / 0 } }, { "{inf}", { math.huge } },
  { "{2^63}", { 2 ^ 63 } }, { "{1e30}", { 1e30 } }, { "{'2'}", { "2" } }, { "{true}", { true } },
  { "{{}}", { {} } }, { "{false,1}", { false, 1 } }, { "{2LL}", function() return { 2LL } end },
  { "{1..9 big}", { 2, 2, 2, 2, 2, 2, 2, 2, 2 } },
}

local function param_bad_values(p)
  local t = p.type
  local r = {}
  local function add(list) for _, v in ipairs(list) do r[#r + 1] = v end end
  if t == "bool" then
    add({ { "1", 1 }, { "0", 0 } })
    add(TYPE_BAD)
  elseif t == "int" or t == "float" then
    add(NUM_BAD)
    if t == "float" then add({ { "denormal", 5e-324 }, { "-0", -0.0 }, { "1e308", 1e308 } }) end
    add(TYPE_BAD)
  elseif t == "axis" then
    add({ { "0", 0 }, { "100", 100 }, { "-100", -100 }, { "2.5", 2.5 }, { "nan", 0 / 0 },
      { "inf", math.huge }, { "{1}", { 1 } } })
    add(HUGE)
    add(TYPE_BAD)
  elseif t == "axes" then
    add({ { "{0}", { 0 } }, { "{100}", { 100 } }, { "{-100}", { -100 } }, { "{2.5}", { 2.5 } },
      { "{1,1}", { 1, 1 } }, { "{2^63}", { 2 ^ 63 } }, { "{1e30}", { 1e30 } }, { "{nan}", { 0 / 0 } },
      { "9axes", { 1, 2, 3, 4, 5, 6, 7, 8, 9 } }, { "{'a'}", { "a" } }, { "{{}}", { {} } },
      { "number1", 1 }, { "{}", {} }, { "number2^63", 2 ^ 63 } })
    add(TYPE_BAD)
  elseif t == "shape" or t == "ints" then
    add(SHAPES_BAD)
    add({ { "number3", 3 }, { "number2^63", 2 ^ 63 } })
    add(TYPE_BAD)
  elseif t == "enum" then
    add({ { "bogus", "bogus" }, { "empty", "" }, { "1", 1 }, { "0", 0 }, { "99", 99 }, { "-1", -1 } })
    add(TYPE_BAD)
  elseif t == "dtype" then
    for _, c in ipairs(DTYPES) do r[#r + 1] = { "code" .. c, c } end
    add({ { "code8", 8 }, { "code13", 13 }, { "code-1", -1 }, { "code99", 99 }, { "2.5", 2.5 },
      { "2^63", 2 ^ 63 }, { "float32", "float32" }, { "int64", "int64" }, { "bogus", "bogus" } })
    add(TYPE_BAD)
  end
  return r
end

-- Integer-typed params: an accepted non-integer was truncated (silently wrong).
local INTEGER_T = { int = true, axis = true, axes = true, shape = true, ints = true }

local function resolve(v) if type(v) == "function" and v ~= print then return v() end return v end

---------------------------------------------------------------- exact identities (int64)
-- For integer ops the reference kernel is no oracle when both round through double; these
-- identities are: with int64 inputs 2^53+1, 2^53+3, 2^53+5, ...
local IDENTITIES = {
  { "add_scalar", { scalar = 0 } }, { "sub_scalar", { scalar = 0 } }, { "mul_scalar", { scalar = 1 } },
  { "div_scalar", { scalar = 1 } }, { "maximum_scalar", { scalar = 0 } },
  { "minimum_scalar", { scalar = 2 ^ 62 } }, { "clip", { a_min = 0, a_max = 2 ^ 62 } },
  { "copy", {} }, { "abs", {} }, { "transpose", {} }, { "reshape", { shape = { -1 } } },
  { "tile", { reps = { 1 } } }, { "max", {}, "max" }, { "min", {}, "min" },
  { "sum", {}, "first", { 1 } }, { "prod", {}, "first", { 1 } }, { "cast", { dtype = "int64" } },
  { "add", {}, "id0" }, { "mul", {}, "id1" }, { "maximum", {}, "self2" }, { "minimum", {}, "self2" },
}
M.identities = IDENTITIES

---------------------------------------------------------------- case generation
local cases, by_id

local function add_case(c)
  assert(not by_id[c.id], "duplicate sweep case id " .. c.id)
  by_id[c.id] = c
  cases[#cases + 1] = c
end

local function op_cases(op)
  local name = op.name
  local nin = op.variadic and 2 or #op.inputs
  local function C(id, t)
    t.id, t.name, t.op = name .. "|" .. id, name, op
    add_case(t)
  end
  if op.ctx then
    C("baseline", { kind = "creation" })
    if op.positional then
      for k, pn in ipairs(op.positional) do
        local p
        for _, p2 in ipairs(op.params) do if p2.name == pn then p = p2 end end
        for _, v in ipairs(param_bad_values(p)) do
          C("pos" .. k .. "=" .. v[1], { kind = "creation", pos = k, value = v[2], ptype = p.type })
        end
      end
    else
      for _, v in ipairs(SHAPES_BAD) do C("shape=" .. v[1], { kind = "creation", shape = v[2] }) end
      for _, v in ipairs(NON_TENSOR) do
        C("shape=" .. v[1], { kind = "creation", shape = v[2], raw = true })
      end
    end
  else
    C("baseline", { kind = "op" })
    for i = 1, nin do
      for _, v in ipairs(NON_TENSOR) do
        C("in" .. i .. "=" .. v[1], { kind = "op", input = i, nontensor = true, value = v[2] })
      end
      for _, d in ipairs(DTYPES) do C("in" .. i .. ":dtype" .. d, { kind = "op", input = i, dtype = d }) end
      for _, s in ipairs(SPECIAL_ORDER) do
        C("in" .. i .. ":" .. s, { kind = "op", input = i, special = s })
      end
      C("in" .. i .. ":0size", { kind = "op", input = i, zero = true })
      C("in" .. i .. ":int64big", { kind = "op", input = i, big = true })
      C("in" .. i .. ":neg", { kind = "op", input = i, fill = -3 })
      C("in" .. i .. ":1e9", { kind = "op", input = i, fill = 1e9 })
    end
    for _, d in ipairs(DTYPES) do C("all:dtype" .. d, { kind = "op", dtype = d }) end
    C("all:0size", { kind = "op", zero = true })
    C("all:8dim", { kind = "op", pad8 = true })
    C("all:int64big", { kind = "op", big = true })
    if op.variadic then
      C("list=empty", { kind = "op", list = {} })
      C("list=mixed", { kind = "op", list = "mixed" })
    end
  end
  for _, p in ipairs(op.params) do
    for _, v in ipairs(param_bad_values(p)) do
      C("opt:" .. p.name .. "=" .. v[1], { kind = op.ctx and "creation" or "op", param = p, value = v[2] })
    end
  end
  local kind = op.ctx and "creation" or "op"
  C("opt:unknown", { kind = kind, opts_raw = { bogus_option = 1 } })
  for _, v in ipairs(NON_TENSOR) do
    if v[1] ~= "nil" and v[1] ~= "table" and v[1] ~= "table{1,2}" then
      C("opts=" .. v[1], { kind = kind, opts_pos = v[2] })
    end
  end
  C("extra_arg", { kind = kind, extra = true })
  -- out=
  C("out:shape{7}", { kind = kind, out = "shape" })
  for _, d in ipairs(DTYPES) do C("out:dtype" .. d, { kind = kind, out = "dtype", dtype_out = d }) end
  for _, v in ipairs(NON_TENSOR) do
    if v[1] ~= "nil" then C("out=" .. v[1], { kind = kind, out = "value", value = v[2] }) end
  end
  if not op.ctx then
    for i = 1, nin do C("out=in" .. i, { kind = "op", out = "alias", input = i }) end
  end
  if #op.outputs > 1 and op.family ~= "optimizer" then C("out:single", { kind = kind, out = "single" }) end
end

-- Non-op functions: every function of mx.nd.NDArray and mx.nd (and mx.nd.random) that the
-- op table did not make, called with self/argument variants.
local SELF_KINDS = { "f32", "f64", "f16", "bf16", "u8", "i8", "i32", "i64", "bool", "scalar0d", "one",
  "zero_size", "eight_dim", "nan", "ncnan", "inf", "big64", "view" }
M.self_kinds = SELF_KINDS
local ARGS = {
  { "none", nil, 0 }, { "nil", nil, 1 }, { "1", 1 }, { "0", 0 }, { "-1", -1 }, { "2.5", 2.5 },
  { "2^63", 2 ^ 63 },
  { "nan", 0 / 0 }, { "string", "x" }, { "dtype", "float64" }, { "table", {} }, { "table{1,2}", { 1, 2 } },
  { "9dim", NINE }, { "9deep", { { { { { { { { { 1 } } } } } } } } } }, { "{2^40}", { 2 ^ 40 } },
  { "{-1}", { -1 } }, { "boolean", true },
  { "cdata_struct", cdata_struct }, { "cdata_int64", function() return 3LL end },
  { "tensor", "TENSOR" }, { "opts_shape9", { shape = NINE } }, { "opts_dtype_bad", { dtype = "bogus" } },
}
-- Two-argument variants (pointer-taking functions get real buffers and small shapes).
local ARGS2 = {
  { "ptr,{2,3}", "PTR", { 2, 3 } }, { "ptr,9dim", "PTR", NINE }, { "ptr,{0}", "PTR", { 0 } },
  { "ptr,{-1}", "PTR", { -1 } }, { "ptr,{2.5}", "PTR", { 2.5 } }, { "ptr,opts9", "PTR", { shape = NINE } },
  { "ptr,{}", "PTR", {} }, { "ptr,string", "PTR", "x" },
  { "tensor,tensor", "TENSOR", "TENSOR" }, { "tensor,string", "TENSOR", "x" },
  { "string,tensor", "x", "TENSOR" }, { "table,table", {}, {} }, { "1,1", 1, 1 },
}

-- Functions that touch files or processes: run with a path under the child's temp dir.
local SKIP_FN = { waitall = true, save = true, load = true }

local function fn_lists()
  load_mx()
  local made = {}
  for _, op in ipairs(lib.ops) do made[op.name] = true end
  local names = { methods = {}, funcs = {}, random = {} }
  for k, v in pairs(NDArray) do
    if type(v) == "function" and not made[k] and type(k) == "string" then
      names.methods[#names.methods + 1] = k
    end
  end
  for k, v in pairs(nd) do
    if type(v) == "function" and not made[k] and type(k) == "string" and k:sub(1, 1) ~= "_" then
      names.funcs[#names.funcs + 1] = k
    end
  end
  local ok, rnd = pcall(require, "mx.random")
  if ok and type(rnd) == "table" then
    for k, v in pairs(rnd) do
      if type(v) == "function" and k ~= "seed" then names.random[#names.random + 1] = k end
    end
  end
  for _, l in pairs(names) do table.sort(l) end
  return names
end

local function fn_cases()
  local names = fn_lists()
  for _, group in ipairs({ { "NDArray", names.methods, true }, { "nd", names.funcs, false },
    { "nd.random", names.random, false } }) do
    local prefix, list, method = group[1], group[2], group[3]
    for _, m in ipairs(list) do
      local base = { kind = "fn", group = prefix, fname = m, name = m }
      local function C(id, t)
        for k, v in pairs(base) do t[k] = v end
        t.id = prefix .. "." .. m .. "|" .. id
        add_case(t)
      end
      if method then
        for _, s in ipairs(SELF_KINDS) do
          for _, a in ipairs(ARGS) do C("self=" .. s .. ",arg=" .. a[1], { self = s, arg = a }) end
        end
        for _, v in ipairs(NON_TENSOR) do C("self=" .. v[1], { self_value = v[2], arg = ARGS[1] }) end
      elseif not SKIP_FN[m] then
        for _, a in ipairs(ARGS) do C("arg=" .. a[1], { arg = a }) end
        for _, a in ipairs(ARGS2) do C("args=" .. a[1], { arg2 = a }) end
        for _, s in ipairs(SELF_KINDS) do C("first=" .. s, { self = s, arg = ARGS[1], first = true }) end
      end
    end
  end
end

function M.cases()
  if cases then return cases end
  load_mx()
  cases, by_id = {}, {}
  for _, op in ipairs(lib.ops) do op_cases(op) end
  for _, idn in ipairs(IDENTITIES) do
    if lib.ops_by_name[idn[1]] then
      add_case({ id = idn[1] .. "|int64identity", kind = "identity", name = idn[1], ident = idn })
    end
  end
  fn_cases()
  return cases
end

-- for the running side (spec/helpers/sweep.lua)
M._ = {
  CHUNK = CHUNK, EIGHT = EIGHT, FLOAT = FLOAT, INTEGER_T = INTEGER_T,
  alias_baseline = alias_baseline, baseline = baseline, big_tensor = big_tensor,
  build_inputs = build_inputs, call_from_chunk = call_from_chunk, clone = clone, compare = compare,
  decode = decode, dtype_name = dtype_name, is_nd = is_nd, load_mx = load_mx,
  make_tensor = make_tensor, max_abs = max_abs, resolve = resolve, special_tensor = special_tensor,
}

return M
