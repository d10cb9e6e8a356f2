-- examples/gnn_real_graphs.lua — graph neural networks (mx.dgl) on the real graphs Debian's
-- python3-networkx ships, read from its files:
--   karate   a two-layer GAT (8 hidden x 2 heads) classifies Zachary's karate club members
--            from the two leaders' labels (transductive; accuracy over all 34)
--   lesmis   link prediction on Les Miserables' co-appearance network: a graph
--            auto-encoder (two GraphConv layers, u_dot_v scores) trained on 85% of the
--            edges; AUC on the held-out 15% against as many non-edges
--   atlas    graph classification over the Atlas of Graphs (the 1249 graphs of 3..7 nodes):
--            bipartite or not, a two-layer GIN (sum readout) on degree one-hot features,
--            trained on 80%, accuracy on the held-out 20% (and the majority rate)
--
--   wormnet  the same link prediction on WormNet v3's C. elegans gene network (2445 genes,
--            78736 links; one-hot features), 100 steps
--   bin/mx examples/gnn_real_graphs.lua [--task karate|lesmis|wormnet|atlas|all] [--seed N]
--       [--epochs N (task default)] [--threads N]
local mx = require("mx")
local nd, dgl, gluon = mx.nd, mx.dgl, mx.gluon
local function need(g, why)
  if not g then
    io.stderr:write(why, "\n")
    os.exit(1)
  end
end

local function train(net, steps, lr, loss_fn)
  local tr = gluon.Trainer(net:collect_params(), "adam", { learning_rate = lr })
  for _ = 1, steps do
    local L
    mx.autograd.record(function() L = loss_fn() end)
    L:backward()
    tr:step(1)
  end
end

---------------------------------------------------------------- karate: GAT
local function karate(epochs)
  local g, labels = dgl.karate_club()
  need(g, labels)
  g = g:add_self_loop()
  local n = g:num_nodes()
  local X = nd.one_hot(nd.arange(0, n), { depth = n })
  local Net = gluon.Block:extend("KarateGAT")
  function Net:__init()
    gluon.Block.__init(self)
    self.g1 = dgl.nn.GATConv(n, 8, 2, { activation = "relu" })
    self.g2 = dgl.nn.GATConv(16, 2, 1)
  end
  function Net:forward(gr, x)
    return self.g2(gr, self.g1(gr, x):reshape { n, 16 }):reshape { n, 2 }
  end
  local net = Net()
  net:initialize()
  local loss = gluon.loss.SoftmaxCrossEntropyLoss()
  local idx, lab = nd.array({ 0, 33 }, { dtype = "int64" }), nd.array({ labels[1], labels[34] })
  local t0 = os.clock()
  train(net, epochs or 100, 0.01, function() return loss(nd.take(net(g, X), idx), lab):sum() end)
  local pred = net(g, X):argmax({ axis = 2 }):tolist()
  local ok = 0
  for i = 1, n do if pred[i] - 1 == labels[i] then ok = ok + 1 end end
  return { acc = ok / n, correct = ok, n = n, seconds = os.clock() - t0 }
end

