-- mx.gluoncv.data.PasteDetection — a detection dataset of real pixels with known boxes:
-- Fashion-MNIST items (Debian's dataset-fashion-mnist) pasted, tinted and scaled, on random
-- square crops of real photos (darknet's and opencv-doc's pictures, different photos and
-- different Fashion-MNIST items for the train and test splits). Each item's box is the
-- extent of its visible pixels (intensity > 25 of 255 after scaling), so the boxes are
-- exact. Sample i is made from its own seeded rng: the same options give the same images.
--
--   local ds = require("mx.gluoncv").data.PasteDetection{ train = true, n = 2000, size = 128 }
--   local img, label = ds:get(1)  -- img (128, 128, 3) uint8; label (M, 5) float32 rows
--                                 -- [x1, y1, x2, y2, class id (0-based)]
--   ds.classes                    -- { "trouser", "sneaker", "bag" }
local nd = require("mx.nd")
local dataset = require("mx.gluon.data.dataset")
local check_opts = require("mx.core.class").check_opts
local Rng = require("mx.gluoncv.data.transforms.rng")
local B = require("mx.gluoncv.data.transforms.bbox")

local floor, min, max = math.floor, math.min, math.max

local FASHION = { "t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt",
  "sneaker", "bag", "ankle boot" }
local DARKNET = "/usr/share/darknet/data/"
local OPENCV = "/usr/share/doc/opencv-doc/examples/data/"
local PHOTOS = {
  train = { DARKNET .. "dog.jpg", DARKNET .. "eagle.jpg", DARKNET .. "giraffe.jpg",
    DARKNET .. "horses.jpg", DARKNET .. "kite.jpg", OPENCV .. "building.jpg",
    OPENCV .. "baboon.jpg", OPENCV .. "board.jpg", OPENCV .. "aero1.jpg", OPENCV .. "home.jpg",
    OPENCV .. "stuff.jpg", OPENCV .. "messi5.jpg", OPENCV .. "leuvenA.jpg" },
  test = { DARKNET .. "person.jpg", DARKNET .. "scream.jpg", OPENCV .. "fruits.jpg",
    OPENCV .. "left01.jpg", OPENCV .. "right01.jpg" },
}

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local PasteDetection = dataset.Dataset:extend("PasteDetection")

local OPTS = { train = true, n = true, size = true, classes = true, max_objects = true,
  min_side = true, max_side = true, seed = true, backgrounds = true, root = true, cache = true }

-- PasteDetection{train=true, n=1000, size=128, classes={1, 7, 8} (Fashion-MNIST label ids:
-- trouser, sneaker, bag), max_objects=3, min_side=0.2, max_side=0.5 (an item's side as a
-- fraction of size), seed=0, backgrounds= (photo paths; by default the split's darknet /
-- opencv-doc photos that are installed), root= (Fashion-MNIST's folder), cache=true (keep
-- each sample once made: size^2 * 3 bytes each)}
function PasteDetection:__init(opts)
  local who = "PasteDetection"
  local o = check_opts(who, opts, OPTS, 4)
  self._train = o.train ~= false
  self._n = o.n or 1000
  self._size = o.size or 128
  self._max_objects = o.max_objects or 3
  self._min_side, self._max_side = o.min_side or 0.2, o.max_side or 0.5
  self._seed = o.seed or 0
  local ids = o.classes or { 1, 7, 8 }
  if type(ids) ~= "table" or #ids == 0 then
    error(who .. ": classes must be a list of Fashion-MNIST label ids (0..9)", 4)
  end
  if self._size < 16 or self._size % 1 ~= 0 then
    error(who .. ": size must be an integer >= 16, got " .. tostring(self._size), 4)
  end
  if not (self._min_side > 0 and self._min_side <= self._max_side and self._max_side <= 1) then
    error(who .. ": need 0 < min_side <= max_side <= 1", 4)
  end
  self.classes = {}
  local slot = {}
  for i, c in ipairs(ids) do
    if not FASHION[c + 1] then error(who .. ": classes[" .. i .. "] is not a label id 0..9", 4) end
    self.classes[i] = FASHION[c + 1]
    slot[c] = i
  end
  local photos = {}
  for _, p in ipairs(o.backgrounds or PHOTOS[self._train and "train" or "test"]) do
    if exists(p) then photos[#photos + 1] = p end
  end
  if #photos == 0 then
    error(who .. ": no background photo is installed (apt-get install darknet opencv-doc)", 4)
  end
  self._photos = photos
  local vision = require("mx.gluon.data.vision")
  local fm = vision.FashionMNIST({ train = self._train, root = o.root })
  local images, labels = fm:arrays()
  self._items = images
  local by_class = {}
  for i = 1, #ids do by_class[i] = {} end
  for i, l in ipairs(labels:tolist()) do
    local s = slot[l]
    if s then by_class[s][#by_class[s] + 1] = i end
  end
  self._by_class = by_class
  self._bg = {}
  self._cache = o.cache ~= false and {} or nil
end

function PasteDetection:len() return self._n end

local function background(self, rng)
  local image = require("mx.image")
  local path = self._photos[rng:randint(1, #self._photos)]
  if not self._bg[path] then self._bg[path] = image.imread(path) end
  local img = self._bg[path]
  local h, w = img:shape()[1], img:shape()[2]
  local c = min(h, w)
  local s = rng:randint(floor(c / 3), c)
  local x0, y0 = rng:randint(0, w - s), rng:randint(0, h - s)
  return nd.cast(image.fixed_crop(img, x0, y0, s, s, { self._size, self._size }, 1),
    { dtype = "float32" })
end

-- the box of an item's visible pixels (intensity > 25) in its d x d square
local function extent(v, d)
  local x1, y1, x2, y2 = math.huge, math.huge, -1, -1
  for y = 1, d do
    local row = v[y]
    for x = 1, d do
      if row[x] > 25 then
        x1, x2, y1, y2 = min(x1, x - 1), max(x2, x), min(y1, y - 1), max(y2, y)
      end
    end
  end
  if x2 < 0 then return nil end
  return x1, y1, x2, y2
end

local function sample_rng(self, i)
  return Rng.new(self._seed * 1000003 + i + (self._train and 0 or 500009))
end

local function make(self, i)
  local hit = self._cache and self._cache[i]
  if hit then return hit[1], hit[2] end
  local image = require("mx.image")
  local rng = sample_rng(self, i)
  local S = self._size
  local canvas = background(self, rng)
  local rows = {}
  local k = rng:randint(1, self._max_objects)
  for _ = 1, k do
    local cls = rng:randint(1, #self._by_class)
    local pool = self._by_class[cls]
    local item = self._items[pool[rng:randint(1, #pool)]]
    local d = rng:randint(max(8, floor(self._min_side * S)), floor(self._max_side * S))
    local v = image.imresize(nd.cast(item, { dtype = "float32" }), d, d, 1)
    local vt = nd.reshape(v, { d, d }):totable()
    local ex1, ey1, ex2, ey2 = extent(vt, d)
    -- a free place: at most 0.3 IoU with the boxes already pasted (ten tries)
    local placed
    for _ = 1, 10 do
      local ox, oy = rng:randint(0, S - d), rng:randint(0, S - d)
      if ex1 then
        local box = { ox + ex1, oy + ey1, ox + ex2, oy + ey2 }
        local ok = true
        for _, r in ipairs(B.bbox_iou({ box }, rows)[1] or {}) do ok = ok and r <= 0.3 end
        if ok then placed = { ox, oy, box } break end
      end
    end
    if placed then
      local ox, oy, box = placed[1], placed[2], placed[3]
      local tint = nd.reshape(nd.array({ rng:uniform(0.35, 1), rng:uniform(0.35, 1),
        rng:uniform(0.35, 1) }), { 1, 1, 3 })
      -- alpha rises to 1 by a third of full intensity: the item's body is opaque
      local a = nd.clip(nd.mul_scalar(nd.reshape(v, { d, d, 1 }), { scalar = 3 / 255 }),
        { a_min = 0, a_max = 1 })
      local cut = { begin = { oy + 1, ox + 1, 1 }, ["end"] = { oy + d, ox + d, 3 } }
      local region = nd.slice(canvas, cut)
      local obj = nd.broadcast_mul(nd.reshape(v, { d, d, 1 }), tint)
      local mixed = nd.add(nd.broadcast_mul(region, nd.rsub_scalar(a, { scalar = 1 })),
        nd.broadcast_mul(obj, a))
      canvas = nd.slice_assign(canvas, mixed, cut)
      rows[#rows + 1] = { box[1], box[2], box[3], box[4], cls - 1 }
    end
  end
  -- a later item may cover an earlier one's pixels; its box stays (at most 0.3 IoU)
  local img = nd.cast(nd.clip(nd.round(canvas), { a_min = 0, a_max = 255 }), { dtype = "uint8" })
  if self._cache then self._cache[i] = { img, rows } end
  return img, rows
end

-- get(i) -> image (size, size, 3) uint8, label (M, 5) float32 [x1, y1, x2, y2, class id]
function PasteDetection:get(i)
  i = dataset._norm_index(i, self._n, "PasteDetection:get", 2)
  local img, rows = make(self, i)
  return img, nd.array(rows, { dtype = "float32" })
end

-- background(i) -> sample i's photo crop (size, size, 3) uint8 without the items
function PasteDetection:background(i)
  i = dataset._norm_index(i, self._n, "PasteDetection:background", 2)
  local bg = background(self, sample_rng(self, i))
  return nd.cast(nd.clip(nd.round(bg), { a_min = 0, a_max = 255 }), { dtype = "uint8" })
end

-- rows(i) -> the image and its label as a Lua list of rows (what the transforms take)
function PasteDetection:rows(i)
  i = dataset._norm_index(i, self._n, "PasteDetection:rows", 2)
  return make(self, i)
end

return PasteDetection
