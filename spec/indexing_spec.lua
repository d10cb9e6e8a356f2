-- spec/indexing_spec.lua — pick, take, one_hot (+ pick_backward, take_backward):
-- 1-based index tensors (docs/ops-notes.md), clip/wrap/raise modes, the cpu take
-- against the reference, and error messages at the caller's line.
local mx = require("mx")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "indexing_spec.lua"

describe("pick", function()
  it("picks one element per row with 1-based positions (default axis -1)", function()
    local x = nd.array({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.same({ 3, 4 }, nd.pick(x, nd.array({ 3, 1 })):tolist())
    assert.same({ { 2 }, { 6 } }, x:pick(nd.array({ 2, 3 }), { keepdims = true }):totable())
    assert.same({ 4, 2, 6 }, x:pick(nd.array({ 2, 1, 2 }), { axis = 1 }):tolist())
    -- argmax-style int64 indices work; clip and wrap
    assert.same({ 3, 4 }, x:pick(nd.array({ 9, -4 }, { dtype = "int64" })):tolist())
    assert.same({ 1, 6 }, x:pick(nd.array({ 4, 0 }), { mode = "wrap" }):tolist())
    local r = nd._ref.pick(x, nd.array({ 3, 1 }))
    assert.same({ 3, 4 }, r:tolist())
  end)

  it("pick_backward scatters the gradient to the picked positions", function()
    local x = nd.zeros { 2, 3 }
    local g = nd.pick_backward(x, nd.array({ 3, 1 }), nd.array({ 10, 20 }))
    assert.same({ { 0, 0, 10 }, { 20, 0, 0 } }, g:totable())
    local g2 = nd.pick_backward(x, nd.array({ 2, 1, 2 }), nd.array({ 1, 2, 3 }), { axis = 1 })
    assert.same({ { 0, 2, 0 }, { 1, 0, 3 } }, g2:totable())
  end)

  it("checks the index shape", function()
    local x = nd.ones { 2, 3 }
    H.assert_error(function(mark) mark() nd.pick(x, nd.ones { 3 }) end, FILE, "pick", "(3,)", "(2, 3)")
    H.assert_error(function(mark) mark() nd.pick(x, nd.ones { 2 }, { axis = 3 }) end, FILE, "axis=3")
  end)
end)

describe("take", function()
  it("takes rows at 1-based positions (Embedding lookup) and agrees with ref", function()
    local w = nd.arange(0, 12):reshape { 4, 3 }
    local e = nd.take(w, nd.array({ { 1, 4 }, { 2, 2 } }))
    assert.same({ 2, 2, 3 }, e:shape())
    assert.same({ 9, 10, 11 }, e[1][2]:tolist())
    assert.same({ 3, 4, 5 }, e[2][1]:tolist())
    local c = w:take(nd.array({ 3, 1 }), { axis = 2 })
    assert.same({ { 2, 0 }, { 5, 3 }, { 8, 6 }, { 11, 9 } }, c:totable())
    for _, mode in ipairs { "clip", "wrap" } do
      for _, dt in ipairs { "float32", "float64", "int32", "uint8" } do
        local x = H.rand(mx, { 5, 4, 3 }, { seed = 3, int = true, dtype = dt == "uint8" and "int32" or dt })
        local idx = nd.array({ { 0, 1, 5 }, { 7, -2, 3 } })
        for axis = 1, 3 do
          local a = nd.take(x, idx, { axis = axis, mode = mode })
          local b = nd._ref.take(x, idx, { axis = axis, mode = mode })
          assert.equal(0, H.maxdiff(a, b), mode .. " " .. dt .. " " .. axis)
        end
      end
    end
  end)

  it("raise mode rejects out-of-range positions", function()
    local w = nd.ones { 4, 3 }
    assert.same({ 1, 3 }, nd.take(w, nd.array({ 4 }), { mode = "raise" }):shape())
    H.assert_error(function(mark) mark() nd.take(w, nd.array({ 5 }), { mode = "raise" }) end, FILE,
      "take", "out of range")
    H.assert_error(function(mark) mark() nd.take(w, nd.array({ 1 }), { mode = "bad" }) end, FILE,
      "mode", "clip/wrap/raise")
  end)

  it("take_backward sums the gradient rows into their positions", function()
    local w = nd.zeros { 3, 2 }
    local g = nd.take_backward(w, nd.array({ 1, 3, 1 }), nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } }))
    assert.same({ { 6, 8 }, { 0, 0 }, { 3, 4 } }, g:totable())
    local r = nd._ref.take_backward(w, nd.array({ 1, 3, 1 }), nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } }))
    assert.equal(0, H.maxdiff(g, r))
  end)
