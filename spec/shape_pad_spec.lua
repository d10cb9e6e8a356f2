-- spec/shape_pad_spec.lua — MXNet 1.9's further shape ops: pad (every mode), moveaxis,
-- depth_to_space, space_to_depth, broadcast_axis, split_v2, and NDArray's inplace=
-- methods (flatten, expand_dims, squeeze): values against Lua index arithmetic, the cpu
-- kernels against the reference ones for every element size, errors at the caller.
local mx = require("mx")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "shape_pad_spec.lua"

local S = require("helpers.shapes")
local range, flat, coords, agrees = S.range, S.flat, S.coords, S.agrees

-- pad, moveaxis, depth_to_space, space_to_depth, broadcast_axis. Expected values
-- from Lua index arithmetic over range() (element at 1-based c is flat(shape, c) - 1);
-- the cpu kernels against the reference ones for every element size.
describe("pad, moveaxis, depth_to_space, space_to_depth, broadcast_axis", function()
  local function vals(t) return t:reshape({ -1 }):totable() end
  -- expected[k] for every output coordinate (row-major) from src(c) -> input coord or nil
  local function expect(oshape, ishape, src, fill)
    local e = {}
    for _, c in ipairs(coords(oshape)) do
      local ic = src(c)
      e[#e + 1] = ic and flat(ishape, ic) - 1 or fill
    end
    return e
  end
  local function check(got, oshape, want)
    assert.same(oshape, got:shape())
    assert.same(want, vals(got))
  end

  it("pad: constant, edge and reflect as NumPy's pad on axes 3..", function()
    local xs, pw = { 2, 1, 3, 4 }, { 0, 0, 0, 0, 2, 1, 1, 3 }
    local x = range(xs)
    local os = { 2, 1, 6, 8 }
    local function idx(mode, t, n)
      if t >= 1 and t <= n then return t end
      if mode == "constant" then return nil end
      if mode == "edge" then return t < 1 and 1 or n end
      return t < 1 and 2 - t or 2 * n - t
    end
    for _, mode in ipairs { "constant", "edge", "reflect" } do
      local want = expect(os, xs, function(c)
        local h, w = idx(mode, c[3] - 2, 3), idx(mode, c[4] - 1, 4)
        if not h or not w then return nil end
        return { c[1], c[2], h, w }
      end, -5)
      local o = { mode = mode, pad_width = pw, constant_value = -5 }
      check(nd.pad(x, o), os, want)
      check(nd._ref.pad(x, o), os, want)
      agrees("pad", function(dt) return { range(xs, dt) } end, o)
    end
    local z = nd.pad(range { 1, 1, 2, 2 }, { pad_width = { 0, 0, 0, 0, 0, 0, 0, 0 } })
    check(z, { 1, 1, 2, 2 }, { 0, 1, 2, 3 })
    -- 5-D (NCDHW, MXNet's other rank): every mode, against the same index rule
    local xs5, pw5 = { 1, 2, 2, 3, 2 }, { 0, 0, 0, 0, 1, 0, 0, 2, 1, 1 }
    local x5 = range(xs5)
    local os5 = { 1, 2, 3, 5, 4 }
    for _, mode in ipairs { "constant", "edge", "reflect" } do
      local want = expect(os5, xs5, function(c)
        local dd, h, w = idx(mode, c[3] - 1, 2), idx(mode, c[4], 3), idx(mode, c[5] - 1, 2)
        if not dd or not h or not w then return nil end
        return { c[1], c[2], dd, h, w }
      end, -5)
      local o = { mode = mode, pad_width = pw5, constant_value = -5 }
      check(nd.pad(x5, o), os5, want)
      check(nd._ref.pad(x5, o), os5, want)
    end
  end)

  it("pad errors: rank, pad_width length, padded leading axes, reflect too wide", function()
    local x = range { 1, 1, 2, 3 }
    H.assert_error(function(mark) mark() nd.pad(range { 2, 3 }, { pad_width = { 0, 0, 1, 1 } }) end,
      FILE, "pad", "4-D or 5-D")
    -- 5-D needs 10 entries
    H.assert_error(function(mark)
      mark() nd.pad(range { 1, 1, 1, 2, 2 }, { pad_width = { 0, 0, 0, 0, 1, 1, 1, 1 } })
    end, FILE, "pad", "2*ndim = 10")
    H.assert_error(function(mark) mark() nd.pad(x, { pad_width = { 0, 0, 0, 0, 1, 1 } }) end,
      FILE, "pad", "2*ndim = 8")
    H.assert_error(function(mark) mark() nd.pad(x, { pad_width = { 0, 1, 0, 0, 1, 1, 1, 1 } }) end,
      FILE, "pad", "only axes 3.. may be padded")
    H.assert_error(function(mark)
      mark() nd.pad(x, { mode = "reflect", pad_width = { 0, 0, 0, 0, 2, 0, 0, 0 } })
    end, FILE, "pad", "smaller than the axis")
    H.assert_error(function(mark) mark() nd.pad(x, { pad_width = { 0, 0, 0, 0, -1, 0, 0, 0 } }) end,
      FILE, "pad", ">= 0")
  end)

  it("moveaxis: NumPy's order for one axis and for lists (1-based, negative)", function()
    local xs = { 2, 3, 4, 5 }
    local x = range(xs)
    -- source 1 -> destination 4: (3, 4, 5, 2); out[a, b, c, d] = x[d, a, b, c]
    local want = expect({ 3, 4, 5, 2 }, xs, function(c) return { c[4], c[1], c[2], c[3] } end)
    check(nd.moveaxis(x, { source = 1, destination = -1 }), { 3, 4, 5, 2 }, want)
    check(nd._ref.moveaxis(x, { source = 1, destination = 4 }), { 3, 4, 5, 2 }, want)
    -- np.moveaxis(x, [0, 1], [3, 1]).shape == (4, 3, 5, 2): out[a,b,c,d] = x[d, b, a, c]
    want = expect({ 4, 3, 5, 2 }, xs, function(c) return { c[4], c[2], c[1], c[3] } end)
    check(nd.moveaxis(x, { source = { 1, 2 }, destination = { 4, 2 } }), { 4, 3, 5, 2 }, want)
    agrees("moveaxis", function(dt) return { range(xs, dt) } end,
      { source = { 3, 1 }, destination = { 1, 2 } })
    H.assert_error(function(mark) mark() nd.moveaxis(x, { source = { 1, 2 }, destination = { 3 } }) end,
      FILE, "moveaxis", "same number of axes")
    H.assert_error(function(mark) mark() nd.moveaxis(x, { source = { 1, 1 }, destination = { 2, 3 } }) end,
      FILE, "moveaxis", "twice")
    H.assert_error(function(mark) mark() nd.moveaxis(x, { source = 5, destination = 1 }) end,
      FILE, "moveaxis", "source")
  end)

  it("depth_to_space / space_to_depth: MXNet's DCR layout, each the other's inverse", function()
    local xs, b = { 2, 8, 2, 3 }, 2
    local x = range(xs)
    local os = { 2, 2, 4, 6 }
    -- out[n, c, h*b+i, w*b+j] = x[n, (i*b+j)*C' + c, h, w] (0-based)
    local want = expect(os, xs, function(c)
      local h, i = math.floor((c[3] - 1) / b), (c[3] - 1) % b
      local w, j = math.floor((c[4] - 1) / b), (c[4] - 1) % b
      return { c[1], (i * b + j) * 2 + c[2], h + 1, w + 1 }
    end)
    check(nd.depth_to_space(x, { block_size = b }), os, want)
    check(nd._ref.depth_to_space(x, { block_size = b }), os, want)
    local back = nd.space_to_depth(nd.depth_to_space(x, { block_size = b }), { block_size = b })
    check(back, xs, vals(x))
    check(nd._ref.space_to_depth(nd._ref.depth_to_space(x, { block_size = b }), { block_size = b }),
      xs, vals(x))
    -- space_to_depth directly: out[n, (i*b+j)*C + c, h, w] = x[n, c, h*b+i, w*b+j]
    local ys = { 1, 2, 4, 6 }
    want = expect({ 1, 8, 2, 3 }, ys, function(c)
      local blk, ch = math.floor((c[2] - 1) / 2), (c[2] - 1) % 2
      return { c[1], ch + 1, (c[3] - 1) * b + math.floor(blk / b) + 1, (c[4] - 1) * b + blk % b + 1 }
    end)
    check(nd.space_to_depth(range(ys), { block_size = b }), { 1, 8, 2, 3 }, want)
    agrees("depth_to_space", function(dt) return { range({ 2, 9, 2, 2 }, dt) } end, { block_size = 3 })
    agrees("space_to_depth", function(dt) return { range({ 2, 3, 6, 3 }, dt) } end, { block_size = 3 })
    H.assert_error(function(mark) mark() nd.depth_to_space(x, { block_size = 3 }) end, FILE,
      "depth_to_space", "not divisible by block_size^2")
    H.assert_error(function(mark) mark() nd.space_to_depth(x, { block_size = 4 }) end, FILE,
      "space_to_depth", "not divisible by block_size")
    H.assert_error(function(mark) mark() nd.depth_to_space(range { 4, 2 }, { block_size = 2 }) end,
      FILE, "depth_to_space", "4-D")
    H.assert_error(function(mark) mark() nd.space_to_depth(x, { block_size = 0 }) end, FILE,
      "space_to_depth", "block_size")
  end)

  it("broadcast_axis: size-1 axes to the given sizes (MXNet names broadcast_axes too)", function()
    local xs = { 2, 1, 3, 1 }
    local x = range(xs)
    local os = { 2, 4, 3, 2 }
    local want = expect(os, xs, function(c) return { c[1], 1, c[3], 1 } end)
    check(nd.broadcast_axis(x, { axis = { 2, -1 }, size = { 4, 2 } }), os, want)
    check(nd._ref.broadcast_axis(x, { axis = { 2, 4 }, size = { 4, 2 } }), os, want)
    agrees("broadcast_axis", function(dt) return { range(xs, dt) } end,
      { axis = { 4 }, size = { 5 } })
    H.assert_error(function(mark) mark() nd.broadcast_axis(x, { axis = { 1 }, size = { 3 } }) end,
      FILE, "broadcast_axis", "only size-1 axes broadcast")
    H.assert_error(function(mark) mark() nd.broadcast_axis(x, { axis = { 2, 4 }, size = { 3 } }) end,
      FILE, "broadcast_axis", "same length")
  end)
end)

---------------------------------------------------------------- split_v2, broadcast_like
describe("split_v2", function()
  local function vals(t) return t:tolist() end
  it("cuts equal sections or at MXNet's cut points, axis 1 by default (nd.split_v2's 0)", function()
    local x = range { 4, 3 }
    local a, b = nd.split_v2(x, 2)
    assert.same({ 0, 1, 2, 3, 4, 5 }, vals(a))
    assert.same({ 6, 7, 8, 9, 10, 11 }, vals(b))
    assert.is_true(H.same_shape(a, { 2, 3 }))
    -- cut points {1, 3} on axis 2: [0, 1), [1, 3); on axis 1 {1, 1, 3}: one empty piece
    local p, q = x:split_v2({ 1 }, { axis = 2 })
    assert.is_true(H.same_shape(p, { 4, 1 }) and H.same_shape(q, { 4, 2 }))
    assert.same({ 0, 3, 6, 9 }, vals(p))
    assert.same({ 1, 2, 4, 5, 7, 8, 10, 11 }, vals(q))
    local r = { nd.split_v2(x, { 1, 1, 3 }) }
    assert.are.equal(4, #r)
    assert.is_true(H.same_shape(r[2], { 0, 3 }) and H.same_shape(r[4], { 1, 3 }))
    assert.same({ 9, 10, 11 }, vals(r[4]))
    -- {} is one piece, the whole array; squeeze_axis drops the size-1 axis
    assert.same(vals(x), vals((nd.split_v2(x, {}))))
    local s = { nd.split_v2(x, 3, { axis = 2, squeeze_axis = true }) }
    assert.is_true(H.same_shape(s[3], { 4 }))
    assert.same({ 2, 5, 8, 11 }, vals(s[3]))
  end)

  it("is the op _split_v2 (indices with the leading 0, axis default 2) on cpu and ref kernels", function()
    for _, dt in ipairs { "float32", "float64", "int32", "int64", "uint8" } do
      local x = range({ 2, 5, 3 }, dt)
      for _, o in ipairs { { indices = { 0, 2, 3 } }, { sections = 5 }, { indices = { 1, 2 }, axis = -1 },
        { indices = { 0, 1 }, axis = 1 } } do
        local c, r = { nd.split_v2(x, o) }, { nd._ref.split_v2(x, o) }
        assert.are.equal(#c, #r)
        for k = 1, #c do
          assert.same(c[k]:shape(), r[k]:shape())
          assert.same(vals(c[k]), vals(r[k]))
          assert.are.equal(dt, c[k]:dtype())
        end
      end
    end
    -- indices not starting at 0 drop the elements before the first start (MXNet's op)
    local a = nd.split_v2(range { 5 }, { indices = { 2 }, axis = 1 })
    assert.same({ 2, 3, 4 }, vals(a))
    assert.is_true(require("mx.core.lib").C.mx_op_find("_split_v2") >= 0)
  end)

  it("names the op and the problem in errors, at the caller's line", function()
    local x = range { 4, 3 }
    H.assert_error(function(mark) mark() nd.split_v2(x, 3) end, FILE, "split_v2", "not divisible")
    H.assert_error(function(mark) mark() nd.split_v2(x, { 3, 1 }) end, FILE, "split_v2",
      "non-decreasing")
    H.assert_error(function(mark) mark() nd.split_v2(x, { 5 }) end, FILE, "split_v2", "0..4")
    H.assert_error(function(mark) mark() nd.split_v2(x, { 1 }, { squeeze_axis = true }) end, FILE,
      "split_v2", "squeeze_axis")
    H.assert_error(function(mark) mark() nd.split_v2(x, 0) end, FILE, "split_v2", "positive integer")
    H.assert_error(function(mark) mark() nd.split_v2(x, "2") end, FILE, "split_v2", "indices_or_sections")
    H.assert_error(function(mark) mark() nd.split_v2(x, 2, { axes = 1 }) end, FILE, "split_v2",
      "unknown option 'axes'")
    H.assert_error(function(mark) mark() nd.split_v2(x, { sections = 0 }) end, FILE, "split_v2",
      "sections")
    H.assert_error(function(mark) mark() nd.split_v2(x, 2, { axis = 3 }) end, FILE, "split_v2", "axis")
  end)
end)

describe("inplace= on flatten / expand_dims / squeeze methods (MXNet 1.9's NDArray)", function()
  it("inplace=true returns a view sharing x's memory; the default (false) copies", function()
    local x = range { 5, 2, 3 }
    local y, z = x:flatten { inplace = true }, x:flatten()
    assert.same({ 5, 6 }, y:shape())
    y[1] = -1
    assert.same({ -1, -1, -1, -1, -1, -1 }, x[1]:tolist())
    assert.same({ 0, 1, 2, 3, 4, 5 }, z[1]:tolist())
    local e = x:expand_dims { axis = 2, inplace = true }
    assert.same({ 5, 1, 2, 3 }, e:shape())
    assert.same({ 5, 2, 3, 1 }, x:expand_dims({ axis = -1, inplace = true }):shape())
    e[2] = 7
    assert.same({ 7, 7, 7, 7, 7, 7 }, x[2]:tolist())
    local c = x:expand_dims { axis = 1, inplace = false }
    c[1] = 0
    assert.same({ 7, 7, 7, 7, 7, 7 }, x[2]:tolist())
    local o = nd.zeros { 1, 3, 1 }
    local q = o:squeeze { inplace = true }
    assert.same({ 3 }, q:shape())
    q[2] = 4
    assert.same({ 0, 4, 0 }, o:tolist())
    assert.same({ 1, 3 }, o:squeeze({ axis = -1, inplace = true }):shape())
    assert.same({ 1 }, nd.ones({ 1, 1 }):squeeze({ inplace = true }):shape())
    assert.same({ 3 }, o:squeeze({ inplace = false }):shape())
  end)
  it("records a differentiable view under autograd", function()
    local x = range { 2, 3 }
    x:attach_grad()
    mx.autograd.record(function()
      nd.mul_scalar(x:expand_dims { axis = 1, inplace = true }, { scalar = 3 }):sum():backward()
    end)
    assert.same({ 3, 3, 3, 3, 3, 3 }, x:grad():tolist())
  end)
  it("rejects bad axes, unknown options and inplace on the mx.nd functions", function()
    local x = range { 5, 2, 3 }
    H.assert_error(function(mark) mark() x:squeeze { axis = 1, inplace = true } end, FILE,
      "squeeze", "size 1")
    H.assert_error(function(mark) mark() x:expand_dims { axis = 5, inplace = true } end, FILE,
      "expand_dims", "-4..4")
    H.assert_error(function(mark) mark() x:flatten { inplace = true, foo = 1 } end, FILE,
      "flatten", "unknown option 'foo'")
    H.assert_error(function(mark) mark() x:flatten { inplace = "yes" } end, FILE, "flatten",
      "boolean")
    H.assert_error(function(mark) mark() x:flatten { inplace = true, out = x } end, FILE,
      "flatten", "out=")
    H.assert_error(function(mark) mark() nd.flatten(x, { inplace = true }) end, FILE, "flatten",
      "unknown option 'inplace'")
  end)
end)
