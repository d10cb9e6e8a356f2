-- mx.onnx_strings — ONNX's string tensors (docs/onnx.md, "Strings"). luamx has no string
-- dtype: a string tensor is a Lua value holding a shape and a flat, row-major list of
-- byte strings, read from and written to TensorProto files and run through models of
-- string ops only (StringNormalizer, Identity) by the C core (core/src/onnx/
-- onnx_strings.c, mx_onnx_run_strings). mx.onnx re-exports what users call:
--   local t = mx.onnx.strings({ "monday", "tuesday" })        -- shape {2}
--   local sess = mx.onnx.load_model("strnorm.onnx")             -- a model of string ops
--   local y = sess:run({ x = t })[1]; y:tolist() --> { "TUESDAY" }
local lib = require("mx.core.lib")
local nd = require("mx.nd")

local ffi, C = lib.ffi, lib.C
local ffi_string = ffi.string

local M = {}

local StringTensor = {}
StringTensor.__index = StringTensor

local function is_strings(x) return getmetatable(x) == StringTensor end
M.is_strings = is_strings

-- strings(values, shape) -> a string tensor: values a list of Lua strings (row-major),
-- shape a list of dims whose product is #values (default {#values}).
function M.new(values, shape, who, level)
  who, level = who or "mx.onnx.strings", (level or 1) + 1
  if type(values) ~= "table" then error(who .. ": values must be a list of strings", level) end
  local n = #values
  for i = 1, n do
    if type(values[i]) ~= "string" then
      error(string.format("%s: values[%d] is a %s, not a string", who, i, type(values[i])), level)
    end
  end
  shape = shape or { n }
  if type(shape) ~= "table" or #shape > 8 then
    error(who .. ": shape must be a list of at most 8 dims", level)
  end
  local count = 1
  for i = 1, #shape do
    local d = shape[i]
    if type(d) ~= "number" or d < 0 or d % 1 ~= 0 then
      error(string.format("%s: shape[%d] must be a non-negative integer", who, i), level)
    end
    count = count * d
  end
  if count ~= n then
    error(string.format("%s: shape (%s) holds %d strings, values has %d", who,
      table.concat(shape, ","), count, n), level)
  end
  local s, v = {}, {}
  for i = 1, #shape do s[i] = shape[i] end
  for i = 1, n do v[i] = values[i] end
  return setmetatable({ _shape = s, _v = v }, StringTensor)
end

function StringTensor:shape()
  local s = {}
  for i = 1, #self._shape do s[i] = self._shape[i] end
  return s
end
function StringTensor:ndim() return #self._shape end
function StringTensor:size() return #self._v end
function StringTensor.dtype() return "string" end
function StringTensor:tolist()
  local v = {}
  for i = 1, #self._v do v[i] = self._v[i] end
  return v
end
function StringTensor:__tostring()
  local q = {}
  for i = 1, math.min(#self._v, 8) do q[i] = string.format("%q", self._v[i]) end
  if #self._v > 8 then q[#q + 1] = "..." end
  return string.format("<StringTensor (%s): %s>", table.concat(self._shape, ","), table.concat(q, ", "))
end

-- A C copy of t (freed when collected).
local function to_c(t)
  local sh = ffi.new("int64_t[8]")
  for i = 1, #t._shape do sh[i - 1] = t._shape[i] end
  local out = ffi.new("mx_onnx_strings*[1]")
  if C.mx_onnx_strings_new(#t._shape, sh, out) ~= 0 then error(ffi_string(C.mx_last_error())) end
  local c = ffi.gc(out[0], C.mx_onnx_strings_free)
  for i, s in ipairs(t._v) do
    if C.mx_onnx_strings_set(c, i - 1, s, #s) ~= 0 then error(ffi_string(C.mx_last_error())) end
  end
  return c
end

-- A string tensor of the C one c (which is freed).
local function from_c(c)
  local shape, v = {}, {}
  for i = 0, c.ndim - 1 do shape[i + 1] = tonumber(c.shape[i]) end
  for i = 0, tonumber(c.n) - 1 do v[i + 1] = ffi_string(c.s[i], c.len[i]) end
  C.mx_onnx_strings_free(c)
  return setmetatable({ _shape = shape, _v = v }, StringTensor)
end

-- load(path) -> string tensor, name; nil, message when the file is not a string tensor.
function M.load(path)
  local out, name = ffi.new("mx_onnx_strings*[1]"), ffi.new("char*[1]")
  if C.mx_onnx_load_strings(path, out, name) ~= 0 then return nil, ffi_string(C.mx_last_error()) end
  local nm = ffi_string(name[0])
  C.mx_free(name[0])
  return from_c(out[0]), nm
end

-- save(path, t, name): t a string tensor (the C side writes atomically); false, message
-- on failure.
function M.save(path, t, name)
  local c = to_c(t)
  if C.mx_onnx_save_tensor(path, nil, c, name) ~= 0 then return false, ffi_string(C.mx_last_error()) end
  return true
end

---------------------------------------------------------------- sessions
-- A session over a model of string ops (mx.onnx.load_model picks it when the model's
-- inputs or outputs are strings): run({name = string tensor}) -> the outputs, a list.
local Session = {}
Session.__index = Session

function M.session(path, input_names, output_names)
  return setmetatable({ _path = path, input_names = input_names, output_names = output_names },
    Session)
end

function Session:run(inputs)
  if type(inputs) ~= "table" then error("run: inputs must be a table name -> string tensor", 2) end
  local n = #self.input_names
  local names = ffi.new("const char*[?]", math.max(n, 1))
  local ins = ffi.new("const mx_onnx_strings*[?]", math.max(n, 1))
  local keep = {}
  for k, name in ipairs(self.input_names) do
    local v = inputs[name]
    if not is_strings(v) then
      error("run: input '" .. name .. "' must be a string tensor (mx.onnx.strings), got "
        .. (nd.is_tensor(v) and "an NDArray" or type(v)), 2)
    end
    keep[k] = to_c(v)
    names[k - 1], ins[k - 1] = name, keep[k]
  end
  local pn, pnames = ffi.new("int[1]"), ffi.new("char**[1]")
  local pout = ffi.new("mx_onnx_strings**[1]")
  if C.mx_onnx_run_strings(self._path, n, names, ins, pn, pnames, pout) ~= 0 then
    error("run: " .. ffi_string(C.mx_last_error()), 2)
  end
  local res = {}
  for k = 0, pn[0] - 1 do
    res[k + 1] = from_c(pout[0][k])
    C.mx_free(pnames[0][k])
  end
  C.mx_free(pnames[0])
  C.mx_free(pout[0])
  return res
end

return M
