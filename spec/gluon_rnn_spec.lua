-- gluon.rnn: the cells (RNNCell, LSTMCell, GRUCell, SequentialRNNCell,
-- BidirectionalCell, DropoutCell, ZoneoutCell, ResidualCell) and the fused layers
-- (rnn.RNN/LSTM/GRU over the rnn op): MXNet 1.9.1's names, files and outputs, PyTorch's
-- values and gradients with the same weights, cells unrolled == the fused layer.
-- Fixtures: tools/fixtures/make_gluon_rnn_fixture.py.
local mx = require("mx")
local H = require("helpers.la")
local nd, rnn, ag = mx.nd, mx.gluon.rnn, mx.autograd

local MXF = dofile("spec/fixtures/gluon_rnn_mxnet.lua")
local TF = dofile("spec/fixtures/gluon_rnn_torch.lua")

local function maxdiff(a, b) return nd.max(nd.abs(nd.sub(a, b))):item() end
local function rand(shape, seed) return H.rand(mx, shape, { seed = seed }):astype("float32") end
local function T(f, dtype) -- a fixture tensor
  return nd.reshape(nd.array(f.data, { dtype = dtype or "float32" }), f.shape)
end
local function same_shape(a, b) assert.are.same(a:shape(), b:shape()) end

local Tn, N, I, Hs = 4, 2, 3, 5

local function make_layer(c, opts)
  opts = opts or {}
  opts.bidirectional = c.bidirectional
  if c.mode == "lstm" then return rnn.LSTM(Hs, c.num_layers, opts) end
  if c.mode == "gru" then return rnn.GRU(Hs, c.num_layers, opts) end
  opts.activation = c.mode:sub(5)
  return rnn.RNN(Hs, c.num_layers, opts)
end

