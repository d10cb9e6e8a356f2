-- mx.graph.attr_scope — MXNet 1.x's AttrScope and its hidden attribute keys.
--
--   mx.AttrScope({ctx_group = "dev1", __init_bias__ = "0.0"}, function() ... end)
--
-- runs the function with the attributes given to every variable and op made inside
-- (nested scopes add to the outer ones; a symbol's own attr= wins), restoring the outer
-- scope when it returns or raises; returns the function's results. MXNet's hidden keys
-- (ctx_group, lr_mult, wd_mult, force_mirroring, mirror_stage, profiler_scope) are stored
-- as __key__ and read back under either spelling (Symbol:attr, list_attr, attr_dict).
local type, error, tostring, pairs, pcall, select, unpack = type, error, tostring, pairs, pcall,
  select, unpack

local M = {}

M.HIDDEN = { ctx_group = true, lr_mult = true, wd_mult = true, force_mirroring = true,
  mirror_stage = true, profiler_scope = true }

-- the stored spelling of a key
function M.key(k)
  k = tostring(k)
  if M.HIDDEN[k] then return "__" .. k .. "__" end
  return k
end

local current = {}
function M.current() return current end

function M.scope(attrs, fn, ...)
  if type(attrs) ~= "table" then error("AttrScope: attributes must be a table of strings", 2) end
  if type(fn) ~= "function" then error("AttrScope: expected a function to run, got " .. type(fn), 2) end
  local merged = {}
  for k, v in pairs(current) do merged[k] = v end
  for k, v in pairs(attrs) do
    if type(v) ~= "string" then
      error("AttrScope: attribute " .. tostring(k) .. " must be a string, got " .. type(v), 2)
    end
    merged[M.key(k)] = v
  end
  local outer = current
  current = merged
  local r = { pcall(fn, ...) }
  current = outer
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, select("#", unpack(r)))
end

-- attrs with the hidden keys also under their plain names (MXNet's listings)
function M.listed(attrs)
  local t = {}
  for k, v in pairs(attrs) do
    t[k] = v
    local plain = k:match("^__(.+)__$")
    if plain and M.HIDDEN[plain] then t[plain] = v end
  end
  return t
end

return M
