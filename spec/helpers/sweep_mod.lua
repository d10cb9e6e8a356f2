-- spec/helpers/sweep_mod.lua — mx.mod's part of the surface sweep
-- (spec/sweep_surfaces_spec.lua), GENERATED from what Module exposes: every public method
-- of mx.mod.Module (its own and BaseModule's) and Module.load, with every argument in turn
-- given each wrong value while the others are a valid call's, and every method's valid
-- call on a module that is not bound (the order MXNet requires: bind, init_params,
-- init_optimizer). A method's arguments are its Lua parameters, or, for the methods that
-- take MXNet's signature (positionally or by name), the names its signature lists (its
-- error for too many positional arguments gives them), each passed by name. Pass: a clean error naming the
-- method (or Module) at the caller's line, or a result; never a crash or a raw Lua error.
-- A new method fails the first spec case until VALID gives it a valid call; a new
-- argument is swept the day it is added.
--   require("helpers.sweep_mod").cases(mx) -> cases (child_gluon's form), stats
local M = {}

-- (the string names no file that can be written: a case must not write in the tree)
local BAD = { "nil", '"/nonexistent-sweep-dir/x"', "-1", "0/0", "2.5", "{}", "true", "1e12",
  "nd.ones({2})", "function() end" }

-- A module at each stage: fresh (made), bound, ready (parameters, optimizer, a forward)
local FRESH = [[
local it = mx.io.NDArrayIter(nd.arange(0, 32):reshape({8, 4}) / 32, nd.array({0, 1, 0, 1, 0, 1, 0, 1}), 4)
local net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), {num_hidden = 2, name = "fc"}),
  {name = "softmax"})
local mod = mx.mod.Module(net, {logger = function() end})
local dir = "/nonexistent-sweep-dir/m"
it:reset()
local batch = it:next()
local args, auxs = {}, {}]]
local BOUND = FRESH .. "\nmod:bind(it.provide_data, it.provide_label)"
local READY = BOUND .. [[

mod:init_params()
mod:init_optimizer()
it:reset()
local batch = it:next()
mod:forward(batch, true)
mod:backward()
local args, auxs = mod:get_params()]]
M.STAGES = { fresh = FRESH, bound = BOUND, ready = READY }

-- method -> { stage, valid arguments }: by name (a table) for the signature methods, in
-- order (a list) for the others
M.VALID = {
  bind = { "fresh", { data_shapes = "it.provide_data", label_shapes = "it.provide_label" } },
  init_params = { "bound", {} },
  init_optimizer = { "bound", {} },
  set_params = { "ready", { arg_params = "args", aux_params = "auxs" } },
  reshape = { "ready", { data_shapes = "it.provide_data", label_shapes = "it.provide_label" } },
  -- (a huge epoch count is valid: it trains that long)
  fit = { "fresh", { train_data = "it", num_epoch = "1" }, skip = { num_epoch = { ["1e12"] = true } } },
  score = { "ready", { eval_data = "it", eval_metric = '"acc"' } },
  predict = { "ready", { eval_data = "it" } },
  set_states = { "ready", { value = "0" } },
  forward = { "ready", { "batch", "true" } },
  forward_backward = { "ready", { "batch" } },
  backward = { "ready", {} },
  update = { "ready", {} },
  get_outputs = { "ready", { "true" } },
  get_input_grads = { "ready", { "true" } },
  get_states = { "ready", { "true" } },
  get_params = { "ready", {} },
  output_shapes = { "ready", {} },
  update_metric = { "ready", { 'mx.metric.create("acc")', "batch.label" } },
  iter_predict = { "ready", { "it", "1" } },
  borrow_optimizer = { "ready", { "mod" } },
  save_checkpoint = { "ready", { "dir", "1" } },
  save_params = { "ready", { "dir" } },
  load_params = { "ready", { "dir" } },
  save_optimizer_states = { "ready", { "dir" } },
  load_optimizer_states = { "ready", { "dir" } },
  prepare = { "ready", {} },
  install_monitor = { "bound", { "mx.mon.Monitor(1)" } },
  load = { "fresh", { "dir", "1" }, static = true },
}

local function methods(Module)
  local names, seen, t = {}, {}, Module
  while type(t) == "table" do
    for k, v in pairs(t) do
      if type(k) == "string" and type(v) == "function" and not seen[k] and k:sub(1, 1) ~= "_" then
        seen[k] = true
        names[#names + 1] = k
      end
    end
    local mt = getmetatable(t)
    t = mt and mt.__index
  end
  table.sort(names)
  return names
end

-- the argument names of method m: its parameters, or its signature's names (nil, false:
-- the signature's error did not list them)
local function arguments(mx, Module, m, static)
  local f = Module[m]
  local info = debug.getinfo(f, "u")
  local first = static and 1 or 2
  if not info.isvararg then
    local names = {}
    for i = first, info.nparams do names[#names + 1] = debug.getlocal(f, i) end
    return names, false
  end
  local net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), { num_hidden = 2 }))
  local mod = Module(net, { logger = function() end })
  -- more positional arguments than any signature takes: its error lists them in order
  local many = {}
  for i = 1, 40 do many[i] = false end
  local ok, err = pcall(f, mod, unpack(many))
  local list = not ok and tostring(err):match("takes at most %d+ positional arguments? %(([^)]*)%), got 40")
  if not list then return nil end
  local names = {}
  for n in list:gmatch("[%w_]+") do names[#names + 1] = n end
  return names, true
end

local function call_of(m, v, args, named)
  local head = v.static and ("mx.mod.Module." .. m .. "(") or ("mod:" .. m .. "(")
  if named then
    local keys = {}
    for k in pairs(args) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. " = " .. args[k] end
    return head .. "{" .. table.concat(parts, ", ") .. "})"
  end
  local last = 0
  for i in pairs(args) do if i > last then last = i end end
  local parts = {}
  for i = 1, last do parts[i] = args[i] or "nil" end
  return head .. table.concat(parts, ", ") .. ")"
end

function M.cases(mx)
  local Module = mx.mod.Module
  local cases, stats = {}, { methods = 0, arguments = 0, missing = {} }
  for _, m in ipairs(methods(Module)) do
    local v = M.VALID[m]
    local names, named = arguments(mx, Module, m, v and v.static)
    if not v or not names then
      stats.missing[#stats.missing + 1] = m
    else
      stats.methods = stats.methods + 1
      stats.arguments = stats.arguments + #names
      local ids = { m, "Module" }
      -- the valid call on a module that is not bound (or bound, not initialised)
      for _, stage in ipairs({ "fresh", "bound" }) do
        if stage ~= v[1] then
          local args = {}
          for k, x in pairs(v[2]) do args[k] = x end
          cases[#cases + 1] = { id = "Module:" .. m .. " valid call on a " .. stage .. " module",
            names = ids, setup = M.STAGES[stage], call = call_of(m, v, args, named), expect = "either",
            check = "true" }
        end
      end
      for pos, name in ipairs(names) do
        for _, bad in ipairs(BAD) do
          local args = {}
          for k, x in pairs(v[2]) do args[k] = x end
          if named then args[name] = bad ~= "nil" and bad or nil else args[pos] = bad end
          if not (named and bad == "nil" and v[2][name] == nil) and not (v.skip and v.skip[name]
              and v.skip[name][bad]) then
            cases[#cases + 1] = { id = "Module:" .. m .. " " .. name .. "=" .. bad, names = ids,
              setup = M.STAGES[v[1]], call = call_of(m, v, args, named), expect = "either",
              check = "true" }
          end
        end
      end
    end
  end
  return cases, stats
end

return M
