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
local mx = require("mx")
local file = require("mx.core.file")
local dataset = require("mx.gluonts.dataset")
local loader = require("mx.gluonts.loader")
local forecast = require("mx.gluonts.forecast")

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

-- class(kind[, saved]) -> cls, new: a network predictor's class (its methods go on cls)
-- and its constructor new(net, c); cls:serialize(dir) writes kind, saved(c) (default: c,
-- which must then be plain JSON data) and the network.
function M.class(kind, saved)
  local cls = {}
  cls.__index = cls
  local function new(net, c)
    return setmetatable({ net = net, c = c, prediction_length = c.prediction_length,
      freq = c.freq }, cls)
  end
  function cls:serialize(dir)
    M.write(dir, kind, saved and saved(self.c) or self.c, self.net, 2)
  end
  return cls, new
end

-- load_net(dir, Net, t): the network of a predictor saved in dir, settings t
function M.load_net(dir, Net, t)
  local net = Net(t)
  net:load_parameters(dir .. "/net.params")
  return net
end

-- each_batch(c, ds, transformation, splitter, fields, fn): fn(group) for each inference
-- batch of ds (group.batch: the tensors, group.instances: their entries), in predict mode
function M.each_batch(c, ds, transformation, splitter, fields, fn)
  local entries = transformation:apply(dataset._as_list(ds), false)
  mx.autograd.predict_mode(function()
    for _, g in ipairs(loader.inference_batches(entries, splitter, c.batch_size, fields)) do
      fn(g)
    end
  end)
end

-- add_samples(out, group, s): appends a SampleForecast per instance of the group, from s,
-- a (B, samples, H) table
function M.add_samples(out, g, s)
  for k, inst in ipairs(g.instances) do
    out[#out + 1] = forecast.SampleForecast(s[k], inst.forecast_start, { item_id = inst.item_id })
  end
end

return M
