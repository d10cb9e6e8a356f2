-- spec/sort_spec.lua — sort, argsort, topk (+ sort_backward): MXNet 1.9's semantics with
-- luamx's 1-based int64 index values (docs/ops-notes.md), stable order, NaN larger than
-- every number, topk's ret_typ (both: two outputs, the op table's `nout`), the cpu kernels
-- against the reference and a Lua oracle, gradients, and errors at the caller's line.
local mx = require("mx")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "sort_spec.lua"
local NAN = 0 / 0

-- A Lua oracle: the 1-based positions of a list in stable order (NaN largest).
local function oracle(list, asc)
  local pos = {}
  for i = 1, #list do pos[i] = i end
  local function key_before(a, b)
    local x, y = list[a], list[b]
    if x ~= x or y ~= y then
      if asc then return x == x and y ~= y end
      return x ~= x and y == y
    end
    if asc then return x < y end
    return x > y
  end
  table.sort(pos, function(a, b)
    if key_before(a, b) then return true end
    if key_before(b, a) then return false end
    return a < b -- ties: input order
  end)
  return pos
end

local function isnan(v) return v ~= v end

describe("sort", function()
  it("sorts along the last axis ascending by default, NaN last", function()
    local x = nd.array({ { 3, 1, 2, NAN, 0 }, { 5, -4, 6, 4, 0 } })
    local s = nd.sort(x):totable()
    assert.same({ 0, 1, 2, 3 }, { s[1][1], s[1][2], s[1][3], s[1][4] })
    assert.is_true(isnan(s[1][5]))
    assert.same({ -4, 0, 4, 5, 6 }, s[2])
    local d = x:sort { is_ascend = false }:totable()
    assert.is_true(isnan(d[1][1]))
    assert.same({ 3, 2, 1, 0 }, { d[1][2], d[1][3], d[1][4], d[1][5] })
    local c = nd.sort(x, { axis = 1 }):totable()
    assert.same({ { 3, -4, 2, 4, 0 }, { 5, 1, 6 } }, { c[1], { c[2][1], c[2][2], c[2][3] } })
    assert.is_true(isnan(c[2][4]))
  end)

  it("keeps the dtype and is exact for int64 beyond 2^53", function()
    local I64 = require("helpers.i64")
    local P53 = 9007199254740993LL
    local big = I64.mk({ P53, P53 - 1, -3LL, P53 + 1 }, { 4 })
    for _, F in ipairs({ nd, nd._ref }) do
      local s = F.sort(big)
      assert.equal("int64", s:dtype())
      I64.same({ -3LL, P53 - 1, P53, P53 + 1 }, I64.rd(s), "sort")
      I64.same({ 4LL, 1LL }, I64.rd(F.topk(big, { k = 2 })), "topk")
    end
    local u = nd.sort(nd.array({ 200, 3, 255 }, { dtype = "uint8" }), { is_ascend = false })
    assert.same({ 255, 200, 3 }, u:tolist())
    assert.equal("uint8", u:dtype())
  end)

  it("matches the reference kernel and the Lua oracle on random rows of every numeric dtype", function()
    mx.random.seed(3)
    for _, dt in ipairs({ "float32", "float64", "int32", "int64", "uint8", "int8", "float16" }) do
      -- few distinct values: many ties, so stability is what is checked
      local x = nd.random_uniform({ 4, 7, 3 }, { low = 0, high = 5 }):floor():astype(dt)
      for _, axis in ipairs({ 1, 2, 3 }) do
        for _, asc in ipairs({ true, false }) do
          local o = { axis = axis, is_ascend = asc }
          assert.same(nd._ref.sort(x, o):totable(), nd.sort(x, o):totable())
          local i = nd.argsort(x, o)
          assert.same(nd._ref.argsort(x, o):totable(), i:totable())
          -- the oracle, row by row along the axis
          local t = nd.swapaxes(x, { dim1 = axis, dim2 = 3 }):totable()
          local it = nd.swapaxes(i, { dim1 = axis, dim2 = 3 }):totable()
          for a = 1, #t do
            for b = 1, #t[a] do assert.same(oracle(t[a][b], asc), it[a][b]) end
          end
        end
      end
    end
  end)
end)

describe("argsort", function()
  it("gives 1-based int64 positions by default, stable on ties, NaN last", function()
    local x = nd.array({ { 2, 1, 2, NAN, 1 } })
    local i = nd.argsort(x)
    assert.equal("int64", i:dtype())
    assert.same({ { 2, 5, 1, 3, 4 } }, i:totable())
    assert.same({ { 4, 1, 3, 2, 5 } }, x:argsort { is_ascend = false }:totable())
    assert.same({ { 1, 1, 1, 1, 1 } }, nd.argsort(x, { axis = 1 }):totable())
  end)

  it("takes MXNet's dtype option for the index values", function()
    local x = nd.array({ 3, 1, 2 })
    local f = nd.argsort(x, { dtype = "float32" })
    assert.equal("float32", f:dtype())
    assert.same({ 2, 3, 1 }, f:tolist())
    assert.equal("int32", nd.argsort(x, { dtype = "int32" }):dtype())
    H.assert_error(function(mark) mark() nd.argsort(x, { dtype = "uint8" }) end, FILE, "argsort",
      "dtype", "uint8")
  end)
end)

