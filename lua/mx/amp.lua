-- mx.amp (also mx.contrib.amp) — automatic mixed precision, MXNet 1.9's mx.contrib.amp:
--   amp.init{target_dtype="bfloat16"|"float16", target_precision_ops=, conditional_fp32_ops=,
--            fp32_ops=}   every op call from then on casts its float inputs by policy
--   amp.init_trainer(trainer)            dynamic loss scaling for trainer:step
--   amp.scale_loss(loss, trainer, fn)    fn(scaled_loss) (backward there); step unscales
--   amp.convert_model(sym, args, auxs, {target_dtype=, target_dtype_ops=, fp32_ops=,
--            conditional_fp32_ops=, excluded_sym_names=, cast_optional_params=})
--   amp.convert_hybrid_block(block, {same options, ctx=})  -> a SymbolBlock
--   amp.list_target_ops() / list_fp32_ops() / list_widest_ops() / list_safe_ops() /
--   list_conditional_fp32_ops()          the op table's policy (docs/ops.md)
-- It sits above Gluon (convert_hybrid_block makes SymbolBlocks), like the model zoos.
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local autograd = require("mx.autograd")
local lists = require("mx.amp.lists")
local autocast = require("mx.amp.autocast")
local scaler = require("mx.amp.loss_scaler")
local convert = require("mx.amp.convert")
local sym = require("mx.symbol")
local gluon = require("mx.gluon")
local X = require("mx.gluon._export")

local M = {}

local TARGETS = { bfloat16 = true, float16 = true }
local INIT_OPTS = { target_dtype = true, target_precision_ops = true, conditional_fp32_ops = true,
  fp32_ops = true, layout_optimization = true }
local CONVERT_OPTS = { target_dtype = true, target_dtype_ops = true, fp32_ops = true,
  conditional_fp32_ops = true, excluded_sym_names = true, cast_optional_params = true, ctx = true }

-- an op name (luamx or MXNet) -> the op table entry
local function find_op(name, who, level)
  local op = lib.ops_by_name[name]
  if op then return op end
  for _, o in ipairs(lib.ops) do
    for _, m in ipairs(o.mxnet) do if m == name then return o end end
  end
  error(who .. ": unknown op '" .. tostring(name) .. "' (luamx or MXNet op names)", level + 1)
end

local function check_opts(who, opts, valid, level)
  if opts ~= nil and type(opts) ~= "table" then
    error(who .. ": options must be a table, got " .. type(opts), level + 1)
  end
  for k in pairs(opts or {}) do
    if not valid[k] then error(who .. ": unknown option '" .. tostring(k) .. "'", level + 1) end
  end
  local t = (opts or {}).target_dtype or "float16"
  if not TARGETS[t] then
    error(who .. ": target_dtype must be 'bfloat16' or 'float16', got " .. tostring(t), level + 1)
  end
  return opts or {}, t
end

-- the op table's policy with the caller's lists on top
local function policy_of(who, opts, target_key, level)
  local p = {}
  local L = lists.lists()
  for _, cat in ipairs({ "safe", "widest", "fp32", "target" }) do
    for _, name in ipairs(L[cat]) do p[name] = cat end
  end
  for _, c in ipairs(L.conditional) do p[c[1]] = { c[2], c[3] } end
  for _, name in ipairs(opts[target_key] or {}) do p[find_op(name, who, level + 1).name] = "target" end
  for _, name in ipairs(opts.fp32_ops or {}) do p[find_op(name, who, level + 1).name] = "fp32" end
  for _, c in ipairs(opts.conditional_fp32_ops or {}) do
    if type(c) ~= "table" or type(c[2]) ~= "string" or type(c[3]) ~= "table" then
      error(who .. ": conditional_fp32_ops entries are {op, param, {values}}", level + 1)
    end
    p[find_op(c[1], who, level + 1).name] = { c[2], c[3] }
  end
  return p
end

local state = { target = nil }

function M.init(opts)
  local o, t = check_opts("amp.init", opts, INIT_OPTS, 2)
  autocast.install(t, policy_of("amp.init", o, "target_precision_ops", 2))
  state.target = t
end

-- Turns automatic casting off again (luamx: MXNet has no way back; tests and REPLs need one).
function M.shutdown()
  autocast.uninstall()
  state.target = nil
end

function M.is_initialized() return state.target ~= nil end
function M.target_dtype() return state.target end

