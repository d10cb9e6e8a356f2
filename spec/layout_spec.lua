-- Tensor layouts: the oneDNN blocked layout, kept through the oneDNN
-- eltwise kernels with no reorder, and converted to row-major for every other reader.
-- Every value is compared against the same ops on row-major inputs.
local mx = require("mx")
local nd = mx.nd
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C

local HAVE = false -- whether this build has oneDNN (to_layout then works)
do
  local out = ffi.new("mx_tensor*[1]")
  local x = nd.array({ { { { 1 } } } })
  if C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, "nChw8c", out) == 0 then
    HAVE = true
    nd._wrap(out[0])
  end
end

-- x (row-major) in the oneDNN format fmt, as a new tensor
local function blocked(x, fmt)
  local out = ffi.new("mx_tensor*[1]")
  local rc = C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, fmt, out)
  assert(rc == 0, ffi.string(C.mx_last_error()))
  return nd._wrap(out[0])
end
local function layout(x) return C.mx_tensor_layout(x.h) end
local function reorders() return tonumber(C.mx_layout_reorders()) end

-- deterministic values of both signs, none zero
local function values(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local flat = {}
  for i = 1, n do flat[i] = math.sin(i * 0.7) * 3 + (i % 2 == 0 and 0.05 or -0.05) end
  return nd.array(flat):reshape(shape)
end

local function flat(t)
  local out = {}
  local function walk(v)
    if type(v) == "table" then for i = 1, #v do walk(v[i]) end else out[#out + 1] = v end
  end
  walk(t)
  return out
end
local function same(a, b, tol)
  local fa, fb = flat(a:tolist()), flat(b:tolist())
  assert.are.equal(#fb, #fa)
  for i = 1, #fa do
    local both_nan = fa[i] ~= fa[i] and fb[i] ~= fb[i]
    assert(both_nan or math.abs(fa[i] - fb[i]) <= (tol or 0),
      ("element %d: %s vs %s"):format(i, fa[i], fb[i]))
  end
end

describe("layouts", function()
  it("row-major tensors report layout 0; to_layout rejects unknown formats and layouts", function()
    local x = values({ 2, 3, 2, 2 })
    assert.are.equal(0, layout(x))
    local out = ffi.new("mx_tensor*[1]")
    assert.are_not.equal(0, C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, "nChw7x", out))
    assert.truthy(ffi.string(C.mx_last_error()):find("nChw7x", 1, true))
    assert.are_not.equal(0, C.mx_tensor_to_layout(x.h, 42, "nChw8c", out))
    assert.truthy(ffi.string(C.mx_last_error()):find("layout code 42", 1, true))
    -- row-major to row-major: a new tensor with the same values
    assert.are.equal(0, C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ROW_MAJOR, nil, out))
    local y = nd._wrap(out[0])
    assert.is_false(C.mx_tensor_shares_storage(x.h, y.h))
    same(x, y)
  end)

  if not HAVE then
    pending("this build has no oneDNN: the blocked layout is not available")
    return
  end

  it("rejects formats that do not fit the tensor and non-float32 tensors", function()
    local out = ffi.new("mx_tensor*[1]")
    local x = values({ 2, 3 })
    assert.are_not.equal(0, C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, "nChw8c", out))
    assert.truthy(ffi.string(C.mx_last_error()):find("nChw8c", 1, true))
    local i = nd.array({ { { { 1, 2 } } } }, { dtype = "int32" })
    assert.are_not.equal(0, C.mx_tensor_to_layout(i.h, C.MX_LAYOUT_ONEDNN, "nChw8c", out))
    assert.truthy(ffi.string(C.mx_last_error()):find("float32", 1, true))
  end)

  it("round-trips f32 4-d tensors through blocked formats, padded channels included", function()
    local cases = { { { 2, 3, 4, 5 }, "nChw8c" }, { { 1, 17, 3, 3 }, "nChw16c" },
                    { { 2, 16, 2, 2 }, "nChw8c" }, { { 3, 5, 1, 7 }, "nChw16c" },
                    { { 2, 3, 4, 5 }, "nhwc" }, { { 1, 20, 2, 3 }, "aBcd4b" } }
    for _, c in ipairs(cases) do
      local x = values(c[1])
      local b = blocked(x, c[2])
      assert.are.equal(C.MX_LAYOUT_ONEDNN, layout(b))
      assert.are.same(x:shape(), b:shape())
      -- back through to_layout (a converted copy: b stays blocked) ...
      local out = ffi.new("mx_tensor*[1]")
      assert.are.equal(0, C.mx_tensor_to_layout(b.h, C.MX_LAYOUT_ROW_MAJOR, nil, out))
      local r = nd._wrap(out[0])
      assert.are.equal(0, layout(r))
      assert.are.equal(C.MX_LAYOUT_ONEDNN, layout(b))
      same(x, r)
      -- ... and through a reader, which converts b in place
      same(x, b)
      assert.are.equal(0, layout(b))
    end
  end)

  it("keeps relu -> relu -> tanh blocked with 0 reorders; printing then costs 1", function()
    local x = values({ 2, 19, 3, 3 })
    local b = blocked(x, "nChw16c")
    local r0 = reorders()
    local y = nd.activation(nd.relu(nd.relu(b)), { act_type = "tanh" })
    y:wait_to_read()
    assert.are.equal(0, reorders() - r0)
    assert.are.equal(C.MX_LAYOUT_ONEDNN, layout(y))
    local want = nd.activation(nd.relu(nd.relu(x)), { act_type = "tanh" })
    local s = tostring(y)
    assert.are.equal(1, reorders() - r0)
    assert.truthy(s:find("<NDArray 2x19x3x3 float32 @cpu(0)>", 1, true))
    same(want, y, 1e-6) -- (oneDNN's tanh and the row-major kernel's may differ in the last digit)
    assert.are.equal(1, reorders() - r0) -- converted in place: read again for free
  end)

  it("runs activation relu/sigmoid/tanh on blocked inputs like on row-major ones", function()
    local x = values({ 1, 10, 2, 3 })
    for _, act in ipairs({ "relu", "sigmoid", "tanh" }) do
      local b = blocked(x, "nChw8c")
      local y = nd.activation(b, { act_type = act })
      assert.are.equal(C.MX_LAYOUT_ONEDNN, layout(y))
      same(nd.activation(x, { act_type = act }), y, 1e-6)
    end
    -- softrelu has no oneDNN kernel here: the cpu backend gets a row-major copy
    local y = nd.activation(blocked(x, "nChw8c"), { act_type = "softrelu" })
    assert.are.equal(0, layout(y))
    same(nd.activation(x, { act_type = "softrelu" }), y, 1e-6)
  end)

  it("converts blocked inputs for the cpu backend (div) and out= row-major slots", function()
    local x, z = values({ 2, 3, 2, 2 }), values({ 2, 3, 2, 2 }) * 2 + 1
    local b = blocked(x, "nChw8c")
    local s = b / z
    assert.are.equal(0, layout(s))
    same(x / z, s)
    local o = nd.zeros({ 2, 3, 2, 2 })
    local r = nd.relu(blocked(x, "nChw8c"), { out = o })
    assert.are.equal(o, r)
    assert.are.equal(0, layout(o))
    same(nd.relu(x), o)
  end)

  it("runs same-shape add/sub/mul/maximum/minimum, relu_backward and reduce_to in the layout", function()
    -- C = 3 in 8-channel blocks: the padding must stay zero and never show
    local x, z = values({ 2, 3, 2, 2 }), values({ 2, 3, 2, 2 }) * -0.5 + 1
    z[{ 1, 1, 1, 1 }] = 0 / 0
    local before = reorders()
    for _, f in ipairs { nd.add, nd.sub, nd.mul, nd.maximum, nd.minimum } do
      local r = f(blocked(x, "nChw8c"), blocked(z, "nChw8c"))
      assert.are.equal(1, layout(r))
      same(f(x, z), r)
    end
    local g = nd.relu_backward(blocked(z, "nChw8c"), blocked(x - 5, "nChw8c"))
    assert.are.equal(1, layout(g))
    same(nd.relu_backward(z, x - 5), g)
    local t = nd.reduce_to(blocked(z, "nChw8c"), x)
    assert.are.equal(1, layout(t))
    same(z, t)
    -- the ops themselves reorder nothing: the 13 blocked() conversions and the 7 reads
    -- of results by same() are all there is
    assert.are.equal(13 + 7, reorders() - before)
    -- mixed: a row-major or differently blocked operand is brought to the first's layout
    local m = nd.add(blocked(x, "nChw8c"), z)
    assert.are.equal(1, layout(m))
    same(x + z, m)
    local m2 = nd.mul(blocked(x, "nChw8c"), blocked(z, "nChw16c"))
    same(x * z, m2)
    -- a row-major out= slot receives row-major values
    local o = nd.zeros({ 2, 3, 2, 2 })
    nd.add(blocked(x, "nChw8c"), blocked(z, "nChw8c"), { out = o })
    assert.are.equal(0, layout(o))
    same(x + z, o)
  end)

  it("gives row-major values to tolist, item, data_ptr, tostring and save/load", function()
    local x = values({ 1, 3, 2, 2 })
    assert.are.same(x:tolist(), blocked(x, "nChw8c"):tolist())
    assert.are.equal(tostring(x), tostring(blocked(x, "nChw16c")))
    local one = nd.array({ { { { -2.5 } } } })
    assert.are.equal(-2.5, blocked(one, "nChw8c"):item())
    local b = blocked(x, "nChw8c")
    local p = b:data_ptr()
    assert.are.equal(0, layout(b))
    local fx = flat(x:tolist())
    for i = 1, #fx do assert.are.equal(fx[i], p[i - 1]) end
    local path = os.tmpname()
    nd.save(path, { blocked(x, "nChw16c"), blocked(one, "nChw8c") })
    local l = nd.load(path)
    os.remove(path)
    same(x, l[1])
    same(one, l[2])
  end)

  it("converts a blocked tensor before making a view of it (reshape, slicing)", function()
    local x = values({ 2, 5, 2, 2 })
    local b = blocked(x, "nChw8c")
    local v = b:reshape({ 4, 10 })
    assert.are.equal(0, layout(b))
    same(x:reshape({ 4, 10 }), v)
    local b2 = blocked(x, "nChw16c")
    same(x[2], b2[2])
  end)
end)
