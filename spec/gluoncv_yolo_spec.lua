-- mx.gluoncv.model_zoo.yolo3 against GluonCV 0.10: with the deterministic weights of
-- spec/helpers/zoo_fill.lua (anchors and offsets kept) YOLOv3 on Darknet-53 and MobileNet
-- 1.0 give GluonCV's detections (spec/fixtures/yolo_outputs.params:
-- tools/fixtures/make_yolo_fixtures.py) and parameter counts; with /opt/mxvenv GluonCV's
-- own saved parameters load and give its outputs.
local mx = require("mx")
local nd = mx.nd
local yolo = require("mx.gluoncv.model_zoo.yolo3")
local fill = require("helpers.zoo_fill")
local PY = "/opt/mxvenv/bin/python"

local NETS = { { "yolo3_darknet53_voc", yolo.yolo3_darknet53_voc },
  { "yolo3_mobilenet1.0_voc", yolo.yolo3_mobilenet1_0_voc } }

local function constant(name) return name:match("anchors$") or name:match("offsets$") end

local function build(make)
  local net = make()
  net:initialize()
  local x = fill.data({ 1, 3, 96, 96 })
  net:set_nms(0, -1, -1)
  net(x)
  return net, x
end

local function rows(net, x)
  local ids, scores, bboxes = net(x)
  return nd.concat({ ids, scores, bboxes }, { dim = -1 }):totable()[1]
end

-- ids equal, scores within 1e-4, boxes within 1e-3 of the largest coordinate
local function same(got, want, n, what)
  local m = 1
  for r = 1, n do
    for k = 3, 6 do
      local v = math.abs(want[r][k])
      if v < math.huge then m = math.max(m, v) end
    end
  end
  for r = 1, n do
    local a, b = got[r], want[r]
    assert(a[1] == b[1], string.format("%s row %d: id %g vs %g", what, r, a[1], b[1]))
    assert(math.abs(a[2] - b[2]) < 1e-4, string.format("%s row %d: score %g vs %g", what, r,
      a[2], b[2]))
    for k = 3, 6 do
      assert(a[k] == b[k] or math.abs(a[k] - b[k]) <= 1e-3 * m,
        string.format("%s row %d: coordinate %d: %g vs %g", what, r, k - 2, a[k], b[k]))
    end
  end
end

describe("#slow gluoncv YOLOv3 vs GluonCV 0.10 (committed outputs)", function()
  local F = nd.load("spec/fixtures/yolo_outputs.params")
  for _, v in ipairs(NETS) do
    it(v[1] .. ": parameter names and count, every detection, the NMS'd best", function()
      local net, x = build(v[2])
      local n, values = 0, 0
      for _, p in net:collect_params():items() do n, values = n + 1, values + p:data():size() end
      assert.are.same(F[v[1] .. ":count"]:tolist(), { n, values })
      assert.truthy(net:collect_params()["yolo_outputs.0.anchors"])
      fill.params(net, constant)
      local want, all, got = F[v[1] .. ":raw"]:totable()[1], rows(net, x), {}
      assert.are.equal(11340, #all)
      for i = 1, #want do got[i] = all[7 * i - 6] end -- the fixture keeps every 7th row
      same(got, want, #want, v[1] .. " raw")
      if v[1]:match("mobilenet") then -- darknet's random scores saturate at 1: ties
        net:set_nms(0.45, 400, 100)
        same(rows(net, x), F[v[1] .. ":nms"]:totable()[1], 20, v[1] .. " nms")
      end
    end)
  end
end)

describe("#slow #mxnet gluoncv YOLOv3 with GluonCV's saved parameters", function()
  it("GluonCV's save_parameters files load here and give its outputs", function()
    -- LuaJIT's popen close gives no exit status: a venv without GluonCV would only show as
    -- missing files later
    if os.execute(PY .. " -c 'import gluoncv' >/dev/null 2>&1") ~= 0 then
      pending("no MXNet venv with GluonCV at " .. PY)
      return
    end
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local p = io.popen(PY .. " tools/fixtures/make_yolo_fixtures.py live '" .. dir .. "' "
      .. NETS[1][1] .. " " .. NETS[2][1] .. " 2>&1")
    local out = p:read("*a")
    assert(p:close(), out)
    for _, v in ipairs(NETS) do
      local net, x = build(v[2])
      net:load_parameters(dir .. "/" .. v[1] .. "-gcv.params")
      local want = nd.load(dir .. "/" .. v[1] .. "-gcvout.params").out:totable()[1]
      same(rows(net, x), want, #want, v[1] .. " live")
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
