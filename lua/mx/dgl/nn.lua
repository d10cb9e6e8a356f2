-- mx.dgl.nn — graph neural network layers with DGL's names and semantics, as Gluon
-- Blocks whose forward takes (graph, features):
--   GraphConv(in_feats, out_feats, {norm="both", weight=true, bias=true, activation=,
--             allow_zero_in_degree=false}): Kipf & Welling's GCN layer, DGL's GraphConv:
--   h = act(D_in^-1/2 A^T D_out^-1/2 x W + b) for norm "both" (degrees clamped to 1),
--   "right" averages over in-neighbours, "none" sums; W (in_feats, out_feats).
--   SAGEConv(in_feats, out_feats, aggregator_type, {bias=true, activation=}): GraphSAGE,
--   "mean": W_self h + W_neigh mean(neigh) + b; "gcn": W_neigh (sum(neigh) + h)/(deg + 1) + b;
--   "pool": W_self h + W_neigh max(relu(fc_pool(neigh))) + b; "lstm": W_self h + W_neigh
--   (an LSTM's last hidden state over the in-neighbours in edge-id order) + b.
--   GINConv(apply_func, aggregator_type, {init_eps=0, learn_eps=false}): (1 + eps) h +
--   sum/mean/max(neigh), then apply_func (a Block or function; nil: none).
--   GATConv(in_feats, out_feats, num_heads, {feat_drop=0, attn_drop=0, negative_slope=0.2,
--   residual=false, activation=, allow_zero_in_degree=false}): graph attention, DGL's
--   (fc, attn_l, attn_r, res_fc): out (N, num_heads, out_feats).
--   SumPooling(), AvgPooling(), MaxPooling(): per-graph readouts of a batched graph,
--   (graphs, features) from (nodes, features).
local nd = require("mx.nd")

local type, error, tostring, ipairs = type, error, tostring, ipairs

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


function GraphConv:forward(g, x)
  local dgl = require("mx.dgl")
  if getmetatable(g) ~= dgl.Graph then error("GraphConv: expected (graph, features)", 2) end
  if not nd.is_tensor(x) or x:ndim() ~= 2 or x:shape()[1] ~= g:num_nodes()
    or x:shape()[2] ~= self._in then
    error(string.format("GraphConv: features must be (%d, %d) (nodes, in_feats)", g:num_nodes(),
      self._in), 2)
  end
  local zero = not self._zero_ok and g:_zero_in_degree()
  if zero then
    error("GraphConv: node " .. zero .. " has no in-edges (its output would be 0): add "
      .. "self loops (g:add_self_loop()) or pass allow_zero_in_degree=true", 2)
  end
  local dt = x:dtype()
  local h = x
  local w = self.weight and self.weight:data()
  local first = w and self._in > self._out -- multiply first when it shrinks the features
  if first then h = nd.dot(h, w) end
  -- degrees clamped to at least 1 (DGL's clamp(min=1)), as (n, 1) columns; the source
  -- norm scales rows, so it goes after the (narrower) product as well as before
  if self._norm == "both" or self._norm == "left" then
    h = nd.mul(h, g:_degree_col(true, self._norm == "both" and -0.5 or -1, dt))
  end
  h = dgl.ops.copy_u_sum(g, h)
  if w and not first then h = nd.dot(h, w) end
  if self._norm == "both" then h = nd.mul(h, g:_degree_col(false, -0.5, dt))
  elseif self._norm == "right" then h = nd.mul(h, g:_degree_col(false, -1, dt)) end
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

local SAGE_AGG = { mean = true, gcn = true, pool = true, lstm = true }
local SAGEConv = Block:extend("SAGEConv")
M.SAGEConv = SAGEConv
function SAGEConv:__init(in_feats, out_feats, aggregator_type, opts)
  Block.__init(self)
  local o = check_opts("SAGEConv", opts, { bias = true, activation = true }, 3)
  pos_int("SAGEConv", "in_feats", in_feats, 3)
  pos_int("SAGEConv", "out_feats", out_feats, 3)
  if not SAGE_AGG[aggregator_type] then
    error("SAGEConv: aggregator_type must be 'mean', 'gcn', 'pool' or 'lstm', got "
      .. tostring(aggregator_type), 3)
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
  if aggregator_type == "pool" then
    self.fc_pool = gluon.nn.Dense(in_feats, { in_units = in_feats })
  elseif aggregator_type == "lstm" then
    self.lstm = gluon.rnn.LSTM(in_feats, { layout = "NTC", input_size = in_feats })
  end
  if o.bias ~= false then
    self.bias = Parameter("bias", { shape = { out_feats }, init = initializer.create("zeros") })
  end
end

-- the LSTM aggregator: nodes of one in-degree run as one batch of sequences (their
-- in-neighbours' rows in edge-id order, DGL's degree bucketing); the last hidden states are
-- put back in node order, 0 for a node without in-edges
local function lstm_neigh(self, g, x)
  local c = g:_csr()
  local ip, src = c[1]:tolist(), c[2]:tolist()
  local by_deg, degs = {}, {}
  for v = 1, #ip - 1 do
    local d = ip[v + 1] - ip[v]
    if d > 0 then
      if not by_deg[d] then by_deg[d] = {}; degs[#degs + 1] = d end
      local b = by_deg[d]
      b[#b + 1] = v
    end
  end
  table.sort(degs)
  local parts, where, at = {}, {}, 0
  for _, d in ipairs(degs) do
    local idx = {}
    for _, v in ipairs(by_deg[d]) do
      for q = ip[v] + 1, ip[v + 1] do idx[#idx + 1] = src[q] + 1 end
      at = at + 1
      where[v] = at
    end
    local B = #by_deg[d]
    local seq = nd.take(x, nd.array(idx, { dtype = "int64" })):reshape { B, d, self._in }
    local _, states = self.lstm(seq, self.lstm:begin_state(B, { dtype = x:dtype() }))
    parts[#parts + 1] = states[1]:reshape { B, self._in }
  end
  parts[#parts + 1] = nd.zeros({ 1, self._in }, { dtype = x:dtype() })
  local perm = {}
  for v = 1, #ip - 1 do perm[v] = where[v] or at + 1 end
  local r = nd.take(nd.concat(parts, { dim = 1 }), nd.array(perm, { dtype = "int64" }))
  return r
end

function SAGEConv:forward(g, x)
  local dgl = graph_feat("SAGEConv", g, x, self._in, 2)
  local h
  if self._agg ~= "gcn" then
    local neigh
    if self._agg == "mean" then neigh = dgl.copy_u_mean(g, x)
    elseif self._agg == "pool" then neigh = dgl.ops.copy_u_max(g, nd.relu(self.fc_pool(x)))
    else neigh = lstm_neigh(self, g, x) end
    h = nd.add(nd.dot(x, self.fc_self:data()), nd.dot(neigh, self.fc_neigh:data()))
  else
    local indeg, deg = g:_degrees(), {}
    for i = 1, #indeg do deg[i] = 1 / (indeg[i] + 1) end
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
  if aggregator_type ~= "sum" and aggregator_type ~= "mean" and aggregator_type ~= "max" then
    error("GINConv: aggregator_type must be 'sum', 'mean' or 'max', got "
      .. tostring(aggregator_type), 3)
  end
  if apply_func ~= nil and type(apply_func) ~= "function" and type(apply_func) ~= "table" then
    error("GINConv: apply_func must be a Block, a function or nil", 3)
  end
  self._agg = aggregator_type
  if type(apply_func) == "table" then
    self.apply_func = apply_func -- a child block (its parameters are the layer's)
    self._has_apply = true
  else self._fn = apply_func end
  local eps = o.init_eps or 0
  if type(eps) ~= "number" then error("GINConv: init_eps must be a number", 3) end
  self.eps = Parameter("eps", { shape = { 1 }, init = initializer.Constant(eps),
    grad_req = o.learn_eps and "write" or "null" })
end

function GINConv:forward(g, x)
  local dgl = graph_feat("GINConv", g, x, nil, 2)
  local neigh = dgl.ops["copy_u_" .. self._agg](g, x)
  local h = nd.add(nd.mul(x, nd.add_scalar(self.eps:data(), { scalar = 1 }):reshape { 1, 1 }), neigh)
  local f = self._fn or (self._has_apply and self.apply_func)
  if f then h = f(h) end
  return h
end

---------------------------------------------------------------- GATConv
-- DGL's GATConv: z = fc(dropout(h)) per head; e_uv = leaky_relu(a_l . z_u + a_r . z_v);
-- alpha = edge_softmax over each node's in-edges (then attention dropout); out_v = sum_u
-- alpha_uv z_u (+ res_fc(h), activation): u_add_v, edge_softmax and u_mul_e_sum calls
local GAT_OPTS = { feat_drop = true, attn_drop = true, negative_slope = true, residual = true,
  activation = true, allow_zero_in_degree = true }
local GATConv = Block:extend("GATConv")
M.GATConv = GATConv
function GATConv:__init(in_feats, out_feats, num_heads, opts)
  Block.__init(self)
  local o = check_opts("GATConv", opts, GAT_OPTS, 3)
  pos_int("GATConv", "in_feats", in_feats, 3)
  pos_int("GATConv", "out_feats", out_feats, 3)
  pos_int("GATConv", "num_heads", num_heads, 3)
  for _, k in ipairs({ "feat_drop", "attn_drop" }) do
    local r = o[k] or 0
    if type(r) ~= "number" or r < 0 or r >= 1 then
      error("GATConv: " .. k .. " must be a rate in [0, 1), got " .. tostring(o[k]), 3)
    end
  end
  local ns = o.negative_slope or 0.2
  if type(ns) ~= "number" then error("GATConv: negative_slope must be a number", 3) end
  if o.activation ~= nil and not ACT[o.activation] and type(o.activation) ~= "function" then
    error("GATConv: activation must be relu, sigmoid, tanh or a function", 3)
  end
  self._in, self._out, self._heads, self._slope = in_feats, out_feats, num_heads, ns
  self._act, self._zero_ok = o.activation, o.allow_zero_in_degree == true
  local xavier = initializer.Xavier({ magnitude = math.sqrt(2) })
  self.fc = gluon.nn.Dense(out_feats * num_heads, { use_bias = false, in_units = in_feats,
    weight_initializer = xavier })
  self.attn_l = Parameter("attn_l", { shape = { 1, num_heads, out_feats }, init = xavier })
  self.attn_r = Parameter("attn_r", { shape = { 1, num_heads, out_feats }, init = xavier })
  self.feat_drop = gluon.nn.Dropout(o.feat_drop or 0)
  self.attn_drop = gluon.nn.Dropout(o.attn_drop or 0)
  if o.residual then
    if in_feats ~= out_feats * num_heads then
      self.res_fc = gluon.nn.Dense(out_feats * num_heads, { use_bias = false, in_units = in_feats,
        weight_initializer = xavier })
    else
      self._res_identity = true
    end
  end
end

-- forward(g, feat, get_attention): (N, num_heads, out_feats) [, attention (E, num_heads, 1)]
function GATConv:forward(g, x, get_attention)
  local dgl = graph_feat("GATConv", g, x, self._in, 2)
  local zero = not self._zero_ok and g:_zero_in_degree()
  if zero then
    error("GATConv: node " .. zero .. " has no in-edges (its output would be 0): add "
      .. "self loops (g:add_self_loop()) or pass allow_zero_in_degree=true", 2)
  end
  local n, H, F = g:num_nodes(), self._heads, self._out
  local h = self.feat_drop(x)
  local z = self.fc(h):reshape { n, H, F }
  local el = nd.sum(nd.mul(z, self.attn_l:data()), { axis = 3, keepdims = true })
  local er = nd.sum(nd.mul(z, self.attn_r:data()), { axis = 3, keepdims = true })
  local e = nd.leaky_relu(dgl.ops.u_add_v(g, el, er), { act_type = "leaky", slope = self._slope })
  local a = self.attn_drop(dgl.ops.edge_softmax(g, e))
  local r = dgl.ops.u_mul_e_sum(g, z, a)
  if self.res_fc then r = nd.add(r, self.res_fc(h):reshape { n, H, F })
  elseif self._res_identity then r = nd.add(r, h:reshape { n, H, F }) end
  r = apply_act(self._act, r)
  if get_attention then return r, a end
  return r
end
function GATConv:_repr_args()
  return string.format("in=%d, out=%d, heads=%d", self._in, self._out, self._heads)
end

---------------------------------------------------------------- readouts
-- each graph of a batch is a segment of consecutive node rows: segment_sum/mean/max
-- (a graph with no nodes reads 0, as DGL's)
local function pooling(name, reducer)
  local cls = Block:extend(name)
  M[name] = cls
  function cls:__init()
    Block.__init(self)
  end
  function cls.forward(_, g, x)
    local dgl = graph_feat(name, g, x, nil, 2)
    local r = dgl.ops.segment_reduce(g:batch_num_nodes(), x, reducer)
    return r
  end
  return cls
end
pooling("SumPooling", "sum")
pooling("AvgPooling", "mean")
pooling("MaxPooling", "max")

return M
