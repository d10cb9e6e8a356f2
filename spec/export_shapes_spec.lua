-- export of blocks whose forward computes numbers from its input's shape (n =
-- x:shape()[1]): the file must run other shapes as the eager block does, or refuse them
-- clearly, never run them with the traced constants (mx.gluon._export_shapes).
local mx = require("mx")
local nd = mx.nd
local HB = mx.gluon.HybridBlock
local SymbolBlock = mx.gluon.SymbolBlock

local tmp = os.tmpname()
os.remove(tmp)

local function block(name, forward)
  local B = HB:extend(name)
  B.forward = forward
  local b = B()
  b:initialize()
  b:hybridize()
  return b
end

local function roundtrip(b, x)
  b(x)
  local sf, pf = b:export(tmp)
  local f = assert(io.open(sf))
  local js = f:read("*a")
  f:close()
  local back = SymbolBlock.imports(sf, { "data" }, pf)
  os.remove(sf)
  os.remove(pf)
  return back, js
end

local function same(a, b)
  assert.same(b:shape(), a:shape())
  local u, v = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  for i = 1, #u do assert.near(v[i], u[i], 1e-5 * (1 + math.abs(v[i]))) end
end

local function input(shape, seed)
  mx.random.seed(seed)
  return nd.random.normal(0, 1, shape)
end

-- the dims a __shape__ attribute fixes ("(0, 6)" -> {[2] = 6})
local function pins(attr)
  local t, d = {}, 0
  for v in (attr or ""):gmatch("%d+") do
    d = d + 1
    if v ~= "0" then t[d] = tonumber(v) end
  end
  return t
end

describe("export of shape-dependent forwards", function()
  -- name, forward, traced shape, the data's __shape__ the file must carry (nil: none), the
  -- reshape target written (where checked)
  local cases = {
    -- (n, d) -> (2n, d/2): a -1 for the rows; d cannot move as well (no code says d/2)
    { "Twice", function(_, x) return x:reshape({ x:shape()[1] * 2, -1 }) end, { 4, 6 }, "(0, 6)" },
    -- (n, d) -> (d, n): one of the two moving dims stays the traced one
    { "ByRows", function(_, x) return x:reshape({ -1, x:shape()[1] }) end, { 4, 6 }, "(0, 6)" },
    -- attention heads: (n, t, c) -> (n, t, 2, c/2): 0, 0, 2, -1
    { "Heads", function(_, x)
      local s = x:shape()
      return x:reshape({ s[1], s[2], 2, s[3] / 2 }):transpose({ axes = { 1, 3, 2, 4 } })
    end, { 2, 3, 4 }, nil },
    -- a mean with n as a Lua number: the scalar is the traced 1/n
    { "MeanRows", function(_, x) return x:sum({ axis = 1 }) / x:shape()[1] end, { 4, 6 }, "(4, 0)" },
    -- a reshape swapping two moving dims: (n, t, c) -> (t, n, c)
    { "Swap", function(_, x)
      local s = x:shape()
      return x:reshape({ s[2], s[1], s[3] })
    end, { 2, 3, 4 }, "(0, 3, 0)" },
    -- two moving dims merged: (n, t, c) -> (n * t, c) is (-3, 0)
    { "Merge", function(_, x)
      local s = x:shape()
      return x:reshape({ s[1] * s[2], s[3] })
    end, { 2, 3, 4 }, nil, "(-3, 0)" },
    -- heads split out of the batch: (n * 2, t, d) -> (n, 2, t, d) is (-4, -1, 2, 0, 0)
    { "SplitBatch", function(_, x)
      local s = x:shape()
      return x:reshape({ s[1] / 2, 2, s[2], s[3] })
    end, { 4, 3, 5 }, nil, "(-4, -1, 2, 0, 0)" },
    -- pairs of steps: (n, t, c) -> (n, t / 2, 2, c) is (0, -4, -1, 2, 0)
    { "Pairs", function(_, x)
      local s = x:shape()
      return x:reshape({ s[1], s[2] / 2, 2, s[3] })
    end, { 2, 4, 3 }, nil, "(0, -4, -1, 2, 0)" },
    -- a dim inserted between moving ones: (n, t, c) -> (n, 1, t, c) is (0, -4, 1, -1, 0)
    { "Insert", function(_, x)
      local s = x:shape()
      return x:reshape({ s[1], 1, s[2], s[3] })
    end, { 2, 3, 4 }, nil, "(0, -4, 1, -1, 0)" },
    -- a loop over the second dim: the graph itself is the traced length's
    { "Unrolled", function(_, x)
      local acc = x:slice_axis({ axis = 2, begin = 1, ["end"] = 1 })
      for t = 2, x:shape()[2] do
        acc = acc + x:slice_axis({ axis = 2, begin = t, ["end"] = t })
      end
      return acc
    end, { 2, 3, 4 }, "(0, 3, 0)" },
  }

  it("the file runs every other input shape as the eager forward does, or refuses it clearly", function()
    for _, c in ipairs(cases) do
      local b = block(c[1], c[2])
      local x0 = input(c[3], 1)
      local back, js = roundtrip(b, x0)
      local attr = js:match('"name":"data","attrs":{"__shape__":"([^"]*)"}')
      assert.equal(c[4], attr, c[1] .. ": " .. js:sub(1, 300))
      if c[5] then
        assert.equal(c[5], js:match('"op":"Reshape"[^}]*"shape":"([^"]*)"'), c[1] .. ": " .. js)
      end
      same(back(x0), c[2](nil, x0))
      local fixed = pins(attr)
      local tried, refused = 0, 0
      for k, grow in ipairs({ { 1 }, { 3 }, { 0, 2 }, { 0, 6 }, { 0, 0, 4 }, { 2, 1, 4 } }) do
        local sh = {}
        for d = 1, #c[3] do sh[d] = c[3][d] + (grow[d] or 0) end
        local pinned = false
        for d in pairs(fixed) do pinned = pinned or sh[d] ~= fixed[d] end
        local x = input(sh, 10 + k)
        if pinned then
          local ok, err = pcall(function() return back(x) end)
          assert.is_false(ok, c[1])
          err = tostring(err)
          assert.truthy(err:find("input 'data' has shape", 1, true), err)
          assert.truthy(err:find(c[4], 1, true), err)
          assert.truthy(err:find("export_shapes_spec.lua:", 1, true), err)
          refused = refused + 1
        elseif pcall(c[2], nil, nd.zeros(sh)) and sh ~= c[3] then
          same(back(x), c[2](nil, x))
          tried = tried + 1
        end
      end
      assert.is_true(tried >= 1, c[1])
      if attr then assert.is_true(refused >= 1, c[1]) end
    end
  end)

  it("layers with a fixed input size and batch-only reshapes write no __shape__", function()
    local net = mx.gluon.nn.HybridSequential()
    net:add(mx.gluon.nn.Conv2D(4, 3, { in_channels = 1 }), mx.gluon.nn.Flatten(),
      mx.gluon.nn.Dense(3))
    net:initialize()
    net:hybridize()
    local back, js = roundtrip(net, input({ 2, 1, 6, 6 }, 4))
    assert.is_nil(js:find("__shape__", 1, true))
    local x = input({ 5, 1, 6, 6 }, 5)
    same(back(x), net(x))
  end)
end)
