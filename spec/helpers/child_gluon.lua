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
--     result for which `check` (an expression over r, default true) holds; "result": it
--     must return such a result (an error is "silent": it should have worked).
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
    "local function emit(i, st, m) local okt, t = pcall(tostring, m) "
      .. "if not okt then st, t = 'unclear', 'tostring of the result raised: ' .. tostring(t) end "
      .. "m = t:gsub('[\\r\\n]', ' ') "
      .. "io.stdout:write('@@ ', i, ' ', st, ' ', m, '\\n') end",
  }
  for i, c in ipairs(cases) do
    local setup = c.setup or ""
    local nl = select(2, setup:gsub("\n", "")) + (setup ~= "" and 1 or 0)
    local line = nl + 1
    local body = (setup ~= "" and setup .. "\n" or "") .. "local r = (" .. c.call .. ")\n"
      .. "return r, (" .. (c.check or "true") .. ")\n"
    out[#out + 1] = string.format([[
io.stdout:write("@@S %%d\n")
do
  local f, perr = loadstring(%s, "=case")
  if not f then emit(%d, "unclear", "case does not compile: " .. perr) else
    setfenv(f, E)
    local ok, r, good = pcall(f)
    local names, expect, line = %s, %s, %d
    if ok then
      if expect ~= "error" and good then emit(%d, "correct", tostring(r))
      else emit(%d, "silent", "no error; result " .. tostring(r)) end
    elseif expect == "result" then emit(%d, "silent", "raised: " .. tostring(r))
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
      end)(), ",") .. "}", q(c.expect or "error"), line, i, i, i, i, i, i)
    out[#out] = out[#out]:gsub("@@S %%d", "@@S " .. i, 1)
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

-- Starts one process on cases; finish() gives { [i] = {status, msg} }, done (false: it
-- died), the case in flight when it died (index into cases) and its last lines.
local function start(cases, preamble, timeout)
  local path = tmpfile()
  local f = assert(io.open(path, "w"))
  f:write(script(cases, preamble))
  f:close()
  local cmd = string.format("timeout -s KILL %d luajit %s 2>&1", timeout or 60, path)
  return { p = assert(io.popen(cmd)), path = path }
end
local function finish(h)
  local res, done, tail, inflight = {}, false, {}, nil
  for l in h.p:lines() do
    if l == "@@DONE" then done = true
    else
      local s = l:match("^@@S (%d+)$")
      if s then inflight = tonumber(s)
      else
        local i, st, m = l:match("^@@ (%d+) (%a+) ?(.*)$")
        if i then res[tonumber(i)] = { status = st, msg = m }; inflight = nil
        else tail[#tail + 1] = l; if #tail > 5 then table.remove(tail, 1) end end
      end
    end
  end
  h.p:close()
  os.remove(h.path)
  return res, done, inflight, table.concat(tail, " | ")
end

-- run(cases, {batch=60, jobs=2, preamble=, timeout=60}) -> results by case id. Batches
-- run `jobs` processes at a time; when one dies, the case in flight is run alone (a crash
-- if it dies again; else the death is blamed on it anyway, saying so) and the rest of its
-- batch goes on in a new process.
function M.run(cases, opts)
  opts = opts or {}
  local batch, jobs = opts.batch or 60, opts.jobs or 2
  local results, queue = {}, {}
  for s = 1, #cases, batch do
    local chunk = {}
    for i = s, math.min(s + batch - 1, #cases) do chunk[#chunk + 1] = cases[i] end
    queue[#queue + 1] = chunk
  end
  local running = {}
  while #queue > 0 or #running > 0 do
    while #running < jobs and #queue > 0 do
      local chunk = table.remove(queue, 1)
      running[#running + 1] = { chunk = chunk, h = start(chunk, opts.preamble, opts.timeout) }
    end
    local job = table.remove(running, 1)
    local res, done, inflight, tail = finish(job.h)
    for i, c in ipairs(job.chunk) do if res[i] then results[c.id] = res[i] end end
    if not done then
      local k = inflight or #job.chunk
      local c = job.chunk[k]
      if not res[k] then
        local r1, d1, _, tail1 = finish(start({ c }, opts.preamble, opts.timeout))
        if d1 and r1[1] then
          results[c.id] = { status = "crash", msg = "child died in its batch (not alone): " .. tail }
        else
          results[c.id] = { status = "crash", msg = "child died: " .. tail1 }
        end
      end
      local rest = {}
      for i = k + 1, #job.chunk do rest[#rest + 1] = job.chunk[i] end
      if #rest > 0 then table.insert(queue, 1, rest) end
    end
  end
  for _, c in ipairs(cases) do results[c.id] = results[c.id] or { status = "crash", msg = "no report" } end
  if tmpdir then os.execute("rm -rf " .. tmpdir) tmpdir = nil end
  return results
end

return M
