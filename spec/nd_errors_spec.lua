-- spec/nd_errors_spec.lua — the reliability checklist's Lua-side cases: what a careless user can
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

  it("a 0 slice bound (Python's first index) is named as 1-based, not as a bad integer", function()
    local x = nd.array { 1, 2, 3, 4 }
    raises("slice_axis: option begin must be a 1-based index", function()
      nd.slice_axis(x, { axis = 1, begin = 0, ["end"] = 2 })
    end)
    raises("slice: option begin must be a 1-based index or a list", function()
      nd.slice(x, { begin = { 0 }, ["end"] = { 2 } })
    end)
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
    -- (MXNet's zeros(shape, ctx, dtype): a second positional argument is the ctx)
    raises("zeros: bad ctx 5", function() local _ = nd.zeros({ 2 }, 5) end)
    raises("split: options must be a table, got number", function() local _ = x:split(2) end)
    raises("empty: bad ctx 1", function() local _ = nd.empty({ 2 }, 1) end)
    raises("from_pointer: options must be a table", function()
      local _ = nd.from_pointer(ffi.new("float[2]"), { 2 }, 7)
    end)
  end)

  it("a list where the options go is an error naming the op and its options, not ignored", function()
    -- (x:transpose({2, 1}) reversed the axes: the list was dropped)
    local x = nd.ones { 2, 3, 4 }
    raises("transpose: the options table has positional entries (2 at [1]): options go by name (axes)",
      function() local _ = x:transpose({ 2, 1, 3 }) end)
    raises("sum: the options table has positional entries", function() local _ = x:sum({ 1 }) end)
    raises("expand_dims: the options table has positional entries", function()
      local _ = nd.expand_dims(x, { 1 })
    end)
    -- (arange takes MXNet's positional params: a table third is its step)
    raises("arange: option step must be a number, got {2}", function()
      local _ = nd.arange(0, 4, { 2 })
    end)
    raises("softmax: the options table has positional entries", function()
      local _ = nd.softmax(x, { 2, axis = 1 })
    end)
    -- named, and the creation ops' shape lists, still work
    assert.same({ 3, 2, 4 }, x:transpose({ axes = { 2, 1, 3 } }):shape())
    assert.same({ 2, 3 }, nd.zeros { 2, 3, dtype = "int32" }:shape())
    assert.same({ 2 }, nd.full({ 2 }, 7):shape())
  end)

  it("nd.empty's errors blame the caller's line (no tail call)", function()
    raises("empty: unknown dtype", function() nd.empty({ 2 }, { dtype = "nope" }) end)
    raises("bad ctx 7", function() nd.empty({ 2 }, { ctx = 7 }) end)
  end)
end)

describe("errors name the method the user called", function()
  it("to / as_in_ctx / as_in_context / copyto with a bad ctx", function()
    local x = nd.ones { 2, 3 }
    raises("to: bad ctx 7", function() local _ = x:to(7) end)
    raises("to: bad ctx \"tpu\"", function() local _ = x:as_in_ctx("tpu") end)
    raises("to: bad ctx a table", function() local _ = x:as_in_context({}) end)
    raises("copyto: bad ctx true", function() local _ = x:copyto(true) end)
    raises("to: cpu(30): there are 16 CPU devices", function() local _ = x:to(mx.cpu(30)) end)
    raises("to: unknown dtype nope", function() local _ = x:to(mx.cpu(), "nope") end)
    raises("empty: bad ctx 7", function() nd.empty({ 2 }, { ctx = 7 }) end)
    raises("array: bad ctx 7", function() local _ = nd.array({ 1 }, { ctx = 7 }) end)
    -- the core's "copy:" message gets the method's name
    raises("copyto: copy: shape mismatch", function() local _ = x:copyto(nd.zeros { 3 }) end)
    assert.same({ 1, 1, 1, 1, 1, 1 }, x:copyto(mx.cpu()):tolist())
  end)

  it("slice_view, NDArray.__tostring", function()
    local x = nd.ones { 4, 2 }
    raises("slice_view: range start must be a non-zero integer", function()
      local _ = x:slice_view("a", 2)
    end)
    raises("slice_view: range end 9 out of range", function() local _ = x:slice_view(1, 9) end)
    raises("slice_view: 1 ranges for a 0-d tensor", function()
      local _ = nd.array(1):slice_view(1, 1)
    end)
    assert.same({ 2, 2 }, x:slice_view(2, 3):shape())
    raises("index: range start", function() local _ = x[{ { "a", 2 } }] end) -- x[...] keeps "index:"
    raises("NDArray.__tostring: self must be a tensor, got boolean",
      function() local _ = nd.NDArray.__tostring(true) end)
  end)

  it("fixed-arity multi-output ops check out= as a list of their outputs", function()
    local w, g = nd.ones { 3 }, nd.ones { 3 }
    local m, v = nd.zeros { 3 }, nd.zeros { 3 }
    raises("dropout: out= must be a list of 2 tensors (out, mask), got a tensor", function()
      local _ = nd.dropout(w, { out = w })
    end)
    raises("got a table of 2 item(s)", function()
      local _ = nd.adam_update(w, g, m, v, { lr = 0.1, out = { w, m } })
    end)
    raises("adam_update: out= must be a list of 3 tensors", function()
      local _ = nd.adam_update(w, g, m, v, { lr = 0.1, out = { w, m, 1 } })
    end)
    raises("dropout: out= must be a list of 2 tensors", function()
      local _ = nd.dropout(w, { out = {} })
    end)
    local o = { nd.zeros { 3 }, nd.zeros { 3 }, nd.zeros { 3 } }
    local r1, r2, r3 = nd.adam_update(w, g, m, v, { lr = 0.1, out = o })
    assert.equal(o[1], r1)
    assert.equal(o[2], r2)
    assert.equal(o[3], r3)
  end)
end)

describe("int64 values a Lua number cannot hold", function()
  local function big()
    local x = nd.zeros({ 3 }, { dtype = "int64" })
    local p = x:data_ptr()
    p[0], p[1], p[2] = 5, 9007199254740993LL, 2 ^ 60
    return x
  end

  it("tolist / totable / item raise naming the element and its exact value", function()
    local x = big()
    raises("tolist: element 2 (row-major, 1-based) of the int64 tensor is 9007199254740993",
      function() local _ = x:tolist() end)
    raises("totable: element 2", function() local _ = x:totable() end)
    raises("item: element 1 (row-major, 1-based) of the int64 tensor is 9007199254740993",
      function() local _ = x[2]:item() end)
    raises("x:data_ptr()", function() local _ = x[2]:asscalar() end)
  end)

  it("exact values still read as numbers, views included; tostring prints the exact value", function()
    local x = big()
    assert.equal(5, x[1]:item())
    assert.equal(2 ^ 60, x[3]:item())
    assert.same({ 2 ^ 60 }, x:slice_view(3, 3):tolist())
    local y = nd.array({ -3, 0, 2 ^ 53 }, { dtype = "int64" })
    assert.same({ -3, 0, 2 ^ 53 }, y:tolist())
    assert.same({ -3, 0, 2 ^ 53 }, y:totable())
    local p = x:data_ptr()
    p[2] = 9223372036854775807LL
    assert.truthy(tostring(x):find("9007199254740993", 1, true))
    assert.truthy(tostring(x):find("9223372036854775807", 1, true))
    raises("is 9223372036854775807", function() local _ = x[3]:item() end)
  end)

  it("astype copy=false returns x itself when the dtype matches; bad options raise", function()
    local x = nd.ones { 2 }
    assert.are.equal(x, x:astype("float32", { copy = false }))
    local y = x:astype("float32")
    assert.are_not.equal(x, y)
    local z = x:astype("float64", { copy = false })
    assert.are.equal("float64", z:dtype())
    raises("astype: unknown option 'cpy'", function() local _ = x:astype("float32", { cpy = 1 }) end)
    raises("astype: copy must be a boolean", function()
      local _ = x:astype("float32", { copy = 0 })
    end)
  end)

  it("optimizer updates with out=w update w and the states in place (MXNet)", function()
    local w, g, m = nd.ones { 3 }, nd.ones { 3 }, nd.zeros { 3 }
    local r = nd.sgd_mom_update(w, g, m, { lr = 0.1, momentum = 0.9, out = w })
    assert.are.equal(w, r)
    -- mom = 0.9*0 - 0.1*1; w = 1 + mom
    for _, v in ipairs(m:tolist()) do assert.is_true(math.abs(v + 0.1) < 1e-6) end
    assert.is_true(math.abs(w:tolist()[1] - 0.9) < 1e-6)
    local w2, m2, v2 = nd.ones { 3 }, nd.zeros { 3 }, nd.zeros { 3 }
    local ref = { nd.adam_update(w2, g, m2, v2, { lr = 0.1 }) }
    nd.adam_update(w2, g, m2, v2, { lr = 0.1, out = w2 })
    assert.are.same(ref[1]:tolist(), w2:tolist())
    assert.are.same(ref[2]:tolist(), m2:tolist())
    assert.are.same(ref[3]:tolist(), v2:tolist())
  end)
end)
