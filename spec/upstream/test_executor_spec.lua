-- MXNet 1.9.1's tests/python/unittest/test_executor.py, ported (spec/upstream/README.md).
-- Fewer repeats than upstream's 10 (numpy's draws are mx.random's here).
local mx = require("mx")
local nd = mx.nd
local S = mx.sym
local C = require("upstream.common")
local F = "test_executor.py"
local case = C.cases(it, function(why) pending(why) end)

local function randint(lo, hi) return math.floor(nd.random.uniform(lo, hi, { 1 }):item()) end

-- check_bind_with_uniform(uf, gf, dim, sf, lshape, rshape): uf/gf on NDArrays (numpy's role)
local function check_bind_with_uniform(uf, gf, dim, sf, lshape, rshape)
  local shape = {}
  for i = 1, dim do shape[i] = randint(1, math.floor(1000 ^ (1 / dim))) end
  local lhs, rhs = S.Variable("lhs"), S.Variable("rhs")
  local ret = sf and sf(lhs, rhs) or uf(lhs, rhs)
  assert.same({ "lhs", "rhs" }, ret:list_arguments())
  lshape, rshape = lshape or shape, rshape or shape
  local la, ra = nd.random.uniform(-1, 1, lshape), nd.random.uniform(-1, 1, rshape)
  local lg, rg = nd.empty(lshape), nd.empty(rshape)
  local executor = ret:bind(mx.cpu(), { la, ra }, { args_grad = { lg, rg } })
  local exec3 = ret:bind(mx.cpu(), { la, ra })
  local exec4 = ret:bind(mx.cpu(), { rhs = ra, lhs = la }, { args_grad = { lhs = lg, rhs = rg } })
  executor:forward()
  exec3:forward()
  exec4:forward()
  local out1 = uf(la, ra)
  C.assert_almost_equal(executor.outputs[1], out1, 1e-5, 1e-5)
  C.assert_almost_equal(exec3.outputs[1], out1, 1e-5, 1e-5)
  C.assert_almost_equal(exec4.outputs[1], out1, 1e-5, 1e-5)
  local og = nd.ones(executor.outputs[1]:shape())
  local lg2, rg2 = gf(og, la, ra)
  executor:forward(true)
  executor:backward { og }
  C.assert_almost_equal(lg, lg2, 1e-5, 1e-5)
  C.assert_almost_equal(rg, rg2, 1e-5, 1e-5)
end

describe("MXNet 1.9.1 tests/python/unittest", function()
  case(F, "test_bind (3 repeats; MXNET_EXEC_BULK_EXEC_* have no meaning here)", function()
    mx.random.seed(1)
    local function ge(a, b) return nd.greater_equal(a, b) end
    for _ = 1, 3 do
      for dim = 1, 3 do
        check_bind_with_uniform(function(x, y) return x + y end, function(g) return g, g end, dim)
        check_bind_with_uniform(function(x, y) return x - y end, function(g) return g, -g end, dim)
        check_bind_with_uniform(function(x, y) return x * y end,
          function(g, x, y) return y * g, x * g end, dim)
        check_bind_with_uniform(function(x, y) return x / y end,
          function(g, x, y) return g / y, -x * g / (y * y) end, dim)
        check_bind_with_uniform(function(x, y) return nd.maximum(x, y) end,
          function(g, x, y) return g * ge(x, y), g * nd.greater(y, x) end, dim, S.maximum)
        check_bind_with_uniform(function(x, y) return nd.minimum(x, y) end,
          function(g, x, y) return g * nd.lesser_equal(x, y), g * nd.lesser(y, x) end, dim, S.minimum)
      end
    end
  end)

  case(F, "test_dot (3 repeats)", function()
    mx.random.seed(2)
    for _ = 1, 3 do
      local s = { randint(1, 200), randint(1, 200), randint(1, 200) }
      check_bind_with_uniform(function(x, y) return nd.dot(x, y) end,
        function(g, x, y) return nd.dot(g, y:transpose()), nd.dot(x:transpose(), g) end, 2, S.dot,
        { s[1], s[2] }, { s[2], s[3] })
    end
    for _ = 1, 3 do
      local n = randint(1, 200)
      check_bind_with_uniform(function(x, y) return nd.dot(x, y) end,
        function(g, x, y) return g * y, g * x end, 2, S.dot, { n }, { n })
    end
  end)

  case(F, "test_reshape", function()
    local y = S.FullyConnected(S.Variable("x"), { num_hidden = 4 })
    local exe = y:simple_bind(mx.cpu(), { x = { 5, 4 }, grad_req = "null" })
    exe.arg_arrays[1][{}] = 1
    exe.arg_arrays[2][{}] = nd.ones { 4, 4 }
    exe.arg_arrays[3][{}] = 0
    local new_exe = exe:reshape { x = { 3, 4 } }
    new_exe:forward(false)
    for _, v in ipairs(new_exe.outputs[1]:reshape(-1):tolist()) do assert.equal(4, v) end
    local base = exe.outputs[1]:totable()
    for i = 1, 3 do for _, v in ipairs(base[i]) do assert.equal(4, v) end end
    exe:forward(false)
    for _, v in ipairs(exe.outputs[1]:reshape(-1):tolist()) do assert.equal(4, v) end
    new_exe = exe:reshape({ x = { 6, 4 } }, { allow_up_sizing = true })
    new_exe.arg_arrays[1][{}] = 0
    for _, v in ipairs(exe.arg_arrays[1]:reshape(-1):tolist()) do assert.equal(1, v) end
    for _, v in ipairs(new_exe.arg_arrays[2]:reshape(-1):tolist()) do assert.equal(1, v) end
  end)
end)
