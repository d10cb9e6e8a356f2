-- mx.gluon._fast — direct op calls for Gluon's hot paths (Dense's fully_connected,
-- the losses' pick): the op's params are converted to their C struct once, when the
-- layer is built, and each call is one FFI call (through mx.nd.dispatch) plus the autograd
-- and trace hooks, exactly what the mx.nd wrapper does minus the per-call option parsing.
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local S = require("mx.core.state")
local D = require("mx.nd.dispatch")

local ffi = lib.ffi
local call, finish = D.eager.call, D.finish
local wrap, is_tensor = nd._wrap, nd.is_tensor
local error, type, rawget = error, type, rawget

local M = {}

local inbuf, outbuf = D.inbuf, D.outbuf

-- prepare(opname, opts) -> a call record {op, P (own param struct), opts}; errors in
-- opts are raised at `level`.
function M.prepare(name, opts, level)
  local op = lib.ops_by_name[name]
  if not op then error("mx.gluon: op " .. name .. " is not in the op table", level + 1) end
  local P, _, err = nd._fill_params(op, opts)
  if err then error(err, level + 1) end
  local mine
  if op.ctype then
    mine = ffi.new(op.ctype)
    ffi.copy(mine, P, ffi.sizeof(op.ctype))
  end
  return { op = op, P = mine, opts = opts }
end

local function bad(op, i, v, level)
  error(string.format("%s: input %d must be a tensor, got %s", op.name, i, type(v)), level + 1)
end

-- call(rec, level, a, b[, c]) -> the op's single output. level: the caller's level of
-- the user's frame (errors blame it; an async op notes it for its error report).
local function fast_call(rec, level, a, b, c)
  local op = rec.op
  if not is_tensor(a) then bad(op, 1, a, level + 1) end
  if not is_tensor(b) then bad(op, 2, b, level + 1) end
  local nin = 2
  inbuf[0], inbuf[1] = a.h, b.h
  if c ~= nil then
    if not is_tensor(c) then bad(op, 3, c, level + 1) end
    inbuf[2] = c.h
    nin = 3
  end
  outbuf[0] = nil
  call(op, nin, rec.P, 1, level + 1)
  local y = wrap(outbuf[0])
  if S.recording or S.tracing then
    finish(op, c ~= nil and { a, b, c } or { a, b }, rec.opts, { y })
  end
  return y
end
M.call = fast_call

-- The forward of a layer around one prepared op taking (x, weight[, bias]), with an
-- optional activation after it (Dense, the convolutions): on the first call the
-- parameters' shapes come from x (deferred initialisation by the op's inference), then
-- y = act(op(x, weight[, bias])). cls names the layer in errors; level: as error()
-- takes it in the caller.
function M.weighted(self, rec, cls, x, act, level)
  local reg = rawget(self, "_reg")
  local w = reg.weight._data
  if w == nil then
    if not is_tensor(x) then error(cls .. ": input must be a tensor, got " .. type(x), level + 1) end
    self:_infer_params(rec.op, rec.opts, x, { reg.weight, reg.bias }, level + 1)
    w = reg.weight:data()
  end
  local b = reg.bias
  local y
  if b then
    y = fast_call(rec, level + 1, x, w, b._data or b:data())
  else
    y = fast_call(rec, level + 1, x, w)
  end
  if act then y = act(y) end
  return y
end

return M
