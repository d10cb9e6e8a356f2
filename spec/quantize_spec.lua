-- spec/quantize_spec.lua — the quantize family (core/ops/quantize.lua): quantize_v2,
-- dequantize and requantize against their formulas, the quantized layers against float
-- layers of the dequantized values and the oneDNN int8 kernels against the reference
-- kernels; mx.contrib.quantization (quantize_net / quantize_model: the graph it makes,
-- calibration, outputs near float32, export and import). A real network on real photos
-- is spec/quantize_zoo_spec.lua (#slow).
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn
local Q = mx.contrib.quantization
local calib = require("mx.contrib.quantization.calib")

local function f32(t) return t:astype("float32") end
local function maxdiff(a, b) return nd.max(nd.abs(nd.sub(f32(a), f32(b)))):item() end
-- fraction of elements that differ
local function frac_diff(a, b)
  return nd.mean(nd.not_equal(f32(a), f32(b))):item()
end
local function q(x, dt, lo, hi)
  return nd.quantize_v2(x, { out_type = dt, min_calib_range = lo, max_calib_range = hi })
end
local function deq(v, mn, mx_) return nd.dequantize(v, mn, mx_) end
local function i8_weight(shape) return nd.round(nd.random.uniform(-127, 127, shape)):astype("int8") end

describe("quantize_v2 / dequantize / requantize", function()
  it("quantize_v2 maps x to round(x * 127 / R) (int8) or round(x * 255 / max) (uint8)", function()
    local x = nd.array({ -2, -1, -0.01, 0, 0.5, 0.9, 2, 5 })
    local v, mn, mx_ = q(x, "int8", -2, 2)
    assert.equal("int8", v:dtype())
    assert.same({ -127, -64, -1, 0, 32, 57, 127, 127 }, v:tolist()) -- saturates at 127
    assert.same({ -2, 2 }, { mn:item(), mx_:item() })
    local u, umin, umax = q(x, "uint8", 0, 2)
    assert.equal("uint8", u:dtype())
    assert.same({ 0, 0, 0, 0, 64, 115, 255, 255 }, u:tolist())
    assert.same({ 0, 2 }, { umin:item(), umax:item() })
    -- out_type auto: uint8 for a non-negative range
    local a = nd.quantize_v2(x, { out_type = "auto", min_calib_range = 0, max_calib_range = 1 })
    assert.equal("uint8", a:dtype())
  end)

  it("quantize_v2 without a calibrated range takes the data's, and the CPU kernel equals the reference",
      function()
    local x = nd.random.normal(0, 3, { 5000 })
    local v, mn, mx_ = nd.quantize_v2(x, { out_type = "int8" })
    local rv, rmn, rmx = nd._ref.quantize_v2(x, { out_type = "int8" })
    assert.equal(0, maxdiff(v, rv))
    -- int8 ranges are symmetric: (-R, R), R the larger magnitude
    local R0 = math.max(-nd.min(x):item(), nd.max(x):item())
    assert.equal(-R0, mn:item())
    assert.equal(R0, mx_:item())
    assert.equal(rmn:item(), mn:item())
    assert.equal(rmx:item(), mx_:item())
    -- round trip within half a unit
    local R = math.max(-mn:item(), mx_:item())
    assert.is_true(maxdiff(deq(v, mn, mx_), x) <= R / 127 / 2 + 1e-6)
    local d, dr = nd.dequantize(v, mn, mx_), nd._ref.dequantize(v, mn, mx_)
    assert.is_true(maxdiff(d, dr) <= 2e-7 * R) -- float32 against double arithmetic
  end)

  it("requantize turns int32 data with its range into int8 in the calibrated range", function()
    local acc = nd.array({ -2147483647, -1000000000, 0, 536870912, 2147483647 }, { dtype = "int32" })
    local lo, hi = nd.array({ -4 }), nd.array({ 4 })
    local v, mn, mx_ = nd.requantize(acc, lo, hi, { min_calib_range = -2, max_calib_range = 2 })
    assert.equal("int8", v:dtype())
    -- real values -4, -1.8626, 0, 1, 4 in (-2, 2): -127 (saturated), -118, 0, 64, 127
    assert.same({ -127, -118, 0, 64, 127 }, v:tolist())
    assert.same({ -2, 2 }, { mn:item(), mx_:item() })
    local v2, mn2, mx2 = nd.requantize(acc, lo, hi) -- the data's own range: (-4, 4)
    assert.same({ -127, -59, 0, 32, 127 }, v2:tolist())
    assert.same({ -4, 4 }, { mn2:item(), mx2:item() })
  end)

  it("names the op in its errors", function()
    assert.has_error(function() nd.quantize_v2(nd.array({ 1 }), { out_type = "int4" }) end)
    local ok, err = pcall(nd.dequantize, nd.array({ 1 }, { dtype = "int8" }), nd.array({ 1, 2 }),
        nd.array({ 1 }))
    assert.is_false(ok)
    assert.matches("dequantize", err)
  end)
end)

describe("quantized layers", function()
  mx.random.seed(5)
  local x = nd.random.normal(0, 1, { 2, 8, 9, 9 })
  local xq, xmin, xmax = q(nd.relu(x), "uint8", 0, 3)
  local xs, smin, smax = q(x, "int8", -3, 3)
  local sum, sum_min, sum_max = q(nd.random.normal(0, 2, { 2, 16, 9, 9 }), "int8", -5, 5)
  local w = i8_weight({ 16, 8, 3, 3 })
  local ws = nd.random.uniform(0.001, 0.01, { 16 })
  local b = nd.random.normal(0, 1, { 16 })
  local conv = { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = 16 }
  local function opts(t)
    local r = {}
    for k, v in pairs(conv) do r[k] = v end
    for k, v in pairs(t or {}) do r[k] = v end
    return r
  end
  local wf = nd.mul(f32(w), nd.reshape(ws, { 16, 1, 1, 1 })) -- the real weight

  it("quantized_conv (float32 out) equals the float convolution of the dequantized values", function()
    local y = nd.quantized_conv(xq, xmin, xmax, w, ws, b, opts({ out_type = "float32" }))
    assert.equal("float32", y:dtype())
    local want = nd.convolution(deq(xq, xmin, xmax), wf, b, conv)
    assert.is_true(maxdiff(y, want) < 1e-4 * nd.max(nd.abs(want)):item())
    local r = nd._ref.quantized_conv(xq, xmin, xmax, w, ws, b, opts({ out_type = "float32" }))
    assert.is_true(maxdiff(y, r) < 1e-5 * nd.max(nd.abs(want)):item())
  end)

  it("quantized_conv sees weights (its kernel keeps a reordered copy) and bias rewritten in place", function()
    local w2, b2 = nd.array(w), nd.array(b)
    local o = opts({ out_type = "float32" })
    local y1 = nd.quantized_conv(xq, xmin, xmax, w2, ws, b2, o)
    nd.negative(w2, { out = w2 })
    nd.add(b2, 1, { out = b2 })
    local y2 = nd.quantized_conv(xq, xmin, xmax, w2, ws, b2, o)
    local r2 = nd._ref.quantized_conv(xq, xmin, xmax, w2, ws, b2, o)
    local scale = nd.max(nd.abs(r2)):item()
    assert.is_true(maxdiff(y2, r2) < 1e-5 * scale)
    assert.is_true(maxdiff(y1, y2) > 0.1 * scale)
  end)

  it("quantized_conv writes int8/uint8 in the calibrated range, relu and the residual fused", function()
    for _, ot in ipairs({ "int8", "uint8" }) do
      for _, act in ipairs({ "none", "relu" }) do
        local o = opts({ out_type = ot, act_type = act, min_calib_range = -12, max_calib_range = 12 })
        local y, mn, mx_ = nd.quantized_conv(xq, xmin, xmax, w, ws, b, o)
        assert.equal(ot, y:dtype())
        local r, rmn, rmx = nd._ref.quantized_conv(xq, xmin, xmax, w, ws, b, o)
        assert.is_true(maxdiff(y, r) <= 1, ot .. " " .. act) -- rounding of ties
        assert.equal(rmn:item(), mn:item())
        assert.equal(rmx:item(), mx_:item())
        -- the real values against float
        local want = nd.convolution(deq(xq, xmin, xmax), wf, b, conv)
        if act == "relu" or ot == "uint8" then want = nd.relu(want) end
        want = nd.clip(want, { a_min = -12, a_max = 12 })
        -- half a unit, one where oneDNN saturates int8 at -128 (the reference at -127)
        local unit = ot == "uint8" and 12 / 255 or 12 / 127
        assert.is_true(maxdiff(deq(y, mn, mx_), want) <= unit + 1e-4, ot .. " " .. act)
        local inside = nd.lesser(nd.abs(want), 11)
        assert.is_true(nd.max(nd.mul(nd.abs(nd.sub(deq(y, mn, mx_), want)),
            inside)):item() <= unit * 0.5 + 1e-4)
      end
    end
    -- the residual: relu(conv) + sum, then relu, into int8 and uint8
    for _, ot in ipairs({ "int8", "uint8" }) do
      local o = opts({ out_type = ot, act_type = "relu", with_sum = true, postsum_act = "relu",
        min_calib_range = -15, max_calib_range = 15 })
      local y, mn, mx_ = nd.quantized_conv(xq, xmin, xmax, w, ws, b, sum, sum_min, sum_max, o)
      local r = nd._ref.quantized_conv(xq, xmin, xmax, w, ws, b, sum, sum_min, sum_max, o)
      assert.is_true(maxdiff(y, r) <= 1)
      assert.is_true(frac_diff(y, r) < 0.02)
      local want = nd.relu(nd.add(nd.relu(nd.convolution(deq(xq, xmin, xmax), wf, b, conv)), deq(sum,
          sum_min, sum_max)))
      local unit = ot == "uint8" and 15 / 255 or 15 / 127
      assert.is_true(maxdiff(deq(y, mn, mx_), nd.clip(want, { a_min = -15, a_max = 15 })) <= unit + 1e-4)
    end
  end)

  it("quantized_conv with a float32 output and residual runs (the reference kernel)", function()
    local fsum = nd.random.normal(0, 2, { 2, 16, 9, 9 })
    local o = opts({ out_type = "float32", with_sum = true })
    local y = nd.quantized_conv(xq, xmin, xmax, w, ws, b, fsum, nd.array({ 0 }), nd.array({ 0 }), o)
    local want = nd.add(nd.convolution(deq(xq, xmin, xmax), wf, b, conv), fsum)
    assert.is_true(maxdiff(y, want) < 1e-4 * nd.max(nd.abs(want)):item())
    -- a quantized output takes an int8/uint8 residual only
    assert.has_error(function()
      nd.quantized_conv(xq, xmin, xmax, w, ws, b, fsum, nd.array({ 0 }), nd.array({ 0 }),
        opts({ out_type = "int8", with_sum = true, min_calib_range = -1, max_calib_range = 1 }))
    end)
  end)

  it("quantized_conv: int8 data, grouped and strided, and a chain of them keeps its layout", function()
    local wg = i8_weight({ 16, 2, 3, 3 })
    local o = opts({ num_group = 4, stride = { 2, 2 }, out_type = "int8", min_calib_range = -9,
        max_calib_range = 9 })
    local y = nd.quantized_conv(xs, smin, smax, wg, ws, b, o)
    local r = nd._ref.quantized_conv(xs, smin, smax, wg, ws, b, o)
    assert.same({ 2, 16, 5, 5 }, y:shape())
    assert.is_true(maxdiff(y, r) <= 1)
    local wd = i8_weight({ 8, 1, 3, 3 })
    local od = opts({ no_bias = true, num_filter = 8, num_group = 8, out_type = "uint8",
        min_calib_range = 0, max_calib_range = 6 })
    local y1, m1, M1 = nd.quantized_conv(xq, xmin, xmax, wd, nd.slice_axis(ws, { axis = 1, begin = 1,
        ["end"] = 8 }), od)
    local y2 = nd.quantized_conv(y1, m1, M1, w, ws, b, opts({ out_type = "float32" }))
    local r1, rm1, rM1 = nd._ref.quantized_conv(xq, xmin, xmax, wd, nd.slice_axis(ws, { axis = 1,
        begin = 1, ["end"] = 8 }), od)
    local r2 = nd._ref.quantized_conv(r1, rm1, rM1, w, ws, b, opts({ out_type = "float32" }))
    assert.is_true(maxdiff(y1, r1) <= 1)
    assert.is_true(maxdiff(y2, r2) < 0.05 * nd.max(nd.abs(r2)):item())
  end)

  it("quantized_fully_connected equals fully_connected of the dequantized values", function()
    local xf, fmin, fmax = nd.quantize_v2(nd.random.normal(0, 1, { 4, 100 }), { out_type = "int8" })
    local w2 = i8_weight({ 10, 100 })
    local s2, b2 = nd.random.uniform(0.001, 0.01, { 10 }), nd.random.normal(0, 1, { 10 })
    local y = nd.quantized_fully_connected(xf, fmin, fmax, w2, s2, b2, { num_hidden = 10,
        out_type = "float32" })
    local want = nd.fully_connected(deq(xf, fmin, fmax), nd.mul(f32(w2), nd.reshape(s2, { 10, 1 })), b2,
        { num_hidden = 10 })
    assert.is_true(maxdiff(y, want) < 1e-4 * nd.max(nd.abs(want)):item())
    local o = { num_hidden = 10, act_type = "relu", out_type = "uint8", min_calib_range = 0,
        max_calib_range = 4 }
    local yq = nd.quantized_fully_connected(xf, fmin, fmax, w2, s2, b2, o)
    local r = nd._ref.quantized_fully_connected(xf, fmin, fmax, w2, s2, b2, o)
    assert.equal("uint8", yq:dtype())
    assert.is_true(maxdiff(yq, r) <= 1)
  end)

  it("quantized_pooling, quantized_act, quantized_flatten pass the range and match the float ops", function()
    local y, mn, mx_ = nd.quantized_pooling(xs, smin, smax, { kernel = { 3, 3 }, stride = { 2, 2 },
        pool_type = "max" })
    assert.same({ -3, 3 }, { mn:item(), mx_:item() })
    assert.equal(0, maxdiff(deq(y, mn, mx_), nd.pooling(deq(xs, smin, smax), { kernel = { 3, 3 },
        stride = { 2, 2 }, pool_type = "max" })))
    local ya, amn, amx = nd.quantized_pooling(xq, xmin, xmax, { kernel = { 2, 2 }, stride = { 2, 2 },
        pool_type = "avg" })
    local fa = nd.pooling(deq(xq, xmin, xmax), { kernel = { 2, 2 }, stride = { 2, 2 }, pool_type = "avg" })
    assert.is_true(maxdiff(deq(ya, amn, amx), fa) <= 3 / 255 / 2 + 1e-6)
    local r = nd.quantized_act(xs, smin, smax, { act_type = "relu" })
    assert.equal(0, maxdiff(deq(r, smin, smax), nd.relu(deq(xs, smin, smax))))
    local fl = nd.quantized_flatten(xs, smin, smax)
    assert.same({ 2, 8 * 81 }, fl:shape())
  end)

  it("quantized_pooling of quantized_conv's channel-last output keeps its layout, equals the reference",
    function()
    local C = require("mx.core.lib").C
    local wd = i8_weight({ 16, 8, 3, 3 })
    for _, ot in ipairs({ "uint8", "int8" }) do
      local lo = ot == "uint8" and 0 or -6
      local y, mn, mx_ = nd.quantized_conv(xq, xmin, xmax, wd, ws, b, opts({ out_type = ot,
        act_type = ot == "uint8" and "relu" or "none", min_calib_range = lo, max_calib_range = 6 }))
      local laid = C.mx_tensor_layout(y.h)
      local plain = y:copy()
      for _, pp in ipairs({
        { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 }, pool_type = "max" },
        { kernel = { 3, 3 }, stride = { 2, 2 }, pool_type = "max", pooling_convention = "full" },
        { kernel = { 2, 2 }, stride = { 2, 2 }, pool_type = "avg" },
        { kernel = { 3, 3 }, stride = { 1, 1 }, pad = { 1, 1 }, pool_type = "avg",
          count_include_pad = false },
        { global_pool = true, kernel = { 1, 1 }, pool_type = "avg" },
      }) do
        local what = ot .. " " .. pp.pool_type .. (pp.global_pool and " global" or "")
        local before = tonumber(C.mx_layout_reorders())
        local p, pmn, pmx = nd.quantized_pooling(y, mn, mx_, pp)
        p:wait_to_read()
        if laid ~= 0 then
          assert.equal(before, tonumber(C.mx_layout_reorders()), what .. ": no reorder")
          assert.equal(laid, C.mx_tensor_layout(p.h), what .. ": the data's layout")
        end
        local r = nd._ref.quantized_pooling(plain, mn, mx_, pp)
        assert.same(r:shape(), p:shape())
        -- max exactly; averages rounded halves to even against halves away from zero
        assert.is_true(maxdiff(p, r) <= (pp.pool_type == "max" and 0 or 1), what)
        assert.equal(mn:item(), pmn:item())
        assert.equal(mx_:item(), pmx:item())
        local fa = nd.pooling(deq(plain, mn, mx_), pp)
        local unit = ot == "uint8" and 6 / 255 or 6 / 127
        assert.is_true(maxdiff(deq(p, pmn, pmx), fa) <= unit / 2 + 1e-5, what)
      end
    end
  end)

  it("quantized_elemwise_add and quantized_concat rescale to a common range", function()
    local a, amn, amx = q(nd.random.normal(0, 1, { 3, 4 }), "int8", -2, 2)
    local c, cmn, cmx = q(nd.random.normal(0, 1, { 3, 4 }), "int8", -4, 4)
    local s = nd.quantized_elemwise_add(a, c, amn, amx, cmn, cmx, { out_type = "float32" })
    assert.is_true(maxdiff(s, nd.add(deq(a, amn, amx), deq(c, cmn, cmx))) < 1e-5)
    local si, smn2, smx2 = nd.quantized_elemwise_add(a, c, amn, amx, cmn, cmx,
      { min_calib_range = -6, max_calib_range = 6, out_type = "int8" })
    assert.is_true(maxdiff(deq(si, smn2, smx2), s) <= 6 / 127 / 2 + 1e-5)
    local j, jmn, jmx = nd.quantized_concat(a, c, amn, amx, cmn, cmx, { num_args = 2, dim = 2 })
    assert.same({ 3, 8 }, j:shape())
    assert.same({ -4, 4 }, { jmn:item(), jmx:item() })
    local want = nd.concat(deq(a, amn, amx), deq(c, cmn, cmx), { dim = 2 })
    assert.is_true(maxdiff(deq(j, jmn, jmx), want) <= 4 / 127 / 2 + 1e-5)
  end)
end)