end)

describe("one_hot", function()
  it("marks 1-based positions; out-of-range rows are all off", function()
    local o = nd.one_hot(nd.array({ 1, 3, 0, 4 }), { depth = 3 })
    assert.same({ { 1, 0, 0 }, { 0, 0, 1 }, { 0, 0, 0 }, { 0, 0, 0 } }, o:totable())
    local p = nd.one_hot(nd.array({ { 2 } }, { dtype = "int32" }), { depth = 2, on_value = 5,
      off_value = -1, dtype = "int64" })
    assert.equal("int64", p:dtype())
    assert.same({ { { -1, 5 } } }, p:totable())
    H.assert_error(function(mark) mark() nd.one_hot(nd.ones { 2 }, { depth = -1 }) end, FILE, "depth")
    H.assert_error(function(mark) mark() nd.one_hot(nd.ones { 1000 }, { depth = 2 ^ 53 }) end, FILE,
      "too large")
  end)
end)

-- issue 10: take copies int64 elements exactly in both kernels, and an index beyond int64
-- (Inf, 1e300) never converts out of range: raise rejects it, clip takes the nearest end,
-- wrap takes a finite one modulo the axis length (exactly, fmod) and Inf to position 1.
describe("take: int64 data above 2^53 and indices beyond int64", function()
  local I64 = require("helpers.i64")
  local P53 = 9007199254740993LL
  it("copies int64 rows exactly (cpu and ref)", function()
    local x = I64.mk({ P53, P53 + 2, 5LL })
    local idx = mx.nd.array({ 2, 1, 3 })
    I64.same({ P53 + 2, P53, 5LL }, I64.rd(mx.nd.take(x, idx)), "cpu")
    I64.same({ P53 + 2, P53, 5LL }, I64.rd(mx.nd._ref.take(x, idx)), "ref")
  end)
  it("Inf and 1e300 indices: clip, wrap, raise agree between cpu and ref", function()
    local x = mx.nd.array({ 10, 20, 30 })
    local idx = mx.nd.array({ 1 / 0, -1 / 0, 1e300, -1e300, 0 / 0 }, { dtype = "float64" })
    -- 1e300 mod 3: 1e300 = 2^997 * m exactly; computed in Lua with fmod as the kernels do
    local wp = ((math.fmod(1e300, 3) - 1) % 3) + 1
    local wn = ((math.fmod(-1e300, 3) - 1) % 3) + 1
    local X = { 10, 20, 30 }
    local want = { clip = { 30, 10, 30, 10, 10 }, wrap = { 10, 10, X[wp], X[wn], 10 } }
    for mode, wv in pairs(want) do
      assert.are.same(wv, mx.nd.take(x, idx, { mode = mode }):tolist(), "cpu " .. mode)
      assert.are.same(wv, mx.nd._ref.take(x, idx, { mode = mode }):tolist(), "ref " .. mode)
    end
    assert.has_error(function() mx.nd.take(x, mx.nd.array({ 1 / 0 }), { mode = "raise" }) end)
    assert.has_error(function() mx.nd._ref.take(x, mx.nd.array({ -1e300 }), { mode = "raise" }) end)
  end)
end)
