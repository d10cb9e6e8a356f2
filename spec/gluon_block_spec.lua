-- gluon.Block, Parameter, ParameterDict, Sequential: registration, structural names,
-- deferred initialization, save/load_parameters.
local mx = require("mx")
local gluon = mx.gluon
local nn = gluon.nn

local function names(d) return table.concat(d:keys(), " ") end
local function same(a, b)
  local x, y = a:tolist(), b:tolist()
  assert.are.equal(#x, #y)
  for i = 1, #x do assert.are.equal(x[i], y[i]) end
end
local tmp = os.tmpname()
teardown(function() os.remove(tmp) end)

local Net = gluon.Block:extend("Net")
function Net:__init()
  gluon.Block.__init(self)
  self.features = nn.Sequential()
  self.features:add(nn.Dense(8, { activation = "relu" }), nn.Dense(6))
  self.scale = gluon.Parameter("scale", { shape = { 1 }, init = mx.init.One() })
  self.output = nn.Dense(3)
end
function Net:forward(x)
  return self.output(mx.nd.mul(self.features(x), self.scale:data()))
end

describe("gluon.Block", function()
  it("registers children and parameters by assignment with structural names", function()
    local net = Net()
    assert.are.equal("scale features.0.weight features.0.bias features.1.weight "
      .. "features.1.bias output.weight output.bias", names(net:collect_params()))
    local ch, cn = net:children()
    assert.are.equal(2, #ch)
    assert.are.same({ "features", "output" }, cn)
    assert.are.equal("scale", names(net:params()))
  end)

  it("collect_params selects with anchored patterns and | alternatives", function()
    local net = Net()
    assert.are.equal("features.0.weight features.1.weight output.weight",
      names(net:collect_params(".*weight")))
    assert.are.equal("scale output.bias", names(net:collect_params("scale|output%.b")))
    assert.are.equal("", names(net:collect_params("weight")))
  end)

  it("a re-assignment replaces the child; nil unregisters it", function()
    local b = gluon.Block()
    b.a = nn.Dense(2)
    b.a = nn.Dense(4, { in_units = 3 })
    assert.are.equal("a.weight a.bias", names(b:collect_params()))
    assert.are.equal(4, b.a.weight.shape[1])
    b.a = nil
    assert.are.equal("", names(b:collect_params()))
    b.a = 5
    assert.are.equal(5, b.a)
  end)

  it("lists a shared parameter under each of its names (MXNet 2.0)", function()
    local b = gluon.Block()
    b.x = nn.Dense(2, { in_units = 2 })
    b.y = nn.Dense(2, { in_units = 2 })
    b.y:share_parameters { weight = b.x.weight }
    assert.are.equal("x.weight x.bias y.weight y.bias", names(b:collect_params()))
    assert.are.equal(b:collect_params()["x.weight"], b:collect_params()["y.weight"])
  end)

  it("defers initialization to the first forward and infers shapes", function()
    local net = Net()
    net:initialize(mx.init.Xavier())
    local w = net.features:get(1).weight
    assert.are.same({ 8, 0 }, w.shape)
    assert.has_error(function() w:data() end)
    local ok, err = pcall(function() return w:data() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("features.0.weight", 1, true))
    assert.truthy(tostring(err):find("deferred", 1, true))
    local y = net(mx.nd.ones { 2, 5 })
    assert.are.same({ 2, 3 }, y:shape())
    assert.are.same({ 8, 5 }, w:data():shape())
    assert.are.same({ 6, 8 }, net.features:get(2).weight:data():shape())
    -- the parameter's own init wins: biases are zeros, scale is one
    assert.are.equal(0, net.output.bias:data():abs():sum():item())
    assert.are.equal(1, net.scale:data():item())
  end)

  it("names the parameter when its shape cannot be inferred", function()
    local B = gluon.Block:extend("Bad")
    function B:__init()
      gluon.Block.__init(self)
      self.w = gluon.Parameter("w", { shape = { 0, 3 } })
    end
    function B:forward(x) return mx.nd.dot(x, self.w:data()) end
    local b = B()
    b:initialize()
    local ok, err = pcall(b, mx.nd.ones { 2, 2 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("Parameter 'w'", 1, true))
    local p = gluon.Parameter("v", { shape = { 0, 2 }, allow_deferred_init = false })
    assert.has_error(function() p:initialize() end,
      "Cannot initialize Parameter 'v' because it has invalid shape: (0, 2)")
  end)

  it("uninitialized parameters say so", function()
    local d = nn.Dense(2, { in_units = 3 })
    assert.has_error(function() d(mx.nd.ones { 1, 3 }) end)
  end)

  it("Parameter basics: set_data, zero_grad, grad_req, multipliers", function()
    local p = gluon.Parameter("w", { shape = { 2, 2 }, lr_mult = 2, wd_mult = 0 })
    p:initialize(mx.init.Constant(3))
    same(p:data(), mx.nd.full({ 2, 2 }, 3))
    p:set_data(mx.nd.array { { 1, 2 }, { 3, 4 } })
    same(p:data(), mx.nd.array { { 1, 2 }, { 3, 4 } })
    assert.are.same({ 2, 2 }, p:grad():shape())
    assert.are.equal(2, p.lr_mult)
    local q = gluon.Parameter("q", { shape = { 2 }, grad_req = "null" })
    q:initialize()
    assert.has_error(function() q:grad() end)
    assert.has_error(function() gluon.Parameter("z", { shape = { 2 }, bogus = 1 }) end)
  end)

  it("save_parameters / load_parameters round-trip into a fresh (deferred) net", function()
    local net = Net()
    net:initialize(mx.init.Xavier())
    local x = mx.nd.random_normal { shape = { 4, 5 } }
    local y = net(x)
    net:save_parameters(tmp)
    local loaded = mx.nd.load(tmp)
    assert.truthy(loaded["features.1.weight"])
    local net2 = Net()
    net2:load_parameters(tmp)
    same(net2(x), y)
  end)

  it("load_parameters: missing, extra and mismatched parameters are named", function()
    local a = nn.Sequential()
    a:add(nn.Dense(3, { in_units = 4 }))
    a:initialize()
    a:save_parameters(tmp)
    local b = nn.Sequential()
    b:add(nn.Dense(3, { in_units = 4 }), nn.Dense(2, { in_units = 3 }))
    b:initialize()
    assert.has_error(function() b:load_parameters(tmp) end)
    local ok, err = pcall(b.load_parameters, b, tmp)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("1.weight", 1, true))
    b:load_parameters(tmp, { allow_missing = true })
    same(b:get(1).weight:data(), a:get(1).weight:data())
    local c = nn.Sequential()
    c:add(nn.Dense(3, { use_bias = false, in_units = 4 }))
    c:initialize()
    ok, err = pcall(c.load_parameters, c, tmp)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("0.bias", 1, true))
    c:load_parameters(tmp, { ignore_extra = true })
    local d = nn.Sequential()
    d:add(nn.Dense(3, { in_units = 5 }))
    d:initialize()
    ok, err = pcall(d.load_parameters, d, tmp)
    assert.is_false(ok)
    err = tostring(err)
    assert.truthy(err:find("0.weight", 1, true))
    assert.truthy(err:find("(3, 5)", 1, true))
    assert.truthy(err:find("(3, 4)", 1, true))
    assert.has_error(function() d:load_parameters(tmp, { strict = true }) end)
  end)

  it("load_parameters refuses another dtype unless cast_dtype (MXNet 1.9 dtype_source)", function()
    local H = require("helpers.la")
    local nd = mx.nd
    local function net()
      local n = nn.Sequential()
      n:add(nn.Dense(2, { in_units = 2 }))
      n:initialize()
      return n
    end
    for _, dt in ipairs { "int32", "float64", "float16", "uint8" } do
      nd.save(tmp, { ["0.weight"] = nd.array({ { 1, 2 }, { 3, 4 } }, { dtype = dt }),
        ["0.bias"] = nd.array({ 5, 6 }, { dtype = dt }) })
      local b = net()
      local w0 = b:get(1).weight:data():tolist()
      H.assert_error(function(mark) mark() b:load_parameters(tmp) end, "gluon_block_spec.lua",
        "load_parameters: dtype mismatch for Parameter '0.weight': the block expects float32",
        "has " .. dt, "cast_dtype=true")
      assert.are.same(w0, b:get(1).weight:data():tolist()) -- nothing loaded
      b:load_parameters(tmp, { cast_dtype = true }) -- dtype_source "current"
      assert.are.equal("float32", b:get(1).weight:data():dtype())
      assert.are.same({ 1, 2, 3, 4 }, b:get(1).weight:data():tolist())
      local c = net()
      c:load_parameters(tmp, { cast_dtype = true, dtype_source = "saved" })
      assert.are.equal(dt, c:get(1).weight:data():dtype())
      assert.are.equal(dt, c:get(1).bias.dtype)
      assert.are.same({ 5, 6 }, c:get(1).bias:data():tolist())
    end
    H.assert_error(function(mark) mark() net():load_parameters(tmp, { cast_dtype = true,
      dtype_source = "file" }) end, "gluon_block_spec.lua", "dtype_source must be 'current' or 'saved'")
  end)

  it("says so when a subclass forgets the parent's __init", function()
    local B = gluon.Block:extend("Forgetful")
    function B:__init() self.d = nn.Dense(2) end
    local ok, err = pcall(B)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("Forgetful: assigning child block 'd'", 1, true))
  end)

  it("prints its structure", function()
    local s = tostring(Net())
    assert.truthy(s:find("features", 1, true))
    assert.truthy(s:find("Dense(None -> 8, relu)", 1, true))
  end)

  it("hybridize recurses into children, writes nothing to stderr and changes no result", function()
    local writes = {}
    local real_stderr = io.stderr
    local fake = { write = function(self, ...)
      for _, v in ipairs { ... } do writes[#writes + 1] = v end
      return self
    end }
    io.stderr = fake -- luacheck: ignore 122 (swapped for the duration of this test)
    local ok, err = pcall(function()
      local net = Net()
      net:initialize(mx.init.Normal(0.1))
      local x = mx.nd.array { { 1, 2, 3 }, { -1, 0.5, 2 } }
      local before = net(x):reshape({ -1 }):tolist()
      net:hybridize(false)
      net:hybridize() -- a plain Block: recurses into features, its two Dense layers and output
      assert.is_true(rawget(net.output, "_active"))
      net:hybridize({ static_alloc = true })
      gluon.HybridBlock:extend("H")():hybridize(true)
      local after = net(x):reshape({ -1 }):tolist()
      for i = 1, #before do assert.near(before[i], after[i], 1e-6) end
    end)
    io.stderr = real_stderr -- luacheck: ignore 122
    assert(ok, err)
    assert.are.equal(0, #writes)
  end)

  it("assigning a plain value over a registered child or Parameter raises (MXNet)", function()
    local b = gluon.Block()
    b.dense0 = nn.Dense(2, { in_units = 2 })
    b.w = gluon.Parameter("w", { shape = { 2 } })
    local ok, err = pcall(function() b.dense0 = 5 end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("changing attribute type for 'dense0' from Dense to number",
      1, true), tostring(err))
    assert.truthy(tostring(err):find("gluon_block_spec.lua:%d+:"), tostring(err))
    assert.has_error(function() b.w = "x" end)
    assert.has_error(function() b.dense0 = b.w end)
    assert.are.equal("w dense0.weight dense0.bias", names(b:collect_params()))
  end)

  it("save_parameters saves a shared parameter under every name, or once with deduplicate",
    function()
      local b = gluon.Block()
      b.x = nn.Dense(2, { in_units = 2 })
      b.y = nn.Dense(2, { in_units = 2 })
      b.y:share_parameters(b.x:collect_params("weight"))
      b:initialize()
      local path = os.tmpname()
      b:save_parameters(path)
      local all = mx.nd.load(path)
      assert.truthy(all["x.weight"] and all["y.weight"])
      b:save_parameters(path, { deduplicate = true })
      local once = mx.nd.load(path)
      local n = 0
      for _ in pairs(once) do n = n + 1 end
      assert.are.equal(3, n) -- the weight under its last name, two biases
      assert.truthy(once["y.weight"] and once["x.weight"] == nil)
      -- loading the deduplicated file fills the one Parameter both Dense layers hold
      local c = gluon.Block()
      c.x = nn.Dense(2, { in_units = 2 })
      c.y = nn.Dense(2, { in_units = 2 })
      c.y:share_parameters(c.x:collect_params("weight"))
      c:initialize(mx.init.Zero())
      c:load_parameters(path)
      same(c.x.weight:data(), b.x.weight:data())
      assert.are.equal(c.x.weight, c.y.weight)
      assert.has_error(function() b:save_parameters(path, { deduplicate = "yes" }) end)
      assert.has_error(function() b:save_parameters(path, { dedup = true }) end)
      os.remove(path)
    end)
end)

describe("forward hooks, apply, cast", function()
  local H = require("helpers.la")
  local FILE = "gluon_block_spec.lua"
  local function seq3()
    local s = nn.Sequential()
    s:add(nn.Dense(3, { in_units = 2 }), nn.Dense(4, { in_units = 3 }), nn.Dense(1, { in_units = 4 }))
    s:initialize()
    return s
  end

  it("pre-hooks see the inputs, hooks the output, in registration order; detach removes", function()
    local net = seq3()
    local log = {}
    local x = mx.nd.ones { 5, 2 }
    local hp = net:register_forward_pre_hook(function(b, inputs)
      assert.are.equal(net, b)
      log[#log + 1] = "pre:" .. inputs.n .. ":" .. inputs[1]:shape()[1]
    end)
    local h1 = net:register_forward_hook(function(_, inputs, out)
      assert.are.equal(x, inputs[1])
      log[#log + 1] = "post1:" .. table.concat(out:shape(), "x")
    end)
    local h2 = net[2]:register_forward_hook(function(_, _, out)
      log[#log + 1] = "child:" .. out:shape()[2]
    end)
    local y = net(x)
    assert.are.same({ "pre:1:5", "child:4", "post1:5x1" }, log)
    same(y, net[3](net[2](net[1](x)))) -- hooks do not change the result
    log = {}
    h2:detach()
    hp:detach()
    net(x)
    assert.are.same({ "post1:5x1" }, log)
    h1:detach()
    h1:detach() -- a second detach is a no-op
    log = {}
    net(x)
    assert.are.same({}, log)
    assert.is_nil(rawget(net, "_hooks")) -- back on the plain call path
  end)

  it("hooks fire on losses and on multi-output blocks", function()
    local l = gluon.loss.L2Loss()
    local seen
    l:register_forward_hook(function(_, inputs, out) seen = { inputs[2], out } end)
    local p, y = mx.nd.array { { 1, 2 } }, mx.nd.array { { 1, 4 } }
    local r = l(p, y)
    assert.are.equal(y, seen[1])
    assert.are.equal(r, seen[2])
    local Two = gluon.Block:extend("Two")
    function Two.forward(_, a) return a, a * 2 end
    local b = Two()
    local got
    b:register_forward_hook(function(_, _, out) got = out end)
    local u, v = b(mx.nd.array { 3 })
    assert.are.equal(2, #got)
    assert.are.equal(u, got[1])
    assert.are.equal(v, got[2])
  end)

  it("rejects a hook that is not a function, at the caller's line", function()
    local net = seq3()
    H.assert_error(function(mark) mark() net:register_forward_hook(5) end, FILE,
      "register_forward_hook: hook must be a function, got number")
    H.assert_error(function(mark) mark() net:register_forward_pre_hook() end, FILE,
      "register_forward_pre_hook: hook must be a function, got nil")
  end)

  it("apply visits every descendant, children before the parent", function()
    local outer = nn.Sequential()
    local inner = seq3()
    outer:add(inner, nn.Dense(2, { in_units = 1 }))
    local order = {}
    assert.are.equal(outer, outer:apply(function(b) order[#order + 1] = b end))
    assert.are.equal(6, #order)
    assert.are.equal(inner[1], order[1])
    assert.are.equal(inner, order[4])
    assert.are.equal(outer, order[6])
  end)

  it("cast(dtype) casts every parameter, shared ones once, and rejects unknown dtypes", function()
    local net = seq3()
    local w = net[1].weight:data():tolist()
    net:cast("float64")
    for _, p in net:collect_params():items() do
      assert.are.equal("float64", p.dtype)
      assert.are.equal("float64", p:data():dtype())
    end
    same(net[1].weight:data(), mx.nd.array(w):reshape { 3, 2 }:astype("float64"))
    assert.are.equal("float64", net(mx.nd.ones({ 2, 2 }, { dtype = "float64" })):dtype())
    local b = gluon.Block()
    b.x = nn.Dense(2, { in_units = 2 })
    b.y = nn.Dense(2, { in_units = 2 })
    b.y:share_parameters(b.x:collect_params("weight"))
    b:initialize()
    b:cast("float16")
    assert.are.equal("float16", b.y.weight:data():dtype())
    H.assert_error(function(mark) mark() net:cast("float13") end, FILE, "cast: unknown dtype float13")
  end)
end)

describe("Block:summary", function()
  local H2 = require("helpers.la")
  -- runs fn with io.write going to a temp file; returns the lines written
  local function capture(fn)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    local old = io.output()
    io.output(f)
    local ok, err = pcall(fn)
    io.output(old)
    f:close()
    local lines = {}
    for l in io.lines(path) do lines[#lines + 1] = l end
    os.remove(path)
    if not ok then error(err, 0) end
    return lines
  end
  local DASH, EQ = string.rep("-", 80), string.rep("=", 80)
  local HEAD = "        Layer (type)                                Output Shape         Param #"
  -- the expected rows were formatted by Python with MXNet 1.9's '{:>20}  {:>42} {:>15}'
  local function expect(lines, rows, total, trainable, shared)
    local want = { DASH, HEAD, EQ }
    for _, r in ipairs(rows) do want[#want + 1] = r end
    for _, l in ipairs { EQ, "Parameters in forward computation graph, duplicate included",
      "   Total params: " .. total, "   Trainable params: " .. trainable,
      "   Non-trainable params: " .. (total - trainable),
      "Shared params in forward computation graph: " .. shared,
      "Unique parameters in model: " .. (total - shared), DASH } do
      want[#want + 1] = l
    end
    assert.are.same(want, lines)
  end

  it("prints MXNet's table for an MLP and returns nothing", function()
    local net = nn.Sequential()
    net:add(nn.Dense(16, { in_units = 8, activation = "relu" }), nn.Dense(4))
    net:initialize()
    local r = "unset"
    local lines = capture(function() r = select("#", net:summary(mx.nd.ones { 2, 8 })) end)
    assert.are.equal(0, r)
    expect(lines, {
      "               Input                                      (2, 8)               0",
      "             Dense-1                                     (2, 16)             144",
      "             Dense-2                                      (2, 4)              68",
    }, 212, 212, 0)
    -- the hooks are gone: a plain call prints nothing and the blocks hold no hooks
    assert.are.same({}, capture(function() net(mx.nd.ones { 2, 8 }) end))
    net:apply(function(b) assert.is_nil(rawget(b, "_hooks")) end)
  end)

  it("nested blocks: containers are not rows, custom blocks are, after their children; "
    .. "shared and non-trainable parameters are counted", function()
    local Wrap = gluon.Block:extend("Wrap")
    function Wrap:__init()
      Wrap.super.__init(self)
      self.fc = nn.Dense(2, { in_units = 3 })
    end
    function Wrap:forward(x) return self.fc(x) end
    local inner = nn.HybridSequential()
    inner:add(nn.Dense(3, { in_units = 2 }), nn.Activation("relu"))
    local d1, d2 = nn.Dense(3, { in_units = 3 }), nn.Dense(3, { in_units = 3 })
    d2:share_parameters(d1:collect_params())
    local outer = nn.Sequential()
    outer:add(inner, d1, d2, Wrap())
    outer:initialize()
    d1.bias.grad_req = "null"
    local lines = capture(function() outer:summary(mx.nd.ones { 2, 2 }) end)
    expect(lines, {
      "               Input                                      (2, 2)               0",
      "             Dense-1                                      (2, 3)               9",
      "        Activation-2                                      (2, 3)               0",
      "             Dense-3                                      (2, 3)              12",
      "             Dense-4                                      (2, 3)              12",
      "             Dense-5                                      (2, 2)               8",
      "              Wrap-6                                      (2, 2)               0",
    }, 41, 35, 12)
  end)

  it("several inputs and outputs are listed as MXNet's tuples", function()
    local l = nn.Lambda(function(a, b) return a + 1, a * 2, b end)
    local lines = capture(function() l:summary(mx.nd.ones { 2, 3 }, mx.nd.ones { 3 }) end)
    assert.are.equal("               Input                                (2, 3), (3,)               0",
      lines[4])
    assert.are.equal("            Lambda-1                        (2, 3), (2, 3), (3,)               0",
      lines[5])
  end)

  it("a failing forward is an error naming summary at the caller's line; hooks removed", function()
    local net = nn.Sequential()
    net:add(nn.Dense(2, { in_units = 3 }))
    net:initialize()
    H2.assert_error(function(mark) mark() net:summary(mx.nd.ones { 2, 5 }) end,
      "gluon_block_spec.lua", "summary:")
    assert.is_nil(rawget(net[1], "_hooks"))
    H2.assert_error(function(mark) mark() net:summary() end, "gluon_block_spec.lua",
      "summary: give the inputs of one forward pass")
  end)
end)
