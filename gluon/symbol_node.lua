-- mx.gluon.symbol_node — a Gluon block called on mx.sym Symbols (MXNet 1.x's
-- hybrid_forward with F = symbol): net(data_sym) gives a Symbol, so MXNet 1.x's scripts
-- compose Gluon layers, cells and losses with symbols and train them with Module:
--
--   local y = nn.Dense(10)(mx.sym.var("data"))        -- arguments data, dense0_weight, dense0_bias
--   local outs = rnn.LSTMCell(100, {prefix = "rnn_"}):unroll(3, {x0, x1, x2})
--   local loss = mx.sym.make_loss(gluon.loss.SoftmaxCrossEntropyLoss()(fc3, mx.sym.var("label")))
--
-- The call makes one node holding the block: its inputs are the given symbols (a nil
-- argument is passed as nil, a list of Symbols as a list) and then one variable per
-- Parameter of the block, named as MXNet 1.x names it (gluon.block's _mx1_names: the
-- block's prefix, or <alias><k>_ given at its first call, then the parameter's name;
-- the same Parameter is the same variable in every call). Its outputs are the block's
-- results, flattened (a cell's step: the output, then the states); a node may name each
-- of them (a cell's step t: <prefix>t<t>_out_output, as MXNet's).
--
-- An executor runs the block on the bound arrays, the parameter variables' arrays standing
-- in for the block's own Parameters during the call (its ops traced with the rest of the
-- graph, gradients through autograd). Shape and type inference trace the block once its
-- inputs' shapes are known (expand: the block's recorded ops spliced in, mx.autograd.
-- get_symbol), on zeros for the parameters (a parameter whose shape is not known yet
-- takes the one the forward's deferred initialisation infers); the block's own
-- Parameters are left as they were. Symbol JSON needs the shapes first (expand), so
-- tojson of an unexpanded node is an error.
local type, error, tostring, ipairs, pairs, select, unpack, rawget, rawset, getmetatable =
  type, error, tostring, ipairs, pairs, select, unpack, rawget, rawset, getmetatable

local M = {}

-- the pseudo op the nodes carry (so mx.sym's listings see an op node)
-- (the graph layer reaches this module through the op, block_node: it never requires Gluon)
M.OP = { name = "_gluon_block", block_node = M, inputs = {}, outputs = { "output" }, aux = {},
  params = {}, mxnet = {}, pindex = {}, optional_inputs = {}, nin = -1 }

-- the variable of each Parameter (by its name: a new name gives a new variable)
local var_of = setmetatable({}, { __mode = "k" })
local function param_var(sym, name, p)
  local v = var_of[p]
  if v ~= nil and v[1] == name then return v[2] end
  local o = { dtype = p.dtype }
  local known = type(p.shape) == "table" and #p.shape > 0
  for _, d in ipairs(known and p.shape or {}) do known = known and d > 0 end
  if known then o.shape = p.shape end
  if p.lr_mult ~= 1 then o.lr_mult = p.lr_mult end
  if p.wd_mult ~= 1 then o.wd_mult = p.wd_mult end
  local ini = p.init
  if type(ini) == "string" or (type(ini) == "table" and ini.dumps) then o.init = ini end
  local s = sym.var(name, o)
  var_of[p] = { name, s }
  return s
end

-- the auxiliary states among the parameters (read at an op's auxiliary input):
-- BatchNorm's running statistics
local function is_aux(name, p)
  local local_name = tostring(rawget(p, "name") or name)
  return p.grad_req == "null" and (local_name:find("^running_") or local_name:find("^moving_"))
    ~= nil
end

-- node(block, spec, level): the Symbol(s) of a block node. spec:
--   args  = { n = k, ... }: the call's arguments (Symbols, nil, lists of Symbols)
--   fn    = function(block, ...) -> results: the call on arrays (default: block(...))
--   outs  = the results' structure, one entry per result: true (a tensor) or a count
--           (a list of that many); default { true }
--   name  = the node's name; names = { [k] = list_outputs name of flat output k }
-- Returns the results as Symbols, structured as outs says.
function M.node(block, spec, level)
  local sym = require("mx.symbol")
  local B = require("mx.gluon.block")
  local cname = tostring(getmetatable(block).__name)
  local args = spec.args
  local inputs, argspec = {}, {}
  for i = 1, args.n do
    local a = args[i]
    if a == nil then
      argspec[i] = false
    elseif sym.is_symbol(a) then
      if #a.outputs ~= 1 then
        error(string.format("%s: argument %d is a symbol with %d outputs: pick one", cname, i,
          #a.outputs), level + 1)
      end
      inputs[#inputs + 1] = a.outputs[1]
      argspec[i] = true
    elseif type(a) == "table" and getmetatable(a) == nil then
      for k in pairs(a) do
        if type(k) ~= "number" or k < 1 or k > #a or k % 1 ~= 0 then
          error(string.format("%s: argument %d: a block called on Symbols takes Symbols, nil or "
            .. "lists of Symbols, got a table with the key %s", cname, i, tostring(k)), level + 1)
        end
      end
      for j, s in ipairs(a) do
        if not sym.is_symbol(s) or #s.outputs ~= 1 then
          error(string.format("%s: argument %d[%d]: a block called on Symbols takes Symbols (or "
            .. "nil, or lists of Symbols), got %s", cname, i, j, sym.is_symbol(s)
            and "a symbol with " .. #s.outputs .. " outputs" or type(s)), level + 1)
        end
        inputs[#inputs + 1] = s.outputs[1]
      end
      argspec[i] = #a
    else
      error(string.format("%s: argument %d: a block called on Symbols takes Symbols (or nil, or "
        .. "lists of Symbols), got %s", cname, i, type(a)), level + 1)
    end
  end
  local ndata = #inputs
  local names, prefixes = B._mx1_names(block)
  local params, aux = {}, {}
  for _, np in ipairs(names) do
    params[#params + 1] = np[2]
    inputs[#inputs + 1] = param_var(sym, np[1], np[2]).outputs[1]
    if is_aux(np[1], np[2]) then aux[#inputs] = true end
  end
  local outs = spec.outs or { true }
  local nout = 0
  for _, o in ipairs(outs) do nout = nout + (o == true and 1 or o) end
  local name = spec.name or (prefixes[block] .. "fwd")
  local out_names = {}
  for k = 1, nout do
    out_names[k] = (spec.names and spec.names[k]) or (k == 1 and name .. "_output")
      or (name .. "_output" .. (k - 1))
  end
  local node = { name = name, op = M.OP, block = block, fn = spec.fn, inputs = inputs,
    argspec = argspec, nargs = args.n, ndata = ndata, params = params, aux_pos = aux,
    outs = outs, out_names = out_names, attrs = {}, opts = {}, nout = nout, nvis = nout }
  local r, k = {}, 0
  for i, o in ipairs(outs) do
    if o == true then
      k = k + 1
      r[i] = sym._new_symbol({ { node, k } })
    else
      local l = {}
      for j = 1, o do
        k = k + 1
        l[j] = sym._new_symbol({ { node, k } })
      end
      r[i] = l
    end
  end
  return unpack(r, 1, #outs)
end

-- call(block, level, ...): block(...) on Symbols; a block may shape the node with
-- _symbol_spec(...) -> spec (the recurrent cells: output and states, MXNet's names)
function M.call(block, level, ...)
  local spec = block._symbol_spec and block:_symbol_spec(level + 1, ...) or {}
  spec.args = spec.args or { n = select("#", ...), ... }
  return M.node(block, spec, level) -- (a tail call: no frame of its own)
end

---------------------------------------------------------------- running the block
local SAVED = { "_data", "_copies", "_by_dev", "_deferred", "_ctx", "_ctx_list", "shape" }

-- Every hybridized block under b runs eagerly during the call (its cached graphs are the
-- ones of its own Parameters' arrays); returns what restores them.
local function eager(b, list)
  if rawget(b, "_active") == true then
    list[#list + 1] = b
    rawset(b, "_active", false)
  end
  for _, c in ipairs((b:children())) do eager(c, list) end
  return list
end

-- with_params(node, arrays, fn): fn() with parameter i's data arrays[i] (nil: unset,
-- waiting for its shape with a zeros initialiser, the forward's deferred initialisation
-- giving it); the Parameters and the blocks' hybridization restored after, errors too.
local function with_params(node, arrays, fn)
  local initializer = require("mx.initializer")
  local context = require("mx.context")
  local saved = {}
  for i, p in ipairs(node.params) do
    local s = {}
    for _, k in ipairs(SAVED) do s[k] = rawget(p, k) end
    saved[i] = s
    rawset(p, "_copies", nil)
    rawset(p, "_by_dev", nil)
    local a = arrays[i]
    if a ~= nil then
      rawset(p, "_data", a)
      rawset(p, "shape", a:shape())
      rawset(p, "_deferred", nil)
    else
      local sh = {}
      for j, d in ipairs(p.shape or {}) do sh[j] = d end
      rawset(p, "_data", nil)
      rawset(p, "shape", p.shape and sh or nil)
      rawset(p, "_deferred", { init = initializer.Zero(), ctx = { context.cpu() } })
    end
  end
  local deact = eager(node.block, {})
  local function restore()
    for i, p in ipairs(node.params) do
      for _, k in ipairs(SAVED) do rawset(p, k, saved[i][k]) end
    end
    for _, b in ipairs(deact) do rawset(b, "_active", true) end
  end
  local r = { pcall(fn) }
  local used = {}
  for i, p in ipairs(node.params) do used[i] = rawget(p, "_data") end
  restore()
  require("mx.gluon.parameter")._changed()
  if not r[1] then error(r[2], 0) end
  return used, unpack(r, 2)
end

-- the call's arguments from the node's input arrays (data inputs, lists regrouped)
local function call_args(node, arrays)
  local args, j = {}, 0
  for i = 1, node.nargs do
    local s = node.argspec[i]
    if s == true then
      j = j + 1
      args[i] = arrays[j]
    elseif s then
      local l = {}
      for k = 1, s do
        j = j + 1
        l[k] = arrays[j]
      end
      args[i] = l
    end
  end
  local ps = {}
  for i = 1, #node.params do ps[i] = arrays[node.ndata + i] end
  return args, ps
end

-- the results flattened as node.outs says
local function flatten(node, ...)
  local flat = {}
  local what = node.name .. " (" .. tostring(getmetatable(node.block).__name) .. " on Symbols)"
  if select("#", ...) ~= #node.outs then
    error(string.format("%s: the block returned %d results, its node has %d (a block called "
      .. "on Symbols gives one; the recurrent cells their output and states)", what,
      select("#", ...), #node.outs), 0)
  end
  for i, o in ipairs(node.outs) do
    local v = select(i, ...)
    if o == true then
      flat[#flat + 1] = v
    else
      if type(v) ~= "table" or #v ~= o then
        error(string.format("%s: result %d is not a list of %d tensors", what, i, o), 0)
      end
      for k = 1, o do flat[#flat + 1] = v[k] end
    end
  end
  return flat
end

local function invoke(node, args)
  local fn = node.fn
  if fn then return fn(node.block, unpack(args, 1, node.nargs)) end
  return node.block(unpack(args, 1, node.nargs))
end

-- run(node, arrays): the block on its inputs' arrays (the executor's eval)
function M.run(node, arrays)
  local args, ps = call_args(node, arrays)
  local r = { with_params(node, ps, function() return invoke(node, args) end) }
  return flatten(node, unpack(r, 2, table.maxn(r)))
end

function M.has_blocks(outputs, topo)
  for _, n in ipairs(topo(outputs)) do if n.op == M.OP then return true end end
  return false
end

local traced = setmetatable({}, { __mode = "k" }) -- node -> {key =, r =}: its last expansion

-- The expanded graph's variable for a parameter variable entry: the same name and attributes
-- with the shape the trace gave it (__shape__), so the whole graph infers without a
-- backward rule (the fused RNN's parameter concat); one node per variable and shape, so a
-- parameter read by several block nodes stays one argument.
local shaped = setmetatable({}, { __mode = "k" }) -- variable node -> {shape key, Symbol}
local function shaped_var(sym, entry, used)
  local node = entry[1]
  if used == nil or node.op ~= nil or (node.attrs and node.attrs.__shape__) then
    return sym._new_symbol({ entry })
  end
  local sh = used:shape()
  local key = table.concat(sh, "x")
  local hit = shaped[node]
  if hit and hit[1] == key then return hit[2] end
  local v = sym.var(node.name, { shape = sh })
  local vn = v.outputs[1][1]
  for k, x in pairs(node.attrs or {}) do if vn.attrs[k] == nil then vn.attrs[k] = x end end
  shaped[node] = { key, v }
  return v
end
-- expand(outputs, infer): outputs with every block node replaced by its traced ops.
-- infer(entries) -> shapes, dtypes of the entries (nil where unknown).
function M.expand(outputs, infer)
  local nd = require("mx.nd")
  local sym = require("mx.symbol")
  local ag = require("mx.autograd")
  local T = require("mx.autograd.tape")
  local get_symbol = require("mx.autograd.get_symbol")
  local memo = {}
  local trace_new
  local function trace(n, ins)
    local shapes, dtypes = infer(ins)
    -- the same inputs (entries, shapes, dtypes, the parameters' own shapes) give the same
    -- expansion: infer_shape, bind and a Module's passes trace a block once
    local key = {}
    for j, e in ipairs(ins) do
      key[j] = tostring(e[1]) .. "/" .. e[2] .. ":" .. (shapes[j] and table.concat(shapes[j], "x")
        or "?") .. ":" .. tostring(dtypes[j])
    end
    for _, p in ipairs(n.params or {}) do key[#key + 1] = table.concat(p.shape or {}, "x") end
    key = table.concat(key, ";")
    local hit = traced[n]
    if hit and hit.key == key then return hit.r end
    local r = trace_new(n, ins, shapes, dtypes)
    traced[n] = { key = key, r = r }
    return r
  end
  trace_new = function(n, ins, shapes, dtypes)
    local arrays, xs = {}, {}
    for j = 1, #ins do
      local p = n.params and n.params[j - (n.ndata or #ins)]
      if shapes[j] == nil and p == nil then
        error(n.name .. ": the shapes of the block's inputs are not known (give the data's "
          .. "shapes to infer_shape or bind)", 0)
      end
      if shapes[j] ~= nil then
        local x = nd.zeros(shapes[j], { dtype = dtypes[j] or (p and p.dtype) or "float32" })
        if p == nil or p.grad_req ~= "null" then x:attach_grad() end
        arrays[j] = x
      end
      xs[j] = arrays[j]
    end
    local args, ps = call_args(n, arrays)
    local res
    local used = ag.record(function()
      local r = { with_params(n, ps, function() return invoke(n, args) end) }
      res = flatten(n, unpack(r, 2, table.maxn(r)))
      return r[1]
    end)
    local leaves = {}
    local function leaf(x, s)
      if x == nil then return end
      local e = T.entry[x]
      if type(e) == "table" then leaves[e] = s else leaves[x] = s end
    end
    for j = 1, n.ndata or #ins do leaf(xs[j], sym._new_symbol({ ins[j] })) end
    for i = 1, #(n.params or {}) do
      leaf(used[i], shaped_var(sym, ins[(n.ndata or #ins) + i], used[i]))
    end
    local syms = get_symbol(T, res, 1, leaves)
    -- a constant of zeros (a cell's begin states) is a zeros node, as MXNet's begin_state
    -- writes it: a file needs no value for it
    local gsyms = {}
    for k, s2 in ipairs(syms) do gsyms[k] = s2.outputs[1] end
    for _, c in ipairs(require("mx.graph.symbol_graph").topo(gsyms)) do
      local v = c.op == nil and c.value
      if v and v:size() > 0 and nd.abs(v):sum():asscalar() == 0 then
        local z = sym.zeros(v:shape(), { dtype = v:dtype() }).outputs[1][1]
        c.op, c.P, c.opts, c.value, c.nout, c.nvis = z.op, z.P, z.opts, nil, z.nout, z.nvis
      end
    end
    local entries = {}
    for k, s in ipairs(syms) do
      local e = s.outputs[1]
      entries[k] = e
      -- the output keeps the name the unexpanded node gave it
      local want = n.out_names and n.out_names[k]
      local base = want and want:match("^(.*)_output$")
      local src = e[1]
      if base and src.op and src.nvis == 1 and e[2] == 1 and not src._renamed then
        src.name, src._renamed = base, true
      end
    end
    return { entries = entries }
  end
  local function node_of(n)
    local r = memo[n]
    if r ~= nil then return r end
    r = n
    if n.op then
      local ins, changed = {}, false
      for i, e in ipairs(n.inputs) do
        local m = node_of(e[1])
        local ent = e
        if m ~= e[1] or (e[1].op == M.OP) then
          ent = m.entries and m.entries[e[2]] or { m, e[2] }
          changed = true
        end
        ins[i] = ent
      end
      if n.op == M.OP then
        r = trace(n, ins)
      elseif changed then
        r = {}
        for k, v in pairs(n) do r[k] = v end
        r.inputs = ins
      end
    end
    memo[n] = r
    return r
  end
  local outs = {}
  for i, e in ipairs(outputs) do
    local m = node_of(e[1])
    outs[i] = m.entries and m.entries[e[2]] or (m == e[1] and e or { m, e[2] })
  end
  return outs
end

return M
