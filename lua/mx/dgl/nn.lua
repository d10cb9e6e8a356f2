-- mx.dgl.nn — graph neural network layers with DGL's names and semantics, as Gluon
-- Blocks whose forward takes (graph, features):
--   GraphConv(in_feats, out_feats, {norm="both", weight=true, bias=true, activation=,
--             allow_zero_in_degree=false}): Kipf & Welling's GCN layer, DGL's GraphConv:
--   h = act(D_in^-1/2 A^T D_out^-1/2 x W + b) for norm "both" (degrees clamped to 1),
--   "right" averages over in-neighbours, "none" sums; W (in_feats, out_feats).
--   SAGEConv(in_feats, out_feats, aggregator_type, {bias=true, activation=}): GraphSAGE,
--   "mean": W_self h + W_neigh mean(neigh) + b; "gcn": W_neigh (sum(neigh) + h)/(deg + 1) + b.
--   GINConv(apply_func, aggregator_type, {init_eps=0, learn_eps=false}): (1 + eps) h +
--   sum/mean(neigh), then apply_func (a Block or function; nil: none).
--   SumPooling(), AvgPooling(), MaxPooling(): per-graph readouts of a batched graph,
--   (graphs, features) from (nodes, features).
local nd = require("mx.nd")

local type, error, tostring = type, error, tostring

local M = {}

local function pos_int(who, what, v, level)
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error(who .. ": " .. what .. " must be a positive integer, got " .. tostring(v), level + 1)
  end
end

local ACT = { relu = true, sigmoid = true, tanh = true }
local NORMS = { both = true, right = true, none = true, left = true }

local gluon = require("mx.gluon")
local Block = gluon.Block
local Parameter = gluon.Parameter
local initializer = require("mx.initializer")
local check_opts = require("mx.core.class").check_opts

local GraphConv = Block:extend("GraphConv")
M.GraphConv = GraphConv
local GC_OPTS = { norm = true, weight = true, bias = true, activation = true,
  allow_zero_in_degree = true }
function GraphConv:__init(in_feats, out_feats, opts)
  Block.__init(self)
  local o = check_opts("GraphConv", opts, GC_OPTS, 3)
  pos_int("GraphConv", "in_feats", in_feats, 3)
  pos_int("GraphConv", "out_feats", out_feats, 3)
  local norm = o.norm or "both"
  if not NORMS[norm] then
    error("GraphConv: norm must be 'both', 'right', 'left' or 'none', got " .. tostring(norm), 3)
  end
  local act = o.activation
  if act ~= nil and not ACT[act] and type(act) ~= "function" then
    error("GraphConv: activation must be relu, sigmoid, tanh or a function", 3)
  end
  self._in, self._out, self._norm, self._act = in_feats, out_feats, norm, act
  self._zero_ok = o.allow_zero_in_degree == true
  if o.weight ~= false then
    self.weight = Parameter("weight", { shape = { in_feats, out_feats },
      init = initializer.create("xavier") })
  end
  if o.bias ~= false then
    self.bias = Parameter("bias", { shape = { out_feats }, init = initializer.create("zeros") })
  end
end

