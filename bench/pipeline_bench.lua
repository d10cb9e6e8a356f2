-- bench/pipeline_bench.lua — an ImageNet-style input pipeline:
-- JPEG decode + RandomResizedCrop(224) + RandomFlipLeftRight + ToTensor + Normalize,
-- batch 64, images/s through gluon.data.DataLoader at 0, 1 and 2 worker threads.
-- Peer: bench/pipeline_bench.py (PyTorch's DataLoader + torchvision/PIL, same files):
--   luajit bench/pipeline_bench.lua && /opt/torchvenv/bin/python bench/pipeline_bench.py
-- Options: --dir=DIR (default /tmp/luamx_pipeline_jpegs)  --images=N (256)  --passes=N (3)
--   --workers=0,1,2  --threads=N (intra-op threads, default 1)  --quick
-- The files: N JPEGs of 500x375 (quality 90) in DIR/<k>/ (4 classes, an image folder),
-- random crops of the photos Debian's opencv-doc ships, resized; made here unless
-- DIR.complete (written last) exists (the Python side reads the same files). The
-- dataset is ImageFolderDataset with the transforms per sample (transform_first),
-- shuffled, last batch kept; after one warm-up pass (worker threads up, files in the
-- page cache) the rate is the median of
-- --passes passes. MX_NUM_THREADS is 1 (--threads): the intra-op pool is the process's,
-- and with two workers on two cores the workers are the parallelism (the pool would only
-- hand small per-image ops to threads that are busy); the main thread idle-waits.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local image = mx.image
local data = mx.gluon.data
local T = data.vision.transforms

local DIR = A.dir or "/tmp/luamx_pipeline_jpegs"
local NIMG = A.images or 256
local PASSES = A.quick and 1 or (A.passes or 3)
local workers = {}
for w in tostring(A.workers or "0,1,2"):gmatch("%d+") do workers[#workers + 1] = tonumber(w) end

local PHOTOS = { "fruits.jpg", "baboon.jpg", "squirrel_cls.jpg", "starry_night.jpg",
  "board.jpg", "aloeL.jpg", "leuvenA.jpg" }
local SRC = "/usr/share/doc/opencv-doc/examples/data/"

-- the JPEG folder, unless it is there already (a marker file is written last)
local function make_files()
  local f = io.open(DIR .. ".complete")
  if f then
    f:close()
    return
  end
  local srcs = {}
  for _, name in ipairs(PHOTOS) do
    local ok, img = pcall(image.imread, SRC .. name)
    if ok then srcs[#srcs + 1] = img end
  end
  if #srcs == 0 then error("no photos in " .. SRC .. ": apt-get install opencv-doc") end
  assert(os.execute("mkdir -p '" .. DIR .. "'/0 '" .. DIR .. "'/1 '" .. DIR .. "'/2 '"
    .. DIR .. "'/3"))
  math.randomseed(7)
  for i = 1, NIMG do
    local src = srcs[(i - 1) % #srcs + 1]
    local h, w = src:shape()[1], src:shape()[2]
    -- a random 4:3 box covering 50-100% of the width (or the height)
    local bw = math.floor(math.min(w, h * 4 / 3) * (0.5 + 0.5 * math.random()))
    local bh = math.floor(bw * 3 / 4)
    local x0, y0 = math.random(0, w - bw), math.random(0, h - bh)
    local img = image.fixed_crop(src, x0, y0, bw, bh, { 500, 375 }, 2)
    local out = assert(io.open(string.format("%s/%d/%04d.jpg", DIR, i % 4, i), "wb"))
    out:write(image.imencode(img, { quality = 90 }))
    out:close()
  end
  assert(io.open(DIR .. ".complete", "w")):close()
end
make_files()

H.env_note()
io.write(string.format("# %d JPEGs 500x375 in %s; intra-op threads %d\n", NIMG, DIR, threads))
local tf = T.Compose { T.RandomResizedCrop(224), T.RandomFlipLeftRight(), T.ToTensor(),
  T.Normalize({ 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 }) }
local ds = data.vision.ImageFolderDataset(DIR):transform_first(tf)
assert(ds:len() == NIMG, "expected " .. NIMG .. " images in " .. DIR)

local rates = {}
for _, nw in ipairs(workers) do
  local loader = data.DataLoader(ds, { batch_size = 64, shuffle = true, num_workers = nw })
  for x in loader:iter() do assert(x:shape()[2] == 3 and x:shape()[3] == 224) end -- warm-up
  local r = {}
  for p = 1, PASSES do
    collectgarbage()
    local t0, n = H.now(), 0
    for x in loader:iter() do n = n + x:shape()[1] end
    r[p] = n / (H.now() - t0)
  end
  loader:close()
  rates[nw] = H.median(r)
  H.report("pipeline_jpeg_rrc224_w" .. nw, rates[nw], "images/s",
    { note = string.format("batch 64, %d workers, MX_NUM_THREADS=%d", nw, threads) })
end
if rates[0] and rates[2] then
  io.write(string.format("# 2 workers / 0 workers: %.2fx\n", rates[2] / rates[0]))
end
