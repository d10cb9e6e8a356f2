-- tools/gen_ops.lua OPTABLE OUTDIR [OPS]: writes OUTDIR/mx_ops_gen.h (param structs, enum
-- constants), mx_kernels_gen.h (every declared kernel's prototype), mx_ops_gen.c (libmx's
-- registry and the registration of its ref/cpu/dnnl kernels) and mx_cuda_gen.c
-- (libmx_cuda's registration). Run by CMake at build time (LuaJIT is a build dependency).
-- OPS (the inference-only library's op set, CMake's MX_OPS): "inference" (every op but the
-- optimizer family's, whose kernels that library leaves out), a file of op names (luamx or
-- MXNet names, one per line, # comments) or a symbol JSON (the ops its nodes use):
-- the registry (mx_ops_gen.c) then holds those ops and the ones the graph passes build
-- (BatchNorm folding's arithmetic, the residual fusion's convolution_sum); the headers
-- keep every param struct and prototype, so every kernel still compiles and the linker
-- drops the ones no registry entry reaches.
local optable, outdir, keep_file = arg[1], arg[2], arg[3]
local here = arg[0]:match("^(.*)/tools/[^/]*$") or "."
package.path = here .. "/lua/?.lua;" .. package.path
local gen = require("mx.core.opgen")
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

local function reduced(all, path)
  local f = assert(io.open(path, "r"), "gen_ops: cannot read the op list " .. path)
  local text = f:read("*a")
  f:close()
  local want = {}
  for _, n in ipairs { "add", "sub", "mul", "add_scalar", "rsqrt", "reshape", "copy", "cast" } do
    want[n] = true
  end
  if path:match("%.json$") then
    for n in text:gmatch('"op"%s*:%s*"([^"]+)"') do want[n] = true end
    want.null = nil -- variables
  else
    for line in text:gmatch("[^\n]+") do
      local n = line:gsub("#.*", ""):match("^%s*(%S+)")
      if n then want[n] = true end
    end
  end
  -- what the graph passes build from the ops kept: the residual fusion's convolution_sum
  local from = { convolution = { "convolution_sum" }, Convolution = { "convolution_sum" } }
  for n, extra in pairs(from) do
    if want[n] then for _, e in ipairs(extra) do want[e] = true end end
  end
  local out, found = {}, {}
  for _, op in ipairs(all) do
    local hit = want[op.name]
    if hit then found[op.name] = true end
    for _, m in ipairs(op.mxnet) do
      if want[m] then hit, found[m] = true, true end
    end
    if hit then out[#out + 1] = op end
  end
  for n in pairs(want) do
    if not found[n] then
      error("gen_ops: " .. path .. " names op '" .. n .. "', which the op table does not have")
    end
  end
  return out
end

local function inference(all)
  local out = {}
  for _, op in ipairs(all) do
    if op.family ~= "optimizer" then out[#out + 1] = op end
  end
  return out
end

local registry = ops
if keep_file == "inference" then registry = inference(ops)
elseif keep_file and keep_file ~= "" then registry = inference(reduced(ops, keep_file)) end
write(outdir .. "/mx_ops_gen.h", gen.c_header(ops))
write(outdir .. "/mx_kernels_gen.h", gen.kernel_header(ops))
write(outdir .. "/mx_ops_gen.c", gen.c_source(registry))
write(outdir .. "/mx_cuda_gen.c", gen.cuda_source(registry))
