-- mx.autograd.get_symbol(x): the computation recorded for x as an mx.sym Symbol (MXNet's
-- autograd.get_symbol): every recorded op a node with its params, every variable
-- (attach_grad) and every constant the graph read a variable named var0, var1, ... in the
-- order the walk from x meets them. The views the tape records (x[i], leading-axis ranges,
-- reshape views) become slice_axis / reshape nodes, as hybridize traces them.
local ffi = require("ffi")
local nd = require("mx.nd")

local type, error, pairs, ipairs, unpack = type, error, pairs, ipairs, unpack

-- leaves (optional): tape entry of a variable (or the tensor itself, for a constant) ->
-- the Symbol standing for it (the inputs and parameters of a Gluon block called on
-- Symbols, mx.gluon.symbol_node); with leaves, other constants become value nodes (named
-- _const<k>) instead of variables, and x may be a list of tensors (their Symbols, a list,
-- sharing their nodes), one of them a leaf itself.
return function(T, x, level, leaves)
  local list = leaves and type(x) == "table" and not nd.is_tensor(x)
  local xs = list and x or { x }
  for _, t in ipairs(xs) do
    if not nd.is_tensor(t) then
      error("get_symbol: x must be a tensor, got " .. type(t), level + 1)
    end
    local e = T.entry[t]
    if type(e) ~= "number" and not (leaves and (leaves[t] or (e and leaves[e]))) then
      error("get_symbol: x is not the result of a computation recorded by mx.autograd.record "
        .. "(a variable, a constant, or recorded through a non-differentiable op only)", level + 1)
    end
  end
  local sym = require("mx.symbol")
  local VIEW = nd._view_ops
  local vars, nvars = {}, 0
  local function var_for(key)
    local v = vars[key]
    if v == nil then
      if leaves and leaves[key] then
        v = leaves[key]
      elseif leaves and nd.is_tensor(key) then
        v = sym._const(key, "_const" .. nvars)
        nvars = nvars + 1
      else
        v = sym.var("var" .. nvars)
        nvars = nvars + 1
      end
      vars[key] = v
    end
    return v
  end
  local function out_shape(node, k)
    local outs = node[6]
    if outs then return outs[k]:shape() end
    local b = T.box(ffi.cast(T.mx_tensor_p, node[5]))
    return b:shape()
  end
  local built = {}
  local function build(id)
    local r = built[id]
    if r then return r end
    local node = T.nodes[id]
    if node == nil then
      error("get_symbol: the recorded graph was freed (by backward, or a GC of its tensors)",
        level + 3)
    end
    local op, opts = node[1], node[2] or {}
    local ins = {}
    for j = 1, node[4] do
      local p = T.parent_of(node, j)
      if type(p) == "number" then
        ins[j] = build(p % T.KMUL)[T.ref_k(p)]
      elseif type(p) == "table" then
        ins[j] = var_for(p)
      else
        ins[j] = var_for(T.input_of(node, j))
      end
    end
    local s
    if op == VIEW.reshape then
      s = sym.reshape(ins[1], { shape = out_shape(node, 1) })
    elseif op == VIEW.slice0 then
      s = sym.slice_axis(ins[1], { axis = 1, begin = opts.begin + 1, ["end"] = opts["end"] })
    elseif op == VIEW.index0 then
      s = sym.reshape(sym.slice_axis(ins[1], { axis = 1, begin = opts.index, ["end"] = opts.index }),
        { shape = out_shape(node, 1) })
    else
      local f = sym[op.name]
      if f == nil then
        error("get_symbol: the recorded op '" .. tostring(op.name) .. "' has no symbol form",
          level + 3)
      end
      local o = {}
      for k, v in pairs(opts) do if k ~= "out" then o[k] = v end end
      if op.nin == -1 then s = f(ins, o) else
        ins[#ins + 1] = o
        s = f(unpack(ins))
      end
    end
    local outs = {}
    for k = 1, s:num_outputs() do outs[k] = s:num_outputs() == 1 and s or s[k] end
    built[id] = outs
    return outs
  end
  local r = {}
  for i, t in ipairs(xs) do
    local e = T.entry[t]
    if type(e) == "number" then r[i] = build(e % T.KMUL)[T.ref_k(e)]
    else r[i] = leaves[t] or leaves[e] end
  end
  if list then return r end
  return r[1]
end
