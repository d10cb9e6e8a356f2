-- float16 / bfloat16 conversions: mx_f32_to_f16, mx_f16_to_f32, mx_f32_to_bf16,
-- mx_bf16_to_f32 (core/src/dtype.c) and the tensor casts built on them.
-- Oracles: numpy's float16 and torch's bfloat16 (spec/fixtures/dtype_expected.lua,
-- made by tools/fixtures/make_dtype_fixture.py) and an exact reference written here in
-- double arithmetic, independent of the C code.
local mx = require("mx")
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C
local bit = require("bit")

local EXP = dofile("spec/fixtures/dtype_expected.lua")

local pun = ffi.new("union { uint32_t u; float f; }")
local function f32_of(bits) pun.u = bits return pun.f end
local function bits_of(f) pun.f = f return tonumber(pun.u) end

local function is_nan16(h) return bit.band(h, 0x7c00) == 0x7c00 and bit.band(h, 0x3ff) ~= 0 end
local function is_nan32(b)
  return bit.band(b, 0x7f800000) == 0x7f800000 and bit.band(b, 0x7fffff) ~= 0
end
local function hex(v, w) return string.format("0x%0" .. (w or 4) .. "X", v) end

-- Exact round-to-nearest-even of a (non-NaN) double onto a binary format with `mant`
-- fraction bits, minimum normal exponent `emin` and maximum finite value `maxv`.
-- Returns the rounded value (math.huge on overflow), sign kept.
local function round_to(x, mant, emin, maxv)
  local neg = x < 0 or (x == 0 and 1 / x < 0)
  local a = math.abs(x)
  if a == math.huge then return neg and -a or a end
  local v = 0
  if a > 0 then
    local _, e = math.frexp(a) -- a = m * 2^e, m in [0.5, 1)
    local step = 2 ^ (math.max(e - 1, emin) - mant)
    local q = a / step -- exact: power-of-two scaling
    local fl = math.floor(q)
    local r = q - fl
    if r > 0.5 or (r == 0.5 and fl % 2 == 1) then fl = fl + 1 end
    v = fl * step
    -- beyond the largest finite value by half an ulp or more: overflow
    if v > maxv then v = math.huge end
  end
  return neg and -v or v
end

-- The f16 bit pattern of a value already on the f16 grid.
local function f16_bits(v)
  local neg = v < 0 or (v == 0 and 1 / v < 0)
  local a = math.abs(v)
  local h
  if a == math.huge then
    h = 0x7c00
  elseif a < 2 ^ -14 then
    h = a / 2 ^ -24
  else
    local m, e = math.frexp(a)
    h = (e - 1 + 15) * 1024 + (m * 2 - 1) * 1024
  end
  return (neg and 0x8000 or 0) + h
end

local function ref_f16(x) return f16_bits(round_to(x, 10, -14, 65504)) end
local function ref_bf16(x)
  local v = round_to(x, 7, -126, 3.3895313892515355e38) -- bf16 max: 0x7F7F
  return bit.rshift(bits_of(v), 16)
end
local function ref_f16_value(h)
  local s = bit.band(h, 0x8000) ~= 0 and -1 or 1
  local e, m = bit.band(bit.rshift(h, 10), 0x1f), bit.band(h, 0x3ff)
  if e == 0 then return s * m * 2 ^ -24 end
  if e == 31 then return m == 0 and s * math.huge or 0 / 0 end
  return s * (1 + m / 1024) * 2 ^ (e - 15)
end

-- A float32 tensor holding exactly these bit patterns (NaN payloads included: the
-- bytes go through memory, never through a Lua number).
local function f32_tensor(list, col)
  local n = #list
  local buf = ffi.new("uint32_t[?]", n)
  for i = 1, n do buf[i - 1] = col and list[i][col] or list[i] end
  return mx.nd.from_pointer(buf, { n }, { dtype = "float32", owner = buf })
end

