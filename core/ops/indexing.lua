-- core/ops/indexing.lua — the indexing ops (pick, take, one_hot): the op table's indexing family
-- (kernels/*/indexing.c and spec/indexing_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- indexing (owner: la)
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

return ops
