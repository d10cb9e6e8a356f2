-- core/ops/optable.lua — THE op table's index. Each op is declared once, in its
-- family's file core/ops/<family>.lua (the base name its kernels and spec share), which
-- returns that family's list; this file joins them in FAMILIES order. The C registry and
-- param structs (tools/gen_ops.lua), the FFI declarations and the mx.nd
-- functions/methods (lua/mx/nd.lua), docs/ops.md (tools/gen_docs.lua) and the coverage
-- checks in spec/optable_spec.lua all derive from the joined table.
--
-- Fields:
--   name      op name: C kernels are mx_ref_<ref or name>, mx_cpu_<cpu or name>
--   family    base name of its files: kernels/{ref,cpu}/<family>.c,
--             kernels/cuda/<family>.cu, spec/<family>_spec.lua
--   inputs    input names (tensors); variadic = true: any number >= 1 (concat)
--   outputs   output names (default {"out"})
--   params    { {name, type, default, doc=, values= (enum)} ... }; types: int,
--             float, bool, dtype, axis, axes, shape, ints, floats, enum. A nil default
--             makes the param optional (has_<name> flag / tuple n = -1 in C).
--             Axis-typed params are 1-based in Lua and converted once, in the
--             generic wrapper, to 0-based for C. floats: a list of at most 16 numbers
--             (C mx_ftuple {int32_t n; double v[16];}; Lua takes a number or a list;
--             MXNet's Tuple<float> attribute strings "(0.5, 1, 2)", "(1,)", "[1, 2]"),
--             the default a Lua list ({ 0.1, 0.1, 0.2, 0.2 }).
--   ctx       true: a creation op; params start with the device (ctx= option)
--   infer     shape/dtype inference: C function mx_infer_<infer> (core/ops/)
--   dtypes    accepted input dtypes: "all", "numeric", "float", "int", ... or a list
--   cpu       true: an optimised kernel mx_cpu_<name> exists (or a string: its name);
--             otherwise the CPU runs the ref kernel
--   cuda      true: libmx_cuda registers a kernel for it
--   view      Lua may serve the call as a view instead of a copy (reshape...)
--   scalar    for binary ops: { op = "<name>_scalar", rop = "<r-name>_scalar" } used
--             when the left/right operand is a Lua number
--   grad      function(F, inputs, outputs, ograds, p, need, into) -> { dinput1, ... } written in
--             terms of other ops through F (mx.nd eagerly, mx.sym symbolically);
--             p holds the op's params as the Lua caller gave them (1-based axes),
--             never nil (an empty table when none were given), without out=, and
--             with the train_flag param set as the forward saw it. need (nil: all
--             needed) has need[j] false when input j takes no gradient (data,
--             labels): a formula may skip that
--             work (the data gradient of fully_connected costs as much as the weight's)
--             and return nil for it. Return nil (or
--             leave out) entries for inputs that take no gradient. into (usually nil):
--             into[j] is a tensor of input j's shape and dtype that the formula may
--             compute input j's gradient into (out=) and return, sparing autograd a
--             copy into a variable's buffer; formulas are free to ignore it. Return shapes must
--             equal the inputs' (autograd checks). Every grad op needs a case in
--             spec/helpers/gradcases.lua (spec/gradcheck_spec.lua fails otherwise)
--   nondiff   true instead of grad: the op has no gradient (argmax, comparisons...);
--             autograd records nothing for it, so its outputs stop the gradient
--   train_flag true (a bool param named `training`) or the name of a bool param: the
--             wrappers fill it from the train-mode flag (mx.autograd.record/train_mode/
--             predict_mode) unless the caller passes it (dropout, batchnorm)
--   random    true: draws random numbers (the one random resource): dispatch reserves
--             the call's counters (inference says how many) from the session's stream
--             in program order and hands them to the kernel in its context
--   aux       names of auxiliary inputs, after the inputs, that the op updates in place
--             (BatchNorm's moving mean/var): autograd, graphs and export know them
--   num_outputs  name of an int param giving the output count (split's num_outputs)
--   nout      instead of num_outputs, when the count is another function of the params:
--             "<name>" makes C call int mx_nout_<name>(const void *params) (core/ops/,
--             -1 for bad params); nout_by names the param that decides (messages, docs)
--   inplace   { {k, i}, ... }: output k may reuse input i's memory (1-based); out= on
--             exactly input i then runs in place, any other overlap between an out=
--             and an input computes through a temporary (dispatch.c)
--   inplace_fn  "<name>": instead of inplace, when which input output k may reuse depends
--             on the params or the input count: C int mx_inplace_<name>(const void *params,
--             int nin, int k) returns it (0-based) or -1 (core/ops/)
--   shape_only  input positions (1-based) whose values the kernels never read, only their
--             shape and dtype (the `like` of reduce_to, zeros_like's data): dispatch does not
--             convert them out of a backend layout
--   promote   input positions promoted to one dtype before the kernel ({1, 2}; float =
--             true: at least float32); defaults by infer kind (mx/core/opgen.lua PROMOTE)
--   partial   true: inference handles unknown dims (fills parameter inputs' dims)
--   mxnet     MXNet operator names of the op ({"FullyConnected"}): mx_op_find takes
--             them; params may carry `mxnet = "attr_name"` when MXNet's name differs
--   amp       target | safe | fp32 | widest: the AMP cast policy (default by family):
--             target runs in the AMP target dtype (bfloat16/float16: MXNet's
--             TARGET_DTYPE_OPS), safe in whatever float dtype it gets, fp32 in float32,
--             widest in the widest float dtype of its inputs (MXNet's WIDEST_TYPE_CASTS)
--   amp_fp32_if  { param, {values} }: float32 when that param has one of those values
--             (MXNet's CONDITIONAL_FP32_FUNCS: activation's softrelu)
--   Input names ending in "?" are optional (fully_connected's "bias?").
--   stypes    storage-type kernels besides the dense ones: { { "csr, default -> default",
--             kernel = "dot_csr_dns", cpu = true, applies = "dot_plain" }, ... }; dispatch
--             runs the first entry whose input storage types (default/dns, row_sparse/rsp,
--             csr) are the call's, whose outputs fit the out= slots and whose C predicate
--             mx_stype_applies_<applies>(params) (core/ops/) accepts; a call with a sparse
--             input that none takes falls back to dense (a one-time warning). Kernels:
--             mx_ref_<kernel> and, with cpu, mx_cpu_<kernel> (default kernel name
--             <op>_<abbreviations>). A family file may also return, third, a table
--             STYPES (op name -> entries) adding entries to ops of other families.
--   half      "all" or "out": float16 data is accepted by shape/dtype inference as float32
--             (mx.nd's wrappers compute it in float32, MXNet's accumulation): "all" gives
--             every output float16 (float16 or float32 other inputs), "out" only the first
--             (the other float inputs must be float32: batch_norm's statistics). The kernels
--             themselves never see float16 (a direct call is the dtype error)
--   doc       one paragraph, shown by mx.help and docs/ops.md

-- Op ids are table order: the families in this order, each file's ops in its order. The
-- generated layouts and the table hash (mx_ops_hash, checked by lua/mx/core/lib.lua) follow
-- it, so reordering FAMILIES or a file's entries changes ids and needs a rebuild of libmx.
local FAMILIES = { "creation", "random", "elemwise", "reduce", "softmax", "autograd",
  "linalg", "optimizer", "nn", "shape", "indexing", "image", "sort", "conv", "pool", "norm",
  "sequence", "rnn", "special", "box", "audio", "loss", "amp",
  "quantize", "anchor", "sparse", "gnn", "deformable", "attention" }

-- The family files sit beside this file: core/ops/ when tools/gen_ops.lua and
-- tools/gen_docs.lua dofile it, mx/core/ops/ when it is required as mx.core.ops.optable
-- (the checkout's symlink lua/mx/core/ops, and the installed rock's files).
local src = debug.getinfo(1, "S").source
local dir = src:match("^@(.*[/\\])") or ""

-- MXNet names: each family file returns, after its ops, a table MXNET (op name -> MXNet
-- 1.9's operator names of that op, where the semantics match: symbol JSON maps both ways,
-- mx_op_find takes them), set here as the ops' `mxnet`. Every param's MXNet attribute name
-- equals its luamx name (num_hidden, act_type, dim, dim1/dim2, a_min/a_max, repeats, reps,
-- begin/end/step, keepdims, ...), so no param carries `mxnet = "..."` today; MXNet's axis
-- values are 0-based, which is what the C structs hold. Not mapped because the semantics
-- differ (docs/c-api.md): argmax, argmin, pick, take, one_hot, gather_nd, scatter_nd
-- (1-based index values here), gather_nd_backward, diag_backward (luamx's input order),
-- reduce_to, matmul, softrelu, relu_backward,
-- pick_backward, take_backward, full_like, random_bernoulli, sample_multinomial (1-based
-- categories) and the optimizer updates
-- (input order and state layout are luamx's own).
local ops, all, extra = {}, {}, {}
for _, family in ipairs(FAMILIES) do
  local path = dir .. family .. ".lua"
  local list, mxnet, stypes = dofile(path)
  if stypes then extra[#extra + 1] = { path, stypes } end
  local by_name = {}
  for _, o in ipairs(list) do
    if o.family ~= family then
      error(path .. ": op " .. tostring(o.name) .. " has family " .. tostring(o.family), 0)
    end
    ops[#ops + 1] = o
    by_name[o.name] = o
    all[o.name] = o
  end
  for name, names in pairs(mxnet or {}) do
    local o = by_name[name]
    if not o then error(path .. ": MXNet names for " .. name .. ", not an op of this file", 0) end
    if o.mxnet then error(path .. ": op " .. name .. ": MXNet names given twice", 0) end
    o.mxnet = names
  end
end
-- storage-type kernels a family declares for other families' ops (sparse.lua's for dot,
-- add, sum...), after the op's own, in FAMILIES order
for _, x in ipairs(extra) do
  local path, stypes = x[1], x[2]
  local names = {}
  for name in pairs(stypes) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local o = all[name]
    if not o then error(path .. ": storage-type kernels for " .. name .. ", not an op", 0) end
    o.stypes = o.stypes or {}
    for _, e in ipairs(stypes[name]) do o.stypes[#o.stypes + 1] = e end
  end
end

return ops
