-- tools/sweep/surfaces.lua — the surface sweep (spec/sweep_surfaces_spec.lua) from the
-- command line: Gluon layers' options and hybridized-vs-eager runs, DataLoader options,
-- kvstore methods, session hand-over, the modules' functions, mx.mod.Module's methods
-- (spec/helpers/sweep_gluon.lua, sweep_apis.lua, sweep_modules.lua, sweep_mod.lua).
--   luajit tools/sweep/surfaces.lua [--filter PATTERN] [--jobs N] [--batch N] [--list]
-- Prints the failing cases (every case with --list) and the report line; exit status 1
-- when a case fails. Run from the repository root.
package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
if not os.getenv("LUA_CPATH") then package.cpath = "build/lib/?.so;" .. package.cpath end

local M = {}

M.PREAMBLE = "mx = require('mx') nd, gluon = mx.nd, mx.gluon nn, rnn = gluon.nn, gluon.rnn"

-- All the cases ({ gluon = n, apis = n, modules = n, functions = n } counts and the Gluon
-- generator's stats).
function M.cases(mx)
  local G = require("helpers.sweep_gluon")
  local A = require("helpers.sweep_apis")
  local g, stats = G.cases(mx)
  local a = A.cases(mx)
  local m, nfun = require("helpers.sweep_modules").cases(mx)
  local mo, mstats = require("helpers.sweep_mod").cases(mx)
  local all = {}
  for _, c in ipairs(g) do all[#all + 1] = c end
  for _, c in ipairs(a) do all[#all + 1] = c end
  for _, c in ipairs(m) do all[#all + 1] = c end
  for _, c in ipairs(mo) do all[#all + 1] = c end
  return all, { gluon = #g, apis = #a, modules = #m, functions = nfun, gstats = stats,
    mod = #mo, mstats = mstats }
end

-- Runs cases (filtered by a pattern over ids); returns results by id, counts, failing lines.
function M.run(cases, opts)
  opts = opts or {}
  local child = require("helpers.child_gluon")
  local todo = {}
  for _, c in ipairs(cases) do
    if not opts.filter or c.id:find(opts.filter) then todo[#todo + 1] = c end
  end
  local t0 = os.time()
  local res = child.run(todo, { batch = opts.batch or 80, jobs = opts.jobs or 2,
    preamble = M.PREAMBLE, timeout = opts.timeout or 120 })
  local counts, bad = { clean = 0, correct = 0, crash = 0, silent = 0, unclear = 0 }, {}
  for _, c in ipairs(todo) do
    local r = res[c.id]
    counts[r.status] = (counts[r.status] or 0) + 1
    if opts.list or (r.status ~= "clean" and r.status ~= "correct") then
      bad[#bad + 1] = string.format("%-8s %s  %s", r.status, c.id, (r.msg or ""):sub(1, 300))
    end
  end
  table.sort(bad)
  counts.tried, counts.seconds = #todo, os.time() - t0
  return res, counts, bad
end

function M.report(c)
  return string.format("surface sweep: %d cases tried, %d clean errors, %d correct results, %d "
    .. "crashes, %d silent wrong, %d unclear (%d s)", c.tried, c.clean, c.correct, c.crash,
    c.silent, c.unclear, c.seconds)
end

local function main(args)
  local opts, i = {}, 1
  while i <= #args do
    local a = args[i]
    if a == "--filter" then opts.filter = args[i + 1]; i = i + 1
    elseif a == "--jobs" then opts.jobs = tonumber(args[i + 1]); i = i + 1
    elseif a == "--batch" then opts.batch = tonumber(args[i + 1]); i = i + 1
    elseif a == "--list" then opts.list = true
    else error("unknown argument " .. a) end
    i = i + 1
  end
  local mx = require("mx")
  local cases = M.cases(mx)
  local _, counts, bad = M.run(cases, opts)
  for _, l in ipairs(bad) do print(l) end
  print(M.report(counts))
  return (counts.crash + counts.silent + counts.unclear) == 0 and 0 or 1
end

if arg and arg[0] and arg[0]:match("tools/sweep/surfaces%.lua$") then os.exit(main(arg)) end
return M
