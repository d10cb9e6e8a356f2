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
-- row) could never reach our __index. The box owns one reference to the handle,
-- released after the GC collects the box (see "handle ownership" below).
ffi.cdef("struct mx_nd { mx_tensor *h; };")
local tensor_t = ffi.typeof("struct mx_nd")
local inbuf = ffi.new("mx_tensor*[64]")
local outbuf = ffi.new("mx_tensor*[64]")
local int64_8 = ffi.typeof("int64_t[8]")
local shapebuf = ffi.new(int64_8)

local function is_tensor(x) return ffi_istype(tensor_t, x) end
nd.is_tensor = is_tensor

---------------------------------------------------------------- memory pressure
-- C memory is invisible to Lua's GC: every new tensor polls the core's byte count
-- (one relaxed atomic load through the FFI, ~2 ns) and collects when it has grown
-- well past what the last collection left (Torch7's lesson). Bounded loops of
-- temporaries reach a steady state. Polling every few tensors instead let a loop of
-- large temporaries (an evaluation at batch 1000: ~8 MB a batch) run 30 MB past the
-- threshold between polls: that was the process's peak RSS.
local GC_MIN = 16 * 2 ^ 20
local gc_threshold = GC_MIN
local bytes_in_use = C.mx_memory_bytes_in_use

local function gc_collect()
  collectgarbage("collect")
  nd._sweep() -- release the handles of the boxes that cycle freed
  local used = tonumber(bytes_in_use())
  -- headroom proportional to what is live, not a doubling: dead temporaries above
  -- it sit in the storage pool and count in the process's RSS
  gc_threshold = used + math.max(GC_MIN, used / 4)
end

---------------------------------------------------------------- handle ownership
-- A __gc metamethod on the box would cost ~390 ns per tensor (LuaJIT's finalizer
-- table plus an interpreted call from the collector): four times a whole 1-element
-- add. Instead each handle sits in a slot of `handles` (a C array) and its box in
-- the weak-valued `boxes` at the same slot. When the GC frees a box its weak entry
-- clears, and `sweep` releases every handle whose box is gone. A sentinel finalizer
-- marks the end of each GC cycle and the next wrap sweeps (in JIT-compiled code:
-- sweeping inside the finalizer runs interpreted, ~100 ns a slot). gc_check and
-- mx.memory_stats sweep right after a collection, so memory freed by the GC shows at
-- once. `closer` releases all handles when the Lua state closes.
local boxes = setmetatable({}, { __mode = "v" })
local handles, hcap = ffi.new("mx_tensor*[?]", 1024), 1024
local free_slots, nfree, top = {}, 0, 0
local closed, sweep_due = false, false
-- While autograd's backward runs, every new box is listed (box and slot), so that
-- backward can release its own temporaries when it ends instead of leaving them to
-- the next GC cycle (nd._release_born).
local born_box, born_slot, nborn = nil, nil, 0
local born_open = false -- a list exists (listing or paused): slots must stay put

-- After a burst (a GC cycle that came late) most slots may be free: move the live
-- ones down and start smaller tables, so the registry's size follows what lives
-- rather than its high-water mark.
local function compact()
  local live = top - nfree
  local cap = 1024
  while cap <= 2 * live do cap = cap * 2 end
  local nb = setmetatable({}, { __mode = "v" })
  local nh = ffi.new("mx_tensor*[?]", cap) -- may run a GC step: entries stay consistent
  local j = 0
  for i = 1, top do
    local h = handles[i]
    if h ~= nil then
      j = j + 1
      nb[j] = boxes[i] -- nil if collected meanwhile: the next sweep releases h
      nh[j] = h
    end
  end
  boxes, handles, hcap, top = nb, nh, cap, j
  free_slots, nfree = {}, 0
end

local function sweep()
  sweep_due = false
  for i = 1, top do
    local h = handles[i]
    if h ~= nil and boxes[i] == nil then
      handles[i] = nil
      release(h)
      nfree = nfree + 1
      free_slots[nfree] = i
    end
  end
  -- (not while backward lists its tensors by slot: the next sweep compacts)
  if top > 4096 and nfree > 0.75 * top and not born_open then compact() end
end
nd._sweep = sweep

local function arm()
  local p = newproxy(true)
  getmetatable(p).__gc = function()
    if closed then return end
    sweep_due = true
    arm()
  end
end
arm()
local closer = newproxy(true)
getmetatable(closer).__gc = function()
  closed = true
  for i = 1, top do
    local h = handles[i]
    if h ~= nil then handles[i] = nil release(h) end
  end
end
nd._closer = closer -- anchored: finalized only when the state closes

local function grow()
  local nh = ffi.new("mx_tensor*[?]", 2 * hcap) -- may run a GC step (and a sweep) first
  ffi.copy(nh, handles, hcap * ffi.sizeof("mx_tensor*"))
  handles, hcap = nh, 2 * hcap
end

-- Fresh slots come 256 at a time: wrap's branch for "no free slot" is then rare. When
-- it was taken on every new slot (nfree is 0 between sweeps), the side trace LuaJIT
-- kept trying to compile for it failed ("register coalescing too complex") hundreds of
-- times a second in a training loop.
local REFILL = 256
local function refill()
  while top + REFILL >= hcap do grow() end
  for k = REFILL, 1, -1 do
    nfree = nfree + 1
    free_slots[nfree] = top + k
  end
  top = top + REFILL
end

-- Take ownership of a new handle from C.
local function wrap(h)
  local x = tensor_t(h) -- the allocation that may run the GC: before any slot work
  if nfree == 0 then refill() end
  local i = free_slots[nfree]
  nfree = nfree - 1
  boxes[i] = x -- box first: a sweep skips slots whose handle is still nil
  handles[i] = h
  if born_box then
    nborn = nborn + 1
    born_box[nborn], born_slot[nborn] = x, i
  end
  if sweep_due then sweep() end
  if bytes_in_use() > gc_threshold then gc_collect() end
  return x
end
nd._wrap = wrap

-- Start listing new tensors; false (and nothing changes) when a list is already on.
-- The list holds its boxes strongly, so none is collected (and its slot reused) before
-- the release.
function nd._list_born()
  if born_open then return false end
  born_box, born_slot, nborn, born_open = {}, {}, 0, true
  return true
end
-- Pause the list (returns it, or nil when none was on) and resume it.
function nd._pause_born()
  if not born_box then return nil end
  local t = { born_box, born_slot, nborn }
  born_box, born_slot, nborn = nil, nil, 0
  return t
end
function nd._resume_born(t)
  if t then born_box, born_slot, nborn = t[1], t[2], t[3] end
end

-- Stop listing and release the handle of every listed tensor except those in keep (a
-- set of boxes; nil: stop without releasing anything). A released box holds a NULL
-- handle: only for tensors nothing else refers to (backward's gradient temporaries).
-- Queued ops keep their own references.
function nd._release_born(keep)
  local bb, bs, n = born_box, born_slot, nborn
  born_box, born_slot, nborn, born_open = nil, nil, 0, false
  if not bb or not keep then return end
  for k = 1, n do
    local b, i = bb[k], bs[k]
    -- boxes first: were the slots ever renumbered meanwhile (sweep defers compaction
    -- while a list is open), `handles` could be shorter than i
    if boxes[i] == b and not keep[b] and handles[i] ~= nil then
      local h = handles[i]
      handles[i] = nil
      b.h = nil
      release(h)
      nfree = nfree + 1
      free_slots[nfree] = i
    end
  end
end

---------------------------------------------------------------- engine call sites
-- When an op was queued (not run inline) the engine wants the Lua line that queued
-- it, for the message of a later asynchronous error. Only queued ops pay for
-- debug.getinfo; the inline fast path pays one FFI call (mx_engine_queued).
-- MX_ENGINE_DEBUG=1 records a full traceback instead of file:line.
local engine_queued, engine_set_site = C.mx_engine_queued, C.mx_engine_set_site
local engine_debug = (os.getenv("MX_ENGINE_DEBUG") or "0") ~= "0"
-- lv: the level of the user's frame as the caller would pass it to error().
local function note_site(lv)
  local where
  if engine_debug then
    where = debug.traceback("", lv + 1):gsub("^\n", "")
  else
    local info = debug.getinfo(lv + 1, "Sl")
    where = info and (info.short_src .. ":" .. (info.currentline or 0)) or "?"
  end
  engine_set_site(where)
end
nd._note_site = note_site
-- mx.engine.set_debug(on): full tracebacks for queued ops (MX_ENGINE_DEBUG=1)
function nd._set_engine_debug(on) engine_debug = on and true or false end
function nd._get_engine_debug() return engine_debug end

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
-- Slice bounds (op-table params with `index = "begin"|"end"|"step"`): 1-based
-- inclusive in Lua, negatives from the end; C takes Python's 0-based [begin, end)
-- with INDEX_NONE for a bound left out. No shape is needed: begin b>0 -> b-1 (a
-- negative begin means the same in both); an inclusive end e is the exclusive
-- 0-based end e (step > 0) or e-2 (step < 0), and the ends that would need the
-- axis length (-1 going up, 1 going down) become "none". false/nil: none.
local INDEX_NONE = -2 ^ 63
nd._INDEX_NONE = INDEX_NONE
local function begin0(b)
  if b == nil or b == false then return INDEX_NONE end
  if not is_int(b) or b == 0 then return nil end
  return b > 0 and b - 1 or b
end
local function end0(e, s)
  if e == nil or e == false then return INDEX_NONE end
  if not is_int(e) or e == 0 then return nil end
  if s > 0 then
    if e > 0 then return e end
    return e == -1 and INDEX_NONE or e + 1
  end
  if e > 1 then return e - 2 end
  return e == 1 and INDEX_NONE or e - 1
end
local function step_at(opts, i)
  local s = opts and opts.step
  if type(s) == "table" then s = s[i] end
  return is_int(s) and s ~= 0 and s or 1
end
-- Converts one index param v (a number or a list) into P[k]; false if malformed.
local function index_conv(P, k, v, p, opts)
  if p.type == "int" then
    local c = p.index == "begin" and begin0(v) or end0(v, 1)
    if c == nil or (c == INDEX_NONE and p.index == "begin") then return false end
    if p.optional then P["has_" .. k] = c ~= INDEX_NONE end
    if c ~= INDEX_NONE then P[k] = c end
    return true
  end
  if type(v) == "number" or type(v) == "boolean" then v = { v } end
  if type(v) ~= "table" then return false end
  local n = table.maxn(v)
  if n > 8 then return false end
  local t = P[k]
  t.n = n
  for i = 1, n do
    local c
    if p.index == "begin" then c = begin0(v[i])
    elseif p.index == "end" then c = end0(v[i], step_at(opts, i))
    elseif v[i] == nil or v[i] == false then c = INDEX_NONE
    elseif is_int(v[i]) and v[i] ~= 0 then c = v[i] end
    if not c then return false end
    t.v[i - 1] = c
  end
  return true
end
nd._index_conv = index_conv

local EXPECT = {
  int = "an integer", float = "a number", bool = "a boolean", dtype = "a dtype name",
  axis = "a 1-based axis (non-zero integer)", axes = "an axis or a list of axes",
  shape = "a list of dims", ints = "a list of integers", enum = "one of ",
}

-- Prepare per-op param machinery: a reusable struct, a struct of defaults, and the
-- name -> param map. Called once per op at load.
local function prepare(op)
  op.pindex = {}
  -- train_flag = true (param `training`) or the name of the bool param to fill
  op.train_param = op.train_flag == true and "training" or op.train_flag or nil
  for _, p in ipairs(op.params) do op.pindex[p.name] = p end
  if not op.ctype then return end
  local D = ffi.new(op.ctype)
  if op.ctx then D.dev_type, D.dev_id = 1, 0 end
  for _, p in ipairs(op.params) do
    if p.optional then
      if p.type == "axes" or p.type == "shape" or p.type == "ints" then D[p.name].n = -1 end
    elseif p.type == "enum" then
      for i, name in ipairs(p.values) do if name == p.default then D[p.name] = i - 1 end end
    elseif p.index then
      assert(index_conv(D, p.name, p.default, p), "bad default for " .. op.name .. "." .. p.name)
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
  if P then
    ffi.copy(P, op.defaults, op.size)
    local tp = op.train_param -- train mode flag (op table `train_flag`), unless opts say
    if tp then P[tp] = S.training end
  end
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
      elseif p.index then
        ok = index_conv(P, k, v, p, opts)
      else
        ok = CONV[p.type](P, k, v)
      end
      if not ok then
        return nil, nil, string.format("%s: option %s must be %s%s, got %s", op.name, k,
          EXPECT[p.type], p.values and table.concat(p.values, "/") or "", tostring(v))
      end
      -- optional scalars have a has_<name> flag; tuples use n = -1 instead (and the
      -- FFI raises on a missing field, so test the type first)
      if p.optional and not p.index and p.type ~= "axes" and p.type ~= "shape"
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
  if engine_queued() then note_site(level + 1) end
  local r = out or wrap(outbuf[0])
  if nout == 1 then
    if S.recording then S.record1(op, a, b, opts, r) end
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

-- Random ops (op table `random = true`): reserve the draw's counters now, in
-- program order, unless the caller passed rng_counter (docs/ndarray.md).
local seedbuf = ffi.new("uint64_t[1]")
local function rng_reserve(P, n)
  if P.has_rng_counter then return end
  n = tonumber(n)
  local first = C.mx_random_reserve_counters(n + n % 2, seedbuf)
  P.rng_seed, P.rng_counter = seedbuf[0], first
  P.has_rng_seed, P.has_rng_counter = true, true
end

-- x <op> scalar (sop) or scalar <op> x (rsop)
local function scalar_call(invoke, sop, x, s, opts, level)
  if not is_tensor(x) then bad_input(sop, 1, x, level + 1) end
  local P, out, err = fill_params(sop, opts)
  if err then error(err, level + 1) end
  P.scalar = s
  inbuf[0] = x.h
  -- the autograd record sees the scalar as the op's param
  local r = run(invoke, sop, 1, P, out, S.recording and { scalar = s, out = out } or nil, x, nil, level + 1)
  return r -- not a tail call: `level` counts this frame
end

local function make_unary(op, invoke)
  return function(a, opts)
    if not is_tensor(a) then bad_input(op, 1, a, 2) end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    if op.random and op.pindex.rng_counter then rng_reserve(P, C.mx_tensor_size(a.h)) end
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
    if op.nin >= 0 and (nin < op.nin_min or nin > op.nin) then
      if nin < op.nin_min then bad_input(op, nin + 1, args[nin + 1], 2) end
      error(string.format("%s: takes %s tensor input(s), got %d", op.name, op.nin_min == op.nin
        and tostring(op.nin) or (op.nin_min .. " to " .. op.nin), nin), 2)
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
    if engine_queued() then note_site(2) end
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

-- Fixed arity (any op with a set number of inputs that the unary and binary paths do
-- not serve: pick_backward, the optimizers' updates, multi-output ops): a wrapper
-- generated for the op's exact arity, so LuaJIT compiles it (make_general's varargs,
-- {...} and unpack keep it interpreted: ~9 us a call, 1000x the op it wraps).
local FIXED = [[
local op, invoke, is_tensor, bad_input, fill_params, inbuf, outbuf, ffi_string, C,
  engine_queued, note_site, wrap, S, type, error = ...
local nout = #op.outputs
return function(A, opts, extra)
  CHECKS
  if opts ~= nil and type(opts) ~= "table" or extra ~= nil or is_tensor(opts) then
    if is_tensor(opts) then
      error(string.format("%s: takes %d tensor input(s), got more", op.name, NIN), 2)
    end
    error(op.name .. ": unexpected argument " .. (extra ~= nil and NIN + 2 or NIN + 1)
      .. "; options go in one table", 2)
  end
  local P, out, err = fill_params(op, opts)
  if err then error(err, 2) end
  INPUTS
  if out then
    OUT_GIVEN
  else
    OUT_NEW
  end
  if invoke(op.id, NIN, inbuf, P, nout, outbuf) ~= 0 then
    error(ffi_string(C.mx_last_error()), 2)
  end
  if engine_queued() then note_site(2) end
  local R
  if out then
    RES_GIVEN
  else
    RES_NEW
  end
  if S.recording then S.record(op, { A }, opts, { R }) end
  return R
end
]]

local function make_fixed(op, invoke)
  local nin, nout = op.nin, #op.outputs
  local a, r, checks, ins, og, on, rg, rn = {}, {}, {}, {}, {}, {}, {}, {}
  for i = 1, nin do
    a[i] = "a" .. i
    checks[i] = string.format("if not is_tensor(a%d) then bad_input(op, %d, a%d, 2) end", i, i, i)
    ins[i] = string.format("inbuf[%d] = a%d.h", i - 1, i)
  end
  for k = 1, nout do
    r[k] = "r" .. k
    og[k] = nout == 1 and "outbuf[0] = out.h" or string.format("outbuf[%d] = out[%d].h", k - 1, k)
    on[k] = string.format("outbuf[%d] = nil", k - 1)
    rg[k] = nout == 1 and "r1 = out" or string.format("r%d = out[%d]", k, k)
    rn[k] = string.format("r%d = wrap(outbuf[%d])", k, k - 1)
  end
  local src = FIXED:gsub("%u+_?%u*", {
    A = table.concat(a, ", "), R = table.concat(r, ", "), NIN = tostring(nin),
    CHECKS = table.concat(checks, "\n  "), INPUTS = table.concat(ins, "\n  "),
    OUT_GIVEN = table.concat(og, "\n    "), OUT_NEW = table.concat(on, "\n    "),
    RES_GIVEN = table.concat(rg, "\n    "), RES_NEW = table.concat(rn, "\n    ") })
  local chunk = assert(loadstring(src, "=mx.nd(" .. op.name .. ")"))
  return chunk(op, invoke, is_tensor, bad_input, fill_params, inbuf, outbuf, ffi_string, C,
    engine_queued, note_site, wrap, S, type, error)
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
    if op.random and op.pindex.rng_counter then
      local n = 1
      for i = 0, P.shape.n - 1 do n = n * P.shape.v[i] end
      rng_reserve(P, n)
    end
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
-- Creation ops without a shape param (arange, linspace, eye): leading numbers fill
-- the params named in the op table's `positional` list, then an options table:
-- mx.nd.arange(0, 10, 2, {dtype="int32"}), mx.nd.eye(3), mx.nd.arange{stop=5}.
local function make_positional(op, invoke)
  local names = op.positional
  return function(...)
    local n = select("#", ...)
    local args = { ... }
    local opts = {}
    if n > 0 and type(args[n]) == "table" then
      for k, v in pairs(args[n]) do opts[k] = v end
      n = n - 1
    end
    if n > #names then
      error(string.format("%s: at most %d positional arguments (%s), got %d", op.name, #names,
        table.concat(names, ", "), n), 2)
    end
    for i = 1, n do
      if type(args[i]) ~= "number" then
        error(string.format("%s: argument %d (%s) must be a number, got %s", op.name, i, names[i],
          type(args[i])), 2)
      end
      if opts[names[i]] ~= nil then
        error(op.name .. ": " .. names[i] .. " given both positionally and as an option", 2)
      end
      opts[names[i]] = args[i]
    end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    local r = run(invoke, op, 0, P, out, opts, nil, nil, 2)
    return r
  end
end

local function make(op, invoke)
  if op.ctx and op.positional then return make_positional(op, invoke) end
  if op.ctx then return make_creation(op, invoke) end
  if op.nin == 1 and #op.outputs == 1 and not op.variadic then return make_unary(op, invoke) end
  if op.nin == 2 and #op.outputs == 1 and (#op.params == 0 or not op.scalar) then
    -- two tensors and options (dot, matmul, pick...): the fixed-arity path, which
    -- LuaJIT compiles (make_general's varargs and unpack do not)
    local sc = op.scalar
    return make_binary(op, sc and lib.ops_by_name[sc.op], sc and lib.ops_by_name[sc.rop], invoke)
  end
  if not op.variadic and op.nin >= 1 and op.nin_min == op.nin then return make_fixed(op, invoke) end
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
  check(C.mx_tensor_wait_to_write(x.h), 2) -- the caller may write through it
  return ffi.cast(PTR_T[NDArray.dtype(x)], C.mx_tensor_data_nowait(x.h))
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
-- level: the caller's frame for errors (a sync point may raise an async error).
local function tolist(x, level)
  local n = NDArray.size(x)
  local buf = dbuf_t(n > 0 and n or 1)
  check(C.mx_tensor_get_all_f64(x.h, buf, n), level + 1)
  local t = {}
  for i = 1, n do t[i] = buf[i - 1] end
  return t
end
function NDArray.tolist(x)
  local t = tolist(x, 2)
  return t
end

-- Nested Lua tables (a number for a 0-d tensor).
function NDArray.totable(x)
  local flat = tolist(x, 2)
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

-- Flatten a nested table, checking it is rectangular. Returns values, shape (or
-- nil and a message: the caller raises it, since the walk's depth varies).
local function flatten(t)
  local shape, vals = {}, {}
  local probe = t
  while type(probe) == "table" do
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
    vals, shape = flatten(data)
    if not vals then error(shape, 2) end
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
-- tensor -> owner of its external memory; views made in Lua (x[i], row ranges,
-- reshape) inherit the entry, so the owner outlives every view too
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
-- Views recorded by autograd as pseudo-ops (mx.autograd gives them their grads):
-- x[i] (index = 1-based row), x[{a, b}] on the first axis (begin/end 0-based, end
-- exclusive), and reshape when the op table has no reshape op.
local VIEW_OPS = {
  index0 = { name = "index0_view", outputs = { "out" } },
  slice0 = { name = "slice0_view", outputs = { "out" } },
  reshape = { name = "reshape_view", outputs = { "out" } },
}
nd._view_ops = VIEW_OPS

-- reshape is a view (MXNet's 0 and -1 codes apply); x:reshape{3, -1},
-- x:reshape(3, -1) or x:reshape{shape={3, -1}}. reverse=, out= and the codes
-- -2/-3/-4 run the reshape op (a copy) instead.
function NDArray.reshape(x, shape, ...)
  if type(shape) == "number" then shape = { shape, ... } end
  if type(shape) ~= "table" then error("reshape: shape must be a table of dims", 2) end
  local special = shape.reverse ~= nil or shape.out ~= nil
  for k in pairs(shape) do
    if type(k) ~= "number" and k ~= "shape" and k ~= "reverse" and k ~= "out" then special = true end
  end
  if shape.shape ~= nil then
    if type(shape.shape) ~= "table" or #shape > 0 then special = true end
  end
  local dims = type(shape.shape) == "table" and shape.shape or shape
  for i = 1, #dims do
    if is_int(dims[i]) and dims[i] < -1 then special = true end
  end
  if special and lib.ops_by_name.reshape then
    if not is_tensor(x) then error("reshape: input 1 (data) must be a tensor", 2) end
    local op = lib.ops_by_name.reshape
    local opts = shape
    if shape.shape == nil then
      opts = { shape = {} }
      for k, v in pairs(shape) do if type(k) == "number" then opts.shape[k] = v else opts[k] = v end end
    end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    inbuf[0] = x.h
    local r = run(C.mx_op_invoke, op, 1, P, out, opts, x, nil, 2)
    return r
  end
  shape = dims
  local n = #shape
  if n > 8 then error("reshape: at most 8 dims", 2) end
  for i = 1, n do
    if not is_int(shape[i]) then error("reshape: dims must be integers", 2) end
    shapebuf[i - 1] = shape[i]
  end
  check(C.mx_tensor_reshape(x.h, n, shapebuf, outbuf), 2)
  local r = wrap(outbuf[0])
  if owners[x] ~= nil then owners[r] = owners[x] end
  if S.recording then S.record(lib.ops_by_name.reshape or VIEW_OPS.reshape, { x },
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
  local r = wrap(outbuf[0])
  if owners[x] ~= nil then owners[r] = owners[x] end
  if S.recording then S.record(VIEW_OPS.index0, { x }, { index = j }, { r }) end
  return r
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
    if owners[x] ~= nil then owners[r] = owners[x] end
    if S.recording then
      S.record(VIEW_OPS.slice0, { x }, { begin = begin[1], ["end"] = stop[1] }, { r })
    end
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
  local r -- no tail calls: `level` counts this frame
  if type(k) == "number" then r = index_row(x, k, level + 1)
  elseif type(k) == "table" then r = index_ranges(x, k, level + 1) end
  return r
end
NDArray.slice_view = function(x, first, last) -- rows first..last (inclusive) as a view
  local r = index_ranges(x, { { first, last } }, 2)
  return r
end

-- x[i] = v / x[{...}] = v: v a number or a tensor broadcastable (NumPy) to the
-- selection without its integer-indexed axes. Leading-axis selections write
-- through a view; others run slice_assign (or slice_assign_scalar) in place,
-- with out = x.
local function assign(x, k, v)
  if type(k) ~= "number" and type(k) ~= "table" then
    error("index: cannot assign field " .. tostring(k) .. " of a tensor", 2)
  end
  if type(v) ~= "number" and not is_tensor(v) then
    error("index: can only assign a number or a tensor, got " .. type(v), 2)
  end
  if S.recording and S.on_write then S.on_write(x, "index assignment") end
  local shape = NDArray.shape(x)
  local spec = type(k) == "number" and { k } or k
  if #spec > #shape then
    error(string.format("index: %d ranges for a %d-d tensor", #spec, #shape), 2)
  end
  if #shape == 0 then error("index: cannot index a 0-d tensor", 2) end
  local b1, e1, region, dropped = {}, {}, {}, {}
  local leading, nkept = true, 0
  for d = 1, #shape do
    local b, e, drop = 0, shape[d], false
    if spec[d] ~= nil then b, e, drop = norm_range(spec[d], shape[d], 2) end
    if d > 1 and (b ~= 0 or e ~= shape[d]) then leading = false end
    b1[d], e1[d], region[d], dropped[d] = b + 1, e, e - b, drop
    if not drop then nkept = nkept + 1 end
  end
  if is_tensor(v) and nkept < #region then
    -- NumPy: the value broadcasts against the selection without its integer-indexed
    -- axes; give it unit axes there (right-aligned to the kept axes) so it
    -- broadcasts against the box slice_assign sees
    local vs = NDArray.shape(v)
    if #vs <= nkept then
      local full, lead, seen, j = {}, nkept - #vs, 0, 1
      for d = 1, #region do
        if dropped[d] then
          full[d] = 1
        else
          seen = seen + 1
          if seen <= lead then full[d] = 1 else full[d], j = vs[j], j + 1 end
        end
      end
      v = NDArray.reshape(v, full)
    end
  end
  if leading and nd.full then
    check(C.mx_tensor_slice0(x.h, b1[1] - 1, e1[1], outbuf), 2)
    local target = wrap(outbuf[0])
    if type(v) == "number" then
      nd.full(NDArray.shape(target), v, { dtype = NDArray.dtype(target), ctx = NDArray.context(x),
        out = target })
      return
    end
    local vs, ts = NDArray.shape(v), NDArray.shape(target)
    if table.concat(vs, ",") == table.concat(ts, ",") then
      check(C.mx_tensor_copy_into(target.h, v.h), 2)
      return
    end
  end
  local opt = { begin = b1, ["end"] = e1, out = x }
  local op
  if type(v) == "number" then
    op = lib.ops_by_name.slice_assign_scalar
    opt.scalar = v
    inbuf[0] = x.h
  else
    op = lib.ops_by_name.slice_assign
    inbuf[0], inbuf[1] = x.h, v.h
  end
  local P, _, err = fill_params(op, opt)
  if err then error(err, 2) end
  outbuf[0] = x.h
  if C.mx_op_invoke(op.id, op.nin, inbuf, P, 1, outbuf) ~= 0 then
    error(ffi_string(C.mx_last_error()), 2)
  end
  if engine_queued() then note_site(2) end
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
local f64_1 = ffi.typeof("double[1]")
function NDArray.__tostring(x)
  local shape = NDArray.shape(x)
  local dtype = NDArray.dtype(x)
  local is_float = dtype:find("float") ~= nil
  local ctx = tostring(NDArray.context(x))
  local src = x
  if C.mx_tensor_dev_type(x.h) ~= 1 then src = NDArray.to(x, context.cpu()) end
  local n = NDArray.size(src)
  local summarize = n > 1000
  local strides = {}
  local st = 1
  for d = #shape, 1, -1 do strides[d] = st st = st * shape[d] end
  local function shown(len, i) -- is index i of an axis of length len displayed?
    return not (summarize and len > 2 * EDGE and i > EDGE and i <= len - EDGE)
  end
  -- the flat offsets on display: all of them, or EDGE at each end of every axis
  local offs = {}
  local function collect(d, off)
    if d > #shape then offs[#offs + 1] = off return end
    for i = 1, shape[d] do
      if shown(shape[d], i) then collect(d + 1, off + (i - 1) * strides[d]) end
    end
  end
  collect(1, 0)
  local strs, width = {}, 0
  if summarize then -- read only what is shown: a 10^8-element tensor prints fast
    local v = f64_1()
    for k = 1, #offs do
      check(C.mx_tensor_get_f64(src.h, offs[k], v), 3) -- 3: the caller of tostring()
      strs[offs[k]] = fmt_num(v[0], is_float)
    end
  else
    local flat = tolist(src, 3)
    for k = 1, #offs do strs[offs[k]] = fmt_num(flat[offs[k] + 1], is_float) end
  end
  for k = 1, #offs do
    local w = #strs[offs[k]]
    if w > width then width = w end
  end
  local function render(d, off, indent)
    if d > #shape then return string.rep(" ", width - #strs[off]) .. strs[off] end
    local parts = {}
    local len = shape[d]
    for i = 1, len do
      if summarize and len > 2 * EDGE and i == EDGE + 1 then
        parts[#parts + 1] = "..."
      end
      if shown(len, i) then
        parts[#parts + 1] = render(d + 1, off + (i - 1) * strides[d], indent .. " ")
      end
    end
    local sep = d == #shape and " " or ("\n" .. string.rep("\n", #shape - d - 1) .. indent .. " ")
    return "[" .. table.concat(parts, sep) .. "]"
  end
  local body = #shape == 0 and strs[0] or render(1, 0, "")
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

-- x:astype(dtype): a converted copy (the cast op); same dtype still copies (MXNet).
local cast_op = lib.ops_by_name.cast
function NDArray.astype(x, dtype)
  if not is_tensor(x) then error("astype: input must be a tensor, got " .. type(x), 2) end
  if not dtype_code(dtype) then error("astype: unknown dtype " .. tostring(dtype), 2) end
  local opts = { dtype = dtype }
  local P, _, err = fill_params(cast_op, opts)
  if err then error(err, 2) end
  inbuf[0] = x.h
  local r = run(C.mx_op_invoke, cast_op, 1, P, nil, opts, x, nil, 2)
  return r
end

-- mx.nd.split(x, {num_outputs=n, axis=2, squeeze_axis=false}) -> n tensors (MXNet's
-- split/SliceChannel; axis defaults to 2 as MXNet's 1). Built from slice_axis, so
-- each piece carries slice_axis's gradient.
function nd.split(x, opts)
  opts = opts or {}
  if not is_tensor(x) then error("split: input 1 (data) must be a tensor, got " .. type(x), 2) end
  for k in pairs(opts) do
    if k ~= "num_outputs" and k ~= "axis" and k ~= "squeeze_axis" then
      error("split: unknown option '" .. tostring(k) .. "' (valid: num_outputs, axis, squeeze_axis)", 2)
    end
  end
  local n, axis = opts.num_outputs, opts.axis or 2
  local shape = NDArray.shape(x)
  if not is_int(n) or n < 1 then error("split: num_outputs must be a positive integer", 2) end
  if not is_int(axis) or axis == 0 or math.abs(axis) > #shape then
    error(string.format("split: axis=%s is out of range for a %d-d input", tostring(axis), #shape), 2)
  end
  local a = axis < 0 and #shape + axis + 1 or axis
  if shape[a] % n ~= 0 then
    error(string.format("split: axis %d of shape (%s) has size %d, not divisible by num_outputs=%d",
      a, table.concat(shape, ", "), shape[a], n), 2)
  end
  local len, res = shape[a] / n, {}
  for i = 1, n do
    local piece = nd.slice_axis(x, { axis = a, begin = (i - 1) * len + 1, ["end"] = i * len })
    if opts.squeeze_axis then
      if len ~= 1 then error("split: squeeze_axis needs pieces of size 1 along the axis", 2) end
      piece = nd.squeeze(piece, { axis = a })
    end
    res[i] = piece
  end
  return unpack(res, 1, n)
end
NDArray.split = nd.split
-- `repeat` is a Lua keyword: x:repeat_{repeats=2, axis=1} is x["repeat"](x, ...)
NDArray.repeat_ = nd["repeat"]
nd.repeat_ = nd["repeat"]

-- mx.nd.random.uniform(...) and friends: MXNet's spelling of mx.random.*
nd.random = setmetatable({}, { __index = function(_, k) return require("mx.random")[k] end })

-- Sync points: wait for the ops queued on x (or on everything) and raise their
-- asynchronous error, if any, at the caller's line. waitall raises the first error
-- no other sync point has reported, then forgets it; the engine stays usable.
function NDArray.wait_to_read(x)
  check(C.mx_tensor_wait_to_read(x.h), 2)
  return x
end
function NDArray.wait_to_write(x)
  check(C.mx_tensor_wait_to_write(x.h), 2)
  return x
end

-- Autograd methods (x:attach_grad(), x:grad(), y:backward(), x:detach(), x:zero_grad())
-- are defined by mx.autograd; until it is loaded these stubs load it and forward.
for _, name in ipairs { "attach_grad", "grad", "backward", "detach", "zero_grad" } do
  NDArray[name] = function(...)
    local ag = require("mx.autograd")
    local f = NDArray[name]
    if f == nil or ag == nil then error("mx.autograd did not define " .. name, 2) end
    local r = { f(...) }
    return unpack(r)
  end
end
function nd.waitall()
  check(C.mx_engine_wait_all(), 2)
end

require("mx._ndio")(nd) -- mx.nd.save / load / load_frombuffer

return nd
