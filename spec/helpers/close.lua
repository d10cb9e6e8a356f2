-- spec/helpers/close.lua — assert that two flat lists of numbers agree elementwise within
-- a relative tolerance: |got[i] - want[i]| <= tol * max(1, |want[i]|) (NaN never agrees).
--
--   local close = require("helpers.close").within(1e-10)  -- this spec's default tolerance
--   close(got, want)           -- got / want: tensors (read with tolist) or flat tables
--   close(got, want, 1e-5)     -- a looser tolerance for one check
local assert = require("luassert")

local M = {}

local function flat(v) return type(v) == "table" and v or v:tolist() end

function M.check(got, want, tol)
  local x, y = flat(got), flat(want)
  assert.are.equal(#y, #x)
  for i = 1, #y do
    assert.is_true(math.abs(x[i] - y[i]) <= tol * math.max(1, math.abs(y[i])),
      string.format("element %d: got %.17g, expected %.17g (rtol %g)", i, x[i], y[i], tol))
  end
end

-- within(default_tol): close(got, want[, tol]) with tol defaulting to default_tol.
function M.within(default_tol)
  return function(got, want, tol) M.check(got, want, tol or default_tol) end
end

return M
