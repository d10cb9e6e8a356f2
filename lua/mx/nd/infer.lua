-- mx.nd.infer — the core's pure shape/dtype inference (mx_op_infer) from Lua, on
-- descriptors instead of tensors: what Gluon's deferred initialisation uses today and
-- mx.sym's infer_shape will use. An input is a tensor or a table {shape=, dtype=}
-- whose unknown dims are 0 or -1 (MXNet's 0 in a parameter's shape), or whose shape is
-- nil (unknown rank). The op fills what the data determines (fully_connected's weight
-- and bias); outputs it cannot know yet come back as nil.
--
--   local r = infer("fully_connected", { num_hidden = 10 },
--                   { x, { shape = { 10, 0 } }, { shape = { 0 } } })
--   r.inputs[2].shape  --> { 10, 784 };  r.outputs[1].shape --> { 64, 10 }
local lib = require("mx.core.lib")
local Pm = require("mx.nd.params")
local H = require("mx.nd.handles")

local ffi, C = lib.ffi, lib.C
local desc_t = ffi.typeof("mx_desc[?]")
local UNKNOWN = -1

local M = {}

local function fill_desc(d, v, dtype_code)
  if H.is_tensor(v) then
    d.ndim = C.mx_tensor_shape(v.h, d.shape)
    d.dtype = C.mx_tensor_dtype(v.h)
    d.dev_type, d.dev_id = C.mx_tensor_dev_type(v.h), C.mx_tensor_dev_id(v.h)
    return true
  end
  if type(v) ~= "table" then return false end
  local s = v.shape
  if s == nil then
    d.ndim = -1
  else
    if type(s) ~= "table" or #s > 8 then return false end
    d.ndim = #s
    for i = 1, #s do
      local n = s[i]
      if type(n) ~= "number" or n % 1 ~= 0 or n < -1 then return false end
      d.shape[i - 1] = n <= 0 and UNKNOWN or n
    end
  end
  d.dtype = v.dtype ~= nil and (dtype_code(v.dtype) or -2) or -1
  if d.dtype == -2 then return false end
  d.dev_type, d.dev_id = 1, 0
  return true
end

local function read_desc(d)
  local r = { dtype = d.dtype >= 0 and Pm.dtype_name[d.dtype] or nil }
  if d.ndim < 0 then return r end
  local s, known = {}, true
  for i = 1, d.ndim do
    local n = tonumber(d.shape[i - 1])
    if n < 0 then known = false end
    s[i] = n < 0 and 0 or n
  end
  r.shape, r.known = s, known
  return r
end

-- infer(op, opts, inputs, level) -> { inputs = {...}, outputs = {...} } (each {shape=,
-- dtype=, known=}; an unknown output is {}). op: a name or an op-table entry. Errors
-- (conflicting shapes, bad options) are raised at `level` (default: the caller's caller).
function M.infer(op, opts, inputs, level)
  level = (level or 1) + 1
  if type(op) == "string" then
    local o = lib.ops_by_name[op]
    if not o then error("infer: unknown op '" .. op .. "'", level) end
    op = o
  end
  local P, _, err = Pm._fill_params(op, opts)
  if err then error(err, level) end
  local n = #inputs
  local ind = desc_t(math.max(n, 1))
  for i = 1, n do
    if not fill_desc(ind[i - 1], inputs[i], Pm.dtype_code) then
      error(string.format("%s: input %d must be a tensor or {shape=, dtype=}", op.name, i), level)
    end
  end
  local nout = C.mx_op_num_outputs_for(op.id, P)
  if nout < 1 then error(op.name .. ": bad output count", level) end
  local outd = desc_t(nout)
  if C.mx_op_infer(op.id, P, n, ind, nout, outd) ~= 0 then
    error(ffi.string(C.mx_last_error()), level)
  end
  local r = { inputs = {}, outputs = {} }
  for i = 1, n do r.inputs[i] = read_desc(ind[i - 1]) end
  for i = 1, nout do r.outputs[i] = read_desc(outd[i - 1]) end
  return r
end

return M
