-- tools/sweep/runner.lua — the parent side of the reliability sweep (spec/helpers/sweep.lua
-- makes and judges the cases): runs the cases in batches, each batch in a child process
-- (spec/helpers/child.lua), `jobs` children at a time. When a child dies, the case it was
-- running (its last "S" line) is re-run alone in a fresh child; if that one lives (or the
-- child died at exit: heap damage shows late), every finished case of the batch is re-run
-- one per child, and each that dies alone is a crash. A death no single case reproduces is
-- blamed on the case in flight (or the batch's last), saying so. The rest of the batch then
-- continues in a new child.
--
--   local runner = dofile("tools/sweep/runner.lua")
--   local res = runner.run{ batch = 200, jobs = 2, filter = "^dot|" }
--     (also: select = function(case) -> bool, a finer filter; env = { VAR = value }, the
--     children's environment, e.g. a BLAS code path: tools/sweep/isa.lua)
--   res.totals.{tried, clean, correct, crash, silent, unclear, skip, harness}
--   res.by_id[id] = { status =, detail = }
--   runner.report(res) -> the one-line summary
--   runner.write_known(res, path) / runner.known(path): the expected-failure list
local M = {}

local FAILING = { crash = true, silent = true, unclear = true, harness = true }
M.failing = FAILING

local function code_for(list)
  return "require('helpers.sweep').child_main({" .. table.concat(list, ",") .. "})"
end

-- The interesting lines of a dead child's output (sanitizer reports, signals).
local function death_note(r)
  local keep = {}
  for line in r.out:gmatch("[^\n]+") do
    if not line:match("^[SR] %d") and not line:match("^DONE") then
      if line:match("ERROR") or line:match("SUMMARY") or line:match("runtime error") or line:match("#%d ")
        or line:match("PANIC") or line:match("[Aa]bort") or line:match("[Ss]egmentation") then
        keep[#keep + 1] = line:gsub("^%s+", "")
        if #keep >= 8 then break end
      end
    end
  end
  local how = r.signal and ("signal " .. r.signal) or ("exit " .. r.status)
  return how .. (#keep > 0 and (": " .. table.concat(keep, " | ")) or "")
end

local function parse(r, results)
  local inflight, done = nil, false
  for line in r.out:gmatch("[^\n]+") do
    local s = line:match("^S (%d+)$")
    if s then inflight = tonumber(s) end
    local i, st, detail = line:match("^R (%d+) (%S+) ?(.*)$")
    if i then
      results[tonumber(i)] = { status = st, detail = detail }
      inflight = nil
    end
    if line == "DONE" then done = true end
  end
  return done and r.status == 0, inflight
end

-- Run case i alone in a fresh child: nil if it lived, else the death note.
local child, child_env
local function solo(i, results)
  local r = child.run(code_for({ i }), 120, child_env)
  local sres = {}
  if parse(r, sres) then
    if sres[i] and not results[i] then results[i] = sres[i] end
    return nil
  end
  return death_note(r) .. (sres[i] and " (after it returned: " .. sres[i].status .. ")" or "")
end

-- Run each case alone, `jobs` at a time; the cases that die: { {case index, detail=}, ... }.
local function solo_many(list, results, jobs)
  local dead, k = {}, 1
  while k <= #list do
    local hs = {}
    for j = k, math.min(k + jobs - 1, #list) do
      hs[#hs + 1] = { i = list[j], h = child.start(code_for({ list[j] }), 120, child_env) }
    end
    for _, x in ipairs(hs) do
      local r = child.finish(x.h)
      if not parse(r, {}) then
        local d = death_note(r)
        results[x.i] = { status = "crash", detail = d .. " (alone)" }
        dead[#dead + 1] = x.i
      end
    end
    k = k + jobs
  end
  return dead
end

function M.run(opts)
  opts = opts or {}
  local sweep = require("helpers.sweep")
  child, child_env = require("helpers.child"), opts.env
  local cases = sweep.cases()
  local batch, jobs = opts.batch or 200, opts.jobs or 2
  local todo = {}
  for i, c in ipairs(cases) do
    if (not opts.filter or c.id:find(opts.filter)) and (not opts.select or opts.select(c)) then
      todo[#todo + 1] = i
    end
  end
  local queue = {}
  for k = 1, #todo, batch do
    local b = {}
    for j = k, math.min(k + batch - 1, #todo) do b[#b + 1] = todo[j] end
    queue[#queue + 1] = b
  end
  local results, running = {}, {}
  local t0 = os.time()
  while #queue > 0 or #running > 0 do
    while #running < jobs and #queue > 0 do
      local b = table.remove(queue, 1)
      running[#running + 1] = { list = b, h = child.start(code_for(b), nil, child_env) }
    end
    local job = table.remove(running, 1)
    local r = child.finish(job.h)
    local ok, inflight = parse(r, results)
    if not ok then
      -- name the culprit: the case in flight alone, then (if it survives alone, or the
      -- child died at exit) every finished case of the batch alone
      local crashed = false
      if inflight then
        local d = solo(inflight, results)
        if d then
          results[inflight] = { status = "crash", detail = d }
          crashed = true
        end
      end
      if not crashed then
        local done = {}
        for _, i in ipairs(job.list) do
          if i == inflight then break end
          done[#done + 1] = i
        end
        if #solo_many(done, results, jobs) > 0 then crashed = true end
      end
      if not crashed then
        local blame = inflight or job.list[#job.list]
        results[blame] = { status = "crash", detail = death_note(r)
          .. " (not reproduced by any case of its batch alone: blamed on the "
          .. (inflight and "case in flight" or "batch's last case") .. ")" }
      end
      local rest, after = {}, false
      for _, i in ipairs(job.list) do
        if after then rest[#rest + 1] = i end
        if i == inflight then after = true end
      end
      if #rest > 0 then table.insert(queue, 1, rest) end
    end
    if opts.progress then opts.progress(#todo, results) end
  end
  local totals = { tried = #todo, clean = 0, correct = 0, crash = 0, silent = 0, unclear = 0, skip = 0,
    harness = 0 }
  local by_id = {}
  for _, i in ipairs(todo) do
    local r = results[i] or { status = "harness", detail = "no result" }
    totals[r.status] = (totals[r.status] or 0) + 1
    by_id[cases[i].id] = r
  end
  return { totals = totals, by_id = by_id, cases = cases, todo = todo, seconds = os.time() - t0 }
end

function M.report(res)
  local t = res.totals
  return string.format("sweep: %d cases tried, %d clean errors, %d correct results, %d crashes, "
    .. "%d silent wrong, %d unclear, %d skipped (no working call), %d harness errors (%d s)",
    t.tried, t.clean, t.correct, t.crash, t.silent, t.unclear, t.skip, t.harness, res.seconds)
end

-- The expected failures: a set of case ids, plus entries whose key starts with
-- "pattern:" (a Lua pattern over ids, for cases whose outcome varies between runs).
-- known(path)[id] is true-ish for a known case.
function M.known(path)
  local f = loadfile(path or "spec/fixtures/sweep_known.lua")
  local t = f and f() or {}
  local pats = {}
  for k, v in pairs(t) do
    local p = k:match("^pattern:(.*)$")
    if p then pats[#pats + 1] = { p, v } end
  end
  return setmetatable({}, { __index = function(_, id)
    if t[id] then return t[id] end
    for _, p in ipairs(pats) do if id:find(p[1]) then return p[2] end end
  end, raw = t })
end

-- The current failures as spec/fixtures/sweep_known.lua (sorted: diffs stay readable).
function M.write_known(res, path)
  local old = getmetatable(M.known(path)).raw
  local ids, pats = {}, {}
  for k, v in pairs(old) do if k:match("^pattern:") then pats[#pats + 1] = { k, v } end end
  table.sort(pats, function(a, b) return a[1] < b[1] end)
  for id, r in pairs(res.by_id) do
    local flaky = false
    for _, p in ipairs(pats) do if id:find(p[1]:sub(9)) then flaky = true end end
    if FAILING[r.status] and not flaky then ids[#ids + 1] = id end
  end
  table.sort(ids)
  local f = assert(io.open(path or "spec/fixtures/sweep_known.lua", "w"))
  f:write("-- spec/fixtures/sweep_known.lua — cases of the reliability sweep that fail today\n",
    "-- (expected failures: spec/sweep_spec.lua reports them pending). GENERATED by\n",
    "--   luajit tools/sweep/run.lua --write-known\n",
    "-- Do not add entries by hand: the list may only shrink as the bugs are fixed.\n",
    "-- id = status (crash, silent, unclear) -- detail at generation time. Entries keyed\n",
    "-- \"pattern:<Lua pattern>\" (kept by --write-known, written by hand with a reason) cover\n",
    "-- cases whose outcome varies from run to run.\n",
    "return {\n")
  for _, p in ipairs(pats) do f:write(string.format("  [%q] = %q,\n", p[1], p[2])) end
  for _, id in ipairs(ids) do
    local r = res.by_id[id]
    f:write(string.format("  [%q] = %q, -- %s\n", id, r.status, (r.detail or ""):sub(1, 120):gsub("\n", " ")))
  end
  f:write("}\n")
  f:close()
  return #ids
end

return M
