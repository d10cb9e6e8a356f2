-- mx.graph.block_node — a Gluon block called on mx.sym Symbols (MXNet 1.x's
-- hybrid_forward with F = symbol): loss(output_sym, label_sym) gives a Symbol, so MXNet
-- 1.x's scripts compose gluon.loss with symbols and train them with Module:
--
--   local loss = mx.sym.make_loss(gluon.loss.SoftmaxCrossEntropyLoss()(fc3, mx.sym.var("label")))
--
-- The call makes one node holding the block (its inputs the given symbols; a nil argument
-- is passed as nil). An executor runs the block on the arrays (its ops traced with the rest
-- of the graph, gradients through autograd); shape and type inference trace the block once
-- its inputs' shapes are known (expand: the block's recorded ops spliced in, mx.autograd.
-- get_symbol). Blocks with Parameters are not offered this way (their variables would need
-- MXNet 1.x's prefixed names): an error. The node has one output; symbol JSON needs the
-- shapes first (expand), so tojson of an unexpanded node is an error.
local type, error, tostring, ipairs, pairs, select, unpack = type, error, tostring, ipairs, pairs,
  select, unpack

local M = {}

-- the pseudo op the node carries (so mx.sym's listings see an op node with one output)
M.OP = { name = "_gluon_block", block_node = true, inputs = {}, outputs = { "output" }, aux = {},
  params = {}, mxnet = {}, pindex = {}, optional_inputs = {}, nin = -1 }

local counters = {}
-- call(block, level, ...): level as error()'s, seen from the caller
function M.call(block, level, ...)
  local sym = require("mx.symbol")
  local cname = tostring(getmetatable(block).__name)
  local params = block:collect_params()
  for _ in params:items() do
    error(cname .. ": a block with Parameters cannot be called on Symbols (use mx.sym's ops, "
      .. "or call it on NDArrays)", level + 1)
  end
  local n = select("#", ...)
  local inputs, pos = {}, {}
  for i = 1, n do
    local a = select(i, ...)
    if a ~= nil then
      if not sym.is_symbol(a) then
        error(string.format("%s: argument %d: a block called on Symbols takes Symbols (or nil), got %s",
          cname, i, type(a)), level + 1)
      end
      if #a.outputs ~= 1 then
        error(string.format("%s: argument %d is a symbol with %d outputs: pick one", cname, i,
          #a.outputs), level + 1)
      end
      inputs[#inputs + 1] = a.outputs[1]
      pos[#inputs] = i
    end
  end
  local hint = cname:lower()
  local k = counters[hint] or 0
  counters[hint] = k + 1
  local node = { name = hint .. k, op = M.OP, block = block, inputs = inputs, argpos = pos,
    nargs = n, attrs = {}, opts = {}, nout = 1, nvis = 1 }
  return sym._new_symbol({ { node, 1 } })
end

-- run(node, arrays): the block on its inputs' arrays (the executor's eval)
function M.run(node, arrays)
  local args = {}
  for j, a in ipairs(arrays) do args[node.argpos[j]] = a end
  return { node.block(unpack(args, 1, node.nargs)) }
end

function M.has_blocks(outputs, topo)
  for _, n in ipairs(topo(outputs)) do if n.op == M.OP then return true end end
  return false
end

-- expand(outputs, infer): outputs with every block node replaced by its traced ops.
-- infer(entries) -> shapes, dtypes of the entries (nil where unknown).
function M.expand(outputs, infer)
  local nd = require("mx.nd")
  local sym = require("mx.symbol")
  local ag = require("mx.autograd")
  local T = require("mx.autograd.tape")
  local memo = {}
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
        local shapes, dtypes = infer(ins)
        local xs, leaves = {}, {}
        for j = 1, #ins do
          if shapes[j] == nil then
            error(n.name .. ": the shapes of the block's inputs are not known (give the data's "
              .. "shapes to infer_shape or bind)", 0)
          end
          local x = nd.zeros(shapes[j], { dtype = dtypes[j] or "float32" })
          x:attach_grad()
          xs[j] = x
        end
        local args = {}
        for j, x in ipairs(xs) do args[n.argpos[j]] = x end
        local out = ag.record(function() return n.block(unpack(args, 1, n.nargs)) end)
        for j, x in ipairs(xs) do
          leaves[T.entry[x]] = sym._new_symbol({ ins[j] })
        end
        local s = require("mx.autograd.get_symbol")(T, out, 1, leaves)
        r = { entries = { s.outputs[1] } }
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
