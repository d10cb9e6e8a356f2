-- mx.gluonts.model.trainer — the training loop GluonTS's estimators share: Adam
-- (learning_rate, weight_decay), the gradient clipped to a global L2 norm (clip_gradient,
-- GluonTS-torch's gradient_clip_val = 10), the learning rate halved when the epoch's mean
-- loss has not improved for `patience` epochs (PyTorch's ReduceLROnPlateau on train_loss,
-- relative threshold 1e-4), epochs x num_batches_per_epoch batches, a progress bar.
--
--   local history = trainer.fit(net, loader, loss_fn, {epochs=, learning_rate=, ...})
--   loss_fn(net, batch) -> a scalar loss tensor (inside autograd.record)
local mx = require("mx")
local progress = require("mx.progress")

local M = {}

M.DEFAULTS = { epochs = 100, learning_rate = 1e-3, weight_decay = 1e-8, clip_gradient = 10,
  patience = 10, num_batches_per_epoch = 50, batch_size = 32, num_workers = 0, quiet = false,
  seed = nil }

function M.options(o)
  local t = {}
  for k, v in pairs(M.DEFAULTS) do t[k] = v end
  for k, v in pairs(o or {}) do t[k] = v end
  return t
end

function M.fit(net, loader, loss_fn, o)
  local params = net:collect_params()
  local trainer = mx.gluon.Trainer(params, "adam", { learning_rate = o.learning_rate,
    wd = o.weight_decay })
  local grads = {}
  for _, p in ipairs(params:values()) do
    if p.grad_req ~= "null" then grads[#grads + 1] = p end
  end
  local history, epoch_times = {}, {}
  local best, bad = math.huge, 0
  local lr = o.learning_rate
  local bar = progress.Bar { total = o.epochs, title = o.title or "training" }
  if o.quiet then bar.out = { write = function() end, flush = function() end } end
  for epoch = 1, o.epochs do
    local t0 = progress.now()
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
    bar:update(1, { loss = mean, lr = lr })
  end
  bar:finish { loss = history[#history] }
  return history, epoch_times
end

return M
