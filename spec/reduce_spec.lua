-- spec/reduce_spec.lua — reductions (sum, mean, prod, max, min, norm, argmax, argmin,
-- reduce_to): the optimised cpu kernels against the reference kernels over axis
-- patterns, keepdims, dtypes, 0-d / 0-size / view inputs and sizes that take the
-- parallel paths; values computed in Lua; errors at the caller's line.
local mx = require("mx")
local oracle = require("helpers.oracle")
local err_at = require("helpers.err_at")("reduce_spec.lua")

local rand, check = oracle.rand, oracle.check
local function vals(t) return t:tolist() end
local function arr(t, dtype) return mx.nd.array(t, { dtype = dtype }) end


-- shape, list of axis options (nil = all axes)
local CASES = {
  { {}, { false } },
  { { 7 }, { false, 1, -1 } },
  { { 3, 4 }, { false, 1, 2, -1, { 1, 2 } } },
  { { 2, 3, 4 }, { false, 1, 2, 3, { 1, 3 }, { 2, 3 }, { 1, 2 } } },
  { { 2, 3, 4, 5 }, { { 1, 3 }, { 2, 4 }, { 1, 2, 4 }, { 4 }, { 2 } } },
  { { 2, 1, 3 }, { 2, { 1, 2 }, 3 } },
  { { 2, 0, 3 }, { 2, 3, false } },
  { { 1, 200000 }, { false, 2 } },
  { { 300, 500 }, { 1, 2 } },
  { { 3, 70000 }, { 1 } },
  { { 50000, 3 }, { 1, 2 } }, -- column sums split over R (per-thread partials)
  { { 5, 20000, 3 }, { 2 } },
}
local DTYPES = { "float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8" }

local function small(shape)
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  return n <= 1000
end

for _, name in ipairs({ "sum", "mean", "prod", "max", "min", "norm" }) do
  describe(name, function()
    it("matches the reference over axes, keepdims, dtypes and sizes", function()
      local dom = name == "prod" and { 0.5, 1.5 } or nil
      for _, c in ipairs(CASES) do
        local shape = c[1]
        local empty = false
        for i = 1, #shape do empty = empty or shape[i] == 0 end
        for _, ax in ipairs(c[2]) do
          -- max/min of an empty extent is an error (tested below)
          local skip = empty and (name == "max" or name == "min") and (ax == false or ax == 2)
          if not skip then
            for _, kd in ipairs({ false, true }) do
              local opts = { keepdims = kd }
              if ax then opts.axis = ax end
              for _, dt in ipairs(small(shape) and DTYPES or { "float32" }) do
                local d = dom
                if name == "prod" and oracle.is_int(dt) then d = { 1, 2 } end
                -- float16 prod/sum of many values overflows the same way in both
                local rt = (dt == "float16" or dt == "bfloat16") and 1e-2 or
                  (dt == "float32" and 1e-5) or nil
                check(mx, name, { rand(mx, shape, dt, d) }, opts, { rtol = rt })
              end
            end
          end
        end
      end
      -- a leading-axis view
      local base = rand(mx, { 3, 4, 5 }, "float32", dom)
      check(mx, name, { base[2] }, { axis = 2 })
      check(mx, name, { base[3] })
    end)
  end)
end

describe("reductions: values", function()
  it("computes sums, means, products and extremes independently", function()
    local n = 100001
    local x = mx.nd.array((function() local t = {} for i = 1, n do t[i] = i end return t end)(),
      { dtype = "float64" })
    assert.equal(n * (n + 1) / 2, x:sum():item())
    assert.equal((n + 1) / 2, x:mean():item())
    assert.equal(n, x:max():item())
    assert.equal(1, x:min():item())
    -- float32 sums accumulate in double: 1e6 copies of 0.1 stay accurate
    local t = mx.nd.full({ 1000000 }, 0.1)
    assert.is_true(math.abs(t:sum():item() - 100000) < 0.1)
    local m = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.same({ 5, 7, 9 }, vals(m:sum{ axis = 1 }))
    assert.same({ 6, 15 }, vals(m:sum{ axis = -1 }))
    assert.same({ 2, 1 }, m:sum{ axis = 2, keepdims = true }:shape())
    assert.same({ 6, 120 }, vals(m:prod{ axis = 2 }))
    assert.same({ 2, 5 }, vals(m:mean{ axis = 2 }))
    assert.same({ 3, 6 }, vals(m:max{ axis = 2 }))
    assert.same({ 1, 2, 3 }, vals(m:min{ axis = 1 }))
    assert.is_true(math.abs(m:norm():item() - math.sqrt(91)) < 1e-5)
    assert.same({ 6, 15 }, vals(m:norm{ axis = 2, ord = 1 }))
    assert.equal("float32", arr({ 1, 2 }, "int32"):mean():dtype())
    assert.equal(1.5, arr({ 1, 2 }, "int32"):mean():item())
    assert.equal("int32", arr({ 1, 2 }, "int32"):sum():dtype())
    -- identities of empty reductions
    assert.equal(0, mx.nd.zeros({ 0, 3 }):sum():item())
    assert.equal(1, mx.nd.zeros({ 0, 3 }):prod():item())
    local e = mx.nd.zeros({ 0, 3 }):mean():item()
    assert.is_true(e ~= e)
    assert.same({ 3 }, mx.nd.zeros({ 0, 3 }):sum{ axis = 1 }:shape())
    -- NaN propagates through max/min
    local nanmax = arr({ 1, 0 / 0, 3 }):max():item()
    assert.is_true(nanmax ~= nanmax)
  end)
end)

