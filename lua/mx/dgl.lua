-- mx.dgl — graphs for graph neural networks in DGL's style, on the sparse kernels:
--   local g = mx.dgl.graph({ src, dst }, { num_nodes = n })  -- 0-based node ids
--   g:num_nodes(), g:num_edges(), g:edges(), g:in_degrees(), g:out_degrees()
--   g:add_self_loop(), g:reverse(), g:adj(), mx.dgl.batch({ g1, g2 })
--   mx.dgl.copy_u_sum(g, x), copy_u_mean: each node sums (averages) its in-neighbours'
--   rows of x; mx.dgl.ops: DGL's generalized SpMM/SDDMM, edge_softmax and segment ops (the
--   gnn op family, differentiable); g:update_all / g:apply_edges with mx.dgl.fn's built-ins
--   mx.dgl.karate_club(), les_miserables(), wormnet(), graph_atlas(): real graphs (networkx's
--   files)
-- Node ids are 0-based data, as DGL's and as Embedding's token ids (docs/sparse.md);
-- g.ndata / g.edata are plain tables of feature tensors. Layers: mx.dgl.nn (GraphConv,
-- GATConv, SAGEConv, GINConv, readouts).
local nd = require("mx.nd")

local type, error, tostring, ipairs, pairs = type, error, tostring, ipairs, pairs

local M = {}

local Graph = {}
Graph.__index = Graph
M.Graph = Graph

-- a list of 0-based ids from a Lua list or an integer tensor
local function ids(who, what, v, level)
  if nd.is_tensor(v) then v = v:tolist() end
  if type(v) ~= "table" then
    error(who .. ": " .. what .. " must be a list or a tensor of 0-based node ids, got " .. type(v),
      level + 1)
  end
  local t = {}
  for i = 1, #v do
    local x = v[i]
    if type(x) ~= "number" or x < 0 or x % 1 ~= 0 then
      error(string.format("%s: %s[%d] = %s is not a 0-based node id", who, what, i, tostring(x)),
        level + 1)
    end
    t[i] = x
  end
  return t
end

local function new_graph(src, dst, n)
  return setmetatable({ _src = src, _dst = dst, _n = n, ndata = {}, edata = {} }, Graph)
end

