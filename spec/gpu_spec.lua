-- spec/gpu_spec.lua #gpu — libmx_cuda against the CPU: every op the table marks
-- `cuda = true` is run on gpu(0) over shapes (incl. broadcasting, 0-d, empty, large)
-- and dtypes, and compared with the reference kernels on the CPU; copies both ways.
-- Pending (with the reason) when mx.num_gpus() == 0.
local ffi = require("ffi")
local mx = require("mx")
local lib = require("mx.core.lib")
local nd = mx.nd

local ngpu = mx.num_gpus()
local why = ffi.string(lib.C.mx_gpu_status())
-- MX_GPU_SPEC_FAKE=1 runs this spec with mx.cpu() standing in for the GPU: it checks
-- the spec itself (and the optimised CPU kernels against the reference) on any machine.
local FAKE = os.getenv("MX_GPU_SPEC_FAKE") == "1"
local DEV = FAKE and mx.cpu() or mx.gpu(0)

local DT = { "float32", "float64", "float16", "bfloat16", "uint8", "int8", "int32", "int64",
  "bool" }
local CODE = {}
for _, d in ipairs(DT) do CODE[nd.dtype_code(d)] = d end

-- tolerance by result dtype (GPU computes f16/bf16/f32 in float, the oracle in double)
local RTOL = { float32 = 2e-5, float64 = 1e-12, float16 = 4e-3, bfloat16 = 2e-2 }

local function close(a, b, dtype)
  if a ~= a and b ~= b then return true end -- NaN both
  if a == b then return true end
  local rt = RTOL[dtype]
  if not rt then return false end
  if a == math.huge or a == -math.huge or b == math.huge or b == -math.huge then return false end
  return math.abs(a - b) <= rt * math.max(1, math.abs(a), math.abs(b))
end

-- Compare a GPU tensor with a CPU one: dtype, shape and values. Returns nil or why.
local function diff(g, c)
  if g:context() ~= DEV then return "result on " .. tostring(g:context()) end
  if g:dtype() ~= c:dtype() then return "dtype " .. g:dtype() .. " vs " .. c:dtype() end
  local gs, cs = table.concat(g:shape(), "x"), table.concat(c:shape(), "x")
  if gs ~= cs then return "shape " .. gs .. " vs " .. cs end
  local gv, cv = g:to(mx.cpu()):tolist(), c:tolist()
  for i = 1, #cv do
    if not close(gv[i], cv[i], c:dtype()) then
      return string.format("element %d: gpu %.9g, cpu %.9g (%s)", i, gv[i], cv[i], c:dtype())
    end
  end
  return nil
end

-- Runs mx.nd.<name>(...) on the reference kernels (CPU) and again with the tensor
-- arguments copied to DEV. nil where the reference rejects the arguments (nothing to
-- compare) or the two agree; else the difference (diff) or the device's error.
local function ref_mismatch(name, ...)
  local ok, c = pcall(nd._ref[name], ...)
  if not ok then return nil end
  local args, n = { ... }, select("#", ...)
  for i = 1, n do
    if type(args[i]) == "cdata" then args[i] = args[i]:to(DEV) end
  end
  local ok2, g = pcall(nd[name], unpack(args, 1, n))
  if ok2 then return diff(g, c) end
  return tostring(g)
end

-- deterministic test values on a 0.25 grid (exact in every float dtype)
local function values(n, lo, hi, seed)
  local t, x = {}, seed or 7
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    local k = lo + (x % math.floor((hi - lo) * 4 + 1)) / 4
    t[i] = k
  end
  return t
end

local function tensor(shape, dtype, lo, hi, seed)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local v = values(n, lo, hi, seed)
  if dtype ~= "float32" and dtype ~= "float64" and dtype ~= "float16" and dtype ~= "bfloat16" then
    for i = 1, n do v[i] = math.floor(v[i]) end
  end
  local t = nd.array(v, { dtype = dtype })
  return t:reshape(shape)
end

-- input domains: ops that need positive inputs, or nonzero divisors
local POSITIVE = { log = true, sqrt = true, rsqrt = true, reciprocal = true, pow = true,
  pow_scalar = true, rpow_scalar = true, log1p = true, div = true, rdiv_scalar = true }