describe("argmax / argmin", function()
  it("returns 1-based int64 indices, first on ties, NaN as the extreme", function()
    local m = arr({ { 1, 9, 9 }, { 7, 2, 0 } })
    local r = m:argmax{ axis = 2 }
    assert.equal("int64", r:dtype())
    assert.same({ 2, 1 }, vals(r))
    assert.same({ 1, 3 }, vals(m:argmin{ axis = 2 }))
    assert.same({ 2, 1, 1 }, vals(m:argmax{ axis = 1 }))
    assert.equal(2, m:argmax():item()) -- flat row-major index of the first 9
    assert.equal(6, m:argmin():item()) -- flat row-major index of the 0
    assert.same({ 2, 1 }, m:argmax{ axis = -1, keepdims = true }:shape())
    assert.equal(2, arr({ 1, 0 / 0, 5 }):argmax():item())
    assert.equal(2, arr({ 1, 0 / 0, -5 }):argmin():item())
    assert.equal(1, arr(4):argmax():item()) -- 0-d
  end)

  it("matches the reference over axes, dtypes and sizes", function()
    for _, name in ipairs({ "argmax", "argmin" }) do
      for _, dt in ipairs(DTYPES) do
        local x = rand(mx, { 3, 4, 5 }, dt)
        check(mx, name, { x })
        for _, ax in ipairs({ 1, 2, 3, -1 }) do
          check(mx, name, { x }, { axis = ax })
          check(mx, name, { x }, { axis = ax, keepdims = true })
        end
      end
      check(mx, name, { rand(mx, { 64, 3000 }, "float32") }, { axis = 2 })
      check(mx, name, { rand(mx, { 3000, 64 }, "float64") }, { axis = 1 })
      check(mx, name, { rand(mx, { 200000 }, "float32") })
      check(mx, name, { rand(mx, { 2, 0 }, "float32") }, { axis = 1 })
      local base = rand(mx, { 3, 4, 5 }, "float32")
      check(mx, name, { base[2] }, { axis = 2 })
    end
  end)
end)

