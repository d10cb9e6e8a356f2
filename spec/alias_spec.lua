-- spec/alias_spec.lua — out= and setitem aliasing an input (issue 10): the result equals the
-- one computed without aliasing; overlapping copies go through memmove or a temporary.
local mx = require("mx")
local nd = mx.nd

local function base() return nd.array({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }) end

describe("out= aliasing an input", function()
  it("nd.dot(a, a, {out=a}) equals the unaliased product", function()
    local a = base()
    local want = nd.dot(a, a):tolist()
    nd.dot(a, a, { out = a })
    assert.are.same(want, a:tolist())
  end)
  it("transpose into its own input", function()
    local a = base()
    local want = nd.transpose(a):tolist()
    nd.transpose(a, { out = a })
    assert.are.same(want, a:tolist())
  end)
  it("in-place add runs in place: same result and same data pointer", function()
    local a, b = base(), nd.ones({ 3, 3 })
    local want, p = (a + b):tolist(), a:data_ptr()
    nd.add(a, b, { out = a })
    assert.are.same(want, a:tolist())
    assert.is_true(p == a:data_ptr())
  end)
end)

describe("overlapping setitem", function()
  it("x[{1,3}] = x[{2,4}] shifts left through the Lua API", function()
    local x = nd.array({ 1, 2, 3, 4, 5 })
    x[{ { 1, 3 } }] = x[{ { 2, 4 } }]
    assert.are.same({ 2, 3, 4, 4, 5 }, x:tolist())
  end)
  it("x[{2,4}] = x[{1,3}] shifts right", function()
    local x = nd.array({ 1, 2, 3, 4, 5 })
    x[{ { 2, 4 } }] = x[{ { 1, 3 } }]
    assert.are.same({ 1, 1, 2, 3, 5 }, x:tolist())
  end)
end)
