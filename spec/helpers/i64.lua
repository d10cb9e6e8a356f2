-- spec/helpers/i64.lua — int64 tensors written and read exactly (through the data
-- pointer: tolist goes through double, which rounds above 2^53).
local nd = require("mx").nd
local assert = require("luassert")

local M = {}

function M.mk(t, shape)
  local x = nd.zeros(shape or { #t }, { dtype = "int64" })
  local p = x:data_ptr()
  for i = 1, #t do p[i - 1] = t[i] end
  return x
end

function M.rd(x)
  local p, r = x:data_ptr(), {}
  for i = 0, x:size() - 1 do r[i + 1] = p[i] end
  return r
end

function M.same(want, got, what)
  assert.are.equal(#want, #got, what)
  for i = 1, #want do
    assert.is_true(want[i] == got[i], what .. "[" .. i .. "]: want " .. tostring(want[i])
      .. ", got " .. tostring(got[i]))
  end
end

return M
