-- gluon.rnn.LSTM with projection_size (LSTMP) over the rnn op's projection: MXNet 1.9.1's
-- parameter names and shapes, its outputs (spec/fixtures/lstmp_mxnet.params:
-- tools/fixtures/make_lstmp_fixture.py; MXNet's CPU kernel runs LSTMP in inference), its
-- exported file imported, and values and gradients equal to the unfused LSTMPCell stack.
local mx = require("mx")
local H = require("helpers.la")
local nd, rnn, ag, gluon = mx.nd, mx.gluon.rnn, mx.autograd, mx.gluon
local FILE = "gluon_rnn_lstmp_spec.lua"

local F = nd.load("spec/fixtures/lstmp_mxnet.params")
local Tn, N, I, Hs, P = 4, 2, 3, 5, 3

local function close(a, b, tol, what)
  local d = H.maxdiff(a, b)
  assert(d <= tol, string.format("%s: max difference %g", what or "", d))
end
local function rand(shape, seed)
  return H.rand(mx, shape, { seed = seed, lo = -0.5, hi = 0.5 }):astype("float64")
end

-- the layer's (L*D, N, .) states as the flat list its _unfuse() stack takes, and back
local function to_cell_states(h, c)
  local r = {}
  for i = 1, h:shape()[1] do r[#r + 1] = h[i]; r[#r + 1] = c[i] end
  return r
end
local function from_cell_states(s)
  local hs, cs = {}, {}
  for i = 1, #s, 2 do hs[#hs + 1] = s[i]; cs[#cs + 1] = s[i + 1] end
  return nd.stack(hs, { axis = 1 }), nd.stack(cs, { axis = 1 })
end

describe("gluon.rnn.LSTM with projection_size", function()
  it("has MXNet 1.9.1's parameters (h2r_weight), states and output shapes", function()
    local l = rnn.LSTM(Hs, 2, { bidirectional = true, projection_size = P })
    local keys = {}
    for _, d in ipairs { "l0", "r0", "l1", "r1" } do
      for _, n in ipairs { "i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias", "h2r_weight" } do
        keys[#keys + 1] = d .. "_" .. n
      end
    end
    assert.are.same(keys, l:collect_params():keys())
    assert.are.same({ 4 * Hs, P }, l.l0_h2h_weight.shape)
    assert.are.same({ P, Hs }, l.l0_h2r_weight.shape)
    assert.are.same({ 4 * Hs, 2 * P }, l.l1_i2h_weight.shape)
    local si = l:state_info(N)
    assert.are.same({ 4, N, P }, si[1].shape)
    assert.are.same({ 4, N, Hs }, si[2].shape)
    l:initialize()
    local out, st = l(nd.ones { Tn, N, I }, l:begin_state(N))
    assert.are.same({ Tn, N, 2 * P }, out:shape())
    assert.are.same({ 4, N, P }, st[1]:shape())
    assert.are.same({ 4, N, Hs }, st[2]:shape())
    assert.truthy(tostring(l):find("projection_size=3", 1, true))
  end)

  it("equals MXNet 1.9.1's fused LSTMP (2 layers, bidirectional)", function()
    local l = rnn.LSTM(Hs, 2, { bidirectional = true, projection_size = P, input_size = I })
    l:initialize()
    for _, name in ipairs(l:collect_params():keys()) do l[name]:set_data(F[name]) end
    local out, st = l(F.x, { F.h0, F.c0 })
    close(out, F.out, 1e-5, "out")
    close(st[1], F.hy, 1e-5, "hy")
    close(st[2], F.cy, 1e-5, "cy")
  end)

  it("imports MXNet 1.9.1's exported LSTMP (the RNN op with projection_size)", function()
    local blk = gluon.SymbolBlock.imports("spec/fixtures/lstmp_mxnet-symbol.json",
      { "data0", "data1", "data2" }, "spec/fixtures/lstmp_mxnet-0000.params")
    local out, hy, cy = blk(F.x, F.h0, F.c0)
    close(out, F.out, 1e-5, "out")
    close(hy, F.hy, 1e-5, "hy")
    close(cy, F.cy, 1e-5, "cy")
  end)

  for _, c in ipairs { { L = 1, bi = false }, { L = 2, bi = true }, { L = 3, bi = false } } do
    local name = string.format("%d layer(s)%s", c.L, c.bi and ", bidirectional" or "")
    it("values and every gradient equal the unfused LSTMPCell stack (" .. name .. ")", function()
      local D = c.bi and 2 or 1
      local l = rnn.LSTM(Hs, c.L, { bidirectional = c.bi, projection_size = P, input_size = I,
        dtype = "float64" })
      l:initialize()
      for i, pname in ipairs(l:collect_params():keys()) do
        l[pname]:set_data(rand(l[pname].shape, 10 + i))
      end
      local x, h0, c0 = rand({ Tn, N, I }, 1), rand({ c.L * D, N, P }, 2), rand({ c.L * D, N, Hs }, 3)
      local ro, rh, rc = rand({ Tn, N, D * P }, 4), rand({ c.L * D, N, P }, 5),
        rand({ c.L * D, N, Hs }, 6)
      local function run(f)
        local xs = { x:copy(), h0:copy(), c0:copy() }
        for _, a in ipairs(xs) do a:attach_grad() end
        l:collect_params():zero_grad()
        local vals = ag.record(function()
          local out, hy, cy = f(xs[1], xs[2], xs[3])
          local loss = nd.add(nd.add(nd.sum(nd.mul(out, ro)), nd.sum(nd.mul(hy, rh))),
            nd.sum(nd.mul(cy, rc)))
          loss:backward()
          return { out, hy, cy }
        end)
        local grads = { xs[1]:grad(), xs[2]:grad(), xs[3]:grad() }
        for _, pname in ipairs(l:collect_params():keys()) do
          grads[#grads + 1] = l[pname]:grad():copy()
        end
        return vals, grads
      end
      local fv, fg = run(function(a, b, d)
        local out, st = l(a, { b, d })
        return out, st[1], st[2]
      end)
      local stack = l:_unfuse()
      local uv, ug = run(function(a, b, d)
        local out, s = stack:unroll(Tn, a, { layout = "TNC", merge_outputs = true,
          begin_state = to_cell_states(b, d) })
        local hy, cy = from_cell_states(s)
        return out, hy, cy
      end)
      for i = 1, 3 do close(fv[i], uv[i], 1e-12, "output " .. i) end
      for i = 1, #fg do close(fg[i], ug[i], 1e-12, "gradient " .. i) end
    end)
  end

  it("exports as MXNet's RNN op with projection_size and imports back", function()
    local l = rnn.LSTM(Hs, 2, { bidirectional = true, projection_size = P, input_size = I })
    l:initialize()
    for _, name in ipairs(l:collect_params():keys()) do l[name]:set_data(F[name]) end
    l:hybridize()
    local out = l(F.x, { F.h0, F.c0 })
    local f = os.tmpname()
    l:export(f)
    local fh = assert(io.open(f .. "-symbol.json"))
    local json = fh:read("*a")
    fh:close()
    assert.truthy(json:find('"projection_size": *"3"'), json:sub(1, 200))
    local blk = gluon.SymbolBlock.imports(f .. "-symbol.json", { "data0", "data1_1", "data1_2" },
      f .. "-0000.params")
    close(blk(F.x, F.h0, F.c0), out, 1e-6, "imported")
    close(out, F.out, 1e-5, "MXNet")
    for _, s in ipairs { "-symbol.json", "-0000.params" } do os.remove(f .. s) end
    os.remove(f)
  end)

  it("checks projection_size and the projected state's shape", function()
    H.assert_error(function(mark) mark() rnn.LSTM(Hs, 1, { projection_size = 6 }) end, FILE,
      "LSTM: projection_size must be a positive integer at most hidden_size=5")
    H.assert_error(function(mark) mark() rnn.LSTM(Hs, 1, { h2r_weight_initializer = "zeros" }) end,
      FILE, "LSTM: h2r_weight_initializer is for projection_size")
    local l = rnn.LSTM(Hs, 1, { projection_size = P })
    l:initialize()
    H.assert_error(function(mark)
      mark() l(nd.ones { Tn, N, I }, { nd.zeros { 1, N, Hs }, nd.zeros { 1, N, Hs } })
    end, FILE, "invalid recurrent state 1 shape: expecting (1, 2, 3), got (1, 2, 5)")
    H.assert_error(function(mark)
      mark() nd.rnn(nd.ones { Tn, N, I }, nd.ones { 10 }, nd.zeros { 1, N, P },
        { state_size = Hs, num_layers = 1, mode = "gru", projection_size = P })
    end, FILE, "rnn: projection_size is for mode lstm (LSTMP), not gru")
    local np = 4 * Hs * (I + P + 2) + P * Hs
    H.assert_error(function(mark)
      mark() nd.rnn(nd.ones { Tn, N, I }, nd.ones { np }, nd.zeros { 1, N, P }, nd.zeros { 1, N, P },
        { state_size = Hs, num_layers = 1, mode = "lstm", projection_size = P })
    end, FILE, "rnn: state_cell (input 4) must have shape (1, 2, 5)")
  end)
end)
