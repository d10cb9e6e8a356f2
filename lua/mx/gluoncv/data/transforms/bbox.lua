-- mx.gluoncv.data.transforms.bbox — GluonCV 0.11's box transforms
-- (gluoncv.data.transforms.bbox): crop, flip, resize, translate. Boxes are rows
-- {x1, y1, x2, y2, ...} in pixels (class id and any further columns ride along), given as
-- a Lua list of rows or an (N, K) NDArray; the result is a new list (an NDArray of the
-- input's dtype for an NDArray). Nothing is changed in place.
--
--   local bbox = require("mx.gluoncv").data.transforms.bbox
--   local b = bbox.flip({ { 10, 20, 50, 60, 3 } }, { 100, 80 }, true)  -- {{50, 20, 90, 60, 3}}
local nd = require("mx.nd")

local M = {}

local function rows_of(who, bbox, level)
  if nd.is_tensor(bbox) then
    if bbox:ndim() ~= 2 or bbox:shape()[2] < 4 then
      error(who .. ": bbox must be (N, K >= 4), got shape (" .. table.concat(bbox:shape(), ", ")
        .. ")", level + 1)
    end
    return bbox:totable(), bbox
  end
  if type(bbox) ~= "table" then
    error(who .. ": bbox must be a list of rows {x1, y1, x2, y2, ...} or an NDArray, got "
      .. type(bbox), level + 1)
  end
  for i, r in ipairs(bbox) do
    if type(r) ~= "table" or #r < 4 then
      error(string.format("%s: bbox[%d] must be a row {x1, y1, x2, y2, ...}", who, i), level + 1)
    end
  end
  return bbox
end
M._rows_of = rows_of

local function result(rows, like)
  if not like then return rows end
  if #rows == 0 then return nd.zeros({ 0, like:shape()[2] }, { dtype = like:dtype() }) end
  return nd.array(rows, { dtype = like:dtype() })
end

local function copy_rows(rows)
  local out = {}
  for i, r in ipairs(rows) do
    local c = {}
    for j, v in ipairs(r) do c[j] = v end
    out[i] = c
  end
  return out
end

local function pair(who, what, t, level)
  if type(t) ~= "table" or type(t[1]) ~= "number" or type(t[2]) ~= "number" then
    error(who .. ": " .. what .. " must be {width, height}", level + 1)
  end
  return t[1], t[2]
end

-- crop(bbox, crop_box={x, y, w, h}, allow_outside_center=true): boxes clipped to the crop
-- and moved to its origin; boxes left empty go, and with allow_outside_center=false so do
-- those whose centre is outside. A crop_box entry false (Python's None) means 0 for x / y
-- and no limit for w / h; crop_box nil returns the boxes unchanged.
function M.crop(bbox, crop_box, allow_outside_center)
  local rows, like = rows_of("bbox.crop", bbox, 2)
  rows = copy_rows(rows)
  if crop_box == nil then return result(rows, like) end
  if type(crop_box) ~= "table" then error("bbox.crop: crop_box must be {x, y, w, h}", 2) end
  local l, t, w, h = crop_box[1], crop_box[2], crop_box[3], crop_box[4]
  if not (l or t or w or h) then return result(rows, like) end
  -- as GluonCV's `w if w else inf`: a 0 width or height is no limit either
  local left, top = l or 0, t or 0
  local right = left + ((w and w ~= 0) and w or math.huge)
  local bottom = top + ((h and h ~= 0) and h or math.huge)
  local out = {}
  for _, r in ipairs(rows) do
    local keep = true
    if allow_outside_center == false then
      local cx, cy = (r[1] + r[3]) / 2, (r[2] + r[4]) / 2
      keep = left <= cx and cx < right and top <= cy and cy < bottom
    end
    r[1], r[2] = math.max(r[1], left) - left, math.max(r[2], top) - top
    r[3], r[4] = math.min(r[3], right) - left, math.min(r[4], bottom) - top
    if keep and r[1] < r[3] and r[2] < r[4] then out[#out + 1] = r end
  end
  return result(out, like)
end

-- flip(bbox, size={width, height}, flip_x=false, flip_y=false)
function M.flip(bbox, size, flip_x, flip_y)
  local rows, like = rows_of("bbox.flip", bbox, 2)
  local width, height = pair("bbox.flip", "size", size, 2)
  rows = copy_rows(rows)
  for _, r in ipairs(rows) do
    if flip_y then r[2], r[4] = height - r[4], height - r[2] end
    if flip_x then r[1], r[3] = width - r[3], width - r[1] end
  end
  return result(rows, like)
end

-- resize(bbox, in_size={w, h}, out_size={w, h}): coordinates scaled by out / in
function M.resize(bbox, in_size, out_size)
  local rows, like = rows_of("bbox.resize", bbox, 2)
  local iw, ih = pair("bbox.resize", "in_size", in_size, 2)
  local ow, oh = pair("bbox.resize", "out_size", out_size, 2)
  rows = copy_rows(rows)
  local xs, ys = ow / iw, oh / ih
  for _, r in ipairs(rows) do
    r[1], r[2], r[3], r[4] = xs * r[1], ys * r[2], xs * r[3], ys * r[4]
  end
  return result(rows, like)
end

-- translate(bbox, x_offset=0, y_offset=0)
function M.translate(bbox, x_offset, y_offset)
  local rows, like = rows_of("bbox.translate", bbox, 2)
  local dx, dy = x_offset or 0, y_offset or 0
  rows = copy_rows(rows)
  for _, r in ipairs(rows) do
    r[1], r[2], r[3], r[4] = r[1] + dx, r[2] + dy, r[3] + dx, r[4] + dy
  end
  return result(rows, like)
end

-- bbox_iou(a, b, offset=0) (gluoncv.utils.bbox): the (#a, #b) IoU table of two row lists
function M.bbox_iou(a, b, offset)
  offset = offset or 0
  local out = {}
  for i, p in ipairs(a) do
    local row = {}
    local ap = (p[3] - p[1] + offset) * (p[4] - p[2] + offset)
    for j, q in ipairs(b) do
      local l, t = math.max(p[1], q[1]), math.max(p[2], q[2])
      local r, btm = math.min(p[3], q[3]), math.min(p[4], q[4])
      -- GluonCV: prod(br - tl + offset) where tl < br on both axes, else 0
      local inter = (l < r and t < btm) and (r - l + offset) * (btm - t + offset) or 0
      local bq = (q[3] - q[1] + offset) * (q[4] - q[2] + offset)
      row[j] = inter / (ap + bq - inter)
    end
    out[i] = row
  end
  return out
end

return M
