-- spec/nd_spec.lua — the mx.nd Lua API: construction, properties, zero-copy access,
-- 1-based indexing and assignment, printing, metamethods, the calling convention
-- (options table, out=, unknown options) and error positions at the caller's line.
local mx = require("mx")
local ffi = require("ffi")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "nd_spec.lua"

describe("mx.nd.array", function()
  it("builds from nested tables, numbers and booleans", function()
    local x = nd.array({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.same({ 2, 3 }, x:shape())
    assert.equal(2, x:ndim())
    assert.equal(6, x:size())
    assert.equal("float32", x:dtype())
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, x:totable())
    local s = nd.array(3.5)
    assert.equal(0, s:ndim())
    assert.equal(3.5, s:item())
    assert.equal(3.5, s:totable())
    assert.same({ 1, 0 }, nd.array({ true, false }):tolist())
    assert.same({ 0 }, nd.array({}):shape())
  end)

  it("honours dtype= and ctx=", function()
    local x = nd.array({ 1.9, -2.9 }, { dtype = "int32", ctx = mx.cpu() })
    assert.equal("int32", x:dtype())
    assert.same({ 1, -2 }, x:tolist())
    assert.equal("cpu", x:context().device_type)
    assert.equal(0, x:context().device_id)
    assert.equal("cpu(0)", tostring(x:ctx()))
    assert.equal("float64", nd.array(x, { dtype = "float64" }):dtype())
  end)

  it("copies from a cdata pointer with shape=", function()
    local buf = ffi.new("float[6]", { 1, 2, 3, 4, 5, 6 })
    local x = nd.array(buf, { shape = { 3, 2 } })
    buf[0] = 100
    assert.same({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, x:totable())
    local d = ffi.new("double[2]", { 0.5, 1.5 })
    assert.same({ 0.5, 1.5 }, nd.array(d, { shape = { 2 }, dtype = "float64" }):tolist())
  end)

  it("rejects ragged tables, bad elements and unknown options at the caller's line", function()
    H.assert_error(function(mark) mark() nd.array({ { 1, 2 }, { 3 } }) end, FILE, "ragged")
    H.assert_error(function(mark) mark() nd.array({ 1, "a" }) end, FILE, "element [2]")
    H.assert_error(function(mark) mark() nd.array({ 1 }, { dtyp = "int32" }) end, FILE,
      "unknown option 'dtyp'")
    H.assert_error(function(mark) mark() nd.array({ 1 }, { dtype = "int33" }) end, FILE, "int33")
    H.assert_error(function(mark) mark() nd.array(ffi.new("float[2]")) end, FILE, "shape=")
  end)
end)

describe("zero-copy access", function()
  it("data_ptr points at the tensor's memory", function()
    local x = nd.zeros({ 2, 2 }, { dtype = "int32" })
    local p = x:data_ptr()
    p[3] = 42
    assert.equal(42, x[2][2]:item())
    assert.equal(42, x[-1][-1]:item())
  end)

  it("from_pointer wraps external memory without copying and keeps the owner alive", function()
    local buf = ffi.new("double[4]", { 1, 2, 3, 4 })
    local x = nd.from_pointer(buf, { 2, 2 }, { dtype = "float64", owner = buf })
    buf[1] = 20
    assert.equal(20, x[1][2]:item())
    x[2] = 7
    assert.equal(7, buf[2])
    -- the owner lives as long as the tensor, or a view of it, does
    local weak = setmetatable({}, { __mode = "v" })
    local y, v
    do
      local b2 = ffi.new("float[6]", { 5, 6, 7, 8, 9, 10 })
      weak[1] = b2
      y = nd.from_pointer(b2, { 3, 2 }, { owner = b2 })
      v = y[{ { 2, 3 } }]:reshape { 4 }
    end
    collectgarbage("collect")
    collectgarbage("collect")
    assert.is_not_nil(weak[1])
    assert.same({ 5, 6, 7, 8, 9, 10 }, y:tolist())
    y = nil -- luacheck: ignore 311
    collectgarbage("collect")
    collectgarbage("collect")
    assert.is_not_nil(weak[1])
    assert.same({ 7, 8, 9, 10 }, v:tolist())
    v = nil -- luacheck: ignore 311
    collectgarbage("collect")
    collectgarbage("collect")
    assert.is_nil(weak[1])
  end)
end)

describe("indexing", function()
  local function x234() return nd.arange(0, 24):reshape { 2, 3, 4 } end

  it("x[i] is a 1-based view of row i; negatives count from the end", function()
    local x = x234()
    assert.same({ 3, 4 }, x[1]:shape())
    assert.equal(12, x[2][1][1]:item())
    assert.equal(23, x[-1][-1][-1]:item())
    local r = x[2]
    r[1] = -1
    assert.equal(-1, x[2][1][4]:item())
  end)

  it("x[{...}] takes inclusive ranges on any axes; integers drop their axis", function()
    local x = x234()
    local a = x[{ { 1, 2 }, { 2, 3 } }]
    assert.same({ 2, 2, 4 }, a:shape())
    assert.same({ 4, 5, 6, 7 }, a[1][1]:tolist())
    local b = x[{ {}, 2, { -2, -1 } }]
    assert.same({ 2, 2 }, b:shape())
    assert.same({ { 6, 7 }, { 18, 19 } }, b:totable())
    assert.same({ 3, 4 }, x[{ 2 }]:shape())
    assert.equal(0, x[{ 2, 3, 4 }]:ndim())
    assert.equal(23, x[{ 2, 3, 4 }]:item())
    assert.same({ 1, 3, 4 }, x[{ { 2 } }]:shape())
    local v = x[{ { 2, 2 } }] -- leading-axis range: a view
    v[1][1][1] = 99
    assert.equal(99, x[2][1][1]:item())
  end)

  it("assigns numbers and tensors through views and non-leading ranges", function()
    local x = x234()
    x[1] = 5
    assert.same({ 5, 5, 5, 5 }, x[1][3]:tolist())
    x[{ {}, 2, { 1, 2 } }] = 100
    assert.same({ 100, 100, 18, 19 }, x[2][2]:tolist())
    x[{ 2, {}, 4 }] = nd.array({ 1, 2, 3 })
    assert.same({ 1, 2, 3 }, x[2]:slice_axis { axis = 2, begin = 4 }:tolist())
    x[{ {}, {}, 1 }] = nd.array({ 7, 8, 9 }) -- broadcasts over the (2, 3) selection (NumPy)
    assert.same({ { 7, 8, 9 }, { 7, 8, 9 } }, x[{ {}, {}, 1 }]:totable())
    x[{ {}, 1, {} }] = nd.array({ { 1 }, { 2 } }) -- (2, 1) over (2, 4)
    assert.same({ 2, 2, 2, 2 }, x[2][1]:tolist())
    x[{ { 1, 2 }, 3 }] = nd.array({ 9, 9, 9, 9 })
    assert.same({ 9, 9, 9, 9 }, x[1][3]:tolist())
    x[-1] = nd.zeros { 3, 4 }
    assert.same({ 0, 0, 0, 0 }, x[2][1]:tolist())
  end)

  it("reports bad indices at the caller's line", function()
    local x = x234()
    H.assert_error(function(mark) mark() return x[3] end, FILE, "out of range", "size 2")
    H.assert_error(function(mark) mark() return x[0] end, FILE, "1-based")
    H.assert_error(function(mark) mark() return x[{ 1, 1, 1, 1 }] end, FILE, "4 ranges")
    H.assert_error(function(mark) mark() x[{ {}, 5 }] = 1 end, FILE, "out of range")
    H.assert_error(function(mark) mark() x[1] = "a" end, FILE, "number or a tensor")
    H.assert_error(function(mark) mark() x[{ {}, 1 }] = nd.ones { 5 } end, FILE, "broadcast")
  end)
end)

describe("printing", function()
  it("prints values, shape, dtype and device", function()
    local s = tostring(nd.array({ { 1, 2 }, { 3, 4 } }))
    assert.truthy(s:find("[[1. 2.]", 1, true))
    assert.truthy(s:find("<NDArray 2x2 float32 @cpu(0)>", 1, true))
    assert.truthy(tostring(nd.array({ 1, 2 }, { dtype = "int64" })):find("[1 2]", 1, true))
    assert.truthy(tostring(nd.array(2)):find("scalar", 1, true))
  end)

  it("summarises large tensors", function()
    local s = tostring(nd.arange(0, 5000))
    assert.truthy(s:find("...", 1, true))
    assert.truthy(s:find("4999.", 1, true))
    assert.is_nil(s:find("2500.", 1, true))
    assert.truthy(s:find("<NDArray 5000 float32", 1, true))
    assert.is_true(#s < 400)
    -- only the shown corners are read: a 4M-element tensor prints at once
    local big = nd.arange(0, 4000000):reshape { 2000, 2000 }
    local t0 = os.clock()
    local b = tostring(big)
    assert.is_true(os.clock() - t0 < 0.5)
    assert.truthy(b:find("1999.]", 1, true))
    assert.truthy(b:find("...", 1, true))
    assert.equal(7, select(2, b:gsub("\n", "\n"))) -- 6 rows + "..." row, then the footer
  end)
end)

describe("calling convention", function()
  it("has arithmetic metamethods with numbers on either side", function()
    local x = nd.array({ 1, 2, 4 })
    assert.same({ 3, 4, 6 }, (x + 2):tolist())
    assert.same({ 1, 0, -2 }, (2 - x):tolist())
    assert.same({ 3, 6, 12 }, (3 * x):tolist())
    assert.same({ 4, 2, 1 }, (4 / x):tolist())
    assert.same({ 1, 4, 16 }, (x ^ 2):tolist())
    assert.same({ 2, 4, 16 }, (2 ^ x):tolist())
    assert.same({ -1, -2, -4 }, (-x):tolist())
    assert.same({ 2, 4, 8 }, (x + x):tolist())
    assert.equal(3, #x)
  end)

  it("writes into out= and rejects unknown options at the caller's line", function()
    local x = nd.array({ { 1, 2 }, { 3, 4 } })
    local o = nd.zeros { 2, 2 }
    assert.equal(o, nd.transpose(x, { out = o }))
    assert.same({ { 1, 3 }, { 2, 4 } }, o:totable())
    H.assert_error(function(mark) mark() x:transpose { axis = { 2, 1 } } end, FILE,
      "unknown option 'axis'", "valid: axes")
    H.assert_error(function(mark) mark() nd.transpose(x, { out = nd.zeros { 3 } }) end, FILE,
      "out=", "(3,)")
    H.assert_error(function(mark) mark() nd.transpose(3) end, FILE, "must be a tensor")
    H.assert_error(function(mark) mark() x:expand_dims { axis = 0 } end, FILE, "1-based axis")
  end)

  it("ops with three or more inputs and several outputs: arity, out= and errors", function()
    -- pick_backward, the optimizers and dropout use generated fixed-arity wrappers
    local d, idx, g = nd.zeros { 2, 3 }, nd.array({ 3, 1 }), nd.array({ 5, 7 })
    assert.same({ { 0, 0, 5 }, { 7, 0, 0 } }, nd.pick_backward(d, idx, g):totable())
    local o = nd.ones { 2, 3 }
    assert.equal(o, nd.pick_backward(d, idx, g, { out = o }))
    assert.same({ { 0, 0, 5 }, { 7, 0, 0 } }, o:totable())
    local w, m = nd.array({ 1, 2 }), nd.zeros { 2 }
    local w2, m2 = nd.sgd_mom_update(w, nd.array({ 1, 1 }), m, { lr = 0.5, momentum = 0 })
    assert.same({ 0.5, 1.5 }, w2:tolist())
    assert.same({ -0.5, -0.5 }, m2:tolist())
    local a, b = nd.sgd_mom_update(w, nd.array({ 1, 1 }), m, { lr = 0.5, out = { w, m } })
    assert.equal(w, a)
    assert.equal(m, b)
    assert.same({ 0.5, 1.5 }, w:tolist())
    H.assert_error(function(mark) mark() nd.pick_backward(d, idx) end, FILE,
      "pick_backward: input 3", "got nil")
    H.assert_error(function(mark) mark() nd.pick_backward(d, idx, { axis = 2 }) end, FILE,
      "input 3", "got table")
    H.assert_error(function(mark) mark() nd.pick_backward(d, idx, g, g) end, FILE,
      "takes 3 tensor input(s)")
    H.assert_error(function(mark) mark() nd.pick_backward(d, idx, g, 5) end, FILE,
      "unexpected argument 4")
    H.assert_error(function(mark) mark() nd.pick_backward(d, idx, g, {}, {}) end, FILE,
      "unexpected argument 5")
    H.assert_error(function(mark) mark() nd.pick_backward(d, idx, g, { axes = 1 }) end, FILE,
      "unknown option 'axes'")
  end)

  it("astype and copy are methods; copy is independent", function()
    local x = nd.array({ 1.5, 2.5 })
    local c = x:copy()
    c[1] = 0
    assert.same({ 1.5, 2.5 }, x:tolist())
    assert.same({ 1, 2 }, x:astype("int64"):tolist())
  end)
end)

describe("robustness", function()
  it("survives random params on the la ops: a result or a Lua error, never a crash", function()
    local lib = require("mx.core.lib")
    local r = H.rng(2024)
    local function ri(a, b) return a + math.floor((r() + 1) / 2 * (b - a + 1)) % (b - a + 1) end
    local vals = { 0, 1, 2, 3, -1, -2, -3, 5, 9, -9, 2 ^ 62, -2 ^ 40, 1.5 }
    local function rv() return vals[ri(1, #vals)] end
    local function rl()
      local t = {}
      for i = 1, ri(0, 4) do t[i] = r() < -0.8 and false or rv() end
      return t
    end
    local shapes = { {}, { 0 }, { 3 }, { 2, 3 }, { 1, 3, 1 }, { 2, 0, 3 }, { 4, 1, 2, 3 } }
    local names = { "transpose", "swapaxes", "expand_dims", "squeeze", "flatten", "slice",
      "slice_axis", "slice_assign_scalar", "tile", "repeat", "flip", "cast", "copy", "reshape",
      "pick", "take", "one_hot", "dot", "batch_dot", "matmul", "fully_connected", "concat", "stack",
      "slice_assign", "reshape_like", "take_backward", "pick_backward" }
    local ok_count = 0
    for _ = 1, 600 do
      local op = lib.ops_by_name[names[ri(1, #names)]]
      local args = {}
      local nin = op.nin == -1 and ri(1, 3) or op.nin
      for i = 1, nin do
        local s = shapes[ri(1, #shapes)]
        args[i] = r() < 0 and nd.zeros(s) or nd.ones(s, { dtype = "int32" })
      end
      local o = {}
      for _, p in ipairs(op.params) do
        if r() < 0 then
          local t = p.type
          if t == "axes" or t == "ints" or t == "shape" then o[p.name] = rl()
          elseif t == "bool" then o[p.name] = r() < 0
          elseif t == "dtype" then o[p.name] = ({ "float32", "int8", "bool", "float16" })[ri(1, 4)]
          elseif t == "enum" then o[p.name] = p.values[ri(1, #p.values)]
          else o[p.name] = rv() end
        end
      end
      args[nin + 1] = o
      local ok, res = pcall(nd[op.name], unpack(args, 1, nin + 1))
      if ok then
        ok_count = ok_count + 1
        if nd.is_tensor(res) and res:size() < 1e5 then res:tolist() end
      else
        assert.equal("string", type(res))
        assert.truthy(res:find(op.name, 1, true) or res:find("index", 1, true), res)
      end
    end
    assert.is_true(ok_count > 50)
  end)
end)
