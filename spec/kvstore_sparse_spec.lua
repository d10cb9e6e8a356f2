-- mx.kv with row_sparse values on one process ('local', 'device'): pushes of row_sparse
-- gradients from several devices, row_sparse_pull, pull's ignore_sparse, and
-- gluon.Trainer with sparse gradients and row_sparse Parameters against the dense path
-- (MXNet 1.9 semantics; the dist stores are in dist_sync_spec.lua and dist_async_spec.lua).
local mx = require("mx")
local nd, gluon = mx.nd, mx.gluon
local err_at = require("helpers.err_at")("kvstore_sparse_spec.lua")

local function line() return debug.getinfo(2, "l").currentline + 1 end
local function rsp(rows, ids, shape, ctx)
  return nd.sparse.row_sparse_array({ rows, ids }, { shape = shape, ctx = ctx })
end
local function maxdiff(a, b)
  local x, y = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  local m = 0
  for i = 1, #x do m = math.max(m, math.abs(x[i] - y[i])) end
  return m
end

describe("mx.kv row_sparse values", function()
  for _, kind in ipairs({ "local", "device" }) do
    it(kind .. ": a push of row_sparse values from two devices sums their rows only, as a "
      .. "dense push of the same values", function()
      local kv = mx.kv.create(kind)
      kv:init(3, nd.zeros({ 1000, 2 }))
      kv:init(4, nd.zeros({ 1000, 2 }))
      local g1 = rsp({ { 1, 1 }, { 2, 2 } }, { 0, 2 }, { 1000, 2 })
      local g2 = rsp({ { 10, 10 }, { 5, 6 } }, { 2, 999 }, { 1000, 2 }, mx.cpu(1))
      local before = kv._rows_reduced or 0
      kv:push(3, { g1, g2 })
      -- the merged value holds the union of the rows: 3 of the 1000
      assert.are.equal(3, kv._rows_reduced - before)
      kv:push(4, { g1:tostype("default"), g2:tostype("default") })
      local a, b = nd.zeros({ 1000, 2 }), nd.zeros({ 1000, 2 })
      kv:pull(3, a)
      kv:pull(4, b)
      assert.are.equal(0, maxdiff(a, b))
      assert.are.same({ 1, 1 }, a[1]:tolist())
      assert.are.same({ 12, 12 }, a[3]:tolist())
      assert.are.same({ 5, 6 }, a[1000]:tolist())
      -- no updater: the store keeps the merged row_sparse value (MXNet's local store)
      assert.are.equal("row_sparse", kv._store[3]:stype())
    end)
  end

  it("row_sparse_pull: the listed rows (repeats and any order) into row_sparse outs on any "
    .. "device, one row_ids for every out or one per out", function()
    local kv = mx.kv.create("device")
    kv:init("w", nd.arange(0, 12):reshape({ 6, 2 }))
    local o = nd.sparse.zeros("row_sparse", { 6, 2 })
    kv:row_sparse_pull("w", o, { row_ids = nd.array({ 4, 1, 4 }) })
    assert.are.equal("row_sparse", o:stype())
    assert.are.same({ 1, 4 }, o:indices():tolist())
    assert.are.same({ { 2, 3 }, { 8, 9 } }, o:data():totable())
    local outs = { nd.sparse.zeros("row_sparse", { 6, 2 }),
      nd.sparse.zeros("row_sparse", { 6, 2 }, { ctx = mx.cpu(1) }) }
    kv:row_sparse_pull("w", outs, { row_ids = nd.array({ 5 }, { dtype = "int64" }) })
    for d = 1, 2 do assert.are.same({ 5 }, outs[d]:indices():tolist()) end
    assert.are.equal(mx.cpu(1), outs[2]:context())
    -- MXNet's positional form: (key, out, priority, row_ids), an id list per out
    kv:row_sparse_pull("w", outs, 0, { nd.array({ 0 }), nd.array({ 2, 3 }) })
    assert.are.same({ 0 }, outs[1]:indices():tolist())
    assert.are.same({ { 4, 5 }, { 6, 7 } }, outs[2]:data():totable())
    -- no rows asked: no stored rows
    kv:row_sparse_pull("w", o, { row_ids = nd.zeros({ 0 }) })
    assert.are.equal(0, o:nnz())
  end)

  it("an optimizer on the store updates the pushed rows only (lazily); pull skips row_sparse "
    .. "outs unless ignore_sparse is false", function()
    local kv = mx.kv.create("local")
    kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 1, wd = 0.5 }))
    kv:init(1, nd.ones({ 4, 2 }))
    kv:push(1, { rsp({ { 1, 2 } }, { 1 }, { 4, 2 }), rsp({ { 1, 1 } }, { 1 }, { 4, 2 }, mx.cpu(1)) })
    local w = nd.zeros({ 4, 2 })
    kv:pull(1, w)
    -- row 1: 1 - (2 + 0.5), 1 - (3 + 0.5); the other rows keep their value (no decay)
    assert.are.same({ { 1, 1 }, { -1.5, -2.5 }, { 1, 1 }, { 1, 1 } }, w:totable())
    local o = nd.sparse.zeros("row_sparse", { 4, 2 })
    kv:pull(1, o) -- ignored, as MXNet's default ignore_sparse=true
    assert.are.equal(0, o:nnz())
    kv:pull(1, o, 0, false)
    assert.are.same({ 0, 1, 2, 3 }, o:indices():tolist())
  end)

  it("errors name the key, the out and the rows, at the caller's line", function()
    local kv = mx.kv.create("local")
    kv:init(1, nd.zeros({ 4, 2 }))
    local o, d = nd.sparse.zeros("row_sparse", { 4, 2 }), nd.zeros({ 4, 2 })
    local l = line()
    local msg = err_at(function() kv:row_sparse_pull(1, d, { row_ids = nd.array({ 0 }) }) end, l)
    assert.matches("out 1 for key 1 is default; row_sparse_pull fills row_sparse outs", msg)
    l = line()
    msg = err_at(function() kv:row_sparse_pull(1, o, { row_ids = nd.array({ 4 }) }) end, l)
    assert.matches("row id 4 is outside the key's 4 rows", msg)
    l = line()
    msg = err_at(function() kv:row_sparse_pull(1, o) end, l)
    assert.matches("row_ids is required", msg)
    l = line()
    msg = err_at(function() kv:row_sparse_pull(1, o, { rows = 1 }) end, l)
    assert.matches("rows", msg)
    l = line()
    msg = err_at(function() kv:push(1, { rsp({ { 1, 1 } }, { 0 }, { 4, 2 }), nd.ones({ 4, 2 }) }) end, l)
    assert.matches("key 1: value 2 is default but value 1 is row_sparse", msg)
    kv:set_gradient_compression({ type = "2bit", threshold = 0.5 })
    l = line()
    msg = err_at(function() kv:push(1, rsp({ { 1, 1 } }, { 0 }, { 4, 2 })) end, l)
    assert.matches("gradient compression does not apply to row_sparse values", msg)
  end)
