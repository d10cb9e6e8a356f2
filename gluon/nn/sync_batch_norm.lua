-- gluon/nn/sync_batch_norm.lua — MXNet's SyncBatchNorm (gluon.contrib.nn in 1.9):
-- BatchNorm whose batch statistics, in training, are those of the whole batch spread over
-- num_devices devices of this process (cpu(0), cpu(1), ...: data parallelism with one
-- Parameter copy per device), and parallel_apply, which runs the per-device forwards
-- together so that they can meet.
--
-- MXNet's operator blocks each device's forward on a barrier until every device has
-- pushed its slice (its asynchronous engine runs them side by side). A Lua forward runs to
-- its end before the next one starts, so here the devices' forwards run as coroutines
-- under gluon.utils.parallel_apply(fn, inputs): at a SyncBatchNorm each forward hands in
-- its slice and waits; the last one to arrive computes every device's output from the
-- global mean and (biased) variance, as recorded ops (cross-device copies included), so
-- autograd gives each slice the gradient of one BatchNorm over the whole batch and each
-- device's gamma/beta the part of it that its slice contributes (the Trainer's sum over
-- devices is the whole batch's). running_mean/running_var of every device get the global
-- statistics (momentum as BatchNorm's), at the forward (MXNet updates them in its
-- backward). With num_devices=1, in predict mode or with use_global_stats it is
-- BatchNorm.
local nd = require("mx.nd")
local S = require("mx.core.state")
local autograd = require("mx.autograd")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local norm = require("mx.gluon.nn.norm_layers")
local caller = require("mx.core.caller")

local coroutine, type, error, tostring, rawget, rawset, ipairs, pcall, select =
  coroutine, type, error, tostring, rawget, rawset, ipairs, pcall, select
local DEV = Parameter._DEV

local M = {}

-- the coroutines parallel_apply runs (weak keys: a finished one goes away)
local running = setmetatable({}, { __mode = "k" })

