-- spec/helpers/gradcheck.lua — compare autograd's gradients with central differences.
--
--   local gradcheck = require("helpers.gradcheck")
--   local ok, msg = gradcheck.check(function(x, w) return mx.nd.mul(x, w) end, { x, w })
--   assert(ok, msg)
--
-- The loss is sum_k sum(out_k * W_k) with fixed random weights W_k (so every output
-- element counts with its own weight); the analytic gradient is one backward with the
-- head gradients W_k, the numeric one (L(x + eps) - L(x - eps)) / 2eps per element of
-- every differentiated input, computed in float64. An element passes when
-- |analytic - numeric| <= atol + rtol * |numeric| (PyTorch's gradcheck rule and defaults:
-- eps 1e-6, atol 1e-5, rtol 1e-3).
--
-- gradcheck.run_case(mx, opname, case, variant) builds inputs from a spec/helpers/
-- gradcases.lua case and checks the op through it (see that file for the format).
--
-- Loss heads (MXNet's SoftmaxOutput, *RegressionOutput, MakeLoss) return in backward the
-- gradient of a loss they do not output, whatever the head gradient: opts.surrogate(inputs...)
-- is that loss; the numeric gradient is then the central difference of sum(surrogate), and
-- the analytic one is still one backward through f with the random head gradients (which
-- such an op must ignore).
local M = {}

M.EPS, M.ATOL, M.RTOL = 1e-6, 1e-5, 1e-3

local function outputs_of(...)
  local n = select("#", ...)
  local t = { ... }
  if n == 1 and type(t[1]) == "table" and not require("mx.nd").is_tensor(t[1]) then
    return t[1]
  end
  return t
end

local function weighted_loss(outs, W)
  local L = 0
  for k = 1, #outs do
    local v = outs[k]:tolist()
    local w = W[k]
    for i = 1, #v do L = L + v[i] * w[i] end
  end
  return L
end

-- check(f, inputs, opts) -> ok, message
--   f(inputs...) -> output tensor(s) (several returns or a list)
--   inputs: list of tensors; those in opts.wrt (default: all) are differentiated:
--   they must be float tensors that own their memory (not views); perturbed in place.
--   opts: eps, atol, rtol, wrt (list of input indices), seed, surrogate
function M.check(f, inputs, opts)
  local mx = require("mx")
  local ffi = require("ffi")
  opts = opts or {}
  local eps, atol, rtol = opts.eps or M.EPS, opts.atol or M.ATOL, opts.rtol or M.RTOL
  local wrt = opts.wrt
  if not wrt then
    wrt = {}
    for i = 1, #inputs do wrt[i] = i end
  end
  -- forward (recorded) and analytic gradients
  for _, i in ipairs(wrt) do inputs[i]:attach_grad() end
  local outs = mx.autograd.record(function() return outputs_of(f(unpack(inputs))) end)
  local W, heads, hg = {}, {}, {}
  for k = 1, #outs do
    local o = outs[k]
    local n = o:size()
    local w = {}
    for i = 1, n do w[i] = math.random() * 2 - 1 end
    W[k] = w
    if o:dtype():find("float") then
      heads[#heads + 1] = o
      local ws = mx.nd.array(#w > 0 and w or { 0 }, { dtype = o:dtype() })
      if n == 0 then ws = mx.nd.zeros(o:shape(), { dtype = o:dtype() }) end
      hg[#hg + 1] = ws:reshape(o:shape())
    else
      W[k] = {} -- integer outputs (indices) carry no gradient
      for i = 1, n do W[k][i] = 0 end
    end
  end
  local vars = {}
  for j, i in ipairs(wrt) do vars[j] = inputs[i] end
  local grads = mx.autograd.grad(heads, vars, { head_grads = hg })
  -- numeric gradients
  local numf = f
  if opts.surrogate then -- weights 1 on every element of the surrogate's outputs
    numf = opts.surrogate
    local one = setmetatable({}, { __index = function() return 1 end })
    W = setmetatable({}, { __index = function() return one end })
  end
  local worst, where = 0, nil
  for j, i in ipairs(wrt) do
    local x = inputs[i]
    local dt = x:dtype()
    local ptr = ffi.cast(dt == "float64" and "double*" or "float*", x:data_ptr())
    local ga = grads[j]:tolist()
    for e = 0, x:size() - 1 do
      local v = ptr[e]
      ptr[e] = v + eps
      local lp = weighted_loss(outputs_of(numf(unpack(inputs))), W)
      ptr[e] = v - eps
      local lm = weighted_loss(outputs_of(numf(unpack(inputs))), W)
      ptr[e] = v
      local num = (lp - lm) / (2 * eps)
      local ana = ga[e + 1]
      local err = math.abs(ana - num) - (atol + rtol * math.abs(num))
      if err > worst or ana ~= ana then
        worst = ana ~= ana and math.huge or err
        where = string.format("input %d element %d (value %.6g): analytic %.8g, numeric %.8g",
          i, e + 1, v, ana, num)
      end
    end
  end
  if where then return false, where end
  return true
end

---------------------------------------------------------------- cases
local function uniform(lo, hi) return lo + (hi - lo) * math.random() end

local function far_from(v, away)
  if not away then return true end
  for _, a in ipairs(away) do if math.abs(v - a) < 0.05 then return false end end
  return true
end

-- Values for one input spec. gap: {k, K} draws from cells so inputs never tie.
local function sample(spec, case, gapk)
  local n = 1
  for i = 1, #spec do n = n * spec[i] end
  local d = spec.domain or case.domain or { -1, 1 }
  local vals = {}
  for i = 1, n do
    local v
    if spec.int then
      v = math.random(d[1], d[2])
    elseif gapk then
      -- cell c of width w holds input k at offset (k - 1) * w / K + small jitter
      local K = gapk[2]
      local w = (d[2] - d[1]) / 4
      local c = math.random(0, 3)
      v = d[1] + c * w + (gapk[1] - 1 + 0.2 + 0.6 * math.random()) * w / K
    else
      repeat v = uniform(d[1], d[2]) until far_from(v, case.away)
    end
    vals[i] = v
  end
  return vals
end

local function shape_of(spec)
  local s = {}
  for i = 1, #spec do s[i] = spec[i] end
  return s
end

-- Build the inputs of a case. variant "view": every differentiated input is row 2 of a
-- (3, ...) base; the base is the variable. Returns leaves, makers (leaf -> op input).
local function build(mx, case, variant)
  local leaves, makers, wrt = {}, {}, {}
  local ndiff = 0
  for _, spec in ipairs(case.inputs) do
    if type(spec) == "table" and not spec.nograd and not spec.int then ndiff = ndiff + 1 end
  end
  local k = 0
  for i, spec in ipairs(case.inputs) do
    if type(spec) == "function" then
      leaves[i] = spec(mx)
      makers[i] = false
    else
      local diff = not spec.nograd and not spec.int
      local dtype = diff and (case.dtype or "float64") or (spec.dtype or "float64")
      local shape = shape_of(spec)
      local gapk
      if diff then
        k = k + 1
        if case.gap then gapk = { k, ndiff } end
      end
      if diff and variant == "view" then
        local base = {}
        for _ = 1, 3 do
          local v = sample(spec, case, gapk)
          for _, x in ipairs(v) do base[#base + 1] = x end
        end
        local bshape = { 3 }
        for _, d in ipairs(shape) do bshape[#bshape + 1] = d end
        leaves[i] = mx.nd.array(base, { dtype = dtype }):reshape(bshape)
        leaves[i] = mx.nd.array(leaves[i]) -- own its memory (reshape made a view)
        makers[i] = "view"
      else
        local v = sample(spec, case, gapk)
        local t = mx.nd.array(#v == 1 and #shape == 0 and v[1] or v, { dtype = dtype })
        leaves[i] = mx.nd.array(t:reshape(shape))
        makers[i] = false
      end
      if diff then wrt[#wrt + 1] = i end
    end
  end
  return leaves, makers, wrt
end

-- run_case(mx, opname, case, variant) -> ok, message
function M.run_case(mx, opname, case, variant)
  local leaves, makers, wrt = build(mx, case, variant)
  local F = mx.nd
  local fn = F[opname]
  local opts = case.opts
  local function f(...)
    local xs = { ... }
    for i = 1, #xs do
      if makers[i] == "view" then xs[i] = xs[i][2] end
    end
    if case.call then return case.call(F, xs, opts) end
    local args = {}
    for i = 1, #xs do args[i] = xs[i] end
    if opts then args[#args + 1] = opts end
    return fn(unpack(args, 1, #xs + (opts and 1 or 0)))
  end
  if #wrt == 0 then return false, "case has no differentiated input" end
  local sur
  if case.surrogate then
    sur = function(...)
      local xs = { ... }
      for i = 1, #xs do
        if makers[i] == "view" then xs[i] = xs[i][2] end
      end
      return case.surrogate(F, xs, opts)
    end
  end
  return M.check(f, leaves, { wrt = wrt, eps = case.eps, atol = case.atol, rtol = case.rtol,
    surrogate = sur })
end

-- Human-readable label of a case.
function M.label(case, i)
  if case.name then return case.name end
  local parts = {}
  for _, spec in ipairs(case.inputs) do
    if type(spec) == "function" then parts[#parts + 1] = "fn"
    else parts[#parts + 1] = "(" .. table.concat(shape_of(spec), ",") .. ")" end
  end
  return "case " .. i .. " " .. table.concat(parts, " ")
end

return M
