-- mx.autograd.custom — custom autograd Functions (mx.autograd.Function): forward runs
-- with recording paused, one node on the tape whose gradient is the user's
-- backward. Installed by mx.autograd: `require("mx.autograd.custom")(M)`.
local S = require("mx.core.state")
local nd = require("mx.nd")
local T = require("mx.autograd.tape")

local is_tensor = nd.is_tensor
local error, pcall, select, unpack, setmetatable =
  error, pcall, select, unpack, setmetatable
local entry, alias, record = T.entry, T.alias, T._record
local user_level = require("mx.core.caller").level

return function(M)
-- local Sigmoid = mx.autograd.Function:extend()
-- function Sigmoid:forward(x) local y = 1 / (1 + mx.nd.exp(-x)); self:save_for_backward(y); return y end
-- function Sigmoid:backward(dy) local y = self.saved_tensors[1]; return dy * y * (1 - y) end
-- local y = Sigmoid()(x)     -- an instance per call, as in MXNet
local Function = {}
Function.__index = Function
M.Function = Function

local CUSTOM = { name = "custom_function", outputs = { "out" }, nin = -1 }
CUSTOM.grad = function(_, x, _, g, p)
  -- user code: the tensors it makes are its own (see backward_scoped)
  local paused = nd._pause_born()
  local r = { p.fn:backward(unpack(g, 1, #g)) }
  nd._resume_born(paused)
  for i = 1, #x do
    local d = r[i]
    if d ~= nil and d ~= false and not is_tensor(d) then
      error("custom Function backward: result " .. i .. " must be a tensor or nil", 0)
    end
  end
  return r
end
M._custom_op = CUSTOM

local function new_instance(cls, ...)
  local o = setmetatable({}, cls)
  if o.init then o:init(...) end
  return o
end
local function call_instance(self, ...)
  local r = { self:apply(...) }
  return unpack(r)
end
Function.__call = call_instance
setmetatable(Function, { __call = new_instance })

-- Function:extend(): a subclass; call it to make an instance, call the instance on
-- tensors to apply it (an instance per call, as in MXNet).
function Function:extend()
  local cls = { __call = call_instance, super = self }
  cls.__index = cls
  return setmetatable(cls, { __index = self, __call = new_instance })
end

-- Tensors backward needs: keep them with save_for_backward (self.saved_tensors), not
-- in other fields of self (see apply).
function Function:save_for_backward(...)
  self.saved_tensors = { ... }
end

function Function.forward()
  error("mx.autograd.Function: forward is not implemented", 2)
end
function Function.backward()
  error("mx.autograd.Function: backward is not implemented", 2)
end

-- Runs forward with recording paused, then records one node whose gradient is
-- backward. Inputs are the tensor arguments; other arguments pass through.
function Function:apply(...)
  local n = select("#", ...)
  local args = { ... }
  local rec = S.recording
  S.recording = false
  local res = { pcall(self.forward, self, ...) }
  S.recording = rec
  if not res[1] then error(res[2], 0) end
  table.remove(res, 1)
  if rec then
    local ins = {}
    for i = 1, n do
      local a = args[i]
      if is_tensor(a) then ins[#ins + 1] = a end
    end
    local outs = {}
    for i = 1, #res do
      if not is_tensor(res[i]) then
        error("custom Function forward: result " .. i .. " must be a tensor", user_level())
      end
      outs[i] = res[i]
    end
    record(CUSTOM, ins, { fn = self }, outs)
    -- the node keeps self: saved tensors that are keys of `entry` (the outputs, recorded
    -- inputs) are swapped for aliases, or a dropped graph could never be collected
    local saved = self.saved_tensors
    if saved then
      for i = 1, #saved do
        local t = saved[i]
        if is_tensor(t) and entry[t] ~= nil then saved[i] = alias(t) end
      end
    end
  end
  return unpack(res)
end
end
