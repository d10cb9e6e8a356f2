-- spec/hybrid_eager_grad_spec.lua — every hybridizable Gluon layer gives the same
-- outputs and gradients hybridized as eager when it is called 1, 2 and 3 times inside one
-- autograd.record (each call on its own input, each output weighted by its own random
-- head), in training and in predict mode, over two records in a row with the parameters
-- changed between them (the second record replays the cached graph). Compared: every
-- output, every input's gradient, every parameter's gradient, every auxiliary state.
-- Every layer class gluon.nn and gluon.rnn export is either a case here or named in
-- NOT_HYBRID / ABSTRACT with the reason.
local mx = require("mx")
local nd = mx.nd
local nn, rnn = mx.gluon.nn, mx.gluon.rnn

local function rand(shape, lo, hi) return nd.random.uniform(lo or -1, hi or 1, shape) end

-- case: make() -> block; inputs(k) -> the k-th call's inputs; random: outputs depend on
-- the random stream in training (compared in predict mode only); grad_inputs = false:
-- integer inputs (no gradient); train_pending: why training is not compared yet. Random
-- cases draw from the same seed in both runs.
local function dense_seq()
  local s = nn.HybridSequential()
  s:add(nn.Dense(5, { in_units = 4, activation = "tanh" }), nn.Dense(3, { in_units = 5 }))
  return s
end
local function x4() return { rand { 3, 4 } } end
local function img(c, ...) local s = { 2, c, ... } return function() return { rand(s) } end end
local function ids() return { nd.array({ { 1, 4, 2 }, { 0, 3, 3 } }) } end
local function seq(t, n, c) return function() return { rand { t, n, c } } end end
local function step(n, c, states)
  return function()
    local st = {}
    for i = 1, states do st[i] = rand { n, 6 } end
    return { rand { n, c }, st }
  end
end

-- what a modifier cell keeps between its steps (ZoneoutCell's previous output, the
-- variational dropout masks) stays in Lua when it is hybridized (only its base cell is
-- traced), so training with several steps per record compares too

