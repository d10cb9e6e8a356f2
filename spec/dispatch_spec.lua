-- spec/dispatch_spec.lua — mx.nd.dispatch: the one caller of the C invoke, its modes
-- (eager, record, trace) and the tracer's view of every kind of call: ops, creation
-- ops, ops without a gradient, views, index assignment, the optimizers' updates and
-- gluon's direct calls.
local mx = require("mx")
local D = require("mx.nd.dispatch")
local nd = mx.nd

-- Runs fn with a tracer installed; returns the events {kind, op name, inputs,
-- opts, outputs, op} in call order.
local function traced(fn)
  local ev = {}
  local prev = D.set_tracer(function(kind, op, ins, opts, outs)
    ev[#ev + 1] = { kind = kind, name = op.name, ins = ins, opts = opts, outs = outs, op = op }
  end)
  local ok, err = pcall(fn)
  D.set_tracer(prev)
  assert(ok, err)
  return ev
end

local function names(ev)
  local t = {}
  for i, e in ipairs(ev) do t[i] = e.kind .. ":" .. e.name end
  return t
end

describe("mx.nd.dispatch", function()
  it("is the only Lua caller of the C op invoke", function()
    local hits = {}
    for _, dir in ipairs { "lua/mx", "gluon" } do
      local p = io.popen("grep -rln --include='*.lua' 'mx_op_invoke' " .. dir .. "/ 2>/dev/null")
      -- (grep -r follows no symlink: lua/mx/gluon and lua/mx/core/ops are not read twice)
      for f in p:lines() do hits[#hits + 1] = (f:gsub("//", "/")) end
      p:close()
    end
    table.sort(hits)
    assert.same({ "lua/mx/nd/dispatch.lua" }, hits)
  end)

  it("reports its mode: eager, record, trace", function()
    assert.equal("eager", D.mode())
    assert.equal("record", mx.autograd.record(function() return D.mode() end))
    local mode
    traced(function() mode = D.mode() end)
    assert.equal("trace", mode)
    assert.equal("eager", D.mode())
    assert.has_error(function() D.set_tracer(42) end, "set_tracer: expected a function or nil, got number")
  end)

  it("traces ops with their inputs, outputs and options", function()
    local a, b = nd.array { 1, 2 }, nd.array { 3, 4 }
    local c, s, m
    local ev = traced(function()
      c = a + b
      s = a * 2
      m = nd.sum(c, { axis = 1 })
    end)
    assert.same({ "op:add", "op:mul_scalar", "op:sum" }, names(ev))
    assert.equal(a, ev[1].ins[1])
    assert.equal(b, ev[1].ins[2])
    assert.equal(c, ev[1].outs[1])
    assert.equal(2, ev[2].opts.scalar)
    assert.equal(s, ev[2].outs[1])
    assert.equal(1, ev[3].opts.axis)
    assert.equal(m, ev[3].outs[1])
  end)

  it("traces creation ops with the shape and value as given", function()
    local ev = traced(function()
      nd.zeros { 2, 3 }
      nd.full({ 4 }, 7, { dtype = "int32" })
      nd.arange(0, 5)
    end)
    assert.same({ "create:zeros", "create:full", "create:arange" }, names(ev))
    assert.same({ 2, 3 }, ev[1].opts.shape)
    assert.same({}, ev[1].ins)
    assert.same({ 4 }, ev[2].opts.shape)
    assert.equal(7, ev[2].opts.value)
    assert.equal("int32", ev[2].opts.dtype)
    assert.same({ 4 }, ev[2].outs[1]:shape())
    assert.equal(5, ev[3].opts.stop)
  end)

  it("traces ops that have no gradient, in record mode too", function()
    local x = nd.array { { 1, 5 }, { 7, 2 } }
    x:attach_grad()
    local ev = traced(function()
      mx.autograd.record(function()
        nd.argmax(x, { axis = 2 })
        return x * x
      end)
    end)
    assert.same({ "op:argmax", "op:mul" }, names(ev))
    assert.is_true(ev[1].op.nondiff)
  end)

  it("traces views: rows, row ranges, reshape views and detach", function()
    local x = nd.array { { 1, 2, 3 }, { 4, 5, 6 } }
    local r, rr, v, d
    local ev = traced(function()
      r = x[2]
      rr = x[{ { 1, 2 } }]
      v = x:reshape { 3, 2 }
      d = x:detach()
    end)
    assert.same({ "view:index0_view", "view:slice0_view", "view:" .. ev[3].name, "view:detach_view" },
      names(ev))
    assert.equal(2, ev[1].opts.index)
    assert.equal(r, ev[1].outs[1])
    assert.same({ 0, 2 }, { ev[2].opts.begin, ev[2].opts["end"] })
    assert.equal(rr, ev[2].outs[1])
    assert.same({ 3, 2 }, ev[3].opts.shape)
    assert.equal(v, ev[3].outs[1])
    assert.equal(x, ev[4].ins[1])
    assert.equal(d, ev[4].outs[1])
  end)

  it("traces index assignment (scalars and tensors) as one replayable op", function()
    local x = nd.zeros { 3, 2 }
    local t = nd.array { 8, 9 }
    local ev = traced(function()
      x[1] = 5
      x[{ { 2, 3 } }] = t
    end)
    assert.same({ "assign:slice_assign_scalar", "assign:slice_assign" }, names(ev))
    assert.equal(5, ev[1].opts.scalar)
    assert.same({ x }, ev[1].ins)
    assert.same({ x }, ev[1].outs)
    assert.is_nil(ev[1].opts.out) -- a frozen copy: the op's params only
    assert.equal(t, ev[2].ins[2])
    assert.same({ { 5, 5 }, { 8, 9 }, { 8, 9 } }, x:totable())
  end)

  it("traces the fixed-arity, variadic and multi-output paths", function()
    local a, b = nd.array { 1, 2 }, nd.array { 3, 4 }
    local ev = traced(function()
      nd.concat({ a, b }, { dim = 1 })
      nd.pick(nd.array { { 1, 2 }, { 3, 4 } }, nd.array { 2, 1 })
    end)
    -- (nd.array makes no op: tensors from Lua data are the trace's constants)
    assert.same({ "op:concat", "op:pick" }, names(ev))
    assert.equal(2, #ev[1].ins)
  end)

  it("traces the optimizers' fused updates and gluon's direct calls", function()
    local w, g = nd.array { 1, 2 }, nd.array { 1, 1 }
    local opt = mx.optimizer.create("sgd", { learning_rate = 0.5 })
    local net = mx.gluon.nn.Dense(2, { in_units = 2 })
    net:initialize()
    local ev = traced(function()
      opt:update(1, w, g, opt:create_state(1, w))
      net:forward(nd.ones { 1, 2 })
    end)
    local seen = {}
    for _, e in ipairs(ev) do seen[e.kind .. ":" .. e.name] = e end
    assert.is_not_nil(seen["op:sgd_update"])
    assert.equal(w, seen["op:sgd_update"].outs[1])
    assert.equal(0.5, seen["op:sgd_update"].opts._params.lr)
    assert.is_not_nil(seen["op:fully_connected"])
    assert.same({ 0.5, 1.5 }, w:tolist())
  end)

  it("gives the tracer frozen options: the caller's table may change later", function()
    local x = nd.ones { 2, 3 }
    local o = { axis = { 1 } }
    local ev = traced(function() nd.sum(x, o) end)
    o.axis[1] = 2
    assert.same({ 1 }, ev[1].opts.axis)
    assert.are_not.equal(o, ev[1].opts)
  end)

  it("stops tracing when the tracer is removed", function()
    local n = 0
    local prev = D.set_tracer(function() n = n + 1 end)
    local _ = nd.ones { 2 } + 1
    D.set_tracer(prev)
    _ = nd.ones { 2 } + 1
    assert.equal(2, n)
  end)
end)
