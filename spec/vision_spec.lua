-- mx.gluon.data.vision: the IDX reader (mx_idx_load), MNIST/FashionMNIST, transforms.
local mx = require("mx")
local data = require("mx.gluon.data")
local vision = data.vision
local T = vision.transforms
local nd = mx.nd

local tmpdir = os.tmpname()
os.remove(tmpdir)
os.execute("mkdir -p '" .. tmpdir .. "'")
teardown(function() os.execute("rm -rf '" .. tmpdir .. "'") end) -- after the whole file

local function write(name, bytes)
  local path = tmpdir .. "/" .. name
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

local function gzip(path)
  assert(os.execute("gzip -c '" .. path .. "' > '" .. path .. ".gz'"))
  return path .. ".gz"
end

local function be32(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256)
end

local function idx(type_byte, dims, payload)
  local h = string.char(0, 0, type_byte, #dims)
  for _, d in ipairs(dims) do h = h .. be32(d) end
  return h .. payload
end

local function bytes(list)
  local t = {}
  for i, v in ipairs(list) do t[i] = string.char(v) end
  return table.concat(t)
end

local function allocs() return mx.memory_stats().num_allocs end

describe("IDX reader (mx_idx_load)", function()
  it("reads u8, i16, i32 and f32/f64 files, plain and gzipped", function()
    local p = write("u8.idx", idx(0x08, { 2, 3 }, bytes { 0, 1, 2, 253, 254, 255 }))
    for _, path in ipairs { p, gzip(p) } do
      local t = vision.read_idx(path)
      assert.equal("uint8", t:dtype())
      assert.same({ 2, 3 }, t:shape())
      assert.same({ 0, 1, 2, 253, 254, 255 }, t:tolist())
    end
    -- big-endian int16 (widened to int32) and int32
    local i16 = write("i16.idx", idx(0x0B, { 3 }, bytes { 0xff, 0xfe, 0x01, 0x00, 0x7f, 0xff }))
    local t16 = vision.read_idx(i16)
    assert.equal("int32", t16:dtype())
    assert.same({ -2, 256, 32767 }, t16:tolist())
    local i32 = write("i32.idx", idx(0x0C, { 2 }, be32(1) .. bytes { 0xff, 0xff, 0xff, 0xfd }))
    assert.same({ 1, -3 }, vision.read_idx(i32):tolist())
    -- 1.5f = 0x3FC00000, -2.0 (f64) = 0xC000000000000000
    local f32 = write("f32.idx", idx(0x0D, { 1, 1 }, bytes { 0x3f, 0xc0, 0, 0 }))
    assert.same({ 1.5 }, vision.read_idx(f32):tolist())
    local f64 = write("f64.idx", idx(0x0E, { 1 }, bytes { 0xc0, 0, 0, 0, 0, 0, 0, 0 }))
    local t64 = vision.read_idx(f64)
    assert.equal("float64", t64:dtype())
    assert.same({ -2 }, t64:tolist())
  end)

  it("rejects malformed files with messages, allocating nothing", function()
    local cases = {
      { "magic.idx", "\1\0\8\1" .. be32(1) .. "x", "is not an IDX file" },
      { "type.idx", idx(0x07, { 1 }, "x"), "unknown element type 0x07" },
      { "ndim0.idx", string.char(0, 0, 8, 0), "has 0 dimensions" },
      { "short.idx", idx(0x08, { 4 }, "abc"), "claims shape (4,) (12 bytes with the header) but has 11" },
      { "long.idx", idx(0x08, { 2 }, "abc"), "but has 11 bytes" },
      { "hdr.idx", string.char(0, 0, 8, 3) .. be32(2), "ends inside its header" },
      { "huge.idx", idx(0x08, { 65535, 65535, 65535 }, "x"), "claims shape (65535, 65535, 65535)" },
      { "tiny.idx", "\0\0", "too short for an IDX header" },
    }
    for _, c in ipairs(cases) do
      local path = write(c[1], c[2])
      local before = allocs()
      local ok, err = pcall(vision.read_idx, path)
      assert.is_false(ok, c[1])
      assert.truthy(err:find(c[3], 1, true), c[1] .. ": " .. tostring(err))
      assert.truthy(err:find(path, 1, true), err)
      assert.equal(before, allocs(), c[1] .. " allocated")
    end
  end)

  it("checks a gzip file's sizes before allocating, and its data after", function()
    -- header claims 16 MB of data; the stream holds 3 bytes
    local big = gzip(write("big.idx", idx(0x08, { 4096, 4096 }, "abc")))
    local before = allocs()
    local ok, err = pcall(vision.read_idx, big)
    assert.is_false(ok)
    assert.truthy(err:find("truncated or corrupt", 1, true), err)
    assert.equal(before, allocs())
    -- a gzip stream cut short
    local good = gzip(write("cut.idx", idx(0x08, { 1000 }, string.rep("\7", 1000))))
    local f = assert(io.open(good, "rb"))
    local s = f:read("*a")
    f:close()
    local cut = write("cut2.idx.gz", s:sub(1, #s - 6))
    ok, err = pcall(vision.read_idx, cut)
    assert.is_false(ok)
    assert.truthy(err:find("idx: ", 1, true), err)
    ok, err = pcall(vision.read_idx, tmpdir .. "/none.idx")
    assert.is_false(ok)
    assert.truthy(err:find("cannot open", 1, true), err)
  end)
end)

describe("IDX reader from memory (mx_idx_load_bytes)", function()
  local lib = require("mx.core.lib")
  local ffi, C = lib.ffi, lib.C
  local out = ffi.new("mx_tensor*[1]")
  local function load_bytes(b)
    local rc = C.mx_idx_load_bytes(b, #b, out)
    if rc ~= 0 then return nil, rc, ffi.string(C.mx_last_error()) end
    return nd._wrap(out[0])
  end
  local function slurp(path)
    local f = assert(io.open(path, "rb"))
    local b = f:read("*a")
    f:close()
    return b
  end

  it("reads plain and gzip bytes like the file reader", function()
    local p = write("m.idx", idx(0x0C, { 2, 2 }, be32(1) .. be32(2) .. be32(3) .. be32(70000)))
    for _, path in ipairs { p, gzip(p) } do
      local t = assert(load_bytes(slurp(path)))
      assert.same({ 2, 2 }, t:shape())
      assert.same({ 1, 2, 3, 70000 }, t:tolist())
    end
    local t, rc, msg = load_bytes("\0\0\8\1" .. be32(5) .. "ab")
    assert.is_nil(t)
    assert.equal(C.MX_EFORMAT, rc)
    assert.truthy(msg:find("'<memory>' claims shape (5,)", 1, true), msg)
  end)

  it("survives mutated files: each loads or fails with MX_EFORMAT, never crashes", function()
    local plain = idx(0x08, { 3, 4, 5 }, string.rep("\1\2\3\4\5", 12))
    local gz = slurp(gzip(write("fz.idx", plain)))
    local seed = 12345
    local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n end
    local loaded, rejected = 0, 0
    for round = 1, 3000 do
      local b = round % 2 == 0 and plain or gz
      local buf = { b:byte(1, -1) }
      for _ = 1, 1 + rnd(3) do
        local op = rnd(3)
        local i = 1 + rnd(#buf)
        if op == 0 then buf[i] = rnd(256)
        elseif op == 1 then table.remove(buf, i)
        else table.insert(buf, i, rnd(256)) end
      end
      local s = string.char(unpack(buf))
      local t, rc = load_bytes(s)
      if t then
        loaded = loaded + 1
        assert.equal(t:size(), #t:tolist())
      else
        rejected = rejected + 1
        assert.is_true(rc == C.MX_EFORMAT or rc == C.MX_ENOMEM, tostring(rc))
      end
    end
    assert.is_true(loaded > 0 and rejected > 0, loaded .. " / " .. rejected)
  end)
end)

local FMNIST = "/usr/share/datasets/fashion-mnist"
local have_fmnist = io.open(FMNIST .. "/t10k-labels-idx1-ubyte.gz", "rb")
if have_fmnist then have_fmnist:close() end

describe("FashionMNIST and MNIST", function()
  local it_data = have_fmnist and it or pending

  it_data("reads Debian's dataset-fashion-mnist: shapes, dtypes, labels, pixels", function()
    local train = vision.FashionMNIST { train = true }
    local test = vision.FashionMNIST { train = false }
    assert.equal(60000, train:len())
    assert.equal(10000, test:len())
    local img, label = train:get(1)
    assert.same({ 28, 28, 1 }, img:shape())
    assert.equal("uint8", img:dtype())
    assert.equal(9, label)
    assert.equal("number", type(label))
    -- values checked independently with Python's gzip + numpy
    local s = 0
    for _, v in ipairs(img:tolist()) do s = s + v end
    assert.equal(76247, s)
    assert.equal(228, img[11][15][1]:item()) -- X[0, 10, 14] in 0-based numpy
    local labels = {}
    for i = 1, 10 do labels[i] = select(2, train:get(i)) end
    assert.same({ 9, 0, 0, 3, 0, 2, 7, 2, 5, 5 }, labels)
    local counts = {}
    local _, y = train:arrays()
    for _, v in ipairs(y:tolist()) do counts[v + 1] = (counts[v + 1] or 0) + 1 end
    assert.same({ 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000 }, counts)
    local timg, tlab = test:get(1)
    assert.equal(9, tlab)
    s = 0
    for _, v in ipairs(timg:tolist()) do s = s + v end
    assert.equal(33456, s)
  end)

  it("names the Debian package when the files are missing", function()
    local ok, err = pcall(function()
      local ds = vision.FashionMNIST { root = tmpdir .. "/nowhere" } -- not a tail call
      return ds
    end)
    assert.is_false(ok)
    assert.truthy(err:find("apt-get install dataset-fashion-mnist", 1, true), err)
    assert.truthy(err:find("vision_spec.lua:%d+:"), err) -- blames the caller
    ok, err = pcall(vision.MNIST, { root = tmpdir .. "/nowhere" })
    assert.is_false(ok)
    assert.truthy(err:find("t10k") == nil and err:find("train-images-idx3-ubyte", 1, true), err)
  end)

  it("reads MNIST-layout files from root=", function()
    local root = tmpdir .. "/mn"
    os.execute("mkdir -p " .. root)
    local f = assert(io.open(root .. "/t10k-images-idx3-ubyte", "wb"))
    f:write(idx(0x08, { 2, 2, 2 }, bytes { 1, 2, 3, 4, 5, 6, 7, 8 }))
    f:close()
    gzip(write("mn/t10k-labels-idx1-ubyte", idx(0x08, { 2 }, bytes { 7, 3 })))
    local ds = vision.MNIST { root = root, train = false }
    assert.equal(2, ds:len())
    local img, lab = ds:get(2)
    assert.same({ 2, 2, 1 }, img:shape())
    assert.same({ 5, 6, 7, 8 }, img:tolist())
    assert.equal(3, lab)
    assert.has_error(function() vision.MNIST { root = root, shuffle = true } end,
      "MNIST: unknown option 'shuffle' (valid: train, root, transform)")
  end)

  it_data("a DataLoader over transform_first(ToTensor()) gives float batches in [0, 1]", function()
    local test = vision.FashionMNIST { train = false }
    local ds = test:transform_first(T.ToTensor())
    local loader = data.DataLoader(ds, { batch_size = 100 })
    assert.equal(100, loader:len())
    local x, y = loader:iter()()
    assert.same({ 100, 1, 28, 28 }, x:shape())
    assert.equal("float32", x:dtype())
    assert.same({ 100 }, y:shape())
    -- the batch path equals the per-sample transform
    local one = ds:get(1)
    assert.same({ 1, 28, 28 }, one:shape())
    assert.same(one:tolist(), x[1]:tolist())
    local sum = 0
    for _, v in ipairs(x[1]:tolist()) do sum = sum + v end
    assert.near(33456 / 255, sum, 1e-3)
    -- and a loader with a per-sample batchify_fn
    local slow = data.DataLoader(ds, { batch_size = 100, batchify_fn = data.batchify.default })
    local xs = slow:iter()()
    assert.same(x[100]:tolist(), xs[100]:tolist())
  end)
end)

describe("vision.transforms", function()
  local img = nd.array({ { { 0 }, { 51 } }, { { 102 }, { 255 } } }, { dtype = "uint8" }) -- 2x2x1

  it("ToTensor: HWC uint8 -> CHW float32 / 255, per image and per batch", function()
    local t = T.ToTensor()(img)
    assert.same({ 1, 2, 2 }, t:shape())
    assert.equal("float32", t:dtype())
    local v = t:tolist()
    for i, e in ipairs { 0, 0.2, 0.4, 1 } do assert.near(e, v[i], 1e-6) end
    local batch = data.batchify.stack({ img, img }, 2)
    local tb = T.ToTensor()(batch)
    assert.same({ 2, 1, 2, 2 }, tb:shape())
    assert.same(t:tolist(), tb[2]:tolist())
    assert.has_error(function() T.ToTensor()(nd.zeros { 3 }) end,
      "ToTensor: expected an image (H, W, C) or a batch (N, H, W, C), got shape (3)")
  end)

  local it_t = nd.transpose and it or pending
  it_t("ToTensor moves 3 channels first", function()
    local rgb = nd.array({ { { 1, 2, 3 }, { 4, 5, 6 } } }, { dtype = "uint8" }) -- 1x2x3
    local t = T.ToTensor()(rgb)
    assert.same({ 3, 1, 2 }, t:shape())
    local v = t:tolist()
    for i, e in ipairs { 1, 4, 2, 5, 3, 6 } do assert.near(e / 255, v[i], 1e-6) end
  end)

  it_t("the uint8 fast path and the op path (float input) agree exactly", function()
    -- a (2, 3, 4, 3) batch of all byte values
    local vals = {}
    for i = 1, 72 do vals[i] = (i * 37) % 256 end
    local u8 = nd.array(vals, { dtype = "uint8" }):reshape { 2, 3, 4, 3 }
    local fast = T.ToTensor()(u8)
    local ops = T.ToTensor()(u8:to(nil, "float32"))
    assert.same({ 2, 3, 3, 4 }, fast:shape())
    assert.same(ops:tolist(), fast:tolist())
    assert.same(T.ToTensor()(u8[2]):tolist(), fast[2]:tolist())
    -- every byte maps to the float32 nearest v / 255
    local all = {}
    for i = 1, 256 do all[i] = i - 1 end
    local t = T.ToTensor()(nd.array(all, { dtype = "uint8" }):reshape { 16, 16, 1 })
    local want = nd.array(all):reshape { 1, 16, 16 } / 255
    assert.same(want:tolist(), t:tolist())
  end)

  it("Normalize: scalar and per-channel mean/std", function()
    local x = nd.array({ { { 1, 2 } }, { { 3, 4 } } }) -- (2, 1, 2): 2 channels
    assert.same({ 0, 0.5, 1, 1.5 }, T.Normalize(1, 2)(x):tolist())
    assert.same({ 0, 1, 0.5, 1 }, T.Normalize({ 1, 2 }, { 1, 2 })(x):tolist())
    local b = data.batchify.stack({ x, x }, 2)
    assert.same({ 0, 1, 0.5, 1, 0, 1, 0.5, 1 }, T.Normalize({ 1, 2 }, { 1, 2 })(b):tolist())
    assert.has_error(function() T.Normalize({ 1, 2, 3 }, 1)(x) end,
      "Normalize: mean has 3 values but the input has 2 channels")
    assert.has_error(function() T.Normalize(0, 1)(img) end)
  end)

  it("Cast and Compose; labels pass through a transform", function()
    local c = T.Cast("float64")(img)
    assert.equal("float64", c:dtype())
    local pipe = T.Compose { T.ToTensor(), T.Normalize(0.5, 0.5) }
    assert.is_true(pipe.batchable)
    local y, lab = pipe(img, 7)
    assert.equal(7, lab)
    local v = y:tolist()
    for i, e in ipairs { -1, -0.6, -0.2, 1 } do assert.near(e, v[i], 1e-6) end
    local fpipe = T.Compose { T.ToTensor(), function(x) return x * 2 end }
    assert.is_false(fpipe.batchable)
    assert.near(2, fpipe(img):tolist()[4], 1e-6)
  end)

  it("an eager transform_first of a batchable transform runs once over the dataset", function()
    local raw = data.ArrayDataset(data.batchify.stack({ img, img, img }, 3), { 1, 2, 3 })
    local ds = raw:transform_first(T.ToTensor(), false)
    local x, y = ds:get(3)
    assert.same({ 1, 2, 2 }, x:shape())
    assert.equal("float32", x:dtype())
    assert.equal(3, y)
    local all = ds:arrays()
    assert.same({ 3, 1, 2, 2 }, all:shape())
  end)
end)

---------------------------------------------------------------- image datasets
local vds = vision.datasets

local function mkdir(path) assert(os.execute("mkdir -p '" .. path .. "'")) return path end

local function pattern_image(h, w, seed)
  local rows = {}
  for y = 1, h do
    local row = {}
    for x = 1, w do
      row[x] = { (y * 31 + x * 7 + seed * 13) % 256, (y * 3 + x * 41 + seed) % 256, (x * y + seed * 5) % 256 }
    end
    rows[y] = row
  end
  return nd.array(rows, { dtype = "uint8" })
end

local function with_warnings(f)
  local seen, old = {}, vds._warn
  vds._warn = function(msg) seen[#seen + 1] = msg end
  local ok, err = pcall(f)
  vds._warn = old
  if not ok then error(err, 0) end
  return seen
end

-- root/cat/{a,b}.png, root/dog/c.png (+ c.jpg), a stray file and a non-image
local folder = mkdir(tmpdir .. "/folder")
local pics = { cat = { pattern_image(6, 8, 1), pattern_image(5, 7, 2) }, dog = { pattern_image(9, 4, 3) } }
mkdir(folder .. "/cat")
mkdir(folder .. "/dog")
write("folder/cat/a.png", mx.image.imencode(pics.cat[1], { img_fmt = ".png" }))
write("folder/cat/b.PNG", mx.image.imencode(pics.cat[2], { img_fmt = ".png" }))
write("folder/cat/notes.txt", "not an image")
write("folder/dog/c.png", mx.image.imencode(pics.dog[1], { img_fmt = ".png" }))
write("folder/dog/d.jpg", mx.image.imencode(pics.dog[1], { quality = 90 }))
write("folder/readme.md", "stray")

describe("ImageFolderDataset", function()
  it("lists root/<class>/<image> with sorted synsets, skipping other files with a warning", function()
    local ds
    local warned = with_warnings(function() ds = vision.ImageFolderDataset(folder) end)
    assert.same({ "cat", "dog" }, ds.synsets)
    assert.equal(4, ds:len())
    assert.same({ folder .. "/cat/a.png", 0 }, ds.items[1])
    assert.same({ folder .. "/cat/b.PNG", 0 }, ds.items[2])
    assert.same({ folder .. "/dog/c.png", 1 }, ds.items[3])
    assert.equal(2, #warned)
    assert.matches("Ignoring .*/cat/notes.txt of type .txt", warned[1])
    assert.matches("Ignoring .*/readme.md, which is not a directory", warned[2])
    local img, label = ds:get(2)
    assert.equal(0, label)
    assert.same(pics.cat[2]:shape(), img:shape())
    assert.same(pics.cat[2]:tolist(), img:tolist())
    local jpg, l4 = ds:get(-1)
    assert.same({ 9, 4, 3 }, jpg:shape())
    assert.equal(1, l4)
  end)

  it("flag = 0 gives one gray channel; transform is fn(img, label)", function()
    local ds
    with_warnings(function()
      ds = vision.ImageFolderDataset(folder, { flag = 0,
        transform = function(x, y) return x:shape(), y + 10 end })
    end)
    local s, label = ds:get(3)
    assert.same({ 9, 4, 1 }, s)
    assert.equal(11, label)
  end)

  it("errors name the folder and the option", function()
    assert.has_error(function() vision.ImageFolderDataset(tmpdir .. "/none") end,
      "ImageFolderDataset: " .. tmpdir .. "/none is not a directory")
    assert.has_error(function() vision.ImageFolderDataset(folder, { flags = 1 }) end,
      "ImageFolderDataset: unknown option 'flags' (valid: flag, transform)")
    assert.has_error(function() vision.ImageFolderDataset(folder, { flag = 2 }) end)
    local bad = mkdir(tmpdir .. "/badfolder/x")
    write("badfolder/x/broken.jpg", "not a jpeg at all")
    local ds = vision.ImageFolderDataset(tmpdir .. "/badfolder")
    local ok, err = pcall(function() local v = ds:get(1) return v end)
    assert.is_false(ok)
    assert.matches("ImageFolderDataset: .*broken.jpg", err)
    assert.truthy(bad)
  end)

  it("reads the real photo", function()
    local d = mkdir(tmpdir .. "/photos/people")
    assert(os.execute("cp spec/fixtures/images/grace_hopper.jpg '" .. d .. "/'"))
    local ds = vision.ImageFolderDataset(tmpdir .. "/photos")
    local img, label = ds:get(1)
    assert.same({ 600, 512, 3 }, img:shape())
    assert.equal(0, label)
    local y = T.Compose { T.Resize(32), T.ToTensor() } (img)
    assert.same({ 3, 32, 32 }, y:shape())
  end)
end)

describe("ImageListDataset", function()
  it("reads a .lst (index, labels, path) relative to root, and a Lua list", function()
    write("folder/list.lst", "0\t1.000000\tdog/c.png\n5\t0.000000\t2.500000\tcat/a.png\n")
    local ds = vision.ImageListDataset(folder, "list.lst")
    assert.equal(2, ds:len())
    local img, label = ds:get(1)
    assert.same(pics.dog[1]:tolist(), img:tolist())
    assert.equal(1, label)
    local _, lab2 = ds:get(2)
    assert.same({ 0, 2.5 }, lab2:tolist()) -- several values: a float32 NDArray
    local ds2 = vision.ImageListDataset(folder, { { 3, "cat/b.PNG" }, { 4, "dog/c.png" } }, { flag = 0 })
    local g, l = ds2:get(1)
    assert.same({ 5, 7, 1 }, g:shape())
    assert.equal(3, l)
  end)

  it("names the file and line of a malformed .lst", function()
    write("folder/bad.lst", "0\t1\tdog/c.png\nnot a line\n")
    assert.has_error(function() vision.ImageListDataset(folder, "bad.lst") end,
      "ImageListDataset: " .. folder .. "/bad.lst line 2: expected 'index<TAB>label...<TAB>path', "
      .. "got \"not a line\"")
    assert.has_error(function() vision.ImageListDataset(folder, 5) end,
      "ImageListDataset: imglist must be a .lst path or a list of {label, ..., path}")
  end)
end)

describe("ImageRecordDataset", function()
  local rio = mx.recordio
  it("reads images and labels packed with pack_img (the .idx next to the .rec)", function()
    local w = rio.MXIndexedRecordIO(tmpdir .. "/imgs.idx", tmpdir .. "/imgs.rec", "w")
    w:write_idx(0, rio.pack_img({ label = 4, id = 0 }, pics.cat[1], { img_fmt = ".png", to_rgb = true }))
    w:write_idx(1, rio.pack_img({ label = { 1, 2 }, id = 1 }, pics.dog[1],
      { img_fmt = ".png", to_rgb = true }))
    w:close()
    local ds = vision.ImageRecordDataset(tmpdir .. "/imgs.rec")
    assert.equal(2, ds:len())
    local img, label = ds:get(1)
    assert.same(pics.cat[1]:tolist(), img:tolist())
    assert.equal(4, label)
    local img2, l2 = ds:get(2)
    assert.same(pics.dog[1]:tolist(), img2:tolist())
    assert.same({ 1, 2 }, l2:tolist())
    local tds = vision.ImageRecordDataset(tmpdir .. "/imgs.rec", { flag = 0,
      transform = function(x, y) return x:shape()[3], y end })
    assert.equal(1, (tds:get(1)))
  end)

  it("errors name the file", function()
    assert.has_error(function() vision.ImageRecordDataset(tmpdir .. "/none.rec") end)
    local ok, err = pcall(vision.ImageRecordDataset, tmpdir .. "/none.rec")
    assert.is_false(ok)
    assert.matches("ImageRecordDataset: .*none", err)
  end)
end)

describe("CIFAR10 and CIFAR100", function()
  -- records: label byte(s) then 3072 bytes, the R plane, G plane, B plane (row-major 32x32)
  local function record(labels, seed)
    local px = {}
    for i = 1, 3072 do px[i] = string.char((i * 7 + seed * 31) % 256) end
    local lab = {}
    for k, v in ipairs(labels) do lab[k] = string.char(v) end
    return table.concat(lab) .. table.concat(px)
  end
  local function pixel(seed, c, y, x) -- the value at HWC (y, x, c), 1-based
    local i = (c - 1) * 1024 + (y - 1) * 32 + x
    return (i * 7 + seed * 31) % 256
  end

  it("CIFAR10 reads data_batch_1..5 / test_batch as (N, 32, 32, 3) HWC and labels", function()
    local root = mkdir(tmpdir .. "/c10/cifar-10-batches-bin")
    for b = 1, 5 do
      write("c10/cifar-10-batches-bin/data_batch_" .. b .. ".bin", record({ b }, b) .. record({ 9 }, b + 10))
    end
    write("c10/cifar-10-batches-bin/test_batch.bin", record({ 3 }, 50))
    local train = vision.CIFAR10 { root = tmpdir .. "/c10" }
    assert.equal(10, train:len())
    local img, label = train:get(3)
    assert.same({ 32, 32, 3 }, img:shape())
    assert.equal(2, label)
    assert.equal(9, (select(2, train:get(4))))
    for _, p in ipairs { { 1, 1, 1 }, { 2, 5, 9 }, { 3, 32, 32 }, { 1, 17, 3 } } do
      assert.equal(pixel(2, p[1], p[2], p[3]), img[{ p[2], p[3], p[1] }]:item())
    end
    local test = vision.CIFAR10 { root = root, train = false }
    assert.equal(1, test:len())
    assert.equal(3, (select(2, test:get(1))))
    local r = train:_recipe()
    assert.equal("CIFAR10", r.ctor)
    assert.equal(10, require(r.module)[r.ctor](r.opts):len())
  end)

  it("CIFAR100 takes the coarse label, or the fine one with fine_label", function()
    mkdir(tmpdir .. "/c100")
    write("c100/train.bin", record({ 4, 77 }, 1) .. record({ 19, 2 }, 2))
    write("c100/test.bin", record({ 0, 99 }, 3))
    local coarse = vision.CIFAR100 { root = tmpdir .. "/c100" }
    local fine = vision.CIFAR100 { root = tmpdir .. "/c100", fine_label = true }
    assert.same({ 4, 19 }, { select(2, coarse:get(1)), select(2, coarse:get(2)) })
    assert.same({ 77, 2 }, { select(2, fine:get(1)), select(2, fine:get(2)) })
    local img = fine:get(2)
    assert.equal(pixel(2, 3, 4, 5), img[{ 4, 5, 3 }]:item())
    local test = vision.CIFAR100 { root = tmpdir .. "/c100", train = false, fine_label = true }
    assert.equal(99, (select(2, test:get(1))))
  end)

  it("errors: missing files name the folder; a wrong size names the record layout", function()
    assert.has_error(function() vision.CIFAR10 { root = tmpdir .. "/nothing" } end)
    local ok, err = pcall(vision.CIFAR10, { root = tmpdir .. "/nothing" })
    assert.is_false(ok)
    assert.matches("CIFAR10: the files data_batch_1.bin.* were not found in .*nothing", err)
    mkdir(tmpdir .. "/c100bad")
    write("c100bad/train.bin", record({ 1, 2 }, 1) .. "x")
    assert.has_error(function() vision.CIFAR100 { root = tmpdir .. "/c100bad" } end,
      "CIFAR100: " .. tmpdir .. "/c100bad/train.bin has 3075 bytes, not a whole number of "
      .. "3074-byte records (2 label bytes + 3072 pixels)")
    assert.has_error(function() vision.CIFAR10 { fine_label = true } end,
      "CIFAR10: unknown option 'fine_label' (valid: root, train, transform)")
  end)
end)

describe("image datasets in DataLoader workers", function()
  it("ImageFolder/ImageRecord datasets rebuild from _recipe and give num_workers = 0's batches",
    function()
      local ds
      with_warnings(function() ds = vision.ImageFolderDataset(folder) end)
      local r = ds:_recipe()
      assert.equal("ImageFolderDataset", r.ctor)
      local rds = vision.ImageRecordDataset(tmpdir .. "/imgs.rec")
      assert.equal(2, require(r.module)[rds:_recipe().ctor](unpack(rds:_recipe().args, 1, 2)):len())
      local pipe = T.Compose { T.Resize(6), T.ToTensor() }
      for _, c in ipairs { { ds:transform_first(pipe), 2 }, { rds:transform_first(pipe), 1 } } do
        local d = c[1]
        local function run(nw)
          local out = {}
          local l = data.DataLoader(d, { batch_size = c[2], num_workers = nw })
          for x in l:iter() do out[#out + 1] = { x:shape(), x:tolist() } end
          if l.close then l:close() end
          return out
        end
        assert.same(run(0), run(2))
      end
    end)
end)
