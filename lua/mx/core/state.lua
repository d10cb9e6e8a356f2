-- mx.core.state — process-wide flags shared by the op wrappers, autograd and Gluon.
-- A plain table so the wrappers test one field per call (`if S.recording`).
return {
  recording = false, -- mx.autograd.record is active: wrappers call S.record
  training = false,  -- train mode (dropout, batchnorm) as seen by ops
  record = nil,      -- function(op, inputs, opts, outputs) set by mx.autograd
  record1 = nil,     -- function(op, a, b, opts, out): the same for one or two inputs
                     -- (b nil for one) and one output, without the lists
  on_write = nil,    -- function(x, what): in-place write into x while recording (autograd
                     -- raises when x is part of the graph)
  tracing = false,   -- a tracer is installed (mx.nd.dispatch.set_tracer): S.trace sees every op
  trace = nil,       -- function(kind, op, inputs, opts, outputs): see mx.nd.dispatch's header
  guard = nil,       -- function(x, values): hybridize's trace sees each tensor read as Lua
                     -- values (item, tolist, totable: gluon/_hybrid.lua's guards)
}
