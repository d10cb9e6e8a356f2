-- mx.gluon._hybrid — hybridize: a HybridBlock's forward traced into one graph per input
-- signature (MXNet's CachedOp), replayed through the graph executor (core/src/
-- graph_exec.c) with one engine push forward and one backward; autograd records ONE
-- node for the whole block. docs/hybridize.md is the user's page.
--
-- The trace runs forward eagerly with a tracer installed (mx.nd.dispatch's trace mode):
-- every op, creation, view and index assignment becomes a node of a C graph; tensors
-- the trace did not make are the block's inputs, its parameters (by their data arrays)
-- or constants (captured tensors: the graph keeps their values). The gradient graph is
-- made the same way: the op table's gradient formulas (the ones eager autograd runs)
-- are called on the trace's tensors with the tracer on, so there is one definition of
-- every gradient.
--
-- Guards: a trace that turns a tensor into a Lua value (x:item(), x:totable(),
-- x:tolist(), x:asscalar()) records the value; a replay checks it and, when it differs,
-- traces again and caches that variant too (MXNet silently reuses the first branch:
-- apache/mxnet#16932). Shapes, dtypes, the device, the train mode and the Lua values
-- of non-tensor arguments are part of the signature, so reading them needs no guard.
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local nd = require("mx.nd")
local T = require("mx.autograd.tape")

local ffi, C = lib.ffi, lib.C
local is_tensor = nd.is_tensor
local wrap = nd._wrap
local note_site = nd._note_site
local engine_queued = C.mx_engine_queued
local type, pairs, ipairs, tostring, error, pcall, unpack, select =
  type, pairs, ipairs, tostring, error, pcall, unpack, select
local concat = table.concat

local R = require("mx.graph.trace")
local new_rec, traced, compile, run = R.new_rec, R.traced, R.compile, R.run
local build_backward, last_error = R.build_backward, R.last_error

local H = {}

---------------------------------------------------------------- the cached op
-- Tape node of a replayed block: inputs = the forward variables' tensors, gradient =
-- the backward executor.
local HYBRID = { name = "hybrid_block", outputs = { "out" }, nin = -1 }
HYBRID.grad = function(_, x, _, g, p)
  local v = p.variant
  local ins = {}
  for _, spec in ipairs(v.bvars) do
    if spec.kind == "ograd" then
      ins[#ins + 1] = g[spec.k]
    else
      ins[#ins + 1] = p.saved[spec.k]
    end
  end
  local r = run(v.bexec, ins, v.nbheads, 1)
  local dx, k = {}, 0
  for i = 1, #x do
    if v.need_var[i] then
      k = k + 1
      dx[i] = r[k]
    end
  end
  return dx
end

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
local function value_sig(v, depth, i)
  local tv = type(v)
  if tv == "number" then return ("%.17g"):format(v) end
  if is_tensor(v) then
    if depth > 1 then
      return nil, ("hybridize: argument %d holds a tensor in a nested table: pass tensors "
        .. "as arguments or one table deep ({x, y})"):format(i)
    end
    return "T" .. tensor_sig(v)
  end
  if tv == "table" then
    local parts = {}
    for _, k in ipairs(sorted_keys(v)) do
      local sv, err = value_sig(v[k], depth + 1, i)
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

local function signature(args, training, recording, need_mask)
  local parts = { training and "T" or "P", recording and "R" or "-", need_mask }
  for i = 1, args.n do
    local a = args[i]
    if is_tensor(a) then
      parts[#parts + 1] = tensor_sig(a)
    else
      local sv, err = value_sig(a, 0, i)
      if not sv then return nil, err end
      parts[#parts + 1] = type(a) .. "=" .. sv
    end
  end
  parts[#parts + 1] = dup_pattern(args)
  return concat(parts, "|")
end

-- The block's parameters by their data arrays (filled lazily: deferred initialisation
-- makes the arrays during the trace).
local function param_resolver(self, args, vars_t)
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
  return function(x)
    local at = input_index[x]
    if at then
      vars_t[#vars_t + 1] = x
      local i = at.i
      local name = nt == 1 and "data" or "data" .. (i - 1)
      if at.key ~= nil then name = name .. "_" .. tostring(at.key) end
      return name, { kind = "input", i = i, key = at.key }
    end
    if not map then map = {} end
    local pe = map[x]
    if not pe then -- (re)scan: deferred initialisation makes arrays during the trace
      local d = self:collect_params()
      for _, name in ipairs(d:keys()) do
        local p = d:get(name)
        if p._data ~= nil then map[p._data] = { name = name, p = p } end
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

-- Traces self:forward(args) into a new variant; returns it and the trace's own results.
local function trace_variant(self, args, training, recording)
  -- parameters still waiting for their shape are initialised by one plain forward
  -- first: their initialisers' ops must not become part of the graph
  local d = self:collect_params()
  for _, name in ipairs(d:keys()) do
    if d:get(name)._data == nil then
      local ok, err = pcall(function()
        require("mx.autograd").pause(function() self:forward(unpack(args, 1, args.n)) end)
      end)
      if not ok then error(err, 0) end
      break
    end
  end
  local vars_t = {}
  local frec = new_rec(param_resolver(self, args, vars_t))
  local inside = rawget(self, "_tracing")
  rawset(self, "_tracing", true)
  local ok, res = pcall(traced, frec, function() return self:forward(unpack(args, 1, args.n)) end)
  rawset(self, "_tracing", inside)
  if not ok then error(res, 0) end
  local flat, oshape = flatten_outputs(res)
  if not flat then
    error(("hybridize: the forward of %s must return tensors (or lists of tensors): %s")
      :format(tostring(getmetatable(self).__name), oshape), 3)
  end
  local v = { oshape = oshape, nres = res.n, nout = #flat, fvars = frec.vars }
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
  if rawget(self, "_static_alloc") then flags = flags + C.MX_GRAPH_STATIC_ALLOC end
  v.fexec = compile(frec, vars_t, flags)
  if v.brec then
    local binputs = {}
    for i, spec in ipairs(v.bvars) do
      if spec.kind == "ograd" then binputs[i] = flat[spec.k]
      else binputs[i] = v.saved_src[spec.k].x end
    end
    v.bexec = compile(v.brec, binputs, C.MX_GRAPH_OPTIMIZE)
  end
  return v, res
end

local function same_values(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    local x, y = a[i], b[i]
    if x ~= y and not (x ~= x and y ~= y) then return false end
  end
  return true
end

-- Replays variant v; nil when a guard broke (the caller traces again). The input and
-- output handle arrays are the variant's own (a block is called from one Lua state).
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
    error(last_error(), 3)
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
    T._record(HYBRID, tins, { variant = v, saved = saved }, r)
  end
  if v.simple then return r end
  local flat = {}
  for k = 1, nout do flat[k] = r[k] end
  return unflatten(flat, v.oshape, v.nres)
end

local RETRACE_WARN = 8 -- traces of one signature before the warning

-- The fast check of the last replayed signature: tensor arguments' shapes, dtypes,
-- devices and gradient flags, other arguments' values, the mode flags.
local shbuf = ffi.new("int64_t[8]")
local function sig_of(args)
  local sig = { n = args.n, training = S.training, recording = S.recording }
  for i = 1, args.n do
    local a = args[i]
    if is_tensor(a) then
      local nd_ = C.mx_tensor_shape(a.h, shbuf)
      local shp = {}
      for d = 0, nd_ - 1 do shp[d + 1] = shbuf[d] end
      local same = 0 -- the earlier argument that is this very tensor (f(x, x))
      for j = 1, i - 1 do
        if rawequal(args[j], a) then
          same = j
          break
        end
      end
      sig[i] = { shp = shp, dtype = C.mx_tensor_dtype(a.h), dt = C.mx_tensor_dev_type(a.h),
        di = C.mx_tensor_dev_id(a.h), g = T.entry[a] and true or false, same = same }
    elseif type(a) == "table" then
      sig[i] = { tsig = value_sig(a, 0, i) }
      sig.tables = true
    else
      sig[i] = { value = a }
    end
  end
  if sig.tables then sig.dup = dup_pattern(args) end -- tensors inside tables too
  return sig
end

local function sig_match(sig, args)
  if args.n ~= sig.n or S.training ~= sig.training or S.recording ~= sig.recording then
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
      local same = 0
      for j = 1, i - 1 do
        if rawequal(args[j], a) then
          same = j
          break
        end
      end
      if same ~= s.same then return false end
    elseif s.tsig then
      if type(a) ~= "table" or value_sig(a, 0, i) ~= s.tsig then return false end
    elseif a ~= s.value then
      return false
    end
  end
  if sig.dup and dup_pattern(args) ~= sig.dup then return false end
  return true
end

-- The call of an active HybridBlock (block.lua's block_call comes here).
local ONE = { n = 1 } -- the argument list of one-argument calls (no table per call)
function H.call(self, ...)
  if S.tracing or rawget(self, "_tracing") then return self:forward(...) end
  local fast = rawget(self, "_fast")
  local args
  if select("#", ...) == 1 then
    args = ONE
    ONE[1] = ...
  else
    args = { n = select("#", ...), ... }
  end
  if fast and sig_match(fast.sig, args) then
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
  local mask = {}
  for i = 1, args.n do
    local a = args[i]
    mask[i] = is_tensor(a) and T.entry[a] and "g" or "-"
  end
  local key, kerr = signature(args, training, recording, concat(mask))
  if not key then error(kerr, 2) end
  local cache = rawget(self, "_cached")
  if not cache then
    cache = {}
    rawset(self, "_cached", cache)
  end
  local list = cache[key]
  if list then
    for i = #list, 1, -1 do
      local res = replay(list[i], args)
      if res then
        rawset(self, "_fast", { sig = sig_of(args), v = list[i] })
        rawset(self, "_last_variant", list[i])
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
  rawset(self, "_fast", { sig = sig_of(args), v = v })
  rawset(self, "_last_variant", v)
  if #list == RETRACE_WARN and not rawget(self, "_warned_retrace") then
    rawset(self, "_warned_retrace", true)
    local what = "a traced value"
    local gd = v.guards[1]
    if gd then
      what = "the value read with item()/totable()/tolist() (" .. tostring(gd.values[1]) .. ")"
    end
    io.stderr:write(("mx.gluon: %s re-traced %d times for one input signature: the guard on "
      .. "%s keeps breaking; run it without hybridize, or make the branch a tensor op "
      .. "(mx.nd.where)\n"):format(tostring(getmetatable(self).__name), #list, what))
  end
  if #list > 2 * RETRACE_WARN then table.remove(list, 1) end
  return unpack(res, 1, res.n)
end

-- The variant the last call ran (export, tests).
function H.last_variant(self)
  return rawget(self, "_last_variant")
end

return H
