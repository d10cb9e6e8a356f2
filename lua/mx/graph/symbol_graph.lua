-- mx.graph.symbol_graph — mx.sym's Lua DAG <-> the core's mx_graph (mx.h "graphs"): lowering
-- (Symbol:_graph, through mx.graph.cgraph), lifting a C graph back to Lua nodes
-- (mx.sym.fromjson/load), and the whole-graph shape/dtype inference behind infer_shape /
-- infer_type. The node tables are described in lua/mx/symbol.lua's header.
local lib = require("mx.core.lib")
local Pm = require("mx.nd.params")
local SP = require("mx.graph.symbol_params")
local G = require("mx.graph.cgraph")
local H = require("mx.nd.handles")

local ffi, C = lib.ffi, lib.C
local ffi_string, tonumber, type, error = ffi.string, tonumber, type, error
local pairs, ipairs, pcall = pairs, ipairs, pcall

local M = {}

local last_error = G.last_error

-- Nodes reachable from `outputs` (entries {node, out}) in MXNet's DFS post-order (inputs
-- in order, heads in order): the order of list_inputs and of the JSON's nodes.
-- Iterative: a chain of 100k nodes must not overflow the Lua stack.
function M.topo(outputs)
  local order, seen = {}, {}
  local sn, si = {}, {}
  for _, e in ipairs(outputs) do
    local root = e[1]
    if not seen[root] then
      seen[root] = true
      local top = 1
      sn[1], si[1] = root, 0
      while top > 0 do
        local n = sn[top]
        local i = si[top] + 1
        local ins = n.inputs
        if i <= #ins then
          si[top] = i
          local c = ins[i][1]
          if not seen[c] then
            seen[c] = true
            top = top + 1
            sn[top], si[top] = c, 0
          end
        else
          order[#order + 1] = n
          top = top - 1
        end
      end
    end
  end
  return order
end

-- Variables read at an auxiliary position of some op (batch_norm's moving_mean/var).
function M.aux_set(order)
  local aux = {}
  for _, n in ipairs(order) do
    local op = n.op
    if n.aux_pos then -- a Gluon block's node: its parameters' running statistics
      for j in pairs(n.aux_pos) do
        local src = n.inputs[j][1]
        if src.op == nil then aux[src] = true end
      end
    elseif op and #op.aux > 0 then
      local first = #op.inputs - #op.aux + 1
      for j = first, #n.inputs do
        local src = n.inputs[j][1]
        if src.op == nil then aux[src] = true end
      end
    end
  end
  return aux
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

-- lower(outputs): a new C graph (ffi.gc'd) and its map (symbol.lua's header).
function M.lower(outputs, level)
  local order = M.topo(outputs)
  local g = G.new("symbol", level + 1)
  local id = {}
  local inn, ino = {}, {}
  local arg_ids, aux_ids, input_ids = {}, {}, {}
  local aux = M.aux_set(order)
  for _, n in ipairs(order) do
    local r
    if n.op and n.op.block_node then
      error(n.name .. ": a Gluon block node has no graph form before its inputs' shapes are "
        .. "known (infer_shape or bind the symbol first)", level + 1)
    end
    if n.op == nil then
      r = G.var(g, n.name, nil, level + 1)
      input_ids[#input_ids + 1] = r
      if aux[n] then aux_ids[#aux_ids + 1] = r else arg_ids[#arg_ids + 1] = r end
    else
      local k = #n.inputs
      if k > 64 then error(n.name .. ": at most 64 inputs", level + 1) end
      for j = 1, k do
        local e = n.inputs[j]
        inn[j], ino[j] = id[e[1]], e[2] - 1
      end
      r = G.op(g, n.op.id, n.name, n.P, k, inn, ino, nil, level + 1)
    end
    id[n] = r
    for _, key in ipairs(sorted_keys(n.attrs)) do
      G.attr(g, r, key, tostring(n.attrs[key]), nil, level + 1)
    end
    if n.value ~= nil then G.value(g, r, n.value, nil, level + 1) end
  end
  local hn, ho = {}, {}
  local heads = {}
  for k, e in ipairs(outputs) do
    hn[k], ho[k] = id[e[1]], e[2] - 1
    heads[k] = { id[e[1]], e[2] - 1 }
  end
  G.heads(g, #outputs, hn, ho, nil, level + 1)
  return g, { nodes = order, id = id, heads = heads, args = arg_ids, aux = aux_ids,
    inputs = input_ids }
end

-- lift(g, visible): the Lua nodes of a C graph and the entries of its heads.
function M.lift(g, visible)
  local nodes = {}
  local oi = ffi.new("int[1]")
  for i = 0, C.mx_graph_num_nodes(g) - 1 do
    local n = { name = ffi_string(C.mx_graph_node_name(g, i)), inputs = {}, attrs = {} }
    for k = 0, C.mx_graph_num_attrs(g, i) - 1 do
      n.attrs[ffi_string(C.mx_graph_attr_key(g, i, k))] = ffi_string(C.mx_graph_attr_val(g, i, k))
    end
    local opid = C.mx_graph_node_op(g, i)
    if opid >= 0 then
      local op = lib.ops[opid + 1]
      n.op = op
      n.P = SP.copy(op, C.mx_graph_node_params(g, i))
      n.opts = SP.opts(op, n.P)
      for k = 0, C.mx_graph_node_num_inputs(g, i) - 1 do
        local src = C.mx_graph_node_input(g, i, k, oi)
        n.inputs[k + 1] = { nodes[src + 1], oi[0] + 1 }
      end
      n.nout = C.mx_graph_node_num_outputs(g, i)
      n.nvis = visible(op, n.P, n.nout)
    elseif opid == -1 then
      n.nout, n.nvis = 1, 1
      local v = C.mx_graph_node_value(g, i)
      if v ~= nil then
        C.mx_tensor_retain(v)
        n.value = H._wrap(v)
      end
    else
      error("symbol: node " .. i .. " (" .. n.name .. ") is a fused node: not a symbol", 3)
    end
    nodes[i + 1] = n
  end
  local outs = {}
  for k = 0, C.mx_graph_num_heads(g) - 1 do
    local h = C.mx_graph_head(g, k, oi)
    outs[k + 1] = { nodes[h + 1], oi[0] + 1 }
  end
  return outs
end

---------------------------------------------------------------- inference
-- "(3, 4)" / "[3,4]" -> {3, 4}; nil when malformed
local function parse_shape(s)
  if type(s) ~= "string" then return nil end
  local t = {}
  for d in s:gmatch("-?%d+") do t[#t + 1] = tonumber(d) end
  return t
end
M.parse_shape = parse_shape

local function set_shape(d, shape)
  d.ndim = #shape
  for i = 1, #shape do
    local v = shape[i]
    d.shape[i - 1] = (v == nil or v <= 0) and -1 or v -- MXNet 1.x: 0 is an unknown dim
  end
end

local function get_shape(d)
  if d.ndim < 0 then return {}, false end
  local t, known = {}, true
  for i = 0, d.ndim - 1 do
    local v = tonumber(d.shape[i])
    if v < 0 then v, known = 0, false end
    t[i + 1] = v
  end
  return t, known
end

-- Dtypes the core could not infer because shapes are unknown (an op infers nothing
-- until all its inputs are known): MXNet's default rule, in graph order: an op's
-- unknown variable inputs and its outputs take its first known input dtype (its dtype
-- param for ops that have one: cast). Exact for the layers (FullyConnected, Convolution,
-- BatchNorm, elementwise); with known shapes the core's own answer stands.
-- The op's own output dtypes for these input dtypes (index-valued outputs are int64:
-- argmax, shape_array), from its inference on placeholder shapes (dims of 4, rank 4, 2
-- or 1); nil when no placeholder fits the op's params.
local PROBE_RANKS = { 4, 2, 1 }
local F16, F32 = 2, 0
local function probe_types(g, id, nin, nout, e, known)
  if nin == 0 or nin > 64 or nout > 64 then return nil end
  local oi = ffi.new("int[1]")
  local ins, outs = ffi.new("mx_desc[?]", nin), ffi.new("mx_desc[?]", nout)
  local op, P = C.mx_graph_node_op(g, id), C.mx_graph_node_params(g, id)
  for _, r in ipairs(PROBE_RANKS) do
    for k = 0, nin - 1 do
      local src = C.mx_graph_node_input(g, id, k, oi)
      local dt = e[C.mx_graph_entry(g, src, oi[0])].dtype
      ins[k].ndim, ins[k].dtype = r, dt >= 0 and dt or known
      for d = 0, r - 1 do ins[k].shape[d] = 4 end
    end
    if C.mx_op_infer(op, P, nin, ins, nout, outs) == 0 then
      local t = {}
      for k = 0, nout - 1 do t[k] = outs[k].dtype >= 0 and tonumber(outs[k].dtype) or nil end
      return t
    end
  end
  return nil
end

function M.fill_types(g, map, e)
  local oi = ffi.new("int[1]")
  for id = 0, #map.nodes - 1 do
    local n = map.nodes[id + 1]
    if n.op then
      local known = -1
      local nin = C.mx_graph_node_num_inputs(g, id)
      for k = 0, nin - 1 do
        local src = C.mx_graph_node_input(g, id, k, oi)
        local dt = e[C.mx_graph_entry(g, src, oi[0])].dtype
        if dt >= 0 then known = dt break end
      end
      if known >= 0 then
        for k = 0, nin - 1 do
          local src = C.mx_graph_node_input(g, id, k, oi)
          local d = e[C.mx_graph_entry(g, src, oi[0])]
          if d.dtype < 0 and C.mx_graph_node_op(g, src) == -1 then d.dtype = known end
        end
      end
      local out = known
      local pd = n.op.pindex.dtype
      if pd and n.P and pd.type == "dtype" and not (pd.optional and not n.P.has_dtype) then
        out = tonumber(n.P.dtype)
      end
      local probed = known >= 0 and probe_types(g, id, nin, n.nout, e, known)
      if n.op.half and known == F16 then -- (the norm ops' rule: core/ops/optable.lua `half`)
        probed = {}
        for k = 0, n.nout - 1 do probed[k] = (k == 0 or n.op.half == "all") and F16 or F32 end
      end
      if out >= 0 then
        for k = 0, n.nout - 1 do
          local d = e[C.mx_graph_entry(g, id, k)]
          if d.dtype < 0 then d.dtype = probed and probed[k] or out end
        end
      end
    end
  end
end

-- infer(sym_outputs, who, named, positional, kind, level): runs mx_graph_infer with the
-- given inputs (named: name -> shape/dtype; positional: list in list_arguments order).
-- kind "shape" or "type". Returns arg, out, aux lists and whether everything is known.
-- ph: nil, or a size that stands for every unknown (0) dim given (the partial answer's
-- second and third passes, below); subst counts the unknown dims given.
local function with_ph(shape, ph, subst)
  local t = {}
  for i = 1, #shape do
    local v = shape[i]
    if v == 0 then
      subst.n = subst.n + 1
      v = ph or 0
    end
    t[i] = v
  end
  return t
end

-- vdim: nil, or the size every unknown (0) dim of a variable's __shape__ takes (M.infer's
-- try of each given size, as for creation nodes), or a table name -> {dim -> size} (the
-- search of one size per unknown dim); sizes: nil, or a set every known dim of every
-- entry is added to (the candidates of that search)
local function infer_once(outputs, who, named, positional, kind, level, ph, subst, vdim, sizes)
  local g, map = M.lower(outputs, level + 1)
  local ne = C.mx_graph_num_entries(g)
  local e = ffi.new("mx_desc[?]", math.max(ne, 1))
  for i = 0, ne - 1 do
    e[i].ndim, e[i].dtype = -1, -1
    for d = 0, 7 do e[i].shape[d] = -1 end
  end
  local by_name = {}
  for _, id in ipairs(map.inputs) do
    local n = map.nodes[id + 1]
    by_name[n.name] = id
    local d = e[C.mx_graph_entry(g, id, 0)]
    local sh = parse_shape(n.attrs.__shape__)
    if sh and vdim then
      local t = {}
      local per = type(vdim) == "table" and (vdim[n.name] or {})
      for i = 1, #sh do t[i] = sh[i] == 0 and (per and (per[i] or 0) or vdim) or sh[i] end
      sh = t
    end
    if sh then set_shape(d, with_ph(sh, ph, subst or { n = 0 })) end
    local dt = n.attrs.__dtype__
    if dt then d.dtype = tonumber(dt) or Pm.dtype_code(dt) or -1 end
  end
  local function give(id, v, what)
    local d = e[C.mx_graph_entry(g, id, 0)]
    if kind == "shape" then
      if type(v) ~= "table" then
        error(string.format("%s: %s: a shape must be a list of dims, got %s", who, what, type(v)),
          level + 2)
      end
      for i = 1, #v do
        if not Pm._is_int(v[i]) or v[i] < 0 then
          error(string.format("%s: %s: dim %d must be a non-negative integer, got %s", who, what,
            i, tostring(v[i])), level + 2)
        end
      end
      if #v > 8 then error(who .. ": " .. what .. ": at most 8 dims", level + 2) end
      set_shape(d, with_ph(v, ph, subst))
    else
      local c = Pm.dtype_code(v)
      if not c then
        error(string.format("%s: %s: unknown dtype %s", who, what, tostring(v)), level + 2)
      end
      d.dtype = c
    end
  end
  if positional then
    if #positional > #map.args then
      error(string.format("%s: %d positional inputs for %d arguments", who, #positional,
        #map.args), level + 1)
    end
    for i, v in ipairs(positional) do
      give(map.args[i], v, "argument " .. i .. " (" .. map.nodes[map.args[i] + 1].name .. ")")
    end
  end
  for k, v in pairs(named or {}) do
    local id = by_name[k]
    if not id then
      local names = {}
      for _, i in ipairs(map.inputs) do names[#names + 1] = map.nodes[i + 1].name end
      error(string.format("%s: no input named '%s' (inputs: %s)", who, tostring(k),
        table.concat(names, ", ")), level + 1)
    end
    give(id, v, "'" .. k .. "'")
  end
  if kind == "shape" then
    -- shapes do not depend on dtypes, but the ops' inference needs one: the variables'
    -- unknown dtypes become the first known one (float32 when none is)
    local dflt = 0
    for _, id in ipairs(map.inputs) do
      local dt = e[C.mx_graph_entry(g, id, 0)].dtype
      if dt >= 0 then dflt = dt break end
    end
    for _, id in ipairs(map.inputs) do
      local d = e[C.mx_graph_entry(g, id, 0)]
      if d.dtype < 0 then d.dtype = dflt end
    end
  end
  local rc = C.mx_graph_infer(g, e)
  if sizes then -- (also what a failing inference got to before its conflict)
    for i = 0, ne - 1 do
      for d = 0, e[i].ndim - 1 do
        local v = tonumber(e[i].shape[d])
        if v > 0 then sizes[v] = true end
      end
    end
  end
  if rc ~= 0 then
    error(who .. ": " .. last_error():gsub("^infer_shape: ", ""), level + 1)
  end
  if kind == "type" then M.fill_types(g, map, e) end
  local complete = true
  local function read(id, out)
    local d = e[C.mx_graph_entry(g, id, out)]
    if kind == "shape" then
      local s, known = get_shape(d)
      complete = complete and known
      return s
    end
    if d.dtype < 0 then complete = false return false end
    return Pm.dtype_name[d.dtype]
  end
  local args, outs, aux = {}, {}, {}
  for i, id in ipairs(map.args) do args[i] = read(id, 0) end
  for i, h in ipairs(map.heads) do outs[i] = read(h[1], h[2]) end
  for i, id in ipairs(map.aux) do aux[i] = read(id, 0) end
  return args, outs, aux, complete
end

-- Creation nodes whose shape has unknown dims (MXNet 1.x's 0: the RNN cells' begin states
-- (0, hidden)) get their size from their consumers in MXNet's two-way inference; the
-- core's inference runs forward. with_creation_dims(outputs, v) is the graph with those
-- dims set to v (new nodes where the change reaches; nothing shared is modified), to try
-- each batch-like size of the given shapes (M.infer).
local function has_unknown_creation(outputs)
  for _, n in ipairs(M.topo(outputs)) do
    local sh = n.op and n.op.ctx and n.opts and n.opts.shape
    if type(sh) == "table" then
      for _, d in ipairs(sh) do if d < 0 then return true end end
    end
  end
  return false
end
local function with_creation_dims(outputs, v)
  local memo = {}
  local function node_of(n)
    local r = memo[n]
    if r ~= nil then return r end
    r = n
    local sh = n.op and n.op.ctx and n.opts and n.opts.shape
    if type(sh) == "table" then
      local new, changed = {}, false
      for i, d in ipairs(sh) do
        new[i] = d
        if d < 0 then new[i], changed = v, true end
      end
      if changed then
        r = {}
        for k, x in pairs(n) do r[k] = x end
        local o = {}
        for k, x in pairs(n.opts) do o[k] = x end
        o.shape = new
        r.opts = o
        local P = ffi.new(n.op.ctype)
        ffi.copy(P, n.P, n.op.size)
        for i = 1, #new do P.shape.v[i - 1] = new[i] end
        r.P = P
      end
    elseif n.op then
      local ins, changed = {}, false
      for i, e in ipairs(n.inputs) do
        local m = node_of(e[1])
        ins[i] = m == e[1] and e or { m, e[2] }
        if m ~= e[1] then changed = true end
      end
      if changed then
        r = {}
        for k, x in pairs(n) do r[k] = x end
        r.inputs = ins
      end
    end
    memo[n] = r
    return r
  end
  local outs = {}
  for i, e in ipairs(outputs) do
    local m = node_of(e[1])
    outs[i] = m == e[1] and e or { m, e[2] }
  end
  return outs
end
M._with_creation_dims = with_creation_dims

-- Shape inference with unknown dims (0) given: the ops' own partial inference, then what
-- stays unknown from two more passes with every unknown dim standing for 2 and for 3: a dim
-- both passes give the same value does not depend on the unknown ones (fully_connected's
-- weight after a relu of a batch-unknown layer), one they give differently stays 0 (MXNet
-- 1.x's infer_shape_partial answers). A pass the placeholders make fail changes nothing.
-- The one size among `sizes` for which run(d) (pcall of a complete inference) succeeds.
-- luamx's arithmetic broadcasts where MXNet's elementwise ops match sizes exactly, so
-- several sizes may fit: then the given shapes' first (batch) dims decide, if one of them
-- fits; else a 1 (a broadcast) gives way to the one other size that fits; else the dims
-- stay unknown.
local per_dim_search
local function one_fit(sizes, run, firsts)
  local fits = {}
  for _, d in ipairs(sizes) do
    local ok, a, o, x, c = run(d)
    if ok and c then fits[#fits + 1] = { d, { a, o, x } } end
  end
  local function keep(pred)
    local r = {}
    for _, f in ipairs(fits) do if pred(f[1]) then r[#r + 1] = f end end
    if #r > 0 then fits = r end
  end
  if #fits > 1 then keep(function(d) return firsts[d] end) end
  if #fits > 1 then keep(function(d) return d ~= 1 end) end
  return #fits == 1 and fits[1][2] or nil
end
local function first_dims(named, positional)
  local f = {}
  for _, v in pairs(named or {}) do if type(v) == "table" and v[1] then f[v[1]] = true end end
  for _, v in ipairs(positional or {}) do if type(v) == "table" and v[1] then f[v[1]] = true end end
  return f
end

-- MXNet's two-way inference fills a variable's unknown (0) dims from its consumers (a + b
-- with a (0, 10) and b (12, 0) gives both (12, 10)); the core infers forward. The search:
-- each unknown dim of the variables' __shape__ takes, in turn, every dim known anywhere in
-- the graph's inference (partial, or with the unknown dims set to a known one); the one
-- assignment that completes inference without a conflict is the answer (fits with fewer
-- 1s first: luamx's arithmetic broadcasts where MXNet's elementwise ops match sizes). One
-- more candidate is a size seen nowhere, so that a dim nothing constrains has two fits.
-- Ambiguous or too many assignments: no answer.
local SEARCH_MAX = 1024
per_dim_search = function(outputs, who, named, positional, level)
  local slots = {}
  for _, n in ipairs(M.topo(outputs)) do
    local sh = not n.op and n.attrs and parse_shape(n.attrs.__shape__)
    if sh and not (named and named[n.name] ~= nil) then
      for i, d in ipairs(sh) do if d == 0 then slots[#slots + 1] = { n.name, i } end end
    end
  end
  if #slots == 0 then return nil end
  -- the candidates: the dims of the partial inference, then of the passes with every
  -- unknown dim one of those (up to where they conflict), until no new dim appears
  local seen, tried = {}, {}
  pcall(infer_once, outputs, who, named, positional, "shape", level + 1, nil, nil, nil, seen)
  for _ = 1, 3 do
    local new = false
    for v in pairs(seen) do
      if not tried[v] then
        tried[v], new = true, true
        pcall(infer_once, outputs, who, named, positional, "shape", level + 1, nil, nil, v, seen)
      end
    end
    if not new then break end
  end
  local cands = {}
  for v in pairs(seen) do cands[#cands + 1] = v end
  table.sort(cands)
  -- and a size seen nowhere: a dim it fits is free (several answers), not found
  if #cands > 0 then cands[#cands + 1] = cands[#cands] * 2 + 7 end
  if #cands == 0 or (#cands) ^ (#slots) > SEARCH_MAX then return nil end
  local best, nbest, ones_best = nil, 0, math.huge
  local pick = {}
  local function try(k)
    if k > #slots then
      local vd, ones = {}, 0
      for j, sl in ipairs(slots) do
        vd[sl[1]] = vd[sl[1]] or {}
        vd[sl[1]][sl[2]] = pick[j]
        if pick[j] == 1 then ones = ones + 1 end
      end
      if ones > ones_best then return end
      local ok, a, o, x, c = pcall(infer_once, outputs, who, named, positional, "shape",
        level + 1, nil, nil, vd)
      if ok and c then
        if ones < ones_best then best, nbest, ones_best = { a, o, x }, 1, ones
        else nbest = nbest + 1 end
      end
      return
    end
    for _, v in ipairs(cands) do
      pick[k] = v
      try(k + 1)
    end
  end
  try(1)
  return nbest == 1 and best or nil
end

-- Graphs holding Gluon block nodes (mx.gluon.symbol_node) are inferred expanded: the blocks
-- traced on their inputs' inferred shapes, the answers given back under the original
-- argument and auxiliary-state order.
local infer_plain
-- expand_blocks(outputs, who, shapes, level): outputs with every Gluon block node replaced
-- by its ops traced on its inputs' shapes (inferred from `shapes`, name -> shape)
-- The module of the Gluon block nodes among outputs' nodes (mx.gluon.symbol_node, carried by
-- their op: this layer never requires Gluon), nil when there are none.
local function blocks_of(outputs)
  for _, n in ipairs(M.topo(outputs)) do
    if n.op and n.op.block_node then return n.op.block_node end
  end
  return nil
end

function M.expand_blocks(outputs, who, given, level)
  local BN = blocks_of(outputs)
  if not BN then return outputs end
  return BN.expand(outputs, function(entries)
    -- the given shapes of the variables the block's inputs read (a label the block does not
    -- see is not among them; dtypes are no shapes)
    local mine = {}
    for _, n in ipairs(M.topo(entries)) do
      local v = n.op == nil and given and given[n.name]
      if type(v) == "table" then mine[n.name] = v end
    end
    local _, o = M.infer(entries, who, mine, nil, "shape", level + 1)
    local types = {}
    local ok, _, ot = pcall(M.infer, entries, who, {}, nil, "type", level + 1)
    for i = 1, #entries do
      local s = o and o[i]
      local known = type(s) == "table" and #s > 0
      for _, d in ipairs(known and s or {}) do known = known and d > 0 end
      o[i] = known and s or nil
      types[i] = ok and ot and ot[i] or nil
    end
    return o, types
  end)
end
function M.infer(outputs, who, named, positional, kind, level)
  if not blocks_of(outputs) then
    return infer_plain(outputs, who, named, positional, kind, level) -- (a tail call: no frame)
  end
  local order = M.topo(outputs)
  local auxs = M.aux_set(order)
  local args, auxn = {}, {}
  for _, n in ipairs(order) do
    if n.op == nil then
      if auxs[n] then auxn[#auxn + 1] = n.name else args[#args + 1] = n.name end
    end
  end
  local given = {}
  for k, v in pairs(named or {}) do given[k] = v end
  for i, v in ipairs(positional or {}) do if args[i] then given[args[i]] = v end end
  local exp = M.expand_blocks(outputs, who, given, level + 1)
  local a, o, x, complete = M.infer(exp, who, given, nil, kind, level + 1)
  -- back to the original order, by name
  local eorder = M.topo(exp)
  local eaux = M.aux_set(eorder)
  local by = {}
  local ai, xi = 0, 0
  for _, n in ipairs(eorder) do
    if n.op == nil then
      if eaux[n] then xi = xi + 1 by[n.name] = x[xi] else ai = ai + 1 by[n.name] = a[ai] end
    end
  end
  local ra, rx = {}, {}
  for i, name in ipairs(args) do ra[i] = by[name] end
  for i, name in ipairs(auxn) do rx[i] = by[name] end
  return ra, o, rx, complete
end

infer_plain = function(outputs, who, named, positional, kind, level)
  local subst = { n = 0 }
  local args, outs, aux, complete = infer_once(outputs, who, named, positional, kind, level + 1,
    nil, subst)
  if kind == "shape" and not complete and has_unknown_creation(outputs) then
    -- the creation nodes' unknown dims: the one size among the given dims that completes
    -- the inference without a conflict (MXNet's backward inference gives that size)
    local sizes, seen = {}, {}
    local function note(sh)
      for _, d in ipairs(type(sh) == "table" and sh or {}) do
        if type(d) == "number" and d > 0 and not seen[d] then seen[d] = true sizes[#sizes + 1] = d end
      end
    end
    for _, v in pairs(named or {}) do note(v) end
    for _, v in ipairs(positional or {}) do note(v) end
    local found = one_fit(sizes, function(d)
      return pcall(infer_once, with_creation_dims(outputs, d), who, named, positional, kind,
        level + 1)
    end, first_dims(named, positional))
    if found then return found[1], found[2], found[3], true end
  end
  if kind == "shape" and not complete then
    -- variables declared with unknown dims (mx.rnn's begin_state{func=mx.sym.Variable}:
    -- (0, hidden)): the one given size that completes the inference without a conflict
    local unknown = false
    for _, n in ipairs(M.topo(outputs)) do
      local sh = not n.op and n.attrs and parse_shape(n.attrs.__shape__)
      for _, d in ipairs(sh or {}) do unknown = unknown or d == 0 end
    end
    if unknown then
      local sizes, seen = {}, {}
      local function note(sh)
        for _, d in ipairs(type(sh) == "table" and sh or {}) do
          if type(d) == "number" and d > 0 and not seen[d] then seen[d] = true sizes[#sizes + 1] = d end
        end
      end
      for _, v in pairs(named or {}) do note(v) end
      for _, v in ipairs(positional or {}) do note(v) end
      local found = one_fit(sizes, function(d)
        return pcall(infer_once, outputs, who, named, positional, kind, level + 1, nil, nil, d)
      end, first_dims(named, positional))
      if found then return found[1], found[2], found[3], true end
    end
  end
  if kind == "shape" and not complete then
    local found = per_dim_search(outputs, who, named, positional, level + 1)
    if found then return found[1], found[2], found[3], true end
  end
  if kind ~= "shape" or complete or subst.n == 0 then return args, outs, aux, complete end
  local ok2, a2, o2, x2 = pcall(infer_once, outputs, who, named, positional, kind, level + 1, 2,
    { n = 0 })
  local ok3, a3, o3, x3 = pcall(infer_once, outputs, who, named, positional, kind, level + 1, 3,
    { n = 0 })
  if not (ok2 and ok3) then return args, outs, aux, complete end
  local function merge(list, l2, l3)
    for i, s in ipairs(list) do
      local s2, s3 = l2[i], l3[i]
      if #s == 0 and #s2 > 0 and #s2 == #s3 then
        for d = 1, #s2 do s[d] = s2[d] == s3[d] and s2[d] or 0 end
      elseif #s > 0 and #s2 == #s and #s3 == #s then
        for d = 1, #s do
          if s[d] == 0 and s2[d] == s3[d] then s[d] = s2[d] end
        end
      end
    end
  end
  merge(args, a2, a3)
  merge(outs, o2, o3)
  merge(aux, x2, x3)
  return args, outs, aux, false
end

return M
