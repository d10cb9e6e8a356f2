-- mx.cpu(i) / mx.gpu(i) ids, and devices given to Gluon (cpu(5) must never become
-- cpu(0) silently). This build has one CPU device: cpu(i ~= 0) is a Context
-- of its own that cannot hold data.
local mx = require("mx")
local nd = mx.nd
local nn = mx.gluon.nn
local H = require("helpers.la")
local FILE = "gluon_context_spec.lua"

describe("devices", function()
  it("cpu(i) keeps its id; equality and tostring follow it", function()
    assert.are.equal("cpu(5)", tostring(mx.cpu(5)))
    assert.are.equal(5, mx.cpu(5).device_id)
    assert.are_not.equal(mx.cpu(5), mx.cpu(0))
    assert.are.equal(mx.cpu(), mx.cpu(0))
    for _, bad in ipairs { -1, 1.5, "x", 1e300, 0 / 0 } do
      H.assert_error(function(mark) mark() mx.cpu(bad) end, FILE,
        "mx.cpu: device id must be a non-negative integer")
      H.assert_error(function(mark) mark() mx.gpu(bad) end, FILE,
        "mx.gpu: device id must be a non-negative integer")
    end
  end)

  it("placing data on a CPU device past the last is an error at the caller's line", function()
    local x = nd.ones { 2 }
    local MSG = "there are 16 CPU devices, cpu(0) .. cpu(15)"
    H.assert_error(function(mark) mark() nd.zeros({ 2 }, { ctx = mx.cpu(16) }) end, FILE,
      "zeros: cpu(16): " .. MSG)
    H.assert_error(function(mark) mark() nd.array({ 1, 2 }, { ctx = mx.cpu(17) }) end, FILE,
      "cpu(17): " .. MSG)
    H.assert_error(function(mark) mark() x:to(mx.cpu(20)) end, FILE, "cpu(20): there are 16")
    H.assert_error(function(mark) mark() x:to("cpu(30)") end, FILE, "cpu(30): there are 16")
    assert.are.equal(mx.cpu(0), x:to(mx.cpu(0)):context())
    assert.are.equal(mx.cpu(1), x:to(mx.cpu(1)):context())
    assert.are.equal(mx.cpu(0), nd.zeros({ 2 }, { ctx = "cpu(0)" }):context())
    local d = nn.Dense(2, { in_units = 2 })
    H.assert_error(function(mark) mark() d:initialize(nil, mx.cpu(16)) end, FILE,
      "initialize: ctx: cpu(16): " .. MSG)
    H.assert_error(function(mark) mark() d:collect_params():initialize(nil, { mx.cpu(18) }) end,
      FILE, "initialize: ctx: cpu(18)")
    H.assert_error(function(mark) mark() d.weight:initialize(nil, mx.cpu(18)) end, FILE,
      "initialize: ctx: cpu(18)")
    d:initialize(nil, mx.cpu(0))
    H.assert_error(function(mark) mark() d:reset_ctx(mx.cpu(19)) end, FILE,
      "reset_ctx: ctx: cpu(19)")
    assert.are.equal(mx.cpu(0), d.weight:data():context())
  end)
end)
