-- mx.gluon.data.batchify — turning a list of samples into batch tensors.
--
-- `default(samples)` is the DataLoader's default batchify_fn (MXNet's
-- default_batchify_fn): samples[i] is one sample — a single value for a one-field
-- dataset, or a table {field1, field2, ...} — and the result is one batched value
-- (or a table of them, one per field). Tensors are stacked along a new first axis
-- by one memcpy per sample into a preallocated batch; numbers become an int32 tensor
-- when all are integers and float32 otherwise; Lua lists of numbers become float32
-- rows; csr samples (single rows, (1, cols), as csr[i] gives) become one (n, cols) csr.
-- Stack, Group and Pad are MXNet 2.0's batchify classes.
local lib = require("mx.core.lib")
local nd = require("mx.nd")

local ffi, C = lib.ffi, lib.C
local is_tensor = nd.is_tensor
local type, error, tostring = type, error, tostring

local M = {}

local shapebuf = ffi.new("int64_t[8]")
local hbuf = ffi.new("mx_tensor*[1]")

local function check(rc, level)
  if rc ~= 0 then error(ffi.string(C.mx_last_error()), level + 1) end
end

local function new_like_rows(t, n, level)
  -- a new tensor of shape (n, t:shape()[2..]) with t's dtype and device
  local nd_ = C.mx_tensor_ndim(t.h)
  C.mx_tensor_shape(t.h, shapebuf)
  shapebuf[0] = n
  check(C.mx_tensor_empty(nd_, shapebuf, C.mx_tensor_dtype(t.h), C.mx_tensor_dev_type(t.h),
    C.mx_tensor_dev_id(t.h), hbuf), level + 1)
  return nd._wrap(hbuf[0])
end

-- Rows idx[1..n] (1-based) of tensor a as a new (n, ...) tensor. CPU: one memcpy per
-- row; other devices: one device copy per row.
function M.gather(a, idx, n)
  local dim0 = tonumber(C.mx_tensor_dim(a.h, 0))
  if dim0 < 0 then error("gather: cannot take rows of a 0-d tensor", 2) end
  local out = new_like_rows(a, n, 2)
  if n == 0 then return out end
  if C.mx_tensor_dev_type(a.h) == 1 then
    local rowbytes = tonumber(C.mx_tensor_size(a.h)) / (dim0 > 0 and dim0 or 1)
      * tonumber(C.mx_dtype_size(C.mx_tensor_dtype(a.h)))
    local src = ffi.cast("const char*", C.mx_tensor_data(a.h))
    local dst = ffi.cast("char*", C.mx_tensor_data(out.h))
    for b = 1, n do
      local i = idx[b]
      if type(i) ~= "number" or i % 1 ~= 0 or i < 1 or i > dim0 then
        error(string.format("gather: index %s is not a whole number in 1..%d", tostring(i), dim0), 2)
      end
      ffi.copy(dst + (b - 1) * rowbytes, src + (i - 1) * rowbytes, rowbytes)
    end
  else
    for b = 1, n do
      local i = idx[b]
      if type(i) ~= "number" or i % 1 ~= 0 or i < 1 or i > dim0 then
        error(string.format("gather: index %s is not a whole number in 1..%d", tostring(i), dim0), 2)
      end
      check(C.mx_tensor_index0(a.h, i - 1, hbuf), 2)
      local src = hbuf[0]
      local rc = C.mx_tensor_index0(out.h, b - 1, hbuf)
      if rc ~= 0 then C.mx_tensor_release(src) check(rc, 2) end
      local dst = hbuf[0]
      rc = C.mx_tensor_copy_into(dst, src)
      C.mx_tensor_release(src)
      C.mx_tensor_release(dst)
      check(rc, 2)
    end
  end
  return out
end

local function same_shape(a, b)
  local n = C.mx_tensor_ndim(a.h)
  if n ~= C.mx_tensor_ndim(b.h) then return false end
  for d = 0, n - 1 do
    if C.mx_tensor_dim(a.h, d) ~= C.mx_tensor_dim(b.h, d) then return false end
  end
  return true
end