local function list(cat)
  return function()
    local r = {}
    for _, v in ipairs(lists.lists()[cat]) do r[#r + 1] = v end
    return r
  end
end
M.list_target_ops, M.list_fp32_ops = list("target"), list("fp32")
M.list_widest_ops, M.list_safe_ops = list("widest"), list("safe")
M.list_conditional_fp32_ops = list("conditional")

---------------------------------------------------------------- loss scaling
-- init_trainer(trainer, {init_scale=2^16, scale_factor=2, scale_window=2000}): the trainer
-- skips steps whose gradients overflowed and adjusts the scale (MXNet's LossScaler).
function M.init_trainer(trainer, opts)
  if type(trainer) ~= "table" or type(trainer.step) ~= "function" then
    error("amp.init_trainer: expected a gluon.Trainer, got " .. type(trainer), 2)
  end
  if rawget(trainer, "_amp_loss_scaler") then
    error("amp.init_trainer: this trainer is already initialized for AMP", 2)
  end
  rawset(trainer, "_amp_loss_scaler", scaler.new(opts))
  rawset(trainer, "_amp_original_scale", trainer._scale)
  return trainer
end

-- scale_loss(loss, trainer, fn) -> fn's results: fn(scaled) runs with the loss (a tensor
-- or a list) multiplied by the current scale; the trainer's next step divides the
-- gradients by it (MXNet's `with amp.scale_loss(loss, trainer) as scaled:`).
function M.scale_loss(loss, trainer, fn)
  local ls = type(trainer) == "table" and rawget(trainer, "_amp_loss_scaler")
  if not ls then error("amp.scale_loss: call amp.init_trainer(trainer) first", 2) end
  if type(fn) ~= "function" then error("amp.scale_loss: fn must be a function", 2) end
  local s = ls.loss_scale
  rawset(trainer, "_scale", rawget(trainer, "_amp_original_scale") / s)
  if not nd.is_tensor(loss) and type(loss) ~= "table" then
    error("amp.scale_loss: loss must be a tensor or a list of tensors, got " .. type(loss), 2)
  end
  -- recorded (the product joins the loss's graph, so backward reaches the weights)
  local scaled = autograd.record(function()
    if nd.is_tensor(loss) then return nd.mul(loss, s) end
    local r = {}
    for i, l in ipairs(loss) do r[i] = nd.mul(l, s) end
    return r
  end)
  return fn(scaled)
end

-- The trainer's current loss scale (for logs).
function M.loss_scale(trainer)
  local ls = rawget(trainer, "_amp_loss_scaler")
  return ls and ls.loss_scale
end

-- unscale(trainer): divides the gradients by the loss scale now (gradient clipping
-- between backward and step), and makes the step's rescale 1 again.
function M.unscale(trainer)
  local ls = rawget(trainer, "_amp_loss_scaler")
  if not ls then error("amp.unscale: call amp.init_trainer(trainer) first", 2) end
  for _, p in ipairs(trainer._params) do
    if p.grad_req ~= "null" then
      for _, g in ipairs(p:list_grad()) do nd.mul(g, 1 / ls.loss_scale, { out = g }) end
    end
  end
  rawset(trainer, "_scale", rawget(trainer, "_amp_original_scale"))
end

---------------------------------------------------------------- conversion
-- convert_model(sym, arg_params, aux_params, opts) -> sym, arg_params, aux_params
function M.convert_model(s, args, auxs, opts)
  local o, t = check_opts("amp.convert_model", opts, CONVERT_OPTS, 2)
  return convert.convert(s, args or {}, auxs or {}, policy_of("amp.convert_model", o,
    "target_dtype_ops", 2), t, o)
end

-- convert_hybrid_block(block, opts) -> a SymbolBlock running the converted graph (the block
-- must be hybridized and have run once: its traced graph is what is converted).
function M.convert_hybrid_block(block, opts)
  local o, t = check_opts("amp.convert_hybrid_block", opts, CONVERT_OPTS, 2)
  local s, arrays = X.symbol_of(block, 2, false, "amp.convert_hybrid_block")
  local args, auxs = {}, {}
  for k, v in pairs(arrays) do
    local kind, name = k:match("^(%a+):(.*)$")
    if kind == "aux" then auxs[name] = v else args[name] = v end
  end
  local s2, a2, x2 = convert.convert(s, args, auxs, policy_of("amp.convert_hybrid_block", o,
    "target_dtype_ops", 2), t, o)
  local inputs = {}
  for _, name in ipairs(s2:list_inputs()) do
    if args[name] == nil and auxs[name] == nil then inputs[#inputs + 1] = sym.var(name) end
  end
  local b = gluon.SymbolBlock(s2, inputs)
  local params = b:collect_params()
  for name, v in pairs(a2) do
    local p = params:get(name)
    if p then
      if p.dtype ~= v:dtype() then p:cast(v:dtype()) end
      p:set_data(o.ctx and v:to(o.ctx) or v)
    end
  end
  for name, v in pairs(x2) do
    local p = params:get(name)
    if p then
      if p.dtype ~= v:dtype() then p:cast(v:dtype()) end
      p:set_data(o.ctx and v:to(o.ctx) or v)
    end
  end
  return b
end

return M
