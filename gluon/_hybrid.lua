-- mx.gluon._hybrid — hybridize: a HybridBlock runs as a cached op (mx.graph.cached_op):
-- its forward traced into one graph per input signature and replayed. This file is
-- what the block adds: the parameters the trace may read (collect_params, by their
-- data arrays) and deferred initialisation before a trace. docs/hybridize.md is the
-- user's page.
local CachedOp = require("mx.graph.cached_op")
local autograd = require("mx.autograd")

local getmetatable, tostring, ipairs, pcall, error, unpack, rawget =
  getmetatable, tostring, ipairs, pcall, error, unpack, rawget

local H = {}

local function params_of(block)
  return function()
    local d = block:collect_params()
    local list = {}
    for i, name in ipairs(d:keys()) do list[i] = { name, d:get(name) } end
    return list
  end
end

-- Parameters still waiting for their shape are initialised by one plain forward
-- first: their initialisers' ops must not become part of the graph.
local function deferred_init(block)
  return function(args)
    local d = block:collect_params()
    for _, name in ipairs(d:keys()) do
      if d:get(name)._data == nil then
        local ok, err = pcall(function()
          autograd.pause(function() block:forward(unpack(args, 1, args.n)) end)
        end)
        if not ok then error(err, 0) end
        return
      end
    end
  end
end

-- A new cached op for block (hybridize makes one; changing it drops the old graphs).
function H.new(block, opts)
  return CachedOp.new(function(...) return block:forward(...) end, {
    name = tostring(getmetatable(block).__name), who = "hybridize",
    static_alloc = opts.static_alloc == true, params = params_of(block),
    prepare = deferred_init(block) })
end

-- The structure a block's graphs were traced from: every descendant block (by identity,
-- with its children's names) and every parameter (identity, shape, dtype, grad_req, and
-- the identity of its data arrays). MXNet clears its CachedOp on register_child; here any
-- change of these drops the graphs: a child registered, replaced or removed (nested ones
-- too), parameters re-initialised, cast, moved, or their grad_req changed.
local function structure(block, out, seen)
  if seen[block] then return end
  seen[block] = true
  out[#out + 1] = tostring(rawget(block, "_reg"))
  for _, n in ipairs(rawget(block, "_param_names") or {}) do
    local p = rawget(block, "_params")[n]
    local d = rawget(p, "_data") or (rawget(p, "_copies") or {})[1]
    out[#out + 1] = n .. "=" .. tostring(p) .. ":" .. tostring(p.shape and table.concat(p.shape, "x"))
      .. ":" .. tostring(p.dtype) .. ":" .. tostring(p.grad_req) .. ":" .. tostring(d and d.h)
  end
  local names = rawget(block, "_child_names") or {}
  local ch = rawget(block, "_children")
  for _, n in ipairs(names) do
    out[#out + 1] = "[" .. n
    structure(ch[n], out, seen)
    out[#out + 1] = "]"
  end
end
local function signature_of(block)
  local out = {}
  structure(block, out, {})
  return table.concat(out, ";")
end

-- The call of an active HybridBlock (block.lua's block_call tail-calls it). The structure
-- is checked only when the epoch moved since this block's last check (one comparison a
-- call otherwise).
local call = CachedOp.call
local epoch = require("mx.gluon.parameter")._epoch
function H.call(self, ...)
  local op = rawget(self, "_cached_op")
  if rawget(self, "_epoch") ~= epoch.n then
    local sig = signature_of(self)
    if sig ~= rawget(self, "_structure") then
      if rawget(self, "_structure") ~= nil then op:clear() end
      rawset(self, "_structure", sig)
    end
    rawset(self, "_epoch", epoch.n)
  end
  return call(op, ...)
end

-- The block's cached op (nil when it is not hybridized): its cache (signature ->
-- variants) and last_variant() (export, tests).
function H.cached_op(block) return rawget(block, "_cached_op") end

-- The variant the last call ran (export, tests).
function H.last_variant(block)
  local op = rawget(block, "_cached_op")
  return op and op:last_variant()
end

return H
