-- mx.graph.index_ops — the index-valued ops in MXNet's symbol JSON. luamx's positions are
-- 1-based (argmax, argsort, topk give them; pick, take, one_hot, gather_nd read them),
-- MXNet's 0-based, and its argmax gives them in the data's dtype. A symbol file holds
-- MXNet's meaning, so the writer (Symbol:tojson, net:export) surrounds each such node with
-- the conversion nodes that make MXNet compute luamx's values, and the reader
-- (mx.sym.load/fromjson, SymbolBlock.imports) does the reverse for MXNet's nodes:
--
--   luamx                     file (MXNet's ops)
--   pick(d, i)                pick(d, i - 1)                 (take, one_hot the same)
--   gather_nd(d, i)           gather_nd(d, i - (i > 0))      (negative: from the end in both)
--   argmax(x) (int64)         Cast(argmax(x) + 1, int64)     (argmin the same)
--   topk/argsort indices      topk(...) + 1                  (the index dtype written)
--
-- The added nodes are named after the node (<name>_index0, <name>_0based, <name>_indices
-- for topk's second output), and the reader
-- removes exactly the chains the writer makes, so a luamx file reads back to the graph
-- that wrote it. to_mxnet(outputs) / from_mxnet(outputs): a converted copy of the DAG
-- (lua/mx/symbol.lua's node tables; nodes are never modified), the same entries when
-- nothing needs converting.
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local SG = require("mx.graph.symbol_graph")
local SP = require("mx.graph.symbol_params")

local ipairs, pairs, tonumber, error, type = ipairs, pairs, tonumber, error, type
local ops_by_name = lib.ops_by_name

local M = {}

-- luamx's index ops whose names are MXNet's (with MXNet's positions through the
-- conversions): the JSON writer and net:export write them
M.MXNET_NAMED = { pick = true, take = true, one_hot = true, gather_nd = true, argmax = true,
  argmin = true, argsort = true, topk = true }

local function param(n, name)
  local v = n.opts and n.opts[name]
  if v ~= nil then return v end
  local pi = n.op.pindex[name]
  if n.P == nil then return pi.default end
  v = n.P[name]
  if pi.values then return pi.values[tonumber(v) + 1] end
  if pi.type == "dtype" then return nd.dtype_name[tonumber(v)] end
  return v
end

local function mk(name, opname, inputs, opts, attrs)
  local op = ops_by_name[opname]
  local P0, _, err = nd._fill_params(op, opts or {})
  if err then error("symbol JSON: " .. err, 0) end
  local a = {}
  for k, v in pairs(attrs or {}) do a[k] = v end
  return { name = name, op = op, P = SP.copy(op, P0), opts = opts or {}, attrs = a, nout = 1,
    nvis = 1, inputs = inputs }
end

-- the index outputs of node n (1-based output numbers), for the ops that give positions
local function index_outputs(n)
  local name = n.op.name
  if name == "argmax" or name == "argmin" or name == "argsort" then return { 1 } end
  if name == "topk" then
    local rt = param(n, "ret_typ")
    if rt == "indices" then return { 1 } end
    if rt == "both" then return { 2 } end
  end
  return nil
end

-- the input positions of n that hold positions, and how they convert (the ops that read them)
local INDEX_INPUT = { pick = 2, take = 2, one_hot = 1, gather_nd = 2 }

local function is_scalar_node(e, opname, v)
  local n = e[1]
  return n.op ~= nil and n.op.name == opname and e[2] == 1 and tonumber(param(n, "scalar")) == v
end

-- copy(outputs, rule): the DAG with rule(c, n, map) deciding each op node's copy c (n the
-- original, map the copies so far: node -> out -> entry): nil keeps n (when its inputs
-- are unchanged), true keeps c (modified by the rule), a table out -> entry replaces it
local function copy(outputs, rule)
  local map, changed = {}, false
  for _, n in ipairs(SG.topo(outputs)) do
    local c = {}
    for k, v in pairs(n) do c[k] = v end
    c.inputs = {}
    local same = true
    for j, e in ipairs(n.inputs) do
      local r = map[e[1]][e[2]]
      c.inputs[j] = r
      if r[1] ~= e[1] or r[2] ~= e[2] then same = false end
    end
    local rep = n.op and rule(c, n, map)
    if rep == nil and same then c = n end
    if rep ~= nil or not same then changed = true end
    local m = {}
    for k = 1, n.nout do m[k] = (type(rep) == "table" and rep[k]) or { c, k } end
    map[n] = m
  end
  if not changed then return outputs end
  local outs = {}
  for k, e in ipairs(outputs) do outs[k] = map[e[1]][e[2]] end
  return outs
end

---------------------------------------------------------------- writing
-- c's index input j through a conversion node: i -/+ 1, or, for gather_nd,
-- whose negative positions count from the end in both, i -/+ (i > 0 / i >= 0)
local TO_0BASED = { suffix = "_index0", pos = "greater_scalar", arith = "sub", scalar = "sub_scalar" }
local TO_1BASED = { suffix = "_index1", pos = "greater_equal_scalar", arith = "add",
  scalar = "add_scalar" }
local function convert_index_input(c, j, dir)
  local i = c.inputs[j]
  local conv
  if c.op.name == "gather_nd" then
    local pos = mk(c.name .. dir.suffix .. "_pos", dir.pos, { i }, { scalar = 0 })
    conv = mk(c.name .. dir.suffix, dir.arith, { i, { pos, 1 } })
  else
    conv = mk(c.name .. dir.suffix, dir.scalar, { i }, { scalar = 1 })
  end
  c.inputs[j] = { conv, 1 }
end

local function write_rule(c)
  local name = c.op.name
  local j = INDEX_INPUT[name]
  if j then
    convert_index_input(c, j, TO_0BASED)
    return true
  end
  local outs = index_outputs(c)
  if not outs then return nil end
  -- the op under <name>_0based, then + 1 (and argmax's Cast) under the node's own name
  local base = {}
  for k, v in pairs(c) do base[k] = v end
  if c.nout == 1 then base.name = c.name .. "_0based" end
  local rep = {}
  for k = 1, c.nout do rep[k] = { base, k } end
  for _, k in ipairs(outs) do
    local nm = #outs == 1 and c.nout == 1 and c.name or (c.name .. "_indices")
    if name == "argmax" or name == "argmin" then
      local plus = mk(c.name .. "_plus1", "add_scalar", { { base, k } }, { scalar = 1 })
      rep[k] = { mk(nm, "cast", { { plus, 1 } }, { dtype = "int64" }), 1 }
    else
      rep[k] = { mk(nm, "add_scalar", { { base, k } }, { scalar = 1 }), 1 }
    end
  end
  return rep
end

function M.to_mxnet(outputs) return copy(outputs, write_rule) end

---------------------------------------------------------------- reading
-- n is the last node of a writer's chain (<x>_0based's index output + 1, argmax's Cast):
-- the entry of <x>_0based it converts, else nil
local function chain_source(n)
  local src = { n, 1 }
  if n.op.name == "cast" then
    if param(n, "dtype") ~= "int64" then return nil end
    src = n.inputs[1]
  end
  if not is_scalar_node(src, "add_scalar", 1) then return nil end
  local b = src[1].inputs[1]
  local bn = b[1]
  if bn.op == nil then return nil end
  local named = bn.nout == 1 and bn.name == n.name .. "_0based"
    or bn.nout > 1 and n.name == bn.name .. "_indices"
  if not named then return nil end
  local outs = index_outputs(bn)
  if not outs or outs[#outs] ~= b[2] then return nil end
  if (bn.op.name == "argmax" or bn.op.name == "argmin") ~= (n.op.name == "cast") then return nil end
  return b
end

local function read_rule(c, n, map, writer_base)
  local name = c.op.name
  local b = chain_source(n)
  if b then return { map[b[1]][b[2]] } end
  local j = INDEX_INPUT[name]
  if j then
    local i = c.inputs[j]
    local inode = i[1]
    -- the writer's <name>_index0 chain: read its input directly
    if inode.name == c.name .. "_index0" and inode.op then
      if name ~= "gather_nd" and is_scalar_node(i, "sub_scalar", 1) then
        c.inputs[j] = inode.inputs[1]
        return true
      end
      local pos = inode.inputs[2] and inode.inputs[2][1]
      if name == "gather_nd" and inode.op.name == "sub" and pos.op
          and pos.op.name == "greater_scalar" and pos.inputs[1][1] == inode.inputs[1][1] then
        c.inputs[j] = inode.inputs[1]
        return true
      end
    end
    convert_index_input(c, j, TO_1BASED)
    return true
  end
  local outs = index_outputs(c)
  if not outs then return nil end
  if writer_base[n] then -- the writer's: luamx's node under its own name
    if c.name:sub(-7) == "_0based" then c.name = c.name:sub(1, -8) end
    return true
  end
  -- MXNet's node: luamx's under <name>_1based, then - 1 (argmax: in float32) as MXNet's
  local base = c
  local own = c.name
  base.name = own .. "_1based"
  local rep = {}
  for k = 1, c.nout do rep[k] = { base, k } end
  for _, k in ipairs(outs) do
    local nm = #outs == 1 and c.nout == 1 and own or (own .. "_indices")
    if name == "argmax" or name == "argmin" then
      local minus = mk(own .. "_minus1", "sub_scalar", { { base, k } }, { scalar = 1 })
      rep[k] = { mk(nm, "cast", { { minus, 1 } }, { dtype = "float32" }), 1 }
    else
      rep[k] = { mk(nm, "sub_scalar", { { base, k } }, { scalar = 1 }), 1 }
    end
  end
  return rep
end

function M.from_mxnet(outputs)
  local writer_base = {}
  for _, n in ipairs(SG.topo(outputs)) do
    local b = n.op and chain_source(n)
    if b then writer_base[b[1]] = true end
  end
  return copy(outputs, function(c, n, map) return read_rule(c, n, map, writer_base) end)
end

return M
