-- spec/helpers/photos.lua — the real photos the pretrained-network specs classify and detect:
-- darknet's (Debian package darknet, /usr/share/darknet/data), scikit-image's chelsea, coffee
-- and astronaut (the PyPI wheel's skimage/data, unpacked by tools/setup.sh --weights into the
-- PyPI cache: spec/helpers/pypi.lua) and matplotlib's grace_hopper (committed under
-- spec/fixtures/images).
local pypi = require("helpers.pypi")

local M = {}

local DARKNET = "/usr/share/darknet/data/"
M.DARKNET = { "dog", "eagle", "giraffe", "horses", "kite", "person" }
M.SKIMAGE_DIR = "scikit_image-0.25.2/skimage/data/"
-- the classification photos of scikit-image (astronaut is MTCNN's: M.skimage("astronaut"))
M.SKIMAGE = { "chelsea", "coffee" }

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- skimage(name): the path of scikit-image's <name>.png, or nil and why (for pending())
function M.skimage(name)
  return pypi(M.SKIMAGE_DIR .. name .. ".png")
end

-- list(): { {name=, path=}, ... } of the classification photos present; missing: the names
-- of those absent, each with where it comes from
function M.list()
  local out, missing = {}, {}
  for _, n in ipairs(M.DARKNET) do
    local path = DARKNET .. n .. ".jpg"
    if exists(path) then
      out[#out + 1] = { name = n, path = path }
    else
      missing[#missing + 1] = n .. " (apt install darknet)"
    end
  end
  for _, n in ipairs(M.SKIMAGE) do
    local path = M.skimage(n)
    if path then
      out[#out + 1] = { name = n, path = path }
    else
      missing[#missing + 1] = n .. " (tools/setup.sh --weights: scikit-image's wheel)"
    end
  end
  out[#out + 1] = { name = "grace_hopper", path = "spec/fixtures/images/grace_hopper.jpg" }
  return out, missing
end

return M
