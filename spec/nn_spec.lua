-- The nn op family (kernels/{ref,cpu}/nn.c): dropout and activation, cpu against ref,
-- the train flag, reproducibility under mx.random.seed, shared masks, gradients.
local mx = require("mx")
local nn = mx.gluon.nn
local nd = mx.nd

local close = require("helpers.close").within(1e-5)

describe("activation op", function()
  it("matches the formulas in float64 and float32, cpu and ref", function()
    local vals = { -30, -3, -0.5, 0.25, 2, 40 }
    local f = {
      relu = function(v) return math.max(v, 0) end,
      sigmoid = function(v) return 1 / (1 + math.exp(-v)) end,
      tanh = function(v) return math.tanh(v) end,
      softrelu = function(v) return v > 0 and v + math.log(1 + math.exp(-v)) or math.log(1 + math.exp(v)) end,
      softsign = function(v) return v / (1 + math.abs(v)) end,
    }
    for name, fn in pairs(f) do
      local e = {}
      for i, v in ipairs(vals) do e[i] = fn(v) end
      close(nd.activation(nd.array(vals, { dtype = "float64" }), { act_type = name }), e, 1e-12)
      close(nd._ref.activation(nd.array(vals), { act_type = name }), e, 1e-6)
      close(nd.activation(nd.array(vals), { act_type = name }), e, 1e-6)
    end
    assert.has_error(function() nd.activation(nd.ones { 2 }, { act_type = "gelu" }) end)
  end)
end)

describe("dropout", function()
  it("is the identity outside train mode and drops ~p in train mode", function()
    local d = nn.Dropout(0.3)
    local x = nd.ones { 100, 100 }
    assert.are.equal(x, d(x))
    mx.random.seed(1)
    local y = mx.autograd.train_mode(function() return d(x) end)
    local v = y:tolist()
    local zeros = 0
    for i = 1, #v do
      if v[i] == 0 then zeros = zeros + 1
      else assert.is_true(math.abs(v[i] - 1 / 0.7) < 1e-6) end
    end
    assert.is_true(math.abs(zeros / #v - 0.3) < 0.02, "dropped fraction " .. zeros / #v)
  end)

  it("is reproducible under mx.random.seed and the cpu kernel equals the ref kernel", function()
    local x = nd.random_normal { shape = { 50, 40 } }
    mx.random.seed(42)
    local a, ma = nd.dropout(x, { p = 0.5, mode = "always" })
    mx.random.seed(42)
    local b = nd.dropout(x, { p = 0.5, mode = "always" })
    mx.random.seed(42)
    local c, mc = nd._ref.dropout(x, { p = 0.5, mode = "always" })
    close(a, b:tolist(), 0)
    close(a, c:tolist(), 1e-6)
    close(ma, mc:tolist(), 1e-6)
    local d = nd.dropout(x, { p = 0.5, mode = "always" })
    assert.is_true((d - a):abs():sum():item() > 0)
  end)

  it("draws in program order even when independent ops run concurrently", function()
    local a, b = nd.ones { 200, 200 }, nd.ones { 200, 200 }
    local function run()
      mx.random.seed(5)
      local r = {}
      for i = 1, 12 do
        local _, m = nd.dropout(i % 2 == 0 and a or b, { p = 0.5, mode = "always" })
        r[i] = m
      end
      nd.waitall()
      return r
    end
    local r1, r2 = run(), run()
    for i = 1, 12 do assert.are.equal(0, (r1[i] - r2[i]):abs():sum():item()) end
    assert.is_true((r1[1] - r1[2]):abs():sum():item() > 0)
  end)

  it("shares the mask along axes and passes the gradient through the mask", function()
    local x = nd.ones { 4, 6, 3 }
    mx.random.seed(3)
    local y, m = nd.dropout(x, { p = 0.5, mode = "always", axes = { 2 } })
    assert.are.same({ 4, 1, 3 }, m:shape())
    local v = y:tolist()
    for i = 0, 3 do
      for k = 0, 2 do
        local first = v[i * 18 + k + 1]
        for j = 1, 5 do assert.are.equal(first, v[i * 18 + j * 3 + k + 1]) end
      end
    end
    local w = nd.random_normal { shape = { 8, 8 } }
    w:attach_grad()
    mx.random.seed(9)
    local out
    mx.autograd.record(function() out = nd.dropout(w, { p = 0.25 }) end)
    out:backward()
    mx.random.seed(9)
    local _, mask = nd.dropout(w, { p = 0.25, training = true })
    close(w:grad(), mask:tolist(), 1e-6)
  end)

  it("validates p and dtype", function()
    assert.has_error(function() nd.dropout(nd.ones { 2 }, { p = 1.5 }) end)
    assert.has_error(function() nd.dropout(nd.ones({ 2 }, { dtype = "int32" })) end)
    assert.has_error(function() nn.Dropout(-0.1) end)
  end)
end)
