-- bench/harness.lua — the timing harness every luamx benchmark uses (the Python
-- peers use bench/harness.py, which prints the same lines).
--
--   local H = require("harness")        -- run with LUA_PATH including bench/?.lua
--   local t = H.time(function(n) for _ = 1, n do f() end end, { n = 1e5 })
--   H.report("add_1elem_new", t.median, "ns/call", { impl = "luamx" })
--
-- H.time calls fn(n) `reps` times (after `warmup` calls) and returns per-iteration
-- times in ns: { median =, min =, samples = }. The function runs the loop itself so
-- that LuaJIT compiles it as one trace; the timer is CLOCK_MONOTONIC.
-- H.report prints one machine-readable line per result:
--   RESULT <tab> bench <tab> impl <tab> value <tab> unit <tab> note
-- which bench/compare.py turns into the side-by-side tables of bench/RESULTS.md.
local ffi = require("ffi")

pcall(ffi.cdef, [[
  typedef struct { long tv_sec; long tv_nsec; } mx_bench_timespec;
  int clock_gettime(int clk, mx_bench_timespec *ts);
]])
local ts = ffi.new("mx_bench_timespec")
local CLOCK_MONOTONIC = 1

local H = {}

-- Seconds since an arbitrary point, nanosecond resolution.
function H.now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function median(xs)
  local s = {}
  for i, v in ipairs(xs) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return 0 / 0 end
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end
H.median = median

-- fn(n) runs n iterations; returns ns per iteration (median over reps).
-- opts: n (iterations per rep, default 1e4), reps (default 7), warmup (default 2),
-- setup (called before every rep, untimed), gc (true: collect before each rep).
function H.time(fn, opts)
  opts = opts or {}
  local n, reps, warmup = opts.n or 1e4, opts.reps or 7, opts.warmup or 2
  for _ = 1, warmup do
    if opts.setup then opts.setup() end
    fn(n)
  end
  local samples = {}
  for r = 1, reps do
    if opts.setup then opts.setup() end
    if opts.gc ~= false then collectgarbage("collect") end
    local t0 = H.now()
    fn(n)
    samples[r] = (H.now() - t0) * 1e9 / n
  end
  local mn = math.huge
  for _, v in ipairs(samples) do mn = math.min(mn, v) end
  return { median = median(samples), min = mn, samples = samples }
end

-- Machine-readable result line (see the header). value is a number.
function H.report(bench, value, unit, opts)
  opts = opts or {}
  io.write(string.format("RESULT\t%s\t%s\t%.6g\t%s\t%s\n", bench, opts.impl or "luamx",
    value, unit, opts.note or ""))
  io.stdout:flush()
end

-- Parse `--key=value` / `--flag` arguments into a table (numbers converted).
function H.args(argv)
  local a = {}
  for _, s in ipairs(argv or {}) do
    local k, v = s:match("^%-%-([%w_%-]+)=(.*)$")
    if k then
      a[k] = tonumber(v) or v
    else
      k = s:match("^%-%-([%w_%-]+)$")
      if k then a[k] = true else a[#a + 1] = s end
    end
  end
  return a
end

-- The common start of a luamx benchmark run with `--threads`: parses argv, loads luamx
-- and sets its intra-op pool to --threads (default 1). Returns mx, the arguments (H.args)
-- and the thread count.
function H.mx_setup(argv)
  local A = H.args(argv)
  local mx = require("mx")
  local threads = A.threads or 1
  require("mx.core.lib").C.mx_set_num_threads(threads)
  return mx, A, threads
end

-- A short description of the environment, printed as '# ' comment lines.
-- (with the load average: the machine is shared, and load explains noisy numbers)
function H.env_note()
  local ct = os.getenv("OPENBLAS_CORETYPE")
  local f = io.open("/proc/loadavg")
  local load = f and f:read("*l") or "?"
  if f then f:close() end
  io.write(string.format("# luajit %s, OPENBLAS_CORETYPE=%s, MX_NUM_THREADS=%s, loadavg %s\n",
    jit and jit.version or "?", ct or "(unset)", os.getenv("MX_NUM_THREADS") or "(unset)", load))
end

return H
