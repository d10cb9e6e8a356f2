-- hybridize (gluon/_hybrid.lua) on the awkward blocks: forwards returning inputs,
-- parameters, nothing, tables or non-tensors; table ("keyword") arguments; the same
-- tensor passed twice; deferred initialisation; set_data; mode switches; dropout
-- masks; int64 guards; a forward that fails while traced. Every case checks values.
local mx = require("mx")
local nd, nn, autograd = mx.nd, mx.gluon.nn, mx.autograd
local HB = mx.gluon.HybridBlock
local S = require("mx.core.state")

local THIS = "gluon_hybrid_more_spec.lua:"

local function close(a, b, tol)
  a, b = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  assert.equal(#a, #b)
  for i = 1, #a do assert.near(a[i], b[i], tol or 1e-5 * math.max(1, math.abs(a[i]))) end
end

local function variants(b)
  local n = 0
  local op = require("mx.gluon._hybrid").cached_op(b)
  for _, list in pairs(op and op.cache or {}) do n = n + #list end
  return n
end

local function block(name, forward, init)
  local B = HB:extend(name)
  if init then B.__init = init end
  B.forward = forward
  return B()
end

describe("hybridize: what forward returns", function()
  it("an input unchanged: values and gradients on the trace and on replays", function()
    local b = block("Ident", function(_, x) return x end)
    b:hybridize()
    local x = nd.array({ 1, -2, 3 })
    x:attach_grad()
    for _ = 1, 3 do
      close(x, b(x))
      autograd.record(function() local y = b(x); return (y * y):sum() end):backward()
      close(nd.array({ 2, -4, 6 }), x:grad())
    end
  end)

  it("a parameter: replays see set_data's new values, gradients reach it", function()
    local b = block("Par", function(self, x) return self.w:data() + x * 0 end, function(self)
      HB.__init(self)
      self.w = mx.gluon.Parameter("w", { shape = { 2 } })
    end)
    b:initialize(mx.init.Constant(3))
    b:hybridize()
    local x = nd.ones({ 2 })
    close(nd.array({ 3, 3 }), b(x))
    close(nd.array({ 3, 3 }), b(x))
    b.w:set_data(nd.array({ 7, -8 }))
    close(nd.array({ 7, -8 }), b(x))
    autograd.record(function() return (b(x) * nd.array({ 1, 2 })):sum() end):backward()
    close(nd.array({ 1, 2 }), b.w:grad())
    -- a parameter returned as it is
    local p = block("ParOnly", function(self) return self.w:data() end, function(self)
      HB.__init(self)
      self.w = mx.gluon.Parameter("w", { shape = { 3 } })
    end)
    p:initialize(mx.init.Constant(1.5))
    p:hybridize()
    for _ = 1, 2 do close(nd.array({ 1.5, 1.5, 1.5 }), p()) end
    p.w:set_data(nd.array({ 4, 5, 6 }))
    close(nd.array({ 4, 5, 6 }), p())
  end)

  it("nothing, a non-tensor or a table of non-tensors: clear errors at the caller's line", function()
    local cases = {
      { function() end, "no tensor" },
      { function() return 5 end, "result 1 is a number" },
      { function(_, x) return x, "s" end, "result 2 is a string" },
      { function(_, x) return { x, 3 } end, "result 1 is a table whose element 2 is a number" },
      { function(_, x) return { out = x } end, "result 1 is a table with the key out" },
    }
    for i, c in ipairs(cases) do
      local b = block("Bad" .. i, c[1])
      b:hybridize()
      for _ = 1, 2 do -- the second call traces again: nothing was cached
        local ok, err = pcall(function() local r = b(nd.ones({ 2 })); return r end)
        assert.is_false(ok)
        assert.matches("hybridize: the forward of Bad" .. i .. " must return tensors", err, 1, true)
        assert.matches(c[2], err, 1, true)
        assert.matches(THIS, err, 1, true)
      end
      assert.equal(0, variants(b))
    end
  end)

  it("an output returned twice (an op's or an input's) gets both gradients on replays", function()
    local cases = {
      { function(_, x) local y = x * 2; return y, y end, 22 },
      { function(_, x) return x, x end, 11 },
      { function(_, x) local y = x * 2; return y, y, x, x end, 2 + 20 + 100 + 1000 },
      { function(_, x) return x * 2, x end, 12 },
    }
    for i, c in ipairs(cases) do
      local b = block("Twice" .. i, c[1])
      b:hybridize()
      local x = nd.array({ 1, 2 })
      x:attach_grad()
      for _ = 1, 3 do -- the trace, then replays
        autograd.record(function()
          local r = { b(x) }
          local s = r[1] * 1
          for k = 2, #r do s = s + r[k] * 10 ^ (k - 1) end
          return s:sum()
        end):backward()
        assert.same({ c[2], c[2] }, x:grad():tolist())
      end
    end
  end)

  it("a forward writing into its input or a parameter in place is a clear error", function()
    local cases = {
      { function(_, x) nd.relu(x, { out = x }); return x * 2 end, "relu writes in place into 'data'" },
      { function(_, x) x[1] = 5; return x * 2 end, "writes in place into 'data'" },
      { function(self, x) local w = self.w:data(); nd.mul(w, 2, { out = w }); return x * w end,
        "writes in place into 'w'" },
    }
    for i, c in ipairs(cases) do
      local b = block("InPlace" .. i, c[1], function(self)
        HB.__init(self)
        self.w = mx.gluon.Parameter("w", { shape = { 2 } })
      end)
      b:initialize(mx.init.Constant(1))
      b:hybridize()
      local ok, err = pcall(function() local r = b(nd.array({ -1, 3 })); return r end)
      assert.is_false(ok)
      assert.matches(c[2], err, 1, true)
      assert.matches(THIS, err, 1, true)
      assert.matches("compute a new tensor instead", err, 1, true)
    end
    -- writing into tensors the forward made is fine (and replays the same)
    local ok_b = block("OwnWrite", function(_, x)
      local y = x * 1
      nd.relu(y, { out = y })
      y[1] = 7
      return y
    end)
    ok_b:hybridize()
    for _ = 1, 3 do assert.same({ 7, 3, 0 }, ok_b(nd.array({ -1, 3, -2 })):tolist()) end
  end)

  it("tables of tensors, and tensors beside tables", function()
    local b = block("Tab", function(_, x) return { x * 2, x + 1 }, nd.exp(x), {} end)
    b:hybridize()
    local x = nd.array({ 0, 1 })
    for _ = 1, 3 do
      local t, e, empty = b(x)
      close(nd.array({ 0, 2 }), t[1])
      close(nd.array({ 1, 2 }), t[2])
      close(nd.exp(x), e)
      assert.same({}, empty)
    end
  end)
end)

describe("hybridize: arguments", function()
  it("a table argument is keyed by its contents: a mutated table is not replayed stale", function()
    local b = block("Kw", function(_, x, o) return x * o.scale + (o.shift or 0) end)
    b:hybridize()
    local x = nd.array({ 1, 2 })
    local opts = { scale = 2 }
    close(nd.array({ 2, 4 }), b(x, opts))
    opts.scale = 3
    close(nd.array({ 3, 6 }), b(x, opts))
    opts.shift = 1
    close(nd.array({ 4, 7 }), b(x, opts))
    local n = variants(b)
    for _ = 1, 3 do close(nd.array({ 2, 4 }), b(x, { scale = 2 })) end -- new tables, same contents
    assert.equal(n, variants(b))
  end)

  it("tensors one table deep are graph inputs; deeper ones are refused", function()
    local b = block("State", function(_, x, st) return x * st[1] + st[2] end)
    b:hybridize()
    local x = nd.array({ 1, 2 })
    local st = { nd.array({ 3, 3 }), nd.array({ 1, 0 }) }
    close(nd.array({ 4, 6 }), b(x, st))
    st[1] = nd.array({ -1, 5 })
    close(nd.array({ 0, 10 }), b(x, st))
    close(nd.array({ 10, 20 }), b(x, { nd.array({ 10, 10 }), nd.zeros({ 2 }) }))
    assert.equal(1, variants(b))
    local bad = block("Deep", function(_, a, s) return a + s[1][1] end)
    bad:hybridize()
    local ok, err = pcall(function() local r = bad(x, { { nd.ones({ 2 }) } }); return r end)
    assert.is_false(ok)
    assert.matches("argument 2 holds a tensor in a nested table", err, 1, true)
    assert.matches(THIS, err, 1, true)
  end)

  it("f(x, x) and f(x, y) are different graphs", function()
    local b = block("Diff", function(_, p, q) return p - q * 2 end)
    b:hybridize()
    local x, y = nd.array({ 5, 6 }), nd.array({ 1, 1 })
    close(nd.array({ -5, -6 }), b(x, x))
    close(nd.array({ 3, 4 }), b(x, y))
    close(nd.array({ -5, -6 }), b(x, x))
    close(nd.array({ -1, -1 }), b(y, y))
    close(nd.array({ 3, 4 }), b(x, y))
  end)

  it("numbers are keyed exactly, not by their 14-digit tostring", function()
    local b = block("Num", function(_, x, s) return x * s end)
    b:hybridize()
    local x = nd.ones({ 1 }, { dtype = "float64" })
    local s1, s2 = 0.1, 0.1 + 2 ^ -55
    assert.are_not.equal(s1, s2)
    assert.equal(tostring(s1), tostring(s2))
    assert.equal(s1, b(x, s1):tolist()[1])
    assert.equal(s2, b(x, s2):tolist()[1])
    assert.equal(s1, b(x, s1):tolist()[1])
  end)
end)

describe("hybridize: state and modes", function()
  it("deferred-init blocks hybridized before their first call match eager values", function()
    mx.random.seed(21)
    local net = nn.HybridSequential()
    net:add(nn.Dense(4, { activation = "relu" }), nn.Dense(2))
    net:initialize()
    net:hybridize()
    local x = nd.random.normal(0, 1, { 3, 5 })
    local y1 = net(x)
    assert.same({ 3, 2 }, y1:shape())
    assert.same({ 4, 5 }, net[1].weight:data():shape())
    local y2 = net(x)
    net:hybridize(false)
    local eager = net(x)
    close(eager, y1)
    close(eager, y2)
  end)

  it("set_data on a Dense weight is seen by the next replay", function()
    local net = nn.Dense(2, { in_units = 3 })
    net:initialize()
    net:hybridize()
    local x = nd.array({ { 1, 2, 3 } })
    net(x)
    net(x)
    net.weight:set_data(nd.array({ { 1, 0, 0 }, { 0, 0, 1 } }))
    net.bias:set_data(nd.array({ 10, 20 }))
    close(nd.array({ { 11, 23 } }), net(x))
  end)

  it("switches between predict and train mode: dropout and BatchNorm follow the mode", function()
    mx.random.seed(22)
    local function make()
      local n = nn.HybridSequential()
      n:add(nn.Dense(8, { in_units = 4 }), nn.BatchNorm({ in_channels = 8 }), nn.Dropout(0.5))
      n:initialize(mx.init.Constant(0.3))
      return n
    end
    local net, ref = make(), make()
    net:hybridize()
    local x = nd.random.normal(1, 2, { 6, 4 })
    local p1 = net(x)
    close(ref(x), p1)
    local t1
    autograd.record(function() t1 = net(x) end)
    local zeros = 0
    for _, v in ipairs(t1:reshape({ -1 }):tolist()) do if v == 0 then zeros = zeros + 1 end end
    assert.is_true(zeros > 5 and zeros < 43) -- of 48: dropout ran
    -- train mode moved the running statistics; predict mode uses them (like eager)
    autograd.record(function() return ref(x) end)
    local p2 = net(x)
    close(ref(x), p2, 1e-4)
    close(net[2].running_mean:data(), ref[2].running_mean:data())
    close(p2, net(x)) -- predict mode is deterministic
  end)

  it("dropout draws a new mask on every replay", function()
    local d = nn.Dropout(0.5)
    d:hybridize()
    local x = nd.ones({ 2000 })
    local masks = {}
    for k = 1, 4 do
      autograd.record(function() masks[k] = d(x):tolist() end)
    end
    for k = 1, 4 do
      local z = 0
      for _, v in ipairs(masks[k]) do
        assert.is_true(v == 0 or math.abs(v - 2) < 1e-6)
        if v == 0 then z = z + 1 end
      end
      assert.is_true(z > 850 and z < 1150)
    end
    for k = 2, 4 do
      local same = 0
      for i = 1, 2000 do if masks[k][i] == masks[k - 1][i] then same = same + 1 end end
      assert.is_true(same < 1200) -- independent masks agree on about half
    end
  end)

  it("guards on int64 values: branches follow values above 2^53, unreadable ones raise", function()
    local b = block("Big", function(_, x)
      if x:sum():item() > 2 ^ 53 then return x - 2 end
      return x + 2
    end)
    b:hybridize()
    local small = nd.array({ 5 }, { dtype = "int64" })
    local big = nd.array({ 2 ^ 53 + 4 }, { dtype = "int64" })
    assert.same({ 7 }, b(small):tolist())
    assert.same({ 2 ^ 53 + 2 }, b(big):tolist())
    assert.same({ 7 }, b(small):tolist())
    assert.same({ 2 ^ 53 + 2 }, b(big):tolist())
    -- a guard branching on equality: 2^53 + 2 and 2^53 + 4 are different values
    local e = block("Eq", function(_, x)
      if x:sum():item() == 2 ^ 53 + 2 then return x * 0 end
      return x * 1
    end)
    e:hybridize()
    local a = nd.array({ 2 ^ 53 + 2 }, { dtype = "int64" })
    assert.same({ 0 }, e(a):tolist())
    assert.same({ 2 ^ 53 + 4 }, e(big):tolist())
    assert.same({ 0 }, e(a):tolist())
    -- 2^53 + 1 cannot be a Lua number: the forward's own item() raises, not the replay
    local odd = nd.array({ 2 ^ 53 }, { dtype = "int64" }) + nd.array({ 1 }, { dtype = "int64" })
    local ok, err = pcall(function() local r = b(odd); return r end)
    assert.is_false(ok)
    assert.matches("cannot hold exactly", err, 1, true)
    assert.matches(THIS, err, 1, true)
    assert.is_nil(err:find("guard", 1, true))
  end)

  it("a forward failing while traced leaves no tracer behind", function()
    local b = block("Fails", function(_, x) return nd.dot(x, nd.ones({ 5, 5 })) end)
    b:hybridize()
    local ok, err = pcall(function() local r = b(nd.ones({ 2, 3 })); return r end)
    assert.is_false(ok)
    assert.matches("dot", err, 1, true)
    assert.is_falsy(S.tracing)
    assert.same({ 3, 3 }, (nd.ones({ 2 }) + 2):tolist())
    -- the same block then works on a good input, and so does another
    close(nd.ones({ 2, 5 }) * 5, b(nd.ones({ 2, 5 })))
    local c = block("Fine", function(_, x) return x * 3 end)
    c:hybridize()
    close(nd.array({ 3 }), c(nd.ones({ 1 })))
    close(nd.array({ 3 }), c(nd.ones({ 1 })))
  end)
end)

describe("hybridize: errors inside a replay", function()
  it("a failing node names the node and op, at the call (inline) or the sync point (queued)", function()
    local b = block("Pick", function(_, x, i) return nd.take(x, i, { mode = "raise" }) * 2 end)
    b:hybridize()
    local x = nd.ones({ 3, 2 })
    assert.same({ { 2, 2 } }, b(x, nd.array({ 1 })):totable())
    local ok, err = pcall(function() local r = b(x, nd.array({ 9 })); return r end)
    assert.is_false(ok)
    assert.matches(THIS, err, 1, true)
    assert.matches("graph node 'take0': take: index 9 is out of range", err, 1, true)
    local imax = mx.engine.get_inline_max()
    mx.engine.set_inline_max(0)
    local line
    ok, err = pcall(function()
      line = debug.getinfo(1, "l").currentline + 1
      local r = b(x, nd.array({ 9 }))
      mx.engine.set_inline_max(imax)
      local t = r:totable()
      return t
    end)
    mx.engine.set_inline_max(imax)
    assert.is_false(ok)
    assert.matches("graph node 'take0'", err, 1, true)
    assert.matches("queued at spec/" .. THIS .. line, err, 1, true)
    assert.same({ { 2, 2 } }, b(x, nd.array({ 2 })):totable()) -- the block still works
  end)
end)
