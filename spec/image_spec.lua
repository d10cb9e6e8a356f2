-- spec/image_spec.lua — to_tensor (MXNet's image.to_tensor): HWC uint8/float32 to
-- CHW float32 / 255, the CPU kernel against the ref kernel bit for bit.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local ffi = require("ffi")
local FILE = "image_spec.lua"

local fbuf = ffi.new("float[1]")
local function ffi_float(v) fbuf[0] = v return fbuf[0] end -- v rounded to float32

describe("to_tensor", function()
  it("moves the channel axis first and divides by 255", function()
    local x = nd.array({ { { 0, 255, 51 }, { 1, 2, 3 } } }, { dtype = "uint8" }) -- (1, 2, 3)
    local y = nd.to_tensor(x)
    assert.are.same({ 3, 1, 2 }, y:shape())
    assert.are.equal("float32", y:dtype())
    local f = function(v) return tonumber(ffi_float(v / 255)) end
    assert.are.same({ { { f(0), f(1) } }, { { f(255), f(2) } }, { { f(51), f(3) } } }, y:totable())
    local b = nd.to_tensor(nd.ones({ 5, 4, 3, 1 }, { dtype = "uint8" }) * 255) -- a batch
    assert.are.same({ 5, 1, 4, 3 }, b:shape())
    assert.are.equal(1, b:min():item())
  end)

  it("matches the ref kernel bit for bit (uint8 and float32, 1 and 3 channels)", function()
    for _, sh in ipairs { { 64, 28, 28, 1 }, { 2, 7, 5, 3 }, { 9, 4, 3 }, { 300, 300, 1 } } do
      local r = H.rand(mx, sh, { seed = #sh + sh[1], dtype = "float32" })
      local u8 = nd.cast((r + 1) * 127.9, { dtype = "uint8" })
      for _, x in ipairs { u8, nd.cast(u8, { dtype = "float32" }) } do
        local y, ref = nd.to_tensor(x), nd._ref.to_tensor(x)
        assert.are.equal(0, (y - ref):abs():max():item())
      end
    end
    -- every uint8 value: the float nearest v / 255
    local all = nd.arange(0, 256, { dtype = "uint8" }):reshape { 256, 1, 1 }
    local y = nd.to_tensor(all):reshape { 256 }:tolist()
    for v = 0, 255 do assert.are.equal(tonumber(ffi_float(v / 255)), y[v + 1]) end
  end)

  it("rejects other ranks and dtypes at the caller's line", function()
    H.assert_error(function(mark) mark() nd.to_tensor(nd.ones({ 2, 3 }, { dtype = "uint8" })) end,
      FILE, "to_tensor", "(H, W, C)")
    H.assert_error(function(mark) mark() nd.to_tensor(nd.ones({ 2, 3, 1 }, { dtype = "int32" })) end,
      FILE, "to_tensor", "int32")
  end)
end)
