-- mx — luamx: MXNet for LuaJIT. `local mx = require("mx")`; sets no globals.
-- Submodules load on first use: mx.autograd, mx.gluon, mx.init, mx.optimizer, ...
local lib = require("mx.core.lib")
local context = require("mx.context")
local C = lib.C

local mx = {
  _VERSION = "luamx " .. lib.ffi.string(C.mx_version_string()),
  nd = require("mx.nd"),
  cpu = context.cpu,
  gpu = context.gpu,
  Context = context.Context,
  num_gpus = context.num_gpus,
}

function mx.memory_stats(ctx)
  local dt = context.parse(ctx, 2)
  -- settled numbers: queued ops hold their tensors until they finish, and the GC's
  -- dead handles are released by the sweep
  C.mx_engine_wait_idle()
  mx.nd._sweep()
  local s = lib.ffi.new("mx_memory_stats")
  C.mx_memory_get_stats(dt, s)
  return {
    bytes_in_use = tonumber(s.bytes_in_use), bytes_pooled = tonumber(s.bytes_pooled),
    peak_bytes = tonumber(s.peak_bytes), num_allocs = tonumber(s.num_allocs),
    pool_hits = tonumber(s.pool_hits),
  }
end

mx.memory = {
  stats = mx.memory_stats,
  empty_cache = function(ctx)
    mx.nd._sweep()
    C.mx_memory_empty_cache((context.parse(ctx, 2)))
  end,
  -- gives back pooled blocks of the sizes nothing allocated since the last trim (after
  -- a phase with its own sizes, an evaluation say; see mx.h)
  trim = function(ctx)
    mx.nd._sweep()
    C.mx_memory_trim((context.parse(ctx, 2)))
  end,
  reset_peak = function(ctx) C.mx_memory_reset_peak((context.parse(ctx, 2))) end,
}

-- mx.AttrScope(attrs, fn, ...): MXNet 1.x's attribute scope (mx.graph.attr_scope)
function mx.AttrScope(...) return require("mx.graph.attr_scope").scope(...) end

-- Lazily loaded namespaces (a module per name under lua/mx/ or gluon/).
return require("mx.core.lazy")(mx, {
  autograd = "mx.autograd", gluon = "mx.gluon", init = "mx.initializer",
  initializer = "mx.initializer", optimizer = "mx.optimizer", lr_scheduler = "mx.lr_scheduler",
  random = "mx.random", contrib = "mx.contrib", engine = "mx.engine", profiler = "mx.profiler",
  metric = "mx.gluon.metric", help_mod = "mx.help", help = "mx.help",
  progress = "mx.progress", session = "mx.session", viz = "mx.viz", recordio = "mx.recordio",
  image = "mx.image", sym = "mx.symbol", symbol = "mx.symbol", kv = "mx.kvstore",
  kvstore = "mx.kvstore", checkpoint = "mx.checkpoint", amp = "mx.amp", onnx = "mx.onnx",
  dgl = "mx.dgl", io = "mx.io", mod = "mx.module", module = "mx.module", model = "mx.model",
  callback = "mx.callback", rnn = "mx.rnn", mon = "mx.monitor", monitor = "mx.monitor",
})
