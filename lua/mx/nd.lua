-- mx.nd — NDArray: the tensor type and one function per op of the op table.
--
-- Every op wrapper is built here from its op-table declaration (no hand-written
-- per-op Lua): tensors positionally, then one options table with the op's params
-- by name, `out=` to write into an existing tensor. Axis-typed params are 1-based
-- (negative from the end) and converted once, in `fill_params`. Every op whose
-- first input is a tensor is also a method: x:sum{axis=2}.
--
-- The pieces: mx.nd.handles (the box and handle ownership), mx.nd.params (option
-- conversion), mx.nd.wrappers (the op wrappers), mx.nd.index (views, indexing,
-- assignment), mx.nd.print (tostring), mx.nd.ndio (save/load). This file assembles
-- the namespace and holds the NDArray basics.
local lib = require("mx.core.lib")
local context = require("mx.context")
local H = require("mx.nd.handles")
local Pm = require("mx.nd.params")
local W = require("mx.nd.wrappers")
local D = require("mx.nd.dispatch")
local S = require("mx.core.state")
-- (installers: each takes the namespace below and adds its part)
local install_index = require("mx.nd.index")
local install_print = require("mx.nd.print")
local install_ndio = require("mx.nd.ndio")
local install_sparse = require("mx.nd.sparse")

local ffi, C = lib.ffi, lib.C
local ffi_string = ffi.string
local type, error, tostring, tonumber = type, error, tostring, tonumber

local nd = {}
local NDArray = {} -- methods; the metatype's __index consults it first
nd.NDArray = NDArray

local tensor_t = H.tensor_t
local inbuf, outbuf, shapebuf = H.inbuf, H.outbuf, H.shapebuf
local is_tensor, wrap, owners = H.is_tensor, H._wrap, H.owners
nd.is_tensor = is_tensor
-- the private names gluon/, autograd and the specs use
for k, v in pairs(H) do if k:sub(1, 1) == "_" then nd[k] = v end end
for k, v in pairs(Pm) do if k:sub(1, 1) == "_" then nd[k] = v end end
nd.dtype_name, nd.dtype_code = Pm.dtype_name, Pm.dtype_code
local DTYPE_NAME, dtype_code, is_int = Pm.dtype_name, Pm.dtype_code, Pm._is_int
local prepare, make, fill_params = Pm._prepare, W.make, Pm._fill_params
local eager = D.eager

---------------------------------------------------------------- build the namespace
for _, op in ipairs(lib.ops) do
  prepare(op)
end
nd._ref = {}
for _, op in ipairs(lib.ops) do
  local f = make(op, eager)
  nd[op.name] = f
  nd._ref[op.name] = make(op, D.ref)
  if not op.ctx and op.nin ~= 0 and NDArray[op.name] == nil then NDArray[op.name] = f end
end

