-- spec/helpers/sweep_modules.lua — the module-function part of the surface sweep
-- (spec/sweep_surfaces_spec.lua), GENERATED from what the modules export: every public
-- function of the modules below (the file readers and writers among them: ONNX, images,
-- RecordIO, audio; the tokenizers; the plots; initializers, optimizers, schedulers,
-- metrics, the profiler) called with no argument and with each wrong value at every
-- argument position: the first, then each later one (a Lua function's parameters, or the
-- names a signature function's error for too many positional arguments lists) with the
-- positions before it given a valid value where the sweep knows one (FILL: by function,
-- then by parameter name; nil, the default, otherwise).
-- Pass: a clean error naming the function (or its module), at the caller's line, or a
-- result; never a crash or a raw Lua error. A new function is swept the day it is added.
-- Paths the cases pass point into a directory that does not exist, so that a function
-- taking its first argument as a file name writes nothing.
--   require("helpers.sweep_modules").cases(mx) -> cases (child_gluon's form)
local M = {}

-- module (as the cases reach it), its name in errors
M.MODULES = {
  { "mx.onnx", "onnx" }, { "mx.image", "image" }, { "mx.recordio", "recordio" },
  { "mx.viz", "viz" }, { "require('mx.audio')", "audio" },
  { "require('mx.gluonnlp.data.tokenizers')", "tokenizers" },
  { "mx.init", "init" }, { "mx.optimizer", "optimizer" }, { "mx.lr_scheduler", "lr_scheduler" },
  { "mx.metric", "metric" }, { "mx.profiler", "profiler" },
}

local BAD = { "", "5", '"/nonexistent-sweep-dir/x"', "{}", "true", "nd.ones({2})", "-1", "0/0",
  "{nd.ones({2})}" }

-- valid values for the positions before the one swept: by "module.function" (a list),
-- then by parameter name
local IMG = "nd.ones({8, 8, 3}, {dtype = 'uint8'})"
M.FILL = {
  ["image.center_crop"] = { IMG, "{4, 4}" }, ["image.random_crop"] = { IMG, "{4, 4}" },
  ["image.resize_short"] = { IMG, "4" }, ["image.fixed_crop"] = { IMG, "0", "0", "4", "4", "{2, 2}" },
  ["image.color_normalize"] = { "nd.ones({8, 8, 3})", "nd.zeros({3})", "nd.ones({3})" },
  ["image.copyMakeBorder"] = { IMG, "1", "1", "1", "1" }, ["image.imresize"] = { IMG, "4", "4" },
  ["image.scale_down"] = { "{8, 8}", "{4, 4}" },
  ["image.imdecode"] = { "mx.image.imencode(" .. IMG .. ")" },
  ["image.imread"] = { '"spec/fixtures/images/grace_hopper.jpg"' },
  ["recordio.IRHeader"] = { "0", "1", "2", "0" },
  ["recordio.pack"] = { "mx.recordio.IRHeader(0, 1, 2, 0)" },
  ["recordio.pack_img"] = { "mx.recordio.IRHeader(0, 1, 2, 0)", IMG },
  ["recordio.unpack_img"] = { "mx.recordio.pack_img(mx.recordio.IRHeader(0, 1, 2, 0), " .. IMG .. ")" },
  ["onnx.export_model"] = { "mx.sym.relu(mx.sym.var('x'))", "{}" },
  ["audio.resample"] = { "nd.ones({64})", "16000", "8000" },
  ["audio.save"] = { '"/nonexistent-sweep-dir/x.wav"', "nd.zeros({1, 64})", "16000" },
  ["init.create"] = { '"uniform"' }, ["optimizer.create"] = { '"sgd"' }, ["metric.create"] = { '"acc"' },
}
M.FILL_NAME = {
  src = IMG, img = IMG, path = '"/nonexistent-sweep-dir/x"', model_file = '"/nonexistent-sweep-dir/x"',
  uri = '"/nonexistent-sweep-dir/x"', idx_path = '"/nonexistent-sweep-dir/x.idx"', S = "nd.ones({5, 4})",
  y = "nd.ones({512})", n = "4", n_out = "4", n_in = "8", f = "440", m = "20", step = "10",
  header = "mx.recordio.IRHeader(0, 1, 2, 0)", s = '"abc"', x = '"uniform"', name = '"acc"',
}
-- the class a create function makes from the FILL above names the later arguments' errors
-- (MXNet's create passes them on to it)
M.ALSO_NAMED = { ["metric.create"] = "Accuracy", ["optimizer.create"] = "SGD", ["init.create"] = "Uniform" }
-- (registers a class: kept out of later positions; a sweep case must not change the tables)
local NO_LATER = { ["optimizer.register"] = true }

-- the argument names of f: a Lua function's parameters, or a signature function's names
local function argument_names(f)
  if type(f) ~= "function" then return {} end
  local info = debug.getinfo(f, "u")
  local names = {}
  if info.nparams > 0 or not info.isvararg then
    for i = 1, info.nparams do names[i] = debug.getlocal(f, i) end
    return names
  end
  local many = {}
  for i = 1, 40 do many[i] = false end
  local ok, err = pcall(f, unpack(many))
  local list = not ok and tostring(err):match("takes at most %d+ positional arguments? %(([^)]*)%), got 40")
  for n in (list or ""):gmatch("[%w_]+") do names[#names + 1] = n end
  return names
end

local function public(t)
  local r = {}
  if type(t) ~= "table" then return r end
  for k, v in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and (type(v) == "function"
        or (type(v) == "table" and getmetatable(v) and getmetatable(v).__call)) then
      r[#r + 1] = k
    end
  end
  table.sort(r)
  return r
end

-- set up before a module's cases: where a function writes by default, point it into the
-- directory that does not exist (profiler.dump() would write profile.json into the cwd)
local SETUP = { profiler = 'mx.profiler.set_config { filename = "/nonexistent-sweep-dir/p.json" }' }

function M.cases(mx)
  local cases, nfun, npos = {}, 0, 0
  local env = setmetatable({ mx = mx, nd = mx.nd }, { __index = _G })
  for _, m in ipairs(M.MODULES) do
    local f = assert(loadstring("return " .. m[1]))
    setfenv(f, env)
    local t = f()
    for _, name in ipairs(public(t)) do
      nfun = nfun + 1
      for _, a in ipairs(BAD) do
        cases[#cases + 1] = { id = m[2] .. "." .. name .. "(" .. a .. ")", names = { name, m[2] },
          setup = SETUP[m[2]], call = m[1] .. "." .. name .. "(" .. a .. ")", expect = "either",
          check = "true" }
      end
      local key = m[2] .. "." .. name
      local args = not NO_LATER[key] and argument_names(t[name]) or {}
      for pos = 2, #args do
        npos = npos + 1
        local pre = {}
        for i = 1, pos - 1 do
          pre[i] = (M.FILL[key] and M.FILL[key][i]) or M.FILL_NAME[args[i]] or "nil"
        end
        local head = table.concat(pre, ", ") .. ", "
        for _, a in ipairs(BAD) do
          if a ~= "" then
            cases[#cases + 1] = { id = key .. " " .. args[pos] .. "=" .. a,
              names = { name, m[2], M.ALSO_NAMED[key] }, setup = SETUP[m[2]],
              call = m[1] .. "." .. name .. "(" .. head .. a .. ")", expect = "either", check = "true" }
          end
        end
      end
    end
  end
  return cases, nfun, npos
end

return M
