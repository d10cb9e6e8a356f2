-- Hybridize never replays a stale graph (gluon/_hybrid.lua, mx.graph.cached_op): a Lua
-- value read from a block's inputs or parameters while tracing (item, tolist, totable,
-- tostring; a parameter after set_data) is a guard like a value read from a derived
-- tensor; data_ptr while tracing is refused (an FFI read cannot be guarded); and a change
-- of structure (a child registered, replaced or added to a nested child, parameters
-- re-initialised, cast, hybridize options) drops the cached graphs, as MXNet clears its
-- CachedOp. Each case compares the hybridized block with the same block run eagerly.
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn

local FILE = "gluon_hybrid_guards_spec.lua"

local function same(a, b)
  local x, y = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  if #x ~= #y then return false end
  for i = 1, #x do if math.abs(x[i] - y[i]) > 1e-5 * (1 + math.abs(y[i])) then return false end end
  return true
end

-- A HybridBlock whose forward is fn(self, x).
local function block_of(fn, init)
  local B = nn.HybridBlock:extend("GuardProbe")
  function B:__init()
    nn.HybridBlock.__init(self)
    if init then init(self) end
  end
  B.forward = fn
  return B()
end

describe("hybridize guards on Lua reads of inputs and parameters", function()
  local readers = {
    item = function(x) return x[{ 1, 1 }]:item() end,            -- a view of the input
    item_whole = function(x) return x:reshape({ -1 }):sum():item() end,
    tolist = function(x) return x:tolist()[1] end,
    totable = function(x) return x:totable()[1][1] end,
    tostring = function(x) return tonumber(tostring(x):match("[-%d%.]+")) end,
  }
  for name, read in pairs(readers) do
    it("a branch on the input's value read with " .. name .. " re-traces when it changes", function()
      local b = block_of(function(_, x)
        if read(x) > 0 then return x * 2 end
        return x - 10
      end)
      b:hybridize()
      local pos, neg = nd.array({ { 1, 2 } }), nd.array({ { -3, 2 } })
      assert.is_true(same(b(pos), pos * 2))
      assert.is_true(same(b(neg), neg - 10), "the first trace's branch was replayed")
      assert.is_true(same(b(pos), pos * 2))
    end)
  end

  it("the input itself read with item() (a 1-element input)", function()
    local b = block_of(function(_, x) if x:item() > 0 then return x + 1 end return x - 1 end)
    b:hybridize()
    assert.are.same({ 3 }, b(nd.array({ 2 })):tolist())
    assert.are.same({ -3 }, b(nd.array({ -2 })):tolist())
  end)

  it("a parameter's value, and the same after set_data", function()
    local b = block_of(function(self, x)
      if self.w:data():item() > 0 then return x * self.w:data() end
      return x * 0
    end, function(self) self.w = mx.gluon.Parameter("w", { shape = { 1 } }) end)
    b:initialize(mx.init.Constant(3))
    b:hybridize()
    local x = nd.array({ 2 })
    assert.are.same({ 6 }, b(x):tolist())
    b.w:set_data(nd.array({ -1 }))
    assert.are.same({ 0 }, b(x):tolist(), "set_data: the old branch was replayed")
    b.w:set_data(nd.array({ 5 }))
    assert.are.same({ 10 }, b(x):tolist())
  end)

  it("data_ptr while tracing is a clear error at the forward's line", function()
    local b = block_of(function(_, x)
      local p = x:data_ptr()
      return x * p[0]
    end)
    b:hybridize()
    local ok, err = pcall(function() local y = b(nd.array({ 2 })); return y end)
    assert.is_false(ok)
    assert.truthy(err:find(FILE .. ":%d+: data_ptr: "), err)
    assert.truthy(err:find("hybridize", 1, true), err)
    -- eagerly it works
    b:hybridize(false)
    assert.are.same({ 4 }, b(nd.array({ 2 })):tolist())
  end)
end)

describe("hybridize drops its graphs when the structure changes", function()
  local x = nd.array({ { 1, 2, 3, 4 } })

  local function eager_and_hybrid(make, change)
    local function run(hyb)
      mx.random.seed(1)
      local net = make()
      net:initialize(mx.init.Uniform(0.5))
      if hyb then net:hybridize() end
      net(x)
      local x2 = change(net) or x
      return net(x2)
    end
    return run(false), run(true)
  end

  it("register_child (and add) after tracing", function()
    local e, h = eager_and_hybrid(function()
      local s = nn.HybridSequential()
      s:add(nn.Dense(4, { in_units = 4 }))
      return s
    end, function(net)
      local d = nn.Dense(2, { in_units = 4 })
      d:initialize(mx.init.Constant(0.5))
      net:add(d)
    end)
    assert.are.same(e:shape(), h:shape())
    assert.is_true(same(h, e))
  end)

  it("a child replaced by assignment", function()
    local B = nn.HybridBlock:extend("Replaceable")
    function B:__init()
      nn.HybridBlock.__init(self)
      self.fc = nn.Dense(3, { in_units = 4 })
    end
    function B:forward(y) return self.fc(y) end
    local e, h = eager_and_hybrid(function() return B() end, function(net)
      local d = nn.Dense(5, { in_units = 4 })
      d:initialize(mx.init.Constant(0.25))
      net.fc = d
    end)
    assert.are.same({ 1, 5 }, h:shape())
    assert.is_true(same(h, e))
  end)

  it("a child added to a nested child", function()
    local e, h = eager_and_hybrid(function()
      local outer = nn.HybridSequential()
      local inner = nn.HybridSequential()
      inner:add(nn.Dense(4, { in_units = 4 }))
      outer:add(inner)
      return outer
    end, function(net)
      local d = nn.Dense(2, { in_units = 4 })
      d:initialize(mx.init.Constant(1))
      net[1]:add(d)
    end)
    assert.are.same({ 1, 2 }, h:shape())
    assert.is_true(same(h, e))
  end)

  it("parameters re-initialised with another shape (force_reinit after in_units changed)", function()
    local e, h = eager_and_hybrid(function()
      local s = nn.HybridSequential()
      s:add(nn.Dense(3, { in_units = 4 }))
      return s
    end, function(net)
      net:initialize(mx.init.Constant(2), nil, { force_reinit = true })
    end)
    assert.is_true(same(h, e))
  end)

  it("cast to another dtype", function()
    local e, h = eager_and_hybrid(function()
      local s = nn.HybridSequential()
      s:add(nn.Dense(3, { in_units = 4 }))
      return s
    end, function(net)
      net:cast("float64")
      return x:astype("float64")
    end)
    assert.are.equal(e:dtype(), h:dtype())
    assert.is_true(same(h, e))
  end)

  it("hybridize again with other options keeps working", function()
    local s = nn.HybridSequential()
    s:add(nn.Dense(3, { in_units = 4 }))
    s:initialize()
    s:hybridize()
    local y1 = s(x)
    s:hybridize({ static_alloc = true })
    assert.is_true(same(s(x), y1))
    s:add(nn.Dense(2, { in_units = 3 }))
    s[2]:initialize()
    assert.are.same({ 1, 2 }, s(x):shape())
  end)
end)