describe("mx.contrib.quantization", function()
  local function net_and_data()
    mx.random.seed(7)
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(8, 3, { padding = 1, in_channels = 3 }), nn.BatchNorm(), nn.Activation("relu"),
      nn.MaxPool2D(2), nn.Conv2D(8, 3, { padding = 1 }), nn.Activation("relu"),
      nn.Flatten(), nn.Dense(16, { activation = "relu" }), nn.Dense(5))
    net:initialize(mx.init.Xavier())
    local x = nd.random.uniform(-1, 1, { 8, 3, 12, 12 })
    -- BatchNorm with non-trivial statistics
    mx.autograd.record(function() return net(x) end)
    net:hybridize()
    local y = mx.autograd.predict_mode(function() return net(x) end)
    return net, x, y
  end
  local X = require("mx.gluon._export")
  local function sym_of(block)
    return rawget(block, "_sym") or block._sym or (X.symbol_of(block, 1, false, "spec"))
  end
  local function ops_of(block)
    local s = sym_of(block)
    local r = {}
    for _, n in ipairs(s:_topo()) do if n.op then r[#r + 1] = n.op.name end end
    return r
  end
  local function count(list, name)
    local c = 0
    for _, v in ipairs(list) do if v == name then c = c + 1 end end
    return c
  end

  it("quantize_net fuses conv+bn+relu, keeps int8 through pooling and dense, and stays near float32",
      function()
    local net, x, y = net_and_data()
    local scale = nd.max(nd.abs(y)):item()
    local ranges = {}
    for _, mode in ipairs({ "naive", "entropy" }) do
      local qn = Q.quantize_net(net, { calib_data = { x }, calib_mode = mode })
      local ops = ops_of(qn)
      assert.equal(2, count(ops, "quantized_conv"), mode)
      assert.equal(2, count(ops, "quantized_fully_connected"), mode)
      assert.equal(1, count(ops, "quantized_pooling"), mode)
      assert.equal(1, count(ops, "quantized_flatten"), mode)
      assert.equal(0, count(ops, "batch_norm"), mode)
      assert.equal(1, count(ops, "quantize_v2"), mode) -- int8 from the data to the last dense
      assert.equal(0, count(ops, "dequantize"), mode) -- the last dense writes float32
      local yq = qn(x)
      assert.equal("float32", yq:dtype())
      assert.same(y:shape(), yq:shape())
      local err = maxdiff(yq, y) / scale
      -- entropy clips the tails of 8 random images' activations: a coarser result here
      -- (a real network on real photos: spec/quantize_zoo_spec.lua)
      assert.is_true(err < (mode == "naive" and 0.05 or 0.5), mode .. " relative error " .. err)
      local agree = nd.mean(nd.equal(nd.argmax(yq, { axis = 2 }), nd.argmax(y, { axis = 2 }))):item()
      assert.is_true(agree >= (mode == "naive" and 0.875 or 0.5), mode .. " agreement " .. agree)
      ranges[mode] = {}
      for _, n in ipairs(sym_of(qn):_topo()) do
        if n.op and n.opts and n.opts.max_calib_range then ranges[mode][n.name] = n.opts.max_calib_range end
      end
    end
    -- entropy's thresholds are at most the ranges seen
    local k = 0
    for name, r in pairs(ranges.naive) do
      assert.is_true(ranges.entropy[name] <= r * (1 + 1e-6) + 1e-6, name)
      k = k + 1
    end
    assert.is_true(k >= 3)
  end)

  it("calib_mode none finds ranges at run time; exclude_layers / exclude_operators keep float layers",
      function()
    local net, x, y = net_and_data()
    local qn = Q.quantize_net(net, { calib_mode = "none", data_shapes = { { 8, 3, 12, 12 } } })
    local yq = qn(x)
    assert.is_true(maxdiff(yq, y) / nd.max(nd.abs(y)):item() < 0.05)
    local first_dense
    for _, n in ipairs(sym_of(net):_topo()) do
      if n.op and n.op.name == "fully_connected" then first_dense = first_dense or n.name end
    end
    local q2 = Q.quantize_net(net, { calib_data = { x }, calib_mode = "naive",
        exclude_layers = { first_dense } })
    local ops = ops_of(q2)
    assert.equal(1, count(ops, "quantized_fully_connected"))
    assert.equal(1, count(ops, "fully_connected"))
    assert.equal(1, count(ops, "dequantize"))
    local q3 = Q.quantize_net(net, { calib_data = { x }, calib_mode = "naive",
        exclude_operators = { "Convolution" } })
    ops = ops_of(q3)
    assert.equal(0, count(ops, "quantized_conv"))
    assert.equal(2, count(ops, "convolution"))
    assert.is_true(maxdiff(q3(x), y) / nd.max(nd.abs(y)):item() < 0.05)
  end)

  it("quantize_model quantizes a Symbol with its params; the graph exports and imports", function()
    local net, x = net_and_data()
    local qn = Q.quantize_net(net, { calib_data = { x }, calib_mode = "naive", num_calib_batches = 1 })
    qn:hybridize()
    local yq = qn(x)
    local dir = os.tmpname()
    os.remove(dir)
    local sp, pp = qn:export(dir, 0, { luamx_ops = true })
    local back = mx.gluon.SymbolBlock.imports(sp, { "data" }, pp)
    assert.equal(0, maxdiff(back(x), yq))
    -- the C inference runtime (mx_runtime.h, no Lua) runs the files to the same outputs
    local lib = require("mx.core.lib")
    local build = lib.libpath:match("^(.*)/lib/mx/[^/]+$") or os.getenv("MX_BUILD_DIR") or "build"
    local iop = dir .. "-io.params"
    nd.save(iop, { data = x, out0 = yq })
    local rc, out = require("helpers.sh")(string.format("'%s/rt_check' run '%s' '%s' '%s'", build,
      sp, pp, iop))
    assert.equal(0, rc, out)
    for lvl = 0, 2 do assert.truthy(out:find("ok run opt_level=" .. lvl, 1, true), out) end
    os.remove(sp)
    os.remove(pp)
    os.remove(iop)
    -- quantize_model on the float net's symbol and arrays: the same graph
    local fs, arrays = X.symbol_of(net, 1, false, "spec")
    local args, auxs = {}, {}
    for k, v in pairs(arrays) do
      local kind, name = k:match("^(%a+):(.*)$")
      if kind == "aux" then auxs[name] = v else args[name] = v end
    end
    local qs, qa = Q.quantize_model(fs, args, auxs, { calib_data = { x }, calib_mode = "naive" })
    assert.is_true(mx.sym.is_symbol(qs))
    assert.same(ops_of(qn), ops_of({ _sym = qs }))
    local nq = 0
    for k, v in pairs(qa) do
      if k:find("weight_quantized$") then
        nq = nq + 1
        assert.equal("int8", v:dtype(), k)
      end
    end
    assert.equal(4, nq) -- two convolutions' and two denses' weights
  end)

  it("fuses ReLU6 (clip 0..6) into the convolution and pads int8 data as it is", function()
    mx.random.seed(9)
    local U = require("mx.gluon.model_zoo.vision._util")
    local Pad = mx.gluon.HybridBlock:extend("SpecPad")
    function Pad.forward(_, x)
      return nd.pad(x, { mode = "constant", pad_width = { 0, 0, 0, 0, 0, 1, 0, 1 } })
    end
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(8, 3, { padding = 1, in_channels = 3, use_bias = false }), nn.BatchNorm(), U.ReLU6(),
      Pad(), nn.Conv2D(8, 3, { strides = 2, groups = 8, use_bias = false }), nn.BatchNorm(), U.ReLU6(),
      nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(4))
    net:initialize(mx.init.Xavier())
    local x = nd.random.uniform(-1, 1, { 4, 3, 10, 10 })
    mx.autograd.record(function() return net(x) end)
    net:hybridize()
    local y = net(x)
    local qn = Q.quantize_net(net, { calib_data = { x }, calib_mode = "naive" })
    local ops = ops_of(qn)
    assert.equal(2, count(ops, "quantized_conv"))
    assert.equal(0, count(ops, "clip"))
    assert.equal(1, count(ops, "pad"))
    assert.equal(0, count(ops, "dequantize"))
    for _, n in ipairs(sym_of(qn):_topo()) do
      if n.op and n.op.name == "quantized_conv" then
        assert.equal("relu", n.opts.act_type)
        assert.is_true(n.opts.max_calib_range <= 6)
      end
    end
    assert.is_true(maxdiff(qn(x), y) / nd.max(nd.abs(y)):item() < 0.05)
    -- without calibration the convolutions write float32: the cap stays as a clip
    local q0 = Q.quantize_net(net, { calib_mode = "none" })
    assert.equal(2, count(ops_of(q0), "clip"))
    assert.is_true(maxdiff(q0(x), y) / nd.max(nd.abs(y)):item() < 0.05)
  end)

  it("bias_correction takes the weights' rounding shift out of the biases (dW . E[x])", function()
    mx.random.seed(3)
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(6, 3, { padding = 1, in_channels = 3 }), nn.Activation("relu"),
      nn.Conv2D(6, 3, { padding = 1, groups = 6, in_channels = 6 }), nn.Activation("relu"),
      nn.Flatten(), nn.Dense(4, { in_units = 6 * 8 * 8 }))
    net:initialize(mx.init.Xavier())
    net:hybridize()
    local x = nd.random.uniform(0, 1, { 16, 3, 8, 8 }) -- inputs of non-zero mean
    local y = net(x)
    local plain = Q.quantize_net(net, { calib_data = { x }, calib_mode = "naive" })
    local bc = Q.quantize_net(net, { calib_data = { x }, calib_mode = "naive", bias_correction = true })
    -- the first convolution's bias, element by element: b - sum over (c, taps) of
    -- (q * scale - w) * (the data's mean of channel c)
    local P = bc:collect_params()
    local qw = P:get("0.weight_quantized"):data():astype("float32"):totable()
    local sc = P:get("0.weight_wscale"):data():tolist()
    local w, b = net[1].weight:data():totable(), net[1].bias:data():tolist()
    local xm = nd.mean(x, { axis = { 1, 3, 4 } }):tolist()
    local got = P:get("convolution0_bias_quantized"):data():tolist()
    for o = 1, 6 do
      local shift = 0
      for c = 1, 3 do
        for i = 1, 3 do for j = 1, 3 do
          shift = shift + (qw[o][c][i][j] * sc[o] - w[o][c][i][j]) * xm[c]
        end end
      end
      assert.near(b[o] - shift, got[o], 1e-6)
    end
    -- the mean output shift (over the batch, per output) shrinks
    local function shift_of(qn) return nd.mean(nd.abs(nd.mean(nd.sub(qn(x), y), { axis = 1 }))):item() end
    local before, after = shift_of(plain), shift_of(bc)
    assert.is_true(after < 0.5 * before, string.format("mean shift %.3g -> %.3g", before, after))
    assert.matches("bias_correction needs calib_data", select(2, pcall(Q.quantize_net, net,
      { bias_correction = true })))
  end)

  it("rejects bad options with messages naming them", function()
    local net, x = net_and_data()
    local function msg(f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      return err
    end
    assert.matches("quantized_dtype", msg(function() Q.quantize_net(net, { quantized_dtype = "int4" }) end))
    assert.matches("calib_mode", msg(function() Q.quantize_net(net, { calib_mode = "kl" }) end))
    assert.matches("needs calib_data", msg(function() Q.quantize_net(net, { calib_mode = "naive" }) end))
    assert.matches("unknown option 'calib'", msg(function() Q.quantize_net(net, { calib = x }) end))
    assert.matches("HybridBlock", msg(function() Q.quantize_net(42) end))
    assert.matches("quantize_spec", msg(function() Q.quantize_net(net, { calib_mode = "kl" }) end))
  end)

  it("entropy calibration clips outliers: the KL threshold is below the max of a long-tailed tensor",
      function()
    mx.random.seed(11)
    local body = nd.random.normal(0, 1, { 20000 })
    local x = nd.concat(body, nd.array({ 40, -38 }), { dim = 1 })
    local st = {}
    calib.minmax(st, x)
    calib.hist(st, x)
    local t = calib.threshold(st)
    assert.is_true(t < 10 and t > 2.5, "threshold " .. t)
    -- a uniform tensor keeps (nearly) all of its range
    local u = nd.random.uniform(-1, 1, { 20000 })
    local su = {}
    calib.minmax(su, u)
    calib.hist(su, u)
    assert.is_true(calib.threshold(su) > 0.9)
  end)
end)
