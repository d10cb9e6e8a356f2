-- mx.graph.trace — hybridize's recorder (gluon/_hybrid.lua is its user): a Rec turns
-- the calls mx.nd.dispatch's tracer reports (ops, creations, views, index assignments) into
-- a C graph (core/src/graph.c); traced() runs a function under a Rec; compile/run wrap
-- the graph executor; build_backward makes the gradient graph of a forward trace by
-- calling the op table's gradient formulas (eager autograd's) on the trace's tensors with
-- a second Rec recording what they do.
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local D = require("mx.nd.dispatch")
local nd = require("mx.nd")

local ffi, C = lib.ffi, lib.C
local wrap = nd._wrap
local note_site = nd._note_site
local engine_queued = C.mx_engine_queued
local fill_params = nd._fill_params
local VIEW = nd._view_ops
local ipairs, tostring, error, pcall, select = ipairs, tostring, error, pcall, select

local R = {}

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
    for _, e in ipairs(require("mx.core.ops.optable")) do
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

-- The tracer: fn(kind, op, inputs, opts, outputs) (mx.nd.dispatch's header).
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
R.traced = traced

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
R.compile, R.run = compile, run

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

R.new_rec, R.build_backward, R.last_error = new_rec, build_backward, last_error

return R
