-- mx.gluonts.repository — the real data sets tools/gluonts_data.sh prepares (run by
-- tools/setup.sh; nothing is downloaded at run time), as ListDatasets with GluonTS-style
-- metadata.
--
--   local ds, meta = repository.get_dataset("airpassengers")   -- meta.freq, meta.prediction_length
--   repository.names()  repository.path()  repository.available(name)
--
-- Files: $MX_GLUONTS_DATA or ~/.mxnet/gluon-ts/datasets/<name>.txt, one series a line:
-- item_id<TAB>start<TAB>freq<TAB>v1,v2,... (NA: missing). The backtest settings (horizon,
-- windows) are the ones bench/gluonts_backtest.lua and tools/gluonts_reference.py share.
local dataset = require("mx.gluonts.dataset")

local M = {}

M.DATASETS = {
  airpassengers = { prediction_length = 12, windows = 3 },
  sunspots_monthly = { prediction_length = 24, windows = 3 },
  co2 = { prediction_length = 12, windows = 3 },
  ukgas = { prediction_length = 8, windows = 3 },
  nottem = { prediction_length = 12, windows = 3 },
  elec_equip = { prediction_length = 12, windows = 3 },
  taylor = { prediction_length = 48, windows = 3 },
  r_monthly = { prediction_length = 12, windows = 2, cat = true },
}
M.ORDER = { "airpassengers", "sunspots_monthly", "co2", "ukgas", "nottem", "elec_equip",
  "taylor", "r_monthly" }

function M.path()
  local home = os.getenv("HOME") or "."
  return os.getenv("MX_GLUONTS_DATA") or (home .. "/.mxnet/gluon-ts/datasets")
end
function M.names() return M.ORDER end
function M.available(name)
  local f = io.open(M.path() .. "/" .. name .. ".txt", "rb")
  if f then f:close() return true end
  return false
end

-- get_dataset(name) -> ListDataset, meta {freq=, prediction_length=, windows=, cardinality=}
function M.get_dataset(name)
  local p = M.path() .. "/" .. tostring(name) .. ".txt"
  local f = io.open(p, "rb")
  if not f then
    error("get_dataset: " .. p .. " not found (run tools/setup.sh, which runs "
      .. "tools/gluonts_data.sh)", 2)
  end
  local entries, freq = {}, nil
  local ln = 0
  for line in f:lines() do
    ln = ln + 1
    local id, start, fr, vals = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    if not id then f:close() error("get_dataset: " .. p .. ":" .. ln .. ": malformed line", 2) end
    if freq and fr ~= freq then
      f:close()
      error("get_dataset: " .. p .. ":" .. ln .. ": frequency " .. fr .. " differs from " .. freq, 2)
    end
    freq = fr
    local t = {}
    for v in vals:gmatch("[^,]+") do
      local x = v == "NA" and 0 / 0 or tonumber(v)
      if x == nil then
        f:close()
        error("get_dataset: " .. p .. ":" .. ln .. ": bad value '" .. v .. "'", 2)
      end
      t[#t + 1] = x
    end
    entries[#entries + 1] = { item_id = id, start = start, target = t, feat_static_cat = { #entries } }
  end
  f:close()
  local meta = {}
  for k, v in pairs(M.DATASETS[name] or { prediction_length = 12, windows = 1 }) do meta[k] = v end
  meta.freq = freq
  meta.cardinality = { #entries }
  return dataset.ListDataset(entries, freq), meta
end

return M
