-- core/ops/indexing.lua — the indexing ops (pick, take, one_hot, gather_nd, scatter_nd,
-- slice_like, diag): the op table's indexing family
-- (kernels/*/indexing.c and spec/indexing_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- indexing
-- Index tensors hold 1-based positions (docs/ops-notes.md), any numeric dtype.
op { name = "pick", family = "indexing", inputs = { "data", "index" }, infer = "pick",
  dtypes = "numeric",
  params = { { "axis", "axis", -1 }, { "keepdims", "bool", false },
    { "mode", "enum", "clip", values = { "clip", "wrap" } } },
  grad = function(F, x, y, g, p)
    return { F.pick_backward(x[1], x[2], g[1], p), F.zeros_like(x[2]) }
  end,
  doc = "Picks one element along axis per position: out[..] = data[.., index[..], ..] with "
    .. "1-based index values (index has data's shape without axis). mode clip clamps, wrap "
    .. "wraps out-of-range positions." }
op { name = "pick_backward", family = "indexing", inputs = { "data", "index", "ograd" },
  infer = "pick_backward", dtypes = "numeric",
  params = { { "axis", "axis", -1 }, { "keepdims", "bool", false },
    { "mode", "enum", "clip", values = { "clip", "wrap" } } },
  nondiff = true, doc = "pick's gradient: zeros of data's shape with ograd at the picked positions." }
op { name = "take", family = "indexing", inputs = { "data", "indices" }, infer = "take",
  dtypes = "numeric", cpu = true,
  params = { { "axis", "axis", 1 }, { "mode", "enum", "clip", values = { "clip", "wrap", "raise" } } },
  grad = function(F, x, y, g, p)
    return { F.take_backward(x[1], x[2], g[1], p), F.zeros_like(x[2]) }
  end,
  doc = "Takes slices along axis at 1-based positions: shape data[:axis] + indices + "
    .. "data[axis+1:] (Embedding's lookup). mode clip/wrap/raise for out-of-range positions." }
op { name = "take_backward", family = "indexing", inputs = { "data", "indices", "ograd" },
  infer = "take_backward", dtypes = "numeric", cpu = true,
  params = { { "axis", "axis", 1 }, { "mode", "enum", "clip", values = { "clip", "wrap", "raise" } } },
  nondiff = true, doc = "take's gradient: ograd slices summed into zeros of data's shape." }
op { name = "one_hot", family = "indexing", inputs = { "indices" }, infer = "one_hot",
  dtypes = "numeric", nondiff = true,
  params = { { "depth", "int", 0 }, { "on_value", "float", 1 }, { "off_value", "float", 0 },
    { "dtype", "dtype", 0 } },
  doc = "indices.shape + (depth): on_value at the 1-based position each index names, "
    .. "off_value elsewhere (out-of-range positions: all off)." }

---------------------------------------------------------------- gather_nd, scatter_nd,
-- slice_like, diag. gather_nd/scatter_nd index VALUES are 1-based like take/pick
-- (docs/ops-notes.md); gather_nd also takes -n..-1 from the end (MXNet 1.9's gather_nd wraps
-- -n..-1); another index outside 1..n is an error naming the op (MXNet 1.9 leaves it
-- undefined). scatter_nd with repeated indices: the last one written wins.
op { name = "gather_nd", family = "indexing", inputs = { "data", "indices" }, infer = "gather_nd",
  dtypes = "numeric",
  grad = function(F, x, y, g)
    return { F.gather_nd_backward(x[1], x[2], g[1]), F.zeros_like(x[2]) }
  end,
  doc = "MXNet's gather_nd: indices (M, Y...) address data's first M dims with 1-based values "
    .. "(-1 the last, as MXNet's negative indices); out has shape Y... + data.shape[M+1:] "
    .. "(out[y] = data[indices[1][y], ..., indices[M][y]])." }
op { name = "gather_nd_backward", family = "indexing", inputs = { "data", "indices", "ograd" },
  infer = "gather_nd_backward", dtypes = "numeric", nondiff = true,
  doc = "gather_nd's gradient (MXNet's _backward_gather_nd): ograd added into zeros of data's "
    .. "shape at the positions indices address (repeated positions sum)." }
op { name = "scatter_nd", family = "indexing", inputs = { "data", "indices" }, infer = "scatter_nd",
  dtypes = "numeric",
  params = { { "shape", "shape", {}, doc = "the output's shape" } },
  grad = function(F, x, y, g)
    return { F.gather_nd(g[1], x[2]), F.zeros_like(x[2]) }
  end,
  doc = "MXNet's scatter_nd: zeros of `shape` with data's elements written at the positions "
    .. "indices (M, Y...) address (1-based values; data has shape Y... + shape[M+1:]). Repeated "
    .. "positions: the last written wins (MXNet: undefined)." }
op { name = "slice_like", family = "indexing", inputs = { "data", "shape_like" }, infer = "slice_like",
  shape_only = { 2 },
  params = { { "axes", "axes", nil, doc = "axes to cut (default: all; then ndims must match)" } },
  grad = function(F, x, y, g)
    if y[1]:size() == 0 then return { F.zeros_like(x[1]), F.zeros_like(x[2]) } end
    local s, b = y[1]:shape(), {}
    for i = 1, #s do b[i] = 1 end
    return { F.slice_assign(F.zeros_like(x[1]), g[1], { begin = b, ["end"] = s }),
      F.zeros_like(x[2]) }
  end,
  doc = "MXNet's slice_like: data cut to shape_like's size on the given axes (1-based; "
    .. "default all), starting at index 1. shape_like's dims there must not exceed data's." }
op { name = "diag", family = "indexing", inputs = { "data" }, infer = "diag",
  params = { { "k", "int", 0, doc = "diagonal offset (> 0 above, < 0 below the main one)" } },
  grad = function(F, x, y, g, p)
    if x[1]:ndim() == 1 then return { F.diag(g[1], p) } end
    return { F.diag_backward(x[1], g[1], p) }
  end,
  doc = "MXNet's diag for 1-D and 2-D data: a 1-D vector becomes the k-th diagonal of a square "
    .. "matrix (n+|k| wide), a 2-D matrix gives its k-th diagonal (empty when k is past the edge)." }
op { name = "diag_backward", family = "indexing", inputs = { "data", "ograd" }, infer = "diag_backward",
  params = { { "k", "int", 0 } }, nondiff = true,
  doc = "diag's gradient for 2-D data: zeros of data's shape with ograd on the k-th diagonal." }

---------------------------------------------------------------- index_copy
op { name = "index_copy", family = "indexing", inputs = { "old", "index", "new" },
  infer = "index_copy", dtypes = "numeric",
  grad = function(F, x, y, g)
    -- old: the ograd with the replaced rows zeroed; new: the ograd's rows at index
    return { F.index_copy(g[1], x[2], F.zeros_like(x[3])), F.zeros_like(x[2]),
      F.take(g[1], x[2], { axis = 1 }) }
  end,
  doc = "MXNet's contrib.index_copy: a copy of old (N, ...) with its rows at the 1-based "
    .. "positions of the 1-D index (M) replaced by new's rows (M, ...); new has old's dtype. "
    .. "A position outside 1..N is an error; repeated positions: the last row wins." }

---------------------------------------------------------------- embedding
-- Token ids are 0-based DATA (vocabulary ids, as class labels are: docs/ops-notes.md), not
-- 1-based positions: embedding keeps MXNet's Embedding semantics so exported models and
-- 0-based vocabularies work unchanged. An id outside [0, input_dim) is an error (MXNet
-- clips it silently to the last row: a wrong vocabulary would then train garbage).
op { name = "embedding", family = "indexing", inputs = { "data", "weight" }, infer = "embedding",
  partial = true, cpu = true, dtypes = "numeric", promote = {},
  params = {
    { "input_dim", "int", nil, doc = "vocabulary size (weight's rows; taken from weight when omitted)" },
    { "output_dim", "int", nil, doc = "embedding width (weight's columns)" },
    { "dtype", "dtype", nil, doc = "weight's dtype (deferred init: default float32)" },
    { "sparse_grad", "bool", false, doc = "the weight gradient is row_sparse: the looked-up "
      .. "rows only (docs/sparse.md)" } },
  grad = function(F, x, y, g, p, need, into)
    local r = {}
    if not need or need[2] then -- into: straight into the weight's gradient buffer
      r[2] = F.embedding_backward(x[1], x[2], g[1], { sparse_grad = p.sparse_grad or false,
        out = into and into[2] })
    end
    if not need or need[1] then r[1] = F.zeros_like(x[1]) end
    return r
  end,
  doc = "MXNet's Embedding: out = weight[data] with data's shape + (output_dim). data holds "
    .. "0-based token ids (any numeric dtype, truncated); one outside [0, input_dim) is an "
    .. "error (MXNet clips). weight (input_dim, output_dim) is inferred for deferred init." }
op { name = "embedding_backward", family = "indexing", inputs = { "data", "weight", "ograd" },
  infer = "embedding_backward", dtypes = "numeric", promote = {}, shape_only = { 2 }, cpu = true,
  nondiff = true,
  params = { { "sparse_grad", "bool", false, doc = "a row_sparse result (a dense out= slot: dense)" } },
  doc = "embedding's weight gradient: zeros of weight's shape with each ograd row added into "
    .. "the row its token id names (only those rows are touched)." }

-- MXNet 1.9's operator names whose semantics match (core/ops/optable.lua). gather_nd and
-- scatter_nd stay unmapped: MXNet's index values are 0-based, luamx's 1-based (as take).
-- index_copy stays unmapped for the same reason (MXNet's _contrib_index_copy is 0-based).
local MXNET = { slice_like = { "slice_like" }, diag = { "diag" } }
MXNET.embedding = { "Embedding" }

return ops, MXNET
