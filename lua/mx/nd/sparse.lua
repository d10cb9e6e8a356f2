-- mx.nd.sparse — sparse storage at the Lua surface, as MXNet 1.9's mx.nd.sparse: the
-- NDArray methods stype, tostype, indices, indptr, data, nnz, retain; mx.nd.sparse's
-- csr_matrix, row_sparse_array, zeros, empty, array and its op names; csr slicing (x[i],
-- x[{{a, b}, {c, d}}]). Values read densified (tolist, totable, printing: mx.nd and
-- mx.nd.print). The storage itself is C's (mx.h "sparse storage"); ops pick their
-- sparse kernels in dispatch (docs/sparse.md). Installed by mx.nd:
-- `index = require("mx.nd.sparse")(nd, index)`.
--
-- Index parts are 0-based (indptr starts at 0, column and row ids count from 0): they
-- are a storage format shared with MXNet, scipy and the .params files, not Lua
-- positions, as Embedding's token ids are 0-based.
local lib = require("mx.core.lib")
local context = require("mx.context")
local H = require("mx.nd.handles")
local Pm = require("mx.nd.params")

local ffi, C = lib.ffi, lib.C
local type, error, tostring, tonumber = type, error, tostring, tonumber
local outbuf, shapebuf = H.outbuf, H.shapebuf
local is_tensor, wrap = H.is_tensor, H._wrap
local dtype_code = Pm.dtype_code

local STYPE_NAME = { [0] = "default", "row_sparse", "csr" }
local STYPE_CODE = { default = 0, row_sparse = 1, csr = 2 }

return function(nd, index)
local NDArray = nd.NDArray
local check = nd._check
local sparse = {}
nd.sparse = sparse

local function stype_of(x) return C.mx_tensor_stype(x.h) end
nd._stype_code = STYPE_CODE

function NDArray.stype(x)
  if not is_tensor(x) then nd._not_self("stype", x, 2) end
  return STYPE_NAME[stype_of(x)]
end

local function stype_arg(who, s, level)
  local c = STYPE_CODE[s]
  if c == nil then
    error(who .. ": unknown storage type " .. tostring(s) .. " (default, row_sparse, csr)", level + 1)
  end
  return c
end

-- x:tostype(stype): cast_storage (recorded by autograd like any op)
function NDArray.tostype(x, stype)
  if not is_tensor(x) then nd._not_self("tostype", x, 2) end
  stype_arg("tostype", stype, 2)
  local r = nd.cast_storage(x, { stype = stype })
  return r
end

-- part k (0 data, 1 and 2 the index arrays) of a sparse tensor, as a new dense tensor
local function part(x, k, who, level)
  if not is_tensor(x) then nd._not_self(who, x, level + 1) end
  if stype_of(x) == 0 then
    error(who .. ": the tensor has default (dense) storage; only row_sparse and csr tensors "
      .. "have " .. who, level + 1)
  end
  check(C.mx_sparse_part(x.h, k, outbuf), level + 1, who)
  return wrap(outbuf[0])
end
-- csr: indices are the column ids (part 2), indptr part 1; row_sparse: indices part 1
function NDArray.indices(x)
  local r = part(x, is_tensor(x) and stype_of(x) == 2 and 2 or 1, "indices", 2)
  return r
end
function NDArray.indptr(x)
  if is_tensor(x) and stype_of(x) == 1 then
    error("indptr: a row_sparse tensor has no indptr (its indices are row ids)", 2)
  end
  local r = part(x, 1, "indptr", 2)
  return r
end
function NDArray.data(x)
  local r = part(x, 0, "data", 2)
  return r
end
-- stored entries: rows of a row_sparse tensor, values of a csr one
local nnz_buf = ffi.new("int64_t[1]")
function NDArray.nnz(x)
  if not is_tensor(x) then nd._not_self("nnz", x, 2) end
  if stype_of(x) == 0 then error("nnz: the tensor has default (dense) storage", 2) end
  check(C.mx_sparse_nnz(x.h, nnz_buf), 2)
  return tonumber(nnz_buf[0])
end

