-- gluon.rnn's cells from MXNet 1.9's gluon.contrib.rnn: LSTMPCell and the convolutional
-- cells against MXNet 1.9.1 (spec/fixtures/gluon_contrib_cells_mxnet.lua,
-- tools/fixtures/make_contrib_cells_fixture.py) and VariationalDropoutCell's masks (one per
-- sequence, the same at every step).
local mx = require("mx")
local H = require("helpers.la")
local nd, rnn, ag = mx.nd, mx.gluon.rnn, mx.autograd

local FILE = "gluon_contrib_cells_spec.lua"
local FX = dofile("spec/fixtures/gluon_contrib_cells_mxnet.lua")
local function T(f) return nd.reshape(nd.array(f.data), f.shape) end
local function maxdiff(a, b) return nd.max(nd.abs(nd.sub(a, b))):item() end
local function fails(f, ...) return H.assert_error(f, FILE, ...) end

describe("gluon.rnn.LSTMPCell", function()
  it("unrolls as MXNet 1.9.1's contrib LSTMPCell (outputs, projected and cell states)", function()
    local cell = rnn.LSTMPCell(5, 3, { input_size = 4 })
    cell:initialize()
    for _, k in ipairs { "i2h_weight", "h2h_weight", "h2r_weight", "i2h_bias", "h2h_bias" } do
      cell[k]:set_data(T(FX[k]))
    end
    local out, states = cell:unroll(3, T(FX.x), { layout = "NTC", merge_outputs = true })
    assert.are.same({ 2, 3, 3 }, out:shape())
    assert.is_true(maxdiff(out, T(FX.out)) < 1e-6)
    assert.is_true(maxdiff(states[1], T(FX.r)) < 1e-6)
    assert.is_true(maxdiff(states[2], T(FX.c)) < 1e-6)
  end)

  it("defers input_size, gives state_info, gradients and a repr; names its errors", function()
    local cell = rnn.LSTMPCell(6, 2)
    cell:initialize()
    assert.are.same({ { 4, 2 }, { 4, 6 } }, { cell:state_info(4)[1].shape, cell:state_info(4)[2].shape })
    local x = nd.random.uniform(-1, 1, { 4, 3 })
    local s = cell:begin_state(4)
    local out = ag.record(function()
      local o = cell(x, s)
      return o
    end)
    out:backward()
    assert.are.same({ 4, 2 }, out:shape())
    assert.are.same({ 24, 3 }, cell.i2h_weight:data():shape())
    assert.are.same({ 24, 2 }, cell.h2h_weight:data():shape())
    assert.are.same({ 2, 6 }, cell.h2r_weight:grad():shape())
    assert.is_true(nd.sum(nd.abs(cell.h2r_weight:grad())):item() > 0)
    assert.matches("LSTMPCell%(3 %-> 24 %-> 2%)", tostring(cell))
    fails(function(at) at() rnn.LSTMPCell(6, 0) end, "LSTMPCell", "projection_size")
    fails(function(at) at() cell(x, { s[1] }) end, "LSTMPCell", "states must be a list of 2")
  end)
end)

describe("gluon.rnn.VariationalDropoutCell", function()
  it("drops the same units at every step of a sequence, new ones after reset, none in predict mode",
      function()
    mx.random.seed(3)
    local base = rnn.RNNCell(50, { input_size = 20 })
    local cell = rnn.VariationalDropoutCell(base, 0.5, 0.5, 0.5)
    cell:initialize(mx.init.Xavier())
    local x = nd.random.uniform(0.5, 1, { 4, 3, 20 })
    local out1, masks = ag.record(function()
      local o = cell:unroll(3, x, { merge_outputs = true })
      return o, { cell.drop_inputs_mask, cell.drop_states_mask, cell.drop_outputs_mask }
    end)
    -- the masks: 0 or 1 / (1 - p), of the input's, state's and output's shapes
    assert.are.same({ 4, 20 }, masks[1]:shape())
    assert.are.same({ 4, 50 }, masks[2]:shape())
    assert.are.same({ 4, 50 }, masks[3]:shape())
    for _, m in ipairs(masks) do
      for _, v in ipairs(m:reshape(-1):tolist()) do assert.is_true(v == 0 or v == 2) end
    end
    -- a dropped output unit is 0 at every step
    local dropped = nd.equal_scalar(masks[3], { scalar = 0 })
    assert.is_true(nd.sum(dropped):item() > 0)
    for t = 1, 3 do
      assert.equal(0, nd.sum(nd.abs(nd.mul(out1[{ {}, t }], dropped))):item())
    end
    -- the same steps by hand with those masks give the same outputs
    local h = nd.zeros({ 4, 50 })
    for t = 1, 3 do
      local xt = nd.mul(x[{ {}, t }], masks[1])
      local out = base:forward(xt, { nd.mul(h, masks[2]) })
      h = out
      assert.is_true(maxdiff(nd.mul(out, masks[3]), out1[{ {}, t }]) < 1e-6)
    end
    local out2 = ag.record(function() return (cell:unroll(3, x, { merge_outputs = true })) end)
    assert.is_true(maxdiff(out1, out2) > 0) -- new masks for a new sequence
    -- predict mode: the base cell alone
    local pred = cell:unroll(3, x, { merge_outputs = true })
    assert.is_nil(cell.drop_outputs_mask)
    h = nd.zeros({ 4, 50 })
    for t = 1, 3 do
      h = base:forward(x[{ {}, t }], { h })
      assert.is_true(maxdiff(h, pred[{ {}, t }]) < 1e-6)
    end
  end)

  it("names its errors; the calling convention", function()
    fails(function(at) at() rnn.VariationalDropoutCell(rnn.RNNCell(3), 1.5) end,
      "VariationalDropoutCell", "drop_inputs must be a number in [0, 1)")
    fails(function(at) at() rnn.VariationalDropoutCell(5) end, "VariationalDropoutCell", "base_cell")
    local c = rnn.VariationalDropoutCell { base_cell = rnn.GRUCell(3), drop_states = 0.2 }
    assert.matches("drop_states = 0.2", tostring(c))
  end)
end)

