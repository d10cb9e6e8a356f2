-- mx.autograd.tape — the tape of mx.autograd (eager reverse-mode autodiff over the op
-- table's gradient formulas): per-tensor entries, nodes, their release, recording.
--
--   x:attach_grad()                       -- a variable: grad buffer x:grad() (zeros)
--   local y = mx.autograd.record(function() return (x * x):sum() end)
--   y:backward()                          -- x:grad() now holds 2x
--
-- How it works (docs/autograd.md has the user's view):
--  * Every op wrapper in mx.nd ends with `if S.recording then S.record(op, ins, opts, outs)`.
--    `record` keeps a node only when an input takes part in autograd (a variable or the
--    result of a recorded op): everything else costs one table lookup per input.
--  * `entry` (weak keys: NDArray boxes, one box per C handle) says what a tensor is in
--    autograd: a Leaf table (attached variable) or a number `id + (k - 1) * KMUL`: output
--    k of node `id`. Its values are numbers, not nodes: a weak-keyed table whose values
--    are fresh tables costs LuaJIT's GC several hundred ns per insert (measured), and
--    LuaJIT's weak tables are not ephemerons (a node holding its own key would never go).
--  * `nodes` (strong) maps id -> node. A node holds its inputs (the user's boxes for
--    variables and constants; for recorded results, whose boxes are keys of `entry`,
--    the C handle with a reference of its own) and its producers' refs (Leaf / number
--    / false). Nodes leave `nodes` when backward frees them, or when `scan` (once per
--    GC cycle) finds them unreachable from every live tensor's entry, and release
--    their handles then: a dropped graph of any depth is freed within a GC cycle.
--  * backward walks the nodes reachable from the heads in reverse recording order and
--    calls each op's `grad(F, inputs, outputs, ograds, p, need)` with F = mx.nd. With
--    create_graph the walk runs with recording on, so the gradients are themselves
--    recorded and can be differentiated again.
--  * No closure is created and no loop is run on the common recording path (LuaJIT
--    cannot compile FNEW; an inner loop would abort the caller's trace).
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local caller = require("mx.core.caller")
local nd = require("mx.nd")

local ffi, C = lib.ffi, lib.C
local wrap = nd._wrap
local retain = C.mx_tensor_retain
local type, error, pairs, pcall = type, error, pairs, pcall
local floor = math.floor
local user_level = caller.level

local M = {}

---------------------------------------------------------------- per-tensor info
local entry = setmetatable({}, { __mode = "k" }) -- box -> Leaf | node ref (number)
-- CONST: entry false marks a result computed while recording from the graph through a
-- nondiff op (stop_gradient, sign, comparisons) or only from such results: no node, but
-- a backward from it gives zero gradients (MXNet's) instead of "not part of a graph", and
-- the gradient formulas built of such ops (abs, clip) differentiate again to zero.
local nodes = {}                                  -- id -> node
local KMUL = 2 ^ 40                               -- node ref = id + (k - 1) * KMUL
local last_id = 0                                 -- ids grow: recording order
local nnodes = 0                                  -- #nodes
M._entry, M._nodes = entry, nodes

local function ref_node(r) return nodes[r % KMUL] end
local function ref_k(r) return floor(r / KMUL) + 1 end

-- A new box on handle h (takes one more reference; nd owns and releases it), with no
-- autograd entry.
local function box(h)
  retain(h)
  local b = wrap(h)
  return b
end
-- A second box on x's handle.
local function alias(x)
  local d = box(x.h)
  return d
end

local mx_tensor_p = ffi.typeof("mx_tensor *")
local uintptr_t = ffi.typeof("uintptr_t")
local function handle_num(h) return tonumber(ffi.cast(uintptr_t, h)) end
-- A node keeps a recorded-result input as its C handle (a number) with a reference
-- of its own, released here when the node is freed (by backward or by scan): a box
-- would be a GC object per input, and the user's box a key of `entry`.
local function keep(x)
  local h = x.h
  retain(h)
  return handle_num(h)
end
-- Freed nodes go back to a pool for record1 to reuse (a training loop then records
-- without allocating nodes). Nothing keeps a freed node: refs are ids, looked up in
-- `nodes`, which no longer has it.
local pool, npool = {}, 0
local POOL_MAX = 4096
local function free_node(n)
  local ins = n[12]
  if ins then
    for j = 1, n[4] do
      local v = ins[j]
      if type(v) == "number" then C.mx_tensor_release(ffi.cast(mx_tensor_p, v)) end
      ins[j] = nil
    end
  else
    local v = n[9]
    if type(v) == "number" then C.mx_tensor_release(ffi.cast(mx_tensor_p, v)) end
    v = n[10]
    if type(v) == "number" then C.mx_tensor_release(ffi.cast(mx_tensor_p, v)) end
  end
  n[2], n[6], n[9], n[10], n[11], n[12] = nil, false, nil, nil, nil, nil
  n[7], n[8] = false, false
  if npool < POOL_MAX then
    npool = npool + 1
    pool[npool] = n
  end
end

-- Frees the nodes no live tensor can reach. Runs from a GC sentinel once per cycle
-- (right after the collector cleared the dead keys of `entry`), outside any traversal
-- of ours: record inserts a node's entry before the node, and every node an unfinished
-- record or backward needs is reachable from a live tensor (its inputs or the heads).
local scanning = false
local function scan_body()
  local live, stack, n = {}, {}, 0
  local function mark(r) -- r: an entry (node id * KMUL + output) or a leaf record
    if type(r) == "number" then
      local id = r % KMUL
      if not live[id] and nodes[id] then
        live[id] = true
        n = n + 1
        stack[n] = id
      end
    end
  end
  for _, r in pairs(entry) do mark(r) end
  while n > 0 do
    local node = nodes[stack[n]]
    stack[n] = nil
    n = n - 1
    local ps = node[11]
    for j = 1, node[4] do
      if ps then mark(ps[j]) else mark(node[6 + j]) end
    end
  end
  local count = 0
  for id, node in pairs(nodes) do
    if live[id] then
      count = count + 1
    else
      nodes[id] = nil
      free_node(node)
    end
  end
  nnodes = count
end
local function scan()
  if scanning or nnodes == 0 then return end
  scanning = true
  pcall(scan_body) -- (it cannot fail; a finalizer must not raise, whatever happens)
  scanning = false
end
M._scan = scan

local closed = false
local function arm()
  local p = newproxy(true)
  getmetatable(p).__gc = function()
    if closed then return end
    scan()
    arm()
  end
end
arm()
M._closer = newproxy(true) -- anchored: finalized when the state closes
getmetatable(M._closer).__gc = function()
  closed = true
  for id, node in pairs(nodes) do
    nodes[id] = nil
    free_node(node)
  end
end

---------------------------------------------------------------- recording
local function has_out(opts)
  return type(opts) == "table" and opts.out ~= nil
end

local function strip_out(opts)
  local t = {}
  for k, v in pairs(opts) do if k ~= "out" then t[k] = v end end
  return t
end

-- A node (one recorded op call) is an array (small, quick to make and to collect):
--   [1] op    [2] opts (nil: none)   [3] id   [4] nin
--   [5] hout  single output: its C handle as a number, not owned. The output is alive
--             whenever backward reaches the node: as a head or a wanted tensor the caller
--             passes it, and any other way in is through a consumer's node, which keeps
--             a reference to its handle
--   [6] outs  several outputs or out=: aliases of all outputs (an unused output must
--             stay alive: the formula may read it, dropout's mask); false otherwise
--   [7] [8]   the first two producers' refs (Leaf, number or false): the fast path
--   [9] [10]  the first two inputs: the user's box for variables and constants; for
--             recorded results (their boxes are keys of `entry`) the C handle as a
--             number, with a reference the node releases when freed (free_node)
--   [11] [12] general path: all producers' refs, all inputs (nil on the fast path)
local function parent_of(node, j)
  local ps = node[11]
  if ps then return ps[j] end
  return node[6 + j]
end
local function input_of(node, j)
  local ins = node[12]
  if ins then return ins[j] end
  return node[8 + j]
end

-- The general case: any number of inputs and outputs, out=, train_flag ops.
local function record_general(op, inputs, opts, outputs)
  local n = #inputs
  local need, const = false, false
  for i = 1, n do
    local e = entry[inputs[i]]
    if e then need = true break end
    if e == false then const = true end
  end
  if not need and not const then return end
  if not need or op.nondiff then -- a constant of the graph (see CONST below)
    for i = 1, #outputs do
      local o = outputs[i]
      if entry[o] == nil then entry[o] = false end
    end
    return
  end
  local nout = #outputs
  if has_out(opts) then
    for i = 1, nout do
      local o = outputs[i]
      local e = entry[o]
      if e then
        error(op.name .. ": writing into a tensor that is part of the recorded graph (out= or "
          .. "an in-place op on a " .. (type(e) == "table" and "variable with attach_grad" or
          "recorded result") .. ") is not supported under mx.autograd.record; write into a "
          .. "fresh tensor, or wrap the update in mx.autograd.pause", user_level())
      end
      for j = 1, n do
        if inputs[j] == o then
          error(op.name .. ": in-place op on an input is not supported under "
            .. "mx.autograd.record", user_level())
        end
      end
    end
  end
  local tp = op.train_param -- the grad formula sees the train mode the forward ran in
  if opts ~= nil then -- a frozen copy: the caller may change its table later
    local fz = op.freeze
    if fz then opts = fz(opts) elseif has_out(opts) then opts = strip_out(opts) end
  end
  if tp and (opts == nil or opts[tp] == nil) then
    opts = opts or {}
    opts[tp] = S.training
  end
  last_id = last_id + 1
  local id = last_id
  local parents, ins = {}, {}
  local last = n - (op.aux and #op.aux or 0) -- auxiliary inputs (op table `aux`: moving
  for i = 1, n do                            -- statistics) take no gradient: no edge
    local x = inputs[i]
    local e = entry[x]
    parents[i] = i <= last and e or false
    ins[i] = type(e) == "number" and keep(x) or x
  end
  local outs = {}
  for i = 1, nout do outs[i] = alias(outputs[i]) end
  local node = { op, opts, id, n, false, outs, parents[1], parents[2], ins[1], ins[2],
    parents, ins }
  for i = 1, nout do entry[outputs[i]] = id + (i - 1) * KMUL end
  nodes[id] = node -- after the entries: a scan in between must not free it
  nnodes = nnodes + 1
end

-- S.record1(op, a, b, opts, out): the wrappers' call for one or two inputs (b nil for
-- one) and one output, nearly every op call while recording. A straight line: no
-- loops (they would keep the caller's loop from compiling: "inner loop in root
-- trace"), no closures, no table but the node (reused from the pool when one is
-- there), a C reference per recorded-result input.
local function record1(op, a, b, opts, o)
  local ea, eb = entry[a], entry[b] -- (reading t[nil] gives nil)
  if not ea and not eb then
    if ea == nil and eb == nil then return end
    if opts == nil or opts.out == nil then entry[o] = false return end -- CONST
  elseif op.nondiff and (opts == nil or opts.out == nil) then
    entry[o] = false -- CONST
    return
  end
  if op.nondiff or op.train_param or (opts ~= nil and opts.out ~= nil) or (op.aux and op.aux[1]) then
    return record_general(op, b ~= nil and { a, b } or { a }, opts, { o })
  end
  if opts ~= nil then -- a frozen copy: the caller may change its table later
    local fz = op.freeze
    if fz then opts = fz(opts) end
  end
  if type(ea) == "number" then a = keep(a) end
  if type(eb) == "number" then b = keep(b) end
  last_id = last_id + 1
  local id = last_id
  entry[o] = id
  local nin = b ~= nil and 2 or 1
  if npool > 0 then
    local node = pool[npool]
    pool[npool] = nil
    npool = npool - 1
    node[1], node[2], node[3], node[4], node[5] = op, opts, id, nin, handle_num(o.h)
    node[7], node[8], node[9], node[10] = ea or false, eb or false, a, b
    nodes[id] = node
  else
    nodes[id] = { op, opts, id, nin, handle_num(o.h), false, ea or false, eb or false, a, b }
  end
  nnodes = nnodes + 1
end

-- S.record(op, inputs, opts, outputs): lists of tensors.
local function record(op, inputs, opts, outputs)
  local n = #inputs
  if n >= 1 and n <= 2 and outputs[2] == nil then
    return record1(op, inputs[1], inputs[2], opts, outputs[1])
  end
  return record_general(op, inputs, opts, outputs)
end
M._record = record
S.record = record
S.record1 = record1

-- In-place writes nd serves outside the op wrappers (x[i] = v): an error while
-- recording when x is a variable or a recorded result (its old value may be needed by
-- backward, and the write itself would not be differentiated).
S.on_write = function(x, what)
  local e = entry[x]
  if e then -- (false, a constant of the graph, may be written)
    error(what .. " into a " .. (type(e) == "table" and "variable with attach_grad" or
      "recorded result") .. " is not supported under mx.autograd.record; write into a "
      .. "fresh tensor, or wrap the update in mx.autograd.pause", user_level())
  end
end

-- Backward's release of a node it ran through (when the graph is not retained).
local function drop(n)
  if nodes[n[3]] == n then
    nodes[n[3]] = nil
    nnodes = nnodes - 1
    free_node(n)
  end
end

M.entry, M.nodes, M.KMUL = entry, nodes, KMUL
M.ref_node, M.ref_k, M.box, M.alias, M.drop = ref_node, ref_k, box, alias, drop
M.parent_of, M.input_of, M.mx_tensor_p = parent_of, input_of, mx_tensor_p
M.record1 = record1

return M
