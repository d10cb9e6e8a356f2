-- spec/helpers/zoo_fill.lua — the deterministic parameter fill and input of
-- tools/fixtures/zoo_fill.py, in Lua: the same float64 arithmetic gives bitwise the same
-- float32 values, so a network's committed MXNet output checks it with no weight file.
local mx = require("mx")
local floor, sqrt = math.floor, math.sqrt

local M = {}
local PHI = 0.6180339887498949

local function seed_of(name)
  local s = 7
  for i = 1, #name do s = (s * 31 + name:byte(i)) % 2147483647 end
  return s
end

-- fill(ptr, n, seed, kind, fan_in): ptr[0..n) as zoo_fill.py's value() (kind "input": its data())
local function fill(p, n, seed, kind, fan_in)
  local off = seed / 2147483648.0
  local sc = kind == "weight" and sqrt(6.0 / fan_in) or 0
  for i = 0, n - 1 do
    local u = i * PHI + off
    u = u - floor(u)
    local v = u * u * 9973.0 + u * 0.5
    v = v - floor(v)
    local w = 2.0 * v - 1.0
    if kind == "input" then p[i] = w
    elseif kind == "running_var" then p[i] = 1.0 + 0.5 * v
    elseif kind == "gamma" then p[i] = 1.0 + 0.2 * w
    elseif kind == "weight" then p[i] = sc * w
    else p[i] = 0.1 * w end
  end
end

local function kind_of(name, shape)
  if name:match("running_var$") then return "running_var" end
  if name:match("gamma$") then return "gamma" end
  if name:match("weight$") and #shape >= 2 then return "weight" end
  return "other"
end

-- an f32 tensor of shape filled by fill(); name picks the seed and the rule
local function tensor(name, shape, kind)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local t = mx.nd.zeros(shape)
  fill(t:data_ptr(), n, name and seed_of(name) or 12345, kind, n / shape[1])
  return t
end

-- params(net[, keep]): every parameter of an initialised net set to its deterministic
-- values, but those whose name keep(name) accepts (constants such as YOLO's anchors)
function M.params(net, keep)
  for name, p in net:collect_params():items() do
    if not (keep and keep(name)) then
      local shape = p:data():shape()
      p:set_data(tensor(name, shape, kind_of(name, shape)))
    end
  end
end

-- data(shape): the deterministic input (zoo_fill.py's data())
function M.data(shape) return tensor(nil, shape, "input") end

return M