-- the layer's (L*D, N, H) states as the flat list its _unfuse() stack takes
local function to_cell_states(lstm, h, c)
  local r = {}
  for i = 1, h:shape()[1] do
    r[#r + 1] = h[i]
    if lstm then r[#r + 1] = c[i] end
  end
  return r
end
local function from_cell_states(lstm, s)
  local hs, cs = {}, {}
  local k = lstm and 2 or 1
  for i = 1, #s, k do
    hs[#hs + 1] = s[i]
    if lstm then cs[#cs + 1] = s[i + 1] end
  end
  return nd.stack(hs, { axis = 1 }), lstm and nd.stack(cs, { axis = 1 }) or nil
end

describe("gluon.rnn cells", function()
  it("LSTMCell/GRUCell/RNNCell: MXNet 1.9's parameter names, shapes and deferred input_size", function()
    for _, C in ipairs { { rnn.RNNCell, 1 }, { rnn.LSTMCell, 4 }, { rnn.GRUCell, 3 } } do
      local c = C[1](Hs)
      c:initialize()
      assert.are.same({ "i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias" },
        c:collect_params():keys())
      local out, st = c(rand({ N, I }, 1), c:begin_state(N))
      assert.are.same({ N, Hs }, out:shape())
      assert.are.same({ C[2] * Hs, I }, c.i2h_weight:data():shape())
      assert.equal(C[2] == 4 and 2 or 1, #st)
    end
  end)

  it("a SequentialRNNCell loads MXNet 1.9.1's cell file and unrolls (NTC, valid_length) as MXNet", function()
    local f = MXF.cells
    local seq = rnn.SequentialRNNCell()
    seq:add(rnn.LSTMCell(Hs, { input_size = I }))
    seq:add(rnn.BidirectionalCell(rnn.GRUCell(Hs, { input_size = Hs }),
      rnn.GRUCell(Hs, { input_size = Hs })))
    seq:initialize()
    seq:load_parameters("spec/fixtures/gluon_rnn_cells.params")
    local out, st = seq:unroll(Tn, T(f.x), { layout = "NTC", merge_outputs = true,
      valid_length = T(f.valid_length) })
    same_shape(out, T(f.out))
    assert.is_true(maxdiff(out, T(f.out)) < 1e-5)
    assert.equal(4, #st)
    for i = 1, 4 do assert.is_true(maxdiff(st[i], T(f["state" .. i])) < 1e-5) end
    -- past the valid length, outputs are 0
    assert.equal(0, nd.max(nd.abs(out[{ 2, { 3, 4 } }])):item())
  end)

  it("unroll: a list or a tensor in, lists out unless merge_outputs; TNC == NTC", function()
    local c = rnn.GRUCell(Hs)
    c:initialize()
    local x = rand({ N, Tn, I }, 2)
    local outs, st = c:unroll(Tn, x)
    assert.equal(Tn, #outs)
    local m = c:unroll(Tn, x, { merge_outputs = true })
    assert.are.same({ N, Tn, Hs }, m:shape())
    assert.equal(0, maxdiff(outs[Tn], st[1]))
    local tm = c:unroll(Tn, nd.swapaxes(x, { dim1 = 1, dim2 = 2 }), { layout = "TNC",
      merge_outputs = true })
    assert.is_true(maxdiff(nd.swapaxes(tm, { dim1 = 1, dim2 = 2 }), m) < 1e-6)
    local steps = {}
    for t = 1, Tn do steps[t] = x[{ {}, t }] end
    assert.is_true(maxdiff(c:unroll(Tn, steps, { merge_outputs = true }), m) < 1e-6)
  end)

  it("ResidualCell adds the input; Dropout/Zoneout cells are the identity outside training", function()
    local base = rnn.GRUCell(I)
    local res = rnn.ResidualCell(base)
    res:initialize()
    local x = rand({ N, Tn, I }, 3)
    local y = res:unroll(Tn, x, { merge_outputs = true })
    local plain = rnn.GRUCell(I)
    plain:initialize()
    for _, n in ipairs { "i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias" } do
      plain[n]:set_data(base[n]:data())
    end
    assert.is_true(maxdiff(y, nd.add(plain:unroll(Tn, x, { merge_outputs = true }), x)) < 1e-6)
    assert.has_error(function() base(x[{ {}, 1 }], base:state_info(N)) end)
    local z = rnn.ZoneoutCell(rnn.LSTMCell(Hs), { zoneout_outputs = 0.5, zoneout_states = 0.5 })
    z:initialize()
    local a = z:unroll(Tn, x, { merge_outputs = true })
    local b = z:unroll(Tn, x, { merge_outputs = true })
    assert.equal(0, maxdiff(a, b))
    local d = rnn.DropoutCell(0.5)
    assert.equal(0, maxdiff(d:unroll(Tn, x, { merge_outputs = true }), x))
    local dt = ag.record(function() return d:unroll(Tn, x, { merge_outputs = true }) end)
    assert.is_true(maxdiff(dt, x) > 0)
  end)

  it("errors name the cell and the argument", function()
    assert.has_error(function() rnn.LSTMCell(0) end,
      "LSTMCell: hidden_size must be a positive integer, got 0")
    assert.has_error(function() rnn.LSTMCell(3, { bogus = 1 }) end)
    local c = rnn.LSTMCell(3)
    c:initialize()
    assert.has_error(function() c(rand({ 2, 4 }, 1), { nd.zeros({ 2, 3 }) }) end,
      "LSTMCell: states must be a list of 2 tensors (begin_state(batch_size))")
    assert.has_error(function() c:unroll(3, rand({ 2, 4, 4 }, 1)) end)
    assert.has_error(function() c:unroll(4, rand({ 2, 4, 4 }, 1), { layout = "CTN" }) end)
    assert.has_error(function() rnn.BidirectionalCell(c, rnn.LSTMCell(3))(rand({ 2, 4 }, 1), {}) end,
      "BidirectionalCell: cannot be stepped; use unroll")
    -- an op's error inside a cell or a layer names it and blames this line
    local g, l = rnn.GRUCell(3), rnn.GRU(3, 1, { input_size = 4 })
    g:initialize(); l:initialize()
    local x64 = rand({ 2, 2, 4 }, 1):astype("float64")
    for _, f in ipairs { function() local y = g:unroll(2, x64); return y end,
      function() local y = l(rand({ 2, 2, 5 }, 1)); return y end } do
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.truthy(err:find("^spec/gluon_rnn_spec%.lua:%d+: %a+"), err)
    end
  end)
end)

-- the cells the fused layer unfuses into, with PyTorch's weights
local function set_weights(net, f, dtype)
  for name, w in pairs(f.weights) do net[name]:set_data(T(w, dtype)) end
end

describe("gluon.rnn cells vs PyTorch", function()
  for name, f in pairs(TF) do
    it(name .. ": unfused cells' values and gradients equal torch.nn (float64)", function()
      local lstm = f.mode == "lstm"
      local net = make_layer(f, { input_size = I, dtype = "float64" })
      net:initialize()
      set_weights(net, f, "float64")
      local stack = net:_unfuse()
      local x, h0 = T(f.x, "float64"), T(f.h0, "float64")
      local c0 = lstm and T(f.c0, "float64") or nil
      x:attach_grad(); h0:attach_grad()
      if c0 then c0:attach_grad() end
      local out, hy, cy
      local loss = ag.record(function()
        local o, s = stack:unroll(Tn, x, { layout = "TNC", merge_outputs = true,
          begin_state = to_cell_states(lstm, h0, c0) })
        out = o
        hy, cy = from_cell_states(lstm, s)
        local l = nd.add(nd.sum(nd.mul(out, T(f.ro, "float64"))), nd.sum(nd.mul(hy, T(f.rh, "float64"))))
        if lstm then l = nd.add(l, nd.sum(nd.mul(cy, T(f.rc, "float64")))) end
        return l
      end)
      loss:backward()
      assert.is_true(maxdiff(out, T(f.out, "float64")) < 1e-10)
      assert.is_true(maxdiff(hy, T(f.hy, "float64")) < 1e-10)
      if lstm then assert.is_true(maxdiff(cy, T(f.cy, "float64")) < 1e-10) end
      assert.is_true(maxdiff(x:grad(), T(f.dx, "float64")) < 1e-10)
      assert.is_true(maxdiff(h0:grad(), T(f.dh0, "float64")) < 1e-10)
      if lstm then assert.is_true(maxdiff(c0:grad(), T(f.dc0, "float64")) < 1e-10) end
      for pname, g in pairs(f.grads) do
        assert.is_true(maxdiff(net[pname]:grad(), T(g, "float64")) < 1e-10, pname)
      end
    end)
  end
end)

describe("gluon.rnn fused layers", function()
  it("parameters: MXNet 1.9.1's names and shapes, deferred input_size, repr", function()
    local l = rnn.LSTM(Hs, 2, { bidirectional = true })
    assert.are.same({ "l0_i2h_weight", "l0_h2h_weight", "l0_i2h_bias", "l0_h2h_bias",
      "r0_i2h_weight", "r0_h2h_weight", "r0_i2h_bias", "r0_h2h_bias",
      "l1_i2h_weight", "l1_h2h_weight", "l1_i2h_bias", "l1_h2h_bias",
      "r1_i2h_weight", "r1_h2h_weight", "r1_i2h_bias", "r1_h2h_bias" }, l:collect_params():keys())
    assert.are.same({ 4 * Hs, 0 }, l.l0_i2h_weight.shape)
    assert.are.same({ 4 * Hs, 2 * Hs }, l.l1_i2h_weight.shape)
    l:initialize()
    local out = l(rand({ Tn, N, I }, 1))
    assert.are.same({ Tn, N, 2 * Hs }, out:shape())
    assert.are.same({ 4 * Hs, I }, l.l0_i2h_weight:data():shape())
    assert.are.same({ { shape = { 4, 3, Hs }, __layout__ = "LNC", dtype = "float32" },
      { shape = { 4, 3, Hs }, __layout__ = "LNC", dtype = "float32" } }, l:state_info(3))
  end)

  for name, f in pairs(MXF) do
    if name ~= "cells" then
      it(name .. ": MXNet 1.9.1's save_parameters file loads and gives MXNet's outputs", function()
        local net = make_layer(f)
        net:initialize()
        net:load_parameters("spec/fixtures/gluon_rnn_" .. name .. ".params")
        local st = { T(f.h0) }
        if f.mode == "lstm" then st[2] = T(f.c0) end
        local out, s = net(T(f.x), st)
        assert.is_true(maxdiff(out, T(f.out)) < 1e-5)
        assert.is_true(maxdiff(s[1], T(f.hy)) < 1e-5)
        if f.mode == "lstm" then assert.is_true(maxdiff(s[2], T(f.cy)) < 1e-5) end
      end)
    end
  end

  for name, f in pairs(TF) do
    it(name .. ": values and gradients equal torch.nn with the same weights (float64)", function()
      local lstm = f.mode == "lstm"
      local net = make_layer(f, { input_size = I, dtype = "float64" })
      net:initialize()
      set_weights(net, f, "float64")
      local x, h0 = T(f.x, "float64"), T(f.h0, "float64")
      local c0 = lstm and T(f.c0, "float64") or nil
      x:attach_grad(); h0:attach_grad()
      if c0 then c0:attach_grad() end
      local out, s
      local loss = ag.record(function()
        out, s = net(x, lstm and { h0, c0 } or { h0 })
        local l = nd.add(nd.sum(nd.mul(out, T(f.ro, "float64"))), nd.sum(nd.mul(s[1], T(f.rh, "float64"))))
        if lstm then l = nd.add(l, nd.sum(nd.mul(s[2], T(f.rc, "float64")))) end
        return l
      end)
      loss:backward()
      assert.is_true(maxdiff(out, T(f.out, "float64")) < 1e-9)
      assert.is_true(maxdiff(s[1], T(f.hy, "float64")) < 1e-9)
      if lstm then assert.is_true(maxdiff(s[2], T(f.cy, "float64")) < 1e-9) end
      assert.is_true(maxdiff(x:grad(), T(f.dx, "float64")) < 1e-9)
      assert.is_true(maxdiff(h0:grad(), T(f.dh0, "float64")) < 1e-9)
      if lstm then assert.is_true(maxdiff(c0:grad(), T(f.dc0, "float64")) < 1e-9) end
      for pname, g in pairs(f.grads) do
        assert.is_true(maxdiff(net[pname]:grad(), T(g, "float64")) < 1e-9, pname)
      end
    end)
  end

  it("the fused layer equals its cells unrolled (NTC, random states, every mode)", function()
    for _, c in ipairs { { mode = "lstm", num_layers = 2, bidirectional = true },
      { mode = "gru", num_layers = 2 }, { mode = "rnn_tanh", num_layers = 1, bidirectional = true } } do
      local net = make_layer(c, { layout = "NTC" })
      net:initialize(mx.init.Uniform(0.5))
      local x = rand({ N, 6, I }, 4)
      local D = c.bidirectional and 2 or 1
      local h0 = rand({ c.num_layers * D, N, Hs }, 5)
      local c0 = rand({ c.num_layers * D, N, Hs }, 6)
      local lstm = c.mode == "lstm"
      local out, s = net(x, lstm and { h0, c0 } or { h0 })
      local cells = net:_unfuse()
      local o2, s2 = cells:unroll(6, x, { layout = "NTC", merge_outputs = true,
        begin_state = to_cell_states(lstm, h0, c0) })
      local hy, cy = from_cell_states(lstm, s2)
      assert.is_true(maxdiff(out, o2) < 1e-5, c.mode)
      assert.is_true(maxdiff(s[1], hy) < 1e-5, c.mode)
      if lstm then assert.is_true(maxdiff(s[2], cy) < 1e-5) end
    end
  end)

  it("no states in: the outputs only; states in: outputs and states", function()
    local g = rnn.GRU(Hs)
    g:initialize()
    local x = rand({ Tn, N, I }, 7)
    local a, none = g(x)
    assert.is_nil(none)
    local b, s = g(x, g:begin_state(N))
    assert.equal(0, maxdiff(a, b))
    assert.are.same({ 1, N, Hs }, s[1]:shape())
    local c = g(x, nd.zeros({ 1, N, Hs })) -- a single tensor is {h}
    assert.equal(0, maxdiff(a, c))
  end)

  it("save_parameters/load_parameters round trip (our names) and a bad state shape", function()
    local l = rnn.LSTM(Hs, 1, { input_size = I })
    l:initialize()
    local path = os.tmpname()
    l:save_parameters(path)
    local l2 = rnn.LSTM(Hs, 1, { input_size = I })
    l2:load_parameters(path)
    os.remove(path)
    local x = rand({ Tn, N, I }, 8)
    assert.equal(0, maxdiff(l(x), l2(x)))
    assert.has_error(function() l(x, { nd.zeros({ 2, N, Hs }), nd.zeros({ 1, N, Hs }) }) end,
      "LSTM: invalid recurrent state 1 shape: expecting (1, 2, 5), got (2, 2, 5)")
    assert.has_error(function() rnn.LSTM(Hs, 1, { layout = "CNT" }) end,
      "LSTM: layout must be 'TNC' or 'NTC', got CNT")
    assert.has_error(function() rnn.GRU(Hs, 1, { activation = "tanh" }) end)
    assert.has_error(function() rnn.RNN(Hs, 1, { activation = "sigmoid" }) end,
      "RNN: activation must be 'relu' or 'tanh', got sigmoid")
  end)

  it("from_mxnet_names maps MXNet 1.9.1's '_unfused' file names", function()
    assert.are.same({ ["l1_h2h_bias"] = 1, ["enc.r0_i2h_weight"] = 2, ["x.weight"] = 3 },
      rnn.from_mxnet_names { ["_unfused.1.h2h_bias"] = 1,
        ["enc._unfused.0.r_cell.i2h_weight"] = 2, ["x.weight"] = 3 })
  end)

  it("load_mxnet_parameters: MXNet 1.9.1 names inside a network; errors name the file", function()
    local f = MXF.lstm2
    local mxf = nd.load("spec/fixtures/gluon_rnn_lstm2.params")
    local nested = {}
    for k, v in pairs(mxf) do nested["0." .. k] = v end -- as a Sequential's first child
    local path = os.tmpname()
    nd.save(path, nested)
    local net = mx.gluon.nn.Sequential()
    net:add(rnn.LSTM(Hs, 2))
    net:initialize()
    rnn.load_mxnet_parameters(net, path)
    local out = net[1](T(f.x), { T(f.h0), T(f.c0) })
    assert.is_true(maxdiff(out, T(f.out)) < 1e-5)
    local small = mx.gluon.nn.Sequential()
    small:add(rnn.LSTM(Hs, 1))
    local ok, err = pcall(function() rnn.load_mxnet_parameters(small, path) end)
    os.remove(path)
    assert.is_false(ok)
    assert.truthy(err:find("^spec/gluon_rnn_spec%.lua:%d+: load_parameters: Parameter '0%.l1_"), err)
    assert.truthy(err:find(path, 1, true), err)
  end)

  it("use_sequence_length: outputs past each length are 0 and equal the cells' (valid_length)", function()
    local l = rnn.LSTM(Hs, 1, { use_sequence_length = true, bidirectional = true })
    l:initialize(mx.init.Uniform(0.5))
    local x = rand({ Tn, N, I }, 9)
    local vl = nd.array({ 2, 4 })
    local out = l(x, l:begin_state(N), vl)
    assert.equal(0, nd.max(nd.abs(out[{ { 3, 4 }, 1 }])):item())
    local o2 = l:_unfuse():unroll(Tn, x, { layout = "TNC", merge_outputs = true, valid_length = vl })
    assert.is_true(maxdiff(out, o2) < 1e-5)
    assert.has_error(function() l(x, l:begin_state(N)) end,
      "LSTM: sequence_length (N,) is required (built with use_sequence_length=true)")
  end)
end)
