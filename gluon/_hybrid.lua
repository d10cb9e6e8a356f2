-- mx.gluon._hybrid — hybridize: a HybridBlock's forward traced into one graph per input
-- signature (MXNet's CachedOp), replayed through the graph executor (core/src/
-- graph_exec.c) with one engine push forward and one backward; autograd records ONE
-- node for the whole block. docs/hybridize.md is the user's page.
--
-- The trace runs forward eagerly with a tracer installed (mx._dispatch's trace mode):
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
local lib = require("mx._lib")
local S = require("mx._state")
local D = require("mx._dispatch")
local nd = require("mx.nd")
local T = require("mx._tape")

local ffi, C = lib.ffi, lib.C
local is_tensor = nd.is_tensor
local wrap = nd._wrap
local note_site = nd._note_site
local engine_queued = C.mx_engine_queued
local fill_params = nd._fill_params
local VIEW = nd._view_ops
local type, pairs, ipairs, tostring, error, pcall, unpack, select =
  type, pairs, ipairs, tostring, error, pcall, unpack, select
local concat = table.concat

local H = {}

local function last_error() return ffi.string(C.mx_last_error()) end

local int_t = ffi.typeof("int[?]")
local function ints(t, n)
  n = n or #t
  local a = int_t(n > 0 and n or 1)
  for i = 1, n do a[i - 1] = t[i] end
  return a
end

-- The ops the trace maps the view pseudo-ops to (real op-table ops the graph can run).
local OPS = {}
local function op_entry(name)
  local o = OPS[name]
  if o then return o end
  local ot = nd._optable_by_name and nd._optable_by_name[name]
  if not ot then
    for _, e in ipairs(require("mx._optable")) do
      if e.name == name then ot = e break end
    end
  end
  OPS[name] = assert(ot, name)
  return OPS[name]
end

---------------------------------------------------------------- the recorder
-- A Rec builds one C graph: ent maps NDArray boxes to {node, out}; vars lists the
-- graph's variables without a value in node order ({kind=, ...}: how a replay finds
-- the tensor); steps lists the traced calls for the gradient graph.
local Rec = {}
Rec.__index = Rec

local function new_rec(resolve)
  local g = ffi.gc(C.mx_graph_new(), C.mx_graph_free)
  if g == nil then error("hybridize: out of memory", 0) end
  return setmetatable({ g = g, ent = setmetatable({}, { __mode = "k" }), vars = {},
    steps = {}, names = {}, nconst = 0, resolve = resolve, guards = {} }, Rec)
end

function Rec:name(base)
  local k = self.names[base] or 0
  self.names[base] = k + 1
  return base .. k
end

