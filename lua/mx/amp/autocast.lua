-- mx.amp.autocast — what mx.amp.init installs: every op call (mx.nd's wrappers and Gluon's
-- prepared calls, through mx.core.state's `amp` hook) gets its float inputs cast as its
-- policy says (mx.amp.lists), by amp_cast ops that autograd records and hybridize traces
-- like any op: eager, recorded and hybridized graphs all see the casts, and the gradient
-- of a cast is the cast back.
--
-- A cast is made once per tensor and kept (weak-keyed on the tensor) while the tensor is
-- unchanged (mx_tensor_version: no op or data pointer wrote it) and the recording/tracing
-- scope is the same one (mx.core.state's epoch, recording flag and tracer): a weight used
-- by many calls, or by many batches of an inference loop, is converted once; a new record
-- scope, trace or optimizer step casts again (the new scope must see the cast on its tape
-- or in its graph).
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local nd = require("mx.nd")

local C = lib.C
local setmetatable, select, unpack = setmetatable, select, unpack
local version = C.mx_tensor_version
local is_tensor = nd.is_tensor

local M = {}

local LOW = { float16 = true, bfloat16 = true }
local FLOAT = { float16 = true, bfloat16 = true, float32 = true, float64 = true }
local WIDTH = { float16 = 1, bfloat16 = 2, float32 = 3, float64 = 4 }

local amp_cast = nd.amp_cast
local act = {}      -- op -> "target" | "fp32" | "widest" | "safe" | "cond"
local cond = {}     -- op -> { param, set of values }
local takes = {}    -- op -> set of dtype names its kernels take
local target = nil
local cache = setmetatable({}, { __mode = "k" })
local sigs, nsigs = {}, 0 -- a setting's text -> its signature

local function scope_ok(e)
  return e.epoch == S.epoch and e.rec == S.recording and e.trace == S.trace
end

local function cast(x, dt)
  local xd = x:dtype()
  if xd == dt or not FLOAT[xd] then return x end
  local e = cache[x]
  local v = version(x.h)
  if e and e.ver == v and scope_ok(e) then
    local y = e[dt]
    if y then return y end
  else
    e = { ver = v, epoch = S.epoch, rec = S.recording, trace = S.trace }
    cache[x] = e
  end
  local y = amp_cast(x, { dtype = dt })
  e[dt] = y
  return y
end
M.cast = cast

-- the dtype op's float inputs go to, given the dtypes present (nil: leave them)
local function wanted(op, opts, widest)
  local a = act[op]
  if a == "cond" then
    local c = cond[op]
    local v = opts and opts[c[1]]
    a = (v ~= nil and c[2][v]) and "fp32" or "safe"
  end
  -- a target op whose kernels do not take the target dtype (float16 convolutions on the
  -- CPU) runs in float32
  if a == "target" then return takes[op][target] and target or "float32" end
  if a == "fp32" then return "float32" end
  if a == "widest" then return widest end
  return nil
end

local function resolve(op, opts, n, get)
  local widest, low = nil, false
  for i = 1, n do
    local x = get(i)
    if is_tensor(x) then
      local d = x:dtype()
      if FLOAT[d] then
        if not widest or WIDTH[d] > WIDTH[widest] then widest = d end
        if LOW[d] then low = true end
      end
    end
  end
  if not widest then return nil end
  local dt = wanted(op, opts, widest)
  -- a safe op whose kernels do not take the low dtype runs in float32
  if dt == nil and low then
    for i = 1, n do
      local x = get(i)
      if is_tensor(x) and LOW[x:dtype()] and not takes[op][x:dtype()] then return "float32" end
    end
  end
  return dt
end

local function hook(op, opts, ...)
  if not act[op] then return ... end
  local n = select("#", ...)
  local args = { ... }
  local dt = resolve(op, opts, n, function(i) return args[i] end)
  if not dt then return ... end
  for i = 1, n do
    local x = args[i]
    if is_tensor(x) then args[i] = cast(x, dt) end
  end
  return unpack(args, 1, n)
end

local function hook_list(op, opts, list, n)
  if not act[op] then return end
  local dt = resolve(op, opts, n, function(i) return list[i] end)
  if not dt then return end
  for i = 1, n do list[i] = cast(list[i], dt) end -- (make_general checked they are tensors)
end

-- install(target_dtype, policy): policy[op] = "target"/"fp32"/"widest"/"safe"/{param, values}
function M.install(target_dtype, policy)
  target = target_dtype
  act, cond, takes = {}, {}, {}
  cache = setmetatable({}, { __mode = "k" })
  for _, op in ipairs(lib.ops) do
    local p = policy[op.name]
    if p then
      if type(p) == "table" then
        local set = {}
        for _, v in ipairs(p[2]) do set[v] = true end
        act[op], cond[op] = "cond", { p[1], set }
      else
        act[op] = p
      end
      local t = {}
      for _, code in ipairs(op.dtype_list) do t[nd.dtype_name[code]] = true end
      takes[op] = t
    end
  end
  S.amp, S.amp_list = hook, hook_list
  -- the signature names the setting (hybridize's cache key): an init with the same target
  -- and policy as an earlier one finds the graphs traced under it again
  local parts = { target_dtype }
  for _, op in ipairs(lib.ops) do
    local p = policy[op.name]
    if type(p) == "table" then p = p[1] .. "=" .. table.concat(p[2], "|") end
    if p then parts[#parts + 1] = op.name .. ":" .. p end
  end
  local text = table.concat(parts, ",")
  if not sigs[text] then
    nsigs = nsigs + 1
    sigs[text] = "amp" .. nsigs .. ":" .. target_dtype
  end
  S.amp_sig = sigs[text]
end

function M.uninstall()
  S.amp, S.amp_list, S.amp_sig = nil, nil, nil
  cache = setmetatable({}, { __mode = "k" })
end

return M
