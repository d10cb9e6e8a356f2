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
    if op and #op.aux > 0 then
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
      if out >= 0 then
        for k = 0, n.nout - 1 do
          local d = e[C.mx_graph_entry(g, id, k)]
          if d.dtype < 0 then d.dtype = out end
        end
      end
    end
  end
end

-- infer(sym_outputs, who, named, positional, kind, level): runs mx_graph_infer with the
-- given inputs (named: name -> shape/dtype; positional: list in list_arguments order).
-- kind "shape" or "type". Returns arg, out, aux lists and whether everything is known.
function M.infer(outputs, who, named, positional, kind, level)
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
    if sh then set_shape(d, sh) end
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
      set_shape(d, v)
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
  if C.mx_graph_infer(g, e) ~= 0 then
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

return M
