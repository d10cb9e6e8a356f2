-- MXNet 1.9.1's tests/python/unittest/test_gluon_contrib.py, ported (spec/upstream/README.md).
-- MXNet 1.9's gluon.contrib classes are luamx's gluon.nn / gluon.rnn / gluon.data ones
-- (MXNet 2.0's places); sampler indices are luamx's 1-based ones.
local mx = require("mx")
local nd = mx.nd
local gluon = mx.gluon
local nn, rnn = gluon.nn, gluon.rnn
local C = require("upstream.common")
local F = "test_gluon_contrib.py"
local case, skip, fails = C.cases(it, function(why) pending(why) end)

local ON_SYMBOLS = "calls Gluon cells with Parameters on Symbols (1.x's prefixed parameter names; "
  .. "a Gluon block called on Symbols is offered for parameterless blocks only)"

-- check_rnn_forward: unroll merged and not, backward through both
local function check_rnn_forward(layer, inputs)
  inputs:attach_grad()
  layer:initialize()
  mx.autograd.record(function()
    local out = layer:unroll(3, inputs, { merge_outputs = true })
    out:backward()
    local outs = layer:unroll(3, inputs, { merge_outputs = false })
    outs[1]:backward()
  end)
  nd.waitall()
end

describe("MXNet 1.9.1 tests/python/unittest", function()
  case(F, "test_rnn_cells", function()
    check_rnn_forward(rnn.Conv1DLSTMCell({ 5, 7 }, 10, { 3 }, { 3 }), nd.ones({ 8, 3, 5, 7 }))
    check_rnn_forward(rnn.Conv1DRNNCell({ 5, 7 }, 10, { 3 }, { 3 }), nd.ones({ 8, 3, 5, 7 }))
    check_rnn_forward(rnn.Conv1DGRUCell({ 5, 7 }, 10, { 3 }, { 3 }), nd.ones({ 8, 3, 5, 7 }))
    local net = rnn.SequentialRNNCell()
    net:add(rnn.Conv1DLSTMCell({ 5, 7 }, 10, { 3 }, { 3 }))
    net:add(rnn.Conv1DRNNCell({ 10, 5 }, 11, { 3 }, { 3 }))
    net:add(rnn.Conv1DGRUCell({ 11, 3 }, 12, { 3 }, { 3 }))
    check_rnn_forward(net, nd.ones({ 8, 3, 5, 7 }))
  end)

  fails(F, "test_convrnn", ON_SYMBOLS)
  fails(F, "test_convlstm", ON_SYMBOLS)
  fails(F, "test_convgru", ON_SYMBOLS)

  case(F, "test_conv_fill_shape", function()
    local cell = rnn.Conv1DLSTMCell({ 0, 7 }, 10, { 3 }, { 3 })
    cell:hybridize()
    check_rnn_forward(cell, nd.ones({ 8, 3, 5, 7 }))
    assert.equal(5, cell.i2h_weight.shape[2])
  end)

  fails(F, "test_lstmp", ON_SYMBOLS)
  fails(F, "test_vardrop", "its second half unrolls the cell on Symbols: " .. ON_SYMBOLS)
  fails(F, "test_concurrent", "calls the HybridConcatenate of Dense layers on a Symbol: " .. ON_SYMBOLS)

  case(F, "test_identity", function()
    local model = nn.Identity()
    local x = nd.random.uniform(0, 1, { 128, 33, 64 })
    C.assert_almost_equal(model(x), x)
  end)

  skip(F, "test_sparse_embedding", "row_sparse gradients (SparseEmbedding) are not offered")

  case(F, "test_pixelshuffle1d", function()
    local x = nd.arange(0, 1 * 4 * 3):reshape(1, 4, 3)
    local y = nn.PixelShuffle1D(2)(x)
    assert.same({ 1, 2, 6 }, y:shape())
    C.assert_almost_equal(y, { { { 0, 3, 1, 4, 2, 5 }, { 6, 9, 7, 10, 8, 11 } } })
  end)

  case(F, "test_pixelshuffle2d", function()
    local x = nd.arange(0, 1 * 12 * 2 * 3):reshape(1, 12, 2, 3)
    local y = nn.PixelShuffle2D({ 2, 3 })(x)
    assert.same({ 1, 2, 4, 9 }, y:shape())
    C.assert_almost_equal(y, {
      { { { 0, 6, 12, 1, 7, 13, 2, 8, 14 }, { 18, 24, 30, 19, 25, 31, 20, 26, 32 },
          { 3, 9, 15, 4, 10, 16, 5, 11, 17 }, { 21, 27, 33, 22, 28, 34, 23, 29, 35 } },
        { { 36, 42, 48, 37, 43, 49, 38, 44, 50 }, { 54, 60, 66, 55, 61, 67, 56, 62, 68 },
          { 39, 45, 51, 40, 46, 52, 41, 47, 53 }, { 57, 63, 69, 58, 64, 70, 59, 65, 71 } } } })
  end)

  case(F, "test_pixelshuffle3d", function()
    local x = nd.arange(0, 1 * 4 * 2 * 3 * 4):reshape(1, 4, 2, 3, 4)
    local y = nn.PixelShuffle3D({ 2, 1, 2 })(x)
    assert.same({ 1, 1, 4, 3, 8 }, y:shape())
    C.assert_almost_equal(y, {
      { { { { 0, 24, 1, 25, 2, 26, 3, 27 }, { 4, 28, 5, 29, 6, 30, 7, 31 },
            { 8, 32, 9, 33, 10, 34, 11, 35 } },
          { { 48, 72, 49, 73, 50, 74, 51, 75 }, { 52, 76, 53, 77, 54, 78, 55, 79 },
            { 56, 80, 57, 81, 58, 82, 59, 83 } },
          { { 12, 36, 13, 37, 14, 38, 15, 39 }, { 16, 40, 17, 41, 18, 42, 19, 43 },
            { 20, 44, 21, 45, 22, 46, 23, 47 } },
          { { 60, 84, 61, 85, 62, 86, 63, 87 }, { 64, 88, 65, 89, 66, 90, 67, 91 },
            { 68, 92, 69, 93, 70, 94, 71, 95 } } } } })
  end)

  skip(F, "test_datasets", "needs the WikiText-2 download (contrib.data.text is not offered)")

  case(F, "test_sampler", function()
    local function list(s)
      local r = {}
      for i in s:iter() do r[#r + 1] = i end
      return r
    end
    local got = list(gluon.data.IntervalSampler(10, 3))
    table.sort(got)
    assert.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, got) -- range(10), 1-based
    assert.same({ 1, 4, 7, 10 }, list(gluon.data.IntervalSampler(10, 3, false)))
  end)

  case(F, "test_contrib_unroll", function()
    -- TestRNNLayer: a HybridBlock whose forward is dynamic_unroll of its cell
    local TestRNNLayer = gluon.HybridBlock:extend("TestRNNLayer")
    function TestRNNLayer:__init(cell_type, hidden_size, layout)
      gluon.HybridBlock.__init(self)
      self.cell = cell_type(hidden_size)
      self.layout = layout
    end
    function TestRNNLayer:forward(inputs, states, valid_length)
      return rnn.dynamic_unroll(self.cell, inputs, states, { valid_length = valid_length,
        layout = self.layout })
    end
    local function suffix(name) return (name:gsub("^cell%.", "")) end
    local function check_unroll(cell_type, num_states, layout)
      local batch_size, input_size, hidden_size, seq_len = 20, 50, 30, 10
      local rnn_data = layout == "TNC" and nd.random.normal(0, 1, { seq_len, batch_size, input_size })
        or nd.random.normal(0, 1, { batch_size, seq_len, input_size })
      local valid_length = nd.round(nd.random.uniform(1, 10, { batch_size }))
      local states = {}
      for i = 1, num_states do states[i] = nd.random.normal(0, 1, { batch_size, hidden_size }) end
      local cell = cell_type(hidden_size)
      cell:initialize()
      cell(layout == "TNC" and rnn_data[1] or rnn_data[{ {}, 1 }], states)
      local params1 = cell:collect_params()
      local orig = {}
      for name, p in params1:items() do orig[name] = p:data():copy() end
      local trainer = gluon.Trainer(params1, "sgd", { learning_rate = 0.03 })
      local res1, states1 = mx.autograd.record(function()
        return cell:unroll(seq_len, rnn_data, { begin_state = states, valid_length = valid_length,
          layout = layout, merge_outputs = true })
      end)
      res1:backward()
      trainer:step(batch_size)
      local configs = { function() end, function(l) l:hybridize() end,
        function(l) l:hybridize { inline_limit = 0 } end,
        function(l) l:hybridize { static_alloc = true } end,
        function(l) l:hybridize { static_alloc = true, static_shape = true } end }
      for _, config in ipairs(configs) do
        local layer = TestRNNLayer(cell_type, hidden_size, layout)
        layer:initialize()
        config(layer)
        layer(rnn_data, states, valid_length)
        local params2 = layer:collect_params()
        for name, p in params2:items() do p:set_data(orig[suffix(name)]:copy()) end
        local trainer2 = gluon.Trainer(params2, "sgd", { learning_rate = 0.03 })
        local res2, states2 = mx.autograd.record(function() return layer(rnn_data, states, valid_length) end)
        C.assert_almost_equal(res1, res2, 0.001, 0.0001)
        assert.equal(#states1, #states2)
        for i = 1, #states1 do C.assert_almost_equal(states1[i], states2[i], 0.001, 0.0001) end
        res2:backward()
        trainer2:step(batch_size)
        for name, p in params2:items() do
          C.assert_almost_equal(params1[suffix(name)]:data(), p:data(), 0.001, 0.0001)
        end
      end
    end
    for _, ct in ipairs { { rnn.RNNCell, 1 }, { rnn.LSTMCell, 2 }, { rnn.GRUCell, 1 } } do
      check_unroll(ct[1], ct[2], "TNC")
      check_unroll(ct[1], ct[2], "NTC")
    end
  end)
  case(F, "test_ModulatedDeformableConvolution", function()
    local DeformableConvolution = nn.DeformableConvolution
    local net = nn.HybridSequential()
    net:add(
      DeformableConvolution(10, { kernel_size = { 3, 3 }, strides = 1, padding = 0 }),
      DeformableConvolution(10, { kernel_size = { 1, 1 }, strides = 1, padding = 0 }),
      DeformableConvolution(10, { kernel_size = { 5, 5 }, strides = 1, padding = 0 }),
      DeformableConvolution(10, { kernel_size = { 3, 5 }, strides = 1, padding = 0 }),
      DeformableConvolution(10, { kernel_size = { 5, 1 }, strides = 1, padding = 0,
        num_deformable_group = 2 }),
      DeformableConvolution(10, { kernel_size = { 3, 2 }, strides = 1, padding = 0, activation = "relu",
        offset_use_bias = false, use_bias = false }),
      DeformableConvolution(10, { kernel_size = { 3, 2 }, strides = 1, padding = 0, activation = "relu",
        offset_use_bias = false }),
      DeformableConvolution(10, { kernel_size = { 3, 2 }, strides = 1, padding = 0, activation = "relu",
        use_bias = false }),
      DeformableConvolution(10, { kernel_size = { 3, 2 }, strides = 1, padding = 0, offset_use_bias = false,
        use_bias = false }),
      DeformableConvolution(10, { kernel_size = { 3, 2 }, strides = 1, padding = 0,
        offset_use_bias = false }),
      DeformableConvolution(12, { kernel_size = { 3, 2 }, strides = 1, padding = 0, use_bias = false }),
      DeformableConvolution(12, { kernel_size = { 3, 2 }, strides = 1, padding = 0, use_bias = false,
        num_deformable_group = 4 })
    )
    local ctx = mx.cpu()
    net:initialize(nil, ctx, { force_reinit = true })
    net:hybridize()
    local x = nd.random.uniform(0, 1, { 8, 5, 30, 31 }, { ctx = ctx })
    mx.autograd.record(function()
      local y = net(x)
      y:wait_to_read()
    end)
  end)
end)
