-- core/ops/shape.lua — the layout ops (reshape, transpose, slice, concat...): the op table's shape family
-- (kernels/*/shape.c and spec/shape_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- shape
-- Slice bounds are `index` params: 1-based inclusive in Lua, converted once in
-- nd.lua (fill_params) to C's 0-based exclusive form, where -2^63 stands for a
-- bound left out (MXNet's None). Lists may be shorter than ndim: later axes whole.
local SLICE = { { "begin", "ints", nil, index = "begin", doc = "first index per axis (1-based)" },
  { "end", "ints", nil, index = "end", doc = "last index per axis, inclusive" },
  { "step", "ints", nil, index = "step", doc = "step per axis (default 1; may be negative)" } }
local function layout(name, infer, params, grad, doc, extra)
  local t = { name = name, family = "shape", inputs = { "data" }, infer = infer, cpu = true,
    params = params, grad = grad, nondiff = grad == nil or nil, doc = doc }
  for k, v in pairs(extra or {}) do t[k] = v end
  op(t)
end
local function like(F, x, y, g) return { F.reshape_like(g[1], x[1]) } end

layout("reshape", "reshape", { { "shape", "shape", {}, doc = "new shape; MXNet codes 0 -1 -2 -3 -4" },
  { "reverse", "bool", false, doc = "match the special codes from the right" } }, like,
  "The data with a new shape (same size). MXNet's codes: 0 copies a dim, -1 infers one, -2 "
  .. "copies the rest, -3 merges two dims, -4 splits one. Eager calls are views when possible.",
  { view = true })
op { name = "reshape_like", family = "shape", inputs = { "lhs", "rhs" }, infer = "reshape_like",
  shape_only = { 2 },
  cpu = true, grad = function(F, x, y, g) return { F.reshape_like(g[1], x[1]), F.zeros_like(x[2]) } end,
  doc = "lhs's data with rhs's shape (same number of elements)." }
-- the shape as values: int64 arrays that depend only on the input's shape (MXNet 1.9's
-- shape_array / size_array; no gradient, the input's values are never read)
op { name = "shape_array", family = "shape", inputs = { "data" }, infer = "shape_array",
  dtypes = "all", nondiff = true, shape_only = { 1 },
  doc = "data's shape as a 1-D int64 array of ndim values (MXNet's shape_array)." }
op { name = "size_array", family = "shape", inputs = { "data" }, infer = "size_array",
  dtypes = "all", nondiff = true, shape_only = { 1 },
  doc = "data's number of elements as an int64 array of shape (1) (MXNet's size_array)." }
layout("transpose", "transpose", { { "axes", "axes", nil, doc = "permutation (default: reverse)" } },
  function(F, x, y, g, p)
    local axes = p and p.axes
    if axes == nil or #axes == 0 then return { F.transpose(g[1]) } end
    local n, inv = #axes, {}
    for i = 1, n do
      local a = axes[i] < 0 and axes[i] + n + 1 or axes[i]
      inv[a] = i
    end
    return { F.transpose(g[1], { axes = inv }) }
  end, "Permutes the axes (default: reverses them). Copies.")
layout("swapaxes", "swapaxes", { { "dim1", "axis", 1 }, { "dim2", "axis", 1 } },
  function(F, x, y, g, p) return { F.swapaxes(g[1], p) } end, "Swaps two axes. Copies.")
layout("expand_dims", "expand_dims", { { "axis", "axis", nil, doc = "position of the new axis" } },
  like, "Inserts a size-1 axis at position axis of the result (negative: from the end).")
layout("squeeze", "squeeze", { { "axis", "axes", nil, doc = "axes to drop (default: all size-1)" } },
  like, "Removes size-1 axes (the given ones, which must have size 1, or all).")
layout("flatten", "flatten", {}, like, "MXNet's Flatten: (d1, d2*...*dk).")
op { name = "concat", family = "shape", inputs = { "data" }, variadic = true, infer = "concat",
  cpu = true, dnnl = { supports = true, out_layout = true, layouts = { "onednn" } },
  params = { { "dim", "axis", 2, doc = "axis to join along (MXNet's default 1 -> 2)" } },
  grad = function(F, x, y, g, p)
    local dim = (p and p.dim) or 2
    local r, off = {}, 0
    for i = 1, #x do
      local n = x[i]:shape()[dim < 0 and x[i]:ndim() + dim + 1 or dim]
      r[i] = F.slice_axis(g[1], { axis = dim, begin = off + 1, ["end"] = off + n })
      off = off + n
    end
    return r
  end, doc = "Joins tensors along an existing axis (other dims must match)." }
op { name = "stack", family = "shape", inputs = { "data" }, variadic = true, infer = "stack",
  cpu = true, params = { { "axis", "axis", 1, doc = "position of the new axis" } },
  grad = function(F, x, y, g, p)
    local axis = (p and p.axis) or 1
    local r = {}
    for i = 1, #x do
      r[i] = F.squeeze(F.slice_axis(g[1], { axis = axis, begin = i, ["end"] = i }), { axis = axis })
    end
    return r
  end, doc = "Joins same-shaped tensors along a new axis." }
-- split: as many outputs as num_outputs says (the op table's `num_outputs`); the pieces'
-- gradients join back through concat (backward gives outputs without a gradient zeros).
op { name = "split", family = "shape", inputs = { "data" }, infer = "split", cpu = true,
  num_outputs = "num_outputs",
  params = { { "num_outputs", "int", nil, doc = "number of equal pieces (required, 1..64)" },
    { "axis", "axis", 2, doc = "axis to cut (MXNet's default 1 -> 2)" },
    { "squeeze_axis", "bool", false, doc = "drop the axis from the pieces (which must have size 1 there)" } },
  grad = function(F, x, y, g, p)
    local axis = p.axis or 2
    if axis < 0 then axis = x[1]:ndim() + axis + 1 end
    local parts = {}
    for k = 1, #y do
      parts[k] = p.squeeze_axis and F.expand_dims(g[k], { axis = axis }) or g[k]
    end
    return { F.concat(parts, { dim = axis }) }
  end,
  doc = "MXNet's split/SliceChannel: num_outputs equal pieces of data along axis (its size must "
    .. "divide evenly); squeeze_axis drops the axis when the pieces have size 1 there. Returns "
    .. "num_outputs tensors (out= takes a list of them)." }
layout("slice", "slice", SLICE, function(F, x, y, g, p)
  p = p or {}
  return { F.slice_assign(F.zeros_like(x[1]), g[1], { begin = p.begin, ["end"] = p["end"],
    step = p.step }) }
end, "A copy of a box: begin/end are 1-based inclusive per axis (negative from the end, false "
  .. "or a shorter list: the whole axis), step may be negative. Out-of-range bounds clamp.")
layout("slice_axis", "slice_axis", { { "axis", "axis", 1 },
  { "begin", "int", 1, index = "begin", doc = "first index (1-based)" },
  { "end", "int", nil, index = "end", doc = "last index, inclusive (default: the last)" } },
  function(F, x, y, g, p)
    p = p or {}
    local n, axis = x[1]:ndim(), p.axis or 1
    if axis < 0 then axis = n + axis + 1 end
    local b, e = {}, {}
    for d = 1, axis - 1 do b[d], e[d] = false, false end
    b[axis], e[axis] = p.begin or 1, p["end"] or -1
    return { F.slice_assign(F.zeros_like(x[1]), g[1], { begin = b, ["end"] = e }) }
  end, "The range begin..end (1-based, inclusive) of one axis.")
-- (in place on data: x[{...}] = v writes the box where x is; a value overlapping x
-- still goes through a temporary)
op { name = "slice_assign", family = "shape", inputs = { "data", "value" }, infer = "slice_assign",
  cpu = true, params = SLICE, inplace = { { 1, 1 } },
  grad = function(F, x, y, g, p)
    p = p or {}
    local box = { begin = p.begin, ["end"] = p["end"], step = p.step }
    local gd = F.slice_assign_scalar(g[1], { scalar = 0, begin = p.begin, ["end"] = p["end"],
      step = p.step })
    return { gd, F.reduce_to(F.slice(g[1], box), x[2]) }
  end,
  doc = "A copy of data with the box (as in slice) replaced by value, broadcast to the box. "
    .. "With out=data it updates data in place (x[{...}] = v)." }
op { name = "slice_assign_scalar", family = "shape", inputs = { "data" },
  infer = "slice_assign_scalar", cpu = true, inplace = { { 1, 1 } },
  params = { { "scalar", "float", 0 }, SLICE[1], SLICE[2], SLICE[3] },
  grad = function(F, x, y, g, p)
    p = p or {}
    return { F.slice_assign_scalar(g[1], { scalar = 0, begin = p.begin, ["end"] = p["end"],
      step = p.step }) }
  end, doc = "A copy of data with the box (as in slice) set to scalar." }
layout("tile", "tile", { { "reps", "ints", {}, doc = "repetitions per axis (NumPy alignment)" } },
  function(F, x, y, g, p)
    local xs, reps = x[1]:shape(), (p and p.reps) or {}
    if type(reps) == "number" then reps = { reps } end
    local n = math.max(#xs, #reps)
    local split, axes = {}, {}
    for i = 1, n do
      local ix, ir = i - (n - #xs), i - (n - #reps)
      split[#split + 1] = ir >= 1 and reps[ir] or 1
      axes[#axes + 1] = #split
      split[#split + 1] = ix >= 1 and xs[ix] or 1
    end
    local s = F.sum(F.reshape(g[1], { shape = split }), { axis = axes })
    return { F.reshape_like(s, x[1]) }
  end, "Repeats the whole tensor reps[i] times along axis i (NumPy's tile).")
layout("repeat", "repeat", { { "repeats", "int", 1 }, { "axis", "axis", nil } },
  function(F, x, y, g, p)
    p = p or {}
    local r, xs = p.repeats or 1, x[1]:shape()
    local split, axis = {}, nil
    if p.axis == nil then
      split, axis = { x[1]:size(), r }, 2
    else
      local a = p.axis < 0 and #xs + p.axis + 1 or p.axis
      for d = 1, #xs do
        split[#split + 1] = xs[d]
        if d == a then split[#split + 1] = r axis = #split end
      end
    end
    local s = F.sum(F.reshape(g[1], { shape = split }), { axis = axis })
    return { F.reshape_like(s, x[1]) }
  end, "Repeats each element `repeats` times along axis (no axis: of the flattened data). "
  .. "`repeat` is a Lua keyword: call it as mx.nd[\"repeat\"](x, {...}) or x:repeat_(...).")
layout("flip", "flip", { { "axis", "axes", nil, doc = "axes to reverse (default: all)" } },
  function(F, x, y, g, p) return { F.flip(g[1], p) } end, "Reverses the order along axes.")
layout("cast", "cast", { { "dtype", "dtype", nil, doc = "target dtype (required)" } },
  function(F, x, y, g) return { F.cast(g[1], { dtype = x[1]:dtype() }) } end,
  "The data converted to dtype (x:astype(dtype)); float->int truncates toward zero. Also "
  .. "takes and makes int16, a storage dtype (safetensors, ONNX) no other op computes in.",
  { dtypes = "storage" })
layout("copy", "same", {}, function(F, x, y, g) return { g[1] } end, "A new copy of the data.",
  { dtypes = "storage" })

---------------------------------------------------------------- shape
-- pad's gradient, one padded axis at a time (padding is separable): the slice of g over
-- the input, plus (edge) the summed pad regions on the border elements or (reflect) the
-- pad regions flipped back onto the elements they mirror. Placing a piece uses pad itself
-- (constant 0), legal because only axes 3.. are ever padded.
local function pad_axis_grad(F, g, d, b, a, n, mode, nd)
  local core = F.slice_axis(g, { axis = d, begin = b + 1, ["end"] = b + n })
  if mode == "constant" or mode == nil then return core end
  local function place(v, before, after)
    local pw = {}
    for i = 1, 2 * nd do pw[i] = 0 end
    pw[2 * d - 1], pw[2 * d] = before, after
    return F.pad(v, { mode = "constant", pad_width = pw })
  end
  if b > 0 then
    local gb = F.slice_axis(g, { axis = d, begin = 1, ["end"] = b })
    if mode == "edge" then core = F.add(core, place(F.sum(gb, { axis = d, keepdims = true }), 0, n - 1))
    else core = F.add(core, place(F.flip(gb, { axis = d }), 1, n - 1 - b)) end
  end
  if a > 0 then
    local ga = F.slice_axis(g, { axis = d, begin = b + n + 1, ["end"] = b + n + a })
    if mode == "edge" then core = F.add(core, place(F.sum(ga, { axis = d, keepdims = true }), n - 1, 0))
    else core = F.add(core, place(F.flip(ga, { axis = d }), n - 1 - a, 1)) end
  end
  return core
end
layout("pad", "pad", { { "mode", "enum", "constant", values = { "constant", "edge", "reflect" },
    doc = "constant: constant_value; edge: the border element; reflect: mirrored (no border repeat)" },
  { "pad_width", "ints", {}, doc = "MXNet's flat (before, after) per axis; axes 1 and 2 must be 0" },
  { "constant_value", "float", 0, doc = "the fill of mode constant" } },
  function(F, x, y, g, p)
    local xs, pw, gi = x[1]:shape(), p.pad_width, g[1]
    for d = 1, #xs do
      local b, a = pw[2 * d - 1] or 0, pw[2 * d] or 0
      if b > 0 or a > 0 then gi = pad_axis_grad(F, gi, d, b, a, xs[d], p.mode, #xs) end
    end
    return { gi }
  end,
  "MXNet's Pad: a 4-D input (5-D: not yet, param lists hold 8 entries) padded on axes 3.. "
  .. "by pad_width (before, after per axis, "
  .. "2*ndim entries, the first four 0), with constant_value, the edge element or the "
  .. "reflection (pads < the axis length).")
layout("moveaxis", "moveaxis", { { "source", "axes", nil, doc = "axis or axes to move (1-based)" },
  { "destination", "axes", nil, doc = "their new positions (1-based)" } },
  function(F, x, y, g, p)
    return { F.moveaxis(g[1], { source = p.destination, destination = p.source }) }
  end, "NumPy's moveaxis: source axes go to destination positions, the rest keep their order. "
  .. "Copies.")
layout("depth_to_space", "depth_to_space", { { "block_size", "int", nil, doc = "block size (>= 1)" } },
  function(F, x, y, g, p) return { F.space_to_depth(g[1], p) } end,
  "NCHW (N, C, H, W) -> (N, C/b^2, H*b, W*b): out[n, c, h*b+i, w*b+j] = "
  .. "x[n, (i*b+j)*C/b^2 + c, h, w] (MXNet's DCR order).")
layout("space_to_depth", "space_to_depth", { { "block_size", "int", nil, doc = "block size (>= 1)" } },
  function(F, x, y, g, p) return { F.depth_to_space(g[1], p) } end,
  "NCHW (N, C, H, W) -> (N, C*b^2, H/b, W/b), the inverse of depth_to_space.")
layout("broadcast_axis", "broadcast_axis", { { "axis", "axes", {}, doc = "axes of size 1 to broadcast" },
  { "size", "ints", {}, doc = "their new sizes (one per axis)" } },
  function(F, x, y, g, p)
    local s = F.sum(g[1], { axis = p.axis, keepdims = true })
    return { s }
  end, "Broadcasts the size-1 axes `axis` to `size` (MXNet's broadcast_axis/broadcast_axes).")

---------------------------------------------------------------- shape
-- split_v2: the output count is sections or #indices (mx_nout_split_v2, core/ops/shape.c).
-- indices are piece starts counted in elements before the cut (the same numbers in 0- and
-- 1-based terms): MXNet's _split_v2 attribute, which nd.split_v2(x, {2, 5}) fills as
-- {0, 2, 5} (lua/mx/nd.lua). Gradient: the pieces' gradients joined back, zeros for
-- elements before the first start.
op { name = "split_v2", family = "shape", inputs = { "data" }, infer = "split_v2", cpu = true,
  nout = "split_v2", nout_by = "sections",
  params = { { "indices", "ints", {}, doc = "piece starts (MXNet's _split_v2 attribute: 0 first; "
      .. "at most 16)" },
    { "axis", "axis", 2, doc = "axis to cut (MXNet's default 1 -> 2; nd.split_v2: 1)" },
    { "squeeze_axis", "bool", false, doc = "drop the axis from the pieces (all of size 1 there)" },
    { "sections", "int", 0, doc = "> 0: that many equal pieces (indices ignored)" } },
  grad = function(F, x, y, g, p)
    local xs = x[1]:shape()
    local axis = p.axis or 2
    if axis < 0 then axis = #xs + axis + 1 end
    local parts = {}
    local first = (p.sections or 0) > 0 and 0 or (p.indices[1] or 0)
    if first > 0 then
      local zs = {}
      for d = 1, #xs do zs[d] = d == axis and first or xs[d] end
      parts[1] = F.zeros(zs, { dtype = x[1]:dtype() })
    end
    for k = 1, #y do
      local gk = p.squeeze_axis and F.expand_dims(g[k], { axis = axis }) or g[k]
      if gk:shape()[axis] > 0 then parts[#parts + 1] = gk end
    end
    if #parts == 0 then return { F.zeros_like(x[1]) } end
    return { F.concat(parts, { dim = axis }) }
  end,
  doc = "MXNet's split_v2: pieces of data along axis, `sections` equal ones or cut at "
    .. "`indices` (piece starts; nd.split_v2(x, indices_or_sections, {axis=1, squeeze_axis=false}) "
    .. "takes MXNet's int or list of cut points). Returns one tensor per piece." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  reshape = { "Reshape" }, reshape_like = { "reshape_like" }, transpose = { "transpose" },
  swapaxes = { "SwapAxis" }, expand_dims = { "expand_dims" }, squeeze = { "squeeze" },
  flatten = { "Flatten" }, stack = { "stack" },
  -- _rnn_param_concat: gluon.rnn's packing of the per-layer params (forward and gradient are
  -- Concat's; MXNet also infers one unknown input size back from the output, which imports
  -- never need: their params come from the file)
  concat = { "Concat", "concatenate", "_rnn_param_concat" },
  slice = { "slice", "crop" }, slice_axis = { "slice_axis" }, slice_assign = { "_slice_assign" },
  slice_assign_scalar = { "_slice_assign_scalar" }, tile = { "tile" }, ["repeat"] = { "repeat" },
  flip = { "reverse" }, cast = { "Cast" }, copy = { "_copy", "identity" },
  split = { "split", "SliceChannel" },
  pad = { "Pad", "pad" }, depth_to_space = { "depth_to_space" },
  space_to_depth = { "space_to_depth" }, broadcast_axis = { "broadcast_axis", "broadcast_axes" },
  split_v2 = { "_split_v2" }, shape_array = { "shape_array" }, size_array = { "size_array" },
  -- moveaxis: only _npi_moveaxis (the np interface) in MXNet 1.9, so no legacy name
}

return ops, MXNET
