-- spec/helpers/photos.lua — the real photos the pretrained-network specs classify and detect:
-- darknet's (Debian package darknet, /usr/share/darknet/data) and matplotlib's grace_hopper
-- (committed under spec/fixtures/images).
local M = {}

local DARKNET = "/usr/share/darknet/data/"
M.DARKNET = { "dog", "eagle", "giraffe", "horses", "kite", "person" }

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- list(): { {name=, path=}, ... } of the photos present; missing: the names of those absent
function M.list()
  local out, missing = {}, {}
  for _, n in ipairs(M.DARKNET) do
    local path = DARKNET .. n .. ".jpg"
    if exists(path) then out[#out + 1] = { name = n, path = path } else missing[#missing + 1] = n end
  end
  out[#out + 1] = { name = "grace_hopper", path = "spec/fixtures/images/grace_hopper.jpg" }
  return out, missing
end

return M
