-- The graph IR (core/src/graph.c): construction checks, entries, inference with
-- back-filled parameters and a conflict that names its node.
local mx = require("mx")
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C

local function last_error() return ffi.string(C.mx_last_error()) end

local function ints(t) return ffi.new("int[?]", math.max(#t, 1), t) end

local function mlp(num_hidden)
  local g = ffi.gc(C.mx_graph_new(), C.mx_graph_free)
  local x = C.mx_graph_add_var(g, "data")
  local w = C.mx_graph_add_var(g, "fc1_weight")
  local b = C.mx_graph_add_var(g, "fc1_bias")
  local op = C.mx_op_find("FullyConnected")
  local keys = ffi.new("const char*[1]", { "num_hidden" })
  local vals = ffi.new("const char*[1]", { tostring(num_hidden) })
  local fc = C.mx_graph_add_op_attrs(g, op, "fc1", 1, keys, vals, 3, ints { x, w, b }, ints { 0, 0, 0 })
  assert(fc >= 0, last_error())
  local relu = C.mx_graph_add_op(g, C.mx_op_find("relu"), "relu1", nil, 1, ints { fc }, ints { 0 })
  assert(relu >= 0, last_error())
  assert(C.mx_graph_set_heads(g, 1, ints { relu }, ints { 0 }) == 0)
  return g, { x = x, w = w, b = b, fc = fc, relu = relu }
end

local function descs(g)
  local n = C.mx_graph_num_entries(g)
  local e = ffi.new("mx_desc[?]", n)
  for i = 0, n - 1 do e[i].ndim = -1; e[i].dtype = -1 end
  return e
end

local function shape(d)
  local t = {}
  for i = 0, d.ndim - 1 do t[#t + 1] = tonumber(d.shape[i]) end
  return t
end

describe("graph IR", function()
  it("numbers entries as MXNet's node_row_ptr and keeps names, attrs and heads", function()
    local g, n = mlp(16)
    assert.equal(5, C.mx_graph_num_nodes(g))
    assert.equal(5, C.mx_graph_num_entries(g))
    assert.equal(3, C.mx_graph_entry(g, n.fc, 0))
    assert.equal(-1, C.mx_graph_entry(g, n.fc, 1))
    assert.equal(-1, C.mx_graph_node_op(g, n.x))
    assert.equal("fc1", ffi.string(C.mx_graph_node_name(g, n.fc)))
    local oi = ffi.new("int[1]")
    assert.equal(n.w, C.mx_graph_node_input(g, n.fc, 1, oi))
    assert.equal(n.relu, C.mx_graph_head(g, 0, oi))
    assert.equal(0, C.mx_graph_set_attr(g, n.w, "__lr_mult__", "2.0"))
    assert.equal("2.0", ffi.string(C.mx_graph_get_attr(g, n.w, "__lr_mult__")))
    assert.is_true(C.mx_graph_get_attr(g, n.w, "__wd_mult__") == nil)
  end)

  it("infers shapes and fills parameters from the data", function()
    local g, n = mlp(16)
    local e = descs(g)
    e[0].ndim = 2; e[0].shape[0] = 4; e[0].shape[1] = 7; e[0].dtype = 0
    assert.equal(0, C.mx_graph_infer(g, e), last_error())
    assert.same({ 16, 7 }, shape(e[C.mx_graph_entry(g, n.w, 0)]))
    assert.same({ 16 }, shape(e[C.mx_graph_entry(g, n.b, 0)]))
    assert.same({ 4, 16 }, shape(e[C.mx_graph_entry(g, n.relu, 0)]))
    assert.equal(0, e[C.mx_graph_entry(g, n.relu, 0)].dtype)
  end)

  it("leaves unknown what nothing determines", function()
    local g, n = mlp(16)
    local e = descs(g)
    assert.equal(0, C.mx_graph_infer(g, e), last_error())
    assert.equal(-1, e[C.mx_graph_entry(g, n.relu, 0)].ndim)
  end)

  it("names the node whose known shapes conflict", function()
    local g = mlp(16)
    local e = descs(g)
    e[0].ndim = 2; e[0].shape[0] = 4; e[0].shape[1] = 7; e[0].dtype = 0
    e[1].ndim = 2; e[1].shape[0] = 16; e[1].shape[1] = 8; e[1].dtype = 0
    assert.is_true(C.mx_graph_infer(g, e) < 0)
    assert.matches("fc1", last_error())
  end)

  it("rejects inputs that are not earlier outputs and bad attributes, naming the node", function()
    local g = ffi.gc(C.mx_graph_new(), C.mx_graph_free)
    local x = C.mx_graph_add_var(g, "x")
    assert.is_true(C.mx_graph_add_op(g, C.mx_op_find("relu"), "r", nil, 1, ints { x + 1 }, ints { 0 }) < 0)
    assert.matches("'r'.*not an earlier", last_error())
    assert.is_true(C.mx_graph_add_op(g, C.mx_op_find("relu"), "r", nil, 1, ints { x }, ints { 1 }) < 0)
    assert.matches("output 1 of 'x'", last_error())
    local keys = ffi.new("const char*[1]", { "num_hiden" })
    local vals = ffi.new("const char*[1]", { "3" })
    assert.is_true(C.mx_graph_add_op_attrs(g, C.mx_op_find("FullyConnected"), "fc", 1, keys, vals,
      1, ints { x }, ints { 0 }) < 0)
    assert.matches("node 'fc'.*num_hiden", last_error())
  end)

  it("keeps a constant value alive and infers from it", function()
    local g = ffi.gc(C.mx_graph_new(), C.mx_graph_free)
    local x = C.mx_graph_add_var(g, "c")
    local v = mx.nd.ones({ 2, 3 })
    assert.equal(0, C.mx_graph_set_value(g, x, v.h))
    local r = C.mx_graph_add_op(g, C.mx_op_find("relu"), "r", nil, 1, ints { x }, ints { 0 })
    local e = descs(g)
    assert.equal(0, C.mx_graph_infer(g, e), last_error())
    assert.same({ 2, 3 }, shape(e[C.mx_graph_entry(g, r, 0)]))
    assert.is_true(C.mx_graph_node_value(g, x) ~= nil)
  end)
end)
