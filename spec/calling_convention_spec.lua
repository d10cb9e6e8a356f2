-- MXNet's calling convention, checked for every public constructor and function that
-- follows an MXNet signature (mx.core.class signature): the cases are generated from the
-- signatures, luamx's declared ones (class.signatures) and MXNet's
-- (spec/fixtures/mxnet_signatures.lua, written by tools/fixtures/make_signatures.py from
-- MXNet 1.9.1's package and 2.0's source):
--   * every public constructor of the namespaces below declares its signature;
--   * where MXNet has the same name, luamx's positional parameters are MXNet's, in
--     MXNet's order (a keyword-only MXNet parameter is accepted by name);
--   * calling with the parameters positionally, by name in the trailing options table,
--     and mixed gives equal objects (same fields, same tostring; transforms also the same
--     output);
--   * a parameter given both ways, an unknown name and too many positional arguments are
--     errors blamed on the caller's line, naming the function and the valid names.
local mx = require("mx")
local class = require("mx.core.class")
local nd = mx.nd
local gluon = mx.gluon
local nn, rnn, T = gluon.nn, gluon.rnn, gluon.data.vision.transforms

local FILE = "calling_convention_spec.lua"
local MX = dofile("spec/fixtures/mxnet_signatures.lua")
local SIGS = class.signatures

-- the namespaces whose public constructors must follow the convention, and where their
-- MXNet signatures are in the fixture (first key found wins)
local SPACES = {
  { "gluon.nn", nn, { "gluon.nn.", "gluon.contrib.nn." } },
  { "gluon.rnn", rnn, { "gluon.rnn.", "gluon.contrib.rnn." } },
  { "gluon.loss", gluon.loss, { "gluon.loss." } },
  { "gluon.data", gluon.data, { "gluon.data.", "gluon.contrib.data." } },
  { "gluon.data.vision", gluon.data.vision, { "gluon.data.vision." } },
  { "gluon.data.vision.transforms", T, { "gluon.data.vision.transforms." } },
  { "gluon.metric", gluon.metric, { "gluon.metric.", "metric." } },
  { "gluon.utils", gluon.utils, { "gluon.utils." } },
  { "gluon", { Trainer = gluon.Trainer, Parameter = gluon.Parameter, Constant = gluon.Constant },
    { "gluon." } },
  { "init", mx.init, { "init." } },
  { "image", require("mx.image_iter"), { "image." } },
  { "lr_scheduler", mx.lr_scheduler, { "lr_scheduler." } },
  -- mx.nd: the functions MXNet defines in Python (the generated ops take options tables)
  { "nd", { zeros = nd.zeros, ones = nd.ones, empty = nd.empty, full = nd.full, array = nd.array,
    arange = nd.arange, linspace = nd.linspace, eye = nd.eye, moveaxis = nd.moveaxis,
    split_v2 = nd.split_v2, concatenate = nd.concatenate }, { "nd." } },
}

-- not constructors users call (abstract bases, helpers), with why
local EXEMPT = {
  ["gluon.nn.Block"] = "the base class users extend", ["gluon.nn.HybridBlock"] = "the base class",
  ["gluon.nn.causal_mask"] = "a helper of the transformer layers",
  ["gluon.nn.length_mask"] = "a helper of the transformer layers",
  ["gluon.nn.position_encoding"] = "a helper of the transformer layers",
  ["gluon.rnn.RecurrentCell"] = "the base class", ["gluon.rnn.HybridRecurrentCell"] = "the base class",
  ["gluon.rnn.ModifierCell"] = "the base class of the modifier cells",
  ["gluon.rnn.from_mxnet_names"] = "a file-name helper",
  ["gluon.rnn.load_mxnet_parameters"] = "a file helper (block, path, opts)",
  ["gluon.data.Dataset"] = "the base class", ["gluon.data.Sampler"] = "the base class",
  ["gluon.data.recipe"] = "luamx's worker recipe (module, ctor, ...)",
  ["gluon.data.vision.read_idx"] = "luamx's IDX reader (path)",
  ["gluon.data.vision.transforms.Transform"] = "the base class",
  ["gluon.metric.EvalMetric"] = "the base class", ["gluon.metric.create"] = "create(name, opts)",
  ["init.Initializer"] = "the base class", ["init.create"] = "create(name, opts)",
  ["lr_scheduler.LRScheduler"] = "the base class",
}

