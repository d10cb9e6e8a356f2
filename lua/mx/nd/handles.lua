-- mx.nd.handles — NDArray's box type and who owns the C handles: the registry of
-- handles and their boxes (wrap, sweep, compaction), the lists of tensors born
-- while backward runs, the GC pressure poll, owners of external memory, and the
-- engine call sites noted for asynchronous errors. Used by mx.nd and its helpers.
local lib = require("mx.core.lib")

local ffi, C = lib.ffi, lib.C
local ffi_istype = ffi.istype
local tonumber = tonumber
local release = C.mx_tensor_release

local nd = {} -- this module's table; mx.nd re-exports its names (nd._wrap, ...)

-- An NDArray is a one-field struct boxing the C handle. A bare `mx_tensor*` cannot
-- serve: the FFI treats p[1] on a pointer as pointer indexing, so x[1] (the first
-- row) could never reach our __index. The box owns one reference to the handle,
-- released after the GC collects the box (see "handle ownership" below).
ffi.cdef("struct mx_nd { mx_tensor *h; };")
local tensor_t = ffi.typeof("struct mx_nd")
nd.tensor_t = tensor_t
-- call buffers shared by mx.nd's files (inputs, outputs, a shape)
local int64_8 = ffi.typeof("int64_t[8]")
nd.inbuf = ffi.new("mx_tensor*[64]")
nd.outbuf = ffi.new("mx_tensor*[64]")
nd.shapebuf = ffi.new(int64_8)

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
-- this state's session (mx.core.lib) read directly: no thread-local lookup per new tensor
local session, session_bytes = lib.session, C.mx_session_bytes
local function bytes_in_use() return session_bytes(session) end

-- full collections memory pressure triggered in this state (specs, embedding hosts:
-- spec/session_spec.lua checks one state's memory never forces another's collections)
nd.gc_count = 0
local function gc_collect()
  nd.gc_count = nd.gc_count + 1
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

-- Releases the handle of box b in slot i now (b holds NULL afterwards): for tensors
-- nothing else refers to. Queued ops keep their own references.
local function release_slot(b, i)
  local h = handles[i]
  handles[i] = nil
  b.h = nil
  release(h)
  nfree = nfree + 1
  free_slots[nfree] = i
end

---------------------------------------------------------------- scopes
-- mx.nd.scope(fn, ...) (nd.lua): the tensors fn creates come back to the pool when it
-- returns, hot in cache, instead of at the next GC cycle: every tensor born in the
-- scope is released except fn's results and those marked with nd.keep. Scopes nest (a
-- stack of born lists); an inner scope's results join the outer list. backward's own
-- list (nd._list_born) is not started inside a scope: the scope releases its
-- temporaries too.
-- Per depth, the saved outer list and a reused list of its own: no table is made per
-- scope (a scope around a 64x64 op must cost little next to it).
local nscope = 0
local sv_box, sv_slot, sv_n, sv_open = {}, {}, {}, {}
local own_box, own_slot = {}, {}
local kept = setmetatable({}, { __mode = "k" }) -- boxes that outlive every scope

function nd._keep(x) kept[x] = true end

function nd._scope_enter()
  local d = nscope + 1
  nscope = d
  sv_box[d], sv_slot[d], sv_n[d], sv_open[d] = born_box, born_slot, nborn, born_open
  local bb = own_box[d]
  if not bb then
    bb = {}
    own_box[d], own_slot[d] = bb, {}
  end
  born_box, born_slot, nborn, born_open = bb, own_slot[d], 0, true
end

-- Ends the innermost scope: releases its tensors but those in keep (a set of boxes) and
-- the nd.keep ones; the survivors join the enclosing scope's list.
function nd._scope_exit(keep)
  local d = nscope
  local bb, bs, n = born_box, born_slot, nborn
  nscope = d - 1
  born_box, born_slot, nborn, born_open = sv_box[d], sv_slot[d], sv_n[d], sv_open[d]
  sv_box[d], sv_slot[d] = nil, nil
  for k = 1, n do
    local b, i = bb[k], bs[k]
    bb[k] = nil -- the list is reused by the next scope at this depth
    if boxes[i] == b and handles[i] ~= nil then
      if keep[b] or kept[b] then
        if born_box and not kept[b] then
          nborn = nborn + 1
          born_box[nborn], born_slot[nborn] = b, i
        end
      else
        release_slot(b, i)
      end
    end
  end
end
function nd._scope_depth() return nscope end

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
    if boxes[i] == b and not keep[b] and not kept[b] and handles[i] ~= nil then
      release_slot(b, i)
    end
  end
end

---------------------------------------------------------------- engine call sites
-- When an op was queued (not run inline) the engine wants the Lua line that queued
-- it, for the message of a later asynchronous error. Only queued ops pay for
-- debug.getinfo; the inline fast path pays one FFI call (mx_engine_queued).
-- MX_ENGINE_DEBUG=1 records a full traceback instead of file:line.
local engine_set_site = C.mx_engine_set_site
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

-- tensor -> owner of its external memory (nd.from_pointer's `owner`); views made in
-- Lua (x[i], row ranges, reshape) inherit the entry, so the owner outlives every view
nd.owners = setmetatable({}, { __mode = "k" })

return nd
