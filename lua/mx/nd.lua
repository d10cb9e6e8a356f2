-- mx.nd — NDArray: the tensor type and one function per op of the op table.
--
-- Every op wrapper is built here from its op-table declaration (no hand-written
-- per-op Lua): tensors positionally, then one options table with the op's params
-- by name, `out=` to write into an existing tensor. Axis-typed params are 1-based
-- (negative from the end) and converted once, in `fill_params`. Every op whose
-- first input is a tensor is also a method: x:sum{axis=2}.
local lib = require("mx._lib")
local S = require("mx._state")
local context = require("mx.context")

local ffi, C = lib.ffi, lib.C
local ffi_istype, ffi_string = ffi.istype, ffi.string
local type, select, error, tostring, tonumber = type, select, error, tostring, tonumber
local release = C.mx_tensor_release

local nd = {}
local NDArray = {} -- methods; the metatype's __index consults it first
nd.NDArray = NDArray

-- An NDArray is a one-field struct boxing the C handle. A bare `mx_tensor*` cannot
-- serve: the FFI treats p[1] on a pointer as pointer indexing, so x[1] (the first
-- row) could never reach our __index. The box's __gc releases the handle.
ffi.cdef("struct mx_nd { mx_tensor *h; };")
local tensor_t = ffi.typeof("struct mx_nd")
local inbuf = ffi.new("mx_tensor*[64]")
local outbuf = ffi.new("mx_tensor*[64]")
local int64_8 = ffi.typeof("int64_t[8]")
local shapebuf = ffi.new(int64_8)

local function is_tensor(x) return ffi_istype(tensor_t, x) end
nd.is_tensor = is_tensor

