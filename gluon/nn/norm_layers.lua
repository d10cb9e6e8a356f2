-- gluon/nn/norm_layers.lua — Gluon normalisation layers: BatchNorm, InstanceNorm,
-- LayerNorm, GroupNorm (MXNet's names and defaults); gluon/nn/init.lua exports every key.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring, rawget = type, error, tostring, rawget
local guarded = block._guarded

local M = {}

---------------------------------------------------------------- BatchNorm
-- BatchNorm(axis=2, momentum=0.9, epsilon=1e-5, center=true, scale=true,
--   use_global_stats=false, beta_initializer="zeros", gamma_initializer="ones",
--   running_mean_initializer="zeros", running_variance_initializer="ones", in_channels=0)
--   (MXNet's order, positionally or by name; dtype= by name).
-- In train mode (mx.autograd.record / train_mode) it normalises with the batch's
-- statistics and updates running_mean/running_var (grad_req "null" Parameters) in place;
-- in predict mode it uses them. scale=false fixes gamma at 1 (MXNet's fix_gamma),
-- center=false keeps beta at 0; neither is then trained. in_channels=0 is inferred at the
-- first forward from the channel axis.
local function check_eps(cls, eps, level)
  if type(eps) ~= "number" or eps < 0 then
    error(cls .. ": epsilon must be a number >= 0, got " .. tostring(eps), level + 1)
  end
end
-- in_channels (0: inferred) and the 1-based channel axis of a norm layer's options
-- (default_axis: 2, the channels; LayerNorm's -1)
local function check_channels_axis(cls, o, level, default_axis)
  local c = o.in_channels or 0
  if type(c) ~= "number" or c < 0 or c % 1 ~= 0 then
    error(cls .. ": in_channels must be a non-negative integer, got " .. tostring(c), level + 1)
  end
  local axis = o.axis or default_axis or 2
  if type(axis) ~= "number" or axis % 1 ~= 0 or axis == 0 then
    error(cls .. ": axis must be a non-zero integer (1-based), got " .. tostring(axis), level + 1)
  end
  return c, axis
end

local BatchNorm = HybridBlock:extend("BatchNorm")
M.BatchNorm = BatchNorm
local BN_PARAMS = { "axis", "momentum", "epsilon", "center", "scale", "use_global_stats",
  "beta_initializer", "gamma_initializer", "running_mean_initializer",
  "running_variance_initializer", "in_channels" }
M._BN_PARAMS = BN_PARAMS
local BN = block.sig(BatchNorm, BN_PARAMS, { "dtype" })
function BatchNorm:__init(...)
  Block.__init(self)
  local o = BN(3, ...)
  local c, axis = check_channels_axis("BatchNorm", o, 3)
  local eps, mom = o.epsilon or 1e-5, o.momentum or 0.9
  check_eps("BatchNorm", eps, 3)
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

-- The layers run their op guarded: an op's error (raised at this file's line) is
-- re-raised naming the layer and blaming the line that called it (block._guarded).
local batch_norm = nd.batch_norm
local function bn_run(self, x)
  local reg = rawget(self, "_reg")
  local g = reg.gamma._data
  if g == nil then
    if not nd.is_tensor(x) then error("BatchNorm: input must be a tensor, got " .. type(x), 2) end
    -- the unknown channel count from x (batch_norm's inference)
    self:_infer_params("batch_norm", self._opts, x,
      { reg.gamma, reg.beta, reg.running_mean, reg.running_var }, 2)
    g = reg.gamma:data()
  end
  local y = batch_norm(x, g, reg.beta._data or reg.beta:data(),
    reg.running_mean._data or reg.running_mean:data(),
    reg.running_var._data or reg.running_var:data(), self._opts)
  return y
end
BatchNorm.forward = guarded("BatchNorm", bn_run)
-- cast(dtype): MXNet's; a float16 cast keeps the parameters float32 (batch_norm takes
-- float16 data with float32 statistics)
function BatchNorm:cast(dtype)
  if dtype == "float16" then dtype = "float32" end
  return block.Block.cast(self, dtype)
end

local function pybool(b) return b and "True" or "False" end
function BatchNorm:_repr_args()
  local s = self.gamma.shape
  local c = s and s[1] or 0
  return string.format("axis=%d, eps=%s, momentum=%s, fix_gamma=%s, use_global_stats=%s, "
    .. "in_channels=%s", self._axis, tostring(self._eps), tostring(self._momentum),
    pybool(self._fix_gamma), pybool(self._use_global_stats), c > 0 and tostring(c) or "None")
end

-- the affine Parameters (gamma, beta) of the norm layers: scale/center false keep them at
-- their initial values (grad_req "null")
local function affine(self, n, o, scale, center)
  self.gamma = Parameter("gamma", { shape = { n }, dtype = o.dtype or "float32",
    grad_req = scale and "write" or "null",
    init = initializer.create(o.gamma_initializer or "ones") })
  self.beta = Parameter("beta", { shape = { n }, dtype = o.dtype or "float32",
    grad_req = center and "write" or "null",
    init = initializer.create(o.beta_initializer or "zeros") })
end

-- The options and Parameters of the norm layers with one (gamma, beta) pair per channel
-- along `axis` (InstanceNorm, LayerNorm: the same MXNet parameters in the same order); o:
-- the signature's table; level: as error() takes it in the caller.
local AFFINE_PARAMS = { "axis", "epsilon", "center", "scale", "beta_initializer",
  "gamma_initializer", "in_channels" }
local function affine_norm_init(self, cls, o, default_axis, default_scale, level)
  Block.__init(self)
  local c, axis = check_channels_axis(cls, o, level + 1, default_axis)
  local eps = o.epsilon or 1e-5
  check_eps(cls, eps, level + 1)
  self._axis, self._eps = axis, eps
  if o.scale == nil then self._scale = default_scale else self._scale = o.scale == true end
  self._center = o.center ~= false
  affine(self, c, o, self._scale, self._center)
end

-- op(x, gamma, beta, opts), gamma and beta inferred from x at the first call
local function affine_norm_run(self, cls, op, opname, x)
  if not nd.is_tensor(x) then error(cls .. ": input must be a tensor, got " .. type(x), 3) end
  local reg = rawget(self, "_reg")
  if reg.gamma._data == nil then
    self:_infer_params(opname, self._opts, x, { reg.gamma, reg.beta }, 3)
  end
  local y = op(x, reg.gamma._data or reg.gamma:data(), reg.beta._data or reg.beta:data(),
    self._opts)
  return y
end

---------------------------------------------------------------- InstanceNorm
-- InstanceNorm(axis=2, epsilon=1e-5, center=true, scale=false, beta_initializer="zeros",
--   gamma_initializer="ones", in_channels=0) as MXNet 1.9 (scale is off by default): each
-- (sample, channel) normalised over its other axes. The channel axis other than 2 is
-- swapped to 2 around the op.
local InstanceNorm = HybridBlock:extend("InstanceNorm")
M.InstanceNorm = InstanceNorm
local IN = block.sig(InstanceNorm, AFFINE_PARAMS, { "dtype" })
function InstanceNorm:__init(...)
  affine_norm_init(self, "InstanceNorm", IN(3, ...), 2, false, 3)
  self._opts = { eps = self._eps }
end
local instance_norm, swapaxes = nd.instance_norm, nd.swapaxes
local function in_run(self, x)
  local ax = self._axis
  local sw = ax ~= 2 and nd.is_tensor(x) and { dim1 = 2, dim2 = ax } or nil
  if sw then x = swapaxes(x, sw) end
  local y = affine_norm_run(self, "InstanceNorm", instance_norm, "instance_norm", x)
  if sw then y = swapaxes(y, sw) end
  return y
end
InstanceNorm.forward = guarded("InstanceNorm", in_run)
function InstanceNorm:_repr_args()
  local s = self.gamma.shape
  local c = s and s[1] or 0
  return string.format("eps=%s, axis=%d, center=%s, scale=%s, in_channels=%s", tostring(self._eps),
    self._axis, pybool(self._center), pybool(self._scale), c > 0 and tostring(c) or "None")
end

---------------------------------------------------------------- LayerNorm
-- LayerNorm(axis=-1, epsilon=1e-5, center=true, scale=true, beta_initializer="zeros",
--   gamma_initializer="ones", in_channels=0): each vector along axis (1-based; -1 the
-- last) normalised by its mean and variance, then * gamma + beta (in_channels values each;
-- 0: inferred at the first forward). center=false keeps beta at 0, scale=false gamma at 1.
local LayerNorm = HybridBlock:extend("LayerNorm")
M.LayerNorm = LayerNorm
local LN = block.sig(LayerNorm, AFFINE_PARAMS, { "dtype" })
function LayerNorm:__init(...)
  affine_norm_init(self, "LayerNorm", LN(3, ...), -1, true, 3)
  self._opts = { axis = self._axis, eps = self._eps }
end
local layer_norm = nd.layer_norm
local function ln_run(self, x)
  local y = affine_norm_run(self, "LayerNorm", layer_norm, "layer_norm", x)
  return y
end
LayerNorm.forward = guarded("LayerNorm", ln_run)
function LayerNorm:_repr_args()
  local s = self.gamma.shape
  local c = s and s[1] or 0
  return string.format("axis=%d, eps=%s, center=%s, scale=%s, in_channels=%s", self._axis,
    tostring(self._eps), pybool(self._center), pybool(self._scale), c > 0 and tostring(c) or "None")
end

---------------------------------------------------------------- GroupNorm
-- GroupNorm(num_groups=1, epsilon=1e-5, center=true, scale=true, beta_initializer="zeros",
--   gamma_initializer="ones") as MXNet 1.9: data (N, C, ...), the channels in num_groups
-- groups normalised together; gamma and beta have one value per group (MXNet 1.9's shape).
local GroupNorm = HybridBlock:extend("GroupNorm")
M.GroupNorm = GroupNorm
local GN = block.sig(GroupNorm, { "num_groups", "epsilon", "center", "scale",
  "beta_initializer", "gamma_initializer" }, { "dtype" })
function GroupNorm:__init(...)
  Block.__init(self)
  local o = GN(3, ...)
  local g = o.num_groups or 1
  if type(g) ~= "number" or g < 1 or g % 1 ~= 0 then
    error("GroupNorm: num_groups must be a positive integer, got " .. tostring(g), 3)
  end
  local eps = o.epsilon or 1e-5
  check_eps("GroupNorm", eps, 3)
  self._groups, self._eps = g, eps
  self._scale, self._center = o.scale ~= false, o.center ~= false
  affine(self, g, o, self._scale, self._center)
  self._opts = { num_groups = g, eps = eps }
end
local group_norm = nd.group_norm
local function gn_run(self, x)
  if not nd.is_tensor(x) then error("GroupNorm: input must be a tensor, got " .. type(x), 2) end
  local reg = rawget(self, "_reg")
  local y = group_norm(x, reg.gamma:data(), reg.beta:data(), self._opts)
  return y
end
GroupNorm.forward = guarded("GroupNorm", gn_run)
function GroupNorm:_repr_args()
  return string.format("num_groups=%d, eps=%s, center=%s, scale=%s", self._groups,
    tostring(self._eps), pybool(self._center), pybool(self._scale))
end

return M
