-- core/ops/linalg.lua — the matrix products: the op table's linalg family
-- (kernels/*/linalg.c and spec/linalg_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- linalg (owner: la)
-- Shapes of an NDArray operand (eager F); the formulas reshape N-d operands to the
-- matrices the kernel sees and reshape the gradients back with reshape_like.
local function mat(F, t, rows, cols) return F.reshape(t, { shape = { rows, cols } }) end
local function prod(s, i, j)
  local n = 1
  for k = i, j do n = n * s[k] end
  return n
end
-- dot on the stored matrices A2 (M, K) or (K, M), B2 (K, N) or (N, K), G2 (M, N)
local function dot_grads(F, A2, B2, G2, ta, tb, name)
  local dA, dB
  if not ta and not tb then
    dA = F[name](G2, B2, { transpose_b = true }); dB = F[name](A2, G2, { transpose_a = true })
  elseif ta and not tb then
    dA = F[name](B2, G2, { transpose_b = true }); dB = F[name](A2, G2)
  elseif tb and not ta then
    dA = F[name](G2, B2); dB = F[name](G2, A2, { transpose_a = true })
  else
    dA = F[name](B2, G2, { transpose_a = true, transpose_b = true })
    dB = F[name](G2, A2, { transpose_a = true, transpose_b = true })
  end
  return dA, dB
end
local TRANSPOSE_FLAGS = { { "transpose_a", "bool", false, doc = "use lhs transposed" },
  { "transpose_b", "bool", false, doc = "use rhs transposed" } }

op { name = "dot", family = "linalg", inputs = { "lhs", "rhs" }, infer = "dot", cpu = true,
  dtypes = "numeric", params = TRANSPOSE_FLAGS,
  grad = function(F, x, y, g, p)
    p = p or {}
    local A, B, G = x[1], x[2], g[1]
    local ta, tb = p.transpose_a or false, p.transpose_b or false
    if A:ndim() == 2 and B:ndim() == 2 then
      local dA, dB = dot_grads(F, A, B, G, ta, tb, "dot")
      return { dA, dB }
    end
    local sa, sb = A:shape(), B:shape()
    local K = ta and sa[1] or sa[#sa]
    local M, N = prod(sa, 1, #sa) / K, prod(sb, 1, #sb) / K
    local A2 = ta and mat(F, A, K, M) or mat(F, A, M, K)
    local B2 = tb and mat(F, B, N, K) or mat(F, B, K, N)
    local dA, dB = dot_grads(F, A2, B2, mat(F, G, M, N), ta, tb, "dot")
    return { F.reshape_like(dA, A), F.reshape_like(dB, B) }
  end,
  doc = "MXNet's dot: contracts lhs's last axis (first with transpose_a) with rhs's first "
    .. "axis (last with transpose_b); N-d operands act as matrices of their other dims. "
    .. "Two 1-d operands give a (1,) tensor." }
op { name = "batch_dot", family = "linalg", inputs = { "lhs", "rhs" }, infer = "batch_dot",
  cpu = true, dtypes = "numeric", params = TRANSPOSE_FLAGS,
  grad = function(F, x, y, g, p)
    p = p or {}
    local dA, dB = dot_grads(F, x[1], x[2], g[1], p.transpose_a or false, p.transpose_b or false,
      "batch_dot")
    return { dA, dB }
  end,
  doc = "Batched matrix product: (B..., M, K) x (B..., K, N) -> (B..., M, N); the flags "
    .. "transpose the last two axes of an operand. Batch dims must be equal." }
op { name = "matmul", family = "linalg", inputs = { "lhs", "rhs" }, infer = "matmul", cpu = true,
  dtypes = "numeric",
  grad = function(F, x, y, g)
    local A, B, G = x[1], x[2], g[1]
    local a1, b1 = A:ndim() == 1, B:ndim() == 1
    local A2 = a1 and F.expand_dims(A, { axis = 1 }) or A
    local B2 = b1 and F.expand_dims(B, { axis = 2 }) or B
    local G2 = G
    if a1 and b1 then G2 = F.reshape(G, { shape = { 1, 1 } })
    elseif a1 then G2 = F.expand_dims(G, { axis = -2 })
    elseif b1 then G2 = F.expand_dims(G, { axis = -1 }) end
    local dA = F.reduce_to(F.matmul(G2, F.swapaxes(B2, { dim1 = -1, dim2 = -2 })), A2)
    local dB = F.reduce_to(F.matmul(F.swapaxes(A2, { dim1 = -1, dim2 = -2 }), G2), B2)
    if a1 then dA = F.reshape_like(dA, A) end
    if b1 then dB = F.reshape_like(dB, B) end
    return { dA, dB }
  end,
  doc = "NumPy's matmul: (..., M, K) x (..., K, N) -> (..., M, N) with broadcast batch dims; "
    .. "a 1-d operand gains a unit axis that the result drops again." }
op { name = "fully_connected", family = "linalg", inputs = { "data", "weight", "bias?" },
  infer = "fully_connected", partial = true, cpu = true, dtypes = "numeric",
  params = { { "num_hidden", "int", nil, doc = "output units (checked against weight)" },
    { "no_bias", "bool", false, doc = "no bias input" },
    { "flatten", "bool", true, doc = "collapse all but the first axis of data" },
    { "act_type", "enum", "none", values = { "none", "relu" },
      doc = "activation applied in the same pass (Dense's activation='relu')" } },
  grad = function(F, x, y, g, p, need, into)
    local X, W, G = x[1], x[2], g[1]
    -- relu(z) > 0 exactly where z > 0: the output masks the gradient
    if p.act_type == "relu" then G = F.relu_backward(G, y[1]) end
    local X2, G2
    -- a 2-d eager input is already the matrix: no reshape copies (Dense's case)
    local plain = type(X.ndim) == "function" and X:ndim() == 2
    if plain then
      X2, G2 = X, G
    elseif p.flatten == false then
      X2 = F.reshape(X, { shape = { -1, 0 }, reverse = true })
      G2 = F.reshape(G, { shape = { -1, 0 }, reverse = true })
    else
      X2, G2 = F.flatten(X), G
    end
    local dX -- the first layer's data gradient is as costly as the weight's: skip it
    if not need or need[1] then
      dX = F.dot(G2, W)
      if not plain then dX = F.reshape_like(dX, X) end
    end
    -- into (eager backward only): write the parameters' gradients straight into
    -- their buffers, sparing autograd a copy of each
    local dW, db = into and into[2], into and into[3]
    local r = { dX, F.dot(G2, X2, { transpose_a = true, out = dW }) }
    if not p.no_bias then r[3] = F.sum(G2, { axis = 1, out = db }) end
    return r
  end,
  doc = "MXNet's FullyConnected: out = data . weight^T + bias with weight (num_hidden, "
    .. "in_units). flatten=true reshapes data to (batch, -1) first; flatten=false applies "
    .. "to the last axis. Inputs: data, weight[, bias] (no bias with no_bias=true). "
    .. "act_type='relu' applies relu to the result in the same pass (an extension: MXNet "
    .. "fuses it in its oneDNN subgraph backend)." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  dot = { "dot" }, batch_dot = { "batch_dot" }, fully_connected = { "FullyConnected" },
}

return ops, MXNET
