-- mx.sym / mx.symbol — MXNet 1.9's symbolic API (docs/symbol.md): variables, every op of
-- the op table as a symbol function (luamx and MXNet names, mx.nd's calling convention:
-- inputs positionally or by input name, then one options table with the op's params,
-- 1-based axes, plus name= and attr=), arithmetic, Group, listing, inference, and
-- MXNet's symbol JSON both ways (through the core: core/src/graph_json.c).
--
-- For the executor / hybridize / export code, a Symbol is a light Lua DAG:
--   sym.outputs   list of entries { node, out } (out 1-based: the node's output number)
--   node          { name = string,
--                   op = op-table entry (lib.ops[i]: .name, .id, .inputs, .aux, .grad...)
--                        or nil for a variable,
--                   inputs = list of entries { node, out } (op nodes; {} for variables),
--                   P = the op's C params struct (cdata of op.ctype, 0-based axes) or nil,
--                   opts = the same params as Lua options (1-based, what the op's
--                          gradient formula and mx.nd[op.name] take) or nil (variable),
--                   attrs = { key = string } node attributes (__shape__, __dtype__,
--                           __init__, __lr_mult__, __wd_mult__, user keys),
--                   nout = outputs of the node, nvis = the visible ones (batch_norm: 1),
--                   value = a constant NDArray or nil (variables only) }
--   Nodes are shared between symbols and never modified after creation (but by
--   sym:_set_attr); walk them with Symbol:_topo() (MXNet's DFS order).
--   sym:_graph() -> g, map: the C graph (mx_graph*, freed by GC) and
--     map.nodes[id + 1] = the Lua node of C node id, map.id[node] = its C id,
--     map.heads[k] = { C node id, 0-based output } of output k, map.args / map.aux /
--     map.inputs = C ids of the variables in list_arguments / list_auxiliary_states /
--     list_inputs order.
--   mx.sym._from_graph(g) -> Symbol: the other way (a graph a pass returned).
--   mx.sym._node_symbol(node, out) -> Symbol of one entry.
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local SG = require("mx.graph.symbol_graph")
local file = require("mx.core.file")
local executor = require("mx.graph.executor")
local IX = require("mx.graph.index_ops")

local ffi, C = lib.ffi, lib.C
local ffi_string = ffi.string
local type, error, tostring, select, getmetatable, setmetatable, pairs, ipairs =
  type, error, tostring, select, getmetatable, setmetatable, pairs, ipairs
local fill_params = nd._fill_params

local M = {}
local Symbol = {}
M.Symbol = Symbol
local SymbolMT = { __name = "Symbol" }
M._mt = SymbolMT

local function is_symbol(v) return getmetatable(v) == SymbolMT end
M.is_symbol = is_symbol

local function new_symbol(outputs) return setmetatable({ outputs = outputs }, SymbolMT) end
M._new_symbol = new_symbol
function M._node_symbol(node, out) return new_symbol({ { node, out or 1 } }) end

---------------------------------------------------------------- names
-- MXNet's NameManager: <hint><count> per hint, counting from 0 in this Lua state.
local counters = {}
local function auto_name(hint)
  local c = counters[hint] or 0
  counters[hint] = c + 1
  return hint .. c
end
M._auto_name = auto_name -- (a Gluon block's 1.x prefix on Symbols takes its name here too)
-- Forget the counts (tests; MXNet's `with mx.name.NameManager():`).
function M._reset_names() counters = {} end

-- Outputs MXNet shows (FNumVisibleOutputs): the others exist (the JSON's node_row_ptr
-- counts them, s:get_internals() does not).
local VISIBLE = {
  batch_norm = function(P) return P.output_mean_var and 3 or 1 end,
  dropout = 1, leaky_relu = 1, group_norm = 1, instance_norm = 1, l2_normalization = 1,
}
local function visible(op, P, nout)
  local v = VISIBLE[op.name]
  if type(v) == "function" then v = v(P) end
  return math.min(v or nout, nout)
end

-- The name of output k (1-based) of a node in list_outputs: MXNet's "<node>_output",
-- "<node>_output0"..., or the op's output names.
local function output_name(n, k)
  if n.op == nil then return n.name end
  if n.out_names then return n.out_names[k] end -- (a Gluon block's node names its own)
  if n.nvis == 1 and n.nout >= 1 and k == 1 then return n.name .. "_output" end
  if n.op.nout_param or n.nout > #n.op.outputs then return n.name .. "_output" .. (k - 1) end
  local o = n.op.outputs[k] or ("output" .. (k - 1))
  return n.name .. "_" .. (o == "out" and "output" or o)
end

---------------------------------------------------------------- variables
local function num_str(v)
  if v % 1 == 0 and math.abs(v) < 1e15 then return string.format("%.1f", v) end
  return string.format("%.17g", v)
end

local AS = require("mx.graph.attr_scope")
local VAR_OPTS = { shape = true, dtype = true, init = true, lr_mult = true, wd_mult = true,
  attr = true, stype = true }

function M.var(name, opts)
  if type(name) ~= "string" or name == "" then
    error("sym.var: name must be a non-empty string, got " .. tostring(name), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("sym.var: options must be a table, got " .. type(opts), 2)
  end
  local attrs = {}
  for k, v in pairs(AS.current()) do attrs[k] = v end
  for k, v in pairs(opts or {}) do
    if not VAR_OPTS[k] then
      error("sym.var: unknown option '" .. tostring(k)
        .. "' (valid: shape, dtype, init, lr_mult, wd_mult, attr, stype)", 2)
    end
    if k == "shape" then
      if type(v) ~= "table" or #v > 8 then error("sym.var: shape must be a list of at most 8 dims", 2) end
      local d = {}
      for i = 1, #v do
        if not nd._is_int(v[i]) or v[i] < 0 then
          error("sym.var: shape dim " .. i .. " must be a non-negative integer (0: unknown)", 2)
        end
        d[i] = tostring(v[i])
      end
      attrs.__shape__ = "(" .. table.concat(d, ", ") .. (#v == 1 and ",)" or ")")
    elseif k == "dtype" then
      local c = nd.dtype_code(v)
      if not c then error("sym.var: unknown dtype " .. tostring(v), 2) end
      attrs.__dtype__ = tostring(c)
    elseif k == "init" then
      if type(v) == "table" and v.dumps then v = v:dumps() end
      if type(v) ~= "string" then error("sym.var: init must be a string or an initializer", 2) end
      attrs.__init__ = v
    elseif k == "lr_mult" or k == "wd_mult" then
      if type(v) ~= "number" then error("sym.var: " .. k .. " must be a number", 2) end
      attrs["__" .. k .. "__"] = num_str(v)
    elseif k == "stype" then
      if v ~= "default" then error("sym.var: only stype 'default' (dense) exists in luamx", 2) end
    else
      if type(v) ~= "table" then error("sym.var: attr must be a table of strings", 2) end
      for ak, av in pairs(v) do
        AS.check("sym.var", AS.key(ak), tostring(av), 2)
        attrs[AS.key(ak)] = tostring(av)
      end
    end
  end
  local node = { name = name, inputs = {}, attrs = attrs, nout = 1, nvis = 1 }
  return new_symbol({ { node, 1 } })
end
M.Variable = M.var

-- _const(array, name): a variable node holding a value (a graph constant, as the traces')
function M._const(value, name)
  local node = { name = name, inputs = {}, attrs = {}, nout = 1, nvis = 1, value = value }
  return new_symbol({ { node, 1 } })
end

---------------------------------------------------------------- composing ops
-- Optional inputs MXNet creates a variable for when missing: bias unless no_bias,
-- LeakyReLU's gamma for prelu.
local function wants_optional(op, j, P)
  local name = op.inputs[j]
  if op.pindex["no_" .. name] then return not P["no_" .. name] end
  if op.name == "leaky_relu" and name == "gamma" then
    return op.pindex.act_type.values[P.act_type + 1] == "prelu"
  end
  return false
end


-- the __init__ MXNet's ops give their input variables (by input position)
local VAR_INIT = {
  leaky_relu = { [2] = '["Constant", {"value": 0.25}]' },
  batch_norm = { [4] = '["zero", {}]', [5] = '["one", {}]' },
}

local function compose(op, hint, level, ...)
  local n = select("#", ...)
  local args = { ... }
  local opts
  if op.ctx and type(args[1]) == "table" and type(args[1][1]) == "number" then
    -- creation ops: zeros({2, 3}, opts) as in mx.nd
    local o = { shape = args[1] }
    for k, v in pairs(type(args[2]) == "table" and args[2] or {}) do o[k] = v end
    args, n = { o }, 1
  end
  local last = args[n]
  if n > 0 and type(last) == "table" and not is_symbol(last)
      and not (op.nin == -1 and is_symbol(last[1])) then
    opts, args[n], n = last, nil, n - 1
  end
  if op.nin == -1 and n == 1 and type(args[1]) == "table" and not is_symbol(args[1]) then
    local list = args[1]
    args, n = {}, #list
    for i = 1, n do args[i] = list[i] end
  end
  local clean, attr, name, mults, num_args = {}, nil, nil, {}, nil
  local by_input = {}
  for j, iname in ipairs(op.inputs) do by_input[iname] = j end
  for k, v in pairs(opts or {}) do
    if k == "name" then
      if type(v) ~= "string" or v == "" then
        error(op.name .. ": name must be a non-empty string, got " .. tostring(v), level + 1)
      end
      name = v
    elseif k == "attr" then
      if type(v) ~= "table" then error(op.name .. ": attr must be a table of strings", level + 1) end
      attr = v
    elseif (k == "lr_mult" or k == "wd_mult") and not op.pindex[k] then
      -- MXNet's hidden attributes given as options (Convolution(..., lr_mult=1))
      if type(v) ~= "number" then error(op.name .. ": " .. k .. " must be a number", level + 1) end
      mults["__" .. k .. "__"] = tostring(v)
    elseif by_input[k] and op.nin ~= -1 then
      if not is_symbol(v) then
        error(string.format("%s: input %s must be a Symbol, got %s", op.name, k, type(v)), level + 1)
      end
      if args[by_input[k]] ~= nil then
        error(op.name .. ": input " .. k .. " given twice (by position and by name)", level + 1)
      end
      args[by_input[k]] = v
      if by_input[k] > n then n = by_input[k] end
    elseif k == "out" then
      error(op.name .. ": out= has no meaning for symbols", level + 1)
    elseif k == "num_args" and op.nin == -1 and not op.pindex.num_args then
      -- MXNet's variadic ops (Concat, add_n) count their inputs in num_args
      num_args = v
    else
      clean[k] = v
    end
  end
  if num_args ~= nil and num_args ~= n then
    error(string.format("%s: num_args is %s but %d inputs were given", op.name, tostring(num_args), n),
      level + 1)
  end
  local P0, _, err = fill_params(op, clean)
  if err then error(err, level + 1) end
  local P = nil
  if op.ctype then
    P = ffi.new(op.ctype)
    ffi.copy(P, P0, op.size)
    -- train mode is the executor's (forward{is_train=}), not the graph's
    if op.train_param and clean[op.train_param] == nil then P[op.train_param] = false end
    -- MXNet 1.x: a 0 in a creation op's shape is an unknown dim the consumers decide (the
    -- RNN cells' begin states (0, hidden)), as when read from a JSON file
    if op.ctx and type(clean.shape) == "table" and op.pindex.shape then
      local sh, zero = {}, false
      for d, v in ipairs(clean.shape) do
        sh[d] = v
        if v == 0 then sh[d], zero = -1, true end
      end
      if zero then
        clean.shape = sh
        for d = 1, #sh do P.shape.v[d - 1] = sh[d] end
      end
    end
  end
  name = name or auto_name(hint)
  local nin = op.nin == -1 and n or op.nin
  if op.nin == -1 and n == 0 then
    error(op.name .. ": takes at least one input symbol", level + 1)
  end
  if op.nin ~= -1 and n > op.nin then
    error(string.format("%s: takes at most %d inputs, got %d", op.name, op.nin, n), level + 1)
  end
  local inputs = {}
  local count = 0
  local auto = {} -- the variables made for missing inputs: they get the op's attributes
  for j = 1, nin do
    local s = args[j]
    if s == nil then
      local optional = op.optional_inputs[j]
      if not optional or wants_optional(op, j, P) then
        -- MXNet creates a variable for a missing input: fc1_weight, bn1_moving_mean
        s = M.var(name .. "_" .. op.inputs[j])
        auto[#auto + 1] = s
      end
    elseif not is_symbol(s) then
      error(string.format("%s: input %d (%s) must be a Symbol, got %s", op.name, j,
        op.inputs[j] or "data", type(s)), level + 1)
    elseif #s.outputs ~= 1 then
      error(string.format("%s: input %d (%s) is a symbol with %d outputs: pick one with s[i]",
        op.name, j, op.inputs[j] or "data", #s.outputs), level + 1)
    end
    if s ~= nil then
      if count ~= j - 1 then
        error(string.format("%s: input %d given but input %d (%s) missing", op.name, j, count + 1,
          op.inputs[count + 1]), level + 1)
      end
      count = j
      inputs[j] = s.outputs[1]
    end
  end
  local nout = #op.outputs
  if op.nout_param then
    nout = C.mx_op_num_outputs_for(op.id, P)
    if nout < 1 then
      error(op.name .. ": the options give no valid output count", level + 1)
    end
  end
  local attrs = {}
  for k, v in pairs(AS.current()) do attrs[k] = v end
  for k, v in pairs(mults) do attrs[k] = v end
  for k, v in pairs(attr or {}) do
    k = AS.key(k)
    if not k:match("^__.+__$") then
      -- MXNet reads any other key of an op node as a param and refuses the node
      error(string.format("%s: attr key '%s' on an op must be of the form __%s__", op.name, k, k),
        level + 1)
    end
    AS.check(op.name, k, tostring(v), level + 1)
    attrs[k] = tostring(v)
  end
  for _, v in ipairs(auto) do
    local va = v.outputs[1][1].attrs
    for k, x in pairs(attrs) do if va[k] == nil then va[k] = x end end
  end
  -- MXNet's FSetInputVarAttrOnCompose: an input variable without __init__ gets the op's
  local vi = VAR_INIT[op.name]
  if vi then
    for j, e in pairs(inputs) do
      local v = e[1]
      if vi[j] and not v.op and v.attrs.__init__ == nil then v.attrs.__init__ = vi[j] end
    end
  end
  local node = { name = name, op = op, inputs = inputs, P = P, opts = op.freeze(clean),
    attrs = attrs, nout = nout }
  node.nvis = visible(op, P, nout)
  local outs = {}
  for k = 1, node.nvis do outs[k] = { node, k } end
  return new_symbol(outs)
end

-- The name hint MXNet's Python frontend gives an op called by `name`: its lower case.
local function make_op(op, hint)
  return function(...)
    local s = compose(op, hint, 2, ...)
    return s
  end
end

local opargs = require("mx.core.opargs") -- MXNet's positional params under its op names
for _, op in ipairs(lib.ops) do
  local f = make_op(op, (op.mxnet[1] or op.name):lower())
  M[op.name] = f
  for _, mname in ipairs(op.mxnet) do
    if M[mname] == nil then M[mname] = opargs.wrap(op, mname, make_op(op, mname:lower()), is_symbol) end
  end
  if not op.ctx and op.nin ~= 0 and Symbol[op.name] == nil then Symbol[op.name] = f end
end

-- argmax_channel(data): argmax along the last axis (1-based int64, as mx.nd's); MXNet's
-- argmax_channel nodes of a file read as this (mx.graph.index_ops converts the positions)
function M.argmax_channel(data, opts)
  if opts ~= nil and (type(opts) ~= "table" or is_symbol(opts)) then
    error("argmax_channel: takes data and an optional options table {name=, attr=}", 2)
  end
  local o = { axis = -1 }
  for k, v in pairs(opts or {}) do
    if k ~= "name" and k ~= "attr" then
      error("argmax_channel: unknown option '" .. tostring(k) .. "' (valid: name, attr)", 2)
    end
    o[k] = v
  end
  if not is_symbol(data) then error("argmax_channel: data must be a Symbol, got " .. type(data), 2) end
  local s = compose(lib.ops_by_name.argmax, "argmax_channel", 2, data, o)
  return s
end
Symbol.argmax_channel = M.argmax_channel

---------------------------------------------------------------- arithmetic
local by_name = lib.ops_by_name
-- a <op> b with symbols or numbers; hints as MXNet's operators name them
local function arith(opname, hint, shint, rshint)
  local op = by_name[opname]
  local sop = by_name[op.scalar.op]
  local rop = by_name[op.scalar.rop]
  return function(a, b)
    local s
    if type(b) == "number" then s = compose(sop, shint, 2, a, { scalar = b })
    elseif type(a) == "number" then s = compose(rop, rshint, 2, b, { scalar = a })
    else
      if not is_symbol(a) or not is_symbol(b) then
        error(opname .. ": operands must be Symbols or numbers, got " .. type(a) .. " and "
          .. type(b), 2)
      end
      s = compose(op, hint, 2, a, b)
    end
    return s
  end
end
SymbolMT.__add = arith("add", "_plus", "_plusscalar", "_plusscalar")
SymbolMT.__sub = arith("sub", "_minus", "_minusscalar", "_rminusscalar")
SymbolMT.__mul = arith("mul", "_mul", "_mulscalar", "_mulscalar")
SymbolMT.__div = arith("div", "_div", "_divscalar", "_rdivscalar")
SymbolMT.__pow = arith("pow", "_power", "_powerscalar", "_rpowerscalar")
SymbolMT.__mod = arith("mod", "_mod", "_modscalar", "_rmodscalar")
SymbolMT.__unm = function(a)
  local s = compose(by_name.mul_scalar, "_mulscalar", 2, a, { scalar = -1 })
  return s
end

---------------------------------------------------------------- groups and outputs
function M.Group(list)
  if type(list) ~= "table" or is_symbol(list) then
    error("sym.Group: takes a list of Symbols, got " .. type(list), 2)
  end
  local outs = {}
  for i = 1, #list do
    local s = list[i]
    if not is_symbol(s) then
      error("sym.Group: element " .. i .. " must be a Symbol, got " .. type(s), 2)
    end
    for _, e in ipairs(s.outputs) do outs[#outs + 1] = e end
  end
  if #outs == 0 then error("sym.Group: no symbols given", 2) end
  return new_symbol(outs)
end

local function check_self(s, method)
  if not is_symbol(s) then
    error("Symbol." .. method .. ": self must be a Symbol, got " .. type(s) .. " (use s:"
      .. method .. "())", 3)
  end
end

function Symbol.list_outputs(s)
  check_self(s, "list_outputs")
  local t = {}
  for i, e in ipairs(s.outputs) do t[i] = output_name(e[1], e[2]) end
  return t
end

function Symbol.num_outputs(s)
  check_self(s, "num_outputs")
  return #s.outputs
end

-- s[i] (1-based) or s["fc1_output"]: one output; methods otherwise
SymbolMT.__index = function(s, k)
  if type(k) == "number" then
    local e = s.outputs[k]
    if not e or k % 1 ~= 0 then
      error(string.format("Symbol: output %s out of range 1..%d", tostring(k), #s.outputs), 2)
    end
    return new_symbol({ e })
  end
  local m = Symbol[k]
  if m ~= nil then return m end
  if type(k) == "string" then
    for _, e in ipairs(s.outputs) do
      if output_name(e[1], e[2]) == k then return new_symbol({ e }) end
    end
  end
  return nil
end

SymbolMT.__tostring = function(s)
  if #s.outputs == 1 then return "<Symbol " .. s.outputs[1][1].name .. ">" end
  return "<Symbol group [" .. table.concat(Symbol.list_outputs(s), ", ") .. "]>"
end

function Symbol._topo(s) return SG.topo(s.outputs) end

-- The node's name when the symbol has one output (or all outputs are one node's); nil
-- for a group (MXNet: None).
function Symbol.name(s)
  check_self(s, "name")
  local n = s.outputs[1][1]
  for _, e in ipairs(s.outputs) do if e[1] ~= n then return nil end end
  return n.name
end

function Symbol.list_inputs(s)
  check_self(s, "list_inputs")
  local t = {}
  for _, n in ipairs(SG.topo(s.outputs)) do if n.op == nil then t[#t + 1] = n.name end end
  return t
end

local function list_vars(s, want_aux)
  local order = SG.topo(s.outputs)
  local aux = SG.aux_set(order)
  local t = {}
  for _, n in ipairs(order) do
    if n.op == nil and (aux[n] == true) == want_aux then t[#t + 1] = n.name end
  end
  return t
end
function Symbol.list_arguments(s)
  check_self(s, "list_arguments")
  return list_vars(s, false)
end
function Symbol.list_auxiliary_states(s)
  check_self(s, "list_auxiliary_states")
  return list_vars(s, true)
end

function Symbol.get_internals(s)
  check_self(s, "get_internals")
  local outs = {}
  for _, n in ipairs(SG.topo(s.outputs)) do
    for k = 1, n.nvis do outs[#outs + 1] = { n, k } end
  end
  return new_symbol(outs)
end

-- The inputs of the output nodes (of every one, for a group), as one symbol; nil when
-- there are none (variables).
function Symbol.get_children(s)
  check_self(s, "get_children")
  local outs = require("mx.graph.compose").children(s)
  return outs and new_symbol(outs) or nil
end

-- s(sym1, ...) / s{name = sym, ...}: MXNet's composition (mx.graph.compose): a new symbol
-- with the given symbols in place of s's variables (positionally: list_arguments order).
SymbolMT.__call = function(s, ...)
  local r = require("mx.graph.compose").compose(s, 2, ...)
  return r
end

-- The MXNet string of each param that differs from its default (or is required).
local fmt_buf = ffi.new("char[512]")
local key_ptr = ffi.new("const char*[1]")
local function param_attrs(n, t)
  if not n.op or not n.P then return t end
  for k = 0, #n.op.params - 1 do
    local d = C.mx_op_params_format(n.op.id, n.P, k, key_ptr, fmt_buf, 512)
    if d > 0 then t[ffi_string(key_ptr[0])] = ffi_string(fmt_buf) end
  end
  return t
end

-- A node attribute or an op param (MXNet's string form) of a one-node symbol.
function Symbol.attr(s, key)
  check_self(s, "attr")
  if type(key) ~= "string" then error("Symbol.attr: key must be a string", 2) end
  local n = s.outputs[1][1]
  if n.attrs[key] ~= nil then return n.attrs[key] end
  if n.attrs[AS.key(key)] ~= nil then return n.attrs[AS.key(key)] end
  if n.op and n.P then
    for k, p in ipairs(n.op.params) do
      if p.name == key then
        if C.mx_op_params_format(n.op.id, n.P, k - 1, key_ptr, fmt_buf, 512) < 0 then return nil end
        return ffi_string(fmt_buf)
      end
    end
  end
  return nil
end

-- attr_dict(): node name -> its attributes and params (MXNet's strings; the hidden keys
-- under both spellings); list_attr(): the same for a one-node symbol's own node
function Symbol.attr_dict(s)
  check_self(s, "attr_dict")
  local t = {}
  for _, n in ipairs(SG.topo(s.outputs)) do
    local a = param_attrs(n, {})
    for k, v in pairs(AS.listed(n.attrs)) do a[k] = v end
    if next(a) ~= nil then t[n.name] = a end
  end
  return t
end
function Symbol.list_attr(s)
  check_self(s, "list_attr")
  local n = s.outputs[1][1]
  local a = param_attrs(n, {})
  for k, v in pairs(AS.listed(n.attrs)) do a[k] = v end
  return a
end

-- mx.sym.AttrScope(attrs, fn, ...) (also mx.AttrScope): mx.graph.attr_scope
M.AttrScope = AS.scope

-- MXNet's _set_attr: node attributes of a one-node symbol (strings).
function Symbol._set_attr(s, t)
  check_self(s, "_set_attr")
  local n = s.outputs[1][1]
  if type(t) ~= "table" then error("Symbol._set_attr: expected a table of attributes, got " .. type(t), 2) end
  for k, v in pairs(t) do AS.check("Symbol._set_attr", tostring(k), tostring(v), 2) end
  for k, v in pairs(t) do n.attrs[tostring(k)] = tostring(v) end
end

---------------------------------------------------------------- the C graph, inference
function Symbol._graph(s)
  check_self(s, "_graph")
  local g, map = SG.lower(s.outputs, 2)
  return g, map
end

function M._from_graph(g)
  return new_symbol(SG.lift(g, visible))
end

-- infer_shape{data = {4, 10}} / infer_shape({4, 10}, ...) (list_arguments order)
local function infer_args(who, ...)
  local n = select("#", ...)
  local first = ...
  if n == 1 and type(first) == "table" then
    local named = false
    for k in pairs(first) do if type(k) == "string" then named = true break end end
    if named or next(first) == nil then return first, nil end
    if type(first[1]) ~= "table" and next(first) ~= nil and type(first[1]) ~= "string" then
      return nil, { first }
    end
  end
  if n == 0 then return nil, nil end
  local list = { ... }
  if who == "infer_type" then return nil, list end
  for i = 1, n do
    if type(list[i]) ~= "table" then
      error(who .. ": argument " .. i .. " must be a shape (a list of dims), got " .. type(list[i]), 3)
    end
  end
  return nil, list
end

-- Returns arg_shapes, out_shapes, aux_shapes (lists in list_arguments / list_outputs /
-- list_auxiliary_states order), or nil, nil, nil when some shape stays unknown.
function Symbol.infer_shape(s, ...)
  check_self(s, "infer_shape")
  local named, pos = infer_args("infer_shape", ...)
  local a, o, x, complete = SG.infer(s.outputs, "infer_shape", named, pos, "shape", 2)
  if not complete then return nil, nil, nil end
  return a, o, x
end
-- Same, with unknown dims as 0 and unknown shapes as {} (MXNet 1.x's convention).
function Symbol.infer_shape_partial(s, ...)
  check_self(s, "infer_shape_partial")
  local named, pos = infer_args("infer_shape_partial", ...)
  local a, o, x = SG.infer(s.outputs, "infer_shape_partial", named, pos, "shape", 2)
  return a, o, x
end
-- dtype names; nil, nil, nil when some stays unknown.
function Symbol.infer_type(s, ...)
  check_self(s, "infer_type")
  local named, pos = infer_args("infer_type", ...)
  local a, o, x, complete = SG.infer(s.outputs, "infer_type", named, pos, "type", 2)
  if not complete then return nil, nil, nil end
  return a, o, x
end

---------------------------------------------------------------- JSON
function Symbol.tojson(s)
  check_self(s, "tojson")
  local g = SG.lower(IX.to_mxnet(s.outputs), 2)
  local out = ffi.new("char*[1]")
  if C.mx_graph_to_json(g, out) ~= 0 then error("tojson: " .. ffi_string(C.mx_last_error()), 2) end
  local js = ffi_string(out[0])
  C.mx_free(out[0])
  return js
end

function Symbol.save(s, fname)
  check_self(s, "save")
  local js = Symbol.tojson(s)
  file.write_atomic("Symbol.save", fname, js, 2)
end

---------------------------------------------------------------- execution (mx.graph.executor)
-- s:bind(ctx, args, {args_grad=, grad_req=, aux_states=}), s:simple_bind(ctx, {grad_req=,
-- name = shape...}), s:eval(ctx, {name = array}): see mx.graph.executor.
function Symbol.bind(s, ctx, args, opts)
  check_self(s, "bind")
  local e = executor.bind(s, ctx, args, opts, 2)
  return e
end
function Symbol.simple_bind(s, ctx, opts)
  check_self(s, "simple_bind")
  local e = executor.simple_bind(s, ctx, opts, 2)
  return e
end
function Symbol.eval(s, ctx, arrays)
  check_self(s, "eval")
  local r = executor.eval(s, ctx, arrays, 2)
  return r
end

local function from_json(who, str, level)
  if type(str) ~= "string" then error(who .. ": expected a JSON string, got " .. type(str), level + 1) end
  local gp = ffi.new("mx_graph*[1]")
  if C.mx_graph_from_json(str, gp) ~= 0 then
    error(who .. ": " .. ffi_string(C.mx_last_error()), level + 1)
  end
  local g = ffi.gc(gp[0], C.mx_graph_free)
  local lifted = M._from_graph(g)
  return new_symbol(IX.from_mxnet(lifted.outputs))
end

function M.fromjson(str)
  local s = from_json("sym.fromjson", str, 2)
  return s
end
M.load_json = M.fromjson

function M.load(fname)
  if type(fname) ~= "string" then error("sym.load: fname must be a string", 2) end
  local f, err = io.open(fname, "rb")
  if not f then error("sym.load: cannot open " .. tostring(err), 2) end
  local str = f:read("*a")
  f:close()
  local s = from_json("sym.load: " .. fname, str, 2)
  return s
end

return M