local function shape_str(t)
  local s = t:shape()
  return "(" .. table.concat(s, ", ") .. (#s == 1 and ",)" or ")")
end

-- Stack n tensors of one shape into a new (n, ...) tensor (the first one's dtype and
-- device; others are converted on copy).
local function stack_tensors(list, n, level)
  local first = list[1]
  local nd0 = C.mx_tensor_ndim(first.h)
  if nd0 >= 8 then error("batchify: samples already have 8 dims; cannot add a batch axis", level + 1) end
  C.mx_tensor_shape(first.h, shapebuf)
  for d = nd0, 1, -1 do shapebuf[d] = shapebuf[d - 1] end
  shapebuf[0] = n
  check(C.mx_tensor_empty(nd0 + 1, shapebuf, C.mx_tensor_dtype(first.h),
    C.mx_tensor_dev_type(first.h), C.mx_tensor_dev_id(first.h), hbuf), level + 1)
  local out = nd._wrap(hbuf[0])
  for b = 1, n do
    local s = list[b]
    if not is_tensor(s) then
      error("batchify: sample " .. b .. " is a " .. type(s) .. " where sample 1 is a tensor",
        level + 1)
    end
    if not same_shape(s, first) then
      error(string.format("batchify: cannot stack samples of different shapes: sample 1 is %s, "
        .. "sample %d is %s (pad them, or pass a batchify_fn)", shape_str(first), b,
        shape_str(s)), level + 1)
    end
    check(C.mx_tensor_index0(out.h, b - 1, hbuf), level + 1)
    local dst = hbuf[0]
    local rc = C.mx_tensor_copy_into(dst, s.h)
    C.mx_tensor_release(dst)
    check(rc, level + 1)
  end
  return out
end

---------------------------------------------------------------- csr rows
-- A csr tensor's parts as dense tensors {data, indices (column ids), indptr, rows, cols}
-- (copies: a dataset keeps them, made once).
function M.csr_parts(t)
  local s = t:shape()
  return { data = t:data(), indices = t:indices(), indptr = t:indptr(), rows = s[1],
    cols = s[2], dtype = t:dtype() }
end

-- Rows runs[1..m] of the csr parts lists P[1..m] ({parts, first row (0-based), count})
-- as one new csr of those rows in order: one copy per run of values and column ids.
local function csr_concat(runs, m, cols, dtype, ctx, level)
  local nnz, nrows = 0, 0
  for r = 1, m do
    local P, a, k = runs[r][1], runs[r][2], runs[r][3]
    local ip = ffi.cast("const int64_t*", P.indptr:data_ptr())
    nnz = nnz + tonumber(ip[a + k] - ip[a])
    nrows = nrows + k
  end
  local data = nd.empty({ nnz }, { dtype = dtype })
  local ind = nd.empty({ nnz }, { dtype = "int64" })
  local ptr = nd.empty({ nrows + 1 }, { dtype = "int64" })
  local esz = tonumber(C.mx_dtype_size(C.mx_tensor_dtype(data.h)))
  local dd = ffi.cast("uint8_t*", data:data_ptr())
  local di = ffi.cast("int64_t*", ind:data_ptr())
  local dp = ffi.cast("int64_t*", ptr:data_ptr())
  local off, row = 0, 0
  dp[0] = 0
  for r = 1, m do
    local P, a, k = runs[r][1], runs[r][2], runs[r][3]
    if P.dtype ~= dtype then
      error("batchify: csr samples of different dtypes (" .. dtype .. " and " .. P.dtype .. ")",
        level + 1)
    end
    local ip = ffi.cast("const int64_t*", P.indptr:data_ptr())
    local lo, hi = tonumber(ip[a]), tonumber(ip[a + k])
    local c = hi - lo
    if c > 0 then
      ffi.copy(dd + off * esz, ffi.cast("const uint8_t*", P.data:data_ptr()) + lo * esz, c * esz)
      ffi.copy(di + off, ffi.cast("const int64_t*", P.indices:data_ptr()) + lo, c * 8)
    end
    for i = 1, k do dp[row + i] = off + tonumber(ip[a + i]) - lo end
    off, row = off + c, row + k
  end
  return nd.sparse.csr_matrix({ data, ind, ptr }, { shape = { nrows, cols }, ctx = ctx })
end

-- Rows idx[1..n] (1-based) of a csr tensor whose parts are P (csr_parts) as a new
-- (n, cols) csr.
function M.csr_rows(P, idx, n, ctx)
  local runs = {}
  for b = 1, n do
    local i = idx[b]
    if type(i) ~= "number" or i % 1 ~= 0 or i < 1 or i > P.rows then
      error(string.format("gather: index %s is not a whole number in 1..%d", tostring(i), P.rows), 2)
    end
    runs[b] = { P, i - 1, 1 }
  end
  return csr_concat(runs, n, P.cols, P.dtype, ctx, 2)
end

-- csr samples (each one row: (1, cols), what csr[i] gives) -> one (n, cols) csr batch.
local function stack_csr(list, n, level)
  local first = list[1]
  local cols = first:shape()[2]
  local runs = {}
  for b = 1, n do
    local s = list[b]
    if not is_tensor(s) or s:stype() ~= "csr" then
      error("batchify: sample " .. b .. " is " .. (is_tensor(s) and ("a " .. s:stype() .. " tensor")
        or ("a " .. type(s))) .. " where sample 1 is a csr tensor", level + 1)
    end
    local sh = s:shape()
    if sh[1] ~= 1 or sh[2] ~= cols then
      error(string.format("batchify: csr samples must be single rows of one width: sample 1 is "
        .. "%s, sample %d is %s", shape_str(first), b, shape_str(s)), level + 1)
    end
    runs[b] = { M.csr_parts(s), 0, 1 }
  end
  return csr_concat(runs, n, cols, first:dtype(), first:context(), level + 1)
end

local function numbers_to_tensor(list, n, level)
  local int = true
  for b = 1, n do
    local v = list[b]
    if type(v) == "boolean" then v = v and 1 or 0 list[b] = v end
    if type(v) ~= "number" then
      error("batchify: sample " .. b .. " is a " .. type(v) .. " where sample 1 is a number",
        level + 1)
    end
    if v % 1 ~= 0 or v < -2147483648 or v > 2147483647 then int = false end
  end
  shapebuf[0] = n
  check(C.mx_tensor_empty(1, shapebuf, int and 4 or 0, 1, 0, hbuf), level + 1)
  local out = nd._wrap(hbuf[0])
  local p = ffi.cast(int and "int32_t*" or "float*", C.mx_tensor_data(out.h))
  for b = 1, n do p[b - 1] = list[b] end
  return out
end

-- Stack a list of like values (tensors, numbers, or Lua lists of numbers).
function M.stack(list, n, level)
  level = (level or 1) + 1
  n = n or #list
  if n == 0 then error("batchify: no samples to stack", level) end
  local v = list[1]
  local r
  if is_tensor(v) and v:stype() == "csr" then
    r = stack_csr(list, n, level)
  elseif is_tensor(v) then
    r = stack_tensors(list, n, level)
  elseif type(v) == "number" or type(v) == "boolean" then
    r = numbers_to_tensor(list, n, level)
  elseif type(v) == "table" then
    r = nd.array(list) -- nested lists of numbers (checked rectangular by nd.array)
  else
    error("batchify: cannot stack samples of type " .. type(v)
      .. " (pass a batchify_fn for custom samples)", level)
  end
  return r
end

-- samples[i] = { n = nfields, field1, ... } -> list of batched fields
function M.fields(samples, n)
  local nf = samples[1].n or #samples[1]
  local out = {}
  for k = 1, nf do
    local col = {}
    for b = 1, n do col[b] = samples[b][k] end
    out[k] = M.stack(col, n, 2)
  end
  return out
end

-- MXNet's default_batchify_fn. A one-field sample is the value itself; a sample with
-- several fields is a table of them (what the DataLoader passes).
function M.default(samples)
  local n = #samples
  if n == 0 then error("batchify: empty batch", 2) end
  local s = samples[1]
  if type(s) == "table" and not is_tensor(s) and s.n then
    return M.fields(samples, n)
  end
  return M.stack(samples, n, 2)
end

---------------------------------------------------------------- MXNet 2.0 classes
local function callable(name, fn)
  return setmetatable({ _class_name = name }, { __call = function(_, samples) return fn(samples) end })
end

-- Stack(): stack like samples (one field).
function M.Stack()
  return callable("Stack", function(samples) return M.stack(samples, #samples, 2) end)
end

-- Group(fn1, fn2, ...): apply fn_k to field k of the samples.
function M.Group(...)
  local fns = { ... }
  return callable("Group", function(samples)
    local n, out = #samples, {}
    for k = 1, #fns do
      local col = {}
      for b = 1, n do col[b] = samples[b][k] end
      out[k] = fns[k](col)
    end
    return out
  end)
end

-- Pad{val=0, dtype=}: stack tensors whose shapes differ, padding each up to the
-- largest size along every axis with `val`.
function M.Pad(opts)
  opts = opts or {}
  local val = opts.val or 0
  return callable("Pad", function(samples)
    local n = #samples
    local maxs = samples[1]:shape()
    for b = 2, n do
      local s = samples[b]:shape()
      if #s ~= #maxs then error("Pad: samples have different numbers of dims", 2) end
      for d = 1, #s do if s[d] > maxs[d] then maxs[d] = s[d] end end
    end
    local shape = { n }
    for d = 1, #maxs do shape[d + 1] = maxs[d] end
    local dtype = opts.dtype or samples[1]:dtype()
    local out = nd.full(shape, val, { dtype = dtype, ctx = tostring(samples[1]:context()) })
    for b = 1, n do
      local s = samples[b]
      local sh = s:shape()
      -- copy the sample into the leading corner of its row: one contiguous copy per
      -- innermost run (rows along the first axis are views)
      local function copy_rec(dst, src, d)
        if sh[d] == 0 then return end
        if d == #sh then
          local view = dst[{ { 1, sh[d] } }]
          check(C.mx_tensor_copy_into(view.h, src.h), 3)
          return
        end
        for i = 1, sh[d] do copy_rec(dst[i], src[i], d + 1) end
      end
      if #sh == 0 then
        check(C.mx_tensor_copy_into(out[b].h, s.h), 2)
      else
        copy_rec(out[b], s, 1)
      end
    end
    return out
  end)
end

return M
