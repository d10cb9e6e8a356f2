-- bench/gluonts_seeds_table.lua — the per-data-set verdict of docs/gluonts.md over several
-- seeds: per data set seasonal naive's mean wQL, mx.gluonts's DeepAR and GluonTS's torch
-- DeepAR per seed and their medians, the ratio of the medians, and the counts the issue
-- asks for (DeepAR's median below seasonal naive; within 10 % of GluonTS's median). Reads
-- the files bench/gluonts_backtest.lua --out and tools/gluonts_reference.py --out write per
-- seed: <dir>/gluonts_backtest_s<S>.json and <dir>/gluonts_reference_s<S>.json.
--
--   luajit bench/gluonts_seeds_table.lua [--dir docs/results] [--seeds 1,2,3]
local cjson = require("cjson")

local dir, seeds = "docs/results", { 1, 2, 3 }
local i = 1
while i <= #arg do
  if arg[i] == "--dir" and arg[i + 1] then dir = arg[i + 1]
  elseif arg[i] == "--seeds" and arg[i + 1] then
    seeds = {}
    for s in arg[i + 1]:gmatch("[^,]+") do seeds[#seeds + 1] = tonumber(s) end
  else
    error("usage: gluonts_seeds_table.lua [--dir DIR] [--seeds 1,2,3]", 0)
  end
  i = i + 2
end

local function load(path)
  local f = io.open(path)
  if not f then error("gluonts_seeds_table: no " .. path, 0) end
  local t = cjson.decode(f:read("*a"))
  f:close()
  return t
end

local function median(v)
  local t = {}
  for k, x in ipairs(v) do t[k] = x end
  table.sort(t)
  local n = #t
  if n == 0 then return nil end
  if n % 2 == 1 then return t[(n + 1) / 2] end
  return 0.5 * (t[n / 2] + t[n / 2 + 1])
end

local ours, ref = {}, {}
for k, s in ipairs(seeds) do
  ours[k] = load(string.format("%s/gluonts_backtest_s%d.json", dir, s))
  ref[k] = load(string.format("%s/gluonts_reference_s%d.json", dir, s))
end
local names, seen = {}, {}
for k = 1, #seeds do
  for n in pairs(ours[k]) do
    if not seen[n] then seen[n] = true names[#names + 1] = n end
  end
end
table.sort(names)

local function f4(v) return v and string.format("%.4f", v) or "–" end
local function list(v)
  local t = {}
  for k, x in ipairs(v) do t[k] = f4(x) end
  return table.concat(t, ", ")
end
local rows = { "| data set | seasonal naive | DeepAR (seeds) | DeepAR median | GluonTS DeepAR (seeds) "
  .. "| GluonTS median | median ratio |", "|---|---|---|---|---|---|---|" }
local beats, within, compared = 0, 0, 0
for _, n in ipairs(names) do
  local d, g = {}, {}
  local sn
  for k = 1, #seeds do sn = sn or (ours[k][n] and ours[k][n].seasonal_naive.mean_wQuantileLoss) end
  for k = 1, #seeds do -- a seed's files may hold some data sets only (then fewer values)
    local o = ours[k][n]
    if o then d[#d + 1] = o.deepar.mean_wQuantileLoss end
    local r = ref[k][n]
    if r then g[#g + 1] = r.deepar.mean_wQuantileLoss end
  end
  local dm, gm = median(d), median(g)
  if dm < sn then beats = beats + 1 end
  if gm then
    compared = compared + 1
    if dm <= 1.1 * gm then within = within + 1 end
  end
  rows[#rows + 1] = string.format("| %s | %s | %s | %s | %s | %s | %s |", n, f4(sn), list(d),
    f4(dm), list(g), f4(gm), gm and string.format("%.2f", dm / gm) or "–")
end
print(table.concat(rows, "\n"))
print(string.format("\nMedians over seeds %s: DeepAR beats seasonal naive on %d of %d data sets; "
  .. "within 10%% of GluonTS's DeepAR (or better) on %d of %d compared.",
  table.concat(seeds, ", "), beats, #names, within, compared))
