-- mx.autograd.backward — backward and grad over the tape of mx.autograd.tape: the reverse walk,
-- the gradient formulas' calls, direct writes into variables' buffers, the release
-- of what backward creates, and the gradients of the view pseudo-ops. Installed by
-- mx.autograd: `require("mx.autograd.backward")(M)`.
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local nd = require("mx.nd")
local T = require("mx.autograd.tape")

local ffi, C = lib.ffi, lib.C
local NDArray = nd.NDArray
local is_tensor = nd.is_tensor
local wrap = nd._wrap
local type, error, pairs, pcall, unpack, tostring = type, error, pairs, pcall, unpack, tostring
local ffi_string = ffi.string
local entry, KMUL = T.entry, T.KMUL
local ref_node, ref_k, box, alias, drop = T.ref_node, T.ref_k, T.box, T.alias, T.drop
local parent_of, input_of, mx_tensor_p = T.parent_of, T.input_of, T.mx_tensor_p
local user_level = require("mx.core.caller").level
local VIEW = nd._view_ops or {}
local RESHAPE_FALLBACK = VIEW.reshape

return function(M)
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
    if e then visit(seen, stack, e) end -- false: a constant of the graph (_tape's CONST)
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
    if entry[h] then add_grad(og, lg, entry[h], g) end
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
      e.fresh = true -- the buffer was written by a backward (Gluon's Trainer checks it)
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
      elseif e then
        local slot = captured[ref_node(e) or EMPTY]
        g = slot and slot[ref_k(e)]
      end
      res[i] = g or zeros_like(w)
    end
  end
  if not retain_graph then -- free the tape (after the results: they look nodes up)
    for i = 1, #list do drop(list[i]) end
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
  if not is_tensor(y) then nd._not_self("backward", y, 2) end
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
  local hl = as_list(heads)
  if type(hl) ~= "table" or (not is_tensor(heads) and #hl == 0) then
    error("grad: heads must be a tensor or a non-empty list of tensors, got " .. type(heads), 2)
  end
  local create = opts.create_graph and true or false
  local retain_g = opts.retain_graph
  if retain_g == nil then retain_g = create end
  local res = backward_scoped(hl, as_list(opts.head_grads), vars, retain_g, create)
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
end
