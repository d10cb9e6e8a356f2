-- mx.graph.symbol_params — an op's C params struct back to the Lua options that would fill it
-- (1-based axes, inclusive slice ends, dtype and enum names), for nodes of graphs read
-- from symbol JSON: node.opts is what the op table's gradient formulas and the Lua
-- wrappers take, whichever way the node was made. The inverse of mx.nd.params'
-- fill_params, which spec/symbol_spec.lua checks round trip.
local lib = require("mx.core.lib")
local Pm = require("mx.nd.params")

local ffi = lib.ffi
local tonumber = tonumber
local NONE = Pm._INDEX_NONE

local M = {}

local function axis1(v) return v >= 0 and v + 1 or v end

-- 0-based Python [begin, end) bounds -> luamx's 1-based inclusive ones (mx.nd.params's
-- begin0/end0 inverted); false: left out
local function begin1(c)
  if c == NONE then return false end
  return c >= 0 and c + 1 or c
end
local function end1(c, s)
  if c == NONE then return false end
  if s > 0 then return c > 0 and c or (c < 0 and c - 1 or 0) end
  return c >= 0 and c + 2 or c + 1
end

local function is_tuple(t) return t == "axes" or t == "shape" or t == "ints" end

-- opts(op, P): a fresh table of the params P holds (nil entries for optional params
-- left out).
function M.opts(op, P)
  local o = {}
  if P == nil then return o end
  local steps = op.pindex.step and P.step
  for _, p in ipairs(op.params) do
    local k, t = p.name, p.type
    if is_tuple(t) then
      local tp = P[k]
      if tp.n >= 0 then
        local list = {}
        for i = 0, tp.n - 1 do
          local v = tonumber(tp.v[i])
          if p.index == "begin" then v = begin1(v)
          elseif p.index == "end" then
            local s = 1
            if steps and type(steps) == "cdata" and steps.n > i and steps.v[i] ~= NONE then
              s = tonumber(steps.v[i])
            end
            v = end1(v, s)
          elseif p.index == "step" then v = v ~= NONE and v or false
          elseif t == "axes" then v = axis1(v)
          elseif v == NONE then v = false end
          list[i + 1] = v
        end
        o[k] = list
      end
    elseif p.optional and not P["has_" .. k] then -- luacheck: ignore 542
      -- left out
    elseif p.index == "begin" then o[k] = begin1(tonumber(P[k]))
    elseif p.index == "end" then o[k] = end1(tonumber(P[k]), 1)
    elseif t == "int" or t == "float" then o[k] = tonumber(P[k])
    elseif t == "axis" then o[k] = axis1(tonumber(P[k]))
    elseif t == "bool" then o[k] = P[k] == true
    elseif t == "dtype" then o[k] = Pm.dtype_name[tonumber(P[k])]
    elseif t == "enum" then o[k] = p.values[tonumber(P[k]) + 1]
    end
  end
  if op.ctx then o.ctx = nil end
  return o
end

-- copy(op, src): a new struct of op's params type holding *src (a cdata pointer or
-- struct); nil for ops without params.
function M.copy(op, src)
  if not op.ctype then return nil end
  local P = ffi.new(op.ctype)
  if src ~= nil then ffi.copy(P, src, op.size) end
  return P
end

return M
