-- mx.onnx's import API as MXNet 1.9's (import_model, import_to_gluon,
-- get_model_metadata), its errors, external data under the model's directory only, and
-- malformed files (truncations, byte flips) rejected cleanly. The op coverage is
-- spec/onnx_conformance_spec.lua's; real models spec/onnx_models_spec.lua's.
local mx = require("mx")
local onnx = require("mx.onnx")
local B = require("helpers.bytes")
local sh = require("helpers.sh")

local DATA = "/usr/share/libonnx-testdata/data/"
local FIX = "spec/fixtures/onnx_ext/"

local function have(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

local function tmpdir()
  local p = io.popen("mktemp -d /tmp/luamx_onnx.XXXXXX")
  local d = p:read("*l")
  p:close()
  return d
end

local function close_to(a, b, tol)
  local x, y = a:reshape { -1 }:tolist(), b:reshape { -1 }:tolist()
  assert.equals(#x, #y)
  for i = 1, #x do
    assert.is_true(math.abs(x[i] - y[i]) <= tol * (1 + math.abs(y[i])), i .. ": " .. x[i] .. " vs " .. y[i])
  end
end

describe("mx.onnx import", function()
  local CONV = DATA .. "pytorch-converted/test_Conv2d"

  it("import_model gives sym, arg_params, aux_params that bind and run", function()
    if not have(CONV .. "/model.onnx") then pending("libonnx-testdata is not installed") return end
    local x = onnx.load_tensor(CONV .. "/test_data_set_0/input_0.pb")
    local want = onnx.load_tensor(CONV .. "/test_data_set_0/output_0.pb")
    local meta = onnx.get_model_metadata(CONV .. "/model.onnx")
    local in_name = meta.input_tensor_data[1][1]
    local shapes = { input_shapes = { [in_name] = x:shape() } }
    local sym, args, aux = onnx.import_model(CONV .. "/model.onnx", shapes)
    assert.is_truthy(mx.sym and sym.list_arguments)
    local n = 0
    for name, v in pairs(args) do
      n = n + 1
      assert.is_true(mx.nd.is_tensor(v), name)
    end
    assert.is_true(n >= 1)
    assert.same({}, aux)
    local bind_args = { [in_name] = x }
    for k, v in pairs(args) do bind_args[k] = v end
    local exe = sym:bind(mx.cpu(), bind_args)
    exe:forward()
    close_to(exe.outputs[1], want, 1e-4)
    -- and as a Gluon block
    local net = onnx.import_to_gluon(CONV .. "/model.onnx", shapes)
    close_to(net(x), want, 1e-4)
    -- metadata: names, shapes, dtypes as declared
    assert.equals("float32", meta.input_tensor_data[1][3])
    assert.equals(#x:shape(), #meta.input_tensor_data[1][2])
  end)

  it("says what it cannot express, naming the node and op", function()
    if not have(DATA .. "node/test_abs/model.onnx") then
      pending("libonnx-testdata is not installed")
      return
    end
    local ok, err = pcall(onnx.import_model,
      DATA .. "node/test_nonmaxsuppression_center_point_box_format/model.onnx")
    assert.is_false(ok)
    assert.matches("(NonMaxSuppression): unsupported: operator NonMaxSuppression", err, 1, true)
    ok, err = pcall(onnx.import_model, DATA .. "node/test_reshape_reordered_all_dims/model.onnx")
    assert.is_false(ok)
    assert.matches("must be a constant", err, 1, true)
    -- the same model with that input as a constant imports
    local shape = onnx.load_tensor(DATA .. "node/test_reshape_reordered_all_dims/test_data_set_0/input_1.pb")
    local s = onnx.import_model(DATA .. "node/test_reshape_reordered_all_dims/model.onnx",
      { constants = { shape = shape } })
    assert.is_truthy(s)
    ok, err = pcall(onnx.import_model, "/nonexistent.onnx")
    assert.is_false(ok)
    assert.matches("cannot open", err, 1, true)
    ok, err = pcall(onnx.import_model, CONV .. "/model.onnx", { bogus = 1 })
    assert.is_false(ok)
    assert.matches("unknown option 'bogus'", err, 1, true)
    ok, err = pcall(onnx.import_model, CONV .. "/model.onnx", { constants = { nope = mx.nd.ones { 1 } } })
    assert.is_false(ok)
    assert.matches("'nope' is not an input of the model", err, 1, true)
  end)

  it("reads external data only from plain files under the model's directory", function()
    local d = tmpdir()
    assert.equals(0, (sh("cp " .. FIX .. "* " .. d .. "/ && ln -s weights.bin " .. d
      .. "/link.bin && cp " .. d .. "/weights.bin " .. d .. "/w2.bin && ln " .. d .. "/w2.bin " .. d
      .. "/hard.bin")))
    local x = mx.nd.array({ 10, 20, 30, 40 })
    local sess = onnx.load_model(d .. "/ok.onnx", { input_shapes = { x = { 4 } } })
    assert.same({ 11, 22, 33, 44 }, sess:run({ x = x })[1]:tolist())
    local cases = {
      dotdot = "is not a plain path under the model's directory",
      absolute = "is not a plain path under the model's directory",
      symlink = "cannot open external data 'link.bin'",
      hardlink = "is not a regular file with one link",
      past_end = "lie outside its 16 bytes",
      bad_length = "do not fit 16 bytes",
    }
    for name, msg in pairs(cases) do
      local ok, err = pcall(onnx.import_model, d .. "/" .. name .. ".onnx")
      assert.is_false(ok, name)
      assert.matches(msg, err, 1, true)
    end
    -- from memory (no directory: mx_onnx_import_bytes with dir NULL), none at all, even
    -- with the file in the working directory
    local lib = require("mx.core.lib")
    local ffi, C = lib.ffi, lib.C
    local bytes = B.read(d .. "/ok.onnx")
    local gp, pn, pnames = ffi.new("mx_graph*[1]"), ffi.new("int[1]"), ffi.new("char**[1]")
    local cwd = io.popen("pwd"):read("*l")
    pcall(ffi.cdef, "int chdir(const char *path);")
    ffi.C.chdir(d)
    local rc = C.mx_onnx_import_bytes(bytes, #bytes, nil, 0, nil, gp, pn, pnames)
    ffi.C.chdir(cwd)
    assert.equals(C.MX_EFORMAT, rc)
    assert.matches("external data ('weights.bin') is not allowed for a model read from memory",
      ffi.string(C.mx_last_error()), 1, true)
    os.execute("rm -rf '" .. d .. "'")
  end)

  it("unrolls Loop and Scan whose iteration counts are constants (ONNX Runtime's outputs)", function()
    local case = require("helpers.onnx_case")
    for _, name in ipairs { "loop_fixed", "loop_cond", "scan_reverse" } do
      local r = case("spec/fixtures/onnx_loops/" .. name)
      assert.equals("pass", r.status, name .. ": " .. tostring(r.why))
      assert.is_nil(r.frozen) -- the carried values and scanned inputs are run-time inputs
    end
    -- the unrolled graph is plain ops: a Symbol that binds and runs
    local s, args = onnx.import_model("spec/fixtures/onnx_loops/loop_fixed/model.onnx")
    local x = onnx.load_tensor("spec/fixtures/onnx_loops/loop_fixed/test_data_set_0/input_0.pb")
    local want = onnx.load_tensor("spec/fixtures/onnx_loops/loop_fixed/test_data_set_0/output_1.pb")
    args.x = x
    local got = s:bind(mx.cpu(), args):forward()[2]
    assert.same({ 4, 2, 3 }, got:shape())
    close_to(got, want, 1e-6)
    local ok, err = pcall(onnx.import_model, "spec/fixtures/onnx_loops/runtime_cond.onnx")
    assert.is_false(ok)
    assert.matches("node 'data_loop' (Loop): unsupported: the body's condition must be a constant in every "
      .. "iteration", err, 1, true)
    ok, err = pcall(onnx.import_model, "spec/fixtures/onnx_loops/nested_big.onnx")
    assert.is_false(ok)
    assert.matches("(Loop): unsupported: unrolling would convert more than 262144 body nodes", err, 1, true)
    if have(DATA .. "node/test_loop11/model.onnx") then -- its trip count is a graph input
      ok, err = pcall(onnx.import_model, DATA .. "node/test_loop11/model.onnx")
      assert.is_false(ok)
      assert.matches("unsupported: the trip count M must be a constant", err, 1, true)
    end
  end)

  it("rejects every truncation and byte flip of a model cleanly or imports it", function()
    if not have(CONV .. "/model.onnx") then pending("libonnx-testdata is not installed") return end
    local s = B.read(CONV .. "/model.onnx")
    local d = tmpdir()
    local p = d .. "/m.onnx"
    local n = 0
    local step = math.max(1, math.floor(#s / 400))
    for k = 0, #s - 1, step do
      for _, bytes in ipairs { s:sub(1, k), B.patch(s, k, string.char((s:byte(k + 1) + 0x41) % 256)) } do
        B.write(p, bytes)
        local ok, err = pcall(onnx.import_model, p)
        if not ok then assert.matches("onnx", tostring(err), 1, true) end
        n = n + 1
      end
    end
    assert.is_true(n > 500)
    os.execute("rm -rf '" .. d .. "'")
  end)
end)
