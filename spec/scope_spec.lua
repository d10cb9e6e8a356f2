-- spec/scope_spec.lua — mx.nd.scope: temporaries come back to the pool when the scope
-- returns (not at the next GC cycle); results and nd.keep'd tensors survive.
local mx = require("mx")
local nd = mx.nd

local function in_use() return mx.memory_stats().bytes_in_use end

describe("mx.nd.scope", function()
  it("releases what the function created, keeps what it returns", function()
    local a = nd.ones { 1000 }
    collectgarbage("collect")
    local before = in_use()
    local kept_tmp
    local r = nd.scope(function()
      local t = a * 2         -- a temporary: released on return
      kept_tmp = t             -- held outside, but still released (the scope's contract)
      return (t + 1):sum(), { extra = a + 3 }
    end)
    assert.are.equal(3000, r:item())
    -- the two results (sum and a + 3) live; the 2 temporaries (a*2, t+1) went at once
    local grown = in_use() - before
    assert.is_true(grown < 2 * 4000, "temporaries still held: " .. grown .. " bytes")
    local ok, err = pcall(function() return kept_tmp + 1 end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("add", 1, true), err)
  end)

  it("passes results through nested scopes and tables", function()
    local a = nd.ones { 4 }
    local r, t = nd.scope(function()
      local inner = nd.scope(function() return a * 5 end)
      return inner + 1, { a * 2 }
    end)
    assert.are.same({ 6, 6, 6, 6 }, r:tolist())
    assert.are.same({ 2, 2, 2, 2 }, t[1]:tolist())
  end)

  it("nd.keep makes a tensor outlive the scope; Gluon parameters made inside survive", function()
    local keepme
    nd.scope(function() keepme = nd.keep(nd.ones { 3 } * 7) end)
    assert.are.same({ 7, 7, 7 }, keepme:tolist())
    local net = mx.gluon.nn.Dense(4, { in_units = 0 }) -- deferred: made in the first forward
    net:initialize()
    local x = nd.ones { 2, 3 }
    local y = nd.scope(function() return net(x) end)
    assert.are.same({ 2, 4 }, y:shape())
    assert.are.same({ 4, 3 }, net.weight:data():shape()) -- still alive after the scope
    local y2 = net(x)
    assert.are.same(y:tolist(), y2:tolist())
  end)

  it("releases everything and re-raises when the function fails", function()
    local a = nd.ones { 1000 }
    collectgarbage("collect")
    local before = in_use()
    local ok = pcall(nd.scope, function() local _ = a * 2 error("boom") end)
    assert.is_false(ok)
    assert.is_true(in_use() - before < 4000)
    assert.has_error(function() nd.scope(42) end, nil)
  end)

  it("training steps inside a scope give the same result as without", function()
    local function run(scoped)
      mx.random.seed(3)
      local net = mx.gluon.nn.Dense(2, { in_units = 3 })
      net:initialize(mx.init.Xavier())
      local tr = mx.gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.1 })
      local x, y = nd.random.uniform(0, 1, { 8, 3 }), nd.random.uniform(0, 1, { 8, 2 })
      local function step()
        local loss = mx.autograd.record(function() return ((net(x) - y) ^ 2):sum() end)
        loss:backward()
        tr:step(8)
        return loss
      end
      local l
      for _ = 1, 5 do l = scoped and nd.scope(step) or step() end
      return l:item(), net.weight:data():tolist()
    end
    local l1, w1 = run(false)
    local l2, w2 = run(true)
    assert.are.equal(l1, l2)
    assert.are.same(w1, w2)
  end)
end)
