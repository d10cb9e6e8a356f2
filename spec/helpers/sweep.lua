-- spec/helpers/sweep.lua — the reliability sweep: every op of the op table and
-- every function of mx.nd and mx.nd.NDArray, called the way a careless or hostile user
-- would. The case list is GENERATED (from require("mx.core.lib").ops: inputs, params and their
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
local M = require("helpers.sweep_cases") -- the case list; this file adds running and judging
local K = M._
local CHUNK, EIGHT, FLOAT, INTEGER_T = K.CHUNK, K.EIGHT, K.FLOAT, K.INTEGER_T
local alias_baseline, baseline, big_tensor, build_inputs = K.alias_baseline, K.baseline,
  K.big_tensor, K.build_inputs
local call_from_chunk, clone, compare, decode = K.call_from_chunk, K.clone, K.compare,
  K.decode
local dtype_name, is_nd, make_tensor, resolve = K.dtype_name, K.is_nd, K.make_tensor, K.resolve
local special_tensor = K.special_tensor
local mx, nd, NDArray, lib -- set by load_mx (mx loads in the child, not at require time)
local function load_mx()
  K.load_mx()
  mx = require("mx")
  nd, NDArray, lib = mx.nd, mx.nd.NDArray, require("mx.core.lib")
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

local function is_random(op)
  if op.random then return true end
  for _, p in ipairs(op.params) do if p.name == "_seed" or p.name == "rng_seed" then return true end end
  return false
end

-- Families whose results are compared normwise (compare's `scale`): solves,
-- factorisations and products, where the fast path (BLAS/LAPACK/oneDNN, whichever code
-- path the CPU selects) and the reference round in different orders. An element that
-- cancels to 0 carries an error of eps x the size of what cancelled: trsm with
-- alpha = 1e30 gives 2.3e13 there on OpenBLAS's AVX-512 kernels (the float64 answer is 0;
-- 2.3e13 is 2e-17 of the column's 1e30, within a backward-stable solve's bound).
-- FFTs too (the audio family): their error bound is eps log n x the frame's norm, so a bin
-- (or a sample of istft) that cancels to ~0 between 1e9-sized terms carries ~1e2 of it.
local NORMWISE = { linalg = true, audio = true }

-- Compare the tensors `got` (list) against the reference's `want` (list) for op.
local function check_results(got, want, op)
  local random = is_random(op)
  for i = 1, #want do
    local g, w = got[i], want[i]
    if not is_nd(g) then return "silent", "output " .. i .. " is a " .. type(g) .. ", not a tensor" end
    local gs, ws = table.concat(g:shape(), "x"), table.concat(w:shape(), "x")
    if gs ~= ws then return "silent", "output " .. i .. " shape " .. gs .. ", reference " .. ws end
    if g:dtype() ~= w:dtype() then
      return "silent", "output " .. i .. " dtype " .. g:dtype() .. ", reference " .. w:dtype()
    end
    if not random then
      local wl = decode(w)
      local d = compare(decode(g), wl, g:dtype(), NORMWISE[op.family] and K.max_abs(wl) or nil)
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

-- Run a call of op.name (fast) with args, and the reference with refargs; classify.
local function judge(c, f, args, n, refcall, accept_note)
  local ok, res = call_from_chunk(f, args, n)
  if not ok then return clean_error(res, names_of(f, c.name)) end
  if accept_note then return "silent", accept_note end
  if not refcall then return "correct" end
  local rok, want = pcall(refcall)
  if not rok then return "silent", "accepted, but the reference raised: " .. tostring(want) end
  return check_results(res, want, c.op)
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
    local st, d = check_results(result_list(res, nout), wantv, op)
    if st ~= "correct" then return st, d end
    return check_results(outs, wantv, op)
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
  local st, d = check_results(result_list(res, 1), want, op)
  if st ~= "correct" or not outs then return st, d end
  return check_results(outs, want, op)
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
