-- mx.gluonts.model.predictor — what every predictor shares: predict over a dataset,
-- serialise to a directory and load back.
--
--   predictor:serialize(dir)           -- dir/predictor.json (+ dir/net.params)
--   local p = predictor.load(dir)      -- mx.gluonts.model.predictor.load
--
-- predictor.json holds the predictor's kind and its settings (JSON: no code); the network
-- weights are MXNet's .params format. Both are written atomically (temp file + fsync +
-- rename), the JSON last, so a directory either loads as a whole or names what is missing.
local cjson = require("cjson")
local file = require("mx.core.file")

local M = {}

M.KINDS = {
  SeasonalNaivePredictor = "mx.gluonts.model.seasonal_naive",
  DeepARPredictor = "mx.gluonts.model.deepar",
  SimpleFeedForwardPredictor = "mx.gluonts.model.simple_feedforward",
  MQCNNPredictor = "mx.gluonts.model.mqcnn",
  TransformerPredictor = "mx.gluonts.model.transformer",
}

local function mkdir(dir, level)
  local ok = os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'")
  if ok ~= 0 and ok ~= true then
    error("serialize: cannot create the directory " .. dir, level + 1)
  end
end

-- write(dir, kind, config[, net]): the files of a predictor
function M.write(dir, kind, config, net, level)
  level = (level or 1) + 1
  mkdir(dir, level)
  if net then net:save_parameters(dir .. "/net.params") end
  file.write_atomic("serialize", dir .. "/predictor.json",
    cjson.encode({ kind = kind, version = 1, config = config }), level)
end

-- load(dir) -> the predictor saved there
function M.load(dir)
  local f = io.open(dir .. "/predictor.json", "rb")
  if not f then error("predictor.load: no predictor.json in " .. tostring(dir), 2) end
  local text = f:read("*a")
  f:close()
  local ok, t = pcall(cjson.decode, text)
  if not ok or type(t) ~= "table" or type(t.config) ~= "table" then
    error("predictor.load: " .. dir .. "/predictor.json is not a predictor description", 2)
  end
  local mod = M.KINDS[t.kind]
  if not mod then error("predictor.load: unknown predictor kind '" .. tostring(t.kind) .. "'", 2) end
  return require(mod)._load(dir, t.config)
end

return M
