-- mx.dgl: graphs on the sparse kernels, message passing (copy_u_sum/mean) and GraphConv,
-- checked against the dense formulas; GCN on Zachary's karate club (networkx's data)
local mx = require("mx")
local nd = mx.nd
local dgl = mx.dgl
local close = require("helpers.close").within(1e-5)

local function flat(t) return t:tolist() end

describe("mx.dgl graphs", function()
  it("builds from edge lists and csr, with degrees, self loops, reverse and batching", function()
    local g = dgl.graph({ { 0, 0, 1, 3 }, { 1, 2, 2, 0 } })
    assert.are.equal(4, g:num_nodes())
    assert.are.equal(4, g:num_edges())
    assert.are.same({ 1, 1, 2, 0 }, flat(g:in_degrees()))
    assert.are.same({ 2, 1, 0, 1 }, flat(g:out_degrees()))
    local s, d = g:edges()
    assert.are.same({ 0, 0, 1, 3 }, flat(s))
    assert.are.same({ 1, 2, 2, 0 }, flat(d))
    assert.are.equal("csr", g:adj():stype())
    assert.are.same({ { 0, 1, 1, 0 }, { 0, 0, 1, 0 }, { 0, 0, 0, 0 }, { 1, 0, 0, 0 } }, g:adj():totable())
    local l = g:add_self_loop()
    assert.are.equal(8, l:num_edges())
    assert.are.same({ 2, 2, 3, 1 }, flat(l:in_degrees()))
    assert.are.same(flat(g:out_degrees()), flat(g:reverse():in_degrees()))
    assert.are.equal(6, dgl.graph({ { 0 }, { 1 } }, { num_nodes = 6 }):num_nodes())
    local c = dgl.from_csr({ 0, 2, 3, 3 }, { 1, 2, 0 })
    assert.are.same({ { 0, 1, 1 }, { 1, 0, 0 }, { 0, 0, 0 } }, c:adj():totable())
    local b = dgl.batch({ g, c })
    assert.are.equal(7, b:num_nodes())
    assert.are.same({ 4, 3 }, b:batch_num_nodes())
    assert.are.same({ 4, 3 }, b:batch_num_edges())
    assert.are.equal(1, b:adj():totable()[5][6]) -- c's 0 -> 1 at offset 4
    assert.are.equal("Graph(num_nodes=7, num_edges=7)", tostring(b))
    g.ndata.h, c.ndata.h = nd.ones({ 4, 2 }), nd.zeros({ 3, 2 })
    g.edata.w, c.edata.w = nd.ones({ 4 }), nd.zeros({ 3 })
    g.ndata.only = nd.ones({ 4 })
    local b2 = dgl.batch({ g, c })
    assert.are.same({ 2, 2, 2, 2, 0, 0, 0 }, flat(b2.ndata.h:sum({ axis = 2 })))
    assert.are.same({ 1, 1, 1, 1, 0, 0, 0 }, flat(b2.edata.w))
    assert.is_nil(b2.ndata.only)
  end)

  it("rejects bad edges and options with clear messages", function()
    local function err(f, want)
      local ok, e = pcall(f)
      assert.is_false(ok)
      assert.matches(want, tostring(e), 1, true)
      assert.matches("dgl_spec.lua", tostring(e), 1, true)
    end
    err(function() dgl.graph({ { 0, 1 }, { 1 } }) end, "src has 2 ids and dst 1")
    err(function() dgl.graph({ { 0, -1 }, { 1, 1 } }) end, "src[2] = -1 is not a 0-based node id")
    err(function() dgl.graph({ { 0, 5 }, { 1, 1 } }, { num_nodes = 3 }) end, "num_nodes 3")
    err(function() dgl.graph({ { 0 }, { 1 } }, { nodes = 3 }) end, "unknown option 'nodes'")
    err(function() dgl.copy_u_sum(dgl.graph({ { 0 }, { 1 } }), nd.ones({ 3, 2 })) end, "a row per node (2)")
  end)

  it("copy_u_sum and copy_u_mean aggregate in-neighbours as the dense product", function()
    local g = dgl.graph({ { 0, 0, 1, 3, 3 }, { 1, 2, 2, 0, 2 } })
    local x = nd.arange(1, 9):reshape { 4, 2 }
    local A = g:adj():tostype("default")
    close(flat(dgl.copy_u_sum(g, x)), flat(nd.dot(A, x, { transpose_a = true })))
    local m = dgl.copy_u_mean(g, x):totable()
    assert.are.same({ { 7, 8 }, { 1, 2 }, { 0, 0 } }, { m[1], m[2], m[4] })
    close({ m[3][1], m[3][2] }, { (1 + 3 + 7) / 3, (2 + 4 + 8) / 3 })
  end)
end)

