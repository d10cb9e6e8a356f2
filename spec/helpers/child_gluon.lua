-- spec/helpers/child_gluon.lua — run Lua cases in child luajit processes, so a crash
-- (SIGSEGV, abort, a hang killed by timeout) is a failed case, not a dead spec run.
--
--   local child = require("helpers.child_gluon")
--   local results = child.run(cases, { batch = 60, preamble = "local mx = require('mx')" })
--
-- A case is { id = "Dense/wrong-shape", setup = "lua lines", call = "expr",
-- names = { "Dense", ... }, expect = "error" | "either", check = "lua expr on r" }:
--   * setup runs first (its own lines), then `local r = (<call>)` on the line the case
--     reports as the caller's line (errors must be blamed on it: "case:<line>:");
--   * expect "error": the call must raise; "either": raising cleanly or returning a
--     result for which `check` (an expression over r, default true) holds.
-- results[id] = { status = "clean" | "correct" | "unclear" | "silent" | "crash",
--   msg = ... }:
--   clean    a string error naming one of `names`, blamed on the call's line
--   correct  no error and check holds (expect "either")
--   unclear  an error without a name from `names` or blamed elsewhere
--   silent   no error where one was expected, or check failed
--   crash    the child died while running the case (found by re-running its batch
--            one case per process)
-- Cases of a batch share one process (fast); each runs under pcall as its own chunk
-- (its locals are its own); the preamble runs once per process and its globals (a
-- shared environment table) are what the cases see besides _G.
local M = {}

local function q(s) return string.format("%q", s) end

-- The child's script for a list of cases: prints "@@ <i> <status> <msg>" per case
-- and "@@DONE" at the end (a missing DONE means the process died).
local function script(cases, preamble)
  local out = {
    "package.path = " .. q(package.path),
    "package.cpath = " .. q(package.cpath),
    "io.stdout:setvbuf('no')",
    -- the preamble and every case run with E as their environment: the preamble's
    -- globals (mx, helpers) are the cases' names
    "local E = setmetatable({}, { __index = _G })",
    "do local f = assert(loadstring(" .. q(preamble or "") .. ", '=preamble')) setfenv(f, E) f() end",
    "local function emit(i, st, m) m = tostring(m):gsub('[\\r\\n]', ' ') "
      .. "io.stdout:write('@@ ', i, ' ', st, ' ', m, '\\n') end",
  }
  for i, c in ipairs(cases) do
    local setup = c.setup or ""
    local nl = select(2, setup:gsub("\n", "")) + (setup ~= "" and 1 or 0)
    local line = nl + 1
    local body = (setup ~= "" and setup .. "\n" or "") .. "local r = (" .. c.call .. ")\n"
      .. "return r, (" .. (c.check or "true") .. ")\n"
    out[#out + 1] = string.format([[
do
  local f, perr = loadstring(%s, "=case")
  if not f then emit(%d, "unclear", "case does not compile: " .. perr) else
    setfenv(f, E)
    local ok, r, good = pcall(f)
    local names, expect, line = %s, %s, %d
    if ok then
      if expect == "either" and good then emit(%d, "correct", tostring(r))
      else emit(%d, "silent", "no error; result " .. tostring(r)) end
    elseif type(r) ~= "string" then emit(%d, "unclear", "error value " .. tostring(r))
    else
      local named = false
      for _, n in ipairs(names) do if r:find(n, 1, true) then named = true end end
      if named and r:find("case:" .. line .. ":", 1, true) == 1 then emit(%d, "clean", r)
      else emit(%d, "unclear", r) end
    end
  end
end
collectgarbage()
]], q(body), i, "{" .. table.concat((function()
        local t = {}
        for k, n in ipairs(c.names or {}) do t[k] = q(n) end
        return t
      end)(), ",") .. "}", q(c.expect or "error"), line, i, i, i, i, i)
  end
  out[#out + 1] = "io.stdout:write('@@DONE\\n')"
  return table.concat(out, "\n")
end

local tmpdir
local function tmpfile()
  if not tmpdir then
    tmpdir = os.tmpname()
    os.remove(tmpdir)
    assert(os.execute("mkdir -p " .. tmpdir) == 0 or true)
  end
  M._n = (M._n or 0) + 1
  return tmpdir .. "/batch" .. M._n .. ".lua"
end
M.tmpdir = function()
  tmpfile()
  return tmpdir
end

-- Runs cases in one process; returns { [i] = {status, msg} }, done (false: it died).
local function run_one(cases, preamble, timeout)
  local path = tmpfile()
  local f = assert(io.open(path, "w"))
  f:write(script(cases, preamble))
  f:close()
  local cmd = string.format("timeout -s KILL %d luajit %s 2>&1", timeout or 60, path)
  local p = assert(io.popen(cmd))
  local res, done, tail = {}, false, {}
  for l in p:lines() do
    if l == "@@DONE" then done = true
    else
      local i, st, m = l:match("^@@ (%d+) (%a+) ?(.*)$")
      if i then res[tonumber(i)] = { status = st, msg = m }
      else tail[#tail + 1] = l; if #tail > 5 then table.remove(tail, 1) end end
    end
  end
  p:close()
  os.remove(path)
  return res, done, table.concat(tail, " | ")
end

-- run(cases, {batch=60, preamble=, timeout=60}) -> results by case id, plus totals.
function M.run(cases, opts)
  opts = opts or {}
  local batch = opts.batch or 60
  local results = {}
  for s = 1, #cases, batch do
    local chunk = {}
    for i = s, math.min(s + batch - 1, #cases) do chunk[#chunk + 1] = cases[i] end
    local res, done = run_one(chunk, opts.preamble, opts.timeout)
    if not done then
      -- find the culprit(s): every case of the batch alone
      for i, c in ipairs(chunk) do
        local r1, d1, tail = run_one({ c }, opts.preamble, opts.timeout)
        res[i] = d1 and r1[1] or { status = "crash", msg = "child died: " .. tail }
      end
    end
    for i, c in ipairs(chunk) do
      results[c.id] = res[i] or { status = "crash", msg = "no report" }
    end
  end
  if tmpdir then os.execute("rm -rf " .. tmpdir) tmpdir = nil end
  return results
end

return M
