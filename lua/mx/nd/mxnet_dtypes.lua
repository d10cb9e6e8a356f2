-- mx.nd's MXNet 1.9 dtype conventions that are compositions of casts around luamx ops:
--
--   nd.softmax(x, {dtype=}), nd.log_softmax(x, {dtype=})   the output's dtype (float16,
--       bfloat16, float32, float64): x is cast to it first when it is at least as wide as
--       x's (computed in it), else the result is cast to it (computed in x's)
--   float16 data in batch_norm, layer_norm, instance_norm, group_norm   computed in
--       float32 and given back as float16, as MXNet's kernels accumulate: batch_norm takes
--       float32 gamma/beta/moving statistics with it (its mean/var outputs stay float32,
--       the running statistics are updated in place), the others float16 or float32
--       gamma/beta (their outputs all float16)
--
-- The op's function in mx.nd, its NDArray method (x:softmax{dtype=}) and nd._ref's are the
-- wrapped ones, and so are its MXNet names (nd.BatchNorm), made from them after: nd.lua calls this
-- module once, after the op functions exist and before mx.nd.mxnet_api: install(nd, NDArray).
local type, error, tostring, select, pairs, unpack = type, error, tostring, select, pairs, unpack

local WIDTH = { float16 = 16, bfloat16 = 16, float32 = 32, float64 = 64 }

return function(nd, NDArray)
  local function is_opts(t) return type(t) == "table" and not nd.is_tensor(t) end
  local function replace(old, new)
    for k, v in pairs(nd) do if v == old then nd[k] = new end end
    for k, v in pairs(NDArray) do if v == old then NDArray[k] = new end end
  end

  local function with_dtype(name, f)
    return function(...)
      local n = select("#", ...)
      local o = n > 1 and select(n, ...) or nil
      if not is_opts(o) or o.dtype == nil then return f(...) end
      local code = nd.dtype_code(o.dtype)
      local dt = code and nd.dtype_name[code]
      if not WIDTH[dt] then
        error(string.format("%s: dtype must be a float dtype (float16, bfloat16, float32, "
          .. "float64), got %s", name, tostring(o.dtype)), 2)
      end
      local args = { ... }
      local x = args[1]
      if not nd.is_tensor(x) then error(name .. ": data must be a tensor, got " .. type(x), 2) end
      local opts = {}
      for k, v in pairs(o) do if k ~= "dtype" then opts[k] = v end end
      args[n] = opts
      local ok, r
      if WIDTH[dt] >= (WIDTH[x:dtype()] or 0) then
        if x:dtype() ~= dt then args[1] = x:astype(dt) end
        ok, r = pcall(f, unpack(args, 1, n))
      else
        local out = opts.out
        opts.out = nil
        ok, r = pcall(f, unpack(args, 1, n))
        if ok then ok, r = pcall(nd.cast, r, { dtype = dt, out = out }) end
      end
      if not ok then error((tostring(r):gsub("^[^\n]-:%d+: ", "")), 2) end
      return r
    end
  end
  -- nd._ref's functions (the reference kernels, the sweep's and the specs' oracle) take the
  -- same conventions: what differs between the two is then the kernels, never the casts
  local ref = nd._ref or {}
  for _, name in ipairs { "softmax", "log_softmax" } do
    replace(nd[name], with_dtype(name, nd[name]))
    if ref[name] then ref[name] = with_dtype(name, ref[name]) end
  end

  -- f(data, ...inputs, opts): float16 data computed in float32
  local function half(name, f, fp32_params)
    local function back(r, all)
      if not all then return r end
      return nd.is_tensor(r) and r:astype("float16") or r
    end
    return function(x, ...)
      if not (nd.is_tensor(x) and x:dtype() == "float16") then return f(x, ...) end
      local n = select("#", ...)
      local args = { ... }
      for i = 1, n do
        local a = args[i]
        if nd.is_tensor(a) and a:dtype() == "float16" then
          if fp32_params then
            error(string.format("%s: float16 data takes float32 gamma, beta and moving "
              .. "statistics (as MXNet's), input %d is float16", name, i + 1), 2)
          end
          args[i] = a:astype("float32")
        elseif is_opts(a) and a.out ~= nil then
          error(name .. ": out= is not offered with float16 data (the float16 result is a "
            .. "cast of the float32 one)", 2)
        end
      end
      local r = { pcall(f, x:astype("float32"), unpack(args, 1, n)) }
      if not r[1] then error((tostring(r[2]):gsub("^[^\n]-:%d+: ", "")), 2) end
      local outs = {}
      for i = 2, table.maxn(r) do outs[i - 1] = back(r[i], i == 2 or not fp32_params) end
      return unpack(outs, 1, table.maxn(r) - 1)
    end
  end
  replace(nd.batch_norm, half("batch_norm", nd.batch_norm, true))
  if ref.batch_norm then ref.batch_norm = half("batch_norm", ref.batch_norm, true) end
  for _, name in ipairs { "layer_norm", "instance_norm", "group_norm" } do
    replace(nd[name], half(name, nd[name], false))
    if ref[name] then ref[name] = half(name, ref[name], false) end
  end
end
