-- spec/linalg_paths_spec.lua — the linalg family's results do not depend on the code path
-- the CPU libraries select: a trsm whose elements cancel (judged normwise, against a
-- float64 computation), and bf16 products where oneDNN has no bf16 matmul for the CPU
-- (ONEDNN_MAX_CPU_ISA=AVX2 in a child: the widened f32 path). The sweep over every
-- OPENBLAS_CORETYPE / ONEDNN_MAX_CPU_ISA: spec/sweep_isa_spec.lua.
local mx = require("mx")
local child = require("helpers.child")
local nd = mx.nd

describe("linalg_trsm with a huge alpha", function()
  -- A = B, so op(A)^-1 B's first column is alpha e1 exactly: the element below the
  -- diagonal cancels (alpha b2 - a21 x1) to 0 in exact arithmetic, and to a rounding error
  -- of eps |alpha b| (2.3e13 against 1e30 on OpenBLAS's AVX-512 kernels) in float64.
  local v = { { 13 / 36, 25 / 36, 37 / 36 }, { 49 / 36, 61 / 36, 73 / 36 }, { 17 / 36, 29 / 36, 41 / 36 } }
  for _, dt in ipairs({ "float32", "float64" }) do
    it("agrees with the reference normwise, and with the exact first column (" .. dt .. ")", function()
      local a = nd.array(v, { dtype = dt })
      local x = nd.linalg_trsm(a, a, { alpha = 1e30 }):astype("float64"):totable()
      local r = nd._ref.linalg_trsm(a, a, { alpha = 1e30 }):astype("float64"):totable()
      local scale = 0
      for i = 1, 3 do for j = 1, 3 do scale = math.max(scale, math.abs(r[i][j])) end end
      local eps = dt == "float32" and 2 ^ -23 or 2 ^ -52
      for i = 1, 3 do
        for j = 1, 3 do
          assert.is_true(math.abs(x[i][j] - r[i][j]) <= 16 * eps * scale,
            string.format("(%d,%d): %g vs %g", i, j, x[i][j], r[i][j]))
        end
      end
      assert.is_true(math.abs(x[1][1] - 1e30) <= 16 * eps * 1e30)
      assert.is_true(math.abs(x[2][1]) <= 16 * eps * 1e30 and math.abs(x[3][1]) <= 16 * eps * 1e30)
    end)
  end
end)

describe("bf16 products on a CPU oneDNN has no bf16 matmul for", function()
  local code = [[
    local mx = require("mx")
    local nd = mx.nd
    local function bf(shape, k)
      local t = nd.empty(shape, { dtype = "float32" })
      local p = t:data_ptr()
      for i = 0, t:size() - 1 do p[i] = ((i * k) % 13 - 6) / 4 end
      return t:astype("bfloat16")
    end
    local bad = {}
    local function check(name, got, want)
      local d = nd.abs(got:astype("float64") - want:astype("float64")):max():item()
      local s = nd.abs(want:astype("float64")):max():item()
      if not (d <= 1e-2 * math.max(1, s)) then bad[#bad + 1] = name .. " differs by " .. d end
    end
    for _, sz in ipairs({ { 2, 4, 3 }, { 40, 70, 50 } }) do
      local m, k, n = sz[1], sz[2], sz[3]
      local a, b = bf({ m, k }, 7), bf({ k, n }, 5)
      check("dot", nd.dot(a, b), nd._ref.dot(a, b))
      local a3, b3 = bf({ 2, m, k }, 3), bf({ 2, k, n }, 11)
      check("batch_dot", nd.batch_dot(a3, b3), nd._ref.batch_dot(a3, b3))
      check("matmul", nd.matmul(a3, b3), nd._ref.matmul(a3, b3))
      local w = bf({ n, k }, 9)
      check("fully_connected", nd.fully_connected(a, w, { num_hidden = n, no_bias = true }),
        nd._ref.fully_connected(a, w, { num_hidden = n, no_bias = true }))
    end
    print(#bad == 0 and "OK" or table.concat(bad, "; "))
  ]]
  for _, isa in ipairs({ "AVX2", "SSE41", "ALL" }) do
    it("match the reference under ONEDNN_MAX_CPU_ISA=" .. isa, function()
      local r = child.run(code, 120, { ONEDNN_MAX_CPU_ISA = isa })
      assert.are.equal(0, r.status, r.out)
      assert.is_truthy(r.out:find("OK", 1, true), r.out)
    end)
  end
end)