describe("mx.dgl.nn.GraphConv", function()
  -- D_in^-1/2 A^T D_out^-1/2 X W + b, densely
  local function dense_gcn(g, x, w, b)
    local A = g:adj():tostype("default")
    local din, dout = flat(g:in_degrees()), flat(g:out_degrees())
    for i = 1, #din do din[i] = math.max(din[i], 1) ^ -0.5 end
    for i = 1, #dout do dout[i] = math.max(dout[i], 1) ^ -0.5 end
    local n = #din
    local h = nd.mul(x, nd.array(dout):reshape { n, 1 })
    h = nd.dot(nd.dot(A, h, { transpose_a = true }), w)
    return nd.add(nd.mul(h, nd.array(din):reshape { n, 1 }), b:reshape { 1, -1 })
  end

  for _, sizes in ipairs({ { 3, 5 }, { 5, 2 } }) do -- aggregate first, and multiply first
    it(("matches the dense GCN formula and its gradients (%d -> %d)"):format(sizes[1], sizes[2]), function()
      mx.random.seed(1)
      local g = dgl.graph({ { 0, 0, 1, 3, 3, 2 }, { 1, 2, 2, 0, 2, 3 } }):add_self_loop()
      local conv = dgl.nn.GraphConv(sizes[1], sizes[2])
      conv:initialize()
      conv.bias:set_data(nd.arange(1, sizes[2] + 1) * 0.1)
      local x = nd.random.uniform(-1, 1, { 4, sizes[1] })
      local x2 = x:copy()
      x:attach_grad()
      x2:attach_grad()
      local y, y2
      local head = nd.random.uniform(-1, 1, { 4, sizes[2] })
      mx.autograd.record(function() y = conv(g, x) end)
      y:backward(head)
      local gw = conv.weight:grad():copy()
      local w = conv.weight:data():copy()
      w:attach_grad()
      mx.autograd.record(function() y2 = dense_gcn(g, x2, w, conv.bias:data()) end)
      y2:backward(head)
      close(flat(y), flat(y2))
      close(flat(x:grad()), flat(x2:grad()))
      close(flat(gw), flat(w:grad()))
    end)
  end

  it("refuses nodes without in-edges unless allowed", function()
    local g = dgl.graph({ { 0 }, { 1 } })
    local conv = dgl.nn.GraphConv(2, 2)
    conv:initialize()
    local ok, e = pcall(function() return conv(g, nd.ones({ 2, 2 })) end)
    assert.is_false(ok)
    assert.matches("node 0 has no in%-edges", tostring(e))
    local c2 = dgl.nn.GraphConv(2, 2, { allow_zero_in_degree = true, norm = "right" })
    c2:initialize()
    assert.are.same({ 2, 2 }, c2(g, nd.ones({ 2, 2 })):shape())
  end)

  it("classifies Zachary's karate club from two labelled members", function()
    local g, labels = dgl.karate_club()
    if not g then pending(labels) return end
    assert.are.equal(34, g:num_nodes())
    assert.are.equal(156, g:num_edges()) -- 78 undirected edges
    g = g:add_self_loop()
    local n = 34
    local X = nd.zeros({ n, n })
    for i = 1, n do X[{ i, i }] = 1 end
    local gluon = mx.gluon
    mx.random.seed(0)
    local Net = gluon.Block:extend("KarateGCN")
    function Net:__init()
      gluon.Block.__init(self)
      self.c1 = dgl.nn.GraphConv(n, 16, { activation = "relu" })
      self.c2 = dgl.nn.GraphConv(16, 2)
    end
    function Net:forward(gr, x) return self.c2(gr, self.c1(gr, x)) end
    local net = Net()
    net:initialize()
    local tr = gluon.Trainer(net:collect_params(), "adam", { learning_rate = 0.01 })
    local loss = gluon.loss.SoftmaxCrossEntropyLoss()
    local idx, lab = nd.array({ 0, 33 }, { dtype = "int64" }), nd.array({ labels[1], labels[34] })
    for _ = 1, 100 do
      local L
      mx.autograd.record(function()
        L = loss(nd.take(net(g, X), idx), lab):sum()
      end)
      L:backward()
      tr:step(1)
    end
    local pred = net(g, X):argmax({ axis = 2 }):tolist()
    local ok = 0
    for i = 1, n do if pred[i] - 1 == labels[i] then ok = ok + 1 end end
    assert.is_true(ok / n >= 0.9, "accuracy " .. ok / n)
  end)
end)

