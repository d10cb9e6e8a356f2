-- tools/gen_ops.lua OPTABLE OUTDIR: writes OUTDIR/mx_ops_gen.h (param structs, enum
-- constants), mx_kernels_gen.h (every declared kernel's prototype), mx_ops_gen.c (libmx's
-- registry and the registration of its ref/cpu/dnnl kernels) and mx_cuda_gen.c
-- (libmx_cuda's registration). Run by CMake at build time (LuaJIT is a build dependency).
local optable, outdir = arg[1], arg[2]
local here = arg[0]:match("^(.*)/tools/[^/]*$") or "."
package.path = here .. "/lua/?.lua;" .. package.path
local gen = require("mx._opgen")
local ops = gen.normalize(dofile(optable))
local function write(path, text)
  local tmp = path .. ".tmp"
  local f = assert(io.open(tmp, "w"))
  f:write(text)
  f:close()
  local old = io.open(path, "r")
  if old then
    local same = old:read("*a") == text
    old:close()
    if same then os.remove(tmp) return end -- keep mtime: no needless rebuilds
  end
  assert(os.rename(tmp, path))
end
write(outdir .. "/mx_ops_gen.h", gen.c_header(ops))
write(outdir .. "/mx_kernels_gen.h", gen.kernel_header(ops))
write(outdir .. "/mx_ops_gen.c", gen.c_source(ops))
write(outdir .. "/mx_cuda_gen.c", gen.cuda_source(ops))
