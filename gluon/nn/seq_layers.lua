-- gluon/nn/seq_layers.lua — Gluon layers of sequence models: Embedding (MXNet 2.0's names
-- and defaults; LayerNorm is with the other norm layers); gluon/nn/init.lua exports every key.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local check_opts = require("mx.core.class").check_opts

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring, rawget = type, error, tostring, rawget
local guarded = block._guarded

local M = {}

local function pos_int(cls, what, v, level)
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error(cls .. ": " .. what .. " must be a positive integer, got " .. tostring(v), level + 1)
  end
end

---------------------------------------------------------------- Embedding
-- Embedding(input_dim, output_dim, {dtype="float32", weight_initializer=, sparse_grad=false}):
-- out = weight[x] for 0-based token ids x of any shape (out: x's shape + (output_dim)),
-- weight (input_dim, output_dim). An id outside [0, input_dim) is an error (MXNet clips).
-- sparse_grad: the weight's gradient touches only the looked-up rows (dense storage until
-- row_sparse exists; docs/attention.md).
local Embedding = HybridBlock:extend("Embedding")
M.Embedding = Embedding
local EMB_OPTS = { dtype = true, weight_initializer = true, sparse_grad = true }
function Embedding:__init(input_dim, output_dim, opts)
  Block.__init(self)
  local o = check_opts("Embedding", opts, EMB_OPTS, 3)
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
  if w._data == nil then self:_infer_params("embedding", self._opts, x, { w }, 2) end
  local y = embedding(x, w._data or w:data(), self._opts)
  return y
end
Embedding.forward = guarded("Embedding", emb_run)
function Embedding:_repr_args()
  return string.format("%d -> %d, %s", self._input_dim, self._output_dim, self._dtype)
end

return M
