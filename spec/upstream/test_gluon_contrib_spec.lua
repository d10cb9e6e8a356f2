-- MXNet 1.9.1's tests/python/unittest/test_gluon_contrib.py, ported (spec/upstream/README.md).
-- MXNet 1.9's gluon.contrib classes are luamx's gluon.nn / gluon.rnn / gluon.data ones
-- (MXNet 2.0's places); sampler indices are luamx's 1-based ones.
local mx = require("mx")
local nd = mx.nd
local gluon = mx.gluon
local nn, rnn = gluon.nn, gluon.rnn
local C = require("upstream.common")
local F = "test_gluon_contrib.py"
local case, skip = C.cases(it, function(why) pending(why) end)

-- check_rnn_cell: the cell unrolled on Symbols, its parameter and output names, the
-- inferred output shapes
local function sorted(list)
  table.sort(list)
  return list
end
local function rnn_steps(n)
  local r = {}
  for i = 0, n - 1 do r[#r + 1] = mx.sym.Variable("rnn_t" .. i .. "_data") end
  return r
end
local function rnn_shapes(n, s)
  local t = {}
  for i = 0, n - 1 do t["rnn_t" .. i .. "_data"] = s end
  return t
end
local function check_rnn_cell(cell, prefix, in_shape, out_shape, begin_state)
  in_shape, out_shape = in_shape or { 10, 50 }, out_shape or { 10, 100 }
  local outputs = cell:unroll(3, rnn_steps(3), { begin_state = begin_state })
  outputs = mx.sym.Group(outputs)
  assert.same({ prefix .. "h2h_bias", prefix .. "h2h_weight", prefix .. "i2h_bias",
    prefix .. "i2h_weight" }, sorted(cell:collect_params():keys()))
  assert.same({ prefix .. "t0_out_output", prefix .. "t1_out_output", prefix .. "t2_out_output" },
    outputs:list_outputs())
  local _, outs = outputs:infer_shape(rnn_shapes(3, in_shape))
  assert.same({ out_shape, out_shape, out_shape }, outs)
end

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

  for _, kind in ipairs { "RNN", "LSTM", "GRU" } do
    case(F, "test_conv" .. kind:lower(), function()
      local cell = rnn["Conv1D" .. kind .. "Cell"]({ 10, 50 }, 100, 3, 3, { prefix = "rnn_" })
      check_rnn_cell(cell, "rnn_", { 1, 10, 50 }, { 1, 100, 48 })
      cell = rnn["Conv2D" .. kind .. "Cell"]({ 10, 20, 50 }, 100, 3, 3, { prefix = "rnn_" })
      check_rnn_cell(cell, "rnn_", { 1, 10, 20, 50 }, { 1, 100, 18, 48 })
      cell = rnn["Conv3D" .. kind .. "Cell"]({ 10, 20, 30, 50 }, 100, 3, 3, { prefix = "rnn_" })
      check_rnn_cell(cell, "rnn_", { 1, 10, 20, 30, 50 }, { 1, 100, 18, 28, 48 })
    end)
  end

  case(F, "test_conv_fill_shape", function()
    local cell = rnn.Conv1DLSTMCell({ 0, 7 }, 10, { 3 }, { 3 })
    cell:hybridize()
    check_rnn_forward(cell, nd.ones({ 8, 3, 5, 7 }))
    assert.equal(5, cell.i2h_weight.shape[2])
  end)

  case(F, "test_lstmp", function()
    local nhid, nproj = 100, 64
    local cell = rnn.LSTMPCell(nhid, nproj, { prefix = "rnn_" })
    local outputs = mx.sym.Group((cell:unroll(3, rnn_steps(3))))
    assert.same({ "rnn_h2h_bias", "rnn_h2h_weight", "rnn_h2r_weight", "rnn_i2h_bias",
      "rnn_i2h_weight" }, sorted(cell:collect_params():keys()))
    assert.same({ "rnn_t0_out_output", "rnn_t1_out_output", "rnn_t2_out_output" },
      outputs:list_outputs())
    local _, outs = outputs:infer_shape(rnn_shapes(3, { 10, 50 }))
    assert.same({ { 10, nproj }, { 10, nproj }, { 10, nproj } }, outs)
  end)

  case(F, "test_vardrop", function()
    local function check_vardrop(drop_inputs, drop_states, drop_outputs)
      local cell = rnn.VariationalDropoutCell(rnn.RNNCell(100, { prefix = "rnn_" }),
        { drop_outputs = drop_outputs, drop_states = drop_states, drop_inputs = drop_inputs })
      cell:collect_params():initialize(mx.init.Xavier())
      local input_data = nd.random.uniform(0, 1, { 10, 3, 50 })
      local outputs1, outputs2 = mx.autograd.record(function()
        local o1 = cell:unroll(3, input_data, { merge_outputs = true })
        nd.waitall()
        local o2 = cell:unroll(3, input_data, { merge_outputs = true })
        return o1, o2
      end)
      assert.is_false(C.almost_equal(outputs1, outputs2))

      local outputs = cell:unroll(3, rnn_steps(3), { merge_outputs = false })
      outputs = mx.sym.Group(outputs)
      local _, outs = outputs:infer_shape(rnn_shapes(3, { 10, 50 }))
      assert.same({ { 10, 100 }, { 10, 100 }, { 10, 100 } }, outs)

      cell:reset()
      cell:hybridize()
      local outputs3, outputs4 = mx.autograd.record(function()
        local o3 = cell:unroll(3, input_data, { merge_outputs = true })
        nd.waitall()
        local o4 = cell:unroll(3, input_data, { merge_outputs = true })
        return o3, o4
      end)
      assert.is_false(C.almost_equal(outputs3, outputs4))
      assert.is_false(C.almost_equal(outputs1, outputs3))
    end
    check_vardrop(0.5, 0.5, 0.5)
    check_vardrop(0.5, 0, 0.5)
  end)

  case(F, "test_concurrent", function()
    local model = nn.HybridConcatenate({ axis = 2 })
    model:add(nn.Dense(128, { activation = "tanh", in_units = 10 }))
    model:add(nn.Dense(64, { activation = "tanh", in_units = 10 }))
    model:add(nn.Dense(32, { in_units = 10 }))
    local model2 = nn.Concatenate({ axis = 2 })
    model2:add(nn.Dense(128, { activation = "tanh", in_units = 10 }))
    model2:add(nn.Dense(64, { activation = "tanh", in_units = 10 }))
    model2:add(nn.Dense(32, { in_units = 10 }))
    -- symbol
    local y = model(mx.sym.var("data"))
    assert.equal(7, #y:list_arguments())
    -- ndarray
    model:initialize(mx.init.Xavier({ magnitude = 2.24 }))
    model2:initialize(mx.init.Xavier({ magnitude = 2.24 }))
    local x = model(nd.zeros({ 32, 10 }))
    local x2 = model2(nd.zeros({ 32, 10 }))
    assert.same({ 32, 224 }, x:shape())
    assert.same({ 32, 224 }, x2:shape())
    x:wait_to_read()
    x2:wait_to_read()
  end)

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
