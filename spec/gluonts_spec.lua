-- spec/gluonts_spec.lua — mx.gluonts's data side against GluonTS itself (fixtures from
-- tools/fixtures/make_gluonts_fixture.py: gluonts from PyPI on pandas): time features,
-- lags and seasonalities per frequency, the Evaluator's per-series and aggregate metrics
-- on the same forecasts; periods, splits with rolling windows, the transformation chain,
-- the instance splitter and the batches (DataLoader workers give the same batches).
local gts = require("mx.gluonts")
local P = require("mx.gluonts.period")
local T = gts.transform
local REF = dofile("spec/fixtures/gluonts_ref.lua")

local function close(a, b, tol, what)
  assert.is_true(math.abs(a - b) <= tol * (1 + math.abs(b)),
    string.format("%s: %.15g vs gluonts %.15g", what, a, b))
end

describe("mx.gluonts time features, lags, seasonality (vs gluonts)", function()
  for f, want in pairs(REF.features) do
    it("frequency " .. f .. ": time features of 40 periods", function()
      local feats = gts.time_feature.time_features_from_frequency_str(f)
      assert.equal(#want.names, #feats)
      local start = P.parse(want.start, f)
      for j, feat in ipairs(feats) do
        assert.equal(want.names[j], feat.name)
        for t = 1, 40 do
          close(feat(P.add(start, t - 1)), want.values[j][t], 1e-12, f .. " " .. feat.name .. " " .. t)
        end
      end
    end)
  end
  it("gives GluonTS's lags and seasonalities", function()
    for f, lags in pairs(REF.lags) do
      assert.same(lags, gts.time_feature.get_lags_for_frequency(f), f)
      assert.equal(REF.seasonality[f], gts.time_feature.get_seasonality(f), f)
    end
  end)
  it("parses and prints periods as pandas does", function()
    assert.equal("1949-01", P.tostring(P.parse("1949-01", "M")))
    assert.equal("1960Q3", P.tostring(P.add(P.parse("1960Q1", "Q"), 2)))
    assert.equal("2019-12-30/2020-01-05", P.tostring(P.parse("2020-01-01", "W")))
    assert.equal("2000-06-05 01:30", P.tostring(P.add(P.parse("2000-06-05 00:00", "30min"), 3)))
    assert.equal("2021-03-01", P.tostring(P.add(P.parse("2020-02-28", "D"), 367)))
    assert.has_error(function() P.freq("3Q") end, "gluonts: only multiple 1 is supported for frequency '3Q'")
    assert.has_error(function() P.freq("fortnight") end)
  end)
end)

describe("mx.gluonts Evaluator (vs gluonts's Evaluator on the same forecasts)", function()
  local E = REF.eval
  local tss, fcs = {}, {}
  for i, s in ipairs(E.series) do
    tss[i] = { start = P.parse(s.start, "M"), target = s.target }
    fcs[i] = gts.forecast.SampleForecast(E.forecasts[i].samples, P.parse(E.forecasts[i].start, "M"),
      { item_id = tostring(i - 1) })
  end
  local agg, items = gts.Evaluator { quantiles = { 0.1, 0.5, 0.9 } }(tss, fcs)
  it("matches every aggregate metric", function()
    local n = 0
    for k, v in pairs(E.agg) do
      assert.is_not_nil(agg[k], k)
      -- gluonts 0.17 computes MAE_Coverage from the last quantile's coverage for every q
      -- (a loop variable left over); ours is mean |Coverage[q] - q| (docs/gluonts.md)
      if k ~= "MAE_Coverage" then close(agg[k], v, 1e-12, k) end
      n = n + 1
    end
    assert.is_true(n >= 25)
    local want = 0
    for _, q in ipairs { 0.1, 0.5, 0.9 } do
      want = want + math.abs(E.agg["Coverage[" .. gts.evaluation._qkey(q) .. "]"] - q) / 3
    end
    close(agg.MAE_Coverage, want, 1e-12, "MAE_Coverage")
  end)
  it("matches the per-series metrics, the series with NaN targets too", function()
    for i, want in ipairs(E.items) do
      for k, v in pairs(want) do close(items[i][k], v, 1e-12, "series " .. i .. " " .. k) end
    end
    assert.equal(1, items[3].num_masked_target_values)
  end)
  it("takes GluonTS's sample quantile (NumPy's half-to-even rounding)", function()
    local s = {}
    for k = 1, 100 do s[k] = { k } end
    local f = gts.forecast.SampleForecast(s, P.parse("2000-01", "M"))
    assert.equal(51, f:quantile(0.5)[1]) -- round(49.5) = 50 (even): the 51st
    assert.equal(11, f:quantile(0.1)[1])
    assert.equal(50.5, f:mean()[1])
  end)
end)

describe("mx.gluonts datasets, splits and transformations", function()
  local y = {}
  for t = 1, 30 do y[t] = t end
  y[5] = 0 / 0
  local ds = gts.ListDataset({ { start = "2000-01", target = y, item_id = "a" } }, "M")
  it("splits with rolling windows (OffsetSplitter)", function()
    local train, tmpl = gts.split(ds, { offset = -9 })
    assert.equal(21, #train:get(1).target)
    local test = tmpl:generate_instances { prediction_length = 3, windows = 3 }
    assert.equal(3, test:len())
    local k = 0
    for inp, lab in test:iter() do
      k = k + 1
      assert.equal(21 + 3 * (k - 1), #inp.target)
      assert.same({ 22 + 3 * (k - 1), 23 + 3 * (k - 1), 24 + 3 * (k - 1) }, lab.target)
      assert.equal(P.tostring(P.add(P.parse("2000-01", "M"), 21 + 3 * (k - 1))), P.tostring(lab.start))
    end
    assert.has_error(function() tmpl:generate_instances { prediction_length = 3, windows = 4 } end)
    local tr2 = gts.split(ds, { date = "2001-06" })
    assert.equal(18, #tr2:get(1).target)
  end)
  it("runs the chain and cuts instances with padding", function()
    local chain = T.Chain {
      T.AddObservedValuesIndicator { imputation_method = T.DummyValueImputation(0) },
      T.AddTimeFeatures { time_features = gts.time_feature.time_features_from_frequency_str("M"),
        pred_length = 4 },
      T.AddAgeFeature { pred_length = 4 },
      T.VstackFeatures { output_field = "time_feat", input_fields = { "time_feat", "feat_dynamic_age" } },
    }
    local tr = chain:apply(ds.entries, true)[1]
    assert.equal(0, tr.observed_values[5])
    assert.equal(0, tr.target[5])
    assert.equal(2, #tr.time_feat)
    assert.equal(30, #tr.time_feat[1])
    close(tr.time_feat[2][3], math.log10(4), 1e-15, "age")
    local te = chain:apply(ds.entries, false)[1]
    assert.equal(34, #te.time_feat[1])
    local sp = T.InstanceSplitter { instance_sampler = T.TestSplitSampler(), past_length = 36,
      future_length = 4, time_series_fields = { "time_feat", "observed_values" } }
    local inst = sp:flatmap(te, false)[1]
    assert.equal(36, #inst.past_target)
    assert.same({ 1, 1, 1, 1, 1, 1, 0 }, { unpack(inst.past_is_pad, 1, 7) })
    assert.equal(30, inst.past_target[36])
    assert.equal(4, #inst.future_time_feat[1])
    assert.equal("2002-07", P.tostring(inst.forecast_start))
  end)
  it("ExpectedNumInstanceSampler keeps min_past/min_future and averages num_instances", function()
    math.randomseed(3)
    local s = T.ExpectedNumInstanceSampler { num_instances = 2, min_future = 5 }
    local total = 0
    for _ = 1, 500 do
      for _, i in ipairs(s(50)) do
        assert.is_true(i >= 0 and i <= 45)
        total = total + 1
      end
    end
    assert.is_true(math.abs(total / 500 - 2) < 0.2)
  end)
  it("batches the same instances with and without DataLoader workers", function()
    local deepar = require("mx.gluonts.model.deepar")
    local c = deepar._config { freq = "M", prediction_length = 4, context_length = 6 }
    local tr = deepar.transformation(c):apply(ds.entries, true)
    local FIELDS = { { "past_target", "series" }, { "past_time_feat", "rows" },
      { "future_target", "series" } }
    local function run(nw)
      math.randomseed(7)
      local ld = gts.loader.TrainDataLoader { entries = tr, splitter = deepar.splitter(c, "training"),
        batch_size = 4, num_batches_per_epoch = 3, fields = FIELDS, num_workers = nw }
      local out = {}
      for b in ld:iter() do out[#out + 1] = { b.past_target:totable(), b.past_time_feat:shape(),
        b.future_target:totable() } end
      ld:close()
      return out
    end
    local a, b = run(0), run(2)
    assert.equal(3, #a)
    assert.same({ 4, c.past_length, c.num_feat_dynamic }, a[1][2])
    assert.same(a, b)
  end)
  it("cuts training batches straight from the series as split_at + pack do", function()
    local deepar = require("mx.gluonts.model.deepar")
    local L = gts.loader
    local c = deepar._config { freq = "M", prediction_length = 4, context_length = 6,
      num_feat_static_cat = 1, cardinality = { 3 } }
    local entries = {}
    for s = 1, 2 do
      local v = {}
      for t = 1, 20 + 5 * s do v[t] = (t % 3 == 0) and 0 / 0 or s * 10 + t end
      entries[s] = { start = P.parse("2001-03", "M"), target = v, feat_static_cat = { s } }
    end
    local tr = deepar.transformation(c):apply(entries, true)
    local sp = deepar.splitter(c, "training")
    local plan = L._direct_plan(sp, deepar.FIELDS_TRAIN)
    assert.truthy(plan)
    -- split points with left padding (0, 3), none (last), both series
    local locs = { { 1, 0 }, { 2, 3 }, { 1, #tr[1].target - 4 }, { 2, #tr[2].target - 4 }, { 2, 11 } }
    local insts = {}
    for b, l in ipairs(locs) do insts[b] = sp:split_at(tr[l[1]], l[2], true) end
    local want = L.pack(insts, #locs, deepar.FIELDS_TRAIN)
    local got = L._direct_batch(tr, sp, plan, locs, #locs, deepar.FIELDS_TRAIN)
    for k, f in ipairs(deepar.FIELDS_TRAIN) do
      assert.same(want[k]:shape(), got[k]:shape(), f[1])
      assert.same(want[k]:totable(), got[k]:totable(), f[1])
    end
    assert.is_nil(L._direct_plan(sp, { { "forecast_start", "series" } }))
  end)

  it("DeepAR's lags: lag index j at step t of n is full[Lf - j - n + t] (lagged_sequence_values)", function()
    local mx = require("mx")
    local lagged = require("mx.gluonts.model.deepar")._lagged
    local rows = { {}, {} }
    for t = 1, 9 do rows[1][t], rows[2][t] = t, 100 + t end
    local full = mx.nd.array(rows)
    local idx, n = { 0, 2, 5 }, 4
    local got = lagged(full, idx, n)
    assert.same({ 2, n, #idx }, got:shape())
    local g = got:totable()
    for b = 1, 2 do
      for t = 1, n do
        for k, j in ipairs(idx) do assert.equal(rows[b][9 - j - n + t], g[b][t][k]) end
      end
    end
    -- the sampler's one step, on a longer prefix (its own cached positions)
    assert.same({ { { 9, 7, 4 } }, { { 109, 107, 104 } } }, lagged(full, idx, 1):totable())
  end)

  it("plots a forecast with its intervals as SVG (sample and quantile forecasts)", function()
    local v = {}
    for t = 1, 60 do v[t] = 30000 + 8000 * math.sin(t / 3) end
    local e = { start = P.parse("2000-01", "M"), target = v }
    local F = require("mx.gluonts.forecast")
    local samples = {}
    for k = 1, 21 do
      samples[k] = {}
      for t = 1, 12 do samples[k][t] = v[48 + t] + (k - 11) * 100 end
    end
    local sf = F.SampleForecast(samples, P.parse("2004-01", "M"))
    local lo, mid, hi = {}, {}, {}
    for t = 1, 12 do lo[t], mid[t], hi[t] = v[48 + t] - 500, v[48 + t], v[48 + t] + 500 end
    local qf = F.QuantileForecast({ lo, mid, hi }, P.parse("2004-01", "M"), { "0.05", "0.5", "0.95" })
    for _, fc in ipairs { sf, qf } do
      local path = os.tmpname()
      gts.plot.plot_forecast(path, e, fc, { title = "a <b> & c", history = 24 })
      local f = io.open(path)
      local svg = f:read("*a")
      f:close()
      os.remove(path)
      assert.truthy(svg:find("^<svg"))
      assert.truthy(svg:find("a &lt;b> &amp; c", 1, true))
      local _, polys = svg:gsub("<polygon", "")
      assert.equal(2, polys) -- the 50% and 90% bands
      assert.truthy(svg:find(">2002%-01<")) -- history = 24 months before 2004-01
      assert.truthy(svg:find(">2004%-12<"))
      -- axis values stay readable (no exponent below 1e7)
      for lab in svg:gmatch('text%-anchor="end">([^<]*)</text>') do
        if lab:match("^%-?%d") then assert.is_nil(lab:find("e")) end
      end
    end
  end)
end)
