-- mx.context — devices: mx.cpu(i), mx.gpu(i). Value objects; equal when same device.
local lib = require("mx._lib")
local C = lib.C

local Context = {}
Context.__index = Context

local DEV = { cpu = 1, gpu = 2 }
local NAME = { [1] = "cpu", [2] = "gpu" }
local cache = {}

local function new(dev_type, dev_id)
  local key = dev_type * 65536 + dev_id
  local c = cache[key]
  if not c then
    c = setmetatable({ device_type = NAME[dev_type], device_id = dev_id, dev_type = dev_type }, Context)
    cache[key] = c
  end
  return c
end

function Context.__tostring(c) return c.device_type .. "(" .. c.device_id .. ")" end
function Context.__eq(a, b) return a.dev_type == b.dev_type and a.device_id == b.device_id end

local M = { Context = Context, new = new }

function M.cpu(i)
  return new(1, i or 0)
end

function M.gpu(i)
  i = i or 0
  if type(i) ~= "number" or i < 0 or i % 1 ~= 0 then
    error("mx.gpu: device id must be a non-negative integer, got " .. tostring(i), 2)
  end
  return new(2, i)
end

function M.num_gpus() return C.mx_gpu_count() end

-- Accepts a Context, "cpu"/"gpu(1)" strings, or nil (cpu). Returns dev_type, dev_id.
function M.parse(ctx, level)
  if ctx == nil then return 1, 0 end
  if getmetatable(ctx) == Context then return ctx.dev_type, ctx.device_id end
  if type(ctx) == "string" then
    local n, i = ctx:match("^(%a+)%(?(%d*)%)?$")
    if n and DEV[n] then return DEV[n], tonumber(i) or 0 end
  end
  error("bad ctx " .. tostring(ctx) .. " (expected mx.cpu(), mx.gpu(i) or \"gpu(0)\")",
    (level or 1) + 1)
end

function M.is_context(x) return getmetatable(x) == Context end

return M
