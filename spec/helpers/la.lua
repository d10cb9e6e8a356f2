-- spec/helpers/la.lua — small helpers for the linalg/shape/indexing/creation specs:
-- seeded random tensors, flat comparisons, naive Lua oracles and error-position checks.
local M = {}

-- Deterministic pseudo-random values in [-1, 1) (a Lua LCG: independent of mx.random).
function M.rng(seed)
  local s = seed or 12345
  return function()
    s = (s * 1103515245 + 12345) % 2147483648
    return s / 1073741824 - 1
  end
end

local function prod(shape)
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  return n
end
M.prod = prod

-- A tensor of the shape with values from rng (integers in [-5, 5] when int=true).
function M.rand(mx, shape, opts)
  opts = opts or {}
  local r = opts.rng or M.rng(opts.seed)
  local n = prod(shape)
  local buf = require("ffi").new("double[?]", math.max(n, 1))
  for i = 0, n - 1 do
    local v = r()
    if opts.int then v = math.floor(v * 5 + 0.5) end
    buf[i] = v
  end
  local t = mx.nd.empty(shape, { dtype = "float64" })
  local C = require("mx.core.lib").C
  assert(C.mx_tensor_set_from_f64(t.h, buf, n) == 0)
  if opts.dtype and opts.dtype ~= "float64" then t = t:astype(opts.dtype) end
  return t
end

-- max |a - b| over flat lists (tensors or tables)
function M.maxdiff(a, b)
  local x = type(a) == "table" and a or a:tolist()
  local y = type(b) == "table" and b or b:tolist()
  assert(#x == #y, "sizes differ: " .. #x .. " vs " .. #y)
  local m = 0
  for i = 1, #x do
    local d = math.abs(x[i] - y[i])
    if d ~= d then return math.huge end
    if d > m then m = d end
  end
  return m
end

function M.same_shape(t, shape)
  local s = t:shape()
  if #s ~= #shape then return false end
  for i = 1, #s do if s[i] ~= shape[i] then return false end end
  return true
end

-- Naive row-major matrix product of flat lists: (M, K) x (K, N).
function M.matmul_flat(a, b, m, k, n)
  local c = {}
  for i = 0, m - 1 do
    for j = 0, n - 1 do
      local s = 0
      for l = 0, k - 1 do s = s + a[i * k + l + 1] * b[l * n + j + 1] end
      c[i * n + j + 1] = s
    end
  end
  return c
end

-- Transpose a flat (r, c) list.
function M.transpose_flat(a, r, c)
  local t = {}
  for i = 0, r - 1 do
    for j = 0, c - 1 do t[j * r + i + 1] = a[i * c + j + 1] end
  end
  return t
end

-- Runs f, which must fail on the line where it stores `debug.getinfo(1, "l")
-- .currentline` (write both on one line); returns the message and that line.
function M.error_of(f)
  local line
  local ok, e = pcall(f, function() line = debug.getinfo(2, "l").currentline end)
  assert(not ok, "expected an error")
  return tostring(e), line
end

-- asserts the message names `file:line:` and contains every plain substring
function M.assert_error(f, file, ...)
  local e, line = M.error_of(f)
  assert(e:find(file .. ":" .. line .. ":", 1, true), "error not at " .. file .. ":"
    .. tostring(line) .. ": " .. e)
  for _, s in ipairs { ... } do
    assert(e:find(s, 1, true), "error lacks '" .. s .. "': " .. e)
  end
  return e
end

return M
