-- spec/indexing_spec.lua — pick, take, one_hot (+ pick_backward, take_backward), gather_nd,
-- scatter_nd, slice_like, diag:
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

-- take copies int64 elements exactly in both kernels, and an index beyond int64
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

-- gather_nd / scatter_nd (MXNet 1.9 semantics, 1-based index values), slice_like,
-- diag. Expected values come from small Lua loops over nested tables (not the kernels).
describe("gather_nd and scatter_nd", function()
  -- data as a flat Lua list of shape sh; the point y of indices (M, ny) addressed
  local function lua_offset(idx, y, sh)
    local o = 0
    for j = 1, #idx do o = o * sh[j] + idx[j][y] - 1 end
    for j = #idx + 1, #sh do o = o * sh[j] end
    return o
  end
  local function inner_of(sh, m)
    local n = 1
    for j = m + 1, #sh do n = n * sh[j] end
    return n
  end
  local function lua_gather(flat, sh, idx)
    local r, inner = {}, inner_of(sh, #idx)
    for y = 1, #idx[1] do
      local o = lua_offset(idx, y, sh)
      for i = 1, inner do r[#r + 1] = flat[o + i] end
    end
    return r
  end
  local function seq(n) local t = {} for i = 1, n do t[i] = i * 10 + i % 3 end return t end

  it("gathers points and trailing blocks like the Lua loop (and the reference)", function()
    local flat, sh = seq(24), { 2, 3, 4 }
    local x = nd.array(flat):reshape(sh)
    for _, idx in ipairs { { { 1, 2, 2 }, { 3, 1, 3 }, { 4, 2, 1 } }, { { 2, 1 }, { 3, 3 } },
      { { 2, 1, 2 } } } do
      local want = lua_gather(flat, sh, idx)
      local got = nd.gather_nd(x, nd.array(idx))
      assert.same(want, got:reshape { -1 }:tolist())
      assert.same(want, nd._ref.gather_nd(x, nd.array(idx)):reshape { -1 }:tolist())
      -- out shape: indices.shape[2:] + data.shape[M+1:]
      local s = { #idx[1] }
      for j = #idx + 1, 3 do s[#s + 1] = sh[j] end
      assert.same(s, got:shape())
    end
    -- MXNet's doc example, shifted to 1-based values: data [[0,1],[2,3]], indices
    -- [[1,0],[0,1]] (0-based) -> [2, 1]
    local d = nd.array({ { 0, 1 }, { 2, 3 } })
    assert.same({ 2, 1 }, nd.gather_nd(d, nd.array({ { 2, 1 }, { 1, 2 } })):tolist())
    -- int64 indices, int32 data
    local di = nd.array({ 7, 8, 9 }, { dtype = "int32" })
    local gi = nd.gather_nd(di, nd.array({ { 3, 1 } }, { dtype = "int64" }))
    assert.same({ 9, 7 }, gi:tolist())
    assert.equal("int32", gi:dtype())
  end)

  it("scatter_nd writes data at the points, zeros elsewhere; gather_nd reads them back", function()
    local idx = { { 1, 2, 1 }, { 3, 1, 2 } }
    local s = nd.scatter_nd(nd.array({ 5, 6, 7 }), nd.array(idx), { shape = { 2, 3 } })
    local want = { 0, 0, 0, 0, 0, 0 }
    for y = 1, 3 do want[lua_offset(idx, y, { 2, 3 }) + 1] = 4 + y end
    assert.same(want, s:reshape { -1 }:tolist())
    assert.same({ 5, 6, 7 }, nd.gather_nd(s, nd.array(idx)):tolist())
    -- M=1: whole rows
    local r = nd._ref.scatter_nd(nd.array({ { 1, 2 }, { 3, 4 } }), nd.array({ { 3, 1 } }),
      { shape = { 3, 2 } })
    assert.same({ { 3, 4 }, { 0, 0 }, { 1, 2 } }, r:totable())
  end)

  it("gather_nd_backward sums ograd at repeated points", function()
    local g = nd.gather_nd_backward(nd.zeros { 2, 2 }, nd.array({ { 1, 1, 2 }, { 2, 2, 1 } }),
      nd.array({ 1, 10, 100 }))
    assert.same({ { 0, 11 }, { 100, 0 } }, g:totable())
    local x = nd.array({ { 1, 2 }, { 3, 4 } })
    x:attach_grad()
    mx.autograd.record(function()
      local y = nd.gather_nd(x, nd.array({ { 2, 2 }, { 1, 1 } }))
      y:backward(nd.array({ 3, 4 }))
    end)
    assert.same({ { 0, 0 }, { 7, 0 } }, x:grad():totable())
  end)

  it("rejects out-of-range indices and mismatched shapes at the caller's line", function()
    local x = nd.ones { 2, 3 }
    H.assert_error(function(mark) mark() nd.gather_nd(x, nd.array({ { 1 }, { 4 } })) end, FILE,
      "gather_nd", "index 4", "axis 2", "1..3")
    H.assert_error(function(mark) mark() nd.gather_nd(x, nd.array({ { 0 } })) end, FILE,
      "gather_nd", "index 0", "1..2")
    H.assert_error(function(mark) mark() nd.gather_nd(x, nd.ones { 3, 1 }) end, FILE,
      "gather_nd", "address 3 dims")
    H.assert_error(function(mark)
      mark() nd.scatter_nd(nd.ones { 2 }, nd.array({ { 1, 3 } }), { shape = { 2 } })
    end, FILE, "scatter_nd", "index 3")
    H.assert_error(function(mark)
      mark() nd.scatter_nd(nd.ones { 3 }, nd.array({ { 1, 2 } }), { shape = { 2 } })
    end, FILE, "scatter_nd", "data (3,)")
    H.assert_error(function(mark) mark() nd.scatter_nd(nd.ones { 1 }, nd.array({ { 1 } })) end,
      FILE, "scatter_nd", "shape")
  end)
end)

describe("slice_like", function()
  it("cuts data to shape_like's size on all or the given axes", function()
    local x = nd.arange(1, 13):reshape { 3, 4 }
    assert.same({ { 1, 2, 3 }, { 5, 6, 7 } }, nd.slice_like(x, nd.zeros { 2, 3 }):totable())
    -- axes (1-based, negative from the end): only axis 2 cut; shape_like may have fewer dims
    assert.same({ { 1, 2 }, { 5, 6 }, { 9, 10 } },
      nd.slice_like(x, nd.zeros { 7, 2 }, { axes = { -1 } }):totable())
    assert.same({ { 1, 2, 3, 4 } }, nd._ref.slice_like(x, nd.zeros { 1 }, { axes = { 1 } }):totable())
    local big = nd.arange(1, 25):reshape { 2, 3, 4 }
    local want = {}
    for i = 1, 2 do for j = 1, 2 do for k = 1, 4 do
      want[#want + 1] = (i - 1) * 12 + (j - 1) * 4 + k
    end end end
    assert.same(want, nd.slice_like(big, nd.zeros { 5, 2 }, { axes = { 2 } }):reshape { -1 }:tolist())
  end)
  it("gradient is slice's: ograd in the box, zeros outside", function()
    local x = nd.ones { 2, 3 }
    x:attach_grad()
    mx.autograd.record(function() nd.slice_like(x, nd.zeros { 1, 2 }):backward(nd.array({ { 4, 5 } })) end)
    assert.same({ { 4, 5, 0 }, { 0, 0, 0 } }, x:grad():totable())
  end)
  it("checks ranks and sizes", function()
    local x = nd.ones { 2, 3 }
    H.assert_error(function(mark) mark() nd.slice_like(x, nd.ones { 2 }) end, FILE, "slice_like",
      "same number of dims")
    H.assert_error(function(mark) mark() nd.slice_like(x, nd.ones { 3, 3 }) end, FILE,
      "slice_like", "larger", "axis 1")
    H.assert_error(function(mark) mark() nd.slice_like(x, nd.ones { 2 }, { axes = { 2 } }) end,
      FILE, "slice_like", "axis 2")
  end)
end)

describe("diag", function()
  local function lua_diag2(t, k)
    local r = {}
    for i = 1, #t do
      local j = i + k
      if j >= 1 and j <= #t[1] then r[#r + 1] = t[i][j] end
    end
    return r
  end
  it("2-D -> its k-th diagonal (empty past the edge), like the Lua loop", function()
    local t = { { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } }
    local x = nd.array(t)
    for k = -4, 5 do
      local want = lua_diag2(t, k)
      local got = nd.diag(x, { k = k })
      assert.same({ #want }, got:shape(), "k=" .. k)
      if #want > 0 then assert.same(want, got:tolist(), "k=" .. k) end
      if #want > 0 then assert.same(want, nd._ref.diag(x, { k = k }):tolist(), "ref k=" .. k) end
    end
  end)
  it("1-D -> a square matrix with the vector on the k-th diagonal; diag back gives it", function()
    for _, k in ipairs { 0, 2, -1 } do
      local v = nd.array({ 3, 4, 5 })
      local m = nd.diag(v, { k = k })
      local n = 3 + math.abs(k)
      local want = {}
      for i = 1, n do
        want[i] = {}
        for j = 1, n do want[i][j] = 0 end
      end
      for i = 1, 3 do
        local r, c = k < 0 and i - k or i, k > 0 and i + k or i
        want[r][c] = i + 2
      end
      assert.same(want, m:totable(), "k=" .. k)
      assert.same({ 3, 4, 5 }, nd.diag(m, { k = k }):tolist())
    end
  end)
  it("gradient of 2-D diag puts ograd back on the diagonal", function()
    local x = nd.ones { 2, 3 }
    x:attach_grad()
    mx.autograd.record(function() nd.diag(x, { k = 1 }):backward(nd.array({ 7, 8 })) end)
    assert.same({ { 0, 7, 0 }, { 0, 0, 8 } }, x:grad():totable())
    local b = nd.diag_backward(nd.zeros { 3, 2 }, nd.array({ 7, 8 }), { k = -1 })
    assert.same({ { 0, 0 }, { 7, 0 }, { 0, 8 } }, b:totable())
    H.assert_error(function(mark) mark() nd.diag_backward(nd.zeros { 3, 2 }, nd.ones { 3 }) end,
      FILE, "diag_backward", "(3,)", "k=0")
  end)
  it("rejects other ranks", function()
    H.assert_error(function(mark) mark() nd.diag(nd.ones { 2, 2, 2 }) end, FILE, "diag", "1-D or 2-D",
      "(2, 2, 2)")
  end)
end)

describe("one_hot on/off values", function()
  it("honours on_value, off_value and dtype", function()
    local o = nd.one_hot(nd.array({ 2, 1 }), { depth = 3, on_value = 2.5, off_value = -1,
      dtype = "float64" })
    assert.same({ { -1, 2.5, -1 }, { 2.5, -1, -1 } }, o:totable())
    assert.equal("float64", o:dtype())
  end)
end)

describe("setitem with Lua arrays as values", function()
  it("converts a nested Lua table to x's dtype, then assigns as a tensor would", function()
    local x = nd.zeros({ 3, 3 }, { dtype = "int32" })
    x[{ { 1, 2 } }] = { { 1, 2, 3 }, { 4, 5, 6 } }
    x[3] = { 7, 8, 9 }
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }, x:totable())
    assert.equal("int32", x:dtype())
    x[2] = { 2.9, -1, 0 } -- truncated to int32 as the conversion does
    assert.same({ 2, -1, 0 }, x[2]:tolist())
  end)
  it("broadcasts the value into the selection as MXNet allows", function()
    local x = nd.zeros { 3, 3 }
    x[{ { 1, 2 } }] = { 10, 20, 30 }                -- (3,) into (2, 3)
    x[3] = { 5 }                                    -- (1,) into (3,)
    assert.same({ { 10, 20, 30 }, { 10, 20, 30 }, { 5, 5, 5 } }, x:totable())
    x[{ { 1, 3 }, 2 }] = { 1, 2, 3 }                -- a column (integer-indexed axis dropped)
    x[{ { 2, 3 }, { 1, 2 } }] = { { -1 }, { -2 } }  -- (2, 1) into (2, 2)
    assert.same({ { 10, 1, 30 }, { -1, -1, 30 }, { -2, -2, 5 } }, x:totable())
  end)
  it("rejects values that do not broadcast and tables that are not arrays", function()
    local x = nd.zeros { 3, 3 }
    H.assert_error(function(mark) mark() x[{ { 1, 2 } }] = { 1, 2 } end, FILE, "(2,)", "(2, 3)")
    H.assert_error(function(mark) mark() x[1] = { { 1, 2, 3 }, { 4, 5, 6 } } end, FILE, "(2, 3)")
    H.assert_error(function(mark) mark() x[1] = { { 1, 2 }, { 3 } } end, FILE, "index",
      "Lua array", "ragged")
    H.assert_error(function(mark) mark() x[1] = { "a" } end, FILE, "index", "string")
    assert.same({ 0, 0, 0 }, x[1]:tolist()) -- nothing written
  end)
end)

describe("index_copy", function()
  -- the Lua oracle: old's rows, those at index replaced by new's rows in order
  local function oracle(old, index, new)
    local r = {}
    for i = 1, #old do r[i] = old[i] end
    for i = 1, #index do r[index[i]] = new[i] end
    return r
  end
  it("replaces old's rows at 1-based positions by new's rows, on several dtypes", function()
    local old = { { 1, 2 }, { 3, 4 }, { 5, 6 }, { 7, 8 } }
    local new = { { 10, 11 }, { 12, 13 } }
    for _, dt in ipairs({ "float32", "float64", "int32", "uint8" }) do
      for _, idt in ipairs({ "float32", "int64" }) do
        local r = nd.index_copy(nd.array(old, { dtype = dt }), nd.array({ 4, 2 }, { dtype = idt }),
          nd.array(new, { dtype = dt }))
        assert.equal(dt, r:dtype())
        assert.same(oracle(old, { 4, 2 }, new), r:totable())
      end
    end
  end)
  it("1-D data, trailing blocks, repeated positions (the last wins), empty index", function()
    assert.same({ 9, 2, 3 }, nd.index_copy(nd.array({ 1, 2, 3 }), nd.array({ 1 }),
      nd.array({ 9 })):tolist())
    local o = nd.zeros({ 2, 2, 2 })
    local r = nd.index_copy(o, nd.array({ 2 }), nd.ones({ 1, 2, 2 }))
    assert.same({ { { 0, 0 }, { 0, 0 } }, { { 1, 1 }, { 1, 1 } } }, r:totable())
    assert.same({ 7, 2 }, nd.index_copy(nd.array({ 1, 2 }), nd.array({ 1, 1 }),
      nd.array({ 5, 7 })):tolist())
    assert.same({ 1, 2 }, nd.index_copy(nd.array({ 1, 2 }), nd.zeros({ 0 }), nd.zeros({ 0 })):tolist())
  end)
  it("gives old zeros at the replaced rows and new the gathered rows", function()
    local old, new = nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } }), nd.array({ { 7, 8 } })
    local w = nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
    old:attach_grad()
    new:attach_grad()
    mx.autograd.record(function()
      return nd.sum(nd.mul(nd.index_copy(old, nd.array({ 2 }), new), w))
    end):backward()
    assert.same({ { 1, 2 }, { 0, 0 }, { 5, 6 } }, old:grad():totable())
    assert.same({ { 3, 4 } }, new:grad():totable())
  end)
  it("rejects bad positions, shapes and dtypes at the caller's line", function()
    local old = nd.zeros({ 3, 2 })
    H.assert_error(function(mark) mark() nd.index_copy(old, nd.array({ 4 }), nd.zeros({ 1, 2 })) end,
      FILE, "index_copy", "out of range 1..3")
    H.assert_error(function(mark) mark() nd.index_copy(old, nd.array({ 0 }), nd.zeros({ 1, 2 })) end,
      FILE, "index_copy", "index 0")
    H.assert_error(function(mark) mark() nd.index_copy(old, nd.array({ 1 }), nd.zeros({ 1, 3 })) end,
      FILE, "index_copy", "(1, 3)", "(3, 2)")
    H.assert_error(function(mark) mark() nd.index_copy(old, nd.array({ { 1 } }), nd.zeros({ 1, 2 })) end,
      FILE, "index_copy", "1-D")
    H.assert_error(function(mark)
      mark() nd.index_copy(old, nd.array({ 1 }), nd.zeros({ 1, 2 }, { dtype = "float64" }))
    end, FILE, "index_copy", "float64", "float32")
    H.assert_error(function(mark) mark() nd.index_copy(nd.array(1), nd.array({ 1 }), nd.zeros({ 1 })) end,
      FILE, "index_copy", "at least 1 dim")
  end)
end)

describe("contrib.boolean_mask", function()
  local contrib = require("mx.contrib")
  it("keeps the slices where the mask is nonzero, along axis 1 or another axis", function()
    local x = nd.array({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } })
    assert.same({ { 1, 2, 3 }, { 7, 8, 9 } }, contrib.boolean_mask(x, nd.array({ 1, 0, 2 })):totable())
    assert.same({ { 2 }, { 5 }, { 8 } },
      contrib.boolean_mask(x, nd.array({ 0, 1, 0 }, { dtype = "uint8" }), { axis = 2 }):totable())
    assert.same({ { 3 }, { 6 }, { 9 } },
      contrib.boolean_mask(x, nd.array({ 0, 0, 1 }), { axis = -1 }):totable())
    local e = contrib.boolean_mask(x, nd.zeros({ 3 }))
    assert.same({ 0, 3 }, e:shape())
    assert.equal("float32", e:dtype())
    local i = contrib.boolean_mask(nd.arange(0, 4, { dtype = "int32" }), nd.array({ 1, 1, 0, 1 }))
    assert.same({ 0, 1, 3 }, i:tolist())
    assert.equal("int32", i:dtype())
  end)

  it("scatters the gradient back to the kept rows, zeros elsewhere", function()
    local x = nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
    x:attach_grad()
    mx.autograd.record(function()
      local y = contrib.boolean_mask(x, nd.array({ 0, 1, 1 }))
      y:backward(nd.array({ { 1, 2 }, { 3, 4 } }))
    end)
    assert.same({ { 0, 0 }, { 1, 2 }, { 3, 4 } }, x:grad():totable())
    mx.autograd.record(function()
      local y = contrib.boolean_mask(x, nd.zeros({ 3 }))
      y:sum():backward()
    end)
    assert.same({ { 0, 0 }, { 0, 0 }, { 0, 0 } }, x:grad():totable())
  end)

  it("reports bad lengths, ranks and axes at the caller's line", function()
    local x = nd.zeros({ 3, 2 })
    H.assert_error(function(mark) mark() contrib.boolean_mask(x, nd.ones({ 2 })) end, FILE,
      "boolean_mask", "index length 2", "length 3")
    H.assert_error(function(mark) mark() contrib.boolean_mask(x, nd.ones({ 3 }), { axis = 2 }) end,
      FILE, "index length 3", "axis 2")
    H.assert_error(function(mark) mark() contrib.boolean_mask(x, nd.ones({ 3, 1 })) end, FILE, "1-D")
    H.assert_error(function(mark) mark() contrib.boolean_mask(x, nd.ones({ 3 }), { axis = 3 }) end,
      FILE, "axis 3", "out of range")
    H.assert_error(function(mark) mark() contrib.boolean_mask(x, { 1, 0, 1 }) end, FILE, "index", "tensor")
    H.assert_error(function(mark) mark() contrib.boolean_mask(x, nd.ones({ 3 }), { axes = 1 }) end,
      FILE, "unknown option")
  end)
end)

