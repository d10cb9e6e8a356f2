-- spec/upstream/common.lua — what the ported MXNet 1.9.1 unit tests share (the role of
-- tests/python/unittest/common.py and mxnet.test_utils): case naming, the assertions,
-- numpy-style comparisons. See spec/upstream/README.md.
local mx = require("mx")
local nd = mx.nd
local assert = require("luassert")

local M = {}

-- local case, skip = C.cases(it, function(why) pending(why) end) (busted's functions live
-- in the spec file's environment, pending looked up while the case runs): case(file, fn,
-- body) is it("<file>: <fn>", body); skip(file, fn, why) a pending case naming why the port
-- does not run it (counted in README.md's table)
-- A third function, fails(file, fn, why), is a ported case that does not pass yet
-- (pending "fails: why"; counted as failing in README.md); skip's message starts "not
-- ported: " (a feature luamx does not offer, a download, an internal API).
-- Each ported file starts with fresh symbol names (mx.sym's NameManager counts, as
-- upstream's file run on its own: test_module.py's checks read "embedding0_weight").
function M.cases(it, pending)
  local fresh = true
  return function(file, fn, body)
      it(file .. ": " .. fn, function()
        if fresh then
          fresh = false
          mx.sym._reset_names()
        end
        return body()
      end)
    end,
    function(file, fn, why) it(file .. ": " .. fn, function() pending("not ported: " .. why) end) end,
    function(file, fn, why) it(file .. ": " .. fn, function() pending("fails: " .. why) end) end
end

-- assertRaises(fn, ...): fn(...) raises (MXNet checks the exception class; Lua errors
-- are strings, so pattern, when given, must occur in the message)
function M.raises(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  if pattern then
    assert.is_truthy(tostring(err):find(pattern, 1, true), "error '" .. tostring(err)
      .. "' does not mention '" .. pattern .. "'")
  end
  return err
end

local function flat(x)
  if nd.is_tensor(x) then
    if x:stype() ~= "default" then x = x:tostype("default") end
    return x:reshape(-1):tolist()
  end
  if type(x) == "number" then return { x } end
  local r = {}
  local function walk(t)
    if type(t) == "table" then for _, v in ipairs(t) do walk(v) end else r[#r + 1] = t end
  end
  walk(x)
  return r
end
M.flat = flat

-- assert_almost_equal(a, b, rtol=1e-5, atol=1e-20): numpy's rule |a - b| <= atol + rtol|b|
function M.almost_equal(a, b, rtol, atol)
  local x, y = flat(a), flat(b)
  if #x ~= #y then return false, "sizes " .. #x .. " and " .. #y end
  rtol, atol = rtol or 1e-5, atol or 1e-20
  for i = 1, #x do
    local ok = math.abs(x[i] - y[i]) <= atol + rtol * math.abs(y[i]) or (x[i] ~= x[i] and y[i] ~= y[i])
    if not ok then return false, string.format("element %d: %.8g vs %.8g", i, x[i], y[i]) end
  end
  return true
end
function M.assert_almost_equal(a, b, rtol, atol)
  local ok, why = M.almost_equal(a, b, rtol, atol)
  assert.is_true(ok, why)
end

-- np.random.uniform / randint as Lua lists drawn from mx.random (the tests' numpy draws)
function M.uniform(lo, hi, shape) return nd.random.uniform(lo, hi, shape) end
function M.randint(lo, hi, shape)
  return nd.floor(nd.random.uniform(lo, hi, shape))
end

-- a temporary file name (removed by the caller's finally)
function M.tmpname(suffix)
  local p = os.tmpname()
  os.remove(p)
  return p .. (suffix or "")
end

return M
