-- MXNet 1.9.1's tests/python/unittest/test_rnn.py, ported (spec/upstream/README.md).
-- cell.params._params is cell:params()._params; output indices and axes are 1-based.
local mx = require("mx")
local nd = mx.nd
local S = mx.sym
local C = require("upstream.common")
local F = "test_rnn.py"
local case = C.cases(it, function(why) pending(why) end)

local function keys(t)
  local r = {}
  for k in pairs(t) do r[#r + 1] = k end
  table.sort(r)
  return r
end
local function steps(n)
  local r = {}
  for i = 0, n - 1 do r[#r + 1] = S.Variable("rnn_t" .. i .. "_data") end
  return r
end
local function shapes(n, s)
  local t = {}
  for i = 0, n - 1 do t["rnn_t" .. i .. "_data"] = s end
  return t
end
local PARAMS = { "rnn_h2h_bias", "rnn_h2h_weight", "rnn_i2h_bias", "rnn_i2h_weight" }
local OUTS = { "rnn_t0_out_output", "rnn_t1_out_output", "rnn_t2_out_output" }
local function check_cell(cell)
  local outputs = S.Group((cell:unroll(3, steps(3))))
  assert.same(PARAMS, keys(cell:params()._params))
  assert.same(OUTS, outputs:list_outputs())
  local _, outs = outputs:infer_shape(shapes(3, { 10, 50 }))
  assert.same({ { 10, 100 }, { 10, 100 }, { 10, 100 } }, outs)
end

describe("MXNet 1.9.1 tests/python/unittest", function()
  case(F, "test_deprecated (a cell subclassed from mx.rnn.BaseRNNCell)", function()
    local RNNCell = mx.rnn.BaseRNNCell:extend("MyRNNCell")
    function RNNCell:__init(num_hidden, activation, prefix, params)
      mx.rnn.BaseRNNCell.__init(self, prefix or "rnn_", params)
      self._num_hidden, self._activation = num_hidden, activation or "tanh"
      self._iW, self._iB = self:params():get("i2h_weight"), self:params():get("i2h_bias")
      self._hW, self._hB = self:params():get("h2h_weight"), self:params():get("h2h_bias")
    end
    function RNNCell:state_info() return { { shape = { 0, self._num_hidden }, __layout__ = "NC" } } end
    function RNNCell:step(inputs, states)
      self._counter = self._counter + 1
      local name = string.format("%st%d_", self._prefix, self._counter)
      local i2h = S.FullyConnected(inputs, { weight = self._iW, bias = self._iB,
        num_hidden = self._num_hidden, name = name .. "i2h" })
      local h2h = S.FullyConnected(states[1], { weight = self._hW, bias = self._hB,
        num_hidden = self._num_hidden, name = name .. "h2h" })
      local output = self:_get_activation(i2h + h2h, self._activation, name .. "out")
      return output, { output }
    end
    check_cell(RNNCell(100, nil, "rnn_"))
  end)

  case(F, "test_rnn", function() check_cell(mx.rnn.RNNCell(100, { prefix = "rnn_" })) end)

  case(F, "test_lstm", function()
    for _, act in ipairs { "", "relu", "sigmoid", "softrelu", "tanh", "softsign" } do
      local cell
      if act == "" then
        cell = mx.gluon.rnn.LSTMCell(100, { prefix = "rnn_" })
      else
        cell = mx.gluon.rnn.LSTMCell(100, { prefix = "rnn_", activation = act,
          recurrent_activation = act })
      end
      local outputs = S.Group((cell:unroll(3, steps(3))))
      assert.same(PARAMS, keys(cell:collect_params()._map))
      assert.same(OUTS, outputs:list_outputs())
      local _, outs = outputs:infer_shape(shapes(3, { 10, 50 }))
      assert.same({ { 10, 100 }, { 10, 100 }, { 10, 100 } }, outs)
    end
  end)

  case(F, "test_lstm_forget_bias", function()
    local forget_bias = 2.0
    local stack = mx.rnn.SequentialRNNCell()
    stack:add(mx.rnn.LSTMCell(100, { forget_bias = forget_bias, prefix = "l0_" }))
    stack:add(mx.rnn.LSTMCell(100, { forget_bias = forget_bias, prefix = "l1_" }))
    local sym = stack:unroll(1, S.Variable("data"), { merge_outputs = true })
    local mod = mx.mod.Module(sym, { label_names = {}, context = mx.cpu(0) })
    mod:bind { data_shapes = { { "data", { 32, 1, 200 } } } }
    mod:init_params()
    local bias_name
    for _, n in ipairs(sym:list_arguments()) do
      if not bias_name and n:match("i2h_bias$") then bias_name = n end
    end
    local want = {}
    for i = 1, 400 do want[i] = (i > 100 and i <= 200) and forget_bias or 0 end
    assert.same(want, mod:get_params()[bias_name]:tolist())
  end)

  case(F, "test_gru", function() check_cell(mx.rnn.GRUCell(100, { prefix = "rnn_" })) end)

  case(F, "test_residual", function()
    local cell = mx.rnn.ResidualCell(mx.rnn.GRUCell(50, { prefix = "rnn_" }))
    local outputs = S.Group((cell:unroll(2, steps(2))))
    assert.same(PARAMS, keys(cell:params()._params))
    local _, outs = outputs:infer_shape(shapes(2, { 10, 50 }))
    assert.same({ { 10, 50 }, { 10, 50 } }, outs)
    local r = outputs:eval(mx.cpu(), { rnn_t0_data = nd.ones { 10, 50 }, rnn_t1_data = nd.ones { 10, 50 },
      rnn_i2h_weight = nd.zeros { 150, 50 }, rnn_i2h_bias = nd.zeros { 150 },
      rnn_h2h_weight = nd.zeros { 150, 50 }, rnn_h2h_bias = nd.zeros { 150 } })
    C.assert_almost_equal(r[1], nd.ones { 10, 50 })
    C.assert_almost_equal(r[2], nd.ones { 10, 50 })
  end)

  case(F, "test_residual_bidirectional", function()
    local cell = mx.rnn.ResidualCell(mx.rnn.BidirectionalCell(mx.rnn.GRUCell(25, { prefix = "rnn_l_" }),
      mx.rnn.GRUCell(25, { prefix = "rnn_r_" })))
    local outputs = S.Group((cell:unroll(2, steps(2), { merge_outputs = false })))
    assert.same({ "rnn_l_h2h_bias", "rnn_l_h2h_weight", "rnn_l_i2h_bias", "rnn_l_i2h_weight",
      "rnn_r_h2h_bias", "rnn_r_h2h_weight", "rnn_r_i2h_bias", "rnn_r_i2h_weight" },
      keys(cell:params()._params))
    local _, outs = outputs:infer_shape(shapes(2, { 10, 50 }))
    assert.same({ { 10, 50 }, { 10, 50 } }, outs)
    local args = { rnn_t0_data = nd.ones { 10, 50 } + 5, rnn_t1_data = nd.ones { 10, 50 } + 5 }
    for _, d in ipairs { "l", "r" } do
      args["rnn_" .. d .. "_i2h_weight"] = nd.zeros { 75, 50 }
      args["rnn_" .. d .. "_i2h_bias"] = nd.zeros { 75 }
      args["rnn_" .. d .. "_h2h_weight"] = nd.zeros { 75, 25 }
      args["rnn_" .. d .. "_h2h_bias"] = nd.zeros { 75 }
    end
    local r = outputs:eval(mx.cpu(), args)
    C.assert_almost_equal(r[1], nd.ones { 10, 50 } + 5)
    C.assert_almost_equal(r[2], nd.ones { 10, 50 } + 5)
  end)

  case(F, "test_stack", function()
    local cell = mx.rnn.SequentialRNNCell()
    for i = 0, 4 do
      local c = mx.rnn.LSTMCell(100, { prefix = "rnn_stack" .. i .. "_" })
      cell:add(i == 1 and mx.rnn.ResidualCell(c) or c)
    end
    local outputs = S.Group((cell:unroll(3, steps(3))))
    local ks = {}
    for _, k in ipairs(keys(cell:params()._params)) do ks[k] = true end
    for i = 0, 4 do
      for _, p in ipairs { "h2h_weight", "h2h_bias", "i2h_weight", "i2h_bias" } do
        assert.is_truthy(ks["rnn_stack" .. i .. "_" .. p])
      end
    end
    assert.same({ "rnn_stack4_t0_out_output", "rnn_stack4_t1_out_output", "rnn_stack4_t2_out_output" },
      outputs:list_outputs())
    local _, outs = outputs:infer_shape(shapes(3, { 10, 50 }))
    assert.same({ { 10, 100 }, { 10, 100 }, { 10, 100 } }, outs)
  end)

  case(F, "test_bidirectional", function()
    local cell = mx.rnn.BidirectionalCell(mx.rnn.LSTMCell(100, { prefix = "rnn_l0_" }),
      mx.rnn.LSTMCell(100, { prefix = "rnn_r0_" }), { output_prefix = "rnn_bi_" })
    local outputs = S.Group((cell:unroll(3, steps(3))))
    assert.same({ "rnn_bi_t0_output", "rnn_bi_t1_output", "rnn_bi_t2_output" }, outputs:list_outputs())
    local _, outs = outputs:infer_shape(shapes(3, { 10, 50 }))
    assert.same({ { 10, 200 }, { 10, 200 }, { 10, 200 } }, outs)
  end)

  case(F, "test_zoneout", function()
    local cell = mx.rnn.ZoneoutCell(mx.rnn.RNNCell(100, { prefix = "rnn_" }), 0.5, 0.5)
    local outputs = S.Group((cell:unroll(3, steps(3))))
    local _, outs = outputs:infer_shape(shapes(3, { 10, 50 }))
    assert.same({ { 10, 100 }, { 10, 100 }, { 10, 100 } }, outs)
  end)

  case(F, "test_unfuse", function()
    local cell = mx.rnn.FusedRNNCell(100, { num_layers = 3, mode = "lstm", prefix = "test_",
      bidirectional = true, dropout = 0.5 })
    cell = cell:unfuse()
    local outputs = S.Group((cell:unroll(3, steps(3))))
    assert.same({ "test_bi_l2_t0_output", "test_bi_l2_t1_output", "test_bi_l2_t2_output" },
      outputs:list_outputs())
    local _, outs = outputs:infer_shape(shapes(3, { 10, 50 }))
    assert.same({ { 10, 200 }, { 10, 200 }, { 10, 200 } }, outs)
  end)

  local function check_conv(cls)
    local cell = cls { input_shape = { 1, 3, 16, 10 }, num_hidden = 10, h2h_kernel = { 3, 3 },
      h2h_dilate = { 1, 1 }, i2h_kernel = { 3, 3 }, i2h_stride = { 1, 1 }, i2h_pad = { 1, 1 },
      i2h_dilate = { 1, 1 }, prefix = "rnn_" }
    local outputs = S.Group((cell:unroll(3, steps(3))))
    assert.same(PARAMS, keys(cell:params()._params))
    assert.same(OUTS, outputs:list_outputs())
    local _, outs = outputs:infer_shape(shapes(3, { 1, 3, 16, 10 }))
    assert.same({ { 1, 10, 16, 10 }, { 1, 10, 16, 10 }, { 1, 10, 16, 10 } }, outs)
  end
  case(F, "test_convrnn", function() check_conv(mx.rnn.ConvRNNCell) end)
  case(F, "test_convlstm", function() check_conv(mx.rnn.ConvLSTMCell) end)
  case(F, "test_convgru", function() check_conv(mx.rnn.ConvGRUCell) end)

  case(F, "test_encode_sentences", function()
    local result, vocab = mx.rnn.encode_sentences({ { "a", "b", "c" }, { "b", "c", "d" } },
      { vocab = { a = 1, b = 2, c = 3 }, invalid_label = -1, invalid_key = "\n", start_label = 0,
        unknown_token = "UNK" })
    assert.same({ a = 1, b = 2, c = 3, UNK = 0 }, vocab)
    assert.same({ { 1, 2, 3 }, { 2, 3, 0 } }, result)
  end)
end)
