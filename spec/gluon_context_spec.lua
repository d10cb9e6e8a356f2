-- mx.cpu(i) / mx.gpu(i) ids, and devices given to Gluon (issue 10: cpu(5) used to
-- become cpu(0) silently). This build has one CPU device: cpu(i ~= 0) is a Context
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

  it("placing data on cpu(i ~= 0) is an error at the caller's line, never cpu(0)", function()
    local x = nd.ones { 2 }
    H.assert_error(function(mark) mark() nd.zeros({ 2 }, { ctx = mx.cpu(5) }) end, FILE,
      "zeros: cpu(5): only cpu(0) exists in this build")
    H.assert_error(function(mark) mark() nd.array({ 1, 2 }, { ctx = mx.cpu(1) }) end, FILE,
      "cpu(1): only cpu(0) exists in this build")
    H.assert_error(function(mark) mark() x:to(mx.cpu(5)) end, FILE, "cpu(5): only cpu(0)")
    H.assert_error(function(mark) mark() x:to("cpu(3)") end, FILE, "cpu(3): only cpu(0)")
    assert.are.equal(mx.cpu(0), x:to(mx.cpu(0)):context())
    assert.are.equal(mx.cpu(0), nd.zeros({ 2 }, { ctx = "cpu(0)" }):context())
    local d = nn.Dense(2, { in_units = 2 })
    H.assert_error(function(mark) mark() d:initialize(nil, mx.cpu(5)) end, FILE,
      "initialize: ctx: cpu(5): only cpu(0) exists in this build")
    H.assert_error(function(mark) mark() d:collect_params():initialize(nil, { mx.cpu(2) }) end,
      FILE, "initialize: ctx: cpu(2)")
    H.assert_error(function(mark) mark() d.weight:initialize(nil, mx.cpu(2)) end, FILE,
      "initialize: ctx: cpu(2)")
    d:initialize(nil, mx.cpu(0))
    H.assert_error(function(mark) mark() d:reset_ctx(mx.cpu(7)) end, FILE,
      "reset_ctx: ctx: cpu(7)")
    assert.are.equal(mx.cpu(0), d.weight:data():context())
  end)
end)