end)

describe("gluon.Trainer with sparse gradients on several devices", function()
  local ctxs = { mx.cpu(0), mx.cpu(1) }
  local function run(sparse, kvs, uok, optimizer, oparams)
    mx.random.seed(1)
    local net = gluon.nn.Embedding(10, 3, { sparse_grad = sparse })
    net:initialize(mx.init.Normal(1), ctxs)
    local tr = gluon.Trainer(net:collect_params(), optimizer or "sgd",
      oparams or { learning_rate = 0.5 }, { kvstore = kvs, update_on_kvstore = uok })
    local xs = { nd.array({ { 1, 2 }, { 2, 3 } }, { ctx = ctxs[1] }),
      nd.array({ { 5, 2 }, { 7, 7 } }, { ctx = ctxs[2] }) }
    for _ = 1, 3 do
      local ls = {}
      mx.autograd.record(function()
        for d = 1, 2 do ls[d] = (net(xs[d]) * net(xs[d])):sum() end
      end)
      mx.autograd.backward(ls)
      if sparse then assert.are.equal("row_sparse", net.weight:list_grad()[1]:stype()) end
      tr:step(4)
    end
    local w = net.weight:list_data()
    return w[1], w[2], tr
  end

  for _, kvs in ipairs({ "device", "local" }) do
    for _, uok in ipairs({ false, true }) do
      it(kvs .. " store, update_on_kvstore=" .. tostring(uok) .. ": the weights of the dense "
        .. "path on every device", function()
        local d1 = run(false, "device")
        local s1, s2, tr = run(true, kvs, uok)
        assert.are.equal(uok, tr._uok)
        assert.is_true(maxdiff(d1, s1) < 1e-6)
        assert.are.equal(0, maxdiff(s1, s2))
      end)
    end
  end

  it("updates on each device by default (MXNet 1.9 with sparse gradients), lazily: adam "
    .. "leaves the untouched rows as they were", function()
    local s1, s2, tr = run(true, "device", nil, "adam", { learning_rate = 0.1 })
    assert.is_false(tr._uok)
    assert.are.equal(0, maxdiff(s1, s2))
    mx.random.seed(1)
    local init = gluon.nn.Embedding(10, 3)
    init:initialize(mx.init.Normal(1))
    local w0 = init.weight:data()
    -- rows 0, 4, 6, 8, 9 are never looked up
    for _, r in ipairs({ 1, 5, 7, 9, 10 }) do assert.are.same(w0[r]:tolist(), s1[r]:tolist()) end
    assert.is_true(maxdiff(w0[2], s1[2]) > 1e-3)
  end)
end)

