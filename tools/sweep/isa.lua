-- tools/sweep/isa.lua — the reliability sweep under every code path the CPU libraries can
-- select on this machine, so that a result never depends on the machine CI happens to get.
-- OpenBLAS (a DYNAMIC_ARCH build) picks a kernel set per CPU model, and OPENBLAS_CORETYPE
-- forces another; oneDNN picks its JIT ISA per CPU, and ONEDNN_MAX_CPU_ISA caps it. Each
-- value is probed in a child first: the probe reports the core / effective ISA the library
-- really took (OpenBLAS maps unknown or retired names to others, oneDNN clamps a cap to
-- what the CPU has), values that land on the same path are run once, and a core this CPU
-- cannot execute (SIGILL: e.g. the FMA4 kernels of Bulldozer on an Intel or Zen 4 CPU)
-- is listed as not runnable here.
--
--   luajit tools/sweep/isa.lua --list           # the variants this machine can run
--   luajit tools/sweep/isa.lua                  # the whole sweep under each (~80 s each)
--   luajit tools/sweep/isa.lua --subset         # the machine-dependent ops only
--   luajit tools/sweep/isa.lua --filter '^linalg_trsm|'
-- Exit status 1 when a variant has a failing case that spec/fixtures/sweep_known.lua does not
-- list, or a case whose verdict differs from the default path's (correct there, an error
-- here: bf16 dot on oneDNN below AVX-512 once). spec/sweep_isa_spec.lua runs M.ci in CI:
-- the default path's kernel-reaching cases under every other variant. Our own kernels' AVX-512
-- clones (target_clones in kernels/cpu) are chosen by the CPU alone: no variable caps them.
local M = {}

local child -- helpers.child, loaded with the package paths set up

-- OpenBLAS's x86_64 core names (driver/others/dynamic.c, up to 0.3.2x). Which of them the
-- installed library knows, and where each lands, is what the probe finds out.
M.BLAS_NAMES = { "Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2",
  "Penryn", "Dunnington", "Nehalem", "Athlon", "Opteron", "Opteron_SSE3", "Barcelona", "Nano",
  "Sandybridge", "Bobcat", "Bulldozer", "Piledriver", "Haswell", "Steamroller", "Excavator",
  "Zen", "SkylakeX", "Cooperlake", "SapphireRapids" }
-- oneDNN's ONEDNN_MAX_CPU_ISA values (dnnl_cpu_isa_t, 2.x).
M.DNNL_NAMES = { "SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI",
  "AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL" }

