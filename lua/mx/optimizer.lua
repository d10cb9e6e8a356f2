-- mx.optimizer — optimizers whose update rules are the fused ops of the op table
-- (sgd_update, sgd_mom_update, nag_mom_update, adam_update, adamw_update,
-- rmsprop_update, rmspropalex_update, adagrad_update, signsgd_update, signum_update,
-- ftrl_update, adamax_update, nadam_update, adadelta_update, lamb_update_phase1): one pass
-- over each parameter, weight and states written in place.
--
--   local opt = mx.optimizer.create("adam", {learning_rate=1e-3, wd=1e-4})
--   local state = opt:create_state(i, w)    -- list of state tensors (may be empty)
--   opt:update(i, w, g, state)              -- w and state updated in place
--
-- Options every optimizer takes (MXNet's): learning_rate, wd (0), rescale_grad (1),
-- clip_gradient (nil: off), lr_scheduler, param_dict (index -> Parameter, for
-- lr_mult/wd_mult), begin_num_update (0), multi_precision (false).
--
-- multi_precision=true (MXNet's): a float16/bfloat16 weight keeps a float32 master copy,
-- the LAST tensor of its state list (create_state_multi_precision); the step runs on the
-- copy in float32 (SGD through the fused mp_sgd_update / mp_sgd_mom_update, every other
-- optimizer through its own update on the copy and a float32 gradient) and the weight
-- gets the copy cast back. gluon.Trainer calls the *_multi_precision methods.
-- The preprocessed gradient is clip(rescale_grad * grad, clip_gradient) plus wd * w
-- (inside the clip for Adam/RMSProp, as MXNet's fused kernels do).
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local class = require("mx.core.class")

local ffi = lib.ffi
local type, error, tostring, pairs, sqrt = type, error, tostring, pairs, math.sqrt
local D = require("mx.nd.dispatch")
local call, finish_struct = D.eager.call, D.finish_struct

local M = {}

local inbuf, outbuf = D.inbuf, D.outbuf
local S = require("mx.core.state")

local BASE_OPTS = { learning_rate = true, wd = true, rescale_grad = true, clip_gradient = true,
  lr_scheduler = true, param_dict = true, begin_num_update = true, multi_precision = true,
  param_idx2name = true, use_fused_step = true, aggregate_num = true }

---------------------------------------------------------------- the fused-op call
-- Every update op takes the per-step fields lr, wd, rescale_grad and clip_gradient
-- (step() sets them); its other params are the optimizer's hyper-parameters: options
-- of the same name (beta1, epsilon, momentum, ...), with the op's default unless the
-- class names MXNet's optimizer default, copied into the op's param struct at each step
-- by a setter generated from the op's param list (constant field names: one store each).
local STEP = { lr = true, wd = true, rescale_grad = true, clip_gradient = true }

local function hyper_params(op, per_step)
  local t = {}
  for _, p in ipairs(op.params) do
    if not STEP[p.name] and not per_step[p.name] then t[#t + 1] = p end
  end
  return t
end

-- set(P, opt): P.<name> = opt.<name> (the op's default when nil) for each hyper-parameter
local function setter(op, per_step)
  local src, defaults = { "local d = ...", "return function(P, o)" }, {}
  for i, p in ipairs(hyper_params(op, per_step)) do
    defaults[i] = p.default
    src[#src + 1] = ("  local v%d = o.%s if v%d == nil then v%d = d[%d] end P.%s = v%d")
      :format(i, p.name, i, i, i, p.name, i)
  end
  src[#src + 1] = "end"
  local chunk = assert(loadstring(table.concat(src, "\n"), "=mx.optimizer(" .. op.name .. ")"))
  return chunk(defaults)
end

-- A unit per optimizer and op: the op, its reusable param struct (filled from the op's
-- defaults once) and the class's setter. update() fills the per-step fields and calls
-- the C dispatcher directly (no options table, no wrapper): the per-parameter cost of
-- a step is one FFI call.
local function new_unit(op, set)
  local P = ffi.new(op.ctype)
  for _, p in ipairs(op.params) do
    if p.default ~= nil then P[p.name] = p.default end
  end
  return { op = op, P = P, set = set }
end

-- Run op on (weight, grad, states...) writing (weight, states...) in place.
local function run(op, P, w, g, st, nst, level)
  inbuf[0], inbuf[1] = w.h, g.h
  outbuf[0] = w.h
  for k = 1, nst do
    local h = st[k].h
    inbuf[k + 1] = h
    outbuf[k] = h
  end
  call(op, nst + 2, P, nst + 1, level + 1) -- (notes the line an async failure blames)
  if S.tracing then
    local ins, outs = { w, g }, { w }
    for k = 1, nst do ins[k + 2], outs[k + 1] = st[k], st[k] end
    finish_struct(op, ins, P, outs)
  end
end

-- The param struct of unit u for this step: the per-step fields and the hyper-parameters.
local function step(self, u, lr, wd)
  local P = u.P
  P.lr = lr
  P.wd = wd
  P.rescale_grad = self.rescale_grad
  P.clip_gradient = self.clip_gradient or -1
  u.set(P, self)
  return P
end

---------------------------------------------------------------- base class
local Optimizer = class.base("Optimizer")
M.Optimizer = Optimizer

local registry = {}

local TYPE_OF = { float = "number", int = "number", bool = "boolean" }

-- optimizer_class(name, spec, setup): the class, registered for create(name) and as
-- M[name](opts). spec: ops (the update ops it runs), defaults (MXNet's optimizer
-- defaults: learning_rate, and the hyper-parameters whose default differs from the
-- op's), extra (options that are not op params), per_step (op params the update
-- computes: not options). setup(self), optional, runs after Optimizer.init.
local function optimizer_class(name, spec, setup)
  local c = class.extend(Optimizer, name)
  c.__tostring = function(s) return name .. "(learning_rate=" .. tostring(s.lr) .. ")" end
  local per_step = spec.per_step or {}
  local defaults, extra, hyper, units = {}, {}, {}, {}
  for k in pairs(spec.extra or {}) do extra[k] = true end
  for _, opname in ipairs(spec.ops) do
    local op = lib.ops_by_name[opname]
    if not op then error("mx.optimizer: op " .. opname .. " is missing from the op table", 2) end
    units[#units + 1] = { op = op, set = setter(op, per_step) }
    for _, p in ipairs(hyper_params(op, per_step)) do
      if not hyper[p.name] then
        hyper[p.name], extra[p.name], defaults[p.name] = p, true, p.default
      end
    end
  end
  for k, v in pairs(spec.defaults or {}) do defaults[k] = v end
  c._defaults, c._extra, c._hyper, c._units = defaults, extra, hyper, units
  function c.new(opts, level)
    local self = Optimizer.init(setmetatable({}, c), c, opts, level + 1)
    local u = {}
    for _, e in ipairs(units) do u[e.op.name] = new_unit(e.op, e.set) end
    self._u = u
    if setup then setup(self) end
    return self
  end
  registry[name:lower()] = c
  M[name] = function(opts)
    local o = c.new(opts, 2)
    return o -- not a tail call: the error levels count this frame
  end
  return c
end

function Optimizer.init(self, cls, opts, level)
  local o = class.check_opts(cls.__name, opts, BASE_OPTS, level + 1, cls._extra)
  for k, v in pairs(cls._defaults) do
    if k ~= "learning_rate" then self[k] = v end
  end
  for k, v in pairs(o) do
    if cls._extra[k] then self[k] = v end
  end
  for k, p in pairs(cls._hyper or {}) do
    local v, want = self[k], TYPE_OF[p.type]
    if v ~= nil and type(v) ~= want then
      error(cls.__name .. ": " .. k .. " must be a " .. want .. ", got " .. type(v), level + 1)
    end
  end
  self.lr = o.learning_rate
  self.wd = o.wd or 0
  self.rescale_grad = o.rescale_grad or 1
  self.clip_gradient = o.clip_gradient
  self.lr_scheduler = o.lr_scheduler
  self.param_dict = o.param_dict or {}
  self.begin_num_update = o.begin_num_update or 0
  self.num_update = self.begin_num_update
  self.multi_precision = o.multi_precision or false
  self._index_update_count = {}
  self.lr_mult, self.wd_mult = {}, {}
  if self.lr_scheduler then
    if self.lr then
      self.lr_scheduler:set_base_lr(self.lr)
    else
      self.lr = self.lr_scheduler.base_lr
    end
  end
  self.lr = self.lr or cls._defaults.learning_rate or 0.01
  for _, k in ipairs { "lr", "wd", "rescale_grad" } do
    if type(self[k]) ~= "number" then
      error(cls.__name .. ": " .. (k == "lr" and "learning_rate" or k) .. " must be a number", level + 1)
    end
  end
  if self.clip_gradient ~= nil and type(self.clip_gradient) ~= "number" then
    error(cls.__name .. ": clip_gradient must be a number or nil", level + 1)
  end
  return self
end

-- The current base learning rate (the scheduler's, when there is one).
function Optimizer:learning_rate()
  if self.lr_scheduler then return self.lr_scheduler(self.num_update) end
  return self.lr
end

function Optimizer:set_learning_rate(lr)
  if self.lr_scheduler then
    error("set_learning_rate: the optimizer has an lr_scheduler; set_learning_rate can change "
      .. "the learning rate only when there is none", 2)
  end
  if type(lr) ~= "number" then error("set_learning_rate: expected a number, got " .. type(lr), 2) end
  self.lr = lr
end

-- Per-index multipliers (used when param_dict has no Parameter for the index).
function Optimizer:set_lr_mult(t) for k, v in pairs(t) do self.lr_mult[k] = v end end
function Optimizer:set_wd_mult(t) for k, v in pairs(t) do self.wd_mult[k] = v end end

function Optimizer:_update_count(index)
  local c = (self._index_update_count[index] or self.begin_num_update) + 1
  self._index_update_count[index] = c
  if c > self.num_update then self.num_update = c end
  return c
end

function Optimizer:_get_lr(index)
  local lr = self.lr_scheduler and self.lr_scheduler(self.num_update) or self.lr
  local p = self.param_dict[index]
  if p then return lr * (p.lr_mult or 1) end
  return lr * (self.lr_mult[index] or 1)
end

function Optimizer:_get_wd(index)
  local p = self.param_dict[index]
  if p then return self.wd * (p.wd_mult or 1) end
  return self.wd * (self.wd_mult[index] or 1)
end

-- (optimizer states are made lazily, maybe inside an mx.nd.scope: nd.keep)
local function zeros_like(w)
  return nd.keep(nd.zeros(w:shape(), { dtype = w:dtype(), ctx = w:context() }))
end

---------------------------------------------------------------- SGD / NAG
-- SGD({learning_rate=0.1, momentum=0, nesterov=false}): momentum 0 runs sgd_update,
-- otherwise sgd_mom_update (nag_mom_update with nesterov=true).
local SGD = optimizer_class("SGD", { ops = { "sgd_update", "sgd_mom_update", "nag_mom_update",
  "mp_sgd_update", "mp_sgd_mom_update" }, defaults = { learning_rate = 0.1, nesterov = false },
  extra = { nesterov = true, lazy_update = true } })
function SGD:create_state(_, w)
  if self.momentum == 0 then return {} end
  return { zeros_like(w) }
end
function SGD:update(index, w, g, state)
  self:_update_count(index)
  local lr, wd = self:_get_lr(index), self:_get_wd(index)
  if state[1] then
    local u = self.nesterov and self._u.nag_mom_update or self._u.sgd_mom_update
    run(u.op, step(self, u, lr, wd), w, g, state, 1, 2)
  else
    local u = self._u.sgd_update
    run(u.op, step(self, u, lr, wd), w, g, state, 0, 2)
  end
end

-- multi-precision SGD: the fused mp ops (MXNet's), weight32 the state list's last
function SGD:_mp_update(index, w, g, state, n)
  self:_update_count(index)
  local lr, wd = self:_get_lr(index), self:_get_wd(index)
  local u = n > 1 and self._u.mp_sgd_mom_update or self._u.mp_sgd_update
  run(u.op, step(self, u, lr, wd), w, g, state, n, 2)
end

-- NAG({learning_rate=0.1, momentum=0.9}): SGD with Nesterov momentum.
local NAG = optimizer_class("NAG", { ops = { "sgd_update", "nag_mom_update" },
  defaults = { learning_rate = 0.1, momentum = 0.9, nesterov = true } })
NAG.create_state = SGD.create_state
NAG.update = SGD.update

---------------------------------------------------------------- Adam / AdamW
-- Adam({learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8}); the bias
-- correction goes into the step's lr: lr * sqrt(1 - beta2^t) / (1 - beta1^t).
local Adam = optimizer_class("Adam", { ops = { "adam_update" },
  defaults = { learning_rate = 0.001 }, extra = { lazy_update = true } })
function Adam.create_state(_, _, w) return { zeros_like(w), zeros_like(w) } end
function Adam:update(index, w, g, state)
  local t = self:_update_count(index)
  local lr, wd = self:_get_lr(index), self:_get_wd(index)
  lr = lr * sqrt(1 - self.beta2 ^ t) / (1 - self.beta1 ^ t)
  local u = self._u.adam_update
  run(u.op, step(self, u, lr, wd), w, g, state, 2, 2)
end

-- AdamW({learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, correct_bias=true}):
-- decoupled weight decay, w -= lr_t * (m / (sqrt(v) + eps) + wd * w) (MXNet 2.0).
local AdamW = optimizer_class("AdamW", { ops = { "adamw_update" }, per_step = { eta = true },
  defaults = { learning_rate = 0.001, epsilon = 1e-6, correct_bias = true },
  extra = { correct_bias = true } })
AdamW.create_state = Adam.create_state
function AdamW:update(index, w, g, state)
  local t = self:_update_count(index)
  local lr, wd = self:_get_lr(index), self:_get_wd(index)
  if self.correct_bias then lr = lr * sqrt(1 - self.beta2 ^ t) / (1 - self.beta1 ^ t) end
  local u = self._u.adamw_update
  local P = step(self, u, 1, wd)
  P.eta = lr
  run(u.op, P, w, g, state, 2, 2)
end

---------------------------------------------------------------- RMSProp
-- RMSProp({learning_rate=0.001, rho=0.9, momentum=0.9, epsilon=1e-8, centered=false,
-- clip_weights=-1 (off)}): Tieleman & Hinton, or Graves' centered version.
local RMSProp = optimizer_class("RMSProp", { ops = { "rmsprop_update", "rmspropalex_update" },
  defaults = { learning_rate = 0.001, rho = 0.9, centered = false }, extra = { centered = true } })
function RMSProp:create_state(_, w)
  if self.centered then return { zeros_like(w), zeros_like(w), zeros_like(w) } end
  return { zeros_like(w) }
end
function RMSProp:update(index, w, g, state)
  self:_update_count(index)
  local lr, wd = self:_get_lr(index), self:_get_wd(index)
  if self.centered then
    local u = self._u.rmspropalex_update
    run(u.op, step(self, u, lr, wd), w, g, state, 3, 2)
  else
    local u = self._u.rmsprop_update
    run(u.op, step(self, u, lr, wd), w, g, state, 1, 2)
  end
end

---------------------------------------------------------------- AdaGrad
-- AdaGrad({learning_rate=0.01, epsilon=1e-6}).
local AdaGrad = optimizer_class("AdaGrad", { ops = { "adagrad_update" },
  defaults = { learning_rate = 0.01, epsilon = 1e-6 } })
function AdaGrad.create_state(_, _, w) return { zeros_like(w) } end
function AdaGrad:update(index, w, g, state)
  self:_update_count(index)
  local u = self._u.adagrad_update
  run(u.op, step(self, u, self:_get_lr(index), self:_get_wd(index)), w, g, state, 1, 2)
end

---------------------------------------------------------------- Signum, FTRL, Adamax, Nadam, AdaDelta
-- Signum({learning_rate=0.01, momentum=0.9, wd_lh=0}): signum_update; momentum 0 is
-- signSGD (signsgd_update, MXNet's: wd_lh has no effect there).
local Signum = optimizer_class("Signum", { ops = { "signsgd_update", "signum_update" },
  defaults = { learning_rate = 0.01, momentum = 0.9 } })
Signum.create_state = SGD.create_state
function Signum:update(index, w, g, state)
  self:_update_count(index)
  local lr, wd = self:_get_lr(index), self:_get_wd(index)
  if state[1] then
    local u = self._u.signum_update
    run(u.op, step(self, u, lr, wd), w, g, state, 1, 2)
  else
    local u = self._u.signsgd_update
    run(u.op, step(self, u, lr, wd), w, g, state, 0, 2)
  end
end

-- FTRL({learning_rate=0.1, lamda1=0.01, beta=1}): FTRL-Proximal (McMahan et al. 2013),
-- states z and n.
local FTRL = optimizer_class("FTRL", { ops = { "ftrl_update" },
  defaults = { learning_rate = 0.1 }, extra = { lazy_update = true } })
FTRL.create_state = Adam.create_state
function FTRL:update(index, w, g, state)
  self:_update_count(index)
  local u = self._u.ftrl_update
  run(u.op, step(self, u, self:_get_lr(index), self:_get_wd(index)), w, g, state, 2, 2)
end

-- Adamax({learning_rate=0.002, beta1=0.9, beta2=0.999}): Adam with the infinity norm;
-- the step's lr is lr / (1 - beta1^t). (No epsilon, as MXNet: a zero gradient at the
-- first step gives 0/0.)
local Adamax = optimizer_class("Adamax", { ops = { "adamax_update" },
  defaults = { learning_rate = 0.002 } })
Adamax.create_state = Adam.create_state
function Adamax:update(index, w, g, state)
  local t = self:_update_count(index)
  local u = self._u.adamax_update
  local P = step(self, u, self:_get_lr(index) / (1 - self.beta1 ^ t), self:_get_wd(index))
  run(u.op, P, w, g, state, 2, 2)
end

-- Nadam({learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, schedule_decay=0.004}):
-- Adam with Nesterov momentum (Dozat 2016). momentum_t = beta1*(1 - 0.5*0.96^(t*decay));
-- the momentum schedule (product of the momentum_t) is kept per parameter.
local Nadam = optimizer_class("Nadam", { ops = { "nadam_update" },
  per_step = { g_coef = true, m_coef = true, v_coef = true },
  defaults = { learning_rate = 0.001, schedule_decay = 0.004 }, extra = { schedule_decay = true } },
  function(self) self._m_schedule = {} end)
Nadam.create_state = Adam.create_state
function Nadam:update(index, w, g, state)
  local t = self:_update_count(index)
  local b1, b2, sd = self.beta1, self.beta2, self.schedule_decay
  local mom_t = b1 * (1 - 0.5 * 0.96 ^ (t * sd))
  local mom_t1 = b1 * (1 - 0.5 * 0.96 ^ ((t + 1) * sd))
  local ms = (self._m_schedule[index] or 1) * mom_t
  self._m_schedule[index] = ms
  local u = self._u.nadam_update
  local P = step(self, u, self:_get_lr(index), self:_get_wd(index))
  P.g_coef = (1 - mom_t) / (1 - ms)
  P.m_coef = mom_t1 / (1 - ms * mom_t1)
  P.v_coef = 1 / (1 - b2 ^ t)
  run(u.op, P, w, g, state, 2, 2)
end

-- AdaDelta({learning_rate=1, rho=0.9, epsilon=1e-5}) (Zeiler 2012): states acc_g and
-- acc_delta; w -= lr*(delta + wd*w), which at the default lr = 1 is MXNet 1.9's step.
local AdaDelta = optimizer_class("AdaDelta", { ops = { "adadelta_update" },
  defaults = { learning_rate = 1 } })
AdaDelta.create_state = Adam.create_state
function AdaDelta:update(index, w, g, state)
  self:_update_count(index)
  local u = self._u.adadelta_update
  run(u.op, step(self, u, self:_get_lr(index), self:_get_wd(index)), w, g, state, 2, 2)
end

-- LAMB({learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, lower_bound=nil,
-- upper_bound=nil, bias_correction=true}) (You et al. 2019): lamb_update_phase1 gives the
-- step direction g; then r1 = ||w|| (clipped to [lower_bound, upper_bound]), r2 = ||g||,
-- w -= lr * r1/r2 * g (lr alone when either norm is 0). The two norms are read on the
-- host (one wait per parameter and step).
local LAMB = optimizer_class("LAMB", { ops = { "lamb_update_phase1", "sgd_update" },
  per_step = { t = true }, defaults = { learning_rate = 0.001 },
  extra = { lower_bound = true, upper_bound = true } }, function(self) self._gbuf = {} end)
LAMB.create_state = Adam.create_state
function LAMB:update(index, w, g, state)
  local t = self:_update_count(index)
  local lr = self:_get_lr(index)
  local u = self._u.lamb_update_phase1
  local P = u.P -- phase 1 has no lr: phase 2 applies it
  P.wd, P.rescale_grad, P.clip_gradient = self:_get_wd(index), self.rescale_grad,
    self.clip_gradient or -1
  u.set(P, self)
  P.t = t
  local gb = self._gbuf[index]
  if not gb then
    gb = zeros_like(w)
    self._gbuf[index] = gb
  end
  inbuf[0], inbuf[1], inbuf[2], inbuf[3] = w.h, g.h, state[1].h, state[2].h
  outbuf[0], outbuf[1], outbuf[2] = gb.h, state[1].h, state[2].h
  call(u.op, 4, P, 3, 2)
  if S.tracing then
    finish_struct(u.op, { w, g, state[1], state[2] }, P, { gb, state[1], state[2] })
  end
  local r1, r2 = nd.norm(w):item(), nd.norm(gb):item()
  if self.lower_bound then r1 = math.max(r1, self.lower_bound) end
  if self.upper_bound then r1 = math.min(r1, self.upper_bound) end
  if r1 ~= 0 and r2 ~= 0 then lr = lr * r1 / r2 end
  local u2 = self._u.sgd_update
  local P2 = step(self, u2, lr, 0)
  P2.rescale_grad, P2.clip_gradient = 1, -1
  run(u2.op, P2, w, gb, state, 0, 2)
end

-- LARS({learning_rate=0.1, momentum=0, eta=0.001, eps=0, momentum_correction=true})
-- (You et al. 2017): SGD (sgd_update / sgd_mom_update) with the layer's lr scaled by
-- eta*||w|| / (||rescale_grad*g|| + wd*||w|| + eps) when both norms are > 0; parameters
-- whose name ends in gamma, beta or bias keep the plain lr. momentum_correction scales
-- momentum by lr_now/lr_before under a scheduler. The norms are read on the host.
local LARS = optimizer_class("LARS", { ops = { "sgd_update", "sgd_mom_update" },
  defaults = { learning_rate = 0.1, eta = 0.001, eps = 0, momentum_correction = true },
  extra = { eta = true, eps = true, momentum_correction = true, lazy_update = true,
    param_idx2name = true } }, function(self) self._last_lr = {} end)
LARS.create_state = SGD.create_state
local function lars_name(self, index)
  local p = self.param_dict[index]
  if p and p._fullname then return p:_fullname() end
  local n = self.param_idx2name and self.param_idx2name[index]
  return n and tostring(n) or tostring(index)
end
function LARS:update(index, w, g, state)
  self:_update_count(index)
  local base = self:learning_rate()
  local lr, wd = self:_get_lr(index), self:_get_wd(index)
  local name = lars_name(self, index)
  if not (name:find("gamma$") or name:find("beta$") or name:find("bias$")) then
    local wn, gn = nd.norm(w):item(), nd.norm(g):item() * math.abs(self.rescale_grad)
    if wn > 0 and gn > 0 then lr = lr * self.eta * wn / (gn + wd * wn + self.eps) end
  end
  local last = self._last_lr[index] or base
  self._last_lr[index] = base
  if state[1] then
    local u = self._u.sgd_mom_update
    local P = step(self, u, lr, wd)
    P.momentum = (self.momentum_correction and last ~= 0) and self.momentum * base / last
      or self.momentum
    run(u.op, P, w, g, state, 1, 2)
  else
    local u = self._u.sgd_update
    run(u.op, step(self, u, lr, wd), w, g, state, 0, 2)
  end
end

---------------------------------------------------------------- multi-precision
local LOW = { float16 = true, bfloat16 = true }

local function use_mp(self, w) return self.multi_precision and LOW[w:dtype()] end

-- create_state_multi_precision(index, w): create_state's list, plus the float32 master
-- copy of w last when multi-precision applies to w.
function Optimizer:create_state_multi_precision(index, w)
  if not use_mp(self, w) then return self:create_state(index, w) end
  local w32 = nd.keep(w:astype("float32"))
  local st = self:create_state(index, w32)
  st[#st + 1] = w32
  return st
end

-- update_multi_precision(index, w, g, state): update, or the float32 step on the master
-- copy (state's last tensor) with w = its cast.
function Optimizer:update_multi_precision(index, w, g, state)
  if not use_mp(self, w) then return self:update(index, w, g, state) end
  local n = #state
  local w32 = state[n]
  if w32 == nil or w32:dtype() ~= "float32" then
    error(tostring(self.__name) .. ": multi_precision state of parameter " .. tostring(index)
      .. " lacks its float32 master copy (make it with create_state_multi_precision)", 2)
  end
  if self._mp_update and not self.nesterov then return self:_mp_update(index, w, g, state, n) end
  local inner = rawget(state, "_inner") -- the states without the copy (cached)
  if inner == nil then
    inner = {}
    for k = 1, n - 1 do inner[k] = state[k] end
    state._inner = inner
  end
  self:update(index, w32, g:astype("float32"), inner)
  w32:copyto(w)
end

---------------------------------------------------------------- registry
-- create(name, opts): name is case-insensitive ("sgd", "adam", ...), or an optimizer.
function M.create(name, opts)
  if type(name) == "table" and getmetatable(name) and getmetatable(name).update then
    return name
  end
  local c = type(name) == "string" and registry[name:lower()]
  if not c then
    local names = {}
    for n in pairs(registry) do names[#names + 1] = n end
    table.sort(names)
    error("mx.optimizer.create: unknown optimizer " .. tostring(name) .. " (known: "
      .. table.concat(names, ", ") .. ")", 2)
  end
  local o = c.new(opts, 2)
  return o
end

-- Register a custom optimizer class (a table with new(opts, level), create_state, update).
function M.register(name, cls)
  registry[name:lower()] = cls
end

-- Plain-data state (Trainer:save_states): counters, lr and the scheduler's numbers.
function Optimizer:get_state_data()
  local t = { name = self.__name or "", num_update = self.num_update, lr = self.lr, counts = {} }
  for k, v in pairs(self._index_update_count) do t.counts[k] = v end
  if self.lr_scheduler and self.lr_scheduler.state then t.scheduler = self.lr_scheduler:state() end
  return t
end
function Optimizer:set_state_data(t)
  self.num_update = t.num_update or self.num_update
  if t.lr then self.lr = t.lr end
  self._index_update_count = {}
  for k, v in pairs(t.counts or {}) do self._index_update_count[k] = v end
  if t.scheduler and self.lr_scheduler and self.lr_scheduler.set_state then
    self.lr_scheduler:set_state(t.scheduler)
  end
end

return M
