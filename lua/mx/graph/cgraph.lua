-- mx.graph.cgraph — the one Lua builder of the core's graphs (mx.h "graphs",
-- core/src/graph.c) and the entry to its executor (graph_exec.c). Two front ends make
-- nodes through it: mx.graph.trace (the calls a traced function makes, for the cached
-- op) and mx.graph.symbol_graph (mx.sym's Lua DAG, for inference and symbol JSON).
--
-- Every function that can fail raises the core's message, prefixed with `who` (when
-- given) and blamed at `level` (error()'s level, counted from the caller); level 0
-- makes a message without a position (the tracer's callers add the user's line).
local lib = require("mx.core.lib")
local H = require("mx.nd.handles")

local ffi, C = lib.ffi, lib.C
local ffi_string, error = ffi.string, error
local wrap, note_site = H._wrap, H._note_site
local engine_queued = C.mx_engine_queued

local G = {}

local function last_error() return ffi_string(C.mx_last_error()) end
G.last_error = last_error

local function fail(who, level)
  error((who and who .. ": " or "") .. last_error(), level > 0 and level + 1 or 0)
end

-- grown on demand, shared by every call: node ids and output indices of one op's inputs
local int_t = ffi.typeof("int[?]")
local cap = 64
local nbuf, obuf = int_t(cap), int_t(cap)
local function bufs(n)
  if n > cap then
    while cap < n do cap = cap * 2 end
    nbuf, obuf = int_t(cap), int_t(cap)
  end
  return nbuf, obuf
end

-- A new graph, freed with its last reference.
function G.new(who, level)
  local g = C.mx_graph_new()
  if g == nil then error((who and who .. ": " or "") .. "out of memory", level > 0 and level + 1 or 0) end
  return ffi.gc(g, C.mx_graph_free)
end

-- A variable node; its id.
function G.var(g, name, who, level)
  local id = C.mx_graph_add_var(g, name)
  if id < 0 then fail(who, level > 0 and level + 1 or 0) end
  return id
end

-- An op node reading entries (nodes[k], outs[k]) (outs 0-based), k = 1..n; its id.
-- P: the op's filled param struct (or nil for an op without params).
function G.op(g, opid, name, P, n, nodes, outs, who, level)
  local nb, ob = bufs(n)
  for k = 1, n do nb[k - 1], ob[k - 1] = nodes[k], outs[k] end
  local id = C.mx_graph_add_op(g, opid, name, P, n, nb, ob)
  if id < 0 then fail(who, level > 0 and level + 1 or 0) end
  return id
end

-- A constant value for variable `id` (the graph keeps a reference to tensor t).
function G.value(g, id, t, who, level)
  if C.mx_graph_set_value(g, id, t.h) ~= 0 then fail(who, level > 0 and level + 1 or 0) end
end

function G.attr(g, id, key, val, who, level)
  if C.mx_graph_set_attr(g, id, key, val) ~= 0 then fail(who, level > 0 and level + 1 or 0) end
end

-- The graph's outputs: entries (nodes[k], outs[k]) (outs 0-based), k = 1..n.
function G.heads(g, n, nodes, outs, who, level)
  local nb, ob = bufs(n > 0 and n or 1)
  for k = 1, n do nb[k - 1], ob[k - 1] = nodes[k], outs[k] end
  if C.mx_graph_set_heads(g, n, nb, ob) ~= 0 then fail(who, level > 0 and level + 1 or 0) end
end

-- An executor of g for inputs shaped like the tensors `inputs` (its variables without a
-- value, in node order); flags: MX_GRAPH_* (mx.h). Freed with its last reference.
function G.compile(g, inputs, flags, who, level)
  local n = #inputs
  local ds = ffi.new("mx_desc[?]", n > 0 and n or 1)
  for i = 1, n do
    local h = inputs[i].h
    local d = ds[i - 1]
    d.ndim = C.mx_tensor_shape(h, d.shape)
    d.dtype = C.mx_tensor_dtype(h)
    d.dev_type = C.mx_tensor_dev_type(h)
    d.dev_id = C.mx_tensor_dev_id(h)
  end
  local pe = ffi.new("mx_graph_exec*[1]")
  if C.mx_graph_exec_new(g, n, ds, flags, pe) ~= 0 then fail(who, level > 0 and level + 1 or 0) end
  return ffi.gc(pe[0], C.mx_graph_exec_free)
end

-- An inference executor of g on the tensors `inputs`, those i with frozen[i] true
-- becoming constants (mx_graph_exec_new_frozen: BatchNorm folded, weights prepacked,
-- rebuilt when a constant is written); runs still pass every input.
function G.compile_frozen(g, inputs, frozen, flags, who, level)
  local n = #inputs
  local ins = ffi.new("mx_tensor*[?]", n > 0 and n or 1)
  local fz = ffi.new("uint8_t[?]", n > 0 and n or 1)
  for i = 1, n do
    ins[i - 1] = inputs[i].h
    fz[i - 1] = frozen[i] and 1 or 0
  end
  local pe = ffi.new("mx_graph_exec*[1]")
  if C.mx_graph_exec_new_frozen(g, n, ins, fz, flags, pe) ~= 0 then
    fail(who, level > 0 and level + 1 or 0)
  end
  return ffi.gc(pe[0], C.mx_graph_exec_free)
end

-- Runs exec on the tensors `inputs`; its nout outputs as new NDArrays (a list). A
-- failure is blamed at level; a queued run notes that line for its async errors.
function G.run(exec, inputs, nout, level)
  local n = #inputs
  local ins = ffi.new("mx_tensor*[?]", n > 0 and n or 1)
  for i = 1, n do ins[i - 1] = inputs[i].h end
  local outs = ffi.new("mx_tensor*[?]", nout)
  if C.mx_graph_exec_run(exec, n, ins, nout, outs) ~= 0 then error(last_error(), level + 1) end
  if engine_queued() then note_site(level + 1) end
  local r = {}
  for k = 1, nout do r[k] = wrap(outs[k - 1]) end
  return r
end

return G
