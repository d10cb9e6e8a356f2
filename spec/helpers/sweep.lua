-- spec/helpers/sweep.lua — the reliability sweep (issue 10): every op of the op table and
-- every function of mx.nd and mx.nd.NDArray, called the way a careless or hostile user
-- would. The case list is GENERATED (from require("mx._lib").ops: inputs, params and their
-- types, dtypes, ctx, variadic, outputs; and from the functions found in mx.nd,
-- mx.nd.NDArray and mx.nd.random), so a new op or method is swept the day it is added.
--
-- A case passes when the call
--   * raises a Lua error whose message names the op (or method) and whose position is the
--     caller's line: the case's own chunk, "sweep_case:2:" (status "clean"), or
--   * returns a correct result: the same call on copies of the inputs through the reference
--     kernels (mx.nd._ref.<op>, no out=) gives the same shape, dtype and values (NaN == NaN;
--     a tolerance by dtype), and a few exact identities hold for int64 beyond 2^53
--     ("correct"). Methods that read values back into Lua (tolist, item, ...) are found by
--     trying them on a plain tensor and must then return the tensor's values.
-- It fails as "silent" (silent wrong: a different result, an integer option given as 2.5
-- that was accepted, an out= of the wrong shape accepted), "unclear" (an error that does
-- not name the op, a raw Lua error, or one blamed on a luamx line) or "crash" (the child
-- process died: tools/sweep and spec/sweep_spec.lua run cases in children).
--
--   local sweep = require("helpers.sweep")
--   local cases = sweep.cases()          -- { {id=, kind=, name=, ...}, ... } deterministic
--   sweep.child_main(from, to)           -- in a child: run cases[from..to], one line each
--   sweep.run_all{ batch = 200, jobs = 2 } -> results, totals (parent; see tools/sweep/run.lua)
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

-- nil when a and b agree (lists from decode), else a description of the first difference.
local function compare(got, want, dtype)
  if #got ~= #want then return string.format("%d values, expected %d", #got, #want) end
  local tol = TOL[dtype] or 0
  for i = 1, #want do
    local g, w = got[i], want[i]
    local same
    if type(g) == "number" and type(w) == "number" then
      if g == w then same = true
      elseif g ~= g or w ~= w then same = false
      else same = math.abs(g - w) <= tol * math.max(1, math.abs(g), math.abs(w)) end
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
  nd, NDArray, lib = mx.nd, mx.nd.NDArray, require("mx._lib")
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
  if #op.outputs > 1 then C("out:single", { kind = kind, out = "single" }) end
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

