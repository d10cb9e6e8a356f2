-- mx.gluon._export_shapes — which constants of a hybridized block's trace followed its
-- input's shape, for export: a trace holds numbers (reshape targets, slice bounds, a
-- scalar 1/n, a zeros shape) that the forward computed from x:shape(), and a file
-- holding them runs other input shapes wrongly. export traces the block again
-- (CachedOp:probe: predict mode, nothing recorded or cached) on zeros of the last
-- call's shapes (the control) and once per input dim with that dim one larger, and
-- compares the graphs node by node (a dim the forward refuses one larger is tried at twice
-- its size):
--   * a reshape whose target moved with the input is written in MXNet's codes where one
--     form fits every trace (0: the input's dim at that position; one -1: inferred; and
--     where those cannot say it, -2: the remaining dims, -3: two input dims merged, -4:
--     one split in two);
--   * an RNN's zero begin state moving with the batch is export's own rewrite;
--   * any other difference (another op's parameter, a captured constant's shape, a
--     different graph) pins the input dims that caused it: the file's input variable
--     gets __shape__ with those dims (0 for the free ones), and imports refuses other
--     sizes of them with a clear error.
-- A forward that refuses the probe's shape (a layer with a fixed input size) leaves
-- that dim as it is; one whose control trace is another graph than the last call's
-- (a branch on the input's values) is not analysed (nil: export's older rule for
-- reshape's batch dim applies).
local nd = require("mx.nd")
local sym = require("mx.symbol")
local SG = require("mx.graph.symbol_graph")
local SP = require("mx.graph.symbol_params")
local hybrid = require("mx.gluon._hybrid")
local lib = require("mx.core.lib")

local ffi, C = lib.ffi, lib.C
local type, pairs, ipairs, tostring, unpack = type, pairs, ipairs, tostring, unpack

local M = {}

-- The nodes reachable from a variant's outputs (topological order), and by name.
local function nodes_of(v)
  local lifted = sym._from_graph(v.frec.g)
  local outs = {}
  for k = 1, v.nout do outs[k] = lifted.outputs[k] end
  local list = SG.topo(outs)
  local at = {}
  for k, n in ipairs(list) do at[n] = k end
  return list, at
end

-- reshape nodes' input and output shapes in a trace, by node name (views included; an
-- index view's reshape reads a slice the step does not show: left out)
local function reshape_shapes(v)
  local g, r, view_index = v.frec.g, {}, nd._view_ops.index0
  local rid = lib.ops_by_name.reshape.id
  for _, st in ipairs(v.frec.steps) do
    local e = st.outs[1] and v.frec.ent[st.outs[1]]
    if e and st.op ~= view_index and C.mx_graph_node_op(g, e[1]) == rid and nd.is_tensor(st.ins[1]) then
      r[ffi.string(C.mx_graph_node_name(g, e[1]))] = { ins = st.ins[1]:shape(), outs = st.outs[1]:shape() }
    end
  end
  return r
end

local function same_value(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  for k, x in pairs(a) do if not same_value(x, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local function opts_of(n)
  local o = SP.opts(n.op, n.P)
  if n.op.train_param then o[n.op.train_param] = nil end
  return o
end

-- Compares two traces' node lists: "structure" when they are different graphs, else
-- the names of the nodes whose parameters (or constant shapes) differ.
local function compare(A, atA, B, atB, params_too)
  if #A ~= #B then return "structure" end
  local diff = {}
  for k = 1, #A do
    local a, b = A[k], B[k]
    if a.name ~= b.name or a.op ~= b.op or #a.inputs ~= #b.inputs then return "structure" end
    for j, e in ipairs(a.inputs) do
      local f = b.inputs[j]
      if atA[e[1]] ~= atB[f[1]] or e[2] ~= f[2] then return "structure" end
    end
    if params_too then
      if a.op then
        if not same_value(opts_of(a), opts_of(b)) then diff[#diff + 1] = a.name end
      elseif (a.value ~= nil) ~= (b.value ~= nil) then
        return "structure"
      elseif a.value ~= nil and (a.value:dtype() ~= b.value:dtype()
          or not same_value(a.value:shape(), b.value:shape())) then
        diff[#diff + 1] = a.name
      end
    end
  end
  return diff
end

-- MXNet's reshape of shape `ins` by a target in its codes (core/ops/shape.c's rules): a
-- dim (which passes over one input dim), 0 (copy it), one -1 (inferred), -2 (copy all the
-- rest), -3 (the product of the next two), -4 a b (split one into a and b, one of them
-- may be -1); nil where the target does not apply.
local function mx_reshape(ins, codes)
  local total, out, infer, j, xn = 1, {}, nil, 1, #ins
  for _, d in ipairs(ins) do total = total * d end
  local i = 1
  while i <= #codes do
    local c = codes[i]
    if c > 0 then out[#out + 1] = c; j = j + 1
    elseif c == 0 then
      if j > xn then return nil end
      out[#out + 1] = ins[j]; j = j + 1
    elseif c == -1 then
      if infer then return nil end
      out[#out + 1] = 1; infer = #out; j = j + 1
    elseif c == -2 then
      while j <= xn do out[#out + 1] = ins[j]; j = j + 1 end
    elseif c == -3 then
      if j + 1 > xn then return nil end
      out[#out + 1] = ins[j] * ins[j + 1]; j = j + 2
    elseif c == -4 then
      local a, b, d = codes[i + 1], codes[i + 2], ins[j]
      if not a or not b or not d then return nil end
      if a == -1 and b > 0 then a = d / b end
      if b == -1 and a > 0 then b = d / a end
      if a < 0 or b < 0 or a * b ~= d or a % 1 ~= 0 or b % 1 ~= 0 then return nil end
      out[#out + 1], out[#out + 2] = a, b
      i, j = i + 2, j + 1
    else
      return nil
    end
    i = i + 1
  end
  local known = 1
  for k, d in ipairs(out) do if k ~= infer then known = known * d end end
  if infer then
    if known == 0 or total % known ~= 0 then return nil end
    out[infer] = total / known
  elseif known ~= total then
    return nil
  end
  return out
end

-- A target in MXNet's codes that gives every trace its output shape, or nil. given: the
-- traced node's own target, whose 0 and -1 codes are kept where the dim did not move.
local function fits(traces, codes)
  for _, t in ipairs(traces) do
    if not same_value(mx_reshape(t.ins, codes), t.outs) then return false end
  end
  return true
end
local function position_codes(traces, given)
  local first = traces[1]
  local n = #first.outs
  local codes, free = {}, {}
  for j = 1, n do
    local varies, copies = false, true
    for _, t in ipairs(traces) do
      if #t.outs ~= n then return nil end
      varies = varies or t.outs[j] ~= first.outs[j]
      copies = copies and t.ins[j] == t.outs[j]
    end
    if not varies then codes[j] = first.outs[j]
    elseif copies then codes[j] = 0
    else free[#free + 1] = j end
  end
  if #free > 1 then return nil end
  if free[1] then codes[free[1]] = -1 end
  if given and #given == n then
    local kept, infer = {}, free[1] ~= nil
    for j = 1, n do
      local g = given[j]
      if codes[j] > 0 and (g == 0 or (g == -1 and not infer)) then
        kept[j] = g
        infer = infer or g == -1
      else
        kept[j] = codes[j]
      end
    end
    if fits(traces, kept) then return kept end
  end
  return fits(traces, codes) and codes or nil
end

-- A target using the codes that move along the input's dims (-2, -3, -4), for what a
-- code per output position cannot say: (n, t, c) -> (n * t, c) is (-3, 0), (n * h, t, d)
-- -> (n, h, t, d) is (-4, -1, h, 0, 0), (n, t, c) -> (n, t / 2, 2, c) is (0, -4, -1, 2, 0).
-- A depth-first walk over (input dim, output dim): each output dim is a copy (0), a
-- merge of two input dims (-3), the first of a split of one (-4 with a fixed part), the
-- rest copied (-2), a dim that does not move, or the one inferred (-1); every choice
-- must hold in every trace. The first target found that gives every trace its output.
local function moving_codes(traces)
  local xn, n = #traces[1].ins, #traces[1].outs
  for _, t in ipairs(traces) do
    if #t.ins ~= xn or #t.outs ~= n then return nil end
  end
  local function all(f)
    for _, t in ipairs(traces) do if not f(t.ins, t.outs) then return false end end
    return true
  end
  local function const(j)
    return all(function(_, o) return o[j] == traces[1].outs[j] end)
  end
  local codes, budget = {}, 20000
  local function walk(i, j, inferred)
    budget = budget - 1
    if budget < 0 then return false end
    if j > n then return fits(traces, codes) end
    local k = #codes
    local function try(i2, j2, inf2, ...)
      local add = { ... }
      for q = 1, #add do codes[k + q] = add[q] end
      if walk(i2, j2, inf2) then return true end
      for q = #add + k, k + 1, -1 do codes[q] = nil end
      return false
    end
    if i <= xn and all(function(x, o) return x[i] == o[j] end) and try(i + 1, j + 1, inferred, 0) then
      return true
    end
    if i < xn and all(function(x, o) return x[i] * x[i + 1] == o[j] end)
        and try(i + 2, j + 1, inferred, -3) then
      return true
    end
    if i <= xn and j < n and all(function(x, o) return x[i] == o[j] * o[j + 1] end) then
      local ca, cb = const(j), const(j + 1)
      local a, b = traces[1].outs[j], traces[1].outs[j + 1]
      if (ca and cb and try(i + 1, j + 2, inferred, -4, a, b))
          or (cb and try(i + 1, j + 2, inferred, -4, -1, b))
          or (ca and try(i + 1, j + 2, inferred, -4, a, -1)) then
        return true
      end
    end
    if i < xn and j + (xn - i) <= n and all(function(x, o)
      for q = 0, xn - i do if x[i + q] ~= o[j + q] then return false end end
      return true
    end) and try(xn + 1, j + (xn - i) + 1, inferred, -2) then
      return true
    end
    if const(j) and try(i + 1, j + 1, inferred, traces[1].outs[j]) then return true end
    return not inferred and try(i + 1, j + 1, true, -1)
  end
  return walk(1, 1, false) and codes or nil
end

local function reshape_codes(traces, given)
  return position_codes(traces, given) or moving_codes(traces)
end

-- zeros nodes an RNN reads as its begin states (export rewrites their batch dim)
local function rnn_states(list)
  local s = {}
  for _, n in ipairs(list) do
    if n.op and n.op.name == "rnn" then
      for j = 3, 4 do
        local z = n.inputs[j] and n.inputs[j][1]
        if z and z.op and z.op.name == "zeros" then s[z.name] = true end
      end
    end
  end
  return s
end

local function only_batch_differs(a, b)
  local sa, sb = opts_of(a).shape, opts_of(b).shape
  if not sa or not sb or #sa ~= #sb or #sa ~= 3 then return false end
  return sa[1] == sb[1] and sa[3] == sb[3]
end

-- analyse(block, v) -> nil (not analysed), or { reshape = {name -> codes}, pins =
-- {input name -> {shape = traced shape, dims = {dim -> size}}} }.
function M.analyse(block, v)
  local op = hybrid.cached_op(block)
  local args = v.args
  if not op or not args then return nil end
  local tensor, nt = v.tensor_args, 0
  for i = 1, args.n do
    local a = args[i]
    if tensor[i] then
      nt = nt + 1
    elseif type(a) == "table" then
      for _, x in pairs(a) do if nd.is_tensor(x) then return nil end end -- tensors in a table
    end
  end
  if nt == 0 then return nil end
  local function remake(i, d, twice)
    local r = { n = args.n }
    for k = 1, args.n do
      local a = args[k]
      if tensor[k] then
        local sh = { unpack(a.shape) }
        if k == i then sh[d] = twice and 2 * sh[d] or sh[d] + 1 end
        r[k] = nd.zeros(sh, { dtype = a.dtype, ctx = a.ctx })
      else
        r[k] = a
      end
    end
    return r
  end
  local control = op:probe(remake(0, 0))
  if not control then return nil end
  local B, atB = nodes_of(v)
  local Cn, atC = nodes_of(control)
  if compare(B, atB, Cn, atC, false) == "structure" then return nil end
  local states = rnn_states(Cn)
  local base_rs, ctl_rs = reshape_shapes(v), reshape_shapes(control)
  local res = { reshape = {}, pins = {} }
  local cand = {} -- reshape names whose target moved in some probe
  local probes = {} -- the probes tracing the same graph: { i, d, reshape shapes }
  local function name_of(i) return nt == 1 and "data" or "data" .. (i - 1) end
  local function pin(i, d)
    local nm = name_of(i)
    res.pins[nm] = res.pins[nm] or { shape = args[i].shape, dims = {} }
    res.pins[nm].dims[d] = args[i].shape[d]
  end
  local by_name = {}
  for _, n in ipairs(Cn) do by_name[n.name] = n end
  for i = 1, args.n do
    local a = args[i]
    if tensor[i] then
      for d = 1, #a.shape do
        -- one larger, else twice (a forward splitting the dim in halves)
        local alt = op:probe(remake(i, d)) or op:probe(remake(i, d, true))
        if alt then -- (else the forward refuses other sizes of this dim)
          local A, atA = nodes_of(alt)
          local diff = compare(Cn, atC, A, atA, true)
          if diff == "structure" then
            pin(i, d)
          else
            probes[#probes + 1] = { i, d, reshape_shapes(alt) }
            for _, nm in ipairs(diff) do
              local node = by_name[nm]
              if node.op and node.op.name == "reshape" and ctl_rs[nm] then
                cand[nm] = true
              elseif not (states[nm] and only_batch_differs(node, A[atC[node]])) then
                pin(i, d)
              end
            end
          end
        end
      end
    end
  end
  -- a rewritten target must fit every probe, also those its traced numbers fitted
  local function moved(a, b) return not (b and same_value(a.ins, b.ins) and same_value(a.outs, b.outs)) end
  for nm in pairs(cand) do
    local c = { fixed = { ctl_rs[nm], base_rs[nm] }, causes = {} }
    for _, pr in ipairs(probes) do
      local t = pr[3][nm]
      if not t then pin(pr[1], pr[2])
      elseif moved(ctl_rs[nm], t) then c.causes[#c.causes + 1] = { pr[1], pr[2], t } end
    end
    cand[nm] = c
  end
  -- each reshape: the fewest input dims pinned (the last dims first: a batch dim stays
  -- free where it can) for which one target in codes fits the other traces
  for nm, c in pairs(cand) do
    local k = #c.causes
    local best, pinned
    for size = 0, k do
      for mask = 2 ^ k - 1, 0, -1 do
        local traces, bits, sel = { c.fixed[1], c.fixed[2] }, 0, {}
        for j = 1, k do
          if math.floor(mask / 2 ^ (j - 1)) % 2 == 1 then
            bits = bits + 1
            sel[#sel + 1] = c.causes[j]
          else
            traces[#traces + 1] = c.causes[j][3]
          end
        end
        if bits == size then
          local codes = reshape_codes(traces, opts_of(by_name[nm]).shape)
          if codes then best, pinned = codes, sel break end
        end
      end
      if best then break end
    end
    if best then res.reshape[nm] = best end
    for _, cause in ipairs(pinned or c.causes) do pin(cause[1], cause[2]) end
  end
  return res
end

-- "(4, 0, 0)": a pinned input's __shape__ (the traced size of each pinned dim, 0 for
-- the others).
function M.shape_attr(pin)
  local shape, dims = pin.shape, pin.dims
  local t = {}
  for d = 1, #shape do t[d] = tostring(dims[d] or 0) end
  return "(" .. table.concat(t, ", ") .. (#shape == 1 and ",)" or ")")
end

return M