-- a 1-d int64 tensor of 0-based ids from a Lua list or a tensor
local function ids_arg(who, v, level)
  if is_tensor(v) then return v end
  if type(v) == "number" then v = { v } end
  if type(v) ~= "table" then
    error(who .. ": indices must be a tensor or a list of 0-based ids, got " .. type(v), level + 1)
  end
  local ok, t = pcall(nd.array, v, { dtype = "int64" })
  if not ok or t:ndim() > 1 then
    error(who .. ": indices must be a flat list of 0-based ids", level + 1)
  end
  if t:ndim() == 0 then t = t:reshape { 1 } end
  return t
end

-- x:retain(indices): the rows listed (0-based ids), the others dropped (RowSparseNDArray.retain)
function NDArray.retain(x, indices)
  if not is_tensor(x) then nd._not_self("retain", x, 2) end
  local ok, r = pcall(nd.sparse_retain, x, ids_arg("retain", indices, 2))
  if not ok then error((tostring(r):gsub("^[^\n]-:%d+: ", "")), 2) end
  return r
end

-- csr[i] (row i) and csr[{r, c}] (an entry per axis: a number or an inclusive {first, last}
-- range, {} the whole axis), as dense indexing but always a 2-d csr: an integer keeps its
-- axis, as MXNet's CSRNDArray.__getitem__ gives csr[i] the shape (1, cols)
local function sparse_index(x, k, level)
  local s = stype_of(x)
  if s == 0 then
    local r = index(x, k, level + 1)
    return r
  end
  if type(k) ~= "number" and type(k) ~= "table" then return nil end
  if s ~= 2 then
    error("index: a row_sparse tensor cannot be indexed (retain rows with x:retain(ids), or "
      .. "x:tostype('default') first)", level + 1)
  end
  local b, e = {}, {}
  local spec = type(k) == "number" and { { k, k } } or k
  for d = 1, #spec do
    local r = spec[d]
    if type(r) == "number" then r = { r, r } end
    if type(r) ~= "table" then
      error("index: a csr tensor takes row/column numbers or {first, last} ranges", level + 1)
    end
    b[d], e[d] = r[1] or 1, r[2] or -1
  end
  local r = nd.slice(x, { begin = b, ["end"] = e })
  return r
end

---------------------------------------------------------------- constructors
local function opts_of(who, opts, level)
  opts = opts or {}
  if type(opts) ~= "table" or is_tensor(opts) then
    error(who .. ": options must be a table ({shape=, ctx=, dtype=})", level + 1)
  end
  for k in pairs(opts) do
    if k ~= "shape" and k ~= "ctx" and k ~= "dtype" then
      error(who .. ": unknown option '" .. tostring(k) .. "' (valid: shape, ctx, dtype)", level + 1)
    end
  end
  return opts
end
local function shape_arg(who, s, level)
  if type(s) ~= "table" or #s == 0 then error(who .. ": shape must be a list of dims", level + 1) end
  for i = 1, #s do
    local d = s[i]
    if type(d) ~= "number" or d < 0 or d % 1 ~= 0 then
      error(who .. ": shape dim " .. i .. " must be a non-negative integer", level + 1)
    end
    shapebuf[i - 1] = d
  end
  return #s
end
local function is_shape(t)
  if type(t) ~= "table" or is_tensor(t) or #t == 0 then return false end
  for i = 1, #t do if type(t[i]) ~= "number" then return false end end
  return true
end
-- a part given as a tensor or a Lua list
local function part_arg(who, what, v, dtype, level)
  if is_tensor(v) then
    if dtype and v:dtype() ~= dtype then return v:astype(dtype) end
    return v
  end
  if type(v) ~= "table" then
    error(who .. ": " .. what .. " must be a tensor or a list, got " .. type(v), level + 1)
  end
  local ok, t = pcall(nd.array, v, { dtype = dtype or "float32" })
  if not ok then error(who .. ": " .. what .. ": " .. tostring(t):gsub("^[^:]*:%d+: ", ""), level + 1) end
  if t:ndim() == 0 then t = t:reshape { 1 } end
  return t
end
local function on_ctx(t, ctx)
  if ctx == nil then return t end
  return t:to(ctx)
end

local function zeros(who, stype, shape, dtype, ctx, level)
  local n = shape_arg(who, shape, level + 1)
  local dt, di = context.parse(ctx, level + 1, who)
  local code = dtype_code(dtype or "float32")
  if not code then error(who .. ": unknown dtype " .. tostring(dtype), level + 1) end
  check(C.mx_sparse_zeros(stype, n, shapebuf, code, dt, di, outbuf), level + 1, who)
  return wrap(outbuf[0])
