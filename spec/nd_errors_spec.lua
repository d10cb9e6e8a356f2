-- spec/nd_errors_spec.lua — issue 10's Lua-side cases: what a careless user can
-- write must give a clear error naming the function, at the user's line, never a
-- crash or a silently wrong value: more than 8 dims, NaN payloads read back,
-- non-tensors as self or data, non-integer sizes, huge slice bounds, options that
-- are not tables.
local mx = require("mx")
local ffi = require("ffi")
local nd = mx.nd

local FILE = "nd_errors_spec.lua"

-- fn must raise msg (a plain substring) at a line of this file. (fn must not end in
-- a tail call: that would drop the frame the message blames.)
local function raises(msg, fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error containing: " .. msg)
  err = tostring(err)
  assert.truthy(err:find(msg, 1, true), "message was: " .. err)
  assert.truthy(err:find(FILE .. ":%d+:"), "not blamed on the caller's line: " .. err)
end

describe("more than 8 dims", function()
  it("is an error naming the function, before anything reaches C", function()
    raises("empty: at most 8 dims, got 9", function() nd.empty { 1, 1, 1, 1, 1, 1, 1, 1, 1 } end)
    local deep = { 1 }
    for _ = 1, 9 do deep = { deep } end
    raises("array: at most 8 dims", function() nd.array(deep) end)
    local selfref = {}
    selfref[1] = selfref
    raises("array: at most 8 dims", function() nd.array(selfref) end)
    local buf = ffi.new("float[4]")
    raises("from_pointer: at most 8 dims, got 9",
      function() nd.from_pointer(buf, { 1, 1, 1, 1, 1, 1, 1, 1, 1 }) end)
    raises("array: at most 8 dims, got 9",
      function() nd.array(buf, { shape = { 1, 1, 1, 1, 1, 1, 1, 1, 1 } }) end)
    raises("zeros: shape must be a list of non-negative integers",
      function() nd.zeros { 1, 1, 1, 1, 1, 1, 1, 1, 1 } end)
    -- 8 still works
    assert.equal(8, nd.empty({ 1, 1, 1, 1, 1, 1, 1, 2 }):ndim())
  end)
end)

describe("NaN payloads read back through the FFI", function()
  local function f32_bits(bits)
    local x = nd.zeros { #bits }
    local p = ffi.cast("uint32_t*", x:data_ptr())
    for i, b in ipairs(bits) do p[i - 1] = b end
    return x
  end

  it("come back as canonical NaNs from item, tolist, totable and tostring", function()
    local x = f32_bits { 0xFFEC0001, 0x7FC00001, 0xFFFFFFFF, 0x7F800000, 0x3F800000 }
    local t = x:tolist()
    for i = 1, 3 do
      assert.equal("number", type(t[i]))
      assert.is_true(t[i] ~= t[i])
    end
    assert.equal(math.huge, t[4])
    assert.equal(1, t[5])
    local v = x[1]:item()
    assert.equal("number", type(v))
    assert.is_true(v ~= v)
    local tt = x:totable()
    assert.is_true(tt[2] ~= tt[2])
    assert.truthy(tostring(x):find("nan", 1, true))
  end)

  it("in float64, and in memory an int32 tensor left behind", function()
    local y = nd.zeros({ 3 }, { dtype = "float64" })
    local q = ffi.cast("uint64_t*", y:data_ptr())
    q[0], q[1], q[2] = 0xFFFC000000000001ULL, 0xFFF8DEADBEEF0001ULL, 0x7FF0000000000001ULL
    for i, v in ipairs(y:totable()) do
      assert.equal("number", type(v), "element " .. i)
      assert.is_true(v ~= v)
    end
    assert.is_true(y[2]:item() ~= y[2]:item())
    local big = nd.zeros { 2000 } -- summarised printing reads element by element
    local p = ffi.cast("uint32_t*", big:data_ptr())
    p[0], p[1999] = 0xFFEC0001, 0xFFEC0001
    assert.truthy(tostring(big):find("nan", 1, true))
    -- an int32 tensor of -1s (0xFFFFFFFF: a NaN as float32) read as floats
    local ints = nd.full({ 64 }, -1, { dtype = "int32" })
    local f = nd.from_pointer(ints:data_ptr(), { 64 }, { owner = ints })
    for _, v in ipairs(f:tolist()) do assert.is_true(v ~= v) end
  end)
end)

describe("non-tensors where a tensor is expected", function()
  it("NDArray methods check self", function()
    local x = nd.ones { 2, 2 }
    local methods = { "ndim", "size", "shape", "dtype", "context", "ctx", "data_ptr", "item",
      "asscalar", "tolist", "totable", "to", "as_in_context", "copyto", "reshape", "slice_view",
      "wait_to_read", "wait_to_write", "astype", "split", "grad", "detach", "zero_grad",
      "backward", "attach_grad", "__tostring" }
    for _, m in ipairs(methods) do
      for _, bad in ipairs { "a", {}, 42 } do
        local ok, err = pcall(function() local r = x[m](bad) return r end)
        assert.is_false(ok, m)
        err = tostring(err)
        assert.truthy(err:find("must be a tensor", 1, true), m .. ": " .. err)
        assert.truthy(err:find(FILE .. ":%d+:"), m .. ": " .. err)
      end
    end
    -- the op methods name the op and the input
    raises("sum: input 1 (data) must be a tensor, got table", function() local _ = x.sum({}) end)
    raises("shape: self must be a tensor, got string", function() local _ = nd.NDArray.shape("a") end)
  end)

  it("mx.nd.reshape on a Lua table", function()
    raises("reshape: self must be a tensor, got table", function() nd.reshape({ 1, 2, 3 }, { 3 }) end)
  end)
end)

describe("sizes and bounds", function()
  it("non-integer sizes are errors, not truncated", function()
    raises("empty: dim 1 must be a non-negative integer, got 2.5", function() nd.empty { 2.5 } end)
    raises("empty: dim 2 must be a non-negative integer, got -1", function() nd.empty { 2, -1 } end)
    raises("zeros: shape must be a list of non-negative integers", function() nd.zeros { 2.5 } end)
    raises("from_pointer: dim 1 must be a non-negative integer",
      function() nd.from_pointer(ffi.new("float[4]"), { 1.5 }) end)
  end)

  it("slice bounds and steps at or past 2^63 are rejected, not 'not given'", function()
    local x = nd.array { 1, 2, 3, 4 }
    raises("slice: option begin must be", function() nd.slice(x, { begin = { 1e30 }, ["end"] = { 2 } }) end)
    raises("slice: option end must be", function() nd.slice(x, { begin = { 1 }, ["end"] = { -1e30 } }) end)
    raises("slice: option step must be", function()
      nd.slice(x, { begin = { 1 }, ["end"] = { 4 }, step = { 2 ^ 63 } })
    end)
    raises("{1e+30}", function() nd.slice(x, { begin = { 1e30 }, ["end"] = { 2 } }) end)
    raises("slice_axis: option begin must be",
      function() nd.slice_axis(x, { axis = 1, begin = 2 ^ 63, ["end"] = 2 }) end)
    -- in range still works
    assert.same({ 2, 3 }, nd.slice(x, { begin = { 2 }, ["end"] = { 3 } }):tolist())
  end)
end)

describe("options that are not tables", function()
  it("are an error naming the op at the user's line", function()
    local x = nd.ones { 2, 3 }
    raises("sum: options must be a table, got number", function() local _ = x:sum(1) end)
    raises("exp: options must be a table, got string", function() local _ = nd.exp(x, "fast") end)
    raises("add: options must be a table, got number", function() local _ = nd.add(x, x, 3) end)
    local xt = x:transpose()
    raises("dot: options must be a table, got boolean", function() local _ = nd.dot(x, xt, true) end)
    raises("options must be a table, got number", function() local _ = nd.concat({ x, x }, 2) end)
    raises("zeros: options must be a table, got number", function() local _ = nd.zeros({ 2 }, 5) end)
    raises("split: options must be a table, got number", function() local _ = x:split(2) end)
    raises("empty: options must be a table, got number", function() local _ = nd.empty({ 2 }, 1) end)
    raises("from_pointer: options must be a table", function()
      local _ = nd.from_pointer(ffi.new("float[2]"), { 2 }, 7)
    end)
  end)

  it("nd.empty's errors blame the caller's line (no tail call)", function()
    raises("empty: unknown dtype", function() nd.empty({ 2 }, { dtype = "nope" }) end)
    raises("bad ctx 7", function() nd.empty({ 2 }, { ctx = 7 }) end)
  end)
end)
