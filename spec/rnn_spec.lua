-- spec/rnn_spec.lua — the rnn family: MXNet's fused RNN op (rnn_relu, rnn_tanh, lstm, gru)
-- against PyTorch's nn.RNN/LSTM/GRU (values and gradients, 2 layers, bidirectional,
-- per-sample lengths) and MXNet 1.9.1's RNN op (values), the cpu kernel against the
-- reference kernel, dropout between layers, and clear errors at the caller's line.
-- Fixtures: tools/fixtures/make_rnn_fixture.py.
local mx = require("mx")
local oracle = require("helpers.oracle")
local err_at = require("helpers.err_at")("rnn_spec.lua")
local R = dofile("spec/fixtures/rnn_call.lua")
local nd = mx.nd
local rand = oracle.rand

local function t(v, dt)
  return nd.array(v, { dtype = dt or "float64" }):reshape(v.shape):copy()
end
local function same(got, want, tol)
  local ok, msg = oracle.close(got, t(want), tol or 1e-9, tol or 1e-9)
  assert(ok, msg)
end
-- R[i] = sin(k*i + 0.3) over the row-major index (the fixture script's loss weights)
local function sinw(shape, k)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local v = {}
  for i = 0, n - 1 do v[i + 1] = math.sin(k * i + 0.3) end
  return nd.array(v, { dtype = "float64" }):reshape(shape)
end
local function opts_of(c, extra)
  local o = { state_size = c.H, num_layers = c.L, bidirectional = c.bidirectional,
    mode = c.mode, state_outputs = true }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

describe("rnn against PyTorch", function()
  local cases = dofile("spec/fixtures/rnn_torch.lua")
  for _, c in ipairs(cases) do
    local name = string.format("%s%s%s: values and gradients of data, parameters and states",
      c.mode, c.bidirectional and " bidirectional" or "", c.seq and " with sequence lengths" or "")
    it(name, function()
      local lstm = c.mode == "lstm"
      local x, w, h0, c0 = t(c.x), t(c.w), t(c.h0), t(c.c0)
      local ins = { x, w, h0 }
      if lstm then ins[4] = c0 end
      for _, v in ipairs(ins) do v:attach_grad() end
      local lens = c.seq and t(c.lens) or nil
      local o = opts_of(c, { use_sequence_length = c.seq })
      local out, hy, cy
      mx.autograd.record(function()
        out, hy, cy = R.call(x, w, h0, lstm and c0 or nil, lens, o)
        local loss = nd.sum(nd.mul(out, sinw(out:shape(), 0.7)))
        loss = nd.add(loss, nd.sum(nd.mul(hy, sinw(hy:shape(), 1.3))))
        if lstm then loss = nd.add(loss, nd.sum(nd.mul(cy, sinw(cy:shape(), 1.9)))) end
        out = { out, loss }
      end)
      out[2]:backward()
      same(out[1], c.out)
      same(hy, c.hy)
      if lstm then same(cy, c.cy) end
      same(x:grad(), c.gx)
      same(w:grad(), c.gw)
      same(h0:grad(), c.gh)
      if lstm then same(c0:grad(), c.gc) end
    end)
  end
end)

describe("rnn against MXNet 1.9.1's RNN op", function()
  local cases = dofile("spec/fixtures/rnn_mxnet.lua")
  it("values of every mode, one and two directions", function()
    for _, c in ipairs(cases) do
      local lstm = c.mode == "lstm"
      for _, dt in ipairs({ "float64", "float32" }) do
        local out, hy, cy = R.call(t(c.x, dt), t(c.w, dt), t(c.h0, dt),
          lstm and t(c.c0, dt) or nil, nil, opts_of(c))
        -- MXNet computed in float32
        local tol = 1e-5
        same(out:astype("float64"), c.out, tol)
        same(hy:astype("float64"), c.hy, tol)
        if lstm then same(cy:astype("float64"), c.cy, tol) end
      end
    end
  end)
end)

-- the packed vector's length (docs/rnn.md)
local function nparam(mode, I, H, L, D)
  local G = ({ lstm = 4, gru = 3 })[mode] or 1
  local n = 0
  for l = 1, L do n = n + D * G * H * ((l == 1 and I or D * H) + H + 2) end
  return n
end

describe("rnn's cpu kernel against the reference kernel", function()
  local MODES = { "rnn_relu", "rnn_tanh", "lstm", "gru" }
  local function inputs(mode, T, N, I, H, L, D, dt)
    local x = rand(mx, { T, N, I }, dt)
    local w = rand(mx, { nparam(mode, I, H, L, D) }, dt, { -0.4, 0.4 })
    local h0, c0 = rand(mx, { L * D, N, H }, dt), rand(mx, { L * D, N, H }, dt)
    return x, w, h0, mode == "lstm" and c0 or nil
  end
  it("forward and backward over modes, sizes, directions, lengths and dtypes", function()
    local shapes = { { 1, 1, 1, 1, 1 }, { 5, 3, 4, 6, 2 }, { 7, 4, 9, 5, 3 }, { 4, 33, 8, 16, 1 } }
    for _, mode in ipairs(MODES) do
      for _, sh in ipairs(shapes) do
        for _, D in ipairs({ 1, 2 }) do
          for _, seq in ipairs({ false, true }) do
            for _, dt in ipairs({ "float64", "float32" }) do
              local T, N, I, H, L = sh[1], sh[2], sh[3], sh[4], sh[5]
              local tol = dt == "float32" and 2e-4 or 1e-10
              local x, w, h0, c0 = inputs(mode, T, N, I, H, L, D, dt)
              local lens
              if seq then
                local v = {}
                for n = 1, N do v[n] = (n * 7) % (T + 1) end
                lens = nd.array(v, { dtype = "int32" })
              end
              local o = { state_size = H, num_layers = L, bidirectional = D == 2, mode = mode,
                state_outputs = true, use_sequence_length = seq }
              local a = { R.call(x, w, h0, c0, lens, o) }
              local b = { R.call(x, w, h0, c0, lens, o, true) }
              assert.equal(#b, #a)
              for k = 1, #a do
                local ok, msg = oracle.close(a[k], b[k], tol, tol)
                if not ok then
                  error(mode .. " " .. table.concat(sh, "x") .. " D=" .. D .. " output " .. k
                    .. ": " .. msg)
                end
              end
              if not seq then -- the training reserve: one layout in both kernels
                o.training = true
                local ra = { R.call(x, w, h0, c0, lens, o) }
                local rb = { R.call(x, w, h0, c0, lens, o, true) }
                o.training = nil
                assert.equal(#a + 1, #ra)
                local ok, msg = oracle.close(ra[#ra], rb[#rb], tol, tol)
                if not ok then error(mode .. " " .. table.concat(sh, "x") .. " reserve: " .. msg) end
              end
              local dy, dhy = rand(mx, a[1]:shape(), dt), rand(mx, h0:shape(), dt)
              local dcy = rand(mx, h0:shape(), dt)
              local q = { state_size = H, num_layers = L, bidirectional = D == 2, mode = mode,
                use_sequence_length = seq }
              local sl = lens or h0
              local ga = { nd.rnn_backward(x, w, h0, c0 or h0, sl, h0, dy, dhy, dcy, h0, q) }
              local gb = { nd._ref.rnn_backward(x, w, h0, c0 or h0, sl, h0, dy, dhy, dcy, h0, q) }
              for k = 1, 4 do
                local ok, msg = oracle.close(ga[k], gb[k], tol * 10, tol * 10)
                if not ok then
                  error(mode .. " " .. table.concat(sh, "x") .. " D=" .. D .. " gradient " .. k
                    .. ": " .. msg)
                end
              end
            end
          end
        end
      end
    end
  end)

  it("padded steps output 0 and leave the state; a length of 0 returns the initial state", function()
    local x, w, h0, c0 = inputs("lstm", 4, 3, 2, 3, 1, 2, "float64")
    local lens = nd.array({ 4, 2, 0 })
    local out, hy, cy = R.call(x, w, h0, c0, lens, { state_size = 3, num_layers = 1,
      bidirectional = true, mode = "lstm", state_outputs = true, use_sequence_length = true })
    local ov = out:tolist() -- (4, 3, 6)
    for ti = 3, 4 do for u = 1, 6 do assert.equal(0, ov[((ti - 1) * 3 + 1) * 6 + u]) end end
    for ti = 1, 4 do for u = 1, 6 do assert.equal(0, ov[((ti - 1) * 3 + 2) * 6 + u]) end end
    local ok, msg = oracle.close(hy[{ 1, 3 }]:copy(), h0[{ 1, 3 }]:copy(), 0, 0)
    assert(ok, msg)
    ok, msg = oracle.close(cy[{ 2, 3 }]:copy(), c0[{ 2, 3 }]:copy(), 0, 0)
    assert(ok, msg)
    -- a full-length sample equals the call without lengths
    local full = R.call(x, w, h0, c0, nil, { state_size = 3, num_layers = 1,
      bidirectional = true, mode = "lstm" })
    ok, msg = oracle.close(out[{ {}, 1 }]:copy(), full[{ {}, 1 }]:copy(), 1e-12, 1e-12)
    assert(ok, msg)
  end)

  it("dropout between layers in training: masks returned, same in both kernels, off at inference", function()
    local x, w, h0 = inputs("gru", 6, 5, 4, 8, 3, 2, "float32")
    local o = { state_size = 8, num_layers = 3, bidirectional = true, mode = "gru", p = 0.5,
      training = true }
    mx.random.seed(3)
    local out, mask = R.call(x, w, h0, nil, nil, o)
    mx.random.seed(3)
    local out2, mask2 = R.call(x, w, h0, nil, nil, o, true)
    assert.same({ 2, 6, 5, 16 }, mask:shape())
    local ok, msg = oracle.close(mask, mask2, 0, 0)
    assert(ok, msg)
    ok, msg = oracle.close(out, out2, 2e-5, 2e-5)
    assert(ok, msg)
    local kept, vals = 0, mask:reshape({ -1 }):tolist()
    for _, v in ipairs(vals) do
      assert(v == 0 or v == 2, "mask value " .. v)
      if v > 0 then kept = kept + 1 end
    end
    assert(kept > #vals * 0.35 and kept < #vals * 0.65, "kept " .. kept .. " of " .. #vals)
    -- the mask is what the layers above saw: rnn_backward with it matches the ref's
    local dy = rand(mx, out:shape(), "float32")
    local z = nd.zeros_like(h0)
    local q = { state_size = 8, num_layers = 3, bidirectional = true, mode = "gru", p = 0.5,
      use_mask = true }
    local ga = { nd.rnn_backward(x, w, h0, h0, h0, mask, dy, z, z, h0, q) }
    local gb = { nd._ref.rnn_backward(x, w, h0, h0, h0, mask, dy, z, z, h0, q) }
    for k = 1, 3 do
      ok, msg = oracle.close(ga[k], gb[k], 1e-3, 1e-3)
      assert(ok, msg)
    end
    -- inference: one output, no dropout (equal to p = 0)
    local inf = { R.call(x, w, h0, nil, nil, { state_size = 8, num_layers = 3,
      bidirectional = true, mode = "gru", p = 0.5 }) }
    assert.equal(1, #inf)
    local plain = R.call(x, w, h0, nil, nil, { state_size = 8, num_layers = 3,
      bidirectional = true, mode = "gru" })
    ok, msg = oracle.close(inf[1], plain, 0, 0)
    assert(ok, msg)
  end)

  it("data_grad = false: ddata zeros, the other gradients unchanged", function()
    local x, w, h0, c0 = inputs("lstm", 5, 3, 4, 6, 2, 2, "float32")
    local dy = rand(mx, { 5, 3, 12 }, "float32")
    local z = nd.zeros_like(h0)
    local q = { state_size = 6, num_layers = 2, bidirectional = true, mode = "lstm" }
    local a = { nd.rnn_backward(x, w, h0, c0, h0, h0, dy, z, z, h0, q) }
    q.data_grad = false
    local b = { nd.rnn_backward(x, w, h0, c0, h0, h0, dy, z, z, h0, q) }
    local ok, msg = oracle.close(b[1], nd.zeros_like(x), 0, 0)
    assert(ok, msg)
    for k = 2, 4 do
      ok, msg = oracle.close(b[k], a[k], 0, 0)
      assert(ok, msg)
    end
  end)

  it("lstm state clipping bounds the cell (and runs the reference kernel)", function()
    local x, w, h0, c0 = inputs("lstm", 5, 2, 3, 4, 2, 1, "float64")
    x = nd.mul_scalar(x, { scalar = 20 })
    local _, _, cy = R.call(x, w, h0, c0, nil, { state_size = 4, num_layers = 2, mode = "lstm",
      state_outputs = true, lstm_state_clip_min = -0.5, lstm_state_clip_max = 0.25 })
    for _, v in ipairs(cy:reshape({ -1 }):tolist()) do assert(v >= -0.5 and v <= 0.25, v) end
  end)
end)

describe("rnn errors", function()
  local x = nd.zeros({ 3, 2, 4 })
  local h0 = nd.zeros({ 2, 2, 5 })
  local o = { state_size = 5, num_layers = 2, mode = "lstm" }
  local w = nd.zeros({ nparam("lstm", 4, 5, 2, 1) })
  local function expect(f, line, want)
    local msg = err_at(f, line)
    assert.is_truthy(msg:find(want, 1, true), msg)
  end
  it("a wrong parameter length names the expected size", function()
    local line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(x, nd.zeros({ 7 }), h0, h0, nil, o) return r end, line,
      "parameters (input 2) must be 1-D with " .. nparam("lstm", 4, 5, 2, 1) .. " elements")
  end)
  it("a wrong state shape names the shape wanted", function()
    local line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(x, w, nd.zeros({ 2, 3, 5 }), h0, nil, o) return r end,
      line, "state (input 3) must have shape (2, 2, 5)")
  end)
  it("lstm without state_cell, missing lengths, missing params, projection_size's range", function()
    local line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(x, w, h0, nil, nil, o) return r end, line,
      "mode lstm needs state_cell (input 4)")
    local wg = nd.zeros({ nparam("gru", 4, 5, 2, 1) })
    line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(x, wg, h0, nil, nil, { state_size = 5, num_layers = 2,
      mode = "gru", use_sequence_length = true }) return r end, line,
      "use_sequence_length needs sequence_length (input 4)")
    line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(x, w, h0, h0, nil, { num_layers = 2, mode = "lstm" })
      return r end, line, "state_size must be a positive integer (it is required)")
    line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(x, w, h0, h0, nil, { state_size = 5, num_layers = 2 })
      return r end, line, "mode is required")
    line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(x, w, h0, h0, nil, { state_size = 5, num_layers = 2,
      mode = "lstm", projection_size = 6 }) return r end, line,
      "projection_size=6 must be in 1..state_size=5")
    line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(nd.zeros({ 3, 4 }), w, h0, h0, nil, o) return r end, line,
      "data must be 3-D (seq_len, batch, input_size)")
    line = debug.getinfo(1, "l").currentline + 1
    expect(function() local r = R.call(x, w, h0, h0, nd.array({ 1, 9 }), { state_size = 5,
      num_layers = 2, mode = "lstm", use_sequence_length = true }) return r end, line,
      "sequence_length[2] = 9 must be an integer in 0..3")
  end)
  it("mx.nd.rnn (the generated wrapper) with every input given equals the helper's call", function()
    local lens = nd.array({ 3, 1 })
    local q = { state_size = 5, num_layers = 2, mode = "lstm", state_outputs = true,
      use_sequence_length = true }
    local wr = rand(mx, { nparam("lstm", 4, 5, 2, 1) }, "float32", { -0.5, 0.5 })
    local a1, a2, a3 = nd.rnn(x, wr, h0, h0, lens, q)
    local b1, b2, b3 = R.call(x, wr, h0, h0, lens, q)
    for _, pr in ipairs({ { a1, b1 }, { a2, b2 }, { a3, b3 } }) do
      local ok, msg = oracle.close(pr[1], pr[2], 0, 0)
      assert(ok, msg)
    end
  end)
  it("is MXNet's RNN for mx_op_find", function()
    local lib = require("mx.core.lib")
    assert.equal(lib.ops_by_name.rnn.id, lib.C.mx_op_find("RNN"))
  end)
end)