---------------------------------------------------------------- lesmis: link prediction
-- the probability that a held-out edge outscores a non-edge (ties half), from ranks
local function auc(pos, neg)
  local all = {}
  for _, p in ipairs(pos) do all[#all + 1] = { p, 1 } end
  for _, q in ipairs(neg) do all[#all + 1] = { q, 0 } end
  table.sort(all, function(a, b) return a[1] < b[1] end)
  local i, rsum = 1, 0
  while i <= #all do
    local j = i
    while j < #all and all[j + 1][1] == all[i][1] do j = j + 1 end
    for k = i, j do if all[k][2] == 1 then rsum = rsum + (i + j) / 2 end end
    i = j + 1
  end
  return (rsum - #pos * (#pos + 1) / 2) / (#pos * #neg)
end

local function shuffle(t)
  for i = #t, 2, -1 do
    local j = math.random(i)
    t[i], t[j] = t[j], t[i]
  end
  return t
end

local function link_prediction(g, epochs)
  local n = g:num_nodes()
  local s, d = g:edges()
  s, d = s:tolist(), d:tolist()
  local und, adj = {}, {}
  for i = 1, #s do
    adj[s[i] * n + d[i]] = true
    if s[i] < d[i] then und[#und + 1] = { s[i], d[i] } end
  end
  shuffle(und)
  local ntest = math.floor(#und * 0.15 + 0.5)
  local function non_edges(k)
    local out, seen = {}, {}
    while #out < k do
      local a, b = math.random(0, n - 1), math.random(0, n - 1)
      if a ~= b and not adj[a * n + b] and not seen[a * n + b] then
        seen[a * n + b], seen[b * n + a] = true, true
        out[#out + 1] = { a, b }
      end
    end
    return out
  end
  local test_pos, test_neg = {}, non_edges(ntest)
  local ts, td = {}, {}
  for i, e in ipairs(und) do
    if i <= ntest then test_pos[#test_pos + 1] = e
    else
      ts[#ts + 1], td[#td + 1] = e[1], e[2]
      ts[#ts + 1], td[#td + 1] = e[2], e[1]
    end
  end
  local gt = dgl.graph({ ts, td }, { num_nodes = n }):add_self_loop()
  local X = nd.one_hot(nd.arange(0, n), { depth = n })
  local Enc = gluon.Block:extend("LesMisGAE")
  function Enc:__init()
    gluon.Block.__init(self)
    self.c1 = dgl.nn.GraphConv(n, 32, { activation = "relu" })
    self.c2 = dgl.nn.GraphConv(32, 16)
  end
  function Enc:forward(gr, x) return self.c2(gr, self.c1(gr, x)) end
  local enc = Enc()
  enc:initialize()
  -- scores of node pairs: u_dot_v on a graph holding just those pairs
  local function pair_graph(pairs)
    local a, b = {}, {}
    for i, e in ipairs(pairs) do a[i], b[i] = e[1], e[2] end
    return dgl.graph({ a, b }, { num_nodes = n })
  end
  local train_pos = {}
  for i = 1, #ts, 2 do train_pos[#train_pos + 1] = { ts[i], td[i] } end
  local gpos = pair_graph(train_pos)
  local bce = gluon.loss.SigmoidBinaryCrossEntropyLoss()
  local ones = nd.ones({ #train_pos, 1 })
  local zeros = nd.zeros({ #train_pos, 1 })
  local t0 = os.clock()
  train(enc, epochs or 200, 0.01, function()
    local z = enc(gt, X)
    local gneg = pair_graph(non_edges(#train_pos)) -- fresh negatives every step
    local lp = bce(dgl.ops.u_dot_v(gpos, z, z), ones):mean()
    local ln = bce(dgl.ops.u_dot_v(gneg, z, z), zeros):mean()
    return lp + ln
  end)
  local z = enc(gt, X)
  local sp = dgl.ops.u_dot_v(pair_graph(test_pos), z, z):tolist()
  local sn = dgl.ops.u_dot_v(pair_graph(test_neg), z, z):tolist()
  return { auc = auc(sp, sn), test = #test_pos, train = #train_pos, seconds = os.clock() - t0 }
end

local function lesmis(epochs)
  local g, why = dgl.les_miserables()
  need(g, why)
  return link_prediction(g, epochs)
end

local function wormnet(epochs)
  local g, why = dgl.wormnet()
  need(g, why)
  return link_prediction(g, epochs or 100)
end

---------------------------------------------------------------- atlas: graph classification
local function bipartite(g)
  local s, d = g:edges()
  s, d = s:tolist(), d:tolist()
  local nb, col = {}, {}
  for v = 0, g:num_nodes() - 1 do nb[v] = {} end
  for i = 1, #s do nb[s[i]][#nb[s[i]] + 1] = d[i] end
  for v0 = 0, g:num_nodes() - 1 do
    if not col[v0] then
      col[v0] = 0
      local q, h = { v0 }, 1
      while q[h] do
        local v = q[h]
        h = h + 1
        for _, u in ipairs(nb[v]) do
          if col[u] == nil then col[u] = 1 - col[v]; q[#q + 1] = u
          elseif col[u] == col[v] then return false end
        end
      end
    end
  end
  return true
end

local function atlas(epochs)
  local all, why = dgl.graph_atlas()
  need(all, why)
  local gs, ys = {}, {}
  for _, g in ipairs(all) do
    if g:num_nodes() >= 3 then gs[#gs + 1], ys[#ys + 1] = g, bipartite(g) and 1 or 0 end
  end
  local order = {}
  for i = 1, #gs do order[i] = i end
  shuffle(order)
  local ntr = math.floor(#gs * 0.8)
  local function part(from, to)
    local list, lab, deg = {}, {}, {}
    for k = from, to do
      local g = gs[order[k]]
      list[#list + 1], lab[#lab + 1] = g, ys[order[k]]
      for _, x in ipairs(g:in_degrees():tolist()) do deg[#deg + 1] = x end
    end
    local b = dgl.batch(list)
    return b, nd.one_hot(nd.array(deg), { depth = 7 }), nd.array(lab)
  end
  local btr, xtr, ytr = part(1, ntr)
  local bte, xte, yte = part(ntr + 1, #gs)
  local Net = gluon.Block:extend("AtlasGIN")
  function Net:__init()
    gluon.Block.__init(self)
    local function mlp(i)
      local m = gluon.nn.Sequential()
      m:add(gluon.nn.Dense(32, { in_units = i, activation = "relu" }))
      m:add(gluon.nn.Dense(32, { in_units = 32, activation = "relu" }))
      return m
    end
    self.gin1 = dgl.nn.GINConv(mlp(7), "sum", { learn_eps = true })
    self.gin2 = dgl.nn.GINConv(mlp(32), "sum", { learn_eps = true })
    self.pool = dgl.nn.SumPooling()
    self.out = gluon.nn.Dense(2, { in_units = 32 })
  end
  function Net:forward(b, x) return self.out(self.pool(b, self.gin2(b, self.gin1(b, x)))) end
  local net = Net()
  net:initialize()
  local loss = gluon.loss.SoftmaxCrossEntropyLoss()
  local t0 = os.clock()
  train(net, epochs or 300, 0.01, function() return loss(net(btr, xtr), ytr):mean() end)
  local function acc(b, x, y)
    local p, l = net(b, x):argmax({ axis = 2 }):tolist(), y:tolist()
    local ok = 0
    for i = 1, #l do if p[i] - 1 == l[i] then ok = ok + 1 end end
    return ok / #l
  end
  local pos = 0
  for _, v in ipairs(yte:tolist()) do pos = pos + v end
  local major = math.max(pos, yte:size() - pos) / yte:size()
  return { acc = acc(bte, xte, yte), train_acc = acc(btr, xtr, ytr), majority = major,
    graphs = #gs, test = yte:size(), seconds = os.clock() - t0 }
end

local M = { karate = karate, lesmis = lesmis, wormnet = wormnet, atlas = atlas }
if ... == "gnn_real_graphs" then return M end -- required as a module: the tasks only

local dir = arg[0]:match("^(.*[/\\])") or "./"
local USAGE = [==[
usage: gnn_real_graphs.lua [--task karate|lesmis|wormnet|atlas|all] [--seed N] [--epochs N] [--threads N]]==]
local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE, defaults = { task = "all", seed = 0 },
  numeric = { seed = true, epochs = true, threads = true }, string = { task = true },
  choices = { task = { "karate", "lesmis", "wormnet", "atlas", "all" } } })
if opts.threads then mx.set_num_threads(opts.threads) end

for _, t in ipairs({ "karate", "lesmis", "wormnet", "atlas" }) do
  if opts.task == "all" or opts.task == t then
    mx.random.seed(opts.seed)
    math.randomseed(opts.seed)
    local r = M[t](opts.epochs)
    if t == "karate" then
      print(string.format("karate GAT: %d/%d members right (%.1f%%), %.1f s", r.correct, r.n,
        100 * r.acc, r.seconds))
    elseif t == "lesmis" or t == "wormnet" then
      print(string.format(t .. " GAE: test AUC %.3f (%d held-out edges, %d training), %.1f s",
        r.auc, r.test, r.train, r.seconds))
    else
      print(string.format("atlas GIN: test accuracy %.1f%% (train %.1f%%, majority %.1f%%; "
        .. "%d graphs, %d held out), %.1f s", 100 * r.acc, 100 * r.train_acc, 100 * r.majority,
        r.graphs, r.test, r.seconds))
    end
  end
end