-- _parallel_apply(fn, inputs, level) -> { fn(inputs[1]), fn(inputs[2]), ... } (each
-- call's first result): the calls run as coroutines, round-robin, each resumed until it
-- finishes or waits at a SyncBatchNorm for the other devices' slices. Errors blame the
-- caller's line (level: the caller's, as error()'s). gluon.utils.parallel_apply.
function M._parallel_apply(fn, inputs, level)
  level = (level or 1) + 1
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn)
    and getmetatable(fn).__call) then
    error("parallel_apply: fn must be a function (or a Block), got " .. type(fn), level)
  end
  if type(inputs) ~= "table" or #inputs == 0 then
    error("parallel_apply: inputs must be a non-empty list (one entry per device)", level)
  end
  local cos, res, left = {}, {}, #inputs
  local tok = {} -- this run's: the rounds its forwards gather in
  for i = 1, #inputs do
    local co = coroutine.create(function(x) return fn(x) end)
    running[co] = tok
    cos[i] = co
  end
  local key, depth = DEV.key, DEV.depth
  local started = {}
  while left > 0 do
    local progressed = false
    for i, co in ipairs(cos) do
      if coroutine.status(co) == "suspended" then
        local ok, r
        if started[i] then ok, r = coroutine.resume(co)
        else started[i] = true; ok, r = coroutine.resume(co, inputs[i]) end
        DEV.key, DEV.depth = key, depth
        if not ok then
          for _, c in ipairs(cos) do running[c] = nil end
          error("parallel_apply: input " .. i .. ": "
            .. tostring(r):gsub("^[^\n]-%.lua:%d+: ", "", 1), level)
        end
        if coroutine.status(co) == "dead" then
          res[i], left, progressed = r, left - 1, true
        elseif r == "synced" then
          progressed = true
        end
      end
    end
    if not progressed and left > 0 then
      for _, c in ipairs(cos) do running[c] = nil end
      error(string.format("parallel_apply: %d of %d forwards wait at a SyncBatchNorm whose "
        .. "num_devices the inputs do not reach", left, #inputs), level)
    end
  end
  return res
end

local SyncBatchNorm = norm.BatchNorm:extend("SyncBatchNorm")
M.SyncBatchNorm = SyncBatchNorm
local PARAMS = { "in_channels", "num_devices", "momentum", "epsilon", "center", "scale",
  "use_global_stats", "beta_initializer", "gamma_initializer", "running_mean_initializer",
  "running_variance_initializer" }
local SIG = block.sig(SyncBatchNorm, PARAMS)
function SyncBatchNorm:__init(...)
  local o = SIG(3, ...)
  local nd_ = o.num_devices or 1
  if type(nd_) ~= "number" or nd_ < 1 or nd_ % 1 ~= 0 then
    error("SyncBatchNorm: num_devices must be a positive integer, got " .. tostring(nd_), 3)
  end
  local bo = { axis = 2 }
  for _, k in ipairs(PARAMS) do
    if k ~= "num_devices" then bo[k] = o[k] end
  end
  local ok, err = pcall(norm.BatchNorm.__init, self, bo)
  if not ok then
    error("SyncBatchNorm: " .. tostring(err):gsub("^[^\n]-%.lua:%d+: ", "", 1):gsub("^BatchNorm: ", ""), 3)
  end
  rawset(self, "_num_devices", nd_)
  rawset(self, "_rounds", {})
end

local BN_FORWARD = norm.BatchNorm.forward
local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end

-- every device's output from the group's slices (recorded ops: autograd differentiates
-- through the global statistics and the copies)
local function sync_outputs(self, g)
  local n = rawget(self, "_num_devices")
  local reg = rawget(self, "_reg")
  local x1 = g.x[1]
  local ctx1 = x1:context()
  local sh = x1:shape()
  local axes, cshape = {}, { 1, sh[2] }
  for i = 1, #sh do if i ~= 2 then axes[#axes + 1] = i; cshape[i] = cshape[i] or 1 end end
  local count, sum = 0, nil
  for k = 1, n do
    local s = g.x[k]:shape()
    count = count + g.x[k]:size() / s[2]
    local part = nd.sum(g.x[k], { axis = axes }):as_in_context(ctx1)
    sum = sum and nd.add(sum, part) or part
  end
  local mean = nd.div_scalar(sum, { scalar = count })
  local means, sq = {}, nil
  for k = 1, n do
    means[k] = mean:as_in_context(g.x[k]:context())
    local d = nd.broadcast_sub(g.x[k], nd.reshape(means[k], cshape))
    local part = nd.sum(nd.square(d), { axis = axes }):as_in_context(ctx1)
    sq = sq and nd.add(sq, part) or part
  end
  local var = nd.div_scalar(sq, { scalar = count })
  local eps, mom = self._eps, self._momentum
  local invstd = nd.rsqrt(nd.add_scalar(var, { scalar = eps }))
  local out = {}
  for k = 1, n do
    local c = g.x[k]:context()
    local xhat = nd.broadcast_mul(nd.broadcast_sub(g.x[k], nd.reshape(means[k], cshape)),
      nd.reshape(invstd:as_in_context(c), cshape))
    local y = xhat
    if not self._fix_gamma then
      y = nd.broadcast_mul(y, nd.reshape(reg.gamma:data(c), cshape))
    end
    out[k] = nd.broadcast_add(y, nd.reshape(reg.beta:data(c), cshape))
  end
  autograd.pause(function()
    for k = 1, n do
      local c = g.x[k]:context()
      local rm, rv = reg.running_mean:data(c), reg.running_var:data(c)
      local m, v = mean:detach():as_in_context(c), var:detach():as_in_context(c)
      nd.add(nd.mul_scalar(rm, { scalar = mom }), nd.mul_scalar(m, { scalar = 1 - mom }),
        { out = rm })
      nd.add(nd.mul_scalar(rv, { scalar = mom }), nd.mul_scalar(v, { scalar = 1 - mom }),
        { out = rv })
    end
  end)
  return out
end

local function check_slice(g, x, level)
  local s, s1 = x:shape(), g.x[1]:shape()
  local ok = #s == #s1 and s[2] == s1[2]
  for i = 3, #s do ok = ok and s[i] == s1[i] end
  if not ok then
    error(string.format("SyncBatchNorm: device slice %s does not match the first slice %s "
      .. "(only the batch axis may differ)", shape_str(s), shape_str(s1)), level)
  end
  for _, y in ipairs(g.x) do
    if y:context() == x:context() then
      error("SyncBatchNorm: two slices on " .. tostring(x:context()) .. ": each of the "
        .. "num_devices forwards runs on its own device", level)
    end
  end
end

function SyncBatchNorm:forward(x, ...)
  local n = rawget(self, "_num_devices")
  if n == 1 or not S.training or self._use_global_stats then return BN_FORWARD(self, x, ...) end
  if select("#", ...) > 0 then error("SyncBatchNorm: takes one input", caller.level()) end
  if not nd.is_tensor(x) then
    error("SyncBatchNorm: input must be a tensor, got " .. type(x), caller.level())
  end
  local co = coroutine.running()
  if not (co and running[co]) then
    error(string.format("SyncBatchNorm: in training with num_devices=%d the devices' forwards "
      .. "must run together: call them through mx.gluon.utils.parallel_apply(fn, inputs) (or "
      .. "build the layer with num_devices=1)", n), caller.level())
  end
  if S.tracing then
    error("SyncBatchNorm: a hybridized block cannot synchronise devices in training: "
      .. "leave it unhybridized (or num_devices=1)", caller.level())
  end
  if #x:shape() < 2 then
    error("SyncBatchNorm: input must have a channel axis (N, C, ...), got "
      .. shape_str(x:shape()), caller.level())
  end
  local reg = rawget(self, "_reg")
  if reg.gamma._data == nil and reg.gamma._copies == nil then -- deferred in_channels
    self:_infer_params("batch_norm", self._opts, x,
      { reg.gamma, reg.beta, reg.running_mean, reg.running_var }, caller.level())
  end
  -- the rounds of this layer's calls: a forward joins the last round of its
  -- parallel_apply still gathering (rounds a failed parallel_apply left are dropped)
  local tok = running[co]
  local rounds = rawget(self, "_rounds")
  for i = #rounds, 1, -1 do
    if rounds[i].tok ~= tok then table.remove(rounds, i) end
  end
  local g = rounds[#rounds]
  if not g or g.out or #g.x == n then
    g = { x = {}, out = nil, taken = 0, tok = tok }
    rounds[#rounds + 1] = g
  else
    check_slice(g, x, caller.level())
  end
  local k = #g.x + 1
  g.x[k] = x
  local key, depth = DEV.key, DEV.depth
  if k == n then
    local ok, out = pcall(sync_outputs, self, g)
    if not ok then
      rounds[#rounds] = nil
      error("SyncBatchNorm: " .. tostring(out):gsub("^[^\n]-%.lua:%d+: ", "", 1), caller.level())
    end
    g.out = out
    coroutine.yield("synced") -- the waiting forwards resume first
  else
    while not g.out do coroutine.yield("waiting") end
  end
  DEV.key, DEV.depth = key, depth
  g.taken = g.taken + 1
  if g.taken == n then
    for i, r in ipairs(rounds) do if r == g then table.remove(rounds, i) break end end
  end
  return g.out[k]
end

function SyncBatchNorm:_repr_args()
  return norm.BatchNorm._repr_args(self) .. ", num_devices=" .. rawget(self, "_num_devices")
end

return M
