-- gluon.utils: split_data / split_and_load (MXNet's sections, 1-based batch_axis) and
-- clip_global_norm (in-place scaling, the norm before clipping) against hand values.
local mx = require("mx")
local H = require("helpers.la")
local U = mx.gluon.utils
local nd = mx.nd
local close6 = require("helpers.close").within(1e-6)
-- want may be nested (row by row); tensors read flat
local function flatten(v, out)
  out = out or {}
  if type(v) ~= "table" then out[#out + 1] = v return out end
  for _, e in ipairs(v) do flatten(e, out) end
  return out
end
local function close(got, want) close6(got, flatten(want)) end
local FILE = "gluon_utils_spec.lua"

local function rows(n, w)
  local v = {}
  for i = 1, n * w do v[i] = i end
  return nd.array(v):reshape { n, w }
end

describe("gluon.utils.split_data / split_and_load", function()
  it("splits evenly along axis 1 into views", function()
    local x = rows(6, 2)
    local p = U.split_data(x, 3)
    assert.are.equal(3, #p)
    for i = 1, 3 do close(p[i], { { 4 * i - 3, 4 * i - 2 }, { 4 * i - 1, 4 * i } }) end
    p[2][1] = 0 -- a view: writes reach x
    close(x[3], { 0, 0 })
    assert.are.equal(x, U.split_data(x, 1)[1])
  end)

  it("uneven splits give the first size % n slices one more row (MXNet's sections)", function()
    local p = U.split_data(rows(5, 1), 3, { even_split = false })
    assert.are.same({ 2, 2, 1 }, { p[1]:shape()[1], p[2]:shape()[1], p[3]:shape()[1] })
    close(p[1], { { 1 }, { 2 } })
    close(p[3], { { 5 } })
  end)

  it("splits along another batch_axis (negative counts from the end)", function()
    local x = rows(2, 4)
    local p = U.split_data(x, 2, { batch_axis = 2 })
    close(p[1], { { 1, 2 }, { 5, 6 } })
    close(p[2], { { 3, 4 }, { 7, 8 } })
    close(U.split_data(x, 4, { batch_axis = -1 })[4], { { 4 }, { 8 } })
  end)

  it("refuses uneven splits, too many slices and bad arguments at the caller's line", function()
    local x = rows(5, 2)
    H.assert_error(function(mark) mark() U.split_data(x, 2) end, FILE,
      "split_data: data with shape (5, 2) cannot be evenly split into 2 slices along axis 1",
      "even_split=false")
    H.assert_error(function(mark) mark() U.split_data(x, 7, { even_split = false }) end, FILE,
      "split_data: too many slices (7)")
    H.assert_error(function(mark) mark() U.split_data(x, 0) end, FILE,
      "split_data: num_slice must be a positive integer")
    H.assert_error(function(mark) mark() U.split_data(x, 1, { batch_axis = 3 }) end, FILE,
      "split_data: batch_axis 3 out of range")
    H.assert_error(function(mark) mark() U.split_data({ 1, 2 }, 1) end, FILE,
      "split_data: data must be a tensor, got table")
    H.assert_error(function(mark) mark() U.split_data(x, 1, { axis = 1 }) end, FILE,
      "split_data: unknown option 'axis'")
  end)

  it("split_and_load puts the data on the device (a context or a list of one)", function()
    local x = rows(4, 2)
    local r = U.split_and_load(x, { mx.cpu() })
    assert.are.equal(1, #r)
    close(r[1], x:tolist())
    close(U.split_and_load({ { 1, 2 }, { 3, 4 } }, mx.cpu())[1], { { 1, 2 }, { 3, 4 } })
    H.assert_error(function(mark) mark() U.split_and_load(x, {}) end, FILE,
      "split_and_load: ctx_list must be a context or a non-empty list")
    H.assert_error(function(mark) mark() U.split_and_load(x, { "tpu" }) end, FILE,
      "split_and_load: ctx_list[1]: bad ctx")
  end)
end)

describe("gluon.utils.clip_global_norm", function()
  it("scales every array by max_norm / norm when the norm is larger", function()
    local a, b = nd.array { 3, 0 }, nd.array { { 0, 4 } } -- joint norm 5
    local n = U.clip_global_norm({ a, b }, 1)
    assert.is_true(math.abs(n - 5) < 1e-6)
    local s = 1 / (5 + 1e-8)
    close(a, { 3 * s, 0 })
    close(b, { { 0, 4 * s } })
  end)

  it("leaves arrays within the bound unchanged and returns a tensor without the check", function()
    local a = nd.array({ 0.3, -0.4 }, { dtype = "float64" })
    assert.is_true(math.abs(U.clip_global_norm({ a }, 1) - 0.5) < 1e-12)
    close(a, { 0.3, -0.4 })
    local t = U.clip_global_norm({ a }, 1, { check_isfinite = false })
    assert.is_true(nd.is_tensor(t))
    close(t, { 0.5 })
  end)

  it("warns once on a non-finite norm and rejects bad arguments", function()
    U._warned.nonfinite = true -- keep the spec output quiet; the flag is what warns
    local a = nd.array { 0 / 0, 1 }
    local n = U.clip_global_norm({ a }, 1)
    assert.is_true(n ~= n)
    H.assert_error(function(mark) mark() U.clip_global_norm({}, 1) end, FILE,
      "clip_global_norm: arrays must be a non-empty list of tensors")
    H.assert_error(function(mark) mark() U.clip_global_norm({ nd.ones { 2 }, 5 }, 1) end, FILE,
      "clip_global_norm: arrays[2] is not a tensor")
    H.assert_error(function(mark) mark() U.clip_global_norm({ nd.ones({ 2 }, { dtype = "int32" }) }, 1) end,
      FILE, "must be floating-point, got dtype int32")
    H.assert_error(function(mark) mark() U.clip_global_norm({ nd.ones { 2 } }, "1") end, FILE,
      "clip_global_norm: max_norm must be a number")
  end)
end)