-- graph({src, dst}, {num_nodes=}): edges src[i] -> dst[i]; num_nodes defaults to the
-- largest id + 1
function M.graph(data, opts)
  local who = "mx.dgl.graph"
  if type(data) ~= "table" or #data ~= 2 then
    error(who .. ": data must be {src, dst} (two id lists or tensors)", 2)
  end
  opts = opts or {}
  if type(opts) ~= "table" then error(who .. ": options must be a table ({num_nodes=})", 2) end
  for k in pairs(opts) do
    if k ~= "num_nodes" then error(who .. ": unknown option '" .. tostring(k) .. "'", 2) end
  end
  local src, dst = ids(who, "src", data[1], 2), ids(who, "dst", data[2], 2)
  if #src ~= #dst then
    error(string.format("%s: src has %d ids and dst %d (one per edge each)", who, #src, #dst), 2)
  end
  local n = 0
  for i = 1, #src do n = math.max(n, src[i] + 1, dst[i] + 1) end
  if opts.num_nodes ~= nil then
    local m = opts.num_nodes
    if type(m) ~= "number" or m < 0 or m % 1 ~= 0 then
      error(who .. ": num_nodes must be a non-negative integer", 2)
    end
    if m < n then
      error(string.format("%s: num_nodes %d, but an edge names node %d", who, m, n - 1), 2)
    end
    n = m
  end
  return new_graph(src, dst, n)
end

-- from_csr(indptr, indices, {num_nodes=}): row r's entries are r's out-edges
function M.from_csr(indptr, indices, opts)
  local p, c = ids("from_csr", "indptr", indptr, 2), ids("from_csr", "indices", indices, 2)
  if #p < 1 or p[1] ~= 0 or p[#p] ~= #c then
    error("from_csr: indptr must run from 0 to #indices", 2)
  end
  local src = {}
  for r = 1, #p - 1 do
    if p[r + 1] < p[r] then error("from_csr: indptr decreases at " .. r, 2) end
    for _ = p[r] + 1, p[r + 1] do src[#src + 1] = r - 1 end
  end
  local g = M.graph({ src, c }, { num_nodes = math.max(#p - 1, (opts or {}).num_nodes or 0) })
  return g
end

function Graph:num_nodes() return self._n end
function Graph:num_edges() return #self._src end
Graph.number_of_nodes, Graph.number_of_edges = Graph.num_nodes, Graph.num_edges

-- edges(): src, dst as int64 tensors
function Graph:edges()
  return nd.array(self._src, { dtype = "int64" }), nd.array(self._dst, { dtype = "int64" })
end

local function degrees(self, ends)
  local d = {}
  for i = 1, self._n do d[i] = 0 end
  for i = 1, #ends do d[ends[i] + 1] = d[ends[i] + 1] + 1 end
  return d
end
function Graph:in_degrees() return nd.array(degrees(self, self._dst), { dtype = "int64" }) end
function Graph:out_degrees() return nd.array(degrees(self, self._src), { dtype = "int64" }) end
Graph._degree_list = degrees

-- What the layers read at every forward, computed once per graph (its edges never change,
-- as its csr): the in-degree (out = true: out-degree) list, the first node without
-- in-edges (0-based; nil: none), and the (n, 1) column of clamped degrees max(d, 1)^p
function Graph:_degrees(out)
  local key = out and "_outdeg" or "_indeg"
  local d = rawget(self, key)
  if not d then
    d = degrees(self, out and self._src or self._dst)
    self[key] = d
  end
  return d
end
function Graph:_zero_in_degree()
  local z = rawget(self, "_zero_in")
  if z == nil then
    z = false
    local d = self:_degrees()
    for v = 1, #d do
      if d[v] == 0 then z = v - 1; break end
    end
    self._zero_in = z
  end
  return z or nil
end
function Graph:_degree_col(out, p, dtype)
  local cache = rawget(self, "_degcols")
  if not cache then cache = {}; self._degcols = cache end
  local key = (out and "o" or "i") .. tostring(p) .. dtype
  local c = cache[key]
  if not c then
    local d, t = self:_degrees(out), {}
    for i = 1, #d do t[i] = math.max(d[i], 1) ^ p end
    c = nd.array(t, { dtype = dtype }):reshape { #d, 1 }
    cache[key] = c
  end
  return c
end

-- add_self_loop(): a new graph with an edge v -> v for every node (after the others)
function Graph:add_self_loop()
  local s, d = {}, {}
  for i = 1, #self._src do s[i], d[i] = self._src[i], self._dst[i] end
  for v = 0, self._n - 1 do
    s[#s + 1], d[#d + 1] = v, v
  end
  return new_graph(s, d, self._n)
end

-- reverse(): every edge turned around
function Graph:reverse() return new_graph(self._dst, self._src, self._n) end

-- adj(): the (num_nodes, num_nodes) csr adjacency, A[src, dst] = number of such edges
function Graph:adj()
  return nd.sparse.csr_matrix({ nd.ones({ #self._src }), { self._src, self._dst } },
    { shape = { self._n, self._n } })
end

-- the destination-sorted csr the gnn ops take: {indptr (N + 1), sources, edge ids}, int64,
-- edges of one destination in id order (rev: source-sorted, {indptr, destinations, ids})
function Graph:_csr(rev)
  local key = rev and "_rcsr" or "_dcsr"
  local c = rawget(self, key)
  if c then return c end
  local by, other = self._dst, self._src
  if rev then by, other = self._src, self._dst end
  local n, cnt = self._n, {}
  for v = 1, n + 1 do cnt[v] = 0 end
  for i = 1, #by do cnt[by[i] + 2] = cnt[by[i] + 2] + 1 end
  for v = 2, n + 1 do cnt[v] = cnt[v] + cnt[v - 1] end
  local ip, pos, ix, ei = {}, {}, {}, {}
  for v = 1, n + 1 do ip[v], pos[v] = cnt[v], cnt[v] end
  for i = 1, #by do
    local v = by[i] + 1
    local p = pos[v] + 1
    pos[v] = p
    ix[p], ei[p] = other[i], i - 1
  end
  c = { nd.array(ip, { dtype = "int64" }), nd.array(ix, { dtype = "int64" }),
    nd.array(ei, { dtype = "int64" }) }
  self[key] = c
  return c
end

local function feat(who, g, x, level)
  if getmetatable(g) ~= Graph then error(who .. ": expected a graph (mx.dgl.graph)", level + 1) end
  if not nd.is_tensor(x) or x:ndim() < 1 or x:shape()[1] ~= g._n then
    error(string.format("%s: features must be a tensor with a row per node (%d)", who, g._n),
      level + 1)
  end
end

-- copy_u_sum(g, x): out[v] = sum of x[u] over edges u -> v; copy_u_mean: the mean over
-- in-neighbours (0 for a node with none). mx.dgl.ops has the whole gspmm/gsddmm family.
function M.copy_u_sum(g, x)
  feat("copy_u_sum", g, x, 2)
  local r = M.ops.copy_u_sum(g, x)
  return r
end
function M.copy_u_mean(g, x)
  feat("copy_u_mean", g, x, 2)
  local r = M.ops.copy_u_mean(g, x)
  return r
end

---------------------------------------------------------------- message passing
local function field(g, who, t, name, level)
  local frame = t == "e" and g.edata or g.ndata
  local x = frame[name]
  if not nd.is_tensor(x) then
    error(string.format("%s: g.%s[%q] is not set", who, t == "e" and "edata" or "ndata", name),
      level + 1)
  end
  return x
end

local function message_call(g, fnx, m, extra, level)
  local fnm = require("mx.dgl.fn")
  if getmetatable(m) ~= fnm.Message then
    error("a message function must be a built-in of mx.dgl.fn (copy_u, u_mul_e, ...)", level + 1)
  end
  local c = g:_csr()
  local opts = { binary_op = m.binary == "copy_lhs" and "copy" or m.binary, lhs_target = m.lt,
    rhs_target = m.rt or "v" }
  for k, v in pairs(extra) do opts[k] = v end
  local x = field(g, m.name, m.lt, m.lhs, level + 1)
  local run = M.ops._run
  if m.rhs then return run(fnx, c[1], c[2], c[3], x, field(g, m.name, m.rt, m.rhs, level + 1), opts) end
  return run(fnx, c[1], c[2], c[3], x, opts)
end

-- update_all(message, reduce): g.ndata[reduce's out] = every node's reduction of the
-- messages of its in-edges (one gspmm); the message's own out names what reduce reads
function Graph:update_all(message, reduce)
  local fnm = require("mx.dgl.fn")
  if getmetatable(reduce) ~= fnm.Reduce then
    error("update_all: the reduce function must be a built-in of mx.dgl.fn (sum, mean, max, "
      .. "min)", 2)
  end
  if getmetatable(message) == fnm.Message and message.out ~= reduce.msg then
    error(string.format("update_all: %s reads message '%s', %s writes '%s'", reduce.name,
      reduce.msg, message.name, message.out), 2)
  end
  local r = message_call(self, nd.gspmm, message, { reduce_op = reduce.reduce }, 2)
  self.ndata[reduce.out] = r
end

-- apply_edges(message): g.edata[message's out] = the message of every edge (one gsddmm)
function Graph:apply_edges(message)
  local r = message_call(self, nd.gsddmm, message, {}, 2)
  self.edata[message.out] = r
end

-- batch(graphs): one graph holding them all (node ids offset), batch_num_nodes() per part
function M.batch(graphs)
  if type(graphs) ~= "table" or #graphs == 0 then error("batch: expected a list of graphs", 2) end
  local s, d, off, counts, ecounts = {}, {}, 0, {}, {}
  for k, g in ipairs(graphs) do
    if getmetatable(g) ~= Graph then error("batch: element " .. k .. " is not a graph", 2) end
    for i = 1, #g._src do
      s[#s + 1], d[#d + 1] = g._src[i] + off, g._dst[i] + off
    end
    counts[k], ecounts[k] = g._n, #g._src
    off = off + g._n
  end
  local b = new_graph(s, d, off)
  b._batch_nodes, b._batch_edges = counts, ecounts
  -- the features every graph has, concatenated in graph order (DGL's batch does the same)
  for _, frame in ipairs({ "ndata", "edata" }) do
    for key, x in pairs(graphs[1][frame]) do
      local parts = { x }
      for k = 2, #graphs do parts[k] = graphs[k][frame][key] end
      if #parts == #graphs then
        local ok, r = pcall(nd.concat, parts, { dim = 1 })
        if not ok then
          error(string.format("batch: %s[%q] does not concatenate across the graphs: %s", frame,
            tostring(key), tostring(r):gsub("^[^\n]-:%d+: ", "")), 2)
        end
        b[frame][key] = r
      end
    end
  end
  return b
end
function Graph:batch_size() return self._batch_nodes and #self._batch_nodes or 1 end
function Graph:batch_num_nodes() return self._batch_nodes or { self._n } end
function Graph:batch_num_edges() return self._batch_edges or { #self._src } end

function Graph:__tostring()
  return string.format("Graph(num_nodes=%d, num_edges=%d)", self._n, #self._src)
end

-- Real graphs (docs/sparse.md): Zachary's karate club from networkx's source (Debian's
-- python3-networkx). Returns the undirected graph (both directions of each edge) and
-- the club labels (0 "Mr. Hi", 1 "Officer") per node, or nil and why.
local NX = { "/usr/lib/python3/dist-packages/networkx/generators/social.py" }
function M.karate_club()
  local f
  for _, p in ipairs(NX) do
    f = io.open(p, "r")
    if f then break end
  end
  if not f then return nil, "networkx's social.py not found (Debian package python3-networkx)" end
  local src = f:read("*a")
  f:close()
  local dat = src:match('zacharydat = """\\\n(.-)"""')
  local club1 = src:match("club1 = {([%d, ]+)}")
  if not dat or not club1 then return nil, "social.py: the karate club data was not found" end
  -- the matrix is not quite symmetric; networkx adds each entry as an undirected edge
  local s, d, row, seen = {}, {}, 0, {}
  for line in dat:gmatch("[^\n]+") do
    local col = 0
    for w in line:gmatch("%d+") do
      local a, b = math.min(row, col), math.max(row, col)
      if tonumber(w) >= 1 and not seen[a * 64 + b] then
        seen[a * 64 + b] = true
        s[#s + 1], d[#d + 1] = a, b
        s[#s + 1], d[#d + 1] = b, a
      end
      col = col + 1
    end
    row = row + 1
  end
  local labels = {}
  for v = 1, row do labels[v] = 1 end
  for v in club1:gmatch("%d+") do labels[tonumber(v) + 1] = 0 end
  return M.graph({ s, d }, { num_nodes = row }), labels
end

M.data = require("mx.dgl.data")
M.les_miserables, M.graph_atlas = M.data.les_miserables, M.data.graph_atlas
M.wormnet = M.data.wormnet
M.ops = require("mx.dgl.ops")
M.fn = require("mx.dgl.fn")
M.edge_softmax = M.ops.edge_softmax
M.nn = require("mx.dgl.nn")
return M