---------------------------------------------------------------- sample arguments
-- A value per parameter name (BY[key] first: per constructor); GEN(f) is called per use
-- (a fresh object each time), STOP ends the positional prefix there.
local STOP = {}
local function GEN(f) return { gen = f } end
local function img() return nd.array { { { 10, 20, 30 }, { 40, 50, 60 } }, { { 70, 80, 90 },
  { 15, 25, 35 } } }:astype("uint8") end
local SAMPLES = {
  activation = "tanh", allow_deferred_init = true, alpha = 0.2, alpha_initializer = "zeros",
  angle_limits = { -10, 10 }, approximation = "tanh", average = "macro", axes = { 1 },
  axis = -1, base_cell = GEN(function() return rnn.LSTMCell(4) end), base_lr = 0.1,
  batch_axis = 1, batch_size = 2, beta = 0.5, beta_initializer = "ones",
  bias_initializer = "ones", bidirectional = true, brightness = 0.1, ceil_mode = true,
  center = false, channels = 4, check_isfinite = false, class_type = "multiclass",
  compute_full = true, contrast = 0.1, count_include_pad = false, default_init = "zeros",
  differentiable = false, dilation = 2, dropout = 0.5, dtype = "float64", eps = 1e-10,
  epsilon = 1e-3, even_split = false, factor = 0.5, factor_type = "in", final_lr = 0.001,
  flag = 0, flatten = false, fn = type, forget_bias = 2, from_logits = true,
  from_sigmoid = true, ["function"] = "tanh", gamma_initializer = "zeros", grad_req = "add",
  grad_stype = "default", groups = 2, h2h_bias_initializer = "ones",
  h2h_weight_initializer = "zeros", height = 1, hidden_size = 8, hue = 0.05,
  i2h_bias_initializer = "ones", i2h_weight_initializer = "zeros", ignore_label = 0,
  in_channels = 4, in_units = 3, init = "zeros", input_dim = 10, input_size = 5,
  interpolation = 0, interval = 2, keep_ratio = true, kernel_size = 3,
  l_cell = GEN(function() return rnn.GRUCell(3) end),
  r_cell = GEN(function() return rnn.GRUCell(3) end), label_format = "binary",
  label_layout = "TN", last_batch = "discard", length = 5, lr_mult = 2, magnitude = 2,
  margin = 0.5, max_length = 50, max_norm = 1, max_update = 100, mean = 0.5,
  metrics = { "acc" }, momentum = 0.8, name = "m", num_groups = 2, num_layers = 2,
  num_slice = 2, output_dim = 3, p = 0.3, pad = 1, pad_value = 3, padding = 1,
  pool_size = 3, pwr = 3, rand_type = "normal", rate = 0.3, ratio = { 0.5, 2 },
  recurrent_activation = "tanh", rho = 2, rnd_type = "gaussian", rollover = false,
  rotate_with_proba = 0.5, rotation_degrees = 30, running_mean_initializer = "ones",
  running_variance_initializer = "zeros", saturation = 0.1, shape = { 2, 3 }, shuffle = true,
  sigma = 0.1, size = 1, slope = 0.1, smoothing_parameter = 0.5, sparse_grad = true,
  sparse_label = false, std = 2, stop_factor_lr = 1e-4, stype = "default",
  threshold = 0.3, top_k = 3, train = false, units = 5, use_bias = false,
  use_global_stats = true, verbose = true, warmup_begin_lr = 0.001, warmup_mode = "constant",
  warmup_steps = 5, wd_mult = 0.5, weight = 2, weight_initializer = "zeros", width = 1,
  x = 1, y = 0, zoneout_outputs = 0.1, zoneout_states = 0.2, zoom_in = true, zoom_out = false,
  value = 2, patterns = { ".*bias", ".*" }, initializers = { "zeros", "ones" },
  ctx = GEN(function() return mx.cpu() end), val = 7, source_array = { 1, 2 }, start = 0,
  stop = 6, step = 2, ["repeat"] = 2, N = 3, M = 4, k = 1, num = 5, endpoint = false,
  tensor = GEN(function() return nd.arange(0, 24):reshape(2, 3, 4) end), source = 1,
  destination = 3, ary = GEN(function() return nd.arange(0, 6) end), indices_or_sections = 3,
  squeeze_axis = false, arrays = GEN(function() return { nd.ones { 2 }, nd.zeros { 2 } } end),
  always_copy = true,
}
local BY = {
  ["gluon.nn.Activation"] = { activation = "relu" },
  ["gluon.nn.Embedding"] = { dtype = "float32" },
  ["gluon.nn.LayerNorm"] = { axis = 2 },
  ["gluon.nn.InstanceNorm"] = { scale = true },
  ["gluon.nn.BatchNorm"] = { scale = false },
  ["gluon.nn.GroupNorm"] = { scale = false },
  ["gluon.rnn.LSTM"] = { layout = "NTC", projection_size = STOP },
  ["gluon.rnn.GRU"] = { layout = "NTC" }, ["gluon.rnn.RNN"] = { layout = "NTC" },
  ["gluon.loss.CTCLoss"] = { layout = "TNC" },
  ["gluon.data.SimpleDataset"] = { data = GEN(function() return { 1, 2, 3 } end) },
  ["gluon.data.SequentialSampler"] = { start = 2 },
  ["gluon.data.ArrayDataset"] = { args = GEN(function()
    return { n = 2, nd.ones { 3, 2 }, { 1, 2, 3 } } end) },
  ["gluon.data.DataLoader"] = { dataset = GEN(function() return { 1, 2, 3, 4 } end),
    sampler = STOP },
  ["gluon.data.FilterSampler"] = { dataset = GEN(function()
    return gluon.data.SimpleDataset { 1, 2, 3 } end) },
  ["gluon.data.BatchSampler"] = { sampler = GEN(function()
    return gluon.data.SequentialSampler(4) end) },
  ["gluon.data.vision.FashionMNIST"] = { root = "/usr/share/datasets/fashion-mnist",
    transform = STOP },
  ["gluon.data.vision.MNIST"] = { root = STOP }, ["gluon.data.vision.CIFAR10"] = { root = STOP },
  ["gluon.data.vision.CIFAR100"] = { root = STOP },
  ["gluon.data.vision.ImageFolderDataset"] = { root = STOP },
  ["gluon.data.vision.ImageListDataset"] = { root = STOP },
  ["gluon.data.LibSVMDataset"] = { filename = "spec/fixtures/sample.libsvm", num_features = 8,
    dtype = "float64" },
  ["gluon.data.vision.ImageRecordDataset"] = { filename = "spec/fixtures/mx191_rec.rec",
    transform = STOP },
  ["gluon.data.vision.transforms.Compose"] = { transforms = GEN(function()
    return { T.ToTensor(), T.Cast("float64") } end) },
  ["gluon.data.vision.transforms.RandomApply"] = { transforms = GEN(function()
    return T.RandomGray(1) end) },
  ["gluon.data.vision.transforms.RandomResizedCrop"] = { scale = { 0.5, 1 } },
  ["gluon.data.vision.transforms.CropResize"] = { size = 2 },
  ["gluon.data.vision.transforms.RandomLighting"] = { alpha = 0.1 },
  ["gluon.data.vision.transforms.Rotate"] = { rotation_degrees = 30 },
  ["gluon.metric.Accuracy"] = { axis = 2 },
  ["gluon.utils.split_data"] = { data = GEN(function() return nd.arange(0, 8):reshape(4, 2) end) },
  ["gluon.utils.split_and_load"] = { data = GEN(function()
    return nd.arange(0, 8):reshape(4, 2) end), ctx_list = GEN(function() return { mx.cpu() } end) },
  ["gluon.utils.clip_global_norm"] = { arrays = GEN(function() return { nd.ones { 3 } } end) },
  ["gluon.utils.parallel_apply"] = { fn = GEN(function() return function(v) return v * 2 end end),
    inputs = GEN(function() return { 1, 2 } end) },
  ["gluon.Trainer"] = { params = GEN(function()
    local net = nn.Dense(2, { in_units = 2 })
    net:initialize(mx.init.One())
    return net:collect_params() end), optimizer = "sgd",
    optimizer_params = { learning_rate = 0.5 }, kvstore = "local" },
  ["gluon.Parameter"] = { name = "w" },
  ["gluon.Constant"] = { name = "c", value = GEN(function() return nd.ones { 2 } end) },
  ["gluon.nn.PixelShuffle1D"] = { factor = 2 }, ["gluon.nn.PixelShuffle2D"] = { factor = 2 },
  ["gluon.nn.PixelShuffle3D"] = { factor = 2 },
  ["gluon.rnn.LSTMPCell"] = { hidden_size = 6, projection_size = 3 },
  ["gluon.rnn.VariationalDropoutCell"] = { drop_inputs = 0.1, drop_states = 0.2, drop_outputs = 0.3 },
  ["image.SequentialAug"] = { ts = GEN(function() return { mx.image.CastAug() } end) },
  ["image.RandomOrderAug"] = { ts = GEN(function() return { mx.image.CastAug() } end) },
  ["image.CreateAugmenter"] = { data_shape = { 3, 8, 8 } },
  ["image.CenterCropAug"] = { size = { 4, 3 } }, ["image.ForceResizeAug"] = { size = { 4, 3 } },
  ["image.RandomCropAug"] = { size = { 4, 3 } },
  ["image.RandomSizedCropAug"] = { size = { 4, 3 }, area = 0.5, ratio = { 0.75, 1.33 } },
  ["image.LightingAug"] = { alphastd = 0.1, eigval = { 1, 2, 3 },
    eigvec = { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } } },
  ["image.ImageIter"] = { data_shape = { 3, 8, 8 }, label_width = 1,
    path_imgrec = "spec/fixtures/image_mxnet.rec", path_imglist = STOP },
  ["gluon.rnn.dynamic_unroll"] = { cell = GEN(function()
    local c = rnn.RNNCell(3, { input_size = 2 })
    c:initialize(mx.init.One())
    return c
  end), inputs = GEN(function() return nd.ones { 4, 2, 2 } end) },
  ["init.FusedRNN"] = { num_hidden = 4, mode = "lstm" },
  ["init.Uniform"] = { scale = 0.1 }, ["init.Orthogonal"] = { scale = 2 },
  ["init.Load"] = { param = GEN(function() return { w = nd.ones { 2 } } end) },
  ["lr_scheduler.FactorScheduler"] = { step = 10 },
  ["nd.split_v2"] = { axis = 1 }, ["nd.concatenate"] = { axis = 1 },
  ["lr_scheduler.MultiFactorScheduler"] = { step = { 10, 20 } },
}

