-- spec/sweep_isa_spec.lua — the reliability sweep under every OpenBLAS core and oneDNN ISA
-- this CPU can run (tools/sweep/isa.lua: OPENBLAS_CORETYPE, ONEDNN_MAX_CPU_ISA), so that a
-- result never depends on the machine CI happens to get. The default path runs the
-- machine-dependent ops (the GEMM-based linalg and rnn kernels, every op with a oneDNN
-- kernel); every other variant runs
-- the cases that reached a kernel there and must give the same verdict, with no failing
-- case beyond spec/fixtures/sweep_known.lua. The whole sweep per variant:
--   luajit tools/sweep/isa.lua
local isa = dofile("tools/sweep/isa.lua")
local runner = dofile("tools/sweep/runner.lua")

describe("reliability sweep under every CPU code path", function()
  local out, skipped = isa.ci(runner)
  for _, s in ipairs(skipped) do print("not run  " .. s[1] .. ": " .. s[2]) end

  it("finds the library code paths to run", function()
    assert.is_true(#out >= 1)
    local blas, dnnl = 0, 0
    for _, o in ipairs(out) do
      if o.name:find("OPENBLAS_CORETYPE", 1, true) then blas = blas + 1 end
      if o.name:find("ONEDNN_MAX_CPU_ISA", 1, true) then dnnl = dnnl + 1 end
    end
    -- any x86-64 CPU runs OpenBLAS's Prescott kernels and oneDNN's SSE4.1 ones
    assert.is_true(blas >= 1, "no OPENBLAS_CORETYPE variant found")
    assert.is_true(dnnl >= 1, "no ONEDNN_MAX_CPU_ISA variant found")
  end)

  for _, o in ipairs(out) do
    it("gives the default path's verdicts: " .. o.name, function()
      print(o.name .. ": " .. runner.report(o.res))
      assert.is_true(o.res.totals.tried > 0)
      assert.are.equal(0, #o.new, "failures:\n" .. table.concat(o.new, "\n", 1, math.min(#o.new, 40)))
    end)
  end
end)
