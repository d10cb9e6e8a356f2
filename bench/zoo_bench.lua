-- bench/zoo_bench.lua — batch-1 and batch-8 inference of the vision zoo's networks
-- (hybridized, random weights); bench/zoo_bench.py runs the same networks in MXNet 1.9.1
-- (hybridized) and PyTorch (torchvision's equivalents, eval, no_grad).
--   LUA_PATH="bench/?.lua;lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/lib/?.so;;" \
--     luajit bench/zoo_bench.lua [--threads=2] [--nets=resnet50_v1,mobilenet1.0]
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local vision = mx.gluon.model_zoo.vision
H.env_note()

local NETS = { "alexnet", "densenet121", "inceptionv3", "mobilenet1.0", "mobilenetv2_1.0",
  "mobilenetv3_large", "resnet18_v1", "resnet50_v1", "resnet50_v2", "resnext50_32x4d",
  "squeezenet1.1", "vgg16" }
if A.nets then
  NETS = {}
  for n in tostring(A.nets):gmatch("[^,]+") do NETS[#NETS + 1] = n end
end

for _, name in ipairs(NETS) do
  local net = vision.get_model(name)
  net:initialize()
  net:hybridize()
  local sz = name == "inceptionv3" and 299 or 224
  for _, b in ipairs { 1, 8 } do
    local x = mx.nd.random_uniform { shape = { b, 3, sz, sz } }
    net(x):wait_to_read()
    local t = H.time(function(k) for _ = 1, k do net(x):wait_to_read() end end,
      { n = b == 1 and 5 or 2, reps = 5, warmup = 1 })
    H.report(string.format("%s_b%d", name, b), t.median / 1e6, "ms",
      { note = "threads=" .. threads })
  end
  collectgarbage()
end
