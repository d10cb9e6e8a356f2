-- mx.context — devices: mx.cpu(i), mx.gpu(i). Value objects; equal when same device.
local lib = require("mx.core.lib")
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

-- CPU contexts with distinct ids are distinct devices (core/src/device.c): cpu(0) ..
-- cpu(n - 1) with n = MX_NUM_CPU_DEVICES (default and maximum 16). Each has its own
-- storage pool; an op takes all its inputs from one device, x:to(ctx) / copyto move
-- data between them. This is how multi-device code (gluon's ctx lists, mx.kv) runs and is
-- tested without GPUs. mx.cpu(i) itself accepts any id (a Context is a value, MXNet);
-- placing data on an id past the limit is the error (parse).
local MAX_CPU = 16
local ncpu = math.min(MAX_CPU, math.max(1, tonumber(os.getenv("MX_NUM_CPU_DEVICES") or MAX_CPU)
  or MAX_CPU))
M.MAX_CPU_DEVICES = MAX_CPU
function M.num_cpu_devices() return ncpu end

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
  if dev_type == 1 and dev_id >= ncpu then
    error((who and who .. ": " or "") .. "cpu(" .. dev_id .. "): there are " .. ncpu
      .. " CPU devices, cpu(0) .. cpu(" .. (ncpu - 1) .. ") (MX_NUM_CPU_DEVICES, at most "
      .. MAX_CPU .. ")", level + 1)
  end
  return dev_type, dev_id
end

-- Accepts a Context, "cpu"/"gpu(1)" strings, or nil (cpu). Returns dev_type, dev_id.
-- For placing data: cpu(i) past the CPU device count is an error (see mx.cpu). level: as for error();
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

-- The tape's op for x:to(ctx[, dtype]) / as_in_context while recording (mx.nd records it):
-- the gradient goes back to x's device and dtype, so autograd carries gradients across
-- devices (model parallelism).
M._copy_op = { name = "to", outputs = { "out" }, nin = 1,
  grad = function(_, x, _, g) return { g[1]:to(x[1]:context(), x[1]:dtype()) } end }

return M