local function dtypes_of(op)
  local out = {}
  for _, c in ipairs(op.dtype_list) do if CODE[c] then out[#out + 1] = CODE[c] end end
  return out
end

local cuda_ops = {}
for _, op in ipairs(lib.ops) do if op.cuda then cuda_ops[#cuda_ops + 1] = op end end

describe("gpu #gpu", function()
  if ngpu == 0 and not FAKE then
    pending("no GPU: " .. why)
    return
  end
  local gpu, cpu = DEV, mx.cpu()

  it("has a GPU kernel for every op marked cuda = true in the op table", function()
    local missing = {}
    for _, op in ipairs(cuda_ops) do
      local ok, err
      if op.ctx then
        ok, err = pcall(nd[op.name], { 2 }, { ctx = gpu })
      elseif op.nin == 1 then
        ok, err = pcall(nd[op.name], nd.ones({ 2 }, { ctx = gpu }))
      elseif op.nin == 2 then
        ok, err = pcall(nd[op.name], nd.ones({ 2 }, { ctx = gpu }), nd.ones({ 2 }, { ctx = gpu }))
      else
        ok = true
      end
      if not ok and tostring(err):find("no kernel") then missing[#missing + 1] = op.name end
    end
    assert.are.same({}, missing)
  end)

  it("copies every dtype host -> device -> host exactly, and converts on the way", function()
    for _, d in ipairs(DT) do
      local x = tensor({ 3, 5 }, d, -4, 4, 3)
      local g = x:to(gpu)
      assert.equal(gpu, g:context())
      assert.equal(d, g:dtype())
      assert.are.same(x:tolist(), g:to(cpu):tolist())
      local g2 = nd.array(x:totable(), { ctx = gpu, dtype = d })
      assert.are.same(x:tolist(), g2:to(cpu):tolist())
      local gg = g:to(gpu) -- device -> device
      assert.are.same(x:tolist(), gg:to(cpu):tolist())
      local conv = x:to(gpu, "float64") -- dtype change across devices
      assert.are.same(x:to(cpu, "float64"):tolist(), conv:to(cpu):tolist())
    end
    local big = nd.ones { 1000003 }
    assert.equal(1000003, big:to(gpu):to(cpu):size())
    local e = nd.zeros { 0, 3 }
    assert.are.same({ 0, 3 }, e:to(gpu):shape())
  end)

  it("refuses to mix devices with a clear error", function()
    if FAKE then return end
    local a, b = nd.ones { 2 }, nd.ones({ 2 }, { ctx = gpu })
    local ok, err = pcall(nd.add, a, b)
    assert.is_false(ok)
    assert.matches("different devices", err)
  end)

  it("matches the CPU on creation ops for every dtype", function()
    for _, op in ipairs(cuda_ops) do
      if op.ctx then
        for _, d in ipairs(DT) do
          for _, shape in ipairs { { 2, 3 }, {}, { 0 }, { 1000 } } do
            local opts = { dtype = d }
            if op.pindex.value then opts.value = 2.5 end
            local c = nd[op.name](shape, opts)
            opts.ctx = gpu
            local g = nd[op.name](shape, opts)
            local why_ = diff(g, c)
            assert(not why_, op.name .. " " .. d .. ": " .. tostring(why_))
          end
        end
      end
    end
  end)

  it("matches the reference kernels on unary and scalar ops for every dtype", function()
    local bad = {}
    for _, op in ipairs(cuda_ops) do
      if not op.ctx and op.nin == 1 then
        local is_scalar = op.pindex.scalar ~= nil
        for _, d in ipairs(dtypes_of(op)) do
          for _, shape in ipairs { { 3, 4 }, {}, { 0, 2 }, { 1025 } } do
            local lo = POSITIVE[op.name] and 0.25 or -3
            local x = tensor(shape, d, lo, 3, #shape + 1)
            local opts = is_scalar and { scalar = (op.name:find("pow") and 2 or 1.5) } or nil
            local why_ = ref_mismatch(op.name, x, opts)
            if why_ then bad[#bad + 1] = op.name .. " " .. d .. " " .. #shape .. "-d: " .. why_ end
          end
        end
      end
    end
    assert.are.same({}, bad)
  end)

  it("matches the reference kernels on binary ops with broadcasting and promotion", function()
    local shapes = {
      { { 3, 4 }, { 3, 4 } }, { { 3, 1 }, { 1, 4 } }, { { 2, 3, 4 }, { 4 } }, { {}, { 3 } },
      { { 5 }, {} }, { { 0, 3 }, { 1, 3 } }, { { 2, 1, 3, 1 }, { 1, 4, 1, 5 } },
      { { 1000003 }, { 1000003 } }, { { 257, 3 }, { 257, 1 } },
    }
    local pairs_ = { { "float16", "float32" }, { "int32", "float32" }, { "uint8", "int8" },
      { "bfloat16", "float16" }, { "int64", "float64" }, { "float32", "float64" } }
    local bad = {}
    for _, op in ipairs(cuda_ops) do
      if not op.ctx and op.nin == 2 then
        local combos = {}
        for _, d in ipairs(dtypes_of(op)) do combos[#combos + 1] = { d, d } end
        for _, p in ipairs(pairs_) do combos[#combos + 1] = p end
        for _, dd in ipairs(combos) do
          for si, sh in ipairs(shapes) do
            local big = sh[1][1] == 1000003
            if not big or dd[1] == dd[2] and (dd[1] == "float32" or dd[1] == "float16") then
              local lo = POSITIVE[op.name] and 0.25 or -3
              local a = tensor(sh[1], dd[1], -3, 3, si)
              local b = tensor(sh[2], dd[2], lo, 3, si + 11)
              if op.name == "div" and not RTOL[dd[2]] then -- integer divisors: nonzero
                b = nd.maximum(b, nd.ones(sh[2], { dtype = dd[2] }))
              end
              local why_ = ref_mismatch(op.name, a, b)
              if why_ then
                bad[#bad + 1] = string.format("%s %s,%s shapes #%d: %s", op.name, dd[1], dd[2],
                  si, why_)
              end
            end
          end
        end
      end
    end
    assert.are.same({}, bad)
  end)

  it("writes into out= on the GPU and keeps metamethods on the device", function()
    local a = nd.array({ 1, 2, 3 }, { ctx = gpu })
    local b = nd.array({ 10, 20, 30 }, { ctx = gpu })
    local c = nd.zeros({ 3 }, { ctx = gpu })
    nd.add(a, b, { out = c })
    assert.are.same({ 11, 22, 33 }, c:to(cpu):tolist())
    local r = (a * 2 + b) / 2 - 1
    assert.equal(gpu, r:context())
    assert.are.same({ 5, 11, 17 }, r:to(cpu):tolist())
  end)
end)