describe("float32 -> float16", function()
  it("matches numpy's float16 rounding on every fixture pattern (scalar path)", function()
    local bad = {}
    for _, row in ipairs(EXP.f32) do
      local b, want = row[1], row[2]
      if not is_nan32(b) then -- NaN bits cannot cross the FFI as a Lua number
        local got = C.mx_f32_to_f16(f32_of(b))
        if got ~= want then bad[#bad + 1] = hex(b, 8) .. "->" .. hex(got) .. " want " .. hex(want) end
      end
    end
    assert.are.same({}, bad)
    assert.is_true(#EXP.f32 > 3000)
  end)

  it("matches numpy through a tensor cast, NaNs staying quiet NaNs with their sign", function()
    local t = f32_tensor(EXP.f32, 1):to(mx.cpu(), "float16")
    local p = t:data_ptr()
    local bad, nans = {}, 0
    for i, row in ipairs(EXP.f32) do
      local got, want = p[i - 1], row[2]
      if is_nan32(row[1]) then
        nans = nans + 1
        local quiet = bit.band(got, 0x200) ~= 0
        local sign_ok = bit.band(got, 0x8000) == bit.band(bit.rshift(row[1], 16), 0x8000)
        if not (is_nan16(got) and quiet and sign_ok) then
          bad[#bad + 1] = hex(row[1], 8) .. " -> " .. hex(got) .. " (not a quiet NaN)"
        end
      elseif got ~= want then
        bad[#bad + 1] = hex(row[1], 8) .. " -> " .. hex(got) .. " want " .. hex(want)
      end
    end
    assert.are.same({}, bad)
    assert.is_true(nans > 0)
  end)

  it("agrees with an exact reference on 200000 patterns across the f16 range", function()
    local rnd = 12345
    local function nextbits() -- xorshift32: deterministic, no dependence on math.random
      rnd = bit.bxor(rnd, bit.lshift(rnd, 13))
      rnd = bit.bxor(rnd, bit.rshift(rnd, 17))
      rnd = bit.bxor(rnd, bit.lshift(rnd, 5))
      return rnd
    end
    local bad = {}
    for _ = 1, 200000 do
      local r = nextbits()
      -- exponent 96..159 (deep subnormal ... overflow), random sign and mantissa
      local e = 96 + bit.band(bit.rshift(r, 23), 63)
      local b = bit.bor(bit.band(r, 0x807fffff), bit.lshift(e, 23))
      if bit.band(r, 0x10) ~= 0 then b = bit.bor(bit.band(b, bit.bnot(0x1fff)), 0x1000) end -- tie
      b = b % 2 ^ 32
      local x = f32_of(b)
      local got, want = C.mx_f32_to_f16(x), ref_f16(x)
      if got ~= want and #bad < 10 then
        bad[#bad + 1] = hex(b, 8) .. "->" .. hex(got) .. " want " .. hex(want)
      end
    end
    assert.are.same({}, bad)
  end)

  it("rounds the boundary cases as IEEE 754 says", function()
    local cases = {
      { 65504, 0x7bff }, { 65519.99, 0x7bff }, { 65520, 0x7c00 }, { -65520, 0xfc00 },
      { 1e10, 0x7c00 }, { math.huge, 0x7c00 }, { -math.huge, 0xfc00 },
      { 2 ^ -24, 0x0001 }, { 2 ^ -25, 0x0000 }, { -2 ^ -25, 0x8000 },
      { 3 * 2 ^ -25, 0x0002 }, { 2 ^ -14, 0x0400 }, { 2 ^ -14 - 2 ^ -25, 0x0400 },
      { 1 + 2 ^ -11, 0x3c00 }, { 1 + 3 * 2 ^ -11, 0x3c02 }, { 0, 0 }, { -0.0, 0x8000 },
    }
    for _, c in ipairs(cases) do
      assert.are.equal(hex(c[2]), hex(C.mx_f32_to_f16(c[1])), "value " .. c[1])
    end
  end)
end)

describe("float16 -> float32", function()
  it("converts all 65536 patterns exactly (NaNs to NaN)", function()
    local bad = {}
    for h = 0, 65535 do
      local got, want = C.mx_f16_to_f32(h), ref_f16_value(h)
      local ok
      if want ~= want then ok = got ~= got else ok = got == want and (1 / got) == (1 / want) end
      if not ok and #bad < 10 then bad[#bad + 1] = hex(h) .. " -> " .. tostring(got) end
    end
    assert.are.same({}, bad)
  end)

  it("round-trips all 65536 patterns f16 -> f32 -> f16 (NaNs stay NaN)", function()
    local buf = ffi.new("uint16_t[65536]")
    for h = 0, 65535 do buf[h] = h end
    local t16 = mx.nd.from_pointer(buf, { 65536 }, { dtype = "float16", owner = buf })
    local back = t16:to(mx.cpu(), "float32"):to(mx.cpu(), "float16")
    local p = back:data_ptr()
    local bad, nans = {}, 0
    for h = 0, 65535 do
      local got = p[h]
      if is_nan16(h) then
        nans = nans + 1
        if not is_nan16(got) or bit.band(got, 0x8000) ~= bit.band(h, 0x8000) then
          bad[#bad + 1] = hex(h) .. " -> " .. hex(got)
        end
      elseif got ~= h then
        bad[#bad + 1] = hex(h) .. " -> " .. hex(got)
      end
      if #bad >= 10 then break end
    end
    assert.are.same({}, bad)
    assert.are.equal(2 * 1023, nans)
  end)
end)

describe("float32 -> bfloat16", function()
  it("matches torch's bfloat16 rounding on every fixture pattern", function()
    local t = f32_tensor(EXP.f32, 1):to(mx.cpu(), "bfloat16")
    local p = t:data_ptr()
    local bad = {}
    for i, row in ipairs(EXP.f32) do
      local got, want = p[i - 1], row[3]
      if is_nan32(row[1]) then
        -- quiet NaN, same sign
        if not (bit.band(got, 0x7f80) == 0x7f80 and bit.band(got, 0x40) ~= 0
            and bit.band(got, 0x8000) == bit.band(bit.rshift(row[1], 16), 0x8000)) then
          bad[#bad + 1] = hex(row[1], 8) .. " -> " .. hex(got) .. " (not a quiet NaN)"
        end
      elseif got ~= want then
        bad[#bad + 1] = hex(row[1], 8) .. " -> " .. hex(got) .. " want " .. hex(want)
      end
      if #bad >= 10 then break end
    end
    assert.are.same({}, bad)
  end)

  it("agrees with an exact reference, overflow to Inf and subnormals included", function()
    local bad = {}
    local rnd = 987654321
    for _ = 1, 100000 do
      rnd = bit.bxor(rnd, bit.lshift(rnd, 13))
      rnd = bit.bxor(rnd, bit.rshift(rnd, 17))
      rnd = bit.bxor(rnd, bit.lshift(rnd, 5))
      local b = rnd % 2 ^ 32
      if bit.band(rnd, 0x20) ~= 0 then b = bit.bor(bit.band(b, bit.bnot(0xffff)), 0x8000) % 2 ^ 32 end
      if not is_nan32(b) then
        local x = f32_of(b)
        local got, want = C.mx_f32_to_bf16(x), ref_bf16(x)
        if got ~= want and #bad < 10 then
          bad[#bad + 1] = hex(b, 8) .. "->" .. hex(got) .. " want " .. hex(want)
        end
      end
    end
    assert.are.same({}, bad)
    assert.are.equal("0x7F80", hex(C.mx_f32_to_bf16(f32_of(0x7f7fffff))))
    assert.are.equal("0x7F7F", hex(C.mx_f32_to_bf16(f32_of(0x7f7f7fff))))
    -- FFI float arguments keep f32 subnormals (no flush-to-zero on this path)
    assert.are.equal("0x0000", hex(C.mx_f32_to_bf16(f32_of(0x00008000)))) -- tie: to even
    assert.are.equal("0x0002", hex(C.mx_f32_to_bf16(f32_of(0x00018000)))) -- tie: to even
    assert.are.equal("0x0001", hex(C.mx_f32_to_bf16(f32_of(0x00008001))))
  end)

  it("converts all 65536 bfloat16 patterns to float32 exactly and back", function()
    local bad = {}
    for h = 0, 65535 do
      local f = C.mx_bf16_to_f32(h)
      local b = h * 65536
      if is_nan32(b) then
        if f == f then bad[#bad + 1] = hex(h) .. " lost NaN" end
      else
        if f ~= f32_of(b) or (f == 0 and 1 / f ~= 1 / f32_of(b)) then
          bad[#bad + 1] = hex(h) .. " -> " .. tostring(f)
        end
        local back = C.mx_f32_to_bf16(f)
        if back ~= h then bad[#bad + 1] = hex(h) .. " round trip " .. hex(back) end
      end
      if #bad >= 10 then break end
    end
    assert.are.same({}, bad)
  end)
end)

describe("float64 -> float16 (mx.nd.array with dtype float16)", function()
  it("rounds doubles once, like numpy (no double rounding through float32)", function()
    local bad = {}
    for _, row in ipairs(EXP.f64) do
      local t = mx.nd.array({ row[1] }, { dtype = "float16" })
      local got = t:data_ptr()[0]
      if got ~= row[2] then
        bad[#bad + 1] = string.format("%.17g -> %s want %s", row[1], hex(got), hex(row[2]))
      end
    end
    assert.are.same({}, bad)
  end)
end)
