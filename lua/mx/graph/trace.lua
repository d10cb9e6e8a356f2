-- mx.graph.trace — the recorder of the cached op (mx.graph.cached_op): a Rec turns the
-- calls mx.nd.dispatch's tracer reports (ops, creations, views, index assignments) into
-- a C graph (through mx.graph.cgraph); traced() runs a function under a Rec;
-- build_backward makes the gradient graph of a forward trace by calling the op table's
-- gradient formulas (eager autograd's) on the trace's tensors with a second Rec
-- recording what they do.
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local caller = require("mx.core.caller")
local D = require("mx.nd.dispatch")
local nd = require("mx.nd")
local G = require("mx.graph.cgraph")

local ffi, C = lib.ffi, lib.C
local fill_params = nd._fill_params
local VIEW = nd._view_ops
local ops_by_name = lib.ops_by_name
local ipairs, tostring, error, pcall, select, setmetatable =
  ipairs, tostring, error, pcall, select, setmetatable

local R = {}

---------------------------------------------------------------- the recorder
-- A Rec builds one C graph: ent maps NDArray boxes to {node, out}; vars lists the
-- graph's variables without a value in node order ({kind=, ...}: how a replay finds
-- the tensor); steps lists the traced calls for the gradient graph. who prefixes its
-- errors ("hybridize", "Executor").
local Rec = {}
Rec.__index = Rec

local function new_rec(resolve, who)
  who = who or "hybridize"
  return setmetatable({ g = G.new(who, 0), ent = setmetatable({}, { __mode = "k" }), vars = {},
    steps = {}, names = {}, nconst = 0, resolve = resolve, guards = {}, who = who }, Rec)
end

function Rec:name(base)
  local k = self.names[base] or 0
  self.names[base] = k + 1
  return base .. k
end

function Rec:var(name, x, spec)
  local id = G.var(self.g, name, self.who, 0)
  if spec then
    self.vars[#self.vars + 1] = spec
  else
    G.value(self.g, id, x, self.who, 0)
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

local nodes_buf, outs_buf = {}, {}
function Rec:add(opdef, P, ins, nout, name)
  local n = #ins
  for i = 1, n do
    local e = self:entry_of(ins[i])
    nodes_buf[i], outs_buf[i] = e[1], e[2]
  end
  local id = G.op(self.g, opdef.id, name or self:name(opdef.name), P, n, nodes_buf, outs_buf,
    self.who, 0)
  if nout and C.mx_graph_node_num_outputs(self.g, id) ~= nout then
    error(self.who .. ": op " .. opdef.name .. ": the graph node has "
      .. C.mx_graph_node_num_outputs(self.g, id) .. " outputs, the call made " .. nout, 0)
  end
  return id
end

function Rec:params_of(opdef, opts)
  if opts and opts._params then return opts._params end
  local P, _, err = fill_params(opdef, opts)
  if err then error(self.who .. ": " .. err, 0) end
  return P
end

-- An op writing into a tensor the trace did not make (out= an input, a parameter or a
-- captured tensor; x[...] = v on one): the trace rebinds the name, but a replay never
-- updates the tensor itself, so the eager call and the replays would differ.
function Rec:check_write(outs, opname)
  for k = 1, #outs do
    local e = self.ent[outs[k]]
    if e and C.mx_graph_node_op(self.g, e[1]) == -1 then
      error(caller.where() .. self.who .. ": " .. tostring(opname) .. " writes in place into '"
        .. ffi.string(C.mx_graph_node_name(self.g, e[1])) .. "', which the forward did not "
        .. "make (an input, a parameter or a captured tensor): a hybridized graph cannot "
        .. "update it; compute a new tensor instead (y = nd.relu(x), not out=x)", 0)
    end
  end
end

-- The tracer: fn(kind, op, inputs, opts, outputs) (mx.nd.dispatch's header). Views
-- become the real ops the graph runs (reshape, stop_gradient, slice_axis).
function Rec:tracer()
  local reshape, slice_axis = ops_by_name.reshape, ops_by_name.slice_axis
  return function(kind, op, ins, opts, outs)
    local id
    if kind == "op" or kind == "create" or (kind == "view" and op.id) then
      id = self:add(op, self:params_of(op, opts), ins, #outs)
    elseif kind == "view" then
      local x, r = ins[1], outs[1]
      if op == VIEW.reshape then
        id = self:add(reshape, self:params_of(reshape, { shape = r:shape() }), { x })
      elseif op == VIEW.detach then
        id = self:add(ops_by_name.stop_gradient, nil, { x })
      elseif op == VIEW.slice0 then
        id = self:add(slice_axis, self:params_of(slice_axis,
          { axis = 1, begin = opts.begin + 1, ["end"] = opts["end"] }), { x })
      elseif op == VIEW.index0 then
        local mid = self:add(slice_axis, self:params_of(slice_axis,
          { axis = 1, begin = opts.index, ["end"] = opts.index }), { x })
        id = G.op(self.g, reshape.id, self:name("reshape"),
          self:params_of(reshape, { shape = r:shape() }), 1, { mid }, { 0 }, self.who, 0)
      else
        error(self.who .. ": cannot trace the view " .. tostring(op.name), 0)
      end
    elseif kind == "assign" then
      -- x[...] = v: the graph computes a new value of x; later reads see it
      id = self:add(op, self:params_of(op, opts), ins, 1)
    else
      error(self.who .. ": cannot trace a call of kind " .. tostring(kind), 0)
    end
    self:check_write(outs, op and op.name or kind) -- after add: the inputs have entries
    for k = 1, #outs do self.ent[outs[k]] = { id, k - 1 } end
    self.steps[#self.steps + 1] = { op = op, kind = kind, ins = ins, opts = opts, outs = outs }
  end
end

-- Guards: the values a trace read (item/tolist/totable/tostring) become extra outputs
-- checked at replay. A tensor the trace did not make (an input, a parameter's array) is
-- guarded through its variable: the replay's value is the call's, which may differ.
function Rec:guard(x, values)
  local e = self:entry_of(x)
  self.guards[#self.guards + 1] = { entry = e, values = values, x = x }
end

function Rec:heads(list)
  local nodes, outs = {}, {}
  for i, e in ipairs(list) do nodes[i], outs[i] = e[1], e[2] end
  G.heads(self.g, #list, nodes, outs, self.who, 0)
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
  end, frec.who)
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

R.new_rec, R.build_backward = new_rec, build_backward

return R
