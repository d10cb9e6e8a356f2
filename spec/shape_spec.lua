-- spec/shape_spec.lua — the layout ops (reshape, reshape_like, transpose, swapaxes,
-- expand_dims, squeeze, flatten, concat, stack, slice, slice_axis, slice_assign,
-- slice_assign_scalar, tile, repeat, flip, cast, copy, split): values against Lua
-- index arithmetic, the byte-copy cpu kernels against the reference ones (nd._ref)
-- for every dtype size, and 1-based axis conversion (pad, moveaxis, depth_to_space,
-- split_v2 and the other MXNet 1.9 shape ops: shape_pad_spec.lua).
local mx = require("mx")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "shape_spec.lua"

local S = require("helpers.shapes")
local range, flat, coords, agrees = S.range, S.flat, S.coords, S.agrees

describe("reshape", function()
  it("is a view for plain shapes and supports 0 and -1", function()
    local x = range { 2, 3, 4 }
    local v = x:reshape { 0, -1 }
    assert.same({ 2, 12 }, v:shape())
    v[1] = 7
    assert.equal(7, x[1][2][3]:item()) -- shares storage
    local w = nd.reshape(x, { shape = { 6, 4 } })
    w[1] = -1
    assert.equal(-1, x[1][1][4]:item())
    H.assert_error(function(mark) mark() x:reshape { shape = { 5, 5 } } end, FILE, "reshape")
    H.assert_error(function(mark) mark() x:reshape { 4, 4, revers = true } end, FILE,
      "unknown option 'revers'")
  end)

  it("runs the op for MXNet's -2/-3/-4 codes and reverse", function()
    local x = range { 2, 3, 4 }
    assert.same({ 6, 4 }, x:reshape { -3, -2 }:shape())
    assert.same({ 2, 3, 2, 2 }, x:reshape { 0, 0, -4, 2, -1 }:shape())
    assert.same({ 6, 4 }, nd.reshape(x, { shape = { -1, 0 }, reverse = true }):shape())
    assert.same(x:tolist(), x:reshape { -3, -2 }:tolist())
    agrees("reshape", function(dt) return { range({ 2, 3, 4 }, dt) } end, { shape = { 4, -1 } })
  end)

  it("reports sizes that do not match", function()
    local x = range { 2, 3 }
    H.assert_error(function(mark) mark() nd.reshape(x, { shape = { 4, -3 } }) end, FILE, "reshape",
      "(2, 3)")
  end)

  it("reshape_like takes the other tensor's shape", function()
    local x = range { 2, 3 }
    local r = nd.reshape_like(x, nd.zeros { 3, 2 })
    assert.same({ 3, 2 }, r:shape())
    assert.same(x:tolist(), r:tolist())
    H.assert_error(function(mark) mark() nd.reshape_like(x, nd.zeros { 4 }) end, FILE, "reshape_like")
  end)
end)

describe("transpose / swapaxes", function()
  it("permutes with 1-based (and negative) axes; default reverses", function()
    local s = { 2, 3, 4 }
    local x = range(s)
    local v = x:tolist()
    local t = nd.transpose(x, { axes = { 2, -1, 1 } })
    assert.same({ 3, 4, 2 }, t:shape())
    local tv = t:tolist()
    for _, c in ipairs(coords(s)) do
      assert.equal(v[flat(s, c)], tv[flat({ 3, 4, 2 }, { c[2], c[3], c[1] })])
    end
    local r = x:transpose()
    assert.same({ 4, 3, 2 }, r:shape())
    assert.equal(v[flat(s, { 2, 1, 3 })], r[3][1][2]:item())
    agrees("transpose", function(dt) return { range(s, dt) } end, { axes = { 3, 1, 2 } })
  end)

  it("rejects bad permutations naming the axes", function()
    local x = range { 2, 3 }
    H.assert_error(function(mark) mark() x:transpose { axes = { 1, 1 } } end, FILE, "twice")
    H.assert_error(function(mark) mark() x:transpose { axes = { 1, 3 } } end, FILE, "axes=3")
    H.assert_error(function(mark) mark() x:transpose { axes = { 0, 1 } } end, FILE, "axes")
  end)

  it("swapaxes swaps two axes", function()
    local x = range { 2, 3, 4 }
    local y = nd.swapaxes(x, { dim1 = 1, dim2 = 3 })
    assert.same({ 4, 3, 2 }, y:shape())
    assert.equal(x[2][3][1]:item(), y[1][3][2]:item())
    agrees("swapaxes", function(dt) return { range({ 2, 3, 4 }, dt) } end, { dim1 = -1, dim2 = 2 })
  end)
end)

