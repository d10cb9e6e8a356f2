-- spec/helpers/shapes.lua — what the shape-family specs (shape_spec, shape_pad_spec)
-- compute their expected values with: tensors of known values, 1-based coordinates
-- and their row-major positions, and the cpu == ref check over every element size.
local mx = require("mx")
local assert = require("luassert")
local H = require("helpers.la")
local nd = mx.nd

local M = {}

-- the values 0, 1, 2, ... in shape (row-major)
function M.range(shape, dtype)
  return nd.arange(0, H.prod(shape), 1, { dtype = dtype or "float32" }):reshape(shape)
end

-- flat row-major index of 1-based coords
function M.flat(shape, c)
  local i = 0
  for d = 1, #shape do i = i * shape[d] + (c[d] - 1) end
  return i + 1
end

-- every 1-based coordinate tuple of shape, row-major
function M.coords(shape)
  local out, c = {}, {}
  local function rec(d)
    if d > #shape then out[#out + 1] = { unpack(c) } return end
    for i = 1, shape[d] do c[d] = i rec(d + 1) end
  end
  rec(1)
  return out
end

-- cpu == ref for op over several dtypes (element sizes 1, 2, 4, 8)
function M.agrees(name, make_inputs, opts)
  for _, dt in ipairs { "float32", "float64", "float16", "int8", "int32", "int64", "uint8" } do
    local ins = make_inputs(dt)
    local n = #ins
    ins[n + 1] = opts
    local a = nd[name](unpack(ins, 1, n + 1))
    local b = nd._ref[name](unpack(ins, 1, n + 1))
    assert.are.same(b:shape(), a:shape())
    assert.equal(0, H.maxdiff(a, b), name .. " " .. dt)
  end
end

return M
