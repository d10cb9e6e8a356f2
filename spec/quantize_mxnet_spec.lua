-- spec/quantize_mxnet_spec.lua — quantize_net on a model exported from MXNet 1.9.1 gives
-- MXNet's INT8 graph: the committed fixture (tools/fixtures/make_quantize_fixture.py) holds
-- a small CNN's float export, its calibration batch and what MXNet's quantize_net_v2
-- (naive, channel-wise, oneDNN) made of it: the fused quantized nodes and their ranges.
local mx = require("mx")
local nd = mx.nd
local Q = mx.contrib.quantization
local cjson = require("cjson")

local FIX = "spec/fixtures/quantize_mx"

local function read(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

describe("quantize_net on an MXNet 1.9.1 export", function()
  it("makes MXNet's int8 graph: the same fused layers and calibrated ranges", function()
    local want = cjson.decode(read(FIX .. "_graph.json")).nodes
    local x = nd.load(FIX .. "_calib.params").data
    local net = mx.gluon.SymbolBlock.imports(FIX .. "-symbol.json", { "data" }, FIX .. "-0000.params")
    net:hybridize()
    local y = net(x)
    local qn = Q.quantize_net(net, { calib_data = { x }, calib_mode = "naive" })
    -- ours, as MXNet's node kinds
    local got = {}
    for _, n in ipairs(qn._sym:_topo()) do
      local o = n.op and n.op.name
      local e
      if o == "quantize_v2" then e = { kind = "quantize" }
      elseif o == "quantized_conv" then
        e = { kind = n.opts.with_sum and "conv_add" or "conv", act = n.opts.act_type == "relu"
          or n.opts.postsum_act == "relu" }
      elseif o == "quantized_fully_connected" then e = { kind = "fc", act = n.opts.act_type == "relu" }
      elseif o == "quantized_pooling" then e = { kind = "pool" }
      elseif o == "quantized_flatten" then e = { kind = "flatten" }
      elseif o then e = { kind = o } end
      if e then
        local o2 = n.opts
        if o2 and o2.max_calib_range then e.range = { o2.min_calib_range, o2.max_calib_range } end
        got[#got + 1] = e
      end
    end
    local theirs = {}
    for _, n in ipairs(want) do
      local e
      if n.op == "_contrib_quantize_v2" then e = { kind = "quantize" }
      elseif n.op == "_sg_mkldnn_conv" then
        local act = false
        for _, i in ipairs(n.inner) do act = act or i == "Activation" end
        e = { kind = n.with_sum == "true" and "conv_add" or "conv", act = act }
      elseif n.op == "_sg_mkldnn_fully_connected" then
        e = { kind = "fc", act = n.inner[2] == "Activation" }
      elseif n.op == "_contrib_quantized_pooling" then e = { kind = "pool" }
      elseif n.op == "_contrib_quantized_flatten" then e = { kind = "flatten" }
      else e = { kind = n.op } end
      if n.max_calib_range then e.range = { n.min_calib_range, n.max_calib_range } end
      theirs[#theirs + 1] = e
    end
    local function key(e) return e.kind .. (e.act and "+relu" or "") end
    local function sorted(list)
      local r = {}
      for _, e in ipairs(list) do r[#r + 1] = key(e) end
      table.sort(r)
      return r
    end
    assert.same(sorted(theirs), sorted(got))
    -- the ranges, matched by kind (each kind once here but the two plain-or-sum convs)
    local by = {}
    for _, e in ipairs(theirs) do by[key(e)] = e end
    for _, e in ipairs(got) do
      local t = by[key(e)]
      assert.equal(t.range == nil, e.range == nil, key(e))
      if e.range then
        for i = 1, 2 do
          assert.is_true(math.abs(e.range[i] - t.range[i]) <= 1e-4 * math.max(1, math.abs(t.range[i])),
            string.format("%s range %d: %.6f vs MXNet's %.6f", key(e), i, e.range[i], t.range[i]))
        end
      end
    end
    -- and the int8 outputs stay near the float ones
    local d = nd.max(nd.abs(nd.sub(qn(x), y))):item() / nd.max(nd.abs(y)):item()
    assert.is_true(d < 0.05, "relative error " .. d)
  end)
end)
