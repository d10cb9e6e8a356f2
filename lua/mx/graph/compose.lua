-- Symbol composition, MXNet 1.x's `net2(fc3_data=net1)`: calling a symbol with symbols
-- puts them in place of its variables, positionally (list_arguments order) or by name,
-- in a new symbol that shares every node the substitution does not reach (the nodes
-- are never modified: lua/mx/symbol.lua's header).
--
--   local net = net2(net1)                    -- net2's first argument becomes net1
--   local net = net2 { fc3_data = net1 }      -- by variable name
--   local net = net2 { fc3_data = net1, name = "x" }  -- (name: the output node renamed)
local type, error, tostring, pairs, ipairs, select, setmetatable, getmetatable =
  type, error, tostring, pairs, ipairs, select, setmetatable, getmetatable

local M = {}

-- compose(sym, level, ...) -> a new Symbol (sym's metatable)
function M.compose(sym, level, ...)
  local mt = getmetatable(sym)
  local function is_symbol(v) return getmetatable(v) == mt end
  local n = select("#", ...)
  local args = { ... }
  local named, rename
  if n > 0 and type(args[n]) == "table" and not is_symbol(args[n]) then
    named, n = args[n], n - 1
  end
  local inputs = sym:list_inputs()
  local known = {}
  for _, v in ipairs(inputs) do known[v] = true end
  local subst, count = {}, 0
  local function put(name, v, what)
    if not is_symbol(v) then
      error("Symbol: " .. what .. " must be a Symbol, got " .. type(v), level + 2)
    end
    if #v.outputs ~= 1 then
      error("Symbol: " .. what .. " has " .. #v.outputs .. " outputs; compose with one output "
        .. "(s[i])", level + 2)
    end
    if subst[name] ~= nil then error("Symbol: input '" .. name .. "' given twice", level + 2) end
    subst[name] = v.outputs[1]
    count = count + 1
  end
  local argnames = sym:list_arguments()
  if n > #argnames then
    error(string.format("Symbol: %d positional symbols for %d arguments (%s)", n, #argnames,
      table.concat(argnames, ", ")), level + 1)
  end
  for i = 1, n do put(argnames[i], args[i], "argument " .. i) end
  for k, v in pairs(named or {}) do
    if k == "name" and not known.name then
      if type(v) ~= "string" or v == "" then
        error("Symbol: name must be a non-empty string, got " .. tostring(v), level + 1)
      end
      rename = v
    elseif not known[k] then
      error(string.format("Symbol: '%s' is not an input of the symbol (inputs: %s)",
        tostring(k), table.concat(inputs, ", ")), level + 1)
    else
      put(k, v, "input '" .. k .. "'")
    end
  end
  -- rebuild what the substitution reaches
  local memo = {}
  local map_entry
  local function map_node(node)
    local r = memo[node]
    if r ~= nil then return r end
    if node.op == nil then
      r = false -- variables are replaced entry-wise (map_entry)
    else
      local ins, changed = {}, false
      for i, e in ipairs(node.inputs) do
        ins[i] = map_entry(e)
        if ins[i] ~= e then changed = true end
      end
      if changed then
        r = {}
        for k, v in pairs(node) do r[k] = v end
        r.inputs = ins
      else
        r = node
      end
    end
    memo[node] = r
    return r
  end
  map_entry = function(e)
    local node = e[1]
    if node.op == nil then return subst[node.name] or e end
    local m = map_node(node)
    if m == node then return e end
    return { m, e[2] }
  end
  local outs = {}
  for i, e in ipairs(sym.outputs) do outs[i] = map_entry(e) end
  if rename then
    if #outs ~= 1 or outs[1][1].op == nil then
      error("Symbol: name= renames the output node of a one-output symbol", level + 1)
    end
    local c = {}
    for k, v in pairs(outs[1][1]) do c[k] = v end
    c.name = rename
    outs[1] = { c, outs[1][2] }
  end
  return setmetatable({ outputs = outs }, mt), count
end

-- children(sym) -> list of entries: the inputs of every output node (MXNet's
-- get_children, groups included), or nil when they have none.
function M.children(sym)
  local outs = {}
  for _, o in ipairs(sym.outputs) do
    for _, e in ipairs(o[1].inputs) do outs[#outs + 1] = e end
  end
  if #outs == 0 then return nil end
  return outs
end

return M
