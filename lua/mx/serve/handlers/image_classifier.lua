-- The image_classifier handler: JPEG or PNG bodies (raw, or a multipart part) to top-k
-- {label: probability} maps, most probable first (TorchServe's image_classifier answer). Per image: header
-- checked (not an image: 400; more pixels than the server's --max-image-pixels: 413,
-- before anything is decoded), decoded to RGB, the shorter side resized to `resize`
-- (bilinear), the centre `crop` x `crop` cut, scaled to [0, 1] and normalised with
-- `mean` / `std` per channel (ImageNet's by default), NCHW float32. KServe v2 requests
-- carry tensors and go through the base handler's tensor path.
--
-- The archive's "config" sets: resize (256), crop (224), mean, std, topk (5), softmax
-- (true: the model gives logits), labels (a file of the archive: index_to_name.json as
-- TorchServe's, {"0": "tench"} or {"0": ["n01440764", "tench"]}, or one label per line;
-- by default index_to_name.json, labels.txt or synset.txt if present).
local serve = require("mx.serve")
local json = require("mx.serve.json")
local mx = require("mx")

local H = serve.Handler:extend("ImageClassifier")

local function read_labels(dir, name)
  local f = io.open(dir .. "/" .. name, "rb")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  if name:match("%.json$") then
    local t, err = json.decode(text)
    if not t then error("labels " .. name .. ": " .. tostring(err), 0) end
    local labels = {}
    for k, v in pairs(t) do
      local i = tonumber(k)
      if i then labels[i] = type(v) == "table" and v[#v] or tostring(v) end
    end
    return labels
  end
  local labels, i = {}, 0
  for line in text:gmatch("[^\r\n]+") do
    labels[i] = line
    i = i + 1
  end
  return labels
end

function H:initialize(ctx)
  serve.Handler.initialize(self, ctx)
  local c = ctx.config
  self.resize = c.resize or 256
  self.crop = c.crop or 224
  self.topk = c.topk or 5
  self.softmax = c.softmax ~= false
  local mean, std = c.mean or { 0.485, 0.456, 0.406 }, c.std or { 0.229, 0.224, 0.225 }
  self.mean = mx.nd.array({ { { mean[1] } }, { { mean[2] } }, { { mean[3] } } })
  self.std = mx.nd.array({ { { std[1] } }, { { std[2] } }, { { std[3] } } })
  self.max_pixels = ctx.limits.max_image_pixels or (4096 * 4096)
  if c.labels then
    self.labels = read_labels(ctx.model_dir, c.labels)
    if not self.labels then error("labels file " .. c.labels .. " is not in the archive", 0) end
  else
    for _, n in ipairs { "index_to_name.json", "labels.txt", "synset.txt" } do
      self.labels = self.labels or read_labels(ctx.model_dir, n)
    end
  end
  self.input = ctx.signature.inputs[1].name
end

function H:tensors_of(req)
  if req.kind == "v2" then return serve.Handler.tensors_of(self, req) end
  local body = req.body
  if not body or #body == 0 then serve.error(400, "empty body: send a JPEG or PNG image") end
  local ok, h, w = pcall(mx.image.imsize, body)
  if not ok then serve.error(400, (tostring(h):gsub("^[^:]*:%d+: ", ""))) end
  if h * w > self.max_pixels then
    serve.error(413, string.format("the image is %dx%d pixels, more than the limit of %d pixels",
      w, h, self.max_pixels))
  end
  local img
  ok, img = pcall(mx.image.imdecode, body)
  if not ok then serve.error(400, (tostring(img):gsub("^[^:]*:%d+: ", ""))) end
  img = mx.image.center_crop(mx.image.resize_short(img, self.resize, 1), { self.crop, self.crop }, 1)
  local x = (mx.nd.to_tensor(img) - self.mean) / self.std
  return { [self.input] = x:reshape { 1, 3, self.crop, self.crop } }
end

function H:answer_of(req, outs)
  if req.kind == "v2" then return serve.Handler.answer_of(self, req, outs) end
  local y = outs[1]
  if self.softmax then y = mx.nd.softmax(y) end
  local p = y:tolist()
  local order = {}
  for i = 1, #p do order[i] = i end
  table.sort(order, function(a, b) return p[a] > p[b] end)
  local res = {}
  for k = 1, math.min(self.topk, #p) do
    local i = order[k] - 1
    res[k] = { self.labels and self.labels[i] or tostring(i), p[order[k]] }
  end
  return json.ordered(res)
end

return H