-- The ops whose kernels run on OpenBLAS/LAPACK or oneDNN (the --subset; the rest of the
-- sweep runs our own loops, the same whatever these variables say): the GEMM-based CPU
-- kernels of the linalg and rnn families (kernels/cpu/gemm.c: oneDNN's sgemm and bf16
-- matmul, OpenBLAS for f64, LAPACK), and every op with a oneDNN kernel in its table entry.
local GEMM_FAMILIES = { linalg = true, rnn = true }
function M.blas_op(op) return GEMM_FAMILIES[op.family] == true end
function M.dnnl_op(op) return op.dnnl ~= nil or GEMM_FAMILIES[op.family] == true end
-- The dtype codes each library computes in (others run our kernels): a case's `dtype`
-- (nil: the op's own baseline, float32 where it takes it).
local BLAS_DTYPES = { [0] = true, [1] = true }
local DNNL_DTYPES = { [0] = true, [2] = true, [12] = true }

local PROBE = [[
local mx = require("mx")
local ffi = require("ffi")
local a = mx.nd.array({ { 2, 0 }, { 1, 3 } }, { dtype = "float64" })
mx.nd.linalg_trsm(a, a):wait_to_read()
mx.nd.dot(mx.nd.ones({ 64, 64 }), mx.nd.ones({ 64, 64 })):wait_to_read()
mx.nd.convolution(mx.nd.ones({ 1, 3, 8, 8 }), mx.nd.ones({ 4, 3, 3, 3 }),
  { kernel = { 3, 3 }, num_filter = 4, no_bias = true }):wait_to_read()
ffi.cdef("char *openblas_get_corename(void); int dnnl_get_effective_cpu_isa(void);")
local ok, ob = pcall(ffi.load, "libopenblas.so.0")
if ok then io.write("BLAS ", ffi.string(ob.openblas_get_corename()), "\n") end
local okd, dn = pcall(ffi.load, "libdnnl.so.2")
if okd then io.write("DNNL ", string.format("0x%x", dn.dnnl_get_effective_cpu_isa()), "\n") end
]]

-- The instruction sets a forced OpenBLAS core needs beyond x86-64's baseline: OpenBLAS runs
-- a forced core's kernels whatever the CPU has, and the probe's tiny GEMMs do not reach
-- every kernel (an AVX-512 core forced on an AVX2 CPU passes it, then SIGILLs in the sweep).
M.BLAS_NEEDS = { Haswell = "avx2", Zen = "avx2", Excavator = "avx2", SkylakeX = "avx512f",
  Cooperlake = "avx512_bf16", SapphireRapids = "amx_tile" }
local cpu_flags
local function cpu_has(flag)
  if cpu_flags == nil then
    local f = io.open("/proc/cpuinfo", "r")
    cpu_flags = f and (f:read("*a"):match("\nflags%s*:%s*([^\n]*)") or "") or false
    if f then f:close() end
  end
  if not cpu_flags then return true end -- unknown: the probe decides
  return (" " .. cpu_flags .. " "):find(" " .. flag .. " ", 1, true) ~= nil
end

local function probe(env)
  local need = env.OPENBLAS_CORETYPE and M.BLAS_NEEDS[env.OPENBLAS_CORETYPE]
  if need and not cpu_has(need) then
    return nil, "this CPU has no " .. need .. " (the core's kernels would SIGILL)"
  end
  local r = child.run(PROBE, 60, env)
  if r.status ~= 0 then
    return nil, r.signal == 4 and "SIGILL: this CPU cannot run it" or ("probe failed: exit " .. r.status
      .. " " .. r.out:sub(1, 200):gsub("\n", " "))
  end
  return { blas = r.out:match("BLAS (%S+)"), dnnl = r.out:match("DNNL (%S+)"), out = r.out }
end

-- The variants: { name =, env =, ops = predicate } (the default first), and the values that
-- were not run with why ({ name, why }).
function M.variants()
  child = child or require("helpers.child")
  local base = assert(probe({}))
  local list = { { name = "default (OpenBLAS " .. tostring(base.blas) .. ", oneDNN ISA "
    .. tostring(base.dnnl) .. ")", env = {} } }
  local skipped = {}
  local seen = { [base.blas or "?"] = true }
  if base.blas then
    local took = {}
    for _, n in ipairs(M.BLAS_NAMES) do
      local r, why = probe({ OPENBLAS_CORETYPE = n, OPENBLAS_VERBOSE = 2 })
      if not r then
        skipped[#skipped + 1] = { "OPENBLAS_CORETYPE=" .. n, why }
      elseif r.out:find("Core not found", 1, true) then
        skipped[#skipped + 1] = { "OPENBLAS_CORETYPE=" .. n, "not a core this OpenBLAS can force (it took "
          .. r.blas .. ")" }
      else
        took[n] = r.blas
      end
    end
    -- one run per core, under the name that is that core's own where there is one
    for _, pass in ipairs({ true, false }) do
      for _, n in ipairs(M.BLAS_NAMES) do
        local core = took[n]
        if core and (not pass or core:lower() == n:lower()) then
          took[n] = nil
          if seen[core] then
            skipped[#skipped + 1] = { "OPENBLAS_CORETYPE=" .. n, "same kernels as " .. core }
          else
            seen[core] = true
            list[#list + 1] = { name = "OPENBLAS_CORETYPE=" .. n, env = { OPENBLAS_CORETYPE = n },
              ops = M.blas_op, dtypes = BLAS_DTYPES }
          end
        end
      end
    end
  end
  local dseen = { [base.dnnl or "?"] = true }
  if base.dnnl then
    for _, n in ipairs(M.DNNL_NAMES) do
      local r, why = probe({ ONEDNN_MAX_CPU_ISA = n })
      if not r then
        skipped[#skipped + 1] = { "ONEDNN_MAX_CPU_ISA=" .. n, why }
      elseif dseen[r.dnnl] then
        skipped[#skipped + 1] = { "ONEDNN_MAX_CPU_ISA=" .. n, "effective ISA " .. tostring(r.dnnl)
          .. ", already run" }
      else
        dseen[r.dnnl] = true
        list[#list + 1] = { name = "ONEDNN_MAX_CPU_ISA=" .. n .. " (effective " .. r.dnnl .. ")",
          env = { ONEDNN_MAX_CPU_ISA = n }, ops = M.dnnl_op, dtypes = DNNL_DTYPES }
      end
    end
  end
  return list, skipped
end

-- The ops a variant's library serves (the default path: all of them).
local function ops_of(v)
  return v.ops or function(op) return M.blas_op(op) or M.dnnl_op(op) end
end

-- Runs the sweep under variant v. opts: subset (only the ops v's library serves),
-- filter (a pattern over ids), only (a set of ids), base (the default path's result: a
-- case whose verdict differs from it, say correct there and an error here, is a failure
-- too: the result depends on the machine). Returns the runner's result and the failures
-- the known list does not hold.
function M.run(runner, v, opts)
  opts = opts or {}
  local want = opts.subset and ops_of(v) or nil
  local only, computing = opts.only, opts.computing
  local res = runner.run { batch = 200, jobs = 2, env = v.env, filter = opts.filter,
    select = (want or only or computing) and function(c)
      return (not want or (c.op ~= nil and want(c.op))) and (not only or only[c.id] == true)
        and (not computing or not (c.nontensor or c.list or c.extra or c.opts_pos ~= nil))
    end or nil }
  local known, new = runner.known(), {}
  for id, r in pairs(res.by_id) do
    local b = opts.base and opts.base.by_id[id]
    if runner.failing[r.status] and not known[id] then
      new[#new + 1] = r.status .. "  " .. id .. "  " .. r.detail
    elseif b and b.status ~= r.status and not known[id] then
      new[#new + 1] = "differs  " .. id .. "  " .. b.status .. " on the default path, " .. r.status
        .. " here: " .. r.detail
    end
  end
  table.sort(new)
  return res, new
end

-- The CI form: the default path over every machine-dependent op (less the cases
-- that pass a non-tensor, an extra argument or a non-table as the options: refused before
-- any kernel), then each other variant over the cases that reached a kernel there (the
-- correct results; the clean errors come from argument checks, the same everywhere) in
-- the dtypes that library computes in.
-- Returns { {name=, res=, new=}, ... }, skipped.
function M.ci(runner)
  local vs, skipped = M.variants()
  local base, bnew = M.run(runner, vs[1], { subset = true, computing = true })
  local out = { { name = vs[1].name, res = base, new = bnew } }
  local correct, by_id = {}, {}
  for _, c in ipairs(base.cases) do by_id[c.id] = c end
  for id, r in pairs(base.by_id) do if r.status == "correct" then correct[id] = true end end
  for k = 2, #vs do
    local dt, only = vs[k].dtypes, {}
    for id in pairs(correct) do
      local c = by_id[id]
      if not dt or c.dtype == nil or dt[c.dtype] then only[id] = true end
    end
    local res, new = M.run(runner, vs[k], { subset = true, only = only, base = base })
    out[#out + 1] = { name = vs[k].name, res = res, new = new }
  end
  return out, skipped
end

local function main(args)
  package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
  if not os.getenv("LUA_CPATH") then package.cpath = "build/lib/?.so;" .. package.cpath end
  local subset, list_only, filter = false, false, nil
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--subset" then subset = true
    elseif a == "--list" then list_only = true
    elseif a == "--filter" then filter = args[i + 1]; i = i + 1
    else error("unknown argument " .. a) end
    i = i + 1
  end
  local vs, skipped = M.variants()
  for _, v in ipairs(vs) do print("variant  " .. v.name) end
  for _, s in ipairs(skipped) do print("not run  " .. s[1] .. ": " .. s[2]) end
  if list_only then return 0 end
  local runner = dofile("tools/sweep/runner.lua")
  local bad, base = 0, nil
  for _, v in ipairs(vs) do
    local res, new = M.run(runner, v, { subset = subset, filter = filter, base = base })
    base = base or res
    for _, l in ipairs(new) do print("  " .. l) end
    print(v.name .. ": " .. runner.report(res))
    bad = bad + #new
  end
  return bad == 0 and 0 or 1
end

if arg and arg[0] and arg[0]:match("tools/sweep/isa%.lua$") then os.exit(main(arg)) end
return M
