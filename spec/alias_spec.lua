-- spec/alias_spec.lua — out= and setitem aliasing an input: the result equals the
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
  -- every op whose output may alias an input of the same shape and dtype: out= is the
  -- input itself (or a view of it), the result must equal the unaliased one
  local cases = {
    { "matmul", function(a) return nd.matmul(a, a) end, function(a) nd.matmul(a, a, { out = a }) end },
    { "batch_dot", function(a) local b = a:reshape { 1, 3, 3 } return nd.batch_dot(b, b) end,
      function(a) local b = a:reshape { 1, 3, 3 } nd.batch_dot(b, b, { out = b }) end },
    { "flip", function(a) return nd.flip(a, { axis = 1 }) end,
      function(a) nd.flip(a, { axis = 1, out = a }) end },
    { "swapaxes", function(a) return nd.swapaxes(a, { dim1 = 1, dim2 = 2 }) end,
      function(a) nd.swapaxes(a, { dim1 = 1, dim2 = 2, out = a }) end },
    { "take", function(a) return nd.take(a, nd.array { 3, 1, 2 }) end,
      function(a) nd.take(a, nd.array { 3, 1, 2 }, { out = a }) end },
    { "slice (reversed rows)",
      function(a) return nd.slice(a, { begin = { -1 }, ["end"] = { 1 }, step = { -1 } }) end,
      function(a) nd.slice(a, { begin = { -1 }, ["end"] = { 1 }, step = { -1 }, out = a }) end },
    { "broadcast_to (a row into the whole)",
      function(a) return nd.broadcast_to(a[{ { 2, 2 } }], { shape = { 3, 3 } }) end,
      function(a) nd.broadcast_to(a[{ { 2, 2 } }], { shape = { 3, 3 }, out = a }) end },
    { "where", function(a) return nd.where(nd.greater_scalar(a, { scalar = 4 }), a:flip { axis = 2 }, a) end,
      function(a) nd.where(nd.greater_scalar(a, { scalar = 4 }), a:flip { axis = 2 }, a, { out = a }) end },
    { "concat of two views into their base", function(a)
        return nd.concat({ a[{ { 2, 3 } }], a[{ { 1, 1 } }] }, { dim = 1 })
      end, function(a) nd.concat({ a[{ { 2, 3 } }], a[{ { 1, 1 } }] }, { dim = 1, out = a }) end },
    { "stack of rows into their base", function(a)
        return nd.stack({ a[3], a[1], a[2] }, { axis = 1 })
      end, function(a) nd.stack({ a[3], a[1], a[2] }, { axis = 1, out = a }) end },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " with out= its input", function()
      local a = base()
      local want = c[2](a):tolist()
      c[3](a)
      assert.are.same(want, a:tolist())
    end)
  end
  it("take with out= its indices", function()
    local i = nd.array({ { 3, 1, 2 }, { 2, 2, 1 }, { 1, 3, 3 } })
    local data = nd.array { 10, 20, 30 }
    local want = nd.take(data, i):tolist()
    nd.take(data, i, { out = i })
    assert.are.same(want, i:tolist())
  end)
  it("repeat and tile into a view of their input's storage", function()
    local x = nd.array { 1, 2, 3, 0, 0, 0 }
    local head = x[{ { 1, 3 } }]
    local want = nd["repeat"](head, { repeats = 2 }):tolist()
    nd["repeat"](head, { repeats = 2, out = x })
    assert.are.same(want, x:tolist())
    x = nd.array { 1, 2, 3, 0, 0, 0 }
    head = x[{ { 1, 3 } }]
    want = nd.tile(head, { reps = { 2 } }):tolist()
    nd.tile(head, { reps = { 2 }, out = x })
    assert.are.same(want, x:tolist())
  end)
  it("sum into a view of its input", function()
    local x = nd.array({ { 1, 2 }, { 3, 4 } })
    local row = x[1]
    nd.sum(x, { axis = 1, out = row })
    assert.are.same({ 4, 6 }, row:tolist())
    assert.are.same({ { 4, 6 }, { 3, 4 } }, x:totable())
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
