-- mx.autograd — eager reverse-mode autodiff over the op table's gradient formulas.
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
local lib = require("mx._lib")
local S = require("mx._state")
local nd = require("mx.nd")

local ffi, C = lib.ffi, lib.C
local NDArray = nd.NDArray
local is_tensor = nd.is_tensor
local wrap = nd._wrap
local retain = C.mx_tensor_retain
local type, error, pairs, ipairs, pcall, select, unpack, tostring =
  type, error, pairs, ipairs, pcall, select, unpack, tostring
local ffi_string = ffi.string
local floor = math.floor

local M = {}

---------------------------------------------------------------- per-tensor info
local entry = setmetatable({}, { __mode = "k" }) -- box -> Leaf | node ref (number)
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

---------------------------------------------------------------- errors
-- The level to pass to error() in the function calling user_level so that the
-- message blames the first frame outside mx's own Lua modules (the user's line).
-- Only used on error paths.
local function user_level()
  local level = 2
  while true do
    local info = debug.getinfo(level + 1, "S")
    if not info then return 1 end
    local src = info.source
    if not (src:find("mx/nd.lua", 1, true) or src:find("mx/autograd.lua", 1, true)
        or src:find("_optable.lua", 1, true) or src:find("ops/optable.lua", 1, true)) then
      return level
    end
    level = level + 1
  end
end

---------------------------------------------------------------- recording
-- Pseudo-ops for the views nd.lua serves without the op table (x[i], x[{a, b}],
-- reshape when the table lacks it) and for custom Functions. Their grads are here.
local VIEW = nd._view_ops or {}
local RESHAPE_FALLBACK = VIEW.reshape

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
  local need = false
  for i = 1, n do
    if entry[inputs[i]] ~= nil then need = true break end
  end
  if not need or op.nondiff then return end
  local nout = #outputs
  if has_out(opts) then
    for i = 1, nout do
      local o = outputs[i]
      local e = entry[o]
      if e ~= nil then
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
  if opts ~= nil and (has_out(opts) or (tp and opts[tp] == nil)) then
    opts = strip_out(opts)
    if tp and opts[tp] == nil then opts[tp] = S.training end
  elseif opts == nil and tp then
    opts = { [tp] = S.training }
  end
  last_id = last_id + 1
  local id = last_id
  local parents, ins = {}, {}
  for i = 1, n do
    local x = inputs[i]
    local e = entry[x]
    parents[i] = e or false
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
  if ea == nil and eb == nil then return end
  if op.nondiff then return end
  if op.train_param or (opts ~= nil and opts.out ~= nil) then
    return record_general(op, b ~= nil and { a, b } or { a }, opts, { o })
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
  if e ~= nil then
    error(what .. " into a " .. (type(e) == "table" and "variable with attach_grad" or
      "recorded result") .. " is not supported under mx.autograd.record; write into a "
      .. "fresh tensor, or wrap the update in mx.autograd.pause", user_level())
  end
end

---------------------------------------------------------------- flags and scopes
local function restore(r, t, ok, ...)
  S.recording, S.training = r, t
  if not ok then error((...), 0) end
  return ...
end

local function check_fn(fn, name)
  if type(fn) ~= "function" then
    error("mx.autograd." .. name .. ": expected a function, got " .. type(fn), 3)
  end
end

-- record(fn, {train_mode=true}, ...): runs fn(...) with recording on; returns its results.
function M.record(fn, opts, ...)
  check_fn(fn, "record")
  local r, t = S.recording, S.training
  S.recording = true
  S.training = not (type(opts) == "table" and opts.train_mode == false)
  return restore(r, t, pcall(fn, ...))
end

-- pause(fn, {train_mode=false}): runs fn with recording off.
function M.pause(fn, opts, ...)
  check_fn(fn, "pause")
  local r, t = S.recording, S.training
  S.recording = false
  S.training = type(opts) == "table" and opts.train_mode == true or false
  return restore(r, t, pcall(fn, ...))
