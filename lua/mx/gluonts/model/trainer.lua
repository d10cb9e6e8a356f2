-- mx.gluonts.model.trainer — the training loop GluonTS's estimators share: Adam
-- (learning_rate, weight_decay), the gradient clipped to a global L2 norm (clip_gradient,
-- GluonTS-torch's gradient_clip_val = 10), the learning rate halved when the epoch's mean
-- loss has not improved for `patience` epochs (PyTorch's ReduceLROnPlateau on train_loss,
-- relative threshold 1e-4), epochs x num_batches_per_epoch batches, a progress bar; at the
-- end the parameters of the epoch with the lowest mean loss are restored (GluonTS-torch's
-- ModelCheckpoint(monitor="train_loss", mode="min") whose best checkpoint train_model
-- loads back; GluonTS-mx's SelectNBestMean(num_models=1) does the same), unless
-- restore_best = false.
--
--   local history = trainer.fit(net, loader, loss_fn, {epochs=, learning_rate=, ...})
--   loss_fn(net, batch) -> a scalar loss tensor (inside autograd.record)
--   local net, history, times = trainer.train(c, ds, {net=, transformation=, splitter=,
--     fields=, title=})   -- an estimator's whole train step
local mx = require("mx")
local progress = require("mx.progress")
local gts_loader = require("mx.gluonts.loader")
local dataset = require("mx.gluonts.dataset")

local M = {}

M.DEFAULTS = { init = "xavier", epochs = 100, learning_rate = 1e-3, weight_decay = 1e-8, clip_gradient = 10,
  patience = 10, num_batches_per_epoch = 50, batch_size = 32, num_workers = 0, quiet = false,
  seed = nil, restore_best = true }

function M.options(o)
  local t = {}
  for k, v in pairs(M.DEFAULTS) do t[k] = v end
  for k, v in pairs(o or {}) do t[k] = v end
  return t
end

-- PyTorch's default initialisation (what GluonTS-torch's networks start from): Linear and
-- Conv weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with a =
-- sqrt(5)), the RNN layers' weights and biases U(-1/sqrt(hidden), 1/sqrt(hidden)),
-- Embedding N(0, 1); other blocks keep what net:initialize gave.
local function torch_init(b)
  local uniform, normal = mx.nd.random.uniform, mx.nd.random.normal
  local function set_uniform(p, bound)
    p:set_data(uniform(-bound, bound, p:data():shape()))
  end
  local name = getmetatable(b).__name
  local ps = b:params()
  if name == "Dense" or (name and name:match("^Conv%dD$")) then
    local w = ps:get("weight")
    local shape = w:data():shape()
    local fan_in = 1
    for i = 2, #shape do fan_in = fan_in * shape[i] end
    for _, p in ps:items() do set_uniform(p, 1 / math.sqrt(fan_in)) end
  elseif name == "LSTM" or name == "GRU" or name == "RNN" then
    for _, p in ps:items() do set_uniform(p, 1 / math.sqrt(b._hidden_size)) end
  elseif name == "Embedding" then
    for _, p in ps:items() do p:set_data(normal(0, 1, p:data():shape())) end
  end
  for _, ch in ipairs((b:children())) do torch_init(ch) end
end

-- initialize(net, init): "xavier" (GluonTS-mx's Trainer default: mx.init.Xavier, biases
-- 0), "torch" (PyTorch's defaults, as GluonTS-torch's models; the net's shapes must be
-- known: in_units / input_size given) or an mx.init initializer.
function M.initialize(net, init, level)
  level = (level or 1) + 1
  if init == nil or init == "xavier" then
    net:initialize(mx.init.Xavier())
  elseif init == "torch" then
    net:initialize(mx.init.Xavier())
    torch_init(net)
  elseif type(init) == "table" and type(init._init_weight) == "function" then
    net:initialize(init)
  else
    error("mx.gluonts: init must be 'xavier', 'torch' or an mx.init initializer, got "
      .. tostring(init), level)
  end
end

function M.fit(net, loader, loss_fn, o)
  local params = net:collect_params()
  local trainer = mx.gluon.Trainer(params, "adam", { learning_rate = o.learning_rate,
    wd = o.weight_decay })
  local grads = {}
  for _, p in ipairs(params:values()) do
    if p.grad_req ~= "null" then grads[#grads + 1] = p end
  end
  -- epoch_times: wall seconds per epoch; epoch_times.cpu: the process's CPU seconds
  -- (os.clock: all threads), less disturbed by other jobs on a shared machine
  local history, epoch_times = {}, { cpu = {} }
  local best, bad = math.huge, 0
  -- the best epoch's parameters (Lightning's checkpoint: strictly lower epoch loss)
  local keep_best = o.restore_best ~= false
  local best_loss, best_data = math.huge, nil
  local values = params:values()
  local lr = o.learning_rate
  local bar = progress.Bar { total = o.epochs, title = o.title or "training" }
  if o.quiet then bar.out = { write = function() end, flush = function() end } end
  for epoch = 1, o.epochs do
    local t0, c0 = progress.now(), os.clock()
    local sum, n = 0, 0
    for batch in loader:iter() do
      local loss = mx.autograd.record(function() return loss_fn(net, batch) end)
      loss:backward()
      if o.clip_gradient and o.clip_gradient > 0 then
        local gs = {}
        for i, p in ipairs(grads) do gs[i] = p:grad() end
        mx.gluon.utils.clip_global_norm(gs, o.clip_gradient)
      end
      trainer:step(1)
      sum, n = sum + loss:item(), n + 1
    end
    local mean = sum / math.max(n, 1)
    history[epoch] = mean
    epoch_times[epoch] = progress.now() - t0
    epoch_times.cpu[epoch] = os.clock() - c0
    -- ReduceLROnPlateau(mode=min, factor=0.5, threshold=1e-4 rel)
    if mean < best * (1 - 1e-4) then
      best, bad = mean, 0
    else
      bad = bad + 1
      if bad > o.patience then
        lr = lr * 0.5
        trainer:set_learning_rate(lr)
        bad = 0
      end
    end
    if keep_best and mean < best_loss then
      best_loss, best_data = mean, {}
      for i, p in ipairs(values) do best_data[i] = p:data():copy() end
    end
    bar:update(1, { loss = mean, lr = lr })
  end
  if best_data then
    for i, p in ipairs(values) do p:set_data(best_data[i]) end
  end
  bar:finish { loss = history[#history] }
  return history, epoch_times
end

-- train(c, ds, m) -> net, history, epoch_times: what every estimator's train does with its
-- model's parts m = {net = function() -> a new network, transformation, splitter (training
-- mode), fields (the batches' fields), title}: seed (c.seed), transform the entries,
-- initialise (c.init), fit on the training loader (net:loss(batch)), close the loader.
function M.train(c, ds, m)
  if c.seed then
    mx.random.seed(c.seed)
    math.randomseed(c.seed)
  end
  local entries = m.transformation:apply(dataset._as_list(ds), true)
  local net = m.net()
  M.initialize(net, c.init, 3)
  local ld = gts_loader.TrainDataLoader { entries = entries, splitter = m.splitter,
    batch_size = c.batch_size, num_batches_per_epoch = c.num_batches_per_epoch, fields = m.fields,
    num_workers = c.num_workers }
  local history, times = M.fit(net, ld, function(n, b) return n:loss(b) end,
    { epochs = c.epochs, learning_rate = c.learning_rate, weight_decay = c.weight_decay,
      clip_gradient = c.clip_gradient, patience = c.patience, quiet = c.quiet, title = m.title,
      restore_best = c.restore_best })
  ld:close()
  return net, history, times
end

return M
