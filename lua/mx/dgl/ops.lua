-- mx.dgl.ops — DGL's message-passing operators on the gnn op family (C kernels, with
-- gradients; docs/sparse.md "Graphs"):
--   gspmm(g, op, reduce_op, lhs, rhs): every node reduces (sum, mean, max, min) the messages
--     lhs[u] op rhs[e] of its in-edges; op add, sub, mul, div, dot, copy_lhs, copy_rhs
--   gsddmm(g, op, lhs, rhs, lhs_target="u", rhs_target="v"): the message of every edge
--   the named forms, as DGL generates them: u_mul_e_sum, u_add_e_max, copy_u_sum,
--     copy_e_mean ... (spmm), u_dot_v, u_add_v, e_div_v, v_sub_e ..., copy_u, copy_v (sddmm)
--   edge_softmax(g, logits, {norm_by="dst"}): softmax over each node's in-edges
--   segment_reduce(seglen, value, reducer), segment_sum/mean/max/min, segment_softmax:
--     over consecutive segments of value's rows (lengths seglen)
-- Node features are (N, ...), edge features (E, ...) in edge-id order; feature dims
-- broadcast as DGL's (right-aligned), dot sums the last one (kept as size 1).
local nd = require("mx.nd")
local caller = require("mx.core.caller")

local type, error, tostring, ipairs, pairs, pcall = type, error, tostring, ipairs, pairs, pcall

local M = {}

-- runs an op, its errors blamed on the user's line (not this file's)
local function run(fn, ...)
  local ok, r = pcall(fn, ...)
  if not ok then
    error((tostring(r):gsub("^[^\n]-:%d+: ", "")), caller.level())
  end
  return r
end
M._run = run

local function graph_of(who, g, level)
  local dgl = require("mx.dgl")
  if getmetatable(g) ~= dgl.Graph then
    error(who .. ": expected a graph (mx.dgl.graph), got " .. type(g), level + 1)
  end
  return g
end

local function operand(who, what, x, level)
  if not nd.is_tensor(x) then
    error(who .. ": " .. what .. " must be a tensor, got " .. type(x), level + 1)
  end
  return x
end

local SPMM_OPS = { add = "add", sub = "sub", mul = "mul", div = "div", dot = "dot",
  copy_lhs = "copy", copy_rhs = "copy" }
local REDUCERS = { sum = true, mean = true, max = true, min = true }
local TARGETS = { u = true, v = true, e = true, src = "u", dst = "v", edge = "e" }

local function target(who, what, t, level)
  local r = TARGETS[t]
  if not r then
    error(who .. ": " .. what .. " must be 'u', 'v' or 'e', got " .. tostring(t), level + 1)
  end
  return r == true and t or r
end

-- the op call for binary op `op` of DGL's vocabulary with operands at targets lt, rt
local function call(fn, who, csr, op, lhs, rhs, lt, rt, extra, level)
  local b = SPMM_OPS[op]
  if not b then
    error(who .. ": op must be add, sub, mul, div, dot, copy_lhs or copy_rhs, got "
      .. tostring(op), level + 1)
  end
  local opts = { binary_op = b, lhs_target = lt, rhs_target = rt }
  for k, v in pairs(extra) do opts[k] = v end
  local ip, ix, ei = csr[1], csr[2], csr[3]
  local r
  if op == "copy_lhs" then
    r = run(fn, ip, ix, ei, operand(who, "lhs", lhs, level + 1), opts)
  elseif op == "copy_rhs" then
    opts.lhs_target = rt
    r = run(fn, ip, ix, ei, operand(who, "rhs", rhs, level + 1), opts)
  else
    r = run(fn, ip, ix, ei, operand(who, "lhs", lhs, level + 1),
      operand(who, "rhs", rhs, level + 1), opts)
  end
  return r
end

-- gspmm(g, op, reduce_op, lhs, rhs): lhs is source-node data (N, ...), rhs edge data (E, ...)
function M.gspmm(g, op, reduce_op, lhs, rhs)
  graph_of("gspmm", g, 2)
  if not REDUCERS[reduce_op] then
    error("gspmm: reduce_op must be sum, mean, max or min, got " .. tostring(reduce_op), 2)
  end
  local r = call(nd.gspmm, "gspmm", g:_csr(), op, lhs, rhs, "u", "e", { reduce_op = reduce_op }, 2)
  return r
end

-- gsddmm(g, op, lhs, rhs, lhs_target, rhs_target): one message per edge, (E, ...)
function M.gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)
  graph_of("gsddmm", g, 2)
  local lt = target("gsddmm", "lhs_target", lhs_target or "u", 2)
  local rt = target("gsddmm", "rhs_target", rhs_target or "v", 2)
  local r = call(nd.gsddmm, "gsddmm", g:_csr(), op, lhs, rhs, lt, rt, {}, 2)
  return r
end

