-- mx.gluonnlp.data.batchify — GluonNLP 0.10's batchify functions: Stack, Pad (with valid
-- lengths), Tuple, List. Samples are tensors, numbers or Lua lists of numbers (token
-- ids); lists of integers become int32 tensors, other numbers float32.
local nd = require("mx.nd")
local gb = require("mx.gluon.data.batchify")

local is_tensor = nd.is_tensor
local M = {}

local function callable(name, fn)
  return setmetatable({ _class_name = name }, {
    __call = function(_, samples) return fn(samples) end,
    __tostring = function() return name .. "()" end,
  })
end

-- Stack(dtype): stack like samples along a new first axis
function M.Stack(dtype)
  return callable("Stack", function(samples)
    local out = gb.stack(samples, #samples, 2)
    if dtype and out:dtype() ~= dtype then out = out:astype(dtype) end
    return out
  end)
end

local function is_int_list(s)
  for i = 1, #s do
    local v = s[i]
    if v % 1 ~= 0 or v < -2147483648 or v > 2147483647 then return false end
  end
  return true
end

-- Pad{axis=1, pad_val=0, ret_length=false, dtype=, round_to=}: pad samples to the
-- longest along `axis` (1-based, of a sample) and stack; with ret_length, also the
-- int32 tensor of the samples' lengths along that axis.
function M.Pad(o)
  o = o or {}
  for k in pairs(o) do
    if not ({ axis = 1, pad_val = 1, ret_length = 1, dtype = 1, round_to = 1 })[k] then
      error("Pad: unknown option '" .. tostring(k)
        .. "' (valid: axis, dtype, pad_val, ret_length, round_to)", 2)
    end
  end
  local axis, pad_val, round_to = o.axis or 1, o.pad_val or 0, o.round_to
  return callable("Pad", function(samples)
    local n = #samples
    if n == 0 then error("Pad: no samples", 2) end
    local lengths = {}
    local out
    if not is_tensor(samples[1]) then
      -- Lua lists: 1-d samples padded in Lua, one tensor built at the end
      if axis ~= 1 and axis ~= -1 then
        error("Pad: Lua list samples are 1-d; axis must be 1, got " .. tostring(axis), 2)
      end
      local maxl, int = 0, pad_val % 1 == 0
      for b = 1, n do
        local s = samples[b]
        if type(s) ~= "table" then error("Pad: sample " .. b .. " is a " .. type(s)
          .. " (give Lua lists of numbers or tensors)", 2) end
        lengths[b] = #s
        if #s > maxl then maxl = #s end
        if int and not is_int_list(s) then int = false end
      end
      if round_to then maxl = math.ceil(maxl / round_to) * round_to end
      local dtype = o.dtype or (int and "int32" or "float32")
      local flat = {}
      for b = 1, n do
        local s, base = samples[b], (b - 1) * maxl
        for i = 1, maxl do flat[base + i] = s[i] or pad_val end
      end
      out = nd.array(flat, { dtype = dtype }):reshape({ n, maxl })
    else
      local ndim = #samples[1]:shape()
      local ax = axis < 0 and ndim + axis + 1 or axis
      if ax < 1 or ax > ndim then
        error(string.format("Pad: axis %d is out of range for %d-d samples", axis, ndim), 2)
      end
      local maxs = samples[1]:shape()
      for b = 1, n do
        local s = samples[b]:shape()
        if #s ~= ndim then error("Pad: samples have different numbers of dims", 2) end
        lengths[b] = s[ax]
        for d = 1, ndim do
          if d ~= ax and s[d] ~= maxs[d] then
            error(string.format("Pad: samples differ in dim %d (%d vs %d), which is not the pad axis %d",
              d, s[d], maxs[d], ax), 2)
          end
          if s[d] > maxs[d] then maxs[d] = s[d] end
        end
      end
      if round_to then maxs[ax] = math.ceil(maxs[ax] / round_to) * round_to end
      local shape = { n }
      for d = 1, ndim do shape[d + 1] = maxs[d] end
      local dtype = o.dtype or samples[1]:dtype()
      out = nd.full(shape, pad_val, { dtype = dtype })
      for b = 1, n do
        local s = samples[b]
        if s:dtype() ~= dtype then s = s:astype(dtype) end
        local l = lengths[b]
        if l > 0 then
          local dst = out[b]
          if ax == 1 then
            dst[{ { 1, l } }] = s
          else
            local sl = {}
            for d = 1, ndim do sl[d] = d == ax and { 1, l } or {} end
            dst[sl] = s
          end
        end
      end
    end
    if o.ret_length then return out, nd.array(lengths, { dtype = "int32" }) end
    return out
  end)
end

-- Tuple(fn1, fn2, ...) or Tuple{fn1, fn2}: field k of every sample through fn_k; the
-- results in order (a Pad with ret_length contributes its two results as one table)
function M.Tuple(...)
  local fns = { ... }
  if #fns == 1 and type(fns[1]) == "table" and getmetatable(fns[1]) == nil then fns = fns[1] end
  if #fns == 0 then error("Tuple: give at least one batchify function", 2) end
  return callable("Tuple", function(samples)
    local out = {}
    for k = 1, #fns do
      local col = {}
      for b = 1, #samples do
        local s = samples[b]
        if type(s) ~= "table" or is_tensor(s) then
          error("Tuple: sample " .. b .. " is not a table of fields", 2)
        end
        col[b] = s[k]
      end
      local r1, r2 = fns[k](col)
      out[k] = r2 ~= nil and { r1, r2 } or r1
    end
    return out
  end)
end

-- List(): the samples as they are (a Lua list)
function M.List()
  return callable("List", function(samples)
    local r = {}
    for i = 1, #samples do r[i] = samples[i] end
    return r
  end)
end

return M
