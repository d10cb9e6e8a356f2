-- mx.dgl.nn — graph neural network layers with DGL's names and semantics, as Gluon
-- Blocks whose forward takes (graph, features):
--   GraphConv(in_feats, out_feats, {norm="both", weight=true, bias=true, activation=,
--             allow_zero_in_degree=false}): Kipf & Welling's GCN layer, DGL's GraphConv:
--   h = act(D_in^-1/2 A^T D_out^-1/2 x W + b) for norm "both" (degrees clamped to 1),
--   "right" averages over in-neighbours, "none" sums; W (in_feats, out_feats).
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

return M