describe("expand_dims / squeeze / flatten", function()
  it("inserts and removes unit axes", function()
    local x = range { 2, 3 }
    assert.same({ 1, 2, 3 }, x:expand_dims { axis = 1 }:shape())
    assert.same({ 2, 3, 1 }, x:expand_dims { axis = -1 }:shape())
    assert.same({ 2, 1, 3 }, x:expand_dims { axis = 2 }:shape())
    local y = nd.zeros { 1, 2, 1, 3 }
    assert.same({ 2, 3 }, y:squeeze():shape())
    assert.same({ 2, 1, 3 }, y:squeeze { axis = 1 }:shape())
    assert.same({ 1, 2, 3 }, y:squeeze { axis = -2 }:shape())
    H.assert_error(function(mark) mark() y:squeeze { axis = 2 } end, FILE, "squeeze", "not 1")
    H.assert_error(function(mark) mark() x:expand_dims() end, FILE, "axis is required")
  end)

  it("flatten keeps the first axis (MXNet's Flatten)", function()
    assert.same({ 2, 12 }, range({ 2, 3, 4 }):flatten():shape())
    assert.same({ 5, 1 }, range({ 5 }):flatten():shape())
    agrees("flatten", function(dt) return { range({ 2, 3, 4 }, dt) } end)
  end)
end)

describe("concat / stack / split", function()
  it("concat joins along dim (default 2, MXNet's 1)", function()
    local a, b = range { 2, 2 }, nd.ones { 2, 3 }
    local c = nd.concat(a, b)
    assert.same({ 2, 5 }, c:shape())
    assert.same({ { 0, 1, 1, 1, 1 }, { 2, 3, 1, 1, 1 } }, c:totable())
    local d = nd.concat({ a, a, a }, { dim = 1 })
    assert.same({ 6, 2 }, d:shape())
    assert.equal(3, d[6][2]:item())
    agrees("concat", function(dt) return { range({ 2, 3, 2 }, dt), range({ 2, 1, 2 }, dt) } end,
      { dim = 2 })
  end)

  it("concat joins oneDNN-blocked inputs (a branch of convolutions) in a blocked layout", function()
    local lib = require("mx.core.lib")
    local ffi, C = lib.ffi, lib.C
    local function blocked(x, fmt)
      local out = ffi.new("mx_tensor*[1]")
      if C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, fmt, out) ~= 0 then return nil end
      return nd._wrap(out[0])
    end
    local a, b = range({ 2, 16, 3, 3 }), range({ 2, 32, 3, 3 }) * 0.5
    local ab = blocked(a, "nhwc")
    if not ab then return end -- a build without oneDNN
    local want = nd.concat(a, b, a)
    local bb = blocked(b, "nhwc")
    local r0 = tonumber(C.mx_layout_reorders())
    local y = nd.concat(ab, bb, ab)
    y:wait_to_read()
    assert.equal(C.MX_LAYOUT_ONEDNN, C.mx_tensor_layout(y.h))
    assert.equal(r0, tonumber(C.mx_layout_reorders()))
    assert.same(want:totable(), y:totable())
    -- mixed with a row-major input, and along another axis
    assert.same(nd.concat(a, b):totable(), nd.concat(ab, b):totable())
    assert.same(nd.concat(a, a, { dim = 4 }):totable(), nd.concat(ab, a, { dim = 4 }):totable())
  end)

  it("concat rejects mismatched inputs", function()
    H.assert_error(function(mark) mark() nd.concat(nd.ones { 2, 2 }, nd.ones { 3, 3 }) end, FILE,
      "concat", "(3, 3)", "(2, 2)")
    local i32 = nd.ones({ 2 }, { dtype = "int32" })
    H.assert_error(function(mark) mark() nd.concat(nd.ones { 2 }, i32, { dim = 1 }) end, FILE, "dtype")
  end)

  it("stack adds a new axis", function()
    local a, b = range { 2, 3 }, nd.ones { 2, 3 }
    local s = nd.stack(a, b, { axis = 2 })
    assert.same({ 2, 2, 3 }, s:shape())
    assert.same(a[2]:tolist(), s[2][1]:tolist())
    assert.same(b[1]:tolist(), s[1][2]:tolist())
    assert.same({ 2, 3, 2 }, nd.stack(a, b, { axis = -1 }):shape())
    agrees("stack", function(dt) return { range({ 2, 3 }, dt), range({ 2, 3 }, dt) } end, { axis = 1 })
  end)

  it("split cuts into equal pieces along axis (default 2)", function()
    local x = range { 2, 6 }
    local a, b, c = nd.split(x, { num_outputs = 3 })
    assert.same({ { 0, 1 }, { 6, 7 } }, a:totable())
    assert.same({ { 4, 5 }, { 10, 11 } }, c:totable())
    assert.same({ 2, 2 }, b:shape())
    local p, q = x:split { num_outputs = 2, axis = 1, squeeze_axis = true }
    assert.same({ 6 }, p:shape())
    assert.same(x[2]:tolist(), q:tolist())
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 4 }) end, FILE, "divisible")
  end)
