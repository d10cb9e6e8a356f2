-- Building graphs through the C API (core/src/graph*.c) for the graph specs.
local mx = require("mx")
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C
local nd = mx.nd

local G = {}

function G.last_error() return ffi.string(C.mx_last_error()) end
local function ints(t) return ffi.new("int[?]", math.max(#t, 1), t) end
G.ints = ints

function G.graph() return ffi.gc(C.mx_graph_new(), C.mx_graph_free) end

function G.var(g, name, value)
  local id = C.mx_graph_add_var(g, name)
  assert(id >= 0, G.last_error())
  if value then assert(C.mx_graph_set_value(g, id, value.h) == 0, G.last_error()) end
  return id
end

-- op(g, name, "MXNetOrLuamxName", {inputs: node or {node, out}}, {attr = value})
function G.op(g, name, opname, inputs, attrs)
  local keys, vals = {}, {}
  for k, v in pairs(attrs or {}) do keys[#keys + 1] = k; vals[#vals + 1] = tostring(v) end
  local nodes, outs = {}, {}
  for i, x in ipairs(inputs) do
    if type(x) == "table" then nodes[i], outs[i] = x[1], x[2] else nodes[i], outs[i] = x, 0 end
  end
  local id = C.mx_graph_add_op_attrs(g, C.mx_op_find(opname), name, #keys,
    ffi.new("const char*[?]", math.max(#keys, 1), keys),
    ffi.new("const char*[?]", math.max(#vals, 1), vals), #inputs, ints(nodes), ints(outs))
  assert(id >= 0, G.last_error())
  return id
end

function G.heads(g, list)
  local z = {}
  for i = 1, #list do z[i] = 0 end
  assert(C.mx_graph_set_heads(g, #list, ints(list), ints(z)) == 0, G.last_error())
end

function G.desc_of(x)
  local d = ffi.new("mx_desc")
  local s = x:shape()
  d.ndim = #s
  for i = 1, #s do d.shape[i - 1] = s[i] end
  d.dtype = C.mx_tensor_dtype(x.h)
  d.dev_type = 1
  return d
end

function G.compile(g, inputs, flags)
  local n = #inputs
  local ds = ffi.new("mx_desc[?]", math.max(n, 1))
  for i = 1, n do ds[i - 1] = G.desc_of(inputs[i]) end
  local pe = ffi.new("mx_graph_exec*[1]")
  local rc = C.mx_graph_exec_new(g, n, ds, flags or 0, pe)
  if rc ~= 0 then return nil, G.last_error() end
  return ffi.gc(pe[0], C.mx_graph_exec_free)
end

function G.run(e, inputs, nout)
  local ins = ffi.new("mx_tensor*[?]", math.max(#inputs, 1))
  for i = 1, #inputs do ins[i - 1] = inputs[i].h end
  local outs = ffi.new("mx_tensor*[?]", nout)
  local rc = C.mx_graph_exec_run(e, #inputs, ins, nout, outs)
  if rc ~= 0 then return nil, G.last_error() end
  local r = {}
  for k = 1, nout do r[k] = nd._wrap(outs[k - 1]) end
  return r
end

-- Inferred descriptors of g for the inputs (variables without value, in node order).
function G.infer(g, inputs)
  local n = C.mx_graph_num_entries(g)
  local e = ffi.new("mx_desc[?]", math.max(n, 1))
  for i = 0, n - 1 do e[i].ndim = -1; e[i].dtype = -1 end
  local k = 0
  for i = 0, C.mx_graph_num_nodes(g) - 1 do
    if C.mx_graph_node_op(g, i) == -1 and C.mx_graph_node_value(g, i) == nil then
      k = k + 1
      e[C.mx_graph_entry(g, i, 0)] = G.desc_of(inputs[k])
    end
  end
  assert(C.mx_graph_infer(g, e) == 0, G.last_error())
  return e
end

function G.pass(g, name, entries)
  local po = ffi.new("mx_graph*[1]")
  local rc = C.mx_graph_pass(g, name, entries, po)
  if rc ~= 0 then return nil, G.last_error() end
  return ffi.gc(po[0], C.mx_graph_free)
end

-- op names of g's nodes ("var", "fused" or the luamx op name), in order
function G.ops(g)
  local t = {}
  for i = 0, C.mx_graph_num_nodes(g) - 1 do
    local op = C.mx_graph_node_op(g, i)
    t[#t + 1] = op == -1 and "var" or op == -2 and "fused" or ffi.string(C.mx_op_name(op))
  end
  return t
end

return G