describe("gluon.Parameter with stype='row_sparse'", function()
  local function param(ctx)
    local p = gluon.Parameter("w", { shape = { 6, 1 }, stype = "row_sparse",
      grad_stype = "row_sparse", init = mx.init.Constant(1) })
    p:initialize(nil, ctx)
    return p
  end

  it("is pulled row by row from its Trainer's store before each forward and updated there",
    function()
    local p = param({ mx.cpu(0), mx.cpu(1) })
    local tr = gluon.Trainer({ p }, "sgd", { learning_rate = 0.1 })
    local xs = { nd.sparse.csr_matrix({ { 1, 2 }, { 0, 3 }, { 0, 1, 2 } }, { shape = { 2, 6 } }),
      nd.sparse.csr_matrix({ { 4 }, { 5 }, { 0, 1, 1 } }, { shape = { 2, 6 }, ctx = mx.cpu(1) }) }
    for _ = 1, 2 do
      local ws, ls = {}, {}
      for d = 1, 2 do ws[d] = p:row_sparse_data(xs[d]:indices():to(xs[d]:context())) end
      assert.are.same({ 0, 3 }, ws[1]:indices():tolist())
      assert.are.same({ 5 }, ws[2]:indices():tolist())
      assert.are.equal(mx.cpu(1), ws[2]:context())
      mx.autograd.record(function()
        for d = 1, 2 do ls[d] = nd.dot(xs[d], ws[d]):sum() end
      end)
      mx.autograd.backward(ls)
      tr:step(1)
    end
    assert.is_true(tr._uok)
    local all = p:list_row_sparse_data(nd.arange(0, 6))
    -- d loss / d w = the column sums of the csr rows: w0 by 1, w3 by 2, w5 by 4 per step
    local want = { 0.8, 1, 1, 0.6, 1, 0.2 }
    for d = 1, 2 do
      local got = all[d]:tostype("default"):reshape({ -1 }):tolist()
      for i = 1, 6 do assert.is_true(math.abs(got[i] - want[i]) < 1e-6, tostring(all[d])) end
    end
  end)

  it("save_parameters writes every row from the store; load_parameters restarts the store "
    .. "from the file", function()
    local Lin = gluon.nn.Block:extend("SparseLinear")
    function Lin:__init()
      gluon.nn.Block.__init(self)
      self.w = gluon.Parameter("w", { shape = { 6, 1 }, stype = "row_sparse",
        grad_stype = "row_sparse", init = mx.init.Constant(1) })
    end
    function Lin:forward(x) return nd.dot(x, self.w:row_sparse_data(x:indices())) end
    local x = nd.sparse.csr_matrix({ { 1, 2 }, { 0, 3 }, { 0, 1, 2 } }, { shape = { 2, 6 } })
    local net = Lin()
    net:initialize()
    local tr = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.1 })
    for _ = 1, 2 do
      local y = mx.autograd.record(function() return net(x):sum() end)
      y:backward()
      tr:step(1)
    end
    -- the copy holds the rows pulled last (0, 3); the file every row
    local path = os.tmpname()
    net:save_parameters(path)
    local saved = nd.load(path)["w"]
    assert.are.equal("row_sparse", saved:stype())
    local sv = saved:tostype("default"):reshape({ -1 }):tolist()
    for i, v in ipairs({ 0.8, 1, 1, 0.6, 1, 1 }) do assert.is_true(math.abs(sv[i] - v) < 1e-6) end
    -- a second net loads it; its Trainer's store starts from the file's weights
    local net2 = Lin()
    net2:initialize(mx.init.Constant(5))
    local tr2 = gluon.Trainer(net2:collect_params(), "sgd", { learning_rate = 0.1 })
    local y = mx.autograd.record(function() return net2(x):sum() end)
    y:backward()
    tr2:step(1)
    net2:load_parameters(path)
    os.remove(path)
    local all = net2.w:row_sparse_data(nd.arange(0, 6))
    local got = all:tostype("default"):reshape({ -1 }):tolist()
    for i, v in ipairs({ 0.8, 1, 1, 0.6, 1, 1 }) do assert.is_true(math.abs(got[i] - v) < 1e-6) end
  end)

  it("refuses data(), a pull without a Trainer, a second Trainer and update_on_kvstore=false",
    function()
    local p = param()
    local l = line()
    local msg = err_at(function() local d = p:data() return d end, l)
    assert.matches("Cannot return a copy of Parameter 'w' on ctx cpu%(0%) via data%(%) because "
      .. "its storage type is row_sparse. Please use row_sparse_data%(%) instead.", msg)
    l = line()
    msg = err_at(function() local d = p:row_sparse_data(nd.array({ 0 })) return d end, l)
    assert.matches("when no Trainer is created with it", msg)
    local tr = gluon.Trainer({ p }, "sgd", { learning_rate = 0.1 })
    l = line()
    msg = err_at(function() local t = gluon.Trainer({ p }, "sgd") return t end, l)
    assert.matches("More than one trainers for a row_sparse Parameter is not supported", msg)
    l = line()
    msg = err_at(function() local d = p:row_sparse_data({ 0 }) return d end, l)
    assert.matches("row_id must have NDArray type", msg)
    local _ = tr
    local q = param()
    local tq = gluon.Trainer({ q }, "sgd", { learning_rate = 0.1 }, { update_on_kvstore = false })
    l = line()
    msg = err_at(function() local d = q:row_sparse_data(nd.array({ 0 })) return d end, l)
    assert.matches("Cannot set update_on_kvstore=False when sparse weights are present", msg)
    local _ = tq
    local dense = gluon.Parameter("d", { shape = { 2 } })
    dense:initialize()
    l = line()
    msg = err_at(function() local d = dense:row_sparse_data(nd.array({ 0 })) return d end, l)
    assert.matches("its storage type is default. Please use data%(%) instead", msg)
  end)
end)