end)

describe("split", function()
  -- the Lua composition nd.split was before it became an op (slice_axis, then squeeze)
  local function composed(x, n, axis, squeeze)
    local shape = x:shape()
    local a = axis < 0 and #shape + axis + 1 or axis
    local len, res = shape[a] / n, {}
    for i = 1, n do
      local piece = nd.slice_axis(x, { axis = a, begin = (i - 1) * len + 1, ["end"] = i * len })
      if squeeze then piece = nd.squeeze(piece, { axis = a }) end
      res[i] = piece
    end
    return res
  end
  -- element c of piece k is x at c with the axis index moved by (k - 1) * len (Lua indices)
  local function check_pieces(x, pieces, n, a, squeeze)
    local xs, xt = x:shape(), x:reshape({ -1 }):totable()
    local len = xs[a] / n
    for k = 1, n do
      local ps = pieces[k]:shape()
      local pt = pieces[k]:reshape({ -1 }):totable()
      local want = {}
      for d = 1, #xs do
        if d ~= a then want[#want + 1] = xs[d] elseif not squeeze then want[#want + 1] = len end
      end
      assert.same(want, ps)
      local full = {}
      for d = 1, #xs do full[d] = d == a and len or xs[d] end
      for i, c in ipairs(coords(full)) do
        local src = {}
        for d = 1, #xs do src[d] = d == a and c[d] + (k - 1) * len or c[d] end
        assert.equal(xt[flat(xs, src)], pt[i])
      end
    end
  end

  it("1..8 outputs along every axis, squeezed or not, match Lua indexing and the old composition", function()
    for n = 1, 8 do
      for a = 1, 3 do
        for _, squeeze in ipairs { false, true } do
          local shape = { 2, 3, 2 }
          shape[a] = squeeze and n or 2 * n
          local x = range(shape)
          local axis = (n % 2 == 0) and a - 4 or a -- negative axes too
          local pieces = { nd.split(x, { num_outputs = n, axis = axis, squeeze_axis = squeeze }) }
          assert.equal(n, #pieces)
          check_pieces(x, pieces, n, a, squeeze)
          local old = composed(x, n, axis, squeeze)
          for k = 1, n do
            assert.same(old[k]:shape(), pieces[k]:shape())
            assert.equal(0, H.maxdiff(old[k], pieces[k]))
          end
        end
      end
    end
  end)

  it("the cpu kernel agrees with the reference one for every dtype size", function()
    for _, dt in ipairs { "float32", "float64", "float16", "int8", "int32", "int64", "uint8" } do
      for _, c in ipairs { { { 4, 6, 5 }, 3, 2, false }, { { 6, 5 }, 6, 1, true },
          { { 3, 2, 8 }, 4, 3, false },
          { { 7 }, 7, 1, true }, { { 2, 0, 3 }, 2, 1, false } } do
        local shape, n, axis, sq = c[1], c[2], c[3], c[4]
        local x = H.prod(shape) == 0 and nd.zeros(shape, { dtype = dt }) or range(shape, dt)
        local o = { num_outputs = n, axis = axis, squeeze_axis = sq }
        local a, b = { nd.split(x, o) }, { nd._ref.split(x, o) }
        assert.equal(n, #a)
        assert.equal(n, #b)
        for k = 1, n do
          assert.equal(dt, a[k]:dtype())
          assert.same(b[k]:shape(), a[k]:shape())
          assert.equal(0, H.maxdiff(a[k], b[k]), dt .. " piece " .. k)
        end
      end
    end
  end)

  it("writes into out= (a list of num_outputs tensors; one tensor for one output)", function()
    local x = range { 4, 2 }
    local o1, o2 = nd.zeros { 2, 2 }, nd.zeros { 2, 2 }
    local r1, r2 = nd.split(x, { num_outputs = 2, axis = 1, out = { o1, o2 } })
    assert.equal(o1, r1)
    assert.equal(o2, r2)
    assert.same({ { 4, 5 }, { 6, 7 } }, o2:totable())
    local w = nd.zeros { 4, 2 }
    assert.equal(w, nd.split(x, { num_outputs = 1, out = w }))
    assert.same(x:totable(), w:totable())
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 2, out = { o1 } }) end, FILE,
      "split", "out=", "list of 2")
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 2, out = o1 }) end, FILE,
      "split", "out=", "a tensor")
  end)

  it("rejects bad calls with clear messages", function()
    local x = range { 2, 6 }
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 5 }) end, FILE,
      "split", "axis 2", "(2, 6)", "size 6", "not divisible by num_outputs=5")
    H.assert_error(function(mark) mark() nd.split(x) end, FILE, "split", "num_outputs")
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 0 }) end, FILE, "num_outputs", "1..64")
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 65 }) end, FILE, "num_outputs", "1..64")
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 1.5 }) end, FILE, "num_outputs")
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 2, axis = 3 }) end, FILE,
      "split", "axis")
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 3, squeeze_axis = true }) end,
      FILE, "split", "squeeze_axis", "size 1", "size 2")
    H.assert_error(function(mark) mark() nd.split(nd.array(3), { num_outputs = 1 }) end, FILE,
      "split", "0-d")
    H.assert_error(function(mark) mark() nd.split(x, { num_outputs = 2, bogus = 1 }) end, FILE,
      "unknown option 'bogus'")
    H.assert_error(function(mark) mark() nd.split("x", { num_outputs = 2 }) end, FILE,
      "split", "must be a tensor")
    H.assert_error(function(mark) mark() nd.split(x, x) end, FILE, "split", "1 tensor input")
  end)

  it("differentiates: pieces' gradients join back, unused pieces give zeros", function()
    local x = range { 2, 6 }:astype("float64")
    x:attach_grad()
    mx.autograd.record(function()
      local a, _, c = nd.split(x, { num_outputs = 3 })
      return (a * 2 + c * 3):sum()
    end):backward()
    assert.same({ { 2, 2, 0, 0, 3, 3 }, { 2, 2, 0, 0, 3, 3 } }, x:grad():totable())
    local y = range({ 3, 2 }, "float64")
    y:attach_grad()
    mx.autograd.record(function()
      local p = nd.split(y, { num_outputs = 1, axis = 1 })
      return (p * p):sum()
    end):backward()
    assert.equal(0, H.maxdiff(y:grad(), y * 2))
    mx.autograd.record(function()
      local _, q = y:split { num_outputs = 3, axis = 1, squeeze_axis = true }
      return q:sum()
    end):backward()
    assert.same({ { 0, 0 }, { 1, 1 }, { 0, 0 } }, y:grad():totable())
  end)
