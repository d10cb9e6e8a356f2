-- mx.model — MXNet 1.x's checkpoint files (python/mxnet/model.py): a symbol and its
-- parameters as prefix-symbol.json and prefix-EPOCH.params (EPOCH as %04d, keys
-- "arg:<name>" and "aux:<name>"), the files Module.save_checkpoint, the epoch callback
-- mx.callback.do_checkpoint and MXNet 1.9 write and read.
--
--   mx.model.save_checkpoint(prefix, epoch, symbol, arg_params, aux_params)
--   local sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, epoch)
--   local arg_params, aux_params = mx.model.load_params(prefix, epoch)
local nd = require("mx.nd")
local class = require("mx.core.class")

local type, error, tostring, pairs = type, error, tostring, pairs

local M = {}

M.BatchEndParam = require("mx.module.base_module").BatchEndParam

local SAVE = class.signature("save_checkpoint", { "prefix", "epoch", "symbol",
  { "arg_params", map = true }, { "aux_params", map = true }, "remove_amp_cast" })
function M.save_checkpoint(...)
  local o = SAVE(2, ...)
  if type(o.prefix) ~= "string" then error("save_checkpoint: prefix must be a string", 2) end
  if type(o.epoch) ~= "number" then error("save_checkpoint: epoch must be a number", 2) end
  if o.symbol ~= nil then o.symbol:save(o.prefix .. "-symbol.json") end
  local arrays = {}
  for k, v in pairs(o.arg_params or {}) do arrays["arg:" .. k] = v end
  for k, v in pairs(o.aux_params or {}) do arrays["aux:" .. k] = v end
  local path = string.format("%s-%04d.params", o.prefix, o.epoch)
  nd.save(path, arrays)
  return path
end
class.declare(M.save_checkpoint, SAVE)

local LOAD_PARAMS = class.signature("load_params", { "prefix", "epoch" })
function M.load_params(...)
  local o = LOAD_PARAMS(2, ...)
  if type(o.prefix) ~= "string" or type(o.epoch) ~= "number" then
    error("load_params: expected (prefix, epoch)", 2)
  end
  local path = string.format("%s-%04d.params", o.prefix, o.epoch)
  local ok, loaded = pcall(nd.load, path)
  if not ok then error("load_params: " .. tostring(loaded), 2) end
  local args, auxs = {}, {}
  for k, v in pairs(loaded) do
    local kind, name = tostring(k):match("^(%a+):(.*)$")
    if kind == "arg" then args[name] = v
    elseif kind == "aux" then auxs[name] = v
    else
      error("load_params: " .. path .. " has the key '" .. tostring(k) .. "' (a checkpoint's keys "
        .. "are arg:<name> and aux:<name>)", 2)
    end
  end
  return args, auxs
end
class.declare(M.load_params, LOAD_PARAMS)

local LOAD = class.signature("load_checkpoint", { "prefix", "epoch" })
function M.load_checkpoint(...)
  local o = LOAD(2, ...)
  if type(o.prefix) ~= "string" or type(o.epoch) ~= "number" then
    error("load_checkpoint: expected (prefix, epoch)", 2)
  end
  local ok, sym = pcall(require("mx.symbol").load, o.prefix .. "-symbol.json")
  if not ok then error("load_checkpoint: " .. tostring(sym):gsub("^[^\n]-:%d+: ", ""), 2) end
  local ok2, args, auxs = pcall(M.load_params, o.prefix, o.epoch)
  if not ok2 then error(tostring(args):gsub("^[^\n]-:%d+: ", ""), 2) end
  return sym, args, auxs
end
class.declare(M.load_checkpoint, LOAD)

return M