for k = 1, 3 do
  for _, kind in ipairs { "RNN", "LSTM", "GRU" } do
    local shape = { 2 }
    for i = 1, k do shape[i + 1] = 5 end
    BY["gluon.rnn.Conv" .. k .. "D" .. kind .. "Cell"] = { input_shape = shape, hidden_channels = 3,
      i2h_kernel = 3, h2h_kernel = 3, i2h_pad = 1, i2h_dilate = 1, h2h_dilate = 1,
      activation = "relu" }
  end
end

-- constructors this spec cannot call (their files are not here): the parser is checked
local CANNOT = {
  ["gluon.data.vision.MNIST"] = "no MNIST files (no Debian package)",
  ["gluon.data.vision.CIFAR10"] = "no CIFAR files", ["gluon.data.vision.CIFAR100"] = "no CIFAR files",
  ["gluon.data.vision.ImageFolderDataset"] = "needs an image folder (spec/vision_spec.lua)",
  ["gluon.data.vision.ImageListDataset"] = "needs images (spec/vision_spec.lua)",
  ["nd.empty"] = "its values are whatever the memory held",
  ["image.ImageIter"] = "holds an open RecordIO file (spec/image_iter_spec.lua)",
  ["image.random_size_crop"] = "its crop is random (spec/image_iter_spec.lua)",
}

