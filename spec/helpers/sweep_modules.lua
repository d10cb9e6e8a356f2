-- spec/helpers/sweep_modules.lua — the module-function part of the surface sweep
-- (spec/sweep_surfaces_spec.lua), GENERATED from what the modules export: every public
-- function of the modules below (the file readers and writers among them: ONNX, images,
-- RecordIO, audio; the tokenizers; the plots; initializers, optimizers, schedulers,
-- metrics, the profiler) called with no argument and with each wrong first argument.
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

function M.cases(mx)
  local cases, nfun = {}, 0
  local env = setmetatable({ mx = mx, nd = mx.nd }, { __index = _G })
  for _, m in ipairs(M.MODULES) do
    local f = assert(loadstring("return " .. m[1]))
    setfenv(f, env)
    for _, name in ipairs(public(f())) do
      nfun = nfun + 1
      for _, a in ipairs(BAD) do
        cases[#cases + 1] = { id = m[2] .. "." .. name .. "(" .. a .. ")", names = { name, m[2] },
          call = m[1] .. "." .. name .. "(" .. a .. ")", expect = "either", check = "true" }
      end
    end
  end
  return cases, nfun
end

return M
