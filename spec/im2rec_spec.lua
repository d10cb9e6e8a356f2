-- tools/im2rec.lua: .lst files and .rec/.idx image records from an image folder, read
-- back by ImageRecordDataset (and, #slow #mxnet, by MXNet 1.9.1).
local mx = require("mx")
local vision = require("mx.gluon.data").vision
local nd = mx.nd

local tmp = os.tmpname()
os.remove(tmp)
assert(os.execute("mkdir -p '" .. tmp .. "/imgs/zebra' '" .. tmp .. "/imgs/ant/deep' '" .. tmp .. "/flat'"))
teardown(function() os.execute("rm -rf '" .. tmp .. "'") end)

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end
local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function pattern_image(h, w, seed)
  local rows = {}
  for y = 1, h do
    local row = {}
    for x = 1, w do
      row[x] = { (y * 9 + x * 5 + seed * 40) % 200 + 20, (y * 3 + seed * 70) % 200 + 20, (x * 11) % 200 + 20 }
    end
    rows[y] = row
  end
  return nd.array(rows, { dtype = "uint8" })
end

-- imgs/ant/a1.png, imgs/ant/a2.jpg, imgs/ant/deep/d.png, imgs/zebra/z.png, a text file
local pics = {
  ["ant/a1.png"] = pattern_image(8, 12, 1), ["ant/a2.jpg"] = pattern_image(16, 16, 2),
  ["ant/deep/d.png"] = pattern_image(10, 6, 3), ["zebra/z.png"] = pattern_image(6, 9, 4),
}
for rel, img in pairs(pics) do
  local fmt = rel:match("%.jpg$") and ".jpg" or ".png"
  write(tmp .. "/imgs/" .. rel, mx.image.imencode(img, { img_fmt = fmt, quality = 95 }))
end
write(tmp .. "/imgs/zebra/readme.txt", "text")
write(tmp .. "/flat/one.png", mx.image.imencode(pics["zebra/z.png"], { img_fmt = ".png" }))
write(tmp .. "/flat/two.png", mx.image.imencode(pics["ant/a1.png"], { img_fmt = ".png" }))

local function im2rec(args)
  local p = io.popen("luajit tools/im2rec.lua " .. args .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  return tonumber(out:match("rc=(%d+)%s*$")), out
end

local function lst_lines(path)
  local t = {}
  for line in (read(path) or ""):gmatch("[^\n]+") do t[#t + 1] = line end
  return t
end

describe("im2rec --list", function()
  it("--recursive numbers the folders holding images in walk order (sorted, parent first)", function()
    local rc, out = im2rec("--list --recursive --no-shuffle '" .. tmp .. "/r' '" .. tmp .. "/imgs'")
    assert.equal(0, rc, out)
    assert.same({
      "0\t0.000000\tant/a1.png", "1\t0.000000\tant/a2.jpg", "2\t1.000000\tant/deep/d.png",
      "3\t2.000000\tzebra/z.png",
    }, lst_lines(tmp .. "/r.lst"))
  end)

  it("shuffles repeatably by default; without --recursive lists ROOT's images with label 0", function()
    assert.equal(0, (im2rec("--list --recursive '" .. tmp .. "/s1' '" .. tmp .. "/imgs'")))
    assert.equal(0, (im2rec("--list --recursive '" .. tmp .. "/s2' '" .. tmp .. "/imgs'")))
    local a, b = lst_lines(tmp .. "/s1.lst"), lst_lines(tmp .. "/s2.lst")
    assert.same(a, b)
    local sorted = {}
    for k, v in ipairs(a) do sorted[k] = v end
    table.sort(sorted, function(x, y) return tonumber(x:match("^%d+")) < tonumber(y:match("^%d+")) end)
    assert.same(lst_lines(tmp .. "/r.lst"), sorted)
    assert.equal(0, (im2rec("--list --no-shuffle '" .. tmp .. "/f' '" .. tmp .. "/flat'")))
    assert.same({ "0\t0.000000\tone.png", "1\t0.000000\ttwo.png" }, lst_lines(tmp .. "/f.lst"))
  end)

  it("--train-ratio splits into _train.lst and _val.lst", function()
    local rc = im2rec("--list --recursive --no-shuffle --train-ratio 0.5 '" .. tmp .. "/t' '"
      .. tmp .. "/imgs'")
    assert.equal(0, rc)
    local all = lst_lines(tmp .. "/r.lst")
    assert.same({ all[1], all[2] }, lst_lines(tmp .. "/t_train.lst"))
    assert.same({ all[3], all[4] }, lst_lines(tmp .. "/t_val.lst"))
  end)

  it("rejects bad arguments with a message and the usage", function()
    local rc, out = im2rec("--list --bogus a b")
    assert.equal(2, rc)
    assert.matches("im2rec: unknown option %-%-bogus", out)
    rc, out = im2rec("--resize x a b")
    assert.equal(2, rc)
    assert.matches("%-%-resize must be an integer, got x", out)
    rc, out = im2rec("'" .. tmp .. "/nolist' '" .. tmp .. "/imgs'")
    assert.equal(1, rc)
    assert.matches("no .*nolist%*%.lst found", out)
  end)
end)

describe("im2rec .rec/.idx", function()
  local order = { "ant/a1.png", "ant/a2.jpg", "ant/deep/d.png", "zebra/z.png" }
  local labels = { 0, 0, 1, 2 }

  it("PNG records hold the images exactly; ImageRecordDataset reads images and labels", function()
    assert(os.execute("cp '" .. tmp .. "/r.lst' '" .. tmp .. "/png.lst'"))
    local rc, out = im2rec("--encoding .png --num-thread 2 '" .. tmp .. "/png' '" .. tmp .. "/imgs'")
    assert.equal(0, rc, out)
    local ds = vision.ImageRecordDataset(tmp .. "/png.rec")
    assert.equal(4, ds:len())
    for k, rel in ipairs(order) do
      local img, label = ds:get(k)
      assert.equal(labels[k], label)
      local src = mx.image.imread(tmp .. "/imgs/" .. rel) -- the decoded file (the JPEG is lossy)
      assert.same(src:shape(), img:shape())
      assert.same(src:tolist(), img:tolist())
    end
  end)

  it("JPEG at --quality, --resize (shorter side) and --pass-through", function()
    assert(os.execute("cp '" .. tmp .. "/r.lst' '" .. tmp .. "/jpg.lst'"))
    assert.equal(0, (im2rec("--quality 90 --resize 4 '" .. tmp .. "/jpg' '" .. tmp .. "/imgs'")))
    local ds = vision.ImageRecordDataset(tmp .. "/jpg.rec")
    -- 8x12 -> 4x6, 16x16 -> 4x4, 10x6 -> 6x4 (10 * 4 // 6), 6x9 -> 4x6
    local want = { { 4, 6, 3 }, { 4, 4, 3 }, { 6, 4, 3 }, { 4, 6, 3 } }
    for k = 1, 4 do
      local img, label = ds:get(k)
      assert.same(want[k], img:shape())
      assert.equal(labels[k], label)
      -- the same bilinear resize, encoded at quality 90 and decoded
      local src = mx.image.imread(tmp .. "/imgs/" .. order[k])
      local ref = nd.imresize(src, { w = want[k][2], h = want[k][1], interp = 1 })
      ref = mx.image.imdecode(mx.image.imencode(ref, { quality = 90 }))
      assert.same(ref:tolist(), img:tolist())
    end
    assert(os.execute("cp '" .. tmp .. "/r.lst' '" .. tmp .. "/raw.lst'"))
    assert.equal(0, (im2rec("--pass-through '" .. tmp .. "/raw' '" .. tmp .. "/imgs'")))
    local rio = mx.recordio
    local r = rio.MXIndexedRecordIO(tmp .. "/raw.idx", tmp .. "/raw.rec", "r")
    assert.same({ 0, 1, 2, 3 }, r.keys)
    for k, rel in ipairs(order) do
      local h, payload = rio.unpack(r:read_idx(k - 1))
      assert.equal(labels[k], h.label)
      assert.equal(k - 1, h.id)
      assert.equal(read(tmp .. "/imgs/" .. rel), payload)
    end
    r:close()
  end)
end)

describe("im2rec on real photos (spec/fixtures/images)", function()
  it("--resize 64 of a JPEG photo and an RGBA PNG, read back through ImageRecordDataset", function()
    assert(os.execute("mkdir -p '" .. tmp .. "/real/people' '" .. tmp .. "/real/things' && "
      .. "cp spec/fixtures/images/grace_hopper.jpg '" .. tmp .. "/real/people/' && "
      .. "cp spec/fixtures/images/minduka_rgba.png '" .. tmp .. "/real/things/'"))
    assert.equal(0, (im2rec("--list --recursive --no-shuffle '" .. tmp .. "/real' '" .. tmp .. "/real'")))
    local rc, out = im2rec("--resize 64 '" .. tmp .. "/real' '" .. tmp .. "/real'")
    assert.equal(0, rc, out)
    local ds = vision.ImageRecordDataset(tmp .. "/real.rec")
    assert.equal(2, ds:len())
    local hopper, l1 = ds:get(1)
    assert.equal(0, l1)
    assert.same({ 75, 64, 3 }, hopper:shape()) -- 600x512: 600 * 64 // 512 = 75
    local png, l2 = ds:get(2)
    assert.equal(1, l2)
    local src = mx.image.imread(tmp .. "/real/things/minduka_rgba.png")
    local s = src:shape()
    local want = s[1] > s[2] and { math.floor(s[1] * 64 / s[2]), 64, 3 }
      or { 64, math.floor(s[2] * 64 / s[1]), 3 }
    assert.same(want, png:shape())
  end)
end)

describe("#slow #mxnet im2rec interop", function()
  local PY = "/opt/mxvenv/bin/python"
  it("MXNet 1.9.1 reads the .rec im2rec.lua wrote", function()
    if not read(PY) then pending("no MXNet venv at " .. PY) return end
    assert.equal(0, (im2rec("--list --recursive '" .. tmp .. "/mx' '" .. tmp .. "/imgs'")))
    assert.equal(0, (im2rec("'" .. tmp .. "/mx' '" .. tmp .. "/imgs'")))
    write(tmp .. "/check.py", [[
import sys, mxnet as mx
r = mx.recordio.MXIndexedRecordIO(sys.argv[1] + '.idx', sys.argv[1] + '.rec', 'r')
for k in r.keys:
    h, s = mx.recordio.unpack(r.read_idx(k))
    img = mx.image.imdecode(s)
    print(k, h.label, h.id, 'x'.join(str(d) for d in img.shape))
]])
    local p = io.popen(PY .. " '" .. tmp .. "/check.py' '" .. tmp .. "/mx' 2>&1")
    local out = p:read("*a")
    p:close()
    local ds = vision.ImageRecordDataset(tmp .. "/mx.rec")
    for k = 1, 4 do
      local img, label = ds:get(k)
      local s = img:shape()
      local key = ds._keys[k] -- shuffled list: the record's key is its .lst index
      assert.matches(string.format("%d %.1f %d %dx%dx%d", key, label, key, s[1], s[2], s[3]),
        out, 1, true)
    end
  end)
end)
