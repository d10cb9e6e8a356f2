-- mx.checkpoint — training checkpoints that survive a crash (docs/distributed.md
-- "Checkpoints").
--
--   local ck = mx.checkpoint.Checkpointer("run/ck", {params = net:collect_params(),
--     trainer = trainer, kv = kv, every = 100, keep = 2})
--   local pos = ck:restore()          -- nil on a fresh start, else {step, epoch, batch, extra}
--   ... each step: ck:step({epoch = e, batch = b})   -- saves when the step count hits `every`
--
-- A checkpoint of step S is, per rank R (R = kv.rank, 0 without a kvstore):
--   <prefix>.r<R>-<S>.params  the parameters by name, and a header (step, epoch, batch,
--                             the mx.random generator's seed and counter, `extra`)
--   <prefix>.r<R>-<S>.states  the trainer's optimizer states and counters
--                             (Trainer:save_states), when a trainer is given
--   <prefix>.r<R>-<S>.kvstates the kvstore's optimizer states (update_on_kvstore)
--   <prefix>.r<R>.latest      the manifest: the steps kept, newest last
-- Every file is written atomically (temp + fsync + rename: nd.save and mx.core.file), and the
-- manifest only after the step's files: a kill at any instant leaves the previous
-- manifest and the files it names intact. Each rank writes its own files (2-bit
-- residuals and random streams may differ per rank). Older steps beyond `keep`
-- (default 2) are deleted after the manifest moves on.
--
-- restore() picks the newest step every rank has (with a dist kvstore the ranks agree
-- through an allreduce: a rank killed while writing step S restarts everyone from the
-- step before), loads parameters, optimizer states and the random state, and returns
-- where to continue. Restore before kv:init so the store starts from the restored
-- weights. A restarted run then finishes with the same weights, bitwise, as a run that
-- was never interrupted, provided the data order depends only on (epoch, batch)
-- (reseed shuffles per epoch) — the returned position says which batches to skip.
local ffi = require("ffi")
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local class = require("mx.core.class")
local file = require("mx.core.file")
local kvstore = require("mx.kvstore")

local C = lib.C
local type, error, tostring, tonumber, pairs, ipairs, pcall, setmetatable =
  type, error, tostring, tonumber, pairs, ipairs, pcall, setmetatable

local M = {}
local HEADER = "__checkpoint__"

local Checkpointer = class.base("Checkpointer")
M.Checkpointer = Checkpointer

-- the header: mx.kvstore's "key=kind:value" encoding (shared with the trainer's and the
-- kvstore's state files)
local header_array, header_read = kvstore._header_array, kvstore._header_read

---------------------------------------------------------------- random state
local seedbuf = ffi.new("uint64_t[1]")
-- The session generator is (seed, counter): reserving 0 counters reads both.
local function rng_get()
  local ctr = C.mx_random_reserve_counters(0, seedbuf)
  -- as two 32-bit halves: the header keeps doubles
  local s, c = seedbuf[0], ctr
  return { seed_hi = tonumber(s / 4294967296ULL), seed_lo = tonumber(s % 4294967296ULL),
    ctr_hi = tonumber(c / 4294967296ULL), ctr_lo = tonumber(c % 4294967296ULL) }
end

local function rng_set(r)
  local s = ffi.new("uint64_t", r.seed_hi) * 4294967296ULL + r.seed_lo
  local c = ffi.new("uint64_t", r.ctr_hi) * 4294967296ULL + r.ctr_lo
  C.mx_random_seed(s)
  if c > 0 then C.mx_random_reserve_counters(c, seedbuf) end
end
M._rng_get, M._rng_set = rng_get, rng_set

---------------------------------------------------------------- files
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local function read_manifest(self)
  local f = io.open(self._manifest, "rb")
  if not f then return {} end
  local text = f:read("*a")
  f:close()
  local steps = {}
  for s in text:gmatch("step=(%d+)") do steps[#steps + 1] = tonumber(s) end
  return steps
end

function Checkpointer:_path(step, ext)
  return string.format("%s.r%d-%d.%s", self._prefix, self._rank, step, ext)
end

local OPTS = { params = true, trainer = true, kv = true, every = true, keep = true, rank = true }

-- Checkpointer(prefix, opts): params (a ParameterDict or a list/table of Parameters,
-- required), trainer, kv, every (steps between saves, default 0: only explicit save),
-- keep (checkpoints kept, >= 2 by default 2), rank (default kv.rank or 0).
function M.Checkpointer(prefix, opts)
  if type(prefix) ~= "string" or prefix == "" then
    error("Checkpointer: prefix must be a non-empty string, got " .. tostring(prefix), 2)
  end
  if type(opts) ~= "table" then error("Checkpointer: opts must be a table {params=, ...}", 2) end
  class.check_opts("Checkpointer", opts, OPTS, 2)
  local params = opts.params
  local list = {}
  if type(params) == "table" and type(params.items) == "function" then
    for name, p in params:items() do list[#list + 1] = { name, p } end
  elseif type(params) == "table" then
    if #params > 0 then
      for i, p in ipairs(params) do list[i] = { p.name .. "#" .. i, p } end
    else
      for name, p in pairs(params) do list[#list + 1] = { name, p } end
    end
  else
    error("Checkpointer: params (a ParameterDict or a table of Parameters) is required", 2)
  end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  local every, keep = opts.every or 0, opts.keep or 2
  if type(every) ~= "number" or every < 0 or every % 1 ~= 0 then
    error("Checkpointer: every must be an integer >= 0, got " .. tostring(every), 2)
  end
  if type(keep) ~= "number" or keep < 2 or keep % 1 ~= 0 then
    error("Checkpointer: keep must be an integer >= 2 (a rank killed while writing "
      .. "falls back to the one before), got " .. tostring(keep), 2)
  end
  local rank = opts.rank or (opts.kv and opts.kv.rank) or 0
  local self = setmetatable({ _prefix = prefix, _params = list, _trainer = opts.trainer,
    _kv = opts.kv, _every = every, _keep = keep, _rank = rank, _step = 0 }, Checkpointer)
  self._manifest = string.format("%s.r%d.latest", prefix, rank)
  return self
end

-- save(pos): writes the checkpoint of the current step now. pos: {epoch=, batch=,
-- extra = a table of numbers/strings/booleans} (all optional).
function Checkpointer:save(pos)
  pos = pos or {}
  local step = self._step
  local arrays = {}
  for _, e in ipairs(self._params) do arrays[e[1]] = e[2]:data() end
  local h = { step = step, epoch = pos.epoch or 0, batch = pos.batch or 0,
    extra = pos.extra or {}, rng = rng_get(), nparams = #self._params }
  arrays[HEADER] = header_array(h)
  local ok, err = pcall(nd.save, self:_path(step, "params"), arrays)
  if not ok then error("Checkpointer:save: " .. tostring(err), 2) end
  if self._trainer then
    ok, err = pcall(self._trainer.save_states, self._trainer, self:_path(step, "states"))
    if not ok then error("Checkpointer:save: " .. tostring(err), 2) end
  end
  local kv = self._kv
  if kv and kv._optimizer then
    ok, err = pcall(kv.save_optimizer_states, kv, self:_path(step, "kvstates"), true)
    if not ok then error("Checkpointer:save: " .. tostring(err), 2) end
  end
  local steps = read_manifest(self)
  if steps[#steps] ~= step then steps[#steps + 1] = step end
  local drop = {}
  while #steps > self._keep do drop[#drop + 1] = table.remove(steps, 1) end
  local lines = {}
  for i, s in ipairs(steps) do lines[i] = "step=" .. s end
  file.write_atomic("Checkpointer:save", self._manifest, table.concat(lines, "\n") .. "\n", 2)
  for _, s in ipairs(drop) do
    for _, ext in ipairs({ "params", "states", "kvstates" }) do os.remove(self:_path(s, ext)) end
  end
  return step
end

-- step(pos): counts one training step; saves when the count is a multiple of every.
function Checkpointer:step(pos)
  self._step = self._step + 1
  if self._every > 0 and self._step % self._every == 0 then
    local ok, err = pcall(self.save, self, pos)
    if not ok then error(tostring(err), 2) end
    return true
  end
  return false
end

-- The newest step this rank has complete files for, agreed over the workers.
function Checkpointer:_agree(steps)
  local mine = -1
  for i = #steps, 1, -1 do
    if exists(self:_path(steps[i], "params")) then mine = steps[i] break end
  end
  local kv = self._kv
  if kv and kv.num_workers and kv.num_workers > 1 and kv.allreduce then
    -- gather every rank's newest step (sum of one-hot rows), take the minimum
    local v = nd.zeros({ kv.num_workers }, { dtype = "float64" })
    local buf = v:tolist()
    buf[kv.rank + 1] = mine
    v = nd.array(buf, { dtype = "float64" })
    kv:allreduce(v)
    for _, s in ipairs(v:tolist()) do if s < mine then mine = s end end
    if mine >= 0 then
      local have = false
      for _, s in ipairs(steps) do if s == mine then have = true end end
      if not have then
        error(string.format("Checkpointer:restore: the ranks agree on step %d but rank %d "
          .. "no longer keeps it (keep more checkpoints)", mine, kv.rank), 3)
      end
    end
  end
  return mine
end

-- restore([step]) -> nil (no checkpoint: a fresh start) or {step, epoch, batch, extra}.
function Checkpointer:restore(step)
  local steps = read_manifest(self)
  if step == nil then step = self:_agree(steps) end
  if step < 0 then return nil end
  local path = self:_path(step, "params")
  local ok, loaded = pcall(nd.load, path)
  if not ok then error("Checkpointer:restore: " .. tostring(loaded), 2) end
  local ha = loaded[HEADER]
  if ha == nil then error("Checkpointer:restore: " .. path .. " is not a checkpoint", 2) end
  local h = header_read(ha)
  if h.nparams ~= #self._params then
    error(string.format("Checkpointer:restore: %s holds %s parameters, this model has %d",
      path, tostring(h.nparams), #self._params), 2)
  end
  for _, e in ipairs(self._params) do
    local a = loaded[e[1]]
    if a == nil then error("Checkpointer:restore: " .. path .. " has no parameter " .. e[1], 2) end
    local w = e[2]:data()
    local sa, sw = a:shape(), w:shape()
    if table.concat(sa, "x") ~= table.concat(sw, "x") then
      error(string.format("Checkpointer:restore: parameter %s has shape (%s) in %s, the "
        .. "model's is (%s)", e[1], table.concat(sa, ","), path, table.concat(sw, ",")), 2)
    end
    a:copyto(w)
  end
  if self._trainer then
    ok, loaded = pcall(self._trainer.load_states, self._trainer, self:_path(step, "states"))
    if not ok then error("Checkpointer:restore: " .. tostring(loaded), 2) end
  end
  local kv = self._kv
  if kv and kv._optimizer and exists(self:_path(step, "kvstates")) then
    ok, loaded = pcall(kv.load_optimizer_states, kv, self:_path(step, "kvstates"))
    if not ok then error("Checkpointer:restore: " .. tostring(loaded), 2) end
  end
  rng_set(h.rng)
  nd.waitall()
  self._step = step
  return { step = step, epoch = h.epoch, batch = h.batch, extra = h.extra or {} }
end

-- steps() -> the steps this rank's manifest keeps, oldest first.
function Checkpointer:steps() return read_manifest(self) end

return M
