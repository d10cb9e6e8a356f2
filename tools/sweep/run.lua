-- tools/sweep/run.lua — run the reliability sweep from the command line.
--   luajit tools/sweep/run.lua [--filter PATTERN] [--batch N] [--jobs N] [--write-known] [--list]
-- Prints the failing cases (known ones marked) and the report line; --write-known rewrites
-- spec/fixtures/sweep_known.lua with today's failures. Run from the repository root; the
-- build is build/lib unless LUA_CPATH says otherwise (SWEEP_LUAJIT: the interpreter, e.g.
-- under ASan, docs/reliability.md).
package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
if not os.getenv("LUA_CPATH") then package.cpath = "build/lib/?.so;" .. package.cpath end

local opts, write, verbose = { batch = 200, jobs = 2 }, false, false
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--filter" then opts.filter = arg[i + 1]; i = i + 1
  elseif a == "--batch" then opts.batch = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--jobs" then opts.jobs = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--write-known" then write = true
  elseif a == "--list" then verbose = true
  else error("unknown argument " .. a) end
  i = i + 1
end

local runner = dofile("tools/sweep/runner.lua")
local res = runner.run(opts)
local known = runner.known()
local ids = {}
for id, r in pairs(res.by_id) do
  if runner.failing[r.status] and (verbose or not known[id]) then ids[#ids + 1] = id end
end
table.sort(ids)
for _, id in ipairs(ids) do
  local r = res.by_id[id]
  print(string.format("%-8s %s%s  %s", r.status, id, known[id] and " (known)" or "", r.detail))
end
print(runner.report(res))
if write then
  print("wrote " .. runner.write_known(res) .. " entries to spec/fixtures/sweep_known.lua")
end
