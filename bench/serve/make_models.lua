-- bench/serve/make_models.lua OUT: the mx-serve side of bench/serve_bench.sh — the
-- Gluon zoo's resnet18_v1 (seeded random weights) and the 12-32-16-5 MLP, exported and
-- packed by `mx-serve archive` into OUT/mx_store (batch 8, max delay 5 ms: TorchServe's
-- registration in the script uses the same).
local mx = require("mx")
local nn = mx.gluon.nn
local out = assert(arg[1], "usage: luajit bench/serve/make_models.lua OUT")
local store = out .. "/mx_store"
os.execute("mkdir -p '" .. store .. "'")
mx.random.seed(1)
local resnet = mx.gluon.model_zoo.vision.resnet18_v1()
resnet:initialize()
resnet:hybridize()
resnet(mx.nd.zeros { 1, 3, 224, 224 })
resnet:export(out .. "/resnet18")
local mlp = nn.HybridSequential()
mlp:add(nn.Dense(32, { activation = "relu" }), nn.Dense(16), nn.Activation("tanh"), nn.Dense(5))
mlp:initialize()
mlp:hybridize()
mlp(mx.nd.zeros { 1, 12 })
mlp:export(out .. "/mlp")
local function archive(name, handler, input)
  local cmd = string.format("build/mx-serve archive --model-name %s --symbol %s/%s-symbol.json "
    .. "--params %s/%s-0000.params --handler %s --input %s --batch-size 8 --max-batch-delay 5 "
    .. "--export-path %s --force", name, out, name, out, name, handler, input, store)
  assert(os.execute(cmd) == 0, cmd)
end
archive("resnet18", "image_classifier", "data:float32:-1,3,224,224")
archive("mlp", "json_tensor", "data:float32:-1,12")
print(store)
