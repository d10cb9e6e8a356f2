-- mx.gluonnlp.data streams: GluonNLP 0.10's DataStream, SimpleDataStream and
-- SimpleDatasetStream (one dataset per file matched by a pattern).
local U = require("mx.gluonnlp._util")
local gs = require("mx.gluon.data.sampler")

local M = {}

local DataStream = U.class("DataStream")
M.DataStream = DataStream

-- ds:transform(fn): a stream of fn(x) for each x of ds
function DataStream:transform(fn)
  local src = self
  local t = setmetatable({}, DataStream)
  function t.iter()
    local it = src:iter()
    return function()
      local v = it()
      if v == nil then return nil end
      return fn(v)
    end
  end
  return t
end

-- SimpleDataStream(list): a stream over a Lua list
local SimpleDataStream = U.class("SimpleDataStream", DataStream)
M.SimpleDataStream = SimpleDataStream
function SimpleDataStream:__init(list)
  if type(list) ~= "table" then error("SimpleDataStream: expected a Lua list, got " .. type(list), 3) end
  self._list = list
end
function SimpleDataStream:iter()
  local i, list = 0, self._list
  return function()
    i = i + 1
    return list[i]
  end
end

local function glob(pattern)
  local out = {}
  local p = io.popen("for f in " .. pattern
    .. "; do [ -e \"$f\" ] && printf '%s\\n' \"$f\"; done 2>/dev/null")
  if p then
    for line in p:lines() do out[#out + 1] = line end
    p:close()
  end
  return out
end

-- SimpleDatasetStream(dataset, file_pattern, {file_sampler="random"|"sequential"|a
-- sampler, seed=, ...}): for each file matched by the comma-separated shell patterns
-- (sorted), in the sampler's order, yields dataset(filename, opts) where opts holds the
-- remaining options (passed on as GluonNLP passes **kwargs).
local SimpleDatasetStream = U.class("SimpleDatasetStream", DataStream)
M.SimpleDatasetStream = SimpleDatasetStream
function SimpleDatasetStream:__init(dataset, file_pattern, o)
  if type(file_pattern) ~= "string" then
    error("SimpleDatasetStream: file_pattern must be a string, got " .. type(file_pattern), 3)
  end
  if type(dataset) ~= "function" and not (type(dataset) == "table" and getmetatable(dataset)
      and getmetatable(dataset).__call) then
    error("SimpleDatasetStream: dataset must be callable (a dataset class or function)", 3)
  end
  o = o or {}
  local files = {}
  for pat in file_pattern:gmatch("[^,]+") do
    pat = pat:gsub("^%s+", ""):gsub("%s+$", ""):gsub("^~", os.getenv("HOME") or "~")
    for _, f in ipairs(glob(pat)) do files[#files + 1] = f end
  end
  table.sort(files)
  if #files == 0 then
    error('SimpleDatasetStream: cannot find any file with path "' .. file_pattern .. '"', 3)
  end
  self._files, self._dataset = files, dataset
  local fs = o.file_sampler or "random"
  if fs == "random" then
    self._sampler = gs.RandomSampler.new(#files, o.seed and { seed = o.seed } or nil)
  elseif fs == "sequential" then
    self._sampler = gs.SequentialSampler.new(#files)
  elseif type(fs) == "table" and fs.iter then
    self._sampler = fs
  else
    error('SimpleDatasetStream: file_sampler must be "random", "sequential" or a sampler, got '
      .. tostring(fs), 3)
  end
  local kw = {}
  for k, v in pairs(o) do if k ~= "file_sampler" and k ~= "seed" then kw[k] = v end end
  self._kwargs = next(kw) and kw or nil
end
function SimpleDatasetStream:files() return self._files end
function SimpleDatasetStream:iter()
  local it = self._sampler:iter()
  return function()
    local i = it()
    if i == nil then return nil end
    return self._dataset(self._files[i], self._kwargs)
  end
end

return M
