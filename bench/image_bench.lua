-- bench/image_bench.lua — JPEG decode of a 500x375 photo + resize to 224x224 (bilinear),
-- images/s, one image at a time on the calling thread. Peer:
-- bench/image_bench.py (MXNet 1.9.1's mx.image: OpenCV + libjpeg-turbo; PIL/torchvision
-- are not installed here). Both read the same file, made here from the Debian photo:
--   luajit bench/image_bench.lua && /opt/mxvenv/bin/python bench/image_bench.py
-- (MX_BUILD=build dir, default build; --quick for a smoke run.) Wall-clock time, best of 3.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local mx = require("mx")
local now = require("harness").now
local image = mx.image

local quick = arg[1] == "--quick"
local PATH = "/tmp/luamx_bench_500x375.jpg"
local src = image.imresize(image.imread("spec/fixtures/images/grace_hopper.jpg"), 500, 375,
  { interp = 3 })
local f = assert(io.open(PATH, "wb"))
f:write(image.imencode(src, { quality = 90 }))
f:close()
local bytes = assert(io.open(PATH, "rb")):read("*a")

local function run(name, fn, n)
  for _ = 1, 20 do fn() end
  mx.nd.waitall()
  local best = math.huge
  for _ = 1, 3 do
    local t0 = now()
    for _ = 1, n do fn() end
    mx.nd.waitall()
    best = math.min(best, now() - t0)
  end
  print(string.format("luamx %-22s %8.1f images/s  (%.3f ms/image)", name, n / best, best / n * 1e3))
end

local n = quick and 50 or 500
run("decode", function() return image.imdecode(bytes) end, n)
run("decode+resize224", function() return image.imresize(image.imdecode(bytes), 224, 224) end, n)
local img = image.imdecode(bytes)
run("resize224", function() return image.imresize(img, 224, 224) end, n)