end

function M.train_mode(fn, ...)
  check_fn(fn, "train_mode")
  local r, t = S.recording, S.training
  S.training = true
  return restore(r, t, pcall(fn, ...))
end

function M.predict_mode(fn, ...)
  check_fn(fn, "predict_mode")
  local r, t = S.recording, S.training
  S.training = false
  return restore(r, t, pcall(fn, ...))
end

function M.set_recording(b)
  local prev = S.recording
  S.recording = not not b
  return prev
end

function M.set_training(b)
  local prev = S.training
  S.training = not not b
  return prev
end

function M.is_recording() return S.recording end
function M.is_training() return S.training end

---------------------------------------------------------------- variables
local REQS = { write = true, add = true, null = true }

local function attach(x, req)
  if not is_tensor(x) then error("attach_grad: expected a tensor, got " .. type(x), user_level()) end
  req = req or "write"
  if not REQS[req] then
    error("attach_grad: grad_req must be 'write', 'add' or 'null', got " .. tostring(req),
      user_level())
  end
  if req == "null" then
    entry[x] = nil
    return
  end
  local g = nd.zeros(x:shape(), { dtype = x:dtype(), ctx = x:context() })
  entry[x] = { leaf = true, req = req, grad = g }
end

-- x:attach_grad(req): makes x a variable (a leaf of later recorded graphs) with a
-- zero-filled gradient buffer. req "write" (default): backward overwrites the buffer;
-- "add": backward adds to it (zero it yourself); "null": x takes no gradient.
-- Attaching to a recorded result cuts it from its graph (it becomes a leaf).
function NDArray.attach_grad(x, req)
  attach(x, req)
end

-- x:grad(): the gradient buffer of a variable (the same tensor every time), nil when
-- x has no grad attached. A method, not a field: the FFI box has no room for fields.
function NDArray.grad(x)
  local e = entry[x]
  if type(e) == "table" then return e.grad end
  return nil
end

-- x:detach(): the same data (a new view on the same storage) outside the graph.
local shbuf = ffi.new("int64_t[8]")
local hbuf = ffi.new("mx_tensor*[1]")
function NDArray.detach(x)
  local n = C.mx_tensor_shape(x.h, shbuf)
  if C.mx_tensor_reshape(x.h, n, shbuf, hbuf) ~= 0 then
    error(ffi_string(C.mx_last_error()), 2)
  end
  local d = wrap(hbuf[0])
  return d
end

-- mark_variables(vars, grads, reqs): MXNet's lower-level attach_grad with given buffers.
function M.mark_variables(vars, grads, reqs)
  if is_tensor(vars) then vars, grads, reqs = { vars }, { grads }, { reqs } end
  for i, x in ipairs(vars) do
    local req = type(reqs) == "table" and reqs[i] or reqs or "write"
    if type(req) ~= "string" then req = "write" end
    attach(x, req)
    if grads and grads[i] and req ~= "null" then entry[x].grad = grads[i] end
  end
end

-- Zero a variable's gradient buffer (for grad_req "add").
function NDArray.zero_grad(x)
  local e = entry[x]
  if type(e) == "table" then
    nd.zeros(e.grad:shape(), { dtype = e.grad:dtype(), out = e.grad })
  end
end

---------------------------------------------------------------- backward
local F = nd
local EMPTY = {}
local shbuf_a = ffi.new("int64_t[8]")
local shbuf_b = ffi.new("int64_t[8]")

local function same_shape(a, b)
  local na = C.mx_tensor_shape(a.h, shbuf_a)
  local nb = C.mx_tensor_shape(b.h, shbuf_b)
  if na ~= nb then return false end
  for i = 0, na - 1 do if shbuf_a[i] ~= shbuf_b[i] then return false end end
  return true
end

local function shape_str(x) return "(" .. table.concat(x:shape(), ",") .. ")" end

local function zeros_like(x)
  return F.zeros(x:shape(), { dtype = x:dtype(), ctx = x:context() })
