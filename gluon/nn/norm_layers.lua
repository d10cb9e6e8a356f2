-- gluon/nn/norm_layers.lua — (issue 11) Gluon normalisation layers; gluon/nn/init.lua
-- exports every key. BatchNorm here; InstanceNorm and GroupNorm wait for their ops, and
-- LayerNorm belongs to the sequence layers.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local check_opts = require("mx._class").check_opts
local infer = require("mx._infer").infer

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring, rawget = type, error, tostring, rawget

local M = {}

---------------------------------------------------------------- BatchNorm
-- BatchNorm({axis=2, momentum=0.9, epsilon=1e-5, center=true, scale=true,
--   use_global_stats=false, beta_initializer="zeros", gamma_initializer="ones",
--   running_mean_initializer="zeros", running_variance_initializer="ones", in_channels=0}).
-- In train mode (mx.autograd.record / train_mode) it normalises with the batch's
-- statistics and updates running_mean/running_var (grad_req "null" Parameters) in place;
-- in predict mode it uses them. scale=false fixes gamma at 1 (MXNet's fix_gamma),
-- center=false keeps beta at 0; neither is then trained. in_channels=0 is inferred at the
-- first forward from the channel axis.
local BatchNorm = HybridBlock:extend("BatchNorm")
M.BatchNorm = BatchNorm
local BN_OPTS = { axis = true, momentum = true, epsilon = true, center = true, scale = true,
  use_global_stats = true, beta_initializer = true, gamma_initializer = true,
  running_mean_initializer = true, running_variance_initializer = true, in_channels = true,
  dtype = true }
function BatchNorm:__init(opts)
  Block.__init(self)
  local o = check_opts("BatchNorm", opts, BN_OPTS, 3)
  local c = o.in_channels or 0
  if type(c) ~= "number" or c < 0 or c % 1 ~= 0 then
    error("BatchNorm: in_channels must be a non-negative integer, got " .. tostring(c), 3)
  end
  local axis = o.axis or 2
  if type(axis) ~= "number" or axis % 1 ~= 0 or axis == 0 then
    error("BatchNorm: axis must be a non-zero integer (1-based), got " .. tostring(axis), 3)
  end
  local eps, mom = o.epsilon or 1e-5, o.momentum or 0.9
  if type(eps) ~= "number" or eps < 0 then
    error("BatchNorm: epsilon must be a number >= 0, got " .. tostring(eps), 3)
  end
  if type(mom) ~= "number" or mom < 0 or mom > 1 then
    error("BatchNorm: momentum must be a number in [0, 1], got " .. tostring(mom), 3)
  end
  local center, scale = o.center ~= false, o.scale ~= false
  self._axis, self._eps, self._momentum = axis, eps, mom
  self._use_global_stats = o.use_global_stats == true
  self._fix_gamma = not scale
  self._in_channels = c
  local dtype = o.dtype or "float32"
  local function param(name, init, req)
    return Parameter(name, { shape = { c }, dtype = dtype, grad_req = req,
      init = initializer.create(init) })
  end
  self.gamma = param("gamma", o.gamma_initializer or "ones", scale and "write" or "null")
  self.beta = param("beta", o.beta_initializer or "zeros", center and "write" or "null")
  self.running_mean = param("running_mean", o.running_mean_initializer or "zeros", "null")
  self.running_var = param("running_var", o.running_variance_initializer or "ones", "null")
  -- the op's options, built once; `training` is left out: the wrapper fills it from the
  -- train-mode flag on every call
  self._opts = { axis = axis, eps = eps, momentum = mom, fix_gamma = not scale,
    use_global_stats = self._use_global_stats }
end

-- Fill the unknown channel count from x (the core's partial inference of batch_norm).
function BatchNorm:_infer(x)
  local reg = rawget(self, "_reg")
  local ps = { reg.gamma, reg.beta, reg.running_mean, reg.running_var }
  local ins = { x }
  for i = 1, 4 do ins[i + 1] = { shape = ps[i].shape, dtype = ps[i].dtype } end
  local r = infer("batch_norm", self._opts, ins, 3)
  for i = 1, 4 do
    ps[i]:set_shape(r.inputs[i + 1].shape, 3)
    ps[i]:_finish_deferred_init(3)
  end
end

local batch_norm = nd.batch_norm
function BatchNorm:forward(x)
  local reg = rawget(self, "_reg")
  local g = reg.gamma._data
  if g == nil then
    if not nd.is_tensor(x) then error("BatchNorm: input must be a tensor, got " .. type(x), 2) end
    self:_infer(x)
    g = reg.gamma:data()
  end
  local y = batch_norm(x, g, reg.beta._data or reg.beta:data(),
    reg.running_mean._data or reg.running_mean:data(),
    reg.running_var._data or reg.running_var:data(), self._opts)
  return y
end

local function pybool(b) return b and "True" or "False" end
function BatchNorm:_repr_args()
  local s = self.gamma.shape
  local c = s and s[1] or 0
  return string.format("axis=%d, eps=%s, momentum=%s, fix_gamma=%s, use_global_stats=%s, "
    .. "in_channels=%s", self._axis, tostring(self._eps), tostring(self._momentum),
    pybool(self._fix_gamma), pybool(self._use_global_stats), c > 0 and tostring(c) or "None")
end

return M
