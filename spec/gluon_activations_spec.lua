-- gluon/nn/activations.lua: LeakyReLU, PReLU, ELU, SELU, GELU, Swish, SiLU, HardSigmoid,
-- HardSwish — values against the nn ops' formulas, MXNet's constructor arguments and reprs,
-- option checking, PReLU training (the gradient reaches alpha) and save/load names.
local mx = require("mx")
local nn = mx.gluon.nn
local nd = mx.nd
local close = require("helpers.close").within(1e-6)

local XS = { -3.3, -1.5, -0.2, 0.3, 1, 2.6 } -- off hard_swish's/hard_sigmoid's kinks
local function flat(t) return t:reshape({ -1 }) end
local function each(f)
  local r = {}
  for i, v in ipairs(XS) do r[i] = f(v) end
  return r
end
local function sig(v) return 1 / (1 + math.exp(-v)) end

describe("gluon activation layers", function()
  it("compute MXNet's formulas with MXNet's defaults", function()
    local x = nd.array(XS)
    close(nn.LeakyReLU(0.1)(x), each(function(v) return v > 0 and v or 0.1 * v end))
    close(nn.ELU()(x), each(function(v) return v > 0 and v or math.exp(v) - 1 end))
    close(nn.ELU(0.5)(x), each(function(v) return v > 0 and v or 0.5 * (math.exp(v) - 1) end))
    local l, a = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
    close(nn.SELU()(x), each(function(v) return l * (v > 0 and v or a * (math.exp(v) - 1)) end))
    close(nn.Swish()(x), each(function(v) return v * sig(v) end))
    close(nn.Swish(2)(x), each(function(v) return v * sig(2 * v) end))
    close(nn.SiLU()(x), each(function(v) return v * sig(v) end))
    close(nn.HardSigmoid()(x), each(function(v) return math.max(0, math.min(1, 0.2 * v + 0.5)) end))
    close(nn.HardSwish()(x), each(function(v) return v * math.max(0, math.min(6, v + 3)) / 6 end))
    close(nn.GELU()(x), nd.gelu(x))
    close(nn.GELU({ approximation = "tanh" })(x), nd.gelu(x, { approximation = "tanh" }))
    local k = math.sqrt(2 / math.pi)
    close(nn.GELU({ approximation = "tanh" })(x),
      each(function(v) return 0.5 * v * (1 + math.tanh(k * (v + 0.044715 * v ^ 3))) end))
    local p = nn.PReLU()
    p:initialize()
    close(p(x), each(function(v) return v > 0 and v or 0.25 * v end))
  end)

  it("have MXNet's reprs", function()
    assert.are.equal("LeakyReLU(0.1)", tostring(nn.LeakyReLU(0.1)))
    assert.are.equal("ELU()", tostring(nn.ELU()))
    assert.are.equal("ELU(0.5)", tostring(nn.ELU(0.5)))
    assert.are.equal("SELU()", tostring(nn.SELU()))
    assert.are.equal("GELU()", tostring(nn.GELU()))
    assert.are.equal("GELU(approximation = tanh)", tostring(nn.GELU({ approximation = "tanh" })))
    assert.are.equal("Swish()", tostring(nn.Swish()))
    assert.are.equal("Swish(2)", tostring(nn.Swish(2)))
    assert.are.equal("SiLU()", tostring(nn.SiLU()))
    assert.are.equal("HardSigmoid()", tostring(nn.HardSigmoid()))
    assert.are.equal("HardSwish()", tostring(nn.HardSwish()))
    assert.are.equal("PReLU()", tostring(nn.PReLU()))
    assert.are.equal("PReLU(in_channels = 3)", tostring(nn.PReLU({ in_channels = 3 })))
  end)

  it("reject bad arguments and unknown options, blaming the caller's line", function()
    local here = debug.getinfo(1, "S").short_src
    local function err(f, pat)
      local ok, e = pcall(f)
      assert.is_false(ok)
      assert.truthy(tostring(e):find(pat, 1, true), tostring(e))
      assert.truthy(tostring(e):find(here, 1, true), tostring(e))
    end
    err(function() local r = nn.LeakyReLU() return r end, "LeakyReLU: alpha must be a number >= 0")
    err(function() local r = nn.LeakyReLU(-1) return r end, "alpha must be a number >= 0")
    err(function() local r = nn.PReLU({ alpha = 1 }) return r end, "PReLU: unknown option 'alpha'")
    err(function() local r = nn.PReLU({ in_channels = 0 }) return r end, "in_channels must be a positive")
    err(function() local r = nn.GELU({ approximation = "none" }) return r end, "approximation must be")
    err(function() local r = nn.GELU({ approx = "tanh" }) return r end, "GELU: unknown option 'approx'")
    err(function() local r = nn.ELU("x") return r end, "ELU: alpha must be a number")
    err(function() local r = nn.Swish("x") return r end, "Swish: beta must be a number")
    err(function() local r = nn.SiLU()(42) return r end, "SiLU: input must be a tensor")
    local p = nn.PReLU({ in_channels = 4 })
    p:initialize()
    err(function() local r = p(nd.ones { 2, 3, 5 }) return r end,
      "PReLU: input has 3 channels (axis 2), the layer in_channels = 4")
    err(function() local r = nn.ELU()(nd.ones({ 2 }, { dtype = "int32" })) return r end,
      "ELU: input has dtype int32")
    err(function() local r = nn.GELU()(nd.ones({ 2 }, { dtype = "int32" })) return r end,
      "gelu: input 1 has dtype int32")
  end)

  it("PReLU learns its per-channel alpha (the gradient reaches it) and saves it as alpha",
    function()
    local net = nn.Sequential()
    net:add(nn.PReLU({ in_channels = 3, alpha_initializer = mx.init.Constant(0.1) }))
    net:initialize()
    local x = nd.array({ -1, -2, -3, 1, 2, 3 }):reshape({ 1, 3, 2 })
    -- channels {-1, -2}, {-3, 1}, {2, 3}; target: slope 0.5 on the first, 0.1 on the second
    local target = nd.array({ -0.5, -1, -0.3, 1, 2, 3 }):reshape({ 1, 3, 2 })
    local tr = mx.gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.1 })
    local loss0
    for step = 1, 60 do
      local L
      mx.autograd.record(function()
        L = nd.sum(nd.square(nd.sub(net(x), target)))
      end)
      L:backward()
      if step == 1 then
        loss0 = L:item()
        -- dL/dalpha_c = sum over the channel of 2 (y - t) * min(x, 0): channel 2 is on
        -- target already, channel 3 has no negative value
        close(net[1].alpha:grad(), { 2 * (-0.1 + 0.5) * -1 + 2 * (-0.2 + 1) * -2, 0, 0 }, 1e-5)
      end
      tr:step(1)
    end
    local L = nd.sum(nd.square(nd.sub(net(x), target))):item()
    assert.is_true(L < 1e-3 * loss0, "loss " .. loss0 .. " -> " .. L)
    local alpha = net[1].alpha:data():tolist()
    assert.is_true(math.abs(alpha[1] - 0.5) < 0.02, "alpha[1] " .. alpha[1])
    assert.is_true(math.abs(alpha[2] - 0.1) < 1e-6)
    local tmp = os.tmpname()
    net:save_parameters(tmp)
    local saved = nd.load(tmp)
    assert.truthy(saved["0.alpha"])
    local net2 = nn.Sequential()
    net2:add(nn.PReLU({ in_channels = 3 }))
    net2:load_parameters(tmp)
    os.remove(tmp)
    close(flat(net2(x)), flat(net(x)))
    assert.are.same({ "0.alpha" }, net:collect_params():keys())
    -- a float64 input: alpha (float32) is cast, its gradient comes back as float32
    local x64 = x:astype("float64")
    local y64
    mx.autograd.record(function() y64 = net(x64) end)
    assert.are.equal("float64", y64:dtype())
    y64:backward()
    assert.are.equal("float32", net[1].alpha:grad():dtype())
    close(net[1].alpha:grad(), { -3, -3, 0 }, 1e-6)
  end)

  it("LeakyReLU, ELU and GELU layers pass gradients (autograd through the ops)", function()
    for _, layer in ipairs({ nn.LeakyReLU(0.2), nn.ELU(), nn.GELU(), nn.Swish(1.5),
      nn.HardSwish(), nn.HardSigmoid(), nn.SELU(), nn.SiLU() }) do
      local x = nd.array(XS)
      x:attach_grad()
      local y
      mx.autograd.record(function() y = layer(x) end)
      y:backward()
      -- finite differences of the layer itself
      local h, fd = 1e-3, {}
      for i, v in ipairs(XS) do
        local a, b = {}, {}
        for j, w in ipairs(XS) do a[j], b[j] = w, w end
        a[i], b[i] = v + h, v - h
        fd[i] = (layer(nd.array(a, { dtype = "float64" })):tolist()[i]
          - layer(nd.array(b, { dtype = "float64" })):tolist()[i]) / (2 * h)
      end
      close(x:grad(), fd, 1e-4)
    end
  end)
end)