end

local function from_parts(who, stype, shape, d, a0, a1, level)
  local n = shape_arg(who, shape, level + 1)
  check(C.mx_sparse_from_parts(stype, n, shapebuf, d.h, a0.h, a1 and a1.h or nil, outbuf),
    level + 1, who)
  return wrap(outbuf[0])
end

-- csr_matrix(arg, {shape=, ctx=, dtype=}), as MXNet's:
--   {data, indices, indptr} with shape=            the csr parts (tensors or lists)
--   {data, {row, col}} with shape=                 coordinates (COO), duplicates summed
--   a dense tensor or a nested table               its nonzero entries
--   a csr tensor                                   a copy
--   {rows, cols}                                   an empty (all-zero) matrix
function sparse.csr_matrix(arg, opts)
  local who = "csr_matrix"
  opts = opts_of(who, opts, 2)
  local dtype = opts.dtype
  if is_tensor(arg) then
    local x = arg
    if stype_of(x) ~= 0 and dtype and x:dtype() ~= dtype then x = x:astype(dtype) end
    if stype_of(x) == 2 then return on_ctx(x:copy(), opts.ctx) end
    if dtype and x:dtype() ~= dtype then x = x:astype(dtype) end
    if x:ndim() ~= 2 then error(who .. ": a csr matrix is 2-d, got a " .. x:ndim() .. "-d tensor", 2) end
    return on_ctx(nd.cast_storage(x, { stype = "csr" }), opts.ctx)
  end
  if type(arg) ~= "table" then error(who .. ": expected parts, a tensor or a shape, got " .. type(arg), 2) end
  if is_shape(arg) and #arg == 2 and opts.shape == nil then
    return zeros(who, 2, arg, dtype, opts.ctx, 2)
  end
  local coo = #arg == 2 and type(arg[2]) == "table" and not is_tensor(arg[2]) and #arg[2] == 2
    and (is_tensor(arg[2][1]) or type(arg[2][1]) == "table")
  if (#arg == 3 or coo) and opts.shape then
    local shape = opts.shape
    local d = part_arg(who, "data", arg[1], dtype or (is_tensor(arg[1]) and arg[1]:dtype()), 2)
    local ind, ptr
    if coo then
      local row = part_arg(who, "row", arg[2][1], "int64", 2)
      local col = part_arg(who, "col", arg[2][2], "int64", 2)
      if row:size() ~= d:size() or col:size() ~= d:size() then
        error(who .. ": data, row and col must have one length", 2)
      end
      -- counts per row -> indptr; entries in row order (from_parts sorts the columns)
      local rows, rl, cl, vl = shape[1], row:tolist(), col:tolist(), d:tolist()
      local cnt = {}
      for r = 0, rows do cnt[r] = 0 end
      for i = 1, #rl do
        local r = rl[i]
        if r < 0 or r >= rows or r % 1 ~= 0 then
          error(string.format("%s: row[%d] = %s is not a row id in [0, %d)", who, i, tostring(r), rows), 2)
        end
        cnt[r + 1] = cnt[r + 1] + 1
      end
      for r = 1, rows do cnt[r] = cnt[r] + cnt[r - 1] end
      local pos, ci, vi = {}, {}, {}
      for r = 0, rows - 1 do pos[r] = cnt[r] end
      for i = 1, #rl do
        local r = rl[i]
        pos[r] = pos[r] + 1
        ci[pos[r]], vi[pos[r]] = cl[i], vl[i]
      end
      local ptrl = {}
      for r = 0, rows do ptrl[r + 1] = cnt[r] end
      ind = nd.array(#ci > 0 and ci or {}, { dtype = "int64" })
      ptr = nd.array(ptrl, { dtype = "int64" })
      d = nd.array(#vi > 0 and vi or {}, { dtype = d:dtype() })
      if #ci == 0 then ind, d = ind:reshape { 0 }, d:reshape { 0 } end
    else
      ind = part_arg(who, "indices", arg[2], "int64", 2)
      ptr = part_arg(who, "indptr", arg[3], "int64", 2)
    end
    if #shape ~= 2 then error(who .. ": shape must have 2 dims", 2) end
    return on_ctx(from_parts(who, 2, shape, d, ptr, ind, 2), opts.ctx)
  end
  if #arg == 3 or coo then error(who .. ": the parts form needs shape= (rows, cols)", 2) end
  local ok, x = pcall(nd.array, arg, { dtype = dtype })
  if not ok then error(who .. ": " .. tostring(x):gsub("^[^:]*:%d+: ", ""), 2) end
  if x:ndim() ~= 2 then error(who .. ": a csr matrix is 2-d, got a " .. x:ndim() .. "-d table", 2) end
  return on_ctx(nd.cast_storage(x, { stype = "csr" }), opts.ctx)
end

-- row_sparse_array(arg, {shape=, ctx=, dtype=}), as MXNet's:
--   {data, indices} with shape=      rows (data (n, shape[2], ...)) at 0-based row ids
--   a dense tensor or a nested table  its rows with a nonzero
--   a row_sparse tensor               a copy
--   {d1, d2, ...}                     an empty (all-zero) array of that shape
function sparse.row_sparse_array(arg, opts)
  local who = "row_sparse_array"
  opts = opts_of(who, opts, 2)
  local dtype = opts.dtype
  if is_tensor(arg) then
    local x = arg
    if dtype and x:dtype() ~= dtype then x = x:astype(dtype) end
    if stype_of(x) == 1 then return on_ctx(x:copy(), opts.ctx) end
    return on_ctx(nd.cast_storage(x, { stype = "row_sparse" }), opts.ctx)
  end
  if type(arg) ~= "table" then error(who .. ": expected parts, a tensor or a shape, got " .. type(arg), 2) end
  if is_shape(arg) and opts.shape == nil then return zeros(who, 1, arg, dtype, opts.ctx, 2) end
  if #arg == 2 and opts.shape then
    local d = part_arg(who, "data", arg[1], dtype or (is_tensor(arg[1]) and arg[1]:dtype()), 2)
    local ind = part_arg(who, "indices", arg[2], "int64", 2)
    if d:ndim() == 1 and #opts.shape > 1 then
      error(who .. ": data must have a row per index (shape (n, ...)), got a 1-d data", 2)
    end
    return on_ctx(from_parts(who, 1, opts.shape, d, ind, nil, 2), opts.ctx)
  end
  if #arg == 2 and not is_shape(arg) and opts.shape == nil then
    error(who .. ": the (data, indices) form needs shape=", 2)
  end
  local ok, x = pcall(nd.array, arg, { dtype = dtype })
  if not ok then error(who .. ": " .. tostring(x):gsub("^[^:]*:%d+: ", ""), 2) end
  return on_ctx(nd.cast_storage(x, { stype = "row_sparse" }), opts.ctx)
end

-- zeros(stype, shape, {ctx=, dtype=}): MXNet's mx.nd.sparse.zeros (stype "default": dense)
function sparse.zeros(stype, shape, opts)
  if type(opts) ~= "nil" and type(opts) ~= "table" then error("zeros: options must be a table", 2) end
  opts = opts or {}
  local c = stype_arg("zeros", stype, 2)
  if type(shape) == "number" then shape = { shape } end
  if c == 0 then
    local r = nd.zeros(shape, { dtype = opts.dtype, ctx = opts.ctx })
    return r
  end
  local r = zeros("zeros", c, shape, opts.dtype, opts.ctx, 2)
  return r
end
sparse.empty = sparse.zeros

-- array(source, {ctx=, dtype=}): a sparse copy of a sparse tensor
function sparse.array(src, opts)
  opts = opts_of("array", opts, 2)
  if not is_tensor(src) or stype_of(src) == 0 then
    error("array: expected a row_sparse or csr tensor (dense data: csr_matrix / "
      .. "row_sparse_array)", 2)
  end
  local x = src
  if opts.dtype then x = x:astype(opts.dtype) else x = x:copy() end
  return on_ctx(x, opts.ctx)
end

-- mx.nd.sparse's op names: MXNet's (elemwise_add, retain, ...) and every mx.nd op
local ALIAS = { elemwise_add = "add", elemwise_sub = "sub", elemwise_mul = "mul",
  retain = "sparse_retain", _square_sum = "square_sum" }
setmetatable(sparse, { __index = function(_, k)
  local f = nd[ALIAS[k] or k]
  if f == nil then return nil end
  return f
end })

return sparse_index
end
