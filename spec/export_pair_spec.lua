-- HybridBlock:export's two files survive a kill (gluon/_export.lua): a child exports two
-- different nets in turn to one path and is SIGKILLed at random moments; after each kill
-- SymbolBlock.imports either gives one of the two nets exactly (a matching pair) or names
-- the mismatch (the parameters go first, then the symbol file recording their size and
-- CRC-32). Also: MXNet's own files (no record) still load; a rewritten parameters file
-- is named.
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn

-- net k (1 or 2): different shapes, so a torn pair could not load silently either way
local CHILD_NETS = [[
local mx = require("mx")
local nn = mx.gluon.nn
local function make(k)
  mx.random.seed(10 + k)
  local net = nn.HybridSequential()
  if k == 1 then
    net:add(nn.Dense(1024, { in_units = 512, activation = "relu" }))
    net:add(nn.Dense(4, { in_units = 1024 }))
  else
    net:add(nn.Dense(768, { in_units = 512 }))
    net:add(nn.Dense(16, { in_units = 768, activation = "tanh" }))
    net:add(nn.Dense(4, { in_units = 16 }))
  end
  net:initialize(mx.init.Uniform(0.05))
  net:hybridize()
  net(mx.nd.ones({ 2, 512 }))
  return net
end
]]

local function run(code)
  local f = os.tmpname()
  local h = assert(io.open(f, "w"))
  h:write(code)
  h:close()
  return f
end

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1; echo "EXIT=$?"'))
  local out = p:read("*a")
  p:close()
  return out, tonumber(out:match("EXIT=(%d+)%s*$"))
end

local env = string.format("LUA_PATH=%q LUA_CPATH=%q", package.path, package.cpath)

describe("export's file pair", function()
  it("after a SIGKILL at any moment, imports loads a matching pair or names the mismatch", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir) == 0)
    local path = dir .. "/m"
    local child = run(CHILD_NETS .. string.format([[
local nets = { make(1), make(2) }
nets[1]:export(%q, 0)
io.write("READY\n") io.flush()
local k = 0
while true do k = k + 1; nets[k %% 2 + 1]:export(%q, 0) end
]], path, path))
    -- the two nets' outputs, made here the same way
    local f = assert(loadstring(CHILD_NETS .. "return make"))
    local make = f()
    local x = nd.array((function()
      local t = {}
      for i = 1, 2 * 512 do t[i] = math.sin(i) end
      return t
    end)()):reshape({ 2, 512 })
    local want = { make(1)(x):tolist(), make(2)(x):tolist() }
    local loaded, named, kills = { 0, 0 }, 0, 0
    math.randomseed(3)
    for _ = 1, 14 do
      -- start the child, wait until its first export is done, kill it a moment later
      local delay = 0.02 + math.random() * 0.6
      local out = sh(string.format("%s luajit %s > %s.log 2>&1 & pid=$!; "
        .. "for i in $(seq 1 300); do grep -q READY %s.log 2>/dev/null && break; sleep 0.05; done; "
        .. "sleep %.3f; kill -9 $pid; wait $pid", env, child, dir, dir, delay))
      assert.truthy(out:find("EXIT=137", 1, true), out)
      kills = kills + 1
      local ok, b = pcall(mx.gluon.SymbolBlock.imports, path .. "-symbol.json", { "data" },
        path .. "-0000.params")
      if ok then
        local y = b(x):tolist()
        local which = #y == #want[1] and (function()
          for k = 1, 2 do
            local same = true
            for i = 1, #y do if math.abs(y[i] - want[k][i]) > 1e-5 then same = false end end
            if same then return k end
          end
        end)()
        assert.is_not_nil(which, "the imported net is neither of the two exported")
        loaded[which] = loaded[which] + 1
      else
        assert.truthy(tostring(b):find("is not the parameters file exported with", 1, true), b)
        named = named + 1
      end
    end
    os.remove(child)
    os.execute("rm -rf " .. dir)
    print(string.format("export kill test: %d kills, net 1 loaded %d, net 2 loaded %d, torn pair named %d",
      kills, loaded[1], loaded[2], named))
    assert.are.equal(14, kills)
  end)

  it("a parameters file rewritten after the export is named; another epoch's file is not checked", function()
    local net = nn.HybridSequential()
    net:add(nn.Dense(3, { in_units = 2 }))
    net:initialize()
    net:hybridize()
    local x = nd.ones({ 1, 2 })
    local y = net(x)
    local base = os.tmpname()
    local sp, pp = net:export(base, 0)
    local _, pp1 = net:export(base, 1) -- rewrites the symbol file, recording epoch 1's file
    -- epoch 0's parameters with the same graph: a checkpoint of another epoch, loads
    local b = mx.gluon.SymbolBlock.imports(sp, { "data" }, pp)
    assert.are.same(y:tolist(), b(x):tolist())
    mx.nd.save(pp1, { ["arg:0.weight"] = nd.zeros({ 3, 2 }), ["arg:0.bias"] = nd.zeros({ 3 }) })
    local ok, err = pcall(function()
      local r = mx.gluon.SymbolBlock.imports(sp, { "data" }, pp1)
      return r
    end)
    assert.is_false(ok)
    assert.truthy(err:find("export_pair_spec.lua:%d+: SymbolBlock.imports: '[^']*%-0001.params' is not "
      .. "the parameters file exported with"), err)
    for _, p in ipairs({ sp, pp, pp1, base }) do os.remove(p) end
  end)

  it("the symbol file's record leaves it loadable by mx.sym.load (and by MXNet: attrs it ignores)", function()
    local net = nn.HybridSequential()
    net:add(nn.Dense(3, { in_units = 2 }))
    net:initialize()
    net:hybridize()
    net(nd.ones({ 1, 2 }))
    local base = os.tmpname()
    local sp, pp = net:export(base)
    local js = assert(io.open(sp)):read("*a")
    assert.truthy(js:find('"luamx_params":%["str","[^"]*%-0000%.params|%d+|%x+"%]'), js)
    local s = mx.sym.load(sp)
    assert.are.same({ "data", "0.weight", "0.bias" }, s:list_arguments())
    for _, p in ipairs({ sp, pp, base }) do os.remove(p) end
  end)
end)
