-- examples/mtcnn_faces.lua — face detection with MTCNN's real weights (facenet-pytorch's
-- pnet/rnet/onet from the PyPI cache, tools/setup.sh --weights): prints each face's box,
-- probability and five landmarks, and draws them on the photo (PNG or SVG).
--
--   bin/mx examples/mtcnn_faces.lua                             # matplotlib's grace_hopper
--   bin/mx examples/mtcnn_faces.lua --image a.jpg --plot a.png
--
-- Options: --image PATH  --plot PATH (mtcnn_faces.png)  --min-face N (20)  --crop X0,Y0,X1,Y1
-- (draw only that region, pixels)
local mx = require("mx")
local nd = mx.nd
local mtcnn = require("mx.gluoncv.model_zoo.mtcnn")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: mtcnn_faces.lua [--image PATH] [--plot PATH] [--min-face N] [--crop X0,Y0,X1,Y1]]==]
local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { image = dir .. "../spec/fixtures/images/grace_hopper.jpg", plot = "mtcnn_faces.png",
    min_face = 20 },
  numeric = { min_face = true }, string = { image = true, plot = true, crop = true } })

local okn, nets = pcall(mtcnn.pretrained)
if not okn then
  io.stderr:write(tostring(nets), "\n")
  os.exit(2)
end
local img = mx.image.imread(opts.image)
local boxes, points = mtcnn.detect(nets, img, { min_face_size = opts.min_face })
print(string.format("%d face(s) in %s", #boxes, opts.image))

-- the boxes, and a small square on each landmark (eyes, nose, mouth corners)
local rects, labels, scores = {}, {}, {}
for i, b in ipairs(boxes) do
  print(string.format("face %d: box (%.1f, %.1f, %.1f, %.1f) probability %.4f", i, b[1], b[2],
    b[3], b[4], b[5]))
  rects[#rects + 1], labels[#labels + 1], scores[#scores + 1] = { b[1], b[2], b[3], b[4] }, 0, b[5]
  for q, pt in ipairs(points[i]) do
    print(string.format("  landmark %d: (%.1f, %.1f)", q, pt[1], pt[2]))
    rects[#rects + 1] = { pt[1] - 3, pt[2] - 3, pt[1] + 3, pt[2] + 3 }
    labels[#labels + 1], scores[#scores + 1] = 1, 1
  end
end
if opts.crop then
  local c = {}
  for v in opts.crop:gmatch("[^,]+") do c[#c + 1] = tonumber(v) end
  if #c ~= 4 then
    io.stderr:write("--crop takes X0,Y0,X1,Y1\n", USAGE, "\n")
    os.exit(2)
  end
  local x0, y0 = c[1], c[2]
  img = mx.image.fixed_crop(img, c[1], c[2], c[3] - c[1], c[4] - c[2])
  for _, r in ipairs(rects) do r[1], r[2], r[3], r[4] = r[1] - x0, r[2] - y0, r[3] - x0, r[4] - y0 end
end
mx.viz.plot_bbox(opts.plot, img, nd.array(#rects > 0 and rects or { { 0, 0, 0, 0 } }),
  { labels = #rects > 0 and labels or { -1 }, scores = #rects > 0 and scores or { 0 },
    class_names = { "face", "" }, thresh = 0, linewidth = 2,
    colors = { [0] = { 255, 60, 60 }, [1] = { 60, 220, 60 } } })
print("wrote " .. opts.plot)
