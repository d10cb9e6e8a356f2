-- spec/capi_spec.lua — the C API with no Lua: tools/capi/capi_demo.c runs FullyConnected,
-- Activation, broadcast_add and softmax by their MXNet names from MXNet string attributes
-- and checks the values itself; here we run it and check its exit status and output.
local lib = require("mx.core.lib")

-- The demo sits in CMake's build directory: the one holding the libmx this process
-- loaded (<build>/lib/mx/libmx.so), else MX_BUILD_DIR, else ./build.
local function demo_path()
  local cands = {}
  local dir = lib.libpath:match("^(.*)/lib/mx/[^/]+$") or lib.libpath:match("^(.*)/[^/]+$")
  if dir then cands[#cands + 1] = dir .. "/capi_demo" end
  if os.getenv("MX_BUILD_DIR") then cands[#cands + 1] = os.getenv("MX_BUILD_DIR") .. "/capi_demo" end
  cands[#cands + 1] = "build/capi_demo"
  for _, p in ipairs(cands) do
    local f = io.open(p, "rb")
    if f then
      f:close()
      return p
    end
  end
  return nil, table.concat(cands, ", ")
end

local run = require("helpers.sh")

describe("C API without Lua (capi_demo)", function()
  local path, tried = demo_path()

  it("is built next to libmx", function()
    assert(path, "capi_demo not found (tried " .. tostring(tried) .. "): build the default target")
  end)

  it("runs the MXNet-named ops and matches the hand-computed values", function()
    assert(path, "capi_demo not built")
    local rc, out = run("'" .. path .. "'")
    assert.equals(0, rc, out)
    for _, line in ipairs {
      "found FullyConnected %-> op %d+ %(fully_connected%)",
      "found Activation %-> op %d+ %(activation%)",
      "found broadcast_add %-> op %d+ %(add%)",
      "found softmax %-> op %d+ %(softmax%)",
      "ok FullyConnected", "ok Activation", "ok broadcast_add", "ok softmax",
      "PASSED %(0 failures%)",
    } do
      assert.truthy(out:find(line), "missing \"" .. line .. "\" in:\n" .. out)
    end
    assert.falsy(out:find("FAIL"), out)
  end)

  it("reports malformed and unknown attributes with the op, key and value", function()
    assert(path, "capi_demo not built")
    local _, out = run("'" .. path .. "'")
    for _, line in ipairs {
      'ok num_hidden="ten": error: fully_connected: attribute num_hidden="ten"',
      'ok unknown key num_hiden: error: fully_connected: unknown attribute num_hiden="2"',
    } do
      assert.truthy(out:find(line, 1, true), out)
    end
  end)
end)

describe("mx_op_params_parse (MXNet string attributes)", function()
  local ffi = require("ffi")
  local C = lib.C

  -- Parses attrs (a list of {key, value}) for op `name`: the struct, or nil and the message.
  local function parse(name, attrs)
    local id = C.mx_op_find(name)
    local op = assert(lib.ops[id + 1], name)
    local n = #attrs
    local keys, vals = ffi.new("const char *[?]", n + 1), ffi.new("const char *[?]", n + 1)
    for i, kv in ipairs(attrs) do keys[i - 1], vals[i - 1] = kv[1], kv[2] end
    local P = op.ctype and ffi.new(op.ctype) or nil
    if C.mx_op_params_parse(id, n, keys, vals, P) ~= 0 then
      return nil, ffi.string(C.mx_last_error())
    end
    return P
  end
  local function tuple(t)
    local r = { n = t.n }
    for i = 0, t.n - 1 do r[#r + 1] = tonumber(t.v[i]) end
    return r
  end
  local NONE = -2 ^ 63

  it("reads tuples in MXNet's spellings", function()
    for _, case in ipairs {
      { "(3, 3)", { 3, 3, n = 2 } }, { "[3,3]", { 3, 3, n = 2 } }, { "(4,)", { 4, n = 1 } },
      { "5", { 5, n = 1 } }, { "()", { n = 0 } }, { " ( 0 , -1 ) ", { 0, -1, n = 2 } },
    } do
      local P = assert(parse("Reshape", { { "shape", case[1] } }))
      assert.are.same(case[2], tuple(P.shape), case[1])
    end
    assert.is_nil(parse("Reshape", { { "shape", "(3, x)" } }))
    assert.is_nil(parse("Reshape", { { "shape", "(" .. ("1,"):rep(16) .. "1)" } })) -- 17 > 16
  end)

  it("reads bools, ints, floats (inf, nan), enums and dtypes", function()
    for v, want in pairs { True = true, ["true"] = true, ["1"] = true, False = false, ["0"] = false } do
      assert.equals(want, parse("FullyConnected", { { "no_bias", v } }).no_bias, v)
    end
    local P = assert(parse("FullyConnected", { { "num_hidden", "7" }, { "flatten", "False" } }))
    assert.is_true(P.has_num_hidden)
    assert.equals(7, tonumber(P.num_hidden))
    assert.is_false(P.flatten)
    assert.is_false(assert(parse("FullyConnected", { { "num_hidden", "None" } })).has_num_hidden)
    P = assert(parse("clip", { { "a_min", "-inf" }, { "a_max", "nan" } }))
    assert.is_true(P.has_a_min and P.has_a_max)
    assert.equals(-math.huge, P.a_min)
    assert.is_true(P.a_max ~= P.a_max)
    assert.equals(0.25, assert(parse("Dropout", { { "p", "0.25" } })).p)
    assert.equals(2, assert(parse("Activation", { { "act_type", "tanh" } })).act_type)
    assert.equals(2, assert(parse("Cast", { { "dtype", "float16" } })).dtype)
    assert.equals(6, assert(parse("Cast", { { "dtype", "int64" } })).dtype)
    local _, msg = parse("Activation", { { "act_type", "gelu" } })
    assert.truthy(msg:find('activation: attribute act_type="gelu": expected one of relu, sigmoid',
      1, true), msg)
    _, msg = parse("Cast", { { "dtype", "float33" } })
    assert.truthy(msg:find('cast: attribute dtype="float33"', 1, true), msg)
  end)

  it("keeps axes 0-based and slice bounds as MXNet writes them", function()
    local P = assert(parse("SwapAxis", { { "dim1", "0" }, { "dim2", "2" } }))
    assert.equals(0, tonumber(P.dim1))
    assert.equals(2, tonumber(P.dim2))
    assert.equals(-1, tonumber(assert(parse("softmax", { { "axis", "-1" } })).axis))
    P = assert(parse("slice", { { "begin", "(None, 1)" }, { "end", "(2, None)" }, { "step", "(1, -1)" } }))
    assert.are.same({ NONE, 1, n = 2 }, tuple(P.begin))
    assert.are.same({ 2, NONE, n = 2 }, tuple(P["end"]))
    assert.are.same({ 1, -1, n = 2 }, tuple(P.step))
    P = assert(parse("slice_axis", { { "axis", "1" }, { "begin", "1" }, { "end", "None" } }))
    assert.is_false(P.has_end)
    assert.equals(1, tonumber(P.begin))
    assert.is_true(assert(parse("slice_axis", { { "end", "-1" } })).has_end)
  end)

  it("takes ctx on creation ops and skips symbol JSON's __hint__ attributes", function()
    local P = assert(parse("_zeros", { { "shape", "(2, 3)" }, { "ctx", "gpu(1)" }, { "dtype", "int32" } }))
    assert.equals(2, P.dev_type)
    assert.equals(1, P.dev_id)
    assert.equals(4, P.dtype)
    P = assert(parse("_ones", { { "ctx", "cpu(0)" } }))
    assert.equals(1, P.dev_type)
    local _, msg = parse("_zeros", { { "ctx", "tpu(0)" } })
    assert.truthy(msg:find('attribute ctx="tpu(0)"', 1, true), msg)
    assert.is_truthy(parse("FullyConnected", { { "__lr_mult__", "2" }, { "num_hidden", "3" } }))
  end)

  it("rejects malformed values and unknown keys naming the op, the key and the value", function()
    local _, msg = parse("FullyConnected", { { "num_hidden", "ten" } })
    assert.truthy(msg:find('fully_connected: attribute num_hidden="ten": expected an integer', 1, true), msg)
    _, msg = parse("FullyConnected", { { "num_hidden", "3.5" } })
    assert.truthy(msg:find('num_hidden="3.5"', 1, true), msg)
    _, msg = parse("Activation", { { "act", "relu" } })
    assert.truthy(msg:find('activation: unknown attribute act="relu" (it takes: act_type)', 1, true), msg)
    _, msg = parse("relu", { { "alpha", "1" } })
    assert.truthy(msg:find('relu: unknown attribute alpha="1" (it takes no attributes)', 1, true), msg)
    _, msg = parse("softmax", { { "axis", "" } })
    assert.truthy(msg:find('softmax: attribute axis=""', 1, true), msg)
  end)

  it("checks Concat's num_args against the inputs in mx_op_invoke_attrs", function()
    local shape = ffi.new("int64_t[2]", 2, 2)
    local t = ffi.new("mx_tensor *[1]")
    assert.equals(0, C.mx_tensor_empty(2, shape, 0, 1, 0, t))
    local ins = ffi.new("mx_tensor *[3]", t[0], t[0], t[0])
    local keys, vals = ffi.new("const char *[2]", "dim", "num_args"), ffi.new("const char *[2]", "0", "2")
    local out = ffi.new("mx_tensor *[1]")
    local op = C.mx_op_find("Concat")
    assert.equals(-1, C.mx_op_invoke_attrs(op, 3, ins, 2, keys, vals, 1, out))
    assert.truthy(ffi.string(C.mx_last_error()):find('num_args="2" but 3 inputs', 1, true))
    vals[1] = "3"
    assert.equals(0, C.mx_op_invoke_attrs(op, 3, ins, 2, keys, vals, 1, out))
    assert.equals(6, tonumber(C.mx_tensor_dim(out[0], 0)))
    C.mx_tensor_release(out[0])
    C.mx_tensor_release(t[0])
  end)

  it("runs split (SliceChannel) with num_outputs=\"3\": three outputs (mx_op_num_outputs_for)",
    function()
    local nd = require("mx").nd
    local x = nd.arange(0, 12):reshape { 2, 6 }
    local ins = ffi.new("mx_tensor *[1]", x.h)
    local keys, vals = ffi.new("const char *[2]", "num_outputs", "axis"), ffi.new("const char *[2]", "3", "1")
    local op = C.mx_op_find("SliceChannel")
    assert.equals(C.mx_op_find("split"), op)
    assert.equals(-1, C.mx_op_num_outputs(op)) -- the count depends on the params
    local P = parse("split", { { "num_outputs", "3" }, { "axis", "1" } })
    assert.equals(3, C.mx_op_num_outputs_for(op, P))
    assert.equals(-1, C.mx_op_num_outputs_for(op, parse("split", {})))
    assert.equals(-1, C.mx_op_num_outputs_for(-5, P))
    local out = ffi.new("mx_tensor *[3]")
    assert.equals(-1, C.mx_op_invoke_attrs(op, 1, ins, 2, keys, vals, 2, out))
    assert.truthy(ffi.string(C.mx_last_error()):find("split: has 3 output(s), 2 slot(s) given", 1, true))
    assert.equals(0, C.mx_op_invoke_attrs(op, 1, ins, 2, keys, vals, 3, out))
    local want = { { { 0, 1 }, { 6, 7 } }, { { 2, 3 }, { 8, 9 } }, { { 4, 5 }, { 10, 11 } } }
    for k = 1, 3 do
      assert.equals(2, C.mx_tensor_ndim(out[k - 1]))
      local piece = nd._wrap(out[k - 1]) -- takes the reference invoke returned
      assert.same({ 2, 2 }, piece:shape())
      assert.same(want[k], piece:totable())
    end
    vals[0] = "4"
    assert.equals(-1, C.mx_op_invoke_attrs(op, 1, ins, 2, keys, vals, 4, out))
    assert.truthy(ffi.string(C.mx_last_error()):find("not divisible by num_outputs=4", 1, true))
  end)
end)
