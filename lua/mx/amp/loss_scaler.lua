-- mx.amp.loss_scaler — MXNet 1.9's dynamic loss scaler (mxnet/contrib/amp/loss_scaler.py):
-- the loss is multiplied by loss_scale before backward (so float16 gradients do not
-- underflow) and the gradients divided by it in the update (the trainer's rescale). A step
-- whose gradients hold an Inf or NaN is skipped and the scale halved; after scale_window
-- steps without one it doubles. has_overflow reads one number back (a single sync).
local nd = require("mx.nd")

local M = {}
local LossScaler = {}
LossScaler.__index = LossScaler

function M.new(opts)
  opts = opts or {}
  return setmetatable({
    loss_scale = opts.init_scale or 2 ^ 16,
    scale_factor = opts.scale_factor or 2,
    scale_window = opts.scale_window or 2000,
    min_scale = opts.min_scale or 1,
    unskipped = 0,
    overflows = 0,
  }, LossScaler)
end

-- grads: { [param index] = { grad copies } } (the trainer's) or a list of tensors
function LossScaler:has_overflow(grads)
  local acc
  for _, gl in pairs(grads) do
    local list = nd.is_tensor(gl) and { gl } or gl
    for _, g in ipairs(list) do
      -- g * 0 is NaN exactly where g is Inf or NaN; the sum carries it
      local s = nd.sum(nd.mul(g:astype("float32"), 0))
      acc = acc and nd.add(acc, s) or s
    end
  end
  local v = acc ~= nil and acc:item() or 0
  local bad = v ~= v
  if bad then
    self.loss_scale = math.max(self.min_scale, self.loss_scale / self.scale_factor)
    self.unskipped = 0
    self.overflows = self.overflows + 1
  else
    self.unskipped = self.unskipped + 1
    if self.unskipped >= self.scale_window then
      self.loss_scale = self.loss_scale * self.scale_factor
      self.unskipped = 0
    end
  end
  return bad
end

return M
