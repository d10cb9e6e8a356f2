-- mx.gluoncv.data.MixupDetection — GluonCV's mixup of two detection samples
-- (gluoncv.data.mixup.detection.MixupDetection): with a ratio l drawn from `mixup`, sample
-- i's image is blended with another sample's (l and 1 - l, on a canvas of the larger height
-- and width, back to uint8 by truncation as MXNet's astype) and the two labels are stacked,
-- each row with its image's ratio as a last column. Without a mixup sampler (or a ratio of
-- 1 or more) a sample is its dataset's, with a column of ones.
--
--   local R = gcv.data.transforms.rng
--   local rng = R.new(1)
--   local mixed = gcv.data.MixupDetection(ds, function() return rng:beta(1.5, 1.5) end)
--   local img, label = mixed:get(1)   -- label (M1 + M2, K + 1) float32
--   mixed:set_mixup(nil)              -- the last epochs without mixup, as GluonCV's recipe
--
-- The partner is drawn uniformly from the other samples with the dataset's rng
-- (`set_rng(rng)`, the transforms' default rng otherwise); `rows(i)` returns the label as a
-- Lua list of rows (what the training presets take).
local nd = require("mx.nd")
local dataset = require("mx.gluon.data.dataset")
local R = require("mx.gluoncv.data.transforms.rng")

local MixupDetection = dataset.Dataset:extend("MixupDetection")

local function check_sampler(who, mixup, level)
  if mixup ~= nil and type(mixup) ~= "function"
      and not (type(getmetatable(mixup)) == "table" and getmetatable(mixup).__call) then
    error(who .. ": mixup must be a function returning a ratio (or nil), got " .. type(mixup),
      level + 1)
  end
end

-- MixupDetection(dataset, mixup=nil, ...): mixup(...) draws the ratio
function MixupDetection:__init(ds, mixup, ...)
  if type(ds) ~= "table" or type(ds.len) ~= "function" or type(ds.get) ~= "function" then
    error("MixupDetection: dataset must be a dataset (with len and get), got " .. type(ds), 3)
  end
  check_sampler("MixupDetection", mixup, 3)
  self._dataset, self._mixup, self._args = ds, mixup, { n = select("#", ...), ... }
end

-- set_mixup(mixup=nil, ...): another sampler, nil to turn mixup off
function MixupDetection:set_mixup(mixup, ...)
  check_sampler("MixupDetection:set_mixup", mixup, 2)
  self._mixup, self._args = mixup, { n = select("#", ...), ... }
end

-- set_rng(rng): the generator the partners are drawn from
function MixupDetection:set_rng(rng)
  if type(rng) ~= "table" or type(rng.randint) ~= "function" then
    error("MixupDetection:set_rng: rng must be an rng (mx.gluoncv.data.transforms.rng)", 2)
  end
  self._rng = rng
end

function MixupDetection:len() return self._dataset:len() end

local function with_ratio(label, l)
  local n = label:shape()[1]
  return nd.concat({ nd.cast(label, { dtype = "float32" }),
    nd.full({ n, 1 }, l, { dtype = "float32" }) }, { dim = 2 })
end

-- sample i as (image uint8 (H, W, 3), label tensor (M, K + 1))
local function mixed(self, i)
  local who = "MixupDetection:get"
  i = dataset._norm_index(i, self:len(), who, 3)
  local img1, label1 = self._dataset:get(i)
  local l = 1
  if self._mixup then
    local v = self._mixup(unpack(self._args, 1, self._args.n))
    if type(v) ~= "number" then
      error(who .. ": the mixup sampler returned " .. type(v) .. ", not a number", 3)
    end
    l = math.max(0, math.min(1, v))
  end
  if l >= 1 then return img1, with_ratio(label1, 1) end
  local n = self:len()
  if n < 2 then error(who .. ": mixup needs a dataset of at least 2 samples", 3) end
  local j = (self._rng or R.default()):randint(1, n - 1)
  if j >= i then j = j + 1 end
  local img2, label2 = self._dataset:get(j)
  local s1, s2 = img1:shape(), img2:shape()
  local h, w = math.max(s1[1], s2[1]), math.max(s1[2], s2[2])
  local function placed(img, s, r)
    local x = nd.mul_scalar(nd.cast(img, { dtype = "float32" }), { scalar = r })
    if s[1] == h and s[2] == w then return x end
    return nd.slice_assign(nd.zeros({ h, w, 3 }), x, { begin = { 1, 1, 1 },
      ["end"] = { s[1], s[2], 3 } })
  end
  local mix = nd.add(placed(img1, s1, l), placed(img2, s2, 1 - l))
  return nd.cast(mix, { dtype = "uint8" }),
    nd.concat({ with_ratio(label1, l), with_ratio(label2, 1 - l) }, { dim = 1 })
end

function MixupDetection:get(i)
  local img, label = mixed(self, i) -- not a tail call: errors blame get's caller
  return img, label
end

-- rows(i) -> the image and its label as a Lua list of rows
function MixupDetection:rows(i)
  local img, label = mixed(self, i)
  return img, label:totable()
end

return MixupDetection
