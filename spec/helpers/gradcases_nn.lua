-- spec/helpers/gradcases_nn.lua — the gradient-check cases of the nn-side ops (cnn, pooling,
-- normalisation, activations, sequence ops, embedding/layer_norm/attention, the fused RNN,
-- the graph ops), in spec/helpers/gradcases.lua's format; it adds them to its table.
return function(cases, with)

  ---------------------------------------------------------------- cnn ops
  -- conv (convolution, deconvolution)
  cases.convolution = {
    { name = "1-d", inputs = { { 2, 2, 6 }, { 3, 2, 3 }, { 3 } }, opts = { kernel = { 3 } } },
    { name = "2-d pad stride", inputs = { { 2, 2, 5, 6 }, { 3, 2, 3, 2 }, { 3 } },
      opts = { kernel = { 3, 2 }, pad = { 1, 1 }, stride = { 2, 1 } } },
    { name = "2-d dilate no_bias", inputs = { { 1, 2, 6, 5 }, { 2, 2, 2, 2 } },
      opts = { kernel = { 2, 2 }, dilate = { 2, 1 }, no_bias = true } },
    { name = "2-d groups", inputs = { { 1, 4, 4, 4 }, { 6, 2, 2, 2 }, { 6 } },
      opts = { kernel = { 2, 2 }, num_group = 2 } },
    { name = "2-d depthwise relu", inputs = { { 1, 3, 4, 4 }, { 3, 1, 3, 3 }, { 3 } },
      opts = { kernel = { 3, 3 }, num_group = 3, pad = { 1, 1 }, act_type = "relu" } },
    { name = "3-d", inputs = { { 1, 2, 3, 4, 3 }, { 2, 2, 2, 2, 2 }, { 2 } },
      opts = { kernel = { 2, 2, 2 }, stride = { 1, 2, 1 }, pad = { 1, 0, 0 } } },
    { name = "2-d NHWC", inputs = { { 1, 4, 5, 2 }, { 3, 2, 2, 2 }, { 3 } },
      opts = { kernel = { 2, 2 }, layout = "NHWC", stride = { 2, 1 } } },
  }
  cases.deconvolution = {
    { name = "2-d bias", inputs = { { 2, 2, 3, 4 }, { 2, 3, 3, 2 }, { 3 } },
      opts = { kernel = { 3, 2 }, num_filter = 3, no_bias = false } },
    { name = "2-d stride pad adj groups", inputs = { { 1, 4, 3, 3 }, { 4, 1, 3, 3 } },
      opts = { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 }, adj = { 1, 0 }, num_filter = 2,
        num_group = 2 } },
    { name = "1-d target_shape", inputs = { { 1, 2, 4 }, { 2, 2, 3 } },
      opts = { kernel = { 3 }, stride = { 2 }, target_shape = { 8 }, num_filter = 2 } },
    { name = "3-d dilate", inputs = { { 1, 2, 2, 3, 2 }, { 2, 2, 2, 2, 2 }, { 2 } },
      opts = { kernel = { 2, 2, 2 }, dilate = { 2, 1, 1 }, num_filter = 2, no_bias = false } },
    { name = "2-d NHWC", inputs = { { 1, 3, 2, 2 }, { 2, 2, 2, 3 } },
      opts = { kernel = { 2, 2 }, stride = { 2, 1 }, layout = "NHWC", num_filter = 3 } },
  }
  -- conv + bias + residual (+ relu) in one op
  cases.convolution_sum = {
    { name = "2-d pad bias", inputs = { { 2, 2, 5, 4 }, { 3, 2, 3, 3 }, { 2, 3, 5, 4 }, { 3 } },
      opts = { kernel = { 3, 3 }, pad = { 1, 1 } } },
    { name = "2-d stride groups relu no_bias", inputs = { { 1, 4, 5, 5 }, { 4, 2, 2, 2 }, { 1, 4, 2, 2 } },
      opts = { kernel = { 2, 2 }, stride = { 2, 2 }, num_group = 2, no_bias = true, act_type = "relu" } },
    { name = "1-d relu", inputs = { { 2, 2, 6 }, { 3, 2, 3 }, { 2, 3, 4 }, { 3 } },
      opts = { kernel = { 3 }, act_type = "relu" } },
    { name = "2-d NHWC", inputs = { { 1, 4, 5, 2 }, { 3, 2, 2, 2 }, { 1, 3, 4, 3 }, { 3 } },
      opts = { kernel = { 2, 2 }, layout = "NHWC", stride = { 1, 1 } } },
  }

  -- deformable (v1 and the modulated v2): offsets wide enough that points leave the map
  -- and reach its last row/column (the interpolation is smooth between cells; a draw
  -- within eps of a cell edge has probability ~1e-5)
  cases.deformable_convolution = {
    { name = "groups pad bias", inputs = { { 1, 4, 5, 5 }, { 1, 36, 5, 5, domain = { -2, 2 } },
      { 4, 2, 3, 3 }, { 4 } },
      opts = { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = 4, num_group = 2,
        num_deformable_group = 2 } },
    { name = "stride dilate no_bias", inputs = { { 2, 2, 6, 5 }, { 2, 8, 2, 4, domain = { -2, 2 } },
      { 3, 2, 2, 2 } },
      opts = { kernel = { 2, 2 }, stride = { 2, 1 }, dilate = { 2, 1 }, num_filter = 3,
        no_bias = true } },
  }
  cases.modulated_deformable_convolution = {
    { name = "groups pad bias", inputs = { { 1, 4, 5, 5 }, { 1, 36, 5, 5, domain = { -2, 2 } },
      { 1, 18, 5, 5, domain = { 0, 2 } }, { 4, 2, 3, 3 }, { 4 } },
      opts = { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = 4, num_group = 2,
        num_deformable_group = 2 } },
    { name = "stride dilate no_bias", inputs = { { 2, 2, 6, 5 }, { 2, 8, 2, 4, domain = { -2, 2 } },
      { 2, 4, 2, 4 }, { 3, 2, 2, 2 } },
      opts = { kernel = { 2, 2 }, stride = { 2, 1 }, dilate = { 2, 1 }, num_filter = 3,
        no_bias = true } },
  }

  -- pool (pooling, adaptive pooling, upsampling, bilinear resize)
  do -- pool family: every pool type, convention and rank of pooling
    local function pool(shape, o, extra)
      local c = { inputs = { shape }, opts = o, name = o.name }
      o.name = nil
      for k, v in pairs(extra or {}) do c[k] = v end
      return c
    end
    local gap = { gap = true }
    cases.pooling = {
      pool({ 1, 2, 5, 5 }, { kernel = { 2, 2 }, stride = { 2, 2 }, name = "max 2-d valid" }, gap),
      pool({ 1, 1, 5, 6 }, { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 },
        pooling_convention = "full", name = "max 2-d full pad" }, gap),
      pool({ 1, 2, 7 }, { kernel = { 3 }, stride = { 2 }, pooling_convention = "same",
        name = "max 1-d same" }, gap),
      pool({ 1, 1, 3, 4, 3 }, { global_pool = true, name = "max 3-d global" }, gap),
      pool({ 2, 2, 7 }, { kernel = { 3 }, stride = { 2 }, pad = { 1 }, pool_type = "avg",
        name = "avg 1-d pad" }),
      pool({ 1, 2, 5, 6 }, { kernel = { 3, 2 }, stride = { 2, 2 }, pad = { 1, 1 }, pool_type = "avg",
        pooling_convention = "full", count_include_pad = false, name = "avg 2-d full excl" }),
      pool({ 1, 1, 4, 5, 4 }, { kernel = { 2, 3, 2 }, stride = { 2, 1, 2 }, pool_type = "avg",
        pooling_convention = "full", name = "avg 3-d full" }),
      pool({ 1, 4, 5, 2 }, { kernel = { 2, 2 }, pool_type = "avg", layout = "NHWC",
        name = "avg 2-d NHWC" }),
      pool({ 1, 2, 4, 5 }, { kernel = { 2, 3 }, stride = { 1, 2 }, pad = { 1, 0 }, pool_type = "sum",
        name = "sum 2-d" }),
      pool({ 1, 2, 5 }, { kernel = { 2 }, pool_type = "lp", p_value = 1, name = "lp p=1" }),
      pool({ 1, 2, 4, 4 }, { kernel = { 2, 2 }, stride = { 2, 2 }, pool_type = "lp", p_value = 2,
        name = "lp p=2" }, { domain = { 0.5, 1.5 } }),
      pool({ 1, 1, 2, 4, 4 }, { kernel = { 2, 2, 2 }, pool_type = "lp", p_value = 3,
        name = "lp p=3 3-d" }, { domain = { 0.5, 1.5 } }),
    }
    cases.adaptive_avg_pooling2d = {
      { inputs = { { 1, 2, 5, 7 } }, opts = { output_size = { 3, 4 } } },
      { inputs = { { 2, 1, 4, 4 } }, opts = { output_size = { 3 } } },
    }
    local function up(o) return function(F, xs) return F.upsampling(xs, o) end end
    cases.upsampling = {
      { inputs = { { 1, 2, 2, 3 } }, call = up({ scale = 2 }), name = "nearest" },
      { inputs = { { 1, 1, 2, 2 }, { 1, 2, 1, 1 } }, name = "nearest concat",
        call = up({ scale = 2, num_args = 2 }) },
      { inputs = { { 1, 2, 2, 2 }, { 1, 2, 4, 4 } }, name = "nearest sum",
        call = up({ scale = 2, num_args = 2, multi_input_mode = "sum" }) },
      { inputs = { { 1, 2, 3, 2 }, { 2, 1, 4, 4 } }, name = "bilinear scale 2",
        call = up({ scale = 2, num_args = 2, sample_type = "bilinear" }) },
      { inputs = { { 1, 1, 2, 3 }, { 1, 1, 5, 5 } }, name = "bilinear scale 3",
        call = up({ scale = 3, num_args = 2, sample_type = "bilinear" }) },
    }
    cases.bilinear_resize2d = {
      { inputs = { { 1, 2, 4, 5 } }, opts = { height = 7, width = 3 }, name = "size align" },
      { inputs = { { 1, 1, 3, 4 } }, opts = { height = 5, width = 6, align_corners = false },
        name = "size no align" },
      { inputs = { { 1, 1, 3, 4 } }, opts = { scale_height = 1.5, scale_width = 0.5 },
        name = "scale" },
      { inputs = { { 1, 1, 3, 3 }, { 1, 1, 4, 2, nograd = true } }, name = "like",
        call = function(F, xs) return F.bilinear_resize2d(xs, { mode = "like" }) end },
    }
  end

  -- norm (batch_norm, instance_norm, group_norm, lrn, l2_normalization)
  -- batch_norm: only the normalised output is checked (the mean/invstd
  -- outputs are statistics whose gradient MXNet ignores too); the moving statistics are
  -- fresh constants per call, updated in place in training.
  local function bn_case(shape, opts, name)
    local c = shape[opts.axis == -1 and #shape or (opts.axis or 2)]
    return { inputs = { shape, { c }, { c } }, name = name, opts = opts,
      call = function(F, x, o)
        local nd = require("mx").nd
        local mm = nd.zeros({ c }, { dtype = "float64" })
        local mv = nd.ones({ c }, { dtype = "float64" })
        local y = F.batch_norm(x[1], x[2], x[3], mm, mv, o)
        return y
      end }
  end
  cases.batch_norm = {
    bn_case({ 4, 3, 2 }, { training = true, fix_gamma = false, eps = 1e-3 }, "train NCW"),
    bn_case({ 3, 2, 2, 3 }, { training = true, fix_gamma = false }, "train NCHW"),
    bn_case({ 5, 3 }, { training = true, fix_gamma = false, axis = -1 }, "train axis=-1"),
    bn_case({ 4, 3, 2 }, { training = true, fix_gamma = true }, "train fix_gamma"),
    bn_case({ 4, 3, 2 }, { training = false, fix_gamma = false }, "inference"),
    bn_case({ 4, 3, 2 }, { training = true, fix_gamma = false, use_global_stats = true },
      "use_global_stats"),
  }
  -- group_norm / instance_norm / l2_normalization: the first output only (the others are
  -- saved statistics); lrn keeps its values away from the knorm-dominated flat region.
  local function first(name)
    return function(F, x, o)
      local y = F[name](x[1], x[2], x[3], o)
      return y
    end
  end
  cases.group_norm = {
    { inputs = { { 2, 4, 3 }, { 2 }, { 2 } }, opts = { num_groups = 2 }, call = first("group_norm") },
    { inputs = { { 2, 6, 2, 2 }, { 3 }, { 3 } }, opts = { num_groups = 3, eps = 1e-3 },
      call = first("group_norm") },
    { inputs = { { 3, 2, 4 }, { 1 }, { 1 } }, call = first("group_norm") },
  }
  cases.instance_norm = {
    { inputs = { { 2, 3, 4 }, { 3 }, { 3 } }, call = first("instance_norm") },
    { inputs = { { 2, 2, 3, 2 }, { 2 }, { 2 } }, opts = { eps = 1e-5 }, call = first("instance_norm") },
  }
  cases.lrn = {
    { inputs = { { 2, 5, 3 } }, opts = { nsize = 3, alpha = 0.5, beta = 0.75, knorm = 1 } },
    { inputs = { { 1, 4, 2, 2 } }, opts = { nsize = 5, alpha = 1, beta = 0.5, knorm = 2 } },
    { inputs = { { 2, 3 } }, opts = { nsize = 1 } },
  }
  cases.l2_normalization = {
    { inputs = { { 3, 4 } }, call = function(F, x) local y = F.l2_normalization(x[1]) return y end },
    { inputs = { { 2, 3, 4 } }, opts = { mode = "channel" },
      call = function(F, x, o) local y = F.l2_normalization(x[1], o) return y end },
    { inputs = { { 2, 3, 2, 2 } }, opts = { mode = "spatial" },
      call = function(F, x, o) local y = F.l2_normalization(x[1], o) return y end },
  }

  -- nn activations (leaky_relu, hard_sigmoid, silu, hard_swish, gelu...)
  cases.leaky_relu = {
    { inputs = { { 3, 4 } }, opts = { act_type = "leaky" }, away = { 0 } },
    { inputs = { { 3, 4 } }, opts = { act_type = "leaky", slope = 0.1 }, away = { 0 } },
    { inputs = { { 2, 3, 4 }, { 3, domain = { 0.1, 0.5 } } }, opts = { act_type = "prelu" },
      away = { 0 }, name = "prelu per channel" },
    { inputs = { { 2, 3 }, { 1 } }, opts = { act_type = "prelu" }, away = { 0 },
      name = "prelu one slope" },
    { inputs = { { 3, 4 } }, opts = { act_type = "elu", slope = 1.5 }, away = { 0 } },
    { inputs = { { 3, 4 } }, opts = { act_type = "selu" }, away = { 0 } },
    { inputs = { { 3, 4 } }, opts = { act_type = "gelu" }, domain = { -3, 3 } },
    { inputs = { { 3, 4 } }, opts = { act_type = "rrelu", training = false }, away = { 0 },
      name = "rrelu inference" },
    { inputs = { { 3, 4 } }, away = { 0 }, name = "rrelu training (fixed seed)",
      call = function(F, x)
        require("mx").random.seed(21)
        local y = F.leaky_relu(x[1], { act_type = "rrelu", training = true })
        return y
      end },
  }
  cases.hard_sigmoid = {
    { inputs = { { 3, 4 } }, domain = { -4, 4 }, away = { -2.5, 2.5 } },
    { inputs = { { 3, 4 } }, opts = { alpha = 0.5, beta = 0.2 }, domain = { -3, 3 },
      away = { -0.4, 1.6 } },
  }
  cases.silu = {
    { inputs = { { 3, 4 } }, domain = { -4, 4 } },
    { inputs = { { 3, 4 } }, opts = { beta = 2 }, domain = { -3, 3 }, name = "swish beta=2" },
  }
  cases.hard_swish = { { inputs = { { 3, 4 } }, domain = { -5, 5 }, away = { -3, 3 } } }
  cases.gelu = {
    { inputs = { { 3, 4 } }, domain = { -3, 3 } },
    { inputs = { { 3, 4 } }, opts = { approximation = "tanh" }, domain = { -3, 3 } },
  }
  cases.log_sigmoid = { { inputs = { { 3, 4 } }, domain = { -6, 6 } } }
  cases.mish = { { inputs = { { 3, 4 } }, domain = { -4, 4 } } }


  -- sequence ops (sequence_mask/last/reverse, softmax length, masked_softmax, ctc)
  do -- lengths are constants (float or int dtypes), labels constant classes
    local function lens(t, dt) return function(mx) return mx.nd.array(t, { dtype = dt }) end end
    local SEQ = {
      { inputs = { { 4, 3, 2 }, lens({ 2, 4, 1 }) }, opts = { use_sequence_length = true } },
      { inputs = { { 3, 5 }, lens({ 1, 5, 3 }, "int32") },
        opts = { use_sequence_length = true, axis = 2 } },
      { inputs = { { 3, 2, 2 } } },
    }
    cases.sequence_mask = with(SEQ, {})
    cases.sequence_mask[4] = { inputs = { { 4, 3 }, lens({ 0, 2, 4 }, "int64") },
      opts = { use_sequence_length = true, value = -3 } }
    cases.sequence_last = SEQ
    cases.sequence_reverse = SEQ
    -- softmax / log_softmax with a length (the plain cases stay as they were)
    local SL = {
      { inputs = { { 3, 4 }, lens({ 1, 4, 2 }, "int32") }, opts = { use_length = true } },
      { inputs = { { 4, 3, 2 }, lens({ { 4, 0 }, { 2, 3 }, { 1, 1 } }) },
        opts = { use_length = true, axis = 1, temperature = 2 } },
    }
    local function join(a, b)
      local t = {}
      for i = 1, #a do t[i] = a[i] end
      for i = 1, #b do t[#a + i] = b[i] end
      return t
    end
    cases.softmax = join(cases.softmax, SL)
    cases.log_softmax = join(cases.log_softmax, SL)
    local function mask(t) return function(mx) return mx.nd.array(t, { dtype = "bool" }) end end
    cases.masked_softmax = {
      { inputs = { { 2, 4 }, mask({ { 1, 0, 1, 1 }, { 0, 0, 0, 0 } }) } },
      { inputs = { { 3, 2, 4 }, mask({ { { 1, 1, 0, 1 } } }) }, opts = { temperature = 0.5 } },
      { inputs = { { 3, 4 }, mask({ { 1 }, { 0 }, { 1 } }) }, opts = { axis = 1 } },
    }
    -- -inf at the masked positions: checked through where(mask, out, 0) on a full mask
    local function mls(F, x, o)
      local y = F.masked_log_softmax(x[1], x[2], o)
      return F.where(x[2], y, F.zeros_like(y))
    end
    cases.masked_log_softmax = {
      { inputs = { { 2, 4 }, mask({ { 1, 0, 1, 1 }, { 0, 1, 1, 0 } }) }, call = mls },
      { inputs = { { 3, 4 }, mask({ { 1, 1, 0, 1 }, { 0, 0, 0, 0 }, { 1, 1, 1, 1 } }) },
        opts = { temperature = 2 }, call = mls },
    }
    -- CTC: (T, N, C) activations, labels padded with 0 (blank first) or -1 (blank last)
    cases.ctc_loss = {
      { inputs = { { 5, 2, 4 }, lens({ { 1, 2 }, { 3, 0 } }) } },
      { inputs = { { 6, 3, 4 }, lens({ { 1, 1, 2 }, { 2, 0, 0 }, { 3, 1, 0 } }, "int32"),
        lens({ 6, 4, 3 }), lens({ 3, 1, 2 }, "int64") },
        opts = { use_data_lengths = true, use_label_lengths = true } },
      { inputs = { { 4, 2, 3 }, lens({ { 0, 1 }, { 1, -1 } }), lens({ 4, 2 }) },
        opts = { use_data_lengths = true, blank_label = "last" } },
      { inputs = { { 4, 2, 3 }, lens({ { 2, 2 }, { 1, 0 } }), lens({ 2, 1 }) },
        opts = { use_label_lengths = true } },
    }
  end

  -- embedding/layer_norm/attention
  -- embedding: the weight only (ids are constant 0-based integers); layer_norm: the first
  -- output (mean/std are saved statistics); attention: heads 2 with D 2, plus one head.
  cases.embedding = {
    { inputs = { { 2, 3, int = true, domain = { 0, 4 }, nograd = true }, { 5, 3 } } },
    { inputs = { { 4, int = true, domain = { 0, 1 }, nograd = true }, { 2, 2 } },
      opts = { sparse_grad = true } },
  }
  local function ln_first(F, x, o)
    local y = F.layer_norm(x[1], x[2], x[3], o)
    return y
  end
  cases.layer_norm = {
    { inputs = { { 3, 4 }, { 4 }, { 4 } }, call = ln_first },
    { inputs = { { 2, 3, 5 }, { 3 }, { 3 } }, opts = { axis = 2, eps = 1e-3 }, call = ln_first },
    { inputs = { { 2, 2, 16 }, { 16 }, { 16 } }, opts = { axis = -1 }, call = ln_first },
  }
  cases.interleaved_matmul_selfatt_qk = {
    { inputs = { { 3, 2, 12 } }, opts = { heads = 2 } },
    { inputs = { { 2, 1, 6 } }, opts = { heads = 1 } },
  }
  cases.interleaved_selfatt = {
    { inputs = { { 3, 2, 12 } }, opts = { heads = 2 } },
    { inputs = { { 4, 2, 12 }, function(m) return m.nd.array({ 4, 2 }, { dtype = "int32" }) end },
      opts = { heads = 1 }, name = "valid_length" },
  }
  cases.interleaved_matmul_selfatt_valatt = {
    { inputs = { { 3, 2, 12 }, { 4, 3, 3 } }, opts = { heads = 2 } },
  }
  cases.interleaved_matmul_encdec_qk = {
    { inputs = { { 2, 2, 4 }, { 3, 2, 8 } }, opts = { heads = 2 } },
  }
  cases.interleaved_matmul_encdec_valatt = {
    { inputs = { { 3, 2, 8 }, { 4, 2, 3 } }, opts = { heads = 2 } },
  }

  -- rnn (the fused RNN op)
  do -- rnn: 2 layers, bidirectional, every mode; lengths; dropout with a reseeded mask
    local RC = dofile("spec/fixtures/rnn_call.lua")
    local function np(G, I, H, L, D, P) -- P: projection_size (LSTMP), R = P or H
      local n, R = 0, P or H
      for l = 1, L do n = n + D * (G * H * ((l == 1 and I or D * R) + R + 2) + (P and P * H or 0)) end
      return n
    end
    local function rcase(mode, o)
      local G = ({ lstm = 4, gru = 3 })[mode] or 1
      local T, N, I, H, L, D = 3, 2, 2, o.H or 2, o.L or 2, o.D or 2
      local opts = { state_size = H, num_layers = L, bidirectional = D == 2, mode = mode,
        state_outputs = true, use_sequence_length = o.seq, p = o.p, training = o.p and true or nil,
        projection_size = o.P }
      local ins = { { T, N, I }, { np(G, I, H, L, D, o.P), domain = { -0.8, 0.8 } },
        { L * D, N, o.P or H } }
      if mode == "lstm" then ins[4] = { L * D, N, H } end
      if o.seq then
        ins[#ins + 1] = function(mx) return mx.nd.array({ 3, 2 }, { dtype = "float64" }) end
      end
      return { inputs = ins, opts = opts, noview = true, away = mode == "rnn_relu" and { 0 } or nil,
        name = mode .. (o.P and " projection" or "") .. (o.seq and " lengths" or "")
          .. (o.p and " dropout" or ""),
        call = function(_, xs, op)
          local cell = mode == "lstm" and xs[4] or nil
          local sl = o.seq and xs[#xs] or nil
          if o.p then require("mx").random.seed(11) end
          local out, hy, cy = RC.call(xs[1], xs[2], xs[3], cell, sl, op)
          if mode == "lstm" then return { out, hy, cy } end
          return { out, hy }
        end }
    end
    cases.rnn = { rcase("lstm", {}), rcase("gru", {}), rcase("rnn_tanh", {}),
      rcase("rnn_relu", { D = 1 }), rcase("lstm", { seq = true }), rcase("gru", { seq = true }),
      rcase("lstm", { L = 3, D = 1, p = 0.4 }), rcase("lstm", { H = 3, P = 2 }),
      rcase("lstm", { H = 3, P = 2, seq = true, L = 3, D = 1, p = 0.4 }) }
  end

  -- graph ops
end
