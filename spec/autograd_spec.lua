-- mx.autograd: recording scopes and flags, variables and grad_req, backward/grad,
-- higher order, views, custom Functions, stop_gradient/detach, errors, aux inputs and
-- nondiff ops (memory and direct gradient writes: autograd_memory_spec.lua).
local mx = require("mx")
local ffi = require("ffi")
local ag = mx.autograd
local nd = mx.nd

local function f64(t) return nd.array(t, { dtype = "float64" }) end

local function close(a, b, tol)
  tol = tol or 1e-9
  local ta = type(a) == "table" and a or a:tolist()
  local tb = type(b) == "table" and b or b:tolist()
  assert.are.equal(#tb, #ta)
  for i = 1, #ta do
    if math.abs(ta[i] - tb[i]) > tol * (1 + math.abs(tb[i])) then
      error(string.format("element %d: %.10g vs %.10g", i, ta[i], tb[i]), 2)
    end
  end
end

local function map(x, f)
  local t = x:tolist()
  for i = 1, #t do t[i] = f(t[i]) end
  return t
end

describe("autograd scopes and flags", function()
  it("record and pause set the flags and restore them", function()
    assert.is_false(ag.is_recording())
    assert.is_false(ag.is_training())
    local seen = ag.record(function()
      local inner = { ag.is_recording(), ag.is_training() }
      ag.pause(function()
        inner[3], inner[4] = ag.is_recording(), ag.is_training()
      end)
      inner[5] = ag.is_recording()
      return inner
    end)
    assert.are.same({ true, true, false, false, true }, seen)
    assert.is_false(ag.is_recording())
    assert.is_false(ag.is_training())
  end)

  it("record{train_mode=false}, train_mode and predict_mode", function()
    assert.is_false(ag.record(function() return ag.is_training() end, { train_mode = false }))
    assert.is_true(ag.train_mode(function() return ag.is_training() end))
    assert.is_false(ag.record(function()
      return ag.predict_mode(function() return ag.is_training() end)
    end))
    assert.is_true(ag.pause(function() return ag.is_training() end, { train_mode = true }))
  end)

  it("set_recording / set_training return the previous state", function()
    assert.is_false(ag.set_recording(true))
    assert.is_true(ag.is_recording())
    assert.is_true(ag.set_recording(false))
    assert.is_false(ag.set_training(true))
    assert.is_true(ag.set_training(false))
    assert.is_false(ag.is_recording())
    assert.is_false(ag.is_training())
  end)

  it("restores the flags when the function errors, and passes the error on", function()
    local ok, err = pcall(ag.record, function() error("boom") end)
    assert.is_false(ok)
    assert.matches("boom", err)
    assert.is_false(ag.is_recording())
    assert.is_false(ag.is_training())
  end)

  it("returns every result of the function and passes extra arguments", function()
    local a, b, c = ag.record(function(x, y) return x, y, 3 end, nil, 1, 2)
    assert.are.same({ 1, 2, 3 }, { a, b, c })
  end)
end)

describe("autograd basics", function()
  it("y = x*x + x gives 2x + 1 (a tensor used several times accumulates)", function()
    local x = f64 { 1, -2, 3 }
    x:attach_grad()
    local y = ag.record(function() return x * x + x end)
    y:backward()
    close(x:grad(), { 3, -3, 7 })
  end)

  it("a head with no head_grad means ones; a number or a tensor scales", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    ag.record(function() return x * 3 end):backward(2)
    close(x:grad(), { 6, 6 })
    ag.record(function() return x * 3 end):backward(f64 { 1, -1 })
    close(x:grad(), { 3, -3 })
  end)

  it("mx.autograd.backward with several heads and head_grads", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local y1, y2 = ag.record(function() return x * x, x * 5 end)
    ag.backward({ y1, y2 }, { f64 { 1, 1 }, f64 { 2, 0 } })
    close(x:grad(), { 2 + 10, 4 })
  end)

  it("grad_req write overwrites, add accumulates, null takes no gradient", function()
    local w, a, n = f64 { 1, 2 }, f64 { 1, 2 }, f64 { 1, 2 }
    w:attach_grad("write")
    a:attach_grad("add")
    n:attach_grad("null")
    for _ = 1, 3 do
      ag.record(function() return w * a * n end):backward()
    end
    close(w:grad(), { 1, 4 })         -- a * n, written each time
    close(a:grad(), { 3 * 1, 3 * 4 }) -- w * n, three times
    assert.is_nil(n:grad())
    a:zero_grad()
    close(a:grad(), { 0, 0 })
  end)

  it("backward writes into the same gradient buffer every time", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local g = x:grad()
    local p = ffi.cast("intptr_t", g:data_ptr())
    close(g, { 0, 0 })
    ag.record(function() return x * x end):backward()
    assert.are.equal(tonumber(p), tonumber(ffi.cast("intptr_t", x:grad():data_ptr())))
    close(g, { 2, 4 })
  end)

  it("backward twice without retain_graph raises a clear error; retain_graph allows it", function()
    local x = f64 { 1, 2 }
    x:attach_grad("add")
    local y = ag.record(function() return nd.exp(x) * 2 end)
    y:backward({ retain_graph = true })
    y:backward()
    close(x:grad(), map(x, function(v) return 4 * math.exp(v) end))
    local ok, err = pcall(function() y:backward() end)
    assert.is_false(ok)
    assert.matches("retain_graph", err)
    assert.matches("autograd_spec.lua:%d+:", err) -- blames the caller's line
  end)

  it("recording off records nothing; ops under pause are not recorded", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local y = x * x
    assert.is_nil(ag.get_symbol_size(y))
    local ok, err = pcall(function() y:backward() end)
    assert.is_false(ok)
    assert.matches("not part of a recorded graph", err)
    local z, p = ag.record(function()
      local q = ag.pause(function() return x * 2 end)
      return x * q, q
    end)
    assert.is_nil(ag.get_symbol_size(p))
    assert.are.equal(1, ag.get_symbol_size(z))
    z:backward()
    close(x:grad(), { 2, 4 }) -- q counts as a constant
  end)

  it("ops on tensors without attach_grad are not recorded", function()
    local a, b = f64 { 1 }, f64 { 2 }
    local c = ag.record(function() return a + b end)
    assert.is_nil(ag.get_symbol_size(c))
  end)

  it("the tape is freed after backward", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local y = ag.record(function() return nd.tanh(x * x) end)
    assert.are.equal(2, ag.get_symbol_size(y))
    y:backward()
    assert.are.equal(0, ag.get_symbol_size(y)) -- the head is still marked, its graph is gone
  end)

  it("mx.autograd.grad returns new tensors and leaves the buffers alone", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local y = ag.record(function() return x * x * x end)
    local g = ag.grad(y, x, { retain_graph = true })
    close(g, { 3, 12 })
    close(x:grad(), { 0, 0 })
    local gl = ag.grad({ y }, { x }, { head_grads = { f64 { 2, 2 } }, retain_graph = false })
    assert.are.equal("table", type(gl))
    close(gl[1], { 6, 24 })
  end)

  it("grad of an intermediate result", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local h, y
    ag.record(function()
      h = x * 3
      y = h * h
    end)
    close(ag.grad(y, h, { retain_graph = true }), { 6, 12 })
    close(ag.grad(y, x), { 18, 36 })
    -- the last backward of a graph (no retain_graph) still returns intermediates
    local h2, y2
    ag.record(function()
      h2 = x * 3
      y2 = h2 * h2
    end)
    local g = ag.grad(y2, { h2, x })
    close(g[1], { 6, 12 })
    close(g[2], { 18, 36 })
  end)

  it("attach_grad on a recorded result makes it a leaf", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local h = ag.record(function() return x * 3 end)
    h:attach_grad()
    ag.record(function() return h * h end):backward()
    close(h:grad(), { 6, 12 })
    close(x:grad(), { 0, 0 })
  end)

  it("gradient formulas are told which inputs need a gradient", function()
    local op = require("mx.core.lib").ops_by_name.mul
    local orig, seen = op.grad, nil
    op.grad = function(F, x, y, g, p, need)
      seen = { need[1], need[2] }
      return orig(F, x, y, g, p, need)
    end
    local ok, err = pcall(function()
      local w, data = f64 { 1, 2 }, f64 { 3, 4 }
      w:attach_grad()
      ag.record(function() return data * w end):backward()
      close(w:grad(), { 3, 4 })
    end)
    op.grad = orig
    assert(ok, err)
    assert.are.same({ false, true }, seen)
  end)

  it("dtypes: float32 variables get float32 gradients", function()
    local x = nd.array { 1, 2 }
    x:attach_grad()
    ag.record(function() return x * x end):backward()
    assert.are.equal("float32", x:grad():dtype())
    close(x:grad(), { 2, 4 }, 1e-6)
  end)

  it("keeps a frozen copy of each op's options: changing the caller's table later is harmless", function()
    local a = nd.array { { 1, 2, 3 }, { 4, 5, 6 } }
    a:attach_grad()
    local b = nd.array { { 2, 2, 2 }, { 3, 3, 3 } }
    local o = { axis = 1 }
    local y = mx.autograd.record(function() return (a + b):sum(o) end)
    o.axis = 2
    y:backward()
    assert.same({ { 1, 1, 1 }, { 1, 1, 1 } }, a:grad():totable())
    -- list values are copied too, and so are the options of the general path
    local l = { axis = { 1 } }
    y = mx.autograd.record(function() return (a * b):sum(l) end)
    l.axis[1] = 2
    y:backward()
    assert.same(b:totable(), a:grad():totable())
    local c = { dim = 1 }
    y = mx.autograd.record(function() return nd.concat({ a, b }, c):sum() end)
    c.dim = 2
    y:backward()
    assert.same({ { 1, 1, 1 }, { 1, 1, 1 } }, a:grad():totable())
  end)
end)

describe("autograd stop_gradient and detach", function()
  it("stop_gradient is the identity forward and blocks the gradient", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local s
    local y = ag.record(function()
      s = nd.stop_gradient(x)
      return x * s
    end)
    close(s, { 1, 2 })
    assert.are.equal("float64", s:dtype())
    y:backward()
    close(x:grad(), { 1, 2 }) -- only the direct path
    local i = nd.stop_gradient(nd.array({ 1, 2 }, { dtype = "int32" }))
    assert.are.equal("int32", i:dtype())
    assert.are.same({ 1, 2 }, i:tolist())
  end)

  it("detach shares the data and leaves the graph", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local d
    local y = ag.record(function()
      d = x:detach()
      return x * d * d
    end)
    y:backward()
    close(x:grad(), { 1, 4 })
    assert.are.equal(tonumber(ffi.cast("intptr_t", x:data_ptr())),
      tonumber(ffi.cast("intptr_t", d:data_ptr())))
  end)
end)

describe("autograd through views", function()
  it("x[2] sends its gradient to row 2 of the base", function()
    local x = f64 { { 1, 2 }, { 3, 4 }, { 5, 6 } }
    x:attach_grad()
    ag.record(function() return x[2] * x[2] end):backward()
    close(x:grad(), { 0, 0, 6, 8, 0, 0 })
  end)

  it("ranges on the first axis and negative indices", function()
    local x = f64 { { 1, 2 }, { 3, 4 }, { 5, 6 } }
    x:attach_grad()
    ag.record(function() return x[{ { 2, 3 } }] * 2 + x[-1] end):backward()
    close(x:grad(), { 0, 0, 2, 2, 4, 4 }) -- x[-1] broadcasts over 2 rows
  end)

  it("reshape views", function()
    local x = f64 { 1, 2, 3, 4, 5, 6 }
    x:attach_grad()
    local y = ag.record(function() return x:reshape(2, 3) * f64 { 1, 2, 3 } end)
    assert.are.same({ 2, 3 }, y:shape())
    y:backward()
    close(x:grad(), { 1, 2, 3, 1, 2, 3 })
  end)

  it("second order through a view", function()
    local x = f64 { { 1, 2 }, { 3, 4 } }
    x:attach_grad()
    local g
    ag.record(function()
      local r = x[2]
      g = ag.grad(r * r * r, x, { create_graph = true })
    end)
    close(g, { 0, 0, 27, 48 })
    g:backward()
    close(x:grad(), { 0, 0, 18, 24 })
  end)
end)

describe("autograd out= and in-place writes", function()
  it("out= into a fresh tensor is recorded", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local c = f64 { 0, 0 }
    ag.record(function() nd.mul(x, x, { out = c }) end)
    c:backward()
    close(x:grad(), { 2, 4 })
  end)

  it("out= into a variable or a recorded result is a clear error", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local ok, err = pcall(ag.record, function()
      nd.mul(x, 2, { out = x })
    end)
    assert.is_false(ok)
    assert.matches("not supported under mx.autograd.record", err)
    assert.matches("autograd_spec.lua:%d+:", err)
    ok, err = pcall(ag.record, function()
      local y = x * x
      nd.add(y, x, { out = y })
    end)
    assert.is_false(ok)
    assert.matches("recorded result", err)
  end)

  it("index assignment into a graph tensor under record is a clear error", function()
    local x = f64 { { 1, 2 }, { 3, 4 } }
    x:attach_grad()
    local ok, err = pcall(ag.record, function() x[1] = 5 end)
    assert.is_false(ok)
    assert.matches("autograd_spec.lua:%d+: index assignment into a variable", err)
    ok, err = pcall(ag.record, function()
      local y = x * 2
      y[2] = x[1]
    end)
    assert.is_false(ok)
    assert.matches("recorded result", err)
    local z = f64 { 0, 0 } -- a plain tensor: fine
    ag.record(function() z[1] = 7 end)
    close(z, { 7, 0 })
  end)

  it("in-place updates under pause are allowed", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    ag.record(function()
      ag.pause(function() nd.mul(x, 2, { out = x }) end)
    end)
    close(x, { 2, 4 })
  end)
end)

describe("autograd higher order", function()
  local function second(f, x0, d2)
    local x = f64(x0)
    x:attach_grad()
    local g
    ag.record(function()
      g = ag.grad(f(x), x, { create_graph = true })
    end)
    g:backward()
    close(x:grad(), map(x, d2), 1e-9)
  end

  it("d2/dx2 exp = exp", function()
    second(nd.exp, { -1, 0.5, 2 }, math.exp)
  end)

  it("d2/dx2 tanh = -2 tanh (1 - tanh^2)", function()
    second(nd.tanh, { -1, 0.5, 2 }, function(v)
      local t = math.tanh(v)
      return -2 * t * (1 - t * t)
    end)
  end)

  it("d2/dx2 x^3 = 6x (pow_scalar and x*x*x)", function()
    second(function(x) return x ^ 3 end, { -1, 0.5, 2 }, function(v) return 6 * v end)
    second(function(x) return x * x * x end, { -1, 0.5, 2 }, function(v) return 6 * v end)
  end)

  it("d2/dx2 sin = -sin", function()
    if not nd.sin then return pending("no sin op") end
    second(nd.sin, { -1, 0.5, 2 }, function(v) return -math.sin(v) end)
  end)

  it("third order: d3/dx3 x^4 = 24x", function()
    local x = f64 { 0.5, -2 }
    x:attach_grad()
    local g2
    ag.record(function()
      local g1 = ag.grad(x ^ 4, x, { create_graph = true })
      g2 = ag.grad(g1, x, { create_graph = true })
    end)
    close(g2, { 12 * 0.25, 12 * 4 })
    g2:backward()
    close(x:grad(), { 24 * 0.5, 24 * -2 })
  end)

  it("Hessian-vector product of a small MLP matches finite differences", function()
    if not (nd.dot and nd.sum) then return pending("needs dot and sum") end
    math.randomseed(7)
    local function rnd(r, c)
      local t = {}
      for i = 1, r do
        t[i] = {}
        for j = 1, c do t[i][j] = math.random() - 0.5 end
      end
      return f64(t)
    end
    local X, W1, W2 = rnd(5, 4), rnd(4, 6), rnd(6, 3)
    local V = rnd(4, 6)
    W1:attach_grad()
    W2:attach_grad()
    local function loss(w1)
      local h = nd.tanh(nd.dot(X, w1))
      return nd.sum(nd.square(nd.dot(h, W2)))
    end
    local hv
    ag.record(function()
      local g = ag.grad(loss(W1), W1, { create_graph = true })
      hv = ag.grad(nd.sum(g * V), W1)
    end)
    -- finite differences of the gradient along V
    local eps = 1e-6
    local function grad_at(w)
      w:attach_grad()
      local l = ag.record(function() return loss(w) end)
      return ag.grad(l, w)
    end
    local gp = grad_at(W1 + V * eps)
    local gm = grad_at(W1 - V * eps)
    local fd = map((gp - gm), function(v) return v / (2 * eps) end)
    close(hv, fd, 1e-5)
  end)
end)

describe("autograd custom Function", function()
  local Sigmoid = ag.Function:extend()
  function Sigmoid.forward(self, x)
    local y = 1 / (1 + nd.exp(-x))
    self:save_for_backward(y)
    return y
  end
  function Sigmoid.backward(self, dy)
    local y = self.saved_tensors[1]
    return dy * y * (1 - y)
  end

  it("forward and backward inside record", function()
    local x = f64 { -1, 0, 2 }
    x:attach_grad()
    local y = ag.record(function() return Sigmoid()(x) * 2 end)
    close(y, map(x, function(v) return 2 / (1 + math.exp(-v)) end))
    y:backward()
    close(x:grad(), map(x, function(v)
      local s = 1 / (1 + math.exp(-v))
      return 2 * s * (1 - s)
    end))
  end)

  it("forward runs unrecorded; outside record nothing is recorded", function()
    local x = f64 { 1 }
    x:attach_grad()
    local inner
    local Probe = ag.Function:extend()
    function Probe.forward(_, a)
      inner = ag.is_recording()
      return a * 1
    end
    function Probe.backward(_, dy) return dy end
    local y = ag.record(function() return Probe()(x) end)
    assert.is_false(inner)
    assert.are.equal(1, ag.get_symbol_size(y))
    assert.is_nil(ag.get_symbol_size(Probe()(x)))
  end)

  it("several inputs and outputs, nil gradient for a constant input", function()
    local MulAdd = ag.Function:extend()
    function MulAdd.forward(self, a, b)
      self:save_for_backward(a, b)
      return a * b, a + b
    end
    function MulAdd.backward(self, d1, d2)
      local a, b = self.saved_tensors[1], self.saved_tensors[2]
      return d1 * b + d2, d1 * a + d2
    end
    local a, b = f64 { 1, 2 }, f64 { 3, 4 }
    a:attach_grad()
    b:attach_grad()
    local p, s = ag.record(function() return MulAdd()(a, b) end)
    ag.backward({ p, s }, { f64 { 1, 1 }, f64 { 10, 10 } })
    close(a:grad(), { 13, 14 })
    close(b:grad(), { 11, 12 })
    -- only one output used: the other's gradient is zeros
    local p2 = ag.record(function() return (MulAdd()(a, b)) end)
    p2:backward()
    close(a:grad(), { 3, 4 })
  end)
end)

describe("autograd train mode reaches the ops", function()
  it("an op with train_flag gets its param from the flag unless given", function()
    local fill = nd._fill_params
    local op = {
      name = "fake", params = { { name = "training", type = "bool", default = false } },
      pindex = {}, train_param = "training",
      P = ffi.new("struct { bool training; }"), defaults = ffi.new("struct { bool training; }"),
      size = 1,
    }
    op.pindex.training = op.params[1]
    assert.is_false(fill(op, nil).training)
    assert.is_true(ag.train_mode(function() return fill(op, nil).training end))
    assert.is_true(ag.record(function() return fill(op, nil).training end))
    assert.is_false(ag.record(function() return fill(op, nil).training end, { train_mode = false }))
    assert.is_false(ag.train_mode(function() return fill(op, { training = false }).training end))
  end)

  it("dropout drops in train mode only", function()
    if not (nd.dropout and require("mx.core.lib").ops_by_name.dropout.train_flag) then
      return pending("no dropout op with train_flag")
    end
    local x = nd.ones { 1000 }
    local kept_train = ag.train_mode(function() return nd.dropout(x, { p = 0.5 }) end)
    local kept_pred = ag.predict_mode(function() return nd.dropout(x, { p = 0.5 }) end)
    local zeros = 0
    for _, v in ipairs(kept_train:tolist()) do if v == 0 then zeros = zeros + 1 end end
    assert.is_true(zeros > 300 and zeros < 700)
    close(kept_pred, x:tolist())
    -- its gradient is the mask, with the train mode the forward saw
    local v = nd.ones { 100 }
    v:attach_grad()
    local y = ag.record(function() return nd.dropout(v, { p = 0.5 }) end)
    y:backward()
    close(v:grad(), y:tolist())
  end)
end)

describe("autograd errors", function()
  it("attach_grad checks grad_req", function()
    local ok, err = pcall(function() f64 { 1 }:attach_grad("sometimes") end)
    assert.is_false(ok)
    assert.matches("autograd_spec.lua:%d+: attach_grad: grad_req", err)
  end)

  it("a head_grad of the wrong shape", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local y = ag.record(function() return x * 2 end)
    local ok, err = pcall(function() y:backward(f64 { 1, 2, 3 }) end)
    assert.is_false(ok)
    assert.matches("head_grad 1 has shape %(3%)", err)
  end)

  it("grad of a tensor that takes no part in autograd", function()
    local x, z = f64 { 1, 2 }, f64 { 1 }
    x:attach_grad()
    local y = ag.record(function() return x * 2 end)
    local ok, err = pcall(ag.grad, y, z)
    assert.is_false(ok)
    assert.matches("variable 1 takes no part", err)
  end)

  it("an error in a gradient formula names the op and the caller's line", function()
    local Boom = ag.Function:extend()
    function Boom.forward(_, x) return x * 1 end
    function Boom.backward() error("boom") end
    local x = f64 { 1 }
    x:attach_grad()
    local y = ag.record(function() return Boom()(x) end)
    local ok, err = pcall(function() y:backward() end)
    assert.is_false(ok)
    assert.matches("^[^:]*autograd_spec.lua:%d+: backward of op 'custom_function': .*boom", err)
    assert.is_false(ag.is_recording())
  end)

  it("a gradient of the wrong shape is caught", function()
    local Bad = ag.Function:extend()
    function Bad.forward(_, x) return x * 1 end
    function Bad.backward() return f64 { 1, 2, 3 } end
    local x = f64 { 1, 2 }
    x:attach_grad()
    local y = ag.record(function() return Bad()(x) end)
    local ok, err = pcall(function() y:backward() end)
    assert.is_false(ok)
    assert.matches("returned shape %(3%) for input 1 of shape %(2%)", err)
  end)

  it("unknown options", function()
    local ok, err = pcall(ag.grad, f64 { 1 }, f64 { 1 }, { retain = true })
    assert.is_false(ok)
    assert.matches("unknown option 'retain'", err)
  end)
end)

describe("autograd and auxiliary inputs", function()
  it("an op's aux inputs (op table `aux`) take no gradient and are no edge of the graph", function()
    local tape = require("mx.autograd.tape")
    -- a table entry shaped like BatchNorm's: data plus one auxiliary state
    local seen_need
    local fake = { name = "fake_aux", inputs = { "data", "state" }, aux = { "state" },
      outputs = { "out" },
      grad = function(_, _, _, g, _, need)
        seen_need = need
        return { g[1], g[1] }
      end }
    local x, s = nd.ones { 3 }, nd.ones { 3 }
    x:attach_grad()
    s:attach_grad()
    local y
    mx.autograd.record(function()
      y = x * 1 -- stands for the op's output; recorded as fake_aux's below
      y = y + 0
      local z = nd.zeros_like(y) + y
      tape._record(fake, { z, s }, nil, { y })
    end)
    y:backward()
    assert.are.same({ 1, 1, 1 }, x:grad():tolist())
    assert.are.same({ 0, 0, 0 }, s:grad():tolist()) -- untouched: no edge to the state
    assert.is_false(seen_need[2])
  end)
end)

describe("autograd through nondiff ops (MXNet: zero gradients)", function()
  local function second(f, x0)
    local x = f64(x0)
    x:attach_grad()
    local g
    ag.record(function() g = ag.grad(f(x), x, { create_graph = true }) end)
    g:backward() -- the first derivative is piecewise constant: its derivative is 0
    return g, x:grad()
  end
  local x0 = { -2, -0.5, 0.5, 2 }

  it("create_graph second derivative of abs is zero", function()
    local g, gg = second(nd.abs, x0)
    close(g, { -1, -1, 1, 1 })
    close(gg, { 0, 0, 0, 0 })
  end)

  it("create_graph second derivative of clip is zero", function()
    local g, gg = second(function(x) return nd.clip(x, { a_min = -1, a_max = 1 }) end, x0)
    close(g, { 0, 1, 1, 0 })
    close(gg, { 0, 0, 0, 0 })
  end)

  it("create_graph second derivative of relu is zero", function()
    local g, gg = second(nd.relu, x0)
    close(g, { 0, 0, 1, 1 })
    close(gg, { 0, 0, 0, 0 })
  end)

  it("a constant factor from sign still lets the rest differentiate: d2/dx2 |x| x = 2 sign x", function()
    local _, gg = second(function(x) return nd.abs(x) * x end, x0)
    close(gg, { -2, -2, 2, 2 })
  end)

  it("backward from a head cut by stop_gradient gives zero gradients, not an error", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local y = ag.record(function() return nd.sum(nd.stop_gradient(x * 2)) end)
    y:backward()
    close(x:grad(), { 0, 0 })
    local z = ag.record(function() return nd.stop_gradient(x * x) + 1 end)
    close(ag.grad(z, x), { 0, 0 })
  end)

  it("a head computed outside record still raises", function()
    local x = f64 { 1, 2 }
    x:attach_grad()
    local y = nd.stop_gradient(x * 2)
    assert.has_error(function() y:backward() end,
      "backward: head 1 is not part of a recorded graph (compute it inside "
        .. "mx.autograd.record from tensors with attach_grad)")
  end)

  it("a comparison result may still be written in place while recording", function()
    local x = f64 { 1, -2 }
    x:attach_grad()
    ag.record(function()
      local m = nd.greater_scalar(x, { scalar = 0 })
      m[1] = 5
      close(m, { 5, 0 })
    end)
  end)
end)