---------------------------------------------------------------- embedding
describe("embedding", function()
  local oracle = require("helpers.oracle")
  local err_at = require("helpers.err_at")(FILE)
  local function close(a, b, tol)
    local ok, msg = oracle.close(a, b, tol or 0, tol or 0)
    assert(ok, msg)
  end

  it("looks 0-based token ids up (float and int ids, any shape), cpu = ref", function()
    local w = nd.array({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
    assert.same({ { 5, 6 }, { 1, 2 }, { 3, 4 } }, nd.embedding(nd.array({ 2, 0, 1 }), w):totable())
    local ids = nd.array({ { 1, 1 }, { 0, 2 } }, { dtype = "int64" })
    local y = nd.embedding(ids, w, { input_dim = 3, output_dim = 2 })
    assert.same({ 2, 2, 2 }, y:shape())
    assert.same({ { { 3, 4 }, { 3, 4 } }, { { 1, 2 }, { 5, 6 } } }, y:totable())
    for _, dt in ipairs({ "float32", "float64" }) do
      for _, idt in ipairs({ "float32", "int32", "int64" }) do
        local W = oracle.rand(mx, { 50, 7 }, dt)
        local I = oracle.rand(mx, { 3, 41 }, idt == "float32" and "int32" or idt, { 0, 49 })
        if idt == "float32" then I = I:astype("float32") end
        close(nd.embedding(I, W), nd._ref.embedding(I, W))
      end
    end
  end)

  it("backward: only looked-up rows get gradient, repeats sum, cpu = ref, sparse_grad same", function()
    local W = nd.zeros({ 5, 3 })
    local ids = nd.array({ 4, 1, 4 })
    local g = nd.array({ { 1, 2, 3 }, { 10, 20, 30 }, { 100, 200, 300 } })
    local d = nd.embedding_backward(ids, W, g)
    assert.same({ { 0, 0, 0 }, { 10, 20, 30 }, { 0, 0, 0 }, { 0, 0, 0 }, { 101, 202, 303 } },
      d:totable())
    for _, dt in ipairs({ "float32", "float64" }) do
      -- a table big enough for several row blocks, ids with many repeats
      local Wb = nd.zeros({ 3000, 40 }, { dtype = dt })
      local I = oracle.rand(mx, { 7, 300 }, "int64", { 0, 2999 })
      local G = oracle.rand(mx, { 7, 300, 40 }, dt)
      local got = nd.embedding_backward(I, Wb, G)
      close(got, nd._ref.embedding_backward(I, Wb, G), dt == "float32" and 1e-5 or 1e-12)
      close(nd.embedding_backward(I, Wb, G, { sparse_grad = true }), got)
    end
    -- through autograd: the weight's gradient
    local w = nd.array({ { 1, 2 }, { 3, 4 } })
    w:attach_grad()
    local y
    mx.autograd.record(function() y = nd.embedding(nd.array({ 1, 1, 0 }), w, { sparse_grad = true }) end)
    y:backward()
    assert.same({ { 1, 1 }, { 2, 2 } }, w:grad():totable())
  end)

  it("partial inference fills the weight from input_dim/output_dim (deferred init)", function()
    local infer = require("mx.nd.infer").infer
    local r = infer("embedding", { input_dim = 7, output_dim = 3 }, { nd.ones({ 2, 5 }), { shape = nil } })
    assert.same({ 7, 3 }, r.inputs[2].shape)
    assert.same({ 2, 5, 3 }, r.outputs[1].shape)
    r = infer("embedding", { input_dim = 7, output_dim = 3, dtype = "float64" },
      { nd.ones({ 4 }), { shape = { 0, 0 } } })
    assert.same({ 7, 3 }, r.inputs[2].shape)
    assert.same("float64", r.inputs[2].dtype)
  end)

  it("matches PyTorch's F.embedding (values and the weight gradient)", function()
    local T = dofile("spec/fixtures/attn_torch.lua").embedding
    local function t(v) return nd.array(v.values, { dtype = "float64" }):reshape(v.shape):copy() end
    local w = t(T.weight)
    w:attach_grad()
    local y
    mx.autograd.record(function() y = nd.embedding(t(T.ids):astype("int64"), w) end)
    y:backward(t(T.w))
    close(y, t(T.out), 1e-12)
    close(w:grad(), t(T.d_weight), 1e-12)
  end)

  it("errors: ids out of range (at the caller's line), bad weight, dims", function()
    local w = nd.ones({ 3, 2 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nd.embedding(nd.array({ 0, 3 }), w):tolist() return r end, line)
    assert.is_truthy(msg:find("embedding: data[1] = 3 is not a token id in [0, 3)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.embedding(nd.array({ -1 }), w):tolist() return r end, line)
    assert.is_truthy(msg:find("is not a token id", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.embedding(nd.array({ 0 }), w, { input_dim = 4 }) return r end, line)
    assert.is_truthy(msg:find("does not match input_dim 4", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.embedding(nd.array({ 0 }), nd.ones({ 3 })) return r end, line)
    assert.is_truthy(msg:find("weight must be 2-d", 1, true), msg)
    local i0, g13 = nd.array({ 0 }), nd.ones({ 1, 3 })
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.embedding_backward(i0, w, g13) return r end, line)
    assert.is_truthy(msg:find("ograd (1, 3) must have shape data.shape + (output_dim)", 1, true), msg)
  end)
end)
