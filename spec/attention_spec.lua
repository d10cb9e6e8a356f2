-- spec/attention_spec.lua — interleaved_selfatt (fused self-attention) and its backward:
-- the cpu kernel against the reference kernel (nd._ref) and both against the three ops
-- it fuses (interleaved_matmul_selfatt_qk, softmax with lengths, ..._valatt), the
-- gradient against autograd through those three, and the error messages.
local mx = require("mx")
local oracle = require("helpers.oracle")
local nd = mx.nd

local FILE = "attention_spec.lua"
local err_at = require("helpers.err_at")(FILE)

local function close(a, b, tol)
  local ok, msg = oracle.close(a, b, tol, tol)
  assert(ok, msg)
end

-- the three unfused ops; lengths (N,) as softmax's (N*H, T) lengths
local function composed(qkv, heads, vl)
  local s = qkv:shape()
  local T, N = s[1], s[2]
  local sc = nd.interleaved_matmul_selfatt_qk(qkv, { heads = heads })
  local att
  if vl then
    local len = nd.broadcast_to(nd.reshape(vl:astype(qkv:dtype()), { N, 1, 1 }), { shape = { N, heads, T } })
    att = nd.softmax(sc, nd.reshape(len, { N * heads, T }), { axis = -1, use_length = true })
  else
    att = nd.softmax(sc, { axis = -1 })
  end
  return nd.interleaved_matmul_selfatt_valatt(qkv, att, { heads = heads })
end

describe("interleaved_selfatt", function()
  -- T around the kernel's 6-row, 16-key and 96-query blocks; D under, at and over 16;
  -- one to five sequences (few sequences: the heads are split over tasks)
  local CASES = { { 5, 2, 2, 3 }, { 7, 1, 4, 16 }, { 33, 3, 2, 64 }, { 100, 2, 3, 8 },
    { 130, 1, 2, 32 }, { 1, 1, 1, 1 }, { 17, 5, 12, 24 } }

  it("the cpu kernel matches the reference and the three ops it fuses (f32)", function()
    for _, cs in ipairs(CASES) do
      local T, N, Hh, D = cs[1], cs[2], cs[3], cs[4]
      local o = { heads = Hh }
      local qkv = oracle.rand(mx, { T, N, 3 * Hh * D }, "float32")
      local y = nd.interleaved_selfatt(qkv, o)
      close(y, nd._ref.interleaved_selfatt(qkv, o), 2e-5)
      close(y, composed(qkv, Hh), 2e-5)
      local lens = {}
      for n = 1, N do lens[n] = (n * 7) % (T + 1) end
      lens[1] = T
      local vl = nd.array(lens, { dtype = "int32" })
      local ym = nd.interleaved_selfatt(qkv, vl, o)
      close(ym, nd._ref.interleaved_selfatt(qkv, vl, o), 2e-5)
      close(ym, composed(qkv, Hh, vl), 2e-5)
    end
  end)

  it("a sequence of length 0 gives zeros; float lengths and float64 data", function()
    local qkv = oracle.rand(mx, { 6, 2, 12 }, "float32")
    local y = nd.interleaved_selfatt(qkv, nd.array({ 0, 6 }, { dtype = "float32" }), { heads = 2 })
    assert.are.equal(0, nd.max(nd.abs(y[{ {}, 1 }])):item())
    close(y[{ {}, 2 }], nd.interleaved_selfatt(qkv, { heads = 2 })[{ {}, 2 }], 1e-6)
    local q64 = oracle.rand(mx, { 9, 3, 18 }, "float64")
    local vl = nd.array({ 9, 4, 1 }, { dtype = "int64" })
    local y64 = nd.interleaved_selfatt(q64, vl, { heads = 3 })
    assert.are.equal("float64", y64:dtype())
    close(y64, composed(q64, 3, vl), 1e-12)
  end)

  it("its gradient is autograd's through the three ops", function()
    for _, cs in ipairs({ { 6, 2, 2, 4 }, { 9, 3, 1, 8 } }) do
      local T, N, Hh, D = cs[1], cs[2], cs[3], cs[4]
      local qkv = oracle.rand(mx, { T, N, 3 * Hh * D }, "float64")
      local vl = nd.array({ T, 2, 0 }, { dtype = "int32" })[{ { 1, N } }]
      local go = oracle.rand(mx, { T, N, Hh * D }, "float64")
      local function grad(f)
        local x = qkv:copy()
        x:attach_grad()
        mx.autograd.record(function() f(x):backward(go) end)
        return x:grad()
      end
      local g1 = grad(function(x) return nd.interleaved_selfatt(x, vl, { heads = Hh }) end)
      local g2 = grad(function(x) return composed(x, Hh, vl) end)
      close(g1, g2, 1e-10)
      close(nd.interleaved_selfatt_backward(go, qkv, vl, { heads = Hh }), g2, 1e-10)
    end
  end)

  it("names the op and the argument in its errors", function()
    local qkv = nd.zeros({ 4, 2, 12 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nd.interleaved_selfatt(qkv, { heads = 5 }) return r end, line)
    assert.is_truthy(msg:find("interleaved_selfatt: queries_keys_values (4, 2, 12): its last dim "
      .. "must be a multiple of 15", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.interleaved_selfatt(qkv) return r end, line)
    assert.is_truthy(msg:find("heads must be given", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.interleaved_selfatt(qkv, nd.ones({ 3 }), { heads = 2 }) return r end,
      line)
    assert.is_truthy(msg:find("valid_length (3,) must have shape (2)", 1, true), msg)
    for _, bad in ipairs({ { 5, 1 }, { 1.5, 2 }, { -1, 2 } }) do
      local vl = nd.array(bad)
      local ok, m = pcall(function() return nd.interleaved_selfatt(qkv, vl, { heads = 2 }):wait_to_read() end)
      assert.is_false(ok)
      assert.is_truthy(m:find("interleaved_selfatt: valid_length element 1 is", 1, true), m)
    end
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.interleaved_selfatt(nd.zeros({ 4, 12 }), { heads = 2 }) return r end,
      line)
    assert.is_truthy(msg:find("must be 3-d", 1, true), msg)
  end)
end)