describe("reduce_to", function()
  it("sums down to like's shape (the broadcasting gradient)", function()
    local g = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.same({ 5, 7, 9 }, vals(mx.nd.reduce_to(g, mx.nd.zeros({ 3 }))))
    assert.same({ 6, 15 }, vals(mx.nd.reduce_to(g, mx.nd.zeros({ 2, 1 }))))
    assert.same({ 2, 1 }, mx.nd.reduce_to(g, mx.nd.zeros({ 2, 1 })):shape())
    assert.equal(21, mx.nd.reduce_to(g, mx.nd.zeros({})):item())
    assert.same({ 6, 15 }, vals(mx.nd.reduce_to(g, mx.nd.zeros({ 2 }), { axis = 2 })))
    for _, dt in ipairs({ "float32", "float64", "float16", "int32" }) do
      local x = rand(mx, { 2, 3, 4, 5 }, dt)
      for _, like in ipairs({ { 5 }, { 4, 1 }, { 3, 1, 1 }, { 1, 3, 1, 5 }, { 2, 3, 4, 5 }, {} }) do
        check(mx, "reduce_to", { x, mx.nd.zeros(like) }, nil, { rtol = dt == "float16" and 2e-3 })
      end
      check(mx, "reduce_to", { x, mx.nd.zeros({ 2, 5 }) }, { axis = { 2, 3 } },
        { rtol = dt == "float16" and 2e-3 })
    end
    check(mx, "reduce_to", { rand(mx, { 300, 500 }), mx.nd.zeros({ 500 }) })
    check(mx, "reduce_to", { rand(mx, { 300, 500 }), mx.nd.zeros({ 300, 1 }) })
    -- bfloat16 at a parallel size (bf16 training's bias gradients: the cpu kernel widens
    -- to f32 exactly, the reference to double; both sum in double)
    local b = rand(mx, { 300, 500 }, "bfloat16")
    for _, like in ipairs({ { 500 }, { 300, 1 }, { 300, 500 }, {} }) do
      check(mx, "reduce_to", { b, mx.nd.zeros(like, { dtype = "bfloat16" }) }, nil, { rtol = 1e-2 })
    end
    check(mx, "sum", { b }, { axis = 1 }, { rtol = 1e-2 })
    check(mx, "mean", { b }, { axis = 2 }, { rtol = 1e-2 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = mx.nd.reduce_to(g, mx.nd.zeros({ 4 })) return r end, line)
    assert.is_truthy(msg:find("reduce_to", 1, true) and msg:find("(2, 3)", 1, true)
      and msg:find("(4,)", 1, true), msg)
  end)
end)

describe("reduction errors", function()
  it("name the op, the axis and the shape at the caller's line", function()
    local x = mx.nd.zeros({ 2, 3 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = x:sum{ axis = 3 } return r end, line)
    assert.is_truthy(msg:find("sum", 1, true) and msg:find("axis=3", 1, true)
      and msg:find("2-d", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = mx.nd.mean(x, { axis = { 1, -2 } }) return r end, line)
    assert.is_truthy(msg:find("mean", 1, true) and msg:find("twice", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = mx.nd.zeros({ 0, 2 }):max() return r end, line)
    assert.is_truthy(msg:find("max", 1, true) and msg:find("(0, 2)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = x:argmax{ axis = -3 } return r end, line)
    assert.is_truthy(msg:find("argmax", 1, true) and msg:find("axis=-3", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = x:norm{ ord = 3 } return r end, line)
    assert.is_truthy(msg:find("norm", 1, true) and msg:find("ord", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = x:sum{ axis = 0 } return r end, line)
    assert.is_truthy(msg:find("sum", 1, true) and msg:find("axis", 1, true), msg)
  end)
end)

-- int64 beyond 2^53: sum/prod/max/min/argmax/argmin stay in int64 (doubles hold
-- integers exactly only to 2^53); written and read as int64_t through the data pointer.
describe("int64 reductions above 2^53", function()
  local nd = mx.nd
  local P53, P62, MIN = 9007199254740993LL, 4611686018427387907LL, -9223372036854775807LL - 1
  local I64 = require("helpers.i64")
  local mk, rd, same = I64.mk, I64.rd, I64.same
  -- 2x3: rows {2^53+1, 2^53+2, 2^53}, {2^62+3, -2^63, 2^62+2}
  local V = { P53, P53 + 1, P53 - 1, P62, MIN, P62 - 1 }
  local I64_CASES = {
    { "max", {}, { P62 } },
    { "min", {}, { MIN } },
    { "max", { axis = 2 }, { P53 + 1, P62 } },
    { "min", { axis = 2 }, { P53 - 1, MIN } },
    { "max", { axis = 1 }, { P62, P53 + 1, P62 - 1 } },
    { "sum", { axis = 2 }, { 3 * P53, 2 * P62 - 1 + MIN } }, -- wraps like C int64
    { "prod", { axis = 1 }, { P53 * P62, (P53 + 1) * MIN, (P53 - 1) * (P62 - 1) } },
    { "argmax", { axis = 2 }, { 2LL, 1LL } },
    { "argmin", { axis = 2 }, { 3LL, 2LL } },
  }
  for _, c in ipairs(I64_CASES) do
    it(c[1] .. " " .. tostring(c[2].axis) .. ": cpu and ref exact", function()
      local x = mk(V, { 2, 3 })
      same(c[3], rd(nd[c[1]](x, c[2])), "cpu " .. c[1])
      same(c[3], rd(nd._ref[c[1]](x, c[2])), "ref " .. c[1])
    end)
  end
  it("a large int64 max takes the parallel-sized input exactly", function()
    local n = 300000
    local x = nd.zeros({ 3, n }, { dtype = "int64" })
    local p = x:data_ptr()
    for i = 0, 3 * n - 1 do p[i] = P53 + i % 7 end
    p[n + 12345] = P53 + 100
    same({ P53 + 6, P53 + 100, P53 + 6 }, rd(nd.max(x, { axis = 2 })), "cpu max")
    same({ P53, P53, P53 }, rd(nd.min(x, { axis = 2 })), "cpu min")
  end)
end)

---------------------------------------------------------------- nansum, nanprod, cumsum, moments
-- The expected values are computed here in Lua from the input's stored values
-- (read back as float64, so float16 rounding of the input is not an error), over
-- row-major flat buffers; the dispatched op is also checked against the reference.
describe("nansum / nanprod / cumsum / moments", function()
  local ffi = require("ffi")
  local function numel(shape)
    local n = 1
    for i = 1, #shape do n = n * shape[i] end
    return n
  end
  -- the values of t, row-major, as a 0-based Lua table
  local function flat(t)
    local c = mx.nd.array(t, { dtype = "float64" })
    local p, r = c:data_ptr(), {}
    for i = 0, c:size() - 1 do r[i] = p[i] end
    return r
  end
  -- random values of dtype with about one NaN in four (float dtypes only)
  local seed = 7
  local function input(shape, dtype, lo, hi)
    local n, buf = numel(shape), ffi.new("double[?]", math.max(numel(shape), 1))
    for i = 0, n - 1 do
      seed = (seed * 1103515245 + 12345) % 2147483648
      local u = seed / 2147483648
      if not oracle.is_int(dtype) and u < 0.25 then buf[i] = 0 / 0
      elseif oracle.is_int(dtype) then buf[i] = math.floor(lo + u * (hi - lo + 1))
      else buf[i] = lo + u * (hi - lo) end
    end
    return mx.nd.array(mx.nd.array(buf, { shape = shape, dtype = "float64" }), { dtype = dtype })
  end
  -- reduce v (shape) over the 1-based axis option (nil: all) -> flat table, out shape
  local function lua_reduce(v, shape, axis, keepdims, kind)
    local nd_ = #shape
    local mask = {}
    if axis == nil then for d = 1, nd_ do mask[d] = true end
    else
      for _, a in ipairs(type(axis) == "table" and axis or { axis }) do
        mask[a < 0 and a + nd_ + 1 or a] = true
      end
    end
    local oshape = {}
    for d = 1, nd_ do
      if not mask[d] then oshape[#oshape + 1] = shape[d] elseif keepdims then oshape[#oshape + 1] = 1 end
    end
    local groups, count = {}, 1
    for d = 1, nd_ do if mask[d] then count = count * shape[d] end end
    for i = 0, numel(shape) - 1 do
      local rem, o, mul = i, 0, 1
      for d = nd_, 1, -1 do
        local c = rem % shape[d]
        rem = (rem - c) / shape[d]
        if not mask[d] then o = o + c * mul; mul = mul * shape[d] end
      end
      groups[o] = groups[o] or {}
      table.insert(groups[o], v[i])
    end
    local r = {}
    for o = 0, numel(oshape) - 1 do
      local g = groups[o] or {}
      if kind == "nansum" or kind == "nanprod" then
        local acc = kind == "nansum" and 0 or 1
        for _, x in ipairs(g) do
          if x == x then acc = kind == "nansum" and acc + x or acc * x end
        end
        r[o] = acc
      else -- mean, var
        local s = 0
        for _, x in ipairs(g) do s = s + x end
        local m = s / count
        if kind == "mean" then r[o] = m
        else
          local q = 0
          for _, x in ipairs(g) do q = q + (x - m) ^ 2 end
          r[o] = q / count
        end
      end
    end
    return r, oshape
  end
  local function lua_cumsum(v, shape, axis)
    local r = {}
    if axis == nil then
      local s = 0
      for i = 0, numel(shape) - 1 do s = s + v[i]; r[i] = s end
      return r
    end
    local a = axis < 0 and axis + #shape + 1 or axis
    local inner = 1
    for d = a + 1, #shape do inner = inner * shape[d] end
    local n = shape[a]
    for i = 0, numel(shape) - 1 do
      local k = math.floor(i / inner) % n
      r[i] = v[i] + (k > 0 and r[i - inner] or 0)
    end
    return r
  end
  local function same_vals(want, got, rtol, what)
    local g = flat(got)
    for i = 0, #want do
      local a, b = want[i], g[i]
      if a == nil and b == nil then break end
      local ok = (a ~= a and b ~= b) or a == b or
        (a == a and b and math.abs(a - b) <= (rtol or 1e-12) * math.max(1, math.abs(a)))
      assert.is_true(ok, what .. ": element " .. i .. ": want " .. tostring(a) .. ", got " ..
        tostring(b))
    end
  end
  local function tol(dt)
    return (dt == "float16" or dt == "bfloat16") and 1e-2 or dt == "float32" and 1e-5 or 1e-12
  end
  local SHAPES = {
    { {}, { false } },
    { { 7 }, { false, 1, -1 } },
    { { 3, 4 }, { false, 1, 2, { 1, 2 } } },
    { { 2, 3, 4 }, { false, 2, { 1, 3 }, -1 } },
    { { 2, 0, 3 }, { false, 2, 3 } },
  }

  for _, name in ipairs({ "nansum", "nanprod" }) do
    it(name .. " treats NaN as " .. (name == "nansum" and "0" or "1") ..
      " over axes, keepdims and dtypes", function()
      for _, c in ipairs(SHAPES) do
        for _, ax in ipairs(c[2]) do
          for _, kd in ipairs({ false, true }) do
            for _, dt in ipairs({ "float32", "float64", "float16", "int32", "int64", "uint8" }) do
              -- integer products stay in range (0 / 1 values): prod's own overflow is not tested here
              local x = input(c[1], dt, 0, name == "nanprod" and 1 or 9)
              if name == "nanprod" and not oracle.is_int(dt) then
                x = input(c[1], dt, 0.5, 1.5)
              end
              local opts = { keepdims = kd, axis = ax or nil }
              local y = check(mx, name, { x }, opts, { rtol = tol(dt) })
              local want, oshape = lua_reduce(flat(x), c[1], ax or nil, kd, name)
              assert.same(oshape, y:shape())
              assert.equal(dt, y:dtype())
              same_vals(want, y, tol(dt), name .. " " .. dt)
            end
          end
        end
      end
    end)
  end

  it("nansum / nanprod: all-NaN extents, values, views, NaN-free inputs as sum / prod", function()
    local x = arr({ { 1, 0 / 0, 3 }, { 0 / 0, 0 / 0, 2 } })
    assert.same({ 4, 2 }, vals(mx.nd.nansum(x, { axis = 2 })))
    assert.same({ 1, 0, 5 }, vals(mx.nd.nansum(x, { axis = 1 })))
    assert.same({ 1, 1, 6 }, vals(mx.nd.nanprod(x, { axis = 1 })))
    assert.same({ 3, 2 }, vals(x:nanprod{ axis = -1 }))
    local n = arr({ 0 / 0, 0 / 0 })
    assert.equal(0, n:nansum():item())
    assert.equal(1, n:nanprod():item())
    local inf = arr({ 1 / 0, 0 / 0, 1 })
    assert.equal(1 / 0, inf:nansum():item())
    local base = rand(mx, { 3, 4, 5 }, "float32")
    check(mx, "nansum", { base[2] }, { axis = 2 })
    assert.equal(base[2]:sum():item(), base[2]:nansum():item())
    local p = rand(mx, { 3, 4 }, "float64", { 0.5, 1.5 })
    assert.equal(p:prod{ axis = 2 }:tolist()[2], p:nanprod{ axis = 2 }:tolist()[2])
  end)

  it("nansum / nanprod gradients are zero where the input is NaN", function()
    for _, name in ipairs({ "nansum", "nanprod" }) do
      local x = arr({ { 2, 0 / 0, 4 }, { 0.5, 3, 0 / 0 } }, "float64")
      x:attach_grad()
      mx.autograd.record(function() return mx.nd[name](x, { axis = 2 }) end):backward()
      local g = x:grad():tolist()
      if name == "nansum" then assert.same({ 1, 0, 1, 1, 1, 0 }, g) -- tolist is row-major flat
      else assert.same({ 4, 0, 2, 3, 0.5, 0 }, g) end
    end
  end)

  it("cumsum along an axis or the flattened input, over dtypes", function()
    local CS = { { {}, { false } }, { { 7 }, { false, 1, -1 } }, { { 3, 4 }, { false, 1, 2, -2 } },
      { { 2, 3, 4 }, { false, 1, 2, 3 } }, { { 2, 0, 3 }, { false, 2 } } }
    for _, c in ipairs(CS) do
      for _, ax in ipairs(c[2]) do
        for _, dt in ipairs({ "float32", "float64", "float16", "int32", "int64", "int8", "uint8" }) do
          local x = oracle.is_int(dt) and input(c[1], dt, 0, 9) or rand(mx, c[1], dt)
          local opts = ax and { axis = ax } or nil
          local y = check(mx, "cumsum", { x }, opts, { rtol = tol(dt) })
          assert.same(ax and c[1] or { numel(c[1]) }, y:shape())
          assert.equal(dt, y:dtype())
          -- int8 / uint8 sums of up to 24 digits wrap: compare modulo the width
          local want = lua_cumsum(flat(x), c[1], ax or nil)
          if dt == "int8" or dt == "uint8" then
            for i = 0, #want do
              if want[i] then
                local w = want[i] % 256
                if dt == "int8" and w >= 128 then w = w - 256 end
                want[i] = w
              end
            end
          end
          same_vals(want, y, dt == "float16" and 2e-2 or tol(dt), "cumsum " .. dt)
        end
      end
    end
    local m = arr({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.same({ 1, 3, 6, 10, 15, 21 }, vals(mx.nd.cumsum(m)))
    assert.same({ 1, 2, 3, 5, 7, 9 }, vals(m:cumsum{ axis = 1 }))
    assert.same({ 1, 3, 6, 4, 9, 15 }, vals(m:cumsum{ axis = -1 }))
    local base = rand(mx, { 3, 4, 5 }, "float32")
    check(mx, "cumsum", { base[2] }, { axis = 2 })
  end)

  it("cumsum: dtype, integer wrap, NaN, errors at the caller's line", function()
    local u = arr({ 250, 6, 1 }, "uint8")
    assert.same({ 250, 0, 1 }, vals(u:cumsum()))
    local w = u:cumsum{ dtype = "int64" }
    assert.equal("int64", w:dtype())
    assert.same({ 250, 256, 257 }, vals(w))
    local f = arr({ 1.7, 2.9, -1.5 }):cumsum{ dtype = "int32" }
    assert.equal("int32", f:dtype())
    assert.same({ 1, 3, 2 }, vals(f)) -- each element truncated, then summed (NumPy)
    assert.equal("float64", arr({ 1, 2 }, "int32"):cumsum{ dtype = "float64" }:dtype())
    local n = vals(arr({ 1, 0 / 0, 2 }):cumsum())
    assert.equal(1, n[1])
    assert.is_true(n[2] ~= n[2] and n[3] ~= n[3])
    local x = mx.nd.zeros({ 2, 3 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = x:cumsum{ axis = 3 } return r end, line)
    assert.is_truthy(msg:find("cumsum", 1, true))
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = x:cumsum{ dtype = "bool" } return r end, line)
    assert.is_truthy(msg:find("dtype", 1, true))
  end)

  it("nansum / nanprod / cumsum: the cpu kernels match the reference at parallel sizes", function()
    local BIG = { { { 300, 500 }, { 1, 2, false } }, { { 1, 200000 }, { 2 } },
      { { 50000, 3 }, { 1 } }, { { 5, 20000, 3 }, { 2 } }, { { 3, 700, 2 }, { 1, 3 } } }
    for _, c in ipairs(BIG) do
      for _, ax in ipairs(c[2]) do
        for _, dt in ipairs({ "float32", "float64", "float16" }) do
          local x = input(c[1], dt, 0.999, 1.001)
          local opts = { axis = ax or nil }
          local rt = dt == "float16" and 1e-2 or dt == "float32" and 1e-5 or 1e-9
          check(mx, "nansum", { x }, opts, { rtol = rt })
          check(mx, "nanprod", { x }, opts, { rtol = rt })
          if ax then check(mx, "cumsum", { rand(mx, c[1], dt) }, opts, { rtol = rt }) end
        end
      end
    end
    -- a NaN-free float32 input reduces as sum does; NaN positions count as 0
    local x = input({ 1000, 300 }, "float32", -1, 1)
    local s = mx.nd.nansum(x, { axis = 1 }):tolist()
    local v = flat(x)
    for j = 0, 299, 37 do
      local w = 0
      for i = 0, 999 do local e = v[i * 300 + j] if e == e then w = w + e end end
      assert.is_true(math.abs(s[j + 1] - w) < 1e-4, "column " .. j)
    end
  end)

  it("moments gives mean and population variance over axes, keepdims, dtypes", function()
    for _, c in ipairs(SHAPES) do
      for _, ax in ipairs(c[2]) do
        for _, kd in ipairs({ false, true }) do
          for _, dt in ipairs({ "float32", "float64", "float16" }) do
            local x = rand(mx, c[1], dt)
            local opts = { keepdims = kd, axes = ax or nil }
            local m, v = mx.nd.moments(x, opts)
            local rm, rv = mx.nd._ref.moments(x, opts)
            local v0 = flat(x)
            local wm, oshape = lua_reduce(v0, c[1], ax or nil, kd, "mean")
            local wv = lua_reduce(v0, c[1], ax or nil, kd, "var")
            assert.same(oshape, m:shape())
            assert.same(oshape, v:shape())
            assert.equal(dt, m:dtype())
            assert.equal(dt, v:dtype())
            same_vals(wm, m, tol(dt), "moments mean " .. dt)
            same_vals(wv, v, tol(dt), "moments var " .. dt)
            same_vals(flat(rm), m, 0, "moments mean vs ref")
            same_vals(flat(rv), v, 0, "moments var vs ref")
          end
        end
      end
    end
    local m, v = arr({ { 1, 2, 3 }, { 4, 5, 6 } }):moments{ axes = 2 }
    assert.same({ 2, 5 }, vals(m))
    assert.is_true(math.abs(v:tolist()[1] - 2 / 3) < 1e-6)
    local e = mx.nd.zeros({ 0, 3 })
    local em, ev = mx.nd.moments(e, { axes = 1 })
    local a, b = em:tolist()[1], ev:tolist()[1]
    assert.is_true(a ~= a and b ~= b)
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = mx.nd.moments(e, { axes = 3 }) return r end, line)
    assert.is_truthy(msg:find("moments", 1, true))
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = mx.nd.moments(arr({ 1 }, "int32")) return r end, line)
    assert.is_truthy(msg:find("moments", 1, true))
  end)
end)

describe("integer reductions wrap like MXNet (accumulated in the dtype)", function()
  local nd = mx.nd
  it("uint8 / int8 / int32 sum and prod wrap modulo 2^bits, in both kernels", function()
    for _, ns in ipairs { nd, nd._ref } do
      assert.are.equal(44, ns.sum(nd.array({ 200, 100 }, { dtype = "uint8" })):item())
      assert.are.equal(0, ns.prod(nd.array({ 64, 64 }, { dtype = "uint8" })):item())
      assert.are.equal(-56, ns.sum(nd.array({ 100, 100 }, { dtype = "int8" })):item())
      -- 2e9 + 2e9 = 4e9 -> 4e9 - 2^32
      assert.are.equal(4e9 - 2 ^ 32, ns.sum(nd.array({ 2e9, 2e9 }, { dtype = "int32" })):item())
      -- max/min stay exact; per-axis sums wrap per output element
      assert.are.equal(250, ns.max(nd.array({ 3, 250, 7 }, { dtype = "uint8" })):item())
      assert.are.same({ 44, 3 },
        ns.sum(nd.array({ { 200, 1 }, { 100, 2 } }, { dtype = "uint8" }), { axis = 1 }):tolist())
    end
  end)
end)

describe("any / all", function()
  local nd = mx.nd
  -- the Lua oracle: an element is true when nonzero (NaN included)
  local function oracle_reduce(t, axis, is_all)
    local r = {}
    if axis == 1 then
      for j = 1, #t[1] do
        local v = is_all
        for i = 1, #t do if (t[i][j] ~= 0) ~= is_all then v = not is_all end end
        r[j] = v
      end
    else
      for i = 1, #t do
        local v = is_all
        for j = 1, #t[i] do if (t[i][j] ~= 0) ~= is_all then v = not is_all end end
        r[i] = v
      end
    end
    return r
  end
  local function bools(a)
    local t = a:tolist()
    for i = 1, #t do t[i] = t[i] == true or t[i] == 1 end
    return t
  end
  it("reduces over axes to bool, NaN counting as true, on every dtype", function()
    local t = { { 0, 1, 2 }, { 0, 0, 0 / 0 }, { 3, 4, 5 } }
    for _, dt in ipairs({ "float32", "float64", "int32", "int64", "uint8", "int8" }) do
      local src = {}
      for i = 1, 3 do
        src[i] = {}
        for j = 1, 3 do
          local v = t[i][j]
          src[i][j] = (v ~= v and not dt:match("^float")) and 7 or v
        end
      end
      local x = arr(src, dt)
      for axis = 1, 2 do
        local a, l = nd.any(x, { axis = axis }), nd.all(x, { axis = axis })
        assert.are.equal("bool", a:dtype())
        assert.are.same(oracle_reduce(src, axis, false), bools(a))
        assert.are.same(oracle_reduce(src, axis, true), bools(l))
      end
    end
  end)
  it("keepdims, all axes, bool input and empty extents", function()
    local x = arr({ { 0, 1 }, { 0, 0 } })
    assert.are.same({ 1, 2 }, nd.any(x, { axis = 1, keepdims = true }):shape())
    assert.are.same({}, nd.all(x):shape())
    assert.is_false(bools(nd.all(x):reshape({ 1 }))[1])
    assert.is_true(bools(nd.any(x):reshape({ 1 }))[1])
    local b = arr({ 1, 1 }, "bool")
    assert.is_true(bools(nd.all(b):reshape({ 1 }))[1])
    local e = nd.zeros({ 0, 3 })
    assert.are.same({ false, false, false }, bools(nd.any(e, { axis = 1 })))
    assert.are.same({ true, true, true }, bools(nd.all(e, { axis = 1 })))
  end)
  it("records no gradient and rejects a bad axis at the caller's line", function()
    local x = arr({ 1, 2 })
    x:attach_grad()
    local y = mx.autograd.record(function() return nd.any(x) end)
    assert.is_true(bools(y:reshape({ 1 }))[1])
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nd.all(x, { axis = 3 }) return r end, line)
    assert.is_truthy(msg:find("all: axis=3", 1, true))
  end)
end)

describe("any / all: the cpu kernels against the reference", function()
  local DT = { "float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8",
    "bool" }
  it("match over axes, keepdims, dtypes, sizes, sparse and dense zeros", function()
    for _, c in ipairs(CASES) do
      local shape = c[1]
      for _, ax in ipairs(c[2]) do
        for _, kd in ipairs({ false, true }) do
          local opts = { keepdims = kd }
          if ax then opts.axis = ax end
          for _, dt in ipairs(small(shape) and DT or { "float32" }) do
            -- half zeros (any mixed), no zeros (all true), rare zeros (all mixed on short extents)
            for _, dom in ipairs({ { 0, 1 }, { 1, 9 }, { 0, 40 } }) do
              local x = mx.nd.array(rand(mx, shape, "int32", dom), { dtype = dt })
              check(mx, "any", { x }, opts)
              check(mx, "all", { x }, opts)
            end
          end
        end
      end
    end
    local base = mx.nd.array(rand(mx, { 3, 4, 5 }, "int32", { 0, 3 }), { dtype = "float32" })
    check(mx, "any", { base[2] }, { axis = 2 })
    check(mx, "all", { base[3] })
  end)
  it("treat -0 as zero and NaN as nonzero on every float dtype", function()
    for _, dt in ipairs({ "float32", "float64", "float16", "bfloat16" }) do
      local x = mx.nd.array({ { -0.0, 0 }, { 0 / 0, -0.0 } }, { dtype = dt })
      local a = check(mx, "any", { x }, { axis = 2 }):tolist()
      local l = check(mx, "all", { x }, { axis = 2 }):tolist()
      assert.is_truthy(a[1] == false or a[1] == 0, dt)
      assert.is_truthy(a[2] == true or a[2] == 1, dt)
      assert.is_truthy(l[2] == false or l[2] == 0, dt)
    end
  end)
end)

-- NaN/Inf in reductions, as MXNet 1.9 does it. MXNet's sources:
-- sum/mean/prod/cumsum are plain IEEE arithmetic; max/min use mshadow's red::maximum/
-- minimum, which keep a NaN once seen (NaN propagates); argmax/argmin (reduce_with_axis)
-- take the index of the FIRST NaN, else the first extreme; norm ord 2 is the scaled nrm2
-- reducer (no overflow for huge f64 values); nansum/nanprod skip NaN (as 0 / 1).
describe("NaN and Inf in reductions (MXNet 1.9's behaviour)", function()
  local nan, inf = 0 / 0, math.huge
  local function isnan(v) return v ~= v end
  local KERNELS = { { "cpu", mx.nd }, { "ref", mx.nd._ref } }
  local function each(f)
    for _, k in ipairs(KERNELS) do
      for _, dt in ipairs { "float32", "float64" } do f(k[2], dt, k[1] .. " " .. dt) end
    end
  end
  it("sum, mean, prod, cumsum propagate NaN; Inf follows IEEE (inf - inf, 0 * inf: NaN)", function()
    each(function(F, dt, what)
      local x = arr({ 1, nan, 3 }, dt)
      for _, op in ipairs { "sum", "mean", "prod" } do
        assert.is_true(isnan(vals(F[op](x))[1]), what .. " " .. op)
      end
      local c = vals(F.cumsum(x))
      assert.is_true(c[1] == 1 and isnan(c[2]) and isnan(c[3]), what .. " cumsum")
      assert.same({ inf }, vals(F.sum(arr({ 1, inf }, dt))), what)
      assert.is_true(isnan(vals(F.sum(arr({ -inf, inf }, dt)))[1]), what)
      assert.is_true(isnan(vals(F.prod(arr({ 0, inf }, dt)))[1]), what)
      assert.same({ -inf }, vals(F.prod(arr({ -2, inf }, dt))), what)
    end)
  end)
  it("max and min propagate NaN wherever it sits; infinities are ordinary extremes", function()
    each(function(F, dt, what)
      local y = arr({ { 1, nan, 5 }, { -inf, 2, inf }, { nan, 4, 1 }, { 4, 4, nan } }, dt)
      local mx_, mn = vals(F.max(y, { axis = 2 })), vals(F.min(y, { axis = 2 }))
      assert.is_true(isnan(mx_[1]) and mx_[2] == inf and isnan(mx_[3]) and isnan(mx_[4]), what)
      assert.is_true(isnan(mn[1]) and mn[2] == -inf and isnan(mn[3]) and isnan(mn[4]), what)
      assert.same({ -inf }, vals(F.max(arr({ -inf, -inf }, dt))), what)
      assert.same({ inf }, vals(F.min(arr({ inf, inf }, dt))), what)
    end)
  end)
  it("argmax and argmin give the first NaN, else the first extreme (1-based)", function()
    each(function(F, dt, what)
      local y = arr({ { 1, nan, 5 }, { -inf, 2, inf }, { 4, 4, 1 }, { 7, nan, nan } }, dt)
      assert.same({ 2, 3, 1, 2 }, vals(F.argmax(y, { axis = 2 })), what)
      assert.same({ 2, 1, 3, 2 }, vals(F.argmin(y, { axis = 2 })), what)
      assert.same({ 1 }, vals(F.argmax(arr({ nan, 5 }, dt))), what)
      assert.same({ 1 }, vals(F.argmax(arr({ -inf, -inf }, dt))), what)
      assert.same({ 2 }, vals(F.argmin(arr({ 3, -inf, -inf }, dt))), what)
    end)
  end)
  it("norm propagates NaN, gives inf for an infinite element, and does not overflow", function()
    each(function(F, dt, what)
      assert.is_true(isnan(vals(F.norm(arr({ 1, nan }, dt)))[1]), what)
      assert.is_true(isnan(vals(F.norm(arr({ inf, nan }, dt)))[1]), what)
      assert.same({ inf }, vals(F.norm(arr({ inf, 2 }, dt))), what)
      -- MXNet's nrm2 gives NaN here (its running scale divides inf by inf): see the report
      assert.same({ inf }, vals(F.norm(arr({ inf, -inf }, dt))), what)
      assert.same({ inf }, vals(F.norm(arr({ -inf, 2 }, dt), { ord = 1 })), what)
    end)
    for _, k in ipairs(KERNELS) do
      local F = k[2]
      local big = vals(F.norm(arr({ 3e200, 4e200 }, "float64")))[1]
      assert.is_true(math.abs(big / 5e200 - 1) < 1e-15, k[1] .. " " .. big)
      local tiny = vals(F.norm(arr({ { 3e-200, 4e-200 }, { 0, 0 } }, "float64"), { axis = 2 }))
      assert.is_true(math.abs(tiny[1] / 5e-200 - 1) < 1e-15 and tiny[2] == 0, k[1])
      local f32 = vals(F.norm(arr({ 3e30, 4e30 }, "float32")))[1] -- squares beyond f32's range
      assert.is_true(math.abs(f32 / 5e30 - 1) < 1e-6, k[1] .. " f32")
      -- the scaled path agrees with the plain one on ordinary values
      local x = mx.nd.array(rand(mx, { 3, 7 }, "float64", { -2, 2 }), { dtype = "float64" })
      local want = vals(F.sqrt(F.sum(F.square(x), { axis = 2 })))
      local got = vals(F.norm(x, { axis = 2 }))
      for i = 1, 3 do assert.is_true(math.abs(got[i] - want[i]) < 1e-14 * want[i], k[1]) end
    end
  end)
  it("nansum and nanprod skip NaN (0 and 1 for an all-NaN slice); Inf still counts", function()
    each(function(F, dt, what)
      local y = arr({ { 1, nan, 5 }, { nan, nan, nan }, { inf, nan, 2 } }, dt)
      assert.same({ 6, 0, inf }, vals(F.nansum(y, { axis = 2 })), what)
      assert.same({ 5, 1, inf }, vals(F.nanprod(y, { axis = 2 })), what)
      assert.is_true(isnan(vals(F.nansum(arr({ inf, -inf, nan }, dt)))[1]), what)
    end)
  end)
  it("max/min's gradient of a NaN result is zero everywhere (MXNet: redres == redsrc)", function()
    local x = arr({ 1, nan, 3 }, "float64")
    x:attach_grad()
    mx.autograd.record(function() mx.nd.max(x):backward() end)
    assert.same({ 0, 0, 0 }, vals(x:grad()))
  end)
end)
