-- mx.graph.cached_op — MXNet's CachedOp: a Lua function traced into one graph per input
-- signature and replayed through the graph executor (core/src/graph_exec.c) with one
-- engine push forward and one backward; autograd records ONE node for the whole call.
-- HybridBlock (gluon/_hybrid.lua: a block's forward and its Parameters) and mx.sym's
-- executors (mx.graph.executor: a symbol's DAG evaluated with mx.nd) both run on it.
--
--   local CachedOp = require("mx.graph.cached_op")
--   local op = CachedOp.new(fn, { name=, who=, static_alloc=, params=, prepare= })
--   local y = op(x, ...)          -- replays, or traces fn(x, ...) for a new signature
--
--   fn            the function traced; returns tensors, nils or lists of tensors
--   name          what messages call it ("Dense", "the symbol")
--   who           the prefix of its errors ("hybridize", "Executor")
--   static_alloc  the executor keeps its planned buffers between calls
--   params()      the parameters fn may read, as a list of { name, p }: p._data is the
--                 tensor (nil until initialised), p:data() returns it (raising its
--                 owner's message when there is none), p.grad_req "null" takes no
--                 gradient. Scanned again when the trace meets an unknown tensor
--                 (deferred initialisation makes arrays during the trace).
--   prepare(args) runs before each new trace (args = { n=, ... }): Gluon's deferred
--                 initialisation runs one plain forward there, so that initialisers'
--                 ops stay out of the graph
--
-- The trace (mx.graph.trace) runs fn eagerly with a tracer installed: every op,
-- creation, view and index assignment becomes a node; tensors the trace did not make
-- are inputs (the arguments, and tensors one table deep in them), parameters (by their
-- data arrays) or constants (captured tensors: the graph keeps their values). The
-- gradient graph is made the same way, from the op table's gradient formulas.
--
-- Guards: a trace that turns a tensor into a Lua value (x:item(), x:totable(),
-- x:tolist(), x:asscalar()) records the value; a replay checks it and, when it differs,
-- traces again and caches that variant too (MXNet silently reuses the first branch:
-- apache/mxnet#16932). Shapes, dtypes, the device, the train mode and the Lua values
-- of non-tensor arguments are part of the signature, so reading them needs no guard.
-- A call made while a trace runs (a child block inside its parent's trace, fn calling
-- itself) runs fn directly, so the outer trace records its ops.
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local nd = require("mx.nd")
local T = require("mx.autograd.tape")
local R = require("mx.graph.trace")
local G = require("mx.graph.cgraph")

local ffi, C = lib.ffi, lib.C
local is_tensor = nd.is_tensor
local wrap = nd._wrap
local note_site = nd._note_site
local engine_queued = C.mx_engine_queued
local type, pairs, ipairs, tostring, error, pcall, unpack, select, rawequal =
  type, pairs, ipairs, tostring, error, pcall, unpack, select, rawequal
local concat = table.concat
local new_rec, traced, build_backward = R.new_rec, R.traced, R.build_backward

local CachedOp = {}
CachedOp.__index = CachedOp

---------------------------------------------------------------- the tape node
-- Tape node of a replay: inputs = the forward variables' tensors, gradient = the
-- backward executor.
local NODE = { name = "cached_op", outputs = { "out" }, nin = -1 }
NODE.grad = function(_, x, _, g, p)
  local v = p.variant
  local ins = {}
  for _, spec in ipairs(v.bvars) do
    if spec.kind == "ograd" then
      ins[#ins + 1] = g[spec.k]
    else
      ins[#ins + 1] = p.saved[spec.k]
    end
  end
  local r = G.run(v.bexec, ins, v.nbheads, 1)
  local dx, k = {}, 0
  for i = 1, #x do
    if v.need_var[i] then
      k = k + 1
      dx[i] = r[k]
    end
  end
  return dx
end

---------------------------------------------------------------- signatures
local function tensor_sig(a)
  return concat(a:shape(), "x") .. ":" .. a:dtype() .. "@" .. tostring(a:context())
    .. (T.entry[a] and "g" or "-")
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

-- The signature of a non-tensor argument: numbers exactly (%.17g: two doubles that
-- print alike under tostring must not share a graph), tables by their contents (a
-- table mutated between calls must not replay the old contents), tensors one table
-- deep by shape/dtype/device (they are graph inputs); deeper tensors are refused
-- (nil and the message).
local function value_sig(who, v, depth, i)
  local tv = type(v)
  if tv == "number" then return ("%.17g"):format(v) end
  if is_tensor(v) then
    if depth > 1 then
      return nil, ("%s: argument %d holds a tensor in a nested table: pass tensors "
        .. "as arguments or one table deep ({x, y})"):format(who, i)
    end
    return "T" .. tensor_sig(v)
  end
  if tv == "table" then
    local parts = {}
    for _, k in ipairs(sorted_keys(v)) do
      local sv, err = value_sig(who, v[k], depth + 1, i)
      if not sv then return nil, err end
      parts[#parts + 1] = type(k):sub(1, 1) .. tostring(k) .. "=" .. sv
    end
    return "{" .. concat(parts, ",") .. "}"
  end
  return tv .. "=" .. tostring(v)
end

-- Which tensor arguments (and tensors one table deep) are the same tensor: f(x, x)
-- traces one graph input for both, so f(x, y) must not replay that graph. "" when all
-- differ; no closure and no allocation for plain tensor arguments (the replay path).
local flat_buf = {}
local function dup_pattern(args)
  local k = 0
  for i = 1, args.n do
    local a = args[i]
    if is_tensor(a) then
      k = k + 1
      flat_buf[k] = a
    elseif type(a) == "table" then
      local keys = sorted_keys(a)
      for j = 1, #keys do
        local v = a[keys[j]]
        if is_tensor(v) then
          k = k + 1
          flat_buf[k] = v
        end
      end
    end
  end
  local parts
  for i = 2, k do
    for j = 1, i - 1 do
      if rawequal(flat_buf[i], flat_buf[j]) then
        parts = parts or {}
        parts[#parts + 1] = i .. "=" .. j
        break
      end
    end
  end
  for i = 1, k do flat_buf[i] = nil end
  return parts and concat(parts, ",") or ""
end

local function signature(who, args, training, recording)
  -- mx.amp's casts are part of the trace: a graph traced with them is not one without
  local parts = { training and "T" or "P", recording and "R" or "-", S.amp_sig or "" }
  for i = 1, args.n do
    local a = args[i]
    if is_tensor(a) then
      parts[#parts + 1] = tensor_sig(a)
    else
      local sv, err = value_sig(who, a, 0, i)
      if not sv then return nil, err end
      parts[#parts + 1] = type(a) .. "=" .. sv
    end
  end
  parts[#parts + 1] = dup_pattern(args)
  return concat(parts, "|")
end

-- The earlier argument that is the very tensor args[i] (f(x, x)), 0 when none.
local function same_as(args, i)
  local a = args[i]
  for j = 1, i - 1 do
    if rawequal(args[j], a) then return j end
  end
  return 0
end

-- The fast check of the last replayed signature: tensor arguments' shapes, dtypes,
-- devices and gradient flags, other arguments' values, the mode flags.
local shbuf = ffi.new("int64_t[8]")
local function sig_of(who, args)
  local sig = { n = args.n, training = S.training, recording = S.recording, amp = S.amp_sig }
  for i = 1, args.n do
    local a = args[i]
    if is_tensor(a) then
      local nd_ = C.mx_tensor_shape(a.h, shbuf)
      local shp = {}
      for d = 0, nd_ - 1 do shp[d + 1] = shbuf[d] end
      sig[i] = { shp = shp, dtype = C.mx_tensor_dtype(a.h), dt = C.mx_tensor_dev_type(a.h),
        di = C.mx_tensor_dev_id(a.h), g = T.entry[a] and true or false, same = same_as(args, i) }
    elseif type(a) == "table" then
      sig[i] = { tsig = value_sig(who, a, 0, i) }
      sig.tables = true
    else
      sig[i] = { value = a }
    end
  end
  if sig.tables then sig.dup = dup_pattern(args) end -- tensors inside tables too
  return sig
end

local function sig_match(who, sig, args)
  if args.n ~= sig.n or S.training ~= sig.training or S.recording ~= sig.recording
    or S.amp_sig ~= sig.amp then
    return false
  end
  for i = 1, args.n do
    local a, s = args[i], sig[i]
    if s.shp then
      if not is_tensor(a) then return false end
      local h = a.h
      local nd_ = C.mx_tensor_shape(h, shbuf)
      local shp = s.shp
      if nd_ ~= #shp then return false end
      for d = 0, nd_ - 1 do if shbuf[d] ~= shp[d + 1] then return false end end
      if C.mx_tensor_dtype(h) ~= s.dtype or C.mx_tensor_dev_type(h) ~= s.dt
          or C.mx_tensor_dev_id(h) ~= s.di or (T.entry[a] and true or false) ~= s.g then
        return false
      end
      if same_as(args, i) ~= s.same then return false end
    elseif s.tsig then
      if type(a) ~= "table" or value_sig(who, a, 0, i) ~= s.tsig then return false end
    elseif a ~= s.value then
      return false
    end
  end
  if sig.dup and dup_pattern(args) ~= sig.dup then return false end
  return true
end

---------------------------------------------------------------- tracing
-- Resolves the tensors a trace did not make: the arguments' tensors are inputs
-- ("data", "data0"...: MXNet's names), the parameters' data arrays parameters (scanned
-- again on a miss: deferred initialisation makes arrays during the trace); nil for
-- anything else (a constant). vars_t collects the variables' tensors in node order.
local function resolver(self, args, vars_t)
  local map
  local input_index = {}
  local nt = 0
  for i = 1, args.n do
    local a = args[i]
    if is_tensor(a) then
      nt = nt + 1
      if not input_index[a] then input_index[a] = { i = i } end
    elseif type(a) == "table" then
      for k, v in pairs(a) do
        if is_tensor(v) and not input_index[v] then
          nt = nt + 1
          input_index[v] = { i = i, key = k }
        end
      end
    end
  end
  local params = self.params
  return function(x)
    local at = input_index[x]
    if at then
      vars_t[#vars_t + 1] = x
      local i = at.i
      local name = nt == 1 and "data" or "data" .. (i - 1)
      if at.key ~= nil then name = name .. "_" .. tostring(at.key) end
      return name, { kind = "input", i = i, key = at.key }
    end
    if not params then return nil end
    if not map then map = {} end
    local pe = map[x]
    if not pe then
      for _, e in ipairs(params()) do
        local p = e[2]
        if p._data ~= nil then map[p._data] = { name = e[1], p = p } end
      end
      pe = map[x]
    end
    if pe then
      vars_t[#vars_t + 1] = x
      return pe.name, { kind = "param", p = pe.p }
    end
    return nil
  end
end

local function flatten_outputs(res)
  local flat, shape = {}, {}
  for i = 1, res.n do
    local r = res[i]
    if is_tensor(r) then
      flat[#flat + 1] = r
      shape[i] = false
    elseif r == nil then
      shape[i] = -1 -- a nil result (attention weights not asked for) stays nil
    elseif type(r) == "table" then
      shape[i] = #r
      for k in pairs(r) do
        if type(k) ~= "number" or k < 1 or k > #r or k % 1 ~= 0 then
          return nil, ("result %d is a table with the key %s (only lists of tensors)")
            :format(i, tostring(k))
        end
      end
      for j, t in ipairs(r) do
        if not is_tensor(t) then
          return nil, ("result %d is a table whose element %d is a %s"):format(i, j, type(t))
        end
        flat[#flat + 1] = t
      end
    else
      return nil, ("result %d is a %s"):format(i, type(r))
    end
  end
  if #flat == 0 then return nil, "it returned no tensor" end
  return flat, shape
end

local function unflatten(flat, shape, n)
  local res, k = {}, 0
  for i = 1, n do
    if shape[i] == false then
      k = k + 1
      res[i] = flat[k]
    elseif shape[i] == -1 then
      res[i] = nil
    else
      local t = {}
      for j = 1, shape[i] do t[j] = flat[k + j] end
      k = k + shape[i]
      res[i] = t
    end
  end
  return res
end

-- Traces fn(args) into a new variant; returns it and the trace's own results.
local function trace_variant(self, args, training, recording)
  if self.prepare then self.prepare(args) end
  local vars_t = {}
  local frec = new_rec(resolver(self, args, vars_t), self.who)
  local fn = self.fn
  local inside = self.tracing
  self.tracing = true
  local ok, res = pcall(traced, frec, function() return fn(unpack(args, 1, args.n)) end)
  self.tracing = inside
  if not ok then error(res, 0) end
  local flat, oshape = flatten_outputs(res)
  if not flat then
    error(("%s: the forward of %s must return tensors (or lists of tensors): %s")
      :format(self.who, self.name, oshape), 3)
  end
  local v = { oshape = oshape, nres = res.n, nout = #flat, fvars = frec.vars,
    args = { n = args.n }, tensor_args = {} }
  -- what the call passed, tensors as their shape, dtype and device (export's probes
  -- remake them)
  for i = 1, args.n do
    local a = args[i]
    if is_tensor(a) then
      v.args[i] = { shape = a:shape(), dtype = a:dtype(), ctx = a:context() }
      v.tensor_args[i] = true
    else
      v.args[i] = a
    end
  end
  local heads = {}
  for i, y in ipairs(flat) do
    local e = frec.ent[y]
    if not e then e = frec:entry_of(y) end -- an input or parameter returned as it is
    heads[i] = e
  end
  -- gradient graph when recording and something needs a gradient
  local need_var, any = {}, false
  for i, spec in ipairs(frec.vars) do
    local nv = false
    if spec.kind == "param" then nv = spec.p.grad_req ~= "null"
    elseif spec.kind == "input" then nv = T.entry[vars_t[i]] and true or false end
    need_var[i] = nv
    any = any or nv
  end
  v.need_var = need_var
  if recording and any then
    local brec, saved = build_backward(frec, flat, vars_t, need_var)
    v.bvars = brec.vars
    v.nbheads = C.mx_graph_num_heads(brec.g)
    -- the forward graph also outputs the saved tensors that are not its variables
    v.saved = {}
    local var_pos = {}
    for i, x in ipairs(vars_t) do var_pos[x] = i end
    for k, s in ipairs(saved) do
      local vi = var_pos[s.x]
      if vi then
        v.saved[k] = { var = vi }
      else
        heads[#heads + 1] = s.entry
        v.saved[k] = { head = #heads }
      end
    end
    v.brec, v.saved_src = brec, saved
  end
  v.guards = {}
  for _, gd in ipairs(frec.guards) do
    heads[#heads + 1] = gd.entry
    v.guards[#v.guards + 1] = { head = #heads, values = gd.values }
  end
  frec:heads(heads)
  v.nheads = #heads
  v.frec = frec
  v.simple = v.nres == v.nout and v.nheads == v.nout -- one tensor per result: no repacking
  for i = 1, res.n do if oshape[i] ~= false then v.simple = false end end
  local flags = C.MX_GRAPH_OPTIMIZE + (training and C.MX_GRAPH_TRAINING or 0)
  if self.static_alloc then flags = flags + C.MX_GRAPH_STATIC_ALLOC end
  -- inference (neither recording nor training): the parameters are frozen into the
  -- executor's constants; a training-mode forward that does not record still updates its
  -- auxiliary states (BatchNorm's running mean and variance), so they stay variables
  local frozen, nfrozen = {}, 0
  if not recording and not training then
    for i, spec in ipairs(frec.vars) do
      if spec.kind == "param" then frozen[i], nfrozen = true, nfrozen + 1 end
    end
  end
  if nfrozen > 0 then
    v.fexec = G.compile_frozen(frec.g, vars_t, frozen, flags, self.who, 0)
  else
    v.fexec = G.compile(frec.g, vars_t, flags, self.who, 0)
  end
  if v.brec then
    local binputs = {}
    for i, spec in ipairs(v.bvars) do
      if spec.kind == "ograd" then binputs[i] = flat[spec.k]
      else binputs[i] = v.saved_src[spec.k].x end
    end
    v.bexec = G.compile(v.brec.g, binputs, C.MX_GRAPH_OPTIMIZE, self.who, 0)
  end
  return v, res
end

---------------------------------------------------------------- replay
local function same_values(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    local x, y = a[i], b[i]
    if x ~= y and not (x ~= x and y ~= y) then return false end
  end
  return true
end

-- Replays variant v; nil when a guard broke (the caller traces again). The input and
-- output handle arrays are the variant's own (a cached op is called from one Lua state).
local function replay(v, args)
  local fv = v.fvars
  local nin = #fv
  local inbuf = v.inbuf
  if not inbuf then
    inbuf = ffi.new("mx_tensor*[?]", nin > 0 and nin or 1)
    v.inbuf = inbuf
    v.outbuf = ffi.new("mx_tensor*[?]", v.nheads)
    v.ins = {}
  end
  local ins = v.ins
  for i = 1, nin do
    local spec = fv[i]
    local x
    if spec.kind == "input" then
      x = args[spec.i]
      if spec.key ~= nil then x = x[spec.key] end
    else
      x = spec.p._data
      if x == nil then x = spec.p:data() end
    end
    ins[i] = x
    inbuf[i - 1] = x.h
  end
  local outbuf = v.outbuf
  for k = 0, v.nheads - 1 do outbuf[k] = nil end
  if C.mx_graph_exec_run(v.fexec, nin, inbuf, v.nheads, outbuf) ~= 0 then
    error(G.last_error(), 3)
  end
  if engine_queued() then note_site(3) end -- a queued run's async error names the call
  local nout = v.nout
  local r = {}
  for k = 1, v.nheads do r[k] = wrap(outbuf[k - 1]) end
  local guards = v.guards
  for gi = 1, #guards do
    local gd = guards[gi]
    -- a value Lua cannot hold (an int64 above 2^53) breaks the guard: the re-trace's
    -- own item()/tolist() then raises the user's error at the user's line
    local ok, vals = pcall(nd._tolist, r[gd.head], 3, "guard")
    if not ok or not same_values(vals, gd.values) then return nil end
  end
  if S.recording and v.bexec then
    local saved = {}
    for k, sv in ipairs(v.saved) do saved[k] = sv.var and ins[sv.var] or r[sv.head] end
    local tins = {}
    for i = 1, nin do tins[i] = ins[i] end
    for k = nout + 1, v.nheads do r[k] = nil end
    T._record(NODE, tins, { variant = v, saved = saved }, r)
  end
  if v.simple then return r end
  local flat = {}
  for k = 1, nout do flat[k] = r[k] end
  return unflatten(flat, v.oshape, v.nres)
end

---------------------------------------------------------------- the call
local RETRACE_WARN = 8 -- traces of one signature before the warning

function CachedOp.new(fn, opts)
  opts = opts or {}
  return setmetatable({ fn = fn, name = opts.name or "the function", who = opts.who or "hybridize",
    static_alloc = opts.static_alloc == true, params = opts.params, prepare = opts.prepare,
    cache = {}, fast = nil, last = nil, tracing = false, warned = false }, CachedOp)
end

-- The call: replay the variant of this signature, or trace a new one. Callers reach it
-- by tail calls only (error levels count the user's frame as the caller's).
local ONE = { n = 1 } -- the argument list of one-argument calls (no table per call)
local function call(self, ...)
  if S.tracing or self.tracing then return self.fn(...) end
  local fast = self.fast
  local args
  if select("#", ...) == 1 then
    args = ONE
    ONE[1] = ...
  else
    args = { n = select("#", ...), ... }
  end
  local who = self.who
  if fast and sig_match(who, fast.sig, args) then
    local res = replay(fast.v, args)
    ONE[1] = nil
    if res then
      if fast.v.nres == 1 then return res[1] end
      return unpack(res, 1, fast.v.nres)
    end
  end
  if args == ONE then args = { n = 1, ... } end
  ONE[1] = nil
  local recording, training = S.recording, S.training
  local key, kerr = signature(who, args, training, recording)
  if not key then error(kerr, 2) end
  local cache = self.cache
  local list = cache[key]
  if list then
    for i = #list, 1, -1 do
      local res = replay(list[i], args)
      if res then
        self.fast = { sig = sig_of(who, args), v = list[i] }
        self.last = list[i]
        return unpack(res, 1, list[i].nres)
      end
    end
  else
    list = {}
    cache[key] = list
  end
  -- a new variant: trace (the trace's eager results are this call's results)
  local v, res = trace_variant(self, args, training, recording)
  list[#list + 1] = v
  self.fast = { sig = sig_of(who, args), v = v }
  self.last = v
  if #list == RETRACE_WARN and not self.warned then
    self.warned = true
    local what = "a traced value"
    local gd = v.guards[1]
    if gd then
      what = "the value read with item()/totable()/tolist() (" .. tostring(gd.values[1]) .. ")"
    end
    io.stderr:write(("mx: %s re-traced %d times for one input signature: the guard on "
      .. "%s keeps breaking; run it without hybridize, or make the branch a tensor op "
      .. "(mx.nd.where)\n"):format(self.name, #list, what))
  end
  if #list > 2 * RETRACE_WARN then table.remove(list, 1) end
  return unpack(res, 1, res.n)
end
CachedOp.call = call
CachedOp.__call = call

-- The variant the last call ran (export, tests): frec (its trace: frec.g the graph,
-- frec.steps the calls), nout (the first nout heads are fn's tensors), fexec / bexec
-- (the forward and backward executors), fvars (where each variable comes from).
function CachedOp:last_variant() return self.last end

-- probe(args): a trace of fn(args) in predict mode, not recorded and not cached (export
-- compares it with the last variant to see which constants followed the input's shape).
-- Returns the variant, or nil and the error when fn refuses those arguments.
function CachedOp:probe(args)
  local rec, train = S.recording, S.training
  S.recording, S.training = false, false
  local ok, v = pcall(trace_variant, self, args, false, false)
  S.recording, S.training = rec, train
  if not ok then return nil, v end
  return v
end

-- Drops every traced variant (what fn reads changed shape: the next call traces again).
function CachedOp:clear()
  self.cache, self.fast, self.last, self.warned = {}, nil, nil, false
end

return CachedOp