local CASES = {
  { "Activation", function() return nn.Activation("tanh") end, x4 },
  { "AvgPool1D", function() return nn.AvgPool1D(2) end, img(2, 6) },
  { "AvgPool2D", function() return nn.AvgPool2D(2) end, img(2, 4, 4) },
  { "AvgPool3D", function() return nn.AvgPool3D(2) end, img(2, 4, 4, 4) },
  { "BatchNorm", function() return nn.BatchNorm { in_channels = 3 } end, img(3, 2, 2) },
  -- one device: BatchNorm's statistics (the multi-device form runs under parallel_apply only)
  { "SyncBatchNorm", function() return nn.SyncBatchNorm { in_channels = 3 } end, img(3, 2, 2) },
  { "Conv1D", function() return nn.Conv1D(3, 3, { in_channels = 2 }) end, img(2, 6) },
  { "Conv1DTranspose", function() return nn.Conv1DTranspose(3, 3, { in_channels = 2 }) end, img(2, 5) },
  { "Conv2D", function() return nn.Conv2D(3, 3, { in_channels = 2 }) end, img(2, 5, 5) },
  { "Conv2DTranspose", function() return nn.Conv2DTranspose(3, 2, { in_channels = 2 }) end, img(2, 3, 3) },
  { "Conv3D", function() return nn.Conv3D(2, 2, { in_channels = 2 }) end, img(2, 3, 3, 3) },
  { "Conv3DTranspose", function() return nn.Conv3DTranspose(2, 2, { in_channels = 2 }) end, img(2, 2, 2, 2) },
  { "Dense", function() return nn.Dense(5, { in_units = 4 }) end, x4 },
  { "DeformableConvolution", function()
    return nn.DeformableConvolution(3, 3, { in_channels = 2, padding = 1 })
  end, img(2, 4, 4) },
  { "ModulatedDeformableConvolution", function()
    return nn.ModulatedDeformableConvolution(3, 3, { in_channels = 2, padding = 1 })
  end, img(2, 4, 4) },
  { "Dropout", function() return nn.Dropout(0.5) end, x4, random = true },
  { "ELU", function() return nn.ELU() end, x4 },
  { "Embedding", function() return nn.Embedding(5, 3) end, ids, grad_inputs = false },
  { "Flatten", function() return nn.Flatten() end, img(2, 3, 3) },
  { "GELU", function() return nn.GELU() end, x4 },
  { "GlobalAvgPool1D", function() return nn.GlobalAvgPool1D() end, img(2, 5) },
  { "GlobalAvgPool2D", function() return nn.GlobalAvgPool2D() end, img(2, 3, 3) },
  { "GlobalAvgPool3D", function() return nn.GlobalAvgPool3D() end, img(2, 2, 2, 2) },
  { "GlobalMaxPool1D", function() return nn.GlobalMaxPool1D() end, img(2, 5) },
  { "GlobalMaxPool2D", function() return nn.GlobalMaxPool2D() end, img(2, 3, 3) },
  { "GlobalMaxPool3D", function() return nn.GlobalMaxPool3D() end, img(2, 2, 2, 2) },
  { "GroupNorm", function() return nn.GroupNorm { num_groups = 2 } end, img(4, 3) },
  { "HardSigmoid", function() return nn.HardSigmoid() end, x4 },
  { "HardSwish", function() return nn.HardSwish() end, x4 },
  { "HybridConcatenate", function()
    local c = nn.HybridConcatenate(2)
    c:add(nn.Dense(2, { in_units = 4 }), nn.Dense(3, { in_units = 4 }))
    return c
  end, x4 },
  { "HybridLambda", function() return nn.HybridLambda(function(F, x) return F.sin(x) * x end) end, x4 },
  { "HybridSequential", dense_seq, x4 },
  { "Identity", function() return nn.Identity() end, x4 },
  { "InstanceNorm", function() return nn.InstanceNorm { in_channels = 3 } end, img(3, 4) },
  { "LayerNorm", function() return nn.LayerNorm { in_channels = 4 } end, x4 },
  { "LeakyReLU", function() return nn.LeakyReLU(0.1) end, x4 },
  { "MaxPool1D", function() return nn.MaxPool1D(2) end, img(2, 6) },
  { "MaxPool2D", function() return nn.MaxPool2D(2) end, img(2, 4, 4) },
  { "MaxPool3D", function() return nn.MaxPool3D(2) end, img(2, 4, 4, 4) },
  { "MultiHeadAttention", function()
    return nn.MultiHeadAttention { units = 8, num_heads = 2, dropout = 0 }
  end,
    function() local x = rand { 2, 3, 8 } return { x, x, x } end },
  { "PixelShuffle1D", function() return nn.PixelShuffle1D(2) end, img(4, 3) },
  { "PixelShuffle2D", function() return nn.PixelShuffle2D({ 2, 1 }) end, img(4, 2, 3) },
  { "PixelShuffle3D", function() return nn.PixelShuffle3D(2) end, img(8, 1, 2, 1) },
  { "PReLU", function() return nn.PReLU { in_channels = 1 } end, x4 },
  { "PositionalEncoding", function() return nn.PositionalEncoding(8, 16) end, seq(2, 3, 8) },
  { "PositionwiseFFN", function() return nn.PositionwiseFFN { units = 8, hidden_size = 16, dropout = 0 } end,
    seq(2, 3, 8) },
  { "ReflectionPad2D", function() return nn.ReflectionPad2D(1) end, img(2, 3, 3) },
  { "SELU", function() return nn.SELU() end, x4 },
  { "SiLU", function() return nn.SiLU() end, x4 },
  { "Swish", function() return nn.Swish() end, x4 },
  { "TransformerEncoder", function() return nn.TransformerEncoder { num_layers = 1, units = 8, num_heads = 2,
    hidden_size = 16, dropout = 0 } end,
    seq(2, 3, 8) },
  { "TransformerEncoderCell", function()
    return nn.TransformerEncoderCell { units = 8, num_heads = 2, hidden_size = 16, dropout = 0 }
  end, seq(2, 3, 8) },
  -- gluon.rnn
  { "RNN", function() return rnn.RNN(6, 1, { input_size = 3 }) end, seq(4, 2, 3) },
  { "LSTM", function() return rnn.LSTM(6, 2, { input_size = 3 }) end, seq(4, 2, 3) },
  { "GRU", function() return rnn.GRU(6, 1, { input_size = 3, bidirectional = true }) end, seq(4, 2, 3) },
  { "RNNCell", function() return rnn.RNNCell(6, { input_size = 3 }) end, step(2, 3, 1) },
  { "LSTMCell", function() return rnn.LSTMCell(6, { input_size = 3 }) end, step(2, 3, 2) },
  { "GRUCell", function() return rnn.GRUCell(6, { input_size = 3 }) end, step(2, 3, 1) },
  { "HybridSequentialRNNCell", function()
    local s = rnn.HybridSequentialRNNCell()
    s:add(rnn.LSTMCell(6, { input_size = 3 }), rnn.RNNCell(6, { input_size = 6 }))
    return s
  end, step(2, 3, 3) },
  { "ResidualCell", function() return rnn.ResidualCell(rnn.GRUCell(6, { input_size = 6 })) end,
    step(2, 6, 1) },
  { "DropoutCell", function() return rnn.DropoutCell(0.5) end, function() return { rand { 2, 3 }, {} } end,
    random = true },
  { "ZoneoutCell", function() return rnn.ZoneoutCell(rnn.RNNCell(6, { input_size = 6 }), 0.3, 0.3) end,
    step(2, 6, 1), random = true },
  { "LSTMPCell", function() return rnn.LSTMPCell(6, 4, { input_size = 3 }) end,
    function() return { rand { 2, 3 }, { rand { 2, 4 }, rand { 2, 6 } } } end },
  { "VariationalDropoutCell", function()
    return rnn.VariationalDropoutCell(rnn.RNNCell(6, { input_size = 6 }), 0.3, 0.3, 0.3)
  end, step(2, 6, 1), random = true },
  { "Conv1DRNNCell", function() return rnn.Conv1DRNNCell({ 2, 5 }, 3, 3, 3) end,
    function() return { rand { 2, 2, 5 }, { rand { 2, 3, 3 } } } end },
  { "Conv1DLSTMCell", function() return rnn.Conv1DLSTMCell({ 2, 5 }, 3, 3, 3, 1) end,
    function() return { rand { 2, 2, 5 }, { rand { 2, 3, 5 }, rand { 2, 3, 5 } } } end },
  { "Conv1DGRUCell", function() return rnn.Conv1DGRUCell({ 2, 5 }, 3, 3, 1) end,
    function() return { rand { 2, 2, 5 }, { rand { 2, 3, 3 } } } end },
  { "Conv2DRNNCell", function() return rnn.Conv2DRNNCell({ 2, 4, 3 }, 2, 3, 3, 1) end,
    function() return { rand { 2, 2, 4, 3 }, { rand { 2, 2, 4, 3 } } } end },
  { "Conv2DLSTMCell", function() return rnn.Conv2DLSTMCell({ 2, 4, 3 }, 2, 3, 3, 1) end,
    function() return { rand { 2, 2, 4, 3 }, { rand { 2, 2, 4, 3 }, rand { 2, 2, 4, 3 } } } end },
  { "Conv2DGRUCell", function() return rnn.Conv2DGRUCell({ 2, 4, 3 }, 2, 3, 3, 1) end,
    function() return { rand { 2, 2, 4, 3 }, { rand { 2, 2, 4, 3 } } } end },
  { "Conv3DRNNCell", function() return rnn.Conv3DRNNCell({ 1, 3, 3, 2 }, 2, 1, 3) end,
    function() return { rand { 2, 1, 3, 3, 2 }, { rand { 2, 2, 3, 3, 2 } } } end },
  { "Conv3DLSTMCell", function() return rnn.Conv3DLSTMCell({ 1, 3, 3, 2 }, 2, 1, 3) end,
    function() return { rand { 2, 1, 3, 3, 2 }, { rand { 2, 2, 3, 3, 2 }, rand { 2, 2, 3, 3, 2 } } } end },
  { "Conv3DGRUCell", function() return rnn.Conv3DGRUCell({ 1, 3, 3, 2 }, 2, 1, 3) end,
    function() return { rand { 2, 1, 3, 3, 2 }, { rand { 2, 2, 3, 3, 2 } } } end },
  { "BidirectionalCell", function()
    local b = rnn.BidirectionalCell(rnn.LSTMCell(6, { input_size = 3 }), rnn.LSTMCell(6, { input_size = 3 }))
    local B = mx.gluon.HybridBlock:extend("UnrolledBidirectional")
    function B:__init()
      mx.gluon.HybridBlock.__init(self)
      self.cell = b
    end
    function B:hybrid_forward(_, x)
      return (self.cell:unroll(4, x, { layout = "TNC", merge_outputs = true }))
    end
    return B()
  end, seq(4, 2, 3) },
}

