-- spec/creation_spec.lua — zeros/ones/full (parallel fills), arange, linspace, eye and
-- the *_like ops: values against Lua arithmetic and the cpu kernels against nd._ref.
local mx = require("mx")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "creation_spec.lua"

describe("zeros / ones / full", function()
  it("fill every dtype, small and large (threaded) sizes, like the reference", function()
    for _, dt in ipairs { "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32",
      "int64", "bool" } do
      for _, n in ipairs { 0, 1, 7, 200003 } do
        local z = nd.zeros({ n }, { dtype = dt })
        assert.equal(dt, z:dtype())
        local o = nd.ones({ n }, { dtype = dt })
        local f = nd.full({ n }, 3, { dtype = dt })
        assert.equal(0, H.maxdiff(f, nd._ref.full({ n }, 3, { dtype = dt })))
        if n > 0 then
          assert.equal(0, z[n]:item())
          assert.equal(1, o[1]:item())
          assert.equal(dt == "bool" and 1 or 3, f[n]:item())
        end
      end
    end
    assert.same({ 2, 3 }, nd.zeros { 2, 3 }:shape())
    assert.same({ -2.5, -2.5 }, nd.full({ 2 }, -2.5):tolist())
  end)

  it("zeros_like / ones_like / full_like copy shape, dtype and device", function()
    local x = nd.array({ { 1, 2 }, { 3, 4 } }, { dtype = "int32" })
    local z, o, f = nd.zeros_like(x), x:ones_like(), nd.full_like(x, { value = 7 })
    assert.equal("int32", z:dtype())
    assert.same({ 0, 0, 0, 0 }, z:tolist())
    assert.same({ 1, 1, 1, 1 }, o:tolist())
    assert.same({ 7, 7, 7, 7 }, f:tolist())
    assert.equal(0, H.maxdiff(nd.full_like(x, { value = 7 }), nd._ref.full_like(x, { value = 7 })))
    assert.equal(0, H.maxdiff(nd.zeros_like(x), nd._ref.zeros_like(x)))
    assert.equal(0, H.maxdiff(nd.ones_like(x), nd._ref.ones_like(x)))
  end)
end)

describe("arange", function()
  it("follows MXNet's values: [start, stop) in steps, ceil((stop-start)/step) of them", function()
    assert.same({ 0, 1, 2, 3, 4 }, nd.arange(5):tolist())
    assert.same({ 2, 4, 6, 8 }, nd.arange(2, 10, 2):tolist())
    assert.same({ 2, 4, 6, 8, 10 }, nd.arange(2, 11, 2):tolist())
    assert.same({ 5, 3, 1 }, nd.arange(5, 0, -2):tolist())
    assert.same({}, nd.arange(3, 1):tolist())
    assert.same({ 0, 0, 1, 1, 2, 2 }, nd.arange(0, 3, 1, { ["repeat"] = 2 }):tolist())
    local r = nd.arange(0, 1, 0.25)
    assert.equal(4, r:size())
    assert.equal(0.75, r[4]:item())
    local i = nd.arange { start = 1, stop = 4, dtype = "int64" }
    assert.equal("int64", i:dtype())
    assert.same({ 1, 2, 3 }, i:tolist())
    assert.equal(0, H.maxdiff(nd.arange(-3, 7, 0.5), nd._ref.arange(-3, 7, 0.5)))
  end)

  it("rejects a zero step and bad arguments at the caller's line", function()
    H.assert_error(function(mark) mark() nd.arange(0, 4, 0) end, FILE, "arange", "step")
    -- MXNet's positions: start, stop, step, repeat, infer_range, ctx, dtype
    H.assert_error(function(mark) mark() nd.arange(0, 4, 1, 2, 3) end, FILE,
      "arange: infer_range is not supported")
    H.assert_error(function(mark) mark() nd.arange(0, 4, 1, 1, false, nil, "int32", 9) end, FILE,
      "arange: takes at most 7 positional arguments")
    H.assert_error(function(mark) mark() nd.arange("a") end, FILE, "start")
    H.assert_error(function(mark) mark() nd.arange(0, 4, { stepp = 1 }) end, FILE,
      "unknown option 'stepp'")
  end)
end)

describe("linspace / eye", function()
  it("linspace spaces num values evenly, endpoint included by default", function()
    assert.same({ 0, 0.25, 0.5, 0.75, 1 }, nd.linspace(0, 1, 5):tolist())
    local l = nd.linspace(0, 1, 5, { endpoint = false, dtype = "float64" })
    assert.is_true(H.maxdiff(l, { 0, 0.2, 0.4, 0.6, 0.8 }) < 1e-15)
    assert.equal(0, H.maxdiff(l, nd._ref.linspace(0, 1, 5, { endpoint = false, dtype = "float64" })))
    assert.same({ 3 }, nd.linspace(3, 9, 1):tolist())
    assert.equal(0, nd.linspace(0, 1, 0):size())
  end)

  it("eye puts ones on diagonal k", function()
    assert.same({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, nd.eye(3):totable())
    assert.same({ { 0, 1, 0, 0 }, { 0, 0, 1, 0 } }, nd.eye(2, 4, 1):totable())
    assert.same({ { 0, 0 }, { 1, 0 }, { 0, 1 } }, nd.eye(3, 2, -1):totable())
    local i32 = { dtype = "int32" }
    assert.equal(0, H.maxdiff(nd.eye(4, 5, 2, i32), nd._ref.eye(4, 5, 2, i32)))
    H.assert_error(function(mark) mark() nd.eye(-1) end, FILE, "eye", "N and M")
    H.assert_error(function(mark) mark() nd.eye(2 ^ 40) end, FILE, "eye", "too large")
    H.assert_error(function(mark) mark() nd.linspace(0, 1, 2 ^ 62) end, FILE, "too large")
  end)
end)

describe("arange in MXNet's symbol JSON", function()
  it("runs GluonCV's _arange node (infer_range False, stop None) and refuses infer_range=true",
    function()
    local node = '{"op": "_arange", "name": "r", "attrs": {"dtype": "float32", "infer_range": '
      .. '"%s", "repeat": "1", "start": "4", "step": "1.0", "stop": "None"}, "inputs": []}'
    local js = '{"nodes": [' .. node .. '], "arg_nodes": [], "heads": [[0, 0, 0]], "attrs": '
      .. '{"mxnet_version": ["int", 10901]}}'
    local s = mx.sym.fromjson(js:format("False"))
    assert.are.same({ 0, 1, 2, 3 }, s:eval(mx.cpu(), {})[1]:tolist())
    local ok, err = pcall(function() return mx.sym.fromjson(js:format("True")):eval(mx.cpu(), {}) end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("infer_range", 1, true), err)
  end)
end)
