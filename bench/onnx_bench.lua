-- bench/onnx_bench.lua — ONNX models in luamx (mx.onnx): import time of ResNet-50 (parse +
-- trace + Conv/BN folding, and the session's graph compile), and batch-1 latency of
-- ResNet-50 and MobileNet v2 through mx.onnx.load_model (the C graph executor, passes on).
-- Peer: bench/onnx_bench.py (ONNX Runtime, same files, same thread count). Files:
-- bench/onnx_export_models.py. bench/onnx_run.sh alternates the two at 1 and 2 threads.
package.path = "bench/?.lua;" .. package.path
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local onnx = require("mx.onnx")
H.env_note()
local models = { "resnet50", "mobilenet_v2" }
local x = mx.random.uniform(-1, 1, { 1, 3, 224, 224 })
for _, name in ipairs(models) do
  local path = "bench/out/" .. name .. ".onnx"
  if not io.open(path, "rb") then
    io.stderr:write("onnx_bench: " .. path .. " missing (bench/onnx_export_models.py)\n")
    os.exit(0)
  end
  local opts = { input_shapes = { data = { 1, 3, 224, 224 } } }
  if name == "resnet50" and threads == 1 then
    local r = H.time(function() return onnx.import_model(path, opts) end,
      { n = 1, reps = A.reps or 5, warmup = 1, gc = true })
    H.report("onnx_import_resnet50", r.median / 1e6, "ms", { note = "import_model: sym + params" })
    r = H.time(function() return onnx.load_model(path, opts) end,
      { n = 1, reps = A.reps or 5, warmup = 1, gc = true })
    H.report("onnx_load_resnet50", r.median / 1e6, "ms", { note = "load_model: import + compile" })
  end
  local sess = onnx.load_model(path, opts)
  local feed = { data = x }
  local r = H.time(function(n)
    for _ = 1, n do
      local o = sess:run(feed)
      o[1]:wait_to_read()
    end
  end, { n = 10, reps = A.reps or 7, warmup = 2 })
  H.report("onnx_" .. name .. "_b1_t" .. threads, r.median / 1e6, "ms", { note = "batch 1" })
end
