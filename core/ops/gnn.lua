-- core/ops/gnn.lua — message passing on graphs: generalized SpMM and SDDMM with DGL's
-- semantics and the edge softmax, the op table's gnn family (kernels/*/gnn.c and
-- spec/gnn_spec.lua share the base name; mx.dgl.ops names them as DGL does).
-- core/ops/optable.lua joins the families in op order and documents every field.
--
-- A graph reaches these ops as its destination-sorted csr: indptr (N + 1) and, per edge in
-- that order, indices (its source node) and eids (its edge id, the row of edge features),
-- all int64. Node features are (N, ...), edge features (E, ...); the feature dims of the two
-- operands broadcast as DGL's (right-aligned, as NumPy's); `dot` sums the last dim (kept as
-- size 1). Targets name whose row an operand is: u the edge's source, v its destination,
-- e the edge itself.
local ops = {}
local function op(t) ops[#ops + 1] = t end

local BINARY = { "binary_op", "enum", "copy", values = { "add", "sub", "mul", "div", "dot", "copy" },
  doc = "the message of an edge from its operands: lhs op rhs, or lhs alone (copy: no rhs)" }
local TARGETS = { "u", "v", "e" }
local function target(name, default)
  return { name, "enum", default, values = TARGETS,
    doc = "the row " .. name:sub(1, 3) .. " is read at: the edge's source (u), destination (v) or "
      .. "the edge (e)" }
end
local REDUCE = { "reduce_op", "enum", "sum", values = { "sum", "mean", "max", "min" },
  doc = "how a node combines its in-edges' messages (no in-edge: 0)" }
local WRT = { "wrt", "enum", "lhs", values = { "lhs", "rhs" }, doc = "the operand differentiated" }

-- the options a gradient passes on (named fields, no pairs())
local function spmm_opts(p, wrt)
  return { binary_op = p.binary_op, reduce_op = p.reduce_op, lhs_target = p.lhs_target,
    rhs_target = p.rhs_target, wrt = wrt }
end
local function sddmm_opts(p, wrt)
  return { binary_op = p.binary_op, lhs_target = p.lhs_target, rhs_target = p.rhs_target,
    wrt = wrt }
end

-- the gradients of lhs (input 4) and rhs (input 5) through backward op `bw`
local function operand_grads(bw, opts)
  return function(F, x, _, g, p, need)
    local r = {}
    for j = 4, 5 do
      if x[j] and (not need or need[j]) then
        local o = opts(p, j == 4 and "lhs" or "rhs")
        if x[5] then r[j] = F[bw](g[1], x[1], x[2], x[3], x[4], x[5], o)
        else r[j] = F[bw](g[1], x[1], x[2], x[3], x[4], o) end
      end
    end
    return r
  end
end

op { name = "gspmm", family = "gnn", cpu = { supports = true }, infer = "gspmm",
  inputs = { "indptr", "indices", "eids", "lhs", "rhs?" }, dtypes = "numeric",
  params = { BINARY, REDUCE, target("lhs_target", "u"), target("rhs_target", "e") },
  grad = operand_grads("gspmm_backward", spmm_opts),
  doc = "DGL's generalized SpMM (gspmm): every node v reduces the messages lhs[t_l] op "
    .. "rhs[t_r] of its in-edges (u -> v, edge e) with reduce_op: out (N, features). "
    .. "u_mul_e_sum is binary_op mul with targets u and e; copy_u_sum is copy of lhs at u. "
    .. "A node without in-edges gets 0 (max and min too, as DGL). Inputs: the "
    .. "destination-sorted csr (indptr, indices = sources, eids) and the operands." }
op { name = "gspmm_backward", family = "gnn", cpu = { supports = true }, infer = "gspmm_backward",
  inputs = { "ograd", "indptr", "indices", "eids", "lhs", "rhs?" }, dtypes = "numeric",
  nondiff = true, params = { BINARY, REDUCE, target("lhs_target", "u"),
    target("rhs_target", "e"), WRT },
  doc = "gspmm's gradient for lhs or rhs (wrt): each edge's share of ograd at its "
    .. "destination (divided by the in-degree for mean; only the edge that won for max "
    .. "and min, the first one on ties) times the message's derivative, summed into the "
    .. "operand's rows (and over its broadcast dims)." }

op { name = "gsddmm", family = "gnn", cpu = { supports = true }, infer = "gsddmm",
  inputs = { "indptr", "indices", "eids", "lhs", "rhs?" }, dtypes = "numeric",
  params = { BINARY, target("lhs_target", "u"), target("rhs_target", "v") },
  grad = operand_grads("gsddmm_backward", sddmm_opts),
  doc = "DGL's generalized SDDMM (gsddmm): the message lhs[t_l] op rhs[t_r] of every edge, "
    .. "out (E, features) in edge-id order: u_dot_v, u_add_v, e_div_v ... Inputs as gspmm's." }
op { name = "gsddmm_backward", family = "gnn", cpu = { supports = true }, infer = "gsddmm_backward",
  inputs = { "ograd", "indptr", "indices", "eids", "lhs", "rhs?" }, dtypes = "numeric",
  nondiff = true, params = { BINARY, target("lhs_target", "u"), target("rhs_target", "v"), WRT },
  doc = "gsddmm's gradient for lhs or rhs (wrt): ograd of each edge times the message's "
    .. "derivative, summed into the operand's rows (and over its broadcast dims)." }

op { name = "edge_softmax", family = "gnn", cpu = { supports = true }, infer = "edge_softmax",
  inputs = { "indptr", "eids", "logits" }, dtypes = "numeric",
  grad = function(F, x, y, g)
    return { nil, nil, F.edge_softmax_backward(g[1], x[1], x[2], y[1]) }
  end,
  doc = "DGL's edge_softmax: the softmax of logits (E, ...) over each node's in-edges, per "
    .. "feature (max-shifted). With a csr of consecutive segments it is segment_softmax." }
op { name = "edge_softmax_backward", family = "gnn", cpu = { supports = true },
  infer = "edge_softmax_backward",
  inputs = { "ograd", "indptr", "eids", "out" }, dtypes = "numeric", nondiff = true,
  doc = "edge_softmax's gradient: out * (ograd - the sum over the node's in-edges of out * "
    .. "ograd)." }

return ops, {}