---------------------------------------------------------------- NDArray basics
-- who (optional): the name the user called, put first when the core's message names
-- another function (copyto over mx_tensor_copy_into says "copy: ...").
local function check(rc, level, who)
  if rc ~= 0 then
    local msg = ffi_string(C.mx_last_error())
    if who and msg:sub(1, #who + 1) ~= who .. ":" then msg = who .. ": " .. msg end
    error(msg, level + 1)
  end
end
nd._check = check

-- Every NDArray method checks its self (x.sum({}), NDArray.shape("a")): a non-tensor
-- would reach C as a NULL handle. level: as for error().
local function not_self(method, x, level)
  error(method .. ": self must be a tensor, got " .. type(x), level + 1)
end
nd._not_self = not_self

-- A value read from C memory as a Lua number. LuaJIT takes a double read through the
-- FFI as it is, and a NaN with a payload (float32 0xFFEC0001 widened, an int32 tensor's
-- old memory reused by nd.empty) becomes a fake Lua value that crashes whoever touches
-- it; so the high word is read first, as an integer, and any NaN becomes the canonical
-- one. buf: double[?]; w: the same memory as uint32_t*.
local band = bit.band
local HI = ffi.abi("le") and 1 or 0
local u32p = ffi.typeof("uint32_t *")
local function f64_at(buf, w, i)
  local hi = w[2 * i + HI]
  if band(hi, 0x7FF00000) == 0x7FF00000 and (band(hi, 0xFFFFF) ~= 0 or w[2 * i + 1 - HI] ~= 0) then
    return 0 / 0
  end
  return buf[i]
end
nd._f64_at = f64_at
nd._u32p = u32p

-- A shape given by the user: at most 8 dims (the FFI buffers hold 8), each a
-- non-negative integer. Fills shapebuf; returns the number of dims.
local function shape_arg(what, shape, level)
  local n = #shape
  if n > 8 then
    error(what .. ": at most 8 dims, got " .. n, level + 1)
  end
  for i = 1, n do
    local d = shape[i]
    if not is_int(d) or d < 0 then
      error(string.format("%s: dim %d must be a non-negative integer, got %s", what, i,
        tostring(d)), level + 1)
    end
    shapebuf[i - 1] = d
  end
  return n
end

function NDArray.ndim(x)
  if not is_tensor(x) then not_self("ndim", x, 2) end
  return C.mx_tensor_ndim(x.h)
end
function NDArray.size(x)
  if not is_tensor(x) then not_self("size", x, 2) end
  return tonumber(C.mx_tensor_size(x.h))
end
function NDArray.shape(x)
  if not is_tensor(x) then not_self("shape", x, 2) end
  local n = C.mx_tensor_shape(x.h, shapebuf)
  local t = {}
  for i = 1, n do t[i] = tonumber(shapebuf[i - 1]) end
  return t
end
function NDArray.dtype(x)
  if not is_tensor(x) then not_self("dtype", x, 2) end
  return DTYPE_NAME[C.mx_tensor_dtype(x.h)]
end
function NDArray.context(x)
  if not is_tensor(x) then not_self("context", x, 2) end
  return context.new(C.mx_tensor_dev_type(x.h), C.mx_tensor_dev_id(x.h))
end
NDArray.ctx = NDArray.context

local PTR_T = {
  float32 = ffi.typeof("float*"), float64 = ffi.typeof("double*"),
  float16 = ffi.typeof("uint16_t*"), bfloat16 = ffi.typeof("uint16_t*"),
  uint8 = ffi.typeof("uint8_t*"), int8 = ffi.typeof("int8_t*"), int16 = ffi.typeof("int16_t*"),
  int32 = ffi.typeof("int32_t*"), int64 = ffi.typeof("int64_t*"), bool = ffi.typeof("uint8_t*"),
}
-- Zero-copy typed pointer to element 0 (0-based C memory). Waits for pending
-- writes. Valid while x (or a view of its storage) is alive.
function NDArray.data_ptr(x)
  if not is_tensor(x) then not_self("data_ptr", x, 2) end
  if C.mx_tensor_stype(x.h) ~= 0 then
    error("data_ptr: the tensor is sparse (" .. nd.NDArray.stype(x) .. "): its values are "
      .. "x:data(), its indices x:indices() (and a csr's x:indptr())", 2)
  end
  if S.guard then -- an FFI read cannot be guarded: a replay would run on the traced value
    error("data_ptr: not while hybridize traces a forward (the graph would keep what the "
      .. "pointer read); read values with item()/tolist() (they are guarded), or run the "
      .. "block without hybridize", 2)
  end
  check(C.mx_tensor_wait_to_write(x.h), 2) -- the caller may write through it
  return ffi.cast(PTR_T[NDArray.dtype(x)], C.mx_tensor_data_nowait(x.h))
end

local dbuf_t = ffi.typeof("double[?]")
local i64p = ffi.typeof("int64_t *")
local INT64 = dtype_code("int64")
local int64_t = ffi.typeof("int64_t")

-- int64 values read exactly, through the int64 pointer of a contiguous cpu copy (never
-- through a double: 2^53 + 1 would come back as 2^53). An element a Lua number (a double)
-- cannot hold exactly is an error naming it (who: the method), or, with who == nil
-- (tostring), the int64 cdata itself. Returns the flat 1-based array.
local function int64_values(x, n, who, level)
  check(C.mx_tensor_to(x.h, 1, 0, -1, outbuf), level + 1, who)
  local c = wrap(outbuf[0])
  check(C.mx_tensor_wait_to_write(c.h), level + 1, who)
  local p = ffi.cast(i64p, C.mx_tensor_data_nowait(c.h))
  local t = {}
  for i = 0, n - 1 do
    local v = p[i]
    local d = tonumber(v)
    -- d is v rounded to a double; exact when converting it back gives v (2^63 itself,
    -- the rounding of INT64_MAX, is out of int64's range: not exact)
    if d >= 9223372036854775808 or ffi.cast(int64_t, d) ~= v then
      if who == nil then d = v
      else
        error(string.format("%s: element %d (row-major, 1-based) of the int64 tensor is %s, "
          .. "which a Lua number (a double) cannot hold exactly; read it through "
          .. "x:data_ptr() (an int64_t*)", who, i + 1, (tostring(v):gsub("LL$", ""))),
          level + 1)
      end
    end
    t[i + 1] = d
  end
  return t
end

function NDArray.item(x)
  if not is_tensor(x) then not_self("item", x, 2) end
  local n = NDArray.size(x)
  if n ~= 1 then
    error("item: tensor has " .. n .. " elements (shape " .. table.concat(NDArray.shape(x), "x")
      .. "); item() needs exactly one", 2)
  end
  if C.mx_tensor_dtype(x.h) == INT64 then
    local t = int64_values(x, 1, "item", 2)
    if S.guard then S.guard(x, t) end
    return t[1]
  end
  local d = ffi.new("double[1]")
  check(C.mx_tensor_get_f64(x.h, 0, d), 2)
  local v = f64_at(d, ffi.cast(u32p, d), 0)
  if S.guard then S.guard(x, { v }) end -- hybridize's trace: a value read is a guard
  return v
end
NDArray.asscalar = NDArray.item

-- All values as a flat Lua array (row-major).
-- level: the caller's frame for errors (a sync point may raise an async error); who: the
-- method, for int64 values a double cannot hold (nil: return those as int64 cdata).
local function tolist(x, level, who)
  -- sparse tensors read densified (MXNet's asnumpy); the guard sees the dense values
  if C.mx_tensor_stype(x.h) ~= 0 then x = nd.cast_storage(x) end
  local n = NDArray.size(x)
  if C.mx_tensor_dtype(x.h) == INT64 then
    local t = int64_values(x, n, who, level + 1)
    if S.guard then S.guard(x, t) end
    return t
  end
  local buf = dbuf_t(n > 0 and n or 1)
  check(C.mx_tensor_get_all_f64(x.h, buf, n), level + 1)
  local t = {}
  local w = ffi.cast(u32p, buf)
  for i = 1, n do t[i] = f64_at(buf, w, i - 1) end
  if S.guard then S.guard(x, t) end -- hybridize's trace: values read are a guard
  return t
end
function NDArray.tolist(x)
  if not is_tensor(x) then not_self("tolist", x, 2) end
  local t = tolist(x, 2, "tolist")
  return t
end

-- Nested Lua tables (a number for a 0-d tensor).
function NDArray.totable(x)
  if not is_tensor(x) then not_self("totable", x, 2) end
  local flat = tolist(x, 2, "totable")
  local shape = NDArray.shape(x)
  if #shape == 0 then return flat[1] end
  local pos = 0
  local function build(d)
    local t = {}
    for i = 1, shape[d] do
      if d == #shape then
        pos = pos + 1
        t[i] = flat[pos]
      else
        t[i] = build(d + 1)
      end
    end
    return t
  end
  return build(1)
end

local function new_empty(shape, dtype, dt, di, level, what)
  local n = shape_arg(what or "empty", shape, level + 1)
  check(C.mx_tensor_empty(n, shapebuf, dtype, dt, di, outbuf), level + 1)
  return wrap(outbuf[0])
end
nd._new_empty = new_empty

-- An uninitialised tensor: mx.nd.empty({2, 3}, {dtype=, ctx=}).
function nd.empty(shape, opts)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" then error("empty: shape must be a table of dims", 2) end
  opts = opts or {}
  if type(opts) ~= "table" then error("empty: options must be a table, got " .. type(opts), 2) end
  local dt, di = context.parse(opts.ctx, 2, "empty")
  local dtype = dtype_code(opts.dtype or "float32")
  if not dtype then error("empty: unknown dtype " .. tostring(opts.dtype), 2) end
  local r = new_empty(shape, dtype, dt, di, 2) -- not a tail call: level 2 is our caller
  return r
end

-- Flatten a nested table, checking it is rectangular. Returns values, shape (or
-- nil and a message: the caller raises it, since the walk's depth varies).
local function flatten(t)
  local shape, vals = {}, {}
  local probe = t
  while type(probe) == "table" do
    if #shape == 8 then return nil, "array: at most 8 dims (the nested table is deeper)" end
    shape[#shape + 1] = #probe
    probe = probe[1]
  end
  local bad
  local function walk(v, d, path)
    if bad then return end
    if d > #shape then
      if type(v) == "boolean" then v = v and 1 or 0 end
      if type(v) ~= "number" then
        bad = "array: element " .. path .. " is a " .. type(v) .. ", expected a number"
        return
      end
      vals[#vals + 1] = v
      return
    end
    if type(v) ~= "table" or #v ~= shape[d] then
      bad = string.format("array: ragged nested table at %s (expected %d elements along axis %d)",
        path == "" and "top level" or path, shape[d], d)
      return
    end
    for i = 1, #v do walk(v[i], d + 1, path .. "[" .. i .. "]") end
  end
  walk(t, 1, "")
  if bad then return nil, bad end
  return vals, shape
end

-- mx.nd.array(nested_table | number | tensor | cdata pointer, {dtype=, ctx=, shape=})
-- copies the data into a new tensor (float32 unless dtype= says otherwise; a
-- tensor source keeps its dtype).
function nd.array(data, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("array: options must be a table, got " .. type(opts), 2) end
  for k in pairs(opts) do
    if k ~= "dtype" and k ~= "ctx" and k ~= "shape" then
      error("array: unknown option '" .. tostring(k) .. "' (valid: dtype, ctx, shape)", 2)
    end
  end
  local dt, di = context.parse(opts.ctx, 2, "array")
  local dtype = opts.dtype and dtype_code(opts.dtype)
  if opts.dtype and not dtype then error("array: unknown dtype " .. tostring(opts.dtype), 2) end
  if is_tensor(data) then
    check(C.mx_tensor_to(data.h, dt, di, dtype or -1, outbuf), 2)
    return wrap(outbuf[0])
  end
  dtype = dtype or 0
  if type(data) == "cdata" then
    local shape = opts.shape
    if type(shape) ~= "table" then
      error("array: a cdata pointer needs shape= (a table of dims)", 2)
    end
    local src = new_empty(shape, dtype, 1, 0, 2, "array")
    local n = NDArray.size(src)
    ffi.copy(C.mx_tensor_data(src.h), data, n * tonumber(C.mx_dtype_size(dtype)))
    if dt == 1 and di == 0 then return src end
    check(C.mx_tensor_to(src.h, dt, di, -1, outbuf), 2)
    return wrap(outbuf[0])
  end
  local vals, shape
  if type(data) == "number" or type(data) == "boolean" then
    vals, shape = { data == true and 1 or data == false and 0 or data }, {}
  elseif type(data) == "table" then
    vals, shape = flatten(data)
    if not vals then error(shape, 2) end
  else
    error("array: expected a nested table, a number, a tensor or a cdata pointer, got "
      .. type(data), 2)
  end
  local t = new_empty(shape, dtype, 1, 0, 2, "array")
  local n = #vals
  local buf = dbuf_t(n > 0 and n or 1)
  for i = 1, n do buf[i - 1] = vals[i] end
  check(C.mx_tensor_set_from_f64(t.h, buf, n), 2)
  if dt == 1 and di == 0 then return t end
  check(C.mx_tensor_to(t.h, dt, di, -1, outbuf), 2)
  return wrap(outbuf[0])
end

-- Wrap external memory without copying. `owner` (optional) is kept alive as long as
-- the tensor or any view of it lives: pass the cdata that owns `ptr` (an ffi.new
-- buffer, say). Without an owner the caller must keep the memory valid.
function nd.from_pointer(ptr, shape, opts)
  opts = opts or {}
  if type(opts) ~= "table" then
    error("from_pointer: options must be a table, got " .. type(opts), 2)
  end
  if type(shape) ~= "table" then error("from_pointer: shape must be a table of dims", 2) end
  if type(ptr) ~= "cdata" then error("from_pointer: ptr must be a cdata pointer, got " .. type(ptr), 2) end
  local dtype = dtype_code(opts.dtype or "float32")
  if not dtype then error("from_pointer: unknown dtype " .. tostring(opts.dtype), 2) end
  local n = shape_arg("from_pointer", shape, 2)
  check(C.mx_tensor_from_data(ffi.cast("void*", ptr), n, shapebuf, dtype, nil, nil, outbuf), 2)
  local t = wrap(outbuf[0])
  if opts.owner ~= nil then owners[t] = opts.owner end
  return t
end

-- A new tensor on ctx (and/or dtype): x:to(mx.gpu(0)), x:to(mx.cpu(), "float16")
-- who: the method the user called (to, copyto); level: as for error().
local function to_impl(x, ctx, dtype, who, level)
  if not is_tensor(x) then not_self(who, x, level + 1) end
  local dt, di = context.parse(ctx or NDArray.context(x), level + 1, who)
  local code = -1
  if dtype ~= nil then
    code = dtype_code(dtype)
    if not code then error(who .. ": unknown dtype " .. tostring(dtype), level + 1) end
  end
  check(C.mx_tensor_to(x.h, dt, di, code, outbuf), level + 1, who)
  return wrap(outbuf[0])
end
local COPY_OP = context._copy_op
function NDArray.to(x, ctx, dtype)
  local r = to_impl(x, ctx, dtype, "to", 2) -- not a tail call: level 2 is our caller
  -- recorded: model parallelism moves activations across devices inside record
  if S.recording then S.record1(COPY_OP, x, nil, nil, r) end
  return r
end
NDArray.as_in_context = NDArray.to
NDArray.as_in_ctx = NDArray.to

-- Copy values from src into x (same shape; converts dtype; any devices).
function NDArray.copyto(src, dst)
  if not is_tensor(src) then not_self("copyto", src, 2) end
  if is_tensor(dst) then
    check(C.mx_tensor_copy_into(dst.h, src.h), 2, "copyto")
    return dst
  end
  local r = to_impl(src, dst, nil, "copyto", 2)
  return r
end

local index, assign = install_index(nd)
nd._tolist = tolist
install_print(nd)
index = install_sparse(nd, index) -- mx.nd.sparse; x[...] of csr tensors
---------------------------------------------------------------- metatype
local function binop(name)
  local f = nd[name]
  return f
end

local mt = {
  __index = function(x, k)
    local m = NDArray[k]
    if m ~= nil then return m end
    local r = index(x, k, 2) -- not a tail call: the level counts this frame
    return r
  end,
  __newindex = assign,
  __tostring = NDArray.__tostring,
  __add = binop("add"),
  __sub = binop("sub"),
  __mul = binop("mul"),
  __div = binop("div"),
  __pow = binop("pow"),
  __unm = function(x) return nd.neg(x) end,
  __len = function(x) return tonumber(C.mx_tensor_dim(x.h, 0)) end,
}
ffi.metatype(tensor_t, mt)

---------------------------------------------------------------- more methods (la)
-- mx.nd.reshape is the view-or-op function above (the op wrapper would read an
-- array-part shape as nothing).
nd.reshape = NDArray.reshape

-- x:astype(dtype, {copy=true}): a converted copy (the cast op); same dtype still copies
-- (MXNet) unless copy=false, which returns x itself when its dtype already is dtype.
local cast_op = lib.ops_by_name.cast
function NDArray.astype(x, dtype, aopts)
  if not is_tensor(x) then error("astype: input must be a tensor, got " .. type(x), 2) end
  local code = dtype_code(dtype)
  if not code then error("astype: unknown dtype " .. tostring(dtype), 2) end
  if aopts ~= nil then
    if type(aopts) ~= "table" or is_tensor(aopts) then
      error("astype: options must be a table ({copy=})", 2)
    end
    for k in pairs(aopts) do
      if k ~= "copy" then error("astype: unknown option '" .. tostring(k) .. "' (valid: copy)", 2) end
    end
    local c = aopts.copy
    if c ~= nil and type(c) ~= "boolean" then
      error("astype: copy must be a boolean, got " .. type(c), 2)
    end
    if c == false and dtype_code(x:dtype()) == code then return x end
  end
  local opts = { dtype = dtype }
  local P, _, err = fill_params(cast_op, opts)
  if err then error(err, 2) end
  inbuf[0] = x.h
  local r = eager.run(cast_op, 1, P, nil, opts, x, nil, 2)
  return r
end

-- mx.nd.split(x, {num_outputs=n, axis=2, squeeze_axis=false}) -> n tensors, and
-- x:split{...}: the split op (MXNet's split/SliceChannel), through the generic wrapper
-- for ops whose output count is a param (mx.nd.wrappers make_counted).
-- mx.nd.split_v2(x, indices_or_sections, {axis=1, squeeze_axis=false}) and x:split_v2(...):
-- MXNet's nd.split_v2 (its axis default 0 -> 1): an int gives that many equal pieces, a
-- list of cut points the pieces between them (the op's `indices` with a leading 0, as
-- MXNet's Python does). An options table in second place calls the op itself
-- ({indices=, sections=, axis= (default 2, MXNet's operator default), squeeze_axis=}).
do
  local op_split_v2 = nd.split_v2
  local V2_OPTS = { axis = true, squeeze_axis = true, out = true }
  local function split_v2(x, ios, opts)
    if type(ios) == "table" and ios[1] == nil and next(ios) ~= nil and opts == nil then
      return op_split_v2(x, ios) -- tail call: the op's errors blame the caller's line
    end
    local o = { axis = 1 }
    if opts ~= nil then
      if type(opts) ~= "table" then
        error("split_v2: options must be a table, got " .. type(opts), 2)
      end
      for k, v in pairs(opts) do
        if not V2_OPTS[k] then
          error("split_v2: unknown option '" .. tostring(k) .. "' (valid: axis, squeeze_axis, out)", 2)
        end
        o[k] = v
      end
    end
    if type(ios) == "number" then
      if ios % 1 ~= 0 or ios < 1 then
        error("split_v2: indices_or_sections as a number must be a positive integer (the "
          .. "number of sections), got " .. tostring(ios), 2)
      end
      o.sections = ios
    elseif type(ios) == "table" then
      local idx = { 0 }
      for i = 1, #ios do idx[i + 1] = ios[i] end
      o.indices = idx
    else
      error("split_v2: indices_or_sections must be an integer or a list of integers, got "
        .. type(ios), 2)
    end
    return op_split_v2(x, o)
  end
  nd.split_v2, NDArray.split_v2 = split_v2, split_v2
end
-- x:flatten{inplace=true}, x:expand_dims{axis=, inplace=true}, x:squeeze{axis=, inplace=true}:
-- MXNet 1.9's NDArray methods take inplace (default false: the op, a copy); true returns a
-- view through reshape that shares x's memory. The mx.nd functions have no inplace, as
-- MXNet's (the op rejects it as an unknown option).
do
  local op_flatten, op_expand, op_squeeze = nd.flatten, nd.expand_dims, nd.squeeze
  local function without_inplace(opts)
    local o = {}
    for k, v in pairs(opts) do if k ~= "inplace" then o[k] = v end end
    return o
  end
  -- the new shape of an inplace call, or nil and an error message
  local function inplace_shape(name, x, opts)
    if opts.out ~= nil then return nil, name .. ": inplace=true returns a view; it takes no out=" end
    for k in pairs(opts) do
      if k ~= "inplace" and (name == "flatten" or k ~= "axis") then
        return nil, name .. ": unknown option '" .. tostring(k) .. "' (valid: "
          .. (name == "flatten" and "inplace" or "axis, inplace") .. ")"
      end
    end
    local s, n = x:shape(), x:ndim()
    if name == "flatten" then
      if n == 0 then return nil, "flatten: a 0-d tensor has no first axis" end
      return { 0, -1 }
    end
    local ax = opts.axis
    if name == "expand_dims" then
      if type(ax) ~= "number" or ax % 1 ~= 0 or ax == 0 or ax > n + 1 or ax < -n - 1 then
        return nil, string.format("expand_dims: axis must be a non-zero integer in -%d..%d for a "
          .. "%d-d tensor, got %s", n + 1, n + 1, n, tostring(ax))
      end
      table.insert(s, ax < 0 and n + 2 + ax or ax, 1)
      return s
    end
    local drop = {}
    if ax == nil then
      for d = 1, n do drop[d] = s[d] == 1 end
    else
      if type(ax) == "number" then ax = { ax } end
      if type(ax) ~= "table" then return nil, "squeeze: axis must be an axis or a list of axes" end
      for i = 1, #ax do
        local a = ax[i]
        if type(a) ~= "number" or a % 1 ~= 0 or a == 0 or a > n or a < -n then
          return nil, string.format("squeeze: axis %s is out of range for a %d-d tensor", tostring(a), n)
        end
        a = a < 0 and n + 1 + a or a
        if drop[a] then return nil, "squeeze: axis " .. ax[i] .. " is given twice" end
        if s[a] ~= 1 then
          return nil, string.format("squeeze: axis %d must have size 1, got %d", ax[i], s[a])
        end
        drop[a] = true
      end
    end
    local r = {}
    for d = 1, n do if not drop[d] then r[#r + 1] = s[d] end end
    if #r == 0 then r[1] = 1 end -- MXNet: squeezing every axis leaves (1,)
    return r
  end
  local function with_inplace(name, op)
    return function(x, opts)
      if type(opts) ~= "table" or opts.inplace == nil then return op(x, opts) end
      if type(opts.inplace) ~= "boolean" then
        error(name .. ": inplace must be a boolean, got " .. type(opts.inplace), 2)
      end
      if not opts.inplace then return op(x, without_inplace(opts)) end
      if not is_tensor(x) then error(name .. ": input 1 (data) must be a tensor", 2) end
      local shape, err = inplace_shape(name, x, opts)
      if not shape then error(err, 2) end
      return x:reshape(shape)
    end
  end
  NDArray.flatten = with_inplace("flatten", op_flatten)
  NDArray.expand_dims = with_inplace("expand_dims", op_expand)
  NDArray.squeeze = with_inplace("squeeze", op_squeeze)
end
-- `repeat` is a Lua keyword: x:repeat_{repeats=2, axis=1} is x["repeat"](x, ...)
NDArray.repeat_ = nd["repeat"]
nd.repeat_ = nd["repeat"]

-- mx.nd.random.uniform(...) and friends: MXNet's spelling of mx.random.* (loaded on first
-- use: mx.random is built on mx.nd)
nd.random = setmetatable({}, { __index = function(_, k) return require("mx.random")[k] end })
-- mx.nd.contrib.boolean_mask(...), contrib.isnan...: MXNet's contrib namespace (mx.contrib,
-- loaded on first use: it is built on mx.nd)
nd.contrib = setmetatable({}, { __index = function(_, k) return require("mx.contrib")[k] end })

-- Sync points: wait for the ops queued on x (or on everything) and raise their
-- asynchronous error, if any, at the caller's line. waitall raises the first error
-- no other sync point has reported, then forgets it; the engine stays usable.
function NDArray.wait_to_read(x)
  if not is_tensor(x) then not_self("wait_to_read", x, 2) end
  check(C.mx_tensor_wait_to_read(x.h), 2)
  return x
end
function NDArray.wait_to_write(x)
  if not is_tensor(x) then not_self("wait_to_write", x, 2) end
  check(C.mx_tensor_wait_to_write(x.h), 2)
  return x
end

-- Autograd methods (x:attach_grad(), x:grad(), y:backward(), x:detach(), x:zero_grad())
-- are defined by mx.autograd; until it is loaded these stubs load it and forward.
for _, name in ipairs { "attach_grad", "grad", "backward", "detach", "zero_grad" } do
  NDArray[name] = function(...)
    if not is_tensor((...)) then not_self(name, (...), 2) end
    local ag = require("mx.autograd")
    local f = NDArray[name]
    if f == nil or ag == nil then error("mx.autograd did not define " .. name, 2) end
    local r = { f(...) }
    return unpack(r)
  end
end
-- mx.nd.scope(fn, ...) -> fn's results. Every tensor created while fn runs is released
-- when it returns (its memory back to the pool while still in cache, not at the next
-- GC cycle), except the tensors fn returns (directly, or as values of a returned
-- table) and those marked with nd.keep. TensorFlow.js's tidy. Using a released tensor
-- afterwards is an error naming it ("input 1 is NULL"), never a crash. Scopes nest.
local scope_keeps, NOKEEP = {}, {} -- a reused keep set per depth
local function scope_done(ok, ...)
  local d = H._scope_depth()
  local keep = scope_keeps[d]
  if not keep then keep = {} scope_keeps[d] = keep end
  local n = select("#", ...)
  if ok then
    for i = 1, n do
      local v = (select(i, ...))
      if is_tensor(v) then keep[v] = true
      elseif type(v) == "table" then
        for _, w in pairs(v) do if is_tensor(w) then keep[w] = true end end
      end
    end
  end
  H._scope_exit(ok and keep or NOKEEP)
  if n > 0 then for k in pairs(keep) do keep[k] = nil end end
  if not ok then error((...), 0) end
  return ...
end
function nd.scope(fn, ...)
  if type(fn) ~= "function" then
    error("scope: expected a function, got " .. type(fn), 2)
  end
  H._scope_enter()
  return scope_done(pcall(fn, ...))
end
-- nd.keep(x) -> x: x survives every scope (parameters, optimizer states, buffers made
-- lazily inside a scope).
function nd.keep(x)
  if not is_tensor(x) then error("keep: expected a tensor, got " .. type(x), 2) end
  H._keep(x)
  return x
end

function nd.waitall()
  check(C.mx_engine_wait_all(), 2)
end

install_ndio(nd) -- mx.nd.save / load / load_frombuffer
require("mx.nd.mxnet_dtypes")(nd, NDArray) -- softmax{dtype=}, float16 data in the norm ops
require("mx.nd.mxnet_api")(nd, NDArray) -- MXNet's positional forms of its Python functions
require("mx.nd.mxnet_extra")(nd) -- MXNet's smaller functions and its nd.linalg / nd.image namespaces

return nd
