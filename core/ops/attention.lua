-- core/ops/attention.lua — fused self-attention on MXNet's interleaved layout: the op
-- table's attention family (kernels/ref/attention.c, kernels/cpu/attention.c and
-- spec/attention_spec.lua share the base name). core/ops/optable.lua joins the families
-- and documents every field.
--
-- The layout is that of MXNet's interleaved_matmul_selfatt_* ops (linalg family):
-- qkv (T, N, 3*H*D), time-major, each head's query, key and value side by side
-- ((T, N, H, 3, D)); the output (T, N, H*D) is valatt's.
local ops = {}
local function op(t) ops[#ops + 1] = t end

local HEADS = { { "heads", "int", nil, doc = "the number of attention heads (required)" } }
op { name = "interleaved_selfatt", family = "attention", inputs = { "queries_keys_values", "valid_length?" },
  infer = "interleaved_selfatt", cpu = true, dtypes = "numeric", promote = { 1, float = true },
  params = HEADS,
  grad = function(F, x, y, g, p)
    local o = { heads = p.heads }
    if x[2] then return { F.interleaved_selfatt_backward(g[1], x[1], x[2], o) } end
    return { F.interleaved_selfatt_backward(g[1], x[1], o) }
  end,
  doc = "Self-attention in one pass: interleaved_matmul_selfatt_valatt(qkv, softmax("
    .. "interleaved_matmul_selfatt_qk(qkv))) per (sequence, head), the scores never stored. "
    .. "With valid_length (N,) (integral values 0..T) sequence n's keys at and past "
    .. "valid_length[n] get no weight (softmax's use_length); a sequence of length 0 gives "
    .. "zeros. A luamx op (MXNet composes the three)." }
op { name = "interleaved_selfatt_backward", family = "attention",
  inputs = { "ograd", "queries_keys_values", "valid_length?" }, outputs = { "dqkv" },
  infer = "interleaved_selfatt_backward", dtypes = "numeric", promote = { 1, 2, float = true },
  params = HEADS, nondiff = true,
  doc = "interleaved_selfatt's gradient with respect to qkv (the attention recomputed from "
    .. "it): the query, key and value parts; keys past a sequence's length get zero." }

return ops, {}