end)

describe("slice", function()
  it("takes 1-based inclusive boxes with negatives and shorter lists", function()
    local x = range { 4, 5 }
    local s = nd.slice(x, { begin = { 2, 2 }, ["end"] = { 3, -2 } })
    assert.same({ { 6, 7, 8 }, { 11, 12, 13 } }, s:totable())
    assert.same({ 1, 5 }, nd.slice(x, { begin = { -1 }, ["end"] = { -1 } }):shape())
    assert.same({ 2, 5 }, x:slice { begin = { 2 }, ["end"] = { 3 } }:shape())
  end)

  it("supports steps, negative steps and false for a whole axis", function()
    local x = range { 4, 5 }
    local s = nd.slice(x, { begin = { 1, false }, ["end"] = { -1, false }, step = { 2, -1 } })
    assert.same({ { 4, 3, 2, 1, 0 }, { 14, 13, 12, 11, 10 } }, s:totable())
    local r = nd.slice(x, { begin = { false, -1 }, ["end"] = { false, 1 }, step = { 1, -2 } })
    assert.same({ 4, 3 }, r:shape())
    assert.same({ 4, 2, 0 }, r[1]:tolist())
    agrees("slice", function(dt) return { range({ 4, 5, 3 }, dt) } end,
      { begin = { 2, -1, 1 }, ["end"] = { 4, 1, -1 }, step = { 1, -2, 2 } })
  end)

  it("clamps out-of-range bounds like MXNet and rejects a zero step", function()
    local x = range { 3 }
    assert.same({ 1, 2 }, nd.slice(x, { begin = { 2 }, ["end"] = { 10 } }):tolist())
    H.assert_error(function(mark) mark() nd.slice(x, { begin = { 1 }, ["end"] = { 2 }, step = { 0 } }) end,
      FILE, "slice", "step")
    H.assert_error(function(mark) mark() nd.slice(x, { begin = { 1, 1 } }) end, FILE, "slice",
      "(3,)")
  end)

  it("matches a Lua oracle of the 1-based inclusive rules on random bounds", function()
    -- indices (1-based) an axis of length n keeps for begin b, end e, step st
    local function keep(n, b, e, st)
      if b == false then b = st > 0 and 1 or n elseif b < 0 then b = n + b + 1 end
      if e == false then e = st > 0 and n or 1 elseif e < 0 then e = n + e + 1 end
      if st > 0 then b, e = math.max(b, 1), math.min(e, n) else b, e = math.min(b, n), math.max(e, 1) end
      local out = {}
      local i = b
      while (st > 0 and i <= e) or (st < 0 and i >= e) do
        if i >= 1 and i <= n then out[#out + 1] = i end
        i = i + st
      end
      return out
    end
    local r = H.rng(77)
    local function pick_bound(n)
      local u = r()
      if u < -0.8 then return false end
      local v = math.floor((r() + 1) * (n + 2)) - 1 -- about -1..2n+2
      if u < 0 then v = -v end
      if v == 0 then v = 1 end
      return v
    end
    for _ = 1, 150 do
      local shape = { 1 + math.floor((r() + 1) * 3), 1 + math.floor((r() + 1) * 3) }
      local x = range(shape)
      local b, e, st, sel = {}, {}, {}, {}
      for d = 1, 2 do
        b[d], e[d] = pick_bound(shape[d]), pick_bound(shape[d])
        st[d] = ({ 1, 1, 2, -1, -2, 3 })[1 + math.floor((r() + 1) * 3)]
        sel[d] = keep(shape[d], b[d], e[d], st[d])
      end
      local y = nd.slice(x, { begin = b, ["end"] = e, step = st })
      local what = string.format("shape %s begin %s end %s step %s", table.concat(shape, ","),
        tostring(b[1]) .. "," .. tostring(b[2]), tostring(e[1]) .. "," .. tostring(e[2]),
        table.concat(st, ","))
      assert.same({ #sel[1], #sel[2] }, y:shape(), what)
      local want = {}
      for _, i in ipairs(sel[1]) do
        for _, j in ipairs(sel[2]) do want[#want + 1] = (i - 1) * shape[2] + (j - 1) end
      end
      assert.same(want, y:tolist(), what)
      assert.same(want, nd._ref.slice(x, { begin = b, ["end"] = e, step = st }):tolist(), what)
    end
  end)

  it("rejects axis params on 0-d inputs", function()
    local s0 = nd.array(3)
    H.assert_error(function(mark) mark() s0:slice_axis { axis = 1 } end, FILE, "slice_axis", "0-d")
    H.assert_error(function(mark) mark() s0:flip { axis = 1 } end, FILE, "flip", "0-d")
    H.assert_error(function(mark) mark() s0:swapaxes() end, FILE, "swapaxes", "0-d")
    H.assert_error(function(mark) mark() s0:repeat_ { axis = -1 } end, FILE, "repeat", "0-d")
    assert.same({ 3 }, s0:flip():tolist())
  end)

  it("slice_axis takes a range of one axis", function()
    local x = range { 3, 4 }
    assert.same({ { 1, 2 }, { 5, 6 }, { 9, 10 } },
      nd.slice_axis(x, { axis = 2, begin = 2, ["end"] = 3 }):totable())
    assert.same({ { 4, 5, 6, 7 }, { 8, 9, 10, 11 } }, x:slice_axis { axis = 1, begin = -2 }:totable())
    agrees("slice_axis", function(dt) return { range({ 3, 4, 2 }, dt) } end,
      { axis = -2, begin = 2, ["end"] = -1 })
  end)

  it("slice_assign / slice_assign_scalar replace a box (broadcasting the value)", function()
    local x = range { 3, 4 }
    local y = nd.slice_assign(x, nd.array({ { 100, 200 } }), { begin = { 2, 2 }, ["end"] = { 3, 3 } })
    assert.same({ { 0, 1, 2, 3 }, { 4, 100, 200, 7 }, { 8, 100, 200, 11 } }, y:totable())
    assert.equal(5, x[2][2]:item()) -- a copy
    local iv, ibox = nd.array({ 7, 8 }, { dtype = "int64" }), { begin = { 1, 1 }, ["end"] = { 1, 2 } }
    local yi = nd.slice_assign(x, iv, ibox)
    assert.equal("float32", yi:dtype()) -- the value converts to data's dtype
    assert.same({ 7, 8, 2, 3 }, yi[1]:tolist())
    assert.equal(0, H.maxdiff(yi, nd._ref.slice_assign(x, iv, ibox)))
    local z = nd.slice_assign_scalar(x, { scalar = -1, begin = { false, 4 }, ["end"] = { false, 4 } })
    assert.same({ -1, -1, -1 }, z:slice_axis { axis = 2, begin = 4 }:tolist())
    agrees("slice_assign", function(dt) return { range({ 3, 4 }, dt), range({ 2, 1 }, dt) } end,
      { begin = { 1, 2 }, ["end"] = { 2, -1 } })
    agrees("slice_assign_scalar", function(dt) return { range({ 3, 4 }, dt) } end,
      { scalar = 3, begin = { 1, -1 }, ["end"] = { -1, 1 }, step = { 2, -2 } })
    local box = { begin = { 1 }, ["end"] = { 1 } }
    H.assert_error(function(mark) mark() nd.slice_assign(x, nd.ones { 3 }, box) end, FILE,
      "does not broadcast")
  end)
end)

describe("tile / repeat / flip", function()
  it("tile repeats the whole tensor (NumPy alignment)", function()
    local x = nd.array({ { 1, 2 }, { 3, 4 } })
    assert.same({ { 1, 2, 1, 2 }, { 3, 4, 3, 4 } }, x:tile { reps = { 1, 2 } }:totable())
    assert.same({ 2, 4, 2 }, x:tile { reps = { 2, 2, 1 } }:shape())
    assert.same({ 2, 4 }, x:tile { reps = { 2 } }:shape())
    agrees("tile", function(dt) return { range({ 2, 3 }, dt) } end, { reps = { 2, 1, 3 } })
    H.assert_error(function(mark) mark() x:tile { reps = { 2 ^ 40, 2 ^ 40 } } end, FILE, "tile",
      "too large")
    H.assert_error(function(mark) mark() x:tile { reps = { 2 ^ 62, 1 } } end, FILE, "too large")
    H.assert_error(function(mark) mark() x:repeat_ { repeats = 2 ^ 62 } end, FILE, "too large")
  end)

  it("repeat repeats each element along an axis or the flattened tensor", function()
    local x = nd.array({ { 1, 2 }, { 3, 4 } })
    assert.same({ { 1, 1, 2, 2 }, { 3, 3, 4, 4 } }, x:repeat_ { repeats = 2, axis = 2 }:totable())
    assert.same({ 1, 1, 2, 2, 3, 3, 4, 4 }, nd["repeat"](x, { repeats = 2 }):totable())
    agrees("repeat", function(dt) return { range({ 2, 3 }, dt) } end, { repeats = 3, axis = 1 })
  end)

  it("flip reverses the given axes (default all)", function()
    local x = range { 2, 3 }
    assert.same({ { 2, 1, 0 }, { 5, 4, 3 } }, x:flip { axis = 2 }:totable())
    assert.same({ { 5, 4, 3 }, { 2, 1, 0 } }, x:flip():totable())
    agrees("flip", function(dt) return { range({ 2, 3, 4 }, dt) } end, { axis = { 1, -1 } })
  end)
end)

describe("cast / copy", function()
  it("astype converts (truncating toward zero into ints) and copy copies", function()
    local x = nd.array({ -1.7, 2.5, 3 })
    local i = x:astype("int32")
    assert.equal("int32", i:dtype())
    assert.same({ -1, 2, 3 }, i:tolist())
    assert.equal("float16", nd.cast(x, { dtype = "float16" }):dtype())
    local c = x:copy()
    c[1] = 9
    assert.is_true(math.abs(x[1]:item() + 1.7) < 1e-6)
    H.assert_error(function(mark) mark() x:astype("float5") end, FILE, "unknown dtype")
    H.assert_error(function(mark) mark() nd.cast(x) end, FILE, "dtype is required")
    for _, dt in ipairs { "float64", "float16", "bfloat16", "int8", "uint8", "int64", "bool" } do
      local a, b = nd.cast(x, { dtype = dt }), nd._ref.cast(x, { dtype = dt })
      assert.equal(0, H.maxdiff(a, b), dt)
    end
  end)
end)

-- The geometry (perm, slice box, flip axes, tile/repeat alignment, concat/stack axis)
-- is resolved once by inference; the cpu views and the reference coordinate loops read
-- it independently, so they are compared on the shapes where index arithmetic slips.
describe("cpu == ref on awkward shapes", function()
  local S8 = { 2, 1, 3, 1, 2, 2, 1, 3 }

  it("0-size dims", function()
    local function empty(shape, dt) return nd.zeros(shape, { dtype = dt or "float32" }) end
    local function z(dt) return { empty({ 2, 0, 3 }, dt) } end
    agrees("transpose", z, { axes = { 3, 1, 2 } })
    agrees("swapaxes", z, { dim1 = 1, dim2 = 3 })
    agrees("slice", z, { begin = { 2, false, -1 }, ["end"] = { 1, false, 1 }, step = { -1, 1, -2 } })
    agrees("slice", function(dt) return { range({ 3, 4 }, dt) } end,
      { begin = { 3, 1 }, ["end"] = { 2, 4 } }) -- empty box: begin past end
    agrees("slice_axis", function(dt) return { range({ 3, 4 }, dt) } end,
      { axis = 2, begin = 4, ["end"] = 2 })
    agrees("flip", z, { axis = { 2, 3 } })
    agrees("tile", z, { reps = { 2, 3, 1 } })
    agrees("repeat", z, { repeats = 2, axis = 3 })
    agrees("repeat", function(dt) return { range({ 2, 3 }, dt) } end, { repeats = 0, axis = 2 })
    agrees("repeat", function(dt) return { range({ 2, 3 }, dt) } end, { repeats = 0 })
    agrees("concat", function(dt) return { empty({ 2, 0, 3 }, dt), range({ 2, 2, 3 }, dt) } end,
      { dim = 2 })
    agrees("stack", function(dt) return { empty({ 0, 3 }, dt), empty({ 0, 3 }, dt) } end,
      { axis = 2 })
    agrees("slice_assign", function(dt) return { range({ 3, 4 }, dt), range({ 1 }, dt) } end,
      { begin = { 3, 1 }, ["end"] = { 2, 4 } })
    agrees("slice_assign_scalar", z, { scalar = 5, begin = { 1 }, ["end"] = { 2 } })
    assert.same({ 0, 2, 3 }, nd._ref.transpose(z()[1], { axes = { 2, 1, 3 } }):shape())
  end)

  it("negative steps", function()
    local function x3(dt) return { range({ 4, 5, 6 }, dt) } end
    agrees("slice", x3, { step = { -1, -2, -3 } })
    agrees("slice", x3, { begin = { -2, 9, 5 }, ["end"] = { -9, 2, 1 }, step = { -1, -2, -4 } })
    agrees("slice_assign", function(dt) return { range({ 4, 5, 6 }, dt), range({ 2, 1, 2 }, dt) } end,
      { begin = { -1, false, 6 }, ["end"] = { 1, false, 1 }, step = { -2, 1, -3 } })
    agrees("slice_assign_scalar", x3, { scalar = -7, begin = { 4, 5 }, ["end"] = { 1, 1 },
      step = { -3, -1 } })
    -- the oracle itself against Lua index arithmetic
    local x = range { 4, 5, 6 }
    local y = nd._ref.slice(x, { begin = { -2, 9, 5 }, ["end"] = { -9, 2, 1 }, step = { -1, -2, -4 } })
    assert.same({ 3, 2, 2 }, y:shape())
    local want = {}
    for _, c in ipairs(coords { 3, 2, 2 }) do
      want[#want + 1] = flat({ 4, 5, 6 }, { 4 - c[1], 7 - 2 * c[2], 9 - 4 * c[3] }) - 1
    end
    assert.same(want, y:reshape({ -1 }):tolist())
  end)

  it("8-d tensors", function()
    local function x8(dt) return { range(S8, dt) } end
    agrees("transpose", x8, { axes = { 8, 3, 1, 6, 2, 7, 5, 4 } })
    agrees("transpose", x8, {})
    agrees("swapaxes", x8, { dim1 = 1, dim2 = -1 })
    agrees("slice", x8, { begin = { 2, false, 3, false, 1, -1 }, ["end"] = { 1, false, 1, false, 2, 1 },
      step = { -1, 1, -2, 1, 1, -1 } })
    agrees("slice_axis", x8, { axis = 8, begin = 2, ["end"] = 3 })
    agrees("flip", x8, { axis = { 1, 3, 8 } })
    agrees("flip", x8, {})
    agrees("tile", x8, { reps = { 1, 2, 1, 3, 1, 1, 2, 1 } })
    agrees("tile", function(dt) return { range({ 2, 3 }, dt) } end, { reps = { 2, 1, 1, 1, 1, 1, 2, 2 } })
    agrees("repeat", x8, { repeats = 3, axis = 5 })
    agrees("repeat", x8, { repeats = 2 })
    agrees("concat", function(dt) return { range(S8, dt), range(S8, dt) } end, { dim = -1 })
    agrees("stack", function(dt)
      return { range({ 2, 1, 3, 1, 2, 2, 3 }, dt), range({ 2, 1, 3, 1, 2, 2, 3 }, dt) }
    end, { axis = 4 })
    agrees("slice_assign", function(dt) return { range(S8, dt), range({ 2, 1, 1, 3 }, dt) } end,
      { begin = { 2, false, -1, false, false, 2 }, ["end"] = { 1, false, 1, false, false, 1 },
        step = { -1, 1, -1, 1, 1, -1 } })
    -- the oracle against Lua index arithmetic: out coord c reads input coord ic[p[d]] = c[d]
    local p = { 8, 3, 1, 6, 2, 7, 5, 4 }
    local y = nd._ref.transpose(range(S8), { axes = p })
    local os = {}
    for d = 1, 8 do os[d] = S8[p[d]] end
    assert.same(os, y:shape())
    local want = {}
    for _, c in ipairs(coords(os)) do
      local ic = {}
      for d = 1, 8 do ic[p[d]] = c[d] end
      want[#want + 1] = flat(S8, ic) - 1
    end
    assert.same(want, y:reshape({ -1 }):tolist())
  end)

  it("slice_assign broadcasts value to the box, also in place and across dtypes", function()
    local box = { begin = { 1, -1, 2 }, ["end"] = { 3, 1, 4 }, step = { 2, -1, 1 } }
    for _, vs in ipairs { { 4, 3 }, { 1, 3 }, { 4, 1 }, { 3 }, { 1 }, { 2, 1, 1 }, { 2, 4, 3 } } do
      agrees("slice_assign", function(dt) return { range({ 3, 4, 5 }, dt), range(vs, dt) } end, box)
      local a, b = range { 3, 4, 5 }, range { 3, 4, 5 }
      nd.slice_assign(a, range(vs, "float64"), { begin = box.begin, ["end"] = box["end"],
        step = box.step, out = a })
      nd._ref.slice_assign(b, range(vs, "float64"), { begin = box.begin, ["end"] = box["end"],
        step = box.step, out = b })
      assert.equal(0, H.maxdiff(a, b), table.concat(vs, "x"))
      assert.equal(0, H.maxdiff(a, nd._ref.slice_assign(range { 3, 4, 5 }, range(vs), box)))
    end
    local v = nd._ref.slice_assign(range { 2, 3 }, nd.array({ 10, 20 }),
      { begin = { false, 3 }, ["end"] = { false, 1 }, step = { 1, -2 } })
    assert.same({ { 20, 1, 10 }, { 20, 4, 10 } }, v:totable())
  end)
end)

-- sizes that do not fit int64 are errors, never a signed overflow (UBSan)
describe("shape arithmetic beyond int64", function()
  local err_at = require("helpers.err_at")("shape_spec.lua")
  it("reshape to {2^32, 2^32} is an error naming reshape; a zero dim still works", function()
    local x = mx.nd.zeros({ 4 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = x:reshape({ 2 ^ 32, 2 ^ 32 }) return r end, line)
    assert.is_truthy(msg:find("reshape", 1, true) and msg:find("int64", 1, true), msg)
    local e = mx.nd.zeros({ 1, 1, 0 })
    assert.are.same({ 2 ^ 40, 2 ^ 40, 0 }, e:reshape({ 2 ^ 40, 2 ^ 40, 0 }):shape())
  end)
  it("zeros {2^32, 2^32} and an axis of 2^62 are clear errors", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = mx.nd.zeros({ 2 ^ 32, 2 ^ 32 }) return r end, line)
    assert.is_truthy(msg:find("zeros", 1, true) and msg:find("too large", 1, true), msg)
    local ok, m = pcall(mx.nd.softmax, mx.nd.zeros({ 2 }), { axis = 2 ^ 62 })
    assert.is_false(ok)
    assert.is_truthy(tostring(m):find("axis=4611686018427387905", 1, true), tostring(m))
  end)
end)

-- a 0 in tile's reps is an error, as in MXNet (NumPy would return an empty result)
describe("tile with a 0 rep", function()
  it("is an error naming tile and the rep", function()
    local x = nd.array({ { 1, 2 }, { 3, 4 } })
    H.assert_error(function(mark) mark() x:tile { reps = { 0, 2 } } end, FILE, "tile",
      "reps entries must be >= 1, got 0")
    H.assert_error(function(mark) mark() nd._ref.tile(x, { reps = { 2, 0 } }) end, FILE, "tile",
      "reps[2]")
    assert.same({ 2, 4 }, x:tile { reps = { 1, 2 } }:shape())
  end)
end)

-- MXNet 1.9's shape_array / size_array: the shape as int64 values (mx.sym's forms and
-- their JSON: spec/symbol_index_spec.lua)
describe("shape_array, size_array", function()
  it("give the shape and the size as int64, for every dtype, 0-d and empty inputs", function()
    for _, dt in ipairs { "float32", "float16", "int8", "bool", "int64" } do
      local x = nd.zeros({ 2, 0, 3 }, { dtype = dt })
      local s, n = nd.shape_array(x), x:size_array()
      assert.equal("int64", s:dtype())
      assert.same({ 2, 0, 3 }, s:tolist())
      assert.same({ 0 }, n:tolist())
      assert.same({ 1 }, n:shape())
    end
    local z = nd.array(5)
    assert.same({ 0 }, nd.shape_array(z):shape())
    assert.same({ 1 }, nd.size_array(z):tolist())
    assert.same({ 4, 1, 2 }, nd._ref.shape_array(nd.ones({ 4, 1, 2 })):tolist())
    assert.same({ 8 }, nd._ref.size_array(nd.ones({ 4, 1, 2 })):tolist())
  end)

  it("take no gradient: the input's values are never read", function()
    local x = nd.ones({ 2, 3 })
    x:attach_grad()
    local y
    mx.autograd.record(function() y = nd.shape_array(x) end)
    assert.same({ 2, 3 }, y:tolist())
  end)
end)
