-- mx.graph.executor — running symbols: Symbol:bind / simple_bind / eval and the Executor
-- (MXNet 1.x's GraphExecutor API; docs/symbol.md). An executor runs its symbol as a
-- cached op (mx.graph.cached_op, what a hybridized block runs on): the DAG evaluated
-- once per input signature with mx.nd's ops under the tracer, then replayed as one
-- graph; forward{is_train=true} records it for autograd, and backward runs the gradient
-- graph made from the op table's gradient formulas (the ones eager autograd runs),
-- writing the argument gradients into the executor's grad arrays (grad_req write / add
-- / null). eval runs the DAG eagerly, once.
local nd = require("mx.nd")
local S = require("mx.core.state")
local context = require("mx.context")
local autograd = require("mx.autograd")
local CachedOp = require("mx.graph.cached_op")

local type, pairs, ipairs, error, tostring, unpack, select, setmetatable =
  type, pairs, ipairs, error, tostring, unpack, select, setmetatable

local E = {}

---------------------------------------------------------------- DAG evaluation
-- Evaluates sym's DAG with mx.nd on the tensors vals[node] of its variables; returns
-- the outputs' tensors (a list). Every call goes through mx.nd's wrappers, so the
-- hybridize tracer sees it.
-- Creation nodes whose shape holds unknown dims (MXNet 1.x files: a _zeros begin state
-- (L*D, 0, H) whose 0 the RNN's state input decides): their shapes for these values, by
-- the whole graph's inference (nil when the symbol has none).
local function creation_shapes(sym, topo, vals)
  local has = rawget(sym, "_unknown_creation")
  if has == nil then
    has = false
    for _, node in ipairs(topo) do
      local sh = node.op and node.op.ctx and node.opts and node.opts.shape
      if type(sh) == "table" then
        for _, d in ipairs(sh) do if d < 0 then has = true end end
      end
    end
    rawset(sym, "_unknown_creation", has)
  end
  if not has then return nil end
  local given = {}
  for _, node in ipairs(topo) do
    if node.op == nil and nd.is_tensor(vals[node]) then given[node.name] = vals[node]:shape() end
  end
  local internals = sym:get_internals()
  local _, outs = internals:infer_shape_partial(given)
  local at = {}
  for i, ent in ipairs(internals.outputs) do
    local n = ent[1]
    local sh = n.op and n.op.ctx and n.opts and n.opts.shape
    if type(sh) == "table" and ent[2] == 1 then
      for d = 1, #sh do
        if sh[d] < 0 and (outs[i][d] or 0) <= 0 then
          error("symbol: the shape of '" .. n.name .. "' (" .. n.op.name .. ", dim " .. d
            .. " unknown) could not be inferred from the inputs", 0)
        end
      end
      at[n] = outs[i]
    end
  end
  return at
end

local function takes_shape(op)
  for _, p in ipairs(op.params) do if p.name == "shape" then return true end end
  return false
end

local function eval_dag(sym, vals)
  local res = {} -- node -> list of outputs
  local topo = sym:_topo()
  local shapes = creation_shapes(sym, topo, vals)
  for _, node in ipairs(topo) do
    if node.op == nil then
      local v = vals[node] or node.value
      if v == nil then
        error("symbol: no value for the variable '" .. node.name .. "'", 0)
      end
      res[node] = { v }
    else
      local args, n = {}, 0
      for j, ent in ipairs(node.inputs) do
        local src = res[ent[1]]
        args[j] = src[ent[2]]
        n = j
      end
      local f = nd[node.op.name]
      if f == nil and not node.op.block_node then
        error("symbol: op '" .. node.op.name .. "' has no mx.nd function", 0)
      end
      local opts = node.opts
      local out
      if node.op.block_node then
        out = node.op.block_node.run(node, args)
      elseif node.op.ctx then
        -- creation ops with a shape take it first and not among the options (zeros); the
        -- others only options (arange)
        if takes_shape(node.op) then
          local sh = shapes and shapes[node] or (opts and opts.shape)
          local o = {}
          for k, v in pairs(opts or {}) do if k ~= "shape" then o[k] = v end end
          out = { f(sh, o) }
        else
          out = { f(opts or {}) }
        end
      else
        args[n + 1] = opts or {}
        out = { f(unpack(args, 1, n + 1)) }
      end
      res[node] = out
    end
  end
  local outs = {}
  for k, ent in ipairs(sym.outputs) do outs[k] = res[ent[1]][ent[2]] end
  return outs
end
E._eval_dag = eval_dag

---------------------------------------------------------------- the cached op
-- The cached op evaluating sym with its inputs in list_inputs order.
local function runner(sym)
  local vars = {}
  local by_name = {}
  for _, node in ipairs(sym:_topo()) do
    if node.op == nil and not node.value then by_name[node.name] = node end
  end
  for i, name in ipairs(sym:list_inputs()) do vars[i] = by_name[name] end
  return CachedOp.new(function(...)
    local vals = {}
    for i = 1, select("#", ...) do vals[vars[i]] = (select(i, ...)) end
    return unpack(eval_dag(sym, vals))
  end, { name = "the symbol", who = "Executor" })
end

---------------------------------------------------------------- Executor
local Executor = {}
Executor.__index = Executor
E.Executor = Executor

local function as_list(who, what, names, given, level)
  if given == nil then return {} end
  if type(given) ~= "table" then
    error(who .. ": " .. what .. " must be a list or a table name -> array, got " .. type(given),
      level + 1)
  end
  local list = {}
  if given[1] ~= nil or next(given) == nil then
    for i = 1, #names do list[i] = given[i] end
    if #given > #names then
      error(who .. ": " .. #given .. " " .. what .. " for " .. #names .. " names", level + 1)
    end
  else
    local known = {}
    for _, n in ipairs(names) do known[n] = true end
    for k in pairs(given) do
      if not known[k] then
        error(who .. ": " .. what .. " names '" .. tostring(k) .. "', which is not one of ("
          .. table.concat(names, ", ") .. ")", level + 1)
      end
    end
    for i, n in ipairs(names) do list[i] = given[n] end
  end
  return list
end

local function reqs_of(who, names, req, level)
  local r = {}
  for i, n in ipairs(names) do
    local v = req
    if type(req) == "table" then v = req[n] or req[i] or "null" end
    v = v or "write"
    if v ~= "write" and v ~= "add" and v ~= "null" then
      error(who .. ": grad_req for '" .. n .. "' must be 'write', 'add' or 'null', got "
        .. tostring(v), level + 1)
    end
    r[i] = v
  end
  return r
end

-- Symbol:bind(ctx, args, {args_grad=, grad_req=, aux_states=})
function E.bind(sym, ctx, args, opts, level)
  level = level or 2
  opts = opts or {}
  context.parse(ctx, level + 1)
  local arg_names, aux_names = sym:list_arguments(), sym:list_auxiliary_states()
  local self = setmetatable({ _sym = sym, _ctx = ctx, arg_names = arg_names,
    aux_names = aux_names, output_names = sym:list_outputs() }, Executor)
  self.arg_arrays = as_list("bind", "args", arg_names, args, level + 1)
  for i, n in ipairs(arg_names) do
    if not nd.is_tensor(self.arg_arrays[i]) then
      error("bind: no array for the argument '" .. n .. "'", level + 1)
    end
  end
  self.aux_arrays = as_list("bind", "aux_states", aux_names, opts.aux_states, level + 1)
  for i, n in ipairs(aux_names) do
    if not nd.is_tensor(self.aux_arrays[i]) then
      error("bind: no array for the auxiliary state '" .. n .. "'", level + 1)
    end
  end
  self.grad_req = reqs_of("bind", arg_names, opts.grad_req or (opts.args_grad and "write" or "null"),
    level + 1)
  local grads = as_list("bind", "args_grad", arg_names, opts.args_grad, level + 1)
  self.grad_arrays = {}
  for i = 1, #arg_names do
    if self.grad_req[i] ~= "null" then
      local g = grads[i]
      if g == nil then g = nd.zeros_like(self.arg_arrays[i]) end
      self.grad_arrays[i] = g
    end
  end
  self:_dicts()
  self._op = runner(sym)
  self:_alloc_outputs()
  return self
end

function Executor:_dicts()
  self.arg_dict, self.grad_dict, self.aux_dict = {}, {}, {}
  for i, n in ipairs(self.arg_names) do
    self.arg_dict[n] = self.arg_arrays[i]
    self.grad_dict[n] = self.grad_arrays[i]
  end
  for i, n in ipairs(self.aux_names) do self.aux_dict[n] = self.aux_arrays[i] end
end

-- Symbol:simple_bind(ctx, {grad_req=, type_dict=, name = shape...}): arrays allocated
-- from the inferred shapes (zeros).
function E.simple_bind(sym, ctx, opts, level)
  level = level or 2
  opts = opts or {}
  local shapes = {}
  for k, v in pairs(opts) do
    if k ~= "grad_req" and k ~= "type_dict" and k ~= "stype_dict" and k ~= "shared_exec" then
      shapes[k] = v
    end
  end
  local arg_shapes, _, aux_shapes = sym:infer_shape(shapes)
  if arg_shapes == nil then
    error("simple_bind: the shapes given do not determine every argument's shape", level + 1)
  end
  context.parse(ctx, level + 1)
  local types = opts.type_dict or {}
  local args, aux = {}, {}
  for i, n in ipairs(sym:list_arguments()) do
    args[i] = nd.zeros(arg_shapes[i], { ctx = ctx, dtype = types[n] })
  end
  for i, n in ipairs(sym:list_auxiliary_states()) do
    aux[i] = nd.zeros(aux_shapes[i], { ctx = ctx, dtype = types[n] })
  end
  return E.bind(sym, ctx, args, { grad_req = opts.grad_req or "write", aux_states = aux },
    level + 1)
end

-- Executor:forward({is_train=false, name = array ...}) (or forward(is_train, {...}), MXNet's
-- positional is_train): copies the named arrays in, runs; returns self.outputs, the arrays
-- bind allocated, holding this forward's values (MXNet's exe.outputs).
function Executor:forward(opts, more)
  if type(opts) == "boolean" then
    local o = { is_train = opts }
    for k, v in pairs(more or {}) do o[k] = v end
    opts = o
  end
  opts = opts or {}
  local is_train = opts.is_train == true
  for k, v in pairs(opts) do
    if k ~= "is_train" then
      local a = self.arg_dict[k]
      if a == nil then
        error("Executor.forward: '" .. tostring(k) .. "' is not an argument", 2)
      end
      -- checked here: copy's own error would blame this file and not name the argument
      if nd.is_tensor(v) then
        local vs, as = v:shape(), a:shape()
        local same = #vs == #as
        for d = 1, #as do same = same and vs[d] == as[d] end
        if not same then
          error(("Executor.forward: '%s' is (%s), the executor was bound for (%s) (use "
            .. "reshape for other shapes)"):format(k, table.concat(vs, ", "),
            table.concat(as, ", ")), 2)
        end
        nd.copy(v, { out = a })
      elseif type(v) == "number" then
        a[{}] = v
      else
        error("Executor.forward: '" .. k .. "' must be an NDArray or a number, got " .. type(v), 2)
      end
    end
  end
  local inputs = {}
  local by_name = {}
  for i, n in ipairs(self.arg_names) do by_name[n] = self.arg_arrays[i] end
  for i, n in ipairs(self.aux_names) do by_name[n] = self.aux_arrays[i] end
  for i, n in ipairs(self._sym:list_inputs()) do inputs[i] = by_name[n] end
  local op = self._op
  local mon = self._monitor
  local watched = mon and (mon.active == nil or mon.active())
  if watched then
    op = self:_monitor_op()
    inputs = {}
    for i, n in ipairs(self._mon_sym:list_inputs()) do inputs[i] = by_name[n] end
  end
  local outs
  if is_train then
    -- the arguments that take a gradient are variables of this forward's graph
    local vars, reqs = {}, {}
    for i = 1, #self.arg_names do
      if self.grad_req[i] ~= "null" then
        vars[#vars + 1] = self.arg_arrays[i]
        reqs[#reqs + 1] = self.grad_req[i]
      end
    end
    self._vars, self._reqs = vars, reqs
    if #vars > 0 then
      local bufs = {}
      for i = 1, #self.arg_names do
        if self.grad_req[i] ~= "null" then bufs[#bufs + 1] = self.grad_arrays[i] end
      end
      autograd.mark_variables(vars, bufs, reqs)
    end
    outs = { autograd.record(function() return op(unpack(inputs)) end, { train_mode = true }) }
    self._recorded, self._trained = #vars > 0, true
  else
    outs = { autograd.predict_mode(function() return op(unpack(inputs)) end) }
    self._recorded, self._trained = false, false
  end
  self._mon_vals = nil
  if watched then -- the internal outputs after the symbol's own
    local nh = #self._sym.outputs
    local vals = {}
    for n, a in pairs(by_name) do vals[n] = a end
    for k, names in ipairs(self._mon_names) do
      for _, nm in ipairs(names) do mon.callback(nm, outs[nh + k]) end
      local e = self._mon_entries[k]
      vals[e[1]] = vals[e[1]] or {}
      vals[e[1]][e[2]] = outs[nh + k]
    end
    for k = #outs, nh + 1, -1 do outs[k] = nil end
    if is_train then self._mon_vals = vals end
  end
  self._heads = outs
  self:_set_outputs(outs)
  return self.outputs
end

-- Executor:set_monitor_callback(callback, monitor_all=false): callback(name, array) for
-- every op output of each forward (monitor_all: every op's inputs too, as <node>_<input>);
-- active (luamx's, for mx.mon.Monitor): a function saying whether this forward is watched
-- (the others run the plain graph). nil callback: none.
function Executor:set_monitor_callback(callback, monitor_all, active)
  if callback ~= nil and type(callback) ~= "function" then
    error("Executor.set_monitor_callback: callback must be a function(name, array), got "
      .. type(callback), 2)
  end
  self._monitor = callback and { callback = callback, all = monitor_all == true, active = active }
  self._mon_op, self._mon_sym, self._mon_names = nil, nil, nil
end

-- the cached op of the symbol's outputs followed by every internal entry the monitor
-- reports (each once; its names in self._mon_names)
function Executor:_monitor_op()
  if self._mon_op then return self._mon_op end
  local internals = self._sym:get_internals()
  local names = internals:list_outputs()
  local outs, at, list = {}, {}, {}
  for k, e in ipairs(self._sym.outputs) do outs[k] = e end
  local entries = {}
  local function add(e, name)
    local key = e[1]
    local per = at[key] or {}
    at[key] = per
    if not per[e[2]] then
      outs[#outs + 1] = e
      list[#list + 1] = {}
      entries[#list] = e
      per[e[2]] = #list
    end
    local l = list[per[e[2]]]
    l[#l + 1] = name
  end
  for k, e in ipairs(internals.outputs) do
    local n = e[1]
    if n.op ~= nil then
      if self._monitor.all then
        for j, src in ipairs(n.inputs) do
          local iname = (n.op.inputs[j] or ("input" .. j)):gsub("%?$", "")
          add(src, n.name .. "_" .. iname)
        end
      end
      add(e, names[k])
    end
  end
  self._mon_sym = setmetatable({ outputs = outs }, getmetatable(self._sym))
  self._mon_names, self._mon_entries = list, entries
  self._mon_op = runner(self._mon_sym)
  return self._mon_op
end

-- Executor:backward(out_grads): out_grads a tensor or a list (default: ones).
function Executor:backward(out_grads)
  -- a training forward with no gradient to compute (every grad_req 'null'): nothing to do,
  -- as MXNet's
  if self._trained and not self._recorded then return end
  if not self._recorded then
    error("Executor.backward: call forward{is_train=true} first (with a grad_req other than "
      .. "'null')", 2)
  end
  local heads = self._heads
  local hg = out_grads
  if nd.is_tensor(hg) then hg = { hg } end
  if hg ~= nil and (type(hg) ~= "table" or #hg ~= #heads) then
    error("Executor.backward: " .. (type(hg) == "table" and #hg or type(hg)) .. " out_grads for "
      .. #heads .. " outputs", 2)
  end
  autograd.backward(heads, hg)
  self._recorded = false
  if self._mon_vals then self:_monitor_backward(hg) end
end

-- A watched step's backward, as MXNet's monitor sees it: each op node's gradients with
-- respect to its inputs (<node>_backward_output<j>, from the op table's gradient formulas
-- on the forward's values), in reverse topological order. A node whose formula needs
-- values the monitor did not keep (hidden outputs) is left out.
function Executor:_monitor_backward(hg)
  local vals, mon = self._mon_vals, self._monitor
  self._mon_vals = nil
  local grads = {}
  local function value(e)
    local n = e[1]
    if n.op == nil then return vals[n.name] end
    return vals[n] and vals[n][e[2]]
  end
  local function add_grad(e, g)
    local t = grads[e[1]] or {}
    grads[e[1]] = t
    t[e[2]] = t[e[2]] and t[e[2]] + g or g
  end
  autograd.pause(function()
    for k, e in ipairs(self._sym.outputs) do
      local y = value(e)
      if y then add_grad(e, hg and hg[k] or nd.ones_like(y)) end
    end
    local topo = self._sym:_topo()
    for i = #topo, 1, -1 do
      local n = topo[i]
      if n.op and n.op.name then
        local xs, ys, gs, ok = {}, {}, {}, true
        for j, e in ipairs(n.inputs) do
          xs[j] = value(e)
          ok = ok and xs[j] ~= nil
        end
        for k = 1, n.nout do
          ys[k] = vals[n] and vals[n][k]
          if ys[k] == nil and k <= n.nvis then ok = false end
          gs[k] = grads[n] and grads[n][k] or (ys[k] and nd.zeros_like(ys[k]))
        end
        local res
        if ok and n.op.grad then
          local pok, r = pcall(n.op.grad, nd, xs, ys, gs, n.opts or {})
          if pok then res = r else ok = false end
        end
        if ok then
          for j, e in ipairs(n.inputs) do
            local g = res and res[j] or nd.zeros_like(xs[j])
            mon.callback(n.name .. "_backward_output" .. (#n.inputs > 1 and tostring(j - 1) or ""), g)
            if e[1].op then add_grad(e, g) end
          end
        end
      end
    end
  end)
end

-- Executor:reshape({name = shape}, {partial_shaping=, allow_up_sizing=}): MXNet's: a new
-- executor for other input shapes that shares this one's memory: each argument (and
-- gradient, auxiliary state) whose new shape is no larger is a view of the old array's
-- first elements (the parameters, unchanged, are the same arrays); a larger one is new
-- with allow_up_sizing, an error otherwise; an argument not named whose shape changes is
-- an error unless partial_shaping.
local function prod(s)
  local n = 1
  for i = 1, #s do n = n * s[i] end
  return n
end
local function same_shape(a, s)
  local as = a:shape()
  if #as ~= #s then return false end
  for i = 1, #s do if as[i] ~= s[i] then return false end end
  return true
end
-- a (size >= prod(s)) seen as shape s: itself, or a view of its first elements
local function view_as(a, s)
  if same_shape(a, s) then return a end
  local n = prod(s)
  local flat = a:reshape(a:size())
  if n == a:size() then return flat:reshape(s) end
  return flat[{ { 1, n } }]:reshape(s)
end
function Executor:reshape(shapes, opts)
  opts = opts or {}
  local arg_shapes, _, aux_shapes = self._sym:infer_shape(shapes)
  if arg_shapes == nil then error("Executor.reshape: the shapes do not determine every argument", 2) end
  local function resize(what, name, a, s, given)
    if same_shape(a, s) then return a end
    if not (given or opts.partial_shaping) then
      error("Executor.reshape: the shape of " .. what .. " '" .. name .. "' changes; pass "
        .. "partial_shaping=true to allow it", 3)
    end
    if prod(s) > a:size() then
      if not opts.allow_up_sizing then
        error(("Executor.reshape: the new shape (%s) of %s '%s' is larger than the original "
          .. "(%s); pass allow_up_sizing=true (the executor then gets a new array)"):format(
          table.concat(s, ", "), what, name, table.concat(a:shape(), ", ")), 3)
      end
      return nd.zeros(s, { dtype = a:dtype(), ctx = a:context() })
    end
    return view_as(a, s)
  end
  local args, aux, grads = {}, {}, {}
  for i, n in ipairs(self.arg_names) do
    args[i] = resize("argument", n, self.arg_arrays[i], arg_shapes[i], shapes[n] ~= nil)
    local g = self.grad_arrays[i]
    if g ~= nil then
      grads[n] = args[i] == self.arg_arrays[i] and g or (prod(arg_shapes[i]) <= g:size()
        and view_as(g, arg_shapes[i]) or nd.zeros(arg_shapes[i], { dtype = g:dtype() }))
    end
  end
  for i, n in ipairs(self.aux_names) do
    aux[i] = resize("auxiliary state", n, self.aux_arrays[i], aux_shapes[i], shapes[n] ~= nil)
  end
  local req = {}
  for i, n in ipairs(self.arg_names) do req[n] = self.grad_req[i] end
  local e = E.bind(self._sym, self._ctx, args, { args_grad = grads, grad_req = req, aux_states = aux }, 2)
  -- the outputs share the base's memory where they fit (MXNet's shared memory pool)
  for k, o in ipairs(e.outputs) do
    local base = self.outputs[k]
    if base and base:dtype() == o:dtype() and prod(o:shape()) <= base:size() then
      e.outputs[k] = view_as(base, o:shape())
    end
  end
  e:_output_dict()
  return e
end

-- The output arrays, allocated at bind from the inferred shapes and types (MXNet's
-- exe.outputs exist before the first forward; each forward writes them).
function Executor:_alloc_outputs()
  local shapes = {}
  for i, n in ipairs(self.arg_names) do shapes[n] = self.arg_arrays[i]:shape() end
  for i, n in ipairs(self.aux_names) do shapes[n] = self.aux_arrays[i]:shape() end
  local ok, _, out_shapes = pcall(self._sym.infer_shape, self._sym, shapes)
  local types = {}
  for i, n in ipairs(self.arg_names) do types[n] = self.arg_arrays[i]:dtype() end
  local okt, _, out_types = pcall(self._sym.infer_type, self._sym, types)
  self.outputs = {}
  if ok and out_shapes then
    for k, s in ipairs(out_shapes) do
      self.outputs[k] = nd.zeros(s, { ctx = self._ctx,
        dtype = okt and out_types and out_types[k] or nil })
    end
  end
  self:_output_dict()
end
function Executor:_output_dict()
  self.output_dict = {}
  for k, n in ipairs(self.output_names) do self.output_dict[n] = self.outputs[k] end
end
-- copy a forward's results into the output arrays (new ones when a shape changed)
function Executor:_set_outputs(outs)
  for k, v in ipairs(outs) do
    local o = self.outputs[k]
    if o ~= nil and same_shape(o, v:shape()) and o:dtype() == v:dtype() then
      nd.copy(v, { out = o })
    else
      self.outputs[k] = v:copy()
    end
  end
  self:_output_dict()
end

-- copy_params_from(arg_params, aux_params, allow_extra_params): the arrays of the named
-- arguments and auxiliary states set from the tables (name -> NDArray); a name the
-- executor lacks is an error unless allow_extra_params. Shapes must match.
function Executor:copy_params_from(arg_params, aux_params, allow_extra)
  local function copy(tbl, dict, what)
    for k, v in pairs(tbl or {}) do
      local dst = dict[k]
      if dst == nil then
        if not allow_extra then
          error("Executor.copy_params_from: '" .. tostring(k) .. "' is not " .. what
            .. " of the executor (allow_extra_params=true ignores it)", 3)
        end
      else
        if not nd.is_tensor(v) then
          error("Executor.copy_params_from: '" .. k .. "' must be an NDArray, got " .. type(v), 3)
        end
        if not same_shape(dst, v:shape()) then
          error(("Executor.copy_params_from: '%s' is (%s), the executor's (%s)"):format(k,
            table.concat(v:shape(), ", "), table.concat(dst:shape(), ", ")), 3)
        end
        nd.copy(v:dtype() == dst:dtype() and v or v:astype(dst:dtype()), { out = dst })
      end
    end
  end
  copy(arg_params, self.arg_dict, "an argument")
  copy(aux_params, self.aux_dict, "an auxiliary state")
end

-- Symbol:eval(ctx, {name = array}): the outputs (a list), as MXNet.
function E.eval(sym, ctx, arrays, level)
  level = level or 2
  context.parse(ctx, level + 1)
  local vals = {}
  local by_name = {}
  for _, node in ipairs(sym:_topo()) do
    if node.op == nil then by_name[node.name] = node end
  end
  for k, v in pairs(arrays or {}) do
    local node = by_name[k]
    if not node then error("eval: '" .. tostring(k) .. "' is not an input of the symbol", level + 1) end
    if not nd.is_tensor(v) then
      error("eval: the input '" .. tostring(k) .. "' must be an NDArray, got " .. type(v), level + 1)
    end
    vals[node] = v
  end
  for name, node in pairs(by_name) do
    if vals[node] == nil and not node.value then
      error("eval: no array for the input '" .. name .. "'", level + 1)
    end
  end
  local rec, train = S.recording, S.training
  S.recording, S.training = false, false
  local ok, res = pcall(eval_dag, sym, vals)
  S.recording, S.training = rec, train
  if not ok then error(res, level + 1) end
  return res
end

return E
