-- mx.gluonnlp._json — JSON through Debian's lua-cjson (config.json, vocab.json,
-- Vocab serialisation), with errors that name the file.
local ok, cjson = pcall(require, "cjson.safe")
local M = {}

local function need(level)
  if not ok then
    error("mx.gluonnlp: JSON needs lua-cjson (Debian package lua-cjson, tools/setup.sh)",
      level + 1)
  end
end

function M.decode(s, what, level)
  level = level or 1
  need(level + 1)
  local v, err = cjson.decode(s)
  if v == nil then error((what or "json") .. ": " .. tostring(err), level + 1) end
  return v
end

function M.encode(v, level)
  need((level or 1) + 1)
  return cjson.encode(v)
end

M.null = ok and cjson.null or nil

function M.read_file(path, level)
  level = level or 1
  local f, err = io.open(path, "rb")
  if not f then error("cannot open " .. tostring(path) .. ": " .. tostring(err), level + 1) end
  local s = f:read("*a")
  f:close()
  return M.decode(s, path, level + 1)
end

return M
