-- mx.gluoncv.data.PasteDetection: Fashion-MNIST items pasted on photo crops (Debian's
-- dataset-fashion-mnist, darknet and opencv-doc); skips when they are not installed.
local nd = require("mx.nd")
local gcv = require("mx.gluoncv")
local bbox = gcv.data.transforms.bbox

local function have(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end
local READY = have("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
  and have("/usr/share/darknet/data/dog.jpg")

describe("gluoncv.data.PasteDetection", function()
  if not READY then
    pending("needs Debian's dataset-fashion-mnist and darknet (tools/setup.sh)")
    return
  end

  it("is deterministic given the seed, with boxes inside, apart and of known classes", function()
    local a = gcv.data.PasteDetection { n = 12, size = 96, seed = 3 }
    local b = gcv.data.PasteDetection { n = 12, size = 96, seed = 3, cache = false }
    local c = gcv.data.PasteDetection { n = 12, size = 96, seed = 4 }
    assert.are.same({ "trouser", "sneaker", "bag" }, a.classes)
    assert.are.equal(12, a:len())
    local differ, counts = 0, { 0, 0, 0 }
    for i = 1, 12 do
      local img, label = a:get(i)
      local img2, label2 = b:get(i)
      assert.are.same({ 96, 96, 3 }, img:shape())
      assert.are.equal("uint8", img:dtype())
      assert.are.same(img:tolist(), img2:tolist())
      assert.are.same(label:tolist(), label2:tolist())
      local rows = label:totable()
      assert.is_true(#rows >= 1 and #rows <= 3)
      counts[#rows] = counts[#rows] + 1
      for j, r in ipairs(rows) do
        assert.is_true(r[1] >= 0 and r[2] >= 0 and r[3] <= 96 and r[4] <= 96)
        assert.is_true(r[3] - r[1] >= 2 and r[4] - r[2] >= 2)
        assert.is_true(r[5] == 0 or r[5] == 1 or r[5] == 2)
        for jj = j + 1, #rows do
          assert.is_true(bbox.bbox_iou({ r }, { rows[jj] })[1][1] <= 0.3 + 1e-9)
        end
      end
      local img3 = c:get(i)
      if nd.sum(nd.abs(nd.cast(img, { dtype = "float32" }) - nd.cast(img3, { dtype = "float32" })))
          :item() > 0 then
        differ = differ + 1
      end
    end
    assert.are.equal(12, differ)
    assert.are.equal(12, counts[1] + counts[2] + counts[3])
    assert.is_true(counts[2] + counts[3] > 0, "some pictures hold several items")
  end)

  it("pastes the items' pixels inside their boxes: the picture changes there only", function()
    -- each sample against its photo crop without the items: they differ inside the boxes
    local ds = gcv.data.PasteDetection { n = 6, size = 64, seed = 1, max_objects = 1 }
    for i = 1, 6 do
      local img, label = ds:get(i)
      local ref = ds:background(i)
      local r = label:totable()[1]
      local d = nd.abs(nd.cast(img, { dtype = "float32" }) - nd.cast(ref, { dtype = "float32" }))
      local t = nd.sum(d, { axis = 3 }):totable()
      local inside, outside = 0, 0
      for y = 1, 64 do
        for x = 1, 64 do
          local v = t[y][x]
          if x - 0.5 >= r[1] and x - 0.5 <= r[3] and y - 0.5 >= r[2] and y - 0.5 <= r[4] then
            inside = inside + v
          else
            outside = outside + v
          end
        end
      end
      assert.is_true(inside > 0, "sample " .. i .. ": nothing pasted")
      -- outside: only the faint rim below the visibility threshold
      assert.is_true(outside < 0.05 * inside, string.format("sample %d: %g outside, %g inside",
        i, outside, inside))
    end
  end)

  it("keeps the splits apart and says what is wrong", function()
    local train = gcv.data.PasteDetection { n = 2, size = 64 }
    local test = gcv.data.PasteDetection { train = false, n = 2, size = 64 }
    for _, p in ipairs(test._photos) do
      for _, q in ipairs(train._photos) do assert.are_not.equal(p, q) end
    end
    assert.has_error(function() gcv.data.PasteDetection { classes = { 12 } } end,
      "PasteDetection: classes[1] is not a label id 0..9")
    assert.has_error(function() gcv.data.PasteDetection { size = 8 } end,
      "PasteDetection: size must be an integer >= 16, got 8")
    assert.has_error(function() train:get(3) end,
      "PasteDetection:get: index 3 out of range for a dataset of 2 samples")
  end)
end)