---------------------------------------------------------------- memory pressure
-- C memory is invisible to Lua's GC: poll the core's byte count every few
-- allocations and collect when it has grown well past what the last collection
-- left (Torch7's lesson). Bounded loops of temporaries reach a steady state.
local GC_MIN = 64 * 2 ^ 20
local gc_every, gc_count, gc_threshold = 64, 0, GC_MIN

local function gc_check()
  gc_count = 0
  local used = tonumber(C.mx_memory_bytes_in_use())
  if used > gc_threshold then
    collectgarbage("collect")
    used = tonumber(C.mx_memory_bytes_in_use())
    gc_threshold = math.max(GC_MIN, 2 * used)
  end
end

-- Take ownership of a new handle from C.
local function wrap(h)
  gc_count = gc_count + 1
  if gc_count >= gc_every then gc_check() end
  return tensor_t(h)
end
nd._wrap = wrap

---------------------------------------------------------------- params
local DTYPE_NAME = {}
for _, code in ipairs { 0, 1, 2, 3, 4, 5, 6, 7, 12 } do
  DTYPE_NAME[code] = ffi_string(C.mx_dtype_name(code))
end
nd.dtype_name = DTYPE_NAME

-- dtype given as a name ("float32", "f32", "int64"...) or a code; nil if invalid
local function dtype_code(v)
  if type(v) == "number" then return DTYPE_NAME[v] and v or nil end
  if type(v) == "string" then
    local c = C.mx_dtype_from_name(v)
    return c >= 0 and c or nil
  end
  return nil
end
nd.dtype_code = dtype_code

local function is_int(v) return type(v) == "number" and v % 1 == 0 end

-- 1-based Lua axis -> 0-based C axis (negatives count from the end, unchanged)
local function axis0(v)
  if not is_int(v) or v == 0 then return nil end
  return v > 0 and v - 1 or v
end
nd._axis0 = axis0

local function set_tuple(t, v, conv)
  if type(v) == "number" then v = { v } end
  if type(v) ~= "table" then return false end
  local n = #v
  if n > 8 then return false end
  t.n = n
  for i = 1, n do
    local x = v[i]
    if conv then x = conv(x) elseif not is_int(x) then x = nil end
    if x == nil then return false end
    t.v[i - 1] = x
  end
  return true
end

local CONV = {
  int = function(P, k, v) if not is_int(v) then return false end P[k] = v return true end,
  float = function(P, k, v) if type(v) ~= "number" then return false end P[k] = v return true end,
  bool = function(P, k, v) if type(v) ~= "boolean" then return false end P[k] = v return true end,
  dtype = function(P, k, v)
    local c = dtype_code(v)
    if not c then return false end
    P[k] = c
    return true
  end,
  axis = function(P, k, v)
    local a = axis0(v)
    if not a then return false end
    P[k] = a
    return true
  end,
  axes = function(P, k, v) return set_tuple(P[k], v, axis0) end,
  shape = function(P, k, v) return set_tuple(P[k], v) end,
  ints = function(P, k, v) return set_tuple(P[k], v) end,
}
local EXPECT = {
  int = "an integer", float = "a number", bool = "a boolean", dtype = "a dtype name",
  axis = "a 1-based axis (non-zero integer)", axes = "an axis or a list of axes",
  shape = "a list of dims", ints = "a list of integers", enum = "one of ",
}

-- Prepare per-op param machinery: a reusable struct, a struct of defaults, and the
-- name -> param map. Called once per op at load.
local function prepare(op)
  op.pindex = {}
  for _, p in ipairs(op.params) do op.pindex[p.name] = p end
  if not op.ctype then return end
  local D = ffi.new(op.ctype)
  if op.ctx then D.dev_type, D.dev_id = 1, 0 end
  for _, p in ipairs(op.params) do
    if p.optional then
      if p.type == "axes" or p.type == "shape" or p.type == "ints" then D[p.name].n = -1 end
    elseif p.type == "enum" then
      for i, name in ipairs(p.values) do if name == p.default then D[p.name] = i - 1 end end
    else
      assert(CONV[p.type](D, p.name, p.default), "bad default for " .. op.name .. "." .. p.name)
    end
  end
  op.defaults = D
  op.P = ffi.new(op.ctype)
  op.size = ffi.sizeof(op.ctype)
end

-- Fill op.P from defaults then opts. Returns P (nil for ops without params), out
-- (the out= tensor or nil) and an error message (nil when fine). Unknown option
-- names are an error. Array-part (numeric) keys are skipped: callers use them.
local function fill_params(op, opts)
  local P = op.P
  if P then ffi.copy(P, op.defaults, op.size) end
  if opts == nil then return P, nil end
  local out
  for k, v in pairs(opts) do
    if k == "out" then
      if not is_tensor(v) and not (type(v) == "table" and op.outputs[2]) then
        return nil, nil, op.name .. ": out= must be a tensor, got " .. type(v)
      end
      out = v
    elseif k == "ctx" and op.ctx then
      local ok, dt, di = pcall(context.parse, v)
      if not ok then return nil, nil, op.name .. ": " .. tostring(dt) end
      P.dev_type, P.dev_id = dt, di
    elseif type(k) == "number" then
      -- array part: handled by callers that accept it (shape for creation ops)
    else
      local p = op.pindex[k]
      if not p then
        local names = {}
        for _, q in ipairs(op.params) do names[#names + 1] = q.name end
        if op.ctx then names[#names + 1] = "ctx" end
        names[#names + 1] = "out"
        return nil, nil, string.format("%s: unknown option '%s' (valid: %s)", op.name, tostring(k),
          table.concat(names, ", "))
      end
      local ok
      if p.type == "enum" then
        for i, name in ipairs(p.values) do
          if v == name then P[k] = i - 1 ok = true end
        end
      else
        ok = CONV[p.type](P, k, v)
      end
      if not ok then
        return nil, nil, string.format("%s: option %s must be %s%s, got %s", op.name, k,
          EXPECT[p.type], p.values and table.concat(p.values, "/") or "", tostring(v))
      end
      if p.optional and P["has_" .. k] ~= nil and p.type ~= "axes" and p.type ~= "shape"
          and p.type ~= "ints" then
        P["has_" .. k] = true
      end
    end
  end
  return P, out
end
nd._fill_params = fill_params

---------------------------------------------------------------- the invoke path
-- Run op on inputs already placed in inbuf[0..nin). Returns the result(s).
-- level: the stack level of the user's frame relative to the caller of run. Callers
-- must not tail-call run (or any helper taking a level): a tail call drops their
-- frame and the error would blame the wrong line.
local function run(invoke, op, nin, P, out, opts, a, b, level)
  local nout = #op.outputs
  if nout == 1 then
    outbuf[0] = out and out.h
  else
    for i = 0, nout - 1 do outbuf[i] = out and out[i + 1].h or nil end
  end
  if invoke(op.id, nin, inbuf, P, nout, outbuf) ~= 0 then
    error(ffi_string(C.mx_last_error()), level + 1)
  end
  local r = out or wrap(outbuf[0])
  if nout == 1 then
    if S.recording then S.record(op, nin == 1 and { a } or { a, b }, opts, { r }) end
    return r
  end
  local res = {}
  for i = 1, nout do res[i] = out and out[i] or wrap(outbuf[i - 1]) end
  if S.recording then S.record(op, { a, b }, opts, res) end
  return unpack(res)
end

local function bad_input(op, i, v, level)
  error(string.format("%s: input %d (%s) must be a tensor, got %s", op.name, i,
    op.inputs[i] or "data", type(v)), level + 1)
end

-- x <op> scalar (sop) or scalar <op> x (rsop)
local function scalar_call(invoke, sop, x, s, opts, level)
  if not is_tensor(x) then bad_input(sop, 1, x, level + 1) end
  local P, out, err = fill_params(sop, opts)
  if err then error(err, level + 1) end
  P.scalar = s
  inbuf[0] = x.h
  -- the autograd record sees the scalar as the op's param
  local r = run(invoke, sop, 1, P, out, S.recording and { scalar = s } or nil, x, nil, level + 1)
  return r -- not a tail call: `level` counts this frame
end

local function make_unary(op, invoke)
  return function(a, opts)
    if not is_tensor(a) then bad_input(op, 1, a, 2) end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    inbuf[0] = a.h
    local r = run(invoke, op, 1, P, out, opts, a, nil, 2)
    return r
  end
end

local function make_binary(op, sop, rsop, invoke)
  return function(a, b, opts)
    local r
    if type(b) == "number" and sop then
      r = scalar_call(invoke, sop, a, b, opts, 2)
      return r
    end
    if type(a) == "number" and rsop then
      r = scalar_call(invoke, rsop, b, a, opts, 2)
      return r
    end
    if not is_tensor(a) then bad_input(op, 1, a, 2) end
    if not is_tensor(b) then bad_input(op, 2, b, 2) end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    inbuf[0], inbuf[1] = a.h, b.h
    r = run(invoke, op, 2, P, out, opts, a, b, 2)
    return r
  end
end

-- Any arity; positional tensors, then an optional options table. Variadic ops also
-- accept one Lua list of tensors.
local function make_general(op, invoke)
  return function(...)
    local n = select("#", ...)
    local nin, opts = 0, nil
    local args = { ... }
    if op.nin == -1 and n >= 1 and type(args[1]) == "table" and not is_tensor(args[1]) then
      local list = args[1]
      opts = args[2]
      args = {}
      for i = 1, #list do args[i] = list[i] end
      n = #args
      for i = 1, n do
        if not is_tensor(args[i]) then bad_input(op, i, args[i], 2) end
      end
      nin = n
    else
      for i = 1, n do
        local v = args[i]
        if is_tensor(v) then
          nin = nin + 1
        elseif v == nil and i > nin then
          break
        elseif type(v) == "table" and i == n then
          opts = v
          break
        else
          -- a number where a tensor was expected
          if nin < #op.inputs or op.nin == -1 then bad_input(op, nin + 1, v, 2) end
          error(op.name .. ": unexpected argument " .. i .. " (" .. type(v)
            .. "); options go in one table", 2)
        end
      end
    end
    if op.nin >= 0 and nin ~= op.nin then
      if nin < op.nin then bad_input(op, nin + 1, args[nin + 1], 2) end
      error(string.format("%s: takes %d tensor input(s), got %d", op.name, op.nin, nin), 2)
    end
    if nin > 64 then error(op.name .. ": at most 64 inputs", 2) end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    for i = 1, nin do inbuf[i - 1] = args[i].h end
    local nout = #op.outputs
    for i = 0, nout - 1 do
      local o = (nout == 1 and out) or (out and out[i + 1])
      outbuf[i] = o and o.h or nil
    end
    if invoke(op.id, nin, inbuf, P, nout, outbuf) ~= 0 then
      error(ffi_string(C.mx_last_error()), 2)
    end
    local res = {}
    for i = 1, nout do
      res[i] = (nout == 1 and out) or (out and out[i]) or wrap(outbuf[i - 1])
    end
    if S.recording then
      local ins = {}
      for i = 1, nin do ins[i] = args[i] end
      S.record(op, ins, opts, res)
    end
    return unpack(res, 1, nout)
  end
end

-- Creation ops: shape positionally (table or numbers) and/or as the array part of
-- the options table: zeros{2, 3}, zeros({2, 3}, {dtype="int32"}), full({2}, 7).
local function make_creation(op, invoke)
  return function(a, b, c)
    local shape, opts, value
    if type(a) == "table" then
      shape = a
      if op.pindex.value and type(b) == "number" then value, opts = b, c else opts = b end
    elseif type(a) == "number" then
      shape = { a }
      opts = b
    elseif a == nil then
      shape = {}
      opts = b
    else
      error(op.name .. ": shape must be a table of dims, got " .. type(a), 2)
    end
    if opts ~= nil and type(opts) ~= "table" then
      error(op.name .. ": options must be a table, got " .. type(opts), 2)
    end
    local merged -- options in the hash part of the shape table: zeros{2, 3, dtype="int32"}
    for k, v in pairs(shape) do
      if type(k) ~= "number" then
        merged = merged or {}
        merged[k] = v
      end
    end
    if merged then
      if opts then for k, v in pairs(opts) do merged[k] = v end end
      opts = merged
    end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    if not (opts and opts.shape) then
      local dims = {}
      for i = 1, #shape do dims[i] = shape[i] end
      if not CONV.shape(P, "shape", dims) then
        error(op.name .. ": shape must be a list of non-negative integers", 2)
      end
    end
    if value ~= nil then P.value = value end
    local r = run(invoke, op, 0, P, out, opts, nil, nil, 2)
    return r
  end
end

---------------------------------------------------------------- build the namespace
for _, op in ipairs(lib.ops) do
  prepare(op)
end
-- One wrapper per op. `invoke` is the C entry: mx_op_invoke, or mx_op_invoke_ref for
-- the nd._ref namespace (same API, reference kernels: the test oracle).
local function make(op, invoke)
  if op.ctx then return make_creation(op, invoke) end
  if op.nin == 1 and #op.outputs == 1 and not op.variadic then return make_unary(op, invoke) end
  if op.nin == 2 and #op.outputs == 1 and #op.params == 0 then
    local sc = op.scalar
    return make_binary(op, sc and lib.ops_by_name[sc.op], sc and lib.ops_by_name[sc.rop], invoke)
  end
  return make_general(op, invoke)
end
nd._ref = {}
for _, op in ipairs(lib.ops) do
  local f = make(op, C.mx_op_invoke)
  nd[op.name] = f
  nd._ref[op.name] = make(op, C.mx_op_invoke_ref)
  if not op.ctx and op.nin ~= 0 and NDArray[op.name] == nil then NDArray[op.name] = f end
end

---------------------------------------------------------------- NDArray basics
local function check(rc, level)
  if rc ~= 0 then error(ffi_string(C.mx_last_error()), level + 1) end
end
nd._check = check

function NDArray.ndim(x) return C.mx_tensor_ndim(x.h) end
function NDArray.size(x) return tonumber(C.mx_tensor_size(x.h)) end
function NDArray.shape(x)
  local n = C.mx_tensor_shape(x.h, shapebuf)
  local t = {}
  for i = 1, n do t[i] = tonumber(shapebuf[i - 1]) end
  return t
end
function NDArray.dtype(x) return DTYPE_NAME[C.mx_tensor_dtype(x.h)] end
function NDArray.context(x)
  return context.new(C.mx_tensor_dev_type(x.h), C.mx_tensor_dev_id(x.h))
end
NDArray.ctx = NDArray.context

local PTR_T = {
  float32 = ffi.typeof("float*"), float64 = ffi.typeof("double*"),
  float16 = ffi.typeof("uint16_t*"), bfloat16 = ffi.typeof("uint16_t*"),
  uint8 = ffi.typeof("uint8_t*"), int8 = ffi.typeof("int8_t*"),
  int32 = ffi.typeof("int32_t*"), int64 = ffi.typeof("int64_t*"), bool = ffi.typeof("uint8_t*"),
}
-- Zero-copy typed pointer to element 0 (0-based C memory). Waits for pending
-- writes. Valid while x (or a view of its storage) is alive.
function NDArray.data_ptr(x)
  return ffi.cast(PTR_T[NDArray.dtype(x)], C.mx_tensor_data(x.h))
end

local dbuf_t = ffi.typeof("double[?]")
function NDArray.item(x)
  local n = NDArray.size(x)
  if n ~= 1 then
    error("item: tensor has " .. n .. " elements (shape " .. table.concat(NDArray.shape(x), "x")
      .. "); item() needs exactly one", 2)
  end
  local d = ffi.new("double[1]")
  check(C.mx_tensor_get_f64(x.h, 0, d), 2)
  return d[0]
end
NDArray.asscalar = NDArray.item

-- All values as a flat Lua array (row-major).
function NDArray.tolist(x)
  local n = NDArray.size(x)
  local buf = dbuf_t(n > 0 and n or 1)
  check(C.mx_tensor_get_all_f64(x.h, buf, n), 2)
  local t = {}
  for i = 1, n do t[i] = buf[i - 1] end
  return t
end

-- Nested Lua tables (a number for a 0-d tensor).
function NDArray.totable(x)
  local flat = NDArray.tolist(x)
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

local function new_empty(shape, dtype, dt, di, level)
  local n = #shape
  for i = 1, n do shapebuf[i - 1] = shape[i] end
  check(C.mx_tensor_empty(n, shapebuf, dtype, dt, di, outbuf), level + 1)
  return wrap(outbuf[0])
end
nd._new_empty = new_empty

-- An uninitialised tensor: mx.nd.empty({2, 3}, {dtype=, ctx=}).
function nd.empty(shape, opts)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" then error("empty: shape must be a table of dims", 2) end
  opts = opts or {}
  local dt, di = context.parse(opts.ctx, 2)
  local dtype = dtype_code(opts.dtype or "float32")
  if not dtype then error("empty: unknown dtype " .. tostring(opts.dtype), 2) end
  return new_empty(shape, dtype, dt, di, 2)
end

-- Flatten a nested table, checking it is rectangular. Returns values, shape.
local function flatten(t, level)
  local shape, vals = {}, {}
  local probe = t
  while type(probe) == "table" do
    shape[#shape + 1] = #probe
    probe = probe[1]
  end
  local function walk(v, d, path)
    if d > #shape then
      if type(v) == "boolean" then v = v and 1 or 0 end
      if type(v) ~= "number" then
        error("array: element " .. path .. " is a " .. type(v) .. ", expected a number", level + 3)
      end
      vals[#vals + 1] = v
      return
    end
    if type(v) ~= "table" or #v ~= shape[d] then
      error(string.format("array: ragged nested table at %s (expected %d elements along axis %d)",
        path == "" and "top level" or path, shape[d], d), level + 3)
    end
    for i = 1, #v do walk(v[i], d + 1, path .. "[" .. i .. "]") end
  end
  walk(t, 1, "")
  return vals, shape
end

-- mx.nd.array(nested_table | number | tensor | cdata pointer, {dtype=, ctx=, shape=})
-- copies the data into a new tensor (float32 unless dtype= says otherwise; a
-- tensor source keeps its dtype).
function nd.array(data, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("array: options must be a table", 2) end
  for k in pairs(opts) do
    if k ~= "dtype" and k ~= "ctx" and k ~= "shape" then
      error("array: unknown option '" .. tostring(k) .. "' (valid: dtype, ctx, shape)", 2)
    end
  end
  local dt, di = context.parse(opts.ctx, 2)
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
    local src = new_empty(shape, dtype, 1, 0, 2)
    local n = NDArray.size(src)
    ffi.copy(C.mx_tensor_data(src.h), data, n * tonumber(C.mx_dtype_size(dtype)))
    if dt == 1 then return src end
    check(C.mx_tensor_to(src.h, dt, di, -1, outbuf), 2)
    return wrap(outbuf[0])
  end
  local vals, shape
  if type(data) == "number" or type(data) == "boolean" then
    vals, shape = { data == true and 1 or data == false and 0 or data }, {}
  elseif type(data) == "table" then
    vals, shape = flatten(data, 1)
  else
    error("array: expected a nested table, a number, a tensor or a cdata pointer, got "
      .. type(data), 2)
  end
  local t = new_empty(shape, dtype, 1, 0, 2)
  local n = #vals
  local buf = dbuf_t(n > 0 and n or 1)
  for i = 1, n do buf[i - 1] = vals[i] end
  check(C.mx_tensor_set_from_f64(t.h, buf, n), 2)
  if dt == 1 then return t end
  check(C.mx_tensor_to(t.h, dt, di, -1, outbuf), 2)
  return wrap(outbuf[0])
end

-- Wrap external memory without copying. `owner` (optional) is kept alive as long as
-- the tensor or any view of it lives: pass the cdata that owns `ptr` (an ffi.new
-- buffer, say). Without an owner the caller must keep the memory valid.
local owners = setmetatable({}, { __mode = "k" })
function nd.from_pointer(ptr, shape, opts)
  opts = opts or {}
  if type(shape) ~= "table" then error("from_pointer: shape must be a table of dims", 2) end
  local dtype = dtype_code(opts.dtype or "float32")
  if not dtype then error("from_pointer: unknown dtype " .. tostring(opts.dtype), 2) end
  for i = 1, #shape do shapebuf[i - 1] = shape[i] end
  check(C.mx_tensor_from_data(ffi.cast("void*", ptr), #shape, shapebuf, dtype, nil, nil, outbuf), 2)
  local t = wrap(outbuf[0])
  if opts.owner ~= nil then owners[t] = opts.owner end
  return t
end

-- A new tensor on ctx (and/or dtype): x:to(mx.gpu(0)), x:to(mx.cpu(), "float16")
function NDArray.to(x, ctx, dtype)
  local dt, di = context.parse(ctx or NDArray.context(x), 2)
  local code = -1
  if dtype ~= nil then
    code = dtype_code(dtype)
    if not code then error("to: unknown dtype " .. tostring(dtype), 2) end
  end
  check(C.mx_tensor_to(x.h, dt, di, code, outbuf), 2)
  return wrap(outbuf[0])
end
NDArray.as_in_context = NDArray.to
NDArray.as_in_ctx = NDArray.to

-- Copy values from src into x (same shape; converts dtype; any devices).
function NDArray.copyto(src, dst)
  if is_tensor(dst) then
    check(C.mx_tensor_copy_into(dst.h, src.h), 2)
    return dst
  end
  return NDArray.to(src, dst)
end

---------------------------------------------------------------- views and indexing
-- reshape is a view (MXNet's 0 and -1 codes apply); x:reshape{3, -1} or
-- x:reshape(3, -1).
function NDArray.reshape(x, shape, ...)
  if type(shape) == "number" then shape = { shape, ... } end
  if type(shape) ~= "table" then error("reshape: shape must be a table of dims", 2) end
  local n = #shape
  if n > 8 then error("reshape: at most 8 dims", 2) end
  for i = 1, n do
    if not is_int(shape[i]) then error("reshape: dims must be integers", 2) end
    shapebuf[i - 1] = shape[i]
  end
  check(C.mx_tensor_reshape(x.h, n, shapebuf, outbuf), 2)
  local r = wrap(outbuf[0])
  if S.recording then S.record(lib.ops_by_name.reshape or { name = "reshape" }, { x },
    { shape = shape }, { r }) end
  return r
end

local function norm_index(i, n, what, level)
  if not is_int(i) or i == 0 then
    error(string.format("index: %s must be a non-zero integer (1-based), got %s", what,
      tostring(i)), level + 1)
  end
  local j = i < 0 and n + i + 1 or i
  if j < 1 or j > n then
    error(string.format("index: %s %d out of range for a dimension of size %d", what, i, n),
      level + 1)
  end
  return j
end

-- x[i]: row i (1-based, negative from the end) as a view without the leading axis.
local function index_row(x, i, level)
  local n = tonumber(C.mx_tensor_dim(x.h, 0))
  if n < 0 then error("index: cannot index a 0-d tensor", level + 1) end
  local j = norm_index(i, n, "index", level + 1)
  check(C.mx_tensor_index0(x.h, j - 1, outbuf), level + 1)
  return wrap(outbuf[0])
end

-- {a, b} inclusive 1-based range (negatives from the end), {} the whole axis,
-- {a} a single index kept as a size-1 range. Returns 0-based [begin, end).
local function norm_range(r, n, level)
  if type(r) == "number" then
    local j = norm_index(r, n, "index", level + 1)
    return j - 1, j, true
  end
  if type(r) ~= "table" then
    error("index: each entry must be an integer or a range table {first, last}", level + 1)
  end
  local a, b = r[1] or 1, r[2] or r[1] or -1
  if r[1] == nil then b = -1 end
  local ja = norm_index(a, n, "range start", level + 1)
  local jb = norm_index(b, n, "range end", level + 1)
  if jb < ja - 1 then
    error(string.format("index: empty-by-inversion range {%d, %d}", a, b), level + 1)
  end
  return ja - 1, jb, false
end

-- x[{r1, r2, ...}]: a range per leading axis. Ranges on the first axis alone give a
-- view; ranges on later axes copy (through the slice op).
local function index_ranges(x, spec, level)
  local shape = NDArray.shape(x)
  if #spec > #shape then
    error(string.format("index: %d ranges for a %d-d tensor", #spec, #shape), level + 1)
  end
  local begin, stop, drop = {}, {}, {}
  local copy = false
  for d = 1, #spec do
    begin[d], stop[d], drop[d] = norm_range(spec[d], shape[d], level + 1)
    if d > 1 and (begin[d] ~= 0 or stop[d] ~= shape[d]) then copy = true end
  end
  local r
  if not copy then
    check(C.mx_tensor_slice0(x.h, begin[1], stop[1], outbuf), level + 1)
    r = wrap(outbuf[0])
  else
    if not nd.slice then error("index: ranges past the first axis need the slice op", level + 1) end
    local b1, e1 = {}, {}
    for d = 1, #spec do b1[d], e1[d] = begin[d] + 1, stop[d] end
    r = nd.slice(x, { begin = b1, ["end"] = e1 })
  end
  -- integer entries drop their axis (Torch/NumPy), ranges keep it
  local newshape, any = {}, false
  local rs = NDArray.shape(r)
  for d = 1, #rs do
    if drop[d] then any = true else newshape[#newshape + 1] = rs[d] end
  end
  if any then r = NDArray.reshape(r, newshape) end
  return r
end

local function index(x, k, level)
  if type(k) == "number" then return index_row(x, k, level + 1) end
  if type(k) == "table" then return index_ranges(x, k, level + 1) end
  return nil
end
NDArray.slice_view = function(x, first, last) -- rows first..last (inclusive) as a view
  return index_ranges(x, { { first, last } }, 2)
end

-- x[i] = v / x[{...}] = v: v a number or a tensor broadcastable to the selection.
local function assign(x, k, v)
  local target = index(x, k, 2)
  if target == nil then error("index: cannot assign field " .. tostring(k) .. " of a tensor", 2) end
  if not C.mx_tensor_shares_storage(target.h, x.h) then
    error("index: assignment to ranges past the first axis is not supported yet; "
      .. "use slice_assign", 2)
  end
  if type(v) == "number" then
    nd.full(NDArray.shape(target), v, { dtype = NDArray.dtype(target), ctx = NDArray.context(x),
      out = target })
  elseif is_tensor(v) then
    if nd.broadcast_to and table.concat(NDArray.shape(v), ",")
        ~= table.concat(NDArray.shape(target), ",") then
      v = nd.broadcast_to(v, { shape = NDArray.shape(target) })
    end
    check(C.mx_tensor_copy_into(target.h, v.h), 2)
  else
    error("index: can only assign a number or a tensor, got " .. type(v), 2)
  end
end

---------------------------------------------------------------- printing
local function fmt_num(v, is_float)
  if not is_float then return string.format("%d", v) end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  local s = string.format("%.6g", v)
  if not s:find("[%.eE]") then s = s .. "." end
  return s
end

local EDGE = 3
function NDArray.__tostring(x)
  local shape = NDArray.shape(x)
  local dtype = NDArray.dtype(x)
  local is_float = dtype:find("float") ~= nil
  local ctx = tostring(NDArray.context(x))
  local src = x
  if C.mx_tensor_dev_type(x.h) ~= 1 then src = NDArray.to(x, context.cpu()) end
  local flat = NDArray.tolist(src)
  local n = #flat
  local summarize = n > 1000
  local strs, width = {}, 0
  for i = 1, n do
    local s = fmt_num(flat[i], is_float)
    strs[i] = s
    if #s > width then width = #s end
  end
  local strides = {}
  local st = 1
  for d = #shape, 1, -1 do strides[d] = st st = st * shape[d] end
  local function render(d, off, indent)
    if d > #shape then return string.rep(" ", width - #strs[off + 1]) .. strs[off + 1] end
    local parts = {}
    local len = shape[d]
    for i = 1, len do
      if summarize and len > 2 * EDGE and i == EDGE + 1 then
        parts[#parts + 1] = "..."
      end
      if not (summarize and len > 2 * EDGE and i > EDGE and i <= len - EDGE) then
        parts[#parts + 1] = render(d + 1, off + (i - 1) * strides[d], indent .. " ")
      end
    end
    local sep = d == #shape and " " or ("\n" .. string.rep("\n", #shape - d - 1) .. indent .. " ")
    return "[" .. table.concat(parts, sep) .. "]"
  end
  local body = #shape == 0 and strs[1] or render(1, 0, "")
  local dims = #shape == 0 and "scalar" or table.concat(shape, "x")
  return body .. "\n<NDArray " .. dims .. " " .. dtype .. " @" .. ctx .. ">"
end

---------------------------------------------------------------- metatype
local function binop(name)
  local f = nd[name]
  return f
end

local mt = {
  __index = function(x, k)
    local m = NDArray[k]
    if m ~= nil then return m end
    return index(x, k, 2)
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
  __gc = function(x) release(x.h) end,
}
ffi.metatype(tensor_t, mt)

-- Sync points (the engine makes them real; results are already complete without it).
function NDArray.wait_to_read(x) return x end
function nd.waitall() end

return nd
