-- The Lua module layers (docs/design/architecture.md "Lua modules"): mx/core <- mx/nd <-
-- mx/autograd <- mx/graph, nothing in lua/mx requires Gluon, and mx.sym runs (bind,
-- simple_bind, forward/backward, eval) without loading any mx.gluon module.
local sh = require("helpers.sh")

-- The layer of a module name (nil: a module above the layers: optimizer, kvstore, ...).
local function layer_of(name)
  if name == "mx.context" or name:find("^mx%.core%.") then return 1 end
  if name == "mx.nd" or name:find("^mx%.nd%.") then return 2 end
  if name == "mx.autograd" or name:find("^mx%.autograd%.") then return 3 end
  if name == "mx.symbol" or name:find("^mx%.graph%.") then return 4 end
  return nil
end

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  return t
end

-- every require("mx...") in lua/mx's own files: { file, line, module, module of file }
local function requires()
  local out = {}
  -- (find follows no symlink: lua/mx/gluon and lua/mx/core/ops are gluon/ and core/ops)
  for _, f in ipairs(lines_of("find lua/mx -name '*.lua' -type f | sort")) do
    local mod = f:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
    local n = 0
    for l in io.lines(f) do
      n = n + 1
      for req in l:gmatch('require%("(mx[%w%._]*)"%)') do
        if not l:match("^%s*%-%-") then out[#out + 1] = { file = f, line = n, req = req, mod = mod } end
      end
    end
  end
  return out
end

-- The model zoos (mx.gluoncv, mx.gluonnlp, mx.gluonts: the Python packages' names) live
-- under lua/mx for their names but sit above Gluon, as those packages sit on MXNet's;
-- so do mx.onnx, whose import_to_gluon returns a SymbolBlock (MXNet's API), and the
-- pretrained audio model mx.audio.silero_vad (a Gluon network; mx.audio's signal
-- processing below it needs no Gluon).
local function zoo(mod)
  return mod:find("^mx%.gluoncv") or mod:find("^mx%.gluonnlp") or mod:find("^mx%.gluonts")
    or mod == "mx.onnx" or mod == "mx.audio.silero_vad"
end

describe("lua/mx layers", function()
  it("no module of lua/mx requires a Gluon module (but the zoos above Gluon)", function()
    local bad = {}
    for _, r in ipairs(requires()) do
      if r.req:find("^mx%.gluon%f[.%z]") and not zoo(r.mod) then
        bad[#bad + 1] = r.file .. ":" .. r.line .. " " .. r.req
      end
    end
    assert.same({}, bad)
  end)

  it("each layer requires only its own and lower layers", function()
    -- requires of a higher layer made lazily, on first use (not at load): mx.nd's
    -- namespaces nd.random / nd.contrib and its autograd methods load their module when
    -- first called
    local lazy = { ["mx.nd>mx.random"] = true, ["mx.nd>mx.contrib"] = true,
      ["mx.nd>mx.autograd"] = true }
    local bad = {}
    for _, r in ipairs(requires()) do
      local from, to = layer_of(r.mod), layer_of(r.req)
      if from and (to == nil or to > from) and not lazy[r.mod .. ">" .. r.req] then
        bad[#bad + 1] = r.file .. ":" .. r.line .. " " .. r.req
      end
    end
    assert.same({}, bad)
  end)

  it("mx.sym binds, runs forward/backward and evals without loading Gluon", function()
    local script = [[
local mx = require("mx")
local sym, nd = mx.sym, mx.nd
local data = sym.var("data")
local fc = sym.FullyConnected(data, { num_hidden = 3, name = "fc" })
local out = sym.tanh(fc)
local x = nd.array({ { 1, 2 }, { 3, 4 } })
local w = nd.array({ { 0.1, 0.2 }, { 0.3, -0.4 }, { 0.5, 0.6 } })
local b = nd.array({ 0.1, -0.1, 0 })
local ex = out:simple_bind(mx.cpu(), { data = { 2, 2 } })
ex:forward({ is_train = true, data = x, fc_weight = w, fc_bias = b })
ex:backward(nd.ones({ 2, 3 }))
local ex2 = out:bind(mx.cpu(), { data = x, fc_weight = w, fc_bias = b })
local y2 = ex2:forward()[1]
local y3 = out:eval(mx.cpu(), { data = x, fc_weight = w, fc_bias = b })[1]
-- the eager reference: dW = sum_i (1 - y^2)_i x_i
local y = nd.tanh(nd.fully_connected(x, w, b, { num_hidden = 3 }))
local dw = nd.dot(nd.transpose(1 - y * y), x)
local function diff(a, c) return nd.max(nd.abs(a - c)):item() end
io.write("ERR ", math.max(diff(ex.outputs[1], y), diff(y2, y), diff(y3, y),
  diff(ex.grad_dict.fc_weight, dw)), "\n")
local gl = {}
for k in pairs(package.loaded) do if k:find("gluon") then gl[#gl + 1] = k end end
table.sort(gl)
io.write("GLUON ", #gl, " ", table.concat(gl, " "), "\n")
]]
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write(script)
    f:close()
    finally(function() os.remove(path) end)
    local rc, out = sh("LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lib/?.so;;' luajit "
      .. path)
    assert.equal(0, rc, out)
    local err = tonumber(out:match("ERR (%S+)"))
    assert.is_truthy(err, out)
    assert.is_true(err < 1e-5, out)
    assert.matches("GLUON 0 \n", out, 1, true)
  end)
end)
