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

-- nil when an attribute's value is one a reader can use, else what it should be. The
-- __shape__ (MXNet's tuple text: "(2, 3)", "[2,3]", "()", "(5,)"; 0 or -1: an unknown dim)
-- and __dtype__ (a dtype code or a name) of a node are read by shape and type inference
-- and by export: a malformed one would be ignored there, so it is refused where it is set
-- (the C graph's mx_graph_set_attr and the JSON reader check the same).
function M.invalid(k, v)
  if k == "__shape__" then
    local body = type(v) == "string" and (v:match("^ *%((.*)%) *$") or v:match("^ *%[(.*)%] *$"))
    local ok, nd = body ~= nil, 0
    if ok and not body:match("^ *$") then
      body = body:gsub(", *$", "")
      for d in (body .. ","):gmatch("([^,]*),") do
        local x = d:match("^ *(%-?%d+) *$")
        nd = nd + 1
        if not x or tonumber(x) < -1 or nd > 8 then ok = false end
      end
    end
    if not ok then return 'a shape (a tuple of at most 8 dims >= -1, such as "(2, 3)"; 0 or -1: unknown)' end
  elseif k == "__dtype__" then
    local code = require("mx.nd").dtype_code
    local c = type(v) == "string" and v:match("^%d+$") and tonumber(v)
    if not (c and code(c) or (type(v) == "string" and not v:match("^%d+$") and code(v))) then
      return 'a dtype (an MXNet dtype code such as "0" for float32, or a name)'
    end
  end
  return nil
end

-- error at level (the caller's line) when k = v may not be set
function M.check(who, k, v, level)
  local what = M.invalid(k, v)
  if what then
    error(string.format('%s: %s="%s" is not %s', who, k, tostring(v), what), level + 1)
  end
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
    M.check("AttrScope", M.key(k), v, 2)
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
