-- gluon/nn/seq_layers.lua — (issue 12) Gluon layers of sequence models: Embedding and
-- LayerNorm, MXNet 2.0's names and defaults; gluon/nn/init.lua exports every key.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local infer = require("mx._infer").infer
local norm = require("mx.gluon.nn.norm_layers")

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring, rawget, pcall, ipairs = type, error, tostring, rawget, pcall, ipairs
local rethrow = block._rethrow

local M = {}

local function pos_int(cls, what, v, level)
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error(cls .. ": " .. what .. " must be a positive integer, got " .. tostring(v), level + 1)
  end
end

---------------------------------------------------------------- Embedding
-- Embedding(input_dim, output_dim, dtype="float32", weight_initializer=, sparse_grad=false):
-- out = weight[x] for 0-based token ids x of any shape (out: x's shape + (output_dim)),
-- weight (input_dim, output_dim). An id outside [0, input_dim) is an error (MXNet clips).
-- sparse_grad: the weight's gradient touches only the looked-up rows (dense storage until
-- row_sparse exists; docs/attention.md).
local Embedding = HybridBlock:extend("Embedding")
M.Embedding = Embedding
local EMB = block.sig(Embedding, { "input_dim", "output_dim", "dtype", "weight_initializer",
  "sparse_grad" })
function Embedding:__init(...)
  Block.__init(self)
  local o = EMB(3, ...)
  local input_dim, output_dim = o.input_dim, o.output_dim
  pos_int("Embedding", "input_dim", input_dim, 3)
  pos_int("Embedding", "output_dim", output_dim, 3)
  self._input_dim, self._output_dim = input_dim, output_dim
  self._sparse_grad = o.sparse_grad == true
  local dtype = o.dtype or "float32"
  self._dtype = dtype
  self.weight = Parameter("weight", { shape = { input_dim, output_dim }, dtype = dtype,
    init = o.weight_initializer and initializer.create(o.weight_initializer) })
  self._opts = { input_dim = input_dim, output_dim = output_dim, dtype = dtype,
    sparse_grad = self._sparse_grad }
end
local embedding = nd.embedding
local function emb_run(self, x)
  if not nd.is_tensor(x) then error("Embedding: input must be a tensor, got " .. type(x), 2) end
  local w = rawget(self, "_reg").weight
  if w._data == nil then -- the core's partial inference says the weight's shape
    local r = infer("embedding", self._opts, { x, { shape = w.shape, dtype = w.dtype } }, 2)
    w:set_shape(r.inputs[2].shape, 2)
    w:_finish_deferred_init(2)
  end
  local y = embedding(x, w._data or w:data(), self._opts)
  return y
end
function Embedding:forward(x)
  local ok, y = pcall(emb_run, self, x)
  if not ok then rethrow("Embedding", y, 2) end
  return y
end
function Embedding:_repr_args()
  return string.format("%d -> %d, %s", self._input_dim, self._output_dim, self._dtype)
end

---------------------------------------------------------------- LayerNorm
-- LayerNorm(axis=-1, epsilon=1e-5, center=true, scale=true, beta_initializer="zeros",
--   gamma_initializer="ones", in_channels=0): each vector along axis (1-based; -1 the
-- last) normalised by its mean and variance, then * gamma + beta (in_channels values each;
-- 0: inferred at the first forward). center=false keeps beta at 0, scale=false gamma at 1.
local LayerNorm = HybridBlock:extend("LayerNorm")
M.LayerNorm = LayerNorm
local LN = block.sig(LayerNorm, { "axis", "epsilon", "center", "scale", "beta_initializer",
  "gamma_initializer", "in_channels" }, { "dtype" })
function LayerNorm:__init(...)
  Block.__init(self)
  local o = LN(3, ...)
  local c, axis = norm._check_channels_axis("LayerNorm", o, 3, -1)
  local eps = o.epsilon or 1e-5
  norm._check_eps("LayerNorm", eps, 3)
  self._axis, self._eps = axis, eps
  self._center, self._scale = o.center ~= false, o.scale ~= false
  norm._affine(self, c, o, self._scale, self._center)
  self._opts = { axis = axis, eps = eps }
end
local layer_norm = nd.layer_norm
local function ln_run(self, x)
  if not nd.is_tensor(x) then error("LayerNorm: input must be a tensor, got " .. type(x), 2) end
  local reg = rawget(self, "_reg")
  if reg.gamma._data == nil then
    local ins = { x, { shape = reg.gamma.shape, dtype = reg.gamma.dtype },
      { shape = reg.beta.shape, dtype = reg.beta.dtype } }
    local r = infer("layer_norm", self._opts, ins, 2)
    for i, p in ipairs({ reg.gamma, reg.beta }) do
      p:set_shape(r.inputs[i + 1].shape, 2)
      p:_finish_deferred_init(2)
    end
  end
  local y = layer_norm(x, reg.gamma._data or reg.gamma:data(), reg.beta._data or reg.beta:data(),
    self._opts)
  return y
end
function LayerNorm:forward(x)
  local ok, y = pcall(ln_run, self, x)
  if not ok then rethrow("LayerNorm", y, 2) end
  return y
end
function LayerNorm:_repr_args()
  local s = self.gamma.shape
  local c = s and s[1] or 0
  return string.format("axis=%d, eps=%s, center=%s, scale=%s, in_channels=%s", self._axis,
    tostring(self._eps), self._center and "True" or "False", self._scale and "True" or "False",
    c > 0 and tostring(c) or "None")
end

return M
