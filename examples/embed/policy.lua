-- examples/embed/policy.lua — the Lua half of game_loop.c: a small Gluon policy network
-- (8 observations -> 16 -> 4 actions) that the host calls once a frame.
--   local policy = dofile("policy.lua")  -- returns {step = function(obs_addr, act_addr)}
-- obs_addr / act_addr are addresses of the host's float arrays (8 in, 4 out), passed as
-- numbers. The tensors are tiny (at most 16 floats), so each comes from libmx's cell
-- cache and goes back to it when the frame's scope ends: no heap call per frame once
-- warm. The host stops the collector and steps it itself inside the frame budget.
local ffi = require("ffi")
local mx = require("mx")
local nn = mx.gluon.nn
local lib = require("mx.core.lib")

mx.random.seed(1)
local net = nn.Sequential()
net:add(nn.Dense(16, { activation = "relu", in_units = 8 }), nn.Dense(4, { in_units = 16 }))
net:initialize(mx.init.Xavier())

local obs = mx.nd.zeros { 1, 8 }
local C = lib.C
local obs_ptr = ffi.cast("float *", C.mx_tensor_data(obs.h))
local fptr = ffi.typeof("float *")

-- mx.nd.scope releases the frame's temporaries when it returns, so their cells go back
-- to libmx's cache at once instead of piling up until a collection
local scope = mx.nd.scope
local src, dst
local function frame()
  for i = 0, 7 do obs_ptr[i] = src[i] end
  local a = net(obs):tanh()
  local ap = ffi.cast(fptr, C.mx_tensor_data(a.h))
  for i = 0, 3 do dst[i] = ap[i] end
end

local function step(obs_addr, act_addr)
  src, dst = ffi.cast(fptr, obs_addr), ffi.cast(fptr, act_addr)
  scope(frame)
end

return { step = step }
