-- mx.nd.dispatch — the one caller of the C op invoke (mx_op_invoke, and
-- mx_op_invoke_ref for the nd._ref oracle namespace). Every Lua path that runs an
-- op comes here: mx.nd's wrappers, indexing and assignment, gluon/_fast, the
-- optimizers' fused updates.
--
-- Modes (D.mode()): "eager" (nothing but the op), "record" (mx.autograd.record is
-- on: S.recording, autograd's S.record/S.record1 see each call and keep the ones
-- it can differentiate), "trace" (a tracer is installed: S.tracing, the tracer sees
-- EVERY call). Record and trace can be on together (D.mode() then says "trace").
--
-- The tracer (hybridize; D.set_tracer(fn) installs it and returns the previous one,
-- nil removes it):
--   fn(kind, op, inputs, opts, outputs)
--   kind     "op"      an op-table op that takes tensors (op.nondiff is true for the
--                      ops without a gradient: argmax, comparisons, ...)
--            "create"  an op-table creation op (op.ctx: zeros, full, arange, random_*);
--                      inputs is empty, opts has the shape and value as given
--            "view"    a zero-copy view: op is one of nd._view_ops (index0_view
--                      {index=1-based row}, slice0_view {begin=, ["end"]= 0-based,
--                      end exclusive}, reshape_view {shape=}, detach_view {}), or the
--                      reshape op
--            "assign"  index assignment x[...] = v: op is slice_assign (inputs {x, v})
--                      or slice_assign_scalar (inputs {x}, opts.scalar), opts has
--                      begin/end (1-based inclusive, as the op takes them); outputs {x}
--   op       the op-table entry (name, params, outputs, grad, ...) or the pseudo-op
--   inputs   a fresh list of the NDArrays the op read (the tracer may keep it)
--   opts     a frozen copy of the op's Lua params (op.freeze: only the op's param
--            names, lists copied, never out=), or nil when the call had none; calls
--            that pass a ready C param struct (the optimizers) give {_params = copy}
--   outputs  a fresh list of the results (the out= tensors when given)
-- It runs after the op is queued and after autograd recorded it; its result is
-- ignored; an error it raises propagates to the op's caller.
--
-- Hot paths: run (one output) and call are straight lines with no closures,
-- varargs or pairs; the lists for record/trace are built only in those modes.
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local H = require("mx.nd.handles")

local ffi, C = lib.ffi, lib.C
local ffi_string = ffi.string
local error, unpack = error, unpack
local inbuf, outbuf = H.inbuf, H.outbuf
local wrap, note_site = H._wrap, H._note_site
local engine_queued = C.mx_engine_queued

local D = { inbuf = inbuf, outbuf = outbuf }

function D.mode()
  if S.tracing then return "trace" end
  if S.recording then return "record" end
  return "eager"
end

function D.set_tracer(fn)
  if fn ~= nil and type(fn) ~= "function" then
    error("set_tracer: expected a function or nil, got " .. type(fn), 2)
  end
  local prev = S.trace
  S.trace, S.tracing = fn, fn ~= nil
  return prev
end

local function frozen(op, opts)
  if opts == nil then return nil end
  local fz = op.freeze
  if fz then return fz(opts) end
  return opts
end
D.frozen = frozen

local function trace(kind, op, ins, opts, outs)
  S.trace(kind, op, ins, frozen(op, opts), outs)
end

-- One- or two-input (b nil), one-output call (a nil too: a creation op).
local function trace1(op, a, b, opts, r)
  local ins
  if a == nil then ins = {} elseif b == nil then ins = { a } else ins = { a, b } end
  trace(op.ctx and "create" or "op", op, ins, opts, { r })
end

-- After a call with lists: record and trace (callers test S.recording or S.tracing
-- first, so that eager mode builds no list).
function D.finish(op, ins, opts, outs)
  if S.recording then S.record(op, ins, opts, outs) end
  if S.tracing then trace(op.ctx and "create" or "op", op, ins, opts, outs) end
end

-- A view made outside the op table (x[i], row ranges, reshape, detach): one input.
function D.view(op, x, opts, r)
  if S.recording then S.record(op, { x }, opts, { r }) end
  if S.tracing then trace("view", op, { x }, opts, { r }) end
end

-- Index assignment (x[...] = v through slice_assign[_scalar]): traced, never recorded
-- (autograd refuses writes into its graph before the write: S.on_write).
function D.assign(op, ins, opts, x)
  if S.tracing then trace("assign", op, ins, opts, { x }) end
end

-- A call that passed a ready param struct P (the optimizers): traced with a copy.
function D.finish_struct(op, ins, P, outs)
  if S.tracing then
    local copy = op.ctype and ffi.new(op.ctype)
    if copy then ffi.copy(copy, P, op.size or ffi.sizeof(op.ctype)) end
    S.trace("op", op, ins, { _params = copy }, outs)
  end
end

-- A backend: the calls over one C invoke.
local function backend(invoke)
  local B = {}

  -- Invoke op on inbuf[0..nin) into outbuf[0..nout) (set by the caller). level: the
  -- user's frame relative to the caller of call (error() levels; no tail calls).
  local function call(op, nin, P, nout, level)
    if invoke(op.id, nin, inbuf, P, nout, outbuf) ~= 0 then
      error(ffi_string(C.mx_last_error()), level + 1)
    end
    if engine_queued() then note_site(level + 1) end
  end
  B.call = call

  -- Run op on inputs already placed in inbuf[0..nin): the result(s), new or out=.
  -- a, b: the first two inputs as NDArrays (for record/trace; nil when absent).
  -- level: as for call. Callers must not tail-call run (a tail call drops their
  -- frame and the error would blame the wrong line).
  function B.run(op, nin, P, out, opts, a, b, level)
    local nout = #op.outputs
    if nout == 1 then
      outbuf[0] = out and out.h
    else
      for i = 0, nout - 1 do outbuf[i] = out and out[i + 1].h or nil end
    end
    if invoke(op.id, nin, inbuf, P, nout, outbuf) ~= 0 then
      error(ffi_string(C.mx_last_error()), level + 1)
    end
    if engine_queued() then note_site(level + 1) end
    local r = out or wrap(outbuf[0])
    if nout == 1 then
      if S.recording then S.record1(op, a, b, opts, r) end
      if S.tracing then trace1(op, a, b, opts, r) end
      return r
    end
    local res = {}
    for i = 1, nout do res[i] = out and out[i] or wrap(outbuf[i - 1]) end
    if S.recording or S.tracing then
      local ins
      if a == nil then ins = {} elseif b == nil then ins = { a } else ins = { a, b } end
      D.finish(op, ins, opts, res)
    end
    return unpack(res)
  end
  return B
end

D.eager = backend(C.mx_op_invoke)   -- the dispatcher: best kernel per op
D.ref = backend(C.mx_op_invoke_ref) -- the reference kernels (nd._ref)

return D