describe("mx.dgl.nn SAGEConv, GINConv and readouts", function()
  local g = dgl.graph({ { 0, 0, 1, 3, 3, 2 }, { 1, 2, 2, 0, 2, 3 } })
  local x = nd.arange(1, 13):reshape { 4, 3 } * 0.1
  local A = g:adj():tostype("default")
  local indeg = flat(g:in_degrees())

  local function col(t) return nd.array(t):reshape { #t, 1 } end

  it("SAGEConv mean and gcn match their dense formulas", function()
    mx.random.seed(2)
    local s = dgl.nn.SAGEConv(3, 2, "mean", { activation = "relu" })
    s:initialize()
    local inv = {}
    for i = 1, #indeg do inv[i] = indeg[i] > 0 and 1 / indeg[i] or 0 end
    local mean = nd.mul(nd.dot(A, x, { transpose_a = true }), col(inv))
    local want = nd.relu(nd.add(nd.dot(x, s.fc_self:data()), nd.dot(mean, s.fc_neigh:data())))
    close(flat(s(g, x)), flat(want))
    local c = dgl.nn.SAGEConv(3, 2, "gcn")
    c:initialize()
    for i = 1, #indeg do inv[i] = 1 / (indeg[i] + 1) end
    local agg = nd.mul(nd.add(nd.dot(A, x, { transpose_a = true }), x), col(inv))
    close(flat(c(g, x)), flat(nd.dot(agg, c.fc_neigh:data())))
    local ok, e = pcall(dgl.nn.SAGEConv, 3, 2, "median")
    assert.is_false(ok)
    assert.matches("aggregator_type must be 'mean', 'gcn', 'pool' or 'lstm'", tostring(e))
  end)

  it("SAGEConv pool: W_self h + W_neigh max over in-neighbours of relu(fc_pool h) + b", function()
    mx.random.seed(3)
    local s = dgl.nn.SAGEConv(3, 2, "pool")
    s:initialize()
    s.bias:set_data(nd.array({ 0.1, -0.2 }))
    local p = nd.relu(s.fc_pool(x)):tolist() -- (4, 3)
    local src, dst = g:edges()
    src, dst = src:tolist(), dst:tolist()
    local mx_ = {}
    for v = 0, 3 do
      for f = 1, 3 do
        local m
        for i = 1, #src do
          if dst[i] == v then m = math.max(m or -math.huge, p[src[i] * 3 + f]) end
        end
        mx_[v * 3 + f] = m or 0
      end
    end
    local neigh = nd.array(mx_):reshape { 4, 3 }
    local want = nd.add(nd.add(nd.dot(x, s.fc_self:data()), nd.dot(neigh, s.fc_neigh:data())),
      s.bias:data():reshape { 1, 2 })
    close(flat(s(g, x)), flat(want))
  end)

  it("SAGEConv lstm: the LSTM's last state over each node's in-neighbours in edge order", function()
    mx.random.seed(4)
    local s = dgl.nn.SAGEConv(3, 2, "lstm")
    s:initialize()
    local src, dst = g:edges()
    src, dst = src:tolist(), dst:tolist()
    local rows = {}
    for v = 0, 3 do
      local seq = {}
      for i = 1, #src do if dst[i] == v then seq[#seq + 1] = src[i] + 1 end end
      if #seq == 0 then
        rows[v + 1] = nd.zeros({ 1, 3 })
      else -- one node at a time, its sequence alone
        local xs = nd.take(x, nd.array(seq, { dtype = "int64" })):reshape { 1, #seq, 3 }
        local _, st = s.lstm(xs, s.lstm:begin_state(1))
        rows[v + 1] = st[1]:reshape { 1, 3 }
      end
    end
    local neigh = nd.concat(rows, { dim = 1 })
    local want = nd.add(nd.dot(x, s.fc_self:data()), nd.dot(neigh, s.fc_neigh:data()))
    close(flat(s(g, x)), flat(want))
    local xv = x:copy()
    xv:attach_grad()
    local y
    mx.autograd.record(function() y = s(g, xv):sum() end)
    y:backward()
    assert.is_true(nd.abs(xv:grad()):sum():item() > 0)
  end)

  it("GINConv: (1 + eps) h + the neighbours' sum, then apply_func, with gradients", function()
    local gin = dgl.nn.GINConv(nil, "sum", { init_eps = 0.5 })
    gin:initialize()
    local want = nd.add(nd.mul_scalar(x, { scalar = 1.5 }), nd.dot(A, x, { transpose_a = true }))
    close(flat(gin(g, x)), flat(want))
    local fc = mx.gluon.nn.Dense(2, { in_units = 3 })
    local gin2 = dgl.nn.GINConv(fc, "mean", { learn_eps = true })
    gin2:initialize()
    local xv = x:copy()
    xv:attach_grad()
    local y
    mx.autograd.record(function() y = gin2(g, xv):sum() end)
    y:backward()
    assert.are.same({ 4, 3 }, xv:grad():shape())
    local inv = {}
    for i = 1, #indeg do inv[i] = indeg[i] > 0 and 1 / indeg[i] or 0 end
    local h = nd.add(x, nd.mul(nd.dot(A, x, { transpose_a = true }), col(inv)))
    close(flat(gin2(g, x)), flat(fc(h)))
    assert.is_true(math.abs(gin2.eps:grad():item()) > 0)
  end)

  it("GINConv max: (1 + eps) h + the in-neighbours' maximum (0 for none)", function()
    local gin = dgl.nn.GINConv(nil, "max", { init_eps = 0.25 })
    gin:initialize()
    -- in-edges: 0 <- 3; 1 <- 0; 2 <- 0, 1, 3; 3 <- 2 (x rows increase, so the largest id wins)
    local xs = x:tolist()
    local function row(i) return { xs[i * 3 + 1], xs[i * 3 + 2], xs[i * 3 + 3] } end
    local nb = { row(3), row(0), row(3), row(2) }
    local want = {}
    for v = 0, 3 do
      local r = row(v)
      for f = 1, 3 do want[v * 3 + f] = 1.25 * r[f] + nb[v + 1][f] end
    end
    close(flat(gin(g, x)), want)
    local iso = dgl.graph({ { 0 }, { 1 } }, { num_nodes = 3 })
    local g2 = dgl.nn.GINConv(nil, "max", { init_eps = 0.25 })
    g2:initialize()
    assert.are.same({ 1.25, 1.25, 2.25, 2.25, 1.25, 1.25 }, flat(g2(iso, nd.ones({ 3, 2 }))))
  end)

  it("Sum/Avg/MaxPooling read out each graph of a batch", function()
    local b = dgl.batch({ g, dgl.graph({ { 0 }, { 1 } }) })
    local feats = nd.arange(1, 13):reshape { 6, 2 }
    assert.are.same({ { 16, 20 }, { 20, 22 } }, dgl.nn.SumPooling()(b, feats):totable())
    assert.are.same({ { 4, 5 }, { 10, 11 } }, dgl.nn.AvgPooling()(b, feats):totable())
    assert.are.same({ { 7, 8 }, { 11, 12 } }, dgl.nn.MaxPooling()(b, feats):totable())
    assert.are.same({ { 16, 20 } }, dgl.nn.SumPooling()(g, nd.arange(1, 9):reshape { 4, 2 }):totable())
  end)
end)

describe("mx.dgl.nn.GATConv", function()
  -- the dense formula: masked attention over the adjacency, per head
  local function dense_gat(gat, g, x, w, al, ar)
    local n, H, F = g:num_nodes(), gat._heads, gat._out
    local z = nd.dot(x, w, { transpose_b = true }):reshape { n, H, F }
    local el = nd.sum(nd.mul(z, al), { axis = 3 }) -- (n, H)
    local er = nd.sum(nd.mul(z, ar), { axis = 3 })
    -- s[h, v, u] = el[u, h] + er[v, h]
    local s = nd.add(nd.transpose(el):reshape { H, 1, n }, nd.transpose(er):reshape { H, n, 1 })
    s = nd.leaky_relu(s, { act_type = "leaky", slope = 0.2 })
    local A = g:adj():tostype("default"):tolist() -- A[u][v]
    local mask = {}
    for v = 1, n do for u = 1, n do mask[(v - 1) * n + u] = A[(u - 1) * n + v] > 0 and 0 or -1e30 end end
    s = nd.add(s, nd.array(mask, { dtype = x:dtype() }):reshape { 1, n, n })
    local alpha = nd.softmax(s, { axis = 3 }) -- (H, v, u)
    local zt = nd.transpose(z, { axes = { 2, 1, 3 } }) -- (H, u, F)
    local out = nd.batch_dot(alpha, zt) -- (H, v, F)
    return nd.transpose(out, { axes = { 2, 1, 3 } })
  end

  it("matches the dense attention formula per head, with its gradients", function()
    mx.random.seed(11)
    local g = dgl.graph({ { 0, 0, 1, 3, 3, 2 }, { 1, 2, 2, 0, 2, 3 } }):add_self_loop()
    local gat = dgl.nn.GATConv(3, 2, 4)
    gat:initialize()
    local x = nd.random.uniform(-1, 1, { 4, 3 })
    local x2 = x:copy()
    x:attach_grad()
    x2:attach_grad()
    local head = nd.random.uniform(-1, 1, { 4, 4, 2 })
    local y, att
    mx.autograd.record(function() y, att = gat(g, x, true) end)
    assert.are.same({ 4, 4, 2 }, y:shape())
    assert.are.same({ 10, 4, 1 }, att:shape())
    y:backward(head)
    local gw = gat.fc.weight:grad():copy()
    local w = gat.fc.weight:data():copy()
    w:attach_grad()
    local y2
    mx.autograd.record(function()
      y2 = dense_gat(gat, g, x2, w, gat.attn_l:data(), gat.attn_r:data())
    end)
    y2:backward(head)
    close(flat(y), flat(y2))
    close(flat(x:grad()), flat(x2:grad()))
    close(flat(gw), flat(w:grad()))
    -- attention sums to 1 over each node's in-edges
    local a, d = att:tolist(), flat(select(2, g:edges()))
    for v = 0, 3 do
      for h = 1, 4 do
        local s = 0
        for i = 1, #d do if d[i] == v then s = s + a[(i - 1) * 4 + h] end end
        assert.is_true(math.abs(s - 1) < 1e-5)
      end
    end
  end)

  it("residual, activation and the zero-in-degree check", function()
    mx.random.seed(12)
    local g = dgl.graph({ { 0, 1, 2 }, { 1, 2, 0 } })
    local gat = dgl.nn.GATConv(4, 2, 2, { residual = true, activation = "relu" })
    gat:initialize()
    local x = nd.random.uniform(-1, 1, { 3, 4 })
    local plain = dgl.nn.GATConv(4, 2, 2)
    plain:initialize()
    plain.fc.weight:set_data(gat.fc.weight:data())
    plain.attn_l:set_data(gat.attn_l:data())
    plain.attn_r:set_data(gat.attn_r:data())
    -- in_feats 4 = heads * out_feats: the residual is the identity
    local want = nd.relu(nd.add(plain(g, x), x:reshape { 3, 2, 2 }))
    close(flat(gat(g, x)), flat(want))
    local lone = dgl.nn.GATConv(4, 2, 2)
    lone:initialize()
    local ok, e = pcall(function() return lone(dgl.graph({ { 0 }, { 1 } }), nd.ones({ 2, 4 })) end)
    assert.is_false(ok)
    assert.matches("node 0 has no in%-edges", tostring(e))
    ok, e = pcall(dgl.nn.GATConv, 4, 2, 2, { feat_drop = 1.5 })
    assert.is_false(ok)
    assert.matches("feat_drop must be a rate", tostring(e))
  end)
end)

describe("mx.dgl real graphs (networkx's files)", function()
  package.path = "examples/?.lua;" .. package.path
  local tasks = require("gnn_real_graphs")

  it("reads Les Miserables, WormNet and the Atlas of Graphs as networkx builds them", function()
    local g, names = dgl.les_miserables()
    if not g then pending(names) return end
    assert.are.equal(77, g:num_nodes())
    assert.are.equal(508, g:num_edges()) -- 254 undirected
    assert.are.equal("Napoleon", names[1])
    assert.are.equal("Labarre", names[12])
    assert.are.equal(1640, g.edata.weight:sum():item()) -- twice networkx's total weight
    local w, wn = dgl.wormnet()
    if not w then pending(wn) return end
    assert.are.equal(2445, w:num_nodes())
    assert.are.equal(2 * 78736, w:num_edges())
    assert.are.same({ "C41D11.8", "AH9.2", "CD4.2" }, { wn[1], wn[2], wn[3] })
    local atlas, why = dgl.graph_atlas()
    if not atlas then pending(why) return end
    assert.are.equal(1253, #atlas)
    assert.are.equal(0, atlas[1]:num_nodes())
    assert.are.equal(7, atlas[1253]:num_nodes())
    assert.are.equal(42, atlas[1253]:num_edges()) -- G1252 is K7
    assert.are.same({ 2, 1, 1 }, flat(atlas[7]:in_degrees())) -- G6: edges 0-1, 0-2
  end)

  it("a GAT classifies the karate club from two labelled members", function()
    if not dgl.karate_club() then pending("no networkx") return end
    mx.random.seed(0)
    math.randomseed(0)
    local r = tasks.karate(100)
    assert.is_true(r.acc >= 0.85, "accuracy " .. r.acc)
  end)

  it("a graph auto-encoder predicts held-out Les Miserables co-appearances", function()
    if not dgl.les_miserables() then pending("no networkx") return end
    mx.random.seed(0)
    math.randomseed(0)
    local r = tasks.lesmis(200)
    assert.is_true(r.auc >= 0.85, "AUC " .. r.auc)
  end)

  it("a graph auto-encoder predicts held-out WormNet gene links #slow", function()
    if not dgl.wormnet() then pending("no networkx") return end
    mx.random.seed(0)
    math.randomseed(0)
    local r = tasks.wormnet(100)
    assert.is_true(r.auc >= 0.9, "AUC " .. r.auc)
  end)

  it("a GIN tells bipartite graphs of the atlas above the majority rate #slow", function()
    if not dgl.graph_atlas() then pending("no networkx") return end
    mx.random.seed(0)
    math.randomseed(0)
    local r = tasks.atlas(300)
    assert.is_true(r.acc >= r.majority + 0.04, ("accuracy %g, majority %g"):format(r.acc, r.majority))
  end)
end)