---------------------------------------------------------------- running a case
local function clean_error(msg, names)
  if type(msg) ~= "string" then return "unclear", "error value is a " .. type(msg) end
  if msg:sub(1, #CHUNK + 3) ~= CHUNK .. ":2:" then
    return "unclear", "not blamed on the caller: " .. msg
  end
  for _, n in ipairs(names) do
    if msg:find(n, 1, true) then return "clean", msg end
  end
  return "unclear", "does not name " .. names[1] .. ": " .. msg
end

-- Every name a function is reachable under (x.ctx and x.context are one function).
local fnames
local function names_of(f, first)
  if not fnames then
    fnames = {}
    local function add(tab)
      for k, v in pairs(tab) do
        if type(v) == "function" and type(k) == "string" then
          fnames[v] = fnames[v] or {}
          table.insert(fnames[v], k)
        end
      end
    end
    add(NDArray)
    add(nd)
    local ok, rnd = pcall(require, "mx.random")
    if ok and type(rnd) == "table" then add(rnd) end
  end
  local r = { first }
  for _, n in ipairs(fnames[f] or {}) do r[#r + 1] = n:gsub("_$", "") end
  return r
end

local function result_list(res, nout)
  local l = {}
  for i = 1, nout do l[i] = res[i] end
  return l
end

-- Compare the tensors `got` (list) against the reference's `want` (list).
local function check_results(got, want, random)
  for i = 1, #want do
    local g, w = got[i], want[i]
    if not is_nd(g) then return "silent", "output " .. i .. " is a " .. type(g) .. ", not a tensor" end
    local gs, ws = table.concat(g:shape(), "x"), table.concat(w:shape(), "x")
    if gs ~= ws then return "silent", "output " .. i .. " shape " .. gs .. ", reference " .. ws end
    if g:dtype() ~= w:dtype() then
      return "silent", "output " .. i .. " dtype " .. g:dtype() .. ", reference " .. w:dtype()
    end
    if not random then
      local d = compare(decode(g), decode(w), g:dtype())
      if d then return "silent", "output " .. i .. ": " .. d end
    end
  end
  return "correct"
end

local function integer_like(v)
  if type(v) == "number" then return v == math.floor(v) or v ~= v or v == math.huge or v == -math.huge end
  if type(v) == "table" then
    for _, x in pairs(v) do if not integer_like(x) then return false end end
  end
  return true
end

local function is_random(op)
  if op.random then return true end
  for _, p in ipairs(op.params) do if p.name == "_seed" or p.name == "rng_seed" then return true end end
  return false
end

-- Run a call of op.name (fast) with args, and the reference with refargs; classify.
local function judge(c, f, args, n, refcall, accept_note)
  local ok, res = call_from_chunk(f, args, n)
  if not ok then return clean_error(res, names_of(f, c.name)) end
  if accept_note then return "silent", accept_note end
  if not refcall then return "correct" end
  local rok, want = pcall(refcall)
  if not rok then return "silent", "accepted, but the reference raised: " .. tostring(want) end
  return check_results(res, want, is_random(c.op))
end

local function shape_of_ref(op, b)
  return nd._ref[op.name](unpack(b))
end

local function run_op_case(c)
  local op = c.op
  local nin = op.variadic and 2 or #op.inputs
  local nout = #op.outputs
  local b = baseline(op)
  if b and c.out == "alias" then b = alias_baseline(op, c.input, b) end
  local f = nd[op.name]
  local ref = nd._ref[op.name]
  local opts = b and clone(b.opts) or {}
  local ins
  if b then
    if c.dtype and not c.input then ins = build_inputs(b, c.dtype)
    elseif c.dtype then ins = build_inputs(b, c.dtype, c.input)
    else ins = build_inputs(b) end
  else
    ins = {}
    for i = 1, nin do ins[i] = make_tensor({ 2, 3 }, 0) end
  end
  -- input variants
  local function map_inputs(fn, which)
    for i = 1, #ins do
      if which == nil or which == i then ins[i] = fn(ins[i]) end
    end
  end
  if c.special then
    map_inputs(function(t)
      local code = nd.dtype_code(t:dtype())
      if not FLOAT[code] then code = 0 end
      return special_tensor(t:shape(), code, c.special)
    end, c.input)
  elseif c.zero then
    map_inputs(function(t)
      local s = t:shape()
      if #s == 0 then s = { 0 } else s[1] = 0 end
      return nd.empty(s, { dtype = t:dtype() })
    end, c.input)
  elseif c.pad8 then
    map_inputs(function(t)
      local s = t:shape()
      if #s >= 8 then return t end
      local p = {}
      for i = 1, 8 - #s do p[i] = 1 end
      for i = 1, #s do p[#p + 1] = s[i] end
      return nd._ref.reshape(t, { shape = p })
    end)
  elseif c.big then
    map_inputs(function(t) return big_tensor(t:shape()) end, c.input)
  elseif c.fill then
    map_inputs(function(t)
      return make_tensor(t:shape(), nd.dtype_code(t:dtype()), function() return c.fill end)
    end, c.input)
  end
  if c.nontensor then ins[c.input] = resolve(c.value) end
  local note
  if c.param then
    local v = resolve(c.value)
    opts[c.param.name] = v
    if INTEGER_T[c.param.type] and not integer_like(v) then
      note = "accepted non-integer " .. c.param.name .. " = " .. tostring(v)
    end
  end
  if c.opts_raw then for k, v in pairs(c.opts_raw) do opts[k] = v end end
  -- reference inputs: copies taken before the call (out= may overwrite an input)
  local refins = {}
  for i = 1, #ins do refins[i] = clone(ins[i]) end
  local refopts = clone(opts)
  -- out=
  if c.out then
    if not b then return "skip", "no working call found for this op" end
    local want = { shape_of_ref(op, (function()
      local a = {}
      for i = 1, #ins do a[i] = clone(ins[i]) end
      if op.variadic then a = { a } end
      a[#a + 1] = clone(opts)
      return a
    end)()) }
    local outs = {}
    for k = 1, nout do
      local w = want[k]
      if not is_nd(w) then return "skip", "reference gave no tensor" end
      local o
      if c.out == "shape" and k == 1 then o = nd.zeros({ 7 }, { dtype = w:dtype() })
      elseif c.out == "dtype" and k == 1 then o = nd.zeros(w:shape(), { dtype = dtype_name(c.dtype_out) })
      elseif c.out == "alias" and k == 1 then o = ins[c.input]
      else o = nd.zeros(w:shape(), { dtype = w:dtype() }) end
      outs[k] = o
    end
    local outv
    if c.out == "value" then outv = resolve(c.value)
    elseif c.out == "single" then outv = outs[1]
    else outv = nout == 1 and outs[1] or outs end
    opts.out = outv
    if c.out == "shape" then note = "accepted out= of shape {7}" end
    if c.out == "value" or c.out == "single" then note = "accepted out= " .. tostring(outv) end
    local args = {}
    for i = 1, #ins do args[i] = ins[i] end
    if op.variadic then args = { args } end
    args[#args + 1] = opts
    local refcall = function()
      local a = {}
      for i = 1, #refins do a[i] = refins[i] end
      if op.variadic then a = { a } end
      a[#a + 1] = refopts
      local r = { ref(unpack(a)) }
      if c.out == "dtype" then
        local o = outs[1]
        if o:dtype() ~= r[1]:dtype() then r[1] = nd._ref.cast(r[1], { dtype = o:dtype() }) end
      end
      return r
    end
    local ok, res = call_from_chunk(f, args, #args)
    if not ok then return clean_error(res, names_of(f, c.name)) end
    if note then return "silent", note end
    local rok, wantv = pcall(refcall)
    if not rok then return "silent", "accepted, but the reference raised: " .. tostring(wantv) end
    -- what the caller sees: the returned tensors, and the out= tensors themselves
    local st, d = check_results(result_list(res, nout), wantv, is_random(op))
    if st ~= "correct" then return st, d end
    return check_results(outs, wantv, is_random(op))
  end
  -- the call
  local args
  local n
  if op.variadic then
    local list = ins
    if c.list == "mixed" then list = { ins[1], 1.5 } elseif c.list then list = c.list end
    -- in1=<value>: the list itself replaced; in2=<value>: a non-tensor in the list
    if c.nontensor and c.input == 1 then list = resolve(c.value) end
    args, n = { list, opts }, 2
  else
    args = {}
    for i = 1, nin do args[i] = ins[i] end
    args[nin + 1] = opts
    n = nin + 1
  end
  if c.opts_pos ~= nil then args[n] = resolve(c.opts_pos) end
  if c.extra then args[n + 1] = 1; n = n + 1 end
  local refcall = function()
    local a = {}
    for i = 1, #refins do a[i] = refins[i] end
    if op.variadic then a = { c.list == nil and a or {} } end
    a[#a + 1] = refopts
    return { ref(unpack(a)) }
  end
  local nontensor = c.nontensor
  if c.opts_pos ~= nil then
    note = note or ("accepted " .. tostring(resolve(c.opts_pos)) .. " as the options")
  end
  if nontensor or c.list then
    -- the fast call must refuse; if it accepts, the reference decides
    local ok, res = call_from_chunk(f, args, n)
    if not ok then return clean_error(res, names_of(f, c.name)) end
    local rok = pcall(refcall)
    if not rok then return "silent", "accepted a non-tensor input the reference refuses" end
    return "correct", nil, res
  end
  return judge(c, f, args, n, refcall, note)
end

local function run_creation_case(c)
  local op = c.op
  local f, ref = nd[op.name], nd._ref[op.name]
  local opts = {}
  local note
  local args, n
  if op.positional then
    local pos = {}
    if c.pos then
      for k = 1, c.pos - 1 do pos[k] = 1 end
      pos[c.pos] = resolve(c.value)
      if INTEGER_T[c.ptype] and not integer_like(pos[c.pos]) then
        note = "accepted non-integer " .. op.positional[c.pos] .. " = " .. tostring(pos[c.pos])
      end
    else
      pos[1] = 3
    end
    args = {}
    for k = 1, #pos do args[k] = pos[k] end
    n = #pos
  else
    local shape = { 2, 3 }
    if c.shape ~= nil or c.raw then shape = resolve(c.shape) end
    if type(shape) == "table" and not integer_like(shape) then note = "accepted a non-integer shape" end
    args, n = { shape }, 1
  end
  if c.param then
    local v = resolve(c.value)
    opts[c.param.name] = v
    if INTEGER_T[c.param.type] and not integer_like(v) then
      note = "accepted non-integer " .. c.param.name .. " = " .. tostring(v)
    end
  end
  if c.opts_raw then for k, v in pairs(c.opts_raw) do opts[k] = v end end
  local refopts = clone(opts)
  local refargs = clone(args)
  local outs
  if c.out then
    local okr, w = pcall(ref, unpack(refargs, 1, n), clone(opts))
    if not okr or not is_nd(w) then return "skip", "no reference result" end
    local o
    if c.out == "shape" then o = nd.zeros({ 7 }, { dtype = w:dtype() }); note = "accepted out= of shape {7}"
    elseif c.out == "dtype" then o = nd.zeros(w:shape(), { dtype = dtype_name(c.dtype_out) })
    elseif c.out == "value" then o = resolve(c.value); note = "accepted out= " .. tostring(o)
    else o = nd.zeros(w:shape(), { dtype = w:dtype() }) end
    opts.out = o
    outs = { o }
  end
  n = n + 1
  args[n] = opts
  if c.opts_pos ~= nil then
    args[n] = resolve(c.opts_pos)
    if type(args[n]) == "number" and (op.positional or op.pindex.value) then
      refargs[n] = args[n] -- a legal positional number (arange(3, 1.5), full({2, 3}, 1.5))
      refopts = nil
    else
      note = note or ("accepted " .. tostring(args[n]) .. " as options")
    end
  end
  if c.extra then n = n + 1; args[n] = 1 end
  local ok, res = call_from_chunk(f, args, n)
  if not ok then return clean_error(res, names_of(f, c.name)) end
  if note then return "silent", note end
  local rok, want = pcall(function()
    local a = refargs
    local k = #a
    if refopts then a[k + 1] = refopts end
    local r = { ref(unpack(a, 1, refopts and k + 1 or k)) }
    if c.out == "dtype" and r[1]:dtype() ~= outs[1]:dtype() then
      r[1] = nd._ref.cast(r[1], { dtype = outs[1]:dtype() })
    end
    return r
  end)
  if not rok then return "silent", "accepted, but the reference raised: " .. tostring(want) end
  local st, d = check_results(result_list(res, 1), want, is_random(op))
  if st ~= "correct" or not outs then return st, d end
  return check_results(outs, want, is_random(op))
end

local function run_identity_case(c)
  local idn = c.ident
  local op = lib.ops_by_name[idn[1]]
  local x = big_tensor(idn[4] or { 3 })
  local want = decode(x)
  local args
  if op.nin == 2 then
    local other
    if idn[3] == "id0" then other = nd.zeros(x:shape(), { dtype = "int64" })
    elseif idn[3] == "id1" then other = nd.ones(x:shape(), { dtype = "int64" })
    else other = big_tensor(x:shape()) end
    args = { x, other, clone(idn[2]) }
  else
    args = { x, clone(idn[2]) }
  end
  local ok, res = call_from_chunk(nd[op.name], args, #args)
  if not ok then return clean_error(res, names_of(nd[op.name], op.name)) end
  local r = res[1]
  if not is_nd(r) then return "silent", "no tensor returned" end
  local got = decode(r)
  if idn[3] == "max" then want = { want[#want] }
  elseif idn[3] == "min" or idn[3] == "first" then want = { want[1] } end
  for i = 1, #want do
    if tostring(got[i]) ~= tostring(want[i]) then
      return "silent", string.format("int64 element %d: %s, exact %s (dtype %s)", i, tostring(got[i]),
        tostring(want[i]), r:dtype())
    end
  end
  return "correct"
end

-- self variants for the non-op functions
local function make_self(kind)
  if kind == "f32" then return make_tensor({ 2, 3 }, 0)
  elseif kind == "f64" then return make_tensor({ 2, 3 }, 1)
  elseif kind == "f16" then return make_tensor({ 2, 3 }, 2)
  elseif kind == "bf16" then return make_tensor({ 2, 3 }, 12)
  elseif kind == "u8" then return make_tensor({ 2, 3 }, 3)
  elseif kind == "i8" then return make_tensor({ 2, 3 }, 5)
  elseif kind == "i32" then return make_tensor({ 2, 3 }, 4)
  elseif kind == "i64" then return make_tensor({ 2, 3 }, 6)
  elseif kind == "bool" then return make_tensor({ 2, 3 }, 7)
  elseif kind == "scalar0d" then return make_tensor({}, 0)
  elseif kind == "one" then return make_tensor({ 1 }, 0)
  elseif kind == "zero_size" then return nd.empty({ 0, 3 })
  elseif kind == "eight_dim" then return make_tensor(EIGHT, 0)
  elseif kind == "nan" then return special_tensor({ 2, 3 }, 0, "nan")
  elseif kind == "ncnan" then return special_tensor({ 1 }, 0, "ncnan")
  elseif kind == "inf" then return special_tensor({ 2, 3 }, 1, "inf")
  elseif kind == "big64" then return big_tensor({ 3 })
  elseif kind == "view" then return make_tensor({ 3, 2 }, 0)[2]
  end
  error("unknown self kind " .. kind)
end

local function flatten_leaves(v, out, depth)
  if depth > 10 then out.bad = "nested too deep"; return end
  if type(v) == "table" then
    for i = 1, #v do flatten_leaves(v[i], out, depth + 1) end
  else
    out[#out + 1] = v
  end
end

-- Reader methods: on a plain tensor they give its values back as Lua numbers.
local readers = {}
local function is_reader(f)
  if readers[f] == nil then
    readers[f] = false
    for _, t in ipairs({ make_tensor({ 2, 3 }, 1), make_tensor({ 1 }, 1) }) do
      local ok, r = pcall(f, t)
      if ok and (type(r) == "number" or type(r) == "table") then
        local l = {}
        flatten_leaves(r, l, 0)
        if not l.bad and #l == t:size() and not compare(l, decode(t), "float64") then readers[f] = true end
      end
    end
  end
  return readers[f]
end

local function canonical(l, int64)
  for i = 1, #l do
    local v = l[i]
    if type(v) == "number" and v ~= v then l[i] = "nan"
    elseif int64 and type(v) == "number" then l[i] = string.format("%.0f", v)
    elseif type(v) == "cdata" then l[i] = tostring(v):gsub("U?LL$", "") end
  end
  return l
end

local function arg_value(a)
  local v = a[2]
  if v == "TENSOR" then return make_tensor({ 2, 3 }, 0) end
  if v == "PTR" then return ffi.new("double[64]") end
  return resolve(v)
end

local function run_fn_case(c)
  local tab = c.group == "NDArray" and NDArray or c.group == "nd" and nd or require("mx.random")
  local f = tab[c.fname]
  local args, n = {}, 0
  local self
  if c.self then
    self = make_self(c.self)
    n = n + 1
    args[n] = self
  elseif c.self_value ~= nil or c.group == "NDArray" then
    n = n + 1
    args[n] = resolve(c.self_value)
  end
  if c.arg2 then
    local a = c.arg2
    local v1 = a[2] == "TENSOR" and make_tensor({ 2, 3 }, 0)
      or a[2] == "PTR" and ffi.new("double[64]") or a[2]
    local v2 = a[3] == "TENSOR" and make_tensor({ 2, 3 }, 0) or clone(a[3])
    args[n + 1], args[n + 2] = v1, v2
    n = n + 2
  elseif c.arg and not c.first then
    local a = c.arg
    if a[3] ~= 0 then
      n = n + 1
      args[n] = arg_value(a)
    end
  end
  local ok, res = call_from_chunk(f, args, n)
  if not ok then return clean_error(res, names_of(f, c.fname)) end
  -- a result that comes back to Lua must be made of sane values
  for i = 1, 4 do
    local r = res[i]
    if is_nd(r) then
      local sok, err = pcall(function() return r:shape(), r:dtype() end)
      if not sok then return "silent", "result " .. i .. " is a broken tensor: " .. tostring(err) end
    elseif type(r) == "table" then
      local l = {}
      flatten_leaves(r, l, 0)
      if l.bad then return "silent", "result " .. i .. ": " .. l.bad end
    end
  end
  if is_nd(self) and n == 1 and is_reader(f) then
    local l = {}
    local r = res[1]
    if type(r) == "table" then flatten_leaves(r, l, 0) else l[1] = r end
    for i = 1, #l do
      local t = type(l[i])
      if t ~= "number" and t ~= "boolean" and not (t == "cdata" and ffi.istype("int64_t", l[i])) then
        return "silent", "value " .. i .. " read back as a " .. t
      end
    end
    local want = decode(self)
    local i64 = self:dtype() == "int64"
    local d = compare(canonical(l, i64), want, i64 and "int64" or "float64")
    if d and self:dtype() ~= "float16" and self:dtype() ~= "bfloat16" and self:dtype() ~= "float32" then
      return "silent", "read back: " .. d
    elseif d and compare(canonical(l), want, self:dtype()) then
      return "silent", "read back: " .. d
    end
  end
  return "correct"
end

function M.run_case(c)
  load_mx()
  if c.kind == "op" then return run_op_case(c) end
  if c.kind == "creation" then return run_creation_case(c) end
  if c.kind == "identity" then return run_identity_case(c) end
  return run_fn_case(c)
end

---------------------------------------------------------------- child side
-- Runs the cases whose indices are listed, writing "S <i>" before and "R <i> <status>
-- <detail>" after each (flushed: when the child dies, the last S names the case it was
-- running), and "DONE" at the end. Runs in a fresh temp dir (some functions write files).
function M.child_main(list)
  local all = M.cases() -- loads everything before the chdir
  require("helpers.gradcases")
  ffi.cdef("int chdir(const char *path); char *mkdtemp(char *template);")
  local tmpl = ffi.new("char[?]", 64, "/tmp/mx_sweep_XXXXXX")
  local dir = ffi.C.mkdtemp(tmpl) ~= nil and ffi.string(tmpl) or nil
  if dir then ffi.C.chdir(dir) end
  local out = io.stdout
  local timing = os.getenv("SWEEP_TIMING")
  for k, i in ipairs(list) do
    out:write("S ", i, "\n")
    out:flush()
    local t0 = os.clock()
    local ok, st, detail = pcall(M.run_case, all[i])
    if not ok then st, detail = "harness", tostring(st) end
    detail = tostring(detail or ""):gsub("[\r\n]", " "):sub(1, 300)
    out:write("R ", i, " ", st, " ", detail, "\n")
    if timing then io.stderr:write(string.format("T %d %.1f %s\n", i, (os.clock() - t0) * 1e3, all[i].id)) end
    out:flush()
    if k % 50 == 0 then collectgarbage() end
  end
  mx.nd.waitall()
  if dir then os.execute("rm -rf " .. dir) end
  out:write("DONE\n")
  out:flush()
end

return M
