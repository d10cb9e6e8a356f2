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
