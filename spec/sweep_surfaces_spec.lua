-- spec/sweep_surfaces_spec.lua — the sweep of the surfaces above the ops, GENERATED from
-- what they expose (spec/helpers/sweep_gluon.lua, spec/helpers/sweep_apis.lua; the
-- runner: tools/sweep/surfaces.lua):
--   * every Gluon layer's constructor options with wrong values, and every layer run
--     hybridized against eager (values, input and parameter gradients, the parameters
--     after the step; 1, 2 and 3 calls in one record; train and predict mode);
--   * every DataLoader option with wrong values and the option combinations with workers
--     against num_workers = 0;
--   * every kvstore method with wrong arguments, and the stores' sums;
--   * session hand-over of every kind of tensor and of wrong handles;
--   * every public function of the modules of spec/helpers/sweep_modules.lua (file
--     readers and writers, tokenizers, plots, initializers, optimizers, schedulers,
--     metrics, the profiler) with no argument and each wrong value at every argument
--     position;
--   * every public method of mx.mod.Module (spec/helpers/sweep_mod.lua) with each wrong
--     value at every argument, the others valid, and each valid call out of order.
-- Each case runs in a child process (helpers/child_gluon.lua: a crash fails one case).
-- PASS: every case is a clean error at the caller's line naming the class or function, or
-- a correct result ("result" cases: the result, never an error), except the cases of
-- spec/fixtures/surface_sweep_known.lua (reported pending; the list may only shrink).
--   luajit tools/sweep/surfaces.lua [--filter PATTERN]
local mx = require("mx")
local S = dofile("tools/sweep/surfaces.lua")

describe("surface sweep", function()
  local cases, n = S.cases(mx)
  local known = dofile("spec/fixtures/surface_sweep_known.lua")

  it("covers every layer of gluon.nn and gluon.rnn, their options, and a hybridized run of most", function()
    local st = n.gstats
    assert.is_true(st.layers >= 50, st.layers .. " layers")
    assert.is_true(st.options >= 200, st.options .. " options")
    assert.is_true(st.hybrid >= 200, st.hybrid .. " hybridized cases")
    print("layers with no working call found (no hybridized case): " .. table.concat(st.no_call, ", "))
    assert.is_true(n.functions >= 100, n.functions .. " module functions")
    -- every Module method has a valid call to sweep its arguments from (helpers/sweep_mod.lua VALID)
    assert.are.same({}, n.mstats.missing)
    assert.is_true(n.mstats.methods >= 25 and n.mstats.arguments >= 60,
      n.mstats.methods .. " Module methods, " .. n.mstats.arguments .. " arguments")
  end)

  local res
  it("every case is a clean error or a correct result", function()
    local r, c = S.run(cases)
    res = r
    print(S.report(c) .. string.format(" (%d Gluon, %d DataLoader/kvstore/session, %d of %d module "
      .. "functions, %d Module: %d methods, %d arguments)", n.gluon, n.apis, n.modules, n.functions,
      n.mod, n.mstats.methods, n.mstats.arguments))
    local bad = {}
    for _, cs in ipairs(cases) do
      local x = res[cs.id]
      if x.status ~= "clean" and x.status ~= "correct" and not known[cs.id] then
        bad[#bad + 1] = string.format("  %-8s %s  %s", x.status, cs.id, x.msg:sub(1, 300))
      end
    end
    table.sort(bad)
    if #bad > 0 then print(table.concat(bad, "\n", 1, math.min(#bad, 200))) end
    assert.are.equal(0, #bad, #bad .. " failing cases (listed above)")
  end)

  it("reports the known failures as pending, and known cases that now pass", function()
    local fixed, pend = {}, 0
    for id in pairs(known) do
      local x = res and res[id]
      if x and (x.status == "clean" or x.status == "correct") then fixed[#fixed + 1] = id
      elseif x then pend = pend + 1 end
    end
    if #fixed > 0 then print("known surface-sweep failures now pass (remove them from the list):\n  "
      .. table.concat(fixed, "\n  ")) end
    assert.are.same({}, fixed)
    if pend > 0 then pending(pend .. " known failures (spec/fixtures/surface_sweep_known.lua)") end
  end)
end)
