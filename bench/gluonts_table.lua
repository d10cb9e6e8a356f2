-- bench/gluonts_table.lua — the backtest results table of docs/gluonts.md, from the files
-- bench/gluonts_backtest.lua and tools/gluonts_reference.py write: mean wQL per data set of
-- seasonal naive, mx.gluonts's DeepAR (MQ-CNN and Transformer when
-- docs/results/gluonts_backtest_models.json exists) and GluonTS's torch DeepAR, DeepAR's
-- ratio to GluonTS's, and the seconds per training epoch of both DeepARs.
--
--   luajit bench/gluonts_table.lua [docs/results] [_s1]
--     (the second argument: the files' suffix, default _s1: gluonts_backtest_s1.json and
--     gluonts_reference_s1.json, the seed-1 runs)
local cjson = require("cjson")
local dir = arg[1] or "docs/results"
local sfx = arg[2] or "_s1"

local function load(name)
  local f = io.open(dir .. "/" .. name)
  if not f then return nil end
  local t = cjson.decode(f:read("*a"))
  f:close()
  return t
end
local ours = load("gluonts_backtest" .. sfx .. ".json")
  or error("no " .. dir .. "/gluonts_backtest" .. sfx .. ".json")
local more = load("gluonts_backtest_models.json") or {}
local ref = load("gluonts_reference" .. sfx .. ".json") or {}

local names = {}
for n in pairs(ours) do names[#names + 1] = n end
table.sort(names)
local function f4(v) return v and string.format("%.4f", v) or "–" end
local function f2(v) return v and string.format("%.2f", v) or "–" end
local rows = { "| data set | seasonal naive | DeepAR | MQ-CNN | Transformer | GluonTS DeepAR "
  .. "| DeepAR / GluonTS | s/epoch DeepAR | s/epoch GluonTS |",
  "|---|---|---|---|---|---|---|---|---|" }
local beats, within, compared = 0, 0, 0
for _, n in ipairs(names) do
  local o, m, r = ours[n], more[n] or {}, ref[n] or {}
  local d = o.deepar.mean_wQuantileLoss
  local g = r.deepar and r.deepar.mean_wQuantileLoss
  if d < o.seasonal_naive.mean_wQuantileLoss then beats = beats + 1 end
  if g then
    compared = compared + 1
    if d <= 1.1 * g then within = within + 1 end
  end
  rows[#rows + 1] = string.format("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", n,
    f4(o.seasonal_naive.mean_wQuantileLoss), f4(d), f4(m.mqcnn and m.mqcnn.mean_wQuantileLoss),
    f4(m.transformer and m.transformer.mean_wQuantileLoss), f4(g), g and f2(d / g) or "–",
    f2(o.epoch_s), f2(r.epoch_s))
end
print(table.concat(rows, "\n"))
print(string.format("\nDeepAR beats seasonal naive on %d of %d data sets; within 10%% of GluonTS's "
  .. "DeepAR (or better) on %d of %d compared.", beats, #names, within, compared))
