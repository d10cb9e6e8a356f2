-- bench/allreduce_bench.lua [MB=64] [reps=10] — allreduce bandwidth of a float32 gradient
-- through the dist_sync kvstore, against build/allreduce_bench (plain MPI_Allreduce of the
-- same buffer). Run both with bench/dist_run.sh. Rank 0 prints medians:
--   kv.allreduce   one engine job (the kvstore's path for one tensor)
--   pushpull       the kvstore's gradient path (allreduce in place in the gradient, then
--                  the sum copied into the store for later pulls: a 64 MB memcpy)
--   mx_mpi         libmx_mpi's deadline-polled MPI_Iallreduce, called directly
local mx = require("mx")
local ffi = require("ffi")
local nd = mx.nd
local progress = require("mx.progress")

local mb = tonumber(arg[1] or "64")
local reps = tonumber(arg[2] or "10")
local kv = mx.kv.create("dist_sync")
local ds = require("mx.kvstore.dist_sync")
local P = ds._lib()
local n = math.floor(mb * 2 ^ 20 / 4)
local g = nd.ones({ n })

local function median(t)
  table.sort(t)
  return t[math.floor(#t / 2) + 1]
end

local function bench(name, fn)
  fn() -- warm
  local t = {}
  for i = 1, reps do
    kv:barrier()
    local t0 = progress.now()
    fn()
    t[i] = progress.now() - t0
  end
  local m = median(t)
  if kv.rank == 0 then
    print(string.format("%-14s %.0f MB: median %.4f s  %.2f GB/s", name, mb, m, mb / 1024 / m))
  end
  return m
end

bench("kv.allreduce", function() kv:allreduce(g) end)
kv:init(0, g)
-- waitall: the copy of the sum into the store (engine work after the allreduce) counts too
bench("pushpull", function() kv:pushpull(0, g); nd.waitall() end)
local ptr = ffi.cast("float *", g:data_ptr())
bench("mx_mpi", function() assert(P.mx_mpi_allreduce(ptr, n, 0, 0) == 0) end)