-- the named forms DGL registers
for _, b in ipairs({ "add", "sub", "mul", "div", "dot" }) do
  for r in pairs(REDUCERS) do
    local name = "u_" .. b .. "_e_" .. r
    M[name] = function(g, x, y)
      graph_of(name, g, 2)
      local o = call(nd.gspmm, name, g:_csr(), b, x, y, "u", "e", { reduce_op = r }, 2)
      return o
    end
  end
end
for r in pairs(REDUCERS) do
  M["copy_u_" .. r] = function(g, x)
    graph_of("copy_u_" .. r, g, 2)
    local o = call(nd.gspmm, "copy_u_" .. r, g:_csr(), "copy_lhs", x, nil, "u", "e",
      { reduce_op = r }, 2)
    return o
  end
  M["copy_e_" .. r] = function(g, x)
    graph_of("copy_e_" .. r, g, 2)
    local o = call(nd.gspmm, "copy_e_" .. r, g:_csr(), "copy_lhs", x, nil, "e", "e",
      { reduce_op = r }, 2)
    return o
  end
end
for _, lt in ipairs({ "u", "v", "e" }) do
  for _, rt in ipairs({ "u", "v", "e" }) do
    if lt ~= rt then
      for _, b in ipairs({ "add", "sub", "mul", "div", "dot" }) do
        local name = lt .. "_" .. b .. "_" .. rt
        M[name] = function(g, x, y)
          graph_of(name, g, 2)
          local o = call(nd.gsddmm, name, g:_csr(), b, x, y, lt, rt, {}, 2)
          return o
        end
      end
    end
  end
end
for _, t in ipairs({ "u", "v" }) do
  M["copy_" .. t] = function(g, x)
    graph_of("copy_" .. t, g, 2)
    local o = call(nd.gsddmm, "copy_" .. t, g:_csr(), "copy_lhs", x, nil, t, "v", {}, 2)
    return o
  end
end

-- edge_softmax(g, logits, {norm_by = "dst" | "src"}): logits (E, ...) normalised over the
-- edges entering (dst) or leaving (src) each node
function M.edge_softmax(g, logits, opts)
  graph_of("edge_softmax", g, 2)
  operand("edge_softmax", "logits", logits, 2)
  local by = opts and opts.norm_by or "dst"
  if type(opts) == "table" then
    for k in pairs(opts) do
      if k ~= "norm_by" then error("edge_softmax: unknown option '" .. tostring(k) .. "'", 2) end
    end
  end
  if by ~= "dst" and by ~= "src" then
    error("edge_softmax: norm_by must be 'dst' or 'src', got " .. tostring(by), 2)
  end
  local c = by == "dst" and g:_csr() or g:_csr(true)
  local r = run(nd.edge_softmax, c[1], c[3], logits)
  return r
end

---------------------------------------------------------------- segments
-- the csr of consecutive segments of lengths seglen over n rows
local function segments(who, seglen, value, level)
  operand(who, "value", value, level + 1)
  if nd.is_tensor(seglen) then seglen = seglen:tolist() end
  if type(seglen) ~= "table" then
    error(who .. ": seglen must be a list or a tensor of segment lengths", level + 1)
  end
  local ip, n = { 0 }, 0
  for i = 1, #seglen do
    local l = seglen[i]
    if type(l) ~= "number" or l < 0 or l % 1 ~= 0 then
      error(string.format("%s: seglen[%d] = %s is not a length", who, i, tostring(l)), level + 1)
    end
    n = n + l
    ip[i + 1] = n
  end
  local rows = value:ndim() >= 1 and value:shape()[1] or 0
  if n ~= rows then
    error(string.format("%s: the lengths sum to %d, value has %d rows", who, n, rows), level + 1)
  end
  local ar = nd.arange(0, n, { dtype = "int64" })
  return nd.array(ip, { dtype = "int64" }), ar
end

-- segment_reduce(seglen, value, reducer="sum"): (#seglen, ...), 0 for an empty segment
function M.segment_reduce(seglen, value, reducer)
  reducer = reducer or "sum"
  if not REDUCERS[reducer] then
    error("segment_reduce: reducer must be sum, mean, max or min, got " .. tostring(reducer), 2)
  end
  local ip, ar = segments("segment_reduce", seglen, value, 2)
  local r = run(nd.gspmm, ip, ar, ar, value, { binary_op = "copy", reduce_op = reducer,
    lhs_target = "e" })
  return r
end
for r in pairs(REDUCERS) do
  M["segment_" .. r] = function(seglen, value)
    local ip, ar = segments("segment_" .. r, seglen, value, 2)
    local o = run(nd.gspmm, ip, ar, ar, value, { binary_op = "copy", reduce_op = r,
      lhs_target = "e" })
    return o
  end
end

-- segment_softmax(seglen, value): softmax within each segment, per feature
function M.segment_softmax(seglen, value)
  local ip, ar = segments("segment_softmax", seglen, value, 2)
  local r = run(nd.edge_softmax, ip, ar, value)
  return r
end

return M
