-- mx.serve.runtime — libmx's C inference runtime (mx_runtime.h) for Lua, on NDArrays:
-- what mx-serve's handlers run their model with.
--
--   local rt = require("mx.serve.runtime")
--   local m = rt.load{ symbol = "net-symbol.json", params = "net-0000.params",
--                      inputs = { { name = "data", shape = { -1, 3, 224, 224 } } } }
--   local m2 = rt.load{ onnx = "net.onnx", inputs = ... }   -- through the ONNX importer
--   local outs = m:forward{ data = x }      -- x: an NDArray (N, 3, 224, 224)
--   outs[1], outs[m.output_names[1]]        -- new NDArrays
--
-- A dim of -1 takes any size: the model is made at size 1 there and each distinct set of
-- input shapes gets its own context (its buffers planned once), kept in a bounded LRU
-- cache, so a warm forward at a seen batch size plans and allocates nothing in the
-- runtime. Inputs are bound zero-copy (their data pointers); outputs are copied into new
-- NDArrays. Errors are the runtime's messages (naming the input, the shapes, the node),
-- raised at the caller's line.
local ffi = require("ffi")
local nd = require("mx.nd")
local lib = require("mx.core.lib")
local C = lib.C

pcall(ffi.cdef, [[
typedef struct mx_rt_model mx_rt_model;
typedef struct mx_rt_ctx mx_rt_ctx;
typedef struct mx_rt_options {
  int threads; int dev_type, dev_id; int opt_level; int allow_reshape;
  int noutputs; const char *const *outputs;
} mx_rt_options;
typedef struct mx_rt_input { const char *name; int ndim; const int64_t *shape; int dtype; } mx_rt_input;
void mx_rt_options_init(mx_rt_options *opt);
int mx_rt_model_load(const char *symbol_path, const char *params_path, int ninputs,
                     const mx_rt_input *inputs, const mx_rt_options *opt, mx_rt_model **out);
int mx_rt_model_load_onnx(const char *path, int ninputs, const mx_rt_input *inputs,
                          const mx_rt_options *opt, mx_rt_model **out);
void mx_rt_model_free(mx_rt_model *m);
int mx_rt_model_num_outputs(const mx_rt_model *m);
const char *mx_rt_model_output_name(const mx_rt_model *m, int k);
int mx_rt_ctx_new(mx_rt_model *m, mx_rt_ctx **out);
void mx_rt_ctx_free(mx_rt_ctx *c);
int mx_rt_ctx_reshape(mx_rt_ctx *c, int ninputs, const mx_rt_input *inputs);
int mx_rt_input_shape(const mx_rt_ctx *c, int k, int64_t *shape, int *dtype);
int mx_rt_output_shape(const mx_rt_ctx *c, int k, int64_t *shape, int *dtype);
size_t mx_rt_input_bytes(const mx_rt_ctx *c, int k);
size_t mx_rt_output_bytes(const mx_rt_ctx *c, int k);
int mx_rt_bind_input(mx_rt_ctx *c, int k, const void *data, size_t nbytes);
int mx_rt_bind_output(mx_rt_ctx *c, int k, void *data, size_t nbytes);
int mx_rt_run(mx_rt_ctx *c);
int mx_rt_get_output(const mx_rt_ctx *c, int k, void *data, size_t nbytes);
const char *mx_rt_last_error(void);
]])

local M = {}
local Model = {}
Model.__index = Model

local i64_8 = ffi.typeof("int64_t[8]")
local int1 = ffi.typeof("int[1]")

local function rt_error(what, level)
  error(what .. ": " .. ffi.string(C.mx_rt_last_error()), level + 1)
end