local function sample(key, name)
  local by = BY[key]
  local v = by and by[name]
  if v == nil then v = SAMPLES[name] end
  if v == nil or v == STOP then return nil end
  if type(v) == "table" and v.gen then return v.gen() end
  return v
end

-- the positional prefix with samples: names and a value generator
local function prefix(key, sig)
  local names = {}
  for _, e in ipairs(sig.entries) do
    local n = e[1]
    if e.unsupported or e.rest then break end
    local by = BY[key]
    local v = by and by[n]
    if v == nil then v = SAMPLES[n] end
    if v == nil or v == STOP then break end
    names[#names + 1] = n
  end
  return names
end

---------------------------------------------------------------- equality
local IGNORE = { _args = true }
local function same(a, b, seen, path)
  if type(a) ~= type(b) then return false, path end
  if type(a) == "function" then return true end
  if type(a) == "cdata" then
    if nd.is_tensor(a) then
      if not nd.is_tensor(b) then return false, path end
      local sa, sb = table.concat(a:shape(), "x"), table.concat(b:shape(), "x")
      if sa ~= sb or a:dtype() ~= b:dtype() then return false, path end
      local x, y = a:tolist(), b:tolist()
      for i = 1, #x do if x[i] ~= y[i] and (x[i] == x[i] or y[i] == y[i]) then return false, path end end
      return true
    end
    return tostring(a):match("^cdata<[^>]*>") == tostring(b):match("^cdata<[^>]*>"), path
  end
  if type(a) ~= "table" then
    if a ~= b and (a == a or b == b) then return false, path end
    return true
  end
  if a == b then return true end
  seen = seen or {}
  if seen[a] == b then return true end
  seen[a] = b
  if getmetatable(a) ~= getmetatable(b) then return false, path .. " (class)" end
  for k, v in pairs(a) do
    if not IGNORE[k] then
      local ok, p = same(v, rawget(b, k), seen, path .. "." .. tostring(k))
      if not ok then return false, p end
    end
  end
  for k in pairs(b) do
    if not IGNORE[k] and rawget(a, k) == nil then return false, path .. "." .. tostring(k) end
  end
  return true
end

-- transforms: also the same output on the same image and seed
local function same_behaviour(key, a, b)
  if key:find("transforms", 1, true) and type(a) == "table" and a._forward then
    local x = img()
    if a._name == "Rotate" or a._name == "RandomRotation" or a._name == "Normalize" then
      x = nd.transpose(x:astype("float32"), { axes = { 3, 1, 2 } })
    end
    mx.random.seed(5)
    local ya = a(x)
    mx.random.seed(5)
    local yb = b(x)
    return (same(ya, yb, nil, "output"))
  end
  if type(a) == "table" and getmetatable(a) and getmetatable(a).__tostring then
    return tostring(a) == tostring(b)
  end
  return true
end

---------------------------------------------------------------- the cases
local function pack(...) return { n = select("#", ...), ... } end
local function fixture_entry(prefixes, name)
  for _, p in ipairs(prefixes) do
    if MX[p .. name] then return p .. name, MX[p .. name] end
  end
end

local cases = {}
for _, space in ipairs(SPACES) do
  local ns, tbl, prefixes = space[1], space[2], space[3]
  local names = {}
  for k, v in pairs(tbl) do
    if type(k) == "string" and not k:match("^_") and (type(v) == "function"
        or (type(v) == "table" and (getmetatable(v) or {}).__call)) then
      names[#names + 1] = k
    end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    local key = ns .. "." .. name
    if not EXEMPT[key] then
      local mxkey, mxsig = fixture_entry(prefixes, name)
      cases[#cases + 1] = { key = key, obj = tbl[name], sig = SIGS[tbl[name]], mxkey = mxkey,
        mxsig = mxsig }
    end
  end
end

describe("MXNet's calling convention (generated from the signatures)", function()
  it("covers the namespaces' constructors (" .. #cases .. " of them)", function()
    assert.is_true(#cases > 150)
  end)

  for _, c in ipairs(cases) do
    describe(c.key, function()
      it("declares its signature", function()
        assert.is_truthy(c.sig, c.key .. " has no declared signature (mx.core.class signature)")
      end)

      if c.mxsig then
        it("has MXNet's positional parameters in MXNet's order (" .. c.mxkey .. ", "
          .. c.mxsig.version .. ")", function()
          local sig = assert(c.sig)
          local want, kw = {}, {}
          for _, p in ipairs(c.mxsig) do
            if p[2] == "pos" then want[#want + 1] = p[1] elseif p[2] == "kw" then kw[#kw + 1] = p[1] end
            if p[2] == "rest" then want[#want + 1] = p[1] end
          end
          local got = {}
          for i, e in ipairs(sig.entries) do got[i] = e[1] end
          -- MXNet's *args is named args in luamx
          for i = 1, #want do if c.mxsig[i] and c.mxsig[i][2] == "rest" then want[i] = got[i] end end
          assert.same(want, got)
          for _, k in ipairs(kw) do assert.is_true(sig.valid[k], k .. " not accepted by name") end
        end)
      end

      it("gives the same object positionally, by name and mixed", function()
        local sig = assert(c.sig)
        local names = prefix(c.key, sig)
        -- the parser alone: positional and named give one table
        local vals = {}
        for i, n in ipairs(names) do vals[i] = sample(c.key, n) end
        local named = {}
        for i, n in ipairs(names) do named[n] = vals[i] end
        assert.same(sig(1, unpack(vals, 1, #names)), sig(1, named))
        if CANNOT[c.key] then return end -- (why: CANNOT)
        local first = sig.entries[1]
        if first and first.rest then -- f(a, b, ...) and f{args = {a, b}}
          local r = sample(c.key, first[1])
          local a, b = pack(c.obj(unpack(r, 1, r.n))), pack(c.obj { [first[1]] = r })
          assert.is_true((same(a, b, nil, "result")))
          return
        end
        local function build(mode)
          local pos, opts = {}, {}
          for i, n in ipairs(names) do
            local v = sample(c.key, n)
            if mode == "pos" or (mode == "mixed" and i <= math.ceil(#names / 2)) then
              pos[i] = v
            else
              opts[n] = v
            end
          end
          if next(opts) ~= nil or #pos == 0 then pos[#pos + 1] = opts end
          mx.random.seed(3)
          return pack(c.obj(unpack(pos, 1, #pos)))
        end
        local a, b, m = build("pos"), build("named"), build("mixed")
        local ok, where = same(a, b, nil, "result")
        assert.is_true(ok, c.key .. ": positional and named calls differ at " .. tostring(where))
        ok, where = same(a, m, nil, "result")
        assert.is_true(ok, c.key .. ": positional and mixed calls differ at " .. tostring(where))
        assert.is_true(same_behaviour(c.key, a[1], b[1]), c.key .. ": different behaviour")
      end)

      it("refuses a parameter given both ways, unknown names and extra arguments", function()
        local sig = assert(c.sig)
        local name = sig.name
        local first = sig.entries[1]
        if first and not first.rest and not first.unsupported then
          local v = sample(c.key, first[1])
          if v ~= nil then
            local line = debug.getinfo(1, "l").currentline + 1
            local ok, msg = pcall(function() local r = c.obj(v, { [first[1]] = v }) return r end)
            assert.is_false(ok)
            assert.is_truthy(msg:find(FILE .. ":" .. line .. ":", 1, true), msg)
            assert.is_truthy(msg:find(first[1] .. " given twice", 1, true), msg)
          end
        end
        local line = debug.getinfo(1, "l").currentline + 1
        local ok, msg = pcall(function() local r = c.obj({ no_such_option = 1 }) return r end)
        assert.is_false(ok)
        assert.is_truthy(msg:find(FILE .. ":" .. line .. ":", 1, true), msg)
        assert.is_truthy(msg:find("unknown option 'no_such_option' (valid: ", 1, true), msg)
        for k in pairs(sig.valid) do assert.is_truthy(msg:find(k, 1, true), msg) end
        assert.is_truthy(msg:find(name, 1, true), msg)
        local last = sig.entries[#sig.entries]
        if not (last and last.rest) then
          local args = {}
          for i = 1, #sig.entries + 1 do args[i] = 0 end
          assert.is_false((pcall(c.obj, unpack(args))))
        end
      end)
    end)
  end
end)
