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

---------------------------------------------------------------- activations
describe("nn activations (leaky_relu, hard_sigmoid, silu, hard_swish, gelu, log_sigmoid, mish)",
  function()
  local FX = dofile("spec/fixtures/act_torch.lua")
  local NAN = 0 / 0
  local ACTS = { -- op, opts: every elementwise form the kernels have
    { "leaky_relu", {} }, { "leaky_relu", { slope = 0.1 } },
    { "leaky_relu", { act_type = "elu", slope = 0.7 } }, { "leaky_relu", { act_type = "selu" } },
    { "leaky_relu", { act_type = "gelu" } }, { "leaky_relu", { act_type = "rrelu" } },
    { "hard_sigmoid", {} }, { "hard_sigmoid", { alpha = 0.3, beta = 0.4 } },
    { "silu", {} }, { "silu", { beta = 1.7 } }, { "hard_swish", {} }, { "gelu", {} },
    { "gelu", { approximation = "tanh" } }, { "log_sigmoid", {} }, { "mish", {} },
  }
  local function flat(t) return t:reshape({ -1 }) end
  -- values of both signs spread over [-8, 8], n of them
  local function spread(n, dtype)
    return nd.mul_scalar(nd.sin(nd.arange(1, n + 1, { dtype = "float64" }) * 1.3), { scalar = 8 })
      :astype(dtype)
  end
  -- a and b agree elementwise within tol * max(1, |b|), computed in float64 by ops (the
  -- large cases would cost seconds through tolist)
  local function agree(a, b, tol, what)
    local a64, b64 = a:astype("float64"), b:astype("float64")
    local bound = nd.mul_scalar(nd.maximum_scalar(nd.abs(b64), { scalar = 1 }), { scalar = tol })
    local worst = nd.max(nd.sub(nd.abs(nd.sub(a64, b64)), bound)):item()
    assert.is_true(worst <= 0, what .. ": exceeds the tolerance by " .. worst)
  end
  -- forward (first output) and data gradient through the op's backward, for one backend
  local function fwbw(F, op, x, g, opts)
    local y, m = F[op](x, opts)
    local dx
    if op == "leaky_relu" then dx = F.leaky_relu_backward(g, x, m, { act_type = opts.act_type,
        slope = opts.slope })
    else dx = F[op .. "_backward"](g, x, opts) end
    return y, dx
  end

  it("cpu kernels match the ref kernels (f32 large and odd sizes, f64, f16)", function()
    for _, c in ipairs(ACTS) do
      local op, opts = c[1], c[2]
      for _, n in ipairs({ 1, 7, 70001 }) do
        for _, dt in ipairs({ "float32", "float64", "float16" }) do
          local x, g = spread(n, dt), nd.cos(spread(n, dt))
          local y, dx = fwbw(nd, op, x, g, opts)
          local ry, rdx = fwbw(nd._ref, op, x, g, opts)
          local tol = dt == "float64" and 1e-12 or dt == "float16" and 2e-3 or 2e-5
          assert.are.equal(dt, y:dtype())
          local what = op .. " " .. dt .. " n=" .. n
          agree(y, ry, tol, what)
          agree(dx, rdx, tol, what .. " backward")
        end
      end
    end
  end)

  it("backward ops equal central differences of their forwards (float64)", function()
    local BW = { hard_sigmoid = nd.hard_sigmoid_backward, silu = nd.silu_backward,
      hard_swish = nd.hard_swish_backward, gelu = nd.gelu_backward,
      log_sigmoid = nd.log_sigmoid_backward, mish = nd.mish_backward }
    local xs = { -3.7, -2.2, -0.9, -0.3, 0.4, 1.1, 2.9, 5.5 } -- off every kink
    local x = nd.array(xs, { dtype = "float64" })
    local g = nd.array({ 1, -2, 0.5, 3, -1, 2, 0.25, -0.75 }, { dtype = "float64" })
    for _, c in ipairs({ { "hard_sigmoid", {} }, { "silu", { beta = 1.3 } }, { "hard_swish", {} },
      { "gelu", {} }, { "gelu", { approximation = "tanh" } }, { "log_sigmoid", {} },
      { "mish", {} } }) do
      local op, opts, h = c[1], c[2], 1e-6
      local up = nd[op](nd.add_scalar(x, { scalar = h }), opts):tolist()
      local dn = nd[op](nd.sub_scalar(x, { scalar = h }), opts):tolist()
      local gl, want = g:tolist(), {}
      for i = 1, #xs do want[i] = gl[i] * (up[i] - dn[i]) / (2 * h) end
      close(BW[op](g, x, opts), want, 1e-7)
    end
  end)

  it("propagates NaN in values and gradients (as MXNet)", function()
    for _, c in ipairs(ACTS) do
      local x = nd.array({ NAN, 1, -1 })
      local y, dx = fwbw(nd, c[1], x, nd.ones { 3 }, c[2])
      local ry, rdx = fwbw(nd._ref, c[1], x, nd.ones { 3 }, c[2])
      for _, t in ipairs({ y, dx, ry, rdx }) do
        local v = t:tolist()[1]
        assert.is_true(v ~= v, c[1] .. " " .. tostring(c[2].act_type) .. ": NaN in, not NaN out")
      end
    end
  end)

  it("matches PyTorch values and gradients (float64 and float32)", function()
    for _, dt in ipairs({ "float64", "float32" }) do
      local tol = dt == "float64" and 1e-10 or 2e-5
      for _, c in ipairs(FX.cases) do
        local x = nd.array(FX.x, { dtype = dt }):reshape(FX.shape)
        local g = nd.array(FX.g, { dtype = dt }):reshape(FX.shape)
        x:attach_grad()
        local y
        mx.autograd.record(function() y = nd[c.op](x, c.opts) end)
        y:backward(g)
        close(flat(y), c.y, tol)
        -- torch's hardsigmoid backward scales by a float32 1/6 even in float64
        close(flat(x:grad()), c.dx, c.name == "hard_sigmoid_torch" and 1e-7 or tol)
      end
      for _, key in ipairs({ "prelu", "prelu1" }) do
        local P = FX[key]
        local x = nd.array(FX.x, { dtype = dt }):reshape(FX.shape)
        local w = nd.array(P.w, { dtype = dt })
        x:attach_grad()
        w:attach_grad()
        local y
        mx.autograd.record(function() y = nd.leaky_relu(x, w, { act_type = "prelu" }) end)
        y:backward(nd.array(FX.g, { dtype = dt }):reshape(FX.shape))
        close(flat(y), P.y, tol)
        close(flat(x:grad()), P.dx, tol)
        close(w:grad(), P.dw, tol)
        local ry = nd._ref.leaky_relu(x, w, { act_type = "prelu" })
        close(flat(ry), P.y, tol)
      end
    end
  end)

  it("rrelu: random slopes in [lower, upper] in train mode, reproducible; the mean otherwise",
    function()
    local x = nd.full({ 1000 }, -2)
    mx.random.seed(5)
    local y, m = nd.leaky_relu(x, { act_type = "rrelu", training = true })
    mx.random.seed(5)
    local ry, rm = nd._ref.leaky_relu(x, { act_type = "rrelu", training = true })
    close(y, ry, 1e-6)
    close(m, rm, 1e-6)
    local s, distinct = m:tolist(), {}
    for i = 1, #s do
      assert.is_true(s[i] >= 0.125 and s[i] <= 0.334)
      assert.are.equal(-2 * s[i], y:tolist()[i])
      distinct[s[i]] = true
    end
    local count = 0
    for _ in pairs(distinct) do count = count + 1 end
    assert.is_true(count > 900)
    local mean = 0
    for i = 1, #s do mean = mean + s[i] end
    assert.is_true(math.abs(mean / #s - (0.125 + 0.334) / 2) < 0.01)
    local yi, mi = nd.leaky_relu(nd.array({ -2, 3 }), { act_type = "rrelu" })
    close(yi, { -2 * 0.2295, 3 }, 1e-6)
    close(mi, { 0.2295 }, 1e-6)
    -- the gradient uses the slopes the forward drew (autograd's train mode draws)
    local w = nd.full({ 50 }, -1)
    w:attach_grad()
    mx.random.seed(8)
    local out, mask
    mx.autograd.record(function() out, mask = nd.leaky_relu(w, { act_type = "rrelu" }) end)
    out:backward()
    close(w:grad(), mask, 1e-6)
    assert.are.same({ 50 }, mask:shape())
  end)

  it("rejects bad inputs with messages naming the op and argument", function()
    local x = nd.ones { 2, 3, 4 }
    local function err(f, pat)
      local ok, e = pcall(f)
      assert.is_false(ok)
      assert.is_truthy(tostring(e):find(pat, 1, true), tostring(e))
    end
    err(function() nd.leaky_relu(x, { act_type = "prelu" }) end, "prelu needs the input gamma")
    err(function() nd.leaky_relu(x, nd.ones { 3 }) end, "gamma is an input of act_type=prelu")
    err(function() nd.leaky_relu(x, nd.ones { 4 }, { act_type = "prelu" }) end,
      "gamma must have shape (1) or (3)")
    err(function() nd.leaky_relu(x, { act_type = "rrelu", lower_bound = 0.5, upper_bound = 0.1 })
    end, "lower_bound <= upper_bound")
    err(function() nd.leaky_relu(x, { act_type = "swish" }) end, "act_type")
    err(function() nd.gelu(x, { approximation = "none" }) end, "approximation")
    err(function() nd.silu_backward(nd.ones { 2 }, x) end, "ograd has shape")
    err(function() nd.hard_swish(nd.ones({ 2 }, { dtype = "int32" })) end, "hard_swish")
  end)

  it("maps MXNet's names LeakyReLU and hard_sigmoid", function()
    local lib = require("mx.core.lib")
    assert.are.equal(lib.ops_by_name.leaky_relu.id, lib.C.mx_op_find("LeakyReLU"))
    assert.are.equal(lib.ops_by_name.hard_sigmoid.id, lib.C.mx_op_find("hard_sigmoid"))
  end)

  -- oneDNN's blocked layout: the eltwise kernels keep it (no reorder) and agree with row-major
  local ffi, C = require("mx.core.lib").ffi, require("mx.core.lib").C
  local function blocked(x)
    local out = ffi.new("mx_tensor*[1]")
    if C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, "nChw8c", out) ~= 0 then return nil end
    return nd._wrap(out[0])
  end
  it("keeps oneDNN's blocked layout through the activations oneDNN has", function()
    local x = spread(2 * 11 * 3 * 3, "float32"):reshape({ 2, 11, 3, 3 })
    if not blocked(x) then return end -- a build without oneDNN: nothing to check
    local keep = { { "leaky_relu", { slope = 0.1 } }, { "leaky_relu", { act_type = "elu" } },
      { "leaky_relu", { act_type = "gelu" } }, { "silu", {} }, { "silu", { beta = 2 } },
      { "gelu", {} }, { "gelu", { approximation = "tanh" } }, { "hard_swish", {} },
      { "log_sigmoid", {} }, { "mish", {} } }
    for _, c in ipairs(keep) do
      local b = blocked(x)
      local r0 = tonumber(C.mx_layout_reorders())
      local y = nd[c[1]](nd[c[1]](b, c[2]), c[2])
      y:wait_to_read()
      assert.are.equal(0, tonumber(C.mx_layout_reorders()) - r0, c[1])
      assert.are.equal(C.MX_LAYOUT_ONEDNN, C.mx_tensor_layout(y.h), c[1])
      close(flat(y), flat(nd[c[1]](nd[c[1]](x, c[2]), c[2])), 1e-5)
    end
    local y, m = nd.leaky_relu(blocked(x), { slope = 0.3 })
    close(m, { 0.3 }, 1e-6)
    close(flat(y), flat(nd.leaky_relu(x, { slope = 0.3 })), 1e-6)
    -- no oneDNN algorithm: a row-major copy for the cpu kernel, same values
    for _, c in ipairs({ { "leaky_relu", { act_type = "selu" } }, { "hard_sigmoid", {} } }) do
      local z = nd[c[1]](blocked(x), c[2])
      assert.are.equal(0, C.mx_tensor_layout(z.h))
      close(flat(z), flat(nd[c[1]](x, c[2])), 1e-6)
    end
  end)
end)