local NOT_HYBRID = { Block = "not a HybridBlock", Sequential = "not a HybridBlock",
  Concatenate = "not a HybridBlock", Lambda = "not a HybridBlock",
  SequentialRNNCell = "not a HybridBlock", RecurrentCell = "not a HybridBlock" }
local ABSTRACT = { HybridBlock = "the base class", HybridRecurrentCell = "the base class",
  ModifierCell = "the base class of ResidualCell, ZoneoutCell" }

-- every NDArray in a (nested) result, in order
local function flatten(v, out)
  out = out or {}
  if type(v) == "table" and getmetatable(v) ~= getmetatable(nd.zeros { 1 }) then
    for _, x in ipairs(v) do flatten(x, out) end
  elseif v ~= nil then
    out[#out + 1] = v
  end
  return out
end

local function close(a, b, what)
  local x, y = a:reshape(-1):tolist(), b:reshape(-1):tolist()
  assert.equal(#x, #y, what)
  for i = 1, #x do
    local ok = math.abs(x[i] - y[i]) <= 1e-4 * (1 + math.abs(y[i]))
    assert.is_true(ok, string.format("%s element %d: hybridized %.7g, eager %.7g", what, i, y[i], x[i]))
  end
end

local function params_of(net)
  local t = {}
  for name, p in net:collect_params():items() do t[#t + 1] = { name, p } end
  return t
end

-- one run of `calls` calls per record over `records` records; returns what is compared
local function run(case, net, calls, train, inputs, heads)
  local seen = {}
  for r = 1, #inputs do
    for _, np in ipairs(params_of(net)) do
      if np[2].grad_req ~= "null" then
        np[2]:data()[{}] = np[2]:data() * 0.9 + 0.05 * r
      end
    end
    local xs = inputs[r]
    if net.reset then net:reset() end -- (a cell starts each record's sequence afresh)
    for k = 1, calls do
      if case.grad_inputs ~= false then
        for _, x in ipairs(flatten(xs[k])) do x:attach_grad() end
      end
    end
    local outs = {}
    if case.random then mx.random.seed(100 + r) end
    mx.autograd.record(function()
      local loss
      for k = 1, calls do
        local ys = flatten({ net(unpack(xs[k])) })
        for j, y in ipairs(ys) do
          outs[#outs + 1] = y
          local term = (y * heads[r][k][j]):sum()
          loss = loss and loss + term or term
        end
      end
      loss:backward()
    end, { train_mode = train })
    local got = { outs = outs, grads = {}, params = {} }
    if case.grad_inputs ~= false then
      for k = 1, calls do
        for _, x in ipairs(flatten(xs[k])) do got.grads[#got.grads + 1] = x:grad() end
      end
    end
    for _, np in ipairs(params_of(net)) do
      got.params[#got.params + 1] = { np[1], np[2]:data():copy(),
        np[2].grad_req ~= "null" and np[2]:grad():copy() or nil }
    end
    seen[r] = got
  end
  return seen
end

describe("modifier cells keeping state between steps", function()
  it("hybridize their base cell only; export names why they have no graph", function()
    for _, c in ipairs { rnn.ZoneoutCell(rnn.RNNCell(6, { input_size = 3 }), 0.3, 0.3),
        rnn.VariationalDropoutCell(rnn.RNNCell(6, { input_size = 3 }), 0.3) } do
      c:initialize()
      c:hybridize()
      assert.is_falsy(rawget(c, "_active"))
      assert.is_true(rawget(c.base_cell, "_active"))
      c(rand { 2, 3 }, { rand { 2, 6 } })
      local ok, err = pcall(function() c:export(os.tmpname()) end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("keeps its state between steps in Lua", 1, true), tostring(err))
      assert.truthy(tostring(err):find("hybrid_eager_grad_spec", 1, true), tostring(err))
    end
  end)
end)

describe("hybridized and eager Gluon layers agree", function()
  it("covers every layer gluon.nn and gluon.rnn export", function()
    local known = {}
    for _, c in ipairs(CASES) do known[c[1]] = true end
    for _, ns in ipairs { nn, rnn } do
      for name, v in pairs(ns) do
        if type(v) == "table" and name:match("^%u") then
          assert.is_truthy(known[name] or NOT_HYBRID[name] or ABSTRACT[name], name .. " has no case")
        end
      end
    end
  end)

  for _, case in ipairs(CASES) do
    for _, train in ipairs { true, false } do
      for calls = 1, 3 do
        local title = string.format("%s called %d time%s per record, %s", case[1], calls,
          calls > 1 and "s" or "", train and "training" or "predict mode")
        it(title, function()
          if case.train_pending and train then pending(case.train_pending) end
          mx.random.seed(7)
          local eager = case[2]()
          eager:initialize(mx.init.Uniform(0.5))
          local inputs, heads = {}, {}
          for r = 1, 2 do
            inputs[r], heads[r] = {}, {}
            for k = 1, calls do
              inputs[r][k] = case[3](k)
              heads[r][k] = {}
            end
          end
          -- the heads need the outputs' shapes: one eager call (not recorded) gives them
          local proto = flatten({ eager(unpack(inputs[1][1])) })
          for r = 1, 2 do
            for k = 1, calls do
              for j, y in ipairs(proto) do heads[r][k][j] = rand(y:shape()) end
            end
          end
          local hyb = case[2]()
          hyb:initialize(mx.init.Uniform(0.5))
          hyb(unpack(inputs[1][1])) -- (deferred shapes)
          local pe, ph = params_of(eager), params_of(hyb)
          for i = 1, #pe do ph[i][2]:set_data(pe[i][2]:data():copy()) end
          hyb:hybridize()
          local e = run(case, eager, calls, train, inputs, heads)
          local h = run(case, hyb, calls, train, inputs, heads)
          for r = 1, 2 do
            local where = string.format("record %d: ", r)
            assert.equal(#e[r].outs, #h[r].outs)
            for i = 1, #e[r].outs do close(e[r].outs[i], h[r].outs[i], where .. "output " .. i) end
            for i = 1, #e[r].grads do close(e[r].grads[i], h[r].grads[i], where .. "input grad " .. i) end
            for i, p in ipairs(e[r].params) do
              local q = h[r].params[i]
              close(p[2], q[2], where .. p[1])
              if p[3] then close(p[3], q[3], where .. p[1] .. " grad") end
            end
          end
        end)
      end
    end
  end
end)