end
local function ones_like(x)
  return F.ones(x:shape(), { dtype = x:dtype(), ctx = x:context() })
end

local function by_id_desc(a, b) return a[3] > b[3] end

-- `need` when every input takes a gradient (read-only; inputs of one op are <= 64)
local ALL = {}
for i = 1, 64 do ALL[i] = true end

local FREED = "the graph has already been freed by an earlier backward: pass "
  .. "{retain_graph=true} to the first backward (or mx.autograd.grad) to run backward "
  .. "through it twice"

-- Variables whose gradient a formula may write straight into their buffer (the
-- formula's `into`, saving backward's final copy): grad_req "write", reached by exactly
-- one edge (so that edge's gradient is the whole gradient) whose input has the buffer's
-- shape and dtype, and a buffer that shares no storage with any input or output of the
-- graph (formulas read those, and run before the copy would have). Returns a set of
-- Leafs or nil. Only for backward into the buffers, without create_graph.
local function direct_leaves(list)
  local edges
  for ni = 1, #list do
    local node = list[ni]
    for j = 1, node[4] do
      local p = parent_of(node, j)
      if type(p) == "table" and p.req == "write" then
        edges = edges or {}
        local b, g = input_of(node, j), p.grad
        local fits = edges[p] == nil and is_tensor(b) and same_shape(b, g)
          and C.mx_tensor_dtype(b.h) == C.mx_tensor_dtype(g.h)
        edges[p] = fits and 1 or 2
      end
    end
  end
  if not edges then return nil end
  local direct
  for leaf, n in pairs(edges) do
    if n == 1 then
      direct = direct or {}
      direct[leaf] = leaf.grad.h
    end
  end
  if not direct then return nil end
  local shares = C.mx_tensor_shares_storage
  for ni = 1, #list do
    local node = list[ni]
    local nouts = node[6]
    for j = 1, node[4] + (nouts and #nouts or 1) do
      local h
      if j <= node[4] then
        h = input_of(node, j)
      else
        h = nouts and nouts[j - node[4]] or node[5]
      end
      h = type(h) == "number" and ffi.cast(mx_tensor_p, h) or h.h
      for leaf, gh in pairs(direct) do
        if shares(h, gh) then direct[leaf] = nil end
      end
    end
  end
  return next(direct) ~= nil and direct or nil
end

-- Gradient g arriving at r (a Leaf or a node ref; once per edge): the slots are
-- og[node][k] for node outputs, lg[leaf] for variables. (Module-level, as is visit: a
-- closure per backward call would keep LuaJIT from compiling run_backward, and with
-- it every gradient formula it calls.)
local function add_grad(og, lg, r, g)
  if type(r) == "table" then
    if r.req == "null" then return end
    local cur = lg[r]
    lg[r] = cur and F.add(cur, g) or g
  else
    local node = ref_node(r)
    local k = ref_k(r)
    local slot = og[node]
    if not slot then slot = {} og[node] = slot end
    local cur = slot[k]
    slot[k] = cur and F.add(cur, g) or g
  end
end

local function visit(seen, stack, r)
  if type(r) ~= "number" then return end
  local node = ref_node(r)
  if not node then error("backward: " .. FREED, 0) end
  if not seen[node] then
    seen[node] = true
    stack[#stack + 1] = node
  end
end

-- The op whose gradient formula is running (backward_scoped names it in errors).
local formula_op

-- The engine of backward and grad.
--  heads, hgrads: lists; want: nil (backward: fill the variables' buffers) or a list of
--  tensors whose gradients to return. Returns the list of results for `want`.
--  Errors are raised at level 0; the caller adds the user's position.
local function run_backward(heads, hgrads, want, retain_graph, create_graph)
  local og, lg = {}, {}
  local list, seen, stack = {}, {}, {}
  for i = 1, #heads do
    local h = heads[i]
    if not is_tensor(h) then error("backward: head " .. i .. " is not a tensor", 0) end
    local e = entry[h]
    if e == nil then
      error("backward: head " .. i .. " is not part of a recorded graph (compute it inside "
        .. "mx.autograd.record from tensors with attach_grad)", 0)
    end
    visit(seen, stack, e)
  end
  -- reachable nodes
  while #stack > 0 do
    local n = stack[#stack]
    stack[#stack] = nil
    list[#list + 1] = n
    for i = 1, n[4] do visit(seen, stack, parent_of(n, i)) end
  end
  table.sort(list, by_id_desc)
  -- requested intermediates: capture their gradient when their node is reached
  local want_node
  if want then
    for i = 1, #want do
      local w = want[i]
      if not is_tensor(w) then error("grad: variable " .. i .. " is not a tensor", 0) end
      local e = entry[w]
      if e == nil then
        error("grad: variable " .. i .. " takes no part in autograd (attach_grad it before "
          .. "recording)", 0)
      end
      if type(e) == "number" then
        local node = ref_node(e)
        if node then want_node = want_node or {} want_node[node] = true end
      end
    end
  end
  -- seed the heads
  for i = 1, #heads do
    local h = heads[i]
    local g = hgrads and hgrads[i]
    if g == nil then
      g = ones_like(h)
    elseif type(g) == "number" then
      g = F.full(h:shape(), g, { dtype = h:dtype(), ctx = h:context() })
    elseif not is_tensor(g) then
      error("backward: head_grad " .. i .. " must be a tensor or a number", 0)
    elseif not same_shape(g, h) then
      error("backward: head_grad " .. i .. " has shape " .. shape_str(g) .. " but head has "
        .. shape_str(h), 0)
    end
    add_grad(og, lg, entry[h], g)
  end
  -- the first formulas read the given head gradients too: a buffer sharing storage
  -- with one takes no direct write
  local direct = not want and not create_graph and direct_leaves(list) or nil
  if direct and hgrads then
    for i = 1, #heads do
      local g = hgrads[i]
      if is_tensor(g) then
        for leaf, gh in pairs(direct) do
          if C.mx_tensor_shares_storage(g.h, gh) then direct[leaf] = nil end
        end
      end
    end
  end
  local captured = {}
  for ni = 1, #list do
    local node = list[ni]
    local slot = og[node]
    if slot then
      local op = node[1]
      local nin, nouts = node[4], node[6]
      local nout = nouts and #nouts or 1
      -- boxes for the formula; with create_graph they are registered in the graph
      -- (inputs under their producers, outputs under this node), so the formula's own
      -- ops are recorded and differentiable
      local ins, outs = {}, {}
      for j = 1, nin do
        local b = input_of(node, j)
        local p = parent_of(node, j)
        if type(b) == "number" then
          b = box(ffi.cast(mx_tensor_p, b))
        elseif create_graph and p then
          b = alias(b)
        end
        if create_graph and p then entry[b] = p end
        ins[j] = b
      end
      for k = 1, nout do
        local b
        if nouts then
          b = nouts[k]
          if create_graph then b = alias(b) end
        else
          b = box(ffi.cast(mx_tensor_p, node[5]))
        end
        if create_graph then entry[b] = node[3] + (k - 1) * KMUL end
        outs[k] = b
        if slot[k] == nil then slot[k] = zeros_like(b) end
      end
      if want_node and want_node[node] then captured[node] = slot end
      local gfn = op.grad
      if not gfn then
        error("backward: op '" .. op.name .. "' has no gradient formula", 0)
      end
      -- need[j]: input j takes a gradient (formulas may skip the others' work)
      local need = ALL
      for j = 1, nin do
        if not parent_of(node, j) then
          need = {}
          for i = 1, nin do need[i] = parent_of(node, i) and true or false end
          break
        end
      end
      local into -- into[j]: the buffer input j's gradient may be written into
      if direct then
        for j = 1, nin do
          local p = parent_of(node, j)
          if p and direct[p] then
            into = into or {}
            into[j] = p.grad
          end
        end
      end
      formula_op = op
      local dx = gfn(F, ins, outs, slot, node[2] or EMPTY, need, into)
      formula_op = nil
      if type(dx) ~= "table" then
        error("backward of op '" .. op.name .. "': the gradient formula returned "
          .. type(dx) .. ", expected a list", 0)
      end
      for j = 1, nin do
        local p = parent_of(node, j)
        local d = dx[j]
        if p and d then
          if not same_shape(d, ins[j]) then
            error("backward of op '" .. op.name .. "': the gradient formula returned shape "
              .. shape_str(d) .. " for input " .. j .. " of shape " .. shape_str(ins[j]), 0)
          end
          add_grad(og, lg, p, d)
        end
      end
      if not want_node or not want_node[node] then og[node] = nil end
    end
  end
  local res
  if not want then
    for e, g in pairs(lg) do
      if e.req == "add" then
        F.add(e.grad, g, { out = e.grad })
      elseif g ~= e.grad then
        if F.copy and C.mx_tensor_dtype(g.h) == C.mx_tensor_dtype(e.grad.h) then
          F.copy(g, { out = e.grad }) -- an op: runs through the engine
        elseif C.mx_tensor_copy_into(e.grad.h, g.h) ~= 0 then
          error("backward: " .. ffi_string(C.mx_last_error()), 0)
        end
      end
    end
  else
    res = {}
    for i = 1, #want do
      local w = want[i]
      local e = entry[w]
      local g
      if type(e) == "table" then
        g = lg[e]
      else
        local slot = captured[ref_node(e) or EMPTY]
        g = slot and slot[ref_k(e)]
      end
      res[i] = g or zeros_like(w)
    end
  end
  if not retain_graph then -- free the tape (after the results: they look nodes up)
    for i = 1, #list do
      local n = list[i]
      if nodes[n[3]] == n then
        nodes[n[3]] = nil
        nnodes = nnodes - 1
        free_node(n)
      end
    end
  end
  return res
end

-- Runs run_backward with the recording flag set for it, restoring it on errors.
-- Without create_graph, the tensors backward creates (head gradients, the formulas'
-- results and intermediates, boxes for the tape's inputs) are its own: nothing can
-- reach them once it returns, except the results of autograd.grad. They are released
-- when it ends, not at the next GC cycle: about 40% of a training step's temporaries,
-- hot in cache for the next step, and fewer collections (each ~1.5 ms with a cold
-- cache in a training loop). A custom Function's backward is user code: what it
-- creates is not listed (it may keep it).
local function backward_scoped(heads, hgrads, want, retain_graph, create_graph)
  local r, t, outer = S.recording, S.training, formula_op
  S.recording = create_graph and true or false
  formula_op = nil
  local listing = not create_graph and nd._list_born()
  local ok, res = pcall(run_backward, heads, hgrads, want, retain_graph, create_graph)
  S.recording, S.training = r, t
  if listing then
    if ok then
      local results = EMPTY
      if res then
        results = {}
        for i = 1, #res do results[res[i]] = true end
      end
      nd._release_born(results)
    else
      nd._release_born(nil) -- a failed backward's tensors go to the GC as before
    end
  end
  if not ok then
    if formula_op then res = "backward of op '" .. formula_op.name .. "': " .. tostring(res) end
    formula_op = outer
    error(res, user_level())
  end
  formula_op = outer
  return res
end

local function check_opts(opts, valid, name)
  if opts == nil then return EMPTY end
  if type(opts) ~= "table" then error(name .. ": options must be a table", user_level()) end
  for k in pairs(opts) do
    if not valid[k] then
      error(name .. ": unknown option '" .. tostring(k) .. "'", user_level())
    end
  end
  return opts
end

local BW_OPTS = { retain_graph = true, train_mode = true }
-- y:backward(head_grad, {retain_graph=false}): gradients of y into the variables'
-- buffers. head_grad: tensor of y's shape or a number (default ones).
function NDArray.backward(y, head_grad, opts)
  if type(head_grad) == "table" and not is_tensor(head_grad) and opts == nil then
    opts, head_grad = head_grad, nil
  end
  opts = check_opts(opts, BW_OPTS, "backward")
  backward_scoped({ y }, { head_grad }, nil, opts.retain_graph, false)
end

local function as_list(v)
  if v == nil then return nil end
  if is_tensor(v) or type(v) == "number" then return { v } end
  return v
end

-- mx.autograd.backward(heads, head_grads, {retain_graph=}).
function M.backward(heads, head_grads, opts)
  opts = check_opts(opts, BW_OPTS, "backward")
  heads = as_list(heads)
  if type(heads) ~= "table" then error("backward: heads must be a tensor or a list", 2) end
  backward_scoped(heads, as_list(head_grads), nil, opts.retain_graph, false)
end

local GRAD_OPTS = { head_grads = true, retain_graph = true, create_graph = true,
  train_mode = true }
-- mx.autograd.grad(heads, variables, {head_grads=, retain_graph=, create_graph=}):
-- new tensors holding d(heads)/d(variables), variable buffers untouched. A tensor
-- variable gives a tensor; a list gives a list. retain_graph defaults to create_graph.
function M.grad(heads, variables, opts)
  opts = check_opts(opts, GRAD_OPTS, "grad")
  local single = is_tensor(variables)
  local vars = as_list(variables)
  if type(vars) ~= "table" then error("grad: variables must be a tensor or a list", 2) end
  local create = opts.create_graph and true or false
  local retain_g = opts.retain_graph
  if retain_g == nil then retain_g = create end
  local res = backward_scoped(as_list(heads), as_list(opts.head_grads), vars, retain_g, create)
  if single then return res[1] end
  return res
end

-- Recorded graph facts (tests and debugging): number of live recorded nodes
-- reachable from x, nil when x is not in a graph.
function M.get_symbol_size(x)
  local e = entry[x]
  if type(e) ~= "number" then return nil end
  local first = ref_node(e)
  if not first then return 0 end
  local seen, stack, n = { [first] = true }, { first }, 0
  while #stack > 0 do
    local node = stack[#stack]
    stack[#stack] = nil
    n = n + 1
    for j = 1, node[4] do
      local p = parent_of(node, j)
      local f = type(p) == "number" and ref_node(p)
      if f and not seen[f] then seen[f] = true stack[#stack + 1] = f end
    end
  end
  return n
end

---------------------------------------------------------------- views
-- Gradients of the views nd.lua records (pseudo-ops from nd._view_ops).
-- Base gradient of a leading-axis selection: zeros around g, through concat when the
-- table has it (so it is itself differentiable), else through a buffer.
local function embed_rows(Fm, g, base, first, last, dropped)
  -- g holds rows first..last (0-based, [first, last)) of base's leading axis
  local shape = base:shape()
  local n = shape[1]
  if dropped then
    local s = g:shape()
    table.insert(s, 1, 1)
    g = g:reshape(s)
  end
  if first == 0 and last == n then return g end
  if Fm.concat then
    local parts = {}
    local rest = { unpack(shape, 2) }
    local opts = { dtype = base:dtype(), ctx = base:context() }
    if first > 0 then parts[#parts + 1] = Fm.zeros({ first, unpack(rest) }, opts) end
    parts[#parts + 1] = g
    if last < n then parts[#parts + 1] = Fm.zeros({ n - last, unpack(rest) }, opts) end
    return Fm.concat(parts, { dim = 1 })
  end
  local z = zeros_like(base)
  local rows
  local out = ffi.new("mx_tensor*[1]")
  if C.mx_tensor_slice0(z.h, first, last, out) ~= 0 then error(ffi_string(C.mx_last_error())) end
  rows = wrap(out[0])
  if C.mx_tensor_copy_into(rows.h, g.h) ~= 0 then error(ffi_string(C.mx_last_error())) end
  return z
end

if VIEW.index0 then
  VIEW.index0.grad = function(Fm, x, _, g, p)
    local i = p.index -- 1-based row
    return { embed_rows(Fm, g[1], x[1], i - 1, i, true) }
  end
end
if VIEW.slice0 then
  VIEW.slice0.grad = function(Fm, x, _, g, p)
    return { embed_rows(Fm, g[1], x[1], p.begin, p["end"], false) }
  end
end
if RESHAPE_FALLBACK then
  RESHAPE_FALLBACK.grad = function(_, x, _, g)
    return { g[1]:reshape(x[1]:shape()) }
  end
end

---------------------------------------------------------------- custom functions
-- local Sigmoid = mx.autograd.Function:extend()
-- function Sigmoid:forward(x) local y = 1 / (1 + mx.nd.exp(-x)); self:save_for_backward(y); return y end
-- function Sigmoid:backward(dy) local y = self.saved_tensors[1]; return dy * y * (1 - y) end
-- local y = Sigmoid()(x)     -- an instance per call, as in MXNet
local Function = {}
Function.__index = Function
M.Function = Function

local CUSTOM = { name = "custom_function", outputs = { "out" }, nin = -1 }
CUSTOM.grad = function(_, x, _, g, p)
  -- user code: the tensors it makes are its own (see backward_scoped)
  local paused = nd._pause_born()
  local r = { p.fn:backward(unpack(g, 1, #g)) }
  nd._resume_born(paused)
  for i = 1, #x do
    local d = r[i]
    if d ~= nil and d ~= false and not is_tensor(d) then
      error("custom Function backward: result " .. i .. " must be a tensor or nil", 0)
    end
  end
  return r
end
M._custom_op = CUSTOM

local function new_instance(cls, ...)
  local o = setmetatable({}, cls)
  if o.init then o:init(...) end
  return o
end
local function call_instance(self, ...)
  local r = { self:apply(...) }
  return unpack(r)
end
Function.__call = call_instance
setmetatable(Function, { __call = new_instance })

-- Function:extend(): a subclass; call it to make an instance, call the instance on
-- tensors to apply it (an instance per call, as in MXNet).
function Function:extend()
  local cls = { __call = call_instance, super = self }
  cls.__index = cls
  return setmetatable(cls, { __index = self, __call = new_instance })
end

-- Tensors backward needs: keep them with save_for_backward (self.saved_tensors), not
-- in other fields of self (see apply).
function Function:save_for_backward(...)
  self.saved_tensors = { ... }
end

function Function.forward()
  error("mx.autograd.Function: forward is not implemented", 2)
end
function Function.backward()
  error("mx.autograd.Function: backward is not implemented", 2)
end

-- Runs forward with recording paused, then records one node whose gradient is
-- backward. Inputs are the tensor arguments; other arguments pass through.
function Function:apply(...)
  local n = select("#", ...)
  local args = { ... }
  local rec = S.recording
  S.recording = false
  local res = { pcall(self.forward, self, ...) }
  S.recording = rec
  if not res[1] then error(res[2], 0) end
  table.remove(res, 1)
  if rec then
    local ins = {}
    for i = 1, n do
      local a = args[i]
      if is_tensor(a) then ins[#ins + 1] = a end
    end
    local outs = {}
    for i = 1, #res do
      if not is_tensor(res[i]) then
        error("custom Function forward: result " .. i .. " must be a tensor", user_level())
      end
      outs[i] = res[i]
    end
    record(CUSTOM, ins, { fn = self }, outs)
    -- the node keeps self: saved tensors that are keys of `entry` (the outputs, recorded
    -- inputs) are swapped for aliases, or a dropped graph could never be collected
    local saved = self.saved_tensors
    if saved then
      for i = 1, #saved do
        local t = saved[i]
        if is_tensor(t) and entry[t] ~= nil then saved[i] = alias(t) end
      end
    end
  end
  return unpack(res)
end

return M