describe("topk", function()
  local x = nd.array({ { 3, 1, 4, 1, 5 }, { 9, 2, 6, 5, 3 } })

  it("returns the 1-based indices of the k largest by default (ret_typ indices)", function()
    local i = nd.topk(x)
    assert.equal("int64", i:dtype())
    assert.same({ { 5 }, { 1 } }, i:totable())
    assert.same({ { 5, 3 }, { 1, 3 } }, nd.topk(x, { k = 2 }):totable())
    assert.same({ { 2, 4 }, { 2, 5 } }, x:topk { k = 2, is_ascend = true }:totable())
    assert.same({ { 2, 2, 2, 2, 1 } }, nd.topk(x, { axis = 1, k = 1 }):totable())
  end)

  it("gives values, a mask, or both (two outputs)", function()
    assert.same({ { 5, 4 }, { 9, 6 } }, nd.topk(x, { k = 2, ret_typ = "value" }):totable())
    local m = nd.topk(x, { k = 2, ret_typ = "mask" })
    assert.equal("float32", m:dtype())
    assert.same({ { 0, 0, 1, 0, 1 }, { 1, 0, 1, 0, 0 } }, m:totable())
    local v, i = nd.topk(x, { k = 2, ret_typ = "both", dtype = "float64" })
    assert.same({ { 5, 4 }, { 9, 6 } }, v:totable())
    assert.same({ { 5, 3 }, { 1, 3 } }, i:totable())
    assert.equal("float64", i:dtype())
    -- out= takes the two outputs as a list
    local ov, oi = nd.zeros { 2, 2 }, nd.zeros({ 2, 2 }, { dtype = "float64" })
    local rv, ri = nd.topk(x, { k = 2, ret_typ = "both", dtype = "float64", out = { ov, oi } })
    assert.equal(ov, rv)
    assert.equal(oi, ri)
    assert.same({ { 5, 3 }, { 1, 3 } }, oi:totable())
    H.assert_error(function(mark) mark() nd.topk(x, { ret_typ = "both", out = ov }) end, FILE,
      "topk", "2 tensor")
  end)

  it("takes k < 1 as the whole axis (MXNet) and rejects k beyond it", function()
    assert.same(nd.argsort(x, { is_ascend = false }):totable(), nd.topk(x, { k = 0 }):totable())
    H.assert_error(function(mark) mark() nd.topk(x, { k = 6 }) end, FILE, "topk", "k=6", "(2, 5)")
  end)

  it("puts NaN first (the largest) and matches the reference kernel", function()
    local y = nd.array({ 1, NAN, 3 })
    assert.same({ 2, 3 }, nd.topk(y, { k = 2 }):tolist())
    mx.random.seed(5)
    local r = nd.random_uniform({ 5, 6 }):mul_scalar { scalar = 4 }:floor()
    for _, rt in ipairs({ "value", "indices", "mask" }) do
      for _, asc in ipairs({ true, false }) do
        local o = { k = 3, ret_typ = rt, is_ascend = asc, axis = 1 }
        assert.same(nd._ref.topk(r, o):totable(), nd.topk(r, o):totable())
      end
    end
  end)

  it("differentiates the values: the gradient lands at the picked positions", function()
    local w = nd.array({ { 3, 1, 4 }, { 2, 7, 5 } })
    w:attach_grad()
    mx.autograd.record(function()
      local v, i = nd.topk(w, { k = 2, ret_typ = "both" })
      assert.same({ { 3, 1 }, { 2, 3 } }, i:totable())
      v:mul(nd.array({ { 10, 20 }, { 30, 40 } })):sum():backward()
    end)
    assert.same({ { 20, 0, 10 }, { 0, 30, 40 } }, w:grad():totable())
    local s = nd.array({ 3, 1, 2 })
    s:attach_grad()
    mx.autograd.record(function()
      nd.sort(s):mul(nd.array({ 1, 2, 3 })):sum():backward()
    end)
    assert.same({ 3, 1, 2 }, s:grad():tolist())
  end)
end)

describe("sort_backward", function()
  it("adds ograd at the 1-based positions along the axis into zeros of data's shape", function()
    local d = nd.zeros { 2, 3 }
    local g = nd.sort_backward(d, nd.array({ { 3, 1 }, { 2, 3 } }), nd.array({ { 1, 2 }, { 3, 4 } }))
    assert.same({ { 2, 0, 1 }, { 0, 3, 4 } }, g:totable())
    local g1 = nd.sort_backward(d, nd.array({ { 2, 1, 1 } }), nd.array({ { 5, 6, 7 } }), { axis = 1 })
    assert.same({ { 0, 6, 7 }, { 5, 0, 0 } }, g1:totable())
    H.assert_error(function(mark) mark() nd.sort_backward(d, nd.ones { 2, 4 }, nd.ones { 2, 4 }) end,
      FILE, "sort_backward", "4 indices along axis 2")
  end)
end)

describe("sort errors", function()
  it("names the op, the argument and the shape at the caller's line", function()
    local x = nd.ones { 2, 3 }
    H.assert_error(function(mark) mark() nd.sort(x, { axis = 3 }) end, FILE, "sort", "axis=3")
    H.assert_error(function(mark) mark() nd.argsort(nd.array(1)) end, FILE, "argsort", "1 dim")
    H.assert_error(function(mark) mark() nd.topk(x, { ret_typ = "all" }) end, FILE, "topk", "ret_typ")
  end)
end)