-- the runtime's input list for shapes (lists of dims); keeps its C arrays alive in keep
local function c_inputs(specs, shapes, keep)
  local n = #specs
  local arr = ffi.new("mx_rt_input[?]", n)
  for k = 1, n do
    local s = specs[k]
    local dims = shapes[k]
    local sh = i64_8()
    for d = 1, #dims do sh[d - 1] = dims[d] end
    keep[#keep + 1] = sh
    local name = ffi.new("char[?]", #s.name + 1, s.name)
    keep[#keep + 1] = name
    arr[k - 1].name = name
    arr[k - 1].ndim = #dims
    arr[k - 1].shape = sh
    arr[k - 1].dtype = nd.dtype_code(s.dtype or "float32")
  end
  return arr
end

-- load{symbol=, params= | onnx=, inputs={{name, shape, dtype}...}, threads=0,
--      opt_level=2, max_contexts=16}
function M.load(opts)
  if type(opts) ~= "table" then error("runtime.load: expected an options table", 2) end
  if type(opts.symbol) ~= "string" and type(opts.onnx) ~= "string" then
    error("runtime.load: symbol= (the symbol JSON's path) or onnx= (an ONNX file) is required", 2)
  end
  local specs = opts.inputs
  if type(specs) ~= "table" or #specs == 0 then
    error("runtime.load: inputs= must list the model's inputs ({name=, shape=, dtype=})", 2)
  end
  local base = {}
  for k, s in ipairs(specs) do
    if type(s.name) ~= "string" or type(s.shape) ~= "table" then
      error(string.format("runtime.load: inputs[%d] needs a name and a shape", k), 2)
    end
    if s.dtype and not nd.dtype_code(s.dtype) then
      error(string.format("runtime.load: input '%s' has an unknown dtype '%s'", s.name, tostring(s.dtype)), 2)
    end
    local b = {}
    for d, v in ipairs(s.shape) do b[d] = v < 0 and 1 or v end
    base[k] = b
  end
  local opt = ffi.new("mx_rt_options")
  C.mx_rt_options_init(opt)
  opt.threads = opts.threads or 0
  if opts.opt_level then opt.opt_level = opts.opt_level end
  opt.allow_reshape = 1
  local keep = {}
  local ins = c_inputs(specs, base, keep)
  local out = ffi.new("mx_rt_model*[1]")
  local rc
  if opts.onnx then rc = C.mx_rt_model_load_onnx(opts.onnx, #specs, ins, opt, out)
  else rc = C.mx_rt_model_load(opts.symbol, opts.params, #specs, ins, opt, out) end
  if rc ~= 0 then rt_error("runtime.load", 2) end
  local m = ffi.gc(out[0], C.mx_rt_model_free)
  local names = {}
  for k = 1, C.mx_rt_model_num_outputs(m) do
    names[k] = ffi.string(C.mx_rt_model_output_name(m, k - 1))
  end
  local index = {}
  for k, s in ipairs(specs) do index[s.name] = k end
  return setmetatable({ m = m, specs = specs, index = index, base = base, output_names = names,
    ctxs = {}, order = {}, max_contexts = opts.max_contexts or 16 }, Model)
end

local function shape_key(shapes)
  local parts = {}
  for k, s in ipairs(shapes) do parts[k] = table.concat(s, "x") end
  return table.concat(parts, ";")
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

function Model:_context(shapes, level)
  local key = shape_key(shapes)
  local c = self.ctxs[key]
  if c then
    -- most recently used last
    for i, k in ipairs(self.order) do
      if k == key then table.remove(self.order, i) break end
    end
    self.order[#self.order + 1] = key
    return c
  end
  local out = ffi.new("mx_rt_ctx*[1]")
  if C.mx_rt_ctx_new(self.m, out) ~= 0 then rt_error("forward", level + 1) end
  c = ffi.gc(out[0], C.mx_rt_ctx_free)
  local differs = false
  for k = 1, #shapes do differs = differs or not same(shapes[k], self.base[k]) end
  if differs then
    local keep = {}
    local ins = c_inputs(self.specs, shapes, keep)
    if C.mx_rt_ctx_reshape(c, #shapes, ins) ~= 0 then rt_error("forward", level + 1) end
  end
  if #self.order >= self.max_contexts then
    local old = table.remove(self.order, 1)
    local oc = self.ctxs[old]
    self.ctxs[old] = nil
    C.mx_rt_ctx_free(ffi.gc(oc, nil))
  end
  self.ctxs[key] = c
  self.order[#self.order + 1] = key
  return c
end

-- forward(feed): feed maps input names (or 1-based positions) to NDArrays; returns the
-- outputs as new NDArrays, in order and by name.
function Model:forward(feed)
  if type(feed) ~= "table" then error("forward: expected a table of input NDArrays", 2) end
  local xs, shapes = {}, {}
  for k, s in ipairs(self.specs) do
    local x = feed[s.name] or feed[k]
    if not nd.is_tensor(x) then
      error(string.format("forward: input '%s' is missing (an NDArray)", s.name), 2)
    end
    local want = s.dtype or "float32"
    if x:dtype() ~= want then
      error(string.format("forward: input '%s' is %s, the model takes %s", s.name, x:dtype(), want), 2)
    end
    xs[k] = x
    shapes[k] = x:shape()
  end
  for name in pairs(feed) do
    if type(name) == "string" and not self.index[name] then
      error(string.format("forward: the model has no input '%s'", name), 2)
    end
  end
  local c = self:_context(shapes, 2)
  for k, x in ipairs(xs) do
    local n = C.mx_rt_input_bytes(c, k - 1)
    if C.mx_rt_bind_input(c, k - 1, x:data_ptr(), n) ~= 0 then rt_error("forward", 2) end
  end
  -- outputs are written straight into new NDArrays
  local outs = {}
  local sh, dt = i64_8(), int1()
  for k, name in ipairs(self.output_names) do
    local nd_ = C.mx_rt_output_shape(c, k - 1, sh, dt)
    local dims = {}
    for d = 1, nd_ do dims[d] = tonumber(sh[d - 1]) end
    local y = nd.empty(dims, { dtype = nd.dtype_name[dt[0]] })
    if C.mx_rt_bind_output(c, k - 1, y:data_ptr(), C.mx_rt_output_bytes(c, k - 1)) ~= 0 then
      rt_error("forward", 2)
    end
    outs[k] = y
    outs[name] = y
  end
  local rc = C.mx_rt_run(c)
  -- the bound pointers must not outlive this call's NDArrays
  for k = 1, #xs do C.mx_rt_bind_input(c, k - 1, nil, 0) end
  for k = 1, #self.output_names do C.mx_rt_bind_output(c, k - 1, nil, 0) end
  if rc ~= 0 then rt_error("forward", 2) end
  return outs
end

-- The outputs' shapes at the base input shapes (size 1 for every -1 dim).
function Model:output_shapes()
  local c = self:_context(self.base, 2)
  local res = {}
  local sh, dt = i64_8(), int1()
  for k, name in ipairs(self.output_names) do
    local n = C.mx_rt_output_shape(c, k - 1, sh, dt)
    local dims = {}
    for d = 1, n do dims[d] = tonumber(sh[d - 1]) end
    res[k] = { name = name, shape = dims, dtype = nd.dtype_name[dt[0]] }
  end
  return res
end

return M
