-- spec/infer_spec.lua — the core's inference is pure and works on descriptors
-- (mx_op_infer through mx.nd.infer): calling it twice changes nothing, no random counter
-- moves, and parameter inputs' unknown dims are filled from the data.
local mx = require("mx")
local lib = require("mx.core.lib")
local infer = require("mx.nd.infer").infer
local nd = mx.nd
local ffi, C = lib.ffi, lib.C

local seedbuf = ffi.new("uint64_t[1]")
local function counter() return C.mx_random_reserve_counters(0, seedbuf) end

describe("inference on descriptors", function()
  it("fills fully_connected's weight and bias from the data", function()
    local x = nd.ones { 64, 3, 4 }
    local r = infer("fully_connected", { num_hidden = 10 },
      { x, { shape = { 10, 0 } }, { shape = { 0 } } })
    assert.are.same({ 10, 12 }, r.inputs[2].shape)
    assert.are.same({ 10 }, r.inputs[3].shape)
    assert.are.equal("float32", r.inputs[2].dtype)
    assert.are.same({ 64, 10 }, r.outputs[1].shape)
    -- unknown rank too, and flatten=false maps the last axis
    r = infer("fully_connected", { num_hidden = 5, flatten = false, no_bias = true },
      { { shape = { 2, 7, 3 }, dtype = "float64" }, {} })
    assert.are.same({ 5, 3 }, r.inputs[2].shape)
    assert.are.equal("float64", r.inputs[2].dtype)
    assert.are.same({ 2, 7, 5 }, r.outputs[1].shape)
  end)

  it("leaves outputs unknown while the data is unknown, and reports conflicts", function()
    local r = infer("fully_connected", { num_hidden = 4 }, { { shape = { 0, 3 } },
      { shape = { 4, 0 } }, { shape = { 4 } } })
    assert.is_nil(r.outputs[1].shape)
    r = infer("add", nil, { { shape = { 2, 0 } }, { shape = { 2, 3 } } })
    assert.is_nil(r.outputs[1].shape) -- add cannot take unknown dims: unknown answer
    assert.has_error(function()
      infer("fully_connected", { num_hidden = 4 }, { { shape = { 2, 3 }, dtype = "float32" },
        { shape = { 4, 5 } }, { shape = { 4 } } })
    end)
  end)

  it("is pure: twice gives the same, and a random op's inference moves no counter", function()
    mx.random.seed(11)
    local c0 = counter()
    local x = { shape = { 8, 8 }, dtype = "float32" }
    local a = infer("dropout", { p = 0.5, training = true }, { x })
    local b = infer("dropout", { p = 0.5, training = true }, { x })
    assert.are.same(a, b)
    assert.are.same({ 8, 8 }, a.outputs[2].shape)
    assert.are.equal(c0, counter())
    infer("random_uniform", { shape = { 100 } }, {})
    assert.are.equal(c0, counter())
    -- the op itself reserves its draws when it is dispatched, in program order
    local _ = nd.dropout(nd.ones { 8, 8 }, { p = 0.5, training = true })
    assert.are.equal(c0 + 64, counter())
  end)

  it("Dense's deferred initialisation uses it", function()
    local net = mx.gluon.nn.Dense(6, { use_bias = true })
    net:initialize()
    local y = net(nd.ones { 2, 3, 5 })
    assert.are.same({ 2, 6 }, y:shape())
    assert.are.same({ 6, 15 }, net.weight:data():shape())
    assert.are.same({ 6 }, net.bias:data():shape())
    local n2 = mx.gluon.nn.Dense(4, { flatten = false })
    n2:initialize()
    assert.are.same({ 2, 3, 4 }, n2(nd.ones { 2, 3, 5 }):shape())
    assert.are.same({ 4, 5 }, n2.weight:data():shape())
  end)
end)