-- degrees^p as an (n, 1) column, clamped to at least 1 (DGL's clamp(min=1))
local function deg_col(list, p, dtype)
  local t = {}
  for i = 1, #list do t[i] = math.max(list[i], 1) ^ p end
  return nd.array(t, { dtype = dtype }):reshape { #list, 1 }
end

function GraphConv:forward(g, x)
  local dgl = require("mx.dgl")
  if getmetatable(g) ~= dgl.Graph then error("GraphConv: expected (graph, features)", 2) end
  if not nd.is_tensor(x) or x:ndim() ~= 2 or x:shape()[1] ~= g:num_nodes()
    or x:shape()[2] ~= self._in then
    error(string.format("GraphConv: features must be (%d, %d) (nodes, in_feats)", g:num_nodes(),
      self._in), 2)
  end
  local indeg = g._degree_list(g, g._dst)
  if not self._zero_ok then
    for v = 1, #indeg do
      if indeg[v] == 0 then
        error("GraphConv: node " .. (v - 1) .. " has no in-edges (its output would be 0): add "
          .. "self loops (g:add_self_loop()) or pass allow_zero_in_degree=true", 2)
      end
    end
  end
  local dt = x:dtype()
  local h = x
  if self._norm == "both" or self._norm == "left" then
    h = nd.mul(h, deg_col(g._degree_list(g, g._src), self._norm == "both" and -0.5 or -1, dt))
  end
  local w = self.weight and self.weight:data()
  local first = w and self._in > self._out -- multiply first when it shrinks the features
  if first then h = nd.dot(h, w) end
  h = nd.dot(g:_in_adj(), h)
  if w and not first then h = nd.dot(h, w) end
  if self._norm == "both" then h = nd.mul(h, deg_col(indeg, -0.5, dt))
  elseif self._norm == "right" then h = nd.mul(h, deg_col(indeg, -1, dt)) end
  if self.bias then h = nd.add(h, self.bias:data():reshape { 1, self._out }) end
  local a = self._act
  if a then h = type(a) == "function" and a(h) or nd[a](h) end
  return h
end
function GraphConv:_repr_args()
  return string.format("in=%d, out=%d, normalization=%s, activation=%s", self._in, self._out,
    self._norm, tostring(self._act))
end

---------------------------------------------------------------- SAGEConv
local function graph_feat(who, g, x, in_feats, level)
  local dgl = require("mx.dgl")
  if getmetatable(g) ~= dgl.Graph then error(who .. ": expected (graph, features)", level + 1) end
  if not nd.is_tensor(x) or x:ndim() ~= 2 or x:shape()[1] ~= g:num_nodes()
    or (in_feats and x:shape()[2] ~= in_feats) then
    error(string.format("%s: features must be (%d, %s) (nodes, features)", who, g:num_nodes(),
      in_feats and tostring(in_feats) or "any"), level + 1)
  end
  return dgl
end

local function apply_act(a, h)
  if not a then return h end
  if type(a) == "function" then return a(h) end
  local r = nd[a](h)
  return r
end

local SAGE_AGG = { mean = true, gcn = true }
local SAGEConv = Block:extend("SAGEConv")
M.SAGEConv = SAGEConv
function SAGEConv:__init(in_feats, out_feats, aggregator_type, opts)
  Block.__init(self)
  local o = check_opts("SAGEConv", opts, { bias = true, activation = true }, 3)
  pos_int("SAGEConv", "in_feats", in_feats, 3)
  pos_int("SAGEConv", "out_feats", out_feats, 3)
  if not SAGE_AGG[aggregator_type] then
    error("SAGEConv: aggregator_type must be 'mean' or 'gcn' (pool and lstm are not "
      .. "implemented), got " .. tostring(aggregator_type), 3)
  end
  if o.activation ~= nil and not ACT[o.activation] and type(o.activation) ~= "function" then
    error("SAGEConv: activation must be relu, sigmoid, tanh or a function", 3)
  end
  self._in, self._out, self._agg, self._act = in_feats, out_feats, aggregator_type, o.activation
  local xavier = initializer.create("xavier")
  if aggregator_type ~= "gcn" then
    self.fc_self = Parameter("fc_self", { shape = { in_feats, out_feats }, init = xavier })
  end
  self.fc_neigh = Parameter("fc_neigh", { shape = { in_feats, out_feats }, init = xavier })
  if o.bias ~= false then
    self.bias = Parameter("bias", { shape = { out_feats }, init = initializer.create("zeros") })
  end
end

function SAGEConv:forward(g, x)
  local dgl = graph_feat("SAGEConv", g, x, self._in, 2)
  local h
  if self._agg == "mean" then
    h = nd.add(nd.dot(x, self.fc_self:data()), nd.dot(dgl.copy_u_mean(g, x), self.fc_neigh:data()))
  else
    local deg = g._degree_list(g, g._dst)
    for i = 1, #deg do deg[i] = 1 / (deg[i] + 1) end
    local agg = nd.mul(nd.add(dgl.copy_u_sum(g, x), x),
      nd.array(deg, { dtype = x:dtype() }):reshape { #deg, 1 })
    h = nd.dot(agg, self.fc_neigh:data())
  end
  if self.bias then h = nd.add(h, self.bias:data():reshape { 1, self._out }) end
  return apply_act(self._act, h)
end

---------------------------------------------------------------- GINConv
local GINConv = Block:extend("GINConv")
M.GINConv = GINConv
function GINConv:__init(apply_func, aggregator_type, opts)
  Block.__init(self)
  local o = check_opts("GINConv", opts, { init_eps = true, learn_eps = true }, 3)
  aggregator_type = aggregator_type or "sum"
  if aggregator_type ~= "sum" and aggregator_type ~= "mean" then
    error("GINConv: aggregator_type must be 'sum' or 'mean' (max is not implemented), got "
      .. tostring(aggregator_type), 3)
  end
  if apply_func ~= nil and type(apply_func) ~= "function" and type(apply_func) ~= "table" then
    error("GINConv: apply_func must be a Block, a function or nil", 3)
  end
  self._agg = aggregator_type
  if type(apply_func) == "table" then self.apply_func = apply_func -- a child block
  else self._fn = apply_func end
  local eps = o.init_eps or 0
  if type(eps) ~= "number" then error("GINConv: init_eps must be a number", 3) end
  self.eps = Parameter("eps", { shape = { 1 }, init = initializer.Constant(eps),
    grad_req = o.learn_eps and "write" or "null" })
end

function GINConv:forward(g, x)
  local dgl = graph_feat("GINConv", g, x, nil, 2)
  local neigh = self._agg == "sum" and dgl.copy_u_sum(g, x) or dgl.copy_u_mean(g, x)
  local h = nd.add(nd.mul(x, nd.add_scalar(self.eps:data(), { scalar = 1 }):reshape { 1, 1 }), neigh)
  local f = rawget(self, "apply_func") or self._fn
  if f then h = f(h) end
  return h
end

---------------------------------------------------------------- readouts
-- the (graphs, nodes) csr that sums each graph's rows (a batch's parts, or one graph)
local function members(g)
  local counts = g:batch_num_nodes()
  local key = rawget(g, "_members")
  if key then return key, counts end
  local row, col, off = {}, {}, 0
  for k, c in ipairs(counts) do
    for v = off, off + c - 1 do row[#row + 1], col[#col + 1] = k - 1, v end
    off = off + c
  end
  key = nd.sparse.csr_matrix({ nd.ones({ #row }), { row, col } }, { shape = { #counts, off } })
  g._members = key
  return key, counts
end

local function pooling(name, reduce)
  local cls = Block:extend(name)
  M[name] = cls
  function cls:__init()
    Block.__init(self)
  end
  function cls.forward(_, g, x)
    graph_feat(name, g, x, nil, 2)
    local r = reduce(g, x)
    return r
  end
  return cls
end
pooling("SumPooling", function(g, x) return nd.dot(members(g), x) end)
pooling("AvgPooling", function(g, x)
  local m, counts = members(g)
  local inv = {}
  for k, c in ipairs(counts) do inv[k] = c > 0 and 1 / c or 0 end
  return nd.mul(nd.dot(m, x), nd.array(inv, { dtype = x:dtype() }):reshape { #inv, 1 })
end)
pooling("MaxPooling", function(g, x) -- a graph with no nodes reads 0, as DGL's
  local parts, off = {}, 0
  for k, c in ipairs(g:batch_num_nodes()) do
    parts[k] = c > 0 and nd.max(nd.slice_axis(x, { axis = 1, begin = off + 1, ["end"] = off + c }),
      { axis = 1, keepdims = true }) or nd.zeros({ 1, x:shape()[2] }, { dtype = x:dtype() })
    off = off + c
  end
  return nd.concat(parts, { dim = 1 })
end)

return M
