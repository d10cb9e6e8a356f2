-- mx.mon.Monitor against MXNet 1.9.1's (spec/fixtures/monitor_mxnet.lua, made by
-- tools/fixtures/make_monitor_fixture.py): the rows of an executor's activated step (its
-- op outputs, with monitor_all its ops' inputs, then the arguments), pattern, sort and
-- interval; installed on a Module and through fit{monitor=}; errors.
local mx = require("mx")
local nd, S = mx.nd, mx.sym
local want = dofile("spec/fixtures/monitor_mxnet.lua")

local function net()
  local x = S.var("data")
  local fc1 = S.FullyConnected(x, { num_hidden = 4, name = "fc1" })
  local a = S.Activation(fc1, { act_type = "relu", name = "relu1" })
  local fc2 = S.FullyConnected(a, { num_hidden = 3, name = "fc2" })
  return S.SoftmaxOutput(fc2, { name = "softmax" })
end

local function bound()
  local ex = net():simple_bind(mx.cpu(), { data = { 2, 5 } })
  for _, n in ipairs(ex.arg_names) do
    local v = ex.arg_dict[n]
    local t = {}
    for i = 0, v:size() - 1 do t[#t + 1] = (i % 3) * 0.1 end
    v[{}] = nd.array(t):reshape(v:shape())
  end
  ex.arg_dict.softmax_label[{}] = nd.array({ 0, 2 })
  return ex
end

-- rows equal MXNet's: steps and names in order, values within float32 rounding
local function same_rows(got, exp)
  assert.equal(#exp, #got)
  for i, e in ipairs(exp) do
    local g = got[i]
    assert.equal(e[1], g[1], "row " .. i)
    assert.equal(e[2], g[2], "row " .. i)
    local a, b = tonumber((g[3]:gsub("\t$", ""))), tonumber((e[3]:gsub("\t$", "")))
    assert.is_true(math.abs(a - b) <= 1e-6 * (1 + math.abs(b)), e[2] .. ": " .. g[3] .. " vs " .. e[3])
    assert.equal("\t", g[3]:sub(-1))
  end
end

describe("mx.mon.Monitor", function()
  it("reports the forward's op outputs, the backward's and the arguments as MXNet 1.9.1", function()
    local ex = bound()
    local mon = mx.mon.Monitor(1)
    mon:install(ex)
    mon:tic()
    ex:forward { is_train = true }
    ex:backward()
    -- (the backward's per-node gradients, <node>_backward_output<j>, too)
    same_rows(mon:toc(), want.all)
    assert.same({}, mon:toc()) -- (deactivated)
    -- the outputs and gradients are the executor's usual ones
    local plain = bound()
    plain:forward { is_train = true }
    plain:backward()
    assert.same(plain.outputs[1]:tolist(), ex.outputs[1]:tolist())
    assert.same(plain.grad_dict.fc1_weight:tolist(), ex.grad_dict.fc1_weight:tolist())
  end)

  it("monitor_all, pattern and sort: every op input too, the names matching", function()
    local ex = bound()
    local mon = mx.mon.Monitor { interval = 1, pattern = "fc1.*", monitor_all = true, sort = true }
    mon:install(ex)
    mon:tic()
    ex:forward { is_train = true }
    local got = mon:toc()
    -- MXNet reports fc1's weight and bias three times each (its input hooks), luamx twice:
    -- the distinct rows are the same
    local function distinct(rows)
      local t, seen = {}, {}
      for _, r in ipairs(rows) do if not seen[r[2]] then seen[r[2]] = true t[#t + 1] = r end end
      return t
    end
    same_rows(distinct(got), distinct(want.fc1_all_sorted))
  end)

  it("activates every interval-th step", function()
    local ex = bound()
    local mon = mx.mon.Monitor(2, nil, "fc2_output")
    mon:install(ex)
    local rows = {}
    for _ = 1, 3 do
      mon:tic()
      ex:forward { is_train = false }
      for _, r in ipairs(mon:toc()) do rows[#rows + 1] = r end
    end
    same_rows(rows, want.interval2)
  end)

  it("toc_print writes MXNet's lines; stat_func may return several arrays", function()
    local ex = bound()
    local lines = {}
    local mon = mx.mon.Monitor(1, function(x) return { x:max(), x:min() } end, "fc2_bias", false,
      false, function(l) lines[#lines + 1] = l end)
    mon:install(ex)
    mon:tic()
    ex:forward()
    mon:toc_print()
    assert.same({ string.format("Batch: %7d %-30s %s", 1, "fc2_bias", "0.2\t0.0\t") }, lines)
  end)

  it("on a Module, through fit{monitor=} and after a reshape", function()
    local lines = {}
    local mon = mx.mon.Monitor { interval = 2, pattern = "fc2_output",
      logger = function(l) lines[#lines + 1] = l end }
    local mod = mx.mod.Module(net(), { logger = function() end })
    local it_ = mx.io.NDArrayIter(nd.random.uniform(-1, 1, { 8, 5 }), nd.array({ 0, 1, 2, 0, 1, 2, 0, 1 }),
      { batch_size = 4 })
    mod:fit(it_, { num_epoch = 1, monitor = mon })
    -- two batches: step 1 reported
    assert.equal(1, #lines)
    assert.truthy(lines[1]:find("^Batch:       1 fc2_output"), lines[1])
    -- a reshape makes new executors: the monitor follows them
    mod:reshape { { "data", { 2, 5 } } }
    mon:tic()
    mon:tic()
    mod:forward(mx.io.DataBatch { nd.ones { 2, 5 } }, false)
    local rows = mon:toc()
    assert.equal(1, #rows)
    assert.equal("fc2_output", rows[1][2])
  end)

  it("refuses bad arguments, naming them", function()
    assert.has_error(function() mx.mon.Monitor(0) end, "Monitor: interval must be a positive integer, got 0")
    assert.has_error(function() mx.mon.Monitor(1, 5) end,
      "Monitor: stat_func must be a function(array), got number")
    assert.has_error(function() mx.mon.Monitor(1, nil, "[") end)
    assert.has_error(function() mx.mon.Monitor(1):install(5) end,
      "Monitor.install: expected an Executor, got number")
    local mod = mx.mod.Module(net())
    assert.has_error(function() mod:install_monitor(mx.mon.Monitor(1)) end,
      "Module.install_monitor: call bind first")
  end)
end)