function Rec:var(name, x, spec)
  local id = C.mx_graph_add_var(self.g, name)
  if id < 0 then error("hybridize: " .. last_error(), 0) end
  if spec then
    self.vars[#self.vars + 1] = spec
  else
    if C.mx_graph_set_value(self.g, id, x.h) ~= 0 then error("hybridize: " .. last_error(), 0) end
  end
  local e = { id, 0 }
  self.ent[x] = e
  return e
end

-- The entry of tensor x: made by the trace, else a variable (resolve says which kind;
-- nil: a constant the graph keeps).
function Rec:entry_of(x)
  local e = self.ent[x]
  if e then return e end
  local name, spec = self.resolve(x)
  if name then return self:var(name, x, spec) end
  self.nconst = self.nconst + 1
  return self:var("_const" .. (self.nconst - 1), x, nil)
end

function Rec:add(opdef, P, ins, nout, name)
  local n = #ins
  local nodes, outs = {}, {}
  for i = 1, n do
    local e = self:entry_of(ins[i])
    nodes[i], outs[i] = e[1], e[2]
  end
  local id = C.mx_graph_add_op(self.g, opdef.id, name or self:name(opdef.name), P, n,
    ints(nodes, n), ints(outs, n))
  if id < 0 then error("hybridize: " .. last_error(), 0) end
  if nout and C.mx_graph_node_num_outputs(self.g, id) ~= nout then
    error("hybridize: op " .. opdef.name .. ": the graph node has "
      .. C.mx_graph_node_num_outputs(self.g, id) .. " outputs, the call made " .. nout, 0)
  end
  return id
end

local function params_of(opdef, opts)
  if opts and opts._params then return opts._params end
  local P, _, err = fill_params(opdef, opts)
  if err then error("hybridize: " .. err, 0) end
  return P
end

-- "file:line: " of the first caller outside luamx (the user's forward), for errors
-- raised from inside the tracer (its depth below the user's call varies).
local function user_where()
  for lv = 3, 40 do
    local info = debug.getinfo(lv, "Sl")
    if not info then break end
    local src = info.short_src or ""
    if info.currentline and info.currentline > 0 and not src:find("mx/", 1, true)
        and not src:find("^%[") then
      return src .. ":" .. info.currentline .. ": "
    end
  end
  return ""
end

-- An op writing into a tensor the trace did not make (out= an input, a parameter or a
-- captured tensor; x[...] = v on one): the trace rebinds the name, but a replay never
-- updates the tensor itself, so the eager call and the replays would differ.
function Rec:check_write(outs, opname)
  for k = 1, #outs do
    local e = self.ent[outs[k]]
    if e and C.mx_graph_node_op(self.g, e[1]) == -1 then
      error(user_where() .. "hybridize: " .. tostring(opname) .. " writes in place into '"
        .. ffi.string(C.mx_graph_node_name(self.g, e[1])) .. "', which the forward did not "
        .. "make (an input, a parameter or a captured tensor): a hybridized graph cannot "
        .. "update it; compute a new tensor instead (y = nd.relu(x), not out=x)", 0)
    end
  end
end

-- The tracer: fn(kind, op, inputs, opts, outputs) (mx._dispatch's header).
function Rec:tracer()
  return function(kind, op, ins, opts, outs)
    local id
    if kind == "op" or kind == "create" or (kind == "view" and op.id) then
      id = self:add(op, params_of(op, opts), ins, #outs)
    elseif kind == "view" then
      local x, r = ins[1], outs[1]
      if op == VIEW.reshape then
        id = self:add(op_entry("reshape"), params_of(op_entry("reshape"), { shape = r:shape() }), { x })
      elseif op == VIEW.detach then
        id = self:add(op_entry("stop_gradient"), nil, { x })
      elseif op == VIEW.slice0 then
        local sa = op_entry("slice_axis")
        id = self:add(sa, params_of(sa, { axis = 1, begin = opts.begin + 1, ["end"] = opts["end"] }), { x })
      elseif op == VIEW.index0 then
        local sa = op_entry("slice_axis")
        local mid = self:add(sa, params_of(sa, { axis = 1, begin = opts.index, ["end"] = opts.index }), { x })
        local rs = op_entry("reshape")
        local tmp = {} -- a stand-in box for the slice's entry
        self.ent[tmp] = { mid, 0 }
        local P = params_of(rs, { shape = r:shape() })
        local nid = C.mx_graph_add_op(self.g, rs.id, self:name("reshape"), P, 1, ints { mid }, ints { 0 })
        if nid < 0 then error("hybridize: " .. last_error(), 0) end
        id = nid
      else
        error("hybridize: cannot trace the view " .. tostring(op.name), 0)
      end
    elseif kind == "assign" then
      -- x[...] = v: the graph computes a new value of x; later reads see it
      id = self:add(op, params_of(op, opts), ins, 1)
    else
      error("hybridize: cannot trace a call of kind " .. tostring(kind), 0)
    end
    self:check_write(outs, op and op.name or kind) -- after add: the inputs have entries
    for k = 1, #outs do self.ent[outs[k]] = { id, k - 1 } end
    self.steps[#self.steps + 1] = { op = op, kind = kind, ins = ins, opts = opts, outs = outs }
  end
end

-- Guards: the values a trace read (item/tolist/totable) become extra outputs checked
-- at replay.
function Rec:guard(x, values)
  local e = self.ent[x]
  if not e then return end -- a tensor from outside the trace: its value is an input
  self.guards[#self.guards + 1] = { entry = e, values = values, x = x }
end

function Rec:heads(list)
  local nodes, outs = {}, {}
  for i, e in ipairs(list) do nodes[i], outs[i] = e[1], e[2] end
  if C.mx_graph_set_heads(self.g, #list, ints(nodes), ints(outs)) ~= 0 then
    error("hybridize: " .. last_error(), 0)
  end
end

local function pack(...) return { n = select("#", ...), ... } end

-- Runs fn(...) eagerly under rec's tracer (and guard hook); returns fn's results packed.
local function traced(rec, fn, ...)
  local prev = D.set_tracer(rec:tracer())
  local pg = S.guard
  S.guard = function(x, v) rec:guard(x, v) end
  local res = { n = 0 }
  -- fn runs INSIDE the pcall: an error in the traced forward must still uninstall the
  -- tracer and the guard hook (else every later eager op is traced into a dead graph)
  local ok, err = pcall(function(...) res = pack(fn(...)) end, ...)
  S.guard = pg
  D.set_tracer(prev)
  if not ok then error(err, 0) end
  return res
end
H._traced = traced

local function compile(rec, inputs, flags)
  local n = #inputs
  local ds = ffi.new("mx_desc[?]", n > 0 and n or 1)
  for i = 1, n do
    local x = inputs[i]
    local d = ds[i - 1]
    local s = x:shape()
    d.ndim = #s
    for j = 1, #s do d.shape[j - 1] = s[j] end
    d.dtype = C.mx_tensor_dtype(x.h)
    d.dev_type = C.mx_tensor_dev_type(x.h)
    d.dev_id = C.mx_tensor_dev_id(x.h)
  end
  local pe = ffi.new("mx_graph_exec*[1]")
  if C.mx_graph_exec_new(rec.g, n, ds, flags, pe) ~= 0 then error("hybridize: " .. last_error(), 0) end
  return ffi.gc(pe[0], C.mx_graph_exec_free)
end

local function run(exec, inputs, nout, level)
  local n = #inputs
  local ins = ffi.new("mx_tensor*[?]", n > 0 and n or 1)
  for i = 1, n do ins[i - 1] = inputs[i].h end
  local outs = ffi.new("mx_tensor*[?]", nout)
  if C.mx_graph_exec_run(exec, n, ins, nout, outs) ~= 0 then error(last_error(), level + 1) end
  if engine_queued() then note_site(level + 1) end -- a later async error names this line
  local r = {}
  for k = 1, nout do r[k] = wrap(outs[k - 1]) end
  return r
end
H._compile, H._run = compile, run

---------------------------------------------------------------- gradient graph
-- Builds the backward graph of a forward trace: ograd variables first (one per
-- output), then the forward tensors the formulas read (saved: the forward graph outputs
-- them, or they are the forward's own inputs). needs[x]: forward tensor x leads to a
-- gradient. Returns brec and the list of forward variables whose gradient it outputs.
local EMPTY = {}
local function build_backward(frec, outs, fvars_tensors, need_var)
  local saved, saved_of = {}, {}
  local brec
  brec = new_rec(function(x)
    local fe = frec.ent[x]
    if not fe then return nil end -- a constant made outside both traces
    local k = saved_of[x]
    if not k then
      saved[#saved + 1] = { entry = fe, x = x }
      k = #saved
      saved_of[x] = k
    end
    return "_saved" .. (k - 1), { kind = "saved", k = k }
  end)
  -- which forward tensors need a gradient
  local needs = setmetatable({}, { __mode = "k" })
  for i, x in ipairs(fvars_tensors) do if need_var[i] then needs[x] = true end end
  for _, st in ipairs(frec.steps) do
    local any = false
    if not st.op.nondiff and st.op.grad then
      for _, x in ipairs(st.ins) do any = any or needs[x] == true end
    end
    if any then for _, y in ipairs(st.outs) do needs[y] = true end end
  end
  local grads = setmetatable({}, { __mode = "k" })
  local prev_rec, prev_train = S.recording, S.training
  S.recording = false
  local ok, err = pcall(function()
    local tr = brec:tracer()
    local prev = D.set_tracer(nil)
    local ograds = {}
    for k, y in ipairs(outs) do
      local o = nd.ones_like(y) -- a stand-in for the k-th output gradient (untraced)
      brec:var("_ograd" .. (k - 1), o, { kind = "ograd", k = k })
      ograds[k] = o
    end
    D.set_tracer(tr)
    -- an output returned twice (y, y; x, x) sums its gradients: traced, so the sum is
    -- a graph node (an untraced one became a constant: every replay's gradient used
    -- ones for the output gradients)
    for k, y in ipairs(outs) do
      if needs[y] then grads[y] = grads[y] and nd.add(grads[y], ograds[k]) or ograds[k] end
    end
    for si = #frec.steps, 1, -1 do
      local st = frec.steps[si]
      local g, have = {}, false
      for k, y in ipairs(st.outs) do
        g[k] = grads[y]
        have = have or g[k] ~= nil
      end
      if have and not st.op.nondiff and st.op.grad then
        for k, y in ipairs(st.outs) do
          if g[k] == nil then g[k] = nd.zeros_like(y) end
        end
        local need = {}
        for j, x in ipairs(st.ins) do need[j] = needs[x] == true end
        local dx = st.op.grad(nd, st.ins, st.outs, g, st.opts or EMPTY, need)
        for j, x in ipairs(st.ins) do
          local d = dx[j]
          if need[j] and d then grads[x] = grads[x] and nd.add(grads[x], d) or d end
        end
      end
    end
    -- heads: the gradient of every forward variable that needs one
    local heads = {}
    for i, x in ipairs(fvars_tensors) do
      if need_var[i] then
        heads[#heads + 1] = brec:entry_of(grads[x] or nd.zeros_like(x))
      end
    end
    D.set_tracer(prev)
    brec:heads(heads)
  end)
  D.set_tracer(nil)
  S.recording, S.training = prev_rec, prev_train
  if not ok then error(err, 0) end
  return brec, saved
end

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