describe("gluon.rnn.Conv1D/2D/3D RNN, LSTM and GRU cells", function()
  local function check(cell, fx)
    cell:initialize()
    local x = T(fx.x)
    cell(x[{ {}, 1 }], cell:begin_state(x:shape()[1]))
    for _, k in ipairs { "i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias" } do
      cell[k]:set_data(T(fx[k]))
    end
    local out, states = cell:unroll(x:shape()[2], x, { layout = "NTC", merge_outputs = true })
    assert.is_true(maxdiff(out, T(fx.out)) < 1e-5)
    assert.is_true(maxdiff(states[1], T(fx.s1)) < 1e-5)
    if fx.s2 then assert.is_true(maxdiff(states[2], T(fx.s2)) < 1e-5) end
  end

  it("unroll as MXNet 1.9.1's contrib cells (pads, dilations, activations)", function()
    check(rnn.Conv2DLSTMCell({ 2, 5, 4 }, 3, { 3, 3 }, { 3, 3 }, { 1, 0 }), FX.conv.conv2d_lstm)
    check(rnn.Conv1DGRUCell({ 3, 6 }, 2, 3, 5, { i2h_dilate = 2, activation = "relu" }), FX.conv.conv1d_gru)
    check(rnn.Conv3DRNNCell({ 1, 3, 4, 3 }, 2, 2, 3, { h2h_dilate = 2 }), FX.conv.conv3d_rnn)
  end)

  it("infer in_channels (MXNet's test_conv_fill_shape), give states, hybridize, name errors", function()
    local cell = rnn.Conv1DLSTMCell({ 0, 7 }, 10, { 3 }, { 3 })
    cell:initialize()
    cell:hybridize()
    local x = nd.ones({ 8, 3, 5, 7 })
    x:attach_grad()
    local out = ag.record(function() return (cell:unroll(3, x, { merge_outputs = true })) end)
    out:backward()
    assert.are.same({ 8, 3, 10, 5 }, out:shape())
    assert.equal(5, cell.i2h_weight:data():shape()[2])
    assert.are.same({ { 4, 10, 5 }, { 4, 10, 5 } },
      { cell:state_info(4)[1].shape, cell:state_info(4)[2].shape })
    assert.matches("Conv1DLSTMCell%(5 %-> 40, tanh, NCW%)", tostring(cell))
    fails(function(at) at() rnn.Conv2DRNNCell({ 3, 4, 4 }, 2, 3, 2) end, "Conv2DRNNCell",
      "h2h_kernel must be odd")
    fails(function(at) at() rnn.Conv2DGRUCell({ 3, 4 }, 2, 3, 3) end, "Conv2DGRUCell", "input_shape")
    fails(function(at) at() rnn.Conv1DRNNCell({ 3, 4 }, 2, 3, 3, { conv_layout = "NWC" }) end,
      "Conv1DRNNCell", "channel-first")
  end)
end)

describe("gluon.rnn.dynamic_unroll", function()
  it("is the cell's unroll, merged, masked by valid_length; input dropout shared along time", function()
    mx.random.seed(4)
    local c = rnn.GRUCell(4, { input_size = 3 })
    c:initialize()
    local x = nd.random.uniform(-1, 1, { 2, 5, 3 })
    local vl = nd.array { 2, 5 }
    local o, s = rnn.dynamic_unroll(c, x, c:begin_state(2), { layout = "NTC", valid_length = vl })
    local o2, s2 = c:unroll(5, x, { layout = "NTC", valid_length = vl, merge_outputs = true })
    assert.equal(0, maxdiff(o, o2))
    assert.equal(0, maxdiff(s[1], s2[1]))
    assert.equal(0, nd.sum(nd.abs(o[{ 1, { 3, 5 } }])):item())
    -- train mode, drop_inputs 0.5: one mask for every step: an input feature dropped at
    -- step 1 is dropped at every step (the output equals the unroll of the masked input)
    local ones = nd.ones({ 2, 5, 3 })
    local id = rnn.RNNCell(3, { input_size = 3, activation = "relu" })
    id:initialize(mx.init.Zero())
    id.i2h_weight:set_data(nd.eye(3))
    local out = mx.autograd.record(function()
      return (rnn.dynamic_unroll(id, ones, id:begin_state(2), 0.5, 0, "NTC"))
    end)
    for t = 2, 5 do assert.equal(0, maxdiff(out[{ {}, t }], out[{ {}, 1 }])) end
    fails(function(at) at() rnn.dynamic_unroll(id, ones, nil, 1.5) end, "dynamic_unroll", "drop_inputs")
  end)
end)
