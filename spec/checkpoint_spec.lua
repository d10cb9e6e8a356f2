-- mx.checkpoint: atomic training checkpoints and restarts (lua/mx/checkpoint.lua).
local mx = require("mx")
local nn = mx.gluon.nn

local function sh(cmd)
  local p = assert(io.popen(cmd .. '; echo "EXIT=$?"'))
  local out = p:read("*a")
  p:close()
  return out, tonumber(out:match("EXIT=(%d+)%s*$"))
end

local function have_mpi()
  local f = io.open("build/lib/mx/libmx_mpi.so", "rb")
  if f then f:close() end
  local _, rc = sh("command -v mpirun >/dev/null 2>&1")
  return f ~= nil and rc == 0
end
local it_mpi = have_mpi() and it or pending

local function tmpdir()
  local out = sh("mktemp -d")
  return (out:match("^(%S+)"))
end

local function model()
  local net = nn.Sequential()
  net:add(nn.Dense(4, { in_units = 3 }), nn.Dense(2, { in_units = 4 }))
  net:initialize(mx.init.Xavier())
  return net
end

local function train_step(net, trainer)
  local x = mx.random.normal(0, 1, { 5, 3 })
  local loss
  mx.autograd.record(function() loss = (net(x) * net(x)):sum() end)
  loss:backward()
  trainer:step(5)
end

local function flat(net)
  local out = {}
  for _, p in net:collect_params():items() do
    for _, v in ipairs(p:data():reshape({ -1 }):tolist()) do out[#out + 1] = v end
  end
  return out
end

describe("mx.checkpoint", function()
  it("is a lazy namespace of mx", function()
    assert.are.equal(require("mx.checkpoint"), mx.checkpoint)
  end)

  it("checks its arguments", function()
    local net = model()
    local C = mx.checkpoint.Checkpointer
    assert.has_error(function() C("", { params = net:collect_params() }) end)
    assert.has_error(function() C("x", { params = net:collect_params(), nope = 1 }) end)
    local ok, err = pcall(C, "x", { params = net:collect_params(), keep = 1 })
    assert.is_false(ok)
    assert.matches("keep must be an integer >= 2", err)
    ok, err = pcall(C, "x", {})
    assert.is_false(ok)
    assert.matches("params", err)
  end)

  it("saves every N steps, keeps the newest `keep`, restores weights, optimizer and RNG", function()
    local dir = tmpdir()
    mx.random.seed(7)
    local net = model()
    local trainer = mx.gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.1, momentum = 0.9 })
    local ck = mx.checkpoint.Checkpointer(dir .. "/ck", { params = net:collect_params(),
      trainer = trainer, every = 2, keep = 2 })
    assert.is_nil(ck:restore()) -- nothing yet: a fresh start
    local saved
    for s = 1, 6 do
      train_step(net, trainer)
      if ck:step({ epoch = 1, batch = s, extra = { tag = "x" .. s } }) then saved = s end
    end
    assert.are.equal(6, saved)
    assert.are.same({ 4, 6 }, ck:steps())
    assert.is_nil(io.open(dir .. "/ck.r0-2.params", "rb")) -- dropped beyond keep
    -- the uninterrupted continuation: two more steps and a draw from the generator
    local w6 = flat(net)
    train_step(net, trainer)
    train_step(net, trainer)
    local ref, ref_draw = flat(net), mx.random.uniform(0, 1, { 4 }):tolist()
    -- a fresh model (other weights, other RNG position) restored from step 6
    mx.random.seed(99)
    local net2 = model()
    local trainer2 = mx.gluon.Trainer(net2:collect_params(), "sgd", { learning_rate = 0.1, momentum = 0.9 })
    local ck2 = mx.checkpoint.Checkpointer(dir .. "/ck", { params = net2:collect_params(),
      trainer = trainer2, every = 2 })
    local pos = ck2:restore()
    assert.are.same({ step = 6, epoch = 1, batch = 6, extra = { tag = "x6" } }, pos)
    assert.are.same(w6, flat(net2))
    train_step(net2, trainer2)
    train_step(net2, trainer2)
    assert.are.same(ref, flat(net2)) -- momentum states and the random stream came back
    assert.are.same(ref_draw, mx.random.uniform(0, 1, { 4 }):tolist())
    sh("rm -rf " .. dir)
  end)

  it("refuses a checkpoint of another model", function()
    local dir = tmpdir()
    local net = model()
    local ck = mx.checkpoint.Checkpointer(dir .. "/m", { params = net:collect_params() })
    ck:save()
    local other = nn.Sequential()
    other:add(nn.Dense(5, { in_units = 3 }), nn.Dense(2, { in_units = 5 }))
    other:initialize()
    local ck2 = mx.checkpoint.Checkpointer(dir .. "/m", { params = other:collect_params() })
    local ok, err = pcall(ck2.restore, ck2)
    assert.is_false(ok)
    assert.matches("shape", err)
    sh("rm -rf " .. dir)
  end)

  it_mpi("dist_sync: restarting after a SIGKILL ends with the uninterrupted run's weights, bitwise",
    function()
      local dir = tmpdir()
      local args = "--data synthetic --epochs 2 --hidden 32 --kvstore dist_sync --noise 0.1 "
        .. "--quiet --every 10"
      local run = "timeout -k 5 90 tools/dist/mxrun 2 examples/dist_train.lua " .. args
      local out, rc = sh(run .. " --out " .. dir .. "/ref.params 2>&1")
      assert.are.equal(0, rc, out)
      local ref_steps = tonumber(out:match("RESULT 0 acc [%d.]+ steps (%d+)"))
      -- rank 1 kills itself at step 45: rank 0 fails naming it; checkpoints 30 and 40 kept
      out, rc = sh(run .. " --checkpoint " .. dir .. "/c --crash-rank 1 --crash-step 45 2>&1")
      assert.are_not.equal(0, rc, out)
      assert.matches("RESULT 1 crashing at step 45", out)
      assert.matches("lost rank 1", out)
      -- the restart resumes from step 40 on both ranks and runs only the rest
      out, rc = sh(run .. " --checkpoint " .. dir .. "/c --out " .. dir .. "/res.params 2>&1")
      assert.are.equal(0, rc, out)
      assert.matches("RESULT 0 resumed 40", out)
      assert.matches("RESULT 1 resumed 40", out)
      local res_steps = tonumber(out:match("RESULT 0 acc [%d.]+ steps (%d+)"))
      assert.are.equal(ref_steps - 40, res_steps)
      local function bytes(p)
        local f = assert(io.open(p, "rb"))
        local s = f:read("*a")
        f:close()
        return s
      end
      local a, b = bytes(dir .. "/ref.params"), bytes(dir .. "/res.params")
      assert.is_true(#a > 1000)
      assert.is_true(a == b, "the resumed run's weights differ from the uninterrupted run's")
      sh("rm -rf " .. dir)
    end)
end)
