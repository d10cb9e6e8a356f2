-- The Gluon sweep: every layer class in gluon.nn, every loss in gluon.loss,
-- every metric in gluon.metric, Trainer with every optimizer name, DataLoader and
-- load_parameters, called with wrong shapes, dtypes, labels, non-tensor arguments and
-- malformed parameter files. The lists come from what the modules expose, so a new
-- class is swept the day it is added (a constructor it needs goes in CTOR below).
-- Pass: a Lua error naming the class/function (or the op it runs) blamed on the
-- caller's line, or a correct result. Cases run in child processes
-- (helpers/child_gluon.lua): a crash is a failed case, not a dead run.
local mx = require("mx")
local child = require("helpers.child_gluon")
local gluon = mx.gluon

local cases = {}
local function case(id, names, setup, call, expect, check)
  cases[#cases + 1] = { id = id, names = names, setup = setup, call = call, expect = expect,
    check = check }
end

local function sorted_keys(t, pred)
  local r = {}
  for k, v in pairs(t) do if type(k) == "string" and pred(k, v) then r[#r + 1] = k end end
  table.sort(r)
  return r
end

---------------------------------------------------------------- layers
-- constructor and the op the layer runs (errors may name either): the surface sweep's
-- (spec/helpers/sweep_gluon.lua), but Embedding with a 1-row table (the generic cases'
-- ids 1 are out of range, a clean error; ids 0 work)
local G = require("helpers.sweep_gluon")
local CTOR = setmetatable({ Embedding = { "nn.Embedding(1, 3)", "embedding" } }, {
  __index = function(_, name)
    local e, op = G.ctor(name)
    return { e, op }
  end })
-- layers whose output has the input's shape (any shape is valid input)
local ELEMWISE = { Dropout = true, Activation = true, Lambda = true, HybridLambda = true,
  Identity = true, LeakyReLU = true, PReLU = true, ELU = true, SELU = true, GELU = true,
  Swish = true, SiLU = true, HardSigmoid = true, HardSwish = true, PositionwiseFFN = true }
local layers = sorted_keys(gluon.nn, function(_, v)
  return type(v) == "table" and v.__is_block
end)
for _, name in ipairs(layers) do
  local ctor = CTOR[name] or { "nn." .. name .. "()", name }
  local names = { name, ctor[2] }
  local setup = "local b = " .. ctor[1] .. "\nb:initialize()"
  for _, bad in ipairs { "nil", "5", '"x"', "{1, 2}", "true" } do
    case(name .. "/input " .. bad, names, setup, "b(" .. bad .. ")")
  end
  -- dtypes: a correct result (the float32 result) or a clean error
  for _, dt in ipairs { "int32", "float64", "uint8", "float16", "bool" } do
    case(name .. "/dtype " .. dt, names, setup .. "\nlocal x = nd.array({{1, 0, 1, 1}, {0, 1, 1, 0}})",
      "b(x:astype('" .. dt .. "'))", "either",
      "nd.is_tensor(r) and close(r, b(x))")
  end
  case(name .. "/0-size batch", names, setup, "b(nd.ones{0, 4})", "either",
    "nd.is_tensor(r) and r:shape()[1] == 0")
  case(name .. "/NaN input", names, setup, "b(nd.full({2, 4}, 0/0))", "either",
    "nd.is_tensor(r) and r:shape()[1] == 2")
  if ELEMWISE[name] then
    case(name .. "/any shape", names, setup, "b(nd.ones{2, 5, 3})", "either",
      "r:ndim() == 3 and r:shape()[2] == 5")
  elseif name ~= "Flatten" then
    case(name .. "/wrong features", names, setup, "b(nd.ones{2, 5})")
    case(name .. "/1-d input", names, setup, "b(nd.ones{4})", "either",
      "nd.is_tensor(r) and r:size() == 3")
  end
end
case("Dense/bad units", { "Dense" }, "", "nn.Dense(-1)")
case("Dense/bad option", { "Dense" }, "", "nn.Dense(2, {nope = 1})")
case("Dropout/bad rate", { "Dropout" }, "", "nn.Dropout(2)")
case("Activation/bad act", { "activation" }, "", "nn.Activation('nope')")
case("Sequential/add non-block", { "Sequential" }, "", "nn.Sequential():add(5)")

---------------------------------------------------------------- losses
local losses = sorted_keys(gluon.loss, function(k, v)
  return type(v) == "table" and v.__is_block and k ~= "Loss" and v.__name == k
end)
for _, name in ipairs(losses) do
  local names = { name }
  local sparse = name:find("Softmax") ~= nil
  local setup = "local L = gluon.loss." .. name .. "()\nlocal p = nd.array{{0.2, 0.5, 0.3}, {1, 2, -1}}"
    .. (sparse and "\nlocal y = nd.array{2, 0}" or "\nlocal y = nd.array{{0, 1, 0}, {1, 0, 1}}")
  for _, bad in ipairs { "nil", "5", '"x"', "{1, 2}" } do
    case(name .. "/pred " .. bad, names, setup, "L(" .. bad .. ", y)")
    case(name .. "/label " .. bad, names, setup, "L(p, " .. bad .. ")")
  end
  case(name .. "/label too small", names, setup, "L(p, nd.ones{5})")
  case(name .. "/label too big", names, setup, "L(p, nd.ones{2, 3, 4})")
  case(name .. "/sample_weight shape", names, setup, "L(p, y, nd.ones{5, 7})")
  case(name .. "/sample_weight non-tensor", names, setup, "L(p, y, 'x')")
  for _, dt in ipairs { "int32", "float64", "uint8" } do
    case(name .. "/label dtype " .. dt, names, setup, "L(p, y:astype('" .. dt .. "'))", "either",
      "close(r, L(p, y))")
    case(name .. "/pred dtype " .. dt, names, setup, "L(p:astype('" .. dt .. "'), y)", "either",
      "close(r, L(p:astype('" .. dt .. "'):astype('float32'), y))")
  end
  case(name .. "/correct", names, setup, "L(p, y)", "either", "r:ndim() == 1 and r:size() == 2")
  case(name .. "/0-size batch", names, setup .. "\np = nd.ones{0, 3}\ny = "
    .. (sparse and "nd.ones{0}" or "nd.ones{0, 3}"), "L(p, y)", "either", "r:size() == 0")
  if sparse then
    -- pick's documented mode is MXNet's clip: an out-of-range class id reads the
    -- nearest class (the same result as that class), not garbage
    for _, lab in ipairs { "3", "-1", "1e7" } do
      local want = (lab == "-1") and "0" or "2"
      case(name .. "/label " .. lab, names, setup, "L(p, nd.array{" .. lab .. ", 0})", "either",
        "close(r, L(p, nd.array{" .. want .. ", 0}))")
    end
  end
end

---------------------------------------------------------------- metrics
local CLASS_METRIC = { Accuracy = true, TopKAccuracy = true, CrossEntropy = true, F1 = true }
local metrics = sorted_keys(gluon.metric, function(k, v)
  return type(v) == "function" and k:match("^%u") ~= nil
end)
for _, name in ipairs(metrics) do
  local names = { name }
  local ctor = name == "CompositeEvalMetric" and 'metric.CompositeEvalMetric{"acc", "ce"}'
    or ("metric." .. name .. "()")
  if name == "CompositeEvalMetric" then names = { "Accuracy", "CrossEntropy" } end
  local setup = "local m = " .. ctor .. "\nlocal p = nd.array{{0.3, 0.7}, {0.6, 0.4}}"
    .. "\nlocal y = nd.array{1, 0}"
  local is_loss = name == "Loss"
  local ok_value = "(function() local _, v = m:get() if type(v) == 'table' then v = v[1] end "
    .. "return v == v end)()"
  for _, bad in ipairs { "nil", "5", '"x"', "{5}", "{nd.ones{2}, nd.ones{2}}" } do
    if not is_loss then case(name .. "/labels " .. bad, names, setup, "m:update(" .. bad .. ", p)") end
    case(name .. "/preds " .. bad, is_loss and { "Loss" } or names, setup, "m:update(y, " .. bad .. ")",
      (is_loss and bad:find("nd.ones")) and "either" or "error", ok_value)
  end
  if not is_loss then
    case(name .. "/count mismatch", names, setup, "m:update({y, y}, {p})")
    case(name .. "/too few preds", names, setup, "m:update(nd.array{1, 0, 1}, nd.array{0.3})")
    case(name .. "/too many preds", names, setup, "m:update(nd.array{1}, nd.ones{3, 2})")
  end
  if CLASS_METRIC[name] or name == "CompositeEvalMetric" then
    for _, lab in ipairs { "2", "-1", "0.5", "0/0", "1e7", "1/0" } do
      case(name .. "/label " .. lab, names, setup, "m:update(nd.array{" .. lab .. ", 0}, p)")
    end
  else
    for _, lab in ipairs { "-1", "1e7", "0.5" } do
      case(name .. "/label " .. lab, names, setup .. (is_loss and "" or "\np = nd.array{0.3, 0.2}"),
        "m:update(nd.array{" .. lab .. ", 0}, p)", "either", ok_value)
    end
  end
  for _, dt in ipairs { "int32", "int64", "uint8", "float16", "bool" } do
    local s2 = (CLASS_METRIC[name] or name == "CompositeEvalMetric" or is_loss) and setup
      or (setup .. "\np = nd.array{1, 0}")
    case(name .. "/label dtype " .. dt, names, s2,
      "m:update(y:astype('" .. dt .. "'), p)", "either", ok_value)
  end
  case(name .. "/0-size", names, "local m = " .. ctor, "m:update(nd.ones{0}, nd.ones{0, 2})",
    "either", "true")
end

---------------------------------------------------------------- Trainer
local optimizers = sorted_keys(mx.optimizer, function(k, v)
  return type(v) == "function" and k:match("^%u") ~= nil
end)
local tsetup = "local d = nn.Dense(2, {in_units = 3})\nd:initialize()\n"
  .. "local x = nd.array{{1, 2, 3}}\nlocal function bw() local l "
  .. "mx.autograd.record(function() l = d(x):sum() end) l:backward() end"
for _, opt in ipairs(optimizers) do
  local o = opt:lower()
  local names = { "Trainer" }
  local ts = tsetup .. "\nlocal tr = gluon.Trainer(d:collect_params(), '" .. o .. "')"
  case("Trainer/" .. o .. "/stale", names, ts, "tr:step(1)")
  case("Trainer/" .. o .. "/stale twice", names, ts .. "\nbw() tr:step(1)", "tr:step(1)")
  case("Trainer/" .. o .. "/ignore_stale", names, ts .. "\nlocal w = nd.array(d.weight:data():tolist())",
    "tr:step(1, true)", "either", "close(d.weight:data(), w)")
  for _, bad in ipairs { "0", "-1", "'x'", "nil", "0/0", "1/0" } do
    case("Trainer/" .. o .. "/batch " .. bad, names, ts .. "\nbw()", "tr:step(" .. bad .. ")")
  end
  case("Trainer/" .. o .. "/step", names, ts .. "\nbw()\nlocal w = nd.array(d.weight:data():tolist())",
    "tr:step(2)", "either", "changed(d.weight:data(), w) and finite(d.weight:data())")
  case("Trainer/" .. o .. "/bad lr", { "Trainer", "learning_rate" }, tsetup,
    "gluon.Trainer(d:collect_params(), '" .. o .. "', {learning_rate = 'x'})")
  case("Trainer/" .. o .. "/unknown option", { "Trainer" }, tsetup,
    "gluon.Trainer(d:collect_params(), '" .. o .. "', {nope = 1})")
end
case("Trainer/params 5", { "Trainer" }, "", "gluon.Trainer(5, 'sgd')")
case("Trainer/params list of junk", { "Trainer" }, "", "gluon.Trainer({1, 2}, 'sgd')")
case("Trainer/optimizer name", { "Trainer" }, tsetup, "gluon.Trainer(d:collect_params(), 'nadamx')")
case("Trainer/optimizer 5", { "Trainer" }, tsetup, "gluon.Trainer(d:collect_params(), 5)")
case("Trainer/load_states junk", { "Trainer" }, tsetup
  .. "\nlocal tr = gluon.Trainer(d:collect_params(), 'sgd')\nwrite(TMP .. '/junk', 'xyz')",
  "tr:load_states(TMP .. '/junk')")

---------------------------------------------------------------- DataLoader
local dsetup = "local ds = gluon.data.ArrayDataset(nd.ones{5, 2}, nd.ones{5})"
for _, bad in ipairs { "0", "-1", "2.5", "'x'", "0/0" } do
  case("DataLoader/batch_size " .. bad, { "DataLoader" }, dsetup,
    "gluon.data.DataLoader(ds, {batch_size = " .. bad .. "})")
end
case("DataLoader/no dataset", { "DataLoader" }, "", "gluon.data.DataLoader(nil, {batch_size = 2})")
case("DataLoader/number dataset", { "DataLoader" }, "", "gluon.data.DataLoader(5, {batch_size = 2})")
case("DataLoader/last_batch", { "DataLoader" }, dsetup,
  "gluon.data.DataLoader(ds, {batch_size = 2, last_batch = 'x'})")
case("DataLoader/unknown option", { "DataLoader" }, dsetup,
  "gluon.data.DataLoader(ds, {batch_size = 2, nope = 1})")
case("DataLoader/len", { "DataLoader" }, dsetup, "gluon.data.DataLoader(ds, {batch_size = 2}):len()",
  "either", "r == 3")
case("ArrayDataset/length mismatch", { "ArrayDataset" }, "",
  "gluon.data.ArrayDataset(nd.ones{5, 2}, nd.ones{4})")
case("ArrayDataset/non-tensor", { "ArrayDataset" }, "", "gluon.data.ArrayDataset(5)")

---------------------------------------------------------------- load_parameters
local lsetup = "local n = nn.Sequential():add(nn.Dense(2, {in_units = 3}))\nn:initialize()"
local good = "nd.save(TMP .. '/g.params', {['0.weight'] = nd.ones{2, 3}, ['0.bias'] = nd.ones{2}})"
local names = { "load_parameters" }
case("load/ok", names, lsetup .. "\n" .. good, "n:load_parameters(TMP .. '/g.params')", "either",
  "close(n:get(1).weight:data(), nd.ones{2, 3})")
case("load/missing file", names, lsetup, "n:load_parameters(TMP .. '/none.params')")
case("load/directory", names, lsetup, "n:load_parameters(TMP)")
case("load/path 5", names, lsetup, "n:load_parameters(5)")
case("load/empty file", names, lsetup .. "\nwrite(TMP .. '/e.params', '')",
  "n:load_parameters(TMP .. '/e.params')")
case("load/junk", names, lsetup .. "\nwrite(TMP .. '/j.params', ('\\255\\1'):rep(100))",
  "n:load_parameters(TMP .. '/j.params')")
for _, cut in ipairs { 8, 16, 40, 100 } do
  case("load/truncated " .. cut, names, lsetup .. "\n" .. good .. "\nlocal s = read(TMP .. '/g.params')"
    .. "\nwrite(TMP .. '/t.params', s:sub(1, " .. cut .. "))", "n:load_parameters(TMP .. '/t.params')")
end
case("load/list file", names, lsetup .. "\nnd.save(TMP .. '/l.params', {nd.ones{2, 3}, nd.ones{2}})",
  "n:load_parameters(TMP .. '/l.params')")
case("load/shape", names, lsetup .. "\nnd.save(TMP .. '/s.params', {['0.weight'] = nd.ones{3, 2}, "
  .. "['0.bias'] = nd.ones{2}})", "n:load_parameters(TMP .. '/s.params')")
case("load/ndim", names, lsetup .. "\nnd.save(TMP .. '/s.params', {['0.weight'] = nd.ones{6}, "
  .. "['0.bias'] = nd.ones{2}})", "n:load_parameters(TMP .. '/s.params')")
for _, dt in ipairs { "int32", "float64", "float16", "uint8", "int64" } do
  local f = "nd.save(TMP .. '/d.params', {['0.weight'] = nd.ones({2, 3}, {dtype = '" .. dt
    .. "'}), ['0.bias'] = nd.ones({2}, {dtype = '" .. dt .. "'})})"
  case("load/dtype " .. dt, names, lsetup .. "\n" .. f, "n:load_parameters(TMP .. '/d.params')")
  case("load/dtype " .. dt .. " cast", names, lsetup .. "\n" .. f,
    "n:load_parameters(TMP .. '/d.params', {cast_dtype = true})", "either",
    "n:get(1).weight:data():dtype() == 'float32' and close(n:get(1).weight:data(), nd.ones{2, 3})")
end
case("load/missing param", names, lsetup .. "\nnd.save(TMP .. '/m.params', {['0.weight'] = nd.ones{2, 3}})",
  "n:load_parameters(TMP .. '/m.params')")
case("load/extra param", names, lsetup .. "\n" .. good:gsub("}%)$", ", ['9.x'] = nd.ones{1}})"),
  "n:load_parameters(TMP .. '/g.params')")
case("load/bad option", names, lsetup .. "\n" .. good, "n:load_parameters(TMP .. '/g.params', {nope = 1})")
case("load/dtype_source", names, lsetup .. "\n" .. good,
  "n:load_parameters(TMP .. '/g.params', {cast_dtype = true, dtype_source = 'x'})")
case("load/ctx cpu(16)", names, lsetup .. "\n" .. good,
  "n:load_parameters(TMP .. '/g.params', {ctx = mx.cpu(16)})")

---------------------------------------------------------------- run
describe("gluon sweep", function()
  it("every case raises a clean error at the caller's line or returns a correct result", function()
    local dir = child.tmpdir()
    local preamble = table.concat({
      "mx = require('mx')", "nd, gluon = mx.nd, mx.gluon",
      "nn, metric = gluon.nn, gluon.metric", "TMP = " .. string.format("%q", dir),
      "function write(p, s) local f = assert(io.open(p, 'wb')) f:write(s) f:close() end",
      "function read(p) local f = assert(io.open(p, 'rb')) local s = f:read('*a') f:close() return s end",
      "function close(a, b) if not nd.is_tensor(a) or not nd.is_tensor(b) then return false end "
        .. "local x, y = a:astype('float64'):tolist(), b:astype('float64'):tolist() "
        .. "if #x ~= #y then return false end for i = 1, #x do local d = math.abs(x[i] - y[i]) "
        .. "if not (d <= 1e-3 * (1 + math.abs(y[i])) or (x[i] ~= x[i] and y[i] ~= y[i])) "
        .. "then return false end end return true end",
      "function changed(a, b) local x, y = a:tolist(), b:tolist() for i = 1, #x do "
        .. "if x[i] ~= y[i] then return true end end return false end",
      "function finite(a) for _, v in ipairs(a:tolist()) do if v ~= v or math.abs(v) == 1/0 "
        .. "then return false end end return true end",
    }, "\n")
    local t0 = os.clock()
    local res = child.run(cases, { batch = 80, preamble = preamble, timeout = 60 })
    local counts = { clean = 0, correct = 0, unclear = 0, silent = 0, crash = 0 }
    local bad = {}
    for _, c in ipairs(cases) do
      local r = res[c.id]
      counts[r.status] = (counts[r.status] or 0) + 1
      if r.status ~= "clean" and r.status ~= "correct" then
        bad[#bad + 1] = string.format("  %-40s %-8s %s", c.id, r.status, r.msg:sub(1, 220))
      end
    end
    print(string.format("gluon sweep: %d cases tried, %d clean errors, %d correct results, "
      .. "%d crashes, %d silent wrong, %d unclear errors (%.1f s cpu in this process)", #cases,
      counts.clean, counts.correct, counts.crash, counts.silent, counts.unclear, os.clock() - t0))
    if #bad > 0 then print(table.concat(bad, "\n")) end
    assert.are.equal(0, #bad, #bad .. " failing cases (listed above)")
  end)

  it("the runner reports a crash as a failed case and still runs the rest of its batch", function()
    local res = child.run({
      { id = "fine", names = { "x" }, call = "error('x: boom')" },
      { id = "segv", names = { "x" }, call = "require('ffi').cast('int *', 0)[0]" },
      { id = "after", names = {}, call = "1 + 1", expect = "either", check = "r == 2" },
    }, { batch = 10, timeout = 20 })
    assert.are.equal("clean", res.fine.status)
    assert.are.equal("crash", res.segv.status)
    assert.are.equal("correct", res.after.status)
  end)
end)
