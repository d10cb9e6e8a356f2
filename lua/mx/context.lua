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

local function check_id(name, i, level)
  if type(i) ~= "number" or i < 0 or i % 1 ~= 0 or i >= 65536 then
    error(name .. ": device id must be a non-negative integer, got " .. tostring(i), level + 1)
  end
end

-- mx.cpu(i): any id makes a distinct Context, as in MXNet (tostring: "cpu(5)"). This
-- build has one CPU device: the core keeps a CPU tensor's id but serves every id from
-- the same memory, so anything that would place data on cpu(i) with i ~= 0 is an
-- error (parse) rather than silently cpu(0) (docs/gluon.md, "Devices").
function M.cpu(i)
  i = i or 0
  check_id("mx.cpu", i, 2)
  return new(1, i)
end

function M.gpu(i)
  i = i or 0
  check_id("mx.gpu", i, 2)
  return new(2, i)
end

function M.num_gpus() return C.mx_gpu_count() end

local function placed(dev_type, dev_id, level, who)
  if dev_type == 1 and dev_id ~= 0 then
    error((who and who .. ": " or "") .. "cpu(" .. dev_id .. "): only cpu(0) exists in this build",
      level + 1)
  end
  return dev_type, dev_id
end

-- Accepts a Context, "cpu"/"gpu(1)" strings, or nil (cpu). Returns dev_type, dev_id.
-- For placing data: cpu(i) with i ~= 0 is an error (see mx.cpu). level: as for error();
-- who: the caller's name ("to", "empty"), put first in the message.
function M.parse(ctx, level, who)
  level = (level or 1) + 1
  if ctx == nil then return 1, 0 end
  if getmetatable(ctx) == Context then
    local t, i = placed(ctx.dev_type, ctx.device_id, level, who)
    return t, i
  end
  if type(ctx) == "string" then
    local n, i = ctx:match("^(%a+)%(?(%d*)%)?$")
    if n and DEV[n] then
      local t, d = placed(DEV[n], tonumber(i) or 0, level, who)
      return t, d
    end
  end
  local ty = type(ctx)
  local shown = ty == "string" and string.format("%q", ctx)
    or (ty == "number" or ty == "boolean") and tostring(ctx) or "a " .. ty
  error((who and who .. ": " or "") .. "bad ctx " .. shown
    .. " (expected mx.cpu(), mx.gpu(i) or \"gpu(0)\")", level)
end

function M.is_context(x) return getmetatable(x) == Context end

return M
